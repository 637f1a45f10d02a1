//! Serde helpers that run a check *inside* a visitor. serde_yaml attaches the position of the value
//! being visited to an error raised there; a check made after `deserialize` returns would get the
//! position of the enclosing mapping instead (often line 1). This is how "parsed, then checked"
//! keeps every error at its line and column: raw struct → checked value, within the visit.

use std::fmt;
use std::marker::PhantomData;

use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

use super::interp::{interpolate, referenced};

/// The outcome of a check: the message says what is wrong and how to fix it.
pub(super) type Check<T> = Result<T, String>;

/// A string scalar, `${VAR}`-interpolated, then parsed by `parse`.
pub(super) fn interpolated_str<'de, D, T, F>(
    d: D,
    expecting: &'static str,
    parse: F,
) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    F: FnOnce(String) -> Check<T>,
{
    d.deserialize_str(StrVisitor {
        expecting,
        interpolate: true,
        parse,
    })
}

/// A string scalar taken verbatim (names and identifiers are never interpolated), then parsed.
pub(super) fn plain_str<'de, D, T, F>(
    d: D,
    expecting: &'static str,
    parse: F,
) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    F: FnOnce(String) -> Check<T>,
{
    d.deserialize_str(StrVisitor {
        expecting,
        interpolate: false,
        parse,
    })
}

struct StrVisitor<F> {
    expecting: &'static str,
    interpolate: bool,
    parse: F,
}

impl<'de, T, F: FnOnce(String) -> Check<T>> Visitor<'de> for StrVisitor<F> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.expecting)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
        if !self.interpolate {
            return (self.parse)(v.to_owned()).map_err(E::custom);
        }
        let text = interpolate(v).map_err(E::custom)?;
        let expecting = self.expecting;
        (self.parse)(text).map_err(|message| {
            let variables = referenced(v);
            if variables.is_empty() {
                E::custom(message)
            } else {
                E::custom(from_environment(&variables, expecting))
            }
        })
    }
}

/// The error of a value that came (wholly or in part) from `variables` and did not pass its check:
/// the check's own message may quote the value (a token put where a duration belongs), so this
/// one names the variables and what was expected instead.
fn from_environment(variables: &[String], expecting: &str) -> String {
    let names: Vec<String> = variables.iter().map(|n| format!("`${{{n}}}`")).collect();
    format!(
        "the value from {} is not valid here: expected {expecting} (the value is not shown: it \
         comes from the environment)",
        names.join(", ")
    )
}

/// An unsigned integer scalar, checked by `check`.
pub(super) fn checked_u64<'de, D, T, F>(
    d: D,
    expecting: &'static str,
    check: F,
) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    F: FnOnce(u64) -> Check<T>,
{
    struct V<F>(&'static str, F);
    impl<'de, T, F: FnOnce(u64) -> Check<T>> Visitor<'de> for V<F> {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
            (self.1)(v).map_err(E::custom)
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
            let v = u64::try_from(v).map_err(|_| E::custom(format!("{v} is negative")))?;
            (self.1)(v).map_err(E::custom)
        }
    }
    d.deserialize_u64(V(expecting, check))
}

/// A number scalar (integer or float), checked by `check`.
pub(super) fn checked_f64<'de, D, T, F>(
    d: D,
    expecting: &'static str,
    check: F,
) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    F: FnOnce(f64) -> Check<T>,
{
    struct V<F>(&'static str, F);
    impl<'de, T, F: FnOnce(f64) -> Check<T>> Visitor<'de> for V<F> {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<T, E> {
            (self.1)(v).map_err(E::custom)
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
            self.visit_f64(v as f64)
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
            self.visit_f64(v as f64)
        }
    }
    d.deserialize_f64(V(expecting, check))
}

/// A mapping deserialized as the raw struct `R` (which refuses unknown keys), then checked by
/// `check`; an error from `check` gets the position of the mapping.
pub(super) fn checked_map<'de, D, R, T, F>(
    d: D,
    expecting: &'static str,
    check: F,
) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    R: Deserialize<'de>,
    F: FnOnce(R) -> Check<T>,
{
    struct V<R, F>(&'static str, F, PhantomData<R>);
    impl<'de, R: Deserialize<'de>, T, F: FnOnce(R) -> Check<T>> Visitor<'de> for V<R, F> {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
            let raw = R::deserialize(MapAccessDeserializer::new(map))?;
            (self.1)(raw).map_err(de::Error::custom)
        }
    }
    d.deserialize_map(V(expecting, check, PhantomData))
}

/// A sequence of `E`, checked as a whole by `check`; an error from `check` gets the position of
/// the sequence.
pub(super) fn checked_seq<'de, D, E, T, F>(
    d: D,
    expecting: &'static str,
    check: F,
) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    E: Deserialize<'de>,
    F: FnOnce(Vec<E>) -> Check<T>,
{
    struct V<E, F>(&'static str, F, PhantomData<E>);
    impl<'de, E: Deserialize<'de>, T, F: FnOnce(Vec<E>) -> Check<T>> Visitor<'de> for V<E, F> {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<T, A::Error> {
            let items = Vec::<E>::deserialize(SeqAccessDeserializer::new(seq))?;
            (self.1)(items).map_err(de::Error::custom)
        }
    }
    d.deserialize_seq(V(expecting, check, PhantomData))
}

/// A mapping key read with [`plain_str`], so that `parse` (a duplicate check, a lookup) fails at
/// the key's own line and column.
pub(super) struct KeySeed<F> {
    pub expecting: &'static str,
    pub parse: F,
}

impl<'de, T, F: FnOnce(String) -> Check<T>> de::DeserializeSeed<'de> for KeySeed<F> {
    type Value = T;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<T, D::Error> {
        plain_str(d, self.expecting, self.parse)
    }
}
