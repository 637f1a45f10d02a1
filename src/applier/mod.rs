//! The applier: the one code path for live processing and replay. They differ only in the
//! execution id, the policy and the simulate flag, exactly as in the seed. Per batch it decides
//! (domain), writes state (version-guarded upsert, or diff rows when simulating) and performs or
//! accounts for the effects through the ledger; it reports which prefix of the batch is settled so
//! the runner can move the checkpoint (invariant 7).

mod call;
mod dispatch;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use sqlx::PgPool;

use crate::commission::{self, Change};
use crate::config::{EffectMode, EffectPolicy, LiveJob, OnInvalidEvent, ReplayJob};
use crate::db::{self, Backoff};
use crate::domain::{self, CommissionRow, Decision, Event};
use crate::effects::Effects;
use crate::execution::{self, Mode, Rejected};
use crate::ledger::Claim;
use crate::shutdown::Shutdown;
use crate::summary::{EffectOutcome, StateOutcome, Summary};

pub use dispatch::EffectFailure;

/// What a job says about applying events: the part of a replay job or of the live consumer's
/// job that the applier follows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// Event types handed to the domain; others are skipped and counted.
    pub event_types: Vec<String>,
    /// Effect type → policy; a type not listed is suppressed.
    pub effects: BTreeMap<String, EffectPolicy>,
    pub on_invalid_event: OnInvalidEvent,
}

impl From<&ReplayJob> for Policy {
    fn from(job: &ReplayJob) -> Self {
        Policy {
            event_types: job.event_types.clone(),
            effects: job.effects.clone(),
            on_invalid_event: job.on_invalid_event,
        }
    }
}

impl From<&LiveJob> for Policy {
    fn from(job: &LiveJob) -> Self {
        Policy {
            event_types: job.event_types.clone(),
            effects: job.effects.clone(),
            on_invalid_event: job.on_invalid_event,
        }
    }
}

/// How long the applier waits, and how often it tries again, before it gives up on a step.
#[derive(Debug, Clone, Copy)]
pub struct Retries {
    /// A reservation of an idempotent type older than this may be retaken (the seed's 5 minutes).
    pub stale_after: Duration,
    /// Database steps: retried this way on a transient failure.
    pub db_backoff: Backoff,
    /// Provider calls of idempotent types under `on_failure: release` are retried as each type's
    /// `retry` says (effects.yaml); `Some` overrides every type's (tests use short ones).
    pub call_backoff: Option<Backoff>,
}

impl Default for Retries {
    fn default() -> Self {
        Retries {
            stale_after: Duration::from_secs(300),
            db_backoff: Backoff::default(),
            call_backoff: None,
        }
    }
}

/// How one applier behaves; everything that differs between live processing and a replay.
#[derive(Clone)]
pub struct ApplierConfig {
    /// The ledger's `execucao_id` and this process run's token.
    pub claim: Claim,
    /// Where rejected events and diff rows are filed (the checkpoint key for rejections, the
    /// execution id for diff rows).
    pub checkpoint_key: String,
    pub mode: Mode,
    pub policy: Policy,
    pub retries: Retries,
    /// The pass being applied: where its figures are tallied, and whether this execution may
    /// already have acted on a batch (see [`Pass`]).
    pub pass: Pass,
}

/// The pass an applier works in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pass {
    /// Where the figures are added up.
    pub tally: crate::tally::Scope,
    /// `Some(start of the pass)` when an earlier attempt of this pass may have acted on the
    /// batches read now (a resumed pass, a recovery, the live consumer): what it did then is
    /// told apart from what was there before the execution. `None` for a fresh pass, whose
    /// first attempt needs no such lookup.
    pub earlier_attempts_since: Option<chrono::DateTime<chrono::Utc>>,
}

/// The applier of one execution.
pub struct Applier {
    pool: PgPool,
    config: ApplierConfig,
    effects: Effects,
}

/// What one batch did.
#[derive(Debug, Default)]
pub struct BatchOutcome {
    pub summary: Summary,
    /// Every event up to this `posicao` is settled; `None` when not even the first one is.
    pub settled_through: Option<i64>,
    /// An effect that failed after its retries (its key released); the run must stop.
    pub failure: Option<EffectFailure>,
    /// An invalid event under `on_invalid_event: stop`; the batch was applied up to before it.
    pub halted_on: Option<Rejected>,
}

/// Why a batch could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    #[error("effect type {0} is requested by the domain and enabled by the job but not declared in effects.yaml")]
    UndeclaredEffect(String),
}

/// An event the domain decided on, with where it stands in the archive.
struct Decided {
    posicao: i64,
    evento_id: String,
    decision: Decision,
}

impl Applier {
    pub fn new(pool: PgPool, config: ApplierConfig, effects: Effects) -> Self {
        Applier {
            pool,
            config,
            effects,
        }
    }

    pub fn config(&self) -> &ApplierConfig {
        &self.config
    }

    pub fn effects(&self) -> &Effects {
        &self.effects
    }

    /// A new claim token for this execution, after the process settled its own reservations
    /// (a long-lived consumer recovering from an error does what a restart would), under
    /// `owner` (the epoch the holder took again, or the one it kept).
    pub fn renew_claim(&mut self, owner: crate::execution::Owner) {
        self.config.claim = Claim::owned(self.config.claim.execution_id.clone(), owner);
    }

    /// The pass this applier works in, once the holder knows it.
    pub fn set_pass(&mut self, pass: Pass) {
        self.config.pass = pass;
    }

    /// Applies one batch of events, given in `posicao` order.
    pub async fn apply_batch(
        &self,
        events: &[Event],
        shutdown: &Shutdown,
    ) -> Result<BatchOutcome, ApplyError> {
        let mut outcome = BatchOutcome::default();
        let (decided, rejected, halted_on, considered) = self.decide(events, &mut outcome.summary);
        outcome.halted_on = halted_on;
        self.write_state(&decided, &rejected, &mut outcome.summary)
            .await?;
        let unsettled = if self.config.mode == Mode::Simulation {
            self.account_effects(&decided, &mut outcome.summary).await?;
            None
        } else {
            let result = dispatch::perform(self, decided, shutdown, &mut outcome.summary).await?;
            outcome.failure = result.failure;
            result.first_unsettled
        };
        let last_considered = considered.last().map(|e| e.posicao);
        outcome.settled_through = match unsettled {
            Some(posicao) => considered
                .iter()
                .take_while(|e| e.posicao < posicao)
                .last()
                .map(|e| e.posicao),
            None => last_considered,
        };
        Ok(outcome)
    }

    /// Runs the domain over the batch. Under `on_invalid_event: stop` the batch is cut before the
    /// first invalid event, which is still recorded.
    fn decide<'e>(
        &self,
        events: &'e [Event],
        summary: &mut Summary,
    ) -> (Vec<Decided>, Vec<Rejected>, Option<Rejected>, &'e [Event]) {
        let mut decided = Vec::with_capacity(events.len());
        let mut rejected = Vec::new();
        for (i, event) in events.iter().enumerate() {
            if !self.config.policy.event_types.contains(&event.tipo) {
                summary.events_read += 1;
                summary.events_skipped += 1;
                continue;
            }
            match domain::handle(event) {
                Ok(Some(decision)) => decided.push(Decided {
                    posicao: event.posicao,
                    evento_id: event.id.clone(),
                    decision,
                }),
                Ok(None) => summary.events_skipped += 1,
                Err(invalid) => {
                    let record = Rejected {
                        evento_id: event.id.clone(),
                        posicao: event.posicao,
                        tipo: event.tipo.clone(),
                        erro: invalid.to_string(),
                    };
                    tracing::warn!(evento_id = %event.id, posicao = event.posicao, reason = invalid.reason, "invalid event rejected");
                    summary.events_read += 1;
                    summary.events_rejected += 1;
                    if self.config.policy.on_invalid_event == OnInvalidEvent::Stop {
                        rejected.push(record.clone());
                        return (decided, rejected, Some(record), &events[..i]);
                    }
                    rejected.push(record);
                    continue;
                }
            }
            summary.events_read += 1;
        }
        (decided, rejected, None, events)
    }

    /// The state step, in one transaction with the rejected events and the figures it adds
    /// (orders changed, totals): the version-guarded upsert and the corrections, or, in a
    /// simulation, the diff rows (none for an order whose current row is newer). The transaction
    /// first confirms that this applier's owner still owns the execution (invariant 17).
    async fn write_state(
        &self,
        decided: &[Decided],
        rejected: &[Rejected],
        summary: &mut Summary,
    ) -> Result<(), ApplyError> {
        if decided.is_empty() && rejected.is_empty() {
            return Ok(());
        }
        let rows = commission::newest_per_order(decided.iter().map(|d| &d.decision.commission));
        let ids: Vec<String> = rows.iter().map(|r| r.pedido_id.clone()).collect();
        let written = db::retry("state", self.config.retries.db_backoff, || async {
            let mut tx = db::begin_relaxed(&self.pool).await?;
            if let Some(owner) = &self.config.claim.owner {
                owner.confirm(&mut tx).await?;
            }
            let written = self.write_rows(&mut tx, &rows, &ids).await?;
            execution::record_rejected(&mut tx, &self.config.checkpoint_key, rejected).await?;
            tx.commit().await?;
            Ok(written)
        })
        .await?;
        let changed = match self.config.mode {
            Mode::Simulation => StateOutcome::WouldWrite,
            Mode::Real | Mode::Live => StateOutcome::Written,
        };
        count_state(decided, &written, changed, summary);
        Ok(())
    }

    /// The writes of the state step in `tx`, with their figures tallied there too.
    async fn write_rows(
        &self,
        tx: &mut sqlx::PgConnection,
        rows: &[CommissionRow],
        ids: &[String],
    ) -> Result<Written, sqlx::Error> {
        let (current, changed, figures) = match self.config.mode {
            Mode::Simulation => {
                let current = commission::current(tx, ids).await?;
                let changes = would_write(rows, &current);
                let figures =
                    commission::upsert_diff(tx, self.diff_execution_id(), &changes).await?;
                let changed = changes
                    .iter()
                    .filter(|c| {
                        c.antes != Some(c.depois) || current_version(&current, c) != Some(c.versao)
                    })
                    .map(|c| c.pedido_id.clone())
                    .collect();
                (current, changed, figures)
            }
            Mode::Real => {
                let recording = commission::Recording {
                    execucao_id: self.diff_execution_id(),
                    pass: self.config.pass.tally.pass,
                };
                let (current, written, figures) =
                    upsert_with_before(tx, rows, ids, Some(recording)).await?;
                let mut changed: HashSet<String> = written.into_iter().collect();
                if self.config.pass.earlier_attempts_since.is_some() {
                    changed.extend(self.changed_earlier(tx, rows, &current).await?);
                }
                (current, changed, figures)
            }
            Mode::Live => {
                let (current, written, _) = upsert_with_before(tx, rows, ids, None).await?;
                let figures = live_figures(rows, &current, &written);
                (current, written.into_iter().collect(), figures)
            }
        };
        crate::tally::add(tx, &self.config.pass.tally, &figures).await?;
        Ok(Written {
            current,
            changed,
            newest: rows.to_vec(),
        })
    }

    /// Orders whose row an earlier attempt of this pass changed to exactly the batch's value and
    /// version (the row is in place now, so this attempt writes nothing to them).
    async fn changed_earlier(
        &self,
        tx: &mut sqlx::PgConnection,
        rows: &[CommissionRow],
        current: &HashMap<String, commission::Current>,
    ) -> Result<Vec<String>, sqlx::Error> {
        let in_place: Vec<String> = rows
            .iter()
            .filter(|r| {
                current.get(&r.pedido_id).is_some_and(|c| {
                    c.valor_centavos == r.valor_centavos && c.versao_evento == r.versao
                })
            })
            .map(|r| r.pedido_id.clone())
            .collect();
        if in_place.is_empty() {
            return Ok(Vec::new());
        }
        let (id, pass) = (self.diff_execution_id(), self.config.pass.tally.pass);
        let corrected = commission::corrected_in_pass(tx, id, pass, &in_place).await?;
        Ok(in_place
            .into_iter()
            .filter(|o| corrected.contains_key(o))
            .collect())
    }

    /// A simulation's effects: what the ledger already holds, and what would be performed.
    async fn account_effects(
        &self,
        decided: &[Decided],
        summary: &mut Summary,
    ) -> Result<(), ApplyError> {
        let mut keys = Vec::new();
        for request in decided.iter().flat_map(|d| &d.decision.effects) {
            match self.policy_of(request.tipo) {
                Some(_) => keys.push(request.key.clone()),
                None => summary.count_effect(EffectOutcome::Suppressed, 1),
            }
        }
        if keys.is_empty() {
            return Ok(());
        }
        let registered = db::retry("ledger lookup", self.config.retries.db_backoff, || {
            crate::ledger::registered(&self.pool, &keys)
        })
        .await?;
        summary.count_effect(EffectOutcome::AlreadyRegistered, registered.len() as u64);
        summary.count_effect(
            EffectOutcome::WouldApply,
            (keys.len() - registered.len()) as u64,
        );
        Ok(())
    }

    /// The job's policy for an effect type when it is to be applied; `None` = suppressed (not
    /// listed, or `mode: suppress`).
    fn policy_of(&self, tipo: &str) -> Option<EffectPolicy> {
        self.config
            .policy
            .effects
            .get(tipo)
            .copied()
            .filter(|p| p.mode == EffectMode::Apply)
    }

    /// Diff rows are filed under the execution id (not the simulation's checkpoint key), so
    /// finance finds the diff of `replay-2026-10-14-v2` under that name.
    fn diff_execution_id(&self) -> &str {
        &self.config.claim.execution_id
    }
}

/// The guarded upsert of a batch's rows (a real run's corrections recorded with it), and each
/// order's row before it: for an order written, the row the upsert replaced (none if it
/// inserted one); for the others (a newer row kept, or the same value already in place), the
/// row as it stands. Returns that, the orders written, and what the corrections added to the
/// pass's figures.
async fn upsert_with_before(
    tx: &mut sqlx::PgConnection,
    rows: &[CommissionRow],
    ids: &[String],
    recording: Option<commission::Recording<'_>>,
) -> Result<(HashMap<String, commission::Current>, Vec<String>, Summary), sqlx::Error> {
    let upserted = commission::upsert_guarded(tx, rows, recording).await?;
    let untouched: Vec<String> = {
        let written: HashSet<&str> = upserted.written.iter().map(|(id, _)| id.as_str()).collect();
        ids.iter()
            .filter(|id| !written.contains(id.as_str()))
            .cloned()
            .collect()
    };
    let mut current = commission::current(tx, &untouched).await?;
    let mut written = Vec::with_capacity(upserted.written.len());
    for (id, before) in upserted.written {
        if let Some(before) = before {
            current.insert(id.clone(), before);
        }
        written.push(id);
    }
    Ok((current, written, upserted.figures))
}

/// The diff rows a simulation writes: every order whose current row is not newer.
fn would_write(
    rows: &[CommissionRow],
    current: &HashMap<String, commission::Current>,
) -> Vec<Change> {
    rows.iter()
        .filter(|r| {
            current
                .get(&r.pedido_id)
                .is_none_or(|c| c.versao_evento <= r.versao)
        })
        .map(|r| Change {
            pedido_id: r.pedido_id.clone(),
            antes: current.get(&r.pedido_id).map(|c| c.valor_centavos),
            depois: r.valor_centavos,
            versao: r.versao,
        })
        .collect()
}

/// What the state step found and did for a batch's orders.
struct Written {
    /// The orders' rows before the batch.
    current: HashMap<String, commission::Current>,
    /// Orders whose row this execution changed to the batch's newest value and version (now, or
    /// in an earlier attempt of this pass); in a simulation, the orders whose row would change.
    changed: HashSet<String>,
    /// The batch's newest row per order.
    newest: Vec<CommissionRow>,
}

/// The state outcome of every event (the seed's per-event words, as if applied one by one):
/// an order's row newer than the event → `ignorado-versao-mais-nova`; a row this execution
/// changed to the order's newest value → `changed` (`gravado`; in a simulation `seria-gravado`,
/// since it writes no row) — an older event of the same order too: it was written, then
/// overwritten; a row already holding that value and version → `inalterado`.
fn count_state(
    decided: &[Decided],
    written: &Written,
    changed: StateOutcome,
    summary: &mut Summary,
) {
    let newest: HashMap<&str, &CommissionRow> = written
        .newest
        .iter()
        .map(|r| (r.pedido_id.as_str(), r))
        .collect();
    for d in decided {
        let row = &d.decision.commission;
        let before = written.current.get(&row.pedido_id);
        let outcome = if before.is_some_and(|c| c.versao_evento > row.versao) {
            StateOutcome::NewerKept
        } else if written.changed.contains(&row.pedido_id) {
            changed
        } else if newest.get(row.pedido_id.as_str()).is_some_and(|n| {
            before.is_some_and(|c| {
                c.valor_centavos == n.valor_centavos && c.versao_evento == n.versao
            })
        }) {
            StateOutcome::Unchanged
        } else {
            StateOutcome::NewerKept
        };
        summary.count_state(outcome, 1);
    }
}

/// The live consumer's figures for a batch: the orders whose value the upsert changed.
fn live_figures(
    rows: &[CommissionRow],
    current: &HashMap<String, commission::Current>,
    written: &[String],
) -> Summary {
    let mut figures = Summary::default();
    for change in commission::corrections(rows, current, written) {
        figures.orders_changed += 1;
        let before = change.antes.unwrap_or(0);
        figures.total_before_centavos = figures.total_before_centavos.saturating_add(before);
        figures.total_after_centavos = figures.total_after_centavos.saturating_add(change.depois);
    }
    figures
}

/// The version of the order's current row, if it has one.
fn current_version(current: &HashMap<String, commission::Current>, change: &Change) -> Option<i64> {
    current.get(&change.pedido_id).map(|c| c.versao_evento)
}
