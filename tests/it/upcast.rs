//! Older payload shapes, read through their upcaster (invariant `history-read-only` and "Payload
//! shapes"): each shape's fixture under `tests/fixtures/payloads/` says what every payload
//! implies, the domain agrees on it, a replay and the live consumer write exactly it, and no
//! command that reads the archive changes a row of it.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::helpers::*;

const JOB: &str = "replay-2026-10-14-v2";

/// One payload of a fixture: what it implies, a commission or a rejection's reason.
#[derive(Debug, Deserialize)]
pub struct Case {
    pub payload: Box<RawValue>,
    pub commission: Option<i64>,
    pub rejected: Option<String>,
}

/// A shape's fixture, with each payload's exact JSON text.
pub fn fixture(name: &str) -> Vec<Case> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/payloads")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"))
}

pub const SHAPES: [&str; 2] = ["v1-valor-reais.json", "v2-valor-centavos.json"];

/// Archives each case as one order's `pedido.pago` on 2026-10-14, from its exact JSON text (as
/// the system that archived it wrote it); orders `<prefix>-<i>`, positions from `first`.
pub async fn archive_cases(db: &TestDb, prefix: &str, first: i64, cases: &[Case]) {
    for (i, case) in cases.iter().enumerate() {
        let posicao = first + i as i64;
        sqlx::query(
            r#"insert into evento_arquivado (posicao, id, tipo, pedido_id, versao, payload, ocorrido_em)
               values ($1, $2, 'pedido.pago', $3, 1, $4::jsonb, $5)"#,
        )
        .bind(posicao)
        .bind(format!("evt-{posicao}"))
        .bind(format!("{prefix}-{i}"))
        .bind(case.payload.get())
        .bind(day_start() + chrono::Duration::seconds(posicao))
        .execute(&db.pool)
        .await
        .expect("archive a fixture payload");
    }
}

async fn archive_checksum(db: &TestDb) -> Option<String> {
    checksum(&db.pool, "evento_arquivado", "posicao").await
}

#[test]
fn every_fixture_payload_implies_its_commission_or_its_reason() {
    for shape in SHAPES {
        for case in fixture(shape) {
            let text = case.payload.get();
            let mut payload: Value = serde_json::from_str(text).unwrap();
            replay_ledger_core::domain::upcast::keep_exact_valor(text, &mut payload);
            let implied = replay_ledger_core::domain::commission_of(&payload);
            match (&case.commission, &case.rejected) {
                (Some(cents), None) => {
                    assert_eq!(implied.map(|c| c.0), Ok(*cents), "{shape}: {text}");
                }
                (None, Some(reason)) => {
                    assert_eq!(implied.unwrap_err().reason, reason, "{shape}: {text}");
                }
                _ => panic!("{shape}: a case has a commission or a reason: {text}"),
            }
        }
    }
}

#[tokio::test]
async fn a_day_mixing_both_shapes_replays_to_the_exact_commissions_and_counts_the_upcast() {
    let db = TestDb::new().await;
    let (v1, v2) = (fixture(SHAPES[0]), fixture(SHAPES[1]));
    archive_cases(&db, "v1", 1, &v1).await;
    archive_cases(&db, "v2", 100, &v2).await;
    let provider = sink(dedup()).await;
    let jobs = jobs_dir(&provider.url(), &JobSpec::default());
    let before = archive_checksum(&db).await;

    let simulated = run_bin_within(&db.url, jobs.path(), &["run", JOB, "--simulate"]).await;
    assert_success(&simulated, "run --simulate");
    assert_eq!(
        archive_checksum(&db).await,
        before,
        "a simulation reads only"
    );
    let out = run_bin_within(&db.url, jobs.path(), &["run", JOB, "--json"]).await;
    assert_success(&out, "run --json");
    let run: Value = serde_json::from_str(stdout(&out).trim()).unwrap();

    let mut expected: Vec<(String, i64, i64)> = [("v1", &v1), ("v2", &v2)]
        .into_iter()
        .flat_map(|(prefix, cases)| {
            cases
                .iter()
                .enumerate()
                .filter_map(move |(i, c)| Some((format!("{prefix}-{i}"), c.commission?, 1)))
        })
        .collect();
    expected.sort();
    assert_eq!(commissions(&db.pool).await, expected);
    let upcast = v1.iter().filter(|c| c.commission.is_some()).count();
    let rejected = v1
        .iter()
        .chain(&v2)
        .filter(|c| c.rejected.is_some())
        .count();
    assert_eq!(run["events_upcast"], upcast as u64, "{run}");
    assert_eq!(run["events_rejected"], rejected as u64, "{run}");
    assert_eq!(archive_checksum(&db).await, before, "a run reads only");
    let reasons: Vec<String> = sqlx::query_scalar(
        "select erro from evento_rejeitado where execucao_id = $1 order by posicao",
    )
    .bind(JOB)
    .fetch_all(&db.pool)
    .await
    .unwrap();
    let planted: Vec<String> = v1
        .iter()
        .chain(&v2)
        .filter_map(|c| {
            Some(format!(
                "payload de pedido.pago invalido: {}",
                c.rejected.as_ref()?
            ))
        })
        .collect();
    assert_eq!(reasons, planted);
}

#[tokio::test]
async fn the_live_consumer_upcasts_and_metrics_count_upcast_and_rejected_by_reason() {
    let db = TestDb::new().await;
    let v1 = fixture(SHAPES[0]);
    archive_cases(&db, "v1", 1, &v1).await;
    let provider = sink(dedup()).await;
    let jobs = jobs_dir(&provider.url(), &JobSpec::default());
    std::fs::write(
        jobs.path().join("live.yaml"),
        "name: live\nkind: live\neffects:\n  notificar-vendedor: { mode: apply, on_failure: release }\n",
    )
    .unwrap();
    let before = archive_checksum(&db).await;
    let addr = crate::serve::free_addr().to_string();
    let consumer = command(&db.url, jobs.path())
        .args(["consume", "--from-start", "--metrics-addr", &addr])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn consume");
    let upcast = v1.iter().filter(|c| c.commission.is_some()).count();
    let wanted = format!("replay_ledger_events_upcast_total{{job=\"live\"}} {upcast}");
    let url = format!("http://{addr}/metrics");
    let scrape = || async {
        let body = reqwest::get(&url).await.ok()?.text().await.ok();
        body
    };
    wait_until("the consumer counts every upcast event", || async {
        scrape().await.is_some_and(|m| m.contains(&wanted))
    })
    .await;
    let metrics = scrape().await.unwrap_or_default();
    send_signal(&consumer, nix::sys::signal::Signal::SIGTERM);
    let stopped = finish(consumer, "consume after SIGTERM").await;

    assert_success(&stopped, "consume");
    assert!(
        metrics.contains(
            "replay_ledger_events_rejected_total{job=\"live\",reason=\"valor has more than two decimal places\"} 2"
        ),
        "{metrics}"
    );
    let committed = commissions(&db.pool).await;
    assert_eq!(committed.len(), upcast, "{committed:?}");
    assert!(
        committed.contains(&("v1-0".into(), 800, 1)),
        "{committed:?}"
    );
    assert_eq!(
        archive_checksum(&db).await,
        before,
        "the consumer reads only"
    );
}
