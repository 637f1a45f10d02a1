//! Reports to finance: what an execution changed, by how much, and what needs a human.
//!
//! - this file: the report model, loaded from the database (the diff of a simulation from
//!   `reprocessamento_diff`, the corrections of a real run from `reprocessamento_correcao`, the
//!   execution's summary and rejected events, the open review queue);
//! - [`render`]: subject, plain text and HTML; `csv`: the attachment with the full diff;
//!   [`links`]: the console's pages it links to, when `CONSOLE_URL` is set;
//! - [`mail`]: the message (lettre) and its transport: SMTP from `SMTP_URL`, or `.eml` files;
//! - [`deliver`]: an e-mail is an effect of the ledger, sent exactly once or flagged `incerto`;
//! - [`jobs`]: who sends what — `kind: report` jobs ([`run_report_job`]) and a replay job's
//!   `report_to` at the end of a run ([`after_run`]).
//!
//! Money is integer cents throughout, formatted by [`replay_ledger_core::shared::money`]; never floating point.

pub mod approved;
pub mod csv;
pub mod deliver;
pub mod jobs;
pub mod links;
pub mod mail;
pub mod render;
pub mod sends;
mod smtp_url;
mod store;
mod table;
pub mod xlsx;

pub use deliver::Delivery;
pub use jobs::{
    after_run, fire, run_report_job, run_report_job_with, send_execution_report, ReportOutcome,
    Sender,
};
pub use mail::{MailError, MailSettings, Mailer, Recipients};

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use sqlx::PgPool;

use replay_ledger_core::shared::summary::Summary;
use replay_ledger_core::tables::commission::{self, DiffRow};
use replay_ledger_core::tables::execution::{self, Execution, Mode, Rejected};
use replay_ledger_core::tables::ledger::{self, ReviewItem};

/// How many of the largest changes a report lists.
pub const LARGEST: usize = 20;
/// How many new orders, orders whose commission went down, and rejected events a report lists
/// (with their total count).
pub const LIST_LIMIT: usize = 20;
/// How many effects of the review queue a report lists (with the total count).
pub const REVIEW_LIMIT: usize = 50;

pub use replay_ledger_core::shared::summary::Totals;

/// The part of a report about one execution.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutionReport {
    /// The checkpoint key (`<id>` or `<id>:simulacao`).
    pub key: String,
    /// The execution id, under which diff and corrections are filed.
    pub execution_id: String,
    pub job: String,
    pub mode: Mode,
    /// `em-andamento`, `concluida`, `falhou`, `interrompida`.
    pub state: replay_ledger_core::tables::execution::State,
    pub pass: i32,
    pub window_from: Option<DateTime<Utc>>,
    pub window_to: Option<DateTime<Utc>>,
    pub started_by: String,
    pub started_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    pub summary: Summary,
    pub totals: Totals,
    /// The largest changes by absolute difference, at most [`LARGEST`].
    pub largest: Vec<DiffRow>,
    /// Orders with no commission row before (at most [`LIST_LIMIT`]) and how many in all.
    pub new_orders: Vec<DiffRow>,
    pub new_count: usize,
    /// Orders whose commission goes down (at most [`LIST_LIMIT`]) and how many in all.
    pub decreased: Vec<DiffRow>,
    pub decreased_count: usize,
    /// Rejected events (all of them; renderers show at most [`LIST_LIMIT`]).
    pub rejected: Vec<Rejected>,
    /// The full diff, by `pedido_id`: the CSV attachment.
    pub rows: Vec<DiffRow>,
    /// A real run of an approved simulation: whether it applied exactly what was approved.
    pub approved: Option<approved::Check>,
    /// A finished simulation whose pass nobody has approved yet (of a gated job, once
    /// [`Report::for_execution`] has applied the [`Gated`] jobs).
    pub awaiting_approval: bool,
}

impl ExecutionReport {
    /// Loads the report of the execution with checkpoint key `key`.
    pub async fn load(pool: &PgPool, key: &str) -> Result<ExecutionReport, ReportError> {
        let execution = execution::load(pool, key)
            .await?
            .ok_or_else(|| ReportError::NoExecution(key.to_string()))?;
        ExecutionReport::of_execution(pool, execution).await
    }

    /// The report of an execution already loaded: its figures are exactly the loaded row's (a
    /// page that shows both reads one snapshot of the tallies, never two).
    pub async fn of_execution(
        pool: &PgPool,
        execution: Execution,
    ) -> Result<ExecutionReport, ReportError> {
        let key = execution.key.as_str();
        let mut rejected = execution::rejected(pool, key).await?;
        for part in partitions_of(pool, key).await? {
            rejected.extend(execution::rejected(pool, &part).await?);
        }
        ExecutionReport::of_run(pool, execution, rejected).await
    }

    /// The report of an execution a run just handed back, with the events it rejected (its
    /// partitions' too): neither is read again.
    pub async fn of_run(
        pool: &PgPool,
        execution: Execution,
        mut rejected: Vec<Rejected>,
    ) -> Result<ExecutionReport, ReportError> {
        let mode = mode_of(&execution)?;
        let id = execution_id(&execution.key);
        let rows = match mode {
            Mode::Simulation => commission::diff_rows(pool, id).await?,
            _ => commission::correction_rows(pool, id).await?,
        };
        let approved = match mode {
            Mode::Real => approved::check(pool, id, &execution.summary).await?,
            _ => None,
        };
        rejected.sort_by_key(|r| r.posicao);
        let awaiting_approval = mode == Mode::Simulation
            && execution.state == replay_ledger_core::tables::execution::State::Finished
            && replay_ledger_core::engine::approval::latest(pool, id)
                .await?
                .is_none_or(|a| a.simulation_pass != execution.pass);
        let mut report = ExecutionReport::from_parts(execution, mode, rows, rejected);
        report.approved = approved;
        report.awaiting_approval = awaiting_approval;
        Ok(report)
    }

    /// The report of an execution from its parts (pure: the example and the tests use it).
    pub fn from_parts(
        execution: Execution,
        mode: Mode,
        rows: Vec<DiffRow>,
        rejected: Vec<Rejected>,
    ) -> ExecutionReport {
        let mut largest: Vec<DiffRow> = rows
            .iter()
            .filter(|r| r.diferenca() != 0)
            .cloned()
            .collect();
        largest.sort_by(|a, b| {
            b.diferenca()
                .unsigned_abs()
                .cmp(&a.diferenca().unsigned_abs())
                .then_with(|| a.pedido_id.cmp(&b.pedido_id))
        });
        largest.truncate(LARGEST);
        let new: Vec<&DiffRow> = rows.iter().filter(|r| r.antes.is_none()).collect();
        let down: Vec<&DiffRow> = rows
            .iter()
            .filter(|r| r.antes.is_some_and(|a| r.depois < a))
            .collect();
        ExecutionReport {
            execution_id: execution_id(&execution.key).to_string(),
            key: execution.key,
            job: execution.job,
            mode,
            state: execution.state,
            pass: execution.pass,
            window_from: execution.window_from,
            window_to: execution.window_to,
            started_by: execution.started_by,
            started_at: execution.started_at,
            finished_at: execution.finished_at,
            summary: execution.summary.clone(),
            totals: Totals::of_summary(mode == Mode::Simulation, &execution.summary),
            approved: None,
            awaiting_approval: false,
            largest,
            new_count: new.len(),
            new_orders: new.into_iter().take(LIST_LIMIT).cloned().collect(),
            decreased_count: down.len(),
            decreased: down.into_iter().take(LIST_LIMIT).cloned().collect(),
            rejected,
            rows,
        }
    }

    /// What identifies this report among all reports of a sender: the execution and its pass
    /// (a `--restart` makes a new pass, with a new diff, hence a new report).
    pub fn report_id(&self) -> String {
        report_id(&self.key, self.pass)
    }
}

/// `<checkpoint key>#<pass>`.
pub fn report_id(key: &str, pass: i32) -> String {
    format!("{key}#{pass}")
}

/// One report: about an execution (with the review queue), or only the review queue.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// The job that sends it (a report job, or a replay job with `report_to`).
    pub sender: String,
    /// Times are shown in this timezone.
    pub timezone: Tz,
    pub generated_at: DateTime<Utc>,
    pub execution: Option<ExecutionReport>,
    /// The open review queue, oldest first, at most [`REVIEW_LIMIT`].
    pub review: Vec<ReviewItem>,
    pub review_total: usize,
    /// The web console's address (`CONSOLE_URL`): the report then links each execution to its
    /// page, and the review queue to the console's.
    pub console_url: Option<String>,
}

/// The jobs that require an approved simulation (`require_approved_simulation: true`), as
/// configured: only a simulation of theirs awaits approval, so only its report says "Revisar e
/// aprovar" (the console offers the approval form for no other).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Gated(std::collections::BTreeSet<String>);

impl Gated {
    pub fn of<'a>(jobs: impl IntoIterator<Item = &'a replay_ledger_core::config::Job>) -> Gated {
        Gated(
            jobs.into_iter()
                .filter(|j| {
                    matches!(&j.kind, replay_ledger_core::config::JobKind::Replay(r) if r.require_approved_simulation)
                })
                .map(|j| j.name.clone())
                .collect(),
        )
    }

    pub fn requires_approval(&self, job: &str) -> bool {
        self.0.contains(job)
    }
}

impl Report {
    /// The report of one execution; `gated` says whether its job waits for an approval.
    pub async fn for_execution(
        pool: &PgPool,
        key: &str,
        sender: &str,
        timezone: Tz,
        now: DateTime<Utc>,
        gated: &Gated,
    ) -> Result<Report, ReportError> {
        let execution = ExecutionReport::load(pool, key).await?;
        Report::of_execution_report(pool, execution, sender, timezone, now, gated).await
    }

    /// The report of the execution a run handed back ([`ExecutionReport::of_run`]).
    pub async fn for_run(
        pool: &PgPool,
        run: (Execution, Vec<Rejected>),
        sender: &str,
        timezone: Tz,
        now: DateTime<Utc>,
        gated: &Gated,
    ) -> Result<Report, ReportError> {
        let execution = ExecutionReport::of_run(pool, run.0, run.1).await?;
        Report::of_execution_report(pool, execution, sender, timezone, now, gated).await
    }

    async fn of_execution_report(
        pool: &PgPool,
        mut execution: ExecutionReport,
        sender: &str,
        timezone: Tz,
        now: DateTime<Utc>,
        gated: &Gated,
    ) -> Result<Report, ReportError> {
        execution.awaiting_approval &= gated.requires_approval(&execution.job);
        let review = ledger::review_list(pool).await?;
        Ok(Report::new(sender, timezone, now, Some(execution), review))
    }

    /// A report of the review queue alone (a report job's day with no execution to report).
    pub async fn review_only(
        pool: &PgPool,
        sender: &str,
        timezone: Tz,
        now: DateTime<Utc>,
    ) -> Result<Report, ReportError> {
        let review = ledger::review_list(pool).await?;
        Ok(Report::new(sender, timezone, now, None, review))
    }

    pub fn new(
        sender: &str,
        timezone: Tz,
        generated_at: DateTime<Utc>,
        execution: Option<ExecutionReport>,
        mut review: Vec<ReviewItem>,
    ) -> Report {
        let review_total = review.len();
        review.truncate(REVIEW_LIMIT);
        Report {
            sender: sender.to_string(),
            timezone,
            generated_at,
            execution,
            review,
            review_total,
            console_url: None,
        }
    }

    /// Links the report to the console at `url` (`https://console.example.com`, or with a path
    /// prefix); `None` links nothing.
    pub fn with_console_url(mut self, url: Option<String>) -> Report {
        self.console_url = url.map(|u| u.trim_end_matches('/').to_string());
        self
    }

    /// What identifies this report among the sender's: `<execution key>#<pass>`, or, for a
    /// review-only report, the day it is for in the sender's timezone.
    pub fn report_id(&self) -> String {
        match &self.execution {
            Some(e) => e.report_id(),
            None => self
                .generated_at
                .with_timezone(&self.timezone)
                .format("%Y-%m-%d")
                .to_string(),
        }
    }
}

/// `CONSOLE_URL` when it is an `http(s)://` URL; anything else is ignored (with a warning), so a
/// typo never puts a wrong link in a mail.
pub fn console_url(given: Option<&str>) -> Option<String> {
    let raw = given?.trim();
    if raw.is_empty() {
        return None;
    }
    match url::Url::parse(raw) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.query().is_none() => {
            Some(raw.to_string())
        }
        _ => {
            tracing::warn!(
                "CONSOLE_URL is not an http(s) URL without a query: reports carry no console link"
            );
            None
        }
    }
}

/// Why a report could not be made or delivered.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("no execution {0} (`replay-ledger status` lists them)")]
    NoExecution(String),
    #[error("execution {key} is {mode}: reports cover simulations and real runs")]
    NotReportable { key: String, mode: String },
    #[error("no recipients for the report of {0}: add a `kind: report` job (`to: [...]`) or `report_to` to its replay job, or name one with --job")]
    NoRecipients(String),
    #[error(transparent)]
    Mail(#[from] MailError),
    #[error("writing {path}: {source}")]
    Io {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
}

impl From<deliver::DeliverError> for ReportError {
    fn from(e: deliver::DeliverError) -> Self {
        match e {
            deliver::DeliverError::Io { path, source } => ReportError::Io { path, source },
            deliver::DeliverError::Database(e) => ReportError::Database(e),
        }
    }
}

fn mode_of(execution: &Execution) -> Result<Mode, ReportError> {
    match execution.mode {
        Mode::Simulation | Mode::Real => Ok(execution.mode),
        other => Err(ReportError::NotReportable {
            key: execution.key.clone(),
            mode: other.to_string(),
        }),
    }
}

/// The execution id of a checkpoint key (`<id>:simulacao` → `<id>`).
fn execution_id(key: &str) -> &str {
    key.strip_suffix(":simulacao").unwrap_or(key)
}

/// The checkpoint keys of the partitions of `key` (none for an execution that is not partitioned).
async fn partitions_of(pool: &PgPool, key: &str) -> Result<Vec<String>, sqlx::Error> {
    Ok(execution::list(pool)
        .await?
        .into_iter()
        .map(|e| e.key)
        .filter(|k| {
            k.strip_prefix(key)
                .and_then(|rest| rest.strip_prefix(":p"))
                .is_some_and(|i| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()))
        })
        .collect())
}

/// The checkpoint key an argument of `report` names: the key itself (`<id>` for the real run,
/// `<id>:simulacao` for the simulation), or, for a bare id with no real run, its simulation; a
/// partition's key names its parent.
pub async fn resolve_key(pool: &PgPool, reference: &str) -> Result<String, ReportError> {
    if let Some((parent, _)) = reference
        .rsplit_once(":p")
        .filter(|_| execution::is_partition_key(reference))
    {
        return Box::pin(resolve_key(pool, parent)).await;
    }
    if execution::load(pool, reference).await?.is_some() {
        return Ok(reference.to_string());
    }
    let simulation = execution::checkpoint_key(reference, Mode::Simulation);
    if !reference.ends_with(":simulacao") && execution::load(pool, &simulation).await?.is_some() {
        return Ok(simulation);
    }
    Err(ReportError::NoExecution(reference.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, antes: Option<i64>, depois: i64) -> DiffRow {
        DiffRow {
            pedido_id: id.into(),
            antes,
            depois,
        }
    }

    #[test]
    fn totals_count_a_missing_before_as_zero_and_unchanged_rows_as_not_changed() {
        let totals = DiffRow::totals(&[
            row("a", Some(10), 100),
            row("b", None, 5),
            row("c", Some(7), 7),
        ]);
        assert_eq!(
            totals,
            Totals {
                orders: 3,
                changed: 2,
                before_centavos: 17,
                after_centavos: 112
            }
        );
        assert_eq!(totals.difference(), 95);
    }

    #[test]
    fn partition_keys_are_told_from_execution_keys() {
        assert!(
            execution::is_partition_key("replay-x:p3")
                && execution::is_partition_key("replay-x:simulacao:p12")
        );
        assert!(
            !execution::is_partition_key("replay-x")
                && !execution::is_partition_key("replay-x:simulacao")
        );
        assert!(
            !execution::is_partition_key("replay-x:p")
                && !execution::is_partition_key("replay-x:pa")
        );
    }
}
