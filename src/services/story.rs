//! One order's story, the one read model behind `explain PEDIDO` and the console's
//! `/pedidos/{pedido_id}`: every event of the order with what the domain's rule (the applier's)
//! makes of it, the `comissao` row beside the value the archive implies, every correction by
//! execution, and every effect key with its state, execution, attempts and reason.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgPool;

use crate::domain::{self, Event};
use crate::tables::archive;
use crate::tables::commission::order::{self, Correction, Stored};
use crate::tables::ledger::{self, OrderEffect};

/// An event of the order and what the rule makes of it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoryEvent {
    pub posicao: i64,
    pub id: String,
    pub tipo: String,
    pub versao: i64,
    pub ocorrido_em: DateTime<Utc>,
    /// The commission it implies (none: rejected, or a type the domain does not handle).
    pub commission_cents: Option<i64>,
    /// Why the rule rejected it.
    pub rejected: Option<String>,
}

/// The whole story; JSON keys as DESIGN.md's `explain`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Story {
    pub pedido_id: String,
    pub events: Vec<StoryEvent>,
    pub comissao: Option<Stored>,
    /// What the archive implies: the newest version's commission (the last of equal versions).
    pub expected_cents: Option<i64>,
    /// Whether the row holds the expected value and version (no row and nothing expected: yes).
    pub consistent: bool,
    pub corrections: Vec<Correction>,
    pub effects: Vec<OrderEffect>,
}

#[derive(Debug, thiserror::Error)]
pub enum StoryError {
    #[error(
        "order id must be 1 to {} bytes without control characters",
        domain::MAX_ID_BYTES
    )]
    InvalidId,
    #[error("no order {0} in the archive nor in comissao")]
    Unknown(String),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

/// The story of `pedido_id`; an order neither the archive nor `comissao` knows is
/// [`StoryError::Unknown`].
pub async fn story(pool: &PgPool, pedido_id: &str) -> Result<Story, StoryError> {
    // PostgreSQL text never holds NUL: no order has such an id, and the query would fail.
    if pedido_id.is_empty() || pedido_id.contains('\0') {
        return Err(StoryError::InvalidId);
    }
    let events = archive::of_order(pool, pedido_id).await?;
    let comissao = order::row_of(pool, pedido_id).await?;
    if events.is_empty() && comissao.is_none() {
        return Err(StoryError::Unknown(pedido_id.to_string()));
    }
    let keys: Vec<String> = events
        .iter()
        .flat_map(|e| {
            domain::EFFECT_TYPES
                .iter()
                .map(|t| domain::effect_key(&e.id, t))
        })
        .collect();
    let effects = ledger::effects_of_keys(pool, &keys).await?;
    let corrections = order::corrections_of(pool, pedido_id).await?;
    let (told, expected) = tell(&events);
    let consistent = match (&comissao, &expected) {
        (Some(row), Some((valor, versao))) => {
            row.valor_centavos == *valor && row.versao_evento == *versao
        }
        (None, None) => true,
        _ => false,
    };
    Ok(Story {
        pedido_id: pedido_id.to_string(),
        events: told,
        comissao,
        expected_cents: expected.map(|(valor, _)| valor),
        consistent,
        corrections,
        effects,
    })
}

/// Each event with what the rule makes of it, and the (value, version) the events imply: the
/// newest version, and among equal versions the last in `posicao` order, as the version-guarded
/// writes leave it.
fn tell(events: &[Event]) -> (Vec<StoryEvent>, Option<(i64, i64)>) {
    let mut expected: Option<(i64, i64)> = None;
    let told = events
        .iter()
        .map(|event| {
            let decided = domain::handle(event);
            if let Ok(Some(d)) = &decided {
                if expected.is_none_or(|(_, versao)| d.commission.versao >= versao) {
                    expected = Some((d.commission.valor_centavos, d.commission.versao));
                }
            }
            StoryEvent {
                posicao: event.posicao,
                id: event.id.clone(),
                tipo: event.tipo.clone(),
                versao: event.versao,
                ocorrido_em: event.ocorrido_em,
                commission_cents: decided
                    .as_ref()
                    .ok()
                    .and_then(|d| d.as_ref().map(|d| d.commission.valor_centavos)),
                rejected: decided.err().map(|e| e.to_string()),
            }
        })
        .collect();
    (told, expected)
}
