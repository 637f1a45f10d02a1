//! `run JOB --json`, through the real binary: the summary's keys as the interface contract lists
//! them, and state outcomes that say what happened — a simulation never says `gravado` (it writes
//! no `comissao` row), and a run that finds every row already corrected says `inalterado`.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::helpers::*;

const JOB: &str = "replay-2026-10-14-v2";

/// A day of `n` orders with the bug's commissions, and a jobs dir whose provider is `provider`.
async fn day(n: i64, provider: &testkit::sink::Sink) -> (TestDb, tempfile::TempDir) {
    let db = seeded_db(&paid_orders(n), &[]).await;
    let jobs = jobs_dir(&provider.url(), &JobSpec::default());
    (db, jobs)
}

/// `run` with `args` and `--json`: its one JSON object.
async fn run_json(db: &TestDb, jobs: &tempfile::TempDir, args: &[&str]) -> Value {
    let mut all = vec!["run", JOB, "--json"];
    all.extend_from_slice(args);
    let out = run_bin_within(&db.url, jobs.path(), &all).await;
    assert_success(&out, &all.join(" "));
    serde_json::from_str(stdout(&out).trim()).expect("run --json prints one JSON object")
}

/// The words of `run --json`'s `state_outcomes`.
fn state_words(run: &Value) -> BTreeSet<String> {
    run["state_outcomes"]
        .as_object()
        .unwrap_or_else(|| panic!("state_outcomes in {run}"))
        .keys()
        .cloned()
        .collect()
}

#[tokio::test]
async fn a_simulation_counts_the_orders_it_would_change_as_seria_gravado_never_gravado() {
    let provider = sink(dedup()).await;
    let (db, jobs) = day(12, &provider).await;

    let run = run_json(&db, &jobs, &["--simulate"]).await;

    assert_eq!(run["mode"], "simulacao", "{run}");
    assert_eq!(
        state_words(&run),
        BTreeSet::from(["seria-gravado".to_string()]),
        "{run}"
    );
    assert_eq!(run["state_outcomes"]["seria-gravado"], 12, "{run}");
    assert_eq!(run["orders_changed"], 12, "{run}");
}

#[tokio::test]
async fn a_second_real_run_of_the_same_window_changes_no_order_and_says_inalterado() {
    let provider = sink(dedup()).await;
    let (db, jobs) = day(12, &provider).await;
    let first = run_json(&db, &jobs, &[]).await;
    assert_eq!(first["state_outcomes"]["gravado"], 12, "{first}");

    let again = run_json(&db, &jobs, &["--restart"]).await;

    assert_eq!(again["orders_changed"], 0, "{again}");
    assert_eq!(
        state_words(&again),
        BTreeSet::from(["inalterado".to_string()]),
        "{again}"
    );
    assert_eq!(again["state_outcomes"]["inalterado"], 12, "{again}");
}
