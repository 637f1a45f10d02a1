//! The operator's commands: `migrate`, `sweep`, `review list|resolve` and `status`.

use anyhow::Context;

use super::{connect, sweep_stale_after, Cli, Failure, Outcome, ReviewAction};
use crate::services::scheduler;
use replay_ledger_core::config::{self, ConfigErrors};
use replay_ledger_core::engine::effects::Effects;
use replay_ledger_core::services::runner::summary::counts;
use replay_ledger_core::services::sweeper::{Sweeper, SweeperConfig};
use replay_ledger_core::shared::identity;
use replay_ledger_core::shared::text::inert;
use replay_ledger_core::tables::db;
use replay_ledger_core::tables::execution::ExecutionView;
use replay_ledger_core::tables::ledger::{self, Resolution, ReviewError, ReviewFilter, ReviewItem};

/// `migrate` applies the embedded migrations; `migrate --status` only lists where each stands.
pub(super) async fn migrate(cli: &Cli, status: bool) -> Outcome {
    let pool = connect(cli, false).await?;
    if !status {
        db::migrate(&pool).await.context("applying migrations")?;
        println!("migrations applied");
        return Ok(());
    }
    let list = db::migration_status(&pool)
        .await
        .context("reading the applied migrations")?;
    println!("{:<8} {:<14} DESCRIPTION", "STATE", "VERSION");
    for m in &list {
        println!(
            "{:<8} {:<14} {}",
            m.state.as_str(),
            m.version,
            m.description
        );
    }
    let pending = list
        .iter()
        .filter(|m| m.state == db::MigrationState::Pending)
        .count();
    println!("{} applied, {pending} pending", list.len() - pending);
    Ok(())
}

pub(super) async fn sweep(cli: &Cli, stale_after: Option<std::time::Duration>) -> Outcome {
    let catalog = config::load_effects(&cli.jobs_dir.join(config::EFFECTS_FILE))
        .map_err(|e| ConfigErrors(vec![e]))?;
    let effects = Effects::from_catalog(&catalog).context("setting up effect providers")?;
    let pool = connect(cli, true).await?;
    let config = SweeperConfig {
        stale_after: stale_after.unwrap_or_else(|| sweep_stale_after(&cli.jobs_dir)),
        ..SweeperConfig::default()
    };
    let sweeper = Sweeper::new(pool, effects, config).map_err(Failure::invalid)?;
    let outcome = sweeper.run_once().await?;
    println!(
        "sweep: retaken {}, completed {}, left for the next pass {}, moved to incerto {}, resent {}",
        outcome.retaken, outcome.completed, outcome.released, outcome.uncertain, outcome.resent
    );
    Ok(())
}

pub(super) async fn review(cli: &Cli, action: &ReviewAction) -> Outcome {
    match action {
        ReviewAction::List {
            json,
            effect_type,
            execution,
            older_than,
        } => {
            let filter = ReviewFilter {
                effect_type: effect_type.clone(),
                execution: execution.clone(),
                older_than: *older_than,
            };
            let pool = connect(cli, true).await?;
            let items = ledger::review_list_filtered(&pool, &filter).await?;
            if *json {
                println!("{}", serde_json::to_string_pretty(&items)?);
            } else {
                print!("{}", review_table(&items));
            }
            Ok(())
        }
        ReviewAction::Resolve {
            key,
            sent,
            note,
            by,
            ..
        } => resolve(cli, key, *sent, note.as_deref(), by.as_deref()).await,
    }
}

/// `review resolve KEY --sent|--not-sent [--note TEXT]`: the decision is recorded under the
/// session's database role; `--by` (deprecated) becomes the note.
async fn resolve(
    cli: &Cli,
    key: &str,
    sent: bool,
    note: Option<&str>,
    by: Option<&str>,
) -> Outcome {
    if by.is_some() {
        eprintln!("warning: --by is deprecated: who resolved it is the database role you connect as; the name is kept as the note (use --note)");
    }
    let note = note
        .or(by)
        .map(identity::check_note)
        .transpose()
        .map_err(|err| Failure::invalid(format_args!("--note: {err}")))?;
    let resolution = if sent {
        Resolution::Sent
    } else {
        Resolution::NotSent
    };
    let pool = connect(cli, true).await?;
    match ledger::resolve(&pool, key, resolution, note.as_deref()).await {
        Ok(by) => {
            let done = if sent {
                "marked concluido (it went out)"
            } else {
                "queued for a resend; the next `sweep` sends it"
            };
            println!("{}: {done}; recorded as `{}`", inert(key), inert(&by));
            Ok(())
        }
        Err(ReviewError::Database(e)) => Err(e.into()),
        Err(err) => Err(Failure::invalid(err)),
    }
}

/// `--older-than`: a duration (`2h`, `30m`, `1d`) of at most 100 years.
pub(super) fn parse_age(text: &str) -> Result<std::time::Duration, String> {
    const LIMIT: std::time::Duration = std::time::Duration::from_secs(100 * 31_557_600);
    let age = humantime::parse_duration(text).map_err(|e| e.to_string())?;
    if age > LIMIT {
        return Err("at most 100 years".into());
    }
    Ok(age)
}

/// The review queue as a table with a header; every value from the ledger is made inert.
fn review_table(items: &[ReviewItem]) -> String {
    if items.is_empty() {
        return "review queue is empty\n".into();
    }
    let header = [
        "key",
        "status",
        "order",
        "amount",
        "type",
        "execution",
        "reason",
        "age",
        "attempts",
        "last error",
    ];
    let rows: Vec<[String; 10]> = items
        .iter()
        .map(|i| {
            let reason = match (i.motivo, i.status_http) {
                (Some(m), Some(status)) => format!("{m} {status}"),
                (Some(m), None) => m.to_string(),
                (None, _) => "-".into(),
            };
            let age = std::time::Duration::from_secs(i.idade_segundos.max(0) as u64);
            [
                inert(&i.key),
                i.status.clone(),
                inert(i.pedido_id.as_deref().unwrap_or("-")),
                i.valor_centavos
                    .map_or("-".into(), replay_ledger_core::shared::money::brl),
                inert(&i.effect_type),
                inert(&i.execution_id),
                reason,
                humantime::format_duration(age).to_string(),
                i.tentativas.to_string(),
                inert(i.ultimo_erro.as_deref().unwrap_or("-")),
            ]
        })
        .collect();
    let mut widths = header.map(|h| h.chars().count());
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        format!("{}\n", padded.join("  ").trim_end())
    };
    let mut out = line(&header.map(String::from));
    for row in &rows {
        out.push_str(&line(row));
    }
    out
}

pub(super) async fn status(cli: &Cli, json: bool) -> Outcome {
    let pool = connect(cli, true).await?;
    let executions = replay_ledger_core::tables::execution::list(&pool).await?;
    let lag = replay_ledger_core::services::consumer::lag(
        &pool,
        &replay_ledger_core::services::consumer::horizon::HorizonWatch::default(),
    )
    .await?;
    let review = ledger::review_queue_size(&pool).await?;
    let runs = scheduler::runs::all(&pool).await?;
    let rebuild = replay_ledger_core::services::rebuild::latest(&pool).await?;
    let jobs = config::load_dir(&cli.jobs_dir)
        .map(|l| scheduler::job_statuses(&l.jobs, &executions, &runs, chrono::Utc::now()))
        .map_err(|e| e.to_string());
    if json {
        let views: Vec<ExecutionView<'_>> = executions.iter().map(ExecutionView::from).collect();
        let value = serde_json::json!({ "executions": views, "review_queue": review,
            "jobs": jobs.as_ref().ok(), "jobs_error": jobs.as_ref().err(),
            "live_lag": lag.as_ref().map(lag_json),
            "rebuild": rebuild.as_ref().map(rebuild_json) });
        println!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(());
    }
    print!("{}", status_table(&executions, chrono::Utc::now()));
    if let Some(lag) = &lag {
        print!("{}", lag_text(lag));
    }
    println!("review queue: {review} effect(s) incerto");
    if let Some(r) = &rebuild {
        println!("{}", rebuild_text(r));
    }
    match jobs {
        Ok(jobs) => print!("jobs:\n{}", scheduler::status::render(&jobs)),
        Err(e) => println!("jobs: cannot load {}: {e}", cli.jobs_dir.display()),
    }
    Ok(())
}

/// The newest rebuild of `comissao` in one line: its state, how far, what waits.
fn rebuild_text(r: &replay_ledger_core::services::rebuild::Rebuild) -> String {
    let fingerprint = r.fingerprint.as_deref().unwrap_or("-");
    format!(
        "rebuild {} of comissao: {}, {} of {} events read ({:.0}%), {}, {} orders re-derived from live writes; {} orders differ, fingerprint {fingerprint}",
        r.id,
        r.stage,
        r.events_read,
        r.events_total,
        r.progress() * 100.0,
        r.load_checkpoint(),
        r.orders_rederived,
        r.orders_differing.map_or("-".into(), |n| n.to_string()),
    )
}

fn rebuild_json(r: &replay_ledger_core::services::rebuild::Rebuild) -> serde_json::Value {
    serde_json::json!({
        "id": r.id, "state": r.stage, "in_progress": r.stage.in_progress(),
        "rule": r.rule, "events_read": r.events_read, "events_total": r.events_total,
        "progress": r.progress(), "checkpoint": r.checkpoint,
        "checkpoint_pedido_id": r.checkpoint_order,
        "orders_rederived": r.orders_rederived,
        "count_current": r.count_current, "checksum_current": r.checksum_current,
        "count_new": r.count_new, "checksum_new": r.checksum_new,
        "orders_differing": r.orders_differing, "fingerprint": r.fingerprint,
        "approval": r.approval_id, "swapped_at": r.swapped_at,
    })
}

/// The executions as a table with a header: what each is, how far, how long, its figures.
fn status_table(
    executions: &[replay_ledger_core::tables::execution::Execution],
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
        let live = e.mode == replay_ledger_core::tables::execution::Mode::Live;
        let progress = match e.progress_percent() {
            Some(p) => format!("{p:.0}%"),
            None if live => "live".into(),
            None => "-".into(),
        };
        let end = e.finished_at.unwrap_or(now);
        let took = (end - e.started_at).to_std().unwrap_or_default();
        let took = humantime::format_duration(std::time::Duration::from_secs(took.as_secs()));
        let _ = writeln!(
            out,
            "{:<40} {:<9} {:<12} {:>8} {:>10} {:>10} {:>9}  {}",
            replay_ledger_core::shared::text::inert(&e.key),
            e.mode,
            e.state.label_in(e.mode),
            progress,
            took.to_string(),
            e.summary.events_read,
            e.summary.orders_changed,
            counts(&e.summary.effects)
        );
        if live || e.summary.events_skipped + e.summary.events_rejected > 0 {
            let _ = writeln!(
                out,
                "    skipped {} (other types), rejected {} (invalid)",
                e.summary.events_skipped, e.summary.events_rejected
            );
        }
        if let Some(err) = &e.error {
            let _ = writeln!(
                out,
                "    last error: {}",
                replay_ledger_core::shared::text::inert(err)
            );
        }
    }
    out
}

/// The live consumer's lag as `status` prints it: what waits, and what holds its checkpoint.
fn lag_text(lag: &replay_ledger_core::services::consumer::Lag) -> String {
    let waiting = format!(
        "live consumer: {} event(s) archived and not yet applied{}",
        lag.pending.events,
        if lag.pending.events > 0 {
            format!(" (oldest {:.0}s)", lag.pending.oldest_age_seconds)
        } else {
            String::new()
        }
    );
    let h = &lag.horizon;
    let holder = match h.xid {
        None => "no transaction open on the server holds its checkpoint".to_string(),
        Some(xid) => {
            let who = match (&h.prepared, h.pid) {
                (Some(gid), _) => format!("prepared transaction {}", inert(gid)),
                (None, Some(pid)) => format!("pid {pid}"),
                (None, None) => "a session".to_string(),
            };
            let open = if h.age_exact {
                format!(
                    "open {}",
                    humantime::format_duration(std::time::Duration::from_secs(h.age.as_secs()))
                )
            } else {
                "how long it has been open is hidden from this role: see consume's /metrics"
                    .to_string()
            };
            format!(
                "its checkpoint waits for transaction {xid} ({who}, database {}, {open})",
                inert(h.database.as_deref().unwrap_or("?"))
            )
        }
    };
    format!("{waiting}; {holder}\n")
}

/// The live consumer's lag in `status --json`.
fn lag_json(lag: &replay_ledger_core::services::consumer::Lag) -> serde_json::Value {
    let h = &lag.horizon;
    serde_json::json!({
        "events_waiting": lag.pending.events,
        "oldest_waiting_seconds": lag.pending.oldest_age_seconds,
        "horizon_xid": h.xid.map(|x| x.to_string()),
        "horizon_age_seconds": h.age_exact.then_some(h.age.as_secs()),
        "horizon_pid": h.pid,
        "horizon_database": h.database,
        "horizon_prepared": h.prepared,
        "checkpoint_xid": lag.checkpoint.xid.to_string(),
        "checkpoint_posicao": lag.checkpoint.posicao,
    })
}
