//! Why an odd payload is rejected, as recorded in `evento_rejeitado`: the reason names the field
//! at fault (a number beyond `f64`, a rule field of more than 1 MiB), through a real run.

use std::collections::BTreeMap;

use replay_ledger_core::tables::execution;

use crate::helpers::*;

const JOB: &str = "replay-2026-10-14-v2";

/// Archives a `pedido.pago` event whose payload PostgreSQL builds from `payload_sql`.
async fn archive(db: &TestDb, posicao: i64, payload_sql: &str) {
    sqlx::query(&format!(
        "insert into evento_arquivado (posicao, id, tipo, pedido_id, versao, payload, ocorrido_em)
         values ($1, 'evt-' || $1, 'pedido.pago', 'pedido-' || $1, 1, ({payload_sql})::jsonb, $2)"
    ))
    .bind(posicao)
    .bind(day_start() + chrono::Duration::hours(12) + chrono::Duration::seconds(posicao))
    .execute(&db.pool)
    .await
    .expect("archive an event");
}

#[tokio::test]
async fn a_payload_rejected_for_one_field_is_recorded_with_that_fields_name() {
    let db = TestDb::new().await;
    archive(&db, 1, r#"'{"valorCentavos": 1e400, "percentual": 5}'"#).await;
    archive(&db, 2, r#"'{"valor": 1e400, "percentual": 5}'"#).await;
    archive(
        &db,
        3,
        r#"'{"valorCentavos": 1000, "percentual": 5, "x": 1e400}'"#,
    )
    .await;
    let long = "jsonb_build_object('valor', '0.' || repeat('0', 2 << 20), 'percentual', 5)";
    archive(&db, 4, long).await;
    let provider = sink(dedup()).await;
    let jobs = jobs_dir(&provider.url(), &JobSpec::default());

    let run = run_bin_within(&db.url, jobs.path(), &["run", JOB]).await;

    assert_success(&run, "the run");
    let reasons: BTreeMap<String, String> = execution::rejected(&db.pool, JOB)
        .await
        .expect("read rejected")
        .into_iter()
        .map(|r| (r.event_id, r.erro))
        .collect();
    let reason = |id: &str| reasons.get(id).cloned().unwrap_or_default();
    assert!(
        reason("evt-1").ends_with("valorCentavos is not a number"),
        "{reasons:?}"
    );
    assert!(
        reason("evt-2").ends_with("valor beyond JavaScript's safe integers"),
        "{reasons:?}"
    );
    assert!(
        reason("evt-4").ends_with("valor longer than 1 MiB"),
        "{reasons:?}"
    );
    assert_eq!(reasons.len(), 3, "{reasons:?}");
    assert_eq!(
        commissions(&db.pool).await,
        vec![("pedido-3".into(), 50, 1)]
    );
}
