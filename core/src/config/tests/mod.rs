//! Unit tests of the config module: pure parsing of strings (no files), checked values, positions.
//! Helpers here; the tests in one file per part (jobs, effects, windows).

mod effects;
mod jobs;
mod window;

use std::path::Path;

use chrono::{DateTime, Utc};

use super::context::{self, Context};
use super::load::{parse_effects, parse_job, yaml_error};
use super::*;

const CATALOG: &str = "\
notify:
  webhook: { url: 'https://example.com/hook', timeout: 10s }
  idempotent: true
sms:
  webhook: { url: 'https://sms.example.com/send', timeout: 30s }
  idempotent: false
";

pub(super) fn catalog() -> EffectCatalog {
    parse_effects(CATALOG).unwrap()
}

/// Parses a job as `t.yaml` against [`CATALOG`]; an error as its Display.
pub(super) fn job(text: &str) -> Result<Job, String> {
    let file = Path::new("t.yaml");
    let ctx = Context::new(Some(&catalog()), false);
    let (job, _) = context::with(ctx, file, || parse_job(text, file));
    job.map_err(|e| yaml_error(file, e).to_string())
}

pub(super) fn effects(text: &str) -> Result<EffectCatalog, String> {
    parse_effects(text).map_err(|e| yaml_error(Path::new("e.yaml"), e).to_string())
}

pub(super) fn replay(job: &Job) -> &ReplayJob {
    match &job.kind {
        JobKind::Replay(r) => r,
        other => panic!("not a replay job: {}", other.label()),
    }
}

pub(super) fn utc(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

#[test]
fn errors_display_file_line_column_and_one_per_line() {
    let positioned = ConfigError::new(Path::new("jobs/x.yaml"), Some((7, 5)), "bad");
    let unpositioned = ConfigError::new(Path::new("jobs/effects.yaml"), None, "not found");
    assert_eq!(positioned.to_string(), "jobs/x.yaml:7:5: bad");
    let all = ConfigErrors(vec![positioned, unpositioned]);
    assert_eq!(
        all.to_string(),
        "jobs/x.yaml:7:5: bad\njobs/effects.yaml: not found"
    );
}
