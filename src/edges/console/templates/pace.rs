//! A running execution's pace, as its runner publishes it every few seconds: what moves inside a
//! batch (effect calls), beside what moves when a batch settles (the figures above it).

use maud::{html, Markup};

use super::{facts, Inert};
use crate::shared::money::group_thousands;
use crate::tables::execution::progress::Pace;

/// The section of a running execution's page; says so when no runner published lately.
pub(in crate::edges::console) fn section(paces: &[Pace]) -> Markup {
    html! {
        section #pace {
            h2 { "Ritmo agora" }
            @if paces.is_empty() {
                p { "Nenhum processo publicou o ritmo desta execução nos últimos segundos (ela pode estar parada, ou o processo que a roda pode ser de uma versão anterior)." }
            }
            @for p in paces {
                @if paces.len() > 1 { h3 { (Inert(&p.key)) } }
                (facts(&rows(p)))
                @if let Some(effect) = &p.rate_limited_by {
                    p.warning { "Contido pelo limite de taxa (rate_per_second) de " code { (Inert(effect)) } ": o ritmo é o do limite, não o do provedor." }
                }
            }
        }
    }
}

fn rows(p: &Pace) -> Vec<(&'static str, String)> {
    vec![
        (
            "Eventos de lotes assentados",
            format!(
                "{} de {}",
                group_thousands(p.events_done.max(0) as u64),
                group_thousands(p.events_total.max(0) as u64)
            ),
        ),
        (
            "Chamadas de efeito feitas nesta passagem (andam dentro do lote)",
            group_thousands(p.calls.max(0) as u64),
        ),
        ("Eventos/s", format!("{:.0}", p.events_per_s)),
        ("Efeitos/s", format!("{:.0}", p.effects_per_s)),
        (
            "Tempo restante estimado",
            p.eta_s.map_or("-".into(), |s| eta(s.max(0) as u64)),
        ),
    ]
}

fn eta(s: u64) -> String {
    match s {
        0..=59 => format!("{s} s"),
        60..=3599 => format!("{} min {} s", s / 60, s % 60),
        _ => format!("{} h {} min", s / 3600, (s % 3600) / 60),
    }
}
