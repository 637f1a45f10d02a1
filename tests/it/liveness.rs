//! Liveness of ownership when a worker host is cut off by the network: every session
//! the product opens asks the server to give up a silent peer in about 30 s.

use crate::helpers::*;

/// The four give-up settings of the session `pool` hands out, as `pg_settings` shows them.
async fn give_up_settings(conn: &mut sqlx::PgConnection) -> Vec<(String, String)> {
    sqlx::query_as(
        r#"
        select name, setting from pg_settings
        where name in ('tcp_keepalives_idle', 'tcp_keepalives_interval',
                       'tcp_keepalives_count', 'tcp_user_timeout')
        order by name
        "#,
    )
    .fetch_all(conn)
    .await
    .expect("read pg_settings")
}

fn expected() -> Vec<(String, String)> {
    [
        ("tcp_keepalives_count", "3"),
        ("tcp_keepalives_idle", "10"),
        ("tcp_keepalives_interval", "5"),
        ("tcp_user_timeout", "30000"),
    ]
    .iter()
    .map(|(n, v)| (n.to_string(), v.to_string()))
    .collect()
}

#[tokio::test]
async fn every_session_the_product_opens_asks_the_server_to_give_up_a_silent_peer_in_30_s() {
    let db = TestDb::new().await;
    let mut pooled = db.pool.acquire().await.expect("a pooled session");
    let options = replay_ledger_core::tables::db::options(&db.url, "run").expect("options");
    let mut lock_session = sqlx::Connection::connect_with(&options)
        .await
        .expect("a lock's session");

    assert_eq!(give_up_settings(&mut pooled).await, expected(), "pool");
    assert_eq!(
        give_up_settings(&mut lock_session).await,
        expected(),
        "a lock's own session"
    );
}

const JOB: &str = "replay-2026-10-14-v2";
const EVENTS: i64 = 3000;

/// A partitioned, non-idempotent job: every duplicate would be a second message to a seller.
fn cut_spec() -> JobSpec {
    JobSpec {
        idempotent: false,
        on_failure: "keep",
        concurrency: 8,
        batch_size: 100,
        timeout: "5s",
        extra: "partitions: 4\n".into(),
        ..JobSpec::default()
    }
}

fn spawn_workers(url: &str, jobs: &std::path::Path) -> tokio::process::Child {
    command(url, jobs)
        .args(["run", JOB, "--json", "--workers", "2"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn replay-ledger run")
}

/// `url` with its port replaced by the proxy's.
pub(crate) fn through(url: &str, proxy: &testkit::proxy::Proxy) -> String {
    let mut url = url::Url::parse(url).expect("the test database's URL");
    url.set_port(Some(proxy.addr().port())).expect("a port");
    url.to_string()
}

/// What the cut process could change: the ledger, `comissao`, the checkpoints, the executions'
/// states and figures, the ownership epochs.
pub(crate) async fn everything(pool: &sqlx::PgPool) -> Vec<String> {
    let mut all = Vec::new();
    for (table, key) in [
        ("efeito_aplicado", "chave"),
        ("comissao", "pedido_id"),
        ("reprocessamento_checkpoint", "execucao_id"),
        ("reprocessamento_execucao", "execucao_id"),
        ("reprocessamento_contagem", "execucao_id, passagem, medida"),
        ("reprocessamento_dono", "execucao_id"),
    ] {
        all.push(checksum(pool, table, key).await.unwrap_or_default());
    }
    all
}

async fn every_partition_finished(pool: &sqlx::PgPool) -> bool {
    let done: i64 = sqlx::query_scalar(
        "select count(*) from reprocessamento_execucao where execucao_id like $1 and estado = 'concluida'",
    )
    .bind(format!("{JOB}:p%"))
    .fetch_one(pool)
    .await
    .expect("read the partitions");
    done == 4
}

#[tokio::test]
async fn a_worker_cut_off_from_the_database_gives_its_partitions_up_and_changes_nothing_when_back()
{
    let db = TestDb::new().await;
    let events = paid_orders(EVENTS);
    insert(&db.pool, &events).await;
    let provider = sink(testkit::sink::Behavior {
        delay: std::time::Duration::from_millis(10),
        ..testkit::sink::Behavior::default()
    })
    .await;
    let jobs = jobs_dir(&provider.url(), &cut_spec());
    let parsed = url::Url::parse(&db.url).expect("the test database's URL");
    let server =
        tokio::net::lookup_host((parsed.host_str().unwrap(), parsed.port().unwrap_or(5432)))
            .await
            .expect("the server's address")
            .next()
            .expect("an address");
    let proxy = testkit::proxy::Proxy::start(server).await.expect("a proxy");
    let cut_one = spawn_workers(&through(&db.url, &proxy), jobs.path());
    let direct = spawn_workers(&db.url, jobs.path());
    wait_until("both processes are mid-window", || async {
        provider.request_count() >= (EVENTS / 4) as usize
    })
    .await;

    proxy.cut();
    let cut_at = std::time::Instant::now();
    let taken_over = eventually(std::time::Duration::from_secs(90), || {
        every_partition_finished(&db.pool)
    })
    .await;
    let direct = finish(direct, "the process connected directly").await;
    let before = everything(&db.pool).await;
    eprintln!(
        "every partition finished {:?} after the cut",
        cut_at.elapsed()
    );
    proxy.resume();
    let resumed_at = std::time::Instant::now();
    let cut_one = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        cut_one.wait_with_output(),
    )
    .await
    .expect("the cut process exits within 60 s of the network's return")
    .expect("wait for the cut process");

    eprintln!(
        "the cut process exited {:?} after the network's return",
        resumed_at.elapsed()
    );
    assert!(
        taken_over,
        "its partitions were not finished by the other process within 90 s"
    );
    assert_success(&direct, "the process connected directly");
    let said = stderr(&cut_one);
    assert_eq!(cut_one.status.code(), Some(1), "stderr:\n{said}");
    let lines: Vec<&str> = said.lines().filter(|l| l.contains("taken over")).collect();
    assert_eq!(lines.len(), 1, "one line says it was taken over:\n{said}");
    assert_eq!(
        everything(&db.pool).await,
        before,
        "the cut process changed nothing when back"
    );
    let shown: serde_json::Value =
        serde_json::from_str(stdout(&direct).trim()).expect("run --json");
    assert_eq!(shown["state"], "concluida", "{shown}");
    assert_eq!(
        shown["events_read"], EVENTS,
        "each event read once: {shown}"
    );
    let twice: Vec<_> = provider
        .deliveries()
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .collect();
    assert!(twice.is_empty(), "keys sent twice: {twice:?}");
    assert_settled_as_an_uninterrupted_run(&db, &events, jobs.path()).await;
}

/// Every key `concluido` or `incerto` (the cut process's calls in flight), and `comissao` as an
/// uninterrupted run leaves it.
async fn assert_settled_as_an_uninterrupted_run(
    db: &TestDb,
    events: &[replay_ledger_core::domain::Event],
    jobs: &std::path::Path,
) {
    let done = keys_in_state(&db.pool, "concluido").await.len();
    let uncertain = keys_in_state(&db.pool, "incerto").await.len();
    assert_eq!(done + uncertain, events.len(), "every key settled");
    assert!(
        uncertain <= 2 * 8,
        "at most the cut workers' slots in flight: {uncertain}"
    );
    let reference = TestDb::new().await;
    insert(&reference.pool, events).await;
    run_job(&reference, jobs, JOB, None, false)
        .await
        .expect("the uninterrupted run");
    assert_eq!(
        commissions(&db.pool).await,
        commissions(&reference.pool).await,
        "comissao as after an uninterrupted run"
    );
}

/// Ends the session holding a `run`'s execution lock, as a server-side kill would.
async fn end_lock_session(pool: &sqlx::PgPool) -> i64 {
    sqlx::query_scalar(
        r#"
        select count(*) filter (where pg_terminate_backend(pid)) from pg_stat_activity
        where datname = current_database() and application_name like 'replay-ledger run %'
        "#,
    )
    .fetch_one(pool)
    .await
    .expect("end the lock's session")
}

#[tokio::test]
async fn a_run_that_loses_its_lock_says_so_once_per_batch_and_not_as_a_lost_database() {
    let db = TestDb::new().await;
    insert(&db.pool, &paid_orders(1500)).await;
    let provider = sink(testkit::sink::Behavior {
        delay: std::time::Duration::from_millis(5),
        ..testkit::sink::Behavior::default()
    })
    .await;
    let spec = JobSpec {
        idempotent: false,
        on_failure: "keep",
        concurrency: 8,
        batch_size: 300,
        ..JobSpec::default()
    };
    let jobs = jobs_dir(&provider.url(), &spec);
    let run = spawn_run_captured(&db.url, jobs.path(), JOB);
    wait_until("the run is mid-window", || async {
        provider.request_count() >= 100
    })
    .await;

    let ended = end_lock_session(&db.pool).await;
    let out = finish(run, "the run that lost its lock").await;

    assert_eq!(ended, 1, "the lock's session was ended");
    assert_success(&out, "the run that lost its lock");
    let said = stderr(&out);
    let count = |words: &str| said.lines().filter(|l| l.contains(words)).count();
    assert_eq!(count("lost the database"), 0, "{said}");
    assert!(count("lost the lock") >= 1, "{said}");
    assert_eq!(
        count("could not reserve or settle"),
        0,
        "no line per key:\n{said}"
    );
    assert!(
        count("batch refused") <= 2,
        "at most one line per batch in flight:\n{said}"
    );
}

#[tokio::test]
async fn a_run_cut_by_statement_timeout_says_so_and_keeps_its_checkpoint() {
    let db = TestDb::new().await;
    insert(&db.pool, &paid_orders(200)).await;
    let provider = sink(testkit::sink::Behavior::default()).await;
    let jobs = jobs_dir(&provider.url(), &JobSpec::default());
    let name: String = sqlx::query_scalar("select current_database()")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    // Every later session of this database: no statement may take a millisecond.
    sqlx::query(&format!(
        "alter database \"{name}\" set statement_timeout = '1ms'"
    ))
    .execute(&db.pool)
    .await
    .expect("set statement_timeout");

    // Migrated already: the run's own statements are what the timeout cuts, not the migrations'
    // check (which a busy machine let run past 1 ms too).
    let out = run_bin_within(&db.url, jobs.path(), &["--no-migrate", "run", JOB]).await;

    assert_exits_saying(&out, 1, "statement_timeout");
    assert_exits_saying(&out, 1, "the checkpoint is kept");
}

/// Whether `key`'s owner last confirmed its lease more than `secs` ago, by the database's clock.
async fn unconfirmed_for(pool: &sqlx::PgPool, key: &str, secs: i64) -> bool {
    sqlx::query_scalar(
        "select coalesce(bool_and(confirmado_em < now() - make_interval(secs => $2)), false) from reprocessamento_arrendamento where execucao_id = $1",
    )
    .bind(key)
    .bind(secs as f64)
    .fetch_one(pool)
    .await
    .expect("read the lease")
}

/// A `run` started while the execution's holder is cut off (and has not confirmed its lease for
/// twice the lease) ends the holder's sessions and runs the execution itself, instead of saying
/// it is "already being run" by a process that has stopped.
#[tokio::test]
async fn a_run_started_while_the_holder_is_cut_off_takes_the_execution_over_at_once() {
    let db = TestDb::new().await;
    let events = paid_orders(EVENTS);
    insert(&db.pool, &events).await;
    let provider = sink(testkit::sink::Behavior {
        delay: std::time::Duration::from_millis(10),
        ..testkit::sink::Behavior::default()
    })
    .await;
    let spec = JobSpec {
        extra: String::new(),
        ..cut_spec()
    };
    let jobs = jobs_dir(&provider.url(), &spec);
    let parsed = url::Url::parse(&db.url).expect("the test database's URL");
    let server =
        tokio::net::lookup_host((parsed.host_str().unwrap(), parsed.port().unwrap_or(5432)))
            .await
            .expect("the server's address")
            .next()
            .expect("an address");
    let proxy = testkit::proxy::Proxy::start(server).await.expect("a proxy");
    let cut_one = command(&through(&db.url, &proxy), jobs.path())
        .env("REPLAY_LEDGER_LEASE", "3s")
        .args(["run", JOB])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn the first run");
    wait_until("the first run is mid-window", || async {
        provider.request_count() >= (EVENTS / 10) as usize
    })
    .await;

    proxy.cut();
    wait_until("its lease went unconfirmed for twice the lease", || {
        unconfirmed_for(&db.pool, JOB, 6)
    })
    .await;
    let mut second = command(&db.url, jobs.path());
    second.env("REPLAY_LEDGER_LEASE", "3s").args(["run", JOB]);
    let second = output_of(second, "the second run").await;
    proxy.resume();
    let cut_one = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        cut_one.wait_with_output(),
    )
    .await
    .expect("the cut run exits within 60 s of the network's return")
    .expect("wait for the cut run");

    assert_success(&second, "the run started while the holder was cut off");
    assert_eq!(
        execution_state(&db.pool, JOB).await.as_deref(),
        Some("concluida")
    );
    assert_eq!(cut_one.status.code(), Some(1), "{}", stderr(&cut_one));
    assert!(
        stderr(&cut_one).contains("taken over"),
        "{}",
        stderr(&cut_one)
    );
    let twice: Vec<_> = provider
        .deliveries()
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .collect();
    assert!(twice.is_empty(), "keys sent twice: {twice:?}");
}
