//! Decoding an archived `payload` (jsonb) without trusting its shape. PostgreSQL stores JSON
//! nested thousands of levels deep and numbers of any size; serde_json refuses more than 128
//! levels and numbers beyond `f64`, and sqlx's plain `serde_json::Value` decode turns either into
//! an error for the whole batch — one such event would stop every run of its window, forever.
//!
//! Here a payload always decodes: levels deeper than [`MAX_DEPTH`] are read as `null` (skipped
//! without recursion; no handler looks that deep, and a value built that deep could overflow
//! the stack when dropped), and a payload serde_json cannot read at all becomes `null`, which
//! the domain rejects as an invalid payload, so the event is recorded as rejected and the run
//! goes on.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Number, Value};
use sqlx::postgres::{PgTypeInfo, PgValueRef};
use sqlx::types::Json;
use sqlx::{Decode, Postgres, Type};

/// Levels of arrays and objects decoded; deeper ones are `null`.
pub const MAX_DEPTH: usize = 64;

/// A payload as read from `evento_arquivado`: its value, or why it could not be read.
#[derive(Debug)]
pub(crate) struct Payload(Result<Value, String>);

impl Payload {
    /// The value for the domain; an undecodable payload is logged (with the event's id and
    /// position, never its content) and handed over as `null`.
    pub(crate) fn into_value(self, event_id: &str, posicao: i64) -> Value {
        self.0.unwrap_or_else(|reason| {
            tracing::warn!(event_id, posicao, reason = %reason, "payload could not be decoded; the domain gets null");
            Value::Null
        })
    }
}

impl Type<Postgres> for Payload {
    fn type_info() -> PgTypeInfo {
        <Json<Value> as Type<Postgres>>::type_info()
    }

    fn compatible(ty: &PgTypeInfo) -> bool {
        <Json<Value> as Type<Postgres>>::compatible(ty)
    }
}

impl<'r> Decode<'r, Postgres> for Payload {
    fn decode(value: PgValueRef<'r>) -> Result<Self, sqlx::error::BoxDynError> {
        Ok(Payload(decode_text(value).map_err(|e| e.to_string())))
    }
}

/// The payload's JSON text (skipped through, however deep), decoded down to [`MAX_DEPTH`]
/// levels; an older shape's `valor` number is kept as its exact text for the domain's upcaster.
fn decode_text(value: PgValueRef<'_>) -> Result<Value, sqlx::error::BoxDynError> {
    let text = <Json<&RawValue> as Decode<Postgres>>::decode(value)?
        .0
        .get();
    let mut payload = match serde_json::from_str::<Bounded>(text) {
        Ok(whole) => whole.0,
        Err(e) => by_field(text).ok_or(e)?,
    };
    crate::domain::upcast::keep_exact_valor(text, &mut payload);
    Ok(payload)
}

/// An object serde_json could not read whole, read field by field: a field holding a number
/// beyond `f64` (PostgreSQL keeps `1e400` exactly) is handed over as its number's text, so the
/// rule rejects the event naming that field ("valorCentavos is not a number", "valor beyond
/// JavaScript's safe integers") rather than as "payload is not an object". `None` when a field
/// fails for another reason.
fn by_field(text: &str) -> Option<Value> {
    let fields = serde_json::from_str::<BTreeMap<String, &RawValue>>(text).ok()?;
    let mut object = Map::new();
    for (key, raw) in fields {
        let value = match serde_json::from_str::<Bounded>(raw.get()) {
            Ok(value) => value.0,
            Err(_) if crate::domain::upcast::is_json_number(raw.get()) => {
                Value::String(raw.get().to_owned())
            }
            Err(_) => return None,
        };
        object.insert(key, value);
    }
    Some(Value::Object(object))
}

/// A JSON value decoded down to [`MAX_DEPTH`] levels.
struct Bounded(Value);

impl<'de> Deserialize<'de> for Bounded {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Level(0).deserialize(d).map(Bounded)
    }
}

/// The depth of the value being decoded.
#[derive(Clone, Copy)]
struct Level(usize);

impl<'de> DeserializeSeed<'de> for Level {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        if self.0 >= MAX_DEPTH {
            // serde_json skips a value iteratively, however deep.
            d.deserialize_ignored_any(IgnoredAny)?;
            return Ok(Value::Null);
        }
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Level {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(Level(self.0 + 1))? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(Level(self.0 + 1))?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(text: &str) -> Result<Value, serde_json::Error> {
        serde_json::from_str::<Bounded>(text).map(|b| b.0)
    }

    #[test]
    fn a_shallow_value_decodes_as_serde_json_would() {
        let text = r#"{"valorCentavos": 1000, "percentual": 2.5, "x": [-1, 18446744073709551615, "é😀", null, true, {}]}"#;
        assert_eq!(
            decode(text).unwrap(),
            serde_json::from_str::<Value>(text).unwrap()
        );
    }

    #[test]
    fn levels_below_the_limit_are_null_and_the_top_is_kept() {
        let depth = 100_000;
        let text = format!(
            r#"{{"valorCentavos": 1000, "deep": {}1{}}}"#,
            "[".repeat(depth),
            "]".repeat(depth)
        );
        let value = decode(&text).unwrap();
        assert_eq!(value["valorCentavos"], 1000);
        let mut level = &value["deep"];
        let mut depth_seen = 1;
        while let Value::Array(items) = level {
            level = &items[0];
            depth_seen += 1;
        }
        assert_eq!(depth_seen, MAX_DEPTH);
        assert_eq!(*level, Value::Null);
    }

    #[test]
    fn a_number_beyond_f64_is_still_an_error() {
        assert!(decode(r#"{"valorCentavos": 1e400}"#).is_err());
    }

    #[test]
    fn a_field_beyond_f64_is_handed_over_as_its_text_and_the_rest_as_values() {
        let text = r#"{"valorCentavos": 1e400, "percentual": 5}"#;
        let value = by_field(text).unwrap();
        assert_eq!(value["valorCentavos"], "1e400");
        assert_eq!(value["percentual"], 5);
        let reason = crate::domain::commission_of(&value).unwrap_err().reason;
        assert_eq!(reason, "valorCentavos is not a number");
    }
}
