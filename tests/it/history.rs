//! History as a tool (issue 35): the commission table as the archive says it stood at a moment
//! (`comissao --as-of`, `explain --as-of`), and the orders whose value changed between two
//! moments (`--compare-to`) — each equal to an independent computation from the events written.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, TimeZone, Utc};
use replay_ledger::domain::Event;
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
