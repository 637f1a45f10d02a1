//! The sweeper: settles reservations abandoned by processes that died. A stale reservation of a
//! type whose provider deduplicates is claimed with a fresh token (fencing out its old holder),
//! re-executed from the archived event through the same provider code as the applier, and
//! completed; any other stale reservation — a non-idempotent type, a type not declared, a key past
//! its `dedup_window`, an event no longer in the archive — moves to `incerto` for a human.
//!
//! Then it performs the keys a human queued for a resend (`review resolve --not-sent`, invariant
//! `decision-acts`), through the applier's resend path (`resend.rs`).
//!
//! A retake whose call fails stays reserved under the sweeper's claim, so the next pass retries it
//! once it is stale again; releasing it instead could drop the key of a window already finished.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlx::PgPool;
use tokio::task::JoinSet;

use crate::domain;
use crate::engine::effects::{Effect, Effects};
use crate::tables::archive;
use crate::tables::db::{self, Backoff};
use crate::tables::execution::Lease;
use crate::tables::ledger::{self, Attempt, Claim, Reason, StaleRow, Why};

mod resend;

/// How a sweeper works. Defaults: `stale_after` 5 minutes (the seed's), pages of 500, execution
/// id `sweeper`.
#[derive(Debug, Clone)]
pub struct SweeperConfig {
    /// A reservation older than this is abandoned. Must exceed every provider's timeout, or a
    /// call still in flight could be retaken (checked by `check`, and by [`SweeperConfig::validate`]).
    pub stale_after: Duration,
    /// Rows handled per statement.
    pub page: i64,
    /// The `execucao_id` the sweeper's retakes carry.
    pub execution_id: String,
}

impl Default for SweeperConfig {
    fn default() -> Self {
        SweeperConfig {
            stale_after: Duration::from_secs(300),
            page: 500,
            execution_id: "sweeper".into(),
        }
    }
}

impl SweeperConfig {
    /// `stale_after` must exceed the timeout of every provider the sweeper may retake.
    pub fn validate(&self, effects: &Effects) -> Result<(), String> {
        if self.page < 1 {
            return Err("page must be at least 1".into());
        }
        for tipo in effects.idempotent_types() {
            let timeout = effects
                .get(&tipo)
                .map(|e| e.config.webhook.timeout)
                .unwrap_or_default();
            if self.stale_after <= timeout {
                return Err(format!(
                    "stale_after ({}) must exceed the timeout of {tipo} ({})",
                    humantime::format_duration(self.stale_after),
                    humantime::format_duration(timeout)
                ));
            }
        }
        Ok(())
    }
}

/// What one pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct SweepOutcome {
    /// Stale reservations claimed for a retake.
    pub retaken: u64,
    /// Retakes whose call succeeded (`concluido`).
    pub completed: u64,
    /// Retakes whose call failed; left reserved for the next pass.
    pub released: u64,
    /// Moved to `incerto`.
    pub uncertain: u64,
    /// Keys a human queued for a resend (`review resolve --not-sent`) that this pass sent
    /// (`concluido`); a failed resend counts as `uncertain` or, for a provider that deduplicates,
    /// as `released` (left reserved for the next pass).
    pub resent: u64,
}

impl SweepOutcome {
    pub fn is_empty(&self) -> bool {
        *self == SweepOutcome::default()
    }
}

pub struct Sweeper {
    pool: PgPool,
    effects: Effects,
    config: SweeperConfig,
    /// The lease of the lock a pass runs under (a `serve` fire holds its job's lock): once it
    /// lapsed, the pass makes no new call ([`Sweeper::under_lease`]).
    lease: Option<Lease>,
}

#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error("invalid sweeper configuration: {0}")]
    Config(String),
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    /// The lease of the lock the pass ran under lapsed (the database could not be reached in
    /// time): another process may sweep now, so this one stopped before its next page.
    #[error("the sweep stopped before its next page: the lease of its job's lock lapsed (the database did not confirm it in time); another serve may sweep meanwhile")]
    LeaseLapsed,
}

impl Sweeper {
    pub fn new(pool: PgPool, effects: Effects, config: SweeperConfig) -> Result<Self, SweepError> {
        config.validate(&effects).map_err(SweepError::Config)?;
        Ok(Sweeper {
            pool,
            effects,
            config,
            lease: None,
        })
    }

    /// Runs its passes under `lease`: a page starts only while it is alive, so a holder cut off
    /// from the database makes no new call (calls in flight finish under their claim).
    pub fn under_lease(mut self, lease: Lease) -> Self {
        self.lease = Some(lease);
        self
    }

    /// [`SweepError::LeaseLapsed`] once the lease it runs under lapsed.
    fn still_leased(&self) -> Result<(), SweepError> {
        match &self.lease {
            Some(lease) if lease.lapsed() => Err(SweepError::LeaseLapsed),
            _ => Ok(()),
        }
    }

    /// One pass over every stale reservation, page by page, until a short page; then every key
    /// queued for a resend.
    #[tracing::instrument(skip_all, fields(stale_after_s = self.config.stale_after.as_secs()), err)]
    pub async fn run_once(&self) -> Result<SweepOutcome, SweepError> {
        let mut outcome = SweepOutcome::default();
        self.sweep_stale(&mut outcome).await?;
        self.resend_queued(&mut outcome).await?;
        if !outcome.is_empty() {
            tracing::info!(
                retaken = outcome.retaken,
                completed = outcome.completed,
                released = outcome.released,
                uncertain = outcome.uncertain,
                resent = outcome.resent,
                "sweep pass"
            );
        }
        Ok(outcome)
    }

    async fn sweep_stale(&self, outcome: &mut SweepOutcome) -> Result<(), SweepError> {
        let backoff = Backoff::default();
        loop {
            self.still_leased()?;
            let page = db::retry("stale page", backoff, || {
                ledger::stale_page(&self.pool, self.config.stale_after, self.config.page)
            })
            .await?;
            let short = (page.len() as i64) < self.config.page;
            self.sweep_page(page, outcome).await?;
            if short {
                return Ok(());
            }
        }
    }

    async fn sweep_page(
        &self,
        page: Vec<StaleRow>,
        outcome: &mut SweepOutcome,
    ) -> Result<(), SweepError> {
        let (retakable, other): (Vec<StaleRow>, Vec<StaleRow>) = page.into_iter().partition(|r| {
            self.effects
                .get(&r.effect_type)
                .is_some_and(|e| e.config.idempotent)
        });
        if !other.is_empty() {
            // Declared (so not idempotent): the dead process may have sent it.
            let why: Vec<Why> = other
                .iter()
                .map(|r| match self.effects.get(&r.effect_type) {
                    Some(_) => Why::from(Reason::CrashInFlight),
                    None => Why::from(Reason::UndeclaredType),
                })
                .collect();
            let keys: Vec<String> = other.into_iter().map(|r| r.key).collect();
            let stale_after = self.config.stale_after;
            let moved = ledger::uncertain_if_stale(&self.pool, &keys, &why, stale_after).await?;
            outcome.uncertain += moved.len() as u64;
        }
        if retakable.is_empty() {
            return Ok(());
        }
        let claim = Claim::new(self.config.execution_id.clone());
        let keys: Vec<String> = retakable.into_iter().map(|r| r.key).collect();
        let claimed =
            ledger::claim_stale(&self.pool, &claim, &keys, self.config.stale_after).await?;
        outcome.retaken += claimed.len() as u64;
        self.retake(&claim, claimed, outcome).await
    }

    /// Re-executes claimed effects from their archived events; what cannot be retaken safely (past
    /// its `dedup_window`: the provider may have forgotten the key, or not rebuildable from the
    /// archive) becomes `incerto`.
    async fn retake(
        &self,
        claim: &Claim,
        claimed: Vec<StaleRow>,
        outcome: &mut SweepOutcome,
    ) -> Result<(), SweepError> {
        let (callable, past) = ledger::within_dedup_window(&self.pool, claimed, |r| {
            let window = self.effects.get(&r.effect_type);
            (r.key.as_str(), window.and_then(|e| e.config.dedup_window))
        })
        .await?;
        let past: Vec<String> = past.into_iter().map(|r| r.key).collect();
        let (calls, unbuildable) = self.spawn_calls(callable).await?;
        let mut why = vec![Why::from(Reason::PastDedupWindow); past.len()];
        why.resize(past.len() + unbuildable.len(), Why::from(Reason::EventGone));
        let unknown = [past, unbuildable].concat();
        let answered = Answered::gather(calls).await;
        if !answered.done_keys.is_empty() {
            let changed = db::retry("complete", Backoff::default(), || {
                let a = &answered;
                ledger::complete(&self.pool, claim, &a.done_keys, &a.results, &a.tries)
            })
            .await?;
            outcome.completed += changed.len() as u64;
        }
        if !answered.failed.is_empty() {
            // Kept reserved under this claim: stale again after `stale_after`, then retried.
            let mut tx = self.pool.begin().await?;
            ledger::record_attempts(&mut tx, claim, &answered.failed).await?;
            tx.commit().await?;
            outcome.released += answered.failed.len() as u64;
        }
        if !unknown.is_empty() {
            let moved = ledger::mark_uncertain(&self.pool, claim, &unknown, &why, &[]).await?;
            outcome.uncertain += moved.len() as u64;
        }
        Ok(())
    }

    /// Calls the provider again for each row, rebuilt from its archived event; returns the calls
    /// and the keys that cannot be rebuilt (event gone, type not declared).
    async fn spawn_calls(
        &self,
        rows: Vec<StaleRow>,
    ) -> Result<(JoinSet<Call>, Vec<String>), SweepError> {
        let mut bodies = bodies(&self.pool, &rows).await?;
        let (mut calls, mut unknown) = (JoinSet::new(), Vec::new());
        for row in rows {
            let body = bodies.remove(&row.key);
            let (Some(body), Some(effect)) = (body, self.effects.get(&row.effect_type)) else {
                tracing::warn!(key = %row.key, "cannot rebuild the effect from the archive: incerto");
                unknown.push(row.key);
                continue;
            };
            let effect: Arc<Effect> = Arc::clone(effect);
            calls.spawn(async move {
                let _slot = effect.slot().await;
                let started = Instant::now();
                match effect.call(&row.key, &body).await {
                    Ok(result) => {
                        let a = Attempt::new(&row.key, started, None);
                        (row.key, Ok(result), a)
                    }
                    Err(err) => {
                        let a = Attempt::new(&row.key, started, Some(err.class().to_string()));
                        (row.key, Err(a.clone()), a)
                    }
                }
            });
        }
        Ok((calls, unknown))
    }

    /// Passes every `every` until shutdown (the `serve` daemon schedules passes by cron instead).
    pub async fn run(&self, every: Duration, mut shutdown: crate::shared::shutdown::Shutdown) {
        loop {
            if let Err(err) = self.run_once().await {
                tracing::warn!(error = %err, "sweep pass failed; retrying at the next one");
            }
            tokio::select! {
                _ = tokio::time::sleep(every) => {}
                _ = shutdown.triggered() => return,
            }
        }
    }
}

/// The provider's request body of each row's effect, rebuilt from its archived event by the
/// domain (the applier's rule), by key; a row whose event is gone or no longer asks for the
/// effect has none.
async fn bodies(
    pool: &PgPool,
    rows: &[StaleRow],
) -> Result<HashMap<String, serde_json::Value>, sqlx::Error> {
    let ids: Vec<String> = rows.iter().map(|r| r.event_id.clone()).collect();
    let events: HashMap<String, domain::Event> = archive::by_ids(pool, &ids)
        .await?
        .into_iter()
        .map(|e| (e.id.clone(), e))
        .collect();
    let body = |row: &StaleRow| {
        let decision = domain::handle(events.get(&row.event_id)?).ok().flatten()?;
        let request = decision
            .effects
            .into_iter()
            .find(|r| r.tipo == row.effect_type)?;
        Some((row.key.clone(), request.body))
    };
    Ok(rows.iter().filter_map(body).collect())
}

/// One retake call's answer: the key, the provider's result or the failed attempt, the attempt.
type Call = (String, Result<Option<serde_json::Value>, Attempt>, Attempt);

/// The answers of a sweep's calls, split into done and failed.
#[derive(Default)]
struct Answered {
    done_keys: Vec<String>,
    results: Vec<Option<serde_json::Value>>,
    tries: Vec<Attempt>,
    failed: Vec<Attempt>,
}

impl Answered {
    async fn gather(mut calls: JoinSet<Call>) -> Answered {
        let mut answered = Answered::default();
        while let Some(joined) = calls.join_next().await {
            let (key, result, attempt) = joined.expect("sweeper calls do not panic");
            match result {
                Ok(r) => {
                    answered.done_keys.push(key);
                    answered.results.push(r);
                    answered.tries.push(attempt);
                }
                Err(a) => answered.failed.push(a),
            }
        }
        answered
    }
}
