//! The review queue.

use chrono_tz::Tz;
use maud::{html, Markup};

use super::super::session::Session;
use super::{layout, segment, submits_exactly, time, Attr, Inert, Part};
use crate::tables::ledger::{Resolution, ReviewFilter, ReviewItem};

/// What the review page shows.
pub(in crate::edges::console) struct Review<'a> {
    pub session: &'a Session,
    pub tz: Tz,
    pub items: &'a [ReviewItem],
    pub filter: &'a ReviewFilter,
    /// The age filter as typed.
    pub older_than: Option<String>,
    /// The key just resolved, and how.
    pub done: Option<(&'a str, Resolution)>,
}

fn reason(item: &ReviewItem) -> String {
    match (item.motivo, item.status_http) {
        (Some(m), Some(status)) => format!("{m} ({status})"),
        (Some(m), None) => m.to_string(),
        (None, _) => "-".into(),
    }
}

/// `3 min`, `2 h 05 min`, `4 d 3 h`.
fn age(seconds: i64) -> String {
    let s = seconds.max(0);
    let (d, h, m) = (s / 86_400, s % 86_400 / 3600, s % 3600 / 60);
    match (d, h) {
        (0, 0) => format!("{m} min"),
        (0, _) => format!("{h} h {m:02} min"),
        _ => format!("{d} d {h} h"),
    }
}

/// `GET /review`.
pub(in crate::edges::console) fn list(r: &Review<'_>) -> Markup {
    let may_resolve = r.session.role.may_resolve();
    let body = html! {
        @if let Some((key, outcome)) = r.done {
            p.ok role="status" { (Inert(key)) ": "
                @match outcome {
                    Resolution::Sent => "registrado como enviado (concluido).",
                    Resolution::NotSent => "registrado como não enviado: a próxima execução da janela o faz.",
                }
            }
        }
        p { "Efeitos cujo resultado ninguém sabe (incerto): nunca são reenviados automaticamente. Quem confirmar com o provedor o que aconteceu registra aqui." }
        form.filter method="get" action="/review" {
            label for="type" { "Tipo" }
            input #type type="text" name="type" value=(Attr(r.filter.effect_type.as_deref().unwrap_or("")));
            label for="execution" { "Execução" }
            input #execution type="text" name="execution" value=(Attr(r.filter.execution.as_deref().unwrap_or("")));
            label for="older_than" { "Mais antigos que" }
            input #older_than type="text" name="older_than" placeholder="2h" value=(Attr(r.older_than.as_deref().unwrap_or("")));
            button type="submit" { "Filtrar" }
        }
        p #review-count { (r.items.len()) " efeito(s)." }
        @if !r.items.is_empty() {
            div.scroll { table.data #review {
                thead { tr {
                    th { "Chave" } th { "Tipo" } th { "Execução" } th { "Motivo" } th.num { "Idade" }
                    th.num { "Tentativas" } th { "Último erro" } th { "Incerto desde" }
                    @if may_resolve { th { "Decisão" } }
                } }
                tbody { @for item in r.items { tr {
                    td.key { (Inert(&item.key)) }
                    td { (Inert(&item.tipo_efeito)) }
                    td { a href={ "/executions/" (segment(&item.execucao_id)) } { (Inert(&item.execucao_id)) } }
                    td { (reason(item)) }
                    td.num { (age(item.idade_segundos)) }
                    td.num { (item.tentativas) }
                    td { (Inert(item.ultimo_erro.as_deref().unwrap_or("-"))) }
                    td { (time(item.desde, r.tz)) }
                    @if may_resolve { td { (resolve_form(r.session, &item.key)) } }
                } } }
            } }
        }
    };
    layout("Revisão", Part::Review, r.session, body)
}

/// The decision form of `key`; a key no form can carry exactly is left to the CLI.
fn resolve_form(session: &Session, key: &str) -> Markup {
    if !submits_exactly(key) {
        return html! { p.warning { "Chave com quebra de linha ou controle C1: resolva com " code { "replay-ledger review resolve" } "." } };
    }
    html! {
        form.resolve method="post" action="/review/resolve" {
            input type="hidden" name="csrf_token" value=(session.csrf);
            input type="hidden" name="key" value=(Attr(key));
            input type="text" name="note" maxlength="500" placeholder="nota (opcional)" aria-label="nota";
            button type="submit" name="outcome" value="sent" { "Foi enviado" }
            button type="submit" name="outcome" value="not-sent" { "Não foi enviado" }
        }
    }
}
