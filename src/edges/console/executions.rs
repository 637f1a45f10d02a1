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
    /// An earlier pass of the execution.
    pub passagem: Option<i32>,
}

/// `GET /executions/{id}`: the current pass (its figures and its report's lists from one read of
/// the execution's row and tallies), or an earlier pass (`?passagem=N`) with its figures.
pub(super) async fn detail(
    State(console): State<Console>,
    session: Session,
    Path(id): Path<String>,
    Query(query): Query<DetailQuery>,
) -> Result<Response, PageError> {
    let execution = execution::load(&console.pool, &id)
        .await?
        .ok_or_else(|| no_execution(&id))?;
    let passes = execution::passes(&console.pool, &id).await?;
    let tz = console.config.timezone;
    if let Some(n) = query.passagem.filter(|n| *n != execution.pass) {
        let pass = passes
            .iter()
            .find(|p| p.pass == n)
            .ok_or_else(|| PageError::NotFound(format!("Nenhuma passagem {n} desta execução.")))?;
        let markup = page::earlier_pass(&session, tz, &execution, pass, &passes);
        return Ok(templates::html(markup).into_response());
    }
    let report = match execution.mode {
        Mode::Live => None,
        _ => Some(report_of(&console, execution.clone()).await?),
    };
    let standing = approve::standing(&console, &execution).await?;
    let search = query.q.as_deref().map(str::trim).filter(|q| !q.is_empty());
    let markup = page::detail(page::Detail {
        session: &session,
        tz,
        execution: &execution,
        report: report.as_ref(),
        standing: &standing,
        search,
        page: query.page.unwrap_or(1).max(1),
        passes: &passes,
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
    ExecutionReport::load(&console.pool, key)
        .await
        .map_err(|err| report_error(key, err))
}

async fn report_of(console: &Console, e: Execution) -> Result<ExecutionReport, PageError> {
    let key = e.key.clone();
    ExecutionReport::of_execution(&console.pool, e)
        .await
        .map_err(|err| report_error(&key, err))
}

fn report_error(key: &str, err: ReportError) -> PageError {
    match err {
        ReportError::Database(e) => e.into(),
        ReportError::NoExecution(_) => no_execution(key),
        other => PageError::NotFound(crate::shared::text::inert(&other.to_string())),
    }
}

fn no_execution(key: &str) -> PageError {
    PageError::NotFound(format!(
        "Nenhuma execução {}.",
        crate::shared::text::inert(key)
    ))
}
