//! One order's story, the one read model behind `explain PEDIDO` and the console's
//! `/pedidos/{pedido_id}`: every event of the order with what the domain's rule (the applier's)
//! makes of it, the `comissao` row beside the value the archive implies, every correction by
//! execution, and every effect key with its state, execution, attempts and reason. Each
//! `pedido.pago` event carries the inputs the rule read (amount, percentage, payload shape), and
//! an inconsistent order says why, in words.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgPool;

use replay_ledger_core::domain::{self, Event, Inputs};
use replay_ledger_core::shared::money::brl;
use replay_ledger_core::tables::archive;
use replay_ledger_core::tables::commission::order::{self, Correction, Stored};
use replay_ledger_core::tables::ledger::{self, OrderEffect};

/// An event of the order and what the rule makes of it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoryEvent {
    pub posicao: i64,
    pub id: String,
    pub tipo: String,
    pub versao: i64,
    pub ocorrido_em: DateTime<Utc>,
    /// When it reached the archive (`None`: before the archive recorded that). An event archived
    /// after a moment was not known then, though it occurred before.
    pub arquivado_em: Option<DateTime<Utc>>,
    /// The commission it implies (none: rejected, or a type the domain does not handle).
    pub commission_cents: Option<i64>,
    /// Why the rule rejected it.
    pub rejected: Option<String>,
    /// What the rule read from its payload (a `pedido.pago` only).
    pub inputs: Option<Inputs>,
    /// The rule and its version that gave `commission_cents` (a `pedido.pago` only).
    pub rule: Option<&'static str>,
}

/// The whole story; its JSON keys are a contract that scripts read (extended, never renamed).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Story {
    pub pedido_id: String,
    pub events: Vec<StoryEvent>,
    pub comissao: Option<Stored>,
    /// What the archive implies: the newest version's commission (the last of equal versions).
    pub expected_cents: Option<i64>,
    /// Whether the row holds the value and version the whole archive implies now (no row and
    /// nothing expected: yes) — also when told as of a moment: today's row is judged against
    /// today's archive, never against a past moment.
    pub consistent: bool,
    /// Why the order is inconsistent, in Portuguese; absent from the JSON when it is consistent
    /// (a consistent order's story keeps the contract's keys, unchanged).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub corrections: Vec<Correction>,
    pub effects: Vec<OrderEffect>,
    /// Told as of this moment (`explain --as-of`, `?as_of=`): only the events that occurred by
    /// then, so `expected_cents` is what the table would have said then; the corrections
    /// recorded by then; `comissao` is the row as it is now, and `consistent` judges it against
    /// the archive as it is now. Absent from the JSON otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub as_of: Option<DateTime<Utc>>,
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
    story_as_of(pool, pedido_id, None).await
}

/// The story of `pedido_id` as of `as_of` (see [`Story::as_of`]); `None`: as it stands.
pub async fn story_as_of(
    pool: &PgPool,
    pedido_id: &str,
    as_of: Option<DateTime<Utc>>,
) -> Result<Story, StoryError> {
    // PostgreSQL text never holds NUL: no order has such an id, and the query would fail.
    if pedido_id.is_empty() || pedido_id.contains('\0') {
        return Err(StoryError::InvalidId);
    }
    let all = archive::of_order(pool, pedido_id).await?;
    // Today's row is judged against the whole archive, whatever moment the story is told as of.
    let (_, now_expected) = tell(&all);
    let mut events = all;
    if let Some(at) = as_of {
        events.retain(|(e, _)| e.ocorrido_em <= at);
    }
    let comissao = order::row_of(pool, pedido_id).await?;
    if events.is_empty() && comissao.is_none() {
        return Err(StoryError::Unknown(pedido_id.to_string()));
    }
    let keys: Vec<String> = events
        .iter()
        .flat_map(|(e, _)| {
            domain::EFFECT_TYPES
                .iter()
                .map(|t| domain::effect_key(&e.id, t))
        })
        .collect();
    let effects = ledger::effects_of_keys(pool, &keys).await?;
    let mut corrections = order::corrections_of(pool, pedido_id).await?;
    if let Some(at) = as_of {
        corrections.retain(|c| c.registrado_em <= at);
    }
    let (told, expected) = tell(&events);
    let reason = reason(
        comissao
            .as_ref()
            .map(|r| (r.valor_centavos, r.versao_evento)),
        now_expected,
    );
    Ok(Story {
        pedido_id: pedido_id.to_string(),
        events: told,
        comissao,
        expected_cents: expected.map(|(valor, _)| valor),
        consistent: reason.is_none(),
        reason,
        corrections,
        effects,
        as_of,
    })
}

/// Each event with what the rule makes of it, and the (value, version) the events imply: the
/// newest version, and among equal versions the last in `posicao` order, as the version-guarded
/// writes leave it.
fn tell(events: &[(Event, Option<DateTime<Utc>>)]) -> (Vec<StoryEvent>, Option<(i64, i64)>) {
    let mut expected: Option<(i64, i64)> = None;
    let told = events
        .iter()
        .map(|(event, archived)| {
            let decided = domain::handle(event);
            if let Ok(Some(d)) = &decided {
                if expected.is_none_or(|(_, versao)| d.commission.versao >= versao) {
                    expected = Some((d.commission.valor_centavos, d.commission.versao));
                }
            }
            tell_one(event, *archived, decided)
        })
        .collect();
    (told, expected)
}

/// One event, with the rule's decision on it and, for a `pedido.pago`, its inputs.
fn tell_one(
    event: &Event,
    arquivado_em: Option<DateTime<Utc>>,
    decided: Result<Option<domain::Decision>, domain::InvalidPayload>,
) -> StoryEvent {
    let paid = event.tipo == domain::ORDER_PAID;
    StoryEvent {
        posicao: event.posicao,
        id: event.id.clone(),
        tipo: event.tipo.clone(),
        versao: event.versao,
        ocorrido_em: event.ocorrido_em,
        arquivado_em,
        commission_cents: decided
            .as_ref()
            .ok()
            .and_then(|d| d.as_ref().map(|d| d.commission.valor_centavos)),
        rejected: decided.err().map(|e| e.to_string()),
        inputs: paid.then(|| domain::inputs_of(&event.payload)),
        rule: paid.then_some(domain::RULE_VERSION),
    }
}

/// Why the row `(valor, versao)` is not what the archive implies, in words; `None` when it is
/// (no row and nothing implied is consistent too).
fn reason(row: Option<(i64, i64)>, expected: Option<(i64, i64)>) -> Option<String> {
    let (valor, versao, expected_valor, expected_versao) = match (row, expected) {
        (None, None) => return None,
        (None, Some((v, n))) => {
            return Some(format!(
                "nenhuma linha em comissao; o arquivo implica {} (versão {n})",
                brl(v)
            ))
        }
        (Some((v, n)), None) => {
            return Some(format!(
                "linha em comissao ({}, versão {n}), mas o arquivo não tem pedido.pago aceito \
                 deste pedido",
                brl(v)
            ))
        }
        (Some((v, n)), Some((ev, en))) => (v, n, ev, en),
    };
    let mut why = Vec::new();
    if versao > expected_versao {
        why.push(format!(
            "versão {versao} na tabela, o arquivo só tem a versão {expected_versao}"
        ));
    } else if versao < expected_versao {
        why.push(format!(
            "versão {versao} na tabela, o arquivo já tem a versão {expected_versao}"
        ));
    }
    if valor != expected_valor {
        why.push(format!(
            "valor na tabela {}, o arquivo implica {}",
            brl(valor),
            brl(expected_valor)
        ));
    }
    (!why.is_empty()).then(|| why.join("; "))
}

#[cfg(test)]
mod tests {
    use super::reason;

    #[test]
    fn a_row_newer_than_the_archive_says_which_versions() {
        assert_eq!(
            reason(Some((500, 2)), Some((500, 1))).as_deref(),
            Some("versão 2 na tabela, o arquivo só tem a versão 1")
        );
    }

    #[test]
    fn a_wrong_value_says_both_amounts() {
        assert_eq!(
            reason(Some((5, 1)), Some((50, 1))).as_deref(),
            Some("valor na tabela R$ 0,05, o arquivo implica R$ 0,50")
        );
        assert_eq!(reason(Some((50, 1)), Some((50, 1))), None);
        assert_eq!(reason(None, None), None);
        assert!(reason(None, Some((50, 1)))
            .unwrap()
            .starts_with("nenhuma linha em comissao"));
    }
}
