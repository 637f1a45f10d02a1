//! The historical shapes of `pedido.pago`'s payload, read into the current one on read; the
//! archive itself is never rewritten (invariant `history-read-only`). One upcaster per shape:
//!
//! - [`Shape::Current`] `{"valorCentavos": int, "percentual": number}` — the seed's rule as is.
//! - [`Shape::ReaisV1`] `{"valor": "159.90" | 159.9, "percentual": 5 | "5"}` — reais as a decimal
//!   string or a JSON number with at most two decimal places, read by exact decimal arithmetic on
//!   the text (never binary floating point) into `valorCentavos`; `percentual` a number or a
//!   numeric string. A payload with `valor` and without `valorCentavos` has this shape.
//!
//! A JSON number's text is lost once it is an `f64`, so the archive's reader hands the number of
//! a `ReaisV1` `valor` over as its exact text ([`keep_exact_valor`]), the same as a decimal string:
//! the shape reads both alike.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use super::{invalid, InvalidPayload, MAX_FIELD_BYTES, MAX_SAFE_INTEGER};

/// The shapes `pedido.pago`'s payload has had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// `{"valorCentavos", "percentual"}`: the seed's.
    Current,
    /// `{"valor" (reais), "percentual"}`: before the amounts were kept in cents.
    ReaisV1,
}

/// The shape of a payload: `valor` without `valorCentavos` is [`Shape::ReaisV1`]; anything else is
/// read (and, if wrong, rejected) as the current shape.
pub fn shape_of(payload: &Value) -> Shape {
    match payload.as_object() {
        Some(o) if o.contains_key("valor") && !o.contains_key("valorCentavos") => Shape::ReaisV1,
        _ => Shape::Current,
    }
}

/// The payload in the current shape: borrowed when it already is, built when it was upcast.
pub fn to_current(payload: &Value) -> Result<std::borrow::Cow<'_, Value>, InvalidPayload> {
    match shape_of(payload) {
        Shape::Current => Ok(std::borrow::Cow::Borrowed(payload)),
        Shape::ReaisV1 => from_reais_v1(payload).map(std::borrow::Cow::Owned),
    }
}

/// [`Shape::ReaisV1`] → current: `valorCentavos` = the exact decimal × 100, `percentual` as a
/// number (a numeric string read as JavaScript's `Number()` would, correctly rounded).
fn from_reais_v1(payload: &Value) -> Result<Value, InvalidPayload> {
    let obj = payload
        .as_object()
        .ok_or(invalid("payload is not an object"))?;
    let cents = match obj.get("valor") {
        Some(Value::String(text)) if text.len() > MAX_FIELD_BYTES => {
            return Err(invalid("valor longer than 1 MiB"))
        }
        Some(Value::String(text)) => cents_of(text)?,
        Some(Value::Number(n)) => cents_of(&n.to_string())?,
        _ => return Err(invalid("valor is not a number")),
    };
    let percentual = match obj.get("percentual") {
        Some(Value::String(text)) if text.len() > MAX_FIELD_BYTES => {
            return Err(invalid("percentual longer than 1 MiB"))
        }
        Some(Value::Number(n)) => n.as_f64(),
        Some(Value::String(text)) if is_json_number(text) => text.parse::<f64>().ok(),
        _ => None,
    }
    .filter(|p| p.is_finite())
    .ok_or(invalid("percentual is not a number"))?;
    Ok(json!({"valorCentavos": cents, "percentual": percentual}))
}

/// Reais in decimal text (JSON's number grammar) → cents, exactly. Trailing zeros past the
/// second decimal place are only zeros (`"159.900"` is 15990); any other digit there is refused,
/// since no number of cents holds it.
fn cents_of(text: &str) -> Result<i64, InvalidPayload> {
    if !is_json_number(text) {
        return Err(invalid("valor is not a number"));
    }
    let (mantissa, exponent) = match text.find(['e', 'E']) {
        Some(at) => (&text[..at], text[at + 1..].parse::<i64>().ok()),
        None => (text, Some(0)),
    };
    let exponent = exponent.ok_or(invalid("valor beyond JavaScript's safe integers"))?;
    let negative = mantissa.starts_with('-');
    let (int, frac) = mantissa
        .trim_start_matches('-')
        .split_once('.')
        .unwrap_or((mantissa.trim_start_matches('-'), ""));
    let mut digits: String = format!("{int}{frac}").trim_start_matches('0').to_string();
    // value = digits × 10^-scale
    let mut scale = i64::try_from(frac.len()).unwrap_or(i64::MAX) - exponent;
    while scale > 2 && digits.ends_with('0') {
        digits.pop();
        scale -= 1;
    }
    if digits.is_empty() {
        return Ok(0);
    }
    if scale > 2 {
        return Err(invalid("valor has more than two decimal places"));
    }
    let too_big = invalid("valor beyond JavaScript's safe integers");
    let shift = u32::try_from(2 - scale).map_err(|_| too_big.clone())?;
    let cents = digits
        .parse::<i128>()
        .ok()
        .and_then(|d| d.checked_mul(10i128.checked_pow(shift)?))
        .filter(|c| *c <= MAX_SAFE_INTEGER as i128)
        .ok_or(too_big)?;
    let cents = i64::try_from(cents).unwrap_or(i64::MAX);
    Ok(if negative { -cents } else { cents })
}

/// JSON's number grammar: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
pub(crate) fn is_json_number(text: &str) -> bool {
    let b = text.as_bytes();
    let mut i = usize::from(b.first() == Some(&b'-'));
    let digits = |i: &mut usize| {
        let start = *i;
        while b.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i > start
    };
    let int_start = i;
    if !digits(&mut i) || (b[int_start] == b'0' && i - int_start > 1) {
        return false;
    }
    if b.get(i) == Some(&b'.') {
        i += 1;
        if !digits(&mut i) {
            return false;
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if !digits(&mut i) {
            return false;
        }
    }
    i == b.len()
}

/// The top-level `valor` token of a payload's JSON text.
#[derive(Deserialize)]
struct ValorToken<'a> {
    #[serde(borrow)]
    valor: Option<&'a RawValue>,
}

/// For a [`Shape::ReaisV1`] payload whose `valor` is a JSON number: replaces it with the number's
/// exact text from `text` (the payload's JSON, as archived), so no digit is lost to `f64`. Any
/// other payload is left as it is.
pub fn keep_exact_valor(text: &str, payload: &mut Value) {
    if shape_of(payload) != Shape::ReaisV1 || !payload["valor"].is_number() {
        return;
    }
    // A payload with a repeated `valor` keeps the number serde_json read (its last one).
    if let Ok(ValorToken { valor: Some(raw) }) = serde_json::from_str::<ValorToken<'_>>(text) {
        if is_json_number(raw.get()) {
            if let Some(obj) = payload.as_object_mut() {
                obj.insert("valor".into(), Value::String(raw.get().to_owned()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cents(v: Value) -> Result<i64, InvalidPayload> {
        to_current(&v).map(|c| c["valorCentavos"].as_i64().unwrap())
    }

    #[test]
    fn reais_in_text_or_number_become_exact_cents() {
        assert_eq!(
            cents(json!({"valor": "159.90", "percentual": 5})),
            Ok(15990)
        );
        assert_eq!(cents(json!({"valor": 159.9, "percentual": "5"})), Ok(15990));
        assert_eq!(cents(json!({"valor": "0.07", "percentual": 5})), Ok(7));
        assert_eq!(cents(json!({"valor": "-1.5", "percentual": 5})), Ok(-150));
        assert_eq!(
            cents(json!({"valor": "1.599e2", "percentual": 5})),
            Ok(15990)
        );
        assert_eq!(
            cents(json!({"valor": "159.900", "percentual": 5})),
            Ok(15990)
        );
        assert_eq!(cents(json!({"valor": "12", "percentual": 5})), Ok(1200));
    }

    #[test]
    fn too_precise_or_not_numeric_values_are_rejected_with_their_reason() {
        let reason = |v: Value| to_current(&v).unwrap_err().reason;
        assert_eq!(
            reason(json!({"valor": "159.901", "percentual": 5})),
            "valor has more than two decimal places"
        );
        assert_eq!(
            reason(json!({"valor": "abc", "percentual": 5})),
            "valor is not a number"
        );
        assert_eq!(
            reason(json!({"valor": " 1.00", "percentual": 5})),
            "valor is not a number"
        );
        assert_eq!(
            reason(json!({"valor": true, "percentual": 5})),
            "valor is not a number"
        );
        assert_eq!(
            reason(json!({"valor": "1.00", "percentual": "5%"})),
            "percentual is not a number"
        );
        assert_eq!(
            reason(json!({"valor": "1e300", "percentual": 5})),
            "valor beyond JavaScript's safe integers"
        );
    }

    #[test]
    fn a_number_token_is_read_from_its_text_not_from_f64() {
        let text = r#"{"valor": 159.900000000000000001, "percentual": 5}"#;
        let mut payload: Value = serde_json::from_str(text).unwrap();
        keep_exact_valor(text, &mut payload);
        assert_eq!(payload["valor"], "159.900000000000000001");
        assert!(to_current(&payload).is_err());
    }

    #[test]
    fn a_rule_field_longer_than_a_mebibyte_is_rejected_naming_it() {
        let zeros = format!("0.{}", "0".repeat(MAX_FIELD_BYTES));
        let reason = |v: Value| to_current(&v).unwrap_err().reason;
        assert_eq!(
            reason(json!({"valor": zeros, "percentual": 5})),
            "valor longer than 1 MiB"
        );
        assert_eq!(
            reason(json!({"valor": "1.00", "percentual": zeros})),
            "percentual longer than 1 MiB"
        );
    }

    #[test]
    fn the_current_shape_is_left_as_it_is() {
        let v = json!({"valorCentavos": 1000, "percentual": "5", "valor": "1.00"});
        assert_eq!(shape_of(&v), Shape::Current);
        assert_eq!(*to_current(&v).unwrap(), v);
    }
}
