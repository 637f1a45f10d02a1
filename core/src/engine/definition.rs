//! What decides the outcome of a replay job's run, written down so that an approval can bind it
//! (invariant `approved-is-applied`, "approved = applied"): the resolved window, the event types,
//! each effect type's `mode`, and for a type that is applied its `on_failure`, provider and
//! `idempotent` (which decides whether an unknown outcome is released and resent or held
//! `incerto`), `on_invalid_event`, and the version of the commission rule.
//!
//! Not in it: what changes how fast or when a run goes, never what it does (`batch_size`,
//! `partitions`, `schedule`, `report_to`, concurrency, rate limits) — and an effect type's
//! `retry`, `timeout` and `dedup_window`. Those three decide how hard a failing call is tried
//! before the key is given up on, not which orders are corrected, to which values, or which keys
//! may be sent: every key they touch is one the approval already covers, and however they are
//! set a key ends sent once, `liberado` for the next run, or `incerto` for a human — never sent
//! to a second provider, never sent twice by a non-idempotent type. Binding them would make an
//! operator who lengthens a timeout for a slow provider send finance back to approve the same
//! diff, for no difference finance could see in it.
//!
//! A definition is a flat map from a field's path (`effects.notificar-vendedor.mode`) to its
//! value as shown to a person, so two definitions compare field by field and the difference is
//! said in the same words (`effects.notificar-vendedor.mode: suppress → apply`). A provider is
//! shown by scheme, host and port with a digest of its whole URL: its path or query may hold a
//! token, which must never be printed or stored in clear.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::config::{EffectMode, Job, OnFailure, OnInvalidEvent, ReplayJob, ResolvedWindow};
use crate::domain;
use crate::engine::effects::Effects;

/// A job's outcome-deciding definition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Definition(pub BTreeMap<String, String>);

/// One field that differs between two definitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldChange {
    pub field: String,
    /// `None`: the field was not there.
    pub then: Option<String>,
    pub now: Option<String>,
}

impl std::fmt::Display for FieldChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let show = |v: &Option<String>| v.clone().unwrap_or_else(|| "(absent)".into());
        write!(
            f,
            "{}: {} → {}",
            self.field,
            show(&self.then),
            show(&self.now)
        )
    }
}

impl Definition {
    /// The definition of `job` run over `window`, with the providers of `effects`.
    pub fn of(job: &Job, replay: &ReplayJob, window: &ResolvedWindow, effects: &Effects) -> Self {
        let mut fields = BTreeMap::new();
        let mut put = |k: String, v: String| {
            fields.insert(k, v);
        };
        // The rule's name and version (the one in force: `calcularComissao/N`, as before rules
        // had names, so approvals recorded then still hold).
        put("rule".into(), replay.rule.version().into());
        put("job".into(), job.name.clone());
        put("window.from".into(), window.from.to_rfc3339());
        put("window.to".into(), window.to.to_rfc3339());
        put("event_types".into(), replay.event_types.join(", "));
        put(
            "on_invalid_event".into(),
            match replay.on_invalid_event {
                OnInvalidEvent::Record => "record",
                OnInvalidEvent::Stop => "stop",
            }
            .into(),
        );
        // Every type the domain requests or the job names: one not listed is suppressed.
        let mut types: Vec<&str> = domain::EFFECT_TYPES.to_vec();
        types.extend(replay.effects.keys().map(String::as_str));
        types.sort_unstable();
        types.dedup();
        for tipo in types {
            let policy = replay.effects.get(tipo);
            let mode = policy.map_or(EffectMode::Suppress, |p| p.mode);
            put(
                format!("effects.{tipo}.mode"),
                match mode {
                    EffectMode::Apply => "apply",
                    EffectMode::Suppress => "suppress",
                }
                .into(),
            );
            if mode == EffectMode::Suppress {
                continue;
            }
            let on_failure = policy.map_or(OnFailure::Keep, |p| p.on_failure);
            put(
                format!("effects.{tipo}.on_failure"),
                match on_failure {
                    OnFailure::Release => "release",
                    OnFailure::Keep => "keep",
                }
                .into(),
            );
            if let Some(effect) = effects.get(tipo) {
                put(
                    format!("effects.{tipo}.provider"),
                    provider(&effect.config.webhook.url),
                );
                put(
                    format!("effects.{tipo}.idempotent"),
                    effect.config.idempotent.to_string(),
                );
            }
        }
        Definition(fields)
    }

    /// The fields that differ from `now`, in field order.
    pub fn changes(&self, now: &Definition) -> Vec<FieldChange> {
        let mut fields: Vec<&String> = self.0.keys().chain(now.0.keys()).collect();
        fields.sort_unstable();
        fields.dedup();
        fields
            .into_iter()
            .filter(|f| self.0.get(*f) != now.0.get(*f))
            .map(|f| FieldChange {
                field: f.clone(),
                then: self.0.get(f).cloned(),
                now: now.0.get(f).cloned(),
            })
            .collect()
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(&self.0).unwrap_or_default()
    }

    /// A definition as stored; `None` for a row written before definitions were recorded.
    pub fn from_json(value: Option<&serde_json::Value>) -> Option<Definition> {
        serde_json::from_value(value?.clone()).ok().map(Definition)
    }
}

/// Differences as one line: `a: x → y; b: …`.
pub fn describe(changes: &[FieldChange]) -> String {
    changes
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// A provider as shown: scheme, host and port, and a digest of the whole URL.
fn provider(url: &reqwest::Url) -> String {
    format!(
        "{}://{}:{} (#{:016x})",
        url.scheme(),
        url.host_str().unwrap_or(""),
        url.port_or_known_default().unwrap_or(0),
        fnv1a(url.as_str().as_bytes())
    )
}

/// A digest that stays the same across releases and platforms (see [`fnv1a`]).
pub fn digest(bytes: &[u8]) -> u64 {
    fnv1a(bytes)
}

/// FNV-1a, 64 bits: a digest that stays the same across releases and platforms (unlike the
/// standard library's hasher), so an approval is not refused because the program was rebuilt.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(pairs: &[(&str, &str)]) -> Definition {
        Definition(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    #[test]
    fn a_changed_field_is_said_with_both_values() {
        let then = def(&[("effects.x.mode", "suppress"), ("window.to", "a")]);
        let now = def(&[("effects.x.mode", "apply"), ("window.to", "a")]);

        assert_eq!(
            describe(&then.changes(&now)),
            "effects.x.mode: suppress → apply"
        );
    }

    #[test]
    fn a_field_present_on_one_side_only_is_a_change() {
        let then = def(&[("a", "1")]);
        let now = def(&[("a", "1"), ("b", "2")]);

        assert_eq!(describe(&then.changes(&now)), "b: (absent) → 2");
    }

    #[test]
    fn the_digest_is_the_published_fnv1a() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
