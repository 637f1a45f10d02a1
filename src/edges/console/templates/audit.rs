//! The audit trail: who did what, filtered by who and by what, a page at a time.

use chrono_tz::Tz;
use maud::{html, Markup};

use super::super::session::Session;
use super::super::views::{Action, AuditRow};
use super::{layout, query_value, time, Attr, Inert, Part};

/// The audit's filter.
pub(in crate::edges::console) struct AuditFilter<'a> {
    /// Part of `quem` (an account, a database role).
    pub who: Option<&'a str>,
    pub what: Option<Action>,
}

impl AuditFilter<'_> {
    fn query(&self) -> String {
        let mut q = String::new();
        if let Some(who) = self.who {
            q.push_str(&format!("quem={}&", query_value(who)));
        }
        if let Some(what) = self.what {
            q.push_str(&format!("acao={}&", what.as_db()));
        }
        q
    }
}

fn action(action: Action) -> &'static str {
    match action {
        Action::Login => "entrou",
        Action::LoginRefused => "entrada recusada",
        Action::Logout => "saiu",
        Action::Approval => "aprovou",
        Action::Resolution => "resolveu",
        Action::UserCreated => "conta criada",
        Action::UserChanged => "conta alterada",
        Action::UserRemoved => "conta removida",
        Action::Request => "pediu ao serve",
    }
}

/// `GET /audit`.
pub(in crate::edges::console) fn audit(
    session: &Session,
    tz: Tz,
    rows: &[AuditRow],
    page: i64,
    filter: &AuditFilter<'_>,
) -> Markup {
    let body = html! {
        p { "Entradas, aprovações, resoluções e contas: quem, o quê, quando. Mais recentes primeiro." }
        form.filter method="get" action="/audit" {
            label for="quem" { "Quem" }
            input #quem type="search" name="quem" value=(Attr(filter.who.unwrap_or("")));
            label for="acao" { "O quê" }
            select #acao name="acao" {
                option value="" { "tudo" }
                @for a in Action::ALL {
                    option value=(a.as_db()) selected[filter.what == Some(*a)] { (action(*a)) }
                }
            }
            button type="submit" { "Filtrar" }
        }
        @if rows.is_empty() { p { "Nada registrado." } }
        @else {
            div.scroll { table.data #audit {
                thead { tr { th { "Quando" } th { "Quem" } th { "O quê" } th { "Alvo" } th { "Detalhe" } th { "Endereço" } } }
                tbody { @for row in rows { tr {
                    td { (time(row.em, tz)) }
                    td { (Inert(&row.quem)) }
                    td { (action(row.acao)) }
                    td { (Inert(row.alvo.as_deref().unwrap_or("-"))) }
                    td { (Inert(row.detalhe.as_deref().unwrap_or(""))) }
                    td { (Inert(row.endereco.as_deref().unwrap_or(""))) }
                } } }
            } }
            @if rows.len() as i64 == page {
                @if let Some(last) = rows.last() {
                    nav.pages { a rel="next" href={ "/audit?" (filter.query()) "before=" (last.id) } { "mais antigos →" } }
                }
            }
        }
    };
    layout("Auditoria", Part::Audit, session, body)
}
