//! What a `pedido.pago` payload gives the rule, for people (`explain`, the order page): the
//! amount, the percentage and the payload's shape — as the archive holds them and, for the older
//! shape, the cents it is upcast to. Pure, like the rest of the domain.

use serde::Serialize;
use serde_json::Value;

use super::upcast::{self, Shape};

/// A payload's inputs to the rule. A field the payload lacks (or that the rule rejects) is
/// `None`; the texts are the archive's, so they must be made inert before they are shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Inputs {
    /// `current` (`valorCentavos`) or `older` (`valor` in reais, upcast on read).
    pub format: &'static str,
    /// The amount in cents the rule reads: the payload's own, or the upcast `valor`.
    pub valor_centavos: Option<i64>,
    /// The older shape's `valor` in reais, as archived (a decimal string or number).
    pub valor: Option<String>,
    /// `percentual` as archived (a number, or a numeric string in the older shape).
    pub percentual: Option<String>,
}

/// The inputs of `payload`, whatever its shape.
pub fn inputs_of(payload: &Value) -> Inputs {
    let field = |k: &str| payload.get(k).map(text_of);
    let current = upcast::to_current(payload).ok();
    let valor_centavos = current
        .as_deref()
        .and_then(|c| c.get("valorCentavos"))
        .and_then(Value::as_f64)
        .filter(|v| v.is_finite() && v.fract() == 0.0 && v.abs() < 9.007_199_254_740_992e15)
        .map(|v| v as i64);
    match upcast::shape_of(payload) {
        Shape::Current => Inputs {
            format: "current",
            valor_centavos,
            valor: None,
            percentual: field("percentual"),
        },
        Shape::ReaisV1 => Inputs {
            format: "older",
            valor_centavos,
            valor: field("valor"),
            percentual: field("percentual"),
        },
    }
}

/// A JSON value's text: a string as is, anything else as JSON.
fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_current_shape_gives_its_cents_and_percentage() {
        let i = inputs_of(&json!({"valorCentavos": 15990, "percentual": 2.5}));
        assert_eq!(
            (i.format, i.valor_centavos, i.valor, i.percentual.as_deref()),
            ("current", Some(15990), None, Some("2.5"))
        );
    }

    #[test]
    fn the_older_shape_gives_its_reais_and_the_cents_they_are_upcast_to() {
        let i = inputs_of(&json!({"valor": "159.90", "percentual": "5"}));
        assert_eq!(
            (
                i.format,
                i.valor_centavos,
                i.valor.as_deref(),
                i.percentual.as_deref()
            ),
            ("older", Some(15990), Some("159.90"), Some("5"))
        );
    }
}
