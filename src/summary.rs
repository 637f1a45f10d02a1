//! What an execution did, counted: events read, skipped and rejected, the state and effect
//! outcome of each event (with the seed's words), the orders changed and their totals. One
//! [`Summary`] per batch, added up per execution and stored with its checkpoint.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::words::db_words;

db_words! {
    /// What the state step did for one event (the seed's `resultado.estado`).
    pub enum StateOutcome("state outcome") {
        /// The order's row now holds this event's value and version.
        Written = "gravado",
        /// The order's row was written from a newer version; left alone (invariant 4).
        NewerKept = "ignorado-versao-mais-nova",
    }
}

db_words! {
    /// What the effect step did for one effect request (the seed's `resultado.efeitos`).
    pub enum EffectOutcome("effect outcome") {
        /// Not performed: the job's policy suppresses the type.
        Suppressed = "suprimido",
        /// Already in the ledger: done (or in someone's hands) before; not performed again.
        AlreadyRegistered = "ja-registrado",
        /// A simulation: would be performed by the real run.
        WouldApply = "seria-aplicado",
        /// Performed now: the provider acknowledged it.
        Applied = "aplicado",
        /// Outcome unknown: `incerto`, waiting for a human (never resent automatically).
        Uncertain = "incerto",
        /// Failed and released, so a later run performs it.
        Released = "liberado",
    }
}

/// Counts of one execution, accumulated batch by batch and stored with the checkpoint, so a
/// resumed run reports the whole execution, not just its last process.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Summary {
    pub events_read: u64,
    /// Events of types the job does not handle.
    pub events_skipped: u64,
    pub events_rejected: u64,
    /// State outcomes, by the seed's words in JSON.
    pub state: BTreeMap<StateOutcome, u64>,
    /// Orders whose commission changed (or, in a simulation, would change).
    pub orders_changed: u64,
    /// Sums over those changes, in cents (a missing row counts as 0 before).
    pub total_before_centavos: i64,
    pub total_after_centavos: i64,
    /// Effect outcomes, by the seed's words in JSON.
    pub effects: BTreeMap<EffectOutcome, u64>,
}

impl Summary {
    pub fn add(&mut self, other: &Summary) {
        self.events_read += other.events_read;
        self.events_skipped += other.events_skipped;
        self.events_rejected += other.events_rejected;
        for (k, v) in &other.state {
            *self.state.entry(*k).or_default() += v;
        }
        self.orders_changed += other.orders_changed;
        // Saturating: commissions of up to 2^53 each can sum past i64 (hostile payloads).
        self.total_before_centavos = self
            .total_before_centavos
            .saturating_add(other.total_before_centavos);
        self.total_after_centavos = self
            .total_after_centavos
            .saturating_add(other.total_after_centavos);
        for (k, v) in &other.effects {
            *self.effects.entry(*k).or_default() += v;
        }
    }

    pub fn count_state(&mut self, outcome: StateOutcome, n: u64) {
        if n > 0 {
            *self.state.entry(outcome).or_default() += n;
        }
    }

    pub fn count_effect(&mut self, outcome: EffectOutcome, n: u64) {
        if n > 0 {
            *self.effects.entry(outcome).or_default() += n;
        }
    }

    /// How many effects ended with `outcome`.
    pub fn effect(&self, outcome: EffectOutcome) -> u64 {
        self.effects.get(&outcome).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_is_stored_with_the_seed_words() {
        let mut summary = Summary::default();
        summary.count_effect(EffectOutcome::AlreadyRegistered, 2);
        summary.count_state(StateOutcome::Written, 1);

        let json = serde_json::to_value(&summary).unwrap();

        assert_eq!(json["effects"]["ja-registrado"], 2);
        assert_eq!(json["state"]["gravado"], 1);
        assert_eq!(serde_json::from_value::<Summary>(json).unwrap(), summary);
    }
}
