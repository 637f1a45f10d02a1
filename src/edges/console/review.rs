//! `GET /review` (the `incerto` queue with its reasons, filtered by type, execution and age) and
//! `POST /review/resolve` (form `csrf_token`, `key`, `outcome` = `sent` | `not-sent`, `note`),
//! which records the decision as the operator account of the session, through
//! `console_resolver_incerto` (the same statement as `review resolve`, plus the account check).

use axum::extract::{Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use serde::Deserialize;

use super::error::PageError;
use super::session::Session;
use super::templates::{self, review as page};
use super::Console;
use crate::shared::text::inert;
use crate::tables::ledger::{self, Resolution, ReviewError, ReviewFilter};

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct ListQuery {
    #[serde(rename = "type")]
    pub effect_type: Option<String>,
    pub execution: Option<String>,
    /// `2h`, `30m`: only effects older than this.
    pub older_than: Option<String>,
    /// The decision just recorded (its `efeito_revisao.id`, after a POST): the banner is read
    /// back from that record, and only for the account that made it — never from the address.
    pub decisao: Option<String>,
}

/// `GET /review`.
pub(super) async fn list(
    State(console): State<Console>,
    session: Session,
    Query(query): Query<ListQuery>,
) -> Result<Response, PageError> {
    let nonempty = |v: &Option<String>| v.clone().filter(|s| !s.trim().is_empty());
    let older_than = match nonempty(&query.older_than) {
        Some(text) => Some(humantime::parse_duration(text.trim()).map_err(|_| {
            PageError::BadRequest("Idade inválida: use por exemplo 30m, 2h ou 1d.".into())
        })?),
        None => None,
    };
    if older_than.is_some_and(|d| d.as_secs() > 100 * 31_557_600) {
        return Err(PageError::BadRequest(
            "Idade fora do alcance: no máximo 100 anos (por exemplo 30m, 2h ou 1d).".into(),
        ));
    }
    let filter = ReviewFilter {
        effect_type: nonempty(&query.effect_type),
        execution: nonempty(&query.execution),
        older_than,
    };
    let items = ledger::review_list_filtered(&console.pool, &filter).await?;
    let recorded = match query.decisao.as_deref().and_then(|d| d.parse::<i64>().ok()) {
        Some(id) => ledger::decision_of(&console.pool, id, &who(&session)).await?,
        None => None,
    };
    let done = recorded.as_ref().map(|(key, r)| (key.as_str(), *r));
    let markup = page::list(&page::Review {
        session: &session,
        tz: console.config.timezone,
        items: &items,
        filter: &filter,
        older_than: nonempty(&query.older_than),
        done,
    });
    Ok(templates::html(markup).into_response())
}

/// How a decision of the session's account is recorded (`resolvido_por`).
fn who(session: &Session) -> String {
    format!("console:{}", session.email)
}

fn outcome(word: &str) -> Option<Resolution> {
    match word {
        "sent" => Some(Resolution::Sent),
        "not-sent" => Some(Resolution::NotSent),
        _ => None,
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct ResolveForm {
    csrf_token: Option<String>,
    key: String,
    outcome: String,
    note: Option<String>,
}

/// `POST /review/resolve`: 401 without a session, 403 without the CSRF token or the operator
/// role, 400 for an unknown outcome or a refused note, 404/409 for a key that is not (or no
/// longer) `incerto`; else 303 back to the queue.
pub(super) async fn resolve(
    State(console): State<Console>,
    session: Session,
    Form(form): Form<ResolveForm>,
) -> Result<Response, PageError> {
    super::csrf::check(&session, form.csrf_token.as_deref())?;
    if !session.role.may_resolve() {
        return Err(PageError::Forbidden(
            "só uma conta de operação (operator) resolve itens da revisão",
        ));
    }
    let resolution = outcome(&form.outcome)
        .ok_or_else(|| PageError::BadRequest("outcome deve ser sent ou not-sent".into()))?;
    let note = form.note.filter(|n| !n.trim().is_empty());
    if let Some(Err(e)) = note.as_deref().map(crate::shared::identity::check_note) {
        return Err(PageError::BadRequest(format!("Nota recusada: {e}")));
    }
    let result = ledger::resolve_in_console(
        &console.pool,
        &session.token_digest,
        console.config.idle_timeout,
        &form.key,
        resolution,
        note.as_deref(),
    )
    .await;
    match result {
        Ok(()) => {
            let id = ledger::last_decision_on(&console.pool, &form.key, &who(&session)).await?;
            let to = id.map_or("/review".to_string(), |id| format!("/review?decisao={id}"));
            Ok(Redirect::to(&to).into_response())
        }
        Err(ReviewError::Database(e)) if crate::tables::db::is_permission_denied(&e) => Err(
            PageError::Forbidden("o banco recusou: a sessão expirou ou a conta não é de operação"),
        ),
        Err(ReviewError::Database(e)) => Err(e.into()),
        Err(err @ ReviewError::NotFound(_)) => Err(PageError::NotFound(inert(&err.to_string()))),
        Err(err) => Err(PageError::Conflict(inert(&err.to_string()))),
    }
}
