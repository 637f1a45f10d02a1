//! A provider outage does not flood the review queue, and a blip does not cost the run: a
//! non-idempotent call whose connection was refused sent nothing, so its key is released, not
//! `incerto`; after `breaker_after` consecutive failures of a type its breaker opens and its
//! calls pause (one probe after each cooldown); a probe's success resumes them, and only an
//! outage longer than `breaker_budget` stops the run (exit 1, its checkpoint before the first
//! key not sent). A rerun once the provider is back is exact.

use crate::helpers::*;

const JOB: &str = "replay-2026-10-14-v2";

/// A non-idempotent type, one call at a time: the order of failures is exact.
fn non_idempotent() -> JobSpec {
    JobSpec {
        idempotent: false,
        on_failure: "keep",
        concurrency: 1,
        batch_size: 20,
        ..JobSpec::default()
    }
}

/// A jobs directory whose effect type has `extra` lines (e.g. `breaker_after: 5`).
fn jobs_with(url: &str, spec: &JobSpec, extra: &str) -> tempfile::TempDir {
    let dir = jobs_dir(url, spec);
    let path = dir.path().join("effects.yaml");
    let mut text = std::fs::read_to_string(&path).expect("effects.yaml");
    text.push_str(extra);
    std::fs::write(&path, text).expect("write effects.yaml");
    dir
}

/// A loopback port where nothing listens: every connection to it is refused.
async fn refusing_port() -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap()
}

async fn sink_at(addr: std::net::SocketAddr) -> testkit::sink::Sink {
    testkit::sink::Sink::start(testkit::sink::SinkConfig {
        addr,
        ..Default::default()
    })
    .await
    .expect("start the sink on the refusing port")
}

#[tokio::test]
async fn refused_calls_of_a_non_idempotent_type_are_released_and_sent_once_when_the_provider_is_back(
) {
    let db = TestDb::new().await;
    let events = paid_orders(60);
    insert(&db.pool, &events).await;
    let addr = refusing_port().await;
    let spec = non_idempotent();
    let jobs = jobs_with(&format!("http://{addr}/"), &spec, "");

    let refused = run_bin_within(&db.url, jobs.path(), &["run", JOB]).await;
    let uncertain = keys_in_state(&db.pool, "incerto").await;
    let reserved = keys_in_state(&db.pool, "reservado").await;
    let provider = sink_at(addr).await;
    let rerun = run_bin_within(&db.url, jobs.path(), &["run", JOB]).await;

    assert_exits_saying(&refused, 1, "connect");
    assert!(
        uncertain.is_empty(),
        "refused keys went to review: {uncertain:?}"
    );
    assert!(
        reserved.is_empty(),
        "refused keys left reserved: {reserved:?}"
    );
    assert_success(&rerun, "the rerun once the provider is back");
    let deliveries = provider.deliveries();
    assert_eq!(
        deliveries.len(),
        events.len(),
        "every key reached the provider"
    );
    assert!(deliveries.values().all(|n| *n == 1), "a key sent twice");
    assert_eq!(
        keys_in_state(&db.pool, "concluido").await.len(),
        events.len()
    );
}

#[tokio::test]
async fn after_breaker_after_consecutive_failures_the_run_stops_with_exit_1_and_a_rerun_is_exact() {
    let db = TestDb::new().await;
    let events = paid_orders(60);
    insert(&db.pool, &events).await;
    let provider = sink(testkit::sink::Behavior {
        fail_status: Some(503),
        ..Default::default()
    })
    .await;
    let spec = non_idempotent();
    let jobs = jobs_with(
        &provider.url(),
        &spec,
        "  breaker_after: 5\n  breaker_budget: 2s\n",
    );

    let stopped = run_bin_within(&db.url, jobs.path(), &["run", JOB]).await;
    let requests = provider.request_count();
    let uncertain = keys_in_state(&db.pool, "incerto").await;
    let stored = checkpoint(&db.pool, JOB).await;
    provider.set_behavior(testkit::sink::Behavior::default());
    let rerun = run_bin_within(&db.url, jobs.path(), &["run", JOB]).await;

    assert_exits_saying(&stopped, 1, "breaker");
    // While open: one probe per cooldown (a quarter of the 2 s budget), nothing else.
    assert!(
        (6..=5 + 5).contains(&requests),
        "5 failures, then only probes until the budget: {requests} calls"
    );
    assert_eq!(
        uncertain.len(),
        requests,
        "only the calls made (failures and probes) await review"
    );
    assert!(
        stderr(&stopped).matches("breaker").count() < 10,
        "the breaker is said in a few lines, not one per waiting key:\n{}",
        stderr(&stopped)
    );
    // The first call (posicao 1) failed: nothing may be settled past the position before it.
    assert!(
        stored.is_none_or(|c| c < 1),
        "the checkpoint stays before the first failure: {stored:?}"
    );
    assert_success(&rerun, "the rerun once the provider is back");
    let delivered = provider.deliveries();
    assert_eq!(
        delivered.len(),
        events.len() - requests,
        "every other key sent once"
    );
    assert!(delivered.values().all(|n| *n == 1), "a key sent twice");
    let done = keys_in_state(&db.pool, "concluido").await.len();
    assert_eq!(done + requests, events.len(), "every key settled");
}

/// The job's retry policy of the issue: 10 tries, 100 ms doubling to 1 s, 64 calls at once.
fn riding_out(url: &str, extra: &str) -> tempfile::TempDir {
    let spec = JobSpec {
        concurrency: 64,
        batch_size: 500,
        ..JobSpec::default()
    };
    jobs_with(
        url,
        &spec,
        &format!("  retry: {{ attempts: 10, backoff: 100ms, max_backoff: 1s }}\n{extra}"),
    )
}

fn breaker_gauge(text: &str) -> Option<String> {
    text.lines()
        .find(|l| l.starts_with("replay_ledger_breaker_open{effect=\"notificar-vendedor\"}"))
        .map(|l| l.rsplit(' ').next().unwrap_or_default().to_string())
}

/// A 5 s outage, with 64 calls failing at once: the breaker opens within a second, the calls
/// pause, a probe after the outage closes it, and the run finishes with every key `concluido`
/// (the breaker once stopped this run at 2.7 s). `/metrics` shows the breaker open, then closed.
#[tokio::test]
async fn a_five_second_outage_pauses_the_type_and_the_run_finishes_with_every_key_sent() {
    let db = TestDb::new().await;
    let events = paid_orders(2_000);
    insert(&db.pool, &events).await;
    let provider = sink(testkit::sink::Behavior {
        dedup: true,
        fail_for: std::time::Duration::from_secs(5),
        fail_with: Some(503),
        ..Default::default()
    })
    .await;
    let jobs = riding_out(&provider.url(), "");
    let run = {
        let (db, jobs) = (&db, jobs.path());
        async move {
            let fast_db = replay_ledger_core::tables::db::Backoff {
                attempts: 10,
                base: std::time::Duration::from_millis(100),
                max: std::time::Duration::from_secs(1),
            };
            run_job_retrying(db, jobs, JOB, None, false, fast_db).await
        }
    };
    let watch = async {
        let mut seen_open = false;
        for _ in 0..200 {
            let text = replay_ledger::edges::metrics::render(
                &replay_ledger::edges::metrics::Metrics::default(),
                None,
            );
            if breaker_gauge(&text).as_deref() == Some("1") {
                seen_open = true;
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
        seen_open
    };
    let (report, seen_open) = tokio::join!(run, watch);

    let report = report.expect("the run rides the outage out");
    assert_eq!(
        report.ended,
        replay_ledger_core::services::runner::Ended::Finished
    );
    assert!(
        seen_open,
        "/metrics showed the breaker open during the outage"
    );
    let after = replay_ledger::edges::metrics::render(
        &replay_ledger::edges::metrics::Metrics::default(),
        None,
    );
    assert_eq!(breaker_gauge(&after).as_deref(), Some("0"), "closed again");
    assert_eq!(
        keys_in_state(&db.pool, "concluido").await.len(),
        events.len(),
        "every key sent"
    );
    assert!(keys_in_state(&db.pool, "incerto").await.is_empty());
}

/// An outage longer than `breaker_budget`: the run stops at the budget (exit 1, `breaker`), its
/// checkpoint before the first key not sent, nothing `incerto` (the type deduplicates: every
/// failure is released), and the next run, the provider back, sends every key.
#[tokio::test]
async fn an_outage_past_the_budget_stops_the_run_with_the_checkpoint_kept_and_nothing_incerto() {
    let db = TestDb::new().await;
    let events = paid_orders(300);
    insert(&db.pool, &events).await;
    let provider = sink(testkit::sink::Behavior {
        dedup: true,
        fail_status: Some(503),
        ..Default::default()
    })
    .await;
    // The retry policy pauses 6.5 s at most: the budget may not be shorter.
    let jobs = riding_out(&provider.url(), "  breaker_budget: 7s\n");

    let stopped = run_bin_within(&db.url, jobs.path(), &["run", JOB]).await;
    let stored = checkpoint(&db.pool, JOB).await;
    let uncertain = keys_in_state(&db.pool, "incerto").await;
    provider.set_behavior(dedup());
    let rerun = run_bin_within(&db.url, jobs.path(), &["run", JOB]).await;

    assert_exits_saying(&stopped, 1, "breaker");
    assert!(
        stderr(&stopped).contains("breaker stayed open past its budget"),
        "{}",
        stderr(&stopped)
    );
    assert!(stored.is_none_or(|c| c < 1), "checkpoint kept: {stored:?}");
    assert!(uncertain.is_empty(), "nothing incerto: {uncertain:?}");
    assert_success(&rerun, "the next run");
    assert_eq!(
        keys_in_state(&db.pool, "concluido").await.len(),
        events.len()
    );
}

#[tokio::test]
async fn check_refuses_a_breaker_budget_shorter_than_the_retry_policys_pauses() {
    let provider = sink(dedup()).await;
    let jobs = riding_out(&provider.url(), "  breaker_budget: 2s\n");

    let out = run_bin_within("postgres://unused@127.0.0.1:1/x", jobs.path(), &["check"]).await;

    assert_exits_saying(&out, 2, "shorter than its retry policy's own pauses");
}

#[tokio::test]
async fn check_refuses_a_breaker_after_of_zero_naming_the_file() {
    let jobs = jobs_with(
        "http://127.0.0.1:9/",
        &non_idempotent(),
        "  breaker_after: 0\n",
    );
    let out = run_bin_within(&server_url(), jobs.path(), &["check"]).await;
    assert_exits_saying(&out, 2, "breaker_after must be from 1");
}
