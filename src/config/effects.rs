//! `jobs/effects.yaml`: effect type name → webhook, idempotence and limits. A webhook that would
//! send credentials in clear off this machine is refused unless its type says `allow_insecure:
//! true` (see `cleartext`).

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use secrecy::SecretString;
use serde::de::{self, DeserializeSeed, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use super::cleartext::webhook_in_clear;
use super::de::{checked_map, Check, KeySeed};
use super::scalar::{
    check_identifier, Concurrency, DedupWindow, HeaderValue, HttpUrl, Rate, Timeout,
};
use super::{EffectCatalog, EffectType, WebhookConfig};

const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
const DEFAULT_CONCURRENCY: usize = 16;

/// The whole file. Keys must be unique.
pub(super) struct Catalog(pub EffectCatalog);

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "an effect type: a mapping with `webhook` and `idempotent`"
)]
struct RawEffectType {
    webhook: RawWebhook,
    /// Required: whether a retry may duplicate a message is a safety property, never defaulted.
    idempotent: bool,
    concurrency: Option<Concurrency>,
    rate_per_second: Option<Rate>,
    dedup_window: Option<DedupWindow>,
    /// Accepts sending the webhook's credentials over plain `http` off this machine.
    #[serde(default)]
    allow_insecure: bool,
}

const EFFECT_TYPE: &str = "an effect type: a mapping with `webhook` and `idempotent`";

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a webhook: a mapping with `url`")]
struct RawWebhook {
    url: HttpUrl,
    timeout: Option<Timeout>,
    #[serde(default)]
    headers: Headers,
}

impl RawEffectType {
    fn into_checked(self, name: String) -> Check<EffectType> {
        let in_clear = webhook_in_clear(&self.webhook.url.0, !self.webhook.headers.0.is_empty());
        if in_clear && !self.allow_insecure {
            return Err(format!(
                "effect type `{name}` would send its credentials (a header, or user-info in the \
                 URL) in clear: its webhook URL is plain `http://` to a host off this machine; use \
                 https, or accept it with `allow_insecure: true` on the type (serve warns at start)"
            ));
        }
        Ok(EffectType {
            name,
            webhook: WebhookConfig {
                url: self.webhook.url.0,
                timeout: self.webhook.timeout.map_or(DEFAULT_TIMEOUT, |d| d.0),
                headers: self.webhook.headers.0,
            },
            idempotent: self.idempotent,
            concurrency: self.concurrency.map_or(DEFAULT_CONCURRENCY, |c| c.0),
            rate_per_second: self.rate_per_second.map(|r| r.0),
            dedup_window: self.dedup_window.map(|d| d.0),
        })
    }
}

/// One effect type's settings, checked as a whole (the error gets the position of its mapping).
struct TypeSeed(String);

impl<'de> DeserializeSeed<'de> for TypeSeed {
    type Value = EffectType;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<EffectType, D::Error> {
        checked_map(d, EFFECT_TYPE, |raw: RawEffectType| {
            raw.into_checked(self.0)
        })
    }
}

impl<'de> Deserialize<'de> for Catalog {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Catalog;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a mapping of effect type name to its settings")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Catalog, A::Error> {
                let mut types = BTreeMap::new();
                while let Some(name) = map.next_key_seed(KeySeed {
                    expecting: "an effect type name",
                    parse: |s: String| {
                        check_identifier(&s, "effect type name", "it is part of the ledger key")?;
                        if types.contains_key(&s) {
                            return Err(format!("effect type `{s}` is defined twice"));
                        }
                        Ok(s)
                    },
                })? {
                    let effect = map.next_value_seed(TypeSeed(name.clone()))?;
                    types.insert(name, effect);
                }
                Ok(Catalog(EffectCatalog { types }))
            }
        }
        d.deserialize_map(V)
    }
}

/// `headers: { Name: value }`. Values are secrets: no message ever quotes one.
#[derive(Default)]
struct Headers(Vec<(String, SecretString)>);

impl<'de> Deserialize<'de> for Headers {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Headers;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a mapping of header name to value")
            }
            // Overridden so that a value written where the mapping belongs is not quoted back.
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Headers, E> {
                Err(E::custom(
                    "headers must be a mapping of header name to value, e.g. { Authorization: \"Bearer ${TOKEN}\" }",
                ))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Headers, E> {
                Ok(Headers::default())
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Headers, A::Error> {
                let mut headers: Vec<(String, SecretString)> = Vec::new();
                while let Some(name) = map.next_key_seed(KeySeed {
                    expecting: "a header name",
                    parse: |s: String| check_header_name(s, &headers),
                })? {
                    let value: HeaderValue = map.next_value()?;
                    headers.push((name, value.0));
                }
                Ok(Headers(headers))
            }
        }
        d.deserialize_any(V)
    }
}

fn check_header_name(name: String, seen: &[(String, SecretString)]) -> Result<String, String> {
    if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
        // Not quoted: a missing `:` makes a whole `Name value` line (a token) the name.
        return Err(
            "invalid header name (letters, digits and `-`, e.g. `Authorization`; the text is not shown: it may hold a secret)".into(),
        );
    }
    if name.eq_ignore_ascii_case("idempotency-key") {
        return Err(
            "the `Idempotency-Key` header is set by replay-ledger to the ledger key of each call"
                .into(),
        );
    }
    if seen.iter().any(|(n, _)| n.eq_ignore_ascii_case(&name)) {
        return Err(format!("header `{name}` is given twice"));
    }
    Ok(name)
}
