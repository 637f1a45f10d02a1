//! The blue-green rebuild of `comissao` in the console: `GET /reconstrucao` (where the rebuild
//! stands: its progress, the comparison of the two tables by count and checksum, the orders that
//! differ), the diff finance reads (`/reconstrucao/diff.csv`, `.xlsx`), and
//! `POST /reconstrucao/aprovar` (form `csrf_token`, `impressao`, `note`): finance approves the
//! comparison it was shown, bound to its fingerprint, as `replay-ledger rebuild --approve` does.
//! The swap itself is `replay-ledger rebuild` (or its scheduled job), which checks the
//! fingerprint again under its lock of `comissao`.

use axum::extract::State;
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use serde::Deserialize;

use super::error::PageError;
use super::session::Session;
use super::views::RebuildView;
use super::Console;
use replay_ledger_core::services::rebuild::{self, Approver, RebuildError, Stage};
use replay_ledger_core::tables::commission::rebuild::swap as rename;

/// How many differing orders the page lists (the downloads list them all).
const LISTED: i64 = 50;

/// `GET /reconstrucao`.
pub(super) async fn page(
    State(console): State<Console>,
    session: Session,
) -> Result<Response, PageError> {
    let pool = &console.pool;
    let rebuild = rebuild::latest(pool).await?;
    let (mut differing, mut approved, mut beyond_values) = (Vec::new(), None, (0, 0));
    if let Some(r) = rebuild.as_ref().filter(|r| r.stage == Stage::Compared) {
        differing = rebuild::diff(pool, LISTED).await?;
        let mut conn = pool.acquire().await?;
        beyond_values = rebuild::compare_effects_beyond_values(&mut conn).await?;
        if let Some(fingerprint) = &r.fingerprint {
            approved = rename::approval_of(&mut conn, r, fingerprint).await?;
        }
    }
    let view = RebuildView {
        rebuild,
        differing,
        approved,
        beyond_values,
    };
    let markup = super::templates::rebuild::page(&session, console.config.timezone, &view);
    Ok(super::templates::html(markup).into_response())
}

/// `GET /reconstrucao/diff.csv`: every differing order, with both versions and why it differs.
pub(super) async fn diff_csv(
    State(console): State<Console>,
    _session: Session,
) -> Result<Response, PageError> {
    let rows = rebuild::diff(&console.pool, i64::MAX).await?;
    Ok(super::download::attachment(
        "text/csv; charset=utf-8",
        "reconstrucao-comissao-diff.csv",
        crate::services::report::csv::render_rebuild(&rows),
    ))
}

/// `GET /reconstrucao/diff.xlsx`: the same rows as a spreadsheet.
pub(super) async fn diff_xlsx(
    State(console): State<Console>,
    _session: Session,
) -> Result<Response, PageError> {
    let rows = rebuild::diff(&console.pool, i64::MAX).await?;
    super::download::spreadsheet(
        "reconstrucao-comissao-diff.xlsx",
        crate::services::report::xlsx::render_rebuild(&rows),
    )
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct ApproveForm {
    csrf_token: Option<String>,
    /// The fingerprint of the comparison the page showed.
    impressao: Option<String>,
    note: Option<String>,
}

/// `POST /reconstrucao/aprovar`: 401 without a session, 403 without the CSRF token or the
/// finance role, 409 when the comparison shown is no longer the rebuild's (nothing is recorded);
/// else the approval is recorded as the account and the browser goes back to the page (303).
pub(super) async fn approve(
    State(console): State<Console>,
    session: Session,
    Form(form): Form<ApproveForm>,
) -> Result<Response, PageError> {
    super::csrf::check(&session, form.csrf_token.as_deref())?;
    if !session.role.may_approve() {
        return Err(PageError::Forbidden(
            "só uma conta de finanças (finance) aprova a troca da tabela",
        ));
    }
    let shown = form
        .impressao
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| {
            PageError::BadRequest(
                "O formulário não traz a impressão digital da comparação: abra a página de novo."
                    .into(),
            )
        })?;
    let note = form.note.as_deref().filter(|n| !n.trim().is_empty());
    let by = Approver::Console(session.for_database(console.config.idle_timeout));
    match rebuild::approve(&console.pool, by, shown, note).await {
        Ok(_) => Ok(Redirect::to("/reconstrucao").into_response()),
        Err(RebuildError::Stale { now, .. }) => Err(PageError::Conflict(format!(
            "A comparação mudou desde que você a abriu (agora é {}): nada foi aprovado. Abra a página de novo e revise.",
            replay_ledger_core::shared::text::inert(&now)
        ))),
        Err(RebuildError::Note(e)) => Err(PageError::BadRequest(format!("Nota recusada: {e}"))),
        Err(RebuildError::Database(e)) if replay_ledger_core::tables::db::is_permission_denied(&e) => Err(
            PageError::Forbidden("o banco recusou: a sessão expirou ou a conta não é de finanças"),
        ),
        Err(RebuildError::Database(e)) => Err(e.into()),
        Err(refused) => Err(PageError::Conflict(replay_ledger_core::shared::text::inert(
            &refused.to_string(),
        ))),
    }
}
