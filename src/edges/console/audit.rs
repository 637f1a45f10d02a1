//! `GET /audit`: logins, approvals, resolutions and account changes — who, what, when — newest
//! first. Every statement on `console_auditoria` that reads it is here; it is written only by the
//! database's functions and triggers (see the migration).

use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use sqlx::PgPool;

use super::error::PageError;
use super::session::Session;
use super::templates::{self, audit as page};
use super::views::{Action, AuditRow};
use super::Console;

/// How many rows a page of the audit shows.
pub(super) const AUDIT_PAGE: i64 = 200;

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct AuditQuery {
    /// Rows older than this id (the next page).
    pub before: Option<i64>,
    /// Only rows whose `quem` contains this (case-insensitive).
    pub quem: Option<String>,
    /// Only rows of this action (`login`, `aprovacao`, `resolucao`, …).
    pub acao: Option<String>,
}

/// `GET /audit`.
pub(super) async fn list(
    State(console): State<Console>,
    session: Session,
    Query(query): Query<AuditQuery>,
) -> Result<Response, PageError> {
    let who = query
        .quem
        .as_deref()
        .map(str::trim)
        .filter(|q| !q.is_empty());
    let what = match query.acao.as_deref().filter(|a| !a.is_empty()) {
        None => None,
        Some(a) => Some(Action::try_from(a).map_err(|_| {
            PageError::BadRequest("Ação desconhecida no filtro da auditoria.".into())
        })?),
    };
    let rows = rows(&console.pool, query.before, who, what).await?;
    let filter = page::AuditFilter { who, what };
    let markup = page::audit(
        &session,
        console.config.timezone,
        &rows,
        AUDIT_PAGE,
        &filter,
    );
    Ok(templates::html(markup).into_response())
}

/// A page of the audit trail, newest first, before the row `before`, of rows whose `quem`
/// contains `who` and whose action is `what`.
async fn rows(
    pool: &PgPool,
    before: Option<i64>,
    who: Option<&str>,
    what: Option<Action>,
) -> Result<Vec<AuditRow>, sqlx::Error> {
    sqlx::query_as(
        r#"
        select id, em, quem, acao, alvo, detalhe, endereco from console_auditoria
        where ($1::bigint is null or id < $1)
          and ($3::text is null or strpos(lower(quem), lower($3)) > 0)
          and ($4::text is null or acao = $4)
        order by id desc limit $2
        "#,
    )
    .bind(before)
    .bind(AUDIT_PAGE)
    .bind(who)
    .bind(what)
    .fetch_all(pool)
    .await
}
