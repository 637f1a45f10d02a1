//! `replay-ledger serve`: the scheduler daemon. Runs a loop per job of the jobs directory that has
//! a `schedule` ([`ticker`]): it sleeps until the job's next fire instant in the job's timezone
//! ([`timing`], which also says what a daylight-saving switch does to a schedule) and fires it:
//!
//! - a replay job runs its execution through the runner (`previous: day` jobs get one execution
//!   per day, the id carrying the date; a fixed window already finished is a no-op);
//! - a sweep job makes one sweeper pass; a report job sends the finance report ([`crate::services::report`]).
//!
//! A job never runs twice at the same time: in this process a fire is skipped while the previous
//! one runs, and across processes (on any machine) a fire runs only while holding the job's
//! PostgreSQL advisory lock ([`JobLock`]); a replay additionally holds its execution's lock. On
//! start, each `previous: day` job catches up the last fire it should have made, if its execution
//! is not finished. A failed fire is logged with why and tried again at the next tick; every fire
//! reconnects through the pool, so a lost database costs fires, not the daemon.
//!
//! SIGTERM/SIGINT: no new fire starts, running jobs finish their batch (the runner watches the
//! same shutdown signal) and release their locks; after `shutdown_grace` the daemon exits anyway.
//! It also carries out what people asked for from the console ([`requests`]): every ~2 s it
//! claims pending requests (start an approved gated real run, resume a real run, sweep now) and
//! runs each through the same path as a fire of its job, scheduled or not.
//!
//! The daemon counts what it does into [`Metrics`] and beats a heartbeat every 5 s; `serve`
//! shows them at `/metrics` and `/healthz`.

mod fire;
mod lock;
mod ready;
mod requests;
pub mod runs;
mod said;
pub mod status;
pub mod ticker;
pub mod timing;

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use chrono_tz::Tz;
use sqlx::PgPool;
use tokio::task::JoinHandle;

use fire::{Scheduled, Shared};
use replay_ledger_core::config::{Job, JobKind, WindowSpec};
use replay_ledger_core::engine::effects::Effects;
use replay_ledger_core::services::counters::Metrics;
use replay_ledger_core::shared::shutdown::Shutdown;
use ticker::{SystemClock, Ticker};

pub use lock::{JobLock, JobLockError};
pub use status::{job_statuses, JobStatus, LastRun};

/// The heartbeat's schedule: `/healthz` fails when it stops beating.
const HEARTBEAT_SCHEDULE: &str = "*/5 * * * * *";

/// How the daemon behaves. Defaults in brackets.
#[derive(Debug, Clone)]
pub struct SchedulerConfig {
    /// The host of the executions it starts, recorded as `role@host` [this machine's name].
    pub started_by: String,
    /// The runner's `stale_after` [5 min]: the sweep job's, when there is one.
    pub stale_after: Duration,
    /// After SIGTERM, how long running jobs get to finish their batch before the daemon exits
    /// anyway [30 s]. Keep the service manager's stop timeout above it.
    pub shutdown_grace: Duration,
    /// Taking a job's lock gives up after this, and the fire is tried at the next tick [10 s].
    pub lock_timeout: Duration,
    /// A `previous: day` fire also resumes this job's unfinished executions of days that ended
    /// within this [7 days], so a failed night is retried at the next fire.
    pub retry_window: Duration,
    /// Catch up the last missed fire of `previous: day` jobs on start [true].
    pub catch_up: bool,
    /// The database was away when the daemon started [false]: no job fires (and no catch-up
    /// runs) until it answers; meanwhile a fire is logged as failed and `/healthz` says 503.
    pub away_at_start: bool,
    /// With `away_at_start`: apply the migrations once the database answers [false].
    pub migrate_when_back: bool,
    /// How reports and verify's findings are mailed (the process's settings) [to `outbox/`].
    pub mail: crate::services::report::MailSettings,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            started_by: replay_ledger_core::tables::db::hostname(),
            stale_after: Duration::from_secs(300),
            shutdown_grace: Duration::from_secs(30),
            lock_timeout: Duration::from_secs(10),
            retry_window: Duration::from_secs(7 * 24 * 3600),
            catch_up: true,
            away_at_start: false,
            migrate_when_back: false,
            mail: crate::services::report::MailSettings::default(),
        }
    }
}

impl SchedulerConfig {
    pub fn validate(&self) -> Result<(), String> {
        let positive = [
            ("shutdown_grace", self.shutdown_grace),
            ("lock_timeout", self.lock_timeout),
            ("stale_after", self.stale_after),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, d)| d.is_zero()) {
            return Err(format!("{name} must be positive"));
        }
        if self.started_by.trim().is_empty() {
            return Err("started_by must not be empty".into());
        }
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SchedulerError {
    #[error("invalid scheduler configuration: {0}")]
    Config(String),
    #[error("{file}: job {job}: {message}")]
    Schedule {
        job: String,
        file: String,
        message: String,
    },
}

/// The daemon, ready to run.
pub struct Scheduler {
    pool: PgPool,
    database_url: String,
    effects: Effects,
    config: SchedulerConfig,
    jobs: Vec<Scheduled>,
    /// Every job of the jobs directory, scheduled or not: what a console request may name.
    all_jobs: Vec<Job>,
    /// Every job's gate, scheduled or not: the reports' links say which simulations await approval.
    gated: crate::services::report::Gated,
    /// The `kind: live` job's policy, scheduled or not: the effects a verify job checks.
    live_policy: Option<replay_ledger_core::engine::applier::Policy>,
    /// What a verify job's proposals carry (the live job's policy and batch size); `None`
    /// without a `kind: live` job, and then verify jobs propose nothing.
    proposal_spec: Option<crate::services::verify::EmitSpec>,
    /// The jobs directory's effect types: a proposal's job is read against them.
    catalog: replay_ledger_core::config::EffectCatalog,
    metrics: Arc<Metrics>,
}

impl Scheduler {
    /// Keeps the jobs that have a `schedule` (a `live` job never does) and parses their schedules.
    pub fn new(
        pool: PgPool,
        database_url: String,
        loaded: replay_ledger_core::config::LoadedConfig,
        effects: Effects,
        config: SchedulerConfig,
    ) -> Result<Self, SchedulerError> {
        let replay_ledger_core::config::LoadedConfig {
            effects: catalog,
            jobs,
        } = loaded;
        config.validate().map_err(SchedulerError::Config)?;
        let metrics = Arc::new(Metrics::new());
        let gated = crate::services::report::Gated::of(&jobs);
        // The `kind: live` job, scheduled or not: the effects a verify job checks, and what its
        // proposals carry.
        let proposal_spec = jobs.iter().find_map(|j| match &j.kind {
            JobKind::Live(live) => Some(crate::services::verify::EmitSpec {
                policy: replay_ledger_core::engine::applier::Policy::from(live),
                batch_size: live.batch_size,
                timezone: j.timezone,
            }),
            _ => None,
        });
        let live_policy = proposal_spec.as_ref().map(|s| s.policy.clone());
        let mut scheduled = Vec::new();
        let all_jobs = jobs.clone();
        for job in jobs {
            let Some(schedule) = job.schedule.as_deref() else {
                continue;
            };
            let cron = timing::parse(schedule).map_err(|message| SchedulerError::Schedule {
                job: job.name.clone(),
                file: job.file.display().to_string(),
                message,
            })?;
            metrics.register_job(&job.name, matches!(job.kind, JobKind::Replay(_)));
            scheduled.push(Scheduled { job, cron });
        }
        Ok(Scheduler {
            pool,
            database_url,
            effects,
            config,
            jobs: scheduled,
            all_jobs,
            gated,
            live_policy,
            proposal_spec,
            catalog,
            metrics,
        })
    }

    /// The counters `/metrics` shows.
    pub fn metrics(&self) -> Arc<Metrics> {
        Arc::clone(&self.metrics)
    }

    /// Runs until `shutdown`, then stops as the module says.
    pub async fn run(self, mut shutdown: Shutdown) {
        let shared = Arc::new(Shared::new(self, shutdown.clone()));
        let loops = start_loops(&shared);
        if shared.config.away_at_start {
            tokio::spawn(ready::when_back(Arc::clone(&shared)));
        } else if shared.config.catch_up {
            spawn_catch_up(&shared);
        }
        shutdown.triggered().await;
        stop(loops, &shared).await;
    }
}

/// Starts the loop of every scheduled job and the heartbeat's.
fn start_loops(shared: &Arc<Shared>) -> Vec<JoinHandle<()>> {
    let mut loops: Vec<JoinHandle<()>> = (0..shared.jobs.len())
        .map(|idx| spawn_job_loop(shared, idx))
        .collect();
    loops.push(spawn_heartbeat(shared));
    loops.push(requests::spawn(shared));
    if shared.jobs.is_empty() {
        tracing::warn!("no job has a schedule: serving metrics only");
    }
    loops
}

/// Job `idx`'s loop: each fire instant spawns the fire, so a fire still running when the next
/// comes makes that one skip (see [`Shared::fire`]) instead of delaying it.
fn spawn_job_loop(shared: &Arc<Shared>, idx: usize) -> JoinHandle<()> {
    let s = &shared.jobs[idx];
    tracing::info!(
        job = %s.job.name,
        kind = s.job.kind.label(),
        schedule = s.job.schedule.as_deref().unwrap_or_default(),
        timezone = s.job.timezone.name(),
        next = ?timing::next_fire(&s.cron, s.job.timezone, Utc::now()).map(|t| t.to_rfc3339()),
        "job scheduled"
    );
    let shared = Arc::clone(shared);
    tokio::spawn(async move {
        let s = &shared.jobs[idx];
        let ticker = Ticker {
            job: &s.job.name,
            cron: &s.cron,
            tz: s.job.timezone,
        };
        ticker
            .run(&SystemClock, shared.shutdown.clone(), |at| {
                let shared = Arc::clone(&shared);
                tokio::spawn(async move { shared.fire(idx, at).await });
            })
            .await;
    })
}

/// A loop beating every 5 s: proof for `/healthz` that the runtime still runs the job loops.
fn spawn_heartbeat(shared: &Arc<Shared>) -> JoinHandle<()> {
    let metrics = Arc::clone(&shared.metrics);
    let shutdown = shared.shutdown.clone();
    metrics.beat(Utc::now());
    tokio::spawn(async move {
        let cron = timing::parse(HEARTBEAT_SCHEDULE).expect("the heartbeat's schedule parses");
        let ticker = Ticker {
            job: "heartbeat",
            cron: &cron,
            tz: Tz::UTC,
        };
        ticker
            .run(&SystemClock, shutdown, |_| metrics.beat(Utc::now()))
            .await;
    })
}

/// On start: for each `previous: day` replay job, the last fire before now, if its execution is
/// not finished (the fire path takes the locks and skips what is done).
fn spawn_catch_up(shared: &Arc<Shared>) {
    let now = Utc::now();
    for (idx, s) in shared.jobs.iter().enumerate() {
        let JobKind::Replay(replay) = &s.job.kind else {
            continue;
        };
        if replay.window != WindowSpec::PreviousDay {
            continue;
        }
        let Some(at) = timing::last_fire(&s.cron, s.job.timezone, now) else {
            continue;
        };
        let shared = Arc::clone(shared);
        tokio::spawn(async move { shared.catch_up(idx, at).await });
    }
}

/// Stops firing and waits (bounded) for running fires.
async fn stop(loops: Vec<JoinHandle<()>>, shared: &Shared) {
    tracing::info!("stopping: no new fires; running jobs finish their batch");
    // The loops return as soon as they see the shutdown signal.
    for job_loop in loops {
        let _ = job_loop.await;
    }
    let grace = shared.config.shutdown_grace;
    if tokio::time::timeout(grace, shared.in_flight.drain())
        .await
        .is_err()
    {
        tracing::warn!(
            grace_s = grace.as_secs(),
            "jobs still running after the grace period; exiting anyway (their executions resume at the next run)"
        );
    }
    tracing::info!("stopped");
}
