//! The review queue (with the keys queued for a resend) and the confirmation every decision goes
//! through, for one key or several: the keys, their attempts and earlier decisions, and the one
//! button that records it.

use chrono_tz::Tz;
use maud::{html, Markup};

use super::super::session::Session;
use super::{layout, segment, submits_exactly, time, Attr, Inert, Part};
use crate::services::report::render::age;
use replay_ledger_core::shared::money::brl;
use replay_ledger_core::tables::ledger::{
    KeyAttempt, PastDecision, Resolution, ReviewFilter, ReviewItem, QUEUED,
};

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
    /// A replay or a sweep is running: the queue may grow or shrink, so the page reloads itself.
    pub running: bool,
}

/// How often the queue reloads itself while a replay runs: slower than an execution's page,
/// since a reload clears the keys ticked for a decision.
const QUEUE_REFRESH_SECS: u32 = 30;

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
                    @if may_resolve { th { "Escolher" } th { "Decisão" } }
                    th { "Chave" } th { "Pedido" } th.num { "Valor" } th { "Situação" } th { "Tipo" } th { "Execução" } th { "Motivo" } th.num { "Idade" }
                    th.num { "Tentativas" } th { "Último erro" } th { "Incerto desde" }
                } }
                tbody { @for item in r.items { (row(r, item, may_resolve)) } }
            } }
            @if may_resolve {
                form #bulk.decide method="get" action="/review/confirm" {
                    "Escolhidos: "
                    button.choice type="submit" name="outcome" value="sent" { "Foram enviados…" }
                    button.choice type="submit" name="outcome" value="not-sent" { "Não foram enviados…" }
                }
            }
        }
    };
    if r.running {
        super::layout_refreshing_every(QUEUE_REFRESH_SECS, "Revisão", Part::Review, r.session, body)
    } else {
        layout("Revisão", Part::Review, r.session, body)
    }
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
        @if may_resolve { td {
            @if pending { "a próxima varredura envia" } @else { (decide_form(&item.key)) }
        } }
        td.key { (Inert(&item.key)) }
        td { (order(item)) }
        td.num { (item.valor_centavos.map_or("-".into(), brl)) }
        td.state { @if pending { "reenvio pendente" } @else { "incerto" } }
        td { (Inert(&item.effect_type)) }
        td { a href={ "/executions/" (segment(&item.execution_id)) } { (Inert(&item.execution_id)) } }
        td { (reason(item)) }
        td.num { (age(item.idade_segundos)) }
        td.num { (item.tentativas) }
        td { (Inert(item.ultimo_erro.as_deref().unwrap_or("-"))) }
        td { (time(item.desde, r.tz)) }
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

/// The two decisions on `key`, each leading to its confirmation (`GET /review/confirm`), which
/// shows the key's attempts and earlier decisions before anything is recorded; neither is the
/// primary action. A key no form can carry exactly is left to the CLI.
fn decide_form(key: &str) -> Markup {
    if !submits_exactly(key) {
        return html! { p.warning { "Chave com quebra de linha ou controle C1: resolva com " code { "replay-ledger review resolve" } "." } };
    }
    html! {
        form.decide method="get" action="/review/confirm" {
            input type="hidden" name="key" value=(Attr(key));
            button.choice type="submit" name="outcome" value="sent" { "Foi enviado…" }
            button.choice type="submit" name="outcome" value="not-sent" { "Não foi enviado…" }
        }
    }
}

/// What the confirmation of a decision shows.
pub(in crate::edges::console) struct Confirm<'a> {
    pub session: &'a Session,
    pub tz: Tz,
    pub items: &'a [ReviewItem],
    pub outcome: Resolution,
    /// Every attempt of the keys, by key, oldest first.
    pub attempts: &'a [KeyAttempt],
    /// Every decision recorded on the keys before, oldest first.
    pub decisions: &'a [PastDecision],
}

/// `GET /review/confirm`: the keys chosen with their attempts and earlier decisions, and the one
/// button that records the decision for all of them.
pub(in crate::edges::console) fn confirm(c: &Confirm<'_>) -> Markup {
    let (said, word, button) = match c.outcome {
        Resolution::Sent => (
            "foram enviados (ficam concluido; nada mais é enviado)",
            "sent",
            "Confirmar: foi enviado",
        ),
        Resolution::NotSent => (
            "não foram enviados (a próxima varredura os envia, uma vez)",
            "not-sent",
            "Confirmar: não foi enviado, reenviar",
        ),
    };
    let failed = c.attempts.iter().filter(|a| a.outcome == "falha").count();
    let body = html! {
        p #decision { "Você vai registrar que estes " (c.items.len()) " efeito(s) " (said) "." }
        @if c.outcome == Resolution::NotSent {
            p.warning #resend-warning { "Só escolha “não foi enviado” depois de confirmar com o provedor: se alguma tentativa abaixo chegou ao vendedor, o reenvio manda a mensagem em dobro."
                @if failed > 0 || !c.decisions.is_empty() {
                    " Estas chaves já têm " (failed) " tentativa(s) com falha e " (c.decisions.len()) " decisão(ões) anterior(es)."
                }
            }
        }
        (chosen(c))
        (attempts(c))
        (decisions(c))
        form.resolve method="post" action="/review/resolve" {
            input type="hidden" name="csrf_token" value=(c.session.csrf);
            @for item in c.items { input type="hidden" name="key" value=(Attr(&item.key)); }
            input type="hidden" name="outcome" value=(word);
            input type="text" name="note" maxlength="500" placeholder="nota (opcional)" aria-label="nota";
            button type="submit" #confirm-decision { (button) }
        }
        p { a href="/review" { "Cancelar e voltar à revisão" } }
    };
    layout("Confirmar decisão", Part::Review, c.session, body)
}

/// The keys chosen: order, amount, execution, why uncertain, since when.
fn chosen(c: &Confirm<'_>) -> Markup {
    html! {
        div.scroll { table.data #confirm {
            thead { tr { th { "Chave" } th { "Pedido" } th.num { "Valor" } th { "Execução" } th { "Motivo" } th { "Incerto desde" } } }
            tbody { @for item in c.items { tr {
                td.key { (Inert(&item.key)) }
                td { (order(item)) }
                td.num { (item.valor_centavos.map_or("-".into(), brl)) }
                td { (Inert(&item.execution_id)) }
                td { (reason(item)) }
                td { (time(item.desde, c.tz)) }
            } } }
        } }
    }
}

/// Every attempt of the keys: when, by which execution, and how it ended.
fn attempts(c: &Confirm<'_>) -> Markup {
    html! {
        section #attempts {
            h2 { "Tentativas" }
            @if c.attempts.is_empty() { p { "Nenhuma tentativa registrada." } }
            @else {
                div.scroll { table.data {
                    thead { tr { th { "Chave" } th { "Iniciada em" } th { "Execução" } th { "Resultado" } th { "Erro" } } }
                    tbody { @for a in c.attempts { tr {
                        td.key { (Inert(&a.key)) }
                        td { (time(a.started_at, c.tz)) }
                        td { (Inert(&a.execution)) }
                        td { (Inert(&a.outcome)) }
                        td { (Inert(a.error.as_deref().unwrap_or("-"))) }
                    } } }
                } }
            }
        }
    }
}

/// Every decision recorded on the keys before this one.
fn decisions(c: &Confirm<'_>) -> Markup {
    html! {
        section #decisions {
            h2 { "Decisões anteriores" }
            @if c.decisions.is_empty() { p { "Nenhuma." } }
            @else {
                div.scroll { table.data {
                    thead { tr { th { "Chave" } th { "Decisão" } th { "Por" } th { "Em" } th { "Nota" } } }
                    tbody { @for d in c.decisions { tr {
                        td.key { (Inert(&d.key)) }
                        td { @match d.decision { Resolution::Sent => "enviado", Resolution::NotSent => "não enviado" } }
                        td { (Inert(&d.by)) }
                        td { (time(d.at, c.tz)) }
                        td { (Inert(d.note.as_deref().unwrap_or("-"))) }
                    } } }
                } }
            }
        }
    }
}
