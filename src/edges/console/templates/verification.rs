//! The days verify jobs found wrong and their proposed corrections.

use chrono_tz::Tz;
use maud::{html, Markup};

use super::super::session::Session;
use super::{layout, segment, time, Inert, Part};
use replay_ledger_core::shared::money::{brl_signed, group_thousands};
use replay_ledger_core::tables::execution::{Execution, State};
use replay_ledger_core::tables::proposals::Proposal;

/// One proposal with its executions.
pub(in crate::edges::console) struct Row {
    pub proposal: Proposal,
    pub simulation: Option<Execution>,
    pub run: Option<Execution>,
    /// An approval of the simulation's current pass exists.
    pub approved: bool,
}

/// Where a proposal stands, in one phrase.
fn standing(r: &Row) -> &'static str {
    match (&r.run, &r.simulation) {
        (Some(run), _) if run.state == State::Finished => "aplicada",
        (Some(run), _) if run.state == State::Running => "em execução",
        (Some(_), _) => "execução parada: retome-a",
        (None, Some(s)) if s.state == State::Finished && r.approved => {
            "aprovada: pronta para iniciar"
        }
        (None, Some(s)) if s.state == State::Finished => "simulada: aguardando aprovação",
        (None, Some(s)) if s.state == State::Running => "simulando",
        (None, Some(_)) => "simulação parada",
        (None, None) => "proposta, sem simulação ainda",
    }
}

/// `GET /verificacao`.
pub(in crate::edges::console) fn page(session: &Session, tz: Tz, rows: &[Row]) -> Markup {
    let body = html! {
        p { "Cada dia que um job de verificação encontrou errado, com a correção que ele propôs: um job de reprocessamento do dia, exigindo simulação aprovada, guardado no banco (nada é escrito no diretório de jobs). O serve simula a proposta; finanças aprova e inicia a execução real na página da simulação." }
        @if rows.is_empty() {
            p #no-proposals { "Nenhum dia errado encontrado até agora." }
        } @else {
            div.scroll { table.data #proposals {
                thead { tr {
                    th { "Dia" } th { "Verificação" } th.num { "Pedidos errados" } th.num { "Sem comissão" }
                    th.num { "Efeitos faltando" } th.num { "Diferença" } th { "Proposta em" } th { "Situação" } th { "Correção" }
                } }
                tbody { @for r in rows {
                    @let p = &r.proposal;
                    tr {
                        td { (p.day.format("%d/%m/%Y")) }
                        td { (Inert(&p.verify_job)) }
                        td.num { (group_thousands(p.orders_wrong as u64)) }
                        td.num { (group_thousands(p.orders_missing as u64)) }
                        td.num { (group_thousands(p.effects_missing as u64)) }
                        td.num { (brl_signed(p.difference_cents)) }
                        td { (time(p.proposed_at, tz)) }
                        td.standing { (standing(r)) }
                        td {
                            @if let Some(s) = &r.simulation {
                                a href={ "/executions/" (segment(&s.key)) } { "simulação" }
                            }
                            @if let Some(run) = &r.run {
                                " · " a href={ "/executions/" (segment(&run.key)) } { "execução real" }
                            }
                        }
                    }
                } }
            } }
        }
    };
    layout("Verificação", Part::Verification, session, body)
}
