//! With `CONSOLE_URL` set, a report links to the web console: the execution's page ("Revisar e
//! aprovar" for a finished simulation of a gated job nobody approved yet — the page then offers
//! the approval form —, else "Abrir no console") and the
//! review queue when it is not empty. The URL is built from the configured base and the
//! execution's key as one path segment ([`replay_ledger_core::shared::text::url_segment`]), never from the archive.

use maud::{html, Markup};

use super::Report;

/// A link: what it says and where it goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub label: &'static str,
    pub url: String,
}

/// The link to the report's execution in the console.
pub fn execution(report: &Report) -> Option<Link> {
    let base = report.console_url.as_deref()?;
    let e = report.execution.as_ref()?;
    Some(Link {
        label: if e.awaiting_approval {
            "Revisar e aprovar"
        } else {
            "Abrir no console"
        },
        url: format!(
            "{base}/executions/{}",
            replay_ledger_core::shared::text::url_segment(&e.key)
        ),
    })
}

/// The link to the console's review queue, when the queue is not empty.
pub fn review(report: &Report) -> Option<Link> {
    let base = report.console_url.as_deref()?;
    (report.review_total > 0).then(|| Link {
        label: "Resolver na fila de revisão do console",
        url: format!("{base}/review"),
    })
}

/// A link in the plain-text part: `label: url` on a line of its own.
pub(super) fn text(link: Option<Link>) -> String {
    link.map_or_else(String::new, |l| format!("\n{}: {}\n", l.label, l.url))
}

/// A link in the HTML part, as a button-like anchor (inline styles: what mail clients render).
pub(super) fn html(link: Option<Link>) -> Markup {
    html! {
        @if let Some(l) = link {
            p style="margin: 12px 0;" {
                a href=(l.url) style="background: #1f6feb; color: #ffffff; padding: 6px 12px; border-radius: 4px; text-decoration: none;" { (l.label) }
            }
            "\n"
        }
    }
}
