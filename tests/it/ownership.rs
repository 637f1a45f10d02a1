//! One owner at a time, even across a database restart (invariant 17): two processes run one
//! partitioned job, PostgreSQL is restarted with `-m immediate` under them, and a worker of one
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
async fn skewed_orders(pool: &PgPool) -> Vec<replay_ledger::domain::Event> {
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
    let state: Option<String> = sqlx::query_scalar(
        "select estado from reprocessamento_execucao where execucao_id = $1",
    )
    .bind(format!("{JOB}:p0"))
    .fetch_optional(pool)
    .await
    .unwrap_or(None);
    state.as_deref() == Some("concluida")
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
    let pool = replay_ledger::db::connect(&url, "test").await.unwrap();
    replay_ledger::db::migrate(&pool).await.unwrap();
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
    cluster.start_again().await.expect("the cluster starts again");
    let (a, b) = tokio::join!(finish(a, "process a"), finish(b, "process b"));

    assert_success(&a, "process a");
    assert_success(&b, "process b");
    let db = TestDb::attach(&url).await;
    let shown: Vec<Value> = [&a, &b]
        .iter()
        .map(|o| serde_json::from_str(stdout(o).trim()).expect("run --json"))
        .collect();
    let status = status_entry(&db.url, jobs.path(), JOB).await;
    for v in shown.iter().chain([&status]) {
        assert_eq!(v["state"], "concluida", "{v}");
        assert_eq!(v["events_read"], EVENTS, "each event read once: {v}");
    }
    assert_eq!(shown[0]["effects"], status["effects"], "run --json and status --json");
    assert_eq!(shown[1]["effects"], status["effects"], "both processes say the same");

    let states = ledger_states(&db.pool).await;
    let (done, uncertain) = (states.get("concluido"), states.get("incerto"));
    let (done, uncertain) = (done.copied().unwrap_or(0), uncertain.copied().unwrap_or(0));
    assert_eq!(done + uncertain, EVENTS as u64, "every key settled: {states:?}");
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
