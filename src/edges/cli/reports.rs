//! `report`, `approve`, and the report a replay job with `report_to` sends when `run` finishes.
//!
//! Exit status: `report` 0 when the report reached its destination (now or before), 1 when it was
//! not accepted (retry later) or its outcome is unknown, 2 for an unknown execution, no recipients
//! or an invalid `SMTP_URL`/`REPORT_FROM`. `approve` 0 when recorded, 1 when refused (no finished
//! simulation, or the window changed since it), 2 for a job that is not a replay job.

use std::path::Path;

use anyhow::Context;
use chrono::Utc;
use sqlx::PgPool;

use super::{connect, Class, Cli, Failure, Outcome};
use crate::services::report::{self, Mailer, ReportError, Sender};
use replay_ledger_core::config::{self, JobKind};
use replay_ledger_core::engine::approval::{self, ApprovalError};
use replay_ledger_core::engine::effects::Effects;
use replay_ledger_core::engine::plan::{Asked, Plan};
use replay_ledger_core::services::runner::{Ended, RunReport};
use replay_ledger_core::shared::money::{brl, brl_signed, group_thousands};
use replay_ledger_core::tables::execution;

/// `replay-ledger report EXECUTION [--out FILE] [--job NAME]`.
pub(super) async fn report(
    cli: &Cli,
    reference: &str,
    out: Option<&Path>,
    job: Option<&str>,
) -> Outcome {
    let mailer = Mailer::from_settings(&cli.settings.mail).map_err(Failure::invalid)?;
    let pool = connect(cli, true).await?;
    let key = match report::resolve_key(&pool, reference).await {
        Ok(key) => key,
        Err(ReportError::Database(e)) => return Err(e.into()),
        Err(err) => return Err(Failure::invalid(err)),
    };
    let Some(sender) = sender(&cli.jobs_dir, &pool, &key, job).await? else {
        return Err(Failure::invalid(ReportError::NoRecipients(key)));
    };
    // A jobs directory that does not load gates nothing: the link then says "Abrir no console".
    let gated = config::load_dir(&cli.jobs_dir)
        .map(|loaded| report::Gated::of(&loaded.jobs))
        .unwrap_or_default();
    let sent =
        report::send_execution_report(&pool, &mailer, &sender, &key, Utc::now(), out, &gated);
    match sent.await {
        Ok(delivery) => {
            println!("{}", delivery.describe(&mailer.target()));
            match delivery.is_delivered() {
                true => Ok(()),
                false => Err(Failure::said(Class::Failed)),
            }
        }
        Err(err @ (ReportError::NoExecution(_) | ReportError::NotReportable { .. })) => {
            Err(Failure::invalid(err))
        }
        Err(ReportError::Mail(err)) => Err(Failure::invalid(err)),
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

/// `replay-ledger approve JOB [--note TEXT]` (a `--by` is kept as a note: who approves is the
/// session's database role).
pub(super) async fn approve(cli: &Cli, job_ref: &str, note: Option<&str>) -> Outcome {
    let (catalog, job) = config::find_job(&cli.jobs_dir, job_ref)?;
    let Ok(plan) = Plan::new(&job, Asked::at(Utc::now())) else {
        return Err(Failure::wrong_kind(
            &job,
            "replay",
            "only a replay's simulation can be approved",
        ));
    };
    if let Some(Err(err)) = note.map(replay_ledger_core::shared::identity::check_note) {
        return Err(Failure::invalid(format_args!("--note: {err}")));
    }
    let effects = Effects::from_catalog(&catalog).context("setting up effect providers")?;
    let pool = connect(cli, true).await?;
    let target = approval::Target {
        plan: &plan,
        effects: &effects,
    };
    match approval::approve(&pool, target, note, Utc::now()).await {
        Ok(a) => {
            print_approval(&a);
            Ok(())
        }
        Err(ApprovalError::Database(e)) => Err(e.into()),
        Err(err) => Err(Failure::failed(err)),
    }
}

fn print_approval(a: &approval::Approval) {
    let t = &a.totals;
    println!(
        "approved {} (simulation pass {}, finished {}) by {} at {}",
        a.execution_id,
        a.simulation_pass,
        a.simulation_finished_at.format("%Y-%m-%d %H:%M:%S UTC"),
        replay_ledger_core::shared::text::inert(&a.by),
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
    if let Some(note) = &a.note {
        println!("  note: {}", replay_ledger_core::shared::text::inert(note));
    }
    println!(
        "  the real run may start while the job's definition, the window's {} events and these orders' commissions stay as they are",
        group_thousands(a.fingerprint.events.count.max(0) as u64)
    );
}

/// `approvals [--json]`: every approval, newest first.
pub(super) async fn approvals(cli: &Cli, json: bool) -> Outcome {
    let pool = connect(cli, true).await?;
    let all = approval::list(&pool).await?;
    if json {
        let rows: Vec<serde_json::Value> = all.iter().map(approval_json).collect();
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    if all.is_empty() {
        println!("no approvals yet");
        return Ok(());
    }
    println!(
        "{:<20} {:<24} {:<34} {:>4} {:>9} {:>18}  {:<23} {:<24} NOTE",
        "APPROVED AT", "JOB", "EXECUTION", "PASS", "ORDERS", "DIFFERENCE", "FINGERPRINT", "BY"
    );
    for a in &all {
        // A rebuild's approval binds the comparison's fingerprint, as finance was shown it.
        let fingerprint = if a.job == "rebuild" {
            replay_ledger_core::services::rebuild::short_fingerprint(&a.fingerprint.events.hash)
                .to_string()
        } else {
            a.fingerprint.short()
        };
        println!(
            "{:<20} {:<24} {:<34} {:>4} {:>9} {:>18}  {:<23} {:<24} {}",
            a.at.format("%Y-%m-%d %H:%M:%S"),
            replay_ledger_core::shared::text::inert(&a.job),
            replay_ledger_core::shared::text::inert(&a.execution_id),
            a.simulation_pass,
            group_thousands(a.totals.changed),
            brl_signed(a.totals.difference()),
            replay_ledger_core::shared::text::inert(&fingerprint),
            replay_ledger_core::shared::text::inert(&a.by),
            replay_ledger_core::shared::text::inert(a.note.as_deref().unwrap_or("-"))
        );
    }
    Ok(())
}

fn approval_json(a: &approval::Approval) -> serde_json::Value {
    let f = &a.fingerprint;
    serde_json::json!({
        "id": a.id,
        "job": a.job,
        "execution": a.execution_id,
        "simulation_pass": a.simulation_pass,
        "simulation_finished_at": a.simulation_finished_at,
        "orders_in_diff": a.totals.orders,
        "orders_changed": a.totals.changed,
        "total_before_cents": a.totals.before_centavos,
        "total_after_cents": a.totals.after_centavos,
        "fingerprint": {
            "definition": f.definition.as_ref().map(|d| &d.0),
            "events": f.events.count,
            "events_max_posicao": f.events.max_posicao,
            "events_hash": f.events.hash,
            "commissions_hash": f.comissao,
            "summary": f.summary(),
        },
        "approved_by": a.by,
        "note": a.note,
        "approved_at": a.at,
    })
}

/// After `run`: the execution's report to the job's `report_to`, once; a failure when the report
/// could not be delivered.
pub(super) async fn after_run(
    pool: &PgPool,
    plan: &Plan,
    run: &RunReport,
    mail: &report::MailSettings,
) -> Outcome {
    if plan.replay.report_to.is_empty() || matches!(run.ended, Ended::Interrupted) {
        return Ok(());
    }
    let mailer = Mailer::from_settings(mail).map_err(Failure::invalid)?;
    let (job, replay) = (&plan.job, &plan.replay);
    match report::after_run(pool, job, replay, run, Utc::now(), &mailer).await {
        Ok(None) => Ok(()),
        Ok(Some(delivery)) => {
            println!("report: {}", delivery.describe(&mailer.target()));
            match delivery.is_delivered() {
                true => Ok(()),
                false => Err(Failure::said(Class::Failed)),
            }
        }
        Err(err) => Err(Failure::failed(format_args!(
            "the run finished but its report could not be made: {err}; `replay-ledger report {}` retries it",
            run.checkpoint_key
        ))),
    }
}
