//! The effect step of a batch: reserve, call, settle. An external call never sits inside an open
//! transaction: the reservation commits first (so others see it and a crash leaves a trace), the
//! settlement is a separate write conditioned on the claim.
//!
//! - Idempotent types: one set-based reservation for the batch, then at most `concurrency`
//!   callers, each holding a slot of the type, calling the batch's keys in turn, retried with
//!   backoff under `release`; completions group-committed as they arrive.
//! - Non-idempotent types: a key is reserved only once a concurrency slot is held, and the slot is
//!   kept until its call returns, so at most `concurrency` keys are reserved but not yet sent: a
//!   crash can leave at most that many false `incerto` (invariant `at-most-once`).

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::call::{
    call_queued, complete_as_they_arrive, reserve_then_call, Completions, Done, Ended, Queue,
    Retrying, Task,
};
use super::{Applier, ApplyError, Decided};
use crate::config::OnFailure;
use crate::shared::shutdown::Shutdown;
use crate::shared::summary::{EffectOutcome, Summary};
use crate::tables::db;
use crate::tables::ledger::{self, Attempt, Reason, Reservation, Why};

/// An effect that still failed after its retries; its key was released, so the run stops with
/// the checkpoint before its event and a later run performs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectFailure {
    pub key: String,
    pub event_id: String,
    pub posicao: i64,
    pub tipo: String,
    pub class: String,
}

pub(super) struct Dispatched {
    pub failure: Option<EffectFailure>,
    /// The lowest `posicao` with an effect not settled.
    pub first_unsettled: Option<i64>,
}

/// Performs the batch's effects, each type by its strategy ([`call_idempotent`],
/// [`call_one_by_one`]), all types at once; then settles what they left and counts the keys the
/// ledger already held.
pub(super) async fn perform(
    applier: &Applier,
    decided: Vec<Decided>,
    shutdown: &Shutdown,
    summary: &mut Summary,
) -> Result<Dispatched, ApplyError> {
    let by_type = plan(applier, decided, summary)?;
    let (done_tx, done_rx) = mpsc::unbounded_channel();
    let completer = tokio::spawn(complete_as_they_arrive(
        applier.pool.clone(),
        applier.config.claim.clone(),
        done_rx,
    ));
    let mut calls = Calls {
        applier,
        shutdown,
        doomed: Arc::new(AtomicBool::new(false)),
        done: done_tx,
        running: JoinSet::new(),
    };
    // Keys the ledger already held: before this execution, or from an earlier attempt of it.
    let mut registered: Vec<String> = Vec::new();
    for (tipo, tasks) in by_type {
        if tasks[0].effect.config.idempotent {
            call_idempotent(&mut calls, tipo, tasks, &mut registered, summary).await?;
        } else {
            call_one_by_one(&mut calls, tasks).await;
        }
    }
    let Calls {
        done, mut running, ..
    } = calls;
    drop(done);

    let mut ended = Collected::default();
    while let Some(joined) = running.join_next().await {
        for (task, end) in joined.expect("effect tasks do not panic") {
            if matches!(end, Ended::AlreadyRegistered) {
                registered.push(task.key);
            } else {
                ended.take(task, end, summary);
            }
        }
    }
    count_registered(applier, &registered, summary).await?;
    let lost = completer.await.expect("the completer does not panic")?;
    if lost > 0 {
        tracing::warn!(
            keys = lost,
            "completions found their reservation retaken by another worker"
        );
    }
    ended.settle(applier, summary).await
}

/// What the calls of one batch share, and the tasks making them.
struct Calls<'a> {
    applier: &'a Applier,
    shutdown: &'a Shutdown,
    /// Set by the first key that fails for good under `release`: the run stops at this batch.
    doomed: Arc<AtomicBool>,
    /// Where the callers of idempotent types send completions, group-committed by the completer.
    done: mpsc::UnboundedSender<Vec<Done>>,
    running: JoinSet<Vec<(Task, Ended)>>,
}

/// An idempotent type's keys: one set-based reservation for all of them (keys the ledger already
/// held go to `registered`; keys past the type's `dedup_window` are counted `incerto` and not
/// called), then at most `concurrency` callers, each holding a slot of the type, taking the
/// reserved keys from one queue in turn, retried with backoff under `release`. A repeated call is
/// harmless here (the provider deduplicates), so the reservation need not wait for a slot.
async fn call_idempotent(
    calls: &mut Calls<'_>,
    tipo: &str,
    tasks: Vec<Task>,
    registered: &mut Vec<String>,
    summary: &mut Summary,
) -> Result<(), ApplyError> {
    let applier = calls.applier;
    let effect = Arc::clone(&tasks[0].effect);
    let (held, expired) = reserve_for_calls(applier, tipo, &tasks, summary).await?;
    let mut queue = VecDeque::with_capacity(held.len());
    for task in tasks {
        if expired.contains(&task.key) {
            continue;
        }
        if held.contains(&task.key) {
            queue.push_back(task);
        } else {
            registered.push(task.key);
        }
    }
    // At most `concurrency` callers, each holding a slot: at most that many calls at once,
    // whatever the batch size.
    let callers = queue.len().min(effect.config.concurrency);
    let queue: Queue = Arc::new(std::sync::Mutex::new(queue));
    for _ in 0..callers {
        let retrying = Retrying {
            pool: applier.pool.clone(),
            policy: applier.config.retries.call_backoff,
            claim: applier.config.claim.clone(),
            doomed: Arc::clone(&calls.doomed),
        };
        calls.running.spawn(call_queued(
            Arc::clone(&queue),
            Arc::clone(&effect),
            calls.shutdown.clone(),
            Completions::new(calls.done.clone()),
            retrying,
        ));
    }
    Ok(())
}

/// A non-idempotent type's keys, one at a time: a key is reserved only once a concurrency slot of
/// its type is held (this waits for it), and the slot is kept until its call returns, so at most
/// `concurrency` keys are reserved but not yet sent and a crash leaves at most that many false
/// `incerto` (invariant `at-most-once`). Each key settles itself; nothing goes to the completer.
async fn call_one_by_one(calls: &mut Calls<'_>, tasks: Vec<Task>) {
    let config = &calls.applier.config;
    for task in tasks {
        let slot = task.effect.slot().await;
        let call = reserve_then_call(
            task,
            slot,
            calls.applier.pool.clone(),
            config.claim.clone(),
            config.retries.db_backoff,
            calls.shutdown.clone(),
            Arc::clone(&calls.doomed),
        );
        calls.running.spawn(async move { vec![call.await] });
    }
}

/// Counts the keys the ledger already held: `aplicado-anteriormente` (done) or `incerto` when an
/// earlier attempt of this execution's pass registered them, `ja-registrado` otherwise. A fresh
/// pass's first attempt cannot meet its own keys, so it needs no lookup.
async fn count_registered(
    applier: &Applier,
    keys: &[String],
    summary: &mut Summary,
) -> Result<(), ApplyError> {
    let config = &applier.config;
    let since = match config.pass.earlier_attempts_since {
        Some(since) if !keys.is_empty() => since,
        _ => {
            summary.count_effect(EffectOutcome::AlreadyRegistered, keys.len() as u64);
            return Ok(());
        }
    };
    let execution_id = &config.claim.execution_id;
    let own = db::retry("ledger lookup", config.retries.db_backoff, || {
        ledger::registered_by(&applier.pool, keys, execution_id, since)
    })
    .await?;
    let (mut done, mut uncertain) = (0u64, 0u64);
    for state in own.values() {
        match state {
            ledger::State::Done => done += 1,
            ledger::State::Uncertain => uncertain += 1,
            ledger::State::Reserved => {}
        }
    }
    summary.count_effect(EffectOutcome::AppliedEarlier, done);
    summary.count_effect(EffectOutcome::Uncertain, uncertain);
    let before = keys.len() as u64 - done - uncertain;
    summary.count_effect(EffectOutcome::AlreadyRegistered, before);
    Ok(())
}

/// Groups the batch's effect requests by type, counting the suppressed ones.
fn plan(
    applier: &Applier,
    decided: Vec<Decided>,
    summary: &mut Summary,
) -> Result<BTreeMap<&'static str, Vec<Task>>, ApplyError> {
    let mut by_type: BTreeMap<&'static str, Vec<Task>> = BTreeMap::new();
    for d in decided {
        for request in d.decision.effects {
            let Some(policy) = applier.policy_of(request.tipo) else {
                summary.count_effect(EffectOutcome::Suppressed, 1);
                continue;
            };
            let effect = applier
                .effects
                .get(request.tipo)
                .ok_or_else(|| ApplyError::UndeclaredEffect(request.tipo.to_string()))?;
            by_type.entry(request.tipo).or_default().push(Task {
                posicao: d.posicao,
                event_id: d.event_id.clone(),
                key: request.key,
                body: request.body,
                policy,
                effect: Arc::clone(effect),
            });
        }
    }
    Ok(by_type)
}

/// An idempotent type's keys this run holds and may call: reserved in one statement, less those
/// whose first attempt is past the provider's `dedup_window` (moved to `incerto`, counted, and
/// returned apart).
async fn reserve_for_calls(
    applier: &Applier,
    tipo: &str,
    tasks: &[Task],
    summary: &mut Summary,
) -> Result<(HashSet<String>, HashSet<String>), sqlx::Error> {
    let mut held = reserve_idempotent(applier, tipo, tasks).await?;
    let mut expired = HashSet::new();
    if let Some(window) = tasks[0].effect.config.dedup_window {
        expired.extend(beyond_dedup_window(applier, &held, window).await?);
        summary.count_effect(EffectOutcome::Uncertain, expired.len() as u64);
        held.retain(|k| !expired.contains(k));
    }
    Ok((held, expired))
}

/// What the tasks of a batch left to settle, gathered as they end.
#[derive(Default)]
struct Collected {
    to_release: Vec<String>,
    to_uncertain: Vec<String>,
    /// Why each of `to_uncertain` is (same order).
    why_uncertain: Vec<Why>,
    failed_attempts: Vec<Attempt>,
    /// The earliest effect that failed after its retries under `release`: the run stops there.
    failure: Option<EffectFailure>,
    first_unsettled: Option<i64>,
    /// The first database failure under a task: the batch fails with it, as itself.
    db_error: Option<sqlx::Error>,
    /// How many of the batch's effects met a database failure: said once, for the batch.
    db_failures: u64,
    /// Keys released because their type's breaker gave up (nothing sent): said once, for the
    /// batch, not a line per key.
    breaker_released: u64,
}

impl Collected {
    fn unsettled(&mut self, posicao: i64) {
        self.first_unsettled = Some(self.first_unsettled.map_or(posicao, |p| p.min(posicao)));
    }

    fn take(&mut self, task: Task, ended: Ended, summary: &mut Summary) {
        match ended {
            Ended::Completed { retried } => {
                summary.count_effect(EffectOutcome::Applied, 1);
                summary.calls_retried += retried;
            }
            Ended::Stopped(tries) => {
                summary.calls_retried += tries.len() as u64 - 1;
                self.failed_attempts.extend(tries);
                self.to_release.push(task.key.clone());
                self.unsettled(task.posicao);
            }
            Ended::AlreadyRegistered => {}
            Ended::Uncertain => summary.count_effect(EffectOutcome::Uncertain, 1),
            Ended::NotStarted { reserved } => {
                if reserved {
                    self.to_release.push(task.key.clone());
                }
                self.unsettled(task.posicao);
            }
            Ended::Database(err) => {
                self.db_error.get_or_insert(err);
                self.db_failures += 1;
                self.unsettled(task.posicao);
            }
            Ended::Failed(err, tries) => {
                summary.calls_retried += tries.len().saturating_sub(1) as u64;
                self.failed_attempts.extend(tries);
                match err.release_or_keep(task.policy.on_failure) {
                    OnFailure::Keep => {
                        tracing::warn!(key = %task.key, class = err.class(), "effect failed with unknown outcome: incerto");
                        self.to_uncertain.push(task.key.clone());
                        self.why_uncertain.push(Why::of_failure(err.class()));
                    }
                    OnFailure::Release => {
                        if err.class() == crate::engine::effects::BREAKER {
                            self.breaker_released += 1;
                        } else {
                            tracing::warn!(key = %task.key, class = err.class(), "effect failed after retries: released");
                        }
                        self.to_release.push(task.key.clone());
                        self.unsettled(task.posicao);
                        let candidate = EffectFailure {
                            key: task.key.clone(),
                            event_id: task.event_id.clone(),
                            posicao: task.posicao,
                            tipo: task.effect.config.name.clone(),
                            class: err.class().to_string(),
                        };
                        if self
                            .failure
                            .as_ref()
                            .is_none_or(|f| f.posicao > candidate.posicao)
                        {
                            self.failure = Some(candidate);
                        }
                    }
                }
            }
        }
    }

    /// Moves the failed keys to `incerto` (`keep`) or releases them (`release`, and calls never
    /// started), with the attempts that explain them.
    async fn settle(
        self,
        applier: &Applier,
        summary: &mut Summary,
    ) -> Result<Dispatched, ApplyError> {
        let (claim, backoff) = (&applier.config.claim, applier.config.retries.db_backoff);
        let (uncertain_tries, release_tries): (Vec<Attempt>, Vec<Attempt>) = self
            .failed_attempts
            .into_iter()
            .partition(|a| self.to_uncertain.contains(&a.key));
        if !self.to_uncertain.is_empty() {
            let (keys, why) = (&self.to_uncertain, &self.why_uncertain);
            let moved = db::retry("mark uncertain", backoff, || {
                ledger::mark_uncertain(&applier.pool, claim, keys, why, &uncertain_tries)
            })
            .await?;
            summary.count_effect(EffectOutcome::Uncertain, moved.len() as u64);
        }
        if self.breaker_released > 0 {
            tracing::warn!(
                execution = %applier.config.checkpoint_key,
                keys = self.breaker_released,
                "keys not called because their type's breaker gave up: released (nothing was sent); the next run sends them"
            );
        }
        if !self.to_release.is_empty() {
            let released = db::retry("release", backoff, || {
                ledger::release(&applier.pool, claim, &self.to_release, &release_tries)
            })
            .await?;
            summary.count_effect(EffectOutcome::Released, released.len() as u64);
        }
        if let Some(err) = self.db_error {
            say_refused(&applier.config.checkpoint_key, self.db_failures, &err);
            return Err(ApplyError::Database(err));
        }
        Ok(Dispatched {
            failure: self.failure,
            first_unsettled: self.first_unsettled,
        })
    }
}

/// One set-based reservation for every key of an idempotent type in the batch.
async fn reserve_idempotent(
    applier: &Applier,
    tipo: &str,
    tasks: &[Task],
) -> Result<HashSet<String>, sqlx::Error> {
    let items: Vec<Reservation<'_>> = tasks
        .iter()
        .map(|t| Reservation {
            key: &t.key,
            event_id: &t.event_id,
            effect_type: tipo,
        })
        .collect();
    let config = &applier.config;
    let held = db::retry("reserve", config.retries.db_backoff, || {
        ledger::reserve(
            &applier.pool,
            &config.claim,
            &items,
            Some(config.retries.stale_after),
        )
    })
    .await?;
    Ok(held.into_iter().collect())
}

/// Reserved keys whose first attempt is older than the provider's `dedup_window`: the provider
/// may have forgotten them, so they are treated as non-idempotent and moved to `incerto` now,
/// without a call.
async fn beyond_dedup_window(
    applier: &Applier,
    held: &HashSet<String>,
    window: std::time::Duration,
) -> Result<Vec<String>, sqlx::Error> {
    if held.is_empty() {
        return Ok(Vec::new());
    }
    let keys: Vec<String> = held.iter().cloned().collect();
    let config = &applier.config;
    let expired = db::retry("dedup window", config.retries.db_backoff, || async {
        let mut conn = applier.pool.acquire().await?;
        ledger::past_dedup_window(&mut conn, &keys, window).await
    })
    .await?;
    if expired.is_empty() {
        return Ok(expired);
    }
    tracing::warn!(
        keys = expired.len(),
        "first attempt older than the provider's dedup_window: incerto, not resent"
    );
    let why = vec![Why::from(Reason::PastDedupWindow); expired.len()];
    db::retry("mark uncertain", config.retries.db_backoff, || {
        ledger::mark_uncertain(&applier.pool, &config.claim, &expired, &why, &[])
    })
    .await
}

/// One line for a batch whose effects could not be reserved or settled (not one per key): a
/// lost lock or a newer owner refuses every key of the batch at once.
fn say_refused(execution: &str, keys: u64, err: &sqlx::Error) {
    if crate::tables::execution::is_fenced(err) {
        tracing::warn!(%execution, keys, "batch refused: this process no longer holds the execution (its lock was lost or a newer owner took it); nothing of it was sent");
    } else {
        tracing::warn!(%execution, keys, error = %err, "batch stopped: its effects could not be reserved or settled");
    }
}
