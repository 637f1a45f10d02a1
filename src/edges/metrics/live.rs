//! The live consumer's gauges: what waits to be applied, and what holds its checkpoint.

use super::Exposition;

/// The live consumer's lag: what waits to be applied, and what holds its checkpoint.
pub(super) fn render_lag(out: &mut Exposition, lag: &replay_ledger_core::services::consumer::Lag) {
    out.family(
        "replay_ledger_live_lag_events",
        "gauge",
        "Events archived (committed) that the live consumer has not applied yet (counted up to 100000).",
    );
    out.sample("replay_ledger_live_lag_events", &[], lag.pending.events);
    out.family(
        "replay_ledger_live_lag_seconds",
        "gauge",
        "Seconds since the oldest of those events was archived; 0 when none waits.",
    );
    out.sample(
        "replay_ledger_live_lag_seconds",
        &[],
        seconds(lag.pending.oldest_age_seconds),
    );
    out.family(
        "replay_ledger_live_horizon_age_seconds",
        "gauge",
        "How long the oldest transaction still running on the server (any database) has been open: the live consumer's stored checkpoint cannot pass it (new events are applied anyway); 0 when none runs.",
    );
    out.sample(
        "replay_ledger_live_horizon_age_seconds",
        &[],
        lag.horizon.age.as_secs(),
    );
}

/// Seconds with a millisecond's precision.
fn seconds(s: f64) -> String {
    format!("{:.3}", s.max(0.0))
}
