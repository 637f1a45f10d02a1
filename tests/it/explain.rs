//! `explain PEDIDO`: one order's story — its events and what the rule makes of each, its row
//! against the value the archive implies, the corrections by execution, the effect keys — agrees
//! with the tables; an unknown order exits 2; archive text reaches the terminal inert.

use serde_json::{json, Value};
use testkit::sink::Behavior;

use crate::helpers::*;

const JOB: &str = "replay-2026-10-14-v2";

/// Order `ped-1` in three versions (the third rejected by the rule), `ped-2` beside it, the
/// buggy value in `comissao`, and a real run that corrected it and notified the seller.
pub(crate) async fn multi_version_order() -> (TestDb, tempfile::TempDir) {
    let mut events = vec![
        paid(1, "ped-1", 1, 10_000, 5.0),
        paid(2, "ped-1", 2, 20_000, 5.0),
        paid(3, "ped-2", 1, 12_345, 2.5),
        paid(4, "ped-1", 3, 0, 5.0),
    ];
    events[3].payload = json!({"valorCentavos": "30000", "percentual": 5});
    let db = TestDb::new().await;
    insert(&db.pool, &events).await;
    sqlx::query(
        "insert into comissao (pedido_id, valor_centavos, versao_evento) values ('ped-1', 100, 2)",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    let provider = sink(Behavior::default()).await;
    let jobs = jobs_dir(&provider.url(), &JobSpec::default());
    assert_success(
        &run_bin_within(&db.url, jobs.path(), &["run", JOB]).await,
        "the real run",
    );
    (db, jobs)
}

/// `explain ARGS --json`, parsed.
pub(crate) async fn explain_json(db: &TestDb, jobs: &std::path::Path, pedido: &str) -> Value {
    let out = run_bin_within(&db.url, jobs, &["explain", pedido, "--json"]).await;
    assert_success(&out, "explain --json");
    serde_json::from_str(&stdout(&out)).expect("explain --json is JSON")
}

#[tokio::test]
async fn explain_json_agrees_with_the_tables_for_a_multi_version_order() {
    let (db, jobs) = multi_version_order().await;

    let story = explain_json(&db, jobs.path(), "ped-1").await;

    let keys: Vec<&str> = story
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "comissao",
            "consistent",
            "corrections",
            "effects",
            "events",
            "expected_cents",
            "pedido_id"
        ]
    );
    let events: Vec<(i64, String, i64)> = sqlx::query_as(
        "select posicao, id, versao from evento_arquivado where pedido_id = 'ped-1' order by posicao",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap();
    let told: Vec<(i64, String, i64)> = story["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["posicao"].as_i64().unwrap(),
                e["id"].as_str().unwrap().into(),
                e["versao"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(told, events);
    let implied: Vec<&Value> = story["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["commission_cents"])
        .collect();
    assert_eq!(implied, [&json!(500), &json!(1000), &Value::Null]);
    assert!(story["events"][2]["rejected"]
        .as_str()
        .unwrap()
        .starts_with("payload de pedido.pago invalido"));
    let (valor, versao): (i64, i64) = sqlx::query_as(
        "select valor_centavos, versao_evento from comissao where pedido_id = 'ped-1'",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(
        (
            story["comissao"]["valor_centavos"].as_i64(),
            story["comissao"]["versao_evento"].as_i64()
        ),
        (Some(valor), Some(versao))
    );
    assert_eq!(story["expected_cents"], 1000);
    assert_eq!(story["consistent"], true);
    let corrections: Vec<(String, Option<i64>, i64)> = sqlx::query_as(
        "select execucao_id, antes, depois from reprocessamento_correcao where pedido_id = 'ped-1'",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap();
    assert_eq!(corrections, [(JOB.to_string(), Some(100), 1000)]);
    assert_eq!(story["corrections"][0]["execution"], JOB);
    assert_eq!(story["corrections"][0]["before_cents"], 100);
    assert_eq!(story["corrections"][0]["after_cents"], 1000);
    let ledger: Vec<(String, String, String)> = sqlx::query_as(
        "select chave, estado, execucao_id from efeito_aplicado where evento_id in ('evt-1', 'evt-2', 'evt-4') order by chave",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap();
    let effects: Vec<(String, String, String)> = story["effects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["key"].as_str().unwrap().into(),
                e["state"].as_str().unwrap().into(),
                e["execution"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(effects, ledger);
    assert!(story["effects"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["attempts"] == 1));
}

#[tokio::test]
async fn explain_says_when_the_row_differs_from_what_the_archive_implies() {
    let (db, jobs) = multi_version_order().await;
    sqlx::query("update comissao set valor_centavos = 7 where pedido_id = 'ped-2'")
        .execute(&db.pool)
        .await
        .unwrap();

    let story = explain_json(&db, jobs.path(), "ped-2").await;
    let text = run_bin_within(&db.url, jobs.path(), &["explain", "ped-2"]).await;

    assert_eq!(story["expected_cents"], 309);
    assert_eq!(story["comissao"]["valor_centavos"], 7);
    assert_eq!(story["consistent"], false);
    assert_success(&text, "explain");
    assert!(stdout(&text).contains("INCONSISTENT"), "{}", stdout(&text));
}

#[tokio::test]
async fn explaining_an_unknown_order_exits_2() {
    let db = TestDb::new().await;
    let jobs = jobs_dir("http://127.0.0.1:9/", &JobSpec::default());
    let long = "p".repeat(5000);

    for id in ["ped-404", long.as_str(), "ped\u{1b}[2J"] {
        let out = run_bin_within(&db.url, jobs.path(), &["explain", id]).await;

        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(!stderr(&out).contains('\u{1b}'), "{:?}", stderr(&out));
    }
}

#[tokio::test]
async fn explain_prints_archive_text_inert() {
    let db = TestDb::new().await;
    let mut event = paid(1, "ped-\u{1b}]0;x\u{7}", 1, 1000, 5.0);
    event.id = "evt-\u{1b}[2J\u{202e}".into();
    insert(&db.pool, &[event]).await;
    let jobs = jobs_dir("http://127.0.0.1:9/", &JobSpec::default());

    let out = run_bin_within(&db.url, jobs.path(), &["explain", "ped-\u{1b}]0;x\u{7}"]).await;

    assert_success(&out, "explain");
    let text = stdout(&out);
    assert!(text.contains("evt-\\u{1b}[2J\\u{202e}"), "{text}");
    assert!(
        !text.contains('\u{1b}') && !text.contains('\u{202e}') && !text.contains('\u{7}'),
        "{text:?}"
    );
}

#[tokio::test]
async fn an_order_id_longer_than_any_index_entry_is_archived_and_explained() {
    let db = TestDb::new().await;
    let long = "p".repeat(4000);
    insert(&db.pool, &[paid(1, &long, 1, 1000, 5.0)]).await;
    let jobs = jobs_dir("http://127.0.0.1:9/", &JobSpec::default());

    let story = explain_json(&db, jobs.path(), &long).await;

    assert_eq!(story["events"][0]["id"], "evt-1");
    assert!(story["events"][0]["rejected"]
        .as_str()
        .unwrap()
        .contains("longer than 1024 bytes"));
    assert_eq!(story["comissao"], Value::Null);
    assert_eq!(story["expected_cents"], Value::Null);
    assert_eq!(story["consistent"], true);
}
