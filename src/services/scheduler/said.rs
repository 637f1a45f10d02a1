//! One line saying how a run fired by `serve` ended, in Portuguese, for the console's page of a
//! request (its figures, or why it stopped). Used by the fire and by the requests it serves.

use replay_ledger_core::services::runner::{Ended, RunError, RunReport};
use replay_ledger_core::shared::text::inert;

/// An error as one inert line.
pub(super) fn line(e: &dyn std::fmt::Display) -> String {
    let text = e.to_string();
    inert(text.lines().next().unwrap_or_default())
}

/// One line saying how a run ended: its figures, or why it stopped.
pub(super) fn said(result: &Result<RunReport, RunError>) -> String {
    match result {
        Ok(report) => {
            let s = &report.summary;
            let figures = format!(
                "{} eventos lidos, {} pedidos alterados, {} efeitos",
                s.events_read,
                s.orders_changed,
                s.effects.values().sum::<u64>()
            );
            match report.ended {
                Ended::Finished => format!("concluída: {figures}"),
                Ended::AlreadyFinished { .. } => format!("já estava concluída: {figures}"),
                Ended::Interrupted => match &report.stopped_by {
                    Some(by) => format!(
                        "interrompida a pedido de {} no checkpoint {} ({figures}); peça para retomar",
                        inert(by),
                        report.checkpoint.map_or("-".into(), |c| c.to_string())
                    ),
                    None => format!(
                        "interrompida pelo desligamento do serve ({figures}); peça para retomar"
                    ),
                },
            }
        }
        Err(RunError::NotApproved(gate)) => format!("recusada pela aprovação: {}", line(gate)),
        Err(e) => format!("falhou: {}", line(e)),
    }
}
