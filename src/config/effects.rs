//! `jobs/effects.yaml`: effect type name → webhook, idempotence and limits.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use secrecy::SecretString;
use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use super::de::KeySeed;
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
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a webhook: a mapping with `url`")]
struct RawWebhook {
    url: HttpUrl,
    timeout: Option<Timeout>,
    #[serde(default)]
    headers: Headers,
}

impl RawEffectType {
    fn into_checked(self, name: String) -> EffectType {
        EffectType {
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
        }
    }
}

impl<'de> Deserialize<'de> for Catalog {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Catalog;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
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
                    let raw: RawEffectType = map.next_value()?;
                    types.insert(name.clone(), raw.into_checked(name));
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
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
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
