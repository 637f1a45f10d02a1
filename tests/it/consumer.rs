//! The live consumer (`consume`) against writers that commit out of order, and beside a replay.

use std::collections::HashSet;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::Signal;
use replay_ledger_core::domain::Event;
use sqlx::{Connection, PgConnection};
use testkit::sink::Behavior;

use crate::helpers::*;

/// A jobs dir with a `kind: live` job beside the replay job of `spec`.
fn live_jobs(sink_url: &str, spec: &JobSpec) -> tempfile::TempDir {
    let dir = jobs_dir(sink_url, spec);
    std::fs::write(
        dir.path().join("live.yaml"),
        "name: live\nkind: live\nbatch_size: 50\neffects:\n  notificar-vendedor: { mode: apply, on_failure: keep }\n",
    )
    .unwrap();
    dir
}

fn spawn_consumer(db_url: &str, jobs: &std::path::Path) -> tokio::process::Child {
    command(db_url, jobs)
        .args(["consume", "--from-start"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn consume")
}

async fn insert_in(conn: &mut PgConnection, event: &Event) {
    sqlx::query("insert into evento_arquivado (posicao, id, tipo, pedido_id, versao, payload, ocorrido_em) values ($1, $2, $3, $4, $5, $6, $7)")
        .bind(event.posicao)
        .bind(&event.id)
        .bind(&event.tipo)
        .bind(&event.pedido_id)
        .bind(event.versao)
        .bind(&event.payload)
        .bind(event.ocorrido_em)
        .execute(conn)
        .await
        .expect("insert an event");
}

async fn concluded(db: &TestDb) -> usize {
    keys_in_state(&db.pool, "concluido").await.len()
}

#[tokio::test]
async fn an_event_committed_after_a_later_position_is_not_skipped() {
    let db = TestDb::new().await;
    let provider = sink(Behavior::default()).await;
    let jobs = live_jobs(
        &provider.url(),
        &JobSpec {
            idempotent: false,
            on_failure: "keep",
            ..JobSpec::default()
        },
    );
    let consumer = spawn_consumer(&db.url, jobs.path());
    let mut early = PgConnection::connect(&db.url).await.unwrap();
    let mut late = PgConnection::connect(&db.url).await.unwrap();

    // Position 1 is taken first, but its transaction commits after position 2's.
    sqlx::query("begin").execute(&mut early).await.unwrap();
    insert_in(&mut early, &paid(1, "ped-1", 1, 1000, 5.0)).await;
    insert_in(&mut late, &paid(2, "ped-2", 1, 2000, 5.0)).await;
    // Position 2 is committed: it is applied while position 1's transaction is still open.
    wait_until("the committed event is applied", || async {
        concluded(&db).await == 1
    })
    .await;
    let while_open = provider.deliveries();
    sqlx::query("commit").execute(&mut early).await.unwrap();
    wait_until("both events are applied", || async {
        concluded(&db).await == 2
    })
    .await;
    send_signal(&consumer, Signal::SIGTERM);
    let stopped = finish(consumer, "consume after SIGTERM").await;

    assert_eq!(
        while_open.into_keys().collect::<Vec<_>>(),
        vec!["evt-2:notificar-vendedor".to_string()],
        "only the committed event is applied while position 1's transaction is open"
    );
    assert_success(&stopped, "consume");
    assert_eq!(provider.deliveries().len(), 2);
    assert_eq!(
        commissions(&db.pool).await,
        vec![("ped-1".into(), 50, 1), ("ped-2".into(), 100, 1)]
    );
}

#[tokio::test]
async fn concurrent_writers_with_out_of_order_commits_are_each_applied_and_sent_exactly_once() {
    let db = TestDb::new().await;
    let provider = sink(Behavior::default()).await;
    let jobs = live_jobs(
        &provider.url(),
        &JobSpec {
            idempotent: false,
            on_failure: "keep",
            ..JobSpec::default()
        },
    );
    let consumer = spawn_consumer(&db.url, jobs.path());
    let next = Arc::new(AtomicI64::new(1));

    // Four writers; each transaction takes its positions, then stays open for a while, so later
    // positions of other writers commit first.
    let writers: Vec<_> = (0..4u64)
        .map(|w| {
            let (url, next) = (db.url.clone(), Arc::clone(&next));
            tokio::spawn(async move {
                let mut conn = PgConnection::connect(&url).await.unwrap();
                for t in 0..25u64 {
                    sqlx::query("begin").execute(&mut conn).await.unwrap();
                    for _ in 0..4 {
                        let p = next.fetch_add(1, Ordering::SeqCst);
                        insert_in(
                            &mut conn,
                            &paid(p, &format!("ped-{}", p % 70), 1 + p / 70, 100 * p, 5.0),
                        )
                        .await;
                    }
                    tokio::time::sleep(Duration::from_millis((w * 7 + t * 13) % 40)).await;
                    sqlx::query("commit").execute(&mut conn).await.unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap();
    }
    let total = (next.load(Ordering::SeqCst) - 1) as usize;
    wait_until("every event is applied", || async {
        concluded(&db).await == total
    })
    .await;

    // A replay of the same window while the consumer still runs changes nothing, sends nothing.
    let before = (
        checksum(&db.pool, "comissao", "pedido_id").await,
        provider.request_count(),
    );
    let replay = run_bin_within(&db.url, jobs.path(), &["run", "replay-2026-10-14-v2"]).await;
    assert_success(&replay, "the replay");
    let after = (
        checksum(&db.pool, "comissao", "pedido_id").await,
        provider.request_count(),
    );
    send_signal(&consumer, Signal::SIGTERM);
    assert_success(&finish(consumer, "consume after SIGTERM").await, "consume");

    assert_eq!(before, after, "the replay changed state or sent something");
    let deliveries = provider.deliveries();
    assert_eq!(deliveries.len(), total, "an event was skipped");
    assert!(deliveries.values().all(|n| *n == 1), "a key was sent twice");
    let expected: HashSet<String> = (1..=total as i64)
        .map(|p| format!("evt-{p}:notificar-vendedor"))
        .collect();
    assert_eq!(deliveries.into_keys().collect::<HashSet<_>>(), expected);
    let holders: Vec<String> =
        sqlx::query_scalar("select distinct execucao_id from efeito_aplicado")
            .fetch_all(&db.pool)
            .await
            .unwrap();
    assert_eq!(holders, vec!["ao-vivo".to_string()]);
}

#[tokio::test]
async fn a_restarted_consumer_resumes_from_its_checkpoint_without_resending() {
    let db = TestDb::new().await;
    let provider = sink(Behavior::default()).await;
    let jobs = live_jobs(
        &provider.url(),
        &JobSpec {
            idempotent: false,
            on_failure: "keep",
            ..JobSpec::default()
        },
    );
    insert(&db.pool, &paid_orders(30)).await;
    let first = spawn_consumer(&db.url, jobs.path());
    wait_until("the first events are applied", || async {
        concluded(&db).await == 30
    })
    .await;
    send_signal(&first, Signal::SIGTERM);
    assert_success(&finish(first, "consume").await, "consume");

    insert(
        &db.pool,
        &(31..=40)
            .map(|i| paid(i, &format!("ped-{i}"), 1, 1000, 5.0))
            .collect::<Vec<_>>(),
    )
    .await;
    let second = spawn_consumer(&db.url, jobs.path());
    wait_until("the new events are applied", || async {
        concluded(&db).await == 40
    })
    .await;
    send_signal(&second, Signal::SIGTERM);
    assert_success(&finish(second, "consume").await, "consume");

    assert_eq!(provider.deliveries().len(), 40);
    assert!(provider.deliveries().values().all(|n| *n == 1));
}

#[tokio::test]
async fn a_consumer_without_a_checkpoint_starts_at_now_and_leaves_the_history_alone() {
    let db = TestDb::new().await;
    let provider = sink(Behavior::default()).await;
    let jobs = live_jobs(&provider.url(), &JobSpec::default());
    insert(&db.pool, &paid_orders(5)).await;
    let consumer = command(&db.url, jobs.path())
        .arg("consume")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn consume");
    wait_until("the consumer stored its starting point", || async {
        checkpoint(&db.pool, "ao-vivo").await.is_some()
    })
    .await;

    let new: Vec<Event> = (6..=8)
        .map(|i| paid(i, &format!("ped-{i}"), 1, 1000, 5.0))
        .collect();
    insert(&db.pool, &new).await;
    wait_until("the new events are applied", || async {
        concluded(&db).await == 3
    })
    .await;
    send_signal(&consumer, Signal::SIGTERM);
    assert_success(&finish(consumer, "consume").await, "consume");

    let sent: HashSet<String> = provider.deliveries().into_keys().collect();
    assert_eq!(sent, new.iter().map(key).collect::<HashSet<_>>());
    assert_eq!(
        commissions(&db.pool).await.len(),
        3,
        "the history was not replayed"
    );
}
