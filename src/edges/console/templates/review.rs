//! The review queue (with the keys queued for a resend) and the confirmation of one decision for
//! several keys.

use chrono_tz::Tz;
use maud::{html, Markup};

use super::super::session::Session;
use super::{layout, segment, submits_exactly, time, Attr, Inert, Part};
use crate::services::report::render::age;
use crate::shared::money::brl;
use crate::tables::ledger::{Resolution, ReviewFilter, ReviewItem, QUEUED};

/// What the review page shows.
pub(in crate::edges::console) struct Review<'a> {
    pub session: &'a Session,
    pub tz: Tz,
    pub items: &'a [ReviewItem],
    pub filter: &'a ReviewFilter,
    /// The age filter as typed.
    pub older_than: Option<String>,
    /// The keys just resolved, and how, as recorded.
    pub done: &'a [(String, Resolution)],
}

fn reason(item: &ReviewItem) -> String {
    match (item.motivo, item.status_http) {
        (Some(m), Some(status)) => format!("{m} ({status})"),
        (Some(m), None) => m.to_string(),
        (None, _) => "-".into(),
    }
}

/// `GET /review`.
pub(in crate::edges::console) fn list(r: &Review<'_>) -> Markup {
    let may_resolve = r.session.role.may_resolve();
    let body = html! {
        @for (key, outcome) in r.done {
            p.ok role="status" { (Inert(key)) ": "
                @match outcome {
                    Resolution::Sent => "registrado como enviado (concluido).",
                    Resolution::NotSent => "registrado como não enviado: a próxima varredura (sweep) o envia.",
                }
            }
        }
        p { "Efeitos cujo resultado ninguém sabe (incerto): nunca são reenviados automaticamente. Quem confirmar com o provedor o que aconteceu registra aqui; um efeito marcado como não enviado fica como reenvio pendente até a próxima varredura enviá-lo." }
        @if r.session.role.may_sweep() {
            p { a.button #sweep-link href="/sweep" { "Rodar uma varredura agora" } }
        }
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
                    @if may_resolve { th { "Escolher" } }
                    th { "Chave" } th { "Pedido" } th.num { "Valor" } th { "Situação" } th { "Tipo" } th { "Execução" } th { "Motivo" } th.num { "Idade" }
                    th.num { "Tentativas" } th { "Último erro" } th { "Incerto desde" }
                    @if may_resolve { th { "Decisão" } }
                } }
                tbody { @for item in r.items { (row(r, item, may_resolve)) } }
            } }
            @if may_resolve {
                form #bulk method="get" action="/review/confirm" {
                    "Escolhidos: "
                    button type="submit" name="outcome" value="sent" { "Foram enviados" }
                    button type="submit" name="outcome" value="not-sent" { "Não foram enviados" }
                }
            }
        }
    };
    layout("Revisão", Part::Review, r.session, body)
}

/// One row of the queue: a key waiting for a decision, or one queued for a resend.
fn row(r: &Review<'_>, item: &ReviewItem, may_resolve: bool) -> Markup {
    let pending = item.status == QUEUED;
    html! { tr {
        @if may_resolve { td {
            @if !pending && submits_exactly(&item.key) {
                input type="checkbox" form="bulk" name="key" value=(Attr(&item.key)) aria-label="escolher";
            }
        } }
        td.key { (Inert(&item.key)) }
        td { (order(item)) }
        td.num { (item.valor_centavos.map_or("-".into(), brl)) }
        td.state { @if pending { "reenvio pendente" } @else { "incerto" } }
        td { (Inert(&item.tipo_efeito)) }
        td { a href={ "/executions/" (segment(&item.execucao_id)) } { (Inert(&item.execucao_id)) } }
        td { (reason(item)) }
        td.num { (age(item.idade_segundos)) }
        td.num { (item.tentativas) }
        td { (Inert(item.ultimo_erro.as_deref().unwrap_or("-"))) }
        td { (time(item.desde, r.tz)) }
        @if may_resolve { td {
            @if pending { "a próxima varredura envia" } @else { (resolve_form(r.session, &item.key)) }
        } }
    } }
}

/// The order of an item, linked to its story.
fn order(item: &ReviewItem) -> Markup {
    html! {
        @if let Some(id) = &item.pedido_id {
            a href={ "/pedidos/" (segment(id)) } { (Inert(id)) }
        } @else { "-" }
    }
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

/// `GET /review/confirm`: the keys chosen, and the one decision for all of them.
pub(in crate::edges::console) fn confirm(
    session: &Session,
    tz: Tz,
    items: &[ReviewItem],
    outcome: Resolution,
) -> Markup {
    let (said, word) = match outcome {
        Resolution::Sent => ("foram enviados (ficam concluido)", "sent"),
        Resolution::NotSent => (
            "não foram enviados (a próxima varredura os envia, uma vez)",
            "not-sent",
        ),
    };
    let body = html! {
        p { "Confirme que estes " (items.len()) " efeito(s) " (said) "." }
        div.scroll { table.data #confirm {
            thead { tr { th { "Chave" } th { "Pedido" } th.num { "Valor" } th { "Execução" } th { "Incerto desde" } } }
            tbody { @for item in items { tr {
                td.key { (Inert(&item.key)) }
                td { (order(item)) }
                td.num { (item.valor_centavos.map_or("-".into(), brl)) }
                td { (Inert(&item.execucao_id)) }
                td { (time(item.desde, tz)) }
            } } }
        } }
        form.resolve method="post" action="/review/resolve" {
            input type="hidden" name="csrf_token" value=(session.csrf);
            @for item in items { input type="hidden" name="key" value=(Attr(&item.key)); }
            input type="hidden" name="outcome" value=(word);
            input type="text" name="note" maxlength="500" placeholder="nota (opcional)" aria-label="nota";
            button type="submit" #confirm-decision { "Confirmar" }
        }
        p { a href="/review" { "Cancelar" } }
    };
    layout("Confirmar decisão", Part::Review, session, body)
}
