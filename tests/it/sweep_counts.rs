//! A sweeper counts only what it committed (issue 33): two sweeps racing on the same stale rows
//! print counts that add up to the rows moved, not more.

use crate::helpers::*;

const ROWS: i64 = 3000;

/// `ROWS` reservations of a non-idempotent type, left an hour ago by a dead process.
async fn stale_rows(pool: &sqlx::PgPool) {
    sqlx::query(
        r#"
        insert into efeito_aplicado (chave, evento_id, tipo_efeito, estado, execucao_id, atualizado_em)
        select 'evt-' || i || ':notificar-vendedor', 'evt-' || i, 'notificar-vendedor', 'reservado',
               'crashed', now() - interval '1 hour'
        from generate_series(1, $1::int8) i
        "#,
    )
    .bind(ROWS)
    .execute(pool)
    .await
    .expect("stale reservations");
}

/// The `moved to incerto N` of a `sweep`'s summary line.
fn moved(out: &std::process::Output) -> u64 {
    let said = stdout(out);
    said.split("moved to incerto ")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no count in {said:?}"))
}

#[tokio::test]
async fn two_sweeps_racing_on_the_same_stale_rows_print_counts_that_add_up_to_the_rows_moved() {
    let db = TestDb::new().await;
    let spec = JobSpec {
        idempotent: false,
        on_failure: "keep",
        ..JobSpec::default()
    };
    let jobs = jobs_dir("http://127.0.0.1:9/", &spec);
    stale_rows(&db.pool).await;

    let (a, b) = tokio::join!(
        run_bin_within(&db.url, jobs.path(), &["sweep"]),
        run_bin_within(&db.url, jobs.path(), &["sweep"]),
    );

    assert_success(&a, "the first sweep");
    assert_success(&b, "the second sweep");
    let uncertain = keys_in_state(&db.pool, "incerto").await.len() as u64;
    assert_eq!(uncertain, ROWS as u64, "every stale row moved");
    assert_eq!(moved(&a) + moved(&b), uncertain, "each row counted once");
}
