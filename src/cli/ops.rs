//! The operator's commands: `sweep`, `review list|resolve` and `status`.

use std::process::ExitCode;

use anyhow::Context;

use super::{connect, counts, sweep_stale_after, Cli, ReviewAction};
use crate::config::{self, ConfigErrors};
use crate::effects::Effects;
use crate::execution::ExecutionView;
use crate::ledger::{self, Resolution, ReviewError};
use crate::runner::RunnerConfig;
use crate::scheduler;
use crate::sweeper::{Sweeper, SweeperConfig};

pub(super) async fn sweep(
    cli: &Cli,
    stale_after: Option<std::time::Duration>,
) -> anyhow::Result<ExitCode> {
    let catalog = config::load_effects(&cli.jobs_dir.join(config::EFFECTS_FILE))
        .map_err(|e| ConfigErrors(vec![e]))?;
    let effects = Effects::from_catalog(&catalog).context("setting up effect providers")?;
    let pool = connect(cli, true).await?;
    let config = SweeperConfig {
        stale_after: stale_after.unwrap_or_else(|| sweep_stale_after(&cli.jobs_dir)),
        ..SweeperConfig::default()
    };
    let sweeper = match Sweeper::new(pool, effects, config) {
        Ok(s) => s,
        Err(err) => {
            eprintln!("error: {err}");
            return Ok(ExitCode::from(2));
        }
    };
    let outcome = sweeper.run_once().await?;
    println!(
        "sweep: retaken {}, completed {}, left for the next pass {}, moved to incerto {}",
        outcome.retaken, outcome.completed, outcome.released, outcome.uncertain
    );
    Ok(ExitCode::SUCCESS)
}

pub(super) async fn review(cli: &Cli, action: &ReviewAction) -> anyhow::Result<ExitCode> {
    let pool = connect(cli, true).await?;
    match action {
        ReviewAction::List { json } => {
            let items = ledger::review_list(&pool).await?;
            if *json {
                println!("{}", serde_json::to_string_pretty(&items)?);
                return Ok(ExitCode::SUCCESS);
            }
            if items.is_empty() {
                println!("review queue is empty");
            }
            for i in &items {
                println!(
                    "{}  type {}  execution {}  age {}  attempts {}  last error {}",
                    i.key,
                    i.tipo_efeito,
                    i.execucao_id,
                    humantime::format_duration(std::time::Duration::from_secs(
                        i.idade_segundos.max(0) as u64
                    )),
                    i.tentativas,
                    i.ultimo_erro.as_deref().unwrap_or("-")
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        ReviewAction::Resolve { key, sent, by, .. } => {
            let resolution = if *sent {
                Resolution::Sent
            } else {
                Resolution::NotSent
            };
            let by = by
                .clone()
                .unwrap_or_else(|| RunnerConfig::default().started_by);
            match ledger::resolve(&pool, key, resolution, &by).await {
                Ok(()) => {
                    println!(
                        "{key}: {}",
                        if *sent {
                            "marked concluido (it went out)"
                        } else {
                            "removed from the ledger; the next run of its window performs it"
                        }
                    );
                    Ok(ExitCode::SUCCESS)
                }
                Err(ReviewError::Database(e)) => Err(e.into()),
                Err(err) => {
                    eprintln!("error: {err}");
                    Ok(ExitCode::from(2))
                }
            }
        }
    }
}

pub(super) async fn status(cli: &Cli, json: bool) -> anyhow::Result<ExitCode> {
    let pool = connect(cli, true).await?;
    let executions = crate::execution::list(&pool).await?;
    let review = ledger::review_queue_size(&pool).await?;
    let jobs = config::load_dir(&cli.jobs_dir)
        .map(|l| scheduler::job_statuses(&l.jobs, &executions, chrono::Utc::now()))
        .map_err(|e| e.to_string());
    if json {
        let views: Vec<ExecutionView<'_>> = executions.iter().map(ExecutionView::from).collect();
        let value = serde_json::json!({ "executions": views, "review_queue": review,
            "jobs": jobs.as_ref().ok(), "jobs_error": jobs.as_ref().err() });
        println!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(ExitCode::SUCCESS);
    }
    print!("{}", status_table(&executions, chrono::Utc::now()));
    println!("review queue: {review} effect(s) incerto");
    match jobs {
        Ok(jobs) => print!("jobs:\n{}", scheduler::status::render(&jobs)),
        Err(e) => println!("jobs: cannot load {}: {e}", cli.jobs_dir.display()),
    }
    Ok(ExitCode::SUCCESS)
}

/// The executions as a table with a header: what each is, how far, how long, its figures.
fn status_table(
    executions: &[crate::execution::Execution],
    now: chrono::DateTime<chrono::Utc>,
) -> String {
    use std::fmt::Write;
    if executions.is_empty() {
        return "no executions yet\n".into();
    }
    let mut out = format!(
        "{:<40} {:<9} {:<12} {:>8} {:>10} {:>10} {:>9}  {}\n",
        "EXECUTION", "MODE", "STATE", "PROGRESS", "DURATION", "EVENTS", "ORDERS", "EFFECTS"
    );
    for e in executions {
        let progress = e
            .progress_percent()
            .map_or_else(|| "-".into(), |p| format!("{p:.0}%"));
        let end = e.finished_at.unwrap_or(now);
        let took = (end - e.started_at).to_std().unwrap_or_default();
        let took = humantime::format_duration(std::time::Duration::from_secs(took.as_secs()));
        let _ = writeln!(
            out,
            "{:<40} {:<9} {:<12} {:>8} {:>10} {:>10} {:>9}  {}",
            crate::text::inert(&e.key),
            e.mode,
            e.state,
            progress,
            took.to_string(),
            e.summary.events_read,
            e.summary.orders_changed,
            counts(&e.summary.effects)
        );
        if e.summary.events_skipped + e.summary.events_rejected > 0 {
            let _ = writeln!(
                out,
                "    skipped {} (other types), rejected {} (invalid)",
                e.summary.events_skipped, e.summary.events_rejected
            );
        }
        if let Some(err) = &e.error {
            let _ = writeln!(out, "    last error: {}", crate::text::inert(err));
        }
    }
    out
}
