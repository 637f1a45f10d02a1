//! An execution as the machine-readable surfaces show it (`run --json`, `status --json`, the
//! console): the figures at the top level, with the seed's words for mode, state and outcomes.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{Execution, Mode, State};
use crate::shared::summary::{EffectOutcome, StateOutcome};

/// One execution in JSON: `execution`, `mode`, `state`, `events_read`, `events_skipped`,
/// `events_rejected`, `events_upcast`, `orders_changed`, `total_before_cents`, `total_after_cents`, `effects`
/// (outcome word → count), `calls_retried`, then the rest of the row.
#[derive(Debug, Serialize)]
pub struct ExecutionView<'a> {
    /// The execution as `status` lists it (its checkpoint key).
    pub execution: &'a str,
    pub events_read: u64,
    pub events_skipped: u64,
    pub events_rejected: u64,
    /// Events of an older payload shape, upcast on read.
    pub events_upcast: u64,
    /// A simulation: orders in its diff.
    pub orders_in_diff: u64,
    pub orders_changed: u64,
    pub total_before_cents: i64,
    pub total_after_cents: i64,
    pub effects: &'a BTreeMap<EffectOutcome, u64>,
    /// Provider calls that were retries (a second or later try of a key).
    pub calls_retried: u64,
    pub state_outcomes: &'a BTreeMap<StateOutcome, u64>,
    /// How far the pass is through the window's events, 0–100; `None` for an empty window or
    /// the live consumer.
    pub progress_percent: Option<f64>,
    #[serde(flatten)]
    pub row: &'a Execution,
}

impl<'a> From<&'a Execution> for ExecutionView<'a> {
    /// The execution with its figures over all its passes (`status --json`, see
    /// [`crate::shared::summary::Summary::over_passes`]).
    fn from(e: &'a Execution) -> Self {
        ExecutionView::with(e, &e.summary)
    }
}

impl<'a> ExecutionView<'a> {
    /// The execution with the figures of its current pass alone at the top level: what `run
    /// --json` prints about the pass it just ran (a `--restart` that corrects nothing says 0
    /// orders changed; `status --json` says what the execution changed over all its passes).
    pub fn of_pass(e: &'a Execution) -> Self {
        ExecutionView::with(e, &e.pass_summary)
    }

    fn with(e: &'a Execution, s: &'a crate::shared::summary::Summary) -> Self {
        ExecutionView {
            execution: &e.key,
            events_read: s.events_read,
            events_skipped: s.events_skipped,
            events_rejected: s.events_rejected,
            events_upcast: s.events_upcast,
            // A real run's diff is its corrections (as its page and report say).
            orders_in_diff: match e.mode {
                Mode::Real => s.orders_changed,
                _ => s.orders_in_diff,
            },
            orders_changed: s.orders_changed,
            total_before_cents: s.total_before_centavos,
            total_after_cents: s.total_after_centavos,
            effects: &s.effects,
            calls_retried: s.calls_retried,
            state_outcomes: &s.state,
            progress_percent: e.progress_percent(),
            row: e,
        }
    }
}

impl Execution {
    /// How far the pass is through the window's events, 0–100: the events of its settled
    /// batches over the window's count (a finished execution is 100); `None` for an empty window
    /// or the live consumer. Counted in events, not in `posicao` (a window's positions are not
    /// spread evenly: other types' events, other days' events archived between them).
    pub fn progress_percent(&self) -> Option<f64> {
        let (first, last) = (self.first?, self.last?);
        if last < first || self.total_events <= 0 {
            return None;
        }
        if self.state == super::State::Finished {
            return Some(100.0);
        }
        let done = self.pass_summary.events_read as f64;
        Some((done / self.total_events as f64 * 100.0).clamp(0.0, 100.0))
    }
}

impl State {
    /// How `status` names the state of an execution in `mode`: the seed's word, except that a
    /// live consumer stopped on request is `stopped` — it has no window to be interrupted in,
    /// and its next start simply carries on.
    pub fn label_in(self, mode: Mode) -> &'static str {
        match (mode, self) {
            (Mode::Live, State::Interrupted) => "stopped",
            _ => self.as_db(),
        }
    }
}
