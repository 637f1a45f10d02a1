//! The live consumer's page (`GET /executions/ao-vivo`).

use chrono_tz::Tz;
use maud::{html, Markup};

use super::super::session::Session;
use super::super::views::LiveView;
use super::{facts, layout, layout_refreshing, query_value, segment, time, Inert, Part};
use crate::services::report::render::{figure_rows, state_label};
use replay_ledger_core::services::consumer::LAG_CAP;
use replay_ledger_core::shared::money::group_thousands;
use replay_ledger_core::tables::execution::{Mode, State};

/// `GET /executions/ao-vivo`: refreshes itself while the consumer runs.
pub(in crate::edges::console) fn page(session: &Session, tz: Tz, v: &LiveView) -> Markup {
    let running = v
        .execution
        .as_ref()
        .is_some_and(|e| e.state == State::Running);
    let body = html! {
        @match &v.execution {
            None => p.warning { "O consumidor ao vivo deste programa (" code { "replay-ledger consume" }
                ") nunca rodou neste banco. As chaves " code { "ao-vivo" }
                " do livro de efeitos abaixo foram gravadas por outro consumidor (o consumidor JavaScript do seed, por exemplo): este programa só as lê." },
            Some(e) => section #state {
                h2 { "Estado" }
                (facts(&[
                    ("Estado", state_label(e.state).to_string()),
                    ("Processo", e.started_by.clone()),
                    ("Desde", time(e.started_at, tz)),
                ]))
                @if let Some(error) = &e.error {
                    p.warning { "Último erro: " (Inert(error)) }
                }
            },
        }
        @if let Some(lag) = &v.lag {
            section #position {
                h2 { "Posição e atraso" }
                (facts(&[
                    ("Posição segura (checkpoint: tudo até aqui aplicado)", position(lag.checkpoint.posicao)),
                    ("Eventos arquivados ainda não aplicados", pending(lag.pending.events)),
                    ("Idade do mais antigo deles", seconds(lag.pending.oldest_age_seconds)),
                    ("Transação mais antiga em andamento no servidor", lag.horizon.xid.map_or("nenhuma".into(), |x| format!("{x}, há {}", seconds(lag.horizon.age.as_secs_f64())))),
                ]))
                @if let Some(event) = &v.last_event {
                    p { "Último evento aplicado: " code { (Inert(&event.id)) } " (" (Inert(&event.tipo)) ", pedido "
                        a href={ "/pedidos/" (segment(&event.pedido_id)) } { (Inert(&event.pedido_id)) }
                        ", ocorrido em " (time(event.ocorrido_em, tz)) ")." }
                }
            }
        }
        @if let Some(e) = &v.execution {
            section #figures {
                h2 { "Números desde o início" }
                (facts(&figure_rows(Mode::Live, &e.summary)))
            }
        }
        section #keys {
            h2 { "Chaves ao-vivo no livro de efeitos" }
            @if v.keys.is_empty() { p { "Nenhuma." } }
            @else {
                (facts(&v.keys.iter().map(|(estado, n)| (estado.as_str(), group_thousands(*n as u64))).collect::<Vec<_>>()))
            }
            p { a href={ "/review?execution=" (query_value("ao-vivo")) } { "As incertas na fila de revisão" } }
        }
    };
    let title = "Consumidor ao vivo";
    if running {
        layout_refreshing(title, Part::Executions, session, body)
    } else {
        layout(title, Part::Executions, session, body)
    }
}

/// A checkpoint position; the first one stands for "before the archive's first event".
fn position(posicao: i64) -> String {
    if posicao == i64::MIN {
        "antes do primeiro evento".into()
    } else {
        posicao.to_string()
    }
}

fn pending(events: i64) -> String {
    let n = group_thousands(events.max(0) as u64);
    if events >= LAG_CAP {
        format!("{n} ou mais")
    } else {
        n
    }
}

fn seconds(s: f64) -> String {
    if s < 1.0 {
        "menos de 1 s".into()
    } else {
        format!("{} s", group_thousands(s as u64))
    }
}
