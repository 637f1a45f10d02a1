//! `GET /pedidos/{pedido_id}`: one order's story, as `explain` tells it.

use chrono_tz::Tz;
use maud::{html, Markup};

use super::super::session::Session;
use super::{facts, layout, segment, time, Inert, Part};
use crate::services::story::Story;
use replay_ledger_core::domain::Inputs;
use replay_ledger_core::shared::money::brl;

/// The order's page.
pub(in crate::edges::console) fn page(session: &Session, tz: Tz, s: &Story) -> Markup {
    let row = match &s.comissao {
        Some(c) => format!(
            "{} (versão {}, {})",
            brl(c.valor_centavos),
            c.versao_evento,
            time(c.atualizado_em, tz)
        ),
        None => "sem linha".into(),
    };
    let verdict = if s.consistent {
        "consistente"
    } else {
        "inconsistente"
    };
    let expected_label = match s.as_of {
        Some(at) => format!("Esperada pelo arquivo em {}", time(at, tz)),
        None => "Esperada pelo arquivo".into(),
    };
    let body = html! {
        (as_of_form(s, tz))
        (facts(&[
            ("Comissão atual", row),
            (expected_label.as_str(), s.expected_cents.map_or("nenhuma".into(), brl)),
            // Today's row is judged against today's archive, as of whatever moment.
            (if s.as_of.is_some() { "Situação hoje" } else { "Situação" }, verdict.into()),
            ("Regra", replay_ledger_core::domain::RULE_VERSION.into()),
        ]))
        @if let Some(why) = &s.reason {
            p.warning #reason { "Por que está inconsistente: " (why) }
        }
        h2 { "Eventos" }
        (events(s, tz))
        h2 { "Correções" }
        (corrections(s, tz))
        h2 #efeitos { "Efeitos" }
        (effects(s, tz))
    };
    layout(
        &format!(
            "Pedido {}",
            replay_ledger_core::shared::text::inert(&s.pedido_id)
        ),
        Part::Executions,
        session,
        body,
    )
}

/// "Como estava em": the story as of a moment (a GET form, so the page's address says it).
fn as_of_form(s: &Story, tz: Tz) -> Markup {
    html! {
        form.as-of method="get" action={ "/pedidos/" (segment(&s.pedido_id)) } {
            label { "Como estava em (" (tz.name()) "): "
                input type="text" name="as_of" placeholder="2026-10-31 ou 2026-10-31 18:00"
                    value=(s.as_of.map(|at| at.with_timezone(&tz).to_rfc3339()).unwrap_or_default());
            }
            " " button type="submit" { "Ver" }
            @if s.as_of.is_some() {
                " " a href={ "/pedidos/" (segment(&s.pedido_id)) } { "hoje" }
                p { "Só os eventos ocorridos até esse momento; a comissão atual é a de hoje." }
            }
        }
    }
}

fn events(s: &Story, tz: Tz) -> Markup {
    html! {
        div.scroll { table.data #events {
            thead { tr { th.num { "Posição" } th { "Evento" } th { "Tipo" } th.num { "Versão" } th { "Ocorrido em" } th { "Arquivado em" } th { "Entradas" } th { "Comissão" } } }
            tbody { @for e in &s.events { tr {
                td.num { (e.posicao) }
                td.key { (Inert(&e.id)) }
                td { (Inert(&e.tipo)) }
                td.num { (e.versao) }
                td { (time(e.ocorrido_em, tz)) }
                td { @match e.arquivado_em { Some(at) => { (time(at, tz)) }, None => { "-" } } }
                td.inputs { @if let Some(i) = &e.inputs { (inputs(i)) } @else { "-" } }
                td { @match (&e.rejected, e.commission_cents) {
                    (Some(why), _) => { "rejeitado: " (Inert(why)) },
                    (None, Some(cents)) => { (brl(cents)) },
                    (None, None) => { "não tratado" },
                } }
            } } }
        } }
    }
}

/// What the rule read: the amount, the percentage and the payload's format.
fn inputs(i: &Inputs) -> Markup {
    html! {
        @if let Some(valor) = &i.valor { "valor " (Inert(valor)) " → " }
        @match i.valor_centavos { Some(c) => { (brl(c)) " (valorCentavos " (c) ")" }, None => { "valor inválido" } }
        " × " @match &i.percentual { Some(p) => { (Inert(p)) " %" }, None => { "percentual ausente" } }
        br;
        small { @if i.valor.is_some() { "formato antigo (valor em reais), convertido na leitura" } @else { "formato atual" } }
    }
}

fn corrections(s: &Story, tz: Tz) -> Markup {
    html! {
        @if s.corrections.is_empty() { p { "Nenhuma correção." } }
        @else { div.scroll { table.data #corrections {
            thead { tr { th { "Execução" } th.num { "Passagem" } th.num { "Antes" } th.num { "Depois" } th.num { "Versão" } th { "Em" } } }
            tbody { @for c in &s.corrections { tr {
                td { a href={ "/executions/" (segment(&c.execution_id)) } { (Inert(&c.execution_id)) } }
                td.num { (c.passagem) }
                td.num { (c.antes.map_or("sem linha".into(), brl)) }
                td.num { (brl(c.depois)) }
                td.num { (c.versao_evento) }
                td { (time(c.registrado_em, tz)) }
            } } }
        } } }
    }
}

fn effects(s: &Story, tz: Tz) -> Markup {
    html! {
        @if s.effects.is_empty() { p { "Nenhum efeito registrado." } }
        @else { div.scroll { table.data #effects {
            thead { tr { th { "Chave" } th { "Estado" } th { "Execução" } th.num { "Tentativas" } th { "Motivo" } th { "Atualizado em" } } }
            tbody { @for e in &s.effects { tr {
                td.key { (Inert(&e.key)) }
                td.state { (e.status) }
                td { (Inert(&e.execution_id)) }
                td.num { (e.tentativas) }
                td { @if let Some(m) = e.motivo { (m.to_string()) } @else { "-" } }
                td { (time(e.atualizado_em, tz)) }
            } } }
        } } }
    }
}
