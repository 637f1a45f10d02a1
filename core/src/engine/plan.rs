//! One way in: an execution plan, worked out once from a replay job and how it was asked (simulate
//! or not, a new pass or not, at what time). The plan says the resolved window, the execution id,
//! the mode, the checkpoint key and the effect policy; the CLI, the scheduler, the runner, the
//! approval gate and the console take it, and none of them resolves a window itself.

use chrono::{DateTime, Utc};

use crate::config::{Job, JobKind, ReplayJob, ResolvedWindow};
use crate::engine::applier::Policy;
use crate::engine::definition::Definition;
use crate::engine::effects::Effects;
use crate::tables::execution::{self, Execution, Mode};

/// How a run of a replay job was asked for.
#[derive(Debug, Clone, Copy)]
pub struct Asked {
    /// `Some` overrides the job's `simulate`.
    pub simulate: Option<bool>,
    /// Start a new pass from the window's start (`--restart`).
    pub restart: bool,
    /// The clock for `window: { previous: day }`: the day before this instant's, in the job's
    /// timezone.
    pub at: DateTime<Utc>,
}

impl Asked {
    /// The job as configured, at `at`.
    pub fn at(at: DateTime<Utc>) -> Asked {
        Asked {
            simulate: None,
            restart: false,
            at,
        }
    }
}

/// What one run of a replay job is.
#[derive(Debug, Clone)]
pub struct Plan {
    pub job: Job,
    pub replay: ReplayJob,
    /// The window `[from, to)` and the execution id (a `previous: day` job's carries the day).
    pub window: ResolvedWindow,
    pub mode: Mode,
    /// The checkpoint key: the execution id, or `<id>:simulacao` for a simulation.
    pub key: String,
    /// A new pass from the window's start, rather than resuming the current one.
    pub restart: bool,
    /// What the applier follows.
    pub policy: Policy,
}

/// The job given is not a replay job: only a replay has a window to plan.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("job {job} is a {kind} job, not a replay one")]
pub struct NotReplay {
    pub job: String,
    pub kind: &'static str,
}

impl Plan {
    /// The plan of `job` asked as `asked`.
    pub fn new(job: &Job, asked: Asked) -> Result<Plan, NotReplay> {
        let JobKind::Replay(replay) = &job.kind else {
            return Err(NotReplay {
                job: job.name.clone(),
                kind: job.kind.label(),
            });
        };
        let window = job.resolve_window(&replay.window, asked.at);
        let mode = match asked.simulate.unwrap_or(replay.simulate) {
            true => Mode::Simulation,
            false => Mode::Real,
        };
        Ok(Plan {
            key: execution::checkpoint_key(&window.execution_id, mode),
            job: job.clone(),
            replay: replay.clone(),
            window,
            mode,
            restart: asked.restart,
            policy: Policy::from(replay),
        })
    }

    /// The plan of `job` that an existing execution was run under, if the job (as configured
    /// now) still plans it: the same checkpoint key, resolved at the end of the execution's
    /// window (a `previous: day` job's day is the day before its window's end).
    pub fn of_execution(job: &Job, execution: &Execution) -> Option<Plan> {
        let at = execution.window_to.unwrap_or_else(Utc::now);
        let simulate = Some(execution.mode == Mode::Simulation);
        let plan = Plan::new(
            job,
            Asked {
                simulate,
                ..Asked::at(at)
            },
        )
        .ok()?;
        (plan.key == execution.key).then_some(plan)
    }

    /// The execution id: where its ledger rows, diff and corrections are filed.
    pub fn execution_id(&self) -> &str {
        &self.window.execution_id
    }

    /// The checkpoint key of this execution's simulation (its own, for a simulation).
    pub fn simulation_key(&self) -> String {
        execution::checkpoint_key(self.execution_id(), Mode::Simulation)
    }

    /// The same execution in another mode (a real run's simulation, say).
    pub fn in_mode(&self, mode: Mode) -> Plan {
        Plan {
            key: execution::checkpoint_key(self.execution_id(), mode),
            mode,
            ..self.clone()
        }
    }

    /// The job's outcome-deciding definition for this window: what an approval binds.
    pub fn definition(&self, effects: &Effects) -> Definition {
        Definition::of(&self.job, &self.replay, &self.window, effects)
    }
}
