//! A job with `partitions: N`: the window is split by a stable hash of `pedido_id` and each
//! partition is an execution of its own (`<key>:p<i>`), with its own checkpoint and lock. Any
//! number of workers — `--workers K` in one process, and any number of processes on any number of
//! machines — claim partitions through PostgreSQL advisory locks; a worker that dies releases its
//! lock with its connection, and another claims the partition and resumes it. The execution
//! (`<key>`, the parent) fixes the window and the pass for all partitions, and is finished when
//! every partition of its pass is.

use std::time::{Duration, Instant};

use futures::future::join_all;

use super::pass::{self, Opened};
use super::{run_scope, Context, Ended, Parent, RunError, RunReport, Scope};
use crate::services::held::RECOVERY_PATIENCE;
use crate::shared::summary::Summary;
use crate::tables::archive::Partition;
use crate::tables::db;
use crate::tables::execution::State;
use crate::tables::execution::{self, Execution, ExecutionLock};

/// How long a process waits for another to finish setting up the parent execution.
const SETUP_PATIENCE: Duration = Duration::from_secs(60);
/// Pause between rounds when every unfinished partition is held by someone else.
const ROUND_PAUSE: Duration = Duration::from_millis(500);

fn partition_key(parent: &str, index: u32) -> String {
    format!("{parent}:p{index}")
}

pub(super) async fn run(
    ctx: &Context<'_>,
    key: String,
    closed: &mut Option<Execution>,
) -> Result<RunReport, RunError> {
    let started = std::time::Instant::now();
    let count = ctx.plan.replay.partitions;
    let parent = setup(ctx, &key).await?;
    let mut report = RunReport {
        execution_id: ctx.plan.execution_id().to_string(),
        checkpoint_key: key.clone(),
        mode: ctx.plan.mode,
        ended: Ended::Finished,
        summary: parent.pass_summary.clone(),
        checkpoint: parent.checkpoint,
        rejected: Vec::new(),
        elapsed: Duration::ZERO,
        events_this_run: 0,
        stopped_by: None,
        execution: None,
    };
    if parent.state == State::Finished {
        report.ended = Ended::AlreadyFinished {
            at: parent.finished_at,
        };
        *closed = Some(parent.clone());
        report.execution = Some(parent);
        return Ok(report);
    }
    let fixed = Parent {
        window: parent.window(),
        pass: parent.pass,
    };
    let workers = ctx.config.workers.clamp(1, count as usize);
    let results = join_all((0..workers).map(|w| worker(ctx, &key, fixed, count, w))).await;
    let mut outcome: Result<Ended, RunError> = Ok(Ended::Finished);
    let mut taken: Vec<String> = Vec::new();
    for result in results {
        match result {
            Err(RunError::TakenOver(k)) => taken.push(k),
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
    if !taken.is_empty() {
        let taken = format!("partitions {}", taken.join(", "));
        // Their new owners finish them and the execution: this process writes nothing more to
        // them. But when every partition is finished and the execution is not concluded, no one
        // else may be left to conclude it (its other processes were taken over too): this one
        // does, as the next process would.
        let all_done = (0..count).all(|i| {
            parts.iter().any(|p| {
                p.key == keys[i as usize] && p.pass == fixed.pass && p.state == State::Finished
            })
        });
        // Read again after a takeover: whether another process concluded it meanwhile.
        let concluded = execution::load(ctx.pool, &key)
            .await?
            .is_some_and(|e| e.state == State::Finished);
        if !all_done || concluded || outcome.is_err() {
            return Err(RunError::TakenOver(taken));
        }
        tracing::warn!(
            execution = %key,
            "{taken} were taken over by another process while this one could not reach the database; every partition is finished since, and this process concludes the execution"
        );
    }
    let of_pass: Vec<String> = parts
        .iter()
        .filter(|p| p.pass == fixed.pass)
        .map(|p| p.key.clone())
        .collect();
    report.rejected = execution::rejected_of(ctx.pool, &of_pass).await?;
    report.elapsed = started.elapsed();
    let ended = finish_parent(ctx, &key, &outcome).await?;
    // The parent's figures: its partitions' tallies, summed (as the closing write returned them).
    if let Some(e) = &ended {
        report.summary = e.pass_summary.clone();
        if matches!(outcome, Ok(Ended::Interrupted)) {
            report.stopped_by = e.interrupt_asked_by.clone();
        }
    }
    report.execution = ended.clone();
    *closed = ended;
    report.ended = outcome?;
    Ok(report)
}

/// Fixes the parent execution under its lock: resumes its pass, or starts one (`--restart`, or
/// the first run), as a whole window's pass is opened ([`pass::open`]).
async fn setup(ctx: &Context<'_>, key: &str) -> Result<Execution, RunError> {
    let lock = ExecutionLock::acquire_waiting(ctx.database_url, key, "run", SETUP_PATIENCE).await?;
    let scope = Scope {
        key: key.to_string(),
        aggregate: key.to_string(),
        partition: None,
        parent: None,
    };
    let opened = pass::open(ctx, &scope, lock.owner()).await;
    lock.release().await;
    match opened? {
        Opened::AlreadyFinished(e) | Opened::Resumed(e) => Ok(e),
        // Just started, but a row is outside data: someone may have deleted it since.
        Opened::Started(_) => execution::load(ctx.pool, key)
            .await?
            .ok_or(RunError::Database(sqlx::Error::RowNotFound)),
    }
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
        match run_scope(ctx, scope, &mut None).await {
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

/// Records the parent's outcome (its figures are its partitions' tallies), its checkpoint at the
/// window's end once every partition is finished. Returns the parent as that write left it.
async fn finish_parent(
    ctx: &Context<'_>,
    key: &str,
    outcome: &Result<Ended, RunError>,
) -> Result<Option<Execution>, RunError> {
    let lock = ExecutionLock::acquire_waiting(ctx.database_url, key, "run", SETUP_PATIENCE).await?;
    let mut tx = ctx.pool.begin().await?;
    let parent = execution::load(ctx.pool, key).await?;
    let finished = matches!(outcome, Ok(Ended::Finished));
    let last = parent
        .as_ref()
        .and_then(|e| if finished { e.last } else { e.checkpoint });
    if let (Some(last), Some(e)) = (last, &parent) {
        let scope = crate::tables::tally::Scope::whole(key, e.pass);
        execution::advance(&mut tx, lock.owner(), &scope, last, &Summary::default()).await?;
    }
    tx.commit().await?;
    let closed = pass::close(ctx, lock.owner(), outcome).await?;
    lock.release().await;
    Ok(closed)
}
