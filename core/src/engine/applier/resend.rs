//! A key a human queued for a resend (`review resolve --not-sent`, invariant `decision-acts`),
//! performed as a replay performs an effect: reserve it (the queued row becomes this claim's
//! reservation, unless a replay or the live consumer reserved it first), call the provider once
//! under the type's concurrency slot, settle. The reservation commits before the call; the
//! settlement is fenced by the claim. A failed call of a type whose provider cannot deduplicate
//! ends `incerto` again with its reason (not queued: no later sweep resends it); one whose provider
//! deduplicates stays reserved under the claim, so the sweeper retakes it once it is stale, as any
//! abandoned retake.

use sqlx::PgPool;

use super::call::{reserve_call_once, Queued, Resent};
use crate::engine::effects::Effect;
use crate::tables::db::Backoff;
use crate::tables::ledger::Claim;

/// Reserves `queued` for `claim`, calls its provider once and settles the key.
pub async fn resend(
    pool: &PgPool,
    claim: &Claim,
    effect: &Effect,
    queued: Queued<'_>,
) -> Result<Resent, sqlx::Error> {
    // The slot is held from the reservation to the settlement: at most `concurrency` keys of the
    // type are reserved but not yet sent (invariant `at-most-once`).
    let _slot = effect.slot().await;
    reserve_call_once(pool, claim, effect, queued, Backoff::default()).await
}
