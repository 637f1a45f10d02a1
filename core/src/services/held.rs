//! An execution held by this process: its lock, its claim token, its applier, and the one way
//! back after the database was lost. The runner (one per execution or partition) and the live
//! consumer both hold their execution through [`Held`], so the recovery sequence exists once.
//!
//! Holding the lock is what makes a reservation left `reservado` by this execution abandoned
//! (invariant `kill-and-rerun`): no other process can be running it, so this one settles them at
//! once — released for a provider that deduplicates, `incerto` for any other — instead of waiting
//! for the sweeper's `stale_after`.

use std::time::Duration;

use sqlx::PgPool;

use chrono::{DateTime, Utc};

use crate::engine::applier::{Applier, ApplierConfig, Pass, Policy, Retries};
use crate::engine::effects::Effects;
use crate::tables::archive::Partition;
use crate::tables::db::{self, Backoff};
use crate::tables::execution::{self, ExecutionLock, LockError, Mode};
use crate::tables::ledger::{self, Claim};

/// What the holder of an execution runs: which execution, in which mode, under which policy.
pub struct HeldSpec<'a> {
    /// The checkpoint key (`<id>`, `<id>:simulacao`, `<id>:p3`, `ao-vivo`): what is locked.
    pub key: &'a str,
    /// The ledger's `execucao_id`.
    pub execution_id: &'a str,
    pub mode: Mode,
    pub policy: Policy,
    pub retries: Retries,
    /// A partition's reservations are settled alone: its siblings may be running elsewhere.
    pub partition: Option<Partition>,
    /// Who holds it, as `pg_stat_activity` shows it (`run`, `consume`).
    pub role: &'static str,
}

/// An execution this process holds.
pub struct Held {
    pool: PgPool,
    url: String,
    role: &'static str,
    lock: ExecutionLock,
    applier: Applier,
    partition: Option<Partition>,
    /// When the pass being applied started (set by [`Held::begin`]).
    pass_started_at: Option<DateTime<Utc>>,
}

/// Why the held execution could not be recovered.
#[derive(Debug, thiserror::Error)]
pub enum RecoverError {
    #[error(transparent)]
    Lock(#[from] LockError),
    #[error("could not settle this execution's abandoned reservations: {0}")]
    Database(#[from] sqlx::Error),
    /// The lease lapsed and another process took the execution meanwhile (a newer epoch).
    #[error("execution {0} was taken over by another process")]
    TakenOver(String),
}

impl RecoverError {
    /// The database failure under this error, if it is one (a lock held by another process is not).
    pub fn database(&self) -> Option<&sqlx::Error> {
        match self {
            RecoverError::Database(e) | RecoverError::Lock(LockError::Database(e)) => Some(e),
            RecoverError::Lock(LockError::Held { .. }) | RecoverError::TakenOver(_) => None,
        }
    }
}

/// How long a holder waits for the database to come back before it gives up.
pub const RECOVERY_PATIENCE: Duration = Duration::from_secs(600);

/// Settling abandoned reservations is retried for minutes: until it is done, nothing of this
/// execution may be sent.
const SETTLE_BACKOFF: Backoff = Backoff {
    attempts: 60,
    base: Duration::from_millis(200),
    max: Duration::from_secs(10),
};

impl Held {
    /// Takes the execution's lock (or says who holds it) and builds its applier with a claim of
    /// this process run.
    pub async fn take(
        pool: &PgPool,
        url: &str,
        spec: HeldSpec<'_>,
        effects: Effects,
    ) -> Result<Held, LockError> {
        let lock = ExecutionLock::acquire(url, spec.key, spec.role).await?;
        let applier = Applier::new(
            pool.clone(),
            ApplierConfig {
                claim: Claim::owned(spec.execution_id, lock.owner().clone())
                    .with_lease(lock.lease().clone()),
                checkpoint_key: spec.key.to_string(),
                mode: spec.mode,
                policy: spec.policy,
                retries: spec.retries,
                pass: Pass {
                    tally: crate::tables::tally::Scope::whole(spec.key, 1),
                    earlier_attempts_since: None,
                },
            },
            effects,
        );
        Ok(Held {
            pool: pool.clone(),
            url: url.to_string(),
            role: spec.role,
            lock,
            applier,
            partition: spec.partition,
            pass_started_at: None,
        })
    }

    /// Says which pass is applied: where its figures go, when it started, and whether it is
    /// resumed (an earlier process of this pass may have acted on the batches read now).
    pub fn begin(
        &mut self,
        tally: crate::tables::tally::Scope,
        started_at: DateTime<Utc>,
        resumed: bool,
    ) {
        self.pass_started_at = Some(started_at);
        self.applier.set_pass(Pass {
            tally,
            earlier_attempts_since: resumed.then_some(started_at),
        });
    }

    pub fn applier(&self) -> &Applier {
        &self.applier
    }

    /// The checkpoint key of the execution held.
    pub fn key(&self) -> &str {
        self.lock.key()
    }

    /// Whether the lock is still held (its connection is alive). When it is not, another process
    /// may take the execution: the holder must stop writing and [`Held::recover`].
    pub async fn still_held(&self) -> bool {
        self.lock.still_held().await
    }

    /// Whether this process stopped acting for the execution because its ownership lease lapsed
    /// (the database could not be reached for a lease): another process may have taken it.
    pub fn lapsed(&self) -> bool {
        self.lock.lapsed()
    }

    /// [`Held::still_held`], with why the lock's connection failed when it did.
    pub async fn check(&self) -> Result<(), sqlx::Error> {
        self.lock.check().await
    }

    /// Settles what this execution left `reservado` in an earlier process (or in this one before
    /// it lost the database). A simulation reserves nothing, so it has nothing to settle.
    pub async fn settle_own(&self) -> Result<(), sqlx::Error> {
        let config = self.applier.config();
        if config.mode == Mode::Simulation {
            return Ok(());
        }
        let idempotent = self.applier.effects().idempotent_types();
        let execution_id = &config.claim.execution_id;
        let settled = db::retry("settle", SETTLE_BACKOFF, || {
            ledger::settle_abandoned(
                &self.pool,
                self.lock.owner(),
                execution_id,
                &idempotent,
                self.partition,
            )
        })
        .await?;
        if !settled.released.is_empty() || !settled.uncertain.is_empty() {
            tracing::warn!(
                execution = %self.key(),
                released = settled.released.len(),
                uncertain = settled.uncertain.len(),
                "settled reservations abandoned by an earlier process of this execution"
            );
        }
        Ok(())
    }

    /// Does what a restart of the process would: takes the lock again if its connection was
    /// lost, and in every case the execution's next ownership epoch (which fences whatever this
    /// process still had in flight under the old one), settles what this execution left
    /// reserved, and takes a new claim, so a
    /// reservation of the old claim can no longer be completed by a call still in flight. The
    /// caller then resumes from the stored checkpoint, [`Held::stored`].
    ///
    /// A partition taken meanwhile by another process is left to it at once
    /// ([`LockError::Held`]): the worker goes on with another partition. A whole execution waits
    /// for its holder to let go, up to [`RECOVERY_PATIENCE`].
    pub async fn recover(&mut self) -> Result<(), RecoverError> {
        if self.lapsed() {
            // Back from a cut: if another process took the execution meanwhile, this one leaves
            // it as it is — taking the lock again would bump the new owner's epoch.
            let owner = self.lock.newest_owner();
            let newest = db::retry("confirm ownership", SETTLE_BACKOFF, || {
                owner.still_newest(&self.pool)
            })
            .await?;
            if !newest {
                return Err(RecoverError::TakenOver(self.key().to_string()));
            }
        }
        if self.lock.still_held().await {
            // The lock survived the loss, or its confirmer took it again after a restart: a new
            // epoch on it fences what this process still had in flight, as taking it anew would.
            self.lock.renew().await?;
        } else {
            // A lapsed lease may leave the old session holding the lock: let it go first, or
            // this process would wait for itself.
            self.lock.let_go().await;
            let key = self.key().to_string();
            let wait_for_holder = self.partition.is_none();
            let lock = ExecutionLock::reacquire(
                &self.url,
                &key,
                self.role,
                RECOVERY_PATIENCE,
                wait_for_holder,
            )
            .await?;
            self.lock = lock;
        }
        self.settle_own().await?;
        self.applier
            .renew_claim(self.lock.owner().clone(), self.lock.lease().clone());
        // What this process did before the loss is now an earlier attempt of the pass.
        if let Some(started_at) = self.pass_started_at {
            let mut pass = self.applier.config().pass.clone();
            pass.earlier_attempts_since = Some(started_at);
            self.applier.set_pass(pass);
        }
        Ok(())
    }

    /// The ownership epoch this process holds the execution under: every write of the execution
    /// is fenced by it (invariant `one-owner`).
    pub fn owner(&self) -> &execution::Owner {
        self.lock.owner()
    }

    /// Where the execution stands in the database: the point to resume from.
    pub async fn stored<C: Checkpoint>(&self) -> Result<Option<C>, sqlx::Error> {
        let key = self.key().to_string();
        db::retry(
            "load checkpoint",
            self.applier.config().retries.db_backoff,
            || C::load(&self.pool, &key),
        )
        .await
    }

    /// Releases the lock now (dropping it, or the process dying, releases it too).
    pub async fn release(self) {
        self.lock.release().await;
    }
}

/// A checkpoint as stored: the last position an execution settled.
pub trait Checkpoint: Sized {
    fn load(
        pool: &PgPool,
        key: &str,
    ) -> impl std::future::Future<Output = Result<Option<Self>, sqlx::Error>> + Send;
}

/// A replay's checkpoint: the last settled `posicao` of its window.
impl Checkpoint for i64 {
    async fn load(pool: &PgPool, key: &str) -> Result<Option<Self>, sqlx::Error> {
        Ok(execution::load(pool, key).await?.and_then(|e| e.checkpoint))
    }
}
