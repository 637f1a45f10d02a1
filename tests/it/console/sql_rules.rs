//! The console role's SQL functions hold the console's rules themselves: a session's
//! idle timeout of at most 30 days, notes without control characters, and an approval's totals
//! read from the simulation's tallies whatever the caller says.

use super::*;

/// Opens a session `h-<n>` for `email` with idle timeout `ocioso`, as the console role would.
async fn open_session(db: &TestDb, n: u32, email: &str, ocioso: &str) -> Result<(), sqlx::Error> {
    sqlx::query("select console_abrir_sessao($1, $2, 'csrf', '127.0.0.1', $3::interval)")
        .bind(format!("h-{n}"))
        .bind(email)
        .bind(ocioso)
        .execute(&db.pool)
        .await
        .map(|_| ())
}

/// Approves the simulation through `console_aprovar` with made-up totals and `nota`.
async fn approve(db: &TestDb, nota: &str) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(
        r#"
        select console_aprovar('h-1', interval '30 minutes', jsonb_build_object(
          'execucao_id', $1::text, 'job', $1::text, 'simulacao_passagem', e.passagem,
          'simulacao_concluida_em', e.concluida_em, 'nota', $2::text, 'pedidos', 1,
          'pedidos_alterados', 1, 'total_antes_centavos', 1, 'total_depois_centavos', 999999,
          'eventos_total', 10, 'eventos_hash', 'x', 'comissao_hash', 'y'))
        from reprocessamento_execucao e where e.execucao_id = $1 || ':simulacao'
        "#,
    )
    .bind(JOB)
    .bind(nota)
    .fetch_one(&db.pool)
    .await
}

#[tokio::test]
async fn the_console_functions_refuse_long_sessions_and_control_characters_and_recompute_totals() {
    let s = simulated().await;
    add_user(&s.db.url, s.jobs.path(), FINANCE, "finance").await;

    let century = open_session(&s.db, 0, FINANCE, "100 years").await;
    open_session(&s.db, 1, FINANCE, "30 minutes")
        .await
        .expect("a session within the rule");
    let escaped = approve(&s.db, "ok\u{1b}]0;owned\u{7}").await;
    let id = approve(&s.db, "conferido").await.expect("an approval");

    assert!(century.is_err(), "a 100-year session was opened");
    assert!(escaped.is_err(), "a note with ESC was recorded");
    let (pedidos, depois): (i64, i64) = sqlx::query_as(
        "select pedidos, total_depois_centavos from reprocessamento_aprovacao where id = $1",
    )
    .bind(id)
    .fetch_one(&s.db.pool)
    .await
    .expect("the approval");
    assert_eq!((pedidos, depois), (10, 2750));
}
