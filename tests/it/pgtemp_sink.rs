//! The test fixtures themselves: the throwaway PostgreSQL cluster (`pgtemp`) and the loopback
//! webhook (`sink`) behave as the other tests assume.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sqlx::{Connection, PgConnection};
use testkit::pgtemp::TempCluster;
use testkit::sink::{Behavior, Outcome, Sink, SinkConfig};

async fn select_one(url: &str) -> Result<i32, sqlx::Error> {
    let mut conn = PgConnection::connect(url).await?;
    let one: i32 = sqlx::query_scalar("select 1").fetch_one(&mut conn).await?;
    conn.close().await?;
    Ok(one)
}

#[tokio::test]
async fn a_temp_cluster_accepts_connections_on_its_url() {
    let cluster = TempCluster::start()
        .await
        .expect("start a temporary cluster");

    let one = select_one(&cluster.url()).await.expect("select 1");

    assert_eq!(one, 1);
    assert!(cluster.url().starts_with("postgres://postgres@127.0.0.1:"));
}

#[tokio::test]
async fn a_temp_cluster_keeps_its_data_and_port_across_stop_and_start_again() {
    let mut cluster = TempCluster::start()
        .await
        .expect("start a temporary cluster");
    let url = cluster.url();
    let mut conn = PgConnection::connect(&url).await.unwrap();
    sqlx::raw_sql("create table t (v int); insert into t values (42)")
        .execute(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();

    cluster.stop().await;
    let while_stopped = select_one(&url).await;
    cluster.start_again().await.expect("start again");

    assert!(
        while_stopped.is_err(),
        "a stopped cluster must refuse connections"
    );
    assert_eq!(cluster.url(), url);
    let mut conn = PgConnection::connect(&url)
        .await
        .expect("connect after restart");
    let v: i32 = sqlx::query_scalar("select v from t")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(v, 42);
}

#[tokio::test]
async fn dropping_a_temp_cluster_stops_the_server_and_removes_its_directory() {
    let cluster = TempCluster::start()
        .await
        .expect("start a temporary cluster");
    let (dir, url) = (cluster.dir().to_path_buf(), cluster.url());
    assert!(dir.join("data").join("PG_VERSION").exists());

    drop(cluster);

    assert!(!dir.exists(), "{} must be removed", dir.display());
    assert!(select_one(&url).await.is_err(), "the server must be gone");
}

async fn sink(behavior: Behavior) -> Sink {
    Sink::start(SinkConfig {
        behavior,
        ..SinkConfig::default()
    })
    .await
    .expect("start sink")
}

async fn post(client: &reqwest::Client, sink: &Sink, key: &str) -> reqwest::Result<(u16, Value)> {
    let body = json!({"eventoId": "e1", "pedidoId": "p1", "valorCentavos": 50});
    let response = client
        .post(sink.url())
        .header("Idempotency-Key", key)
        .header("Authorization", "Bearer t0ken")
        .json(&body)
        .send()
        .await?;
    let status = response.status().as_u16();
    Ok((status, response.json().await.unwrap_or(Value::Null)))
}

#[tokio::test]
async fn a_deduplicating_sink_counts_a_repeated_key_once_and_replays_its_first_answer() {
    let sink = sink(Behavior {
        dedup: true,
        ..Behavior::default()
    })
    .await;
    let client = reqwest::Client::new();

    let first = post(&client, &sink, "e1:notificar-vendedor").await.unwrap();
    let second = post(&client, &sink, "e1:notificar-vendedor").await.unwrap();

    assert_eq!(first, (200, json!({"id": "1", "recebido": true})));
    assert_eq!(second, first);
    assert_eq!(sink.deliveries()["e1:notificar-vendedor"], 1);
    assert_eq!(sink.request_count(), 2);
    let received = sink.received();
    assert_eq!(received[1].outcome, Outcome::Replayed);
    assert_eq!(received[0].authorization.as_deref(), Some("Bearer t0ken"));
    assert_eq!(received[0].body["valorCentavos"], 50);
}

#[tokio::test]
async fn a_sink_without_dedup_counts_every_accepted_request_as_a_delivery() {
    let sink = sink(Behavior::default()).await;
    let client = reqwest::Client::new();

    let first = post(&client, &sink, "k").await.unwrap();
    let second = post(&client, &sink, "k").await.unwrap();

    assert_eq!((first.0, second.0), (200, 200));
    assert_ne!(
        first.1["id"], second.1["id"],
        "a non-idempotent provider sends twice"
    );
    assert_eq!(sink.deliveries()["k"], 2);
}

#[tokio::test]
async fn fail_first_answers_500_and_then_200() {
    let sink = sink(Behavior {
        fail_first: 1,
        ..Behavior::default()
    })
    .await;
    let client = reqwest::Client::new();

    let first = post(&client, &sink, "k").await.unwrap();
    let second = post(&client, &sink, "k").await.unwrap();

    assert_eq!((first.0, second.0), (500, 200));
    assert_eq!(sink.deliveries()["k"], 1);
    let outcomes: Vec<_> = sink.received().iter().map(|r| r.outcome).collect();
    assert_eq!(outcomes, [Outcome::Failed, Outcome::Delivered]);
}

#[tokio::test]
async fn fail_status_and_fail_keys_deliver_nothing() {
    let fail_keys = HashSet::from(["bad".to_string()]);
    let sink = sink(Behavior {
        fail_keys,
        ..Behavior::default()
    })
    .await;
    let client = reqwest::Client::new();

    let bad = post(&client, &sink, "bad").await.unwrap();
    sink.set_behavior(Behavior {
        fail_status: Some(503),
        ..Behavior::default()
    });
    let unavailable = post(&client, &sink, "good").await.unwrap();

    assert_eq!((bad.0, unavailable.0), (500, 503));
    assert!(sink.deliveries().is_empty());
    assert_eq!(sink.request_count(), 2);
}

#[tokio::test]
async fn accept_then_fail_records_the_delivery_but_answers_500() {
    let sink = sink(Behavior {
        dedup: true,
        accept_then_fail: true,
        ..Behavior::default()
    })
    .await;
    let client = reqwest::Client::new();

    let (status, _) = post(&client, &sink, "k").await.unwrap();
    sink.set_behavior(Behavior {
        dedup: true,
        ..Behavior::default()
    });
    let retry = post(&client, &sink, "k").await.unwrap();

    assert_eq!(status, 500);
    assert_eq!(retry.0, 200, "the idempotent provider confirms the retry");
    assert_eq!(sink.deliveries()["k"], 1);
}

#[tokio::test]
async fn a_delay_longer_than_the_client_timeout_is_cut_by_the_client() {
    let sink = sink(Behavior {
        delay: Duration::from_secs(30),
        ..Behavior::default()
    })
    .await;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_millis(200))
        .build()
        .unwrap();

    let started = Instant::now();
    let err = post(&client, &sink, "k").await.unwrap_err();

    assert!(err.is_timeout(), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(
        sink.deliveries()["k"],
        1,
        "the provider did the work; only the answer hung"
    );
    sink.shutdown().await;
}

#[tokio::test]
async fn a_request_without_an_idempotency_key_is_rejected_and_recorded() {
    let sink = sink(Behavior::default()).await;

    let response = reqwest::Client::new()
        .post(sink.url())
        .json(&json!({}))
        .send()
        .await
        .unwrap();

    assert_eq!(response.status().as_u16(), 400);
    assert_eq!(sink.received()[0].outcome, Outcome::BadRequest);
    assert_eq!(sink.delivery_count(), 0);
}
