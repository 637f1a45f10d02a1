//! What `serve` tells the outside: Prometheus `/metrics` (text exposition format 0.0.4, written by
//! hand — a handful of families does not justify a metrics crate and its global registry) and
//! `/healthz` (the database answers and the scheduler's heartbeat is recent).
//!
//! Counters live in this process ([`Metrics`]): they start at zero when `serve` starts, as
//! Prometheus expects of counters. Gauges about executions and the review queue are read from the
//! database ([`DbGauges`]), so every `serve` instance reports the same values for them — by one
//! background task on a timer, never by a scrape (`endpoints.rs`).

mod endpoints;
mod exposition;
mod live;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use crate::execution::{self, Execution};
use crate::ledger;
use crate::summary::Summary;
use crate::sweeper::SweepOutcome;

pub use endpoints::{bind, router, serve, DbSnapshot, HttpState};
pub use exposition::escape_label;
use exposition::Exposition;

/// The content type of the text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// How a scheduled run of a job ended: the `outcome` label of `replay_ledger_runs_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum RunOutcome {
    /// The window was completed (a sweep pass ended).
    Finished,
    /// The execution was already finished; nothing to do.
    AlreadyFinished,
    /// Stopped between batches by shutdown; the next fire (or `run`) resumes it.
    Interrupted,
    /// Failed; retried at the next fire.
    Failed,
    /// Another process holds the job or the execution; this fire was skipped.
    LockedElsewhere,
}

impl RunOutcome {
    pub const ALL: [RunOutcome; 5] = [
        RunOutcome::Finished,
        RunOutcome::AlreadyFinished,
        RunOutcome::Interrupted,
        RunOutcome::Failed,
        RunOutcome::LockedElsewhere,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RunOutcome::Finished => "finished",
            RunOutcome::AlreadyFinished => "already_finished",
            RunOutcome::Interrupted => "interrupted",
            RunOutcome::Failed => "failed",
            RunOutcome::LockedElsewhere => "locked_elsewhere",
        }
    }
}

/// The counters of this process, plus the scheduler's heartbeat.
#[derive(Debug, Default)]
pub struct Metrics {
    counters: Mutex<Counters>,
    /// Unix seconds of the last heartbeat; 0 = none yet.
    heartbeat: AtomicI64,
}

#[derive(Debug, Default)]
struct Counters {
    events: BTreeMap<String, u64>,
    effects: BTreeMap<(String, crate::summary::EffectOutcome), u64>,
    runs: BTreeMap<(String, &'static str), u64>,
    last_success: BTreeMap<String, DateTime<Utc>>,
    sweeper: BTreeMap<&'static str, u64>,
}

impl Metrics {
    pub fn new() -> Self {
        let metrics = Metrics::default();
        let mut c = metrics.lock();
        for action in ["retaken", "completed", "released", "uncertain"] {
            c.sweeper.insert(action, 0);
        }
        drop(c);
        metrics
    }

    fn lock(&self) -> MutexGuard<'_, Counters> {
        // A panic while holding it cannot leave the maps inconsistent: every update is one insert.
        self.counters.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes a job's series exist at zero from the start, so `rate()` and `increase()` see the
    /// first run. `replay` jobs also get `replay_ledger_events_total`.
    pub fn register_job(&self, job: &str, replay: bool) {
        let mut c = self.lock();
        for outcome in RunOutcome::ALL {
            c.runs
                .entry((job.to_string(), outcome.as_str()))
                .or_default();
        }
        if replay {
            c.events.entry(job.to_string()).or_default();
        }
    }

    pub fn record_run(&self, job: &str, outcome: RunOutcome) {
        *self
            .lock()
            .runs
            .entry((job.to_string(), outcome.as_str()))
            .or_default() += 1;
    }

    pub fn record_success(&self, job: &str, at: DateTime<Utc>) {
        self.lock().last_success.insert(job.to_string(), at);
    }

    /// Adds what one run did: the difference between the execution's summary after and before it.
    pub fn add_work(&self, job: &str, delta: &Summary) {
        let mut c = self.lock();
        *c.events.entry(job.to_string()).or_default() += delta.events_read;
        for (outcome, n) in &delta.effects {
            *c.effects.entry((job.to_string(), *outcome)).or_default() += n;
        }
    }

    pub fn add_sweep(&self, outcome: &SweepOutcome) {
        let mut c = self.lock();
        for (action, n) in [
            ("retaken", outcome.retaken),
            ("completed", outcome.completed),
            ("released", outcome.released),
            ("uncertain", outcome.uncertain),
        ] {
            *c.sweeper.entry(action).or_default() += n;
        }
    }

    /// Records that the scheduler is alive.
    pub fn beat(&self, now: DateTime<Utc>) {
        self.heartbeat.store(now.timestamp(), Ordering::Relaxed);
    }

    /// How long ago the scheduler last beat; `None` before the first beat.
    pub fn heartbeat_age(&self, now: DateTime<Utc>) -> Option<Duration> {
        match self.heartbeat.load(Ordering::Relaxed) {
            0 => None,
            t => Some(Duration::from_secs((now.timestamp() - t).max(0) as u64)),
        }
    }

    /// The whole exposition: this process's counters, then the gauges read from the database
    /// (`replay_ledger_database_up 0` and no such gauge when the last read failed or is stale).
    pub fn render(&self, db: Option<&DbGauges>) -> String {
        let mut out = Exposition::default();
        self.render_counters(&mut out);
        out.family(
            "replay_ledger_database_up",
            "gauge",
            "1 when the last read of the database gauges below succeeded and is recent, else 0 (and they are absent).",
        );
        out.sample("replay_ledger_database_up", &[], i32::from(db.is_some()));
        if let Some(db) = db {
            db.render(&mut out);
        }
        out.0
    }

    fn render_counters(&self, out: &mut Exposition) {
        let c = self.lock();
        out.family(
            "replay_ledger_events_total",
            "counter",
            "Archived events read by runs of this process (replay jobs, the live consumer), per job.",
        );
        for (job, n) in &c.events {
            out.sample("replay_ledger_events_total", &[("job", job)], n);
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
        out.family(
            "replay_ledger_sweeper_rows_total",
            "counter",
            "Ledger rows handled by sweeper passes of this process: retaken, completed, released (retake failed, retried at a later pass), uncertain (moved to incerto).",
        );
        for (action, n) in &c.sweeper {
            out.sample("replay_ledger_sweeper_rows_total", &[("action", action)], n);
        }
        out.family(
            "replay_ledger_scheduler_heartbeat_timestamp_seconds",
            "gauge",
            "Unix time of the last heartbeat of this process (serve's scheduler, or consume), every 5 s.",
        );
        out.sample(
            "replay_ledger_scheduler_heartbeat_timestamp_seconds",
            &[],
            self.heartbeat.load(Ordering::Relaxed),
        );
    }
}

/// The gauges read from the database (by [`DbSnapshot::run`]).
#[derive(Debug, Clone, Default)]
pub struct DbGauges {
    /// The executions reported: every one not finished, plus the newest of each job (so a
    /// nightly job does not add a series per day forever).
    pub executions: Vec<Execution>,
    pub review_queue: i64,
    /// The live consumer's lag, when it has ever run in this database.
    pub live: Option<crate::consumer::Lag>,
}

impl DbGauges {
    /// Reads them, giving up after `limit`.
    pub async fn read(pool: &PgPool, limit: Duration) -> Result<DbGauges, String> {
        let horizon = crate::consumer::horizon::HorizonWatch::default();
        DbGauges::read_watching(pool, limit, &horizon).await
    }

    /// [`DbGauges::read`], with `horizon` remembering across readings since when the live
    /// consumer's horizon has been held.
    pub async fn read_watching(
        pool: &PgPool,
        limit: Duration,
        horizon: &crate::consumer::horizon::HorizonWatch,
    ) -> Result<DbGauges, String> {
        let read = async {
            let all = execution::list(pool).await?;
            let review_queue = ledger::review_queue_size(pool).await?;
            let live = crate::consumer::lag(pool, horizon).await?;
            Ok::<_, sqlx::Error>(DbGauges {
                executions: reported(all),
                review_queue,
                live,
            })
        };
        match tokio::time::timeout(limit, read).await {
            Ok(Ok(gauges)) => Ok(gauges),
            Ok(Err(e)) => Err(format!("database: {e}")),
            Err(_) => Err(format!("database: no answer within {limit:?}")),
        }
    }

    fn render(&self, out: &mut Exposition) {
        out.family(
            "replay_ledger_checkpoint_position",
            "gauge",
            "Last posicao fully settled by the execution (reprocessamento_checkpoint).",
        );
        for e in &self.executions {
            if let Some(cp) = e.checkpoint {
                out.sample(
                    "replay_ledger_checkpoint_position",
                    &[("execution", &e.key)],
                    cp,
                );
            }
        }
        out.family(
            "replay_ledger_remaining_events",
            "gauge",
            "Events of the execution's window not yet read: total_eventos minus the events read so far.",
        );
        for e in &self.executions {
            let remaining = (e.total_events - e.summary.events_read as i64).max(0);
            out.sample(
                "replay_ledger_remaining_events",
                &[("execution", &e.key)],
                remaining,
            );
        }
        self.render_figures(out);
        if let Some(lag) = &self.live {
            live::render_lag(out, lag);
        }
        out.family(
            "replay_ledger_review_queue",
            "gauge",
            "Effects in incerto, waiting for a human (review list / review resolve).",
        );
        out.sample("replay_ledger_review_queue", &[], self.review_queue);
    }

    /// Each reported execution's figures, read from its tallies (the numbers `status --json`,
    /// `run --json` and the report show).
    fn render_figures(&self, out: &mut Exposition) {
        out.family(
            "replay_ledger_execution_events",
            "gauge",
            "Events of the execution's window by what became of them (read, skipped: another type, rejected: invalid), from its tallies.",
        );
        for e in &self.executions {
            let s = &e.summary;
            for (kind, n) in [
                ("read", s.events_read),
                ("skipped", s.events_skipped),
                ("rejected", s.events_rejected),
            ] {
                out.sample(
                    "replay_ledger_execution_events",
                    &[("execution", &e.key), ("kind", kind)],
                    n,
                );
            }
        }
        out.family(
            "replay_ledger_execution_orders_changed",
            "gauge",
            "Orders whose commission the execution changed (a simulation: would change), from its tallies.",
        );
        for e in &self.executions {
            let key = [("execution", e.key.as_str())];
            out.sample(
                "replay_ledger_execution_orders_changed",
                &key,
                e.summary.orders_changed,
            );
        }
        out.family(
            "replay_ledger_execution_commission_cents",
            "gauge",
            "Sum of those orders' commissions before and after the execution, in cents, from its tallies.",
        );
        for e in &self.executions {
            let s = &e.summary;
            for (side, cents) in [
                ("before", s.total_before_centavos),
                ("after", s.total_after_centavos),
            ] {
                out.sample(
                    "replay_ledger_execution_commission_cents",
                    &[("execution", &e.key), ("side", side)],
                    cents,
                );
            }
        }
        out.family(
            "replay_ledger_execution_effects",
            "gauge",
            "Effects of the execution by outcome (the seed's words), from its tallies.",
        );
        for e in &self.executions {
            for (outcome, n) in &e.summary.effects {
                out.sample(
                    "replay_ledger_execution_effects",
                    &[("execution", &e.key), ("outcome", outcome.as_db())],
                    n,
                );
            }
        }
    }
}

/// Every execution not finished, plus the newest of each job and mode (`list` is newest first);
/// a partitioned execution is reported beside its partitions, not hidden behind the newest one.
fn reported(all: Vec<Execution>) -> Vec<Execution> {
    let mut seen = std::collections::HashSet::new();
    all.into_iter()
        .filter(|e| {
            let newest = seen.insert((e.job.clone(), e.mode, is_partition(&e.key)));
            newest || e.state != execution::State::Finished
        })
        .collect()
}

/// A partition's key: `<execution>:p<index>`.
fn is_partition(key: &str) -> bool {
    key.rsplit_once(":p")
        .is_some_and(|(_, i)| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape_label(r#"a"b\c"#), r#"a\"b\\c"#);
        assert_eq!(escape_label("a\nb"), r"a\nb");
    }

    #[test]
    fn a_run_adds_its_events_and_effects_to_the_job_series() {
        let metrics = Metrics::new();
        metrics.register_job("nightly", true);
        let mut delta = Summary {
            events_read: 7,
            ..Summary::default()
        };
        delta.count_effect(crate::summary::EffectOutcome::Applied, 5);
        metrics.add_work("nightly", &delta);
        metrics.record_run("nightly", RunOutcome::Finished);

        let text = metrics.render(None);

        assert!(
            text.contains("replay_ledger_events_total{job=\"nightly\"} 7\n"),
            "{text}"
        );
        assert!(
            text.contains("replay_ledger_effects_total{job=\"nightly\",outcome=\"aplicado\"} 5\n")
        );
        assert!(text.contains("replay_ledger_runs_total{job=\"nightly\",outcome=\"finished\"} 1\n"));
        assert!(text.contains("replay_ledger_runs_total{job=\"nightly\",outcome=\"failed\"} 0\n"));
        assert!(text.contains("replay_ledger_sweeper_rows_total{action=\"retaken\"} 0\n"));
        assert!(text.contains("replay_ledger_database_up 0\n"));
    }

    #[test]
    fn every_family_has_help_and_type_lines() {
        let text = Metrics::new().render(Some(&DbGauges::default()));
        for family in [
            "replay_ledger_events_total",
            "replay_ledger_effects_total",
            "replay_ledger_runs_total",
            "replay_ledger_last_success_timestamp_seconds",
            "replay_ledger_sweeper_rows_total",
            "replay_ledger_checkpoint_position",
            "replay_ledger_remaining_events",
            "replay_ledger_review_queue",
        ] {
            assert!(text.contains(&format!("# HELP {family} ")), "{family}");
            assert!(text.contains(&format!("# TYPE {family} ")), "{family}");
        }
    }
}
