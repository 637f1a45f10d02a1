//! The runner: the batch loop of one execution. Takes the execution's lock, settles what an
//! earlier dead process of the same execution left reserved, then reads a batch after the
//! checkpoint, applies it and advances the checkpoint past the settled prefix, until the window
//! ends, an effect fails for good, an invalid event halts it, or shutdown is asked for (always
//! between batches). A job with `partitions` runs its partitions as executions of their own
//! (`partitioned`).

mod partitioned;
mod progress;
pub mod summary;

use progress::Progress;

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use crate::applier::{Applier, ApplierConfig, ApplyError, EffectFailure};
use crate::archive::{self, Partition, Window};
use crate::config::{Job, OnInvalidEvent, ReplayJob, ResolvedWindow};
use crate::db::{self, Backoff};
use crate::effects::Effects;
use crate::execution::{self, ExecutionLock, LockError, Mode, NewPass, Rejected, Summary};
use crate::ledger::{self, Claim};
use crate::shutdown::Shutdown;
use futures::stream::{FuturesOrdered, StreamExt};

/// How a run behaves beyond what the job says.
#[derive(Debug, Clone)]
pub struct RunnerConfig {
    /// Overrides the job's `simulate` when `Some`.
    pub simulate: Option<bool>,
    /// Starts a new pass from the window's start.
    pub restart: bool,
    /// Who or what started it (`user@host`, `serve`).
    pub started_by: String,
    /// Stale reservations of idempotent types older than this are retaken.
    pub stale_after: Duration,
    pub db_backoff: Backoff,
    pub call_backoff: Backoff,
    /// Show a progress bar (when stderr is a terminal) or log progress lines.
    pub progress: bool,
    /// The clock for `window: { previous: day }`.
    pub now: DateTime<Utc>,
    /// Batches in flight at once (read and written while earlier ones' effects are in flight).
    pub pipeline_depth: usize,
    /// Partitions run at once by this process (a job with `partitions`).
    pub workers: usize,
}

impl Default for RunnerConfig {
    fn default() -> Self {
        RunnerConfig {
            simulate: None,
            restart: false,
            started_by: format!(
                "{}@{}",
                std::env::var("USER").unwrap_or_else(|_| "unknown".into()),
                db::hostname()
            ),
            stale_after: Duration::from_secs(300),
            db_backoff: Backoff::default(),
            call_backoff: Backoff {
                attempts: 4,
                base: Duration::from_millis(250),
                max: Duration::from_secs(5),
            },
            progress: true,
            now: Utc::now(),
            pipeline_depth: 2,
            workers: 1,
        }
    }
}

/// How a run ended without error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// The window is done.
    Finished,
    /// It was already finished before this run; nothing was done.
    AlreadyFinished { at: Option<DateTime<Utc>> },
    /// Stopped between batches on request; a rerun resumes.
    Interrupted,
}

/// What a run reports.
#[derive(Debug, Clone)]
pub struct RunReport {
    pub execution_id: String,
    pub checkpoint_key: String,
    pub mode: Mode,
    pub ended: Ended,
    /// The whole execution's counts (all passes of this pass, across processes).
    pub summary: Summary,
    pub checkpoint: Option<i64>,
    pub rejected: Vec<Rejected>,
    pub elapsed: Duration,
    /// Events handled by this process.
    pub events_this_run: u64,
}

/// Why a run stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Locked(#[from] LockError),
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    #[error(transparent)]
    Apply(#[from] ApplyError),
    #[error("effect {} of event {} (posicao {}) failed after retries: {}; its key was released and the checkpoint stays before it — rerun when the provider is back", .0.key, .0.evento_id, .0.posicao, .0.class)]
    EffectFailed(EffectFailure),
    #[error("invalid event {} (posicao {}) halted the run (on_invalid_event: stop): {}", .0.evento_id, .0.posicao, .0.erro)]
    InvalidEvent(Rejected),
    #[error("lost the lock on execution {0} (database connection dropped); stopped so that no two processes run it")]
    LockLost(String),
    #[error("job {0} is not a replay job")]
    NotReplay(String),
    /// `require_approved_simulation`: no approval, or the window changed since (`approval`).
    #[error(transparent)]
    NotApproved(#[from] crate::approval::GateError),
}

/// Runs a replay job to the end of its window (or to a stop), resuming from its checkpoint.
pub async fn run(
    pool: &PgPool,
    database_url: &str,
    job: &Job,
    replay: &ReplayJob,
    effects: Effects,
    config: RunnerConfig,
    shutdown: Shutdown,
) -> Result<RunReport, RunError> {
    let resolved = job.resolve_window(&replay.window, config.now);
    let mode = if config.simulate.unwrap_or(replay.simulate) {
        Mode::Simulation
    } else {
        Mode::Real
    };
    let ctx = Context {
        pool,
        database_url,
        job,
        replay,
        effects: &effects,
        config: &config,
        shutdown: &shutdown,
        resolved: &resolved,
        mode,
    };
    let key = execution::checkpoint_key(&resolved.execution_id, mode);
    if replay.partitions > 1 {
        return partitioned::run(&ctx, key).await;
    }
    run_scope(
        &ctx,
        Scope {
            key,
            partition: None,
            parent: None,
        },
    )
    .await
}

/// What every execution of one run shares.
pub(crate) struct Context<'a> {
    pool: &'a PgPool,
    database_url: &'a str,
    job: &'a Job,
    replay: &'a ReplayJob,
    effects: &'a Effects,
    config: &'a RunnerConfig,
    shutdown: &'a Shutdown,
    resolved: &'a ResolvedWindow,
    mode: Mode,
}

/// One execution: a whole window, or one partition of it.
struct Scope {
    key: String,
    partition: Option<Partition>,
    /// For a partition: the window and pass fixed by the partitioned execution.
    parent: Option<Parent>,
}

#[derive(Clone, Copy)]
struct Parent {
    window: Option<Window>,
    pass: i32,
}

/// Runs one execution under its lock: resumes it, or starts a pass, then the batch loop.
async fn run_scope(ctx: &Context<'_>, scope: Scope) -> Result<RunReport, RunError> {
    let started = Instant::now();
    let (pool, config, key) = (ctx.pool, ctx.config, scope.key.clone());
    let mut lock = ExecutionLock::acquire(ctx.database_url, &key, "run").await?;
    let mut report = RunReport {
        execution_id: ctx.resolved.execution_id.clone(),
        checkpoint_key: key.clone(),
        mode: ctx.mode,
        ended: Ended::Finished,
        summary: Summary::default(),
        checkpoint: None,
        rejected: Vec::new(),
        elapsed: Duration::ZERO,
        events_this_run: 0,
    };

    let existing = execution::load(pool, &key).await?;
    // A partition belongs to its parent's pass; a whole window is in its pass until --restart.
    let same_pass = |e: &execution::Execution| match scope.parent {
        Some(parent) => e.pass == parent.pass,
        None => !config.restart,
    };
    let window = match existing {
        Some(ref e) if e.state == "concluida" && same_pass(e) => {
            report.ended = Ended::AlreadyFinished { at: e.finished_at };
            report.summary = e.summary.clone();
            report.checkpoint = e.checkpoint;
            report.rejected = execution::rejected(pool, &key).await?;
            lock.release().await;
            return Ok(report);
        }
        Some(ref e) if same_pass(e) => {
            execution::resume(pool, &key).await?;
            report.summary = e.summary.clone();
            e.window().map(|w| Window {
                partition: scope.partition,
                ..w
            })
        }
        _ => start_pass(ctx, &scope).await?,
    };

    let claim = Claim::new(ctx.resolved.execution_id.clone());
    settle_own(ctx, &key, scope.partition).await?;
    let mut applier = Applier::new(
        pool.clone(),
        ApplierConfig {
            claim,
            checkpoint_key: key.clone(),
            mode: ctx.mode,
            policy: ctx.replay.effects.clone(),
            event_types: ctx.replay.event_types.clone(),
            on_invalid_event: ctx.replay.on_invalid_event,
            stale_after: config.stale_after,
            db_backoff: config.db_backoff,
            call_backoff: config.call_backoff,
        },
        ctx.effects.clone(),
    );

    let mut recoveries = 0;
    let result = loop {
        let Some(window) = window else {
            break Ok(Ended::Finished);
        };
        let result = batch_loop(
            pool,
            &applier,
            &window,
            ctx.replay.batch_size,
            config,
            ctx.shutdown,
            &mut lock,
            &mut report,
        )
        .await;
        // A lost database (a restart, a dropped connection) is survived as a restart of this
        // process would survive it: take the lock again, settle what this run left reserved, get
        // a new claim, and go on from the stored checkpoint.
        match result {
            Err(err)
                if recoverable(&err)
                    && recoveries < MAX_RECOVERIES
                    && !ctx.shutdown.is_triggered() =>
            {
                recoveries += 1;
                tracing::warn!(execution = %key, error = %err, attempt = recoveries, "lost the database; recovering");
                if !lock.still_held().await {
                    lock =
                        ExecutionLock::reacquire(ctx.database_url, &key, "run", RECOVERY_PATIENCE)
                            .await?;
                }
                settle_own(ctx, &key, scope.partition).await?;
                applier.renew_claim();
            }
            other => break other,
        }
    };
    report.elapsed = started.elapsed();
    let (state, error) = match &result {
        Ok(Ended::Interrupted) => ("interrompida", None),
        Ok(_) => ("concluida", None),
        Err(e) => ("falhou", Some(e.to_string())),
    };
    db::retry("finish", config.db_backoff, || {
        execution::finish(pool, &key, state, error.as_deref())
    })
    .await?;
    report.rejected = execution::rejected(pool, &key).await.unwrap_or_default();
    lock.release().await;
    report.ended = result?;
    Ok(report)
}

/// Times a run recovers from a lost database before it gives up.
const MAX_RECOVERIES: u32 = 20;
/// How long a run waits for the database to come back.
const RECOVERY_PATIENCE: Duration = Duration::from_secs(600);

/// A failure that a restart of the process would get past: the database went away.
fn recoverable(err: &RunError) -> bool {
    match err {
        RunError::LockLost(_) => true,
        RunError::Database(e) | RunError::Apply(ApplyError::Database(e)) => db::is_transient(e),
        _ => false,
    }
}

/// Settles the reservations this execution (this partition) left `reservado` in an earlier
/// process, or in this one before it lost the database: we hold the lock, so they are abandoned.
async fn settle_own(
    ctx: &Context<'_>,
    key: &str,
    partition: Option<Partition>,
) -> Result<(), RunError> {
    if ctx.mode != Mode::Real {
        return Ok(());
    }
    let idempotent = ctx.effects.idempotent_types();
    let patient = Backoff {
        attempts: 60,
        base: Duration::from_millis(200),
        max: Duration::from_secs(10),
    };
    let settled = db::retry("settle", patient, || {
        ledger::settle_abandoned(ctx.pool, &ctx.resolved.execution_id, &idempotent, partition)
    })
    .await?;
    if !settled.released.is_empty() || !settled.uncertain.is_empty() {
        tracing::warn!(
            execution = %key,
            released = settled.released.len(),
            uncertain = settled.uncertain.len(),
            "settled reservations abandoned by an earlier process of this execution"
        );
    }
    Ok(())
}

/// Starts a pass of an execution: fixes its window (a partition takes its parent's), resets the
/// checkpoint, and for a whole window checks the approval gate and clears an old diff.
async fn start_pass(ctx: &Context<'_>, scope: &Scope) -> Result<Option<Window>, RunError> {
    let pool = ctx.pool;
    let window = match (scope.parent, scope.partition) {
        (Some(parent), Some(partition)) => match parent.window {
            Some(w) => Some(w.partition(pool, partition).await?),
            None => None,
        },
        _ => {
            crate::approval::gate(pool, ctx.job, ctx.replay, ctx.mode, ctx.resolved).await?;
            if ctx.mode == Mode::Simulation {
                crate::commission::clear_diff(pool, &ctx.resolved.execution_id).await?;
            }
            archive::bounds(pool, ctx.resolved.from, ctx.resolved.to).await?
        }
    };
    execution::start_pass(
        pool,
        &NewPass {
            key: &scope.key,
            job: &ctx.job.name,
            mode: ctx.mode,
            window_from: ctx.resolved.from,
            window_to: ctx.resolved.to,
            window,
            started_by: &ctx.config.started_by,
            pass: scope.parent.map(|p| p.pass),
        },
    )
    .await?;
    Ok(window)
}

#[allow(clippy::too_many_arguments)]
async fn batch_loop(
    pool: &PgPool,
    applier: &Applier,
    window: &Window,
    batch_size: u32,
    config: &RunnerConfig,
    shutdown: &Shutdown,
    lock: &mut ExecutionLock,
    report: &mut RunReport,
) -> Result<Ended, RunError> {
    let key = report.checkpoint_key.clone();
    // The last settled position; `None` before the window's first event (no position lies
    // before one at i64::MIN, so "first - 1" cannot stand for it).
    let stored = db::retry("load execution", config.db_backoff, || {
        execution::load(pool, &key)
    })
    .await?;
    if let Some(e) = &stored {
        // After a recovery, what the database holds is the truth, not what this process counted.
        report.summary = e.summary.clone();
    }
    let mut checkpoint = stored.and_then(|e| e.checkpoint);
    // The first position not read yet; `None` past i64::MAX.
    let mut read_from = checkpoint.map_or(Some(window.first), |c| c.checked_add(1));
    let remaining = match read_from {
        Some(from) => archive::remaining(pool, window, from).await?,
        None => 0,
    };
    let mut progress = Progress::new(
        &key,
        window.count.max(0) as u64,
        (window.count - remaining).max(0) as u64,
        config.progress,
    );
    // Batches are applied `depth` at a time: the next one is read, decided and written while the
    // current one's effects are in flight. Their outcomes come back in order, and the checkpoint
    // moves only while every batch before has been wholly settled (invariant 7). Under
    // `on_invalid_event: stop` no batch may run ahead of a halt, so one at a time.
    let depth = match applier.config().on_invalid_event {
        OnInvalidEvent::Stop => 1,
        OnInvalidEvent::Record => config.pipeline_depth.max(1),
    };
    let mut in_flight = FuturesOrdered::new();
    let mut exhausted = read_from.is_none();
    let mut advancing = true;
    let mut stop: Option<Result<Ended, RunError>> = None;
    loop {
        while stop.is_none() && !exhausted && in_flight.len() < depth {
            if shutdown.is_triggered() {
                stop = Some(Ok(Ended::Interrupted));
            } else if !lock.still_held().await {
                stop = Some(Err(RunError::LockLost(key.clone())));
            } else if let Some(from) = read_from {
                let read = db::retry("read batch", config.db_backoff, || {
                    archive::read_batch(pool, window, from, batch_size)
                })
                .await;
                match read {
                    Err(err) => stop = Some(Err(err.into())),
                    Ok(events) => match events.last().map(|e| e.posicao) {
                        None => exhausted = true,
                        Some(last) => {
                            read_from = last.checked_add(1);
                            exhausted = read_from.is_none();
                            in_flight.push_back(async move {
                                let outcome = applier.apply_batch(&events, shutdown).await;
                                (last, outcome)
                            });
                        }
                    },
                }
            } else {
                exhausted = true;
            }
        }
        let Some((last, outcome)) = in_flight.next().await else {
            break;
        };
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(err) => {
                advancing = false;
                stop.get_or_insert(Err(err.into()));
                continue;
            }
        };
        report.events_this_run += outcome.summary.events_read;
        progress.advance(outcome.summary.events_read);
        // The checkpoint moves by whole batches: past a batch once every event of it is settled
        // (invariant 7), never into its middle, so a batch left partly unsettled (a failure, a
        // stop) is read again as a whole by the run that resumes it, and the stored summary, which
        // counts whole batches, counts each event once.
        let whole = advancing && outcome.settled_through >= Some(last);
        if whole {
            report.summary.add(&outcome.summary);
            let saved = db::retry("advance checkpoint", config.db_backoff, || async {
                let mut tx = pool.begin().await?;
                execution::advance(&mut tx, &key, last, &report.summary).await?;
                tx.commit().await
            })
            .await;
            if let Err(err) = saved {
                advancing = false;
                stop.get_or_insert(Err(err.into()));
                continue;
            }
            checkpoint = Some(last);
        } else {
            advancing = false;
        }
        report.checkpoint = checkpoint;
        tracing::debug!(execution = %key, batch_last = last, checkpoint = ?checkpoint, "batch applied");
        if let Some(failure) = outcome.failure {
            stop.get_or_insert(Err(RunError::EffectFailed(failure)));
        }
        if let Some(rejected) = outcome.halted_on {
            stop.get_or_insert(Err(RunError::InvalidEvent(rejected)));
        }
    }
    progress.finish();
    match stop {
        Some(ended) => ended,
        None if shutdown.is_triggered() || !advancing => Ok(Ended::Interrupted),
        None => Ok(Ended::Finished),
    }
}
