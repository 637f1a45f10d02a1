//! The console's markup (maud: every `(value)` is HTML-escaped). Text that comes from the
//! archive, the ledger or a person (ids, errors, notes, e-mails) is also made inert
//! ([`replay_ledger_core::shared::text::inert`]) through [`Inert`], so a control character shows as `\u{1b}`, never
//! as itself. No inline script or style: one stylesheet, `/console.css`, so the policy
//! `default-src 'self'` holds; every page works without JavaScript.

pub(super) mod approve;
pub(super) mod audit;
pub(super) mod executions;
pub(super) mod figures;
pub(super) mod history;
pub(super) mod live;
pub(super) mod login;
pub(super) mod pace;
pub(super) mod pedido;
pub(super) mod rebuild;
pub(super) mod requests;
pub(super) mod review;
pub(super) mod scheduled;
pub(super) mod search;
pub(super) mod verification;

use axum::http::StatusCode;
use axum::response::Html;
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use maud::{html, Markup, Render, DOCTYPE};

use super::session::Session;

/// A page as a response body.
pub(in crate::edges::console) fn html(page: Markup) -> Html<String> {
    Html(page.into_string())
}

/// Text from data, made inert, then escaped.
pub(super) struct Inert<'a>(pub &'a str);

impl Render for Inert<'_> {
    fn render_to(&self, buffer: &mut String) {
        replay_ledger_core::shared::text::inert(self.0)
            .as_str()
            .render_to(buffer);
    }
}

/// Text from data or a person in an attribute's value: escaped, and every hazard character
/// ([`replay_ledger_core::shared::text::is_hazard`]) written as a numeric character reference (`&#x1b;`), so the page
/// holds no raw control or bidi character and the browser still submits the exact text (a hidden
/// `key` resolves that very key; a filter's echo searches again for what was typed).
pub(super) struct Attr<'a>(pub &'a str);

impl Render for Attr<'_> {
    fn render_to(&self, buffer: &mut String) {
        use std::fmt::Write as _;
        for c in self.0.chars() {
            match c {
                '&' => buffer.push_str("&amp;"),
                '<' => buffer.push_str("&lt;"),
                '>' => buffer.push_str("&gt;"),
                '"' => buffer.push_str("&quot;"),
                '\'' => buffer.push_str("&#39;"),
                c if replay_ledger_core::shared::text::is_hazard(c) => {
                    let _ = write!(buffer, "&#x{:x};", u32::from(c));
                }
                c => buffer.push(c),
            }
        }
    }
}

/// Whether a form submits `text`, written by [`Attr`], exactly: HTML turns a reference to a C1
/// control (`&#x85;`) into another character (windows-1252's), and a form turns line breaks into
/// CRLF. Such text cannot travel in a form; the page says to use the CLI instead.
pub(super) fn submits_exactly(text: &str) -> bool {
    !text
        .chars()
        .any(|c| matches!(c, '\0' | '\r' | '\n' | '\u{80}'..='\u{9f}'))
}

/// A path segment for an id (see [`replay_ledger_core::shared::text::url_segment`]).
pub(super) fn segment(id: &str) -> String {
    replay_ledger_core::shared::text::url_segment(id)
}

/// A query string's value, form-encoded.
pub(super) fn query_value(value: &str) -> String {
    url::form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

/// A time as the e-mail shows it (the report's format), in `tz`.
pub(super) fn time(t: DateTime<Utc>, tz: Tz) -> String {
    crate::services::report::render::time(t, tz)
}

/// Which part of the console a page belongs to, for the navigation bar.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Part {
    Executions,
    Review,
    Audit,
    Verification,
    History,
    Search,
}

/// A page of a logged-in account: the navigation, who is logged in, the logout form.
pub(super) fn layout(title: &str, part: Part, session: &Session, body: Markup) -> Markup {
    page(title, part, session, body, None)
}

/// As [`layout`], for a page that shows something still changing (a running execution): it
/// reloads itself every few seconds, without a script (`<meta http-equiv="refresh">`).
pub(super) fn layout_refreshing(
    title: &str,
    part: Part,
    session: &Session,
    body: Markup,
) -> Markup {
    page(title, part, session, body, Some(REFRESH_SECS))
}

/// How often a page of something still changing reloads itself.
pub(super) const REFRESH_SECS: u32 = 5;

/// As [`layout_refreshing`], every `secs` seconds: for a list people also act on (a reload
/// clears what was ticked), slower.
pub(super) fn layout_refreshing_every(
    secs: u32,
    title: &str,
    part: Part,
    session: &Session,
    body: Markup,
) -> Markup {
    page(title, part, session, body, Some(secs))
}

fn page(title: &str, part: Part, session: &Session, body: Markup, refresh: Option<u32>) -> Markup {
    let link = |href: &str, label: &str, this: Part| {
        html! {
            @if part == this { a href=(href) aria-current="page" { (label) } }
            @else { a href=(href) { (label) } }
        }
    };
    html! {
        (DOCTYPE)
        html lang="pt-BR" {
            (head(title, refresh))
            body {
                header.top {
                    span.brand { "replay-ledger" }
                    nav {
                        (link("/", "Execuções", Part::Executions))
                        (link("/review", "Revisão", Part::Review))
                        (link("/audit", "Auditoria", Part::Audit))
                        (link("/verificacao", "Verificação", Part::Verification))
                        (link("/historico", "Histórico", Part::History))
                    }
                    form.search method="get" action="/busca" role="search" {
                        input #busca type="search" name="q" placeholder="pedido, chave ou execução" aria-label="Buscar um pedido, uma chave ou uma execução";
                        button type="submit" { "Buscar" }
                    }
                    form.logout method="post" action="/logout" {
                        span.who { (Inert(&session.email)) " (" (session.role.name()) ")" }
                        input type="hidden" name="csrf_token" value=(session.csrf);
                        button type="submit" { "Sair" }
                    }
                }
                main { h1 { (title) } (body) }
            }
        }
    }
}

/// A page's `<head>`: the one stylesheet; `refresh` reloads the page every so many seconds.
fn head(title: &str, refresh: Option<u32>) -> Markup {
    html! {
        head {
            meta charset="utf-8";
            meta name="viewport" content="width=device-width, initial-scale=1";
            @if let Some(secs) = refresh { meta http-equiv="refresh" content=(secs); }
            title { (title) " · replay-ledger" }
            link rel="stylesheet" href="/console.css";
        }
    }
}

/// A page without the navigation (login, errors).
pub(super) fn bare(title: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="pt-BR" {
            (head(title, None))
            body { main.narrow { h1 { (title) } (body) } }
        }
    }
}

/// The page of an error status: its code and name in Portuguese, why, and the navigation (the
/// links only: an error page may have no session to show).
/// What an error page offers besides why: the detail (set as code) and a button (a link) to
/// what the state needs first.
pub(super) struct ErrorAction {
    pub detail: Option<String>,
    pub href: String,
    pub label: &'static str,
}

/// With `action`, the detail and a button to what the state needs first.
pub(super) fn error_page_with(
    status: StatusCode,
    message: &str,
    action: Option<ErrorAction>,
) -> Markup {
    let title = format!("{} {}", status.as_u16(), status_name(status));
    html! {
        (DOCTYPE)
        html lang="pt-BR" {
            (head(&title, None))
            body {
                header.top {
                    span.brand { "replay-ledger" }
                    nav {
                        a href="/" { "Execuções" }
                        a href="/review" { "Revisão" }
                        a href="/audit" { "Auditoria" }
                        a href="/verificacao" { "Verificação" }
                        a href="/historico" { "Histórico" }
                    }
                }
                main.narrow {
                    h1 { (title) }
                    p.error { (message) }
                    @if let Some(a) = &action {
                        @if let Some(detail) = &a.detail {
                            p { "Detalhe: " code #error-detail { (Inert(detail)) } }
                        }
                        p { a.button #error-action href=(a.href) { (a.label) } }
                    }
                    p { a href="/" { "Voltar às execuções" } }
                }
            }
        }
    }
}

/// A status's name in Portuguese.
fn status_name(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 => "Pedido inválido",
        401 => "Sessão necessária",
        403 => "Acesso negado",
        404 => "Não encontrado",
        405 => "Método não aceito",
        409 => "Conflito",
        413 => "Conteúdo grande demais",
        414 => "Endereço longo demais",
        415 => "Formato não aceito",
        422 => "Dados inválidos",
        429 => "Tentativas demais",
        431 => "Cabeçalhos grandes demais",
        500 => "Erro interno",
        503 => "Indisponível",
        code if code < 500 => "Pedido recusado",
        _ => "Erro do servidor",
    }
}

/// A label/value table.
pub(super) fn facts(rows: &[(&str, String)]) -> Markup {
    html! {
        table.facts {
            @for (label, value) in rows {
                tr { th scope="row" { (label) } td { (Inert(value)) } }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_attribute_holds_no_raw_control_or_bidi_character_and_no_markup() {
        let written =
            html! { input value=(Attr("a\u{7}\u{1b}[31m\u{202e}\"<b>'&é")); }.into_string();
        assert_eq!(
            written,
            "<input value=\"a&#x7;&#x1b;[31m&#x202e;&quot;&lt;b&gt;&#39;&amp;é\">"
        );
    }

    #[test]
    fn text_with_a_line_break_or_a_c1_control_cannot_travel_in_a_form() {
        assert!(submits_exactly("evt-<b>\u{7}\u{202e}:notificar-vendedor"));
        assert!(!submits_exactly("evt-1\n:notificar-vendedor"));
        assert!(!submits_exactly("evt-1\u{85}:notificar-vendedor"));
    }
}
