//! A verify job's proposals: for each day it found wrong, the correction as a gated replay job of
//! that day (the job `verify --emit-jobs` would write, its report mailed to the verify job's
//! `report_to`), kept in `job_proposto` — the daemon never writes the jobs directory. `serve`
//! then runs the proposal's simulation, which finance approves and starts from the console like
//! any gated job's.
//!
//! A day already proposed keeps its proposal while its real run is not applied (a later verify
//! only confirms it, with what it found); once applied, a day found wrong again gets a new
//! proposal (`reconcile-<day>-2`, …), as `--emit-jobs` names a second file.

use std::path::{Path, PathBuf};

use chrono::Utc;
use sqlx::PgPool;

use super::emit::{job_yaml, EmitSpec};
use super::{Day, Findings};
use replay_ledger_core::config::{self, ConfigError, EffectCatalog, Job};
use replay_ledger_core::engine::plan::{Asked, Plan};
use replay_ledger_core::tables::execution::{self, State};
use replay_ledger_core::tables::proposals::{self, Proposal};

/// The most suffixes tried for one day.
const MAX_SUFFIX: u32 = 1000;

/// Where a proposal's job is said to come from, in errors and on pages.
pub fn origin(name: &str) -> PathBuf {
    Path::new("job_proposto").join(name)
}

/// The job of a proposal, read by the loader as a job file, against the jobs directory's
/// effect types.
pub fn job_of(proposal: &Proposal, effects: &EffectCatalog) -> Result<Job, ConfigError> {
    config::parse_job_text(&proposal.definition, &origin(&proposal.name), effects)
}

/// The job named `name` among the proposals, if one is.
pub async fn find(
    pool: &PgPool,
    name: &str,
    effects: &EffectCatalog,
) -> Result<Option<Job>, ProposeError> {
    match proposals::named(pool, name).await? {
        Some(p) => Ok(Some(job_of(&p, effects)?)),
        None => Ok(None),
    }
}

/// One day's proposal after a verify run, and the simulation to run for it, if any.
#[derive(Debug, Clone)]
pub struct Proposed {
    pub proposal: Proposal,
    /// Its simulation's plan, when it has none yet or the last one did not finish; `None` when
    /// a finished simulation (or its real run) is already there.
    pub simulate: Option<Plan>,
    /// Its simulation's checkpoint key (the console's page to approve it).
    pub simulation_key: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ProposeError {
    #[error(transparent)]
    Database(#[from] sqlx::Error),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("{0}")]
    Naming(String),
}

/// The proposals for the days `findings` found wrong: new ones recorded, standing ones
/// confirmed. `file_jobs` are the jobs directory's (a proposal never takes one's name).
pub async fn propose(
    pool: &PgPool,
    verify_job: &Job,
    report_to: &[String],
    findings: &Findings,
    spec: &EmitSpec,
    effects: &EffectCatalog,
    file_jobs: &[Job],
) -> Result<Vec<Proposed>, ProposeError> {
    let mut out = Vec::new();
    for day in findings.differing() {
        let standing = match proposals::newest_for_day(pool, &verify_job.name, day.day).await? {
            Some(p) => {
                let plan = simulation_plan(&p, effects)?;
                let real = plan.in_mode(replay_ledger_core::tables::execution::Mode::Real);
                let applied = execution::load(pool, &real.key)
                    .await?
                    .is_some_and(|e| e.state == State::Finished);
                (!applied).then_some((p, plan))
            }
            None => None,
        };
        let (proposal, plan) = match standing {
            // Not applied yet: confirmed with what this verify found.
            Some((p, plan)) => {
                let p = with_counts(p, day);
                proposals::confirm(pool, &p).await?;
                (p, plan)
            }
            // Never proposed, or applied and wrong again: a new proposal.
            None => {
                let p =
                    record_new(pool, verify_job, report_to, day, spec, effects, file_jobs).await?;
                let plan = simulation_plan(&p, effects)?;
                (p, plan)
            }
        };
        let simulate = match execution::load(pool, &plan.key).await? {
            Some(e) if matches!(e.state, State::Finished | State::Running) => None,
            _ => Some(plan.clone()),
        };
        out.push(Proposed {
            proposal,
            simulation_key: plan.key,
            simulate,
        });
    }
    Ok(out)
}

/// The plan of a proposal's simulation (its job read as a job file).
fn simulation_plan(p: &Proposal, effects: &EffectCatalog) -> Result<Plan, ProposeError> {
    let job = job_of(p, effects)?;
    Plan::new(
        &job,
        Asked {
            simulate: Some(true),
            ..Asked::at(Utc::now())
        },
    )
    .map_err(|e| ProposeError::Naming(e.to_string()))
}

fn with_counts(p: Proposal, day: &Day) -> Proposal {
    let c = &day.counts;
    Proposal {
        orders_wrong: c.orders_wrong as i64,
        orders_missing: c.orders_missing as i64,
        effects_missing: c.effects_missing as i64,
        difference_cents: c.difference_cents,
        ..p
    }
}

/// Records a new proposal for `day` under the first free name.
async fn record_new(
    pool: &PgPool,
    verify_job: &Job,
    report_to: &[String],
    day: &Day,
    spec: &EmitSpec,
    effects: &EffectCatalog,
    file_jobs: &[Job],
) -> Result<Proposal, ProposeError> {
    let base = format!("reconcile-{}", day.day.format("%Y-%m-%d"));
    let taken = proposals::names_like(pool, &base).await?;
    for n in 1..=MAX_SUFFIX {
        let name = match n {
            1 => base.clone(),
            n => format!("{base}-{n}"),
        };
        if taken.contains(&name) || file_jobs.iter().any(|j| j.name == name) {
            continue;
        }
        let proposal = with_counts(
            Proposal {
                name: name.clone(),
                verify_job: verify_job.name.clone(),
                day: day.day,
                definition: job_yaml(&name, day.day, spec, report_to),
                orders_wrong: 0,
                orders_missing: 0,
                effects_missing: 0,
                difference_cents: 0,
                proposed_at: Utc::now(),
                confirmed_at: Utc::now(),
            },
            day,
        );
        // What is recorded must load: checked before it is.
        job_of(&proposal, effects)?;
        if proposals::insert(pool, &proposal).await? {
            tracing::info!(verify_job = %verify_job.name, day = %day.day, proposal = %name, "proposed the correction of a day found wrong");
            return Ok(proposal);
        }
    }
    Err(ProposeError::Naming(format!(
        "{base} and its {MAX_SUFFIX} suffixes are all taken"
    )))
}
