//! A job's `effects:` — effect type → what the job may do with it. Checked against the effect
//! catalog while it is read: the type must exist, and `on_failure: release` is refused on a type
//! that is not idempotent.

use std::collections::BTreeMap;

use serde::de::DeserializeSeed;
use serde::{Deserialize, Deserializer};

use super::context::{self, TypeFacts};
use super::de::{checked_map, checked_names};
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
        let policies = checked_names(
            d,
            "a mapping of effect type to { mode, on_failure }",
            "an effect type",
            |name, policies| {
                if policies.contains_key(name) {
                    return Err(format!("effect type `{name}` is listed twice"));
                }
                let facts = context::effect_type(name)?;
                Ok(PolicySeed {
                    name: name.to_owned(),
                    facts,
                })
            },
        )?;
        Ok(Policies(policies))
    }
}

/// The policy of one effect type, knowing that type's facts.
struct PolicySeed {
    name: String,
    facts: Option<TypeFacts>,
}

impl<'de> DeserializeSeed<'de> for PolicySeed {
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
