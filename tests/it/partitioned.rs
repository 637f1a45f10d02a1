//! The archive partitioned by month (`docs/src/archive.md`): the book's conversion script, run as
//! written, keeps every event and every promise of the archive; a run and `verify` over it say
//! and do exactly what they do over the plain table; and `EXPLAIN` shows that the statements of a
//! window and of verify's range read only the window's month.

use std::collections::BTreeSet;
use std::path::Path;

use chrono::{DateTime, Duration, Utc};
use serde_json::Value;

use crate::helpers::*;

const JOB: &str = "replay-2026-10-14-v2";
use replay_ledger_core::tables::archive::{self, reconcile, unsent};

/// The conversion script of the book, between the fences after its marker.
fn conversion_script() -> String {
    let book =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src/archive.md"))
            .expect("docs/src/archive.md");
    let marker = "<!-- partition-archive:";
    let after = &book[book.find(marker).expect("the script's marker")..];
    let start = after.find("```sql").expect("a sql block after the marker") + "```sql".len();
    after[start..start + after[start..].find("```").expect("its end")].to_string()
}

/// The window's orders (2026-10-14 at -03:00, all in October UTC), with orders of September and
/// November around them: one of them a second version of a window order, archived in November.
fn three_months() -> Vec<replay_ledger_core::domain::Event> {
    let mut events = paid_orders(10);
    let at = |y, m, d| chrono::TimeZone::with_ymd_and_hms(&Utc, y, m, d, 12, 0, 0).unwrap();
    for (i, when) in [
        (101, at(2026, 9, 3)),
        (102, at(2026, 9, 29)),
        (103, at(2026, 11, 2)),
    ] {
        let mut e = paid(i, &format!("ped-{i}"), 1, 1000 * i, 5.0);
        e.ocorrido_em = when;
        events.push(e);
    }
    let mut later = paid(104, "ped-3", 2, 7000, 10.0);
    later.ocorrido_em = at(2026, 11, 20);
    events.push(later);
    events
}

fn window() -> (DateTime<Utc>, DateTime<Utc>) {
    (day_start(), day_start() + Duration::days(1))
}

/// The archive's partitions a statement's plan reads, each with the alias it is read under.
fn partitions_read(plan: Value) -> BTreeSet<(String, String)> {
    fn walk(node: &Value, out: &mut BTreeSet<(String, String)>) {
        if let Some(name) = node.get("Relation Name").and_then(Value::as_str) {
            if name.starts_with("evento_arquivado") {
                let alias = node.get("Alias").and_then(Value::as_str).unwrap_or("");
                out.insert((name.to_string(), alias.to_string()));
            }
        }
        for child in node
            .get("Plans")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            walk(child, out);
        }
        if let Some(inner) = node.get("Plan") {
            walk(inner, out);
        }
    }
    let mut out = BTreeSet::new();
    for item in plan.as_array().into_iter().flatten() {
        walk(item, &mut out);
    }
    out
}

async fn explain<'q>(
    db: &TestDb,
    query: sqlx::query::QueryScalar<'q, sqlx::Postgres, Value, sqlx::postgres::PgArguments>,
) -> BTreeSet<(String, String)> {
    let plan = query
        .persistent(false)
        .fetch_one(&db.pool)
        .await
        .expect("explain");
    partitions_read(plan)
}

fn explained(sql: &str) -> String {
    format!("explain (format json) {sql}")
}

fn only(set: &BTreeSet<(String, String)>, alias: Option<&str>) -> BTreeSet<String> {
    set.iter()
        .filter(|(_, a)| alias.is_none_or(|x| x == a))
        .map(|(n, _)| n.clone())
        .collect()
}

#[tokio::test]
async fn a_partitioned_archive_is_run_and_verified_exactly_and_a_window_reads_only_its_month() {
    let events = three_months();
    let plain = seeded_db(&events, &[]).await;
    let parted = seeded_db(&events, &[]).await;
    let rows = |db: &TestDb| {
        let pool = db.pool.clone();
        async move {
            sqlx::query_as::<_, (i64, String, String, i64, String, Value)>(
                "select posicao, id, pedido_id, versao, xid_insercao::text, payload from evento_arquivado order by posicao",
            )
            .fetch_all(&pool)
            .await
            .unwrap()
        }
    };
    let archived = rows(&parted).await;
    sqlx::raw_sql(&conversion_script())
        .execute(&parted.pool)
        .await
        .expect("the book's conversion script runs as written");

    // Every event is there, with the transaction that archived it.
    assert_eq!(rows(&parted).await, archived);
    let kind: String =
        sqlx::query_scalar("select relkind::text from pg_class where relname = 'evento_arquivado'")
            .fetch_one(&parted.pool)
            .await
            .unwrap();
    assert_eq!(kind, "p", "evento_arquivado is partitioned");
    let months: Vec<(String, i64)> = sqlx::query_as(
        "select tableoid::regclass::text, count(*) from evento_arquivado group by 1 order by 1",
    )
    .fetch_all(&parted.pool)
    .await
    .unwrap();
    assert_eq!(
        months,
        vec![
            ("evento_arquivado_2026_09".to_string(), 2),
            ("evento_arquivado_2026_10".to_string(), 10),
            ("evento_arquivado_2026_11".to_string(), 2),
        ]
    );

    // The archive's promises hold: one event per id and per posicao, across months.
    let mut dup = paid(105, "ped-x", 1, 100, 5.0);
    dup.id = "evt-101".into();
    let refused = try_insert(&parted.pool, &[dup]).await.unwrap_err();
    assert_eq!(
        refused
            .as_database_error()
            .and_then(|e| e.code())
            .as_deref(),
        Some("23505"),
        "{refused}"
    );
    // A session with a TEMP table of the key table's name still cannot archive a duplicate: the
    // trigger's path is pinned, its temporary schema last.
    let mut session = parted.pool.acquire().await.unwrap();
    sqlx::query("create temp table evento_arquivado_chave (id text, posicao bigint)")
        .execute(&mut *session)
        .await
        .unwrap();
    let shadowed = sqlx::query(
        "insert into evento_arquivado (posicao, id, tipo, pedido_id, versao, payload, ocorrido_em) values (106, 'evt-102', 'pedido.pago', 'ped-z', 1, '{}', '2026-10-14 12:00+00')",
    )
    .execute(&mut *session)
    .await;
    let shadowed_place = sqlx::query(
        "insert into evento_arquivado (posicao, id, tipo, pedido_id, versao, payload, ocorrido_em) values (2, 'evt-other', 'pedido.pago', 'ped-z', 1, '{}', '2026-11-25 12:00+00')",
    )
    .execute(&mut *session)
    .await;
    drop(session.detach());
    for (what, refused) in [("an id", shadowed), ("a posicao", shadowed_place)] {
        let code = refused
            .expect_err(what)
            .as_database_error()
            .and_then(|e| e.code())
            .map(|c| c.to_string());
        assert_eq!(
            code.as_deref(),
            Some("23505"),
            "{what} archived twice behind a TEMP table"
        );
    }
    let mut same_place = paid(3, "ped-y", 1, 100, 5.0);
    same_place.id = "evt-new".into();
    same_place.ocorrido_em =
        chrono::TimeZone::with_ymd_and_hms(&Utc, 2026, 11, 25, 0, 0, 0).unwrap();
    assert!(
        try_insert(&parted.pool, &[same_place]).await.is_err(),
        "posicao 3 twice"
    );

    // EXPLAIN: each statement of a window, and verify's range, reads only October.
    let (from, to) = window();
    let october: BTreeSet<String> = ["evento_arquivado_2026_10".to_string()].into();
    let handled = vec!["pedido.pago".to_string()];
    let no_part: Option<i32> = None;
    let reads = [
        (
            "bounds",
            explain(
                &parted,
                sqlx::query_scalar(&explained(archive::BOUNDS_SQL))
                    .bind(from)
                    .bind(to),
            )
            .await,
        ),
        (
            "remaining",
            explain(
                &parted,
                sqlx::query_scalar(&explained(archive::REMAINING_SQL))
                    .bind(from)
                    .bind(to)
                    .bind(1_i64)
                    .bind(10_i64)
                    .bind(no_part)
                    .bind(no_part),
            )
            .await,
        ),
        (
            "read_batch",
            explain(
                &parted,
                sqlx::query_scalar(&explained(archive::READ_BATCH_SQL))
                    .bind(1_i64)
                    .bind(10_i64)
                    .bind(from)
                    .bind(to)
                    .bind(500_i64)
                    .bind(no_part)
                    .bind(no_part),
            )
            .await,
        ),
        (
            "fingerprint",
            explain(
                &parted,
                sqlx::query_scalar(&explained(archive::FINGERPRINT_SQL))
                    .bind(from)
                    .bind(to),
            )
            .await,
        ),
        (
            "unsent",
            explain(
                &parted,
                sqlx::query_scalar(&explained(unsent::UNSENT_SQL))
                    .bind(from)
                    .bind(to)
                    .bind(&handled)
                    .bind("notificar-vendedor"),
            )
            .await,
        ),
        (
            "verify events",
            explain(
                &parted,
                sqlx::query_scalar(&explained(reconcile::EVENTS_SQL))
                    .bind(from)
                    .bind(to)
                    .bind(&handled)
                    .bind(Some("notificar-vendedor")),
            )
            .await,
        ),
    ];
    for (what, read) in &reads {
        assert_eq!(only(read, None), october, "{what} reads {read:?}");
    }
    // verify finds its orders in October only; it then looks each order's other events up in
    // every month (by index): ped-3's version 2 is in November.
    let orders = explain(
        &parted,
        sqlx::query_scalar(&explained(reconcile::ORDERS_SQL))
            .bind(from)
            .bind(to)
            .bind("pedido.pago"),
    )
    .await;
    assert_eq!(only(&orders, Some("d")), october, "{orders:?}");

    // verify, a run and verify again say and do the same over both archives.
    let verify = |db: &TestDb, jobs: &Path| {
        let (url, jobs) = (db.url.clone(), jobs.to_path_buf());
        async move {
            let out = run_bin(
                &url,
                &jobs,
                &[
                    "verify",
                    "--from",
                    "2026-09-01",
                    "--to",
                    "2026-12-01",
                    "--timezone",
                    "America/Sao_Paulo",
                    "--json",
                ],
            )
            .await;
            let json: Value = serde_json::from_slice(&out.stdout)
                .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
            (
                out.status.code(),
                json["days"].clone(),
                json["totals"].clone(),
            )
        }
    };
    let mut outcomes = Vec::new();
    for db in [&plain, &parted] {
        let provider = sink(dedup()).await;
        let jobs = jobs_dir(&provider.url(), &JobSpec::default());
        let before = verify(db, jobs.path()).await;
        let run = run_bin(&db.url, jobs.path(), &["run", JOB, "--json"]).await;
        assert_success(&run, "the run");
        let summary: Value = serde_json::from_slice(&run.stdout).unwrap();
        let after = verify(db, jobs.path()).await;
        let mut keys: Vec<String> = provider.deliveries().into_keys().collect();
        keys.sort();
        outcomes.push((
            before,
            summary["orders_changed"].clone(),
            summary["total_after_cents"].clone(),
            commissions(&db.pool).await,
            keys,
            after,
        ));
    }
    assert_eq!(outcomes[1], outcomes[0]);
    let (before, orders_changed, _, _, keys, _) = &outcomes[1];
    assert_eq!(before.0, Some(3), "the buggy day is found: {before:?}");
    assert_eq!(
        orders_changed,
        &Value::from(9),
        "ped-3 is decided by November's version"
    );
    assert_eq!(keys.len(), 10);
}
