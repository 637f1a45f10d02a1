//! A job's `effects:` — effect type → what the job may do with it. Checked against the effect
//! catalog while it is read: the type must exist, and `on_failure: release` is refused on a type
//! that is not idempotent.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{DeserializeSeed, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use super::context::{self, TypeFacts};
use super::de::{checked_map, KeySeed};
use super::{EffectMode, EffectPolicy, OnFailure};

#[derive(Debug, Clone, Default)]
pub(super) struct Policies(pub BTreeMap<String, EffectPolicy>);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    #[serde(default)]
    mode: EffectMode,
    #[serde(default)]
    on_failure: OnFailure,
}

impl<'de> Deserialize<'de> for Policies {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Policies;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a mapping of effect type to { mode, on_failure }")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Policies, A::Error> {
                let mut out = BTreeMap::new();
                while let Some((name, facts)) = map.next_key_seed(KeySeed {
                    expecting: "an effect type",
                    parse: |s: String| {
                        if out.contains_key(&s) {
                            return Err(format!("effect type `{s}` is listed twice"));
                        }
                        let facts = context::effect_type(&s)?;
                        Ok((s, facts))
                    },
                })? {
                    let policy = map.next_value_seed(PolicySeed { name: &name, facts })?;
                    out.insert(name, policy);
                }
                Ok(Policies(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// The policy of one effect type, knowing that type's facts.
struct PolicySeed<'a> {
    name: &'a str,
    facts: Option<TypeFacts>,
}

impl<'de> DeserializeSeed<'de> for PolicySeed<'_> {
    type Value = EffectPolicy;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<EffectPolicy, D::Error> {
        checked_map(
            d,
            "{ mode: apply|suppress, on_failure: release|keep }",
            |raw: RawPolicy| {
                let not_idempotent = self.facts.is_some_and(|f| !f.idempotent);
                if raw.on_failure == OnFailure::Release && not_idempotent {
                    return Err(format!(
                        "`on_failure: release` is refused for `{}`: the type is not idempotent \
                     (`idempotent: false` in effects.yaml), so retrying a failed call could \
                     duplicate a message; use `on_failure: keep`",
                        self.name
                    ));
                }
                Ok(EffectPolicy {
                    mode: raw.mode,
                    on_failure: raw.on_failure,
                })
            },
        )
    }
}
