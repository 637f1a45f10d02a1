//! A running execution's pace, as its runner publishes it every few seconds: what moves inside a
//! batch (effect calls), beside what moves when a batch settles (the figures above it).

use maud::{html, Markup};

use super::{facts, Inert};
use replay_ledger_core::shared::money::group_thousands;
use replay_ledger_core::tables::execution::progress::Pace;

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

/// The chart of a run's pace over time: events settled per second and effect calls per second,
/// drawn on the server as SVG (no script), with the peak and the first and last instants.
pub(in crate::edges::console) fn chart(
    samples: &[replay_ledger_core::tables::execution::progress::Sample],
    tz: chrono_tz::Tz,
) -> Markup {
    const W: f64 = 640.0;
    const H: f64 = 180.0;
    const PAD: f64 = 8.0;
    if samples.len() < 2 {
        return html! {};
    }
    let peak = samples
        .iter()
        .flat_map(|s| [s.events_per_s, s.effects_per_s])
        .fold(0.0_f64, f64::max)
        .max(1.0);
    let (t0, t1) = (samples[0].at, samples[samples.len() - 1].at);
    let span = (t1 - t0).num_milliseconds().max(1) as f64;
    let x = |s: &replay_ledger_core::tables::execution::progress::Sample| {
        PAD + (s.at - t0).num_milliseconds() as f64 / span * (W - 2.0 * PAD)
    };
    let y = |v: f64| H - PAD - v / peak * (H - 2.0 * PAD);
    let line = |value: fn(&replay_ledger_core::tables::execution::progress::Sample) -> f64| {
        samples
            .iter()
            .map(|s| format!("{:.1},{:.1}", x(s), y(value(s))))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let events = line(|s| s.events_per_s);
    let effects = line(|s| s.effects_per_s);
    let label = format!(
        "Ritmo de {} a {}: pico de {:.0} por segundo",
        super::time(t0, tz),
        super::time(t1, tz),
        peak
    );
    html! {
        section #pace-chart-section {
            h2 { "Ritmo ao longo da execução" }
            svg #pace-chart xmlns="http://www.w3.org/2000/svg" viewBox={ "0 0 " (W) " " (H) } role="img" aria-label=(label) preserveAspectRatio="none" {
                rect x="0" y="0" width=(W) height=(H) fill="#f7f9fc" {}
                line x1=(PAD) y1=(H - PAD) x2=(W - PAD) y2=(H - PAD) stroke="#9aa7b8" {}
                polyline.events points=(events) fill="none" stroke="#1f3a5f" stroke-width="2" {}
                polyline.effects points=(effects) fill="none" stroke="#c0622b" stroke-width="2" stroke-dasharray="5 3" {}
            }
            p.legend {
                span.events { "— eventos assentados por segundo" } " · "
                span.effects { "- - chamadas de efeito por segundo" } " · "
                "pico " (format!("{peak:.0}")) "/s; de " (super::time(t0, tz)) " a " (super::time(t1, tz)) "."
            }
        }
    }
}
