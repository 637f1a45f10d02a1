//! Faults: PostgreSQL restarted under a running `run` and under `consume` (a throwaway cluster of
//! the test's own, never the shared server), and a provider that never answers.

use std::time::Duration;

use nix::sys::signal::Signal;
use replay_ledger_core::services::runner::{Ended, RunError};
use replay_ledger_core::shared::summary::EffectOutcome;
use sqlx::{Connection, PgPool};
use testkit::pgtemp::TempCluster;
use testkit::sink::Behavior;

use crate::helpers::*;

/// A throwaway cluster with the schema, and a pool on it.
async fn own_cluster() -> (TempCluster, PgPool) {
    let cluster = TempCluster::start()
        .await
        .expect("a throwaway cluster from the local binaries");
    let pool = replay_ledger_core::tables::db::connect(&cluster.url(), "test")
        .await
        .unwrap();
    replay_ledger_core::tables::db::migrate(&pool)
        .await
        .unwrap();
    (cluster, pool)
}

/// The lines of a log that say the database was lost, when every one of them names the server
/// (`127.0.0.1:<port>`) and a cause; `None` when one does not, or there is none.
fn losses_naming_server_and_cause(log: &str, port: u16) -> Option<Vec<&str>> {
    let server = format!("database=127.0.0.1:{port}/");
    let losses: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("lost the database"))
        .collect();
    let named = |l: &&str| {
        l.contains(&server)
            && l.split_once("cause=")
                .is_some_and(|(_, cause)| cause.starts_with(|c: char| !c.is_whitespace()))
    };
    (!losses.is_empty() && losses.iter().all(named)).then_some(losses)
}

/// Stops the cluster for a moment, then starts it again on the same data and port.
async fn restart(cluster: &mut TempCluster) {
    cluster.stop().await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    cluster
        .start_again()
        .await
        .expect("the cluster starts again");
}

#[tokio::test]
async fn a_run_carries_on_after_postgresql_restarts_and_ends_like_an_undisturbed_run() {
    let (mut cluster, pool) = own_cluster().await;
    let run = MidWindow::start(&cluster, &pool, 2_000).await;

    restart(&mut cluster).await;
    let out = finish(run.child, "the run across a restart").await;

    assert_success(&out, "the run across a restart");
    assert_ends_like_an_undisturbed_run(
        &cluster,
        &run.reference,
        run.jobs.path(),
        &run.provider,
        2_000,
    )
    .await;
}

/// A run of `n` events under way against a cluster of the test's own, with a reference database
/// holding the same archive for the undisturbed run.
struct MidWindow {
    reference: TestDb,
    provider: testkit::sink::Sink,
    jobs: tempfile::TempDir,
    child: tokio::process::Child,
}

impl MidWindow {
    /// Archives `n` orders on `pool` (the cluster's) and on a reference, starts `run` with its
    /// output captured, and returns once it is mid-window.
    async fn start(cluster: &TempCluster, pool: &PgPool, n: i64) -> MidWindow {
        let reference = TestDb::new().await;
        let events = paid_orders(n);
        insert(pool, &events).await;
        insert(&reference.pool, &events).await;
        let provider = sink(Behavior {
            dedup: true,
            delay: Duration::from_millis(2),
            ..Default::default()
        })
        .await;
        let spec = JobSpec {
            batch_size: 50,
            ..JobSpec::default()
        };
        let jobs = jobs_dir(&provider.url(), &spec);
        let child = spawn_run_captured(&cluster.url(), jobs.path(), "replay-2026-10-14-v2");
        wait_until("the run is mid-window", || async {
            provider.delivery_count() >= 300
        })
        .await;
        MidWindow {
            reference,
            provider,
            jobs,
            child,
        }
    }
}

/// The cluster's `comissao` and ledger are those of an undisturbed run of the job on `reference`,
/// every key `concluido`, and every one of `events` keys reached the provider.
async fn assert_ends_like_an_undisturbed_run(
    cluster: &TempCluster,
    reference: &TestDb,
    jobs: &std::path::Path,
    provider: &testkit::sink::Sink,
    events: usize,
) {
    run_job(reference, jobs, "replay-2026-10-14-v2", None, false)
        .await
        .unwrap();
    let pool = replay_ledger_core::tables::db::connect(&cluster.url(), "test")
        .await
        .unwrap();
    assert_eq!(commissions(&pool).await, commissions(&reference.pool).await);
    assert_eq!(ledger(&pool).await, ledger(&reference.pool).await);
    assert!(ledger(&pool).await.iter().all(|(_, e)| e == "concluido"));
    assert_eq!(
        provider.deliveries().len(),
        events,
        "every key reached the provider"
    );
}

#[tokio::test]
async fn the_live_consumer_carries_on_after_postgresql_restarts() {
    let (mut cluster, pool) = own_cluster().await;
    let provider = sink(Behavior {
        dedup: true,
        ..Default::default()
    })
    .await;
    let jobs = jobs_dir(&provider.url(), &JobSpec::default());
    std::fs::write(
        jobs.path().join("live.yaml"),
        "name: live\nkind: live\nbatch_size: 20\neffects:\n  notificar-vendedor: { mode: apply, on_failure: release }\n",
    )
    .unwrap();
    insert(&pool, &paid_orders(100)).await;
    let consumer = command(&cluster.url(), jobs.path())
        .args(["consume", "--from-start"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("the first events are applied", || async {
        provider.delivery_count() == 100
    })
    .await;

    restart(&mut cluster).await;
    let pool2 = replay_ledger_core::tables::db::connect(&cluster.url(), "test")
        .await
        .unwrap();
    let more: Vec<_> = (101..=200)
        .map(|i| paid(i, &format!("ped-{i}"), 1, 1000 * i, 5.0))
        .collect();
    insert(&pool2, &more).await;
    wait_until(
        "the events archived after the restart are applied",
        || async { provider.delivery_count() == 200 },
    )
    .await;
    send_signal(&consumer, Signal::SIGTERM);
    let out = finish(consumer, "consume").await;

    assert_success(&out, "consume across a restart");
    let log = stderr(&out);
    assert!(
        losses_naming_server_and_cause(&log, cluster.port()).is_some(),
        "the consumer says it lost the database, naming the server and the cause:\n{log}"
    );
    assert_eq!(commissions(&pool2).await.len(), 200);
    assert!(ledger(&pool2).await.iter().all(|(_, e)| e == "concluido"));
    drop(pool);
}

#[tokio::test]
async fn a_provider_that_never_answers_is_cut_by_its_timeout_and_its_key_ends_incerto_under_keep() {
    let db = TestDb::new().await;
    let events = paid_orders(3);
    insert(&db.pool, &events).await;
    let hanging = key(&events[1]);
    // A provider whose answers come long after the timeout: the calls may have gone out.
    let provider = sink(Behavior {
        delay: Duration::from_secs(30),
        ..Default::default()
    })
    .await;
    let jobs = jobs_dir(
        &provider.url(),
        &JobSpec {
            idempotent: false,
            on_failure: "keep",
            timeout: "300ms",
            ..JobSpec::default()
        },
    );

    let report = run_job(&db, jobs.path(), "replay-2026-10-14-v2", None, false)
        .await
        .unwrap();

    assert_eq!(report.ended, Ended::Finished);
    assert_eq!(
        report.summary.effects.get(&EffectOutcome::Uncertain),
        Some(&3)
    );
    assert!(ledger(&db.pool).await.iter().all(|(_, e)| e == "incerto"));
    let history = replay_ledger_core::tables::ledger::attempt_history(&db.pool, &hanging)
        .await
        .unwrap();
    assert_eq!(history[0].3.as_deref(), Some("timeout"));
    assert_eq!(
        provider.request_count(),
        3,
        "each key was tried once, never resent"
    );
}

#[tokio::test]
async fn a_provider_that_never_answers_under_release_stops_the_run_after_its_retries() {
    let db = TestDb::new().await;
    insert(&db.pool, &paid_orders(2)).await;
    let provider = sink(Behavior {
        dedup: true,
        delay: Duration::from_secs(30),
        ..Default::default()
    })
    .await;
    let jobs = jobs_dir(
        &provider.url(),
        &JobSpec {
            timeout: "200ms",
            ..JobSpec::default()
        },
    );

    let err = run_job(&db, jobs.path(), "replay-2026-10-14-v2", None, false)
        .await
        .unwrap_err();

    let RunError::EffectFailed(failure) = err else {
        panic!("expected an effect failure, got {err}")
    };
    assert_eq!(failure.class, "timeout");
    assert!(
        ledger(&db.pool).await.is_empty(),
        "the keys were released for a later run"
    );
}

/// A run whose reserve statements wait on another session's uncommitted keys while PostgreSQL
/// stops for longer than the reserve step's retries: it must recover as a restart would (take
/// the lock again, settle what it left reserved, renew its claim, resume from the checkpoint),
/// under a provider that deduplicates and under one that cannot alike.
async fn an_outage_that_outlasts_the_reserve_retries(idempotent: bool) {
    let (mut cluster, pool) = own_cluster().await;
    let reference = TestDb::new().await;
    let events = paid_orders(40);
    insert(&pool, &events).await;
    insert(&reference.pool, &events).await;
    let provider = sink(Behavior {
        dedup: idempotent,
        ..Default::default()
    })
    .await;
    let spec = JobSpec {
        idempotent,
        on_failure: if idempotent { "release" } else { "keep" },
        concurrency: 4,
        batch_size: 10,
        ..JobSpec::default()
    };
    let jobs = jobs_dir(&provider.url(), &spec);
    // Another session inserts every key and keeps its transaction open: the run's reservations
    // wait on those rows until the outage ends that session (its inserts roll back).
    let mut blocker = sqlx::PgConnection::connect(&cluster.url()).await.unwrap();
    sqlx::query("begin").execute(&mut blocker).await.unwrap();
    sqlx::query(
        r#"
        insert into efeito_aplicado (chave, evento_id, tipo_efeito, estado, execucao_id)
        select id || ':notificar-vendedor', id, 'notificar-vendedor', 'reservado', 'outra-sessao'
        from evento_arquivado
        "#,
    )
    .execute(&mut blocker)
    .await
    .unwrap();
    let child = spawn_run_captured(&cluster.url(), jobs.path(), &spec.name);
    wait_until(
        "the run's reservations wait on the other session",
        || async {
            let waiting: i64 = sqlx::query_scalar(
                r#"
            select count(*) from pg_stat_activity
            where wait_event_type = 'Lock' and application_name like 'replay-ledger %'
              and application_name not like 'replay-ledger test %'
            "#,
            )
            .fetch_one(&pool)
            .await
            .unwrap();
            waiting > 0
        },
    )
    .await;

    cluster.stop().await;
    // Real time, not a paused clock (`tokio::time::pause`): what waits out the outage is the
    // child `replay-ledger run` and the PostgreSQL server, processes whose clocks this test's
    // runtime cannot pause or advance.
    tokio::time::sleep(Duration::from_secs(65)).await;
    cluster
        .start_again()
        .await
        .expect("the cluster starts again");
    drop(blocker);
    let out = finish(child, "the run across a long outage").await;

    assert_success(&out, "the run across a long outage");
    let err = stderr(&out);
    assert!(
        err.contains("lost the database; recovering"),
        "the run says it recovers:\n{err}"
    );
    assert!(
        losses_naming_server_and_cause(&err, cluster.port()).is_some(),
        "every loss names the server and the cause:\n{err}"
    );
    assert!(
        !err.contains("unexpected or invalid data"),
        "an outage is not called invalid data:\n{err}"
    );
    let deliveries = provider.deliveries();
    run_job(&reference, jobs.path(), &spec.name, None, false)
        .await
        .unwrap();
    let pool = replay_ledger_core::tables::db::connect(&cluster.url(), "test")
        .await
        .unwrap();
    assert_eq!(commissions(&pool).await, commissions(&reference.pool).await);
    assert_eq!(keys_in_state(&pool, "concluido").await.len(), 40);
    assert_eq!(deliveries.len(), 40, "every key reached the provider");
    assert!(
        deliveries.values().all(|&n| n == 1),
        "no key was sent twice: {deliveries:?}"
    );
}

#[tokio::test]
async fn a_run_of_a_non_idempotent_type_recovers_from_an_outage_that_outlasts_its_reserve_retries()
{
    an_outage_that_outlasts_the_reserve_retries(false).await;
}

#[tokio::test]
async fn a_run_of_an_idempotent_type_recovers_from_an_outage_that_outlasts_its_reserve_retries() {
    an_outage_that_outlasts_the_reserve_retries(true).await;
}

#[tokio::test]
async fn a_run_that_cannot_reach_its_database_names_the_server_and_the_cause() {
    let (mut cluster, pool) = own_cluster().await;
    insert(&pool, &paid_orders(10)).await;
    let db = TestDb::attach(&cluster.url()).await;
    let provider = sink(Behavior::default()).await;
    let spec = JobSpec::default();
    let jobs = jobs_dir(&provider.url(), &spec);
    cluster.stop().await;

    let err = run_job(&db, jobs.path(), &spec.name, None, false)
        .await
        .expect_err("no run without its database");

    let message = err.to_string();
    let server = format!("lost the database at 127.0.0.1:{}/postgres", cluster.port());
    assert!(message.contains(&server), "{message}");
    assert!(message.contains("connection refused"), "{message}");
    assert!(!message.contains("unexpected or invalid data"), "{message}");
}

/// Whether a write of a few hundred kilobytes commits on the server at `url`.
async fn can_write(url: &str) -> bool {
    let Ok(mut conn) = sqlx::PgConnection::connect(url).await else {
        return false;
    };
    let wrote = sqlx::query(
        "create table if not exists espaco (x text); insert into espaco select repeat(md5(i::text), 100) from generate_series(1, 100) i",
    )
    .execute(&mut conn)
    .await;
    wrote.is_ok()
}

/// Disk full is an outage, not a failure: the cluster (data and WAL) on a small tmpfs
/// that is filled while a run is mid-window, so the server refuses writes (SQLSTATE 53100) and
/// panics on its next WAL segment; the space is freed and the server started again if it gave
/// up. The same process recovers and ends like an undisturbed run, having said why it waited.
#[tokio::test]
async fn a_run_waits_out_a_full_disk_and_ends_like_an_undisturbed_run() {
    let (uid, gid) = TempCluster::server_user().expect("the server's user");
    let disk = testkit::disk::SmallDisk::mount(96, uid, gid).expect("a small disk");
    let mut cluster = TempCluster::start_in(disk.path())
        .await
        .expect("a throwaway cluster on the small disk");
    let pool = replay_ledger_core::tables::db::connect(&cluster.url(), "test")
        .await
        .unwrap();
    replay_ledger_core::tables::db::migrate(&pool)
        .await
        .unwrap();
    let run = MidWindow::start(&cluster, &pool, 3_000).await;
    pool.close().await;

    disk.fill().expect("fill the disk");
    let url = cluster.url();
    wait_until("the server refuses writes for want of space", || {
        let url = url.clone();
        async move { !can_write(&url).await }
    })
    .await;
    // Longer than a statement's own first retries. Real time, not a paused clock: the retries
    // are the child `replay-ledger run`'s, a process whose clock this test cannot pause.
    tokio::time::sleep(Duration::from_secs(10)).await;
    disk.free().expect("free the disk");
    if cluster.has_exited() {
        cluster
            .start_again()
            .await
            .expect("the cluster starts again");
    }
    let out = finish(run.child, "the run across a full disk").await;

    assert_success(&out, "the run across a full disk");
    let said = stderr(&out);
    assert!(
        said.contains("No space left on device"),
        "the run said why it waited:\n{said}"
    );
    assert_ends_like_an_undisturbed_run(
        &cluster,
        &run.reference,
        run.jobs.path(),
        &run.provider,
        3_000,
    )
    .await;
}

/// Two processes of two workers each share a partitioned job while PostgreSQL is restarted
/// immediately four times, each back within about a second: a restart costs each process its
/// sessions (and its locks), never its lease, and whichever process is last concludes the
/// execution — both exit 0 and the data is that of an undisturbed run.
#[tokio::test]
async fn two_processes_ride_out_four_immediate_restarts_and_conclude_the_execution() {
    let (mut cluster, pool) = own_cluster().await;
    let reference = TestDb::new().await;
    // Two partitions at 2 calls of 20 ms each: about 20 s of work, across every restart.
    let n = 4_000;
    let events = paid_orders(n);
    insert(&pool, &events).await;
    insert(&reference.pool, &events).await;
    let provider = sink(Behavior {
        dedup: true,
        delay: Duration::from_millis(20),
        ..Default::default()
    })
    .await;
    let spec = JobSpec {
        batch_size: 50,
        concurrency: 2,
        extra: "partitions: 2\n".into(),
        ..JobSpec::default()
    };
    let jobs = jobs_dir(&provider.url(), &spec);
    let start = |_| {
        command(&cluster.url(), jobs.path())
            .args(["run", &spec.name, "--workers", "2"])
            // A lease of 3 s: a restart of up to 1.5 s must still cost none.
            .env("REPLAY_LEDGER_LEASE", "3s")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn replay-ledger run")
    };
    let children: Vec<_> = (0..2).map(start).collect();
    let t0 = std::time::Instant::now();
    for (at, pause) in [(4, 500), (8, 1_500), (12, 800), (16, 1_200)] {
        tokio::time::sleep(Duration::from_secs(at).saturating_sub(t0.elapsed())).await;
        cluster.crash().await;
        tokio::time::sleep(Duration::from_millis(pause)).await;
        cluster
            .start_again()
            .await
            .expect("the cluster starts again");
    }
    let mut outs = Vec::new();
    for child in children {
        outs.push(finish(child, "a run across four restarts").await);
    }

    for out in &outs {
        assert_success(out, "a run across four restarts");
        assert!(
            !stderr(out).contains("could not reach the database (its ownership lease lapsed)"),
            "a restart lapses no lease:\n{}",
            stderr(out)
        );
    }
    let pool = replay_ledger_core::tables::db::connect(&cluster.url(), "test")
        .await
        .unwrap();
    assert_eq!(
        execution_state(&pool, &spec.name).await.as_deref(),
        Some("concluida")
    );
    // The undisturbed run, against a provider of its own that answers at once.
    let undisturbed = sink(Behavior {
        dedup: true,
        ..Default::default()
    })
    .await;
    let reference_jobs = jobs_dir(
        &undisturbed.url(),
        &JobSpec {
            concurrency: 16,
            ..spec.clone()
        },
    );
    run_job(&reference, reference_jobs.path(), &spec.name, None, false)
        .await
        .unwrap();
    assert_eq!(commissions(&pool).await, commissions(&reference.pool).await);
    let states: Vec<(String, i64)> = sqlx::query_as(
        "select estado, count(*) from efeito_aplicado group by estado order by estado",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let reserved: Vec<(String, Option<String>, i64, i64, i64)> = sqlx::query_as(
        r#"
        select e.execucao_id, e.reserva_id::text, count(*), min(a.posicao), max(a.posicao)
        from efeito_aplicado e join evento_arquivado a on a.id = e.evento_id
        where e.estado = 'reservado' group by 1, 2
        "#,
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let checkpoints: Vec<(String, i64)> =
        sqlx::query_as("select execucao_id, ultima_posicao from reprocessamento_checkpoint")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(
        states,
        [("concluido".to_string(), n)],
        "every key concluido (reserved: {reserved:?}; checkpoints: {checkpoints:?}); the processes said:\n{}",
        outs.iter().map(stderr).collect::<Vec<_>>().join("\n----\n")
    );
    assert_eq!(
        provider.deliveries().len(),
        n as usize,
        "every key reached the provider"
    );
}
