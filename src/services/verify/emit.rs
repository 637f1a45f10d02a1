//! `verify --emit-jobs DIR`: for each day with differences, a gated replay job of that day (its
//! window in the timezone, `require_approved_simulation: true`, the policy verify checked with),
//! written as YAML that `check` accepts. Found → simulate → approve → applied.

use std::path::{Path, PathBuf};

use chrono::NaiveDate;
use chrono_tz::Tz;

use super::Findings;
use replay_ledger_core::config::{EffectMode, OnFailure, OnInvalidEvent};
use replay_ledger_core::engine::applier::Policy;

/// What every emitted job carries besides its day.
#[derive(Debug, Clone)]
pub struct EmitSpec {
    pub policy: Policy,
    pub batch_size: u32,
    pub timezone: Tz,
}

/// Writes one job per day with differences into `dir` (created if needed); returns each job's
/// name and file. A name already taken by an entry of `dir` gets a suffix (`-2`, `-3`, …): a day
/// fixed once and found wrong again gets a new execution.
///
/// Each file is created with `create_new` (`O_CREAT | O_EXCL`): an entry already there, a
/// dangling symlink included, is never followed nor overwritten, and two writers cannot race
/// between a check and the write. Errors name the path.
pub fn emit_jobs(
    dir: &Path,
    findings: &Findings,
    spec: &EmitSpec,
) -> std::io::Result<Vec<(String, PathBuf)>> {
    std::fs::create_dir_all(dir).map_err(|e| naming(dir, e))?;
    let mut written = Vec::new();
    for day in findings.differing() {
        let base = format!("reconcile-{}", day.day.format("%Y-%m-%d"));
        written.push(write_new(dir, &base, |name| {
            job_yaml(name, day.day, spec, &[])
        })?);
    }
    Ok(written)
}

/// The most suffixes tried for one day before giving up.
const MAX_SUFFIX: u32 = 1000;

/// Creates `<dir>/<base>[-n].yaml` under the first free name and writes `yaml(name)` into it.
fn write_new(
    dir: &Path,
    base: &str,
    yaml: impl Fn(&str) -> String,
) -> std::io::Result<(String, PathBuf)> {
    use std::io::Write;
    for n in 1..=MAX_SUFFIX {
        let name = match n {
            1 => base.to_owned(),
            n => format!("{base}-{n}"),
        };
        let path = dir.join(format!("{name}.yaml"));
        let mut file = match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(naming(&path, e)),
        };
        file.write_all(yaml(&name).as_bytes())
            .map_err(|e| naming(&path, e))?;
        return Ok((name, path));
    }
    let message = format!("{base}.yaml and its {MAX_SUFFIX} suffixes are all taken");
    Err(naming(
        dir,
        std::io::Error::new(std::io::ErrorKind::AlreadyExists, message),
    ))
}

/// The error `e` met at `path`, saying the path.
fn naming(path: &Path, e: std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// The YAML of one day's replay job, its report mailed to `report_to` when it has any. Names
/// from the configuration are written as JSON strings, which YAML reads as they are.
pub(super) fn job_yaml(
    name: &str,
    day: NaiveDate,
    spec: &EmitSpec,
    report_to: &[String],
) -> String {
    let at = |d: NaiveDate| {
        replay_ledger_core::config::day_start(spec.timezone, d)
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
    if !report_to.is_empty() {
        let to: Vec<String> = report_to.iter().map(|a| quoted(a)).collect();
        yaml.push_str(&format!("\nreport_to: [{}]", to.join(", ")));
    }
    yaml.push('\n');
    yaml
}
