//! An execution's figures: its summary (the tallies, in the report's words), its effects per
//! outcome, and its passes — the list on its page, each with its figures, and an earlier pass's
//! own page (`?passagem=N`).

use chrono_tz::Tz;
use maud::{html, Markup};

use super::super::session::Session;
use super::{facts, layout, segment, time, Part};
use crate::services::report::render::{figure_rows, meaning, mode_label, state_label};
use replay_ledger_core::shared::money::{brl_signed, group_thousands};
use replay_ledger_core::shared::summary::{Summary, Totals};
use replay_ledger_core::tables::execution::{Execution, Mode, PassRecord};

/// An earlier pass of an execution: when it ran, who ran it, how it ended, its figures.
pub(in crate::edges::console) fn earlier_pass(
    session: &Session,
    tz: Tz,
    e: &Execution,
    pass: &PassRecord,
    all: &[PassRecord],
) -> Markup {
    let rows = vec![
        (
            "Execução",
            format!("{} (passagem {} de {})", e.key, pass.pass, e.pass),
        ),
        ("Modo", mode_label(pass.mode).to_string()),
        ("Situação", state_label(pass.state).to_string()),
        (
            "Iniciada",
            format!("{} por {}", time(pass.started_at, tz), pass.started_by),
        ),
        (
            "Concluída",
            pass.finished_at.map_or("-".into(), |t| time(t, tz)),
        ),
    ];
    let body = html! {
        section #identity { h2 { "Passagem " (pass.pass) } (facts(&rows)) }
        (figures(pass.mode, &pass.summary))
        (effects(&pass.summary))
        p { a href={ "/executions/" (segment(&e.key)) } { "Voltar à passagem atual" } }
        (passes(e, all, tz))
    };
    layout(
        &format!(
            "Execução {} · passagem {}",
            replay_ledger_core::shared::text::inert(&e.key),
            pass.pass
        ),
        Part::Executions,
        session,
        body,
    )
}

/// Every pass of the execution, the newest first, each with its figures and a link to it.
pub(super) fn passes(e: &Execution, passes: &[PassRecord], tz: Tz) -> Markup {
    if passes.len() < 2 {
        return html! {};
    }
    let base = format!("/executions/{}", segment(&e.key));
    html! {
        section #passes {
            h2 { "Passagens" }
            div.scroll { table.data {
                thead { tr {
                    th { "Passagem" } th { "Situação" } th { "Iniciada" } th.num { "Eventos lidos" }
                    th.num { "Pedidos alterados" } th.num { "Diferença" }
                } }
                tbody { @for p in passes {
                    @let t = Totals::of_summary(p.mode == Mode::Simulation, &p.summary);
                    tr {
                        td { @if p.pass == e.pass { (p.pass) " (atual)" }
                             @else { a href={ (base) "?passagem=" (p.pass) } { (p.pass) } } }
                        td { (state_label(p.state)) }
                        td { (time(p.started_at, tz)) }
                        td.num { (group_thousands(p.summary.events_read)) }
                        td.num { (group_thousands(t.changed)) }
                        td.num { (brl_signed(t.difference())) }
                    }
                } }
            } }
        }
    }
}

/// The tallies, as `status --json` prints them and as the report lists them.
pub(super) fn figures(mode: Mode, summary: &Summary) -> Markup {
    html! {
        section #summary {
            h2 { "Resumo" }
            (facts(&figure_rows(mode, summary)))
        }
    }
}

pub(super) fn effects(summary: &Summary) -> Markup {
    html! {
        section #effects {
            h2 { "Efeitos" }
            @if summary.effects.is_empty() { p { "Nenhum efeito." } }
            @else {
                div.scroll { table.data {
                    thead { tr { th { "Resultado" } th.num { "Quantidade" } th { "Significado" } } }
                    tbody { @for (outcome, n) in &summary.effects { tr {
                        td { (outcome.to_string()) } td.num { (group_thousands(*n)) } td { (meaning(*outcome)) }
                    } } }
                } }
            }
        }
    }
}
