//! Test helpers: a fresh database per test on the shared server, archives built from compact
//! specs, job directories pointing at a loopback sink, and the real binary.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Output;
use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use replay_ledger_core::domain::Event;
use serde_json::json;
use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, PgPool};
use testkit::archive::ArchivedEvent;

/// The server the tests use: `DATABASE_URL`, else the local service.
pub fn server_url() -> String {
    std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_string())
}

/// A database of one test's own, migrated; dropped when the test ends.
pub struct TestDb {
    pub pool: PgPool,
    pub url: String,
    /// The database this test created (dropped with it); `None` for one it only attached to.
    name: Option<String>,
}

impl TestDb {
    pub async fn new() -> TestDb {
        let db = TestDb::unmigrated().await;
        replay_ledger_core::tables::db::migrate(&db.pool)
            .await
            .expect("migrate");
        db
    }

    /// A database of one test's own with no table yet (for `migrate` itself).
    pub async fn unmigrated() -> TestDb {
        let admin = PgConnectOptions::from_str(&server_url()).expect("DATABASE_URL parses");
        let name = format!("rl_test_{}", uuid::Uuid::new_v4().simple());
        let mut conn = admin
            .connect()
            .await
            .expect("the test server is up (see README)");
        sqlx::query(&format!("create database \"{name}\""))
            .execute(&mut conn)
            .await
            .expect("create a test database");
        let mut url = url::Url::parse(&server_url()).expect("DATABASE_URL parses");
        url.set_path(&name);
        let url = url.to_string();
        let pool = replay_ledger_core::tables::db::connect(&url, "test")
            .await
            .expect("connect");
        TestDb {
            pool,
            url,
            name: Some(name),
        }
    }

    /// A database that exists already (a throwaway cluster's), left as it is when dropped.
    pub async fn attach(url: &str) -> TestDb {
        let pool = replay_ledger_core::tables::db::connect(url, "test")
            .await
            .expect("connect");
        TestDb {
            pool,
            url: url.to_string(),
            name: None,
        }
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let Some(name) = self.name.clone() else {
            return;
        };
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            rt.block_on(async {
                let admin = PgConnectOptions::from_str(&server_url()).ok()?;
                let mut conn = admin.connect().await.ok()?;
                sqlx::query(&format!("drop database if exists \"{name}\" with (force)"))
                    .execute(&mut conn)
                    .await
                    .ok()
            })
        })
        .join();
    }
}

/// 2026-10-14 00:00 at -03:00, the start of the day of the bug.
pub fn day_start() -> DateTime<Utc> {
    chrono::FixedOffset::west_opt(3 * 3600)
        .unwrap()
        .with_ymd_and_hms(2026, 10, 14, 0, 0, 0)
        .unwrap()
        .with_timezone(&Utc)
}

/// A `pedido.pago` event inside the window.
pub fn paid(posicao: i64, pedido: &str, versao: i64, valor: i64, percentual: f64) -> Event {
    Event {
        posicao,
        id: format!("evt-{posicao}"),
        tipo: "pedido.pago".into(),
        pedido_id: pedido.into(),
        versao,
        payload: json!({"valorCentavos": valor, "percentual": percentual}),
        ocorrido_em: day_start() + chrono::Duration::seconds(posicao),
    }
}

/// `n` events of distinct orders, positions 1..=n, 5 % of `1000 × i` cents.
pub fn paid_orders(n: i64) -> Vec<Event> {
    (1..=n)
        .map(|i| paid(i, &format!("ped-{i}"), 1, 1000 * i, 5.0))
        .collect()
}

pub async fn insert(pool: &PgPool, events: &[Event]) {
    try_insert(pool, events).await.expect("insert events");
}

/// Writes events to the archive as the system that archives them would (`testkit::archive`,
/// which speaks in plain rows: it does not know the product's types).
pub async fn try_insert(pool: &PgPool, events: &[Event]) -> Result<(), sqlx::Error> {
    let rows: Vec<ArchivedEvent> = events
        .iter()
        .map(|e| ArchivedEvent {
            posicao: e.posicao,
            id: e.id.clone(),
            tipo: e.tipo.clone(),
            pedido_id: e.pedido_id.clone(),
            versao: e.versao,
            payload: e.payload.clone(),
            ocorrido_em: e.ocorrido_em,
        })
        .collect();
    testkit::archive::insert_events(pool, &rows).await
}

/// The ledger key of an event's seller notification.
pub fn key(event: &Event) -> String {
    format!("{}:notificar-vendedor", event.id)
}

/// How the effect type and the replay job are set up.
#[derive(Debug, Clone)]
pub struct JobSpec {
    pub name: String,
    pub idempotent: bool,
    pub on_failure: &'static str,
    pub mode: &'static str,
    pub concurrency: usize,
    pub batch_size: u32,
    pub timeout: &'static str,
    pub simulate: bool,
    pub extra: String,
}

impl Default for JobSpec {
    fn default() -> Self {
        JobSpec {
            name: "replay-2026-10-14-v2".into(),
            idempotent: true,
            on_failure: "release",
            mode: "apply",
            concurrency: 4,
            batch_size: 100,
            timeout: "2s",
            simulate: false,
            extra: String::new(),
        }
    }
}

/// A jobs directory with `effects.yaml` (the seller webhook at `sink_url`) and one replay job
/// over 2026-10-14.
pub fn jobs_dir(sink_url: &str, spec: &JobSpec) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    write_jobs(dir.path(), sink_url, spec);
    dir
}

pub fn write_jobs(dir: &Path, sink_url: &str, spec: &JobSpec) {
    std::fs::write(
        dir.join("effects.yaml"),
        format!(
            "notificar-vendedor:\n  webhook:\n    url: {sink_url}\n    timeout: {}\n    headers: {{ Authorization: \"Bearer test-token\" }}\n  idempotent: {}\n  concurrency: {}\n",
            spec.timeout, spec.idempotent, spec.concurrency
        ),
    )
    .expect("write effects.yaml");
    std::fs::write(
        dir.join(format!("{}.yaml", spec.name)),
        format!(
            "name: {}\nwindow:\n  from: 2026-10-14T00:00:00-03:00\n  to: 2026-10-15T00:00:00-03:00\nsimulate: {}\nbatch_size: {}\neffects:\n  notificar-vendedor: {{ mode: {}, on_failure: {} }}\n{}",
            spec.name, spec.simulate, spec.batch_size, spec.mode, spec.on_failure, spec.extra
        ),
    )
    .expect("write job");
}

/// The `replay-ledger` binary built for these tests.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_replay-ledger"))
}

/// A `replay-ledger` command against `db_url` and `jobs`, with fast retries.
pub fn command(db_url: &str, jobs: &Path) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(bin());
    cmd.env("DATABASE_URL", db_url)
        .env("RUST_LOG", "info")
        .env_remove("LOG_FORMAT")
        // `consume` and `serve` listen for /metrics: any free port, so parallel tests never
        // collide on the default one (a test that scrapes passes --metrics-addr).
        .env("METRICS_ADDR", "127.0.0.1:0")
        .arg("--jobs-dir")
        .arg(jobs)
        .kill_on_drop(true);
    cmd
}

/// Runs the binary to its end.
pub async fn run_bin(db_url: &str, jobs: &Path, args: &[&str]) -> Output {
    let output = command(db_url, jobs)
        .args(args)
        .output()
        .await
        .expect("spawn replay-ledger");
    output
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A table's content as one checksum (every column, every row, in key order).
pub async fn checksum(pool: &PgPool, table: &str, key: &str) -> Option<String> {
    sqlx::query_scalar(&format!(
        "select md5(string_agg(t::text, ',' order by {key})) from {table} t"
    ))
    .fetch_one(pool)
    .await
    .expect("checksum")
}

/// `comissao` as (pedido, valor, versao), ordered.
pub async fn commissions(pool: &PgPool) -> Vec<(String, i64, i64)> {
    sqlx::query_as(
        "select pedido_id, valor_centavos, versao_evento from comissao order by pedido_id",
    )
    .fetch_all(pool)
    .await
    .expect("read comissao")
}

/// The ledger as (chave, estado), ordered.
pub async fn ledger(pool: &PgPool) -> Vec<(String, String)> {
    sqlx::query_as("select chave, estado from efeito_aplicado order by chave")
        .fetch_all(pool)
        .await
        .expect("read ledger")
}

pub async fn checkpoint(pool: &PgPool, key: &str) -> Option<i64> {
    sqlx::query_scalar(
        "select ultima_posicao from reprocessamento_checkpoint where execucao_id = $1",
    )
    .bind(key)
    .fetch_optional(pool)
    .await
    .expect("read checkpoint")
}

/// Polls `cond` every 20 ms until it holds or `limit` passes; returns whether it held.
pub async fn eventually<F, Fut>(limit: Duration, mut cond: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if cond().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs a job in this process, with fast retries.
pub async fn run_job(
    db: &TestDb,
    jobs: &Path,
    job: &str,
    simulate: Option<bool>,
    restart: bool,
) -> Result<
    replay_ledger_core::services::runner::RunReport,
    replay_ledger_core::services::runner::RunError,
> {
    let fast = replay_ledger_core::tables::db::Backoff {
        attempts: 3,
        base: Duration::from_millis(10),
        max: Duration::from_millis(50),
    };
    run_job_retrying(db, jobs, job, simulate, restart, fast).await
}

/// Runs a job in this process, its calls retried as `calls` says.
pub async fn run_job_retrying(
    db: &TestDb,
    jobs: &Path,
    job: &str,
    simulate: Option<bool>,
    restart: bool,
    calls: replay_ledger_core::tables::db::Backoff,
) -> Result<
    replay_ledger_core::services::runner::RunReport,
    replay_ledger_core::services::runner::RunError,
> {
    use replay_ledger_core::config;
    use replay_ledger_core::engine::plan::{Asked, Plan};
    use replay_ledger_core::services::runner::{self, RunnerConfig};
    let (catalog, job) = config::find_job(jobs, job).expect("the job loads");
    let asked = Asked {
        simulate,
        restart,
        at: chrono::Utc::now(),
    };
    let plan = Plan::new(&job, asked).expect("a replay job");
    let effects =
        replay_ledger_core::engine::effects::Effects::from_catalog(&catalog).expect("providers");
    let config = RunnerConfig {
        started_by: "test".into(),
        retries: replay_ledger_core::engine::applier::Retries {
            call_backoff: Some(calls),
            ..Default::default()
        },
        progress: false,
        ..RunnerConfig::default()
    };
    runner::run(
        &db.pool,
        &db.url,
        &plan,
        effects,
        config,
        replay_ledger_core::shared::shutdown::Shutdown::never(),
    )
    .await
}

/// A loopback provider with a behaviour.
pub async fn sink(behavior: testkit::sink::Behavior) -> testkit::sink::Sink {
    testkit::sink::Sink::start(testkit::sink::SinkConfig {
        behavior,
        ..Default::default()
    })
    .await
    .expect("start the sink")
}

/// An idempotent provider (deduplicates by key).
pub fn dedup() -> testkit::sink::Behavior {
    testkit::sink::Behavior {
        dedup: true,
        ..Default::default()
    }
}

/// Marks effects as already done by the live consumer.
pub async fn already_sent(pool: &PgPool, events: &[&Event]) {
    for e in events {
        sqlx::query(
            "insert into efeito_aplicado (chave, evento_id, tipo_efeito, estado, execucao_id) values ($1, $2, 'notificar-vendedor', 'concluido', 'ao-vivo')",
        )
        .bind(key(e))
        .bind(&e.id)
        .execute(pool)
        .await
        .expect("insert ledger row");
    }
}

// --- Real processes: the binary in the background, signals, bounded waits. ---

/// The longest any wait on a child process (or on a condition it should bring about) may take
/// before the test fails; generous, because tests run in parallel on a small machine.
pub const PROCESS_LIMIT: Duration = Duration::from_secs(120);

/// Starts `replay-ledger run JOB` in the background with its output discarded (for processes the
/// test kills). Killed if dropped.
pub fn spawn_run(db_url: &str, jobs: &Path, job: &str) -> tokio::process::Child {
    command(db_url, jobs)
        .args(["run", job])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn replay-ledger run")
}

/// Starts `replay-ledger run JOB` in the background with its output captured, for [`finish`].
pub fn spawn_run_captured(db_url: &str, jobs: &Path, job: &str) -> tokio::process::Child {
    command(db_url, jobs)
        .args(["run", job])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn replay-ledger run")
}

/// Waits for a child started with captured output to exit; fails the test after
/// [`PROCESS_LIMIT`] (the child is then killed, being dropped).
pub async fn finish(child: tokio::process::Child, what: &str) -> Output {
    tokio::time::timeout(PROCESS_LIMIT, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("{what} did not exit within {PROCESS_LIMIT:?}"))
        .expect("wait for replay-ledger")
}

/// Runs a command to its end with its output captured, failing the test if it takes longer
/// than [`PROCESS_LIMIT`].
pub async fn output_of(mut cmd: tokio::process::Command, what: &str) -> Output {
    let child = cmd
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn replay-ledger");
    finish(child, what).await
}

/// Runs the binary to its end, failing the test if it takes longer than [`PROCESS_LIMIT`].
pub async fn run_bin_within(db_url: &str, jobs: &Path, args: &[&str]) -> Output {
    let mut cmd = command(db_url, jobs);
    cmd.args(args);
    output_of(cmd, &format!("replay-ledger {}", args.join(" "))).await
}

/// Asserts a finished process exited 0, showing its output otherwise.
pub fn assert_success(output: &Output, what: &str) {
    assert!(
        output.status.success(),
        "{what} failed with {}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        stdout(output),
        stderr(output)
    );
}

/// Asserts a finished process exited with `code` and said `words` on stderr, showing its stderr
/// otherwise.
pub fn assert_exits_saying(output: &Output, code: i32, words: &str) {
    let said = stderr(output);
    assert_eq!(output.status.code(), Some(code), "stderr:\n{said}");
    assert!(said.contains(words), "{words:?} not in stderr:\n{said}");
}

/// Sends SIGKILL and waits until the process is gone. Fails the test if it had already exited
/// on its own: then it was not killed mid-window and the test proved nothing.
pub async fn kill9(child: &mut tokio::process::Child) {
    use std::os::unix::process::ExitStatusExt;
    let _ = child.start_kill();
    let status = tokio::time::timeout(PROCESS_LIMIT, child.wait())
        .await
        .expect("a SIGKILLed process exits")
        .expect("wait for replay-ledger");
    assert_eq!(
        status.signal(),
        Some(nix::sys::signal::Signal::SIGKILL as i32),
        "the run ended ({status}) before it could be killed mid-window"
    );
}

/// Sends `signal` to a running child.
pub fn send_signal(child: &tokio::process::Child, signal: nix::sys::signal::Signal) {
    let pid = child.id().expect("the child is still running") as i32;
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal).expect("send a signal");
}

/// Polls `cond` until it holds; fails the test, naming `what`, after [`PROCESS_LIMIT`].
pub async fn wait_until<F, Fut>(what: &str, cond: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    assert!(
        eventually(PROCESS_LIMIT, cond).await,
        "timed out after {PROCESS_LIMIT:?} waiting until {what}"
    );
}

/// The ledger's keys in one state, ordered.
pub async fn keys_in_state(pool: &PgPool, estado: &str) -> Vec<String> {
    sqlx::query_scalar("select chave from efeito_aplicado where estado = $1 order by chave")
        .bind(estado)
        .fetch_all(pool)
        .await
        .expect("read ledger keys")
}

/// An execution's `reprocessamento_execucao.estado`.
pub async fn execution_state(pool: &PgPool, key: &str) -> Option<String> {
    sqlx::query_scalar("select estado from reprocessamento_execucao where execucao_id = $1")
        .bind(key)
        .fetch_optional(pool)
        .await
        .expect("read execution state")
}

/// The events whose index modulo 10 is below `tenths`: `sent_share(e, 3)` picks 30 % of them,
/// spread over the window.
pub fn sent_share(events: &[Event], tenths: usize) -> Vec<&Event> {
    events
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 10 < tenths)
        .map(|(_, e)| e)
        .collect()
}

/// The keys of `events` that are not among `sent`.
pub fn missing_keys(events: &[Event], sent: &[&Event]) -> std::collections::HashSet<String> {
    let sent: std::collections::HashSet<String> = sent.iter().map(|e| key(e)).collect();
    events
        .iter()
        .map(key)
        .filter(|k| !sent.contains(k))
        .collect()
}

/// A fresh database holding `events`, the buggy commissions the live consumer wrote for them
/// (÷1000 instead of ÷100), and `sent` already notified by the live consumer.
pub async fn seeded_db(events: &[Event], sent: &[&Event]) -> TestDb {
    let db = TestDb::new().await;
    seed(&db.pool, events, sent).await;
    db
}

/// Writes `events`, their buggy commissions and `sent`'s notifications into a migrated database
/// (what [`seeded_db`] holds).
pub async fn seed(pool: &PgPool, events: &[Event], sent: &[&Event]) {
    insert(pool, events).await;
    sqlx::query(
        r#"
        insert into comissao (pedido_id, valor_centavos, versao_evento)
        select distinct on (pedido_id) pedido_id,
               round((payload->>'valorCentavos')::numeric * (payload->>'percentual')::numeric / 1000),
               versao
        from evento_arquivado order by pedido_id, versao desc
        "#,
    )
    .execute(pool)
    .await
    .expect("insert buggy commissions");
    already_sent(pool, sent).await;
}

/// `comissao` and the ledger after an uninterrupted run of the binary over the same data, on a
/// database and a provider of its own.
pub async fn uninterrupted_run(
    events: &[Event],
    sent: &[&Event],
    spec: &JobSpec,
) -> (Vec<(String, i64, i64)>, Vec<(String, String)>) {
    let db = seeded_db(events, sent).await;
    let provider = sink(testkit::sink::Behavior::default()).await;
    let jobs = jobs_dir(&provider.url(), spec);
    let output = run_bin_within(&db.url, jobs.path(), &["run", &spec.name]).await;
    assert_success(&output, "the uninterrupted run");
    (commissions(&db.pool).await, ledger(&db.pool).await)
}

/// Asserts two ordered row sets are equal, showing only the first differences.
pub fn assert_same_rows<T: PartialEq + std::fmt::Debug>(actual: &[T], expected: &[T], what: &str) {
    let differing: Vec<(Option<&T>, Option<&T>)> = (0..actual.len().max(expected.len()))
        .map(|i| (actual.get(i), expected.get(i)))
        .filter(|(a, e)| a != e)
        .take(5)
        .collect();
    assert!(
        differing.is_empty(),
        "{what}: {} rows vs {} expected; first differences (actual, expected): {differing:?}",
        actual.len(),
        expected.len()
    );
}

/// Takes execution `key`'s advisory lock on `conn`, as the process running it holds it.
pub async fn hold_execution_lock(conn: &mut sqlx::PgConnection, key: &str) {
    sqlx::query("select pg_advisory_lock($1, hashtext($2))")
        .bind(0x5250_4c44_i32)
        .bind(key)
        .execute(conn)
        .await
        .expect("take the execution's lock");
}

/// A reservation left by a dead process of `execucao_id`: fresh, so no staleness rule applies.
pub async fn abandon_fresh_reservation(pool: &PgPool, event: &Event, execution_id: &str) {
    sqlx::query(
        "insert into efeito_aplicado (chave, evento_id, tipo_efeito, estado, execucao_id, reserva_id, atualizado_em) values ($1, $2, 'notificar-vendedor', 'reservado', $3, $4, now())",
    )
    .bind(key(event))
    .bind(&event.id)
    .bind(execution_id)
    .bind(uuid::Uuid::new_v4())
    .execute(pool)
    .await
    .expect("insert an abandoned reservation");
}

/// A reservation left an hour ago by a process of execution `crashed` that died: stale, so the
/// sweep (or a run) may retake it.
pub async fn abandon_stale_reservation(pool: &PgPool, event: &Event) {
    sqlx::query("insert into efeito_aplicado (chave, evento_id, tipo_efeito, estado, execucao_id, atualizado_em) values ($1, $2, 'notificar-vendedor', 'reservado', 'crashed', now() - interval '1 hour')")
        .bind(key(event))
        .bind(&event.id)
        .execute(pool)
        .await
        .expect("a stale reservation");
}

/// `status --json`'s entry for `execution`.
pub async fn status_entry(db_url: &str, jobs: &Path, execution: &str) -> serde_json::Value {
    let out = run_bin_within(db_url, jobs, &["status", "--json"]).await;
    assert_success(&out, "status --json");
    let all: serde_json::Value =
        serde_json::from_str(&stdout(&out)).expect("status --json is JSON");
    all["executions"]
        .as_array()
        .expect("executions")
        .iter()
        .find(|e| e["execution"] == execution)
        .cloned()
        .expect("the execution in status --json")
}

/// Waits until no session of a `replay-ledger` process (other than this test's own pool) is left
/// on this test's database: after a kill, a statement the process had already sent has then
/// either committed or rolled back, so what the ledger shows is final.
pub async fn wait_sessions_gone(pool: &PgPool) {
    wait_until(
        "the killed process's database sessions are gone",
        || async move {
            let left: i64 = sqlx::query_scalar(
                r#"
            select count(*) from pg_stat_activity
            where datname = current_database()
              and application_name like 'replay-ledger %'
              and application_name not like 'replay-ledger test %'
            "#,
            )
            .fetch_one(pool)
            .await
            .expect("read pg_stat_activity");
            left == 0
        },
    )
    .await;
}
