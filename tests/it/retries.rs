//! Retries a nightly run can live with: each effect type's `retry` (with defaults
//! that ride out a minute-long outage), `Retry-After` honoured on 429 and 503, no retry where a
//! retry could duplicate an effect, a retry's pause ended by shutdown, and the number of calls
//! retried on every surface (run summary, `run --json`, `status --json`), read from the tallies.

use std::time::Duration;

use nix::sys::signal::Signal;
use serde_json::Value;
use testkit::sink::{Behavior, RetryAfter, Sink};

use crate::helpers::*;

const JOB: &str = "replay-2026-10-14-v2";

/// A jobs directory whose effect type carries `retry` (`None`: the defaults).
fn jobs_with_retry(sink: &Sink, spec: &JobSpec, retry: Option<&str>) -> tempfile::TempDir {
    let jobs = jobs_dir(&sink.url(), spec);
    if let Some(retry) = retry {
        let path = jobs.path().join("effects.yaml");
        let text = std::fs::read_to_string(&path).expect("read effects.yaml");
        std::fs::write(&path, format!("{text}  retry: {retry}\n")).expect("write effects.yaml");
    }
    jobs
}

/// The arrival times of one key's requests, in order.
fn arrivals(sink: &Sink, key: &str) -> Vec<std::time::Instant> {
    sink.received()
        .iter()
        .filter(|r| r.key == key)
        .map(|r| r.at)
        .collect()
}

/// `calls retried: N` of the text summary.
fn retried_in_summary(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.trim().strip_prefix("calls retried: "))
        .and_then(|n| n.trim().parse().ok())
}

#[tokio::test]
async fn an_outage_longer_than_the_old_budget_is_ridden_out_and_every_retry_is_counted() {
    let db = TestDb::new().await;
    let events = paid_orders(6);
    insert(&db.pool, &events).await;
    // Four seconds of 503s: more than the old fixed budget (4 tries within ~1.75 s).
    let provider = sink(Behavior {
        dedup: true,
        fail_for: Duration::from_secs(4),
        fail_with: Some(503),
        ..Behavior::default()
    })
    .await;
    let jobs = jobs_with_retry(&provider, &JobSpec::default(), None);

    let out = run_bin_within(&db.url, jobs.path(), &["run", JOB]).await;

    assert_success(&out, "the run through the outage");
    assert!(ledger(&db.pool).await.iter().all(|(_, e)| e == "concluido"));
    let deliveries = provider.deliveries();
    assert_eq!(deliveries.len(), events.len());
    assert!(deliveries.values().all(|n| *n == 1), "{deliveries:?}");
    let retried = (provider.request_count() - events.len()) as u64;
    assert!(retried >= events.len() as u64, "every key was retried");
    assert_eq!(
        retried_in_summary(&stdout(&out)),
        Some(retried),
        "{}",
        stdout(&out)
    );
    assert_eq!(
        status_entry(&db.url, jobs.path(), JOB).await["calls_retried"],
        retried
    );
    let again = run_bin_within(&db.url, jobs.path(), &["run", JOB, "--json"]).await;
    assert_success(&again, "run --json of the finished execution");
    let json: Value = serde_json::from_str(&stdout(&again)).expect("run --json is JSON");
    assert_eq!(json["calls_retried"], retried, "{json}");
    let gauges = replay_ledger::edges::metrics::DbGauges::read(&db.pool, Duration::from_secs(10))
        .await
        .expect("read the gauges");
    let metrics = replay_ledger::edges::metrics::render(
        &replay_ledger::edges::metrics::Metrics::new(),
        Some(&gauges),
    );
    let series = format!("replay_ledger_execution_calls_retried{{execution=\"{JOB}\"}} {retried}");
    assert!(
        metrics.lines().any(|l| l == series),
        "{series} in:\n{metrics}"
    );
}

/// One key answered `status` with `retry_after` once, then accepted; the type's own backoff is
/// 10 ms, so only the header can explain a longer pause.
async fn gap_after_one_refusal(status: u16, retry_after: RetryAfter) -> Duration {
    let db = TestDb::new().await;
    let events = paid_orders(1);
    insert(&db.pool, &events).await;
    let provider = sink(Behavior {
        dedup: true,
        fail_first: 1,
        fail_with: Some(status),
        retry_after: Some(retry_after),
        ..Behavior::default()
    })
    .await;
    let retry = "{ attempts: 3, backoff: 10ms, max_backoff: 10s }";
    let jobs = jobs_with_retry(&provider, &JobSpec::default(), Some(retry));

    let out = run_bin_within(&db.url, jobs.path(), &["run", JOB]).await;

    assert_success(&out, &format!("the run after a {status}"));
    assert_eq!(
        keys_in_state(&db.pool, "concluido").await,
        [key(&events[0])]
    );
    let at = arrivals(&provider, &key(&events[0]));
    assert_eq!(at.len(), 2, "one refusal, one retry");
    at[1] - at[0]
}

#[tokio::test]
async fn retry_after_in_seconds_is_honoured_on_429_and_503() {
    for status in [429, 503] {
        let gap = gap_after_one_refusal(status, RetryAfter::Seconds(2)).await;
        assert!(
            gap >= Duration::from_secs(2),
            "{status}: retried after {gap:?}"
        );
    }
}

#[tokio::test]
async fn retry_after_as_an_http_date_is_honoured() {
    // The date has whole seconds: three seconds from the answer name an instant at least two on.
    let gap = gap_after_one_refusal(503, RetryAfter::DateIn(Duration::from_secs(3))).await;
    assert!(gap >= Duration::from_secs(2), "retried after {gap:?}");
}

#[tokio::test]
async fn a_retry_after_longer_than_max_backoff_is_not_cut_short_the_key_is_released() {
    let db = TestDb::new().await;
    let events = paid_orders(1);
    insert(&db.pool, &events).await;
    let provider = sink(Behavior {
        dedup: true,
        fail_with: Some(429),
        fail_first: 1,
        retry_after: Some(RetryAfter::Seconds(3600)),
        ..Behavior::default()
    })
    .await;
    let retry = "{ attempts: 5, backoff: 10ms, max_backoff: 2s }";
    let jobs = jobs_with_retry(&provider, &JobSpec::default(), Some(retry));

    let out = run_bin_within(&db.url, jobs.path(), &["run", JOB]).await;

    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("http 429"), "{}", stderr(&out));
    assert_eq!(
        provider.request_count(),
        1,
        "not called again sooner than asked"
    );
    assert!(ledger(&db.pool).await.is_empty(), "the key was released");
}

#[tokio::test]
async fn a_non_idempotent_type_is_never_retried_not_even_on_429_or_503() {
    for status in [429, 503] {
        let db = TestDb::new().await;
        let events = paid_orders(1);
        insert(&db.pool, &events).await;
        let provider = sink(Behavior {
            fail_first: 1,
            fail_with: Some(status),
            retry_after: Some(RetryAfter::Seconds(1)),
            ..Behavior::default()
        })
        .await;
        let spec = JobSpec {
            idempotent: false,
            on_failure: "keep",
            ..JobSpec::default()
        };
        let jobs = jobs_with_retry(&provider, &spec, None);

        let out = run_bin_within(&db.url, jobs.path(), &["run", JOB, "--json"]).await;

        assert_success(&out, "the run");
        assert_eq!(provider.request_count(), 1, "{status}: sent once");
        assert_eq!(keys_in_state(&db.pool, "incerto").await, [key(&events[0])]);
        let json: Value = serde_json::from_str(&stdout(&out)).expect("run --json is JSON");
        assert_eq!(json["calls_retried"], 0, "{json}");
    }
}

#[tokio::test]
async fn check_refuses_retry_on_a_non_idempotent_type() {
    let provider = sink(Behavior::default()).await;
    let spec = JobSpec {
        idempotent: false,
        on_failure: "keep",
        ..JobSpec::default()
    };
    let jobs = jobs_with_retry(&provider, &spec, Some("{ attempts: 3 }"));
    let db = TestDb::new().await;

    let out = run_bin_within(&db.url, jobs.path(), &["check"]).await;

    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let expected = format!("{}:", jobs.path().join("effects.yaml").display());
    assert!(stderr(&out).starts_with(&expected), "{}", stderr(&out));
    assert!(stderr(&out).contains("never retried"), "{}", stderr(&out));
}

#[tokio::test]
async fn shutdown_ends_a_retry_pause_at_once() {
    let db = TestDb::new().await;
    let events = paid_orders(1);
    insert(&db.pool, &events).await;
    let provider = sink(Behavior {
        dedup: true,
        fail_status: Some(503),
        ..Behavior::default()
    })
    .await;
    let retry = "{ attempts: 3, backoff: 10m, max_backoff: 10m }";
    let jobs = jobs_with_retry(&provider, &JobSpec::default(), Some(retry));
    let child = spawn_run_captured(&db.url, jobs.path(), JOB);
    wait_until("the first call failed", || async {
        provider.request_count() == 1
    })
    .await;

    send_signal(&child, Signal::SIGTERM);
    let out = finish(child, "the run stopped in a ten-minute pause").await;

    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert_eq!(provider.request_count(), 1);
    assert!(ledger(&db.pool).await.is_empty(), "the key was released");
    assert_eq!(
        execution_state(&db.pool, JOB).await.as_deref(),
        Some("interrompida")
    );
    let history = replay_ledger_core::tables::ledger::attempt_history(&db.pool, &key(&events[0]))
        .await
        .expect("the attempt history");
    assert_eq!(history.len(), 1, "the failed try is on record: {history:?}");
}
