//! The commands that run jobs: `run` (a replay to the end of its window), `consume` (the live
//! consumer) and `serve` (the scheduler daemon), each until done or stopped by a signal.

use std::path::Path;

use std::sync::Arc;

use anyhow::Context;
use sqlx::PgPool;

use super::{connect, reports, warn_in_clear, Class, Cli, Failure, Outcome};
use crate::edges::metrics::{Endpoint, Metrics};
use crate::services::scheduler;
use replay_ledger_core::config::{self, JobKind};
use replay_ledger_core::engine::effects::Effects;
use replay_ledger_core::engine::plan::{Asked, Plan};
use replay_ledger_core::services::runner::summary::counts;
use replay_ledger_core::services::runner::{self, Ended, RunError, RunnerConfig};
use replay_ledger_core::shared::shutdown;
use replay_ledger_core::tables::execution::Execution;

/// How `run` was asked to run.
pub(super) struct RunHow {
    pub(super) simulate: bool,
    pub(super) restart: bool,
    pub(super) workers: usize,
    pub(super) json: bool,
}

pub(super) async fn run(cli: &Cli, job_ref: &str, how: RunHow) -> Outcome {
    let (catalog, job) = config::find_job(&cli.jobs_dir, job_ref)?;
    let asked = Asked {
        simulate: how.simulate.then_some(true),
        restart: how.restart,
        at: chrono::Utc::now(),
    };
    let Ok(plan) = Plan::new(&job, asked) else {
        return Err(Failure::wrong_kind(
            &job,
            "replay",
            "`run` replays a window; a sweep, report or live job runs in `serve` (or `sweep`, `report`, `consume`)",
        ));
    };
    let effects = Effects::from_catalog(&catalog).context("setting up effect providers")?;
    warn_in_clear(&catalog, cli);
    let pool = connect(cli, true).await?;
    let url = cli.database_url.clone().unwrap_or_default();
    let (trigger, stop) = shutdown::channel();
    shutdown::on_signals(trigger);
    let config = RunnerConfig {
        workers: how.workers,
        progress: how.workers == 1 && !how.json,
        retries: replay_ledger_core::engine::applier::Retries {
            stale_after: sweep_stale_after(&cli.jobs_dir),
            ..Default::default()
        },
        ..RunnerConfig::default()
    };
    let end = runner::run_to_end(&pool, &url, &plan, effects, config, stop).await;
    if how.json {
        print_execution_json(&pool, &plan.key, end.execution.as_ref()).await;
    }
    let report = end.result.map_err(|e| match e {
        RunError::CandidateRule { .. } => Failure::invalid(e),
        e => Failure::failed(e),
    })?;
    if !how.json {
        print!("{report}");
    }
    let mailed = reports::after_run(&pool, &plan, &report, &cli.settings.mail).await;
    match report.ended {
        Ended::Interrupted => Err(Failure::said(Class::Interrupted)),
        _ => mailed,
    }
}

/// `run --json`: the execution as the run left it, with the figures of the pass it ran, one JSON
/// object on stdout (nothing if it was never started, e.g. the approval gate refused it).
async fn print_execution_json(pool: &PgPool, key: &str, ran: Option<&Execution>) {
    let print = |e: &Execution| {
        let view = replay_ledger_core::tables::execution::ExecutionView::of_pass(e);
        match serde_json::to_string(&view) {
            Ok(json) => println!("{json}"),
            Err(err) => eprintln!("error: could not write the summary as JSON: {err}"),
        }
    };
    if let Some(e) = ran {
        return print(e);
    }
    // The run did not record the end of a pass (refused before it opened one, held or taken over
    // by another process): the execution as stored, read here.
    match replay_ledger_core::tables::execution::load(pool, key).await {
        Ok(Some(e)) => print(&e),
        Ok(None) => {}
        Err(err) => eprintln!("error: could not read the execution's figures: {err}"),
    }
}

/// Where a daemon serves `/metrics` and `/healthz`, and how many connections at once.
pub(super) struct MetricsHow {
    pub(super) addr: std::net::SocketAddr,
    pub(super) max_connections: usize,
}

impl MetricsHow {
    pub(super) fn new(addr: std::net::SocketAddr, max_connections: usize) -> Self {
        MetricsHow {
            addr,
            max_connections,
        }
    }

    /// The endpoint asked for, or why it can never work.
    fn endpoint(&self, horizon_warning: Option<std::time::Duration>) -> Result<Endpoint, Failure> {
        let endpoint = Endpoint {
            addr: self.addr,
            limits: crate::edges::http_server::HttpLimits {
                max_connections: self.max_connections,
                ..Default::default()
            },
            horizon_warning,
            ..Endpoint::default()
        };
        endpoint
            .validate()
            .map_err(|err| Failure::invalid(format_args!("--metrics-max-connections: {err}")))?;
        Ok(endpoint)
    }
}

pub(super) async fn consume(
    cli: &Cli,
    job_ref: Option<&str>,
    from_start: bool,
    http: MetricsHow,
) -> Outcome {
    let (catalog, job) = live_job(cli, job_ref)?;
    let JobKind::Live(live) = &job.kind else {
        return Err(Failure::wrong_kind(
            &job,
            "live",
            "`consume` follows the archive with a `kind: live` job's policy",
        ));
    };
    let endpoint = http.endpoint(Some(std::time::Duration::from_secs(60)))?;
    let effects = Effects::from_catalog(&catalog).context("setting up effect providers")?;
    warn_in_clear(&catalog, cli);
    let pool = connect(cli, true).await?;
    let url = cli.database_url.clone().unwrap_or_default();
    let (trigger, stop) = shutdown::channel();
    shutdown::on_signals(trigger);
    let metrics = Arc::new(Metrics::new());
    let served = serve_metrics(&endpoint, &pool, &metrics, &stop).await?;
    spawn_heartbeat(&metrics, &stop);
    let config = replay_ledger_core::services::consumer::ConsumerConfig {
        from_start,
        retries: replay_ledger_core::engine::applier::Retries {
            stale_after: sweep_stale_after(&cli.jobs_dir),
            ..Default::default()
        },
        metrics: Some(metrics),
        ..Default::default()
    };
    let result = replay_ledger_core::services::consumer::consume(
        &pool, &url, &job, live, effects, config, stop,
    )
    .await;
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), served).await;
    let report = result.map_err(|e| match e {
        RunError::CandidateRule { .. } => Failure::invalid(e),
        e => Failure::failed(e),
    })?;
    print!("{}", consumed(&report));
    Ok(())
}

/// The job named, or the only `kind: live` job of the jobs dir.
fn live_job(
    cli: &Cli,
    job_ref: Option<&str>,
) -> Result<(config::EffectCatalog, config::Job), Failure> {
    if let Some(name) = job_ref {
        return Ok(config::find_job(&cli.jobs_dir, name)?);
    }
    let loaded = config::load_dir(&cli.jobs_dir)?;
    let mut live = loaded
        .jobs
        .iter()
        .filter(|j| matches!(j.kind, JobKind::Live(_)));
    match (live.next(), live.next()) {
        (Some(job), None) => Ok((loaded.effects.clone(), job.clone())),
        (None, _) => Err(Failure::invalid(format_args!(
            "no `kind: live` job in {}",
            cli.jobs_dir.display()
        ))),
        (Some(_), Some(_)) => Err(Failure::invalid(format_args!(
            "several `kind: live` jobs in {}: name one",
            cli.jobs_dir.display()
        ))),
    }
}

/// `/metrics` and `/healthz` of a daemon, listening before it starts working.
async fn serve_metrics(
    endpoint: &Endpoint,
    pool: &PgPool,
    metrics: &Arc<Metrics>,
    stop: &shutdown::Shutdown,
) -> Result<tokio::task::JoinHandle<()>, Failure> {
    let (_, served) = endpoint
        .start(pool, Arc::clone(metrics), stop)
        .await
        .with_context(|| {
            format!(
                "cannot listen on {} for /metrics and /healthz",
                endpoint.addr
            )
        })?;
    Ok(served)
}

/// The live consumer's heartbeat, every 5 s: proof for `/healthz` that its runtime still runs.
fn spawn_heartbeat(metrics: &Arc<Metrics>, stop: &shutdown::Shutdown) {
    let beating = Arc::clone(metrics);
    let mut stopping = stop.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(5));
        loop {
            tokio::select! {
                _ = tick.tick() => beating.beat(chrono::Utc::now()),
                _ = stopping.triggered() => return,
            }
        }
    });
}

/// What `consume` prints when it stops: this run, then the live execution since it first started.
fn consumed(report: &replay_ledger_core::services::consumer::ConsumeReport) -> String {
    let (run, all) = (&report.this_run, &report.summary);
    format!(
        "live consumer ({}) stopped: {} events in this run (skipped {}, rejected {}); effects: {}\n  since it first started: events read {}, skipped {}, rejected {}; orders changed {}; effects: {}\n",
        replay_ledger_core::services::consumer::LIVE_EXECUTION,
        report.events_this_run,
        run.events_skipped,
        run.events_rejected,
        counts(&run.effects),
        all.events_read,
        all.events_skipped,
        all.events_rejected,
        all.orders_changed,
        counts(&all.effects),
    )
}

/// The sweeper's `stale_after`, if a sweep job is configured: the age past which a reservation
/// of an idempotent type counts as abandoned. Default 5 minutes (the seed's).
pub(super) fn sweep_stale_after(jobs_dir: &Path) -> std::time::Duration {
    config::load_dir(jobs_dir)
        .ok()
        .and_then(|loaded| {
            loaded.jobs.iter().find_map(|j| match &j.kind {
                JobKind::Sweep(s) => Some(s.stale_after),
                _ => None,
            })
        })
        .unwrap_or(std::time::Duration::from_secs(300))
}

/// `serve`'s database: connected and migrated, or — when it is away for a cause time may cure (not
/// up, not resolvable, starting) — a pool that connects once it is back, and `true`: the daemon
/// starts anyway, `/healthz` at 503, and its scheduler migrates and fires once the database
/// answers. A URL that can never work, a wrong password or a missing database end it at once.
async fn connect_or_serve_anyway(cli: &Cli) -> anyhow::Result<(PgPool, bool)> {
    let url = super::database_url(cli)?;
    match replay_ledger_core::tables::db::connect_waiting(url, "serve", cli.wait_for_db).await {
        Ok(pool) => {
            if !cli.no_migrate {
                replay_ledger_core::tables::db::migrate(&pool)
                    .await
                    .context("applying migrations")?;
            }
            Ok((pool, false))
        }
        Err(e) if e.may_pass() => {
            tracing::warn!("{e}; serving /metrics and /healthz (503 until it is back) and trying again; no job fires before");
            Ok((
                replay_ledger_core::tables::db::connect_lazy(url, "serve")?,
                true,
            ))
        }
        Err(e) => Err(e.into()),
    }
}

/// `serve --console-addr`: the console beside the scheduler.
pub(super) struct ServeConsole {
    pub(super) addr: std::net::SocketAddr,
    pub(super) database_url: Option<String>,
    pub(super) args: super::console::ConsoleArgs,
}

/// `serve`: the scheduler daemon (and the console, when asked) until SIGTERM/SIGINT.
pub(super) async fn serve(cli: &Cli, http: MetricsHow, console: Option<ServeConsole>) -> Outcome {
    let endpoint = http.endpoint(None)?;
    let loaded = config::load_dir(&cli.jobs_dir)?;
    let effects = Effects::from_catalog(&loaded.effects).context("setting up effect providers")?;
    warn_in_clear(&loaded.effects, cli);
    let (pool, away_at_start) = connect_or_serve_anyway(cli).await?;
    let config = scheduler::SchedulerConfig {
        away_at_start,
        migrate_when_back: away_at_start && !cli.no_migrate,
        stale_after: sweep_stale_after(&cli.jobs_dir),
        mail: cli.settings.mail.clone(),
        ..scheduler::SchedulerConfig::default()
    };
    let url = cli.database_url.clone().unwrap_or_default();
    let daemon = scheduler::Scheduler::new(pool.clone(), url, loaded, effects, config)
        .map_err(Failure::invalid)?;
    let bound = match &console {
        Some(c) => {
            let url = c.database_url.as_deref();
            let (pool, connected) =
                super::console::pool_for_serve(url, &pool, !away_at_start).await?;
            Some(super::console::bind(cli, &c.args, c.addr, pool, connected).await?)
        }
        None => None,
    };
    let (trigger, stop) = shutdown::channel();
    shutdown::on_signals(trigger);
    let served = serve_metrics(&endpoint, &pool, &daemon.metrics(), &stop).await?;
    let console = bound.map(|b| b.spawn(stop.clone()));
    daemon.run(stop).await;
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), served).await;
    if let Some(console) = console {
        let _ = tokio::time::timeout(std::time::Duration::from_secs(15), console).await;
    }
    Ok(())
}
