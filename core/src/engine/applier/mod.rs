//! The applier: the one code path for live processing and replay. They differ only in the
//! execution id, the policy and the simulate flag, exactly as in the seed. Per batch it decides
//! (domain), writes state (version-guarded upsert, or diff rows when simulating) and performs or
//! accounts for the effects through the ledger; it reports which prefix of the batch is settled so
//! the runner can move the checkpoint (invariant `checkpoint-after-settle`).

mod call;
mod dispatch;
mod resend;
mod state;

use std::collections::BTreeMap;
use std::time::Duration;

use sqlx::PgPool;

use crate::config::{EffectMode, EffectPolicy, LiveJob, OnInvalidEvent, ReplayJob};
use crate::domain::{self, Decision, Event};
use crate::engine::effects::Effects;
use crate::shared::shutdown::Shutdown;
use crate::shared::summary::{EffectOutcome, Summary};
use crate::tables::db::{self, Backoff};
use crate::tables::execution::{Mode, Rejected};
use crate::tables::ledger::Claim;

pub use call::{Queued, Resent};
pub use dispatch::EffectFailure;
pub use resend::resend;

/// What a job says about applying events: the part of a replay job or of the live consumer's
/// job that the applier follows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// Event types handed to the domain; others are skipped and counted.
    pub event_types: Vec<String>,
    /// Effect type → policy; a type not listed is suppressed.
    pub effects: BTreeMap<String, EffectPolicy>,
    pub on_invalid_event: OnInvalidEvent,
    /// The commission rule the domain decides with (the live consumer's: the one in force).
    pub rule: domain::Rule,
}

impl From<&ReplayJob> for Policy {
    fn from(job: &ReplayJob) -> Self {
        Policy {
            event_types: job.event_types.clone(),
            effects: job.effects.clone(),
            on_invalid_event: job.on_invalid_event,
            rule: job.rule,
        }
    }
}

impl From<&LiveJob> for Policy {
    fn from(job: &LiveJob) -> Self {
        Policy {
            event_types: job.event_types.clone(),
            effects: job.effects.clone(),
            on_invalid_event: job.on_invalid_event,
            rule: domain::Rule::IN_FORCE,
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
    pub tally: crate::tables::tally::Scope,
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

/// A batch's place in the order of state steps: it waits for the previous batch's state step to
/// end (committed, or failed and rolled back), and lets the next one start when dropped. A
/// failed step lets the next one go too: what it did not write, the run that resumes from the
/// checkpoint before it writes again, in order, before that next batch's rows.
pub struct StateTurn {
    after: Option<tokio::sync::oneshot::Receiver<()>>,
    _done: Option<tokio::sync::oneshot::Sender<()>>,
}

impl StateTurn {
    /// The turn of a batch with none before it in flight.
    pub fn first() -> StateTurn {
        StateTurn {
            after: None,
            _done: None,
        }
    }

    /// The turn of the next batch read: after the one `last` stands for (none: it is the first);
    /// `last` then stands for this one.
    pub fn next(last: &mut Option<tokio::sync::oneshot::Receiver<()>>) -> StateTurn {
        let (done, ended) = tokio::sync::oneshot::channel();
        StateTurn {
            after: last.replace(ended),
            _done: Some(done),
        }
    }

    async fn wait(&mut self) {
        if let Some(after) = self.after.take() {
            // Sent or dropped alike: the previous batch's state step is over.
            let _ = after.await;
        }
    }
}

/// An event the domain decided on, with where it stands in the archive.
struct Decided {
    posicao: i64,
    event_id: String,
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
    pub fn renew_claim(
        &mut self,
        owner: crate::tables::execution::Owner,
        lease: crate::tables::execution::Lease,
    ) {
        self.config.claim =
            Claim::owned(self.config.claim.execution_id.clone(), owner).with_lease(lease);
    }

    /// The pass this applier works in, once the holder knows it.
    pub fn set_pass(&mut self, pass: Pass) {
        self.config.pass = pass;
    }

    /// Applies one batch of events, given in `posicao` order, when no other batch of this
    /// applier is in flight.
    pub async fn apply_batch(
        &self,
        events: &[Event],
        shutdown: &Shutdown,
    ) -> Result<BatchOutcome, ApplyError> {
        self.apply_batch_in_turn(events, shutdown, StateTurn::first())
            .await
    }

    /// Applies one batch of events, given in `posicao` order, among batches in flight at once:
    /// its state step waits for `turn`, the end of the state step of the batch read before it
    /// (invariant `batch-independent`). The version guard lets an event of the same version
    /// overwrite, so the order in which the batches' writes commit decides which of an order's
    /// equal versions stays: they must commit in `posicao` order, as one-by-one application
    /// would. Deciding, effects and settling still overlap.
    pub async fn apply_batch_in_turn(
        &self,
        events: &[Event],
        shutdown: &Shutdown,
        turn: StateTurn,
    ) -> Result<BatchOutcome, ApplyError> {
        let mut outcome = BatchOutcome::default();
        let (decided, rejected, halted_on, considered) = self.decide(events, &mut outcome.summary);
        outcome.halted_on = halted_on;
        let batch_last = events.last().map_or(i64::MIN, |e| e.posicao);
        let mut turn = turn;
        turn.wait().await;
        self.write_state(&decided, &rejected, batch_last, &mut outcome.summary)
            .await?;
        // The next batch's state step may start: this one committed.
        drop(turn);
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
            match domain::handle_with(self.config.policy.rule, event) {
                Ok(Some(decision)) => {
                    summary.events_upcast += u64::from(decision.upcast);
                    decided.push(Decided {
                        posicao: event.posicao,
                        event_id: event.id.clone(),
                        decision,
                    });
                }
                Ok(None) => summary.events_skipped += 1,
                Err(invalid) => {
                    let record = Rejected {
                        event_id: event.id.clone(),
                        posicao: event.posicao,
                        tipo: event.tipo.clone(),
                        erro: invalid.to_string(),
                    };
                    tracing::warn!(event_id = %event.id, posicao = event.posicao, reason = invalid.reason, "invalid event rejected");
                    summary.events_read += 1;
                    summary.events_rejected += 1;
                    summary.count_rejected(invalid.reason, 1);
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
            crate::tables::ledger::registered(&self.pool, &keys)
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
