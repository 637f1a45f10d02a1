//! The search's page when what was typed names nothing whole: the executions whose key contains
//! it, and what can be searched.

use maud::{html, Markup};

use super::super::session::Session;
use super::{layout, segment, Inert, Part};

/// `GET /busca` without a match that opens a page.
pub(in crate::edges::console) fn results(session: &Session, q: &str, near: &[String]) -> Markup {
    let body = html! {
        @if q.is_empty() {
            p { "Digite um pedido (" code { "ped-123" } "), a chave de um efeito ("
                code { "evt-123:notificar-vendedor" } ") ou uma execução, inteiros, na caixa de busca do topo." }
        } @else {
            p #search-none { "Nenhum pedido, chave ou execução é exatamente “" (Inert(q)) "”." }
            @if !near.is_empty() {
                h2 { "Execuções que contêm “" (Inert(q)) "”" }
                ul #search-near { @for key in near {
                    li { a href={ "/executions/" (segment(key)) } { (Inert(key)) } }
                } }
            }
        }
    };
    layout("Busca", Part::Search, session, body)
}
