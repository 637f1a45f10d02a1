//! `report`, `approve`, and the report a replay job with `report_to` sends when `run` finishes.
//!
//! Exit status: `report` 0 when the report reached its destination (now or before), 1 when it was
//! not accepted (retry later) or its outcome is unknown, 2 for an unknown execution, no recipients
//! or an invalid `SMTP_URL`/`REPORT_FROM`. `approve` 0 when recorded, 1 when refused (no finished
//! simulation, or the window changed since it), 2 for a job that is not a replay job.

use std::path::Path;
use std::process::ExitCode;

use chrono::Utc;
use sqlx::PgPool;

use super::{connect, Cli};
use crate::approval::{self, ApprovalError};
use crate::config::{self, Job, JobKind, ReplayJob};
use crate::execution;
use crate::money::{brl, brl_signed, group_thousands};
use crate::report::{self, Mailer, ReportError, Sender};
use crate::runner::{Ended, RunReport, RunnerConfig};

/// `replay-ledger report EXECUTION [--out FILE] [--job NAME]`.
pub(super) async fn report(
    cli: &Cli,
    reference: &str,
    out: Option<&Path>,
    job: Option<&str>,
) -> anyhow::Result<ExitCode> {
    let mailer = match Mailer::from_env() {
        Ok(m) => m,
        Err(err) => return Ok(invalid(&err)),
    };
    let pool = connect(cli, true).await?;
    let key = match report::resolve_key(&pool, reference).await {
        Ok(key) => key,
        Err(ReportError::Database(e)) => return Err(e.into()),
        Err(err) => return Ok(invalid(&err)),
    };
    let Some(sender) = sender(&cli.jobs_dir, &pool, &key, job).await? else {
        return Ok(invalid(&ReportError::NoRecipients(key)));
    };
    match report::send_execution_report(&pool, &mailer, &sender, &key, Utc::now(), out).await {
        Ok(delivery) => {
            println!("{}", delivery.describe(&mailer.target()));
            Ok(if delivery.is_delivered() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Err(err @ (ReportError::NoExecution(_) | ReportError::NotReportable { .. })) => {
            Ok(invalid(&err))
        }
        Err(ReportError::Mail(err)) => Ok(invalid(&err)),
        Err(err) => Err(err.into()),
    }
}

/// Who sends the report of `key`: `--job` (a report job, or a replay job with `report_to`), else
/// the execution's own job when it has `report_to`, else the only report job of the directory.
async fn sender(
    jobs_dir: &Path,
    pool: &PgPool,
    key: &str,
    named: Option<&str>,
) -> anyhow::Result<Option<Sender>> {
    let loaded = config::load_dir(jobs_dir)?;
    if let Some(name) = named {
        return Ok(loaded
            .jobs
            .iter()
            .find(|j| j.name == name)
            .and_then(Sender::of));
    }
    let own = match execution::load(pool, key).await? {
        Some(e) => loaded
            .jobs
            .iter()
            .find(|j| j.name == e.job)
            .and_then(Sender::of),
        None => None,
    };
    if own.is_some() {
        return Ok(own);
    }
    let mut report_jobs = loaded
        .jobs
        .iter()
        .filter(|j| matches!(j.kind, JobKind::Report(_)));
    Ok(match (report_jobs.next(), report_jobs.next()) {
        (Some(only), None) => Sender::of(only),
        _ => None,
    })
}

/// `replay-ledger approve JOB [--by NAME]`.
pub(super) async fn approve(
    cli: &Cli,
    job_ref: &str,
    by: Option<&str>,
) -> anyhow::Result<ExitCode> {
    let (_, job) = config::find_job(&cli.jobs_dir, job_ref)?;
    let JobKind::Replay(replay) = &job.kind else {
        eprintln!(
            "error: job {} is not a replay job: only a replay's simulation can be approved",
            job.name
        );
        return Ok(ExitCode::from(2));
    };
    let pool = connect(cli, true).await?;
    let by = by.map_or_else(|| RunnerConfig::default().started_by, str::to_string);
    match approval::approve(&pool, &job, replay, &by, Utc::now()).await {
        Ok(a) => {
            let t = &a.totals;
            println!(
                "approved {} (simulation pass {}, finished {}) by {} at {}",
                a.execution_id,
                a.simulation_pass,
                a.simulation_finished_at.format("%Y-%m-%d %H:%M:%S UTC"),
                a.by,
                a.at.format("%Y-%m-%d %H:%M:%S UTC")
            );
            println!(
                "  {} orders in the diff, {} changed; total {} -> {} ({})",
                group_thousands(t.orders),
                group_thousands(t.changed),
                brl(t.before_centavos),
                brl(t.after_centavos),
                brl_signed(t.difference())
            );
            println!(
                "  the real run may start while the window's {} events and these orders' commissions stay as they are",
                group_thousands(a.fingerprint.events.count.max(0) as u64)
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(ApprovalError::Database(e)) => Err(e.into()),
        Err(err) => {
            eprintln!("error: {err}");
            Ok(ExitCode::from(1))
        }
    }
}

/// After `run`: the execution's report to the job's `report_to`, once. Returns the exit status to
/// use instead of success when the report could not be delivered.
pub(super) async fn after_run(
    pool: &PgPool,
    job: &Job,
    replay: &ReplayJob,
    run: &RunReport,
) -> Option<ExitCode> {
    if replay.report_to.is_empty() || matches!(run.ended, Ended::Interrupted) {
        return None;
    }
    let mailer = match Mailer::from_env() {
        Ok(m) => m,
        Err(err) => return Some(invalid(&err)),
    };
    match report::after_run(pool, job, replay, &run.checkpoint_key, Utc::now(), &mailer).await {
        Ok(None) => None,
        Ok(Some(delivery)) => {
            println!("report: {}", delivery.describe(&mailer.target()));
            (!delivery.is_delivered()).then_some(ExitCode::from(1))
        }
        Err(err) => {
            eprintln!("error: the run finished but its report could not be made: {err}; `replay-ledger report {}` retries it", run.checkpoint_key);
            Some(ExitCode::from(1))
        }
    }
}

fn invalid(err: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("error: {err}");
    ExitCode::from(2)
}
