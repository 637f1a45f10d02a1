//! The blue-green rebuild's page (`GET /reconstrucao`).

use chrono_tz::Tz;
use maud::{html, Markup};

use super::super::session::Session;
use super::super::views::RebuildView;
use super::{facts, layout, layout_refreshing, segment, time, Inert, Part};
use replay_ledger_core::services::rebuild::{Rebuild, Stage};
use replay_ledger_core::shared::money::{brl, group_thousands};

/// `GET /reconstrucao`: refreshes itself while the rebuild reads the archive.
pub(in crate::edges::console) fn page(session: &Session, tz: Tz, v: &RebuildView) -> Markup {
    let body = html! {
        @match &v.rebuild {
            None => p { "Nenhuma reconstrução rodou neste banco. "
                code { "replay-ledger rebuild" } " começa uma: constrói " code { "comissao_nova" }
                " a partir de todo o histórico e a compara com " code { "comissao" } "." },
            Some(r) => {
                section #state {
                    h2 { "Estado" }
                    (facts(&state(r, tz)))
                }
                @if r.stage == Stage::Compared { (comparison(session, r, v)) }
            },
        }
    };
    let title = "Reconstrução de comissao";
    if v.rebuild
        .as_ref()
        .is_some_and(|r| r.stage == Stage::Building)
    {
        layout_refreshing(title, Part::Executions, session, body)
    } else {
        layout(title, Part::Executions, session, body)
    }
}

fn state(r: &Rebuild, tz: Tz) -> Vec<(&'static str, String)> {
    let mut rows = vec![
        ("Reconstrução", r.id.to_string()),
        ("Estado", r.stage.to_string()),
        ("Regra", r.rule.clone()),
        (
            "Eventos lidos",
            format!(
                "{} de {} ({:.0}%)",
                group_thousands(r.events_read.max(0) as u64),
                group_thousands(r.events_total.max(r.events_read).max(0) as u64),
                r.progress() * 100.0
            ),
        ),
        (
            "Pedidos refeitos por escritas ao vivo",
            group_thousands(r.orders_rederived.max(0) as u64),
        ),
        ("Iniciada", time(r.started_at, tz)),
    ];
    if let Some(at) = r.built_at {
        rows.push(("Construída", time(at, tz)));
    }
    if let Some(at) = r.compared_at {
        rows.push(("Comparada", time(at, tz)));
    }
    if let Some(at) = r.swapped_at {
        rows.push(("Trocada", time(at, tz)));
    }
    rows
}

/// The comparison, the orders that differ, and the approval.
fn comparison(session: &Session, r: &Rebuild, v: &RebuildView) -> Markup {
    let count = |n: Option<i64>| n.map_or("-".into(), |n| group_thousands(n.max(0) as u64));
    let text = |s: &Option<String>| s.clone().unwrap_or_else(|| "-".into());
    let fingerprint = r.fingerprint.clone().unwrap_or_default();
    html! {
        section #comparison {
            h2 { "Comparação" }
            (facts(&[
                ("Linhas em comissao (atual)", count(r.count_current)),
                ("Checksum de comissao", text(&r.checksum_current)),
                ("Linhas em comissao_nova", count(r.count_new)),
                ("Checksum de comissao_nova", text(&r.checksum_new)),
                ("Pedidos diferentes", count(r.orders_differing)),
                ("Voltam a uma versão mais antiga", count(Some(v.beyond_values.0))),
                ("Linhas apagadas (pedido sem evento aceito)", count(Some(v.beyond_values.1))),
                ("Impressão digital", replay_ledger_core::services::rebuild::short_fingerprint(&fingerprint).to_string()),
            ]))
            p { "A lista inteira: " a href="/reconstrucao/diff.csv" { "CSV" } " · " a href="/reconstrucao/diff.xlsx" { "XLSX" } }
        }
        @if !v.differing.is_empty() {
            section #differing {
                h2 { "Primeiros pedidos diferentes" }
                div.scroll { table.data {
                    thead { tr { th { "Pedido" } th { "Antes" } th { "Versão antes" } th { "Depois" } th { "Versão depois" } } }
                    tbody { @for d in &v.differing { tr {
                        td { a href={ "/pedidos/" (segment(&d.pedido_id)) } { (Inert(&d.pedido_id)) } }
                        td.num { (d.antes.map_or("-".into(), brl)) }
                        td.num { (d.versao_antes.map_or("-".into(), |n| n.to_string())) }
                        td.num { (d.depois.map_or("-".into(), brl)) }
                        td.num { (d.versao_depois.map_or("-".into(), |n| n.to_string())) }
                    } } }
                } }
            }
        }
        section #confirm {
            h2 { "Aprovar a troca" }
            @if let Some((approval, by)) = &v.approved {
                p.ok { "Aprovada (aprovação " (approval) " por " (Inert(by)) "). A troca acontece na próxima "
                    code { "replay-ledger rebuild" } ", que confere a impressão digital de novo com a tabela travada." }
            } @else if session.role.may_approve() {
                form.approve method="post" action="/reconstrucao/aprovar" {
                    input type="hidden" name="csrf_token" value=(session.csrf);
                    input type="hidden" name="impressao" value=(fingerprint);
                    p.fingerprint { "Você aprova trocar " code { "comissao" } " por " code { "comissao_nova" }
                        " com estas diferenças, impressão digital " code { (replay_ledger_core::services::rebuild::short_fingerprint(&fingerprint)) }
                        ": " (count(r.orders_differing)) " pedidos mudam, "
                        (count(Some(v.beyond_values.0))) " voltam a uma versão mais antiga e "
                        (count(Some(v.beyond_values.1))) " linhas são apagadas"
                        ". Se a comparação mudar antes de você confirmar, nada é aprovado e a página pede que você revise de novo." }
                    label for="note" { "Nota (opcional)" }
                    input #note type="text" name="note" maxlength="500";
                    button type="submit" { "Aprovar a troca" }
                }
            } @else {
                p { "Só uma conta de finanças aprova." }
            }
        }
    }
}
