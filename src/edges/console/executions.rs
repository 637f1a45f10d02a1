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
use replay_ledger_core::tables::execution::{self, Execution, Mode, State as Run};

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct ListQuery {
    pub job: Option<String>,
    pub state: Option<String>,
    /// Started on or after this day (`AAAA-MM-DD`, in the console's timezone).
    pub desde: Option<String>,
    /// Started on or before this day.
    pub ate: Option<String>,
    /// `recentes` (default), `antigas`, or `diferenca` (the largest difference first).
    pub ordem: Option<String>,
}

/// A day of the list's filter, or why it is not one.
fn day(word: Option<&str>) -> Result<Option<chrono::NaiveDate>, PageError> {
    match word.map(str::trim).filter(|w| !w.is_empty()) {
        None => Ok(None),
        Some(w) => chrono::NaiveDate::parse_from_str(w, "%Y-%m-%d")
            .map(Some)
            .map_err(|_| PageError::BadRequest("Data inválida: use AAAA-MM-DD.".into())),
    }
}

/// The word of the list's filter for gated simulations nobody approved yet.
const AWAITING: &str = "aguardando-aprovacao";

/// `GET /`: executions newest first, with the count of each state (and of simulations awaiting
/// approval), filtered by job and by state or `aguardando-aprovacao`.
pub(super) async fn list(
    State(console): State<Console>,
    session: Session,
    Query(query): Query<ListQuery>,
) -> Result<Response, PageError> {
    let all: Vec<Execution> = execution::list(&console.pool)
        .await?
        .into_iter()
        .filter(|e| !execution::is_partition_key(&e.key))
        .collect();
    let loaded = console.jobs.get();
    let configured = loaded.as_ref().as_ref().ok();
    let gated = report::Gated::of(configured.iter().flat_map(|c| &c.jobs));
    let mut awaiting = BTreeSet::new();
    for e in all
        .iter()
        .filter(|e| e.mode == Mode::Simulation && e.state == Run::Finished)
    {
        let id = execution::execution_id_of(&e.key);
        if gated.requires_approval(&e.job)
            && replay_ledger_core::engine::approval::latest(&console.pool, id)
                .await?
                .is_none_or(|a| a.simulation_pass != e.pass)
        {
            awaiting.insert(e.key.clone());
        }
    }
    let job = query.job.as_deref().filter(|j| !j.is_empty());
    let wanted = match query.state.as_deref().filter(|s| !s.is_empty()) {
        None => page::Wanted::All,
        Some(AWAITING) => page::Wanted::Awaiting,
        Some(s) => page::Wanted::State(Run::try_from(s).map_err(|e| {
            PageError::BadRequest(replay_ledger_core::shared::text::inert(&e.to_string()))
        })?),
    };
    let (since, until) = (day(query.desde.as_deref())?, day(query.ate.as_deref())?);
    let order = match query.ordem.as_deref().filter(|o| !o.is_empty()) {
        None | Some("recentes") => page::Order::Newest,
        Some("antigas") => page::Order::Oldest,
        Some("diferenca") => page::Order::Difference,
        Some(_) => {
            return Err(PageError::BadRequest(
                "Ordem inválida: use ordem=recentes, antigas ou diferenca.".into(),
            ))
        }
    };
    let tz = console.config.timezone;
    let started_on = |e: &Execution| e.started_at.with_timezone(&tz).date_naive();
    let mut shown: Vec<&Execution> = all
        .iter()
        .filter(|e| job.is_none_or(|j| e.job == j))
        .filter(|e| since.is_none_or(|d| started_on(e) >= d))
        .filter(|e| until.is_none_or(|d| started_on(e) <= d))
        .filter(|e| match wanted {
            page::Wanted::All => true,
            page::Wanted::Awaiting => awaiting.contains(&e.key),
            page::Wanted::State(s) => e.state == s,
        })
        .collect();
    order.apply(&mut shown);
    let askers = replay_ledger_core::tables::requests::askers(&console.pool).await?;
    let filter = page::Filter {
        jobs: all
            .iter()
            .map(|e| e.job.as_str())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect(),
        job,
        wanted,
        counts: Run::ALL
            .iter()
            .map(|s| (*s, all.iter().filter(|e| e.state == *s).count()))
            .collect(),
        awaiting: &awaiting,
        since,
        until,
        order,
        askers: &askers,
    };
    let scheduled = match configured {
        Some(c) => {
            let runs = crate::services::scheduler::runs::all(&console.pool).await?;
            crate::services::scheduler::job_statuses(&c.jobs, &all, &runs, chrono::Utc::now())
        }
        None => Vec::new(),
    };
    let markup = page::list(
        &session,
        console.config.timezone,
        &shown,
        &filter,
        &scheduled,
    );
    Ok(templates::html(markup).into_response())
}

/// The chart's interval: how often runners publish their pace.
const PACE_BUCKET_SECS: f64 = 2.0;

/// A pace older than this is not shown: no runner is publishing it any more.
const PACE_FRESH_SECS: f64 = 30.0;

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct DetailQuery {
    /// Only diff rows whose `pedido_id` contains this.
    pub q: Option<String>,
    /// The diff's page, from 1.
    pub page: Option<usize>,
    /// An earlier pass of the execution.
    pub passagem: Option<i32>,
    /// The diff's column to sort by: `pedido`, `antes`, `depois`, `diferenca`.
    pub sort: Option<String>,
    /// `asc` or `desc`.
    pub dir: Option<String>,
    /// `1`: only the diff's rows whose commission changes.
    pub alterados: Option<String>,
}

impl DetailQuery {
    fn sort(&self) -> Result<page::Sort, PageError> {
        let key = match self.sort.as_deref().filter(|s| !s.is_empty()) {
            None => page::SortKey::default(),
            Some(word) => page::SortKey::parse(word).ok_or_else(|| {
                PageError::BadRequest(
                    "Ordem inválida: use sort=pedido, antes, depois ou diferenca.".into(),
                )
            })?,
        };
        let descending = match self.dir.as_deref().filter(|s| !s.is_empty()) {
            None | Some("asc") => false,
            Some("desc") => true,
            Some(_) => {
                return Err(PageError::BadRequest(
                    "Direção inválida: use dir=asc ou dir=desc.".into(),
                ))
            }
        };
        Ok(page::Sort { key, descending })
    }
}

/// `GET /executions/{id}`: the current pass (its figures and its report's lists from one read of
/// the execution's row and tallies), or an earlier pass (`?passagem=N`) with its figures.
pub(super) async fn detail(
    State(console): State<Console>,
    session: Session,
    Path(id): Path<String>,
    Query(query): Query<DetailQuery>,
) -> Result<Response, PageError> {
    if id == replay_ledger_core::services::consumer::LIVE_EXECUTION {
        return super::live::page(&console, &session).await;
    }
    let execution = execution::load(&console.pool, &id)
        .await?
        .ok_or_else(|| no_execution(&id))?;
    let passes = execution::passes(&console.pool, &id).await?;
    let tz = console.timezone_of(&execution.job);
    if let Some(n) = query.passagem.filter(|n| *n != execution.pass) {
        let pass = passes
            .iter()
            .find(|p| p.pass == n)
            .ok_or_else(|| PageError::NotFound(format!("Nenhuma passagem {n} desta execução.")))?;
        let markup = templates::figures::earlier_pass(&session, tz, &execution, pass, &passes);
        return Ok(templates::html(markup).into_response());
    }
    let report = match execution.mode {
        Mode::Live => None,
        _ => Some(report_of(&console, execution.clone()).await?),
    };
    let standing = approve::standing(&console, &execution).await?;
    let (offer, requests) =
        super::requests::of_execution(&console, &session, &execution, &standing).await?;
    let search = query.q.as_deref().map(str::trim).filter(|q| !q.is_empty());
    let sort = query.sort()?;
    let paces = match execution.state {
        Run::Running => {
            execution::progress::of_execution(&console.pool, &id, PACE_FRESH_SECS).await?
        }
        _ => Vec::new(),
    };
    let proposal =
        replay_ledger_core::tables::proposals::named(&console.pool, &execution.job).await?;
    let samples = execution::progress::samples(&console.pool, &id, PACE_BUCKET_SECS).await?;
    let markup = page::detail(page::Detail {
        session: &session,
        tz,
        execution: &execution,
        proposal: proposal.as_ref(),
        samples: &samples,
        report: report.as_ref(),
        standing: &standing,
        offer: &offer,
        requests: &requests,
        search,
        only_changed: query.alterados.as_deref() == Some("1"),
        page: query.page.unwrap_or(1).max(1),
        passes: &passes,
        sort,
        paces: &paces,
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
    let name = super::download::name(&render::csv_name(&report));
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

/// `GET /executions/{id}/diff.xlsx`: the same rows as the CSV, as a spreadsheet (amounts in
/// reais as numbers, a header row with a filter).
pub(super) async fn diff_xlsx(
    State(console): State<Console>,
    _session: Session,
    Path(id): Path<String>,
) -> Result<Response, PageError> {
    let report = load_report(&console, &id).await?;
    let name = super::download::name(&render::csv_name(&report)).replace(".csv", ".xlsx");
    super::download::spreadsheet(&name, report::xlsx::render(&report.rows))
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
        other => PageError::NotFound(replay_ledger_core::shared::text::inert(&other.to_string())),
    }
}

fn no_execution(key: &str) -> PageError {
    PageError::NotFound(format!(
        "Nenhuma execução {}.",
        replay_ledger_core::shared::text::inert(key)
    ))
}
