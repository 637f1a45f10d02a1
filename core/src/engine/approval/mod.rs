//! The approval gate (`require_approved_simulation: true` on a replay job): finance approves a
//! simulation's diff before the real run may correct anything, and the approval holds only while
//! the data it was given for holds. Owns `reprocessamento_aprovacao`.
//!
//! - [`approve`] (`replay-ledger approve JOB`) needs a finished simulation of the job's execution
//!   whose window is unchanged since it ran: the same number of events up to the same `posicao`,
//!   and, for every order of the diff, `comissao` still at the diff's `antes`. It records who,
//!   when, which simulation pass, the diff totals, and a fingerprint: the window's events (count,
//!   highest `posicao`, a hash over id, version, position and payload) and the `comissao` rows of
//!   the diff's orders.
//! - [`gate`], called by the runner when a real run starts a new pass, refuses unless the latest
//!   approval is of the latest finished simulation and the fingerprint still holds. A resumed pass
//!   is not gated again: it continues the pass the gate let through (whose own writes change
//!   `comissao`). Refusals are [`GateError`]s; `run` exits 1 with the message.

pub mod sends;
mod store;

use chrono::{DateTime, Utc};
use sqlx::PgPool;

pub use store::{latest, list};

use crate::config::ResolvedWindow;
use crate::engine::definition::{self, Definition, FieldChange};
use crate::engine::effects::Effects;
use crate::engine::plan::Plan;
use crate::shared::summary::Totals;
use crate::tables::archive;
use crate::tables::commission;
use crate::tables::execution::{self, Execution, Mode, State};

/// A recorded approval.
#[derive(Debug, Clone, PartialEq)]
pub struct Approval {
    pub id: i64,
    pub execution_id: String,
    pub job: String,
    pub simulation_pass: i32,
    pub simulation_finished_at: DateTime<Utc>,
    /// The authenticated identity: the database role that recorded it (`session_user`), or the
    /// console's logged-in user.
    pub by: String,
    pub at: DateTime<Utc>,
    /// Free text given with the approval (`--note`); never an identity.
    pub note: Option<String>,
    pub totals: Totals,
    pub fingerprint: Fingerprint,
}

/// What the approval was given for: the job's outcome-deciding definition (with the rule's
/// version), the window's events and the diff's commissions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprint {
    /// `None` for an approval recorded before definitions were (it binds nothing, so the gate
    /// refuses it: approve a new simulation).
    pub definition: Option<Definition>,
    pub events: archive::Fingerprint,
    pub comissao: String,
}

impl Fingerprint {
    /// A digest of everything the approval binds, short enough for a table column: two approvals
    /// with the same one bound the same definition, events and commissions.
    pub fn short(&self) -> String {
        let definition = self.definition.as_ref().map(Definition::to_json);
        let whole = format!(
            "{}|{}|{}|{}|{}",
            definition.map(|d| d.to_string()).unwrap_or_default(),
            self.events.count,
            opt(self.events.max_posicao),
            self.events.hash,
            self.comissao
        );
        format!("#{:012x}", definition::digest(whole.as_bytes()) >> 16)
    }

    /// What the approval binds, in one line for a person: the rule's version, the window's
    /// events, the diff's orders, and [`Fingerprint::short`].
    pub fn summary(&self) -> String {
        let rule = self
            .definition
            .as_ref()
            .and_then(|d| d.0.get("rule").cloned())
            .unwrap_or_else(|| "no job definition".into());
        let orders = self.comissao.split(':').next().unwrap_or("?");
        format!(
            "{rule}; {} events up to posicao {}; commissions of {orders} orders; {}",
            self.events.count,
            opt(self.events.max_posicao),
            self.short()
        )
    }

    async fn now(
        pool: &PgPool,
        execution_id: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Fingerprint, sqlx::Error> {
        Ok(Fingerprint {
            definition: None,
            events: archive::fingerprint(pool, from, to).await?,
            comissao: commission::diff_fingerprint(pool, execution_id).await?,
        })
    }
}

/// Why `approve` refused.
#[derive(Debug, thiserror::Error)]
pub enum ApprovalError {
    #[error("no simulation of {execution}: run `replay-ledger run {job} --simulate` first")]
    NoSimulation { job: String, execution: String },
    #[error("the simulation of {execution} is {state}, not finished: run `replay-ledger run {job} --simulate` to finish it")]
    Unfinished {
        job: String,
        execution: String,
        state: String,
    },
    #[error("{execution}: {what} since the simulation; run a new one (`replay-ledger run {job} --simulate --restart`) and approve that")]
    Changed {
        job: String,
        execution: String,
        what: String,
    },
    #[error("{execution}: the job changed since the simulation ({changes}); run a new one (`replay-ledger run {job} --simulate --restart`) and approve that")]
    Redefined {
        job: String,
        execution: String,
        changes: String,
        /// The same, field by field (empty when the simulation recorded no definition).
        fields: Vec<FieldChange>,
    },
    #[error("{execution}: the simulation changed since it was shown (pass {seen_pass}, {seen_fingerprint} shown; pass {pass}, {fingerprint} now): review it again")]
    Stale {
        execution: String,
        seen_pass: i32,
        seen_fingerprint: String,
        pass: i32,
        fingerprint: String,
    },
    #[error("{execution}: simulation pass {pass} is already approved (by {by})")]
    AlreadyApproved {
        execution: String,
        pass: i32,
        by: String,
    },
    #[error(transparent)]
    Note(#[from] crate::shared::identity::NoteError),
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
}

/// What a person was shown when they chose to approve: the simulation's pass and the
/// [`Fingerprint::short`] of what the approval would bind. An approval given for it records
/// exactly that or nothing.
#[derive(Debug, Clone, Copy)]
pub struct Seen<'a> {
    pub pass: i32,
    pub fingerprint: &'a str,
}

/// Why the real run may not start.
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error("{execution} requires an approved simulation (require_approved_simulation: true) and none is approved: run `replay-ledger run {job} --simulate`, have finance review it, then `replay-ledger approve {job}`")]
    NotApproved { job: String, execution: String },
    #[error("{execution}: the simulation was run again after the approval (pass {approved} was approved): review it and `replay-ledger approve {job}` again")]
    Superseded {
        job: String,
        execution: String,
        approved: i32,
    },
    #[error("{execution}: {what} since the approved simulation; a new simulation is needed: `replay-ledger run {job} --simulate --restart`, then `replay-ledger approve {job}`")]
    Changed {
        job: String,
        execution: String,
        what: String,
    },
    #[error("{execution}: the job changed since the approved simulation: {changes}. A new simulation needs approval: `replay-ledger run {job} --simulate --restart`, then `replay-ledger approve {job}`")]
    Redefined {
        job: String,
        execution: String,
        changes: String,
    },
    #[error("{execution}: the job changed since this pass of the real run started (it was approved as it was): {changes}. Put the job back as it was to resume, or start a new approved pass")]
    RedefinedMidPass { execution: String, changes: String },
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
}

/// A real run about to start or resume a pass: what the gate checks.
pub struct RunStart<'a> {
    pub pool: &'a PgPool,
    pub plan: &'a Plan,
    /// The job's definition as it is now.
    pub definition: Definition,
}

/// Approves the finished simulation of the plan's execution. The approval records the database
/// role of the session (`session_user`) as who approved, with `note` as free text.
#[tracing::instrument(skip_all, fields(job = %target.plan.job.name))]
pub async fn approve(
    pool: &PgPool,
    target: Target<'_>,
    note: Option<&str>,
    now: DateTime<Utc>,
) -> Result<Approval, ApprovalError> {
    let note = note.map(crate::shared::identity::check_note).transpose()?;
    let candidate = candidate(pool, target).await?;
    let approval = store::insert(pool, candidate.to_record(note.as_deref(), now)).await?;
    tracing::info!(execution = %target.plan.execution_id(), pass = approval.simulation_pass, approval = approval.id, "simulation approved");
    Ok(approval)
}

/// A console session, as the database knows it: the digest of its token, and the idle time
/// after which it no longer counts.
#[derive(Debug, Clone, Copy)]
pub struct ConsoleSession<'a> {
    pub token_digest: &'a str,
    pub idle_timeout: std::time::Duration,
}

/// Approves as [`approve`] does — the same checks, the same fingerprint — the simulation of the
/// plan's execution, recorded as the finance account of a console session (`console:<email>`)
/// by the `security definer` function `console_aprovar`, which refuses with 42501 unless the
/// session is live and its account is a finance one.
///
/// With `seen` (the confirmation page's form), it records only an approval of exactly that pass
/// and fingerprint: anything else is [`ApprovalError::Stale`]. A pass approved already is never
/// approved again ([`ApprovalError::AlreadyApproved`]), however many times, or at once, the same
/// form is posted: the check and the insert hold one lock per execution.
#[tracing::instrument(skip_all, fields(job = %target.plan.job.name))]
pub async fn approve_in_console(
    pool: &PgPool,
    session: ConsoleSession<'_>,
    target: Target<'_>,
    seen: Option<Seen<'_>>,
    note: Option<&str>,
    now: DateTime<Utc>,
) -> Result<Approval, ApprovalError> {
    let note = note.map(crate::shared::identity::check_note).transpose()?;
    refuse_if_approved(pool, target.plan.execution_id(), seen.map(|s| s.pass)).await?;
    let candidate = candidate(pool, target).await?;
    if let Some(seen) = seen {
        candidate.matches(seen)?;
    }
    let record = candidate.to_record(note.as_deref(), now);
    let approval = match store::insert_in_console_once(pool, session, record).await? {
        store::Once::Recorded(approval) => approval,
        store::Once::Already(approval) => return Err(already(&approval)),
    };
    tracing::info!(execution = %target.plan.execution_id(), pass = approval.simulation_pass, approval = approval.id, "simulation approved in the console");
    Ok(approval)
}

/// The simulation an approval is about: the plan of its execution (the job as configured now),
/// and the job's providers (what the definition binds of them).
#[derive(Clone, Copy)]
pub struct Target<'a> {
    pub plan: &'a Plan,
    pub effects: &'a Effects,
}

/// What an approval of a finished simulation would record, once every check of [`approve`]
/// passed: nothing changed since the simulation ran.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub execution_id: String,
    pub job: String,
    pub simulation: Execution,
    pub fingerprint: Fingerprint,
}

impl Candidate {
    /// Whether this is what `seen` showed: the same simulation pass, the same fingerprint.
    pub fn matches(&self, seen: Seen<'_>) -> Result<(), ApprovalError> {
        let fingerprint = self.fingerprint.short();
        if seen.pass == self.simulation.pass && seen.fingerprint == fingerprint {
            return Ok(());
        }
        Err(ApprovalError::Stale {
            execution: self.execution_id.clone(),
            seen_pass: seen.pass,
            seen_fingerprint: crate::shared::text::inert(seen.fingerprint),
            pass: self.simulation.pass,
            fingerprint,
        })
    }

    fn to_record(&self, note: Option<&str>, now: DateTime<Utc>) -> store::NewApproval {
        store::NewApproval {
            execution_id: self.execution_id.clone(),
            job: self.job.clone(),
            simulation_pass: self.simulation.pass,
            simulation_finished_at: self.simulation.finished_at.unwrap_or(now),
            note: note.map(str::to_string),
            totals: Totals::of_summary(true, &self.simulation.summary),
            fingerprint: self.fingerprint.clone(),
        }
    }
}

/// Whether the simulation of the plan's execution may be approved now, and what the approval
/// would bind; else why not: no finished simulation, the job's definition changed since it ran
/// (field by field), or its data did. Reads only: the console shows it before offering the button.
pub async fn candidate(pool: &PgPool, target: Target<'_>) -> Result<Candidate, ApprovalError> {
    let (plan, job) = (target.plan, &target.plan.job);
    let id = plan.execution_id().to_string();
    let simulation = finished_simulation(pool, plan).await?;
    let definition = plan.definition(target.effects);
    let (fields, changes) = match Definition::from_json(simulation.definition.as_ref()) {
        Some(simulated) => {
            let fields = simulated.changes(&definition);
            let changes = definition::describe(&fields);
            (fields, changes)
        }
        None => (
            Vec::new(),
            "the simulation was run before simulations recorded the job's definition".into(),
        ),
    };
    if !changes.is_empty() {
        return Err(ApprovalError::Redefined {
            job: job.name.clone(),
            execution: id,
            changes,
            fields,
        });
    }
    let (from, to) = window_of(&simulation, &plan.window);
    // The fingerprint first, then the checks against the simulation: a write racing with them is
    // either caught by the checks or makes the fingerprint differ at the gate.
    let mut fingerprint = Fingerprint::now(pool, &id, from, to).await?;
    fingerprint.definition = Some(definition);
    if let Some(what) = drift(pool, &simulation, &fingerprint.events, &id).await? {
        return Err(ApprovalError::Changed {
            job: job.name.clone(),
            execution: id,
            what,
        });
    }
    Ok(Candidate {
        execution_id: id,
        job: job.name.clone(),
        simulation,
        fingerprint,
    })
}

/// Refuses when the latest approval of the execution is of the simulation pass `pass` (of the
/// execution's latest simulation when `None`), so a form posted again records nothing.
async fn refuse_if_approved(
    pool: &PgPool,
    execution_id: &str,
    pass: Option<i32>,
) -> Result<(), ApprovalError> {
    let Some(approval) = latest(pool, execution_id).await? else {
        return Ok(());
    };
    match pass {
        Some(pass) if approval.simulation_pass == pass => Err(already(&approval)),
        _ => Ok(()),
    }
}

fn already(approval: &Approval) -> ApprovalError {
    ApprovalError::AlreadyApproved {
        execution: approval.execution_id.clone(),
        pass: approval.simulation_pass,
        by: approval.by.clone(),
    }
}

/// The plan's finished simulation, or why there is none.
async fn finished_simulation(pool: &PgPool, plan: &Plan) -> Result<Execution, ApprovalError> {
    let (job, id) = (plan.job.name.clone(), plan.execution_id().to_string());
    let simulation = execution::load(pool, &plan.simulation_key())
        .await?
        .ok_or_else(|| ApprovalError::NoSimulation {
            job: job.clone(),
            execution: id.clone(),
        })?;
    match (simulation.finished_at, simulation.state) {
        (Some(_), State::Finished) => Ok(simulation),
        _ => Err(ApprovalError::Unfinished {
            job,
            execution: id,
            state: simulation.state.to_string(),
        }),
    }
}

/// Lets a real run's new pass start, or says why not: the latest approval must be of the latest
/// finished simulation, and what it bound — the job's definition with the rule's version, the
/// window's events, the diff's commissions — must still hold. A no-op unless the job requires an
/// approved simulation and the run is a real one.
pub async fn gate(start: RunStart<'_>) -> Result<(), GateError> {
    if !gated(start.plan) {
        return Ok(());
    }
    let id = start.plan.execution_id().to_string();
    let approval = would_open(start).await?;
    tracing::info!(execution = %id, approval = approval.id, by = %approval.by, "approved simulation checked; real run may start");
    Ok(())
}

/// What [`gate`] checks, without logging (the console shows it on a page): the approval that
/// would let the real run start now, or why none would.
pub async fn would_open(start: RunStart<'_>) -> Result<Approval, GateError> {
    let (pool, plan) = (start.pool, start.plan);
    let (job, id) = (&plan.job, &plan.window.execution_id);
    let refused = |what: String| GateError::Changed {
        job: job.name.clone(),
        execution: id.clone(),
        what,
    };
    let Some(approval) = latest(pool, id).await? else {
        return Err(GateError::NotApproved {
            job: job.name.clone(),
            execution: id.clone(),
        });
    };
    let simulation = execution::load(pool, &plan.simulation_key()).await?;
    let same = simulation.as_ref().is_some_and(|s| {
        s.pass == approval.simulation_pass && s.finished_at == Some(approval.simulation_finished_at)
    });
    if !same {
        return Err(GateError::Superseded {
            job: job.name.clone(),
            execution: id.clone(),
            approved: approval.simulation_pass,
        });
    }
    let changes = match &approval.fingerprint.definition {
        Some(approved) => definition::describe(&approved.changes(&start.definition)),
        None => "the approval was given before approvals bound the job's definition".into(),
    };
    if !changes.is_empty() {
        return Err(GateError::Redefined {
            job: job.name.clone(),
            execution: id.clone(),
            changes,
        });
    }
    let (from, to) = simulation
        .as_ref()
        .map_or((plan.window.from, plan.window.to), |s| {
            window_of(s, &plan.window)
        });
    let now = Fingerprint::now(pool, id, from, to).await?;
    let (then, now_events) = (&approval.fingerprint.events, &now.events);
    if then != now_events {
        return Err(refused(format!(
            "the window's events changed ({} events up to posicao {} at approval, {} up to {} now{})",
            then.count,
            opt(then.max_posicao),
            now_events.count,
            opt(now_events.max_posicao),
            if then.count == now_events.count { ", contents differ" } else { "" }
        )));
    }
    if approval.fingerprint.comissao != now.comissao {
        return Err(refused(
            "the commission of orders in the approved diff changed (written since by the live consumer or another run)".into(),
        ));
    }
    Ok(approval)
}

/// A gated real run resumes a pass only under the definition the pass started with (the one the
/// gate let through): a job edited mid-pass would apply what nobody approved.
pub fn check_resumed(start: RunStart<'_>, pass: &Execution) -> Result<(), GateError> {
    if !gated(start.plan) {
        return Ok(());
    }
    let Some(recorded) = Definition::from_json(pass.definition.as_ref()) else {
        return Ok(());
    };
    let changes: Vec<FieldChange> = recorded.changes(&start.definition);
    if changes.is_empty() {
        return Ok(());
    }
    Err(GateError::RedefinedMidPass {
        execution: start.plan.execution_id().to_string(),
        changes: definition::describe(&changes),
    })
}

/// Whether the plan is a real run of a job that requires an approved simulation.
fn gated(plan: &Plan) -> bool {
    plan.mode == Mode::Real && plan.replay.require_approved_simulation
}

/// What changed in the window since the simulation, if anything: events archived into it (or
/// removed), or commissions of the diff's orders written since.
async fn drift(
    pool: &PgPool,
    simulation: &Execution,
    events: &archive::Fingerprint,
    execution_id: &str,
) -> Result<Option<String>, sqlx::Error> {
    if events.count != simulation.total_events || events.max_posicao != simulation.last {
        return Ok(Some(format!(
            "the window's events changed ({} events up to posicao {} when the simulation started, {} up to {} now)",
            simulation.total_events,
            opt(simulation.last),
            events.count,
            opt(events.max_posicao)
        )));
    }
    let moved = commission::diff_drift(pool, execution_id).await?;
    Ok((moved > 0).then(|| {
        format!("the commission of {moved} order(s) of the diff changed (written by the live consumer or another run)")
    }))
}

/// The window the simulation ran over (fixed when its pass started).
fn window_of(simulation: &Execution, resolved: &ResolvedWindow) -> (DateTime<Utc>, DateTime<Utc>) {
    (
        simulation.window_from.unwrap_or(resolved.from),
        simulation.window_to.unwrap_or(resolved.to),
    )
}

fn opt(n: Option<i64>) -> String {
    n.map_or("-".into(), |n| n.to_string())
}
