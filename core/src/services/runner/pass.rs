//! The setup and the end of a pass of one execution this process owns, in one place for a whole
//! window, a partition and a partitioned execution's parent: load what is stored, then say the
//! pass is finished already, resume it (a gated real run only under the definition it was let
//! through with), or start a new one (gated, its old diff cleared, its window fixed); and at the
//! end record how the process left it. Every write is fenced by the owner's epoch.

use chrono::{DateTime, Utc};

use super::{Context, Ended, RunError, Scope};
use crate::shared::summary::Summary;
use crate::tables::archive::{self, Window};
use crate::tables::db;
use crate::tables::execution::{self, Execution, Mode, NewPass, Owner, State};

/// Where an execution stands once this process owns it.
pub(super) enum Opened {
    /// Its current pass is finished; nothing to do (`--restart` starts a new one).
    AlreadyFinished(Execution),
    /// Its current pass goes on, from the stored checkpoint.
    Resumed(Execution),
    /// A new pass was started.
    Started(Started),
}

/// A pass just started.
pub(super) struct Started {
    /// `None`: the window holds no event.
    pub window: Option<Window>,
    pub pass: i32,
    pub at: DateTime<Utc>,
}

/// Opens the execution of `scope`: a partition belongs to its parent's pass; a whole window (or
/// the parent itself) is in its pass until `--restart`.
pub(super) async fn open(
    ctx: &Context<'_>,
    scope: &Scope,
    owner: &Owner,
) -> Result<Opened, RunError> {
    let existing = execution::load(ctx.pool, &scope.key).await?;
    let same_pass = |e: &Execution| match scope.parent {
        Some(parent) => e.pass == parent.pass,
        None => !ctx.plan.restart,
    };
    match existing {
        Some(e) if same_pass(&e) && e.state == State::Finished => Ok(Opened::AlreadyFinished(e)),
        Some(e) if same_pass(&e) => {
            if scope.parent.is_none() {
                crate::engine::approval::check_resumed(ctx.approval_context(), &e)?;
            }
            execution::resume(ctx.pool, owner).await?;
            Ok(Opened::Resumed(e))
        }
        _ => start(ctx, scope, owner).await.map(Opened::Started),
    }
}

/// Starts a pass: fixes its window (a partition takes its parent's), resets the checkpoint,
/// records the job's definition, and for a whole window checks the approval gate and clears an
/// old diff.
async fn start(ctx: &Context<'_>, scope: &Scope, owner: &Owner) -> Result<Started, RunError> {
    let (pool, plan) = (ctx.pool, ctx.plan);
    let window = match (scope.parent, scope.partition) {
        (Some(parent), Some(partition)) => match parent.window {
            Some(w) => Some(w.partition(pool, partition).await?),
            None => None,
        },
        _ => {
            crate::engine::approval::gate(ctx.approval_context()).await?;
            if plan.mode == Mode::Simulation {
                crate::tables::commission::clear_diff(pool, owner, plan.execution_id()).await?;
            }
            archive::bounds(pool, plan.window.from, plan.window.to).await?
        }
    };
    let definition = plan.definition(ctx.effects).to_json();
    let (pass, at) = execution::start_pass(
        pool,
        owner,
        &NewPass {
            job: &plan.job.name,
            mode: plan.mode,
            window_from: plan.window.from,
            window_to: plan.window.to,
            window,
            started_by: &ctx.config.started_by,
            pass: scope.parent.map(|p| p.pass),
            definition: Some(&definition),
        },
    )
    .await?;
    Ok(Started { window, pass, at })
}

/// Records how this process leaves the execution: `concluida`, `interrompida`, or `falhou` with
/// the error. Returns the row as that write left it (`None` if it is gone): the run's final
/// execution, handed back instead of read again.
pub(super) async fn close(
    ctx: &Context<'_>,
    owner: &Owner,
    result: &Result<Ended, RunError>,
) -> Result<Option<Execution>, RunError> {
    let (state, error) = match result {
        Ok(Ended::Interrupted) => (State::Interrupted, None),
        Ok(_) => (State::Finished, None),
        Err(e) => (State::Failed, Some(e.to_string())),
    };
    let closed = db::retry("finish", ctx.config.retries.db_backoff, || {
        execution::finish(ctx.pool, owner, state, error.as_deref())
    })
    .await?;
    Ok(closed)
}

/// Where a pass stands when its batch loop starts: the last settled position and the pass's
/// figures so far. The runner carries it from [`open`] (the row it read, or the pass it just
/// started) to the batch loop, so the row is not read again — except after a recovery, when the
/// database is the truth and [`Standing::stored`] reads it.
#[derive(Debug, Clone, Default)]
pub(super) struct Standing {
    pub checkpoint: Option<i64>,
    pub summary: Summary,
}

impl Standing {
    /// A resumed pass, as [`open`] read it.
    pub(super) fn of(e: &Execution) -> Standing {
        Standing {
            checkpoint: e.checkpoint,
            summary: e.pass_summary.clone(),
        }
    }

    /// A pass just started over `window`: its checkpoint before the window's first event (none
    /// when that is at i64::MIN, as [`execution::start_pass`] stores it), its figures zero.
    pub(super) fn started(window: &Window) -> Standing {
        Standing {
            checkpoint: window.first.checked_sub(1),
            summary: Summary::default(),
        }
    }

    /// The pass as stored, read after a recovery: what another process or the lost session
    /// left is the truth, not what this process counted.
    /// `None` when the row is gone.
    pub(super) async fn stored(ctx: &Context<'_>, key: &str) -> Result<Option<Standing>, RunError> {
        let stored = db::retry("load execution", ctx.config.retries.db_backoff, || {
            execution::load(ctx.pool, key)
        })
        .await?;
        Ok(stored.as_ref().map(Standing::of))
    }
}
