//! The counters of this process ([`replay_ledger_core::services::counters`]) as Prometheus families: events, effect
//! outcomes, scheduled runs, last success, sweeper rows and the scheduler's heartbeat.

use super::Exposition;
use replay_ledger_core::services::counters::Metrics;

/// This process's counters, as families.
pub(super) fn render_counters(metrics: &Metrics, out: &mut Exposition) {
    let c = metrics.counts();
    out.family(
        "replay_ledger_events_total",
        "counter",
        "Archived events read by runs of this process (replay jobs, the live consumer), per job.",
    );
    for (job, n) in &c.events {
        out.sample("replay_ledger_events_total", &[("job", job)], n);
    }
    out.family(
        "replay_ledger_events_upcast_total",
        "counter",
        "Archived events of an older payload shape upcast on read by runs of this process, per job.",
    );
    for (job, n) in &c.upcast {
        out.sample("replay_ledger_events_upcast_total", &[("job", job)], n);
    }
    out.family(
        "replay_ledger_events_rejected_total",
        "counter",
        "Archived events rejected as invalid by runs of this process, per job and reason.",
    );
    for ((job, reason), n) in &c.rejected {
        out.sample(
            "replay_ledger_events_rejected_total",
            &[("job", job), ("reason", reason)],
            n,
        );
    }
    out.family(
        "replay_ledger_effects_total",
        "counter",
        "Effect outcomes of runs of this process (replay jobs, the live consumer: aplicado, ja-registrado, suprimido, seria-aplicado, incerto, liberado), per job.",
    );
    for ((job, outcome), n) in &c.effects {
        out.sample(
            "replay_ledger_effects_total",
            &[("job", job), ("outcome", outcome.as_db())],
            n,
        );
    }
    out.family(
        "replay_ledger_runs_total",
        "counter",
        "Scheduled runs of this process by how they ended (finished, already_finished, interrupted, failed, locked_elsewhere), per job.",
    );
    for ((job, outcome), n) in &c.runs {
        out.sample(
            "replay_ledger_runs_total",
            &[("job", job), ("outcome", outcome)],
            n,
        );
    }
    out.family(
        "replay_ledger_last_success_timestamp_seconds",
        "gauge",
        "Unix time at which a run of the job last finished (a window completed, a sweep pass ended) in this process.",
    );
    for (job, at) in &c.last_success {
        out.sample(
            "replay_ledger_last_success_timestamp_seconds",
            &[("job", job)],
            at.timestamp(),
        );
    }
    render_verify(&c.verify, out);
    out.family(
        "replay_ledger_sweeper_rows_total",
        "counter",
        "Ledger rows handled by sweeper passes of this process: retaken, completed, released (retake failed, retried at a later pass), uncertain (moved to incerto), resent (queued by a review decision and sent).",
    );
    for (action, n) in &c.sweeper {
        out.sample("replay_ledger_sweeper_rows_total", &[("action", action)], n);
    }
    out.family(
        "replay_ledger_breaker_open",
        "gauge",
        "1 while an effect type's breaker is open in this process (its calls paused, one probe after each cooldown), 0 once it closed or gave up (the run then stops).",
    );
    for (effect, open) in replay_ledger_core::engine::effects::breakers_open() {
        out.sample(
            "replay_ledger_breaker_open",
            &[("effect", &effect)],
            u8::from(open),
        );
    }
    out.family(
        "replay_ledger_scheduler_heartbeat_timestamp_seconds",
        "gauge",
        "Unix time of the last heartbeat of this process (serve's scheduler, or consume), every 5 s.",
    );
    out.sample(
        "replay_ledger_scheduler_heartbeat_timestamp_seconds",
        &[],
        metrics.heartbeat_unix(),
    );
}

/// The last run of each verify job of this process: what it found, and when.
fn render_verify(
    last: &std::collections::BTreeMap<String, replay_ledger_core::services::counters::LastVerify>,
    out: &mut Exposition,
) {
    let families = [
        ("replay_ledger_verify_orders_wrong", "Orders whose comissao differs from the archive (value or version), at the job's last verify run."),
        ("replay_ledger_verify_orders_missing", "Orders with no comissao row, at the job's last verify run."),
        ("replay_ledger_verify_effects_missing", "Effects the live policy applies with no ledger row, at the job's last verify run."),
        ("replay_ledger_verify_last_run_timestamp_seconds", "Unix time at which the job's last verify run ended."),
    ];
    for (name, help) in families {
        out.family(name, "gauge", help);
        for (job, v) in last {
            let value = match name {
                "replay_ledger_verify_orders_wrong" => v.orders_wrong as i64,
                "replay_ledger_verify_orders_missing" => v.orders_missing as i64,
                "replay_ledger_verify_effects_missing" => v.effects_missing as i64,
                _ => v.at.timestamp(),
            };
            out.sample(name, &[("job", job)], value);
        }
    }
}
