//! `jobs/effects.yaml`: effect type name → webhook, idempotence and limits. A webhook that would
//! send credentials in clear off this machine is refused unless its type says `allow_insecure:
//! true` (see `cleartext`).

use std::fmt;
use std::time::Duration;

use secrecy::SecretString;
use serde::de::{self, DeserializeSeed, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use super::cleartext::webhook_in_clear;
use super::de::{checked_map, checked_names, Check, KeySeed};
use super::scalar::{
    check_identifier, BreakerAfter, BreakerBudget, Concurrency, DedupWindow, HeaderValue, HttpUrl,
    MaxBackoff, Rate, RetryAttempts, RetryBackoff, Timeout,
};
use super::{EffectCatalog, EffectType, WebhookConfig};
use crate::shared::backoff::Backoff;

const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
const DEFAULT_CONCURRENCY: usize = 16;
/// `breaker_after` when a type says none: 20 consecutive failures stop its calls.
pub const DEFAULT_BREAKER_AFTER: u32 = 20;
/// How long a type's breaker may stay open before the run gives up, unless its retry policy
/// pauses longer (then that long).
pub const DEFAULT_BREAKER_BUDGET: Duration = Duration::from_secs(300);

/// Every pause a call's retries take, added up: the breaker never gives up sooner.
fn retry_waits(retry: &Backoff) -> Duration {
    (2..=retry.attempts.max(1)).map(|a| retry.delay(a)).sum()
}

/// An effect type's `retry` when it says none: 8 tries, pausing 1 s, 2 s, 4 s, 8 s, 16 s, then
/// 30 s twice — 91 s of pauses, so a provider that is down (or answering 503) for a minute is
/// ridden out, and a `Retry-After` of up to 30 s is waited for.
pub const DEFAULT_RETRY: Backoff = Backoff {
    attempts: 8,
    base: Duration::from_secs(1),
    max: Duration::from_secs(30),
};

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
    retry: Option<Retry>,
    breaker_after: Option<BreakerAfter>,
    breaker_budget: Option<BreakerBudget>,
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
        let retry = match self.retry {
            Some(Retry(r)) if !self.idempotent && r.attempts > 1 => {
                return Err(format!(
                    "effect type `{name}` is not idempotent: its calls are never retried (a \
                     retry could send a message twice), so `retry` would do nothing; remove it"
                ));
            }
            _ if !self.idempotent => Backoff {
                attempts: 1,
                ..DEFAULT_RETRY
            },
            Some(Retry(r)) => r,
            None => DEFAULT_RETRY,
        };
        let waits = retry_waits(&retry);
        let breaker_budget = match self.breaker_budget {
            Some(BreakerBudget(b)) if b < waits => {
                return Err(format!(
                    "effect type `{name}`: breaker_budget {} is shorter than its retry policy's own pauses ({}): the breaker would give up before a retry does",
                    humantime::format_duration(b),
                    humantime::format_duration(waits)
                ));
            }
            Some(BreakerBudget(b)) => b,
            None => DEFAULT_BREAKER_BUDGET.max(waits),
        };
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
            retry,
            breaker_after: self.breaker_after.map_or(DEFAULT_BREAKER_AFTER, |b| b.0),
            breaker_budget,
        })
    }
}

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a retry policy: a mapping with `attempts`, `backoff` and `max_backoff`"
)]
struct RawRetry {
    attempts: Option<RetryAttempts>,
    backoff: Option<RetryBackoff>,
    max_backoff: Option<MaxBackoff>,
}

const RETRY: &str = "a retry policy: a mapping with `attempts`, `backoff` and `max_backoff`";

/// `retry: { attempts, backoff, max_backoff }`, each optional: a missing one takes
/// [`DEFAULT_RETRY`]'s, bent so that `backoff <= max_backoff` holds; both given the other way
/// round is an error.
struct Retry(Backoff);

impl<'de> Deserialize<'de> for Retry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        checked_map(d, RETRY, |raw: RawRetry| {
            let attempts = raw.attempts.map_or(DEFAULT_RETRY.attempts, |a| a.0);
            let (base, max) = match (raw.backoff, raw.max_backoff) {
                (Some(b), Some(m)) if b.0 > m.0 => {
                    return Err(format!(
                        "retry backoff ({}) must not exceed max_backoff ({})",
                        humantime::format_duration(b.0),
                        humantime::format_duration(m.0)
                    ))
                }
                (Some(b), Some(m)) => (b.0, m.0),
                (Some(b), None) => (b.0, DEFAULT_RETRY.max.max(b.0)),
                (None, Some(m)) => (DEFAULT_RETRY.base.min(m.0), m.0),
                (None, None) => (DEFAULT_RETRY.base, DEFAULT_RETRY.max),
            };
            Ok(Retry(Backoff {
                attempts,
                base,
                max,
            }))
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
        let types = checked_names(
            d,
            "a mapping of effect type name to its settings",
            "an effect type name",
            |name, types| {
                check_identifier(name, "effect type name", "it is part of the ledger key")?;
                if types.contains_key(name) {
                    return Err(format!("effect type `{name}` is defined twice"));
                }
                Ok(TypeSeed(name.to_owned()))
            },
        )?;
        Ok(Catalog(EffectCatalog { types }))
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
