//! Serde helpers that run a check *inside* a visitor. serde_norway attaches the position of the value
//! being visited to an error raised there; a check made after `deserialize` returns would get the
//! position of the enclosing mapping instead (often line 1). This is how "parsed, then checked"
//! keeps every error at its line and column: raw struct → checked value, within the visit.

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{self, Deserialize, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use super::interp::{interpolate, referenced};

/// The outcome of a check: the message says what is wrong and how to fix it.
pub(super) type Check<T> = Result<T, String>;

/// Writes checked readers of one shape, once: `fn name(d, expecting, check)` reads one kind of
/// value (`$input`, through the `visit_*` methods given, which mostly end in
/// `self.checked(value)`) and hands it to `check` inside the visit, so a failed check's message
/// gets the value's position. `expecting` says what the value should have been.
macro_rules! checked_readers {
    ($(
        $(#[$doc:meta])*
        $vis:vis fn $name:ident $(<$($param:ident: $bound:path),+>)? ($input:ty) by $read:ident {
            $($visit:item)+
        }
    )+) => {$(
        $(#[$doc])*
        $vis fn $name<'de, D, T, F $($(, $param: $bound)+)?>(
            d: D,
            expecting: &'static str,
            check: F,
        ) -> Result<T, D::Error>
        where
            D: Deserializer<'de>,
            F: FnOnce($input) -> Check<T>,
        {
            struct V<F $($(, $param)+)?> {
                expecting: &'static str,
                check: F,
                input: PhantomData<($($($param,)+)?)>,
            }
            impl<F $($(, $param)+)?> V<F $($(, $param)+)?> {
                fn checked<T, E: de::Error>(self, input: $input) -> Result<T, E>
                where
                    F: FnOnce($input) -> Check<T>,
                {
                    (self.check)(input).map_err(E::custom)
                }
            }
            impl<'de, T, F: FnOnce($input) -> Check<T> $($(, $param: $bound)+)?> Visitor<'de>
                for V<F $($(, $param)+)?>
            {
                type Value = T;
                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str(self.expecting)
                }
                $($visit)+
            }
            d.$read(V {
                expecting,
                check,
                input: PhantomData,
            })
        }
    )+};
}

thread_local! {
    static NO_SECRETS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Bytes of string scalars read so far by the file being loaded (see [`with_scalar_budget`]).
    static SCALAR_BYTES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// The most bytes of string values one file may produce. A file is at most 1 MiB, so without
/// aliases its values never come near this; YAML aliases repeat a value each time they are used
/// (one 880 KB scalar aliased 1,000 times is 880 MB of strings), and this caps what they add.
pub(super) const SCALAR_BUDGET: usize = 2 << 20;

/// Runs `f` (the deserialization of one file) with a fresh [`SCALAR_BUDGET`].
pub(super) fn with_scalar_budget<T>(f: impl FnOnce() -> T) -> T {
    struct Restore(usize);
    impl Drop for Restore {
        fn drop(&mut self) {
            SCALAR_BYTES.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(SCALAR_BYTES.with(|c| c.replace(0)));
    f()
}

/// Counts `len` bytes of a string value against the file's budget, before it is copied.
fn charge(len: usize) -> Check<()> {
    let total = SCALAR_BYTES.with(|c| {
        let total = c.get().saturating_add(len);
        c.set(total);
        total
    });
    if total > SCALAR_BUDGET {
        return Err(format!(
            "the file's values add up to more than {} KiB: YAML aliases repeat a value each time \
             they are used; write the values out, or make them shorter",
            SCALAR_BUDGET >> 10
        ));
    }
    Ok(())
}

/// Runs `f` (a load) reading no secret from the environment (see `secret_str`).
pub(super) fn without_secrets<T>(f: impl FnOnce() -> T) -> T {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            NO_SECRETS.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(NO_SECRETS.with(|c| c.replace(true)));
    f()
}

/// Whether the load in progress reads secrets.
fn secrets_needed() -> bool {
    !NO_SECRETS.with(std::cell::Cell::get)
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

checked_readers! {
    /// A string scalar, `${VAR}`-interpolated, then checked by `check`. When the value came from
    /// the environment, a failed check's message is replaced by `from_environment`'s.
    pub(super) fn interpolated_str(String) by deserialize_str {
        fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
            charge(v.len()).map_err(E::custom)?;
            let text = interpolate(v).map_err(E::custom)?;
            let variables = referenced(v);
            if variables.is_empty() {
                return self.checked(text);
            }
            let expecting = self.expecting;
            (self.check)(text).map_err(|_| E::custom(from_environment(&variables, expecting)))
        }
    }

    /// A secret (a header value): as `interpolated_str`, except in a load that needs no secrets
    /// (the console's, see [`super::without_secrets`]), where the environment is not read at all
    /// and the value stays empty: the console binds no secret, so it needs none set.
    pub(super) fn secret_str(String) by deserialize_str {
        fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
            charge(v.len()).map_err(E::custom)?;
            if !secrets_needed() {
                return self.checked(String::new());
            }
            let text = interpolate(v).map_err(E::custom)?;
            let variables = referenced(v);
            if variables.is_empty() {
                return self.checked(text);
            }
            let expecting = self.expecting;
            (self.check)(text).map_err(|_| E::custom(from_environment(&variables, expecting)))
        }
    }

    /// A string scalar taken verbatim (names and identifiers are never interpolated), then
    /// checked by `check`.
    pub(super) fn plain_str(String) by deserialize_str {
        fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
            charge(v.len()).map_err(E::custom)?;
            self.checked(v.to_owned())
        }
    }

    /// An unsigned integer scalar, checked by `check`.
    pub(super) fn checked_u64(u64) by deserialize_u64 {
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
            self.checked(v)
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
            let v = u64::try_from(v).map_err(|_| E::custom(format!("{v} is negative")))?;
            self.checked(v)
        }
    }

    /// A number scalar (integer or float), checked by `check`.
    pub(super) fn checked_f64(f64) by deserialize_f64 {
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<T, E> {
            self.checked(v)
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
            self.checked(v as f64)
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
            self.checked(v as f64)
        }
    }

    /// A mapping deserialized as the raw struct `R` (which refuses unknown keys), then checked by
    /// `check`; an error from `check` gets the position of the mapping.
    pub(super) fn checked_map<R: Deserialize<'de>>(R) by deserialize_map {
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
            self.checked(R::deserialize(MapAccessDeserializer::new(map))?)
        }
    }

    /// A sequence of `I`, checked as a whole by `check`; an error from `check` gets the position
    /// of the sequence.
    pub(super) fn checked_seq<I: Deserialize<'de>>(Vec<I>) by deserialize_seq {
        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<T, A::Error> {
            self.checked(Vec::<I>::deserialize(SeqAccessDeserializer::new(seq))?)
        }
    }
}

/// A mapping of unique names to values. Each key is read with [`KeySeed`] and handed, with the
/// entries read so far, to `entry`: it refuses the name (a repeat, a bad or unknown name: the error
/// gets the key's position) or gives the seed that reads its value.
pub(super) fn checked_names<'de, D, S, F>(
    d: D,
    expecting: &'static str,
    key: &'static str,
    entry: F,
) -> Result<BTreeMap<String, S::Value>, D::Error>
where
    D: Deserializer<'de>,
    S: DeserializeSeed<'de>,
    F: FnMut(&str, &BTreeMap<String, S::Value>) -> Check<S>,
{
    struct V<F, S>(&'static str, &'static str, F, PhantomData<S>);
    impl<'de, S, F> Visitor<'de> for V<F, S>
    where
        S: DeserializeSeed<'de>,
        F: FnMut(&str, &BTreeMap<String, S::Value>) -> Check<S>,
    {
        type Value = BTreeMap<String, S::Value>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
        fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = BTreeMap::new();
            while let Some((name, seed)) = map.next_key_seed(KeySeed {
                expecting: self.1,
                parse: |s: String| (self.2)(&s, &out).map(|seed| (s, seed)),
            })? {
                let value = map.next_value_seed(seed)?;
                out.insert(name, value);
            }
            Ok(out)
        }
    }
    d.deserialize_map(V(expecting, key, entry, PhantomData))
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
