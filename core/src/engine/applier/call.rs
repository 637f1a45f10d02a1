//! The calls: idempotent keys already reserved are called by a batch's callers, one slot each,
//! one key after another (and retried under `release`, as the type's `retry` says); a
//! non-idempotent key is a task of its own, reserved, called once — never retried, whatever the
//! failure — and settled while its concurrency slot is held. Completions of idempotent keys are
//! group-committed as they arrive.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;
use sqlx::PgPool;
use tokio::sync::{mpsc, OwnedSemaphorePermit};

use crate::config::{EffectPolicy, OnFailure};
use crate::engine::effects::{Effect, EffectError};
use crate::shared::shutdown::Shutdown;
use crate::tables::db::{self, Backoff};
use crate::tables::ledger::{self, Attempt, Claim, Reservation, Why};

/// One effect to perform.
#[derive(Clone)]
pub(super) struct Task {
    pub(super) posicao: i64,
    pub(super) event_id: String,
    pub(super) key: String,
    pub(super) body: Value,
    pub(super) policy: EffectPolicy,
    pub(super) effect: Arc<Effect>,
}

/// How one task ended.
pub(super) enum Ended {
    /// Done; `retried`: the calls it took beyond the first.
    Completed {
        retried: u64,
    },
    /// The key was already in the ledger (non-idempotent reservation refused).
    AlreadyRegistered,
    Failed(EffectError, Vec<Attempt>),
    /// The call failed with an unknown outcome and the key is already `incerto`.
    Uncertain,
    /// Shutdown came during a retry's pause: the key is released with the tries made.
    Stopped(Vec<Attempt>),
    /// Shutdown came before the call started; for an idempotent type the key is still reserved.
    NotStarted {
        reserved: bool,
    },
    /// The database failed under the task (reserving, or settling after the call): the error
    /// itself, so the run can tell an outage (recover) from anything else.
    Database(sqlx::Error),
}

/// A completion on its way to the group commit.
pub(super) type Done = (String, Option<Value>, Vec<Attempt>);

/// A caller hands its completions to the group commit this many at a time, so the group commit
/// is woken once per chunk, not once per call.
const CHUNK: usize = 16;

/// A caller's completions on their way to the group commit: sent a chunk at a time, and whatever
/// is held before the caller pauses for a retry or ends, so no acknowledged call waits on
/// another key's backoff to be recorded.
pub(super) struct Completions {
    held: Vec<Done>,
    to: mpsc::UnboundedSender<Vec<Done>>,
}

impl Completions {
    pub(super) fn new(to: mpsc::UnboundedSender<Vec<Done>>) -> Self {
        Completions {
            held: Vec::with_capacity(CHUNK),
            to,
        }
    }

    fn push(&mut self, done: Done) {
        self.held.push(done);
        if self.held.len() >= CHUNK {
            self.flush();
        }
    }

    fn flush(&mut self) {
        if !self.held.is_empty() {
            let chunk = std::mem::replace(&mut self.held, Vec::with_capacity(CHUNK));
            // The group commit ends only once every sender is gone: it is there to receive.
            let _ = self.to.send(chunk);
        }
    }
}

impl Drop for Completions {
    fn drop(&mut self) {
        self.flush();
    }
}

/// How an idempotent call is retried: the type's `retry` (or `policy`, which overrides every
/// type's), and the pool to look up the provider's `dedup_window` before a retry.
pub(super) struct Retrying {
    pub(super) pool: PgPool,
    pub(super) policy: Option<Backoff>,
    /// The batch's claim: no call once its owner's lease lapsed.
    pub(super) claim: Claim,
    /// Set once a key of the batch failed for good under `release`: the run stops at this
    /// batch, so no call waits out an open breaker any more.
    pub(super) doomed: Arc<std::sync::atomic::AtomicBool>,
}

/// The keys of one idempotent type that a batch holds, shared by the batch's callers.
pub(super) type Queue = Arc<std::sync::Mutex<VecDeque<Task>>>;

/// One of a batch's callers of an idempotent type: it holds one of the type's slots while it
/// calls the queue's keys one after another, until the queue is empty. A batch starts at most
/// `concurrency` of them, so a batch of thousands of keys makes a few dozen tasks, and a call's
/// end wakes nobody but the caller that goes on to the next key.
pub(super) async fn call_queued(
    queue: Queue,
    effect: Arc<Effect>,
    shutdown: Shutdown,
    mut completions: Completions,
    retrying: Retrying,
) -> Vec<(Task, Ended)> {
    let _slot = effect.slot().await;
    let mut ended = Vec::new();
    loop {
        let next = queue.lock().expect("no caller panics").pop_front();
        let Some(task) = next else {
            return ended;
        };
        ended.push(call_reserved(task, &shutdown, &mut completions, &retrying).await);
    }
}

/// An idempotent key already reserved: call it, retrying under `release` (the provider
/// deduplicates, so a retry cannot duplicate the effect). A retry waits the type's backoff, or
/// longer when the provider asked (`Retry-After`); it is not made when the provider asked for
/// longer than `max_backoff`, when the key's first attempt is past the provider's
/// `dedup_window`, or once shutdown is asked for — which also ends a pause in progress. The
/// caller holds the type's slot; a success joins `completions`.
async fn call_reserved(
    task: Task,
    shutdown: &Shutdown,
    completions: &mut Completions,
    retrying: &Retrying,
) -> (Task, Ended) {
    if shutdown.is_triggered() || !retrying.claim.may_act() {
        return (task, Ended::NotStarted { reserved: true });
    }
    let policy = retrying.policy.unwrap_or(task.effect.config.retry);
    let attempts = match task.policy.on_failure {
        OnFailure::Release => policy.attempts.max(1),
        OnFailure::Keep => 1,
    };
    let mut tries = Vec::new();
    loop {
        let started = std::time::Instant::now();
        let err = match task
            .effect
            .call_unless(&task.key, &task.body, shutdown, &retrying.doomed)
            .await
        {
            Ok(result) => {
                tries.push(Attempt::new(&task.key, started, None));
                let retried = tries.len() as u64 - 1;
                completions.push((task.key.clone(), result, tries));
                return (task, Ended::Completed { retried });
            }
            Err(err) => err,
        };
        let class = Some(err.class().to_string());
        tries.push(Attempt::new(&task.key, started, class));
        let Some(pause) = next_pause(&task, &err, tries.len(), attempts, &policy) else {
            if err.release_or_keep(task.policy.on_failure) == OnFailure::Release {
                retrying
                    .doomed
                    .store(true, std::sync::atomic::Ordering::SeqCst);
            }
            return (task, Ended::Failed(err, tries));
        };
        completions.flush();
        if !pause_unless_shutdown(pause, shutdown).await {
            return (task, Ended::Stopped(tries));
        }
        if !provider_still_deduplicates(&retrying.pool, &task).await {
            return (task, Ended::Failed(err, tries));
        }
        if !retrying.claim.may_act() {
            // The owner's lease lapsed: another process may own the key soon; no new call.
            return (task, Ended::Stopped(tries));
        }
        tracing::debug!(key = %task.key, class = err.class(), attempt = tries.len() + 1, "effect call failed; retrying");
    }
}

/// The pause before the next try, or `None` when there is none: the failure is fatal, the tries
/// are used up, or the provider asked (`Retry-After`) for a longer pause than `max_backoff`: it
/// is not called sooner than it asked, and no slot is held longer than the type allows.
fn next_pause(
    task: &Task,
    err: &crate::engine::effects::EffectError,
    tried: usize,
    attempts: u32,
    policy: &Backoff,
) -> Option<std::time::Duration> {
    if !err.is_retryable() || tried >= attempts as usize {
        return None;
    }
    let backoff = policy.delay(u32::try_from(tried).unwrap_or(u32::MAX).saturating_add(1));
    match err.retry_after() {
        Some(asked) if asked > policy.max => {
            tracing::warn!(
                key = %task.key,
                class = err.class(),
                retry_after_s = asked.as_secs(),
                max_backoff_s = policy.max.as_secs(),
                "the provider asked to wait longer than max_backoff: not retried now"
            );
            None
        }
        Some(asked) => Some(asked.max(backoff)),
        None => Some(backoff),
    }
}

/// Sleeps `pause`; false when shutdown came first (or had come).
async fn pause_unless_shutdown(pause: std::time::Duration, shutdown: &Shutdown) -> bool {
    let mut shutdown = shutdown.clone();
    if shutdown.is_triggered() {
        return false;
    }
    tokio::select! {
        _ = shutdown.triggered() => false,
        _ = tokio::time::sleep(pause) => true,
    }
}

/// Whether a retry is still inside the provider's `dedup_window` (always, without one): the
/// key's row and its recorded attempts are all younger than it. The row exists before the first
/// try of this loop, so its age bounds this loop's tries too. Unknown (the database failed) is
/// "no": the key is released, and the next run checks again.
async fn provider_still_deduplicates(pool: &PgPool, task: &Task) -> bool {
    let within = ledger::within_dedup_window(pool, vec![task], |t| {
        (t.key.as_str(), t.effect.config.dedup_window)
    });
    match within.await {
        Ok((within, _)) if !within.is_empty() => true,
        Ok(_) => {
            tracing::warn!(key = %task.key, "first attempt older than the provider's dedup_window: not retried");
            false
        }
        Err(e) => {
            tracing::warn!(key = %task.key, error = %e, "could not check the dedup_window: not retried");
            false
        }
    }
}

/// A non-idempotent key: take a slot, reserve, call once, settle — as the sweeper resends a
/// queued key ([`reserve_call_once`]). The slot is held from the reservation to
/// the settlement: at no moment are more than `concurrency` keys of this type `reservado`, so a
/// crash leaves at most that many `incerto`.
pub(super) async fn reserve_then_call(
    task: Task,
    _slot: OwnedSemaphorePermit,
    pool: PgPool,
    claim: Claim,
    db_backoff: Backoff,
    shutdown: Shutdown,
    doomed: Arc<std::sync::atomic::AtomicBool>,
) -> (Task, Ended) {
    if shutdown.is_triggered() || !claim.may_act() {
        return (task, Ended::NotStarted { reserved: false });
    }
    let queued = Queued {
        key: &task.key,
        event_id: &task.event_id,
        body: &task.body,
    };
    let once = reserve_call_once_unless(
        &pool,
        &claim,
        &task.effect,
        queued,
        db_backoff,
        (&shutdown, &doomed),
    );
    let ended = match once.await {
        Ok(Resent::Taken) => Ended::AlreadyRegistered,
        Ok(Resent::Sent) => Ended::Completed { retried: 0 },
        Ok(Resent::Uncertain) => Ended::Uncertain,
        // Only an idempotent type's failure is kept reserved; this path takes the others.
        Ok(Resent::Kept) => Ended::Uncertain,
        Ok(Resent::Withheld) => Ended::NotStarted { reserved: true },
        // Settled by someone else meanwhile: not this batch's to count; the key is left where it
        // is, and the checkpoint does not pass it.
        Ok(Resent::Lost) => Ended::NotStarted { reserved: false },
        // Already released; the run stops before it as after an idempotent failure.
        Ok(Resent::Refused(err)) => {
            doomed.store(true, std::sync::atomic::Ordering::SeqCst);
            Ended::Failed(err, Vec::new())
        }
        Err(err) => {
            // Said once for the batch by its dispatcher, not once per key.
            tracing::debug!(key = %task.key, error = %err, "could not reserve or settle effect");
            Ended::Database(err)
        }
    };
    (task, ended)
}

/// How a key called once ended (a sweeper's resend, a replay's non-idempotent effect).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resent {
    /// The provider acknowledged it: `concluido`.
    Sent,
    /// Someone else reserved the key first (a replay, the live consumer, another sweeper).
    Taken,
    /// The call failed and the provider cannot deduplicate: `incerto` again, with its reason.
    Uncertain,
    /// The call failed and the provider deduplicates: kept reserved for a later retake.
    Kept,
    /// Reserved, but not called: the owner's lease lapsed meanwhile. Nothing was sent; the
    /// caller releases it (or the execution's next owner settles it).
    Withheld,
    /// The call provably sent nothing (connection refused, breaker open): released.
    Refused(EffectError),
    /// The key was no longer this claim's when its outcome was recorded (a process frozen
    /// mid-call, whose reservation another retook meanwhile): the recording changed no row, so
    /// nothing is counted — the rows are the other's, counted by it.
    Lost,
}

/// A queued key and what its call carries, rebuilt from the archived event.
pub struct Queued<'a> {
    pub key: &'a str,
    pub event_id: &'a str,
    pub body: &'a Value,
}

/// One key, once: reserve it (`Taken` when someone else holds it), call the provider, and
/// settle — `concluido` with the answer, or, on a failure, `incerto` with its reason when the
/// provider cannot deduplicate, else the key stays reserved with the try recorded. The caller
/// holds the type's concurrency slot throughout. A replay's non-idempotent effects and the
/// sweeper's resends both go through here.
pub(super) async fn reserve_call_once(
    pool: &PgPool,
    claim: &Claim,
    effect: &Effect,
    queued: Queued<'_>,
    reserve_backoff: Backoff,
) -> Result<Resent, sqlx::Error> {
    let never = std::sync::atomic::AtomicBool::new(false);
    let (shutdown, doomed) = (Shutdown::never(), &never);
    reserve_call_once_unless(
        pool,
        claim,
        effect,
        queued,
        reserve_backoff,
        (&shutdown, doomed),
    )
    .await
}

/// [`reserve_call_once`], whose call stops waiting out an open breaker on shutdown or once the
/// caller's batch is `doomed`.
pub(super) async fn reserve_call_once_unless(
    pool: &PgPool,
    claim: &Claim,
    effect: &Effect,
    queued: Queued<'_>,
    reserve_backoff: Backoff,
    (shutdown, doomed): (&Shutdown, &std::sync::atomic::AtomicBool),
) -> Result<Resent, sqlx::Error> {
    let item = [Reservation {
        key: queued.key,
        event_id: queued.event_id,
        effect_type: &effect.config.name,
    }];
    let held = db::retry("reserve", reserve_backoff, || {
        ledger::reserve(pool, claim, &item, None)
    })
    .await?;
    if held.is_empty() {
        return Ok(Resent::Taken);
    }
    if !claim.may_act() {
        return Ok(Resent::Withheld);
    }
    let keys = [queued.key.to_string()];
    let started = Instant::now();
    match effect
        .call_unless(queued.key, queued.body, shutdown, doomed)
        .await
    {
        Ok(result) => {
            let tries = [Attempt::new(queued.key, started, None)];
            let results = [result];
            let completed = db::retry("complete", PERSISTENT, || {
                ledger::complete(pool, claim, &keys, &results, &tries)
            })
            .await?;
            if completed.is_empty() {
                return Ok(Resent::Lost);
            }
            Ok(Resent::Sent)
        }
        Err(err) => {
            let class = err.class().to_string();
            let tries = [Attempt::new(queued.key, started, Some(class.clone()))];
            // One call, so `keep` unless it provably sent nothing; what keeping means depends
            // on whether the provider deduplicates.
            if err.release_or_keep(OnFailure::Keep) == OnFailure::Release {
                let released = db::retry("release", PERSISTENT, || {
                    ledger::release(pool, claim, &keys, &tries)
                })
                .await?;
                if released.is_empty() {
                    return Ok(Resent::Lost);
                }
                return Ok(Resent::Refused(err));
            }
            if effect.config.idempotent {
                tracing::warn!(key = %queued.key, class = %class, "effect failed; kept reserved for a retake");
                let mut tx = pool.begin().await?;
                ledger::record_attempts(&mut tx, claim, &tries).await?;
                tx.commit().await?;
                return Ok(Resent::Kept);
            }
            tracing::warn!(key = %queued.key, class = %class, "effect failed with unknown outcome: incerto");
            let why = [Why::of_failure(&class)];
            let moved = db::retry("mark uncertain", PERSISTENT, || {
                ledger::mark_uncertain(pool, claim, &keys, &why, &tries)
            })
            .await?;
            if moved.is_empty() {
                return Ok(Resent::Lost);
            }
            Ok(Resent::Uncertain)
        }
    }
}

/// Completions are retried until written (for minutes, not seconds): the provider has
/// acknowledged the effect, and losing that would turn a done effect into an `incerto` one.
pub(super) const PERSISTENT: Backoff = Backoff {
    attempts: 30,
    base: std::time::Duration::from_millis(200),
    max: std::time::Duration::from_secs(10),
};

/// The most completions one group commit writes.
const GROUP: usize = 1000;

// A group's answers travel as one jsonb object (`ledger::complete`), which PostgreSQL caps at
// 2^28 bytes: a full group (and the chunk that filled it) of the largest answers kept stays
// within half of it.
const _: () = assert!((GROUP + CHUNK) * crate::engine::effects::MAX_RESULT_BYTES * 2 < 1 << 28);

/// How long a group commit waits for more completions after its first, unless the group fills
/// or the batch's calls are all done first. Each statement and commit costs the server as much
/// as tens of completions, so groups of a few hundred cost an effect about half what groups of a
/// few dozen do; a completion waits at most this long (no concurrency slot is held meanwhile).
const LINGER: std::time::Duration = std::time::Duration::from_millis(10);

/// Group commit of completions of keys whose provider deduplicates: what arrives within
/// [`LINGER`] of a group's first completion (until [`GROUP`] is reached) is written in one statement,
/// committed without waiting for the disk ([`ledger::complete_deduplicated`] says why that is
/// safe), then the next group. A completion is retried until written (for minutes, not seconds):
/// the provider has acknowledged it, and losing it would mean calling it again.
pub(super) async fn complete_as_they_arrive(
    pool: PgPool,
    claim: Claim,
    mut done: mpsc::UnboundedReceiver<Vec<Done>>,
) -> Result<u64, sqlx::Error> {
    let mut lost = 0u64;
    while let Some(mut group) = done.recv().await {
        let until = tokio::time::Instant::now() + LINGER;
        while group.len() < GROUP {
            match tokio::time::timeout_at(until, done.recv()).await {
                Ok(Some(more)) => group.extend(more),
                // Every call of the batch has ended, or the group has waited long enough.
                Ok(None) | Err(_) => break,
            }
        }
        let (mut keys, mut results, mut tries) = (
            Vec::with_capacity(group.len()),
            Vec::with_capacity(group.len()),
            Vec::new(),
        );
        for (key, result, more) in group {
            keys.push(key);
            results.push(result);
            tries.extend(more);
        }
        let changed = db::retry("complete", PERSISTENT, || {
            ledger::complete_deduplicated(&pool, &claim, &keys, &results, &tries)
        })
        .await?;
        lost += (keys.len() - changed.len()) as u64;
    }
    Ok(lost)
}
