//! What people ask `serve` to do from the console: the section of an execution's page (the
//! "Iniciar a execução real" / "Retomar" links and the requests about the execution with their
//! state), the confirmations of a start, a resume and a sweep, and the sweep's page.

use chrono_tz::Tz;
use maud::{html, Markup};

use super::super::session::Session;
use super::{facts, layout, layout_refreshing, segment, time, Inert, Part};
use replay_ledger_core::tables::execution::Execution;
use replay_ledger_core::tables::requests::{Action, Request, RequestState};

/// How an execution's page offers requests, as the handler found it.
pub(in crate::edges::console) struct Offer {
    /// The approved simulation's real run may start now, and the account may ask.
    pub start: bool,
    /// The real run is interrupted or failed, and the account may ask to resume it.
    pub resume: bool,
    /// The real run is in progress, and the account may ask it to stop.
    pub interrupt: bool,
}

/// Whether any request of the list is still open (the page then refreshes itself).
pub(in crate::edges::console) fn any_open(requests: &[Request]) -> bool {
    requests
        .iter()
        .any(|r| matches!(r.state, RequestState::Pending | RequestState::Running))
}

fn action(a: Action) -> &'static str {
    match a {
        Action::Start => "iniciar a execução real",
        Action::Resume => "retomar",
        Action::Sweep => "varredura",
        Action::Interrupt => "interromper",
        Action::Simulate => "simular de novo",
    }
}

fn state(s: RequestState) -> &'static str {
    match s {
        RequestState::Pending => "pendente: aguardando o serve",
        RequestState::Running => "em andamento",
        RequestState::Done => "concluída",
        RequestState::Failed => "falhou",
    }
}

/// The requests, newest first, as a table.
pub(in crate::edges::console) fn table(requests: &[Request], tz: Tz) -> Markup {
    html! {
        div.scroll { table.data #requests {
            thead { tr {
                th.num { "Pedido" } th { "Ação" } th { "Job" } th { "Pedido por" } th { "Em" }
                th { "Situação" } th { "Resultado" }
            } }
            tbody { @for r in requests { tr.{ "request-" (r.state.as_db()) } {
                td.num { (r.id) }
                td { (action(r.action)) }
                td { (Inert(&r.job)) }
                td { (Inert(&r.asked_by)) }
                td { (time(r.asked_at, tz)) }
                td.request-state { (state(r.state)) }
                td { (Inert(r.result.as_deref().unwrap_or("-"))) }
            } } }
        } }
    }
}

/// The section of an execution's page: the links the account may follow and the requests.
pub(in crate::edges::console) fn section(
    e: &Execution,
    offer: &Offer,
    requests: &[Request],
    tz: Tz,
) -> Markup {
    if !offer.start && !offer.resume && !offer.interrupt && requests.is_empty() {
        return html! {};
    }
    let page = format!("/executions/{}", segment(&e.key));
    html! { section #requests-section {
        h2 { "Pedidos ao serve" }
        @if offer.start {
            p { a.button #start-link href={ (page) "/start" } { "Iniciar a execução real" } }
        }
        @if offer.resume {
            p { a.button #resume-link href={ (page) "/resume" } { "Retomar" } }
        }
        @if offer.interrupt {
            p { a.button.secondary #interrupt-link href={ (page) "/interrupt" } { "Interromper" } }
        }
        @if any_open(requests) {
            p role="status" { "Há um pedido aberto: esta página se atualiza sozinha até o serve concluí-lo." }
        }
        @if !requests.is_empty() { (table(requests, tz)) }
    } }
}

/// A confirmation of a start or a resume.
pub(in crate::edges::console) struct Confirm<'a> {
    pub session: &'a Session,
    pub execution: &'a Execution,
    pub action: Action,
    /// What will happen, line by line (label, value).
    pub what: Vec<(&'static str, String)>,
    /// Why it cannot be asked now, instead of the form.
    pub refused: Option<String>,
}

/// `GET /executions/{id}/start` and `/resume`: what will be done, who asks, and the form.
pub(in crate::edges::console) fn confirm(c: Confirm<'_>) -> Markup {
    let page = format!("/executions/{}", segment(&c.execution.key));
    let (path, heading, button) = match c.action {
        Action::Resume => ("/resume", "Retomar a execução real", "Confirmar: retomar"),
        Action::Interrupt => (
            "/interrupt",
            "Interromper a execução real",
            "Confirmar: interromper",
        ),
        Action::Simulate => (
            "/resimulate",
            "Simular de novo",
            "Confirmar: simular de novo",
        ),
        _ => (
            "/start",
            "Iniciar a execução real",
            "Confirmar: iniciar a execução real",
        ),
    };
    let mut rows = c.what;
    rows.push(("Quem pede", format!("console:{}", c.session.email)));
    let body = html! {
        h2 { (heading) }
        (facts(&rows))
        @if c.action == Action::Interrupt {
            p { "A execução termina o lote em curso, guarda o checkpoint e para como interrompida: nada do que já foi feito se perde e nenhuma mensagem sai duas vezes. Um operador a retoma depois, deste mesmo ponto, pelo botão Retomar." }
        } @else {
            p { "O console não executa nada: o pedido fica registrado (e auditado) e o serve o executa em instantes, pelo mesmo caminho de um disparo agendado do job — a trava do job, o executor e a verificação da aprovação." }
        }
        @match &c.refused {
            Some(why) => p.warning #refused { (Inert(why)) },
            None => form.request method="post" action={ (page) (path) } {
                input type="hidden" name="csrf_token" value=(c.session.csrf);
                label for="note" { "Nota (opcional)" }
                input #note type="text" name="note" maxlength="500";
                button type="submit" #confirm-request { (button) }
            },
        }
        p { a href=(page) { "Cancelar" } }
    };
    layout(heading, Part::Executions, c.session, body)
}

/// `GET /sweep`: what a sweep does, the form (operators), and the sweeps asked for.
pub(in crate::edges::console) fn sweep(
    session: &Session,
    tz: Tz,
    job: Option<&str>,
    refused: Option<&str>,
    requests: &[Request],
) -> Markup {
    let body = html! {
        h2 { "Rodar uma varredura agora" }
        p { "Uma varredura (sweep) retoma reservas abandonadas por um processo que morreu (ou as marca incerto, se o provedor não deduplica) e reenvia os efeitos marcados como não enviados. O serve a executa em instantes, sob a trava do job de varredura." }
        @if let Some(job) = job { (facts(&[("Job", job.to_string()), ("Quem pede", format!("console:{}", session.email))])) }
        @match refused {
            Some(why) => p.warning #refused { (Inert(why)) },
            None => form.request method="post" action="/sweep" {
                input type="hidden" name="csrf_token" value=(session.csrf);
                label for="note" { "Nota (opcional)" }
                input #note type="text" name="note" maxlength="500";
                button type="submit" #confirm-request { "Confirmar: rodar a varredura" }
            },
        }
        @if !requests.is_empty() { h2 { "Varreduras pedidas" } (table(requests, tz)) }
        p { a href="/review" { "Voltar à fila de revisão" } }
    };
    if any_open(requests) {
        layout_refreshing("Varredura", Part::Review, session, body)
    } else {
        layout("Varredura", Part::Review, session, body)
    }
}
