//! `GET /audit`: logins, approvals, resolutions and account changes — who, what, when — newest
//! first. Every statement on `console_auditoria` that reads it is here; it is written only by the
//! database's functions and triggers (see the migration).

use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use sqlx::PgPool;

use super::error::PageError;
use super::session::Session;
use super::templates::{self, review as page};
use super::views::AuditRow;
use super::Console;

/// How many rows a page of the audit shows.
pub(super) const AUDIT_PAGE: i64 = 200;

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct AuditQuery {
    /// Rows older than this id (the next page).
    pub before: Option<i64>,
}

/// `GET /audit`.
pub(super) async fn list(
    State(console): State<Console>,
    session: Session,
    Query(query): Query<AuditQuery>,
) -> Result<Response, PageError> {
    let rows = rows(&console.pool, query.before).await?;
    let markup = page::audit(&session, console.config.timezone, &rows, AUDIT_PAGE);
    Ok(templates::html(markup).into_response())
}

/// A page of the audit trail, newest first, before the row `before`.
async fn rows(pool: &PgPool, before: Option<i64>) -> Result<Vec<AuditRow>, sqlx::Error> {
    sqlx::query_as(
        r#"
        select id, em, quem, acao, alvo, detalhe, endereco from console_auditoria
        where $1::bigint is null or id < $1
        order by id desc limit $2
        "#,
    )
    .bind(before)
    .bind(AUDIT_PAGE)
    .fetch_all(pool)
    .await
}
