//! The end-of-run summary as text: what `run` and `demo` print after a run. It lives with the
//! report it renders, so the command line and the demo both call it without importing each other.

use std::collections::BTreeMap;
use std::fmt;

use crate::shared::text::inert;

use super::{Ended, RunReport};
use crate::shared::money;
use crate::tables::execution::Mode;

impl fmt::Display for RunReport {
    /// Several lines, each ending in a newline: how it ended, its figures, its rejected events.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_ending(f)?;
        self.write_figures(f)?;
        self.write_rejected(f)
    }
}

impl RunReport {
    /// The first line: finished (with its pace), stopped, or already finished.
    fn write_ending(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mode = self.mode.label();
        match &self.ended {
            Ended::AlreadyFinished { at } => writeln!(
                f,
                "{} ({mode}) already finished{}; nothing to do (use --restart for a new pass).",
                self.execution_id,
                at.map(|t| format!(" at {}", t.format("%Y-%m-%d %H:%M:%S UTC")))
                    .unwrap_or_default()
            ),
            Ended::Interrupted => writeln!(
                f,
                "{} ({mode}) stopped at posicao {}{}; run it again to resume.",
                self.execution_id,
                self.checkpoint.map_or("-".into(), |c| c.to_string()),
                self.stopped_by
                    .as_deref()
                    .map(|by| format!(" (asked by {by})"))
                    .unwrap_or_default()
            ),
            Ended::Finished => {
                let secs = self.elapsed.as_secs_f64().max(1e-3);
                writeln!(
                    f,
                    "{} ({mode}) finished: {} events in this run, {:.1} s ({:.0} events/s)",
                    self.execution_id,
                    self.events_this_run,
                    secs,
                    self.events_this_run as f64 / secs
                )
            }
        }
    }

    /// Events, orders and their commissions, states, effects and (for a real run) retries.
    fn write_figures(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.summary;
        writeln!(
            f,
            "  events read {}, skipped {}, rejected {}, upcast {}",
            s.events_read, s.events_skipped, s.events_rejected, s.events_upcast
        )?;
        let verb = if self.mode == Mode::Simulation {
            "would change"
        } else {
            "changed"
        };
        writeln!(
            f,
            "  orders {verb}: {}; their commissions {} -> {} ({})",
            s.orders_changed,
            money::brl(s.total_before_centavos),
            money::brl(s.total_after_centavos),
            money::brl_signed(
                s.total_after_centavos
                    .saturating_sub(s.total_before_centavos)
            )
        )?;
        writeln!(f, "  state: {}", counts(&s.state))?;
        writeln!(f, "  effects: {}", counts(&s.effects))?;
        if self.mode != Mode::Simulation {
            writeln!(f, "  calls retried: {}", s.calls_retried)?;
        }
        Ok(())
    }

    /// The first 20 rejected events (archive text made inert), and how many more there are.
    fn write_rejected(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.rejected.is_empty() {
            return Ok(());
        }
        writeln!(f, "  rejected events:")?;
        for r in self.rejected.iter().take(20) {
            writeln!(
                f,
                "    {} (posicao {}, {}): {}",
                inert(&r.event_id),
                r.posicao,
                inert(&r.tipo),
                inert(&r.erro)
            )?;
        }
        if self.rejected.len() > 20 {
            writeln!(
                f,
                "    … and {} more (see table evento_rejeitado)",
                self.rejected.len() - 20
            )?;
        }
        Ok(())
    }
}

/// `concluido 3, reservado 1`, or `none`.
pub fn counts<K: std::fmt::Display>(map: &BTreeMap<K, u64>) -> String {
    if map.is_empty() {
        return "none".into();
    }
    map.iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}
