//! Loading: files → raw structs → checked types, with every error turned into a [`ConfigError`]
//! that names the file, line and column.

use std::path::{Path, PathBuf};

use super::context::{self, Context};
use super::de::with_scalar_budget;
use super::effects::Catalog;
use super::limits;
use super::raw::{Kind, KindProbe, RawLive, RawRebuild, RawReplay, RawReport, RawSweep, RawVerify};
use super::{ConfigError, ConfigErrors, EffectCatalog, Job, EFFECTS_FILE};

/// Everything in a jobs directory.
#[derive(Debug, Clone, Default)]
pub struct LoadedConfig {
    pub effects: EffectCatalog,
    /// Sorted by file name.
    pub jobs: Vec<Job>,
}

impl LoadedConfig {
    pub fn job(&self, name: &str) -> Option<&Job> {
        self.jobs.iter().find(|j| j.name == name)
    }
}

/// Loads the effect catalog (`jobs/effects.yaml`).
pub fn load_effects(path: &Path) -> Result<EffectCatalog, ConfigError> {
    let text = read(path)?;
    parse_effects(&text).map_err(|e| yaml_error(path, e))
}

/// Loads one job file, checking its effect types against `effects`.
pub fn load_job(path: &Path, effects: &EffectCatalog) -> Result<Job, ConfigError> {
    let text = read(path)?;
    let ctx = Context::new(Some(effects), false);
    let (job, _) = context::with(ctx, path, || parse_job(&text, path));
    job.map_err(|e| yaml_error(path, e))
}

/// Reads one job from `text` (a job file's contents kept elsewhere, such as a verify job's
/// proposal in the database), checking its effect types against `effects`; errors name `origin`.
pub fn parse_job_text(
    text: &str,
    origin: &Path,
    effects: &EffectCatalog,
) -> Result<Job, ConfigError> {
    let ctx = Context::new(Some(effects), false);
    let (job, _) = context::with(ctx, origin, || parse_job(text, origin));
    job.map_err(|e| yaml_error(origin, e))
}

/// Loads `effects.yaml` and every other `*.yaml` / `*.yml` of `dir` (sorted by name), collecting
/// every error. Two jobs with the same `name` are refused.
pub fn load_dir(dir: &Path) -> Result<LoadedConfig, ConfigErrors> {
    let files = job_files(dir).map_err(|e| ConfigErrors(vec![e]))?;
    let mut errors = Vec::new();
    let effects_file = dir.join(EFFECTS_FILE);
    // Any entry by that name is read (and refused if it is not a regular file).
    let effects = if std::fs::symlink_metadata(&effects_file).is_ok() {
        load_effects(&effects_file).map_err(|e| errors.push(e)).ok()
    } else {
        let message = "not found: every jobs directory needs one, it defines the effect types";
        errors.push(ConfigError::new(&effects_file, None, message));
        None
    };
    let mut ctx = Context::new(effects.as_ref(), true);
    let mut jobs = Vec::new();
    for file in files {
        let text = match read(&file) {
            Ok(text) => text,
            Err(e) => {
                errors.push(e);
                continue;
            }
        };
        let (job, back) = context::with(ctx, &file, || parse_job(&text, &file));
        ctx = back;
        match job {
            Ok(job) => jobs.push(job),
            Err(e) => errors.push(yaml_error(&file, e)),
        }
    }
    match effects {
        Some(effects) if errors.is_empty() => Ok(LoadedConfig { effects, jobs }),
        _ => Err(ConfigErrors(errors)),
    }
}

/// Resolves the CLI's `JOB` argument: a path to a YAML file (anything with a `/` or ending in
/// `.yaml` / `.yml`; its effect types come from `jobs_dir`), or else the `name` of a job of
/// `jobs_dir` (the whole directory must then be valid).
pub fn find_job(jobs_dir: &Path, name_or_path: &str) -> Result<(EffectCatalog, Job), ConfigErrors> {
    let looks_like_path = name_or_path.contains(std::path::MAIN_SEPARATOR)
        || name_or_path.contains('/')
        || name_or_path.ends_with(".yaml")
        || name_or_path.ends_with(".yml");
    if looks_like_path {
        let effects = load_effects(&jobs_dir.join(EFFECTS_FILE))?;
        let job = load_job(Path::new(name_or_path), &effects)?;
        return Ok((effects, job));
    }
    let config = load_dir(jobs_dir)?;
    job_in(&config, jobs_dir, name_or_path)
}

/// The job named `name` of `config` (loaded from `jobs_dir`), with its effect catalog: as
/// [`find_job`] answers for a name, from a directory already loaded.
pub fn job_in(
    config: &LoadedConfig,
    jobs_dir: &Path,
    name: &str,
) -> Result<(EffectCatalog, Job), ConfigErrors> {
    match config.job(name) {
        Some(job) => Ok((config.effects.clone(), job.clone())),
        None => {
            let names: Vec<&str> = config.jobs.iter().map(|j| j.name.as_str()).collect();
            let available = if names.is_empty() {
                "it has no jobs".to_owned()
            } else {
                format!("available: {}", names.join(", "))
            };
            let message = format!("no job named `{name}` ({available})");
            Err(ConfigError::new(jobs_dir, None, message).into())
        }
    }
}

pub(super) fn parse_effects(text: &str) -> Result<EffectCatalog, serde_norway::Error> {
    with_scalar_budget(|| serde_norway::from_str::<Catalog>(text).map(|c| c.0))
}

/// Reads `kind` first, then the whole file as that kind's raw struct. Runs inside a context.
pub(super) fn parse_job(text: &str, file: &Path) -> Result<Job, serde_norway::Error> {
    with_scalar_budget(|| parse_job_kind(text, file))
}

fn parse_job_kind(text: &str, file: &Path) -> Result<Job, serde_norway::Error> {
    let probe: KindProbe = serde_norway::from_str(text)?;
    Ok(match probe.kind {
        Kind::Replay => serde_norway::from_str::<RawReplay>(text)?.into_job(file),
        Kind::Live => serde_norway::from_str::<RawLive>(text)?.into_job(file),
        Kind::Sweep => serde_norway::from_str::<RawSweep>(text)?.into_job(file),
        Kind::Report => serde_norway::from_str::<RawReport>(text)?.into_job(file),
        Kind::Verify => serde_norway::from_str::<RawVerify>(text)?.into_job(file),
        Kind::Rebuild => serde_norway::from_str::<RawRebuild>(text)?.into_job(file),
    })
}

/// The job files of `dir`: every entry named `*.yaml` / `*.yml` except the effect catalog and
/// hidden ones, sorted. Whatever it is: reading it refuses anything but a regular file (or a
/// symlink to one), naming it, rather than skip it silently.
fn job_files(dir: &Path) -> Result<Vec<PathBuf>, ConfigError> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| ConfigError::new(dir, None, format!("cannot read the jobs directory: {e}")))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let yaml = name.ends_with(".yaml") || name.ends_with(".yml");
            yaml && !name.starts_with('.') && name != EFFECTS_FILE
        })
        .collect();
    files.sort();
    Ok(files)
}

/// Reads a file within the bounds of [`limits`] (size, flow nesting) before any YAML parsing.
fn read(path: &Path) -> Result<String, ConfigError> {
    let read = limits::read_bounded(path).map_err(|e| {
        let message = if e.kind() == std::io::ErrorKind::NotFound {
            "file not found".to_owned()
        } else {
            format!("cannot read: {e}")
        };
        ConfigError::new(path, None, message)
    })?;
    read.map_err(|(position, message)| ConfigError::new(path, position, message))
}

/// A serde_norway error as a [`ConfigError`]: the position moves into the error's own fields, and
/// serde_norway's ` at line L column C` suffix and `path.to.key: ` prefix leave the message.
pub(super) fn yaml_error(file: &Path, e: serde_norway::Error) -> ConfigError {
    let position = e.location().map(|l| (l.line(), l.column()));
    let mut message = e.to_string();
    if let Some((line, column)) = position {
        message = message.replacen(&format!(" at line {line} column {column}"), "", 1);
    }
    let message = unquote_non_keys(&unquote_strings(&message));
    ConfigError::new(file, position, strip_key_path(&message))
}

/// serde's "unknown field `…`" quotes what was written as a key. A key of ours is a short word of
/// letters, digits, `_`, `-` and `.`; anything else (the first line of a file that is not YAML, a
/// sentence, markup) is no typo of a key and is not quoted: the position points at it.
fn unquote_non_keys(message: &str) -> String {
    const START: &str = "unknown field `";
    let Some(at) = message.find(START) else {
        return message.to_owned();
    };
    let after = &message[at + START.len()..];
    let Some(end) = after.find("`, ").or_else(|| after.rfind('`')) else {
        return message.to_owned();
    };
    let key = &after[..end];
    let keylike = !key.is_empty()
        && key.len() <= 64
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if keylike {
        return message.to_owned();
    }
    format!(
        "{}unknown field (not a key: is this a YAML job file?){}",
        &message[..at],
        &after[end + 1..]
    )
}

/// Replaces serde's quotation of a scalar (`invalid type: string "…", expected …`) by `a string`:
/// a value written where a mapping belongs may be a secret (a webhook URL with its token, a
/// header). The position still points at it.
fn unquote_strings(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(at) = rest.find("string \"") {
        out.push_str(&rest[..at]);
        out.push_str("a string");
        let quoted = &rest[at + "string \"".len()..];
        // The quotation is Rust's `{:?}`: a `"` inside it is escaped as `\"`.
        let mut escaped = false;
        let end = quoted.char_indices().find_map(|(i, c)| match c {
            '\\' if !escaped => {
                escaped = true;
                None
            }
            '"' if !escaped => Some(i + 1),
            _ => {
                escaped = false;
                None
            }
        });
        rest = end.map_or("", |end| &quoted[end..]);
    }
    out.push_str(rest);
    out
}

/// Drops serde_norway's `effects.notificar-vendedor: ` prefix (a key path has no space or backtick;
/// every message of ours and of serde has a space before its first `: `).
fn strip_key_path(message: &str) -> String {
    match message.split_once(": ") {
        Some((path, rest)) if !path.is_empty() && !path.contains([' ', '`']) => rest.to_owned(),
        _ => message.to_owned(),
    }
}
