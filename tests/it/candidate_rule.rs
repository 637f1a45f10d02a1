//! A candidate commission rule simulated on all history: a replay job names `rule:`
//! and `window: all`; its simulation writes a diff against today's table and nothing else —
//! `comissao` and `efeito_aplicado` byte-identical (`simulation-writes-nothing`) — and the diff equals an
//! independent computation. A real run of a candidate is refused; `check` names an unknown rule's
//! file and line; an approval binds the rule's name and version.

use std::collections::BTreeMap;

use chrono::{TimeZone, Utc};
use replay_ledger_core::domain::Event;
use serde_json::{json, Value};

use crate::helpers::*;

pub(crate) const CANDIDATE: &str = "teto";

fn on_day(posicao: i64, pedido: &str, versao: i64, day: u32, payload: Value) -> Event {
    Event {
        posicao,
        id: format!("evt-{posicao}"),
        tipo: "pedido.pago".into(),
        pedido_id: pedido.into(),
        versao,
        payload,
        ocorrido_em: Utc.with_ymd_and_hms(2026, 9, day, 12, 0, 0).unwrap(),
    }
}

/// Orders over four days of September, some above a 10 % rate, one of the older shape, one
/// re-paid in a second version, one rejected by every rule.
fn history() -> Vec<Event> {
    let cur = |v: i64, p: i64| json!({"valorCentavos": v, "percentual": p});
    vec![
        on_day(1, "ped-1", 1, 1, cur(10_000, 15)),
        on_day(2, "ped-2", 1, 1, cur(10_000, 5)),
        on_day(3, "ped-3", 1, 2, cur(20_000, 12)),
        on_day(4, "ped-5", 1, 2, cur(999, 10)),
        on_day(5, "ped-3", 2, 3, cur(30_000, 20)),
        on_day(
            6,
            "ped-4",
            1,
            3,
            json!({"valor": "100.00", "percentual": "25"}),
        ),
        on_day(
            7,
            "ped-6",
            1,
            4,
            json!({"valorCentavos": "x", "percentual": 5}),
        ),
    ]
}

/// The independent computation: per order, the valid event of the highest version; its
/// commission at `min(percentual, cap)`, halves rounded up (all rates here are integers).
fn expected(events: &[Event], cap: i64) -> BTreeMap<String, (i64, i64)> {
    let mut newest: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for e in events {
        let p = &e.payload;
        let cents = p["valorCentavos"].as_i64().or_else(|| {
            let reais: f64 = p["valor"].as_str()?.parse().ok()?;
            Some((reais * 100.0).round() as i64)
        });
        let Some(cents) = cents else { continue };
        let rate = p["percentual"]
            .as_i64()
            .or_else(|| p["percentual"].as_str()?.parse().ok())
            .unwrap()
            .min(cap);
        let value = (cents * rate + 50).div_euclid(100);
        if newest.get(&e.pedido_id).is_none_or(|(v, _)| e.versao > *v) {
            newest.insert(e.pedido_id.clone(), (e.versao, value));
        }
    }
    newest
}

/// The archive, today's table as the rule in force left it, the ledger of the live consumer,
/// and a jobs dir with the candidate job.
pub(crate) async fn today(rule: &str) -> (TestDb, tempfile::TempDir) {
    let db = TestDb::new().await;
    let events = history();
    insert(&db.pool, &events).await;
    for (pedido, (versao, valor)) in expected(&events, i64::MAX) {
        sqlx::query(
            "insert into comissao (pedido_id, valor_centavos, versao_evento) values ($1, $2, $3)",
        )
        .bind(pedido)
        .bind(valor)
        .bind(versao)
        .execute(&db.pool)
        .await
        .unwrap();
    }
    already_sent(&db.pool, &events.iter().take(4).collect::<Vec<_>>()).await;
    let jobs = jobs_dir("http://127.0.0.1:9/", &JobSpec::default());
    std::fs::write(
        jobs.path().join("teto.yaml"),
        format!(
            "name: {CANDIDATE}\nrule: {rule}\nwindow: all\nsimulate: true\n\
             effects:\n  notificar-vendedor: {{ mode: apply }}\n"
        ),
    )
    .unwrap();
    (db, jobs)
}

async fn diff_changes(db: &TestDb) -> Vec<(String, Option<i64>, i64)> {
    sqlx::query_as(
        "select pedido_id, antes, depois from reprocessamento_diff \
         where execucao_id = $1 and antes is distinct from depois order by pedido_id",
    )
    .bind(CANDIDATE)
    .fetch_all(&db.pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn a_capped_rule_simulated_on_all_history_diffs_as_computed_and_touches_nothing_else() {
    let (db, jobs) = today("teto-10pct").await;
    let comissao = checksum(&db.pool, "comissao", "pedido_id").await;
    let ledger = checksum(&db.pool, "efeito_aplicado", "chave").await;

    let out = run_bin_within(&db.url, jobs.path(), &["run", CANDIDATE]).await;

    assert_success(&out, "the candidate's simulation");
    let (now, capped) = (expected(&history(), i64::MAX), expected(&history(), 10));
    let want: Vec<(String, Option<i64>, i64)> = capped
        .iter()
        .filter(|(id, (_, v))| now[*id].1 != *v)
        .map(|(id, (_, v))| (id.clone(), Some(now[id].1), *v))
        .collect();
    assert_eq!(diff_changes(&db).await, want);
    assert_eq!(want.len(), 3, "ped-1, ped-3 and ped-4 pay above 10 %");
    assert_eq!(checksum(&db.pool, "comissao", "pedido_id").await, comissao);
    assert_eq!(checksum(&db.pool, "efeito_aplicado", "chave").await, ledger);
}

#[tokio::test]
async fn a_real_run_of_a_candidate_rule_is_refused_and_writes_nothing() {
    let (db, jobs) = today("arredondamento-bancario").await;
    let path = jobs.path().join("teto.yaml");
    let yaml = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, yaml.replace("simulate: true", "simulate: false")).unwrap();
    let comissao = checksum(&db.pool, "comissao", "pedido_id").await;
    let ledger = checksum(&db.pool, "efeito_aplicado", "chave").await;

    let out = run_bin_within(&db.url, jobs.path(), &["run", CANDIDATE]).await;

    assert_exits_saying(&out, 2, "only simulated");
    assert_eq!(checksum(&db.pool, "comissao", "pedido_id").await, comissao);
    assert_eq!(checksum(&db.pool, "efeito_aplicado", "chave").await, ledger);
}

#[tokio::test]
async fn check_names_the_file_and_line_of_an_unknown_rule() {
    let (db, jobs) = today("teto-20pct").await;

    let out = run_bin_within(&db.url, jobs.path(), &["check"]).await;

    assert_exits_saying(&out, 2, "teto.yaml:2");
    assert!(
        stderr(&out).contains("unknown rule `teto-20pct`"),
        "{}",
        stderr(&out)
    );
}

#[tokio::test]
async fn an_approval_of_a_candidates_simulation_binds_the_rules_name_and_version() {
    let (db, jobs) = today("teto-10pct").await;
    assert_success(
        &run_bin_within(&db.url, jobs.path(), &["run", CANDIDATE]).await,
        "the simulation",
    );

    let out = run_bin_within(&db.url, jobs.path(), &["approve", CANDIDATE]).await;

    assert_success(&out, "approve");
    let listed = run_bin_within(&db.url, jobs.path(), &["approvals", "--json"]).await;
    let approvals: Value = serde_json::from_str(&stdout(&listed)).unwrap();
    assert_eq!(
        approvals[0]["fingerprint"]["definition"]["rule"],
        "teto-10pct/1"
    );
    let stored: String = sqlx::query_scalar("select versao_regra from reprocessamento_aprovacao")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(stored, "teto-10pct/1");
}
