//! The ledger's statements against a real PostgreSQL: one row per key, reservation before any
//! call, stale retakes only where the provider deduplicates, and every settlement conditioned on
//! the claim (invariants `one-row-per-key`, `at-most-once`, `claim-conditioned`).

use std::collections::HashSet;
use std::time::Duration;

use replay_ledger_core::tables::ledger::{self, Claim, Reason, Reservation, Why};

use crate::helpers::*;

fn items(keys: &[String]) -> Vec<Reservation<'_>> {
    keys.iter()
        .map(|k| Reservation {
            key: k,
            event_id: k.split(':').next().unwrap(),
            effect_type: "notificar-vendedor",
        })
        .collect()
}

/// Any reason will do where a test is about claims, not reasons.
fn timeout() -> Why {
    Why::from(Reason::Timeout)
}

fn keys(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("evt-{i}:notificar-vendedor"))
        .collect()
}

async fn backdate(db: &TestDb, minutes: i32) {
    sqlx::query("update efeito_aplicado set atualizado_em = now() - make_interval(mins => $1)")
        .bind(minutes)
        .execute(&db.pool)
        .await
        .unwrap();
}

const STALE: Option<Duration> = Some(Duration::from_secs(300));

#[tokio::test]
async fn two_claims_reserving_the_same_keys_at_once_each_get_a_disjoint_share() {
    let db = TestDb::new().await;
    let all = keys(2_000);
    let (a, b) = (Claim::new("ao-vivo"), Claim::new("replay"));
    let (pool_a, pool_b) = (
        replay_ledger_core::tables::db::connect(&db.url, "a")
            .await
            .unwrap(),
        replay_ledger_core::tables::db::connect(&db.url, "b")
            .await
            .unwrap(),
    );
    let mut reversed = all.clone();
    reversed.reverse();

    let (got_a, got_b) = tokio::join!(
        async {
            ledger::reserve(&pool_a, &a, &items(&all), STALE)
                .await
                .unwrap()
        },
        async {
            ledger::reserve(&pool_b, &b, &items(&reversed), STALE)
                .await
                .unwrap()
        },
    );

    let (got_a, got_b): (HashSet<_>, HashSet<_>) =
        (got_a.into_iter().collect(), got_b.into_iter().collect());
    assert!(got_a.is_disjoint(&got_b), "a key reserved by both claims");
    assert_eq!(got_a.len() + got_b.len(), all.len());
    let rows: i64 = sqlx::query_scalar("select count(*) from efeito_aplicado")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(rows, 2_000);
}

#[tokio::test]
async fn a_fresh_reservation_is_not_retaken_even_for_an_idempotent_type() {
    let db = TestDb::new().await;
    let k = keys(1);
    ledger::reserve(&db.pool, &Claim::new("a"), &items(&k), STALE)
        .await
        .unwrap();

    let retaken = ledger::reserve(&db.pool, &Claim::new("b"), &items(&k), STALE)
        .await
        .unwrap();

    assert!(retaken.is_empty());
}

#[tokio::test]
async fn a_stale_reservation_is_retaken_only_when_the_provider_deduplicates() {
    let db = TestDb::new().await;
    let k = keys(1);
    ledger::reserve(&db.pool, &Claim::new("a"), &items(&k), STALE)
        .await
        .unwrap();
    backdate(&db, 10).await;

    let non_idempotent = ledger::reserve(&db.pool, &Claim::new("b"), &items(&k), None)
        .await
        .unwrap();
    let idempotent = ledger::reserve(&db.pool, &Claim::new("c"), &items(&k), STALE)
        .await
        .unwrap();

    assert!(
        non_idempotent.is_empty(),
        "a non-idempotent key is never retaken"
    );
    assert_eq!(idempotent, k);
    let holder: String = sqlx::query_scalar("select execucao_id from efeito_aplicado")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(holder, "c");
}

#[tokio::test]
async fn a_slow_stale_worker_cannot_settle_a_reservation_retaken_by_another() {
    let db = TestDb::new().await;
    let k = keys(3);
    let slow = Claim::new("replay");
    ledger::reserve(&db.pool, &slow, &items(&k), STALE)
        .await
        .unwrap();
    backdate(&db, 10).await;
    let fresh = Claim::new("sweeper");
    assert_eq!(
        ledger::reserve(&db.pool, &fresh, &items(&k), STALE)
            .await
            .unwrap()
            .len(),
        3
    );

    let completed = ledger::complete(&db.pool, &slow, &k[..1], &[None], &[])
        .await
        .unwrap();
    let released = ledger::release(&db.pool, &slow, &k[1..2], &[])
        .await
        .unwrap();
    let uncertain = ledger::mark_uncertain(&db.pool, &slow, &k[2..], &[timeout()], &[])
        .await
        .unwrap();

    assert!(completed.is_empty() && released.is_empty() && uncertain.is_empty());
    let states = ledger(&db.pool).await;
    assert!(states.iter().all(|(_, e)| e == "reservado"), "{states:?}");
    let done = ledger::complete(&db.pool, &fresh, &k, &[None, None, None], &[])
        .await
        .unwrap();
    assert_eq!(done.len(), 3, "the holder of the claim settles them");
}

#[tokio::test]
async fn a_concluded_or_uncertain_key_is_never_reserved_again() {
    let db = TestDb::new().await;
    let k = keys(2);
    let claim = Claim::new("a");
    ledger::reserve(&db.pool, &claim, &items(&k), STALE)
        .await
        .unwrap();
    ledger::complete(
        &db.pool,
        &claim,
        &k[..1],
        &[Some(serde_json::json!({"id": 1}))],
        &[],
    )
    .await
    .unwrap();
    ledger::mark_uncertain(&db.pool, &claim, &k[1..], &[timeout()], &[])
        .await
        .unwrap();
    backdate(&db, 60).await;

    let again = ledger::reserve(&db.pool, &Claim::new("b"), &items(&k), STALE)
        .await
        .unwrap();

    assert!(again.is_empty());
    assert_eq!(
        ledger(&db.pool).await,
        vec![
            (k[0].clone(), "concluido".into()),
            (k[1].clone(), "incerto".into())
        ]
    );
}

#[tokio::test]
async fn a_retried_reservation_statement_recovers_the_keys_its_own_claim_already_holds() {
    let db = TestDb::new().await;
    let k = keys(2);
    let claim = Claim::new("a");
    ledger::reserve(&db.pool, &claim, &items(&k), None)
        .await
        .unwrap();

    let again = ledger::reserve(&db.pool, &claim, &items(&k), None)
        .await
        .unwrap();

    assert_eq!(
        again.len(),
        2,
        "a statement retried after a lost connection must not lose its keys"
    );
}

/// A batch's reservation and its completions find their keys by the primary key, whatever the
/// ledger's size: neither statement reads the whole ledger (a scan per batch would make a run's
/// cost grow with the square of the ledger). Counted by PostgreSQL itself (`seq_scan` of
/// `efeito_aplicado`), on one connection whose statistics are flushed before each reading.
#[tokio::test]
async fn a_batch_is_reserved_and_completed_without_reading_the_whole_ledger() {
    let db = TestDb::new().await;
    let one = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(&db.url)
        .await
        .unwrap();
    sqlx::query(
        r#"
        insert into efeito_aplicado (chave, evento_id, tipo_efeito, estado, execucao_id)
        select 'old-' || i || ':notificar-vendedor', 'old-' || i, 'notificar-vendedor',
               'concluido', 'earlier'
        from generate_series(1, 100000) i
        "#,
    )
    .execute(&one)
    .await
    .unwrap();
    sqlx::query("analyze efeito_aplicado")
        .execute(&one)
        .await
        .unwrap();
    let scans = || async {
        sqlx::query("select pg_stat_force_next_flush()")
            .execute(&one)
            .await
            .unwrap();
        sqlx::query_scalar::<_, i64>(
            "select seq_scan from pg_stat_user_tables where relname = 'efeito_aplicado'",
        )
        .fetch_one(&one)
        .await
        .unwrap()
    };
    let before = scans().await;

    let claim = Claim::new("replay");
    let fresh = keys(5_000);
    let old: Vec<String> = (1..=5_000)
        .map(|i| format!("old-{i}:notificar-vendedor"))
        .collect();
    for _ in 0..6 {
        let held = ledger::reserve(&one, &claim, &items(&old), STALE)
            .await
            .unwrap();
        assert!(held.is_empty(), "a concluded key was reserved again");
    }
    let held = ledger::reserve(&one, &claim, &items(&fresh), STALE)
        .await
        .unwrap();
    assert_eq!(held.len(), 5_000);
    for group in fresh.chunks(1_000) {
        let results = vec![Some(serde_json::json!({"ok": true})); group.len()];
        let done = ledger::complete(&one, &claim, group, &results, &[])
            .await
            .unwrap();
        assert_eq!(done.len(), group.len());
    }

    assert_eq!(
        scans().await - before,
        0,
        "the reservation or the completion read the whole ledger"
    );
}
