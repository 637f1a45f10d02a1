//! `GET /review` (the `incerto` queue with its reasons, orders and amounts, filtered by type,
//! execution and age, and the keys queued for a resend until the sweep sends them),
//! `GET /review/confirm` (the keys chosen, with their attempts and earlier decisions, before one
//! decision for all of them: every decision of the queue goes through it) and
//! `POST /review/resolve` (form `csrf_token`, `key` — once or more —, `outcome` = `sent` |
//! `not-sent`, `note`), which records the decision as the operator account of the session,
//! through `console_resolver_incerto` (the same statement as `review resolve`, plus the account
//! check), all keys or none.

use axum::body::Bytes;
use axum::extract::{Query, RawQuery, State};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::error::PageError;
use super::session::Session;
use super::templates::{self, review as page};
use super::Console;
use replay_ledger_core::shared::text::inert;
use replay_ledger_core::tables::ledger::{self, Resolution, ReviewError, ReviewFilter};

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
    let done = match query.decisao.as_deref().and_then(|d| d.parse::<i64>().ok()) {
        Some(id) => ledger::decision_of(&console.pool, id, &who(&session)).await?,
        None => Vec::new(),
    };
    let markup = page::list(&page::Review {
        session: &session,
        tz: console.config.timezone,
        items: &items,
        filter: &filter,
        older_than: nonempty(&query.older_than),
        done: &done,
        running: replay_ledger_core::tables::execution::replays_running(&console.pool).await? > 0,
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

/// The most keys one decision takes.
const MAX_KEYS: usize = 500;

/// A decision's fields: `key` may come more than once (one decision for several keys).
#[derive(Debug, Default)]
pub(super) struct Decision {
    csrf_token: Option<String>,
    keys: Vec<String>,
    outcome: String,
    note: Option<String>,
}

impl Decision {
    /// From a form body or a query string; a repeated key counts once.
    fn parse(encoded: &[u8]) -> Decision {
        let mut d = Decision::default();
        for (name, value) in url::form_urlencoded::parse(encoded) {
            match name.as_ref() {
                "csrf_token" => d.csrf_token = Some(value.into_owned()),
                "key" if !d.keys.iter().any(|k| *k == value) => d.keys.push(value.into_owned()),
                "outcome" => d.outcome = value.into_owned(),
                "note" => d.note = Some(value.into_owned()),
                _ => {}
            }
        }
        d
    }

    fn resolution(&self) -> Result<Resolution, PageError> {
        // PostgreSQL text holds no NUL: no key has one.
        if self.keys.iter().any(|k| k.contains('\0')) {
            return Err(PageError::BadRequest("Chave inválida.".into()));
        }
        if self.keys.is_empty() || self.keys.len() > MAX_KEYS {
            return Err(PageError::BadRequest(format!(
                "Escolha de 1 a {MAX_KEYS} chaves."
            )));
        }
        outcome(&self.outcome)
            .ok_or_else(|| PageError::BadRequest("outcome deve ser sent ou not-sent".into()))
    }
}

/// `GET /review/confirm?key=…&key=…&outcome=…`: every decision of the review page leads here —
/// the keys chosen, with their orders and amounts, every attempt (a resend that failed with
/// HTTP 500) and every earlier decision on them, and the form that posts the decision to
/// `POST /review/resolve`. Changes nothing.
pub(super) async fn confirm(
    State(console): State<Console>,
    session: Session,
    RawQuery(query): RawQuery,
) -> Result<Response, PageError> {
    if !session.role.may_resolve() {
        return Err(PageError::Forbidden(
            "só uma conta de operação (operator) resolve itens da revisão",
        ));
    }
    let decision = Decision::parse(query.unwrap_or_default().as_bytes());
    let resolution = decision.resolution()?;
    let items: Vec<_> = ledger::review_list(&console.pool)
        .await?
        .into_iter()
        .filter(|i| i.status != ledger::QUEUED && decision.keys.contains(&i.key))
        .collect();
    if items.len() != decision.keys.len() {
        return Err(PageError::Conflict(
            "Alguma chave escolhida não está mais na fila; volte à revisão.".into(),
        ));
    }
    let attempts = ledger::attempt_histories(&console.pool, &decision.keys).await?;
    let decisions = ledger::decisions_on(&console.pool, &decision.keys).await?;
    let markup = page::confirm(&page::Confirm {
        session: &session,
        tz: console.config.timezone,
        items: &items,
        outcome: resolution,
        attempts: &attempts,
        decisions: &decisions,
    });
    Ok(templates::html(markup).into_response())
}

/// `POST /review/resolve`: 401 without a session, 403 without the CSRF token or the operator
/// role, 400 for an unknown outcome, no key or a refused note, 404/409 for a key that is not (or
/// no longer) `incerto` — then no key of the decision is resolved; else 303 back to the queue.
pub(super) async fn resolve(
    State(console): State<Console>,
    session: Session,
    body: Bytes,
) -> Result<Response, PageError> {
    let form = Decision::parse(&body);
    super::csrf::check(&session, form.csrf_token.as_deref())?;
    if !session.role.may_resolve() {
        return Err(PageError::Forbidden(
            "só uma conta de operação (operator) resolve itens da revisão",
        ));
    }
    let resolution = form.resolution()?;
    let note = form.note.filter(|n| !n.trim().is_empty());
    if let Some(Err(e)) = note
        .as_deref()
        .map(replay_ledger_core::shared::identity::check_note)
    {
        return Err(PageError::BadRequest(format!("Nota recusada: {e}")));
    }
    let result = ledger::resolve_in_console(
        &console.pool,
        &session.token_digest,
        console.config.idle_timeout,
        &form.keys,
        resolution,
        note.as_deref(),
    )
    .await;
    match result {
        Ok(()) => {
            let id = ledger::last_decision_on(
                &console.pool,
                form.keys.last().map_or("", String::as_str),
                &who(&session),
            )
            .await?;
            let to = id.map_or("/review".to_string(), |id| format!("/review?decisao={id}"));
            Ok(Redirect::to(&to).into_response())
        }
        Err(ReviewError::Database(e))
            if replay_ledger_core::tables::db::is_permission_denied(&e) =>
        {
            Err(PageError::Forbidden(
                "o banco recusou: a sessão expirou ou a conta não é de operação",
            ))
        }
        Err(ReviewError::Database(e)) => Err(e.into()),
        Err(err @ ReviewError::NotFound(_)) => Err(PageError::NotFound(inert(&err.to_string()))),
        Err(err) => Err(PageError::Conflict(inert(&err.to_string()))),
    }
}
