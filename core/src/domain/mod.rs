//! The domain: the seed's commission rule (`calcularComissao`) and the `pedido.pago` handler.
//! The only place that knows about orders and commissions. Pure: event in, state row and effect
//! requests out; no I/O.

use serde_json::{json, Value};

pub mod inputs;
pub mod rules;
pub mod upcast;

pub use inputs::{inputs_of, Inputs};
pub use rules::Rule;

/// The event type this domain handles.
pub const ORDER_PAID: &str = "pedido.pago";
/// The one effect type the domain requests: tell the seller about the commission.
pub const NOTIFY_SELLER: &str = "notificar-vendedor";
/// Every effect type the domain requests.
pub const EFFECT_TYPES: &[&str] = &[NOTIFY_SELLER];
/// The version of the commission rule and of what the handler decides. Change it whenever the
/// domain's rule changes: an approval binds it, so a release that computes differently cannot
/// apply an approval given for the old computation.
/// `/2`: payloads of the older shape (`valor` in reais) are upcast instead of rejected.
pub const RULE_VERSION: &str = "calcularComissao/2";
/// `Number.MAX_SAFE_INTEGER`: the largest integer a JavaScript number holds exactly.
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// The longest `evento_id` and `pedido_id` handled. They become primary keys (`comissao`, the
/// ledger key), and a PostgreSQL btree entry holds at most 2704 bytes: an event with a longer id
/// could never be written, and would stop every run of its window. It is rejected instead.
pub const MAX_ID_BYTES: usize = 1024;

/// The longest text a rule field (`valor`, a numeric-string `percentual`) may hold. No amount
/// needs more; the archive's reader cuts a longer string to just past this bound (see
/// `payload_da_regra`), so a hostile payload costs the worker at most this much per field, and
/// the event is rejected with this reason whether it was cut or not.
pub const MAX_FIELD_BYTES: usize = 1 << 20;

/// The seed's error message for a bad `pedido.pago` payload.
pub const INVALID_PAYLOAD: &str = "payload de pedido.pago invalido";

/// An archived event, as read from `evento_arquivado`.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub posicao: i64,
    pub id: String,
    pub tipo: String,
    pub pedido_id: String,
    pub versao: i64,
    pub payload: Value,
    pub ocorrido_em: chrono::DateTime<chrono::Utc>,
}

/// Why an event was rejected. The message starts with the seed's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{INVALID_PAYLOAD}: {reason}")]
pub struct InvalidPayload {
    pub reason: &'static str,
}

fn invalid(reason: &'static str) -> InvalidPayload {
    InvalidPayload { reason }
}

/// The commission row an event produces, guarded by `versao` when written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommissionRow {
    pub pedido_id: String,
    pub valor_centavos: i64,
    pub versao: i64,
}

/// An external effect the event asks for. Its ledger key is [`effect_key`].
#[derive(Debug, Clone, PartialEq)]
pub struct EffectRequest {
    pub tipo: &'static str,
    pub key: String,
    /// The provider's request body: `{"eventoId", "pedidoId", "valorCentavos"}`.
    pub body: Value,
}

/// What the domain decided for one event.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub commission: CommissionRow,
    pub effects: Vec<EffectRequest>,
    /// The payload had an older shape and was upcast to the current one.
    pub upcast: bool,
}

/// The commission a `pedido.pago` payload implies, whatever its shape: the one rule the replay,
/// the live consumer, `verify` and `explain` all call. `Ok((cents, upcast))`.
pub fn commission_of(payload: &Value) -> Result<(i64, bool), InvalidPayload> {
    Rule::IN_FORCE.commission_of(payload)
}

/// The ledger key: depends only on the event and the effect type, so the live consumer and every
/// replay find the same row.
pub fn effect_key(event_id: &str, effect_type: &str) -> String {
    format!("{event_id}:{effect_type}")
}

/// `calcularComissao` of the seed, bit for bit:
///
/// ```js
/// if (!Number.isInteger(valorCentavos) || typeof percentual !== 'number') throw …;
/// return Math.round((valorCentavos * percentual) / 100);
/// ```
///
/// JavaScript numbers are IEEE doubles, so the arithmetic is done in `f64` in the same order;
/// `Number.isInteger(1000.0)` is true; `Math.round` rounds halves toward +∞. A result that is not
/// a finite value in `i64` range (JavaScript would produce `Infinity` or lose cents, and the
/// `bigint` column could not hold it) is rejected instead of being stored wrong.
pub fn calcular_comissao(payload: &Value) -> Result<i64, InvalidPayload> {
    calcular(payload, None, js_math_round)
}

/// The seed's computation with the percentage capped at `cap` (when given) and the product
/// rounded by `round`: `calcularComissao` itself is `(None, js_math_round)`; the candidate rules
/// of [`rules`] change one of the two and nothing else (same checks, same order of operations).
fn calcular(
    payload: &Value,
    cap: Option<f64>,
    round: fn(f64) -> f64,
) -> Result<i64, InvalidPayload> {
    let obj = payload
        .as_object()
        .ok_or(invalid("payload is not an object"))?;
    let valor = obj
        .get("valorCentavos")
        .and_then(Value::as_f64)
        .ok_or(invalid("valorCentavos is not a number"))?;
    if !valor.is_finite() || valor.fract() != 0.0 {
        return Err(invalid("valorCentavos is not an integer"));
    }
    let percentual = obj
        .get("percentual")
        .and_then(Value::as_f64)
        .ok_or(invalid("percentual is not a number"))?;
    let percentual = cap.map_or(percentual, |cap| percentual.min(cap));
    let exact = (valor * percentual) / 100.0;
    let rounded = round(exact);
    // Beyond 2^53 - 1 JavaScript no longer holds the exact integer (and `String(n)` would store a
    // rounded one), so there is no exact value to agree with: reject rather than store a guess.
    if !(-MAX_SAFE_INTEGER..=MAX_SAFE_INTEGER).contains(&rounded) {
        return Err(invalid("commission beyond JavaScript's safe integers"));
    }
    Ok(rounded as i64)
}

/// `Math.round`: the integer closest to `x`, halves toward +∞. Not `(x + 0.5).floor()`, which is
/// wrong for 0.49999999999999994 and for large odd values.
fn js_math_round(x: f64) -> f64 {
    if !x.is_finite() {
        return x;
    }
    let floor = x.floor();
    let rounded = if x - floor >= 0.5 { floor + 1.0 } else { floor };
    // JavaScript's -0 is stored as 0.
    rounded + 0.0
}

/// The `pedido.pago` handler under the rule in force: `Ok(None)` for an event type this domain
/// does not handle.
pub fn handle(event: &Event) -> Result<Option<Decision>, InvalidPayload> {
    handle_with(Rule::IN_FORCE, event)
}

/// The `pedido.pago` handler under `rule` (a candidate rule's simulation; see [`rules`]).
pub fn handle_with(rule: Rule, event: &Event) -> Result<Option<Decision>, InvalidPayload> {
    let Some((commission, upcast)) = decide(rule, event)? else {
        return Ok(None);
    };
    let effects = vec![EffectRequest {
        tipo: NOTIFY_SELLER,
        key: effect_key(&event.id, NOTIFY_SELLER),
        body: json!({
            "eventoId": event.id,
            "pedidoId": event.pedido_id,
            "valorCentavos": commission.valor_centavos,
        }),
    }];
    Ok(Some(Decision {
        commission,
        effects,
        upcast,
    }))
}

/// The row the event writes under the rule in force, without the effects it asks for: what
/// [`handle`] decides (the same checks, the same rule), for the readers that only need the
/// row — the rebuild, `verify`'s orders, the temporal queries.
pub fn commission(event: &Event) -> Result<Option<CommissionRow>, InvalidPayload> {
    Ok(decide(Rule::IN_FORCE, event)?.map(|(row, _)| row))
}

/// The row `event` writes under `rule` and whether its payload was upcast; `None` for an event
/// of another type.
fn decide(rule: Rule, event: &Event) -> Result<Option<(CommissionRow, bool)>, InvalidPayload> {
    if event.tipo != ORDER_PAID {
        return Ok(None);
    }
    if event.id.len() > MAX_ID_BYTES {
        return Err(invalid("evento id longer than 1024 bytes"));
    }
    if event.pedido_id.len() > MAX_ID_BYTES {
        return Err(invalid("pedido_id longer than 1024 bytes"));
    }
    let (valor, upcast) = rule.commission_of(&event.payload)?;
    let row = CommissionRow {
        pedido_id: event.pedido_id.clone(),
        valor_centavos: valor,
        versao: event.versao,
    };
    Ok(Some((row, upcast)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commission(v: Value) -> Result<i64, InvalidPayload> {
        calcular_comissao(&v)
    }

    #[test]
    fn rounds_halves_toward_positive_infinity() {
        assert_eq!(
            commission(json!({"valorCentavos": -5, "percentual": 10})),
            Ok(0)
        );
        assert_eq!(
            commission(json!({"valorCentavos": 12345, "percentual": 2.5})),
            Ok(309)
        );
        assert_eq!(
            commission(json!({"valorCentavos": -15, "percentual": 10})),
            Ok(-1)
        );
    }

    #[test]
    fn a_float_with_no_fraction_is_an_integer_as_in_javascript() {
        assert_eq!(
            commission(json!({"valorCentavos": 1000.0, "percentual": 5})),
            Ok(50)
        );
    }

    #[test]
    fn strings_and_missing_fields_are_invalid() {
        assert!(commission(json!({"valorCentavos": "1000", "percentual": 5})).is_err());
        assert!(commission(json!({"valorCentavos": 1000, "percentual": "5"})).is_err());
        assert!(commission(json!({"percentual": 5})).is_err());
        assert!(commission(json!({"valorCentavos": 1000.5, "percentual": 5})).is_err());
        assert!(commission(json!(null)).is_err());
    }

    #[test]
    fn math_round_is_not_floor_of_x_plus_half() {
        assert_eq!(js_math_round(0.499_999_999_999_999_94), 0.0);
        assert_eq!(js_math_round(-0.5), 0.0);
        assert_eq!(js_math_round(2.5), 3.0);
    }

    #[test]
    fn other_event_types_are_skipped() {
        let event = Event {
            posicao: 1,
            id: "e1".into(),
            tipo: "pedido.cancelado".into(),
            pedido_id: "p1".into(),
            versao: 1,
            payload: json!({}),
            ocorrido_em: chrono::Utc::now(),
        };
        assert_eq!(handle(&event), Ok(None));
    }
}
