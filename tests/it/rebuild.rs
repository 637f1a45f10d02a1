//! The blue-green rebuild of `comissao` (`replay-ledger rebuild`): built from the whole
//! archive with the rule in force, swapped in after approval while the seed's JavaScript consumer
//! (tests/js/consumidor.mjs over the seed's aplicador) and the live consumer keep writing
//! `comissao` by name, rolled back, and resumed after SIGKILL. Every expectation is computed here
//! from the events the test wrote, not by the product.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::Signal;
use replay_ledger_core::domain::Event;
use serde_json::json;

use crate::helpers::*;

type Rows = BTreeMap<String, (i64, i64)>;

/// A jobs dir with the live consumer's job (effects suppressed: this is about `comissao`).
fn live_jobs() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("effects.yaml"),
        "notificar-vendedor:\n  webhook:\n    url: http://127.0.0.1:9/\n    timeout: 1s\n  idempotent: true\n  concurrency: 1\n",
    )
    .expect("effects.yaml");
    std::fs::write(
        dir.path().join("live.yaml"),
        "name: live\nkind: live\nbatch_size: 50\neffects:\n  notificar-vendedor: { mode: suppress, on_failure: keep }\n",
    )
    .expect("live.yaml");
    dir
}

fn event(posicao: i64, pedido: &str, versao: i64, payload: serde_json::Value) -> Event {
    Event {
        payload,
        ..paid(posicao, pedido, versao, 0, 0.0)
    }
}

/// History: `ped-1..=n` (a second version for every third), and ten orders archived in the older
/// payload shape (`valor` in reais), which only the rule in force upcasts. Returns the events and
/// what they imply (amounts chosen so no rounding is involved: 5 % of a multiple of 100 cents).
fn history(n: i64) -> (Vec<Event>, Rows) {
    let (mut events, mut expected) = (Vec::new(), Rows::new());
    let mut posicao = 0;
    for i in 1..=n {
        posicao += 1;
        events.push(event(
            posicao,
            &format!("ped-{i}"),
            1,
            json!({"valorCentavos": 1000 * i, "percentual": 5}),
        ));
        expected.insert(format!("ped-{i}"), (50 * i, 1));
    }
    for i in (3..=n).step_by(3) {
        posicao += 1;
        events.push(event(
            posicao,
            &format!("ped-{i}"),
            2,
            json!({"valorCentavos": 2000 * i, "percentual": 5}),
        ));
        expected.insert(format!("ped-{i}"), (100 * i, 2));
    }
    for i in 1..=10 {
        posicao += 1;
        events.push(event(
            posicao,
            &format!("antigo-{i}"),
            1,
            json!({"valor": format!("{i}.00"), "percentual": 5}),
        ));
        expected.insert(format!("antigo-{i}"), (5 * i, 1));
    }
    (events, expected)
}

/// `comissao` as the old code left it: every even order at a tenth of its value (the bug), the
/// older-shape orders missing.
async fn old_table(db: &TestDb, expected: &Rows) -> Rows {
    let mut old = Rows::new();
    for (pedido, (valor, versao)) in expected.iter().filter(|(p, _)| p.starts_with("ped-")) {
        let i: i64 = pedido[4..].parse().unwrap();
        let valor = if i % 2 == 0 { valor / 10 } else { *valor };
        old.insert(pedido.clone(), (valor, *versao));
    }
    let ids: Vec<&String> = old.keys().collect();
    let valores: Vec<i64> = old.values().map(|r| r.0).collect();
    let versoes: Vec<i64> = old.values().map(|r| r.1).collect();
    sqlx::query(
        "insert into comissao (pedido_id, valor_centavos, versao_evento) select * from unnest($1::text[], $2::int8[], $3::int8[])",
    )
    .bind(ids)
    .bind(valores)
    .bind(versoes)
    .execute(&db.pool)
    .await
    .unwrap();
    old
}

async fn table_rows(db: &TestDb, table: &str) -> Rows {
    let rows: Vec<(String, i64, i64)> = sqlx::query_as(&format!(
        "select pedido_id, valor_centavos, versao_evento from {table}"
    ))
    .fetch_all(&db.pool)
    .await
    .unwrap();
    rows.into_iter().map(|(p, v, n)| (p, (v, n))).collect()
}

/// The count and checksum the rebuild prints, computed from the expectation by the schema's
/// scan (`comissao_resumo`) over a table of exactly those rows: what the rebuild kept while it
/// wrote must equal it.
async fn checksum_of(db: &TestDb, rows: &Rows) -> (usize, String) {
    let mut conn = db.pool.acquire().await.unwrap();
    sqlx::query(
        "create temp table esperado (pedido_id text, valor_centavos bigint, versao_evento bigint)",
    )
    .execute(&mut *conn)
    .await
    .unwrap();
    let (ids, (valores, versoes)): (Vec<String>, (Vec<i64>, Vec<i64>)) =
        rows.iter().map(|(p, (v, n))| (p.clone(), (*v, *n))).unzip();
    sqlx::query("insert into esperado select * from unnest($1::text[], $2::int8[], $3::int8[])")
        .bind(ids)
        .bind(valores)
        .bind(versoes)
        .execute(&mut *conn)
        .await
        .unwrap();
    let digest: String = sqlx::query_scalar("select resumo from comissao_resumo('esperado')")
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    sqlx::query("drop table esperado")
        .execute(&mut *conn)
        .await
        .unwrap();
    (rows.len(), digest)
}

/// Writes a new order every few milliseconds (`live-<k>`, 10 % of `100 × k` cents) until stopped;
/// returns what it wrote.
fn spawn_writer(
    pool: sqlx::PgPool,
    first: i64,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<Rows> {
    tokio::spawn(async move {
        let mut wrote = Rows::new();
        let mut k = 0;
        while !stop.load(Ordering::SeqCst) {
            k += 1;
            let e = event(
                first + k,
                &format!("live-{k}"),
                1,
                json!({"valorCentavos": 100 * k, "percentual": 10}),
            );
            insert(&pool, &[e]).await;
            wrote.insert(format!("live-{k}"), (10 * k, 1));
            tokio::time::sleep(Duration::from_millis(8)).await;
        }
        wrote
    })
}

fn spawn_seed_consumer(db_url: &str, after: i64) -> tokio::process::Child {
    let js = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/js/consumidor.mjs");
    tokio::process::Command::new("node")
        .args([js, &after.to_string(), "2"])
        .env("DATABASE_URL", db_url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn node tests/js/consumidor.mjs (run `npm ci --prefix tests/js`)")
}

/// The seed's consumer needs Node.js and its `pg` package (`npm ci --prefix tests/js`, which
/// `.ci/run` does): without them the test would prove nothing, so it fails saying what is missing.
fn require_node_and_pg() {
    let node = std::process::Command::new("node").arg("--version").output();
    assert!(
        node.is_ok_and(|o| o.status.success()),
        "node is not installed: the seed's JavaScript consumer cannot be run (.ci/run installs nodejs)"
    );
    let pg = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/js/node_modules/pg");
    assert!(
        std::path::Path::new(pg).is_dir(),
        "tests/js has no node_modules/pg: run `npm ci --prefix tests/js` (as .ci/run does)"
    );
}

fn fingerprint_in(out: &str) -> String {
    let at = out
        .find("--approve '")
        .expect("the comparison names what to approve")
        + 11;
    out[at..].split('\'').next().unwrap().to_string()
}

async fn max_posicao(db: &TestDb) -> i64 {
    sqlx::query_scalar("select coalesce(max(posicao), 0) from evento_arquivado")
        .fetch_one(&db.pool)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rebuild_swapped_in_while_the_seeds_consumer_and_the_live_consumer_write_loses_no_write()
{
    require_node_and_pg();
    let db = TestDb::new().await;
    let jobs = live_jobs();
    let (events, mut expected) = history(300);
    insert(&db.pool, &events).await;
    let old = old_table(&db, &expected).await;
    let role = format!("rl_rebuild_{}", uuid::Uuid::new_v4().simple());
    sqlx::query(&format!("create role {role}"))
        .execute(&db.pool)
        .await
        .unwrap();
    sqlx::query(&format!(
        "grant select, insert, update on comissao to {role}"
    ))
    .execute(&db.pool)
    .await
    .unwrap();

    // Both consumers follow the archive from its end; the writer adds orders all along.
    let start = max_posicao(&db).await;
    let consume = command(&db.url, jobs.path())
        .arg("consume")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn consume");
    wait_until("the live consumer has started", || async {
        sqlx::query_scalar::<_, i64>("select count(*) from consumo_ao_vivo")
            .fetch_one(&db.pool)
            .await
            .unwrap()
            > 0
    })
    .await;
    let node = spawn_seed_consumer(&db.url, start);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = spawn_writer(db.pool.clone(), start, stop.clone());
    tokio::time::sleep(Duration::from_millis(300)).await;

    let compared = run_bin(&db.url, jobs.path(), &["rebuild", "--chunk", "100"]).await;
    assert_success(&compared, "rebuild (build and compare)");
    let fingerprint = fingerprint_in(&stdout(&compared));
    let live_in_diff: Vec<(String, Option<i64>, Option<i64>)> = sqlx::query_as(
        "select pedido_id, antes, depois from comissao_reconstrucao_diff where pedido_id like 'live-%'",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap();
    assert!(
        stdout(&compared).contains("160 orders differ"),
        "{}\n{live_in_diff:?}",
        stdout(&compared)
    );
    let approved = run_bin(
        &db.url,
        jobs.path(),
        &["rebuild", "--approve", &fingerprint],
    )
    .await;
    assert_success(&approved, "rebuild --approve");
    let swapped = run_bin(&db.url, jobs.path(), &["rebuild"]).await;
    assert_success(&swapped, "rebuild (swap)");
    assert!(
        stdout(&swapped).contains("swapped in"),
        "{}",
        stdout(&swapped)
    );
    let at_swap = max_posicao(&db).await;

    // Writes go on after the swap, then everything settles.
    tokio::time::sleep(Duration::from_millis(700)).await;
    stop.store(true, Ordering::SeqCst);
    let wrote = writer.await.unwrap();
    expected.extend(wrote.clone());
    wait_until("both consumers applied every new order", || async {
        table_rows(&db, "comissao").await.len() == expected.len()
    })
    .await;
    send_signal(&consume, Signal::SIGTERM);
    send_signal(&node, Signal::SIGTERM);
    let node_out = stdout(&finish(node, "node consumer").await);
    finish(consume, "consume").await;

    // No write lost: the swapped-in table is exactly what the archive implies, new orders included.
    let now = table_rows(&db, "comissao").await;
    assert_same_rows(
        &now.clone().into_iter().collect::<Vec<_>>(),
        &expected.clone().into_iter().collect::<Vec<_>>(),
        "comissao after the swap",
    );
    let (count, digest) = checksum_of(&db, &expected).await;
    let (db_count, db_digest): (i64, String) =
        sqlx::query_as("select linhas, resumo from comissao_resumo('comissao')")
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!((db_count as usize, db_digest), (count, digest));
    // Each consumer wrote the new table by name after the swap: the seed's (even orders) ...
    let after_swap = |line: &str| {
        line.strip_prefix("aplicado ")
            .and_then(|p| p.parse::<i64>().ok())
            .is_some_and(|p| p > at_swap)
    };
    assert!(
        node_out.lines().any(after_swap),
        "the seed's consumer applied nothing after the swap:\n{node_out}"
    );
    // ... and the live consumer (odd ones, which only it writes), through its prepared statements.
    let odd_after: Vec<String> = wrote
        .keys()
        .filter(|p| p[5..].parse::<i64>().unwrap() % 2 == 1)
        .cloned()
        .collect();
    assert!(odd_after.iter().all(|p| now.contains_key(p)));
    let has: bool =
        sqlx::query_scalar("select has_table_privilege($1, 'comissao', 'insert, update')")
            .bind(&role)
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert!(has, "the grants on comissao hold on the swapped-in table");

    // Rollback: the previous table again, with every write made since the swap carried over.
    assert_success(
        &run_bin(&db.url, jobs.path(), &["rebuild", "--rollback"]).await,
        "rebuild --rollback",
    );
    let back = table_rows(&db, "comissao").await;
    let mut want = old.clone();
    want.extend(wrote);
    assert_same_rows(
        &back.into_iter().collect::<Vec<_>>(),
        &want.into_iter().collect::<Vec<_>>(),
        "comissao after the rollback",
    );
    assert_success(
        &run_bin(&db.url, jobs.path(), &["rebuild", "--drop-previous"]).await,
        "rebuild --drop-previous",
    );
    let kept: Option<String> = sqlx::query_scalar("select to_regclass('comissao_nova')::text")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(kept, None);
    sqlx::query(&format!("drop owned by {role}"))
        .execute(&db.pool)
        .await
        .unwrap();
    sqlx::query(&format!("drop role {role}"))
        .execute(&db.pool)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_rebuild_killed_mid_build_resumes_to_what_the_archive_implies_and_never_half_swaps() {
    let db = TestDb::new().await;
    let jobs = live_jobs();
    let (events, expected) = history(8_000);
    insert(&db.pool, &events).await;
    let old = old_table(&db, &expected).await;

    let mut first = command(&db.url, jobs.path())
        .args(["rebuild", "--chunk", "100"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn rebuild");
    wait_until("the rebuild has read part of the archive", || async {
        let read: Option<i64> =
            sqlx::query_scalar("select eventos_lidos from comissao_reconstrucao")
                .fetch_optional(&db.pool)
                .await
                .unwrap();
        read.is_some_and(|r| r >= 1_000)
    })
    .await;
    kill9(&mut first).await;
    let (estado, lidos): (String, i64) =
        sqlx::query_as("select estado, eventos_lidos from comissao_reconstrucao")
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!(estado, "construindo");
    assert!(
        lidos < events.len() as i64,
        "killed mid-build ({lidos} read)"
    );
    assert_eq!(
        table_rows(&db, "comissao").await,
        old,
        "comissao is untouched by a killed build"
    );

    let resumed = run_bin(&db.url, jobs.path(), &["rebuild"]).await;
    assert_success(&resumed, "rebuild (resumed)");
    assert!(
        stdout(&resumed).contains("resuming"),
        "{}",
        stdout(&resumed)
    );
    assert_eq!(table_rows(&db, "comissao_nova").await, expected);
    let (count, digest) = checksum_of(&db, &expected).await;
    assert!(
        stdout(&resumed).contains(&format!("comissao_nova: {count} rows, checksum {digest}")),
        "{}",
        stdout(&resumed)
    );

    // A swap killed at any instant leaves one table or the other whole, never a mix.
    let fingerprint = fingerprint_in(&stdout(&resumed));
    assert_success(
        &run_bin(
            &db.url,
            jobs.path(),
            &["rebuild", "--approve", &fingerprint],
        )
        .await,
        "approve",
    );
    let mut swap = command(&db.url, jobs.path())
        .arg("rebuild")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn rebuild");
    tokio::time::sleep(Duration::from_millis(150)).await;
    let _ = swap.start_kill();
    let _ = swap.wait().await;
    let now = table_rows(&db, "comissao").await;
    assert!(
        now == old || now == expected,
        "comissao is one table or the other"
    );
    let estado: String = sqlx::query_scalar("select estado from comissao_reconstrucao")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(
        now == expected,
        estado == "trocada",
        "the state says which table is in"
    );
    if estado == "comparada" {
        assert_success(
            &run_bin(&db.url, jobs.path(), &["rebuild"]).await,
            "rebuild after the kill",
        );
    }
    assert_eq!(table_rows(&db, "comissao").await, expected);
}

// --- The swap on a busy table, what hangs on `comissao`, the fingerprint. ---

async fn rebuild_cmd(db: &TestDb, jobs: &std::path::Path, args: &[&str]) -> std::process::Output {
    let mut all = vec!["rebuild"];
    all.extend_from_slice(args);
    run_bin_within(&db.url, jobs, &all).await
}

/// Compares, approves what it showed; returns the comparison's output.
async fn compare_and_approve(db: &TestDb, jobs: &std::path::Path) -> String {
    let compared = rebuild_cmd(db, jobs, &[]).await;
    assert_success(&compared, "rebuild (compare)");
    let fingerprint = fingerprint_in(&stdout(&compared));
    assert_success(
        &rebuild_cmd(db, jobs, &["--approve", &fingerprint]).await,
        "rebuild --approve",
    );
    stdout(&compared)
}

async fn set_row(db: &TestDb, table: &str, pedido: &str, valor: i64, versao: i64) {
    sqlx::query(&format!(
        "insert into {table} (pedido_id, valor_centavos, versao_evento) values ($1, $2, $3) on conflict (pedido_id) do update set valor_centavos = excluded.valor_centavos, versao_evento = excluded.versao_evento"
    ))
    .bind(pedido)
    .bind(valor)
    .bind(versao)
    .execute(&db.pool)
    .await
    .unwrap();
}

async fn row_of(db: &TestDb, table: &str, pedido: &str) -> Option<(i64, i64)> {
    sqlx::query_as(&format!(
        "select valor_centavos, versao_evento from {table} where pedido_id = $1"
    ))
    .bind(pedido)
    .fetch_optional(&db.pool)
    .await
    .unwrap()
}

fn paid_cents(posicao: i64, pedido: &str, versao: i64, valor: i64) -> Event {
    event(
        posicao,
        pedido,
        versao,
        json!({"valorCentavos": valor, "percentual": 5}),
    )
}

#[tokio::test]
async fn an_event_archived_during_the_rebuild_for_a_row_ahead_of_the_archive_is_in_the_swapped_table(
) {
    let db = TestDb::new().await;
    let jobs = live_jobs();
    insert(
        &db.pool,
        &[
            paid_cents(1, "ped-x", 1, 1_000),
            paid_cents(2, "ped-x", 2, 2_000),
        ],
    )
    .await;
    // `comissao` ahead of the archive: no writer's guard lets version 3 in.
    set_row(&db, "comissao", "ped-x", 999, 5).await;
    compare_and_approve(&db, jobs.path()).await;
    // Version 3 is archived after the build's target (a writer would refuse it: its row is at 5).
    insert(&db.pool, &[paid_cents(3, "ped-x", 3, 3_000)]).await;

    let refused = rebuild_cmd(&db, jobs.path(), &[]).await;
    assert_exits_saying(&refused, 1, "not as approved");
    assert_eq!(
        row_of(&db, "comissao", "ped-x").await,
        Some((999, 5)),
        "nothing swapped"
    );
    compare_and_approve(&db, jobs.path()).await;
    assert_success(&rebuild_cmd(&db, jobs.path(), &[]).await, "rebuild (swap)");

    assert_eq!(
        row_of(&db, "comissao", "ped-x").await,
        Some((150, 3)),
        "the swapped table holds version 3, the archive's newest"
    );
}

#[tokio::test]
async fn a_live_write_that_makes_both_tables_agree_lets_the_swap_go_and_one_off_the_approval_stops_it(
) {
    let db = TestDb::new().await;
    let jobs = live_jobs();
    let (events, expected) = history(30);
    insert(&db.pool, &events).await;
    let old = old_table(&db, &expected).await;
    let wrong: Vec<&String> = old
        .iter()
        .filter(|(p, r)| expected.get(*p) != Some(r))
        .map(|(p, _)| p)
        .collect();
    let (first, second) = (wrong[0].clone(), wrong[1].clone());
    compare_and_approve(&db, jobs.path()).await;

    // A writer puts one differing order right: it drops out of the differences, the rest is as
    // approved, so the swap goes ahead.
    let (valor, versao) = expected[&first];
    set_row(&db, "comissao", &first, valor, versao).await;
    let swapped = rebuild_cmd(&db, jobs.path(), &[]).await;
    assert_success(&swapped, "rebuild (swap after an agreeing write)");
    assert_eq!(table_rows(&db, "comissao").await, expected);
    assert_success(
        &rebuild_cmd(&db, jobs.path(), &["--drop-previous"]).await,
        "drop",
    );

    // Next rebuild: a writer changes a differing order to a value nobody approved.
    set_row(&db, "comissao", &second, 1, expected[&second].1).await;
    compare_and_approve(&db, jobs.path()).await;
    set_row(&db, "comissao", &second, 2, expected[&second].1).await;
    let refused = rebuild_cmd(&db, jobs.path(), &[]).await;
    assert_exits_saying(&refused, 1, "1 differing orders are not as approved");
    assert_eq!(
        row_of(&db, "comissao", &second).await,
        Some((2, expected[&second].1)),
        "nothing swapped"
    );
}

#[tokio::test]
async fn a_rebuild_refuses_to_open_and_to_swap_naming_what_hangs_on_comissao() {
    let db = TestDb::new().await;
    let jobs = live_jobs();
    let (events, expected) = history(20);
    insert(&db.pool, &events).await;
    let old = old_table(&db, &expected).await;
    let hang = [
        "alter table comissao enable row level security",
        "create policy so_um on comissao using (pedido_id = 'ped-1')",
        "create table auditoria (pedido_id text)",
        "create function auditar() returns trigger language plpgsql as $$ begin insert into auditoria values (new.pedido_id); return new; end $$",
        "create trigger auditoria after update on comissao for each row execute function auditar()",
        "create view relatorio as select pedido_id, valor_centavos from comissao",
    ];
    for statement in hang {
        sqlx::query(statement).execute(&db.pool).await.unwrap();
    }

    let refused = rebuild_cmd(&db, jobs.path(), &[]).await;
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    for named in [
        "row-level security on comissao",
        "policy so_um",
        "trigger auditoria",
        "view relatorio",
    ] {
        assert!(
            stderr(&refused).contains(named),
            "{named} not named:\n{}",
            stderr(&refused)
        );
    }
    let opened: i64 = sqlx::query_scalar("select count(*) from comissao_reconstrucao")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(opened, 0, "no rebuild opened");

    // Taken off, the rebuild opens; put back before the swap, the swap refuses the same way.
    for statement in [
        "drop view relatorio",
        "drop trigger auditoria on comissao",
        "drop policy so_um on comissao",
        "alter table comissao disable row level security",
    ] {
        sqlx::query(statement).execute(&db.pool).await.unwrap();
    }
    compare_and_approve(&db, jobs.path()).await;
    for statement in &hang[..2] {
        sqlx::query(statement).execute(&db.pool).await.unwrap();
    }
    sqlx::query(hang[4]).execute(&db.pool).await.unwrap();
    sqlx::query(hang[5]).execute(&db.pool).await.unwrap();
    let refused = rebuild_cmd(&db, jobs.path(), &[]).await;
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    for named in [
        "row-level security on comissao",
        "policy so_um",
        "trigger auditoria",
        "view relatorio",
    ] {
        assert!(
            stderr(&refused).contains(named),
            "{named} not named:\n{}",
            stderr(&refused)
        );
    }
    assert_eq!(table_rows(&db, "comissao").await, old, "nothing swapped");
}

#[tokio::test]
async fn a_privilege_revoked_while_the_rebuild_was_open_does_not_come_back_with_the_swap_or_the_rollback(
) {
    let db = TestDb::new().await;
    let jobs = live_jobs();
    let (events, expected) = history(20);
    insert(&db.pool, &events).await;
    old_table(&db, &expected).await;
    let role = format!("rl_leaked_{}", uuid::Uuid::new_v4().simple());
    sqlx::query(&format!("create role {role}"))
        .execute(&db.pool)
        .await
        .unwrap();
    sqlx::query(&format!("grant select, update on comissao to {role}"))
        .execute(&db.pool)
        .await
        .unwrap();
    compare_and_approve(&db, jobs.path()).await;
    // The password leaked: the DBA takes the role's privileges back while the rebuild is open.
    sqlx::query(&format!("revoke all on comissao from {role}"))
        .execute(&db.pool)
        .await
        .unwrap();
    let holds = |table: &'static str| {
        let (pool, role) = (db.pool.clone(), role.clone());
        async move {
            sqlx::query_scalar::<_, bool>(
                "select has_table_privilege($1, $2, 'select') or has_table_privilege($1, $2, 'update')",
            )
            .bind(role)
            .bind(table)
            .fetch_one(&pool)
            .await
            .unwrap()
        }
    };

    assert_success(&rebuild_cmd(&db, jobs.path(), &[]).await, "rebuild (swap)");
    let after_swap = holds("comissao").await;
    assert_success(
        &rebuild_cmd(&db, jobs.path(), &["--rollback"]).await,
        "rollback",
    );
    let after_rollback = holds("comissao").await;
    for statement in [
        format!("revoke all on comissao_nova from {role}"),
        format!("drop role {role}"),
    ] {
        let _ = sqlx::query(&statement).execute(&db.pool).await;
    }

    assert!(
        !after_swap,
        "the swapped-in comissao gave the revoked role its privileges back"
    );
    assert!(
        !after_rollback,
        "the rolled-back comissao gave the revoked role its privileges back"
    );
}

#[tokio::test]
async fn a_rollback_never_moves_a_row_to_an_older_version() {
    let db = TestDb::new().await;
    let jobs = live_jobs();
    insert(&db.pool, &[paid_cents(1, "ped-x", 2, 2_000)]).await;
    // Ahead of the archive before the rebuild: version 5.
    set_row(&db, "comissao", "ped-x", 999, 5).await;
    compare_and_approve(&db, jobs.path()).await;
    assert_success(&rebuild_cmd(&db, jobs.path(), &[]).await, "rebuild (swap)");
    assert_eq!(row_of(&db, "comissao", "ped-x").await, Some((100, 2)));
    // A writer applies version 3 to the swapped-in table; the kept table is at version 5.
    set_row(&db, "comissao", "ped-x", 150, 3).await;

    assert_success(
        &rebuild_cmd(&db, jobs.path(), &["--rollback"]).await,
        "rollback",
    );

    assert_eq!(
        row_of(&db, "comissao", "ped-x").await,
        Some((999, 5)),
        "the restored table keeps its newer row"
    );
}

/// Two comparisons whose rows join into the same text under `id:antes:…` joined by `,`: orders
/// `p` and `q:…,r` against `p:…,q` and `r`, every row 1 → 2 at version 1.
#[tokio::test]
async fn two_different_comparisons_that_one_joined_text_would_confuse_get_different_fingerprints() {
    let jobs = live_jobs();
    let mut fingerprints = Vec::new();
    let mut old_encodings = Vec::new();
    for ids in [["p", "q:1:1:2:1,r"], ["p:1:1:2:1,q", "r"]] {
        let db = TestDb::new().await;
        for (i, id) in ids.iter().enumerate() {
            insert(&db.pool, &[paid_cents(i as i64 + 1, id, 1, 40)]).await;
            set_row(&db, "comissao", id, 1, 1).await;
        }
        let compared = rebuild_cmd(&db, jobs.path(), &[]).await;
        assert_success(&compared, "rebuild (compare)");
        fingerprints.push(fingerprint_in(&stdout(&compared)));
        let old: String = sqlx::query_scalar(
            "select count(*) || '|' || string_agg(pedido_id || ':' || coalesce(antes::text, '-') || ':' || coalesce(versao_antes::text, '-') || ':' || coalesce(depois::text, '-') || ':' || coalesce(versao_depois::text, '-'), ',' order by pedido_id) from comissao_reconstrucao_diff",
        )
        .fetch_one(&db.pool)
        .await
        .unwrap();
        old_encodings.push(old);
    }
    assert_eq!(
        old_encodings[0], old_encodings[1],
        "the joined text alone cannot tell them apart"
    );
    assert_ne!(fingerprints[0], fingerprints[1]);
    for f in &fingerprints {
        assert!(
            f.starts_with("sha256:") && f.len() == "sha256:".len() + 64,
            "a whole SHA-256 is bound: {f}"
        );
    }
}

#[tokio::test]
async fn the_comparison_says_how_many_rows_go_back_a_version_and_how_many_are_deleted_and_a_second_approval_is_refused(
) {
    let db = TestDb::new().await;
    let jobs = live_jobs();
    insert(
        &db.pool,
        &[
            paid_cents(1, "ped-a", 1, 1_000),
            paid_cents(2, "ped-b", 1, 2_000),
        ],
    )
    .await;
    set_row(&db, "comissao", "ped-a", 50, 4).await; // ahead: goes back to version 1
    set_row(&db, "comissao", "ped-b", 7, 1).await; // a value changes
    set_row(&db, "comissao", "ped-sem-eventos", 5, 1).await; // no event: deleted

    let compared = rebuild_cmd(&db, jobs.path(), &[]).await;
    assert_success(&compared, "rebuild (compare)");
    assert!(
        stdout(&compared).contains("3 orders differ")
            && stdout(&compared)
                .contains("1 go back to an older versao_evento, 1 rows are deleted"),
        "{}",
        stdout(&compared)
    );
    let fingerprint = fingerprint_in(&stdout(&compared));
    assert_success(
        &rebuild_cmd(&db, jobs.path(), &["--approve", &fingerprint]).await,
        "approve",
    );
    let again = rebuild_cmd(&db, jobs.path(), &["--approve", &fingerprint]).await;
    assert_exits_saying(&again, 1, "already approved");
    let approvals: i64 = sqlx::query_scalar("select count(*) from reprocessamento_aprovacao")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(approvals, 1, "one approval recorded");
    let listed = run_bin_within(&db.url, jobs.path(), &["approvals"]).await;
    assert_success(&listed, "approvals");
    assert!(
        stdout(&listed).contains(&fingerprint[.."sha256:".len() + 16]),
        "the list shows the fingerprint finance saw:\n{}",
        stdout(&listed)
    );
}

/// A rebuild whose server stops under it says so — the server, the cause, that nothing is
/// half-done — where it once said `expected to read 5 bytes, got 0 bytes at EOF`; started
/// again once the server is back, it resumes from its checkpoint.
#[tokio::test]
async fn a_rebuild_whose_server_stops_names_the_loss_and_resumes_when_it_is_back() {
    let mut cluster = testkit::pgtemp::TempCluster::start()
        .await
        .expect("a throwaway cluster from the local binaries");
    let db = TestDb::attach(&cluster.url()).await;
    replay_ledger_core::tables::db::migrate(&db.pool)
        .await
        .unwrap();
    let jobs = live_jobs();
    let (events, expected) = history(20_000);
    insert(&db.pool, &events).await;

    let rebuild = command(&cluster.url(), jobs.path())
        .args(["rebuild", "--chunk", "50"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn rebuild");
    wait_until("the rebuild has read part of the archive", || async {
        let read: Option<i64> =
            sqlx::query_scalar("select eventos_lidos from comissao_reconstrucao")
                .fetch_optional(&db.pool)
                .await
                .ok()
                .flatten();
        read.is_some_and(|r| r >= 500)
    })
    .await;
    cluster.stop().await;
    let out = finish(rebuild, "the rebuild across a stop").await;
    cluster
        .start_again()
        .await
        .expect("the cluster starts again");
    let db = TestDb::attach(&cluster.url()).await;
    let resumed = run_bin_within(&cluster.url(), jobs.path(), &["rebuild"]).await;

    assert_exits_saying(&out, 1, "lost the database 127.0.0.1:");
    // What the rebuild says (sqlx's own pool may log the protocol's words at WARN beside it).
    let said = stderr(&out);
    let said = said
        .lines()
        .find(|l| l.starts_with("error:"))
        .unwrap_or_default();
    assert!(
        said.contains("nothing is half-done") && !said.contains("expected to read"),
        "{said}"
    );
    assert_success(&resumed, "the rebuild once the server is back");
    assert!(
        stdout(&resumed).contains("resuming"),
        "{}",
        stdout(&resumed)
    );
    assert_eq!(table_rows(&db, "comissao_nova").await, expected);
}

// --- The load: one ordered read, COPY, indexes after; every chunk size, killed anywhere. ---

/// A rebuild over generated archives (ties of `versao` in different chunks and side by side,
/// invalid newest versions, versions archived out of order, events of other types) at chunk sizes
/// 1, 7, 100 and 5,000, each loaded whole and (but the one chunk of 5,000) again stopped after
/// one of its first chunks and resumed,
/// builds exactly the archive's answer computed in SQL (`differential::archive_answer`), and
/// the checksum it kept while writing equals the schema's scan of the table it built, before
/// and after the swap.
#[tokio::test]
async fn a_rebuild_over_generated_archives_builds_the_archives_answer_at_every_chunk_size() {
    use replay_ledger_core::services::rebuild::{self, Outcome, RebuildConfig};
    use replay_ledger_core::shared::shutdown::{self, Shutdown};
    for seed in [11u64, 12, 13] {
        let events = crate::differential::generated_archive(seed, 120);
        for chunk in [1u32, 7, 100, 5_000] {
            // Stopped after a chunk that is not the last (5,000 holds the archive in one).
            let stops = [
                None,
                (chunk < 5_000).then_some(1 + (seed as usize + chunk as usize) % 3),
            ];
            for stop_after in stops.into_iter().collect::<std::collections::BTreeSet<_>>() {
                let db = TestDb::new().await;
                insert(&db.pool, &events).await;
                let answer = crate::differential::archive_answer(&db.pool).await;
                // A wrong `comissao`, which the build never reads.
                sqlx::query(
                    "insert into comissao (pedido_id, valor_centavos, versao_evento) values ('stray', 1, 9)",
                )
                .execute(&db.pool)
                .await
                .unwrap();
                let config = RebuildConfig {
                    chunk,
                    progress_every: Duration::ZERO,
                    ..RebuildConfig::default()
                };
                let case = format!("seed {seed}, chunk {chunk}, stopped after {stop_after:?}");
                if let Some(stop_after) = stop_after {
                    let (trigger, stop) = shutdown::channel();
                    let mut lines = 0;
                    let mut say = |line: &str| {
                        lines += usize::from(line.contains("events/s"));
                        if lines >= stop_after {
                            trigger.trigger();
                        }
                    };
                    let stopped = rebuild::run(&db.pool, &config, &stop, &mut say).await;
                    assert!(
                        matches!(stopped, Err(rebuild::RebuildError::Interrupted)),
                        "{case}: {stopped:?}"
                    );
                }
                let mut quiet = |_: &str| {};
                let done = rebuild::run(&db.pool, &config, &Shutdown::never(), &mut quiet)
                    .await
                    .unwrap_or_else(|e| panic!("{case}: {e}"));
                let Outcome::Compared(comparison) = done else {
                    panic!("{case}: {done:?}");
                };

                let built: Vec<(String, i64, i64)> = sqlx::query_as(
                    "select pedido_id, valor_centavos, versao_evento from comissao_nova order by pedido_id",
                )
                .fetch_all(&db.pool)
                .await
                .unwrap();
                assert_eq!(built, answer, "{case}");
                let new = scanned(&db.pool, "comissao_nova").await;
                assert_eq!(comparison.new, new, "{case}: the new table's, kept");
                let current = scanned(&db.pool, "comissao").await;
                assert_eq!(
                    comparison.current, current,
                    "{case}: the current table's, streamed"
                );
                assert_eq!(comparison.new.count, answer.len() as i64, "{case}");
                assert!(
                    has_primary_key(&db.pool).await,
                    "{case}: comissao_nova has its primary key again"
                );

                // Swapped in: the checksum said is the new `comissao`'s, as a scan finds it.
                rebuild::approve(
                    &db.pool,
                    rebuild::Approver::Role,
                    &comparison.fingerprint,
                    None,
                )
                .await
                .unwrap_or_else(|e| panic!("{case}: approve: {e}"));
                let swapped = rebuild::run(&db.pool, &config, &Shutdown::never(), &mut quiet)
                    .await
                    .unwrap_or_else(|e| panic!("{case}: swap: {e}"));
                let Outcome::Swapped { current, .. } = swapped else {
                    panic!("{case}: {swapped:?}");
                };
                let now = scanned(&db.pool, "comissao").await;
                assert_eq!(current, now, "{case}: the swapped-in table's checksum");
                assert_eq!(current, comparison.new, "{case}");
            }
        }
    }
}

/// The load killed (SIGKILL) at random points while it copies rows in, then once while it builds
/// the indexes (held there by a reader of `comissao_nova`, so the kill lands inside that
/// transaction): each run resumes after the last order written, the killed index build leaves
/// no index behind, and the last run builds exactly the table the archive implies, with its
/// primary key and the operator's own index on `comissao`, and prints the checksum the schema's
/// scan computes for it.
#[tokio::test]
async fn a_rebuild_killed_while_copying_and_while_indexing_resumes_to_the_archives_table() {
    let db = TestDb::new().await;
    let jobs = live_jobs();
    let (events, expected) = history(8_000);
    insert(&db.pool, &events).await;
    old_table(&db, &expected).await;
    // An index of the operator's own on `comissao`: the new table gets it too, after the load.
    sqlx::query("create index comissao_por_valor on comissao (valor_centavos)")
        .execute(&db.pool)
        .await
        .unwrap();
    let read = || async {
        sqlx::query_scalar::<_, i64>("select eventos_lidos from comissao_reconstrucao")
            .fetch_optional(&db.pool)
            .await
            .unwrap()
            .unwrap_or(0)
    };
    let mut rng = 0x5eed_u64;
    let mut killed_at = Vec::new();
    for _ in 0..3 {
        rng = rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let at = read().await + 200 + (rng >> 33) as i64 % 1_500;
        let mut run = command(&db.url, jobs.path())
            .args(["rebuild", "--chunk", "50"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn rebuild");
        wait_until("the load has copied past the kill point", || async {
            read().await >= at
        })
        .await;
        kill9(&mut run).await;
        killed_at.push(read().await);
    }
    assert!(
        killed_at.windows(2).all(|w| w[0] < w[1]) && killed_at[2] < events.len() as i64,
        "each run went on from the last: {killed_at:?}"
    );

    // A reader holds comissao_nova: the index build waits for it, and is killed waiting.
    let mut reader = db.pool.begin().await.unwrap();
    sqlx::query("select count(*) from comissao_nova")
        .execute(&mut *reader)
        .await
        .unwrap();
    let mut run = command(&db.url, jobs.path())
        .args(["rebuild", "--chunk", "50"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn rebuild");
    wait_until("the index build waits for the reader", || async {
        sqlx::query_scalar::<_, bool>(
            "select exists (select 1 from pg_stat_activity where wait_event_type = 'Lock' and query like '%comissao_nova_indexar%')",
        )
        .fetch_one(&db.pool)
        .await
        .unwrap()
    })
    .await;
    kill9(&mut run).await;
    reader.rollback().await.unwrap();
    let (built, pending): (bool, i32) = sqlx::query_as(
        "select construida_em is not null, coalesce(cardinality(indices_adiados), 0) from comissao_reconstrucao",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    let indexes: i64 = sqlx::query_scalar(
        "select count(*) from pg_index where indrelid = 'comissao_nova'::regclass",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(
        (built, pending > 0, indexes),
        (false, true, 0),
        "a killed index build leaves no index and the build to do"
    );

    let resumed = run_bin(&db.url, jobs.path(), &["rebuild"]).await;
    assert_success(&resumed, "rebuild (resumed after the kills)");
    assert_eq!(table_rows(&db, "comissao_nova").await, expected);
    assert!(
        has_primary_key(&db.pool).await,
        "comissao_nova has its primary key"
    );
    let indexes: Vec<String> = sqlx::query_scalar(
        "select pg_get_indexdef(indexrelid) from pg_index where indrelid = 'comissao_nova'::regclass order by 1",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap();
    assert_eq!(indexes.len(), 2, "{indexes:?}");
    assert!(
        indexes[0].contains("(valor_centavos)") && indexes[1].contains("UNIQUE"),
        "the operator's index and the primary key's, built after the load: {indexes:?}"
    );
    let (count, digest) = checksum_of(&db, &expected).await;
    assert!(
        stdout(&resumed).contains(&format!("comissao_nova: {count} rows, checksum {digest}")),
        "{}",
        stdout(&resumed)
    );
}

/// A rebuild an earlier version left building — `comissao_nova` indexed as `comissao`, part of
/// the archive written and its checkpoint by `posicao`, as 0.4.0 wrote them — is loaded again
/// from the start by this version's load, and ends with exactly the archive's table and its
/// primary key.
#[tokio::test]
async fn a_rebuild_an_earlier_version_left_building_is_loaded_again_to_the_archives_table() {
    let db = TestDb::new().await;
    let jobs = live_jobs();
    let (events, expected) = history(500);
    insert(&db.pool, &events).await;
    old_table(&db, &expected).await;
    // What 0.4.0's `rebuild` left when killed mid-build.
    let mut tx = db.pool.begin().await.unwrap();
    sqlx::query(
        "insert into comissao_reconstrucao (estado, versao_regra, ultima_posicao, alvo_posicao, eventos_total, eventos_lidos) values ('construindo', 'calcularComissao/2', 200, (select max(posicao) from evento_arquivado), (select count(*) from evento_arquivado), 200)",
    )
    .execute(&mut *tx)
    .await
    .unwrap();
    sqlx::query("select comissao_nova_criar()")
        .execute(&mut *tx)
        .await
        .unwrap();
    sqlx::query(
        "insert into comissao_nova (pedido_id, valor_centavos, versao_evento) values ('ped-1', 1, 1), ('left-behind', 7, 1)",
    )
    .execute(&mut *tx)
    .await
    .unwrap();
    tx.commit().await.unwrap();

    let resumed = run_bin(&db.url, jobs.path(), &["rebuild"]).await;

    assert_success(&resumed, "rebuild over an earlier version's build");
    assert_eq!(table_rows(&db, "comissao_nova").await, expected);
    assert!(
        has_primary_key(&db.pool).await,
        "comissao_nova has its primary key"
    );
}

/// Whether `comissao_nova` has its primary key (built again after the load).
async fn has_primary_key(pool: &sqlx::PgPool) -> bool {
    sqlx::query_scalar(
        "select exists (select 1 from pg_constraint where conrelid = 'comissao_nova'::regclass and contype = 'p')",
    )
    .fetch_one(pool)
    .await
    .unwrap()
}

/// A table's count and checksum as the schema's `comissao_resumo` computes them in SQL, by a scan:
/// the independent answer for what the rebuild kept or streamed.
async fn scanned(
    pool: &sqlx::PgPool,
    table: &str,
) -> replay_ledger_core::services::rebuild::Checksum {
    let (count, digest): (i64, String) =
        sqlx::query_as("select linhas, resumo from comissao_resumo($1::regclass)")
            .bind(table)
            .fetch_one(pool)
            .await
            .unwrap();
    replay_ledger_core::services::rebuild::Checksum { count, digest }
}
