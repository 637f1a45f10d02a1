//! A job with `partitions: N`: the window is split by a stable hash of `pedido_id` and each
//! partition is an execution of its own (`<key>:p<i>`), with its own checkpoint and lock. Any
//! number of workers — `--workers K` in one process, and any number of processes on any number of
//! machines — claim partitions through PostgreSQL advisory locks; a worker that dies releases its
//! lock with its connection, and another claims the partition and resumes it. The execution
//! (`<key>`, the parent) fixes the window and the pass for all partitions, and is finished when
//! every partition of its pass is.

use std::time::{Duration, Instant};

use futures::future::join_all;

use super::{run_scope, Context, Ended, Parent, RunError, RunReport, Scope};
use crate::archive::Partition;
use crate::db;
use crate::execution::State;
use crate::execution::{self, Execution, ExecutionLock, NewPass, Owner};
use crate::held::RECOVERY_PATIENCE;
use crate::summary::Summary;

/// How long a process waits for another to finish setting up the parent execution.
const SETUP_PATIENCE: Duration = Duration::from_secs(60);
/// Pause between rounds when every unfinished partition is held by someone else.
const ROUND_PAUSE: Duration = Duration::from_millis(500);

fn partition_key(parent: &str, index: u32) -> String {
    format!("{parent}:p{index}")
}

pub(super) async fn run(ctx: &Context<'_>, key: String) -> Result<RunReport, RunError> {
    let started = std::time::Instant::now();
    let count = ctx.replay.partitions;
    let parent = setup(ctx, &key).await?;
    let mut report = RunReport {
        execution_id: ctx.resolved.execution_id.clone(),
        checkpoint_key: key.clone(),
        mode: ctx.mode,
        ended: Ended::Finished,
        summary: parent.summary.clone(),
        checkpoint: parent.checkpoint,
        rejected: Vec::new(),
        elapsed: Duration::ZERO,
        events_this_run: 0,
    };
    if parent.state == State::Finished {
        report.ended = Ended::AlreadyFinished {
            at: parent.finished_at,
        };
        return Ok(report);
    }
    let fixed = Parent {
        window: parent.window(),
        pass: parent.pass,
    };
    let workers = ctx.config.workers.clamp(1, count as usize);
    let results = join_all((0..workers).map(|w| worker(ctx, &key, fixed, count, w))).await;
    let mut outcome: Result<Ended, RunError> = Ok(Ended::Finished);
    for result in results {
        match result {
            Ok((events, ended)) => {
                report.events_this_run += events;
                if ended == Ended::Interrupted && outcome.is_ok() {
                    outcome = Ok(Ended::Interrupted);
                }
            }
            Err(err) => {
                tracing::warn!(execution = %key, error = %err, "a worker stopped on an error");
                if outcome.is_ok() {
                    outcome = Err(err);
                }
            }
        }
    }
    let keys: Vec<String> = (0..count).map(|i| partition_key(&key, i)).collect();
    let parts = execution::load_many(ctx.pool, &keys).await?;
    for part in parts.iter().filter(|p| p.pass == fixed.pass) {
        report
            .rejected
            .extend(execution::rejected(ctx.pool, &part.key).await?);
    }
    report.elapsed = started.elapsed();
    let state = match &outcome {
        Ok(Ended::Finished) => State::Finished,
        Ok(_) => State::Interrupted,
        Err(_) => State::Failed,
    };
    finish_parent(ctx, &key, state, &outcome).await?;
    // The parent's figures: its partitions' tallies, summed.
    if let Some(e) = execution::load(ctx.pool, &key).await? {
        report.summary = e.summary;
    }
    report.ended = outcome?;
    Ok(report)
}

/// Fixes the parent execution under its lock: resumes its pass, or starts one (`--restart`, or
/// the first run), checking the approval gate and clearing an old simulation diff.
async fn setup(ctx: &Context<'_>, key: &str) -> Result<Execution, RunError> {
    let lock = ExecutionLock::acquire_waiting(ctx.database_url, key, "run", SETUP_PATIENCE).await?;
    let existing = execution::load(ctx.pool, key).await?;
    let result = match existing {
        Some(e) if !ctx.config.restart => {
            if e.state != State::Finished {
                if let Err(err) = crate::approval::check_resumed(ctx.approval_context(), &e) {
                    lock.release().await;
                    return Err(err.into());
                }
                execution::resume(ctx.pool, lock.owner()).await?;
            }
            Ok(e)
        }
        _ => start_parent_pass(ctx, lock.owner()).await,
    };
    lock.release().await;
    result
}

async fn start_parent_pass(ctx: &Context<'_>, owner: &Owner) -> Result<Execution, RunError> {
    let key = owner.key.as_str();
    crate::approval::gate(ctx.approval_context()).await?;
    if ctx.mode == execution::Mode::Simulation {
        crate::commission::clear_diff(ctx.pool, owner, &ctx.resolved.execution_id).await?;
    }
    let window = crate::archive::bounds(ctx.pool, ctx.resolved.from, ctx.resolved.to).await?;
    let definition = ctx.definition().to_json();
    execution::start_pass(
        ctx.pool,
        owner,
        &NewPass {
            job: &ctx.job.name,
            mode: ctx.mode,
            window_from: ctx.resolved.from,
            window_to: ctx.resolved.to,
            window,
            started_by: &ctx.config.started_by,
            pass: None,
            definition: Some(&definition),
        },
    )
    .await?;
    // Just started, but a row is outside data: someone may have deleted it since.
    execution::load(ctx.pool, key)
        .await?
        .ok_or(RunError::Database(sqlx::Error::RowNotFound))
}

/// One worker: claims unfinished partitions of the pass, one at a time, until all are finished
/// (by anyone), shutdown, or an error. Returns the events it handled. A database lost between
/// partitions (or while taking one) is waited for, up to [`RECOVERY_PATIENCE`], as a partition's
/// own batch loop waits for it.
async fn worker(
    ctx: &Context<'_>,
    key: &str,
    parent: Parent,
    count: u32,
    offset: usize,
) -> Result<(u64, Ended), RunError> {
    let keys: Vec<String> = (0..count).map(|i| partition_key(key, i)).collect();
    let mut events = 0u64;
    let mut away_since: Option<Instant> = None;
    loop {
        if ctx.shutdown.is_triggered() {
            return Ok((events, Ended::Interrupted));
        }
        match round(ctx, key, parent, &keys, offset, &mut events).await {
            Ok(Some(ended)) => return Ok((events, ended)),
            Ok(None) => away_since = None,
            Err(err)
                if err.database().is_some_and(db::is_transient)
                    && away_since.is_none_or(|t| t.elapsed() < RECOVERY_PATIENCE) =>
            {
                away_since.get_or_insert_with(Instant::now);
                let cause = err.cause(ctx.pool).await;
                tracing::warn!(
                    execution = %key,
                    database = %db::target(ctx.pool),
                    cause = %cause,
                    "lost the database between partitions; waiting for it"
                );
                pause(ctx).await;
            }
            Err(err) => return Err(err),
        }
    }
}

/// One round over the partitions still open: runs each this worker can take. `Some` when the
/// worker is done (every partition finished, or shutdown), `None` for another round.
async fn round(
    ctx: &Context<'_>,
    key: &str,
    parent: Parent,
    keys: &[String],
    offset: usize,
    events: &mut u64,
) -> Result<Option<Ended>, RunError> {
    let count = keys.len() as u32;
    let parts = execution::load_many(ctx.pool, keys).await?;
    let finished = |i: u32| {
        parts.iter().any(|p| {
            p.key == keys[i as usize] && p.pass == parent.pass && p.state == State::Finished
        })
    };
    let mut open: Vec<u32> = (0..count).filter(|i| !finished(*i)).collect();
    if open.is_empty() {
        return Ok(Some(Ended::Finished));
    }
    let shift = offset % open.len();
    open.rotate_left(shift);
    let mut progressed = false;
    for index in open {
        let scope = Scope {
            key: keys[index as usize].clone(),
            aggregate: key.to_string(),
            partition: Some(Partition { index, count }),
            parent: Some(parent),
        };
        match run_scope(ctx, scope).await {
            // Held by another worker, or taken by one since this worker took it (a lock lost
            // with a database restart): its owner runs it; this worker goes on, and comes back
            // to it in the next round if it is still open.
            Err(err) if err.lost_to_another() => continue,
            Err(err) => return Err(err),
            Ok(report) => {
                *events += report.events_this_run;
                if report.ended == Ended::Interrupted {
                    return Ok(Some(Ended::Interrupted));
                }
                progressed = true;
            }
        }
    }
    if !progressed {
        pause(ctx).await;
    }
    Ok(None)
}

/// A pause between rounds, cut short by shutdown.
async fn pause(ctx: &Context<'_>) {
    let mut shutdown = ctx.shutdown.clone();
    tokio::select! {
        _ = tokio::time::sleep(ROUND_PAUSE) => {}
        _ = shutdown.triggered() => {}
    }
}

/// Records the parent's outcome (its figures are its partitions' tallies).
async fn finish_parent(
    ctx: &Context<'_>,
    key: &str,
    state: State,
    outcome: &Result<Ended, RunError>,
) -> Result<(), RunError> {
    let lock = ExecutionLock::acquire_waiting(ctx.database_url, key, "run", SETUP_PATIENCE).await?;
    let mut tx = ctx.pool.begin().await?;
    let parent = execution::load(ctx.pool, key).await?;
    let last = parent.as_ref().and_then(|e| {
        if state == State::Finished {
            e.last
        } else {
            e.checkpoint
        }
    });
    if let (Some(last), Some(e)) = (last, &parent) {
        let scope = crate::tally::Scope::whole(key, e.pass);
        execution::advance(&mut tx, lock.owner(), &scope, last, &Summary::default()).await?;
    }
    tx.commit().await?;
    let error = outcome.as_ref().err().map(|e| e.to_string());
    execution::finish(ctx.pool, lock.owner(), state, error.as_deref()).await?;
    lock.release().await;
    Ok(())
}
