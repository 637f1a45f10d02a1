//! A provider outage does not flood the review queue (issue 33): a non-idempotent call whose
//! connection was refused sent nothing, so its key is released, not `incerto`; and after
//! `breaker_after` consecutive failures of a type the run stops calling it and exits 1, its
//! checkpoint before the first failure. A rerun once the provider is back is exact.

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
    let jobs = jobs_with(&provider.url(), &spec, "  breaker_after: 5\n");

    let stopped = run_bin_within(&db.url, jobs.path(), &["run", JOB]).await;
    let requests = provider.request_count();
    let uncertain = keys_in_state(&db.pool, "incerto").await;
    let stored = checkpoint(&db.pool, JOB).await;
    provider.set_behavior(testkit::sink::Behavior::default());
    let rerun = run_bin_within(&db.url, jobs.path(), &["run", JOB]).await;

    assert_exits_saying(&stopped, 1, "breaker");
    assert_eq!(requests, 5, "no call after the breaker opened");
    assert_eq!(uncertain.len(), 5, "only the calls made await review");
    // The first call (posicao 1) failed: nothing may be settled past the position before it.
    assert!(
        stored.is_none_or(|c| c < 1),
        "the checkpoint stays before the first failure: {stored:?}"
    );
    assert_success(&rerun, "the rerun once the provider is back");
    let delivered = provider.deliveries();
    assert_eq!(
        delivered.len(),
        events.len() - 5,
        "every other key sent once"
    );
    assert!(delivered.values().all(|n| *n == 1), "a key sent twice");
    let done = keys_in_state(&db.pool, "concluido").await.len();
    assert_eq!(done + 5, events.len(), "every key settled");
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
