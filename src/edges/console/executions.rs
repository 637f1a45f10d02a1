//! `GET /` (executions, newest first, filtered by job and state), `GET /executions/{id}` (an
//! execution's figures, its report's lists, the diff searched and paginated, its approval) and
//! `GET /executions/{id}/diff.csv` (the report's attachment, byte for byte). Figures are the
//! tallies (`execution::load`, what `status --json` prints); lists and CSV are the report model's.

use std::collections::BTreeSet;

use axum::extract::{Path, Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::error::PageError;
use super::session::Session;
use super::templates::{self, executions as page};
use super::{approve, Console};
use crate::services::report::{self, render, ExecutionReport, ReportError};
use crate::tables::execution::{self, Execution, Mode, State as Run};

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct ListQuery {
    pub job: Option<String>,
    pub state: Option<String>,
}

/// `GET /`.
pub(super) async fn list(
    State(console): State<Console>,
    session: Session,
    Query(query): Query<ListQuery>,
) -> Result<Response, PageError> {
    let all: Vec<Execution> = execution::list(&console.pool)
        .await?
        .into_iter()
        .filter(|e| !report::is_partition(&e.key))
        .collect();
    let jobs: BTreeSet<&str> = all.iter().map(|e| e.job.as_str()).collect();
    let job = query.job.as_deref().filter(|j| !j.is_empty());
    let state = query.state.as_deref().filter(|s| !s.is_empty());
    let state: Option<Run> = match state {
        Some(s) => Some(
            Run::try_from(s)
                .map_err(|e| PageError::BadRequest(crate::shared::text::inert(&e.to_string())))?,
        ),
        None => None,
    };
    let shown: Vec<&Execution> = all
        .iter()
        .filter(|e| job.is_none_or(|j| e.job == j))
        .filter(|e| state.is_none_or(|s| e.state == s))
        .collect();
    let filter = page::Filter {
        jobs: jobs.into_iter().collect(),
        job,
        state,
    };
    let markup = page::list(&session, console.config.timezone, &shown, &filter);
    Ok(templates::html(markup).into_response())
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct DetailQuery {
    /// Only diff rows whose `pedido_id` contains this.
    pub q: Option<String>,
    /// The diff's page, from 1.
    pub page: Option<usize>,
}

/// `GET /executions/{id}`.
pub(super) async fn detail(
    State(console): State<Console>,
    session: Session,
    Path(id): Path<String>,
    Query(query): Query<DetailQuery>,
) -> Result<Response, PageError> {
    let execution = execution::load(&console.pool, &id)
        .await?
        .ok_or_else(|| no_execution(&id))?;
    let report = match execution.mode {
        Mode::Live => None,
        _ => Some(load_report(&console, &id).await?),
    };
    let standing = approve::standing(&console, &execution).await?;
    let search = query.q.as_deref().map(str::trim).filter(|q| !q.is_empty());
    let markup = page::detail(page::Detail {
        session: &session,
        tz: console.config.timezone,
        execution: &execution,
        report: report.as_ref(),
        standing: &standing,
        search,
        page: query.page.unwrap_or(1).max(1),
    });
    Ok(templates::html(markup).into_response())
}

/// `GET /executions/{id}/diff.csv`: the report's CSV attachment.
pub(super) async fn diff_csv(
    State(console): State<Console>,
    _session: Session,
    Path(id): Path<String>,
) -> Result<Response, PageError> {
    let report = load_report(&console, &id).await?;
    let name: String = render::csv_name(&report)
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
        .collect();
    Ok((
        [
            (header::CONTENT_TYPE, "text/csv; charset=utf-8".to_string()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{name}\""),
            ),
        ],
        render::csv(&report),
    )
        .into_response())
}

async fn load_report(console: &Console, key: &str) -> Result<ExecutionReport, PageError> {
    match ExecutionReport::load(&console.pool, key).await {
        Ok(report) => Ok(report),
        Err(ReportError::Database(e)) => Err(e.into()),
        Err(ReportError::NoExecution(_)) => Err(no_execution(key)),
        Err(other) => Err(PageError::NotFound(crate::shared::text::inert(
            &other.to_string(),
        ))),
    }
}

fn no_execution(key: &str) -> PageError {
    PageError::NotFound(format!(
        "Nenhuma execução {}.",
        crate::shared::text::inert(key)
    ))
}
