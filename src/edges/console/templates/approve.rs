//! The confirmation before an approval: what it binds and what the real run will apply.

use std::collections::BTreeMap;

use chrono_tz::Tz;
use maud::{html, Markup};

use super::super::session::Session;
use super::super::views::Standing;
use super::{facts, layout, segment, time, Inert, Part};
use crate::services::report::render::figure_rows;
use crate::services::report::ExecutionReport;
use replay_ledger_core::engine::definition::Definition;
use replay_ledger_core::shared::money::{brl, brl_signed, group_thousands};
use replay_ledger_core::tables::execution::Execution;

/// What the confirmation page shows.
pub(in crate::edges::console) struct Confirm<'a> {
    pub session: &'a Session,
    pub tz: Tz,
    pub execution: &'a Execution,
    pub report: &'a ExecutionReport,
    pub standing: &'a Standing,
    /// The job's definition recorded with the simulation (what the approval binds).
    pub definition: Option<&'a Definition>,
    /// The pass shown and the fingerprint an approval would record: the form carries both, so
    /// the approval is of exactly this or nothing. `None` when no approval can be given now.
    pub seen: Option<&'a (i32, String)>,
    /// The messages the real run would send now, by effect type (`None`: the job is not gated).
    pub sends: Option<&'a BTreeMap<String, u64>>,
}

/// What approving will send: the count by effect type, and the list as files.
fn messages(page: &str, sends: &BTreeMap<String, u64>) -> Markup {
    let total: u64 = sends.values().sum();
    html! {
        section #sends {
            h2 { "Mensagens que a aprovação enviará" }
            @if total == 0 {
                p { "Nenhuma: todos os efeitos desta janela já estão no livro de efeitos." }
            } @else {
                ul { @for (tipo, n) in sends { li {
                    (group_thousands(*n)) " " (if *n == 1 { "mensagem" } else { "mensagens" })
                    " de " (Inert(tipo))
                } } }
                p { "A lista: "
                    a href={ (page) "/effects.csv" } { "CSV" } " · "
                    a href={ (page) "/effects.xlsx" } { "XLSX" }
                    ". São as chaves que o livro de efeitos ainda não tem, agora; se o consumidor ao vivo ou outra execução enviar alguma antes, a execução real envia menos, nunca mais." }
            }
        }
    }
}

/// `GET /executions/{id}/approve`.
pub(in crate::edges::console) fn confirm(c: Confirm<'_>) -> Markup {
    let e = c.execution;
    let page = format!("/executions/{}", segment(&e.key));
    // The rule the simulation computed with, as recorded with it (a candidate's name and
    // version); a simulation recorded before definitions were, the rule in force.
    let rule = c
        .definition
        .and_then(|d| d.0.get("rule").cloned())
        .unwrap_or_else(|| replay_ledger_core::domain::RULE_VERSION.to_string());
    let body = html! {
        p { "Ao aprovar, a execução real desta janela passa a poder rodar e aplicará exatamente o que esta simulação mostra: corrige "
            code { "comissao" } " dos pedidos abaixo e executa os efeitos que faltam. Se algo mudar até lá (eventos, comissões, a definição do job), a execução real é recusada." }
        section #what {
            h2 { "O que será aplicado" }
            (facts(&figure_rows(e.mode, &e.summary)))
            p { "Simulação concluída em " (e.finished_at.map_or("-".into(), |t| time(t, c.tz))) "." }
            p #window { "Janela: de " (e.window_from.map_or("-".into(), |t| time(t, c.tz)))
                " a " (e.window_to.map_or("-".into(), |t| time(t, c.tz)))
                " (" (c.tz.name()) "). Regra: " code { (rule) } "." }
        }
        @if let Some(sends) = c.sends { (messages(&page, sends)) }
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
                    tbody { @for (field, value) in &definition.0 { tr { th scope="row" { (Inert(field)) } td { (Inert(&in_zone(value, c.tz))) } } } }
                } }
            }
        }
        section #confirm {
            h2 { "Confirmar" }
            @match c.standing {
                Standing::Approvable if c.session.role.may_approve() => {
                    form.approve method="post" action={ (page) "/approve" } {
                        input type="hidden" name="csrf_token" value=(c.session.csrf);
                        @if let Some((pass, fingerprint)) = c.seen {
                            input type="hidden" name="pass" value=(pass);
                            input type="hidden" name="fingerprint" value=(fingerprint);
                            p.fingerprint { "Você aprova a passagem " (pass) " desta simulação, impressão digital " code { (fingerprint) } ". Se ela mudar antes de você confirmar, nada é aprovado e a página pede que você revise de novo." }
                        }
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
        &format!(
            "Aprovar {}",
            replay_ledger_core::shared::text::inert(&e.key)
        ),
        Part::Executions,
        c.session,
        body,
    )
}

/// A definition's value as the page shows it: an instant (the window's ends, recorded in UTC) in
/// the page's timezone, like every other time on it; anything else as recorded.
fn in_zone(value: &str, tz: chrono_tz::Tz) -> String {
    match chrono::DateTime::parse_from_rfc3339(value) {
        Ok(t) => time(t.with_timezone(&chrono::Utc), tz),
        Err(_) => value.to_string(),
    }
}
