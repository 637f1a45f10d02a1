//! `verify` (invariant `exact-reconciliation`), through the real binary: on a database made right
//! by a real replay it finds nothing; with faults planted on known days it reports exactly them,
//! per day in the timezone, and zeros elsewhere; it changes no row of any table; and the jobs it
//! emits take the wrong days through simulate → approve → run to a clean verify.

use std::collections::BTreeMap;
use std::path::Path;

use chrono::{DateTime, TimeZone, Utc};
use replay_ledger_core::domain::Event;
use serde_json::{json, Value};

use crate::helpers::*;

pub(crate) const TZ: &str = "America/Sao_Paulo";

/// `hh:mm` on 2026-10-`day` at -03:00 (São Paulo keeps no summer time since 2019).
pub(crate) fn local(day: u32, hour: u32, minute: u32) -> DateTime<Utc> {
    chrono::FixedOffset::west_opt(3 * 3600)
        .unwrap()
        .with_ymd_and_hms(2026, 10, day, hour, minute, 0)
        .unwrap()
        .with_timezone(&Utc)
}

pub(crate) fn order_paid(pedido: &str, versao: i64, payload: Value, at: DateTime<Utc>) -> Event {
    Event {
        posicao: 0,
        id: format!("evt-{pedido}-v{versao}"),
        tipo: "pedido.pago".into(),
        pedido_id: pedido.into(),
        versao,
        payload,
        ocorrido_em: at,
    }
}

/// Four days (12–15 October): ten orders a day, half-cent rounding cases, orders with two
/// versions on different days, and an older-shape payload; positions in time order.
fn four_days() -> Vec<Event> {
    let mut events = Vec::new();
    for day in 12..=15 {
        for i in 0..10 {
            let payload = json!({"valorCentavos": 1000 * (i + 1), "percentual": 5});
            events.push(order_paid(
                &format!("d{day}-{i}"),
                1,
                payload,
                local(day, 12, i as u32),
            ));
        }
    }
    let paid = |v: i64, p: f64| json!({"valorCentavos": v, "percentual": p});
    events.extend([
        order_paid("round-a", 1, paid(12345, 2.5), local(12, 9, 0)),
        order_paid("round-b", 1, paid(-5, 10.0), local(12, 9, 1)),
        order_paid("multi-1", 1, paid(1000, 5.0), local(12, 10, 0)),
        order_paid("multi-1", 2, paid(3000, 5.0), local(13, 10, 0)),
        order_paid("multi-2", 1, paid(2000, 5.0), local(13, 10, 1)),
        order_paid("multi-2", 2, paid(5000, 5.0), local(14, 10, 0)),
        order_paid(
            "old-1",
            1,
            json!({"valor": "159.90", "percentual": 5}),
            local(15, 10, 0),
        ),
    ]);
    events.sort_by_key(|e| e.ocorrido_em);
    for (i, e) in events.iter_mut().enumerate() {
        e.posicao = i as i64 + 1;
    }
    events
}

/// A jobs dir: the seller webhook, the live consumer's policy, and `fill`, a replay of the four
/// days that makes the database right.
pub(crate) fn jobs(sink_url: &str) -> tempfile::TempDir {
    let dir = jobs_dir(sink_url, &JobSpec::default());
    std::fs::write(
        dir.path().join("live.yaml"),
        "name: live\nkind: live\neffects:\n  notificar-vendedor: { mode: apply, on_failure: release }\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("fill.yaml"),
        "name: fill\nwindow:\n  from: 2026-10-12T00:00:00-03:00\n  to: 2026-10-16T00:00:00-03:00\neffects:\n  notificar-vendedor: { mode: apply, on_failure: release }\n",
    )
    .unwrap();
    dir
}

/// The four days archived, and replayed for real: every row and every key right.
pub(crate) async fn right_db(jobs: &Path) -> TestDb {
    let db = TestDb::new().await;
    insert(&db.pool, &four_days()).await;
    assert_success(
        &run_bin_within(&db.url, jobs, &["run", "fill"]).await,
        "run fill",
    );
    db
}

/// `verify` over the four days in São Paulo, with `extra` arguments: exit status and JSON.
pub(crate) async fn verify_json(db: &TestDb, jobs: &Path, extra: &[&str]) -> (i32, Value) {
    let mut args = vec![
        "verify",
        "--from",
        "2026-10-12",
        "--to",
        "2026-10-16",
        "--json",
    ];
    args.extend_from_slice(extra);
    let out = run_bin_within(&db.url, jobs, &args).await;
    let json = serde_json::from_str(stdout(&out).trim())
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", stdout(&out), stderr(&out)));
    (out.status.code().unwrap_or(-1), json)
}

/// Each day as `(day, [events, orders, wrong, missing, difference, effects missing, incerto])`.
fn per_day(json: &Value) -> Vec<(String, [i64; 7])> {
    json["days"]
        .as_array()
        .unwrap_or_else(|| panic!("days in {json}"))
        .iter()
        .map(|d| {
            let n = |k: &str| d[k].as_i64().unwrap_or_else(|| panic!("{k} in {d}"));
            let counts = [
                n("events"),
                n("orders"),
                n("orders_wrong"),
                n("orders_missing"),
                n("difference_cents"),
                n("effects_missing"),
                n("effects_uncertain"),
            ];
            (d["day"].as_str().unwrap().to_string(), counts)
        })
        .collect()
}

/// Every table of the database, as a checksum of its rows.
async fn every_table(db: &TestDb) -> BTreeMap<String, Option<String>> {
    let tables: Vec<String> =
        sqlx::query_scalar("select tablename::text from pg_tables where schemaname = 'public'")
            .fetch_all(&db.pool)
            .await
            .unwrap();
    let mut sums = BTreeMap::new();
    for table in tables {
        let sum: Option<String> = sqlx::query_scalar(&format!(
            "select md5(string_agg(t::text, ',' order by t::text)) from {table} t"
        ))
        .fetch_one(&db.pool)
        .await
        .unwrap();
        sums.insert(table, sum);
    }
    sums
}

pub(crate) async fn exec(db: &TestDb, sql: &str) {
    sqlx::query(sql).execute(&db.pool).await.expect(sql);
}

#[tokio::test]
async fn a_right_database_is_clean_with_multi_version_orders_rounding_and_older_shapes() {
    let provider = sink(dedup()).await;
    let jobs = jobs(&provider.url());
    let db = right_db(jobs.path()).await;

    let (code, json) = verify_json(&db, jobs.path(), &["--timezone", TZ]).await;

    assert_eq!(code, 0, "{json}");
    assert_eq!(json["clean"], true, "{json}");
    assert_eq!(json["effects_checked"], true, "{json}");
    let expected = [
        ("2026-10-12", [13, 12, 0, 0, 0, 0, 0]),
        ("2026-10-13", [12, 11, 0, 0, 0, 0, 0]),
        ("2026-10-14", [11, 11, 0, 0, 0, 0, 0]),
        ("2026-10-15", [11, 11, 0, 0, 0, 0, 0]),
    ]
    .map(|(d, c)| (d.to_string(), c));
    assert_eq!(per_day(&json), expected);
    let rounded: Vec<(String, i64, i64)> = commissions(&db.pool)
        .await
        .into_iter()
        .filter(|(p, _, _)| p.starts_with("round") || p.starts_with("old"))
        .collect();
    assert_eq!(
        rounded,
        [
            ("old-1".into(), 800, 1),
            ("round-a".into(), 309, 1),
            ("round-b".into(), 0, 1)
        ]
    );
}

#[tokio::test]
async fn planted_faults_are_reported_exactly_on_their_days_and_nothing_is_written() {
    let provider = sink(dedup()).await;
    let jobs = jobs(&provider.url());
    let db = right_db(jobs.path()).await;
    exec(&db, "update comissao set valor_centavos = valor_centavos + 7 where pedido_id in ('d13-0', 'd13-1')").await;
    exec(
        &db,
        "delete from comissao where pedido_id in ('d14-0', 'd14-1', 'd14-2')",
    )
    .await;
    exec(
        &db,
        "update comissao set valor_centavos = 100, versao_evento = 1 where pedido_id = 'multi-2'",
    )
    .await;
    exec(
        &db,
        "delete from efeito_aplicado where evento_id in ('evt-d15-0-v1', 'evt-d15-1-v1')",
    )
    .await;
    exec(
        &db,
        "update efeito_aplicado set estado = 'incerto' where evento_id = 'evt-d15-2-v1'",
    )
    .await;
    let before = every_table(&db).await;

    let (code, json) = verify_json(&db, jobs.path(), &["--timezone", TZ]).await;

    assert_eq!(code, 3, "{json}");
    assert_eq!(json["clean"], false, "{json}");
    let expected = [
        ("2026-10-12", [13, 12, 0, 0, 0, 0, 0]),
        ("2026-10-13", [12, 11, 2, 0, -14, 0, 0]),
        ("2026-10-14", [11, 11, 1, 3, 300 + 150, 0, 0]),
        ("2026-10-15", [11, 11, 0, 0, 0, 2, 1]),
    ]
    .map(|(d, c)| (d.to_string(), c));
    assert_eq!(per_day(&json), expected);
    assert_eq!(
        json["totals"],
        json!({"events": 47, "orders": 45, "orders_wrong": 3, "orders_missing": 3,
               "difference_cents": 436, "effects_missing": 2, "effects_uncertain": 1}),
    );
    assert_eq!(every_table(&db).await, before, "verify reads only");
    let text = run_bin_within(
        &db.url,
        jobs.path(),
        &[
            "verify",
            "--from",
            "2026-10-12",
            "--to",
            "2026-10-16",
            "--timezone",
            TZ,
        ],
    )
    .await;
    assert_eq!(text.status.code(), Some(3));
    let lines: Vec<String> = stdout(&text).lines().map(str::to_string).collect();
    let firsts: Vec<&str> = lines[2..6].iter().map(|l| &l[..10]).collect();
    assert_eq!(
        firsts,
        ["2026-10-13", "2026-10-14", "2026-10-15", "2026-10-12"],
        "days with differences first:\n{}",
        lines.join("\n")
    );
    assert!(lines[6].starts_with("total"), "{}", lines.join("\n"));
    assert!(
        stdout(&text).contains("--emit-jobs"),
        "what to do next:\n{}",
        lines.join("\n")
    );
}

#[tokio::test]
async fn the_timezone_puts_an_event_near_midnight_on_its_local_day() {
    let db = TestDb::new().await;
    let late = order_paid(
        "late",
        1,
        json!({"valorCentavos": 1000, "percentual": 5}),
        local(14, 22, 30),
    );
    insert(&db.pool, &[Event { posicao: 1, ..late }]).await;
    let no_jobs = Path::new("no-such-jobs-dir");

    let (code, sao_paulo) = verify_json(&db, no_jobs, &["--timezone", TZ]).await;
    let (_, utc) = verify_json(&db, no_jobs, &[]).await;

    assert_eq!(code, 3, "{sao_paulo}");
    assert_eq!(sao_paulo["effects_checked"], false, "{sao_paulo}");
    let missing_on = |json: &Value| -> Vec<String> {
        per_day(json)
            .into_iter()
            .filter(|(_, c)| c[3] == 1)
            .map(|(d, _)| d)
            .collect()
    };
    assert_eq!(missing_on(&sao_paulo), ["2026-10-14"]);
    assert_eq!(utc["timezone"], "UTC");
    assert_eq!(missing_on(&utc), ["2026-10-15"]);
}

#[tokio::test]
async fn emitted_jobs_pass_check_and_after_simulate_approve_and_run_the_days_verify_clean() {
    let provider = sink(dedup()).await;
    let jobs = jobs(&provider.url());
    let db = right_db(jobs.path()).await;
    exec(
        &db,
        "update comissao set valor_centavos = 1 where pedido_id = 'd13-4'",
    )
    .await;
    exec(
        &db,
        "delete from efeito_aplicado where evento_id = 'evt-d14-7-v1'",
    )
    .await;
    let dir = jobs.path().to_str().unwrap();
    let args = ["--timezone", TZ, "--job", "live", "--emit-jobs", dir];

    let (code, json) = verify_json(&db, jobs.path(), &args).await;

    assert_eq!(code, 3, "{json}");
    let check = run_bin(&db.url, jobs.path(), &["check"]).await;
    assert_success(&check, "check of the emitted jobs");
    for job in ["reconcile-2026-10-13", "reconcile-2026-10-14"] {
        let refused = run_bin_within(&db.url, jobs.path(), &["run", job]).await;
        assert_eq!(
            refused.status.code(),
            Some(1),
            "{job} is gated: {}",
            stderr(&refused)
        );
        for step in [
            vec!["run", job, "--simulate"],
            vec!["approve", job],
            vec!["run", job],
        ] {
            assert_success(
                &run_bin_within(&db.url, jobs.path(), &step).await,
                &step.join(" "),
            );
        }
    }
    let (code, json) = verify_json(&db, jobs.path(), &["--timezone", TZ]).await;
    assert_eq!((code, &json["clean"]), (0, &json!(true)), "{json}");
}

#[tokio::test]
async fn emit_jobs_never_follows_a_symlink_planted_at_a_jobs_name() {
    let provider = sink(dedup()).await;
    let jobs = jobs(&provider.url());
    let db = right_db(jobs.path()).await;
    exec(
        &db,
        "update comissao set valor_centavos = 1 where pedido_id = 'd14-4'",
    )
    .await;
    let emit = tempfile::tempdir().expect("emit dir");
    let outside = tempfile::tempdir().expect("outside dir");
    let target = outside.path().join("planted.yaml");
    std::os::unix::fs::symlink(&target, emit.path().join("reconcile-2026-10-14.yaml"))
        .expect("plant a dangling symlink");
    let dir = emit.path().to_str().unwrap();
    let args = ["--timezone", TZ, "--job", "live", "--emit-jobs", dir];

    let (code, json) = verify_json(&db, jobs.path(), &args).await;

    assert_eq!(code, 3, "{json}");
    assert!(!target.exists(), "a file was written outside the directory");
    let written = emit.path().join("reconcile-2026-10-14-2.yaml");
    let meta = std::fs::symlink_metadata(&written).expect("the job under the next suffix");
    assert!(meta.is_file());
    let text = std::fs::read_to_string(&written).expect("read the job");
    assert!(text.contains("name: reconcile-2026-10-14-2"), "{text}");
}

/// `verify` over generated archives (ties of `versao` side by side and far apart, invalid newest
/// versions, versions archived out of order, events of other types), from a `comissao` that is
/// the archive's answer — computed in SQL over `evento_arquivado`, not by the product
/// (`differential::archive_answer`) — with some values off and some rows missing: it counts
/// exactly those orders wrong and missing, the net difference they make, and every order the
/// answer has, for three seeds.
#[tokio::test]
async fn verify_over_generated_archives_counts_exactly_what_differs_from_the_archives_answer() {
    let provider = sink(dedup()).await;
    let jobs = jobs(&provider.url());
    for seed in [21u64, 22, 23] {
        let db = TestDb::new().await;
        insert(&db.pool, &crate::differential::generated_archive(seed, 120)).await;
        let answer = crate::differential::archive_answer(&db.pool).await;
        let (mut wrong, mut missing, mut difference) = (0i64, 0i64, 0i64);
        for (i, (pedido, valor, versao)) in answer.iter().enumerate() {
            if i % 11 == 3 {
                missing += 1;
                difference += valor;
                continue;
            }
            let off = if i % 7 == 2 { (i % 5 + 1) as i64 } else { 0 };
            if off != 0 {
                wrong += 1;
                difference -= off;
            }
            sqlx::query(
                "insert into comissao (pedido_id, valor_centavos, versao_evento) values ($1, $2, $3)",
            )
            .bind(pedido)
            .bind(valor + off)
            .bind(versao)
            .execute(&db.pool)
            .await
            .unwrap();
        }

        let (code, json) = verify_json(&db, jobs.path(), &["--timezone", TZ]).await;

        assert_eq!(code, 3, "seed {seed}: {json}");
        let totals = &json["totals"];
        assert_eq!(
            (
                totals["orders"].as_i64(),
                totals["orders_wrong"].as_i64(),
                totals["orders_missing"].as_i64(),
                totals["difference_cents"].as_i64()
            ),
            (
                Some(answer.len() as i64),
                Some(wrong),
                Some(missing),
                Some(difference)
            ),
            "seed {seed}: {json}"
        );
    }
}
