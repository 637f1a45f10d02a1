//! The commission table as of a moment, and as known at another.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use maud::{html, Markup};

use super::super::session::Session;
use super::{layout, query_value, segment, time, Attr, Inert, Part};
use crate::services::history::AsOfRow;
use replay_ledger_core::shared::money::{brl, group_thousands};

/// What the form was given, as typed.
#[derive(Debug, Default)]
pub(in crate::edges::console) struct Asked {
    pub as_of: String,
    pub known_at: String,
}

/// The table found.
pub(in crate::edges::console) struct Shown<'a> {
    pub as_of: DateTime<Utc>,
    pub known_at: Option<DateTime<Utc>>,
    pub orders: u64,
    pub total_cents: i64,
    pub rows: &'a [AsOfRow],
}

/// `GET /historico`.
pub(in crate::edges::console) fn page(
    session: &Session,
    tz: Tz,
    asked: &Asked,
    shown: Option<&Shown<'_>>,
) -> Markup {
    let body = html! {
        p { "A tabela comissao como o arquivo de eventos a determina em um momento (pela hora em que cada evento ocorreu) e, se pedido, como o sistema a conhecia em outro momento (só os eventos arquivados até então: o que os livros fechados viram). Horários em " (tz.name()) "." }
        form.filter #history-form method="get" action="/historico" {
            label for="em" { "Em" }
            input #em type="text" name="em" placeholder="AAAA-MM-DD HH:MM" value=(Attr(&asked.as_of));
            label for="conhecido" { "Como conhecida em (opcional)" }
            input #conhecido type="text" name="conhecido" placeholder="AAAA-MM-DD HH:MM" value=(Attr(&asked.known_at));
            button type="submit" { "Ver a tabela" }
        }
        @if let Some(s) = shown {
            p #history-totals {
                (group_thousands(s.orders)) " pedidos, total " (brl(s.total_cents))
                ", em " (time(s.as_of, tz))
                @if let Some(k) = s.known_at { ", como conhecida em " (time(k, tz)) }
                "."
            }
            p.downloads {
                a #history-csv download href={ "/historico?em=" (query_value(&asked.as_of)) "&conhecido=" (query_value(&asked.known_at)) "&formato=csv" } { "Baixar a tabela inteira (CSV)" }
            }
            @if s.orders as usize > s.rows.len() { p { "Os primeiros " (s.rows.len()) " pedidos (todos no CSV)." } }
            div.scroll { table.data #history-table {
                thead { tr { th { "Pedido" } th.num { "Comissão" } th.num { "Versão" } th { "Evento ocorrido em" } } }
                tbody { @for r in s.rows { tr {
                    td { a href={ "/pedidos/" (segment(&r.pedido_id)) } { (Inert(&r.pedido_id)) } }
                    td.num { (brl(r.valor_centavos)) }
                    td.num { (r.versao_evento) }
                    td { (time(r.ocorrido_em, tz)) }
                } } }
            } }
        }
    };
    layout("Histórico da comissão", Part::History, session, body)
}
