//! What approving a simulation will send: every effect of an applied type that the domain asks
//! for in the simulation's window and the ledger does not hold yet — the messages the real run
//! would perform if it started now (fewer if the live consumer or another run performs some
//! first; never more). The confirmation counts them by type and lists them (CSV, XLSX).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use futures::TryStreamExt;
use sqlx::PgPool;

use crate::config::EffectMode;
use crate::domain;
use crate::engine::plan::Plan;
use crate::tables::archive::unsent;
use crate::tables::execution::Execution;

/// One message the real run would send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Send {
    pub tipo: String,
    pub key: String,
    pub event_id: String,
    pub pedido_id: String,
    pub posicao: i64,
    pub ocorrido_em: DateTime<Utc>,
    /// The commission the message carries.
    pub valor_centavos: i64,
}

/// Hands `f` every message the real run of `plan` would send over `simulation`'s window, type
/// by type (in the policy's order), each type's in `posicao` order.
pub async fn each(
    pool: &PgPool,
    plan: &Plan,
    simulation: &Execution,
    mut f: impl FnMut(Send),
) -> Result<(), sqlx::Error> {
    let (from, to) = super::window_of(simulation, &plan.window);
    let handled = &plan.policy.event_types;
    let applied = plan
        .policy
        .effects
        .iter()
        .filter(|(_, p)| p.mode == EffectMode::Apply)
        .map(|(tipo, _)| tipo);
    for tipo in applied {
        let mut events = unsent::of_window(pool, handled, tipo, from, to);
        while let Some(event) = events.try_next().await? {
            let Ok(Some(decision)) = domain::handle(&event) else {
                continue;
            };
            for request in decision.effects.iter().filter(|r| r.tipo == tipo.as_str()) {
                f(Send {
                    tipo: tipo.clone(),
                    key: request.key.clone(),
                    event_id: event.id.clone(),
                    pedido_id: event.pedido_id.clone(),
                    posicao: event.posicao,
                    ocorrido_em: event.ocorrido_em,
                    valor_centavos: decision.commission.valor_centavos,
                });
            }
        }
    }
    Ok(())
}

/// How many messages of each applied type the real run would send (types with none included,
/// at 0).
pub async fn count_by_type(
    pool: &PgPool,
    plan: &Plan,
    simulation: &Execution,
) -> Result<BTreeMap<String, u64>, sqlx::Error> {
    let mut counts: BTreeMap<String, u64> = plan
        .policy
        .effects
        .iter()
        .filter(|(_, p)| p.mode == EffectMode::Apply)
        .map(|(tipo, _)| (tipo.clone(), 0))
        .collect();
    each(pool, plan, simulation, |s| {
        *counts.entry(s.tipo).or_default() += 1;
    })
    .await?;
    Ok(counts)
}
