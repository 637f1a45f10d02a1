//! History as a tool: the commission table as the archive says it stood at a moment
//! (`comissao --as-of`, `explain --as-of`), and the orders whose value changed between two
//! moments (`--compare-to`) — each equal to an independent computation from the events written.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, TimeZone, Utc};
use replay_ledger_core::domain::Event;
use serde_json::{json, Value};

use crate::helpers::*;

/// Noon UTC of day `d` of October 2026.
pub(crate) fn october(d: u32, hour: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 10, d, hour, 0, 0).unwrap()
}

fn event(posicao: i64, pedido: &str, versao: i64, at: DateTime<Utc>, payload: Value) -> Event {
    Event {
        posicao,
        id: format!("evt-{posicao}"),
        tipo: "pedido.pago".into(),
        pedido_id: pedido.into(),
        versao,
        payload,
        ocorrido_em: at,
    }
}

/// An archive over five days: orders paid and re-paid in new versions, a version archived late
/// (a higher `versao` that occurred before a lower one's archiving), a rejected newest event, an
/// older-shape payload, and an event of another type.
fn archive() -> Vec<Event> {
    let cur = |v: i64, p: i64| json!({"valorCentavos": v, "percentual": p});
    let mut events = Vec::new();
    let mut add = |pedido: &str, versao: i64, at: DateTime<Utc>, payload: Value| {
        let posicao = events.len() as i64 + 1;
        events.push(event(posicao, pedido, versao, at, payload));
    };
    add("ped-a", 1, october(10, 9), cur(10_000, 5));
    add("ped-b", 1, october(10, 15), cur(12_345, 3));
    add("ped-a", 2, october(11, 10), cur(20_000, 5));
    add(
        "ped-c",
        1,
        october(11, 23),
        json!({"valor": "159.90", "percentual": "5"}),
    );
    add("ped-b", 3, october(12, 8), cur(50_000, 2));
    add("ped-b", 2, october(12, 9), cur(40_000, 2)); // older version, archived later
    add(
        "ped-a",
        3,
        october(13, 11),
        json!({"valorCentavos": "oops", "percentual": 5}),
    );
    add("ped-d", 1, october(13, 12), cur(7_777, 10));
    add("ped-c", 2, october(14, 1), cur(33_333, 7));
    let mut other = event(99, "ped-a", 9, october(11, 0), json!({}));
    other.tipo = "pedido.cancelado".into();
    events.push(other);
    events
}

/// The independent computation: per order, of the `pedido.pago` events that occurred by `at`
/// and are valid, the one with the highest (versao, posicao); commission = round half up of
/// cents × percent / 100 (the percentages here are integers).
fn expected_as_of(events: &[Event], at: DateTime<Utc>) -> BTreeMap<String, i64> {
    let mut best: BTreeMap<String, (i64, i64, i64)> = BTreeMap::new();
    for e in events
        .iter()
        .filter(|e| e.tipo == "pedido.pago" && e.ocorrido_em <= at)
    {
        let Some(cents) = cents_of(&e.payload) else {
            continue;
        };
        let p = &e.payload["percentual"];
        let pct = p.as_i64().or_else(|| p.as_str()?.parse().ok()).unwrap();
        let value = (cents * pct + 50).div_euclid(100);
        let entry = best.entry(e.pedido_id.clone()).or_insert((i64::MIN, 0, 0));
        if (e.versao, e.posicao) > (entry.0, entry.1) {
            *entry = (e.versao, e.posicao, value);
        }
    }
    best.into_iter().map(|(k, (_, _, v))| (k, v)).collect()
}

fn cents_of(payload: &Value) -> Option<i64> {
    if let Some(v) = payload["valorCentavos"].as_i64() {
        return Some(v);
    }
    let reais = payload["valor"].as_str()?;
    let (int, frac) = reais.split_once('.').unwrap_or((reais, "0"));
    Some(int.parse::<i64>().ok()? * 100 + format!("{frac:0<2}").parse::<i64>().ok()?)
}

pub(crate) async fn archived() -> (TestDb, tempfile::TempDir, Vec<Event>) {
    let db = TestDb::new().await;
    let events = archive();
    insert(&db.pool, &events).await;
    // Today's table: whatever it holds, the as-of table is computed from the archive alone.
    sqlx::query(
        "insert into comissao (pedido_id, valor_centavos, versao_evento) values ('ped-a', 1, 9)",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    let jobs = tempfile::tempdir().unwrap();
    (db, jobs, events)
}

async fn table_json(db: &TestDb, jobs: &std::path::Path, args: &[&str]) -> Value {
    let mut all = vec!["comissao"];
    all.extend_from_slice(args);
    all.push("--json");
    let out = run_bin_within(&db.url, jobs, &all).await;
    assert_success(&out, "comissao --json");
    serde_json::from_str(&stdout(&out)).expect("comissao --json is one JSON document")
}

fn rows_of(table: &Value) -> BTreeMap<String, i64> {
    table["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let id = r["pedido_id"].as_str().unwrap().to_string();
            (id, r["valor_centavos"].as_i64().unwrap())
        })
        .collect()
}

#[tokio::test]
async fn the_table_as_of_three_moments_equals_an_independent_computation() {
    let (db, jobs, events) = archived().await;

    for at in [october(11, 12), october(12, 8), october(14, 0)] {
        let moment = at.to_rfc3339();
        let table = table_json(&db, jobs.path(), &["--as-of", &moment]).await;

        let expected = expected_as_of(&events, at);
        assert_eq!(rows_of(&table), expected, "as of {moment}");
        assert_eq!(
            table["totals"]["after_cents"].as_i64().unwrap(),
            expected.values().sum::<i64>()
        );
    }
}

#[tokio::test]
async fn a_bare_day_is_the_close_of_that_day_in_the_timezone() {
    let (db, jobs, events) = archived().await;

    // 2026-10-11 in São Paulo closes at 2026-10-12 03:00 UTC: ped-c (23:00 UTC) is in it.
    let table = table_json(
        &db,
        jobs.path(),
        &["--as-of", "2026-10-11", "--timezone", "America/Sao_Paulo"],
    )
    .await;

    let close = october(12, 3) - Duration::microseconds(1);
    assert_eq!(rows_of(&table), expected_as_of(&events, close));
    assert!(rows_of(&table).contains_key("ped-c"));
}

#[tokio::test]
async fn compare_to_lists_exactly_the_orders_whose_value_changed_between_the_moments() {
    let (db, jobs, events) = archived().await;
    let (then, now) = (october(11, 12), october(14, 12));

    let table = table_json(
        &db,
        jobs.path(),
        &[
            "--as-of",
            &then.to_rfc3339(),
            "--compare-to",
            &now.to_rfc3339(),
        ],
    )
    .await;

    let (before, after) = (expected_as_of(&events, then), expected_as_of(&events, now));
    let expected: Vec<Value> = after
        .iter()
        .filter(|(id, v)| before.get(*id) != Some(v))
        .map(|(id, v)| {
            let antes = before.get(id).copied();
            json!({"pedido_id": id, "antes": antes, "depois": v, "diferenca": v - antes.unwrap_or(0)})
        })
        .collect();
    assert_eq!(table["rows"].as_array().unwrap(), &expected);
    assert!(!expected.is_empty());
}

#[tokio::test]
async fn the_csv_of_a_comparison_has_the_diff_downloads_shape() {
    let (db, jobs, events) = archived().await;
    let file = jobs.path().join("changes.csv");
    let (then, now) = (october(12, 8), october(14, 12));

    let out = run_bin_within(
        &db.url,
        jobs.path(),
        &[
            "comissao",
            "--as-of",
            &now.to_rfc3339(),
            "--since",
            &then.to_rfc3339(),
            "--csv",
            file.to_str().unwrap(),
        ],
    )
    .await;

    assert_success(&out, "comissao --csv");
    let csv = std::fs::read_to_string(&file).unwrap();
    let (before, after) = (expected_as_of(&events, then), expected_as_of(&events, now));
    let mut expected = String::from("\u{feff}pedido_id,antes,depois,diferenca\r\n");
    for (id, v) in after.iter().filter(|(id, v)| before.get(*id) != Some(v)) {
        let antes = before.get(id).copied();
        let shown = antes.map(|a| a.to_string()).unwrap_or_default();
        expected += &format!("{id},{shown},{v},{}\r\n", v - antes.unwrap_or(0));
    }
    assert_eq!(csv, expected);
}

#[tokio::test]
async fn the_xlsx_of_the_table_holds_one_row_per_order() {
    let (db, jobs, events) = archived().await;
    let file = jobs.path().join("comissao.xlsx");

    let out = run_bin_within(
        &db.url,
        jobs.path(),
        &[
            "comissao",
            "--as-of",
            "2026-10-31",
            "--xlsx",
            file.to_str().unwrap(),
        ],
    )
    .await;

    assert_success(&out, "comissao --xlsx");
    let mut zip = zip::ZipArchive::new(std::fs::File::open(&file).unwrap()).unwrap();
    let mut sheet = String::new();
    std::io::Read::read_to_string(
        &mut zip.by_name("xl/worksheets/sheet1.xml").unwrap(),
        &mut sheet,
    )
    .unwrap();
    let orders = expected_as_of(&events, october(31, 23));
    assert_eq!(sheet.matches("<row ").count(), orders.len() + 1, "{sheet}");
}

#[tokio::test]
async fn explain_as_of_tells_what_the_table_would_have_said_then() {
    let (db, jobs, events) = archived().await;
    let at = october(12, 8);

    let out = run_bin_within(
        &db.url,
        jobs.path(),
        &["explain", "ped-b", "--json", "--as-of", &at.to_rfc3339()],
    )
    .await;

    assert_success(&out, "explain --as-of");
    let story: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let expected = expected_as_of(&events, at)["ped-b"];
    assert_eq!(story["expected_cents"].as_i64(), Some(expected));
    assert_eq!(story["events"].as_array().unwrap().len(), 2, "{story}");
    assert!(story["as_of"].is_string());
}

#[tokio::test]
async fn a_moment_that_cannot_be_read_exits_2() {
    let (db, jobs, _) = archived().await;

    let out = run_bin_within(&db.url, jobs.path(), &["comissao", "--as-of", "ontem"]).await;

    assert_exits_saying(&out, 2, "--as-of");
}

#[tokio::test]
async fn a_moment_before_what_postgresql_holds_exits_2_before_printing_or_writing_anything() {
    let (db, jobs, _) = archived().await;
    let csv = jobs.path().join("table.csv");

    let printed =
        run_bin_within(&db.url, jobs.path(), &["comissao", "--as-of=-262143-01-01"]).await;
    let written = run_bin_within(
        &db.url,
        jobs.path(),
        &[
            "comissao",
            "--as-of=-262143-01-01",
            "--csv",
            csv.to_str().unwrap(),
        ],
    )
    .await;

    assert_exits_saying(&printed, 2, "earliest moment PostgreSQL holds");
    assert_eq!(stdout(&printed), "", "no header before the refusal");
    assert_exits_saying(&written, 2, "earliest moment PostgreSQL holds");
    assert!(!csv.exists(), "no file written");
}

/// An order's commission per the SQL below, independent of the program: of the `pedido.pago`
/// events that occurred by `at` and were archived by `known` (an unknown archive time counts as
/// known), valid ones (a whole `valorCentavos`, a numeric `percentual`), the one with the highest
/// (versao, posicao); `round(valor × percentual / 100)`.
async fn sql_reading(
    pool: &sqlx::PgPool,
    at: DateTime<Utc>,
    known: Option<DateTime<Utc>>,
) -> BTreeMap<String, i64> {
    let rows: Vec<(String, i64)> = sqlx::query_as(
        r#"
        select distinct on (pedido_id) pedido_id,
               round((payload->>'valorCentavos')::numeric
                     * (payload->>'percentual')::numeric / 100)::bigint
        from evento_arquivado
        where tipo = 'pedido.pago' and ocorrido_em <= $1
          and ($2::timestamptz is null or arquivado_em is null or arquivado_em <= $2)
          and jsonb_typeof(payload->'valorCentavos') = 'number'
          and jsonb_typeof(payload->'percentual') = 'number'
          and (payload->>'valorCentavos')::numeric = trunc((payload->>'valorCentavos')::numeric)
        order by pedido_id, versao desc, posicao desc
        "#,
    )
    .bind(at)
    .bind(known)
    .fetch_all(pool)
    .await
    .expect("the SQL reading");
    rows.into_iter().collect()
}

fn november(d: u32, hour: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, d, hour, 0, 0).unwrap()
}

/// A month closed on October 31 and events archived after the close: an order re-paid on Oct 30
/// whose new version reached the archive on Nov 2, an order paid on Oct 29 archived Nov 3, a
/// rejected late version, an order of November; the rest archived as they occurred.
async fn late_archive() -> (TestDb, tempfile::TempDir) {
    let db = TestDb::new().await;
    let pay = |v: i64| json!({"valorCentavos": v, "percentual": 10});
    // (pedido, versao, occurred, archived, payload)
    let rows = [
        ("ped-1", 1, october(10, 12), october(10, 13), pay(5_000)),
        ("ped-2", 1, october(20, 12), october(20, 13), pay(7_000)),
        ("ped-4", 1, october(5, 12), october(5, 13), pay(1_000)),
        ("ped-1", 2, october(30, 12), november(2, 9), pay(10_000)),
        ("ped-3", 1, october(29, 12), november(3, 9), pay(3_000)),
        (
            "ped-4",
            2,
            october(31, 22),
            november(1, 9),
            json!({"valorCentavos": "oops", "percentual": 10}),
        ),
        ("ped-5", 1, november(1, 12), november(1, 13), pay(9_000)),
        ("ped-2", 1, october(20, 12), october(20, 14), pay(7_000)),
    ];
    let events: Vec<Event> = rows
        .iter()
        .enumerate()
        .map(|(i, (pedido, versao, at, _, payload))| {
            event(i as i64 + 1, pedido, *versao, *at, payload.clone())
        })
        .collect();
    insert(&db.pool, &events).await;
    for (i, (.., archived, _)) in rows.iter().enumerate() {
        sqlx::query("update evento_arquivado set arquivado_em = $1 where posicao = $2")
            .bind(archived)
            .bind(i as i64 + 1)
            .execute(&db.pool)
            .await
            .unwrap();
    }
    (db, tempfile::tempdir().unwrap())
}

#[tokio::test]
async fn as_known_at_the_close_leaves_late_events_out_and_the_restatements_list_them() {
    let (db, jobs) = late_archive().await;
    let close = Utc.with_ymd_and_hms(2026, 10, 31, 23, 59, 59).unwrap();

    let known_then = table_json(
        &db,
        jobs.path(),
        &["--as-of", "2026-10-31", "--known-at", "2026-10-31"],
    )
    .await;
    let today = table_json(&db, jobs.path(), &["--as-of", "2026-10-31"]).await;
    let restated = table_json(
        &db,
        jobs.path(),
        &[
            "--as-of",
            "2026-10-31",
            "--known-at",
            "2026-10-31",
            "--restated",
        ],
    )
    .await;

    let then = sql_reading(&db.pool, close, Some(close)).await;
    let now = sql_reading(&db.pool, close, None).await;
    assert_eq!(rows_of(&known_then), then, "October as known at its close");
    assert_eq!(rows_of(&today), now, "October as read today");
    assert_eq!(then.get("ped-1"), Some(&500), "the books closed at R$ 5,00");
    assert_eq!(now.get("ped-1"), Some(&1_000), "today's reading of October");
    assert!(!then.contains_key("ped-3") && now.contains_key("ped-3"));
    let listed: BTreeMap<String, (Option<i64>, i64)> = restated["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["pedido_id"].as_str().unwrap().to_string(),
                (r["antes"].as_i64(), r["depois"].as_i64().unwrap()),
            )
        })
        .collect();
    let expected: BTreeMap<String, (Option<i64>, i64)> = now
        .iter()
        .filter(|(id, v)| then.get(*id) != Some(v))
        .map(|(id, v)| (id.clone(), (then.get(id).copied(), *v)))
        .collect();
    assert_eq!(
        listed, expected,
        "the restatements are the readings' differences"
    );
    assert_eq!(
        listed.keys().collect::<Vec<_>>(),
        ["ped-1", "ped-3"],
        "the late re-payment and the late order; not the rejected late version"
    );
    assert!(restated["known_at"].is_string(), "{restated}");
    assert_eq!(restated["totals"]["orders"], 2);
}

#[tokio::test]
async fn as_known_at_agrees_with_as_of_when_nothing_was_archived_late() {
    let (db, jobs) = late_archive().await;
    // Every event archived a minute after it occurred.
    sqlx::query("update evento_arquivado set arquivado_em = ocorrido_em + interval '1 minute'")
        .execute(&db.pool)
        .await
        .unwrap();

    for at in [october(15, 0), october(30, 18), november(2, 0)] {
        let moment = at.to_rfc3339();
        let as_of = table_json(&db, jobs.path(), &["--as-of", &moment]).await;
        let known = table_json(
            &db,
            jobs.path(),
            &["--as-of", &moment, "--known-at", &moment],
        )
        .await;
        let restated = table_json(
            &db,
            jobs.path(),
            &["--as-of", &moment, "--known-at", &moment, "--restated"],
        )
        .await;

        let expected = sql_reading(&db.pool, at, Some(at)).await;
        assert_eq!(rows_of(&known), expected, "as known at {moment}");
        assert_eq!(rows_of(&as_of), expected, "as of {moment}");
        assert_eq!(restated["rows"], json!([]), "nothing restated at {moment}");
    }
}

#[tokio::test]
async fn restated_without_known_at_is_refused_with_exit_2() {
    let (db, jobs) = late_archive().await;
    let out = run_bin_within(
        &db.url,
        jobs.path(),
        &["comissao", "--as-of", "2026-10-31", "--restated"],
    )
    .await;
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--known-at"), "{}", stderr(&out));
}

/// `explain --as-of` judges today's row against today's archive (it once called a right row
/// "inconsistente" as of any past date), and tells when each event reached the archive.
#[tokio::test]
async fn explain_as_of_judges_todays_row_by_today_and_tells_when_each_event_was_archived() {
    let (db, jobs) = late_archive().await;
    // Today's row is what the whole archive implies: R$ 10,00 (version 2).
    sqlx::query(
        "insert into comissao (pedido_id, valor_centavos, versao_evento) values ('ped-1', 1000, 2)",
    )
    .execute(&db.pool)
    .await
    .unwrap();

    let out = run_bin_within(
        &db.url,
        jobs.path(),
        &["explain", "ped-1", "--json", "--as-of", "2026-10-20"],
    )
    .await;

    assert_success(&out, "explain --as-of");
    let story: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(
        story["expected_cents"], 500,
        "what October 20 implied: {story}"
    );
    assert_eq!(story["consistent"], true, "today's row is right: {story}");
    assert!(story.get("reason").is_none(), "{story}");
    let all = run_bin_within(&db.url, jobs.path(), &["explain", "ped-1", "--json"]).await;
    let all: Value = serde_json::from_str(&stdout(&all)).unwrap();
    let archived: Vec<&str> = all["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["arquivado_em"].as_str().unwrap())
        .collect();
    assert_eq!(archived, ["2026-10-10T13:00:00Z", "2026-11-02T09:00:00Z"]);
    let text = run_bin_within(
        &db.url,
        jobs.path(),
        &["explain", "ped-1", "--as-of", "2026-10-20"],
    )
    .await;
    assert!(
        stdout(&text).contains("today: consistent"),
        "{}",
        stdout(&text)
    );
}

/// Over generated archives (ties of `versao`, invalid newest versions, positions out of order),
/// with event times spread over October and each event archived 0–5 days after it occurred:
/// the table as of and as known at several moments, and the restatements, equal the SQL
/// readings.
#[tokio::test]
async fn as_of_and_as_known_at_over_generated_archives_equal_the_sql_readings() {
    for seed in [3, 17] {
        let db = TestDb::new().await;
        insert(&db.pool, &crate::differential::generated_archive(seed, 40)).await;
        sqlx::query(
            "update evento_arquivado set ocorrido_em = timestamptz '2026-10-01 00:00Z' \
             + ((hashtext(id)::bigint & 2147483647) % 30) * interval '1 day' \
             + ((hashtext(id || 'h')::bigint & 2147483647) % 24) * interval '1 hour'",
        )
        .execute(&db.pool)
        .await
        .unwrap();
        sqlx::query(
            "update evento_arquivado set arquivado_em = ocorrido_em \
             + ((hashtext(id || 'late')::bigint & 2147483647) % 6) * interval '1 day'",
        )
        .execute(&db.pool)
        .await
        .unwrap();
        let jobs = tempfile::tempdir().unwrap();
        let mut restatements = 0;
        for (at, known) in [
            (october(10, 0), Some(october(10, 0))),
            (october(20, 12), Some(october(25, 0))),
            (october(31, 23), Some(october(31, 23))),
            (october(31, 23), None),
        ] {
            let mut args = vec!["--as-of".to_string(), at.to_rfc3339()];
            if let Some(k) = known {
                args.extend(["--known-at".to_string(), k.to_rfc3339()]);
            }
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let table = table_json(&db, jobs.path(), &args).await;
            let then = sql_reading(&db.pool, at, known).await;
            assert_eq!(
                rows_of(&table),
                then,
                "seed {seed}, as of {at}, known at {known:?}"
            );
            if known.is_none() {
                continue;
            }
            let mut restating = args.clone();
            restating.push("--restated");
            let restated = table_json(&db, jobs.path(), &restating).await;
            let now = sql_reading(&db.pool, at, None).await;
            let listed: BTreeMap<String, (Option<i64>, i64)> = restated["rows"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| {
                    (
                        r["pedido_id"].as_str().unwrap().to_string(),
                        (r["antes"].as_i64(), r["depois"].as_i64().unwrap()),
                    )
                })
                .collect();
            let expected: BTreeMap<String, (Option<i64>, i64)> = now
                .iter()
                .filter(|(id, v)| then.get(*id) != Some(v))
                .map(|(id, v)| (id.clone(), (then.get(id).copied(), *v)))
                .collect();
            assert_eq!(
                listed, expected,
                "seed {seed}, restated at {at} since {known:?}"
            );
            restatements += listed.len();
        }
        assert!(
            restatements > 0,
            "seed {seed}: late events restate some order"
        );
    }
}
