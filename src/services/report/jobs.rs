//! Who sends which report, and when:
//!
//! - a `kind: report` job, at each tick ([`run_report_job`]): the report of every execution
//!   (simulation or real run) finished since the job's start (a new job looks back one day) that
//!   it has not delivered yet — one e-mail each, key `<job>:<execution>#<pass>:email`; a send that
//!   was not accepted is released and so retried at the next tick. On a tick with no execution to
//!   report and a non-empty review queue, the queue alone, once per day (`<job>:<day>:email`);
//! - a replay job with `report_to`, when a run finishes ([`after_run`]): that execution's report,
//!   key `<replay job>:<execution>#<pass>:email`, so a later `run` or `report` of it never sends it
//!   twice;
//! - `replay-ledger report EXECUTION` ([`send_execution_report`]), with the same keys.

use std::collections::HashSet;
use std::path::Path;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use sqlx::PgPool;

use super::deliver::{self, Delivery, ReportKey};
use super::mail::{eml_name, MailSettings, Mailer, Recipients};
use super::{report_id, Gated, Report, ReportError};
use replay_ledger_core::config::{Job, JobKind, ReplayJob, ReportJob};
use replay_ledger_core::services::runner::RunReport;
use replay_ledger_core::tables::execution::{self, Execution};
use replay_ledger_core::tables::execution::{Mode, State};
use replay_ledger_core::tables::ledger;

/// How far back a report job looks the first time it runs.
const FIRST_LOOKBACK: chrono::Duration = chrono::Duration::days(1);

/// The job a report comes from: its name (part of the ledger key), timezone and recipients.
#[derive(Debug, Clone, PartialEq)]
pub struct Sender {
    pub name: String,
    pub timezone: Tz,
    pub recipients: Recipients,
}

impl Sender {
    /// A report job (`to`, `cc`), or a replay job with `report_to`.
    pub fn of(job: &Job) -> Option<Sender> {
        let recipients = match &job.kind {
            JobKind::Report(r) => Recipients {
                to: r.to.clone(),
                cc: r.cc.clone(),
            },
            JobKind::Replay(r) if !r.report_to.is_empty() => Recipients {
                to: r.report_to.clone(),
                cc: Vec::new(),
            },
            _ => return None,
        };
        Some(Sender {
            name: job.name.clone(),
            timezone: job.timezone,
            recipients,
        })
    }
}

/// What one tick of a report job did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReportOutcome {
    pub deliveries: Vec<Delivery>,
}

impl ReportOutcome {
    fn count(&self, f: impl Fn(&Delivery) -> bool) -> usize {
        self.deliveries.iter().filter(|d| f(d)).count()
    }

    /// Reports that reached their destination in this tick.
    pub fn sent(&self) -> usize {
        self.count(|d| matches!(d, Delivery::Sent { .. } | Delivery::Written { .. }))
    }

    /// Reports not accepted (released: the next tick retries them).
    pub fn failed(&self) -> usize {
        self.count(|d| matches!(d, Delivery::Failed { .. }))
    }

    /// Reports whose outcome is unknown (`incerto`).
    pub fn uncertain(&self) -> usize {
        self.count(|d| matches!(d, Delivery::Uncertain { .. }))
    }
}

/// One tick of a report job, transport from the process's settings (`SMTP_URL`, `REPORT_FROM`).
#[tracing::instrument(skip_all, fields(job = %job.name), err)]
pub async fn run_report_job(
    pool: &PgPool,
    job: &Job,
    report_job: &ReportJob,
    now: DateTime<Utc>,
    gated: &Gated,
    mail: &MailSettings,
) -> Result<ReportOutcome, ReportError> {
    let mailer = Mailer::from_settings(mail)?;
    run_report_job_with(pool, job, report_job, now, &mailer, gated).await
}

/// A scheduler's fire of a report job: one tick, its outcome logged; a failure is logged and
/// retried at the next tick. Returns whether the tick ran (sends that were not accepted count as
/// ran: they are retried at the next tick).
pub async fn fire(
    pool: &PgPool,
    job: &Job,
    report_job: &ReportJob,
    now: DateTime<Utc>,
    gated: &Gated,
    mail: &MailSettings,
) -> bool {
    match run_report_job(pool, job, report_job, now, gated, mail).await {
        Ok(_) => true,
        Err(err) => {
            tracing::warn!(job = %job.name, error = %err, "report tick failed; retrying at the next tick");
            false
        }
    }
}

/// One tick of a report job through `mailer`.
pub async fn run_report_job_with(
    pool: &PgPool,
    job: &Job,
    report_job: &ReportJob,
    now: DateTime<Utc>,
    mailer: &Mailer,
    gated: &Gated,
) -> Result<ReportOutcome, ReportError> {
    let sender = Sender {
        name: job.name.clone(),
        timezone: job.timezone,
        recipients: Recipients {
            to: report_job.to.clone(),
            cc: report_job.cc.clone(),
        },
    };
    let since = super::store::since(pool, &job.name, now - FIRST_LOOKBACK).await?;
    let pending = pending(pool, mailer, &sender, since).await?;
    let mut outcome = ReportOutcome::default();
    for e in &pending {
        let report = Report::for_execution(pool, &e.key, &sender.name, sender.timezone, now, gated)
            .await?
            .with_console_url(mailer.console_url());
        outcome
            .deliveries
            .push(deliver(pool, mailer, &sender, &report).await?);
    }
    if pending.is_empty() {
        let report = Report::review_only(pool, &sender.name, sender.timezone, now)
            .await?
            .with_console_url(mailer.console_url());
        let key = ReportKey::new(&sender.name, &report.report_id());
        if report.review_total > 0 && done(pool, mailer, &[key.key]).await?.is_empty() {
            outcome
                .deliveries
                .push(deliver(pool, mailer, &sender, &report).await?);
        }
    }
    if !outcome.deliveries.is_empty() {
        tracing::info!(
            sent = outcome.sent(),
            failed = outcome.failed(),
            uncertain = outcome.uncertain(),
            target = %mailer.target(),
            "report tick"
        );
    }
    Ok(outcome)
}

/// The report of a run that finished, to its job's `report_to`; `None` when it has none or the
/// report was already delivered. It is made of the execution the run handed back, not read
/// again; only a run that did not record its own end (taken over) has its execution read.
pub async fn after_run(
    pool: &PgPool,
    job: &Job,
    replay: &ReplayJob,
    run: &RunReport,
    now: DateTime<Utc>,
    mailer: &Mailer,
) -> Result<Option<Delivery>, ReportError> {
    if replay.report_to.is_empty() {
        return Ok(None);
    }
    let Some(sender) = Sender::of(job) else {
        return Ok(None);
    };
    let gated = Gated::of([job]);
    let (name, timezone) = (&sender.name, sender.timezone);
    let report = match &run.execution {
        Some(e) => {
            let ran = (e.clone(), run.rejected.clone());
            Report::for_run(pool, ran, name, timezone, now, &gated).await?
        }
        None => {
            let key = &run.checkpoint_key;
            Report::for_execution(pool, key, name, timezone, now, &gated).await?
        }
    }
    .with_console_url(mailer.console_url());
    let key = ReportKey::new(&sender.name, &report.report_id());
    if !done(pool, mailer, std::slice::from_ref(&key.key))
        .await?
        .is_empty()
    {
        return Ok(None);
    }
    Ok(Some(deliver(pool, mailer, &sender, &report).await?))
}

/// `replay-ledger report`: the report of the execution with checkpoint key `key`, written to
/// `out` when given, else delivered by `mailer` (by SMTP through the ledger, or into the outbox).
pub async fn send_execution_report(
    pool: &PgPool,
    mailer: &Mailer,
    sender: &Sender,
    key: &str,
    now: DateTime<Utc>,
    out: Option<&Path>,
    gated: &Gated,
) -> Result<Delivery, ReportError> {
    let report = Report::for_execution(pool, key, &sender.name, sender.timezone, now, gated)
        .await?
        .with_console_url(mailer.console_url());
    match out {
        Some(path) => {
            let key = ReportKey::new(&sender.name, &report.report_id());
            let message = mailer.message(&report, &sender.recipients, &message_id(&key))?;
            Ok(deliver::write(&key, &message, path)?)
        }
        None => deliver(pool, mailer, sender, &report).await,
    }
}

async fn deliver(
    pool: &PgPool,
    mailer: &Mailer,
    sender: &Sender,
    report: &Report,
) -> Result<Delivery, ReportError> {
    let key = ReportKey::new(&sender.name, &report.report_id());
    let message = mailer.message(report, &sender.recipients, &message_id(&key))?;
    Ok(deliver::deliver(pool, mailer, &key, &message).await?)
}

/// The Message-ID's left part: stable per report, so a copy resent by a human threads with it.
pub fn message_id(key: &ReportKey) -> String {
    key.key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-') {
                c
            } else {
                '.'
            }
        })
        .collect()
}

/// Executions finished since `since` whose report this sender has not delivered, oldest first.
async fn pending(
    pool: &PgPool,
    mailer: &Mailer,
    sender: &Sender,
    since: DateTime<Utc>,
) -> Result<Vec<Execution>, ReportError> {
    let mut finished: Vec<Execution> = execution::list(pool)
        .await?
        .into_iter()
        .filter(|e| e.state == State::Finished && matches!(e.mode, Mode::Simulation | Mode::Real))
        .filter(|e| !replay_ledger_core::tables::execution::is_partition_key(&e.key))
        .filter(|e| e.finished_at.is_some_and(|t| t >= since))
        .collect();
    finished.sort_by(|a, b| a.finished_at.cmp(&b.finished_at).then(a.key.cmp(&b.key)));
    let keys: Vec<String> = finished
        .iter()
        .map(|e| ReportKey::new(&sender.name, &report_id(&e.key, e.pass)).key)
        .collect();
    let done = done(pool, mailer, &keys).await?;
    Ok(finished
        .into_iter()
        .zip(keys)
        .filter(|(_, k)| !done.contains(k))
        .map(|(e, _)| e)
        .collect())
}

/// Which of these reports need no delivery: in the ledger in any state (SMTP), or already in the
/// outbox.
async fn done(
    pool: &PgPool,
    mailer: &Mailer,
    keys: &[String],
) -> Result<HashSet<String>, ReportError> {
    Ok(match mailer.outbox_dir() {
        Some(dir) => keys
            .iter()
            .filter(|k| dir.join(eml_name(k)).exists())
            .cloned()
            .collect(),
        None => ledger::registered(pool, keys).await?,
    })
}
