//! The runner: the batch loop of one execution. Takes the execution's lock, settles what an
//! earlier dead process of the same execution left reserved, then reads a batch after the
//! checkpoint, applies it and advances the checkpoint past the settled prefix, until the window
//! ends, an effect fails for good, an invalid event halts it, or shutdown is asked for (always
//! between batches). A job with `partitions` runs its partitions as executions of their own
//! (`partitioned`).

mod batches;
mod error;
mod partitioned;
mod pass;
mod progress;
pub mod summary;

use batches::Batches;
pub use error::RunError;

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use crate::engine::applier::{ApplyError, Retries};
use crate::engine::effects::Effects;
use crate::engine::plan::Plan;
use crate::services::held::{Held, HeldSpec};
use crate::shared::shutdown::Shutdown;
use crate::shared::summary::Summary;
use crate::tables::archive::{Partition, Window};
use crate::tables::db;
use crate::tables::execution::{self, Execution, Mode, Rejected};
use pass::{Opened, Standing};

/// How a run behaves beyond what its plan says.
#[derive(Debug, Clone)]
pub struct RunnerConfig {
    /// The host that runs it; recorded after the database role as `role@host`.
    pub started_by: String,
    /// Staleness of reservations, database and provider retries.
    pub retries: Retries,
    /// Show a progress bar (when stderr is a terminal) or log progress lines.
    pub progress: bool,
    /// Batches in flight at once (read and written while earlier ones' effects are in flight).
    pub pipeline_depth: usize,
    /// Partitions run at once by this process (a job with `partitions`).
    pub workers: usize,
}

impl Default for RunnerConfig {
    fn default() -> Self {
        RunnerConfig {
            started_by: db::hostname(),
            retries: Retries::default(),
            progress: true,
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
    /// Stopped between batches on request (a signal, or an ask from the console: see
    /// [`RunReport::stopped_by`]); a rerun resumes.
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
    /// Who asked from the console for the run to stop, when it stopped because of that ask.
    pub stopped_by: Option<String>,
    /// The execution as the run left it: the row the write that recorded its end returned (or,
    /// already finished, the row as found). `run --json` prints it and the report of a job with
    /// `report_to` is made of it, neither reading it again. `None` when the row is gone.
    pub execution: Option<Execution>,
}

impl RunReport {
    fn new(ctx: &Context<'_>, key: &str) -> Self {
        RunReport {
            execution_id: ctx.plan.execution_id().to_string(),
            checkpoint_key: key.to_string(),
            mode: ctx.plan.mode,
            ended: Ended::Finished,
            summary: Summary::default(),
            checkpoint: None,
            rejected: Vec::new(),
            elapsed: Duration::ZERO,
            events_this_run: 0,
            stopped_by: None,
            execution: None,
        }
    }
}

/// How a run ended, with the execution as this process last wrote it even when the run failed
/// (`falhou` with its error): what `run --json` prints either way.
#[derive(Debug)]
pub struct RunEnd {
    pub result: Result<RunReport, RunError>,
    /// `None` when this process did not record the end of the pass: it never opened one (the
    /// approval gate refused it, another process holds it) or lost it to another process.
    pub execution: Option<Execution>,
}

/// Runs a replay job's plan to the end of its window (or to a stop), resuming from its
/// checkpoint.
pub async fn run(
    pool: &PgPool,
    database_url: &str,
    plan: &Plan,
    effects: Effects,
    config: RunnerConfig,
    shutdown: Shutdown,
) -> Result<RunReport, RunError> {
    run_to_end(pool, database_url, plan, effects, config, shutdown)
        .await
        .result
}

/// [`run`], handing back the execution as the run left it whether it succeeded or not.
pub async fn run_to_end(
    pool: &PgPool,
    database_url: &str,
    plan: &Plan,
    effects: Effects,
    config: RunnerConfig,
    shutdown: Shutdown,
) -> RunEnd {
    let rule = plan.policy.rule;
    if plan.mode == crate::tables::execution::Mode::Real && !rule.in_force() {
        let result = Err(RunError::CandidateRule {
            job: plan.job.name.clone(),
            rule: rule.version(),
        });
        return RunEnd {
            result,
            execution: None,
        };
    }
    let ctx = Context {
        pool,
        database_url,
        plan,
        effects: &effects,
        config: &config,
        shutdown: &shutdown,
    };
    let key = plan.key.clone();
    let mut closed = None;
    // Boxed: held inline, the run's future grew past what the `large_futures` lint allows in
    // its callers.
    let result = if plan.replay.partitions > 1 {
        Box::pin(partitioned::run(&ctx, key, &mut closed)).await
    } else {
        let scope = Scope {
            aggregate: key.clone(),
            key,
            partition: None,
            parent: None,
        };
        Box::pin(run_scope(&ctx, scope, &mut closed)).await
    };
    // Whichever step met the loss (taking the lock, a batch, recovering, recording the end), the
    // message says which server was lost and why.
    let result = match result {
        Err(err) => Err(err.located(pool).await),
        ok => ok,
    };
    RunEnd {
        result,
        execution: closed,
    }
}

/// What every execution of one run shares.
pub(crate) struct Context<'a> {
    pool: &'a PgPool,
    database_url: &'a str,
    plan: &'a Plan,
    effects: &'a Effects,
    config: &'a RunnerConfig,
    shutdown: &'a Shutdown,
}

impl Context<'_> {
    fn approval_context(&self) -> crate::engine::approval::RunStart<'_> {
        crate::engine::approval::RunStart {
            pool: self.pool,
            plan: self.plan,
            definition: self.plan.definition(self.effects),
        }
    }
}

/// One execution: a whole window, or one partition of it.
struct Scope {
    key: String,
    /// Where its figures add up: the partitioned parent's key, or its own.
    aggregate: String,
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
/// recovering from a lost database as a restart of the process would. The row is read once, by
/// [`pass::open`]; `closed` gets it as the write that ends the pass left it (also on failure).
async fn run_scope(
    ctx: &Context<'_>,
    scope: Scope,
    closed: &mut Option<Execution>,
) -> Result<RunReport, RunError> {
    let started = Instant::now();
    let (pool, key) = (ctx.pool, scope.key.clone());
    let spec = HeldSpec {
        key: &key,
        execution_id: ctx.plan.execution_id(),
        mode: ctx.plan.mode,
        policy: ctx.plan.policy.clone(),
        retries: ctx.config.retries,
        partition: scope.partition,
        role: "run",
    };
    let mut held = Held::take(pool, ctx.database_url, spec, ctx.effects.clone()).await?;
    let mut report = RunReport::new(ctx, &key);
    let (window, standing) = match pass::open(ctx, &scope, held.owner()).await? {
        Opened::AlreadyFinished(e) => {
            report.ended = Ended::AlreadyFinished { at: e.finished_at };
            report.summary = e.pass_summary.clone();
            report.checkpoint = e.checkpoint;
            report.rejected = execution::rejected(pool, &key).await?;
            *closed = Some(e.clone());
            report.execution = Some(e);
            held.release().await;
            return Ok(report);
        }
        Opened::Resumed(e) => {
            held.begin(scope.tally(e.pass), e.started_at, true);
            report.summary = e.pass_summary.clone();
            let window = e.window().map(|w| Window {
                partition: scope.partition,
                ..w
            });
            (window, Standing::of(&e))
        }
        Opened::Started(started) => {
            held.begin(scope.tally(started.pass), started.at, false);
            let standing = started.window.as_ref().map(Standing::started);
            (started.window, standing.unwrap_or_default())
        }
    };
    held.settle_own().await?;

    let result = match window {
        Some(window) => run_recovering(ctx, &mut held, &window, &mut report, standing).await,
        None => Ok(Ended::Finished),
    };
    report.elapsed = started.elapsed();
    if let Err(err) = &result {
        if err.lost_to_another() {
            // Another process owns it now: nothing of this process may be written to it.
            let lapsed = held.lapsed();
            held.release().await;
            if lapsed {
                // Said once, for every execution taken, by whoever ends the process.
                return Err(RunError::TakenOver(key));
            }
            tracing::warn!(execution = %key, "execution taken over by another process; left to it");
            return Err(result.unwrap_err());
        }
    }
    let ended = pass::close(ctx, held.owner(), &result).await?;
    report.rejected = execution::rejected(pool, &key).await.unwrap_or_default();
    // The figures are the pass's tallies (as the closing write returned them), not what this
    // process counted.
    if let Some(e) = &ended {
        report.summary = e.pass_summary.clone();
    }
    report.execution = ended.clone();
    *closed = ended;
    held.release().await;
    report.ended = result?;
    Ok(report)
}

impl Scope {
    fn tally(&self, pass: i32) -> crate::tables::tally::Scope {
        crate::tables::tally::Scope {
            key: self.key.clone(),
            aggregate: self.aggregate.clone(),
            pass,
        }
    }
}

/// The batch loop, again after each loss of the database (up to [`MAX_RECOVERIES`] times):
/// [`Held::recover`] does what a restart would, and the loop resumes from the stored checkpoint.
/// The first loop starts from `opened`, where [`pass::open`] left the pass.
async fn run_recovering(
    ctx: &Context<'_>,
    held: &mut Held,
    window: &Window,
    report: &mut RunReport,
    opened: Standing,
) -> Result<Ended, RunError> {
    let mut recoveries = 0;
    let mut from = Some(opened);
    loop {
        let standing = match from.take() {
            Some(opened) => opened,
            // The one place a run reads its execution's row again: after a recovery (a lost
            // session, a lock taken back), what the database holds is the truth — the batches
            // this process counted may not all have been stored, or another owner moved on.
            None => match Standing::stored(ctx, held.key()).await? {
                Some(stored) => stored,
                None => Standing {
                    checkpoint: None,
                    summary: report.summary.clone(),
                },
            },
        };
        let result = Batches::new(ctx, held, window, report, standing)
            .await?
            .run()
            .await;
        match result {
            Err(err)
                if recoverable(&err)
                    && recoveries < MAX_RECOVERIES
                    && !ctx.shutdown.is_triggered() =>
            {
                recoveries += 1;
                say_loss(ctx, held, &err, recoveries).await;
                if let Err(err) = held.recover().await {
                    return Err(RunError::from(err).located(ctx.pool).await);
                }
            }
            Err(err) => return Err(err.located(ctx.pool).await),
            ok => return ok,
        }
    }
}

/// Says what was lost: the execution's lock (or its ownership, to a newer owner) is not the
/// database, and is not told as such.
async fn say_loss(ctx: &Context<'_>, held: &Held, err: &RunError, attempt: u32) {
    let lock_lost = match err {
        // The lock's session ended: the database may be gone with it, or still answer.
        RunError::LockLost(_) => db::answers(ctx.pool).await,
        other => other.database().is_some_and(execution::is_fenced),
    };
    if lock_lost {
        tracing::warn!(execution = %held.key(), attempt, "lost the lock on the execution; taking it again, or leaving it to whoever took it");
        return;
    }
    let cause = err.cause(ctx.pool).await;
    tracing::warn!(
        execution = %held.key(),
        database = %db::target(ctx.pool),
        cause = %cause,
        attempt,
        "lost the database; recovering"
    );
}

/// Times a run recovers from a lost database before it gives up.
const MAX_RECOVERIES: u32 = 20;

/// A failure that a restart of the process would get past: the database went away, or the lock
/// went with it and a write found the execution taken (the recovery then takes it back or, for
/// a partition, leaves it to its new owner).
fn recoverable(err: &RunError) -> bool {
    match err {
        RunError::LockLost(_) => true,
        RunError::Database(e) | RunError::Apply(ApplyError::Database(e)) => {
            db::is_transient(e) || execution::is_fenced(e)
        }
        _ => false,
    }
}
