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

#[tokio::test]
async fn run_json_prints_every_key_of_the_contract_with_the_runs_figures() {
    let provider = sink(dedup()).await;
    let (db, jobs) = day(10, &provider).await;
    let mut invalid = paid(11, "ped-11", 1, 0, 5.0);
    invalid.payload = serde_json::json!({"valorCentavos": "12,50", "percentual": 5});
    let mut cancelled = paid(12, "ped-1", 2, 0, 5.0);
    cancelled.tipo = "pedido.cancelado".into();
    insert(&db.pool, &[invalid, cancelled]).await;

    let run = run_json(&db, &jobs, &[]).await;

    let keys: BTreeSet<&str> = run
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let expected: BTreeSet<&str> = [
        // The interface contract's keys.
        "execution",
        "mode",
        "state",
        "events_read",
        "events_skipped",
        "events_rejected",
        "events_upcast",
        "orders_changed",
        "total_before_cents",
        "total_after_cents",
        "effects",
        // And the rest of the summary and of the execution's row.
        "orders_in_diff",
        "calls_retried",
        "state_outcomes",
        "progress_percent",
        "key",
        "job",
        "window_from",
        "window_to",
        "first",
        "last",
        "total_events",
        "pass",
        "started_by",
        "started_at",
        "finished_at",
        "error",
        "summary",
        "definition",
        "checkpoint",
        // Who asked from the console for the run to stop, and when (null unless asked).
        "interrupt_asked_by",
        "interrupt_asked_at",
    ]
    .into();
    assert_eq!(keys, expected, "{run}");
    let rejected: i64 =
        sqlx::query_scalar("select count(*) from evento_rejeitado where execucao_id = $1")
            .bind(JOB)
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!(rejected, 1);
    assert_eq!(
        (
            &run["execution"],
            &run["mode"],
            &run["state"],
            &run["events_read"],
            &run["events_skipped"],
            &run["events_rejected"],
        ),
        (
            &Value::from(JOB),
            &Value::from("real"),
            &Value::from("concluida"),
            &Value::from(12),
            &Value::from(1),
            &Value::from(rejected),
        ),
        "{run}"
    );
    // 5 % of 1000 × i cents for i in 1..=10, which the bug had divided by 10.
    assert_eq!(
        (
            &run["orders_changed"],
            &run["total_before_cents"],
            &run["total_after_cents"]
        ),
        (&Value::from(10), &Value::from(275), &Value::from(2750)),
        "{run}"
    );
    assert_eq!(run["effects"]["aplicado"], 10, "{run}");
    assert_eq!(provider.deliveries().len(), 10);
}
