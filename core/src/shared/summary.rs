//! What an execution did, counted: events read, skipped and rejected, the state and effect
//! outcome of each event (with the seed's words), the orders changed and their totals. One
//! [`Summary`] per batch, added up per execution and stored with its checkpoint.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::shared::words::db_words;

db_words! {
    /// What the state step did for one event (the seed's `resultado.estado`).
    pub enum StateOutcome("state outcome") {
        /// This execution changed the order's row to this event's value and version.
        Written = "gravado",
        /// The row already held exactly this value and version: nothing to write.
        Unchanged = "inalterado",
        /// The order's row was written from a newer version; left alone (invariant `never-older`).
        NewerKept = "ignorado-versao-mais-nova",
        /// A simulation: the real run would change the order's row to this event's value and
        /// version (a simulation writes no `comissao` row, so it never says `gravado`).
        WouldWrite = "seria-gravado",
    }
}

db_words! {
    /// What the effect step did for one effect request (the seed's `resultado.efeitos`).
    pub enum EffectOutcome("effect outcome") {
        /// Not performed: the job's policy suppresses the type.
        Suppressed = "suprimido",
        /// Already in the ledger before this execution: not performed again.
        AlreadyRegistered = "ja-registrado",
        /// A simulation: would be performed by the real run.
        WouldApply = "seria-aplicado",
        /// Performed now: the provider acknowledged it.
        Applied = "aplicado",
        /// Performed by this execution in an earlier attempt (a run that was interrupted): done,
        /// not performed again, and not "already registered before this execution" either.
        AppliedEarlier = "aplicado-anteriormente",
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
    /// Rejected events by the domain's reason (`valor has more than two decimal places`, …).
    pub rejected_by_reason: BTreeMap<String, u64>,
    /// Events of an older payload shape, upcast on read (rejected ones are not counted here).
    pub events_upcast: u64,
    /// State outcomes, by the seed's words in JSON.
    pub state: BTreeMap<StateOutcome, u64>,
    /// A simulation: orders in its diff (those whose row is not newer than the window's event).
    pub orders_in_diff: u64,
    /// Orders whose commission changed (or, in a simulation, would change).
    pub orders_changed: u64,
    /// Only in one batch's figures: orders an earlier batch counted in `orders_changed` whose
    /// value this batch put back where it was (A -> B -> A), taken off when tallied, so the
    /// figure counts the orders that change, net.
    #[serde(skip)]
    pub orders_changed_back: u64,
    /// Sums over those changes, in cents (a missing row counts as 0 before).
    pub total_before_centavos: i64,
    pub total_after_centavos: i64,
    /// Effect outcomes, by the seed's words in JSON.
    pub effects: BTreeMap<EffectOutcome, u64>,
    /// Provider calls that were retries: a second or later try of a key within one call (of the
    /// batches counted; a batch left unsettled is counted by the run that settles it).
    pub calls_retried: u64,
    /// A real run: what these batches added to the run's corrections over all its passes (an
    /// order counted by the first pass that corrects it). Summed over the passes, see
    /// `execution::Execution::summary`; not part of the stored summary's JSON.
    #[serde(skip)]
    pub run: RunCorrections,
}

/// A real run's corrections over all its passes: each order counted once, with the value before
/// the execution first changed it and the value it left (what `reprocessamento_correcao` holds).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunCorrections {
    pub orders: u64,
    /// Only in one batch's figures: as [`Summary::orders_changed_back`], for the run.
    pub orders_back: u64,
    pub before_centavos: i64,
    pub after_centavos: i64,
}

impl Summary {
    pub fn add(&mut self, other: &Summary) {
        self.events_read += other.events_read;
        self.events_skipped += other.events_skipped;
        self.events_rejected += other.events_rejected;
        for (k, v) in &other.rejected_by_reason {
            *self.rejected_by_reason.entry(k.clone()).or_default() += v;
        }
        self.events_upcast += other.events_upcast;
        for (k, v) in &other.state {
            *self.state.entry(*k).or_default() += v;
        }
        self.orders_in_diff += other.orders_in_diff;
        self.orders_changed += other.orders_changed;
        self.orders_changed_back += other.orders_changed_back;
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
        self.calls_retried += other.calls_retried;
        self.run.orders += other.run.orders;
        self.run.orders_back += other.run.orders_back;
        self.run.before_centavos = self
            .run
            .before_centavos
            .saturating_add(other.run.before_centavos);
        self.run.after_centavos = self
            .run
            .after_centavos
            .saturating_add(other.run.after_centavos);
    }

    pub fn count_state(&mut self, outcome: StateOutcome, n: u64) {
        if n > 0 {
            *self.state.entry(outcome).or_default() += n;
        }
    }

    /// A rejected event's reason, counted (the event itself is counted in `events_rejected`).
    pub fn count_rejected(&mut self, reason: &str, n: u64) {
        if n > 0 {
            *self
                .rejected_by_reason
                .entry(reason.to_string())
                .or_default() += n;
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

    /// An execution's figures, the one definition every surface shows (`status --json`, `run
    /// --json`, the console's list and page, the report, `/metrics`), from its current pass's
    /// figures (`self`) and what its passes added to the run (`run`). A real run's orders
    /// changed, orders in its diff (its corrections) and totals are the run's over all its
    /// passes: each order once, the value before the run first changed it, the value it left —
    /// so a `--restart` that finds nothing left to correct still shows what the run corrected.
    /// Its events and effect outcomes are its current pass's (the window as last read). A
    /// simulation's figures are its current pass's: a new pass replaces its whole diff. Passes
    /// that tallied no share of the run (none corrected anything) leave the pass's own figures.
    pub fn over_passes(&self, real_run: bool, run: RunCorrections) -> Summary {
        let mut s = self.clone();
        if real_run {
            if run != RunCorrections::default() {
                s.orders_changed = run.orders;
                s.total_before_centavos = run.before_centavos;
                s.total_after_centavos = run.after_centavos;
            }
            s.orders_in_diff = s.orders_changed;
        }
        s.run = run;
        s
    }

    /// The figures as tally rows (`reprocessamento_contagem.medida`, value), zeros left out.
    pub fn to_tallies(&self) -> Vec<(String, i64)> {
        let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        let mut rows = vec![
            (EVENTS_READ.to_string(), count(self.events_read)),
            (EVENTS_SKIPPED.to_string(), count(self.events_skipped)),
            (EVENTS_REJECTED.to_string(), count(self.events_rejected)),
            (EVENTS_UPCAST.to_string(), count(self.events_upcast)),
            (ORDERS_IN_DIFF.to_string(), count(self.orders_in_diff)),
            (
                ORDERS_CHANGED.to_string(),
                count(self.orders_changed) - count(self.orders_changed_back),
            ),
            (TOTAL_BEFORE.to_string(), self.total_before_centavos),
            (TOTAL_AFTER.to_string(), self.total_after_centavos),
            (CALLS_RETRIED.to_string(), count(self.calls_retried)),
            (
                RUN_ORDERS.to_string(),
                count(self.run.orders) - count(self.run.orders_back),
            ),
            (RUN_BEFORE.to_string(), self.run.before_centavos),
            (RUN_AFTER.to_string(), self.run.after_centavos),
        ];
        for (outcome, n) in &self.state {
            rows.push((format!("{STATE_PREFIX}{outcome}"), count(*n)));
        }
        for (outcome, n) in &self.effects {
            rows.push((format!("{EFFECT_PREFIX}{outcome}"), count(*n)));
        }
        for (reason, n) in &self.rejected_by_reason {
            rows.push((format!("{REJECTED_PREFIX}{reason}"), count(*n)));
        }
        rows.retain(|(_, v)| *v != 0);
        rows
    }

    /// The figures back from tally rows; a measure this version does not know is left out.
    pub fn from_tallies<'a>(rows: impl IntoIterator<Item = (&'a str, i64)>) -> Summary {
        let mut s = Summary::default();
        let count = |v: i64| u64::try_from(v).unwrap_or(0);
        for (measure, value) in rows {
            match measure {
                EVENTS_READ => s.events_read = count(value),
                EVENTS_SKIPPED => s.events_skipped = count(value),
                EVENTS_REJECTED => s.events_rejected = count(value),
                EVENTS_UPCAST => s.events_upcast = count(value),
                ORDERS_IN_DIFF => s.orders_in_diff = count(value),
                ORDERS_CHANGED => s.orders_changed = count(value),
                TOTAL_BEFORE => s.total_before_centavos = value,
                TOTAL_AFTER => s.total_after_centavos = value,
                CALLS_RETRIED => s.calls_retried = count(value),
                RUN_ORDERS => s.run.orders = count(value),
                RUN_BEFORE => s.run.before_centavos = value,
                RUN_AFTER => s.run.after_centavos = value,
                other => {
                    if let Some(word) = other.strip_prefix(STATE_PREFIX) {
                        if let Ok(outcome) = StateOutcome::try_from(word) {
                            s.count_state(outcome, count(value));
                        }
                    } else if let Some(word) = other.strip_prefix(EFFECT_PREFIX) {
                        if let Ok(outcome) = EffectOutcome::try_from(word) {
                            s.count_effect(outcome, count(value));
                        }
                    } else if let Some(reason) = other.strip_prefix(REJECTED_PREFIX) {
                        s.count_rejected(reason, count(value));
                    }
                }
            }
        }
        s
    }
}

/// Sums over a diff, in cents. A missing `antes` counts as 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Rows of the diff.
    pub orders: u64,
    /// Rows whose value changes.
    pub changed: u64,
    pub before_centavos: i64,
    pub after_centavos: i64,
}

impl Totals {
    /// An execution's totals from its figures: a simulation's diff, or the orders a real run
    /// changed (every row of its corrections changed).
    pub fn of_summary(simulation: bool, s: &Summary) -> Totals {
        Totals {
            orders: if simulation {
                s.orders_in_diff
            } else {
                s.orders_changed
            },
            changed: s.orders_changed,
            before_centavos: s.total_before_centavos,
            after_centavos: s.total_after_centavos,
        }
    }

    pub fn difference(&self) -> i64 {
        self.after_centavos.saturating_sub(self.before_centavos)
    }
}

/// The names of the figures in `reprocessamento_contagem.medida`.
const EVENTS_READ: &str = "eventos-lidos";
const EVENTS_SKIPPED: &str = "eventos-ignorados";
const EVENTS_REJECTED: &str = "eventos-rejeitados";
const EVENTS_UPCAST: &str = "eventos-convertidos";
const ORDERS_IN_DIFF: &str = "pedidos-no-diff";
const ORDERS_CHANGED: &str = "pedidos-alterados";
const TOTAL_BEFORE: &str = "total-antes-centavos";
const TOTAL_AFTER: &str = "total-depois-centavos";
const CALLS_RETRIED: &str = "chamadas-repetidas";
/// A pass's share of its run's figures (see [`RunCorrections`]).
const RUN_ORDERS: &str = "execucao:pedidos-alterados";
const RUN_BEFORE: &str = "execucao:total-antes-centavos";
const RUN_AFTER: &str = "execucao:total-depois-centavos";
const STATE_PREFIX: &str = "estado:";
const EFFECT_PREFIX: &str = "efeito:";
const REJECTED_PREFIX: &str = "rejeitado:";

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

    #[test]
    fn a_summary_comes_back_from_its_tallies() {
        let mut summary = Summary {
            events_read: 10,
            events_skipped: 2,
            orders_changed: 3,
            total_before_centavos: -5,
            total_after_centavos: 700,
            calls_retried: 6,
            events_upcast: 7,
            run: RunCorrections {
                orders: 2,
                orders_back: 0,
                before_centavos: -3,
                after_centavos: 400,
            },
            ..Summary::default()
        };
        summary.count_rejected("valor is not a number", 2);
        summary.count_effect(EffectOutcome::AppliedEarlier, 4);
        summary.count_state(StateOutcome::Unchanged, 1);

        let rows = summary.to_tallies();
        let back = Summary::from_tallies(rows.iter().map(|(m, v)| (m.as_str(), *v)));

        assert_eq!(back, summary);
    }

    #[test]
    fn a_real_runs_figures_are_its_corrections_over_all_its_passes() {
        let no_op_pass = Summary {
            events_read: 40,
            ..Summary::default()
        };
        let run = RunCorrections {
            orders: 40,
            orders_back: 0,
            before_centavos: 4_100,
            after_centavos: 41_000,
        };

        let real = no_op_pass.over_passes(true, run);
        let simulation = no_op_pass.over_passes(false, run);

        assert_eq!(
            (real.orders_changed, real.orders_in_diff, real.events_read),
            (40, 40, 40)
        );
        assert_eq!(
            (real.total_before_centavos, real.total_after_centavos),
            (4_100, 41_000)
        );
        assert_eq!(
            simulation.orders_changed, 0,
            "a simulation's are its pass's"
        );
    }
}
