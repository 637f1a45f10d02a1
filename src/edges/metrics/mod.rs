//! What `serve` tells the outside: Prometheus `/metrics` (text exposition format 0.0.4, written by
//! hand — a handful of families does not justify a metrics crate and its global registry) and
//! `/healthz` (the database answers and the scheduler's heartbeat is recent).
//!
//! Counters live in this process ([`Metrics`], kept by [`replay_ledger_core::services::counters`], rendered here): they
//! start at zero when `serve` starts, as Prometheus expects of counters. Gauges about executions and the review queue are read from the
//! database ([`DbGauges`]), so every `serve` instance reports the same values for them — by one
//! background task on a timer, never by a scrape (`endpoints.rs`).

mod endpoints;
mod exposition;
mod live;
mod process;

use std::time::Duration;

use sqlx::PgPool;

use replay_ledger_core::tables::execution::{self, Execution};
use replay_ledger_core::tables::ledger;

pub use endpoints::{bind, router, serve, DbSnapshot, Endpoint, HttpState};
pub use exposition::escape_label;
use exposition::Exposition;
pub use replay_ledger_core::services::counters::{Metrics, RunOutcome};

/// The content type of the text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The whole exposition: this process's counters, then the gauges read from the database
/// (`replay_ledger_database_up 0` and no such gauge when the last read failed or is stale).
pub fn render(metrics: &Metrics, db: Option<&DbGauges>) -> String {
    let mut out = Exposition::default();
    process::render_counters(metrics, &mut out);
    out.family(
        "replay_ledger_database_up",
        "gauge",
        "1 when the last read of the database gauges below succeeded and is recent and this process's own database steps are not failing (what /healthz says of the database), else 0 (and they are absent).",
    );
    out.sample("replay_ledger_database_up", &[], i32::from(db.is_some()));
    if let Some(db) = db {
        db.render(&mut out);
    }
    out.0
}

/// The gauges read from the database (by [`DbSnapshot::run`]).
#[derive(Debug, Clone, Default)]
pub struct DbGauges {
    /// The executions reported: every one not finished, plus the newest of each job (so a
    /// nightly job does not add a series per day forever).
    pub executions: Vec<Execution>,
    pub review_queue: i64,
    /// The live consumer's lag, when it has ever run in this database.
    pub live: Option<replay_ledger_core::services::consumer::Lag>,
    /// The newest blue-green rebuild of `comissao`, if any ever ran.
    pub rebuild: Option<replay_ledger_core::services::rebuild::Rebuild>,
}

impl DbGauges {
    /// Reads them, giving up after `limit`.
    pub async fn read(pool: &PgPool, limit: Duration) -> Result<DbGauges, String> {
        let horizon = replay_ledger_core::services::consumer::horizon::HorizonWatch::default();
        DbGauges::read_watching(pool, limit, &horizon).await
    }

    /// [`DbGauges::read`], with `horizon` remembering across readings since when the live
    /// consumer's horizon has been held.
    pub async fn read_watching(
        pool: &PgPool,
        limit: Duration,
        horizon: &replay_ledger_core::services::consumer::horizon::HorizonWatch,
    ) -> Result<DbGauges, String> {
        let read = async {
            let all = execution::list(pool).await?;
            let review_queue = ledger::review_queue_size(pool).await?;
            let live = replay_ledger_core::services::consumer::lag(pool, horizon).await?;
            let rebuild = replay_ledger_core::services::rebuild::latest(pool).await?;
            Ok::<_, sqlx::Error>(DbGauges {
                executions: reported(all),
                review_queue,
                live,
                rebuild,
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
        self.render_rebuild(out);
    }

    /// Whether a blue-green rebuild of `comissao` is under way (built or compared, not yet
    /// swapped or given up), and how much of the archive it has read.
    fn render_rebuild(&self, out: &mut Exposition) {
        let r = self.rebuild.as_ref();
        out.family(
            "replay_ledger_rebuild_in_progress",
            "gauge",
            "1 while a rebuild of comissao is under way (construindo or comparada), else 0.",
        );
        let on = r.is_some_and(|r| r.stage.in_progress());
        out.sample("replay_ledger_rebuild_in_progress", &[], u8::from(on));
        out.family(
            "replay_ledger_rebuild_progress_ratio",
            "gauge",
            "Share of the archive's pedido.pago events the newest rebuild has read (0..1).",
        );
        out.sample(
            "replay_ledger_rebuild_progress_ratio",
            &[],
            r.map_or(0.0, |r| r.progress()),
        );
        out.family(
            "replay_ledger_rebuild_rederived_orders",
            "gauge",
            "Orders the newest rebuild has re-derived because a live writer wrote them.",
        );
        out.sample(
            "replay_ledger_rebuild_rederived_orders",
            &[],
            r.map_or(0, |r| r.orders_rederived),
        );
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
        out.family(
            "replay_ledger_execution_calls_retried",
            "gauge",
            "Provider calls of the execution that were retries (beyond each key's first), from its tallies.",
        );
        for e in &self.executions {
            out.sample(
                "replay_ledger_execution_calls_retried",
                &[("execution", &e.key)],
                e.summary.calls_retried,
            );
        }
    }
}

/// Every execution not finished, plus the newest of each job and mode (`list` is newest first);
/// a partitioned execution is reported beside its partitions, not hidden behind the newest one.
fn reported(all: Vec<Execution>) -> Vec<Execution> {
    let mut seen = std::collections::HashSet::new();
    all.into_iter()
        .filter(|e| {
            let newest = seen.insert((
                e.job.clone(),
                e.mode,
                replay_ledger_core::tables::execution::is_partition_key(&e.key),
            ));
            newest || e.state != execution::State::Finished
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use replay_ledger_core::shared::summary::Summary;

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
        delta.count_effect(
            replay_ledger_core::shared::summary::EffectOutcome::Applied,
            5,
        );
        metrics.add_work("nightly", &delta);
        metrics.record_run("nightly", RunOutcome::Finished);

        let text = render(&metrics, None);

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
        let text = render(&Metrics::new(), Some(&DbGauges::default()));
        for family in [
            "replay_ledger_events_total",
            "replay_ledger_effects_total",
            "replay_ledger_runs_total",
            "replay_ledger_last_success_timestamp_seconds",
            "replay_ledger_sweeper_rows_total",
            "replay_ledger_checkpoint_position",
            "replay_ledger_remaining_events",
            "replay_ledger_review_queue",
            "replay_ledger_rebuild_in_progress",
            "replay_ledger_rebuild_progress_ratio",
        ] {
            assert!(text.contains(&format!("# HELP {family} ")), "{family}");
            assert!(text.contains(&format!("# TYPE {family} ")), "{family}");
        }
    }
}
