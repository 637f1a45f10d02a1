//! The replay engine against a real PostgreSQL and a real loopback provider: simulation, real run,
//! the version guard, failures under each policy, invalid events, reruns (invariants
//! `one-row-per-key`, `at-most-once`, `at-least-once`, `never-older`, `simulation-writes-nothing`,
//! `checkpoint-after-settle`).

use std::collections::HashSet;

use replay_ledger_core::services::runner::{Ended, RunError};
use testkit::sink::Behavior;

use replay_ledger_core::shared::summary::{EffectOutcome, StateOutcome};

use crate::helpers::*;

#[tokio::test]
async fn a_simulation_leaves_comissao_and_the_ledger_byte_identical() {
    let db = TestDb::new().await;
    let events = paid_orders(30);
    insert(&db.pool, &events).await;
    sqlx::query("insert into comissao (pedido_id, valor_centavos, versao_evento) values ('ped-1', 5, 1), ('ped-2', 10, 1)")
        .execute(&db.pool)
        .await
        .unwrap();
    already_sent(&db.pool, &[&events[0], &events[1]]).await;
    let provider = sink(dedup()).await;
    let jobs = jobs_dir(&provider.url(), &JobSpec::default());
    let before = (
        checksum(&db.pool, "comissao", "pedido_id").await,
        checksum(&db.pool, "efeito_aplicado", "chave").await,
    );

    let report = run_job(&db, jobs.path(), "replay-2026-10-14-v2", Some(true), false)
        .await
        .expect("the simulation runs");

    let after = (
        checksum(&db.pool, "comissao", "pedido_id").await,
        checksum(&db.pool, "efeito_aplicado", "chave").await,
    );
    assert_eq!(
        before, after,
        "a simulation must not touch comissao or the ledger"
    );
    assert_eq!(
        provider.request_count(),
        0,
        "a simulation calls no provider"
    );
    assert_eq!(
        report
            .summary
            .effects
            .get(&EffectOutcome::AlreadyRegistered),
        Some(&2)
    );
    assert_eq!(
        report.summary.effects.get(&EffectOutcome::WouldApply),
        Some(&28)
    );
}

#[tokio::test]
async fn a_simulation_diff_holds_the_current_value_before_and_the_corrected_value_after() {
    let db = TestDb::new().await;
    insert(
        &db.pool,
        &[
            paid(1, "ped-a", 1, 10_000, 5.0),
            paid(2, "ped-b", 2, 12_345, 2.5),
            paid(3, "ped-c", 1, 999, 10.0),
        ],
    )
    .await;
    sqlx::query("insert into comissao (pedido_id, valor_centavos, versao_evento) values ('ped-a', 50, 1), ('ped-b', 31, 2), ('ped-c', 7, 5)")
        .execute(&db.pool)
        .await
        .unwrap();
    let provider = sink(dedup()).await;
    let jobs = jobs_dir(&provider.url(), &JobSpec::default());

    run_job(&db, jobs.path(), "replay-2026-10-14-v2", Some(true), false)
        .await
        .unwrap();

    let diff: Vec<(String, Option<i64>, i64)> = sqlx::query_as(
        "select pedido_id, antes, depois from reprocessamento_diff where execucao_id = 'replay-2026-10-14-v2' order by pedido_id",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap();
    // ped-c's current row comes from version 5: no diff row for it.
    assert_eq!(
        diff,
        vec![
            ("ped-a".into(), Some(50), 500),
            ("ped-b".into(), Some(31), 309)
        ]
    );
}

#[tokio::test]
async fn a_real_run_corrects_commissions_and_sends_only_the_missing_keys() {
    let db = TestDb::new().await;
    let events = paid_orders(50);
    insert(&db.pool, &events).await;
    let sent: Vec<&_> = events.iter().step_by(3).collect();
    already_sent(&db.pool, &sent).await;
    let provider = sink(dedup()).await;
    let jobs = jobs_dir(
        &provider.url(),
        &JobSpec {
            batch_size: 7,
            ..JobSpec::default()
        },
    );

    let report = run_job(&db, jobs.path(), "replay-2026-10-14-v2", None, false)
        .await
        .unwrap();

    let expected: HashSet<String> = events
        .iter()
        .filter(|e| !sent.contains(e))
        .map(key)
        .collect();
    let received: HashSet<String> = provider.deliveries().into_keys().collect();
    assert_eq!(received, expected);
    assert!(provider.deliveries().values().all(|n| *n == 1));
    let rows = commissions(&db.pool).await;
    assert_eq!(rows.len(), 50);
    assert!(rows.iter().all(|(p, v, _)| {
        let i: i64 = p.trim_start_matches("ped-").parse().unwrap();
        *v == 50 * i
    }));
    assert!(ledger(&db.pool)
        .await
        .iter()
        .all(|(_, estado)| estado == "concluido"));
    assert_eq!(ledger(&db.pool).await.len(), 50, "one ledger row per key");
    assert_eq!(
        report.summary.effects.get(&EffectOutcome::Applied),
        Some(&(expected.len() as u64))
    );
    assert_eq!(checkpoint(&db.pool, "replay-2026-10-14-v2").await, Some(50));
}

#[tokio::test]
async fn an_idempotent_type_has_at_most_concurrency_calls_in_flight_while_batches_overlap() {
    let db = TestDb::new().await;
    let events = paid_orders(240);
    insert(&db.pool, &events).await;
    let provider = sink(Behavior {
        delay: std::time::Duration::from_millis(20),
        ..dedup()
    })
    .await;
    // Batches of 40 keys each, two in flight at once (the runner's pipeline), each with more
    // keys than the type's 4 slots.
    let jobs = jobs_dir(
        &provider.url(),
        &JobSpec {
            batch_size: 40,
            concurrency: 4,
            ..JobSpec::default()
        },
    );

    let report = run_job(&db, jobs.path(), "replay-2026-10-14-v2", None, false)
        .await
        .unwrap();

    assert_eq!(
        provider.peak_in_flight(),
        4,
        "the type's concurrency, reached and never passed"
    );
    assert_eq!(provider.delivery_count(), 240);
    assert!(provider.deliveries().values().all(|n| *n == 1));
    assert_eq!(
        report.summary.effects.get(&EffectOutcome::Applied),
        Some(&240)
    );
    assert!(ledger(&db.pool)
        .await
        .iter()
        .all(|(_, estado)| estado == "concluido"));
}

#[tokio::test]
async fn the_provider_gets_the_ledger_key_the_body_and_the_configured_headers() {
    let db = TestDb::new().await;
    let event = paid(7, "ped-7", 1, 12_345, 2.5);
    insert(&db.pool, std::slice::from_ref(&event)).await;
    let provider = sink(dedup()).await;
    let jobs = jobs_dir(&provider.url(), &JobSpec::default());

    run_job(&db, jobs.path(), "replay-2026-10-14-v2", None, false)
        .await
        .unwrap();

    let received = provider.received();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].key, "evt-7:notificar-vendedor");
    assert_eq!(
        received[0].body,
        serde_json::json!({"eventoId": "evt-7", "pedidoId": "ped-7", "valorCentavos": 309})
    );
    assert_eq!(
        received[0].authorization.as_deref(),
        Some("Bearer test-token")
    );
    let resultado: Option<serde_json::Value> = sqlx::query_scalar(
        "select resultado from efeito_aplicado where chave = 'evt-7:notificar-vendedor'",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert!(
        resultado.is_some(),
        "the provider's JSON answer is kept as resultado"
    );
}

#[tokio::test]
async fn a_row_written_from_version_3_survives_a_replay_of_versions_1_and_2() {
    let db = TestDb::new().await;
    insert(
        &db.pool,
        &[
            paid(1, "ped-x", 1, 10_000, 5.0),
            paid(2, "ped-x", 2, 20_000, 5.0),
        ],
    )
    .await;
    sqlx::query(
        "insert into comissao (pedido_id, valor_centavos, versao_evento) values ('ped-x', 4242, 3)",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    let provider = sink(dedup()).await;
    let jobs = jobs_dir(&provider.url(), &JobSpec::default());

    let report = run_job(&db, jobs.path(), "replay-2026-10-14-v2", None, false)
        .await
        .unwrap();

    assert_eq!(commissions(&db.pool).await, vec![("ped-x".into(), 4242, 3)]);
    assert_eq!(report.summary.state.get(&StateOutcome::NewerKept), Some(&2));
}

#[tokio::test]
async fn within_a_window_the_newest_version_of_an_order_wins_whatever_the_batch_boundaries() {
    let db = TestDb::new().await;
    insert(
        &db.pool,
        &[
            paid(1, "ped-x", 2, 20_000, 5.0),
            paid(2, "ped-x", 1, 10_000, 5.0),
            paid(3, "ped-y", 1, 100, 5.0),
        ],
    )
    .await;
    let provider = sink(dedup()).await;
    let jobs = jobs_dir(
        &provider.url(),
        &JobSpec {
            batch_size: 1,
            ..JobSpec::default()
        },
    );

    run_job(&db, jobs.path(), "replay-2026-10-14-v2", None, false)
        .await
        .unwrap();

    assert_eq!(
        commissions(&db.pool).await,
        vec![("ped-x".into(), 1000, 2), ("ped-y".into(), 5, 1)]
    );
}

#[tokio::test]
async fn a_finished_execution_run_again_does_nothing_and_a_restart_sends_nothing_new() {
    let db = TestDb::new().await;
    insert(&db.pool, &paid_orders(10)).await;
    let provider = sink(dedup()).await;
    let jobs = jobs_dir(&provider.url(), &JobSpec::default());
    run_job(&db, jobs.path(), "replay-2026-10-14-v2", None, false)
        .await
        .unwrap();
    let requests = provider.request_count();

    let again = run_job(&db, jobs.path(), "replay-2026-10-14-v2", None, false)
        .await
        .unwrap();
    assert!(matches!(again.ended, Ended::AlreadyFinished { .. }));
    let restarted = run_job(&db, jobs.path(), "replay-2026-10-14-v2", None, true)
        .await
        .unwrap();

    assert_eq!(restarted.ended, Ended::Finished);
    assert_eq!(
        restarted
            .summary
            .effects
            .get(&EffectOutcome::AlreadyRegistered),
        Some(&10)
    );
    assert_eq!(
        provider.request_count(),
        requests,
        "neither rerun called the provider"
    );
}

#[tokio::test]
async fn a_finished_simulation_does_not_make_the_real_run_skip_the_window() {
    let db = TestDb::new().await;
    insert(&db.pool, &paid_orders(5)).await;
    let provider = sink(dedup()).await;
    let jobs = jobs_dir(&provider.url(), &JobSpec::default());

    run_job(&db, jobs.path(), "replay-2026-10-14-v2", Some(true), false)
        .await
        .unwrap();
    let real = run_job(&db, jobs.path(), "replay-2026-10-14-v2", None, false)
        .await
        .unwrap();

    assert_eq!(real.ended, Ended::Finished);
    assert_eq!(provider.delivery_count(), 5);
    assert_eq!(commissions(&db.pool).await.len(), 5);
}

#[tokio::test]
async fn a_failing_provider_under_release_stops_the_run_before_the_failing_event_and_a_rerun_completes(
) {
    let db = TestDb::new().await;
    let events = paid_orders(20);
    insert(&db.pool, &events).await;
    let failing = key(&events[11]);
    let provider = sink(Behavior {
        dedup: true,
        fail_keys: [failing.clone()].into_iter().collect(),
        ..Default::default()
    })
    .await;
    let jobs = jobs_dir(
        &provider.url(),
        &JobSpec {
            batch_size: 5,
            ..JobSpec::default()
        },
    );

    let err = run_job(&db, jobs.path(), "replay-2026-10-14-v2", None, false)
        .await
        .unwrap_err();

    let RunError::EffectFailed(failure) = err else {
        panic!("expected an effect failure, got {err}")
    };
    assert_eq!(failure.key, failing);
    assert_eq!(
        checkpoint(&db.pool, "replay-2026-10-14-v2").await,
        Some(10),
        "the checkpoint stays before the batch of event 12"
    );
    let attempts = provider
        .received()
        .iter()
        .filter(|r| r.key == failing)
        .count();
    assert_eq!(
        attempts, 3,
        "the call was retried with backoff before giving up"
    );
    let row: Option<String> =
        sqlx::query_scalar("select estado from efeito_aplicado where chave = $1")
            .bind(&failing)
            .fetch_optional(&db.pool)
            .await
            .unwrap();
    assert_eq!(row, None, "the failed key was released");

    provider.set_behavior(dedup());
    let report = run_job(&db, jobs.path(), "replay-2026-10-14-v2", None, false)
        .await
        .unwrap();
    assert_eq!(report.ended, Ended::Finished);
    assert_eq!(provider.deliveries().len(), 20);
    assert!(ledger(&db.pool).await.iter().all(|(_, e)| e == "concluido"));
}

#[tokio::test]
async fn a_done_key_is_recorded_while_the_next_key_of_its_caller_waits_out_a_retry() {
    let db = TestDb::new().await;
    let events = paid_orders(2);
    insert(&db.pool, &events).await;
    let (done, failing) = (key(&events[0]), key(&events[1]));
    let provider = sink(Behavior {
        dedup: true,
        fail_keys: [failing.clone()].into_iter().collect(),
        ..Default::default()
    })
    .await;
    // One caller: it sends the first key, then the second, which fails and waits 3 s to retry.
    let jobs = jobs_dir(
        &provider.url(),
        &JobSpec {
            concurrency: 1,
            ..JobSpec::default()
        },
    );
    let slow = replay_ledger_core::tables::db::Backoff {
        attempts: 2,
        base: std::time::Duration::from_secs(3),
        max: std::time::Duration::from_secs(3),
    };
    let run = run_job_retrying(&db, jobs.path(), "replay-2026-10-14-v2", None, false, slow);
    let watch = async {
        wait_until("the second key's first try", || async {
            provider.received().iter().any(|r| r.key == failing)
        })
        .await;
        // Well within the 3 s pause before the second key's retry.
        eventually(std::time::Duration::from_secs(2), || async {
            keys_in_state(&db.pool, "concluido").await == vec![done.clone()]
        })
        .await
    };

    let (ran, recorded) = tokio::join!(run, watch);

    assert!(
        recorded,
        "the first key is concluido while the second waits to be retried"
    );
    let Err(RunError::EffectFailed(failure)) = ran else {
        panic!("expected the second key to fail the run, got {ran:?}")
    };
    assert_eq!(failure.key, failing);
    assert_eq!(keys_in_state(&db.pool, "concluido").await, vec![done]);
}

#[tokio::test]
async fn a_failing_provider_under_keep_leaves_the_key_incerto_and_the_run_goes_on() {
    let db = TestDb::new().await;
    let events = paid_orders(6);
    insert(&db.pool, &events).await;
    let failing = key(&events[2]);
    let provider = sink(Behavior {
        fail_keys: [failing.clone()].into_iter().collect(),
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

    let report = run_job(&db, jobs.path(), "replay-2026-10-14-v2", None, false)
        .await
        .unwrap();

    assert_eq!(report.ended, Ended::Finished);
    let states = ledger(&db.pool).await;
    assert_eq!(
        states
            .iter()
            .filter(|(k, e)| *k == failing && e == "incerto")
            .count(),
        1
    );
    assert_eq!(states.iter().filter(|(_, e)| e == "concluido").count(), 5);
    assert_eq!(
        provider
            .received()
            .iter()
            .filter(|r| r.key == failing)
            .count(),
        1,
        "never resent"
    );
    assert_eq!(checkpoint(&db.pool, "replay-2026-10-14-v2").await, Some(6));
}

#[tokio::test]
async fn suppressed_effects_are_not_performed_and_not_registered() {
    let db = TestDb::new().await;
    insert(&db.pool, &paid_orders(4)).await;
    let provider = sink(dedup()).await;
    let jobs = jobs_dir(
        &provider.url(),
        &JobSpec {
            mode: "suprimir",
            on_failure: "manter",
            ..JobSpec::default()
        },
    );

    let report = run_job(&db, jobs.path(), "replay-2026-10-14-v2", None, false)
        .await
        .unwrap();

    assert_eq!(
        report.summary.effects.get(&EffectOutcome::Suppressed),
        Some(&4)
    );
    assert_eq!(provider.request_count(), 0);
    assert!(ledger(&db.pool).await.is_empty());
    assert_eq!(
        commissions(&db.pool).await.len(),
        4,
        "state is still corrected"
    );
}

#[tokio::test]
async fn an_invalid_payload_is_recorded_as_rejected_and_the_run_completes() {
    let db = TestDb::new().await;
    let mut events = paid_orders(5);
    events[2].payload = serde_json::json!({"valorCentavos": "12,50", "percentual": 5});
    insert(&db.pool, &events).await;
    let provider = sink(dedup()).await;
    let jobs = jobs_dir(&provider.url(), &JobSpec::default());

    let report = run_job(&db, jobs.path(), "replay-2026-10-14-v2", None, false)
        .await
        .unwrap();

    assert_eq!(report.ended, Ended::Finished);
    assert_eq!(report.summary.events_rejected, 1);
    assert_eq!(report.rejected.len(), 1);
    assert_eq!(report.rejected[0].event_id, "evt-3");
    assert!(report.rejected[0]
        .erro
        .starts_with("payload de pedido.pago invalido"));
    assert_eq!(commissions(&db.pool).await.len(), 4);
    assert_eq!(provider.delivery_count(), 4);
}

#[tokio::test]
async fn an_invalid_payload_halts_the_run_under_on_invalid_event_stop() {
    let db = TestDb::new().await;
    let mut events = paid_orders(5);
    events[2].payload = serde_json::json!({"percentual": 5});
    insert(&db.pool, &events).await;
    let provider = sink(dedup()).await;
    let jobs = jobs_dir(
        &provider.url(),
        &JobSpec {
            extra: "on_invalid_event: stop\n".into(),
            ..JobSpec::default()
        },
    );

    let err = run_job(&db, jobs.path(), "replay-2026-10-14-v2", None, false)
        .await
        .unwrap_err();

    let RunError::InvalidEvent(rejected) = err else {
        panic!("expected a halt, got {err}")
    };
    assert_eq!(rejected.event_id, "evt-3");
    assert_eq!(
        checkpoint(&db.pool, "replay-2026-10-14-v2").await,
        Some(0),
        "not past the invalid event"
    );
    assert_eq!(
        commissions(&db.pool).await.len(),
        2,
        "events before the invalid one were applied"
    );
    let recorded: i64 = sqlx::query_scalar("select count(*) from evento_rejeitado")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(recorded, 1);
}

#[tokio::test]
async fn events_outside_the_window_and_of_other_types_are_not_applied() {
    let db = TestDb::new().await;
    let mut events = paid_orders(3);
    let mut before = paid(100, "ped-before", 1, 1000, 5.0);
    before.ocorrido_em = day_start() - chrono::Duration::seconds(1);
    let mut after = paid(101, "ped-after", 1, 1000, 5.0);
    after.ocorrido_em = day_start() + chrono::Duration::hours(24);
    let mut other = paid(102, "ped-other", 1, 1000, 5.0);
    other.tipo = "pedido.criado".into();
    events.extend([before, after, other]);
    insert(&db.pool, &events).await;
    let provider = sink(dedup()).await;
    let jobs = jobs_dir(&provider.url(), &JobSpec::default());

    let report = run_job(&db, jobs.path(), "replay-2026-10-14-v2", None, false)
        .await
        .unwrap();

    let orders: Vec<String> = commissions(&db.pool)
        .await
        .into_iter()
        .map(|r| r.0)
        .collect();
    assert_eq!(orders, vec!["ped-1", "ped-2", "ped-3"]);
    assert_eq!(report.summary.events_skipped, 1);
    assert_eq!(report.summary.events_read, 4);
}
