//! Operations: the sweeper, the attempt history, the provider's dedup window and the review
//! queue, against a real PostgreSQL and a real loopback provider.

use std::collections::HashSet;
use std::time::Duration;

use replay_ledger_core::config;
use replay_ledger_core::engine::effects::Effects;
use replay_ledger_core::services::sweeper::{Sweeper, SweeperConfig};
use replay_ledger_core::tables::ledger::{self, Claim, Reason, Reservation};
use testkit::sink::Behavior;

use replay_ledger_core::shared::summary::EffectOutcome;

use crate::helpers::*;

/// The effect catalog of a jobs dir written by `jobs_dir`.
fn effects(jobs: &std::path::Path) -> Effects {
    let catalog = config::load_effects(&jobs.join("effects.yaml")).expect("effects.yaml loads");
    Effects::from_catalog(&catalog).expect("providers")
}

fn sweeper(db: &TestDb, jobs: &std::path::Path) -> Sweeper {
    let config = SweeperConfig {
        stale_after: Duration::from_secs(300),
        ..SweeperConfig::default()
    };
    Sweeper::new(db.pool.clone(), effects(jobs), config).expect("a valid sweeper")
}

/// Leaves reservations as a dead process would: `reservado`, `minutes_ago` old.
async fn abandoned(db: &TestDb, keys: &[String], tipo: &str, minutes_ago: i32) {
    let items: Vec<Reservation<'_>> = keys
        .iter()
        .map(|k| Reservation {
            key: k,
            event_id: k.split(':').next().unwrap(),
            effect_type: tipo,
        })
        .collect();
    ledger::reserve(&db.pool, &Claim::new("replay-dead"), &items, None)
        .await
        .unwrap();
    sqlx::query("update efeito_aplicado set atualizado_em = now() - make_interval(mins => $1), criado_em = now() - make_interval(mins => $1) where chave = any($2)")
        .bind(minutes_ago)
        .bind(keys)
        .execute(&db.pool)
        .await
        .unwrap();
}

async fn state_of(db: &TestDb, key: &str) -> Option<String> {
    sqlx::query_scalar("select estado from efeito_aplicado where chave = $1")
        .bind(key)
        .fetch_optional(&db.pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_stale_reservation_of_an_idempotent_type_is_retaken_sent_once_and_ends_concluido() {
    let db = TestDb::new().await;
    let events = paid_orders(3);
    insert(&db.pool, &events).await;
    let provider = sink(dedup()).await;
    let jobs = jobs_dir(&provider.url(), &JobSpec::default());
    abandoned(&db, &[key(&events[1])], "notificar-vendedor", 10).await;

    let outcome = sweeper(&db, jobs.path()).run_once().await.unwrap();

    assert_eq!((outcome.retaken, outcome.completed), (1, 1));
    assert_eq!(provider.deliveries().get(&key(&events[1])), Some(&1));
    assert_eq!(
        provider.received()[0].body["valorCentavos"],
        100,
        "rebuilt from the archived event"
    );
    assert_eq!(
        state_of(&db, &key(&events[1])).await.as_deref(),
        Some("concluido")
    );
}

#[tokio::test]
async fn a_stale_reservation_of_a_non_idempotent_type_ends_incerto_without_any_call() {
    let db = TestDb::new().await;
    let events = paid_orders(1);
    insert(&db.pool, &events).await;
    let provider = sink(Behavior::default()).await;
    let jobs = jobs_dir(
        &provider.url(),
        &JobSpec {
            idempotent: false,
            on_failure: "keep",
            ..JobSpec::default()
        },
    );
    abandoned(&db, &[key(&events[0])], "notificar-vendedor", 10).await;

    let outcome = sweeper(&db, jobs.path()).run_once().await.unwrap();

    assert_eq!(outcome.uncertain, 1);
    assert_eq!(provider.request_count(), 0);
    assert_eq!(
        state_of(&db, &key(&events[0])).await.as_deref(),
        Some("incerto")
    );
}

#[tokio::test]
async fn a_stale_reservation_of_an_undeclared_type_ends_incerto() {
    let db = TestDb::new().await;
    let provider = sink(dedup()).await;
    let jobs = jobs_dir(&provider.url(), &JobSpec::default());
    abandoned(&db, &["evt-9:enviar-sms".to_string()], "enviar-sms", 10).await;

    let outcome = sweeper(&db, jobs.path()).run_once().await.unwrap();

    assert_eq!(outcome.uncertain, 1);
    assert_eq!(
        state_of(&db, "evt-9:enviar-sms").await.as_deref(),
        Some("incerto")
    );
    assert_eq!(provider.request_count(), 0);
}

#[tokio::test]
async fn a_fresh_reservation_is_left_alone_by_the_sweeper() {
    let db = TestDb::new().await;
    let events = paid_orders(1);
    insert(&db.pool, &events).await;
    let provider = sink(dedup()).await;
    let jobs = jobs_dir(&provider.url(), &JobSpec::default());
    abandoned(&db, &[key(&events[0])], "notificar-vendedor", 1).await;

    let outcome = sweeper(&db, jobs.path()).run_once().await.unwrap();

    assert!(outcome.is_empty(), "{outcome:?}");
    assert_eq!(
        state_of(&db, &key(&events[0])).await.as_deref(),
        Some("reservado")
    );
    assert_eq!(provider.request_count(), 0);
}

#[tokio::test]
async fn two_sweepers_started_together_over_1000_stale_rows_act_on_each_row_exactly_once() {
    let db = TestDb::new().await;
    let events = paid_orders(1_000);
    insert(&db.pool, &events).await;
    // Not deduplicating: a row acted on twice would show as a second delivery.
    let provider = sink(Behavior::default()).await;
    let jobs = jobs_dir(
        &provider.url(),
        &JobSpec {
            concurrency: 16,
            ..JobSpec::default()
        },
    );
    let keys: Vec<String> = events.iter().map(key).collect();
    abandoned(&db, &keys, "notificar-vendedor", 10).await;
    let other_pool = replay_ledger_core::tables::db::connect(&db.url, "second-sweeper")
        .await
        .unwrap();
    let config = SweeperConfig {
        stale_after: Duration::from_secs(300),
        page: 100,
        ..SweeperConfig::default()
    };
    let first = Sweeper::new(db.pool.clone(), effects(jobs.path()), config.clone()).unwrap();
    let second = Sweeper::new(other_pool, effects(jobs.path()), config).unwrap();

    let (a, b) = tokio::join!(first.run_once(), second.run_once());

    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a.retaken + b.retaken, 1_000, "{a:?} {b:?}");
    assert_eq!(a.completed + b.completed, 1_000);
    let deliveries = provider.deliveries();
    assert_eq!(deliveries.len(), 1_000);
    assert!(
        deliveries.values().all(|n| *n == 1),
        "a row was acted on twice"
    );
    assert!(ledger(&db.pool).await.iter().all(|(_, e)| e == "concluido"));
}

#[tokio::test]
async fn a_slow_original_worker_that_finishes_after_the_sweeper_retook_its_row_cannot_overwrite_it()
{
    let db = TestDb::new().await;
    let events = paid_orders(1);
    insert(&db.pool, &events).await;
    let provider = sink(dedup()).await;
    let jobs = jobs_dir(&provider.url(), &JobSpec::default());
    let k = key(&events[0]);
    let slow = Claim::new("replay-2026-10-14-v2");
    let item = [Reservation {
        key: &k,
        event_id: &events[0].id,
        effect_type: "notificar-vendedor",
    }];
    ledger::reserve(&db.pool, &slow, &item, None).await.unwrap();
    sqlx::query("update efeito_aplicado set atualizado_em = now() - interval '10 minutes'")
        .execute(&db.pool)
        .await
        .unwrap();
    sweeper(&db, jobs.path()).run_once().await.unwrap();

    let released = ledger::release(&db.pool, &slow, std::slice::from_ref(&k), &[])
        .await
        .unwrap();
    let uncertain = ledger::mark_uncertain(
        &db.pool,
        &slow,
        std::slice::from_ref(&k),
        &[Reason::Timeout.into()],
        &[],
    )
    .await
    .unwrap();

    assert!(released.is_empty() && uncertain.is_empty());
    assert_eq!(state_of(&db, &k).await.as_deref(), Some("concluido"));
    let holder: String = sqlx::query_scalar("select execucao_id from efeito_aplicado")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(holder, "sweeper");
}

#[tokio::test]
async fn a_released_key_whose_first_attempt_is_older_than_the_dedup_window_ends_incerto() {
    let db = TestDb::new().await;
    let events = paid_orders(3);
    insert(&db.pool, &events).await;
    let failing = key(&events[1]);
    let provider = sink(Behavior {
        dedup: true,
        fail_keys: [failing.clone()].into(),
        ..Default::default()
    })
    .await;
    let jobs = jobs_dir(&provider.url(), &JobSpec::default());
    let effects_yaml = std::fs::read_to_string(jobs.path().join("effects.yaml")).unwrap();
    std::fs::write(
        jobs.path().join("effects.yaml"),
        format!("{effects_yaml}  dedup_window: 24h\n"),
    )
    .unwrap();
    run_job(&db, jobs.path(), "replay-2026-10-14-v2", None, false)
        .await
        .unwrap_err();
    sqlx::query("update efeito_tentativa set iniciada_em = iniciada_em - interval '25 hours'")
        .execute(&db.pool)
        .await
        .unwrap();
    provider.set_behavior(dedup());

    let report = run_job(&db, jobs.path(), "replay-2026-10-14-v2", None, false)
        .await
        .unwrap();

    assert_eq!(state_of(&db, &failing).await.as_deref(), Some("incerto"));
    assert_eq!(
        provider.deliveries().get(&failing),
        None,
        "not retried after the window"
    );
    assert_eq!(
        report.summary.effects.get(&EffectOutcome::Uncertain),
        Some(&1)
    );
    let history = ledger::attempt_history(&db.pool, &failing).await.unwrap();
    assert_eq!(history.len(), 3, "every try is on record: {history:?}");
    assert!(history
        .iter()
        .all(|(_, _, outcome, class)| outcome == "falha" && class.as_deref() == Some("http 500")));
}

#[tokio::test]
async fn the_attempt_history_records_every_try_with_its_outcome() {
    let db = TestDb::new().await;
    let events = paid_orders(2);
    insert(&db.pool, &events).await;
    let provider = sink(Behavior {
        dedup: true,
        fail_first: 1,
        ..Default::default()
    })
    .await;
    let jobs = jobs_dir(
        &provider.url(),
        &JobSpec {
            concurrency: 1,
            ..JobSpec::default()
        },
    );

    run_job(&db, jobs.path(), "replay-2026-10-14-v2", None, false)
        .await
        .unwrap();

    let rows: Vec<(String, String)> = sqlx::query_as(
        "select chave, resultado from efeito_tentativa_historico order by iniciada_em, id",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap();
    assert_eq!(rows.len(), 3, "{rows:?}");
    assert_eq!(rows.iter().filter(|(_, r)| r == "falha").count(), 1);
    let keys: HashSet<&str> = rows.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys.len(), 2);
}

#[tokio::test]
async fn resolving_an_incerto_effect_as_sent_concludes_it_and_records_the_database_role_not_the_name_given(
) {
    let db = TestDb::new().await;
    abandoned(
        &db,
        &["evt-1:notificar-vendedor".to_string()],
        "notificar-vendedor",
        10,
    )
    .await;
    sqlx::query("update efeito_aplicado set estado = 'incerto'")
        .execute(&db.pool)
        .await
        .unwrap();
    assert_eq!(ledger::review_list(&db.pool).await.unwrap().len(), 1);

    ledger::resolve(
        &db.pool,
        "evt-1:notificar-vendedor",
        ledger::Resolution::Sent,
        Some("ana@finance"),
    )
    .await
    .unwrap();

    assert_eq!(
        state_of(&db, "evt-1:notificar-vendedor").await.as_deref(),
        Some("concluido")
    );
    let (who, note, role): (String, Option<String>, String) = sqlx::query_as(
        "select resolvido_por, nota, session_user::text from efeito_revisao where decisao = 'enviado'",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(who, role, "the session's role resolved it");
    assert_eq!(
        note.as_deref(),
        Some("ana@finance"),
        "the name given is a note"
    );
    assert!(ledger::review_list(&db.pool).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_key_resolved_as_not_sent_is_performed_exactly_once_by_the_next_run() {
    let db = TestDb::new().await;
    let events = paid_orders(3);
    insert(&db.pool, &events).await;
    let failing = key(&events[0]);
    let provider = sink(Behavior {
        fail_keys: [failing.clone()].into(),
        ..Default::default()
    })
    .await;
    let jobs = jobs_dir(
        &provider.url(),
        &JobSpec {
            idempotent: false,
            on_failure: "keep",
            ..JobSpec::default()
        },
    );
    run_job(&db, jobs.path(), "replay-2026-10-14-v2", None, false)
        .await
        .unwrap();
    assert_eq!(state_of(&db, &failing).await.as_deref(), Some("incerto"));
    provider.set_behavior(Behavior::default());

    let out = run_bin(
        &db.url,
        jobs.path(),
        &["review", "resolve", &failing, "--not-sent"],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    run_job(&db, jobs.path(), "replay-2026-10-14-v2", None, true)
        .await
        .unwrap();
    run_job(&db, jobs.path(), "replay-2026-10-14-v2", None, true)
        .await
        .unwrap();

    assert_eq!(provider.deliveries().get(&failing), Some(&1));
    assert_eq!(state_of(&db, &failing).await.as_deref(), Some("concluido"));
}

#[tokio::test]
async fn resolving_a_key_that_is_not_incerto_is_refused_with_exit_2() {
    let db = TestDb::new().await;
    let provider = sink(dedup()).await;
    let jobs = jobs_dir(&provider.url(), &JobSpec::default());
    abandoned(
        &db,
        &["evt-1:notificar-vendedor".to_string()],
        "notificar-vendedor",
        0,
    )
    .await;

    let reserved = run_bin(
        &db.url,
        jobs.path(),
        &["review", "resolve", "evt-1:notificar-vendedor", "--sent"],
    )
    .await;
    let missing = run_bin(
        &db.url,
        jobs.path(),
        &[
            "review",
            "resolve",
            "evt-404:notificar-vendedor",
            "--not-sent",
        ],
    )
    .await;

    assert_eq!(reserved.status.code(), Some(2));
    assert!(
        stderr(&reserved).contains("is reservado, not incerto"),
        "{}",
        stderr(&reserved)
    );
    assert_eq!(missing.status.code(), Some(2));
    assert_eq!(
        state_of(&db, "evt-1:notificar-vendedor").await.as_deref(),
        Some("reservado")
    );
}

#[tokio::test]
async fn review_list_shows_key_type_execution_attempts_and_last_error() {
    let db = TestDb::new().await;
    let events = paid_orders(1);
    insert(&db.pool, &events).await;
    let provider = sink(Behavior {
        fail_status: Some(503),
        ..Default::default()
    })
    .await;
    let jobs = jobs_dir(
        &provider.url(),
        &JobSpec {
            idempotent: false,
            on_failure: "keep",
            ..JobSpec::default()
        },
    );
    run_job(&db, jobs.path(), "replay-2026-10-14-v2", None, false)
        .await
        .unwrap();

    let out = run_bin(&db.url, jobs.path(), &["review", "list", "--json"]).await;

    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let items: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(items[0]["key"], key(&events[0]));
    assert_eq!(items[0]["effect_type"], "notificar-vendedor");
    assert_eq!(items[0]["execution"], "replay-2026-10-14-v2");
    assert_eq!(items[0]["attempts"], 1);
    assert_eq!(items[0]["last_error"], "http 503");
}
