//! A decision acts (invariant `decision-acts`): a key resolved `--not-sent` is queued, and the next
//! `sweep` sends it through the ledger — once, whoever covers the event at the same time (a
//! `--restart` replay, the live consumer), and never twice for a provider that cannot
//! deduplicate, even when the sweeper is killed in the middle of the call.

use std::path::Path;
use std::time::Duration;

use replay_ledger_core::domain::Event;
use serde_json::Value;
use testkit::sink::{Behavior, Sink};

use crate::helpers::*;

const JOB: &str = "replay-2026-10-14-v2";

/// A provider that cannot deduplicate: every request counts.
fn fragile() -> JobSpec {
    JobSpec {
        idempotent: false,
        on_failure: "keep",
        concurrency: 1,
        ..JobSpec::default()
    }
}

/// An `incerto` row for `event`'s notification, as a run whose call failed left it.
async fn uncertain(db: &TestDb, event: &Event) -> String {
    let key = key(event);
    sqlx::query(
        r#"
        insert into efeito_aplicado (chave, evento_id, tipo_efeito, estado, execucao_id,
                                     motivo_incerto, incerto_desde)
        values ($1, $2, 'notificar-vendedor', 'incerto', $3, 'tempo-esgotado', now())
        "#,
    )
    .bind(&key)
    .bind(&event.id)
    .bind(JOB)
    .execute(&db.pool)
    .await
    .expect("an incerto row");
    key
}

/// `review resolve KEY --not-sent`, which must succeed.
async fn not_sent(db: &TestDb, jobs: &Path, key: &str) {
    let args = ["review", "resolve", key, "--not-sent"];
    assert_success(&run_bin_within(&db.url, jobs, &args).await, "resolve");
}

/// `sweep`, which must succeed; its output.
async fn sweep(db: &TestDb, jobs: &Path) -> String {
    let out = run_bin_within(&db.url, jobs, &["sweep"]).await;
    assert_success(&out, "sweep");
    stdout(&out)
}

async fn review_json(db: &TestDb, jobs: &Path) -> Vec<Value> {
    let out = run_bin_within(&db.url, jobs, &["review", "list", "--json"]).await;
    assert_success(&out, "review list --json");
    serde_json::from_str(&stdout(&out)).expect("review list --json is JSON")
}

async fn state_and_reason(db: &TestDb, key: &str) -> (String, Option<String>, bool) {
    sqlx::query_as(
        "select estado, motivo_incerto, reenvio_pedido_em is not null from efeito_aplicado where chave = $1",
    )
    .bind(key)
    .fetch_one(&db.pool)
    .await
    .expect("the key's row")
}

#[tokio::test]
async fn a_key_resolved_not_sent_is_sent_exactly_once_by_the_next_sweep() {
    let db = TestDb::new().await;
    let events = vec![paid(1, "ped-1", 1, 12_345, 2.5)];
    insert(&db.pool, &events).await;
    let provider = sink(Behavior::default()).await;
    let jobs = jobs_dir(&provider.url(), &fragile());
    let key = uncertain(&db, &events[0]).await;

    not_sent(&db, jobs.path(), &key).await;
    let again = ["review", "resolve", &key, "--not-sent"];
    let twice = run_bin_within(&db.url, jobs.path(), &again).await;
    let table = run_bin_within(&db.url, jobs.path(), &["review", "list"]).await;
    let queued = review_json(&db, jobs.path()).await;
    let first = sweep(&db, jobs.path()).await;
    let second = sweep(&db, jobs.path()).await;

    assert_exits_saying(&twice, 2, "already queued for a resend");
    let line = stdout(&table)
        .lines()
        .nth(1)
        .unwrap_or_default()
        .to_string();
    for cell in ["reenvio-pendente", "ped-1", "R$ 3,09"] {
        assert!(line.contains(cell), "{line}");
    }
    assert_eq!(queued.len(), 1, "{queued:#?}");
    assert_eq!(queued[0]["status"], "reenvio-pendente");
    assert_eq!(queued[0]["order_id"], "ped-1");
    assert_eq!(queued[0]["amount_cents"], 309);
    assert!(first.contains("resent 1"), "{first}");
    assert!(second.contains("resent 0"), "{second}");
    assert_eq!(provider.deliveries().get(&key), Some(&1));
    assert_eq!(provider.received().len(), 1);
    assert_eq!(provider.received()[0].body["valorCentavos"], 309);
    assert_eq!(
        state_and_reason(&db, &key).await,
        ("concluido".into(), None, false)
    );
    assert!(review_json(&db, jobs.path()).await.is_empty());
}

#[tokio::test]
async fn a_resend_that_fails_ends_incerto_with_its_reason_and_no_later_sweep_sends_it() {
    let db = TestDb::new().await;
    let events = paid_orders(1);
    insert(&db.pool, &events).await;
    let key = uncertain(&db, &events[0]).await;
    let provider = sink(Behavior {
        fail_keys: [key.clone()].into(),
        ..Default::default()
    })
    .await;
    let jobs = jobs_dir(&provider.url(), &fragile());
    not_sent(&db, jobs.path(), &key).await;

    let failed = sweep(&db, jobs.path()).await;
    provider.set_behavior(Behavior::default());
    let later = sweep(&db, jobs.path()).await;

    assert!(failed.contains("moved to incerto 1"), "{failed}");
    assert!(later.contains("resent 0"), "{later}");
    assert_eq!(provider.received().len(), 1, "one call, never retried");
    assert_eq!(provider.deliveries().get(&key), None);
    assert_eq!(
        state_and_reason(&db, &key).await,
        ("incerto".into(), Some("resposta-http".into()), false)
    );
    let items = review_json(&db, jobs.path()).await;
    assert_eq!(items[0]["status"], "incerto");
    assert_eq!(items[0]["http_status"], 500);
}

/// `n` orders archived, and a provider that cannot deduplicate and answers after 100 ms, so
/// racing writers overlap.
async fn slow_provider(n: i64) -> (TestDb, Vec<Event>, Sink, tempfile::TempDir) {
    let db = TestDb::new().await;
    let events = paid_orders(n);
    insert(&db.pool, &events).await;
    let provider = sink(Behavior {
        delay: Duration::from_millis(100),
        ..Default::default()
    })
    .await;
    let jobs = jobs_dir(&provider.url(), &fragile());
    (db, events, provider, jobs)
}

/// The binary in the background with `args`, its output discarded.
fn spawn_quiet(db: &TestDb, jobs: &Path, args: &[&str]) -> tokio::process::Child {
    command(&db.url, jobs)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn replay-ledger")
}

#[tokio::test]
async fn a_sweep_and_a_restarted_replay_on_a_queued_key_send_it_once() {
    let (db, events, provider, jobs) = slow_provider(20).await;
    assert_success(
        &run_bin_within(&db.url, jobs.path(), &["run", JOB]).await,
        "the first run",
    );
    let queued: Vec<String> = events[..5].iter().map(key).collect();
    sqlx::query(
        "update efeito_aplicado set estado = 'incerto', motivo_incerto = 'tempo-esgotado', incerto_desde = now() where chave = any($1)",
    )
    .bind(&queued)
    .execute(&db.pool)
    .await
    .unwrap();
    for k in &queued {
        not_sent(&db, jobs.path(), k).await;
    }
    let before = provider.deliveries();

    let mut replay = command(&db.url, jobs.path());
    replay.args(["run", JOB, "--restart"]);
    let mut sweeper = command(&db.url, jobs.path());
    sweeper.arg("sweep");
    let (replay, sweeper) = tokio::join!(
        output_of(replay, "run --restart"),
        output_of(sweeper, "sweep")
    );

    assert_success(&replay, "run --restart");
    assert_success(&sweeper, "sweep");
    let after = provider.deliveries();
    for k in &queued {
        let sent = after.get(k).unwrap_or(&0) - before.get(k).unwrap_or(&0);
        assert_eq!(sent, 1, "{k} was sent {sent} times by the two");
    }
    assert_eq!(provider.received().len(), 25, "20 first sends, 5 resends");
    let done = keys_in_state(&db.pool, "concluido").await;
    assert_eq!(done.len(), 20, "{done:?}");
}

#[tokio::test]
async fn a_sweep_and_the_live_consumer_on_a_queued_key_send_it_once() {
    let (db, events, provider, jobs) = slow_provider(10).await;
    std::fs::write(
        jobs.path().join("live.yaml"),
        "name: live\nkind: live\nbatch_size: 50\neffects:\n  notificar-vendedor: { mode: apply, on_failure: keep }\n",
    )
    .unwrap();
    let mut queued = Vec::new();
    for event in &events {
        let key = uncertain(&db, event).await;
        not_sent(&db, jobs.path(), &key).await;
        queued.push(key);
    }

    let mut consumer = spawn_quiet(&db, jobs.path(), &["consume", "--from-start"]);
    let swept = sweep(&db, jobs.path()).await;
    wait_until("every queued key is done", || async {
        keys_in_state(&db.pool, "concluido").await.len() == queued.len()
    })
    .await;
    send_signal(&consumer, nix::sys::signal::Signal::SIGTERM);
    let _ = consumer.wait().await;

    let deliveries = provider.deliveries();
    for k in &queued {
        assert_eq!(deliveries.get(k), Some(&1), "{k}; sweep said: {swept}");
    }
    assert_eq!(provider.received().len(), queued.len());
}

/// The sweeper is killed while its resend is with the provider: the key stays reserved under
/// the sweeper's claim, and once stale the next sweep settles it as invariants `at-most-once` and
/// `at-least-once` say.
async fn kill_the_sweeper_mid_resend(
    spec: JobSpec,
    behavior: Behavior,
) -> (TestDb, String, Vec<usize>) {
    let db = TestDb::new().await;
    let events = paid_orders(1);
    insert(&db.pool, &events).await;
    let provider = sink(Behavior {
        delay: Duration::from_secs(60),
        ..behavior.clone()
    })
    .await;
    let jobs = jobs_dir(
        &provider.url(),
        &JobSpec {
            timeout: "90s",
            ..spec
        },
    );
    let key = uncertain(&db, &events[0]).await;
    not_sent(&db, jobs.path(), &key).await;

    let mut sweeper = spawn_quiet(&db, jobs.path(), &["sweep", "--stale-after", "120s"]);
    wait_until("the resend is with the provider", || {
        std::future::ready(provider.received().iter().any(|r| r.key == key))
    })
    .await;
    kill9(&mut sweeper).await;
    provider.set_behavior(behavior);
    sqlx::query("update efeito_aplicado set atualizado_em = now() - interval '1 hour'")
        .execute(&db.pool)
        .await
        .unwrap();
    let args = ["sweep", "--stale-after", "120s"];
    for _ in 0..2 {
        assert_success(&run_bin_within(&db.url, jobs.path(), &args).await, "sweep");
    }
    let calls = provider.received().iter().filter(|r| r.key == key).count();
    let delivered = provider.deliveries().get(&key).copied().unwrap_or(0);
    (db, key, vec![calls, delivered])
}

#[tokio::test]
async fn a_sweeper_killed_mid_resend_leaves_a_non_idempotent_key_incerto_never_sent_twice() {
    let (db, key, counts) = kill_the_sweeper_mid_resend(fragile(), Behavior::default()).await;

    assert_eq!(counts, [1, 1], "calls and deliveries");
    assert_eq!(
        state_and_reason(&db, &key).await,
        (
            "incerto".into(),
            Some("queda-durante-chamada".into()),
            false
        )
    );
}

#[tokio::test]
async fn a_sweeper_killed_mid_resend_retakes_an_idempotent_key_to_concluido() {
    let spec = JobSpec {
        idempotent: true,
        on_failure: "release",
        ..fragile()
    };
    let (db, key, counts) = kill_the_sweeper_mid_resend(spec, dedup()).await;

    assert_eq!(counts, [2, 1], "called again, delivered once");
    assert_eq!(
        state_and_reason(&db, &key).await,
        ("concluido".into(), None, false)
    );
}

#[tokio::test]
async fn the_serve_daemons_sweep_job_sends_a_queued_key_once_and_counts_it() {
    let (db, events, provider, jobs) = slow_provider(1).await;
    crate::serve::sweep_job(jobs.path(), "1m");
    let key = uncertain(&db, &events[0]).await;
    not_sent(&db, jobs.path(), &key).await;

    let serve = crate::serve::Serve::start_with(&db.url, jobs.path(), "serve", |_| {});
    wait_until("the queued key is done", || async {
        keys_in_state(&db.pool, "concluido").await == [key.clone()]
    })
    .await;
    let resent = r#"replay_ledger_sweeper_rows_total{action="resent"}"#;
    wait_until("the pass is counted", || async {
        crate::serve::metrics_sample(&serve.metrics().await, resent) == Some(1.0)
    })
    .await;

    assert_eq!(provider.deliveries().get(&key), Some(&1));
    assert_eq!(provider.received().len(), 1);
}

#[tokio::test]
async fn a_simulation_counts_a_queued_key_as_one_the_real_run_would_send() {
    let db = TestDb::new().await;
    let events = paid_orders(2);
    insert(&db.pool, &events).await;
    let jobs = jobs_dir("http://127.0.0.1:9/", &fragile());
    let queued = uncertain(&db, &events[0]).await;
    uncertain(&db, &events[1]).await;
    not_sent(&db, jobs.path(), &queued).await;

    let out = run_bin_within(&db.url, jobs.path(), &["run", JOB, "--simulate", "--json"]).await;

    assert_success(&out, "run --simulate --json");
    let summary: Value = serde_json::from_str(&stdout(&out)).expect("one JSON object");
    assert_eq!(summary["effects"]["seria-aplicado"], 1, "{summary:#}");
    assert_eq!(summary["effects"]["ja-registrado"], 1, "{summary:#}");
}

#[tokio::test]
async fn a_replay_sends_a_queued_key_whose_earlier_attempts_are_past_the_dedup_window() {
    let db = TestDb::new().await;
    let events = paid_orders(1);
    insert(&db.pool, &events).await;
    let provider = sink(dedup()).await;
    let jobs = jobs_dir(&provider.url(), &JobSpec::default());
    let effects = jobs.path().join("effects.yaml");
    let mut yaml = std::fs::read_to_string(&effects).unwrap();
    yaml.push_str("  dedup_window: 1h\n");
    std::fs::write(&effects, yaml).unwrap();
    let key = uncertain(&db, &events[0]).await;
    sqlx::query(
        r#"
        insert into efeito_tentativa (chave, execucao_id, iniciada_em, concluida_em, resultado, classe_erro)
        values ($1, $2, now() - interval '3 hours', now() - interval '3 hours', 'falha', 'timeout')
        "#,
    )
    .bind(&key)
    .bind(JOB)
    .execute(&db.pool)
    .await
    .unwrap();
    sqlx::query("update efeito_aplicado set criado_em = now() - interval '3 hours'")
        .execute(&db.pool)
        .await
        .unwrap();
    not_sent(&db, jobs.path(), &key).await;

    let run = run_bin_within(&db.url, jobs.path(), &["run", JOB]).await;

    assert_success(&run, "run");
    assert_eq!(provider.deliveries().get(&key), Some(&1));
    assert_eq!(
        state_and_reason(&db, &key).await,
        ("concluido".into(), None, false)
    );
}
