//! `verify --emit-jobs DIR`: for each day with differences, a gated replay job of that day (its
//! window in the timezone, `require_approved_simulation: true`, the policy verify checked with),
//! written as YAML that `check` accepts. Found → simulate → approve → applied.

use std::path::{Path, PathBuf};

use chrono::NaiveDate;
use chrono_tz::Tz;

use super::Findings;
use crate::config::{EffectMode, OnFailure, OnInvalidEvent};
use crate::engine::applier::Policy;

/// What every emitted job carries besides its day.
#[derive(Debug, Clone)]
pub struct EmitSpec {
    pub policy: Policy,
    pub batch_size: u32,
    pub timezone: Tz,
}

/// Writes one job per day with differences into `dir` (created if needed); returns each job's
/// name and file. A name already taken by a file in `dir` gets a suffix (`-2`, `-3`, …): a day
/// fixed once and found wrong again gets a new execution.
pub fn emit_jobs(
    dir: &Path,
    findings: &Findings,
    spec: &EmitSpec,
) -> std::io::Result<Vec<(String, PathBuf)>> {
    std::fs::create_dir_all(dir)?;
    let mut written = Vec::new();
    for day in findings.differing() {
        let base = format!("reconcile-{}", day.day.format("%Y-%m-%d"));
        let (name, path) = (1..)
            .map(|n| match n {
                1 => base.clone(),
                n => format!("{base}-{n}"),
            })
            .map(|name| {
                let path = dir.join(format!("{name}.yaml"));
                (name, path)
            })
            .find(|(_, path)| !path.exists())
            .expect("a free name");
        std::fs::write(&path, job_yaml(&name, day.day, spec))?;
        written.push((name, path));
    }
    Ok(written)
}

/// The YAML of one day's replay job. Names from the configuration are written as JSON strings,
/// which YAML reads as they are.
fn job_yaml(name: &str, day: NaiveDate, spec: &EmitSpec) -> String {
    let at = |d: NaiveDate| {
        crate::config::day_start(spec.timezone, d)
            .with_timezone(&spec.timezone)
            .to_rfc3339()
    };
    let next = day.succ_opt().unwrap_or(day);
    let quoted = |s: &str| serde_json::to_string(s).unwrap_or_default();
    let types: Vec<String> = spec.policy.event_types.iter().map(|t| quoted(t)).collect();
    let mut yaml = format!(
        "# Written by `replay-ledger verify --emit-jobs`: {day} had differences. Simulate it, have\n\
         # finance approve the simulation, then run it.\n\
         name: {name}\ntimezone: {tz}\nwindow:\n  from: {from}\n  to: {to}\n\
         simulate: false\nrequire_approved_simulation: true\nbatch_size: {batch}\n\
         event_types: [{types}]\non_invalid_event: {invalid}\neffects:",
        tz = spec.timezone.name(),
        from = at(day),
        to = at(next),
        batch = spec.batch_size,
        types = types.join(", "),
        invalid = match spec.policy.on_invalid_event {
            OnInvalidEvent::Record => "record",
            OnInvalidEvent::Stop => "stop",
        },
    );
    if spec.policy.effects.is_empty() {
        yaml.push_str(" {}");
    }
    for (tipo, p) in &spec.policy.effects {
        let mode = match p.mode {
            EffectMode::Apply => "apply",
            EffectMode::Suppress => "suppress",
        };
        let on_failure = match p.on_failure {
            OnFailure::Release => "release",
            OnFailure::Keep => "keep",
        };
        yaml.push_str(&format!(
            "\n  {}: {{ mode: {mode}, on_failure: {on_failure} }}",
            quoted(tipo)
        ));
    }
    yaml.push('\n');
    yaml
}
