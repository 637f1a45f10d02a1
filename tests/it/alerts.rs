//! The Prometheus alert rules of `deploy/prometheus/` are valid (`promtool check rules`), pass
//! their unit tests (`promtool test rules`: each alert fires on the series it is for, when it
//! should, with the text it should, and stays quiet on the others), and name only metrics the
//! product exports. `promtool` is Debian's `prometheus` package, which `.ci/run` installs: without
//! it this test fails, it does not skip.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn prometheus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("deploy/prometheus")
}

fn promtool(args: &[&str]) -> String {
    let output = Command::new("promtool")
        .args(args)
        .current_dir(prometheus_dir())
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "promtool cannot be run ({e}): install Debian's `prometheus` package \
                 (`apt-get install prometheus`, as .ci/run does)"
            )
        });
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "promtool {args:?} failed:\n{text}");
    text
}

#[test]
fn the_alert_rules_are_valid_and_pass_their_unit_tests() {
    let checked = promtool(&["check", "rules", "alerts.yml"]);
    assert!(checked.contains("SUCCESS"), "{checked}");
    let tested = promtool(&["test", "rules", "alerts_test.yml"]);
    assert!(tested.contains("SUCCESS"), "{tested}");
}

/// The `replay_ledger_…` names of a text.
fn metric_names(text: &str) -> BTreeSet<String> {
    text.match_indices("replay_ledger_")
        .map(|(at, _)| {
            text[at..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect::<String>()
        })
        .collect()
}

fn source_text(dir: &Path, out: &mut String) {
    for entry in std::fs::read_dir(dir).expect("a source folder") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            source_text(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push_str(&std::fs::read_to_string(&path).expect("a source file"));
        }
    }
}

#[test]
fn the_alert_rules_name_only_metrics_the_product_exports() {
    let rules = std::fs::read_to_string(prometheus_dir().join("alerts.yml")).expect("alerts.yml");
    let tests =
        std::fs::read_to_string(prometheus_dir().join("alerts_test.yml")).expect("the tests");
    let mut source = String::new();
    source_text(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut source,
    );
    let exported: BTreeSet<String> = metric_names(&source)
        .into_iter()
        .filter(|name| source.contains(&format!("\"{name}\"")))
        .collect();
    let used = metric_names(&rules);
    assert!(used.len() >= 8, "the rules use {used:?}");
    let tested = metric_names(&tests);
    let unknown: Vec<&String> = used
        .union(&tested)
        .filter(|name| !exported.contains(*name))
        .collect();
    assert!(
        unknown.is_empty(),
        "alert rules or their tests name metrics nothing exports: {unknown:?}"
    );
}
