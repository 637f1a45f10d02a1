//! Differential tests over generated archives (invariant `batch-independent`): the real run, the
//! simulation, a run interrupted and resumed, and a run in 3 partitions by 3 workers, at batch
//! sizes 1, 7, 100 and 5,000, each from a right, a wrong and an empty `comissao`, end with the
//! table, the diff, the figures and the sends that the archive implies — computed here, in SQL
//! over `evento_arquivado`, independently of the product (`archive_answer`).
//!
//! The archives (a seeded generator, so a failure names its seed) hold what made runs disagree
//! before: ties of `versao` in different batches and in adjacent positions, newest versions that
//! are invalid, versions archived out of order, orders spread over the whole window, events of
//! other types.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use replay_ledger_core::config;
use replay_ledger_core::domain::Event;
use replay_ledger_core::engine::effects::Effects;
use replay_ledger_core::engine::plan::{Asked, Plan};
use replay_ledger_core::services::runner::{self, RunError, RunReport, RunnerConfig};
use replay_ledger_core::shared::shutdown::Shutdown;
use serde_json::json;
use sqlx::PgPool;
use testkit::sink::Behavior;

use crate::helpers::*;

/// The archive's answer, per order: the accepted `pedido.pago` (its `valorCentavos` an integer
/// number, its `percentual` a number) with the highest `versao`, then the highest `posicao`, and
/// the commission it implies, `round(valor × percentual / 100)` (the generated percentages are
/// whole, so the exact product has no rounding of its own). As `(pedido_id, valor, versao)`,
/// ordered.
pub async fn archive_answer(pool: &PgPool) -> Vec<(String, i64, i64)> {
    sqlx::query_as(
        r#"
        with aceitos as (
            select pedido_id, versao, posicao,
                   round((payload->>'valorCentavos')::numeric
                         * (payload->>'percentual')::numeric / 100)::bigint as valor
            from evento_arquivado
            where tipo = 'pedido.pago'
              and jsonb_typeof(payload->'valorCentavos') = 'number'
              and jsonb_typeof(payload->'percentual') = 'number'
              and (payload->>'valorCentavos')::numeric
                  = trunc((payload->>'valorCentavos')::numeric)
        )
        select distinct on (pedido_id) pedido_id, valor, versao
        from aceitos
        order by pedido_id, versao desc, posicao desc
        "#,
    )
    .fetch_all(pool)
    .await
    .expect("the archive's answer")
}

/// The keys of the accepted `pedido.pago` events' seller notifications, as the same SQL decides
/// acceptance.
async fn accepted_keys(pool: &PgPool) -> BTreeSet<String> {
    sqlx::query_scalar(
        r#"
        select id || ':notificar-vendedor' from evento_arquivado
        where tipo = 'pedido.pago'
          and jsonb_typeof(payload->'valorCentavos') = 'number'
          and jsonb_typeof(payload->'percentual') = 'number'
          and (payload->>'valorCentavos')::numeric = trunc((payload->>'valorCentavos')::numeric)
        "#,
    )
    .fetch_all(pool)
    .await
    .expect("the accepted events' keys")
    .into_iter()
    .collect()
}

/// Orders whose `comissao` row is not the archive's answer (a row missing, extra or different).
pub async fn wrong_orders(pool: &PgPool) -> Vec<String> {
    let answer: BTreeMap<String, (i64, i64)> = archive_answer(pool)
        .await
        .into_iter()
        .map(|(p, v, ver)| (p, (v, ver)))
        .collect();
    let table: BTreeMap<String, (i64, i64)> = commissions(pool)
        .await
        .into_iter()
        .map(|(p, v, ver)| (p, (v, ver)))
        .collect();
    answer
        .keys()
        .chain(table.keys())
        .filter(|p| answer.get(*p) != table.get(*p))
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// SplitMix64: a seeded generator whose sequence never changes, so a seed names an archive.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// A payload the rule accepts, or (when `invalid`) one it rejects in one of the ways a real
/// archive holds: a string amount, a fractional amount, a missing percentage.
fn payload(rng: &mut Rng, invalid: bool) -> serde_json::Value {
    let valor = 100 + rng.below(100_000) as i64;
    let percentual = (1 + rng.below(20)) as f64;
    if !invalid {
        return json!({"valorCentavos": valor, "percentual": percentual});
    }
    match rng.below(3) {
        0 => json!({"valorCentavos": valor.to_string(), "percentual": percentual}),
        1 => json!({"valorCentavos": valor as f64 + 0.5, "percentual": percentual}),
        _ => json!({"valorCentavos": valor}),
    }
}

/// A generated archive of `orders` orders: 1–5 events each, versions 1–3 (ties are common),
/// 12 % invalid (the newest version of some orders among them), 5 % of another type, positions
/// shuffled over the whole window (versions archived out of order, an order's events far
/// apart); then a tail of tie pairs at adjacent positions (one order's two events of one version
/// side by side, in adjacent batches at batch size 1).
pub(crate) fn generated_archive(seed: u64, orders: u64) -> Vec<Event> {
    let mut rng = Rng(seed);
    let mut spread: Vec<(String, i64, String, serde_json::Value)> = Vec::new();
    for order in 0..orders {
        let pedido = format!("ped-{seed}-{order}");
        let events = 1 + rng.below(5);
        let invalid_newest = rng.chance(15);
        for _ in 0..events {
            let versao = 1 + rng.below(3) as i64;
            let invalid = rng.chance(12) || (invalid_newest && versao == 3);
            let tipo = if rng.chance(5) {
                "pedido.criado"
            } else {
                "pedido.pago"
            };
            let body = payload(&mut rng, invalid);
            spread.push((pedido.clone(), versao, tipo.to_string(), body));
        }
    }
    for i in (1..spread.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        spread.swap(i, j);
    }
    for pair in 0..8 {
        let pedido = format!("ped-{seed}-tie-{pair}");
        let versao = 1 + rng.below(3) as i64;
        for _ in 0..2 {
            let body = payload(&mut rng, false);
            spread.push((pedido.clone(), versao, "pedido.pago".into(), body));
        }
    }
    spread
        .into_iter()
        .enumerate()
        .map(|(i, (pedido, versao, tipo, body))| {
            let posicao = i as i64 + 1;
            Event {
                tipo,
                payload: body,
                ..paid(posicao, &pedido, versao, 0, 0.0)
            }
        })
        .collect()
}

/// What `comissao` holds before the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Start {
    /// The archive's answer.
    Right,
    /// Wrong values and older versions, rows ahead of the archive, rows of orders with no
    /// accepted event.
    Wrong,
    Empty,
}

/// Writes the starting table; returns it as `pedido → (valor, versao)`.
async fn start_table(
    pool: &PgPool,
    start: Start,
    seed: u64,
    events: &[Event],
) -> BTreeMap<String, (i64, i64)> {
    sqlx::query("delete from comissao")
        .execute(pool)
        .await
        .unwrap();
    let answer = archive_answer(pool).await;
    let mut rng = Rng(seed ^ 0xA5A5);
    let mut table = BTreeMap::new();
    match start {
        Start::Empty => {}
        Start::Right => {
            for (p, v, ver) in answer {
                table.insert(p, (v, ver));
            }
        }
        Start::Wrong => {
            for (p, v, ver) in answer {
                let row = match rng.below(6) {
                    0 => continue,
                    1 => (v + 1 + rng.below(500) as i64, ver),
                    2 => (v, (ver - 1).max(0)),
                    3 => (rng.below(9_999) as i64, (ver - 1).max(0)),
                    4 => (v / 10, ver),
                    // Ahead of the archive: the guard keeps it, whatever the replay reads.
                    _ => (rng.below(9_999) as i64, ver + 1),
                };
                table.insert(p, row);
            }
            // Orders whose every event is rejected: no replay writes them.
            let all: BTreeSet<&str> = events.iter().map(|e| e.pedido_id.as_str()).collect();
            for p in all {
                if !table.contains_key(p) && rng.chance(50) {
                    table.insert(p.to_string(), (rng.below(9_999) as i64, 1));
                }
            }
        }
    }
    for (p, (v, ver)) in &table {
        sqlx::query(
            "insert into comissao (pedido_id, valor_centavos, versao_evento) values ($1, $2, $3)",
        )
        .bind(p)
        .bind(v)
        .bind(ver)
        .execute(pool)
        .await
        .unwrap();
    }
    table
}

/// What the version guard leaves from `before` and the archive's answer: an order's answer
/// unless its row is newer.
fn expected_table(
    before: &BTreeMap<String, (i64, i64)>,
    answer: &[(String, i64, i64)],
) -> BTreeMap<String, (i64, i64)> {
    let mut table = before.clone();
    for (p, v, ver) in answer {
        match before.get(p) {
            Some((_, current)) if current > ver => {}
            _ => {
                table.insert(p.clone(), (*v, *ver));
            }
        }
    }
    table
}

/// The orders whose value changes, with before (`None`: no row) and after.
fn changes(
    before: &BTreeMap<String, (i64, i64)>,
    after: &BTreeMap<String, (i64, i64)>,
) -> BTreeMap<String, (Option<i64>, i64)> {
    after
        .iter()
        .filter_map(|(p, (v, _))| {
            let was = before.get(p).map(|r| r.0);
            (was != Some(*v)).then(|| (p.clone(), (was, *v)))
        })
        .collect()
}

async fn table_now(pool: &PgPool) -> BTreeMap<String, (i64, i64)> {
    commissions(pool)
        .await
        .into_iter()
        .map(|(p, v, ver)| (p, (v, ver)))
        .collect()
}

/// The diff rows of `execution` that change a value.
async fn diff_changes(pool: &PgPool, execution: &str) -> BTreeMap<String, (Option<i64>, i64)> {
    let rows: Vec<(String, Option<i64>, i64)> = sqlx::query_as(
        "select pedido_id, antes, depois from reprocessamento_diff where execucao_id = $1 and antes is distinct from depois",
    )
    .bind(execution)
    .fetch_all(pool)
    .await
    .unwrap();
    rows.into_iter().map(|(p, a, d)| (p, (a, d))).collect()
}

/// The paths compared with the archive's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    Run,
    Simulation,
    /// A real run stopped by a key that fails for good (its batch and the rest unsettled), then
    /// resumed with the provider healthy.
    Resumed,
    /// `partitions: 3` run by 3 workers.
    Partitions,
    /// A real run in 3 partitions asked from the console to stop (the mark the console's
    /// `interromper` writes, set by a trigger of the test in the checkpoint's own transaction once
    /// a partition's checkpoint passes the window's middle), then resumed.
    AskedToStop,
}

/// Marks execution `name` asked to stop, once, in the transaction that first moves one of its
/// checkpoints to `posicao` or past it: deterministic, whatever the batch size.
async fn ask_to_stop_past(pool: &sqlx::PgPool, name: &str, posicao: i64) {
    for statement in [
        "create table if not exists parada_pedida \
         (execucao_id text primary key, posicao bigint not null, pedida boolean not null default false)",
        "create or replace function pedir_parada() returns trigger language plpgsql as $$
         declare v text;
         begin
           update parada_pedida p set pedida = true
           where not p.pedida and new.ultima_posicao >= p.posicao
             and (new.execucao_id = p.execucao_id or starts_with(new.execucao_id, p.execucao_id || ':p'))
           returning p.execucao_id into v;
           if v is not null then
             update reprocessamento_execucao
             set interrupcao_pedida_em = now(), interrupcao_pedida_por = 'console:teste'
             where execucao_id = v;
           end if;
           return new;
         end $$",
        "drop trigger if exists pedir_parada on reprocessamento_checkpoint",
        "create trigger pedir_parada after insert or update on reprocessamento_checkpoint \
         for each row execute function pedir_parada()",
    ] {
        sqlx::query(statement).execute(pool).await.unwrap();
    }
    sqlx::query("insert into parada_pedida (execucao_id, posicao) values ($1, $2)")
        .bind(name)
        .bind(posicao)
        .execute(pool)
        .await
        .unwrap();
}

async fn run(
    db: &TestDb,
    jobs: &Path,
    name: &str,
    simulate: bool,
    workers: usize,
) -> Result<RunReport, RunError> {
    let (catalog, job) = config::find_job(jobs, name).expect("the job loads");
    let asked = Asked {
        simulate: Some(simulate),
        restart: true,
        at: chrono::Utc::now(),
    };
    let plan = Plan::new(&job, asked).expect("a replay job");
    let config = RunnerConfig {
        started_by: "test".into(),
        retries: replay_ledger_core::engine::applier::Retries {
            call_backoff: Some(replay_ledger_core::tables::db::Backoff {
                attempts: 2,
                base: std::time::Duration::from_millis(5),
                max: std::time::Duration::from_millis(10),
            }),
            ..Default::default()
        },
        progress: false,
        workers,
        ..RunnerConfig::default()
    };
    let effects = Effects::from_catalog(&catalog).expect("providers");
    runner::run(&db.pool, &db.url, &plan, effects, config, Shutdown::never()).await
}

/// Resumes the execution a failed run left (no `--restart`).
async fn resume(db: &TestDb, jobs: &Path, name: &str) -> RunReport {
    let (catalog, job) = config::find_job(jobs, name).expect("the job loads");
    let plan = Plan::new(&job, Asked::at(chrono::Utc::now())).expect("a replay job");
    let config = RunnerConfig {
        started_by: "test".into(),
        progress: false,
        ..RunnerConfig::default()
    };
    let effects = Effects::from_catalog(&catalog).expect("providers");
    runner::run(&db.pool, &db.url, &plan, effects, config, Shutdown::never())
        .await
        .expect("the resumed run finishes")
}

/// One archive through one path at each batch size from each start, every outcome compared
/// with the archive's answer.
async fn differential(path: Route, seeds: &[u64]) {
    for &seed in seeds {
        let events = generated_archive(seed, 40);
        let db = TestDb::new().await;
        insert(&db.pool, &events).await;
        let answer = archive_answer(&db.pool).await;
        let keys = accepted_keys(&db.pool).await;
        for batch_size in [1u32, 7, 100, 5_000] {
            for start in [Start::Right, Start::Wrong, Start::Empty] {
                let case = format!("seed {seed}, {path:?}, batch_size {batch_size}, {start:?}");
                // An execution of its own per case: a real run's corrections are kept per
                // execution across its passes.
                let name = format!("replay-{batch_size}-{start:?}").to_lowercase();
                sqlx::query("delete from efeito_aplicado")
                    .execute(&db.pool)
                    .await
                    .unwrap();
                let before = start_table(&db.pool, start, seed, &events).await;
                let expected = expected_table(&before, &answer);
                let expected_changes = changes(&before, &expected);
                let provider = sink(dedup()).await;
                let spec = JobSpec {
                    name: name.clone(),
                    batch_size,
                    extra: if matches!(path, Route::Partitions | Route::AskedToStop) {
                        "partitions: 3\n".into()
                    } else {
                        String::new()
                    },
                    ..JobSpec::default()
                };
                let jobs = jobs_dir(&provider.url(), &spec);
                let report = match path {
                    Route::Run => run(&db, jobs.path(), &name, false, 1).await.expect(&case),
                    Route::Partitions => run(&db, jobs.path(), &name, false, 3).await.expect(&case),
                    Route::Simulation => run(&db, jobs.path(), &name, true, 1).await.expect(&case),
                    Route::AskedToStop => {
                        let middle = events
                            .iter()
                            .filter(|e| keys.contains(&key(e)))
                            .nth(keys.len() / 2)
                            .expect("an accepted event");
                        ask_to_stop_past(&db.pool, &name, middle.posicao).await;
                        let stopped = run(&db, jobs.path(), &name, false, 3).await.expect(&case);
                        assert!(
                            stopped.ended == runner::Ended::Interrupted
                                && stopped.stopped_by.as_deref() == Some("console:teste"),
                            "{case}: the first attempt stops as asked: {:?}, {:?}",
                            stopped.ended,
                            stopped.stopped_by
                        );
                        assert_eq!(
                            execution_state(&db.pool, &name).await.as_deref(),
                            Some("interrompida"),
                            "{case}"
                        );
                        resume(&db, jobs.path(), &name).await
                    }
                    Route::Resumed => {
                        // A key in the middle of the window fails for good: the run stops there.
                        let middle = events
                            .iter()
                            .filter(|e| keys.contains(&key(e)))
                            .nth(keys.len() / 2)
                            .expect("an accepted event");
                        provider.set_behavior(Behavior {
                            fail_keys: [key(middle)].into_iter().collect(),
                            ..dedup()
                        });
                        let failed = run(&db, jobs.path(), &name, false, 1).await;
                        assert!(
                            matches!(failed, Err(RunError::EffectFailed(_))),
                            "{case}: the first attempt stops on the failing key: {failed:?}"
                        );
                        provider.set_behavior(dedup());
                        resume(&db, jobs.path(), &name).await
                    }
                };
                if path == Route::Simulation {
                    assert_eq!(
                        table_now(&db.pool).await,
                        before,
                        "{case}: a simulation writes nothing"
                    );
                    assert_eq!(
                        diff_changes(&db.pool, &name).await,
                        expected_changes,
                        "{case}: the diff's changes"
                    );
                } else {
                    let table = table_now(&db.pool).await;
                    let wrong: Vec<_> = expected
                        .iter()
                        .filter(|(p, r)| table.get(*p) != Some(r))
                        .take(5)
                        .collect();
                    assert!(
                        wrong.is_empty() && table.len() == expected.len(),
                        "{case}: comissao differs from the archive's answer; first expected rows not there: {wrong:?}"
                    );
                    let sent: BTreeSet<String> = keys_in_state(&db.pool, "concluido")
                        .await
                        .into_iter()
                        .collect();
                    assert_eq!(sent, keys, "{case}: every accepted event's key is sent");
                    let corrected: i64 = sqlx::query_scalar(
                        "select count(*) from reprocessamento_correcao where execucao_id = $1 and antes is distinct from depois",
                    )
                    .bind(&name)
                    .fetch_one(&db.pool)
                    .await
                    .unwrap();
                    assert_eq!(
                        corrected as usize,
                        expected_changes.len(),
                        "{case}: the corrections that change a value"
                    );
                }
                assert_eq!(
                    report.summary.orders_changed as usize,
                    expected_changes.len(),
                    "{case}: orders_changed counts the orders whose value changes"
                );
            }
        }
    }
}

const SEEDS: &[u64] = &[11, 29, 47];

#[tokio::test]
async fn a_real_run_leaves_the_archives_answer_whatever_the_batches() {
    differential(Route::Run, SEEDS).await;
}

#[tokio::test]
async fn a_simulation_shows_the_archives_answer_whatever_the_batches() {
    differential(Route::Simulation, SEEDS).await;
}

#[tokio::test]
async fn a_run_interrupted_and_resumed_leaves_the_archives_answer() {
    differential(Route::Resumed, SEEDS).await;
}

#[tokio::test]
async fn a_partitioned_run_asked_to_stop_and_resumed_leaves_the_archives_answer() {
    differential(Route::AskedToStop, SEEDS).await;
}

#[tokio::test]
async fn a_run_in_three_partitions_by_three_workers_leaves_the_archives_answer() {
    differential(Route::Partitions, SEEDS).await;
}
