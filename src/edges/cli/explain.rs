//! `explain PEDIDO [--json]`: one order's story ([`crate::services::story`]) for people (archive
//! text made inert) or as one JSON object with the contract's keys. An unknown order, or an id no
//! order can have, exits 2.

use std::fmt::Write;

use super::{connect, Cli, Failure, Outcome};
use crate::services::story::{self, Story, StoryError};
use replay_ledger_core::domain::Inputs;
use replay_ledger_core::shared::money::brl;
use replay_ledger_core::shared::text::inert;

pub(super) async fn explain(
    cli: &Cli,
    pedido: &str,
    json: bool,
    as_of: Option<chrono::DateTime<chrono::Utc>>,
) -> Outcome {
    let pool = connect(cli, true).await?;
    let told = match story::story_as_of(&pool, pedido, as_of).await {
        Ok(told) => told,
        Err(StoryError::Database(e)) => return Err(e.into()),
        Err(err) => return Err(Failure::invalid(inert(&err.to_string()))),
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&told)?);
    } else {
        print!("{}", text(&told));
    }
    Ok(())
}

/// The story as lines for a terminal.
fn text(s: &Story) -> String {
    let as_of = s
        .as_of
        .map(|at| format!(" as of {}", at.format("%Y-%m-%d %H:%M:%S%.f UTC")))
        .unwrap_or_default();
    let mut out = format!(
        "order {}{as_of}\n\nevents ({}):\n",
        inert(&s.pedido_id),
        s.events.len()
    );
    for e in &s.events {
        let implies = match (&e.rejected, e.commission_cents) {
            (Some(why), _) => format!("rejected: {}", inert(why)),
            (None, Some(cents)) => format!("commission {}", brl(cents)),
            (None, None) => "not handled".to_string(),
        };
        let archived = e
            .arquivado_em
            .map(|t| format!(" (archived {})", t.format("%Y-%m-%d %H:%M:%S UTC")))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  #{} {} {} v{} {}{archived} -> {implies}",
            e.posicao,
            inert(&e.id),
            inert(&e.tipo),
            e.versao,
            e.ocorrido_em.format("%Y-%m-%d %H:%M:%S UTC"),
        );
        if let Some(inputs) = &e.inputs {
            let _ = writeln!(out, "      inputs: {}", inputs_text(inputs));
        }
    }
    let row = match &s.comissao {
        Some(c) => format!(
            "{} (version {}, updated {})",
            brl(c.valor_centavos),
            c.versao_evento,
            c.atualizado_em.format("%Y-%m-%d %H:%M:%S UTC")
        ),
        None => "no row".into(),
    };
    let expected = s.expected_cents.map_or("nothing".into(), brl);
    let verdict = match &s.reason {
        None => "consistent".to_string(),
        Some(why) => format!("INCONSISTENT: {why}"),
    };
    // As of a past moment, the row (today's) is judged against today's archive, on a line of
    // its own: the moment's expectation is not today's row's yardstick.
    let judged = match s.as_of {
        Some(_) => format!(
            "comissao (now): {row}\ntoday: {verdict}\nexpected{as_of}: {expected} by {}",
            replay_ledger_core::domain::RULE_VERSION
        ),
        None => format!(
            "comissao: {row}\nexpected: {expected} by {} ({verdict})",
            replay_ledger_core::domain::RULE_VERSION
        ),
    };
    let _ = write!(
        out,
        "\n{judged}\n\ncorrections ({}):\n",
        s.corrections.len()
    );
    for c in &s.corrections {
        let before = c.antes.map_or("no row".into(), brl);
        let _ = writeln!(
            out,
            "  {} pass {}: {before} -> {} (version {}, {})",
            inert(&c.execution_id),
            c.passagem,
            brl(c.depois),
            c.versao_evento,
            c.registrado_em.format("%Y-%m-%d %H:%M:%S UTC"),
        );
    }
    let _ = writeln!(out, "\neffects ({}):", s.effects.len());
    for e in &s.effects {
        let reason = e.motivo.map(|m| format!(", {m}")).unwrap_or_default();
        let _ = writeln!(
            out,
            "  {} {} by {}, {} attempt(s){reason}",
            inert(&e.key),
            e.status,
            inert(&e.execution_id),
            e.tentativas,
        );
    }
    out
}

/// An event's inputs on one line: the amount, the percentage, the payload's shape.
fn inputs_text(i: &Inputs) -> String {
    let cents = i
        .valor_centavos
        .map_or("?".to_string(), |c| format!("valorCentavos {c}"));
    let percentual = i.percentual.as_deref().map_or("?".into(), inert);
    match &i.valor {
        Some(valor) => format!(
            "valor {} -> {cents}, percentual {percentual} (older shape, upcast on read)",
            inert(valor)
        ),
        None => format!("{cents}, percentual {percentual} (current shape)"),
    }
}
