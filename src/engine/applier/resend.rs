//! A key a human queued for a resend (`review resolve --not-sent`, invariant 14), performed as a
//! replay performs an effect: reserve it (the queued row becomes this claim's reservation, unless
//! a replay or the live consumer reserved it first), call the provider once under the type's
//! concurrency slot, settle. The reservation commits before the call; the settlement is fenced by
//! the claim. A failed call of a type whose provider cannot deduplicate ends `incerto` again with
//! its reason (not queued: no later sweep resends it); one whose provider deduplicates stays
//! reserved under the claim, so the sweeper retakes it once it is stale, as any abandoned retake.

use std::time::Instant;

use serde_json::Value;
use sqlx::PgPool;

use super::call::PERSISTENT;
use crate::engine::effects::Effect;
use crate::tables::db::{self, Backoff};
use crate::tables::ledger::{self, Attempt, Claim, Reservation, Why};

/// How one resend ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resent {
    /// The provider acknowledged it: `concluido`.
    Sent,
    /// Someone else reserved the key first (a replay, the live consumer, another sweeper).
    Taken,
    /// The call failed and the provider cannot deduplicate: `incerto` again, with its reason.
    Uncertain,
    /// The call failed and the provider deduplicates: kept reserved for a later retake.
    Kept,
}

/// A queued key and what its call carries, rebuilt from the archived event.
pub struct Queued<'a> {
    pub key: &'a str,
    pub evento_id: &'a str,
    pub body: &'a Value,
}

/// Reserves `queued` for `claim`, calls its provider once and settles the key.
pub async fn resend(
    pool: &PgPool,
    claim: &Claim,
    effect: &Effect,
    queued: Queued<'_>,
) -> Result<Resent, sqlx::Error> {
    // The slot is held from the reservation to the settlement: at most `concurrency` keys of the
    // type are reserved but not yet sent (invariant 2).
    let _slot = effect.slot().await;
    reserve_call_once(pool, claim, effect, queued, Backoff::default()).await
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
    let item = [Reservation {
        key: queued.key,
        evento_id: queued.evento_id,
        tipo_efeito: &effect.config.name,
    }];
    let held = db::retry("reserve", reserve_backoff, || {
        ledger::reserve(pool, claim, &item, None)
    })
    .await?;
    if held.is_empty() {
        return Ok(Resent::Taken);
    }
    let keys = [queued.key.to_string()];
    let started = Instant::now();
    match effect.call(queued.key, queued.body).await {
        Ok(result) => {
            let tries = [Attempt::new(queued.key, started, None)];
            let results = [result];
            db::retry("complete", PERSISTENT, || {
                ledger::complete(pool, claim, &keys, &results, &tries)
            })
            .await?;
            Ok(Resent::Sent)
        }
        Err(err) => {
            let class = err.class().to_string();
            let tries = [Attempt::new(queued.key, started, Some(class.clone()))];
            if effect.config.idempotent {
                tracing::warn!(key = %queued.key, class = %class, "effect failed; kept reserved for a retake");
                let mut tx = pool.begin().await?;
                ledger::record_attempts(&mut tx, claim, &tries).await?;
                tx.commit().await?;
                return Ok(Resent::Kept);
            }
            tracing::warn!(key = %queued.key, class = %class, "effect failed with unknown outcome: incerto");
            let why = [Why::of_failure(&class)];
            db::retry("mark uncertain", PERSISTENT, || {
                ledger::mark_uncertain(pool, claim, &keys, &why, &tries)
            })
            .await?;
            Ok(Resent::Uncertain)
        }
    }
}
