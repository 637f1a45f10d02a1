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

use crate::applier::{ApplyError, BatchOutcome, EffectFailure, Policy, Retries};
use crate::archive::{self, Partition, Window};
use crate::config::{Job, OnInvalidEvent, ReplayJob, ResolvedWindow};
use crate::db;
use crate::effects::Effects;
use crate::execution::{self, LockError, Mode, NewPass, Rejected, State};
use crate::held::{Held, HeldSpec, RecoverError};
use crate::shutdown::Shutdown;
use crate::summary::Summary;
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
    /// Staleness of reservations, database and provider retries.
    pub retries: Retries,
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
            retries: Retries::default(),
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
    #[error(transparent)]
    Recover(#[from] RecoverError),
    /// The database stayed away past every retry and recovery.
    #[error(
        "lost the database at {target}: {cause}; the checkpoint is kept, run it again to resume"
    )]
    DatabaseLost { target: String, cause: String },
}

impl RunError {
    /// The database failure under this error, if it is one.
    fn database(&self) -> Option<&sqlx::Error> {
        match self {
            RunError::Database(e) | RunError::Apply(ApplyError::Database(e)) => Some(e),
            RunError::Locked(LockError::Database(e)) => Some(e),
            _ => None,
        }
    }

    /// Why the database was lost, in words (see [`db::explain_loss`]).
    async fn cause(&self, pool: &PgPool) -> String {
        match self.database() {
            Some(e) => db::explain_loss(pool, e).await,
            None => self.to_string(),
        }
    }

    /// A lost database says where and why; any other error is returned as it is.
    async fn located(self, pool: &PgPool) -> RunError {
        match self.database() {
            Some(e) if db::is_transient(e) => RunError::DatabaseLost {
                target: db::target(pool),
                cause: db::explain_loss(pool, e).await,
            },
            _ => self,
        }
    }
}

impl RunReport {
    fn new(ctx: &Context<'_>, key: &str) -> Self {
        RunReport {
            execution_id: ctx.resolved.execution_id.clone(),
            checkpoint_key: key.to_string(),
            mode: ctx.mode,
            ended: Ended::Finished,
            summary: Summary::default(),
            checkpoint: None,
            rejected: Vec::new(),
            elapsed: Duration::ZERO,
            events_this_run: 0,
        }
    }
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

/// Runs one execution under its lock: resumes it, or starts a pass, then the batch loop,
/// recovering from a lost database as a restart of the process would.
async fn run_scope(ctx: &Context<'_>, scope: Scope) -> Result<RunReport, RunError> {
    let started = Instant::now();
    let (pool, key) = (ctx.pool, scope.key.clone());
    let spec = HeldSpec {
        key: &key,
        execution_id: &ctx.resolved.execution_id,
        mode: ctx.mode,
        policy: Policy::from(ctx.replay),
        retries: ctx.config.retries,
        partition: scope.partition,
        role: "run",
    };
    let mut held = Held::take(pool, ctx.database_url, spec, ctx.effects.clone()).await?;
    let mut report = RunReport::new(ctx, &key);

    let existing = execution::load(pool, &key).await?;
    // A partition belongs to its parent's pass; a whole window is in its pass until --restart.
    let same_pass = |e: &execution::Execution| match scope.parent {
        Some(parent) => e.pass == parent.pass,
        None => !ctx.config.restart,
    };
    let window = match existing {
        Some(ref e) if e.state == State::Finished && same_pass(e) => {
            report.ended = Ended::AlreadyFinished { at: e.finished_at };
            report.summary = e.summary.clone();
            report.checkpoint = e.checkpoint;
            report.rejected = execution::rejected(pool, &key).await?;
            held.release().await;
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
    held.settle_own().await?;

    let result = match window {
        Some(window) => run_recovering(ctx, &mut held, &window, &mut report).await,
        None => Ok(Ended::Finished),
    };
    report.elapsed = started.elapsed();
    let (state, error) = match &result {
        Ok(Ended::Interrupted) => (State::Interrupted, None),
        Ok(_) => (State::Finished, None),
        Err(e) => (State::Failed, Some(e.to_string())),
    };
    db::retry("finish", ctx.config.retries.db_backoff, || {
        execution::finish(pool, &key, state, error.as_deref())
    })
    .await?;
    report.rejected = execution::rejected(pool, &key).await.unwrap_or_default();
    held.release().await;
    report.ended = result?;
    Ok(report)
}

/// The batch loop, again after each loss of the database (up to [`MAX_RECOVERIES`] times):
/// [`Held::recover`] does what a restart would, and the loop resumes from the stored checkpoint.
async fn run_recovering(
    ctx: &Context<'_>,
    held: &mut Held,
    window: &Window,
    report: &mut RunReport,
) -> Result<Ended, RunError> {
    let mut recoveries = 0;
    loop {
        let result = Batches::new(ctx, held, window, report).await?.run().await;
        match result {
            Err(err)
                if recoverable(&err)
                    && recoveries < MAX_RECOVERIES
                    && !ctx.shutdown.is_triggered() =>
            {
                recoveries += 1;
                let cause = err.cause(ctx.pool).await;
                tracing::warn!(
                    execution = %held.key(),
                    database = %db::target(ctx.pool),
                    cause = %cause,
                    attempt = recoveries,
                    "lost the database; recovering"
                );
                held.recover().await.map_err(RunError::from)?;
            }
            Err(err) => return Err(err.located(ctx.pool).await),
            ok => return ok,
        }
    }
}

/// Times a run recovers from a lost database before it gives up.
const MAX_RECOVERIES: u32 = 20;

/// A failure that a restart of the process would get past: the database went away.
fn recoverable(err: &RunError) -> bool {
    match err {
        RunError::LockLost(_) => true,
        RunError::Database(e) | RunError::Apply(ApplyError::Database(e)) => db::is_transient(e),
        _ => false,
    }
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

/// The batch loop of one held execution over its window: reads batches after the checkpoint,
/// applies them `depth` at a time, and moves the checkpoint past whole, settled batches.
struct Batches<'a> {
    pool: &'a PgPool,
    held: &'a Held,
    window: &'a Window,
    batch_size: u32,
    config: &'a RunnerConfig,
    shutdown: &'a Shutdown,
    report: &'a mut RunReport,
    progress: Progress,
    /// The last settled position; `None` before the window's first event (no position lies
    /// before one at i64::MIN, so "first - 1" cannot stand for it).
    checkpoint: Option<i64>,
    /// The first position not read yet; `None` past i64::MAX.
    read_from: Option<i64>,
    exhausted: bool,
    /// False once a batch could not be wholly settled: no later batch may move the checkpoint.
    advancing: bool,
    /// Why the loop stops reading, once it knows.
    stop: Option<Result<Ended, RunError>>,
}

impl<'a> Batches<'a> {
    /// Resumes from the stored checkpoint: after a recovery, what the database holds is the
    /// truth, not what this process counted.
    async fn new(
        ctx: &Context<'a>,
        held: &'a Held,
        window: &'a Window,
        report: &'a mut RunReport,
    ) -> Result<Batches<'a>, RunError> {
        let (pool, config) = (ctx.pool, ctx.config);
        let key = report.checkpoint_key.clone();
        let stored = db::retry("load execution", config.retries.db_backoff, || {
            execution::load(pool, &key)
        })
        .await?;
        if let Some(e) = &stored {
            report.summary = e.summary.clone();
        }
        let checkpoint = stored.and_then(|e| e.checkpoint);
        let read_from = checkpoint.map_or(Some(window.first), |c| c.checked_add(1));
        let remaining = match read_from {
            Some(from) => archive::remaining(pool, window, from).await?,
            None => 0,
        };
        let progress = Progress::new(
            &key,
            window.count.max(0) as u64,
            (window.count - remaining).max(0) as u64,
            config.progress,
        );
        Ok(Batches {
            pool,
            held,
            window,
            batch_size: ctx.replay.batch_size,
            config,
            shutdown: ctx.shutdown,
            report,
            progress,
            checkpoint,
            read_from,
            exhausted: read_from.is_none(),
            advancing: true,
            stop: None,
        })
    }

    /// Batches are applied `depth` at a time: the next one is read, decided and written while the
    /// current one's effects are in flight. Their outcomes come back in order, and the checkpoint
    /// moves only while every batch before has been wholly settled (invariant 7). Under
    /// `on_invalid_event: stop` no batch may run ahead of a halt, so one at a time.
    async fn run(mut self) -> Result<Ended, RunError> {
        let applier = self.held.applier();
        let shutdown = self.shutdown;
        let depth = match applier.config().policy.on_invalid_event {
            OnInvalidEvent::Stop => 1,
            OnInvalidEvent::Record => self.config.pipeline_depth.max(1),
        };
        let mut in_flight = FuturesOrdered::new();
        loop {
            while self.stop.is_none() && !self.exhausted && in_flight.len() < depth {
                if let Some(events) = self.next_batch().await {
                    let last = events[events.len() - 1].posicao;
                    in_flight.push_back(async move {
                        let outcome = applier.apply_batch(&events, shutdown).await;
                        (last, outcome)
                    });
                }
            }
            let Some((last, outcome)) = in_flight.next().await else {
                break;
            };
            self.settle(last, outcome).await;
        }
        self.progress.finish();
        match self.stop {
            Some(ended) => ended,
            None if self.shutdown.is_triggered() || !self.advancing => Ok(Ended::Interrupted),
            None => Ok(Ended::Finished),
        }
    }

    /// Reads the next batch, or records why there is none (the end of the window, shutdown, a
    /// lost lock, a database failure).
    async fn next_batch(&mut self) -> Option<Vec<crate::domain::Event>> {
        let Some(from) = self.read_from else {
            self.exhausted = true;
            return None;
        };
        if self.shutdown.is_triggered() {
            self.stop = Some(Ok(Ended::Interrupted));
            return None;
        }
        if !self.held.still_held().await {
            self.stop = Some(Err(RunError::LockLost(self.held.key().to_string())));
            return None;
        }
        let (pool, window, size) = (self.pool, self.window, self.batch_size);
        let read = db::retry("read batch", self.config.retries.db_backoff, || {
            archive::read_batch(pool, window, from, size)
        })
        .await;
        match read {
            Err(err) => {
                self.stop = Some(Err(err.into()));
                None
            }
            Ok(events) if events.is_empty() => {
                self.exhausted = true;
                None
            }
            Ok(events) => {
                self.read_from = events[events.len() - 1].posicao.checked_add(1);
                self.exhausted = self.read_from.is_none();
                Some(events)
            }
        }
    }

    /// Takes a batch's outcome, in order. The checkpoint moves by whole batches: past a batch
    /// once every event of it is settled (invariant 7), never into its middle, so a batch left
    /// partly unsettled (a failure, a stop) is read again as a whole by the run that resumes it,
    /// and the stored summary, which counts whole batches, counts each event once.
    async fn settle(&mut self, last: i64, outcome: Result<BatchOutcome, ApplyError>) {
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(err) => {
                self.advancing = false;
                self.stop.get_or_insert(Err(err.into()));
                return;
            }
        };
        self.report.events_this_run += outcome.summary.events_read;
        self.progress.advance(outcome.summary.events_read);
        if self.advancing && outcome.settled_through >= Some(last) {
            self.report.summary.add(&outcome.summary);
            if let Err(err) = self.advance(last).await {
                self.advancing = false;
                self.stop.get_or_insert(Err(err.into()));
                return;
            }
            self.checkpoint = Some(last);
        } else {
            self.advancing = false;
        }
        self.report.checkpoint = self.checkpoint;
        tracing::debug!(execution = %self.held.key(), batch_last = last, checkpoint = ?self.checkpoint, "batch applied");
        if let Some(failure) = outcome.failure {
            self.stop
                .get_or_insert(Err(RunError::EffectFailed(failure)));
        }
        if let Some(rejected) = outcome.halted_on {
            self.stop
                .get_or_insert(Err(RunError::InvalidEvent(rejected)));
        }
    }

    /// Stores the checkpoint and the summary so far, together.
    async fn advance(&self, last: i64) -> Result<(), sqlx::Error> {
        let (pool, key, summary) = (self.pool, self.held.key(), &self.report.summary);
        db::retry(
            "advance checkpoint",
            self.config.retries.db_backoff,
            || async {
                let mut tx = pool.begin().await?;
                execution::advance(&mut tx, key, last, summary).await?;
                tx.commit().await
            },
        )
        .await
    }
}
