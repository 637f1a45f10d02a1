//! The config module against real files: every example in `jobs/` loads, and each kind of mistake
//! is reported with its file, line and column and a message that says what to fix.

use std::path::{Path, PathBuf};
use std::time::Duration;

use replay_ledger_core::config::{
    find_job, load_dir, EffectMode, JobKind, OnFailure, WindowSpec, EFFECTS_FILE,
};
use tempfile::TempDir;

/// A catalog with one idempotent type (timeout 10s) and one that is not (timeout 30s).
const EFFECTS: &str = "\
notify:
  webhook: { url: 'http://127.0.0.1:9/notify', timeout: 10s }
  idempotent: true
sms:
  webhook:
    url: 'http://127.0.0.1:9/sms'
    timeout: 30s
  idempotent: false
";

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("jobs")
}

fn set_example_env() {
    std::env::set_var("SELLER_WEBHOOK_URL", "http://127.0.0.1:9/seller");
    std::env::set_var("SELLER_WEBHOOK_TOKEN", "test-token");
}

/// A jobs directory holding `effects.yaml` (unless `effects` is `None`) and `files`.
fn jobs_dir(effects: Option<&str>, files: &[(&str, &str)]) -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    if let Some(effects) = effects {
        std::fs::write(dir.path().join(EFFECTS_FILE), effects).unwrap();
    }
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    dir
}

/// The errors of loading `dir`, one per line.
fn errors(dir: &TempDir) -> String {
    load_dir(dir.path()).unwrap_err().to_string()
}

/// `<dir>/<file>:<line>:<col>: ` as a message starts.
fn at(dir: &TempDir, file: &str, line: usize, col: usize) -> String {
    format!("{}:{line}:{col}: ", dir.path().join(file).display())
}

#[test]
fn every_example_job_file_loads() {
    set_example_env();
    let config = load_dir(&examples_dir()).unwrap_or_else(|e| panic!("{e}"));
    let mut names: Vec<&str> = config.jobs.iter().map(|j| j.name.as_str()).collect();
    names.sort();
    let expected = [
        "finance-daily",
        "live",
        "nightly-reconcile",
        "rebuild-comissao",
        "replay-2026-10-14-v2",
        "sweeper",
        "verify-daily",
    ];
    assert_eq!(names, expected);
    let notify = config
        .effects
        .get("notificar-vendedor")
        .expect("the example effect type");
    assert!(notify.idempotent);
    assert_eq!(
        (notify.concurrency, notify.rate_per_second),
        (16, Some(200.0))
    );
    assert_eq!(notify.webhook.timeout, Duration::from_secs(10));
}

#[test]
fn the_example_replay_releases_failed_notifications_over_its_fixed_day() {
    set_example_env();
    let (_, job) = find_job(&examples_dir(), "replay-2026-10-14-v2").unwrap();
    let JobKind::Replay(replay) = &job.kind else {
        panic!("not a replay")
    };
    assert!(matches!(replay.window, WindowSpec::Fixed { .. }));
    assert!(!replay.simulate);
    let policy = replay.effects["notificar-vendedor"];
    assert_eq!(
        (policy.mode, policy.on_failure),
        (EffectMode::Apply, OnFailure::Release)
    );
}

#[test]
fn the_example_nightly_job_replays_the_previous_day_in_sao_paulo() {
    set_example_env();
    let (_, job) = find_job(&examples_dir(), "nightly-reconcile").unwrap();
    assert_eq!(job.schedule.as_deref(), Some("0 30 2 * * *"));
    assert_eq!(job.timezone, chrono_tz::America::Sao_Paulo);
    assert!(matches!(&job.kind, JobKind::Replay(r) if r.window == WindowSpec::PreviousDay));
}

#[test]
fn a_job_given_by_path_takes_its_effect_types_from_the_jobs_dir() {
    set_example_env();
    let path = examples_dir().join("live.yaml");
    let (effects, job) = find_job(&examples_dir(), path.to_str().unwrap()).unwrap();
    assert!(effects.get("notificar-vendedor").is_some());
    assert!(matches!(&job.kind, JobKind::Live(l) if l.batch_size == 500));
    assert_eq!(job.file, path);
}

#[test]
fn an_unknown_job_name_is_an_error_listing_the_available_ones() {
    let dir = jobs_dir(
        Some(EFFECTS),
        &[("a.yaml", "name: alpha\nwindow: { previous: day }\n")],
    );
    let err = find_job(dir.path(), "beta").unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "{}: no job named `beta` (available: alpha)",
            dir.path().display()
        )
    );
}

#[test]
fn a_yaml_syntax_error_is_reported_with_its_line_and_column() {
    let dir = jobs_dir(
        Some(EFFECTS),
        &[(
            "x.yaml",
            "name: x\nwindow: { previous: day\nbatch_size: 10\n",
        )],
    );
    let expected = at(&dir, "x.yaml", 3, 11) + "did not find expected ',' or '}'";
    assert!(errors(&dir).starts_with(&expected), "{}", errors(&dir));
}

#[test]
fn an_unknown_key_is_an_error_with_its_line_and_column() {
    let job = "name: x\nwindow: { previous: day }\neffects:\n  notify:\n    mode: apply\n    on_falure: release\n";
    let dir = jobs_dir(Some(EFFECTS), &[("x.yaml", job)]);
    let expected =
        at(&dir, "x.yaml", 6, 5) + "unknown field `on_falure`, expected `mode` or `on_failure`";
    assert_eq!(errors(&dir), expected);
}

#[test]
fn a_missing_field_is_an_error_naming_the_field() {
    let dir = jobs_dir(
        Some(EFFECTS),
        &[("x.yaml", "# no name\nkind: sweep\nstale_after: 5m\n")],
    );
    assert_eq!(
        errors(&dir),
        at(&dir, "x.yaml", 2, 1) + "missing field `name`"
    );
}

#[test]
fn a_bad_duration_is_an_error_with_its_line_and_column() {
    let dir = jobs_dir(
        Some(EFFECTS),
        &[("s.yaml", "name: s\nkind: sweep\nstale_after: 5 minutos\n")],
    );
    let expected = at(&dir, "s.yaml", 3, 14) + "invalid duration `5 minutos`";
    assert!(errors(&dir).starts_with(&expected), "{}", errors(&dir));
}

#[test]
fn a_bad_timezone_is_an_error_with_its_line_and_column() {
    let job = "name: x\ntimezone: America/Sao_Pablo\nwindow: { previous: day }\n";
    let dir = jobs_dir(Some(EFFECTS), &[("x.yaml", job)]);
    let expected = at(&dir, "x.yaml", 2, 11) + "unknown timezone `America/Sao_Pablo`";
    assert!(errors(&dir).starts_with(&expected), "{}", errors(&dir));
}

#[test]
fn a_cron_without_seconds_is_an_error_with_its_line_and_column() {
    let job = "name: x\nschedule: \"30 2 * * *\"\nwindow: { previous: day }\n";
    let dir = jobs_dir(Some(EFFECTS), &[("x.yaml", job)]);
    let expected = at(&dir, "x.yaml", 2, 11) + "invalid schedule `30 2 * * *`";
    assert!(errors(&dir).starts_with(&expected), "{}", errors(&dir));
}

#[test]
fn an_unset_variable_is_an_error_naming_the_variable() {
    let effects = EFFECTS.replace("'http://127.0.0.1:9/sms'", "${CONFIG_IT_UNSET_URL_7}");
    let dir = jobs_dir(Some(&effects), &[]);
    let expected =
        at(&dir, "effects.yaml", 6, 10) + "environment variable `CONFIG_IT_UNSET_URL_7` is not set";
    assert!(errors(&dir).starts_with(&expected), "{}", errors(&dir));
}

#[test]
fn a_variable_is_interpolated_inside_its_value_only() {
    std::env::set_var(
        "CONFIG_IT_SMS_URL_8",
        "http://127.0.0.1:9/sms?a=1#\n  idempotent: true",
    );
    let effects = EFFECTS.replace("'http://127.0.0.1:9/sms'", "${CONFIG_IT_SMS_URL_8}");
    let dir = jobs_dir(Some(&effects), &[]);
    let config = load_dir(dir.path()).unwrap();
    assert!(!config.effects.get("sms").unwrap().idempotent);
}

#[test]
fn release_on_a_non_idempotent_type_is_refused_with_its_line_and_column() {
    let job = "name: x\nwindow: { previous: day }\neffects:\n  sms: { mode: apply, on_failure: release }\n";
    let dir = jobs_dir(Some(EFFECTS), &[("x.yaml", job)]);
    let err = errors(&dir);
    assert!(
        err.starts_with(&(at(&dir, "x.yaml", 4, 8) + "`on_failure: release` is refused for `sms`")),
        "{err}"
    );
    assert!(err.contains("could duplicate a message"), "{err}");
}

#[test]
fn an_effect_type_missing_from_effects_yaml_is_an_error() {
    let job = "name: x\nwindow: { previous: day }\neffects:\n  notificar-vendedor: {}\n";
    let dir = jobs_dir(Some(EFFECTS), &[("x.yaml", job)]);
    let expected = at(&dir, "x.yaml", 4, 3)
        + "unknown effect type `notificar-vendedor`: effects.yaml defines `notify`, `sms`";
    assert_eq!(errors(&dir), expected);
}

#[test]
fn stale_after_not_above_every_webhook_timeout_is_refused() {
    let dir = jobs_dir(
        Some(EFFECTS),
        &[("s.yaml", "name: s\nkind: sweep\nstale_after: 20s\n")],
    );
    let err = errors(&dir);
    assert!(
        err.starts_with(&(at(&dir, "s.yaml", 3, 14) + "stale_after (20s) must be greater")),
        "{err}"
    );
    assert!(err.contains("`sms` has timeout 30s"), "{err}");
}

#[test]
fn a_reversed_window_is_refused_with_its_line_and_column() {
    let job =
        "name: x\nwindow:\n  from: 2026-10-15T00:00:00-03:00\n  to: 2026-10-14T00:00:00-03:00\n";
    let dir = jobs_dir(Some(EFFECTS), &[("x.yaml", job)]);
    let expected = at(&dir, "x.yaml", 3, 3) + "window is empty or reversed";
    assert!(errors(&dir).starts_with(&expected), "{}", errors(&dir));
}

#[test]
fn a_key_of_another_kind_is_an_unknown_key() {
    let job = "name: s\nkind: sweep\nstale_after: 5m\nwindow: { previous: day }\n";
    let dir = jobs_dir(Some(EFFECTS), &[("s.yaml", job)]);
    let expected = at(&dir, "s.yaml", 4, 1) + "unknown field `window`, expected one of";
    assert!(errors(&dir).starts_with(&expected), "{}", errors(&dir));
}

#[test]
fn a_missing_effects_file_is_an_error() {
    let dir = jobs_dir(None, &[]);
    let path = dir.path().join(EFFECTS_FILE);
    assert!(errors(&dir).starts_with(&format!("{}: not found", path.display())));
}

#[test]
fn two_jobs_with_the_same_name_are_refused() {
    let job = "name: same\nwindow: { previous: day }\n";
    let dir = jobs_dir(Some(EFFECTS), &[("a.yaml", job), ("b.yml", job)]);
    let first = dir.path().join("a.yaml");
    let expected = at(&dir, "b.yml", 1, 7)
        + &format!("job name `same` is already used by {}", first.display());
    assert_eq!(errors(&dir), expected);
}

#[test]
fn every_error_of_a_directory_is_reported_one_per_line() {
    let files = [
        (
            "a.yaml",
            "name: a\nwindow: { previous: day }\nbatch_size: 0\n",
        ),
        ("b.yaml", "name: b\nkind: report\nto: []\n"),
        ("ok.yaml", "name: ok\nkind: sweep\nstale_after: 1m\n"),
    ];
    let dir = jobs_dir(Some(EFFECTS), &files);
    let err = errors(&dir);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert!(
        lines[0].starts_with(&(at(&dir, "a.yaml", 3, 13) + "batch_size must be from 1 to 100000"))
    );
    assert!(lines[1].starts_with(&(at(&dir, "b.yaml", 3, 5) + "`to` is empty")));
}

#[test]
fn a_broken_effects_file_does_not_hide_the_errors_of_the_jobs() {
    let effects = "notify:\n  webhook: { url: 'http://h/' }\n";
    let job = "name: x\nwindow: { previous: day }\neffects: { notify: {} }\ntimezone: Nowhere\n";
    let dir = jobs_dir(Some(effects), &[("x.yaml", job)]);
    let err = errors(&dir);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert_eq!(
        lines[0],
        at(&dir, "effects.yaml", 2, 3) + "missing field `idempotent`"
    );
    assert!(lines[1].starts_with(&(at(&dir, "x.yaml", 4, 11) + "unknown timezone `Nowhere`")));
}

#[test]
fn a_job_file_starting_with_a_utf8_byte_order_mark_loads() {
    let job = "\u{feff}name: with-bom\nwindow: { previous: day }\neffects: { notify: { mode: apply, on_failure: release } }\n";
    let dir = jobs_dir(Some(EFFECTS), &[("bom.yaml", job)]);

    let config = load_dir(dir.path()).unwrap_or_else(|e| panic!("{e}"));

    assert_eq!(config.jobs[0].name, "with-bom");
}

#[test]
fn a_file_that_is_not_yaml_is_refused_without_quoting_its_first_line_as_a_key() {
    let notes = "Meeting notes: bring the hunter2 token\n";
    let dir = jobs_dir(Some(EFFECTS), &[("notes.yaml", notes)]);

    let err = errors(&dir);

    assert!(err.starts_with(&at(&dir, "notes.yaml", 1, 1)), "{err}");
    assert!(err.contains("not a key"), "{err}");
    assert!(!err.contains("Meeting notes"), "{err}");
    let typo = jobs_dir(Some(EFFECTS), &[("t.yaml", "name: t\non_falure: x\n")]);
    assert!(errors(&typo).contains("unknown field `on_falure`"));
}

#[test]
fn a_rebuild_job_is_accepted_and_a_key_it_does_not_take_is_an_error_at_its_line() {
    let ok = jobs_dir(
        Some(EFFECTS),
        &[(
            "r.yaml",
            "name: r\nkind: rebuild\nschedule: \"0 0 3 * * *\"\nchunk: 500\n",
        )],
    );
    let config = load_dir(ok.path()).unwrap_or_else(|e| panic!("{e}"));
    assert!(matches!(
        config.jobs[0].kind,
        replay_ledger_core::config::JobKind::Rebuild(replay_ledger_core::config::RebuildJob {
            chunk: Some(500)
        })
    ));

    let typo = jobs_dir(
        Some(EFFECTS),
        &[("r.yaml", "name: r\nkind: rebuild\nwindow: {}\n")],
    );
    assert!(
        errors(&typo).starts_with(&at(&typo, "r.yaml", 3, 1)),
        "{}",
        errors(&typo)
    );
}
