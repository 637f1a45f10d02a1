//! `explain` shows what the rule read from each event — the amount, the percentage, the payload's
//! shape — and, when the order is inconsistent, why.

use serde_json::{json, Value};

use crate::explain::explain_json;
use crate::helpers::*;

/// Order `ped-7`: version 1 in the current shape, version 2 in the older shape (R$ 159,90 at
/// "5" %, upcast to 15990 cents → 800); `ped-8` with one event and no row. `ped-7`'s row holds
/// the right amount but was written from a version 3 the archive does not have.
pub(crate) async fn two_shapes_and_a_row_ahead() -> (TestDb, tempfile::TempDir) {
    let mut events = vec![
        paid(1, "ped-7", 1, 10_000, 5.0),
        paid(2, "ped-7", 2, 0, 5.0),
        paid(3, "ped-8", 1, 10_000, 5.0),
    ];
    events[1].payload = json!({"valor": "159.90", "percentual": "5"});
    let db = TestDb::new().await;
    insert(&db.pool, &events).await;
    sqlx::query(
        "insert into comissao (pedido_id, valor_centavos, versao_evento) values ('ped-7', 800, 3)",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    let jobs = jobs_dir("http://127.0.0.1:9/", &JobSpec::default());
    (db, jobs)
}

#[tokio::test]
async fn explain_json_shows_each_events_inputs_and_format_and_why_the_order_is_inconsistent() {
    let (db, jobs) = two_shapes_and_a_row_ahead().await;

    let story = explain_json(&db, jobs.path(), "ped-7").await;

    let inputs: Vec<&Value> = story["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["inputs"])
        .collect();
    assert_eq!(
        inputs,
        [
            &json!({"format": "current", "valor_centavos": 10000, "valor": null, "percentual": "5.0"}),
            &json!({"format": "older", "valor_centavos": 15990, "valor": "159.90", "percentual": "5"}),
        ]
    );
    assert_eq!(story["events"][1]["commission_cents"], 800);
    assert_eq!(story["events"][1]["rule"], "calcularComissao/2");
    assert_eq!(
        (&story["expected_cents"], &story["consistent"]),
        (&json!(800), &json!(false))
    );
    assert_eq!(
        story["reason"],
        "versão 3 na tabela, o arquivo só tem a versão 2"
    );
}

#[tokio::test]
async fn explain_says_in_words_that_the_row_is_missing_or_its_amount_differs() {
    let (db, jobs) = two_shapes_and_a_row_ahead().await;

    let missing = explain_json(&db, jobs.path(), "ped-8").await;
    sqlx::query(
        "insert into comissao (pedido_id, valor_centavos, versao_evento) values ('ped-8', 7, 1)",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    let wrong = explain_json(&db, jobs.path(), "ped-8").await;

    assert_eq!(
        missing["reason"],
        "nenhuma linha em comissao; o arquivo implica R$ 5,00 (versão 1)"
    );
    assert_eq!(
        wrong["reason"],
        "valor na tabela R$ 0,07, o arquivo implica R$ 5,00"
    );
}

#[tokio::test]
async fn explain_text_shows_the_inputs_of_an_upcast_event_and_the_reason() {
    let (db, jobs) = two_shapes_and_a_row_ahead().await;

    let out = run_bin_within(&db.url, jobs.path(), &["explain", "ped-7"]).await;

    assert_success(&out, "explain");
    let text = stdout(&out);
    assert!(
        text.contains("inputs: valorCentavos 10000, percentual 5.0 (current shape)"),
        "{text}"
    );
    assert!(
        text.contains("inputs: valor 159.90 -> valorCentavos 15990, percentual 5 (older shape, upcast on read)"),
        "{text}"
    );
    assert!(
        text.contains("INCONSISTENT: versão 3 na tabela, o arquivo só tem a versão 2"),
        "{text}"
    );
}
