//! One truth for numbers (invariant `one-truth-for-numbers`): after an execution is interrupted —
//! SIGINT, SIGKILL at three instants, a PostgreSQL restart, with one partition or several — and
//! then resumed, every surface (`run --json`, `status --json`, the report's totals and CSV,
//! `/metrics`) shows the same figures, and they are what SQL over `comissao`,
//! `reprocessamento_correcao` and `efeito_aplicado` says, and the very keys the loopback provider
//! received. SIGINT and the restart run both with one partition and with `partitions: 4` under
//! `--workers 2`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use nix::sys::signal::Signal;
use serde_json::Value;
use sqlx::PgPool;
use testkit::sink::{Behavior, Sink};

use crate::helpers::*;

const JOB: &str = "replay-2026-10-14-v2";

/// A day of `n` orders with the bug's commissions, 30 % of the notifications already sent.
async fn day(n: i64) -> (TestDb, Vec<replay_ledger_core::domain::Event>) {
    let events = paid_orders(n);
    let sent = sent_share(&events, 3);
    let db = seeded_db(&events, &sent).await;
    (db, events)
}

fn provider_behaviour() -> Behavior {
    Behavior {
        dedup: true,
        delay: Duration::from_millis(3),
        ..Behavior::default()
    }
}

/// What SQL says about the execution's latest pass.
#[derive(Debug, PartialEq, Eq)]
struct Truth {
    orders_changed: u64,
    total_before_cents: i64,
    total_after_cents: i64,
    /// Effects of the window's events by ledger state, split by who registered them.
    sent_by_execution: u64,
    registered_before: u64,
}

async fn truth(pool: &PgPool, execution: &str) -> Truth {
    let pass: i32 =
        sqlx::query_scalar("select passagem from reprocessamento_execucao where execucao_id = $1")
            .bind(execution)
            .fetch_one(pool)
            .await
            .expect("the execution");
    let (orders, before, after): (i64, Option<i64>, Option<i64>) = sqlx::query_as(
        r#"
        select count(*), sum(coalesce(antes, 0))::bigint, sum(depois)::bigint
        from reprocessamento_correcao where execucao_id = $1 and passagem = $2
        "#,
    )
    .bind(execution)
    .bind(pass)
    .fetch_one(pool)
    .await
    .expect("sum the corrections");
    // What the corrections say the orders hold now is what `comissao` holds.
    let in_comissao: Option<i64> = sqlx::query_scalar(
        r#"
        select sum(c.valor_centavos)::bigint from comissao c
        join reprocessamento_correcao r using (pedido_id)
        where r.execucao_id = $1 and r.passagem = $2
        "#,
    )
    .bind(execution)
    .bind(pass)
    .fetch_one(pool)
    .await
    .expect("sum comissao");
    assert_eq!(
        in_comissao, after,
        "comissao holds what the corrections say"
    );
    let (by_execution, before_it): (i64, i64) = sqlx::query_as(
        r#"
        select count(*) filter (where execucao_id = $1 and estado = 'concluido'),
               count(*) filter (where execucao_id <> $1)
        from efeito_aplicado
        "#,
    )
    .bind(execution)
    .fetch_one(pool)
    .await
    .expect("count the ledger");
    Truth {
        orders_changed: orders as u64,
        total_before_cents: before.unwrap_or(0),
        total_after_cents: after.unwrap_or(0),
        sent_by_execution: by_execution as u64,
        registered_before: before_it as u64,
    }
}

/// The figures a surface shows, in the JSON shape of `run --json` / `status --json`.
#[derive(Debug, PartialEq, Eq)]
struct Shown {
    events_read: u64,
    orders_changed: u64,
    total_before_cents: i64,
    total_after_cents: i64,
    effects: BTreeMap<String, u64>,
}

fn shown(v: &Value) -> Shown {
    let n = |k: &str| v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}"));
    let effects = v["effects"]
        .as_object()
        .expect("effects")
        .iter()
        .map(|(k, n)| (k.clone(), n.as_u64().unwrap()))
        .collect();
    Shown {
        events_read: n("events_read"),
        orders_changed: n("orders_changed"),
        total_before_cents: v["total_before_cents"].as_i64().unwrap(),
        total_after_cents: v["total_after_cents"].as_i64().unwrap(),
        effects,
    }
}

fn effect(s: &Shown, word: &str) -> u64 {
    s.effects.get(word).copied().unwrap_or(0)
}

/// The execution's gauges in `/metrics` (rendered by the same code as the endpoint).
async fn metrics_figures(pool: &PgPool) -> (u64, u64, i64, i64, BTreeMap<String, u64>) {
    let gauges = replay_ledger::edges::metrics::DbGauges::read(pool, Duration::from_secs(10))
        .await
        .expect("read the gauges");
    let text = replay_ledger::edges::metrics::render(
        &replay_ledger::edges::metrics::Metrics::new(),
        Some(&gauges),
    );
    let value = |prefix: &str| -> Option<f64> {
        text.lines()
            .find(|l| l.starts_with(prefix))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
    };
    let exec = format!("execution=\"{JOB}\"");
    let events = value(&format!(
        "replay_ledger_execution_events{{{exec},kind=\"read\"}}"
    ));
    let orders = value(&format!("replay_ledger_execution_orders_changed{{{exec}}}"));
    let before = value(&format!(
        "replay_ledger_execution_commission_cents{{{exec},side=\"before\"}}"
    ));
    let after = value(&format!(
        "replay_ledger_execution_commission_cents{{{exec},side=\"after\"}}"
    ));
    let effects = text
        .lines()
        .filter(|l| l.starts_with(&format!("replay_ledger_execution_effects{{{exec},")))
        .map(|l| {
            let outcome = l
                .split("outcome=\"")
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap();
            let n: f64 = l.rsplit(' ').next().unwrap().parse().unwrap();
            (outcome.to_string(), n as u64)
        })
        .collect();
    (
        events.expect("events gauge") as u64,
        orders.expect("orders gauge") as u64,
        before.expect("before gauge") as i64,
        after.expect("after gauge") as i64,
        effects,
    )
}

/// Every surface against SQL and the provider, after the execution finished.
async fn assert_every_surface_agrees(
    db: &TestDb,
    jobs: &std::path::Path,
    events: usize,
    provider: &Sink,
    run_json: &Value,
) {
    let t = truth(&db.pool, JOB).await;
    let run = shown(run_json);
    assert_eq!(run_json["state"], "concluida", "{run_json}");
    assert_eq!(run.events_read, events as u64, "events read once each");
    assert_eq!(
        (
            run.orders_changed,
            run.total_before_cents,
            run.total_after_cents
        ),
        (t.orders_changed, t.total_before_cents, t.total_after_cents),
        "run --json against the corrections"
    );
    let sent = effect(&run, "aplicado") + effect(&run, "aplicado-anteriormente");
    assert_eq!(
        sent, t.sent_by_execution,
        "sent by the execution, in any attempt"
    );
    assert_eq!(
        sent,
        provider.deliveries().len() as u64,
        "what the provider received"
    );
    assert_eq!(effect(&run, "ja-registrado"), t.registered_before);
    assert_eq!(effect(&run, "incerto"), 0);
    let done: BTreeSet<String> = sqlx::query_scalar::<_, String>(
        "select chave from efeito_aplicado where execucao_id = $1 and estado = 'concluido'",
    )
    .bind(JOB)
    .fetch_all(&db.pool)
    .await
    .expect("the execution's keys")
    .into_iter()
    .collect();
    let received: BTreeSet<String> = provider.deliveries().into_keys().collect();
    assert!(
        received == done,
        "the provider received exactly the keys the ledger says the execution sent: {} received, {} concluido; received only: {:?}; concluido only: {:?}",
        received.len(),
        done.len(),
        received.difference(&done).take(5).collect::<Vec<_>>(),
        done.difference(&received).take(5).collect::<Vec<_>>()
    );

    let status = shown(&status_entry(&db.url, jobs, JOB).await);
    assert_eq!(status, run, "status --json agrees with run --json");

    let report = replay_ledger::services::report::ExecutionReport::load(&db.pool, JOB)
        .await
        .expect("the report");
    assert_eq!(
        (
            report.totals.changed,
            report.totals.before_centavos,
            report.totals.after_centavos
        ),
        (t.orders_changed, t.total_before_cents, t.total_after_cents),
        "the report's totals"
    );
    let csv = String::from_utf8(replay_ledger::services::report::render::csv(&report)).unwrap();
    let (rows, sum_before, sum_after) = csv_sums(&csv);
    assert_eq!(
        (rows, sum_before, sum_after),
        (t.orders_changed, t.total_before_cents, t.total_after_cents),
        "the report's CSV"
    );

    let (m_events, m_orders, m_before, m_after, m_effects) = metrics_figures(&db.pool).await;
    assert_eq!(
        (m_events, m_orders, m_before, m_after, m_effects),
        (
            run.events_read,
            run.orders_changed,
            run.total_before_cents,
            run.total_after_cents,
            run.effects.clone()
        ),
        "/metrics"
    );
}

/// Rows, sum of `antes` and sum of `depois` of the report's CSV.
fn csv_sums(csv: &str) -> (u64, i64, i64) {
    let mut rows = 0;
    let (mut before, mut after) = (0i64, 0i64);
    for line in csv.lines().skip(1).filter(|l| !l.is_empty()) {
        let cols: Vec<&str> = line.split(',').collect();
        rows += 1;
        before += cols[1].parse::<i64>().unwrap_or(0);
        after += cols[2].parse::<i64>().unwrap();
    }
    (rows, before, after)
}

/// `run --json` to the end (resuming), its JSON object.
async fn resume(db_url: &str, jobs: &std::path::Path, extra: &[&str]) -> Value {
    let mut args = vec!["run", JOB, "--json"];
    args.extend_from_slice(extra);
    let out = run_bin_within(db_url, jobs, &args).await;
    assert_success(&out, "the resumed run");
    serde_json::from_str(stdout(&out).trim()).expect("run --json prints one JSON object")
}

/// How the execution is laid out: one pass over the window, or partitions of `pedido_id` run
/// by several workers.
#[derive(Debug, Clone, Copy)]
enum Shape {
    Single,
    /// `partitions: 4`, `--workers 2`.
    Partitioned,
}

impl Shape {
    fn spec(self) -> JobSpec {
        match self {
            Shape::Single => JobSpec::default(),
            Shape::Partitioned => JobSpec {
                batch_size: 50,
                extra: "partitions: 4\n".into(),
                ..JobSpec::default()
            },
        }
    }

    fn run_args(self) -> &'static [&'static str] {
        match self {
            Shape::Single => &[],
            Shape::Partitioned => &["--workers", "2"],
        }
    }

    /// `run JOB` in the background, output captured for [`finish`].
    fn spawn(self, db_url: &str, jobs: &std::path::Path) -> tokio::process::Child {
        command(db_url, jobs)
            .args(["run", JOB])
            .args(self.run_args())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn replay-ledger run")
    }
}

async fn interrupted_by(signal: Signal, shape: Shape) {
    let (db, events) = day(1500).await;
    let provider = sink(provider_behaviour()).await;
    let jobs = jobs_dir(&provider.url(), &shape.spec());
    let child = shape.spawn(&db.url, jobs.path());
    wait_until("the run is mid-window", || async {
        provider.delivery_count() >= 300
    })
    .await;
    send_signal(&child, signal);
    let stopped = finish(child, "the interrupted run").await;
    assert_eq!(stopped.status.code(), Some(130), "{}", stderr(&stopped));

    let run = resume(&db.url, jobs.path(), shape.run_args()).await;

    assert_every_surface_agrees(&db, jobs.path(), events.len(), &provider, &run).await;
}

#[tokio::test]
async fn after_sigint_and_a_resume_every_surface_shows_the_tables_figures() {
    interrupted_by(Signal::SIGINT, Shape::Single).await;
}

#[tokio::test]
async fn a_partitioned_execution_stopped_by_sigint_and_resumed_shows_the_tables_figures_everywhere()
{
    interrupted_by(Signal::SIGINT, Shape::Partitioned).await;
}

#[tokio::test]
async fn after_sigkill_at_three_instants_and_a_resume_every_surface_shows_the_tables_figures() {
    let (db, events) = day(1500).await;
    let provider = sink(provider_behaviour()).await;
    let jobs = jobs_dir(&provider.url(), &JobSpec::default());
    for deliveries in [100, 400, 800] {
        let mut child = spawn_run(&db.url, jobs.path(), JOB);
        wait_until("the run reached the instant", || async {
            provider.delivery_count() >= deliveries
        })
        .await;
        kill9(&mut child).await;
        wait_sessions_gone(&db.pool).await;
    }

    let run = resume(&db.url, jobs.path(), &[]).await;

    assert_every_surface_agrees(&db, jobs.path(), events.len(), &provider, &run).await;
}

#[tokio::test]
async fn a_partitioned_execution_killed_and_resumed_shows_the_tables_figures_everywhere() {
    let (db, events) = day(1500).await;
    let provider = sink(provider_behaviour()).await;
    let spec = JobSpec {
        batch_size: 50,
        extra: "partitions: 4\n".into(),
        ..JobSpec::default()
    };
    let jobs = jobs_dir(&provider.url(), &spec);
    let mut child = command(&db.url, jobs.path())
        .args(["run", JOB, "--workers", "2"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_until("the partitions are mid-window", || async {
        provider.delivery_count() >= 400
    })
    .await;
    kill9(&mut child).await;
    wait_sessions_gone(&db.pool).await;

    let run = resume(&db.url, jobs.path(), &["--workers", "3"]).await;

    assert_every_surface_agrees(&db, jobs.path(), events.len(), &provider, &run).await;
}

async fn across_a_postgresql_restart(shape: Shape) {
    let mut cluster = testkit::pgtemp::TempCluster::start()
        .await
        .expect("a throwaway cluster");
    let url = cluster.url();
    let pool = replay_ledger_core::tables::db::connect(&url, "test")
        .await
        .unwrap();
    replay_ledger_core::tables::db::migrate(&pool)
        .await
        .unwrap();
    let events = paid_orders(1500);
    insert(&pool, &events).await;
    let provider = sink(provider_behaviour()).await;
    let jobs = jobs_dir(&provider.url(), &shape.spec());
    let child = shape.spawn(&url, jobs.path());
    wait_until("the run is mid-window", || async {
        provider.delivery_count() >= 300
    })
    .await;
    cluster.stop().await;
    assert!(
        provider.delivery_count() < events.len(),
        "the restart came before the run had sent everything"
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    cluster
        .start_again()
        .await
        .expect("the cluster starts again");
    let first = finish(child, "the run across a restart").await;
    assert_success(&first, "the run across a restart");

    // `run --json` of a finished execution reports it as stored.
    let run = resume(&url, jobs.path(), shape.run_args()).await;

    let db = TestDb::attach(&url).await;
    assert_every_surface_agrees(&db, jobs.path(), events.len(), &provider, &run).await;
}

#[tokio::test]
async fn after_a_postgresql_restart_under_the_run_every_surface_shows_the_tables_figures() {
    across_a_postgresql_restart(Shape::Single).await;
}

#[tokio::test]
async fn a_partitioned_execution_across_a_postgresql_restart_shows_the_tables_figures_everywhere() {
    across_a_postgresql_restart(Shape::Partitioned).await;
}
