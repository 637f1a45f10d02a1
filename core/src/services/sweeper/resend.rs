//! The sweeper's second duty: the keys a human queued for a resend (`review resolve --not-sent`,
//! invariant `decision-acts`). Each is rebuilt from its archived event and performed through the
//! applier's resend path (reserve, call once, settle), under its type's concurrency limit. A key
//! whose event is gone cannot be performed: it is reserved and ends `incerto` again with that
//! reason, so it leaves the queue either way. Only declared types are read: a report's e-mail is
//! resent by the report's next attempt.

use std::sync::Arc;

use tokio::task::JoinSet;

use super::{bodies, SweepError, SweepOutcome, Sweeper};
use crate::engine::applier::{self, Queued, Resent};
use crate::tables::db::{self, Backoff};
use crate::tables::ledger::{self, Claim, Reason, Reservation, StaleRow, Why};

impl Sweeper {
    /// Every queued key, page by page, until a short page (or a page none of whose keys left the
    /// queue, so a key that cannot move never holds the pass).
    pub(super) async fn resend_queued(&self, outcome: &mut SweepOutcome) -> Result<(), SweepError> {
        let claim = Claim::new(self.config.execution_id.clone());
        let types = self.effects.types();
        loop {
            self.still_leased()?;
            let page = db::retry("queued page", Backoff::default(), || {
                ledger::queued_page(&self.pool, &types, self.config.page)
            })
            .await?;
            let short = (page.len() as i64) < self.config.page;
            let moved = self.resend_page(&claim, page, outcome).await?;
            if short || moved == 0 {
                return Ok(());
            }
        }
    }

    /// Resends one page; returns how many of its keys left the queue.
    async fn resend_page(
        &self,
        claim: &Claim,
        page: Vec<StaleRow>,
        outcome: &mut SweepOutcome,
    ) -> Result<u64, SweepError> {
        let mut bodies = bodies(&self.pool, &page).await?;
        let mut calls = JoinSet::new();
        let mut gone = Vec::new();
        for row in page {
            let (Some(body), Some(effect)) =
                (bodies.remove(&row.key), self.effects.get(&row.effect_type))
            else {
                gone.push(row);
                continue;
            };
            let (pool, claim, effect) = (self.pool.clone(), claim.clone(), Arc::clone(effect));
            calls.spawn(async move {
                let queued = Queued {
                    key: &row.key,
                    event_id: &row.event_id,
                    body: &body,
                };
                applier::resend(&pool, &claim, &effect, queued).await
            });
        }
        let mut moved = self.give_up(claim, gone, outcome).await?;
        while let Some(joined) = calls.join_next().await {
            match joined.expect("resends do not panic")? {
                Resent::Sent => outcome.resent += 1,
                Resent::Uncertain => outcome.uncertain += 1,
                Resent::Kept | Resent::Refused(_) => outcome.released += 1,
                Resent::Taken | Resent::Withheld | Resent::Lost => {}
            }
            moved += 1;
        }
        Ok(moved)
    }

    /// Queued keys whose event is gone or no longer asks for the effect: reserved, then
    /// `incerto` again, saying so.
    async fn give_up(
        &self,
        claim: &Claim,
        rows: Vec<StaleRow>,
        outcome: &mut SweepOutcome,
    ) -> Result<u64, SweepError> {
        if rows.is_empty() {
            return Ok(0);
        }
        let queued = rows.len() as u64;
        let items: Vec<Reservation<'_>> = rows
            .iter()
            .map(|r| Reservation {
                key: &r.key,
                event_id: &r.event_id,
                effect_type: &r.effect_type,
            })
            .collect();
        let held = ledger::reserve(&self.pool, claim, &items, None).await?;
        let keys: Vec<String> = rows
            .into_iter()
            .map(|r| r.key)
            .filter(|k| held.contains(k))
            .collect();
        let why = vec![Why::from(Reason::EventGone); keys.len()];
        tracing::warn!(
            keys = keys.len(),
            "queued keys cannot be rebuilt from the archive: incerto"
        );
        let changed = ledger::mark_uncertain(&self.pool, claim, &keys, &why, &[]).await?;
        outcome.uncertain += changed.len() as u64;
        Ok(queued)
    }
}
