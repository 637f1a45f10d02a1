//! Partitioned executions: one window split by a hash of `pedido_id`, claimed partition by
//! partition through PostgreSQL by workers in one process and in several processes.

use std::collections::HashSet;
use std::time::Duration;

use replay_ledger_core::config;
use replay_ledger_core::engine::effects::Effects;
use replay_ledger_core::engine::plan::{Asked, Plan};
use replay_ledger_core::services::runner::{self, Ended, RunnerConfig};
use replay_ledger_core::shared::shutdown::Shutdown;
use testkit::sink::Behavior;

use crate::helpers::*;

/// An archive where orders have several versions spread over the window.
fn archive() -> Vec<replay_ledger_core::domain::Event> {
    (1..=600)
        .map(|i| {
            paid(
                i,
                &format!("ped-{}", i % 250),
                1 + i / 250,
                1_000 + 37 * i,
                5.0,
            )
        })
        .collect()
}

async fn run_with_workers(
    db: &TestDb,
    jobs: &std::path::Path,
    workers: usize,
) -> runner::RunReport {
    let (catalog, job) = config::find_job(jobs, "replay-2026-10-14-v2").unwrap();
    let plan = Plan::new(&job, Asked::at(chrono::Utc::now())).expect("a replay job");
    let config = RunnerConfig {
        workers,
        progress: false,
        started_by: "test".into(),
        ..RunnerConfig::default()
    };
    let effects = Effects::from_catalog(&catalog).unwrap();
    runner::run(&db.pool, &db.url, &plan, effects, config, Shutdown::never())
        .await
        .unwrap()
}

fn partitioned(partitions: u32) -> JobSpec {
    JobSpec {
        batch_size: 20,
        extra: format!("partitions: {partitions}\n"),
        ..JobSpec::default()
    }
}

#[tokio::test]
async fn a_partitioned_run_with_several_workers_ends_as_a_single_worker_run() {
    let (single, split) = (TestDb::new().await, TestDb::new().await);
    let events = archive();
    for db in [&single, &split] {
        insert(&db.pool, &events).await;
        already_sent(&db.pool, &events.iter().step_by(4).collect::<Vec<_>>()).await;
    }
    let provider = sink(Behavior::default()).await;
    let plain = jobs_dir(
        &provider.url(),
        &JobSpec {
            batch_size: 20,
            ..JobSpec::default()
        },
    );
    let parts = jobs_dir(&provider.url(), &partitioned(5));
    run_with_workers(&single, plain.path(), 1).await;
    let before = provider.delivery_count();

    let report = run_with_workers(&split, parts.path(), 3).await;

    assert_eq!(report.ended, Ended::Finished);
    assert_eq!(report.summary.events_read, 600);
    assert_eq!(
        commissions(&split.pool).await,
        commissions(&single.pool).await
    );
    assert_eq!(ledger(&split.pool).await, ledger(&single.pool).await);
    assert_eq!(
        provider.delivery_count() - before,
        450,
        "each missing key sent once"
    );
    let parts_done: i64 = sqlx::query_scalar(
        "select count(*) from reprocessamento_execucao where execucao_id like 'replay-2026-10-14-v2:p%' and estado = 'concluida'",
    )
    .fetch_one(&split.pool)
    .await
    .unwrap();
    assert_eq!(parts_done, 5, "status shows every partition");
}

#[tokio::test]
async fn two_processes_running_one_partitioned_job_apply_every_event_once() {
    let db = TestDb::new().await;
    let events = archive();
    insert(&db.pool, &events).await;
    let provider = sink(Behavior {
        delay: Duration::from_millis(2),
        ..Default::default()
    })
    .await;
    let jobs = jobs_dir(&provider.url(), &partitioned(6));

    let (a, b) = tokio::join!(
        run_bin(
            &db.url,
            jobs.path(),
            &["run", "replay-2026-10-14-v2", "--workers", "2"]
        ),
        run_bin(
            &db.url,
            jobs.path(),
            &["run", "replay-2026-10-14-v2", "--workers", "2"]
        ),
    );

    assert_eq!(a.status.code(), Some(0), "{}", stderr(&a));
    assert_eq!(b.status.code(), Some(0), "{}", stderr(&b));
    let deliveries = provider.deliveries();
    assert_eq!(deliveries.len(), 600);
    assert!(deliveries.values().all(|n| *n == 1), "a key was sent twice");
    let applied: i64 = sqlx::query_scalar(
        "select count(*) from efeito_tentativa_historico where resultado = 'sucesso'",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(applied, 600, "every event's effect performed once");
    assert_eq!(commissions(&db.pool).await.len(), 250);
}

#[tokio::test]
async fn a_worker_killed_with_sigkill_leaves_its_partitions_to_the_other_process() {
    let (db, reference) = (TestDb::new().await, TestDb::new().await);
    let events = archive();
    insert(&db.pool, &events).await;
    insert(&reference.pool, &events).await;
    let provider = sink(Behavior {
        dedup: true,
        delay: Duration::from_millis(20),
        ..Default::default()
    })
    .await;
    let jobs = jobs_dir(&provider.url(), &partitioned(4));
    let mut victim = command(&db.url, jobs.path())
        .args(["run", "replay-2026-10-14-v2", "--workers", "3"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = eventually(Duration::from_secs(60), || async {
        provider.request_count() >= 20
    })
    .await;
    assert!(started, "the first process never got going");
    // The survivor starts while the victim holds three of the four partitions.
    let survivor = tokio::spawn({
        let (url, dir) = (db.url.clone(), jobs.path().to_path_buf());
        async move {
            run_bin(
                &url,
                &dir,
                &["run", "replay-2026-10-14-v2", "--workers", "2"],
            )
            .await
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;

    victim.start_kill().unwrap();
    victim.wait().await.unwrap();
    let survivor = survivor.await.unwrap();

    assert_eq!(survivor.status.code(), Some(0), "{}", stderr(&survivor));
    let plain = jobs_dir(&provider.url(), &JobSpec::default());
    run_with_workers(&reference, plain.path(), 1).await;
    assert_eq!(
        commissions(&db.pool).await,
        commissions(&reference.pool).await
    );
    let keys: HashSet<String> = events.iter().map(key).collect();
    let received: HashSet<String> = provider.deliveries().into_keys().collect();
    assert_eq!(received, keys, "every key reached the provider");
    assert!(ledger(&db.pool).await.iter().all(|(_, e)| e == "concluido"));
    let state: String = sqlx::query_scalar(
        "select estado from reprocessamento_execucao where execucao_id = 'replay-2026-10-14-v2'",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(state, "concluida");
}
