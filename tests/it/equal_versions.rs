//! Equal versions of an order in different batches (invariant `batch-independent`): the outcome
//! of a run or a simulation is the archive's answer — per order the accepted `pedido.pago` with
//! the highest `versao`, then the highest `posicao` — however the archive falls into batches and
//! in whatever order the pipelined batches would commit. The answer is computed here in SQL over
//! `evento_arquivado` (`differential::archive_answer`), not by the product.
//!
//! The minimal case: 500 orders, each with two `pedido.pago` of the same version 100 positions
//! apart, at `batch_size: 100`, so every pair falls in adjacent batches.

use replay_ledger_core::domain::Event;

use crate::differential::{archive_answer, wrong_orders};
use crate::helpers::*;

/// Order `i` (0-based) has its first event in block `2 × (i / 100)` and its second, same version,
/// another value, 100 positions later: batches of 100 hold one order's pair in adjacent batches.
fn pairs_of_equal_versions() -> Vec<Event> {
    let mut events = Vec::new();
    for block in 0..5i64 {
        for j in 0..100i64 {
            let order = block * 100 + j;
            let first = block * 200 + j + 1;
            let pedido = format!("ped-{order}");
            events.push(paid(first, &pedido, 3, 10_000 + order, 5.0));
            events.push(paid(first + 100, &pedido, 3, 20_000 + order, 5.0));
        }
    }
    events.sort_by_key(|e| e.posicao);
    events
}

async fn right_table(pool: &sqlx::PgPool) {
    sqlx::query("delete from comissao")
        .execute(pool)
        .await
        .unwrap();
    for (pedido, valor, versao) in archive_answer(pool).await {
        sqlx::query(
            "insert into comissao (pedido_id, valor_centavos, versao_evento) values ($1, $2, $3)",
        )
        .bind(pedido)
        .bind(valor)
        .bind(versao)
        .execute(pool)
        .await
        .unwrap();
    }
}

fn spec() -> JobSpec {
    JobSpec {
        batch_size: 100,
        ..JobSpec::default()
    }
}

#[tokio::test]
async fn five_real_runs_over_a_right_table_leave_every_order_at_its_later_events_value() {
    let db = TestDb::new().await;
    insert(&db.pool, &pairs_of_equal_versions()).await;
    right_table(&db.pool).await;
    let provider = sink(dedup()).await;
    let jobs = jobs_dir(&provider.url(), &spec());

    let mut wrong_per_run = Vec::new();
    for _ in 0..5 {
        run_job(&db, jobs.path(), "replay-2026-10-14-v2", None, true)
            .await
            .expect("the run finishes");
        wrong_per_run.push(wrong_orders(&db.pool).await.len());
    }

    assert_eq!(
        wrong_per_run,
        vec![0; 5],
        "orders left at the earlier event's value, run by run"
    );
}

#[tokio::test]
async fn five_real_runs_from_an_empty_table_leave_every_order_at_its_later_events_value() {
    let db = TestDb::new().await;
    insert(&db.pool, &pairs_of_equal_versions()).await;
    let provider = sink(dedup()).await;
    let jobs = jobs_dir(&provider.url(), &spec());

    let mut wrong_per_run = Vec::new();
    for _ in 0..5 {
        sqlx::query("delete from comissao")
            .execute(&db.pool)
            .await
            .unwrap();
        run_job(&db, jobs.path(), "replay-2026-10-14-v2", None, true)
            .await
            .expect("the run finishes");
        wrong_per_run.push(wrong_orders(&db.pool).await.len());
    }

    assert_eq!(wrong_per_run, vec![0; 5], "orders left wrong, run by run");
}

#[tokio::test]
async fn five_simulations_over_a_right_table_show_no_change_and_count_none() {
    let db = TestDb::new().await;
    insert(&db.pool, &pairs_of_equal_versions()).await;
    right_table(&db.pool).await;
    let provider = sink(dedup()).await;
    let jobs = jobs_dir(&provider.url(), &spec());

    let mut per_run = Vec::new();
    for _ in 0..5 {
        let report = run_job(&db, jobs.path(), "replay-2026-10-14-v2", Some(true), true)
            .await
            .expect("the simulation finishes");
        let changing: i64 = sqlx::query_scalar(
            "select count(*) from reprocessamento_diff where antes is distinct from depois",
        )
        .fetch_one(&db.pool)
        .await
        .unwrap();
        per_run.push((changing, report.summary.orders_changed));
    }

    assert_eq!(
        per_run,
        vec![(0, 0); 5],
        "(diff rows that change, orders_changed), simulation by simulation"
    );
}

/// The whole diff of `execution`, every column a person reads, ordered.
async fn whole_diff(
    pool: &sqlx::PgPool,
    execution: &str,
) -> Vec<(String, Option<i64>, i64, Option<i64>)> {
    sqlx::query_as(
        "select pedido_id, antes, depois, versao_evento from reprocessamento_diff where execucao_id = $1 order by pedido_id",
    )
    .bind(execution)
    .fetch_all(pool)
    .await
    .unwrap()
}

/// A wrong table for the pairs: every order at a value neither event gives, at the pair's version.
async fn wrong_table(pool: &sqlx::PgPool) {
    sqlx::query("delete from comissao")
        .execute(pool)
        .await
        .unwrap();
    sqlx::query(
        "insert into comissao (pedido_id, valor_centavos, versao_evento) select pedido_id, 7, 3 from evento_arquivado group by pedido_id",
    )
    .execute(pool)
    .await
    .unwrap();
}

#[tokio::test]
async fn a_simulation_run_twice_on_the_same_data_gives_the_same_diff() {
    let db = TestDb::new().await;
    insert(&db.pool, &pairs_of_equal_versions()).await;
    wrong_table(&db.pool).await;
    let provider = sink(dedup()).await;
    let jobs = jobs_dir(&provider.url(), &spec());

    let mut diffs = Vec::new();
    for _ in 0..2 {
        run_job(&db, jobs.path(), "replay-2026-10-14-v2", Some(true), true)
            .await
            .expect("the simulation finishes");
        diffs.push(whole_diff(&db.pool, "replay-2026-10-14-v2").await);
    }

    assert_eq!(diffs[0].len(), 500);
    assert_same_rows(&diffs[1], &diffs[0], "the second simulation's diff");
    let answer = archive_answer(&db.pool).await;
    let shown: Vec<(String, i64)> = diffs[0].iter().map(|d| (d.0.clone(), d.2)).collect();
    let expected: Vec<(String, i64)> = answer.into_iter().map(|(p, v, _)| (p, v)).collect();
    assert_same_rows(
        &shown,
        &expected,
        "the diff's values after, against the archive's answer",
    );
}

#[tokio::test]
async fn an_approved_passes_diff_and_its_comparison_with_the_run_survive_a_later_simulation() {
    use replay_ledger::services::report::approved;
    let db = TestDb::new().await;
    insert(&db.pool, &pairs_of_equal_versions()).await;
    wrong_table(&db.pool).await;
    let provider = sink(dedup()).await;
    let jobs = jobs_dir(
        &provider.url(),
        &JobSpec {
            extra: "require_approved_simulation: true\n".into(),
            ..spec()
        },
    );
    let job = "replay-2026-10-14-v2";
    assert_success(
        &run_bin_within(&db.url, jobs.path(), &["run", job, "--simulate"]).await,
        "the simulation",
    );
    let approved_diff = whole_diff(&db.pool, job).await;
    assert_success(
        &run_bin_within(&db.url, jobs.path(), &["approve", job]).await,
        "approve",
    );
    assert_success(
        &run_bin_within(&db.url, jobs.path(), &["run", job]).await,
        "the approved real run",
    );
    let figures = |pool: sqlx::PgPool| async move {
        replay_ledger_core::tables::execution::load(&pool, job)
            .await
            .unwrap()
            .expect("the real run's execution")
            .summary
    };
    let after_run = approved::check(&db.pool, job, &figures(db.pool.clone()).await)
        .await
        .unwrap()
        .expect("an approval");
    assert!(
        after_run.exact(),
        "the run applied what was approved: {after_run:?}"
    );
    assert_eq!(
        after_run.applied.changed, 500,
        "orders_changed: every order, once"
    );

    // The table is right now: a new simulation finds nothing to change, and replaces the diff.
    assert_success(
        &run_bin_within(
            &db.url,
            jobs.path(),
            &["run", job, "--simulate", "--restart"],
        )
        .await,
        "a later simulation",
    );
    let later = whole_diff(&db.pool, job).await;
    assert!(
        later.iter().all(|d| d.1 == Some(d.2)),
        "the later diff changes nothing"
    );

    let kept: Vec<(String, Option<i64>, i64, Option<i64>)> = sqlx::query_as(
        "select d.pedido_id, d.antes, d.depois, d.versao_evento from reprocessamento_diff_aprovado d join reprocessamento_aprovacao a on a.id = d.aprovacao_id where a.execucao_id = $1 order by d.pedido_id",
    )
    .bind(job)
    .fetch_all(&db.pool)
    .await
    .unwrap();
    assert_same_rows(&kept, &approved_diff, "the approved diff, kept");
    let still = approved::check(&db.pool, job, &figures(db.pool.clone()).await)
        .await
        .unwrap()
        .expect("an approval");
    assert!(
        still.exact(),
        "after a later simulation, the approved run still applied exactly what was approved: {still:?}"
    );
}
