//! The confirmation before an approval: what it binds and what the real run will apply.

use chrono_tz::Tz;
use maud::{html, Markup};

use super::super::session::Session;
use super::super::views::Standing;
use super::{facts, layout, segment, time, Inert, Part};
use crate::engine::definition::Definition;
use crate::services::report::render::figure_rows;
use crate::services::report::ExecutionReport;
use crate::shared::money::{brl, brl_signed};
use crate::tables::execution::Execution;

/// What the confirmation page shows.
pub(in crate::edges::console) struct Confirm<'a> {
    pub session: &'a Session,
    pub tz: Tz,
    pub execution: &'a Execution,
    pub report: &'a ExecutionReport,
    pub standing: &'a Standing,
    /// The job's definition recorded with the simulation (what the approval binds).
    pub definition: Option<&'a Definition>,
}

/// `GET /executions/{id}/approve`.
pub(in crate::edges::console) fn confirm(c: Confirm<'_>) -> Markup {
    let e = c.execution;
    let page = format!("/executions/{}", segment(&e.key));
    let body = html! {
        p { "Ao aprovar, a execução real desta janela passa a poder rodar e aplicará exatamente o que esta simulação mostra: corrige "
            code { "comissao" } " dos pedidos abaixo e executa os efeitos que faltam. Se algo mudar até lá (eventos, comissões, a definição do job), a execução real é recusada." }
        section #what {
            h2 { "O que será aplicado" }
            (facts(&figure_rows(e.mode, &e.summary)))
            p { "Simulação concluída em " (e.finished_at.map_or("-".into(), |t| time(t, c.tz))) "." }
        }
        section #largest {
            h2 { "Maiores alterações" }
            @if c.report.largest.is_empty() { p { "Nenhuma." } }
            @else {
                div.scroll { table.data {
                    thead { tr { th { "Pedido" } th.num { "Antes" } th.num { "Depois" } th.num { "Diferença" } } }
                    tbody { @for r in c.report.largest.iter().take(10) { tr {
                        td { (Inert(&r.pedido_id)) }
                        td.num { (r.antes.map_or("-".into(), brl)) }
                        td.num { (brl(r.depois)) }
                        td.num { (brl_signed(r.diferenca())) }
                    } } }
                } }
            }
            p { a href=(page) { "Ver o diff completo" } }
        }
        @if let Some(definition) = c.definition {
            section #definition {
                h2 { "Definição do job que a aprovação prende" }
                div.scroll { table.data {
                    tbody { @for (field, value) in &definition.0 { tr { th scope="row" { (Inert(field)) } td { (Inert(value)) } } } }
                } }
            }
        }
        section #confirm {
            h2 { "Confirmar" }
            @match c.standing {
                Standing::Approvable if c.session.role.may_approve() => {
                    form.approve method="post" action={ (page) "/approve" } {
                        input type="hidden" name="csrf_token" value=(c.session.csrf);
                        label for="note" { "Nota (opcional)" }
                        input #note type="text" name="note" maxlength="500";
                        button type="submit" { "Confirmar a aprovação" }
                        a href=(page) { "Cancelar" }
                    }
                },
                Standing::Approvable => p { "Só uma conta de finanças aprova." },
                Standing::Approved { .. } => p.ok { "Esta simulação já está aprovada." },
                Standing::Changed { what, .. } => p.warning { "Não pode ser aprovada: " (Inert(what)) },
                Standing::Unfinished => p { "Simulação não concluída: nada a aprovar ainda." },
                Standing::NoJob(why) => p.warning { "O job não pôde ser lido: " (Inert(why)) },
                Standing::NotNeeded => p { "O job desta simulação não exige aprovação." },
            }
        }
    };
    layout(
        &format!("Aprovar {}", crate::shared::text::inert(&e.key)),
        Part::Executions,
        c.session,
        body,
    )
}
