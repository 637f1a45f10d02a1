//! One owner at a time, even across a database restart (invariant `one-owner`): two processes run
//! one partitioned job, PostgreSQL is restarted with `-m immediate` under them, and a worker of one
//! process claims a partition whose holder in the other process has not noticed yet that its lock
//! died. Every write of the old holder is fenced by the epoch it took, so the partition's
//! checkpoint, figures and ledger end as if one process had run it.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::Value;
use sqlx::PgPool;
use testkit::pgtemp::TempCluster;
use testkit::sink::{Behavior, Sink};

use crate::helpers::*;

const JOB: &str = "replay-2026-10-14-v2";
const EVENTS: i64 = 1200;

/// How the two processes are set up.
#[derive(Debug, Clone, Copy)]
struct Case {
    /// The provider deduplicates (`release`) or not (`keep`).
    idempotent: bool,
    /// `--workers` of each process.
    workers: &'static str,
}

impl Case {
    fn spec(self) -> JobSpec {
        JobSpec {
            idempotent: self.idempotent,
            on_failure: if self.idempotent { "release" } else { "keep" },
            concurrency: 16,
            batch_size: 50,
            timeout: "5s",
            extra: "partitions: 2\n".into(),
            ..JobSpec::default()
        }
    }

    fn spawn(self, url: &str, jobs: &std::path::Path) -> tokio::process::Child {
        command(url, jobs)
            .args(["run", JOB, "--json", "--workers", self.workers])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn replay-ledger run")
    }
}

/// [`EVENTS`] orders, a quarter of them in partition 0 and the rest in partition 1.
async fn skewed_orders(pool: &PgPool) -> Vec<replay_ledger_core::domain::Event> {
    let mut orders = Vec::new();
    for (partition, n) in [(0, EVENTS / 4), (1, EVENTS - EVENTS / 4)] {
        let ids: Vec<String> = sqlx::query_scalar(
            r#"
            select 'ped-' || i from generate_series(1, 10 * $2::int8) i
            where particao_do_pedido('ped-' || i, 2) = $1 order by i limit $2
            "#,
        )
        .bind(partition)
        .bind(n)
        .fetch_all(pool)
        .await
        .expect("orders of a partition");
        orders.extend(ids);
    }
    orders.sort_by_key(|id| id[4..].parse::<i64>().unwrap());
    orders
        .iter()
        .zip(1..)
        .map(|(id, i)| paid(i, id, 1, 1000 * i, 5.0))
        .collect()
}

/// Whether the small partition is finished.
async fn small_done(pool: &PgPool) -> bool {
    let state: Option<String> =
        sqlx::query_scalar("select estado from reprocessamento_execucao where execucao_id = $1")
            .bind(format!("{JOB}:p0"))
            .fetch_optional(pool)
            .await
            .unwrap_or(None);
    state.as_deref() == Some("concluida")
}

/// An execution's key, state, pass, checkpoint, events tallied and events in its window.
type PartitionRow = (String, String, i32, Option<i64>, Option<i64>, i64);

/// Each partition's state, checkpoint, pass, events tallied and window, for a failure's message.
async fn partitions(pool: &PgPool) -> String {
    let rows: Vec<PartitionRow> = sqlx::query_as(
        r#"
        select e.execucao_id, e.estado, e.passagem, c.ultima_posicao,
               (select sum(valor)::int8 from reprocessamento_contagem t
                where t.execucao_id = e.execucao_id and t.passagem = e.passagem
                  and medida = 'eventos-lidos'),
               e.total_eventos
        from reprocessamento_execucao e left join reprocessamento_checkpoint c using (execucao_id)
        order by 1
        "#,
    )
    .fetch_all(pool)
    .await
    .expect("read the partitions");
    rows.iter().map(|r| format!("{r:?}\n")).collect()
}

/// The ledger's rows by state, for the execution's keys.
async fn ledger_states(pool: &PgPool) -> BTreeMap<String, u64> {
    let rows: Vec<(String, i64)> =
        sqlx::query_as("select estado, count(*) from efeito_aplicado group by estado")
            .fetch_all(pool)
            .await
            .expect("count the ledger");
    rows.into_iter().map(|(s, n)| (s, n as u64)).collect()
}

fn figure(v: &Value, outcome: &str) -> u64 {
    v["effects"][outcome].as_u64().unwrap_or(0)
}

/// Runs the case once and checks every promise of the issue.
async fn across_an_immediate_restart(case: Case) {
    let mut cluster = TempCluster::start().await.expect("a throwaway cluster");
    let url = cluster.url();
    let pool = replay_ledger_core::tables::db::connect(&url, "test")
        .await
        .unwrap();
    replay_ledger_core::tables::db::migrate(&pool)
        .await
        .unwrap();
    let events = match case.workers {
        // One worker each: one holds the small partition, finishes it, and then asks for the
        // other one every round while its holder runs it.
        "1" => skewed_orders(&pool).await,
        _ => paid_orders(EVENTS),
    };
    insert(&pool, &events).await;
    let provider: Sink = sink(Behavior {
        dedup: case.idempotent,
        delay: Duration::from_millis(100),
        ..Behavior::default()
    })
    .await;
    let jobs = jobs_dir(&provider.url(), &case.spec());
    let (a, b) = (case.spawn(&url, jobs.path()), case.spawn(&url, jobs.path()));
    wait_until("both processes are mid-window", || async {
        provider.request_count() >= 150 && (case.workers != "1" || small_done(&pool).await)
    })
    .await;
    pool.close().await;

    cluster.crash().await;
    cluster
        .start_again()
        .await
        .expect("the cluster starts again");
    let (a, b) = tokio::join!(finish(a, "process a"), finish(b, "process b"));

    assert_success(&a, "process a");
    assert_success(&b, "process b");
    let db = TestDb::attach(&url).await;
    let shown: Vec<Value> = [&a, &b]
        .iter()
        .map(|o| serde_json::from_str(stdout(o).trim()).expect("run --json"))
        .collect();
    let status = status_entry(&db.url, jobs.path(), JOB).await;
    let parts = partitions(&db.pool).await;
    for v in shown.iter().chain([&status]) {
        assert_eq!(v["state"], "concluida", "{v}");
        assert_eq!(
            v["events_read"], EVENTS,
            "each event read once: {v}\n{parts}"
        );
    }
    assert_eq!(
        shown[0]["effects"], status["effects"],
        "run --json and status --json"
    );
    assert_eq!(
        shown[1]["effects"], status["effects"],
        "both processes say the same"
    );

    let states = ledger_states(&db.pool).await;
    let (done, uncertain) = (states.get("concluido"), states.get("incerto"));
    let (done, uncertain) = (done.copied().unwrap_or(0), uncertain.copied().unwrap_or(0));
    assert_eq!(
        done + uncertain,
        EVENTS as u64,
        "every key settled: {states:?}"
    );
    assert_eq!(
        figure(&status, "aplicado") + figure(&status, "aplicado-anteriormente"),
        done,
        "effects sent against concluido rows: {status}"
    );
    assert_eq!(figure(&status, "incerto"), uncertain, "incerto: {status}");
    let deliveries = provider.deliveries();
    if case.idempotent {
        assert_eq!(uncertain, 0, "an idempotent key never ends incerto");
        let keys: BTreeSet<String> = events.iter().map(key).collect();
        let received: BTreeSet<String> = deliveries.into_keys().collect();
        assert_eq!(received, keys, "every key reached the provider");
    } else {
        let twice: Vec<_> = deliveries.iter().filter(|(_, n)| **n > 1).collect();
        assert!(twice.is_empty(), "keys sent twice: {twice:?}");
    }

    let reference = TestDb::new().await;
    insert(&reference.pool, &events).await;
    run_job(&reference, jobs.path(), JOB, None, false)
        .await
        .expect("the uninterrupted run");
    assert_eq!(
        commissions(&db.pool).await,
        commissions(&reference.pool).await,
        "comissao as after an uninterrupted run"
    );
}

#[tokio::test]
async fn an_idempotent_partition_taken_over_after_a_restart_is_run_once() {
    for _ in 0..2 {
        across_an_immediate_restart(Case {
            idempotent: true,
            workers: "2",
        })
        .await;
    }
}

#[tokio::test]
async fn a_non_idempotent_partition_taken_over_after_a_restart_is_run_once() {
    for _ in 0..2 {
        across_an_immediate_restart(Case {
            idempotent: false,
            workers: "2",
        })
        .await;
    }
}

#[tokio::test]
async fn a_worker_done_with_its_own_partition_takes_over_another_only_when_its_owner_is_fenced() {
    for idempotent in [true, false] {
        across_an_immediate_restart(Case {
            idempotent,
            workers: "1",
        })
        .await;
    }
}

/// The tallies of `key`'s pass 1, as `status` sums them.
async fn events_tallied(pool: &PgPool, key: &str) -> i64 {
    sqlx::query_scalar(
        "select coalesce(sum(valor), 0)::int8 from reprocessamento_contagem where execucao_id = $1 and medida = 'eventos-lidos'",
    )
    .bind(key)
    .fetch_one(pool)
    .await
    .expect("read the tallies")
}

/// Waits until a session of this database waits for a row lock (taking the epoch waits for the
/// old owner's confirmed write).
async fn someone_waits_for_a_lock(pool: &PgPool) {
    wait_until("the new owner waits for the old owner's open write", || async move {
        let waiting: i64 = sqlx::query_scalar(
            "select count(*) from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'",
        )
        .fetch_one(pool)
        .await
        .expect("read pg_stat_activity");
        waiting > 0
    })
    .await;
}

#[tokio::test]
async fn an_old_owners_writes_after_a_new_owner_took_the_epoch_change_nothing() {
    use replay_ledger_core::shared::summary::Summary;
    use replay_ledger_core::tables::execution::{self, is_fenced, ExecutionLock};
    use replay_ledger_core::tables::ledger::{self, Claim, Reservation};
    use replay_ledger_core::tables::tally::Scope;
    let db = TestDb::new().await;
    let key = "replay-race";
    let scope = Scope::whole(key, 1);
    let batch = |n| Summary {
        events_read: n,
        ..Summary::default()
    };
    let old_lock = ExecutionLock::acquire(&db.url, key, "run").await.unwrap();
    let old = old_lock.owner().clone();
    // A write the old owner confirmed is still open when it loses its lock.
    let mut open = db.pool.begin().await.unwrap();
    execution::advance(&mut open, &old, &scope, 10, &batch(10))
        .await
        .unwrap();
    old_lock.release().await;
    // Its lock gone (as with a server restart), its next write fails before anybody took over.
    let mut orphan = db.pool.begin().await.unwrap();
    let orphaned = execution::advance(&mut orphan, &old, &scope, 20, &batch(10)).await;
    assert!(orphaned.as_ref().is_err_and(is_fenced), "{orphaned:?}");
    drop(orphan);

    let taking = tokio::spawn({
        let url = db.url.clone();
        async move { ExecutionLock::acquire(&url, key, "run").await }
    });
    someone_waits_for_a_lock(&db.pool).await;
    open.commit().await.unwrap();
    let new_lock = taking.await.unwrap().expect("the new owner takes it");

    assert_eq!(new_lock.owner().epoch, old.epoch + 1);
    assert_eq!(
        checkpoint(&db.pool, key).await,
        Some(10),
        "the confirmed write landed first"
    );
    let mut late = db.pool.begin().await.unwrap();
    let moved = execution::advance(&mut late, &old, &scope, 99, &batch(89)).await;
    assert!(moved.as_ref().is_err_and(is_fenced), "{moved:?}");
    drop(late);
    let item = Reservation {
        key: "evt-1:notificar-vendedor",
        event_id: "evt-1",
        effect_type: "notificar-vendedor",
    };
    let claim = Claim::owned(key, old.clone());
    let reserved = ledger::reserve(&db.pool, &claim, &[item], None).await;
    assert!(reserved.as_ref().is_err_and(is_fenced), "{reserved:?}");
    assert_eq!(
        checkpoint(&db.pool, key).await,
        Some(10),
        "the checkpoint stays"
    );
    assert_eq!(events_tallied(&db.pool, key).await, 10, "the figures stay");
    assert!(
        ledger(&db.pool).await.is_empty(),
        "no reservation of the old owner"
    );
}

/// A takeover ends only the lapsed holder's sessions. Two processes of one host whose name is
/// long enough to be cut: the holder (its lease lapsed an hour ago) and a healthy one. Their
/// sessions' application names keep their pids, so ending the holder leaves the other alone (with
/// the pid cut off, every process of that host once looked like the holder).
#[tokio::test]
async fn a_takeover_on_a_host_with_a_long_name_ends_only_the_holders_sessions() {
    use replay_ledger_core::tables::db::application_name_of;
    use sqlx::{ConnectOptions, Connection};
    let db = TestDb::new().await;
    let host = "ip-10-0-12-34.sa-east-1.compute.internal.replay-ledger-workers";
    let session = |pid: u32| {
        let url = db.url.clone();
        async move {
            let options: sqlx::postgres::PgConnectOptions = url.parse().unwrap();
            options
                .application_name(&application_name_of("run", host, pid))
                .connect()
                .await
                .unwrap()
        }
    };
    let mut holder = session(4_194_301).await;
    let mut healthy = session(4_194_302).await;
    let holder_pid: i32 = sqlx::query_scalar("select pg_backend_pid()")
        .fetch_one(&mut holder)
        .await
        .unwrap();
    // The holder holds the execution's lock, as a holder does (only such a session is judged).
    hold_execution_lock(&mut holder, "x").await;
    sqlx::query(
        "insert into reprocessamento_arrendamento (execucao_id, epoca, confirmado_em, confirmado_por) values ('x', 1, now() - interval '1 hour', 'holder')",
    )
    .execute(&db.pool)
    .await
    .unwrap();

    let mut taker = db.pool.acquire().await.unwrap();
    let ended = replay_ledger_core::tables::execution::lease::end_lapsed_holder(
        &mut taker,
        "x",
        holder_pid,
        std::time::Duration::from_secs(15),
    )
    .await
    .unwrap();

    assert_eq!(ended, 1, "the holder's one session");
    let alive: i32 = sqlx::query_scalar("select 1")
        .fetch_one(&mut healthy)
        .await
        .expect("the healthy process's session is alive");
    assert_eq!(alive, 1);
    assert!(
        sqlx::query("select 1").execute(&mut holder).await.is_err(),
        "the holder's session was ended"
    );
    let _ = healthy.close().await;
}

/// Two databases on one server, each with its own replay-ledger and an execution of the same
/// name (staging and production, say): advisory locks are per database, and so is the judging of
/// a holder. Here the holder in this database stopped an hour ago while the other database's
/// holder is alive; a run here takes the execution over, every time, and never names (or judges)
/// the other database's session. Eight names, because which of the two sessions PostgreSQL lists
/// first depends on the lock's hash.
#[tokio::test]
async fn a_takeover_judges_the_holder_in_its_own_database_only() {
    use replay_ledger_core::tables::db::application_name_of;
    use replay_ledger_core::tables::execution::ExecutionLock;
    use sqlx::{ConnectOptions, Connection};
    let db = TestDb::new().await;
    let other = TestDb::unmigrated().await;
    let session = |url: String, host: &'static str| async move {
        let options: sqlx::postgres::PgConnectOptions = url.parse().unwrap();
        options
            .application_name(&application_name_of("run", host, 7))
            .connect()
            .await
            .unwrap()
    };
    for key in (0..8).map(|i| format!("replay-twin-{i}")) {
        let mut elsewhere = session(other.url.clone(), "elsewhere").await;
        hold_execution_lock(&mut elsewhere, &key).await;
        let mut stopped = session(db.url.clone(), "stopped").await;
        hold_execution_lock(&mut stopped, &key).await;
        sqlx::query(
            "insert into reprocessamento_arrendamento (execucao_id, epoca, confirmado_em, confirmado_por) values ($1, 1, now() - interval '1 hour', 'stopped')",
        )
        .bind(&key)
        .execute(&db.pool)
        .await
        .unwrap();

        let taken = ExecutionLock::acquire(&db.url, &key, "run").await;

        let lock = taken.unwrap_or_else(|e| panic!("{key}: the stopped holder's lock: {e}"));
        lock.release().await;
        sqlx::query("select 1")
            .execute(&mut elsewhere)
            .await
            .expect("the other database's holder is left alone");
        let _ = elsewhere.close().await;
    }
}
