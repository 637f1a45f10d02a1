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

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use crate::archive;
use crate::commission;
use crate::config::{Job, ReplayJob, ResolvedWindow};
use crate::execution::State;
use crate::execution::{self, Execution, Mode};
use crate::report::Totals;

/// A recorded approval.
#[derive(Debug, Clone, PartialEq)]
pub struct Approval {
    pub id: i64,
    pub execution_id: String,
    pub job: String,
    pub simulation_pass: i32,
    pub simulation_finished_at: DateTime<Utc>,
    pub by: String,
    pub at: DateTime<Utc>,
    pub totals: Totals,
    pub fingerprint: Fingerprint,
}

/// What the approval was given for: the window's events and the diff's commissions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprint {
    pub events: archive::Fingerprint,
    pub comissao: String,
}

impl Fingerprint {
    async fn now(
        pool: &PgPool,
        execution_id: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Fingerprint, sqlx::Error> {
        Ok(Fingerprint {
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
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
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
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
}

/// Approves the finished simulation of `job`'s execution at `now`, by `by`.
#[tracing::instrument(skip_all, fields(job = %job.name), err)]
pub async fn approve(
    pool: &PgPool,
    job: &Job,
    replay: &ReplayJob,
    by: &str,
    now: DateTime<Utc>,
) -> Result<Approval, ApprovalError> {
    let resolved = job.resolve_window(&replay.window, now);
    let id = resolved.execution_id.clone();
    let key = execution::checkpoint_key(&id, Mode::Simulation);
    let simulation =
        execution::load(pool, &key)
            .await?
            .ok_or_else(|| ApprovalError::NoSimulation {
                job: job.name.clone(),
                execution: id.clone(),
            })?;
    let (Some(finished_at), State::Finished) = (simulation.finished_at, simulation.state) else {
        return Err(ApprovalError::Unfinished {
            job: job.name.clone(),
            execution: id,
            state: simulation.state.to_string(),
        });
    };
    let (from, to) = window_of(&simulation, &resolved);
    // The fingerprint first, then the checks against the simulation: a write racing with them is
    // either caught by the checks or makes the fingerprint differ at the gate.
    let fingerprint = Fingerprint::now(pool, &id, from, to).await?;
    if let Some(what) = drift(pool, &simulation, &fingerprint.events, &id).await? {
        return Err(ApprovalError::Changed {
            job: job.name.clone(),
            execution: id,
            what,
        });
    }
    let totals = Totals::of(&commission::diff_rows(pool, &id).await?);
    let (approval_id, at) = insert(
        pool,
        &id,
        &job.name,
        simulation.pass,
        finished_at,
        by,
        &totals,
        &fingerprint,
    )
    .await?;
    tracing::info!(execution = %id, pass = simulation.pass, approval = approval_id, "simulation approved");
    Ok(Approval {
        id: approval_id,
        execution_id: id,
        job: job.name.clone(),
        simulation_pass: simulation.pass,
        simulation_finished_at: finished_at,
        by: by.to_string(),
        at,
        totals,
        fingerprint,
    })
}

/// Lets a real run's new pass start, or says why not. A no-op unless the job requires an approved
/// simulation and `mode` is [`Mode::Real`].
pub async fn gate(
    pool: &PgPool,
    job: &Job,
    replay: &ReplayJob,
    mode: Mode,
    resolved: &ResolvedWindow,
) -> Result<(), GateError> {
    if mode != Mode::Real || !replay.require_approved_simulation {
        return Ok(());
    }
    let id = &resolved.execution_id;
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
    let simulation =
        execution::load(pool, &execution::checkpoint_key(id, Mode::Simulation)).await?;
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
    let (from, to) = simulation
        .as_ref()
        .map_or((resolved.from, resolved.to), |s| window_of(s, resolved));
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
    tracing::info!(execution = %id, approval = approval.id, by = %approval.by, "approved simulation checked; real run may start");
    Ok(())
}

/// The latest approval of an execution.
pub async fn latest(pool: &PgPool, execution_id: &str) -> Result<Option<Approval>, sqlx::Error> {
    let row: Option<ApprovalRow> = sqlx::query_as(
        r#"
        select id, execucao_id, job, simulacao_passagem, simulacao_concluida_em, aprovado_por,
               aprovado_em, pedidos, pedidos_alterados, total_antes_centavos,
               total_depois_centavos, eventos_total, eventos_max_posicao, eventos_hash,
               comissao_hash
        from reprocessamento_aprovacao where execucao_id = $1
        order by id desc limit 1
        "#,
    )
    .bind(execution_id)
    .fetch_optional(pool)
    .await?;
    Ok(row.map(ApprovalRow::into_approval))
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

/// Records an approval; returns its id and time.
#[allow(clippy::too_many_arguments)]
async fn insert(
    pool: &PgPool,
    execution_id: &str,
    job: &str,
    pass: i32,
    finished_at: DateTime<Utc>,
    by: &str,
    totals: &Totals,
    fingerprint: &Fingerprint,
) -> Result<(i64, DateTime<Utc>), sqlx::Error> {
    sqlx::query_as(
        r#"
        insert into reprocessamento_aprovacao
          (execucao_id, job, simulacao_passagem, simulacao_concluida_em, aprovado_por, pedidos,
           pedidos_alterados, total_antes_centavos, total_depois_centavos, eventos_total,
           eventos_max_posicao, eventos_hash, comissao_hash)
        values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
        returning id, aprovado_em
        "#,
    )
    .bind(execution_id)
    .bind(job)
    .bind(pass)
    .bind(finished_at)
    .bind(by)
    .bind(totals.orders as i64)
    .bind(totals.changed as i64)
    .bind(totals.before_centavos)
    .bind(totals.after_centavos)
    .bind(fingerprint.events.count)
    .bind(fingerprint.events.max_posicao)
    .bind(&fingerprint.events.hash)
    .bind(&fingerprint.comissao)
    .fetch_one(pool)
    .await
}

#[derive(sqlx::FromRow)]
struct ApprovalRow {
    id: i64,
    execucao_id: String,
    job: String,
    simulacao_passagem: i32,
    simulacao_concluida_em: DateTime<Utc>,
    aprovado_por: String,
    aprovado_em: DateTime<Utc>,
    pedidos: i64,
    pedidos_alterados: i64,
    total_antes_centavos: i64,
    total_depois_centavos: i64,
    eventos_total: i64,
    eventos_max_posicao: Option<i64>,
    eventos_hash: String,
    comissao_hash: String,
}

impl ApprovalRow {
    fn into_approval(self) -> Approval {
        Approval {
            id: self.id,
            execution_id: self.execucao_id,
            job: self.job,
            simulation_pass: self.simulacao_passagem,
            simulation_finished_at: self.simulacao_concluida_em,
            by: self.aprovado_por,
            at: self.aprovado_em,
            totals: Totals {
                orders: self.pedidos.max(0) as u64,
                changed: self.pedidos_alterados.max(0) as u64,
                before_centavos: self.total_antes_centavos,
                after_centavos: self.total_depois_centavos,
            },
            fingerprint: Fingerprint {
                events: archive::Fingerprint {
                    count: self.eventos_total,
                    max_posicao: self.eventos_max_posicao,
                    hash: self.eventos_hash,
                },
                comissao: self.comissao_hash,
            },
        }
    }
}
