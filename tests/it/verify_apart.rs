//! What `verify` reports apart from the differences a replay fixes:
//! events the live consumer has not applied yet, rows newer than the archive, rows with no
//! archived event. None of them makes exit 3 or an emitted job; a real wrong day beside them
//! still does.

use std::path::Path;

use nix::sys::signal::Signal;
use serde_json::{json, Value};

use crate::helpers::*;
use crate::verify::{exec, jobs, local, order_paid, right_db, verify_json, TZ};

/// The four days made right; a real live consumer ran and stopped; then `behind` events were
/// archived that it has not applied: new orders on the 15th, and version 2 of `d14-3`.
async fn consumer_behind(jobs: &Path) -> TestDb {
    let db = right_db(jobs).await;
    let consumer = command(&db.url, jobs)
        .args(["consume", "--from-start"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn consume");
    wait_until("the live consumer applied the archive", || async {
        replay_ledger_core::tables::execution::load(&db.pool, "ao-vivo")
            .await
            .unwrap()
            .is_some_and(|e| e.summary.events_read == 47)
    })
    .await;
    send_signal(&consumer, Signal::SIGTERM);
    assert_success(&finish(consumer, "consume").await, "consume");
    let paid = |v: i64| json!({"valorCentavos": v, "percentual": 5});
    let mut behind: Vec<_> = (0..4)
        .map(|i| order_paid(&format!("late-{i}"), 1, paid(2000), local(15, 20, i)))
        .collect();
    behind.push(order_paid("d14-3", 2, paid(9000), local(14, 21, 0)));
    for (i, e) in behind.iter_mut().enumerate() {
        e.posicao = 100 + i as i64;
    }
    insert(&db.pool, &behind).await;
    db
}

fn day<'a>(json: &'a Value, day: &str) -> &'a Value {
    json["days"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["day"] == day)
        .unwrap_or_else(|| panic!("{day} in {json}"))
}

fn emitted(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("reconcile-"))
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn events_the_live_consumer_has_not_applied_yet_are_reported_apart_and_exit_zero() {
    let provider = sink(dedup()).await;
    let jobs = jobs(&provider.url());
    let db = consumer_behind(jobs.path()).await;
    let out = tempfile::tempdir().unwrap();
    let emit = out.path().to_str().unwrap();

    let (code, json) =
        verify_json(&db, jobs.path(), &["--timezone", TZ, "--emit-jobs", emit]).await;

    assert_eq!((code, &json["clean"]), (0, &json!(true)), "{json}");
    let fifteenth = day(&json, "2026-10-15");
    assert_eq!(
        (&fifteenth["orders"], &fifteenth["orders_missing"]),
        (&json!(15), &json!(0))
    );
    assert_eq!(
        (
            &fifteenth["pending_live"],
            &fifteenth["effects_pending_live"]
        ),
        (&json!(4), &json!(4))
    );
    let fourteenth = day(&json, "2026-10-14");
    assert_eq!(
        (&fourteenth["orders_wrong"], &fourteenth["pending_live"]),
        (&json!(0), &json!(1))
    );
    assert_eq!(json["set_aside_totals"]["pending_live"], 5, "{json}");
    assert_eq!(
        json["set_aside_totals"]["effects_pending_live"], 5,
        "{json}"
    );
    assert_eq!(json["totals"]["difference_cents"], 0, "{json}");
    assert!(
        emitted(out.path()).is_empty(),
        "no job for the consumer's lag"
    );
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
    assert_eq!(text.status.code(), Some(0), "{}", stdout(&text));
    assert!(
        stdout(&text)
            .contains("5 order(s) and 5 effect(s) ainda não aplicados pelo consumidor ao vivo"),
        "{}",
        stdout(&text)
    );
}

#[tokio::test]
async fn a_wrong_day_is_still_flagged_while_the_live_consumer_is_behind() {
    let provider = sink(dedup()).await;
    let jobs = jobs(&provider.url());
    let db = consumer_behind(jobs.path()).await;
    exec(
        &db,
        "update comissao set valor_centavos = valor_centavos + 7 where pedido_id = 'd13-0'",
    )
    .await;
    let out = tempfile::tempdir().unwrap();
    let emit = out.path().to_str().unwrap();

    let (code, json) = verify_json(
        &db,
        jobs.path(),
        &["--timezone", TZ, "--job", "live", "--emit-jobs", emit],
    )
    .await;

    assert_eq!((code, &json["clean"]), (3, &json!(false)), "{json}");
    let thirteenth = day(&json, "2026-10-13");
    assert_eq!(
        (&thirteenth["orders_wrong"], &thirteenth["difference_cents"]),
        (&json!(1), &json!(-7))
    );
    assert_eq!(json["set_aside_totals"]["pending_live"], 5, "{json}");
    assert_eq!(json["totals"]["orders_missing"], 0, "{json}");
    assert_eq!(emitted(out.path()), ["reconcile-2026-10-13.yaml"]);
}

/// The four days made right, then a row written from a version the archive does not hold
/// (`d13-2` at version 3), a row for an order the archive never saw (`ghost-1`, on the 14th) and
/// a row for an order whose only event the rule rejects (`bad-1`, on the 12th).
async fn rows_a_replay_cannot_reach(jobs: &Path) -> TestDb {
    let db = right_db(jobs).await;
    let rejected = json!({"valorCentavos": "mil", "percentual": 5});
    let bad = order_paid("bad-1", 1, rejected, local(12, 15, 0));
    insert(
        &db.pool,
        &[replay_ledger_core::domain::Event {
            posicao: 200,
            ..bad
        }],
    )
    .await;
    exec(
        &db,
        "insert into comissao (pedido_id, valor_centavos, versao_evento) values ('bad-1', 50, 1)",
    )
    .await;
    exec(
        &db,
        "update comissao set valor_centavos = 999, versao_evento = 3 where pedido_id = 'd13-2'",
    )
    .await;
    sqlx::query("insert into comissao (pedido_id, valor_centavos, versao_evento, atualizado_em) values ('ghost-1', 500, 1, $1)")
        .bind(local(14, 8, 0))
        .execute(&db.pool)
        .await
        .unwrap();
    db
}

#[tokio::test]
async fn rows_newer_than_the_archive_or_without_events_are_listed_apart_with_what_to_do() {
    let provider = sink(dedup()).await;
    let jobs = jobs(&provider.url());
    let db = rows_a_replay_cannot_reach(jobs.path()).await;
    let out = tempfile::tempdir().unwrap();
    let emit = out.path().to_str().unwrap();

    let (code, json) = verify_json(
        &db,
        jobs.path(),
        &["--timezone", TZ, "--job", "live", "--emit-jobs", emit],
    )
    .await;

    assert_eq!((code, &json["clean"]), (0, &json!(true)), "{json}");
    assert_eq!(
        day(&json, "2026-10-13")["orders_ahead_of_archive"],
        1,
        "{json}"
    );
    assert_eq!(day(&json, "2026-10-13")["orders_wrong"], 0, "{json}");
    assert_eq!(
        day(&json, "2026-10-14")["orders_without_events"],
        1,
        "{json}"
    );
    assert_eq!(day(&json, "2026-10-12")["orders_without_events"], 1);
    assert_eq!(
        json["not_replayable"],
        json!([
            {"pedido_id": "bad-1", "day": "2026-10-12", "reason": "without_accepted_events", "versao_evento": 1, "archive_versao": null},
            {"pedido_id": "d13-2", "day": "2026-10-13", "reason": "ahead_of_archive", "versao_evento": 3, "archive_versao": 1},
            {"pedido_id": "ghost-1", "day": "2026-10-14", "reason": "without_events", "versao_evento": 1, "archive_versao": null},
        ])
    );
    assert!(
        emitted(out.path()).is_empty(),
        "a replay cannot fix them: no job"
    );
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
    let text = stdout(&text);
    assert!(text.contains("3 order(s) a replay cannot fix"), "{text}");
    assert!(
        text.contains(
            "2026-10-13  d13-2  comissao at versao 3, the archive's newest pedido.pago is versao 1"
        ),
        "{text}"
    );
    assert!(text.contains("2026-10-14  ghost-1"), "{text}");
    assert!(
        text.contains("the archive is missing events for these orders"),
        "{text}"
    );
}

#[tokio::test]
async fn a_replay_fixable_difference_beside_rows_a_replay_cannot_fix_still_exits_three() {
    let provider = sink(dedup()).await;
    let jobs = jobs(&provider.url());
    let db = rows_a_replay_cannot_reach(jobs.path()).await;
    exec(&db, "delete from comissao where pedido_id = 'd15-4'").await;
    let out = tempfile::tempdir().unwrap();
    let emit = out.path().to_str().unwrap();

    let (code, json) = verify_json(
        &db,
        jobs.path(),
        &["--timezone", TZ, "--job", "live", "--emit-jobs", emit],
    )
    .await;

    assert_eq!(code, 3, "{json}");
    assert_eq!(json["totals"]["orders_missing"], 1, "{json}");
    assert_eq!(json["totals"]["orders_wrong"], 0, "{json}");
    assert_eq!(
        json["set_aside_totals"]["orders_ahead_of_archive"], 1,
        "{json}"
    );
    assert_eq!(emitted(out.path()), ["reconcile-2026-10-15.yaml"]);
}
