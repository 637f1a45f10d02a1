//! Odd events through a real run against PostgreSQL: a 5 MB payload, payloads nested deeper
//! than serde_json reads or holding numbers beyond `f64`, ids in odd Unicode, positions at both
//! ends of `i64`, commissions whose sum overflows `i64`, and windows of zero length or reversed.
//! Each event is applied or recorded as rejected; none stops the run or is skipped.

use chrono::{DateTime, Utc};
use replay_ledger_core::domain::Event;
use replay_ledger_core::engine::effects::idempotency_header;
use replay_ledger_core::services::runner::Ended;
use replay_ledger_core::tables::execution;
use serde_json::{json, Value};

use crate::helpers::*;

const JOB: &str = "replay-2026-10-14-v2";

/// Inside the job's window (2026-10-14 at -03:00).
fn inside_window() -> DateTime<Utc> {
    day_start() + chrono::Duration::hours(12)
}

fn event(posicao: i64, id: &str, pedido: &str, payload: Value) -> Event {
    Event {
        posicao,
        id: id.into(),
        tipo: "pedido.pago".into(),
        pedido_id: pedido.into(),
        versao: 1,
        payload,
        ocorrido_em: inside_window(),
    }
}

fn five_percent_of(valor: i64) -> Value {
    json!({"valorCentavos": valor, "percentual": 5})
}

/// Archives an event whose payload is given as JSON text (built by PostgreSQL, not serde).
async fn insert_raw(db: &TestDb, posicao: i64, id: &str, payload_sql: &str) {
    sqlx::query(&format!(
        "insert into evento_arquivado (posicao, id, tipo, pedido_id, versao, payload, ocorrido_em)
         values ($1, $2, 'pedido.pago', $2, 1, ({payload_sql})::jsonb, $3)"
    ))
    .bind(posicao)
    .bind(id)
    .bind(inside_window())
    .execute(&db.pool)
    .await
    .expect("archive a raw event");
}

async fn rejected_ids(db: &TestDb) -> Vec<String> {
    execution::rejected(&db.pool, JOB)
        .await
        .expect("read rejected")
        .into_iter()
        .map(|r| r.event_id)
        .collect()
}

async fn run_to_the_end(db: &TestDb, spec: &JobSpec, sink_url: &str) -> Ended {
    let jobs = jobs_dir(sink_url, spec);
    let report = run_job(db, jobs.path(), JOB, None, false)
        .await
        .unwrap_or_else(|e| panic!("the run failed: {e}"));
    report.ended
}

#[tokio::test]
async fn a_five_megabyte_payload_is_applied_like_any_other() {
    let db = TestDb::new().await;
    let mut payload = five_percent_of(1000);
    payload["anexo"] = Value::String("x".repeat(5 << 20));
    insert(&db.pool, &[event(1, "evt-big", "ped-big", payload)]).await;
    let provider = sink(dedup()).await;

    let ended = run_to_the_end(&db, &JobSpec::default(), &provider.url()).await;

    assert_eq!(ended, Ended::Finished);
    assert_eq!(commissions(&db.pool).await, vec![("ped-big".into(), 50, 1)]);
    assert_eq!(provider.delivery_count(), 1);
}

#[tokio::test]
async fn a_payload_nested_deeper_than_serde_json_reads_is_applied_on_its_own_fields() {
    let db = TestDb::new().await;
    let deep = "repeat('[', 10000) || '1' || repeat(']', 10000)";
    insert_raw(
        &db,
        1,
        "evt-deep-extra",
        &format!("'{{\"valorCentavos\": 1000, \"percentual\": 5, \"x\": ' || {deep} || '}}'"),
    )
    .await;
    insert_raw(
        &db,
        2,
        "evt-deep-amount",
        &format!("'{{\"valorCentavos\": ' || {deep} || ', \"percentual\": 5}}'"),
    )
    .await;
    insert(
        &db.pool,
        &[event(3, "evt-after", "ped-after", five_percent_of(2000))],
    )
    .await;
    // What a plain serde_json decode of the column does: an error for the whole batch.
    let plain: Result<Vec<Value>, _> = sqlx::query_scalar("select payload from evento_arquivado")
        .fetch_all(&db.pool)
        .await;
    assert!(plain.is_err(), "serde_json reads 10,000 levels now?");
    let provider = sink(dedup()).await;

    let ended = run_to_the_end(&db, &JobSpec::default(), &provider.url()).await;

    assert_eq!(ended, Ended::Finished);
    let expected = vec![
        ("evt-deep-extra".into(), 50, 1),
        ("ped-after".into(), 100, 1),
    ];
    assert_eq!(commissions(&db.pool).await, expected);
    assert_eq!(rejected_ids(&db).await, vec!["evt-deep-amount"]);
    assert_eq!(provider.delivery_count(), 2);
}

#[tokio::test]
async fn a_number_beyond_f64_rejects_its_event_and_the_run_goes_on() {
    let db = TestDb::new().await;
    insert_raw(
        &db,
        1,
        "evt-1e400",
        r#"'{"valorCentavos": 1e400, "percentual": 5}'"#,
    )
    .await;
    insert_raw(
        &db,
        2,
        "evt-tiny",
        r#"'{"valorCentavos": 1000, "percentual": 1e-400}'"#,
    )
    .await;
    insert(
        &db.pool,
        &[event(3, "evt-after", "ped-after", five_percent_of(2000))],
    )
    .await;
    let provider = sink(dedup()).await;

    let ended = run_to_the_end(&db, &JobSpec::default(), &provider.url()).await;

    assert_eq!(ended, Ended::Finished);
    let written: Vec<String> = commissions(&db.pool)
        .await
        .into_iter()
        .map(|c| c.0)
        .collect();
    assert!(written.contains(&"ped-after".to_string()), "{written:?}");
    assert!(rejected_ids(&db).await.contains(&"evt-1e400".to_string()));
}

/// Ids that break naive code: direction marks, emoji, combining marks, joiners, the BOM,
/// separators, quotes, escapes, percent signs and control characters.
fn odd_ids() -> Vec<String> {
    [
        "\u{202e}evt-rtl",
        "evt-\u{200f}\u{200e}",
        "evt-😀👩‍👩‍👧",
        "evt-e\u{301}",
        "evt-\u{feff}",
        "evt with space",
        "evt:with:colons",
        "evt-\"'`",
        "evt-\\x00",
        "evt-%41%",
        "evt-\n-nl",
        "evt-\u{1b}[31m",
        "evt-\t",
        "evt-\u{10ffff}",
        "evt-ü-latin1",
        "",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

#[tokio::test]
async fn ids_and_order_ids_in_odd_unicode_are_applied_and_keyed_exactly() {
    let db = TestDb::new().await;
    let events: Vec<Event> = odd_ids()
        .iter()
        .enumerate()
        .map(|(i, id)| {
            event(
                i as i64 + 1,
                id,
                &format!("ped-{id}"),
                five_percent_of(1000),
            )
        })
        .collect();
    insert(&db.pool, &events).await;
    let provider = sink(dedup()).await;

    let ended = run_to_the_end(&db, &JobSpec::default(), &provider.url()).await;

    assert_eq!(ended, Ended::Finished);
    let mut expected: Vec<(String, String)> = events
        .iter()
        .map(|e| (key(e), "concluido".to_string()))
        .collect();
    expected.sort();
    assert_eq!(ledger(&db.pool).await, expected);
    assert_eq!(commissions(&db.pool).await.len(), events.len());
    // Each event reached the provider once, under a key of its own, with its exact ids.
    assert_eq!(provider.delivery_count(), events.len());
    let mut bodies: Vec<(String, String)> = provider
        .received()
        .iter()
        .map(|r| {
            (
                r.body["eventoId"].as_str().unwrap_or_default().to_string(),
                r.body["pedidoId"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    bodies.sort();
    let mut sent: Vec<(String, String)> = events
        .iter()
        .map(|e| (e.id.clone(), e.pedido_id.clone()))
        .collect();
    sent.sort();
    assert_eq!(bodies, sent);
    // Keys HTTP cannot carry verbatim arrive percent-encoded, each distinct.
    let mut headers: Vec<String> = provider.received().into_iter().map(|r| r.key).collect();
    headers.sort();
    let mut expected: Vec<String> = events
        .iter()
        .map(|e| idempotency_header(&key(e)).into_owned())
        .collect();
    expected.sort();
    assert_eq!(headers, expected);
    assert!(
        headers
            .iter()
            .all(|h| h.bytes().all(|b| b.is_ascii_graphic())),
        "{headers:?}"
    );
}

#[test]
fn idempotency_headers_are_visible_ascii_and_distinct_for_distinct_keys() {
    assert_eq!(
        idempotency_header("evt-1:notificar-vendedor"),
        "evt-1:notificar-vendedor"
    );
    assert_eq!(idempotency_header("a b"), "a%20b");
    assert_eq!(idempotency_header("a%20b"), "a%2520b");
    assert_eq!(idempotency_header("é\n"), "%C3%A9%0A");
    let keys = ["a b", "a%20b", "a%2520b", "a\u{a0}b", "a\tb", "ab", "a+b"];
    let headers: std::collections::HashSet<String> = keys
        .iter()
        .map(|k| idempotency_header(k).into_owned())
        .collect();
    assert_eq!(headers.len(), keys.len());
}

#[tokio::test]
async fn nul_cannot_enter_the_archive_so_the_worker_never_meets_it() {
    let db = TestDb::new().await;
    let in_text = try_insert(&db.pool, &[event(1, "evt-\0", "ped", five_percent_of(1))]).await;
    let in_json = try_insert(
        &db.pool,
        &[event(
            2,
            "evt-2",
            "ped",
            json!({"valorCentavos": 1, "percentual": 5, "x": "a\u{0}b"}),
        )],
    )
    .await;
    let code = |r: Result<(), sqlx::Error>| match r {
        Err(sqlx::Error::Database(e)) => e.code().map(|c| c.into_owned()),
        other => panic!("PostgreSQL accepted a NUL: {other:?}"),
    };
    assert_eq!(code(in_text).as_deref(), Some("22021")); // invalid byte sequence
    assert_eq!(code(in_json).as_deref(), Some("22P05")); // untranslatable character
}

#[tokio::test]
async fn positions_at_both_ends_of_i64_are_each_applied_once() {
    let db = TestDb::new().await;
    let positions = [i64::MIN, i64::MIN + 1, -1, 0, 1, i64::MAX - 1, i64::MAX];
    let events: Vec<Event> = positions
        .iter()
        .enumerate()
        .map(|(i, p)| {
            event(
                *p,
                &format!("evt-{i}"),
                &format!("ped-{i}"),
                five_percent_of(1000),
            )
        })
        .collect();
    insert(&db.pool, &events).await;
    let provider = sink(dedup()).await;
    let spec = JobSpec {
        batch_size: 2,
        ..JobSpec::default()
    };

    let ended = run_to_the_end(&db, &spec, &provider.url()).await;

    assert_eq!(ended, Ended::Finished);
    assert_eq!(commissions(&db.pool).await.len(), positions.len());
    assert_eq!(
        keys_in_state(&db.pool, "concluido").await.len(),
        positions.len()
    );
    assert_eq!(provider.delivery_count(), positions.len());
    assert_eq!(checkpoint(&db.pool, JOB).await, Some(i64::MAX));
    // A new pass from the window's start finds everything done and sends nothing new.
    let jobs = jobs_dir(&provider.url(), &spec);
    run_job(&db, jobs.path(), JOB, None, true)
        .await
        .expect("restart");
    assert_eq!(provider.delivery_count(), positions.len());
    let status = run_bin_within(&db.url, jobs.path(), &["status"]).await;
    assert_success(&status, "status over a window spanning all of i64");
}

#[tokio::test]
async fn commissions_summing_beyond_i64_do_not_overflow_the_summary() {
    let db = TestDb::new().await;
    // 1,100 commissions of 9 × 10^15 cents (just under 2^53) sum past i64::MAX.
    let events: Vec<Event> = (1..=1_100)
        .map(|i| {
            event(
                i,
                &format!("evt-{i}"),
                &format!("ped-{i}"),
                json!({"valorCentavos": 9_000_000_000_000_000_i64, "percentual": 100}),
            )
        })
        .collect();
    insert(&db.pool, &events).await;
    let provider = sink(dedup()).await;
    let spec = JobSpec {
        batch_size: 500,
        concurrency: 16,
        ..JobSpec::default()
    };

    let ended = run_to_the_end(&db, &spec, &provider.url()).await;

    assert_eq!(ended, Ended::Finished);
    assert_eq!(commissions(&db.pool).await.len(), events.len());
    let jobs = jobs_dir(&provider.url(), &spec);
    let status = run_bin_within(&db.url, jobs.path(), &["status"]).await;
    assert_success(&status, "status after an overflowing sum");
}

#[tokio::test]
async fn a_window_of_zero_length_or_reversed_is_a_config_error_exit_2() {
    let db = TestDb::new().await;
    for (from, to) in [
        ("2026-10-14T00:00:00-03:00", "2026-10-14T00:00:00-03:00"),
        ("2026-10-14T00:00:00-03:00", "2026-10-14T03:00:00Z"),
        ("2026-10-15T00:00:00-03:00", "2026-10-14T00:00:00-03:00"),
    ] {
        let jobs = jobs_dir("http://127.0.0.1:9/", &JobSpec::default());
        let file = jobs.path().join(format!("{JOB}.yaml"));
        let text = std::fs::read_to_string(&file).expect("read job");
        let text = text
            .replace("2026-10-14T00:00:00-03:00", "FROM")
            .replace("2026-10-15T00:00:00-03:00", "TO")
            .replace("FROM", from)
            .replace("TO", to);
        std::fs::write(&file, text).expect("write job");
        for args in [vec!["check"], vec!["run", JOB]] {
            let out = run_bin_within(&db.url, jobs.path(), &args).await;
            let err = format!("{}{}", stdout(&out), stderr(&out));
            assert_eq!(out.status.code(), Some(2), "{args:?} {from}..{to}: {err}");
            let at = format!("{}:3:", file.display());
            assert!(
                err.contains(&at) && err.contains("empty or reversed"),
                "{err}"
            );
        }
    }
}

#[tokio::test]
async fn an_order_id_too_long_for_an_index_is_rejected_and_the_run_goes_on() {
    let db = TestDb::new().await;
    // 4,000 characters that do not compress: no btree index (comissao's key) can hold them.
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let long: String = (0..4_000)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            char::from(b'!' + (state % 90) as u8)
        })
        .collect();
    insert(
        &db.pool,
        &[
            event(1, "evt-long", &long, five_percent_of(1000)),
            event(2, "evt-after", "ped-after", five_percent_of(2000)),
        ],
    )
    .await;
    let provider = sink(dedup()).await;

    let ended = run_to_the_end(&db, &JobSpec::default(), &provider.url()).await;

    assert_eq!(ended, Ended::Finished);
    assert_eq!(
        commissions(&db.pool).await,
        vec![("ped-after".into(), 100, 1)]
    );
    assert_eq!(rejected_ids(&db).await, vec!["evt-long"]);
}

/// A provider that answers every call 200 with `body`.
async fn provider_answering(body: Vec<u8>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("local addr");
    let app = axum::Router::new().fallback(move || {
        let body = body.clone();
        async move { ([("content-type", "application/json")], body) }
    });
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/")
}

#[tokio::test]
async fn a_hostile_provider_answer_never_keeps_a_sent_effect_from_being_recorded() {
    let deep = format!("{}1{}", "[".repeat(10_000), "]".repeat(10_000));
    let answers: Vec<(&str, Vec<u8>)> = vec![
        ("a NUL in a string", br#"{"ok": "a\u0000b"}"#.to_vec()),
        ("JSON 10,000 levels deep", deep.into_bytes()),
        (
            "20 MB of JSON",
            format!(r#"{{"x": "{}"}}"#, "y".repeat(20 << 20)).into_bytes(),
        ),
        ("not JSON", b"\xff\xfe<html>".to_vec()),
    ];
    for (what, answer) in answers {
        let db = TestDb::new().await;
        insert(&db.pool, &paid_orders(3)).await;
        let url = provider_answering(answer).await;

        let ended = run_to_the_end(&db, &JobSpec::default(), &url).await;

        assert_eq!(ended, Ended::Finished, "{what}");
        assert_eq!(
            keys_in_state(&db.pool, "concluido").await.len(),
            3,
            "{what}"
        );
    }
}

/// An answer is kept as `resultado` up to 64 KiB: a receipt, small enough that a group commit of
/// a thousand completions stays within what one jsonb value may hold. A larger one is dropped,
/// and the effect is still recorded as sent.
#[tokio::test]
async fn a_providers_answer_is_kept_up_to_64_kib_and_a_larger_one_dropped() {
    let answer = |bytes: usize| format!(r#"{{"x": "{}"}}"#, "y".repeat(bytes)).into_bytes();
    for (what, body, kept) in [
        ("60 KiB", answer(60 << 10), true),
        ("100 KiB", answer(100 << 10), false),
    ] {
        let db = TestDb::new().await;
        insert(&db.pool, &paid_orders(3)).await;
        let url = provider_answering(body).await;

        let ended = run_to_the_end(&db, &JobSpec::default(), &url).await;

        assert_eq!(ended, Ended::Finished, "{what}");
        let stored: Vec<bool> = sqlx::query_scalar(
            "select resultado is not null from efeito_aplicado where estado = 'concluido'",
        )
        .fetch_all(&db.pool)
        .await
        .unwrap();
        assert_eq!(stored, vec![kept; 3], "{what}");
    }
}

/// What the engine reads of a payload is computed inside the query that reads the archive: the
/// planner inlines `payload_da_regra` into the scan's own expression. Called as a function
/// instead (as it was while it was declared more immutable than the functions it calls), it
/// cost ~40 µs an event, seventeen times the read itself, on every read for the rule.
#[tokio::test]
async fn the_rule_fields_of_a_payload_are_read_inside_the_archives_scan() {
    let db = TestDb::new().await;
    let plan: Vec<String> = sqlx::query_scalar(
        "explain (verbose) select payload_da_regra(payload) from evento_arquivado",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap();
    let plan = plan.join("\n");
    assert!(
        plan.contains("jsonb_build_object('valorCentavos'"),
        "the plan computes the rule's fields in the scan: {plan}"
    );
    assert!(
        !plan.contains("payload_da_regra(") && !plan.contains("campo_da_regra("),
        "the plan calls the functions row by row instead of inlining them: {plan}"
    );
}
