//! The approval gate (`require_approved_simulation: true`), through the real binary: the real run
//! waits for `approve`, and an approval is void once the window or the diff's commissions change.

use replay_ledger_core::engine::approval::GateError;
use replay_ledger_core::services::runner::RunError;

use super::{fixture, Fixture, JOB};
use crate::helpers::*;

const GATED: &str = "require_approved_simulation: true\n";

async fn bin(f: &Fixture, args: &[&str]) -> std::process::Output {
    run_bin_within(&f.db.url, f.jobs.path(), args).await
}

fn refused(output: &std::process::Output, says: &str) {
    assert_eq!(
        output.status.code(),
        Some(1),
        "stdout:\n{}\nstderr:\n{}",
        stdout(output),
        stderr(output)
    );
    assert!(
        stderr(output).contains(says),
        "expected {says:?} in:\n{}",
        stderr(output)
    );
}

#[tokio::test]
async fn the_real_run_waits_for_an_approved_simulation() {
    let f = fixture(GATED).await;
    let untouched = checksum(&f.db.pool, "comissao", "pedido_id").await;

    let unsimulated = bin(&f, &["run", JOB]).await;
    let nothing_to_approve = bin(&f, &["approve", JOB]).await;
    assert_success(&bin(&f, &["run", JOB, "--simulate"]).await, "simulation");
    let unapproved = bin(&f, &["run", JOB]).await;

    refused(&unsimulated, "requires an approved simulation");
    refused(&nothing_to_approve, "no simulation of");
    refused(&unapproved, "requires an approved simulation");
    assert_eq!(
        checksum(&f.db.pool, "comissao", "pedido_id").await,
        untouched
    );

    let approve = bin(&f, &["approve", JOB, "--by", "ana@financeiro"]).await;
    let real = bin(&f, &["run", JOB]).await;

    assert_success(&approve, "approve");
    assert_success(&real, "the approved real run");
    let (by, note, before, after): (String, Option<String>, i64, i64) = sqlx::query_as(
        "select aprovado_por, nota, total_antes_centavos, total_depois_centavos from reprocessamento_aprovacao where execucao_id = $1",
    )
    .bind(JOB)
    .fetch_one(&f.db.pool)
    .await
    .unwrap();
    let (sum_before, sum_after): (i64, i64) = sqlx::query_as(
        "select sum(coalesce(antes, 0))::bigint, sum(depois)::bigint from reprocessamento_diff where execucao_id = $1 and antes is distinct from depois",
    )
    .bind(JOB)
    .fetch_one(&f.db.pool)
    .await
    .unwrap();
    // Who approved is the database role connected (the tests' superuser), never a name given on
    // the command line: `--by` is kept as a note.
    assert_eq!(
        (by.as_str(), note.as_deref(), before, after),
        ("postgres", Some("ana@financeiro"), sum_before, sum_after)
    );
    assert_ne!(
        checksum(&f.db.pool, "comissao", "pedido_id").await,
        untouched,
        "corrected"
    );
}

#[tokio::test]
async fn an_event_archived_into_the_window_after_the_simulation_asks_for_a_new_one() {
    let f = fixture(GATED).await;
    assert_success(&bin(&f, &["run", JOB, "--simulate"]).await, "simulation");
    assert_success(&bin(&f, &["approve", JOB]).await, "approve");
    insert(&f.db.pool, &[paid(500, "ped-late", 1, 7000, 5.0)]).await;

    let stale = bin(&f, &["run", JOB]).await;
    let reapprove = bin(&f, &["approve", JOB]).await;

    refused(&stale, "a new simulation is needed");
    refused(&reapprove, "the window's events changed");
    assert_eq!(
        execution_state(&f.db.pool, JOB).await,
        None,
        "no real pass started"
    );

    assert_success(
        &bin(&f, &["run", JOB, "--simulate", "--restart"]).await,
        "new simulation",
    );
    assert_success(&bin(&f, &["approve", JOB]).await, "approve the new one");
    assert_success(&bin(&f, &["run", JOB]).await, "the real run");
}

#[tokio::test]
async fn a_commission_of_the_diff_written_after_approval_voids_it() {
    let f = fixture(GATED).await;
    run_job(&f.db, f.jobs.path(), JOB, Some(true), false)
        .await
        .expect("simulation");
    assert_success(&bin(&f, &["approve", JOB]).await, "approve");
    sqlx::query("update comissao set valor_centavos = valor_centavos + 1, versao_evento = 2 where pedido_id = 'ped-7'")
        .execute(&f.db.pool)
        .await
        .unwrap();

    let result = run_job(&f.db, f.jobs.path(), JOB, Some(false), false).await;

    assert!(
        matches!(result, Err(RunError::NotApproved(GateError::Changed { ref what, .. })) if what.contains("commission")),
        "{result:?}"
    );
}

#[tokio::test]
async fn a_simulation_rerun_after_approval_must_be_approved_again() {
    let f = fixture(GATED).await;
    run_job(&f.db, f.jobs.path(), JOB, Some(true), false)
        .await
        .expect("simulation");
    assert_success(&bin(&f, &["approve", JOB]).await, "approve");
    run_job(&f.db, f.jobs.path(), JOB, Some(true), true)
        .await
        .expect("a new pass");

    let result = run_job(&f.db, f.jobs.path(), JOB, Some(false), false).await;

    assert!(
        matches!(
            result,
            Err(RunError::NotApproved(GateError::Superseded {
                approved: 1,
                ..
            }))
        ),
        "{result:?}"
    );
}
