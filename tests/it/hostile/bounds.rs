//! Every number and duration of `effects.yaml` and of the job files, at any size: whatever the
//! loader (`check`) accepts, what `run` builds from it — the webhook providers, their semaphores
//! and pacers, the intervals the sweeper binds into SQL — and a real `run` and `sweep` of the
//! binary take without a panic and without an "out of range"; whatever it refuses is refused at
//! the value's line and column.

use std::path::Path;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestRunner};
use replay_ledger_core::config::{load_dir, JobKind, LoadedConfig, EFFECTS_FILE};
use replay_ledger_core::engine::effects::Effects;
use replay_ledger_core::services::sweeper::{Sweeper, SweeperConfig};
use serde_json::json;

use crate::helpers::*;

const JOB: &str = "bounds";

/// The scalars of one configuration, as written in YAML.
#[derive(Debug, Clone)]
struct Values {
    concurrency: String,
    rate_per_second: String,
    timeout: String,
    dedup_window: String,
    stale_after: String,
    batch_size: String,
    partitions: String,
    window: (String, String),
    /// `retry`: attempts, backoff, max_backoff.
    retry: (String, String, String),
}

impl Values {
    /// The largest (or smallest) value of every field that `check` accepts, but `partitions`:
    /// 16, not 1024 (a run of 1024 partitions over one event takes 50 s of the suite; its
    /// bound is older than these and `tests/it/partitions.rs` covers partitions).
    fn at_the_bounds(largest: bool) -> Values {
        let pick = |big: &str, small: &str| if largest { big } else { small }.to_string();
        Values {
            concurrency: pick("4096", "1"),
            rate_per_second: pick("100000", "0.000001"),
            timeout: pick("1h", "1ms"),
            dedup_window: pick("10y", "1ns"),
            stale_after: pick("30d", "1h 1s"),
            batch_size: pick("100000", "1"),
            partitions: pick("16", "1"),
            window: (
                pick("0001-01-01T00:00:00+14:00", "2026-10-14T12:00:00Z"),
                pick("9999-12-31T23:59:59-14:00", "2026-10-14T12:00:01Z"),
            ),
            retry: (pick("100", "1"), pick("10m", "1ns"), pick("1h", "1ns")),
        }
    }

    /// A jobs directory: the seller webhook at `url`, a replay job over the window, a sweep job.
    fn write(&self, dir: &Path, url: &str) {
        let (attempts, backoff, max_backoff) = &self.retry;
        let effects = format!(
            "notificar-vendedor:\n  webhook:\n    url: {url}\n    timeout: {}\n    headers: {{ Authorization: \"Bearer t\" }}\n  idempotent: true\n  concurrency: {}\n  rate_per_second: {}\n  dedup_window: {}\n  retry: {{ attempts: {attempts}, backoff: {backoff}, max_backoff: {max_backoff} }}\n",
            self.timeout, self.concurrency, self.rate_per_second, self.dedup_window
        );
        let job = format!(
            "name: {JOB}\nwindow: {{ from: \"{}\", to: \"{}\" }}\nbatch_size: {}\npartitions: {}\neffects:\n  notificar-vendedor: {{ on_failure: release }}\n",
            self.window.0, self.window.1, self.batch_size, self.partitions
        );
        let sweep = format!(
            "name: sweeper\nkind: sweep\nstale_after: {}\n",
            self.stale_after
        );
        std::fs::write(dir.join(EFFECTS_FILE), effects).expect("write effects.yaml");
        std::fs::write(dir.join("bounds.yaml"), job).expect("write the job");
        std::fs::write(dir.join("sweeper.yaml"), sweep).expect("write the sweep job");
    }
}

/// An integer from anywhere: around the bounds, near the ends of `u64`, beyond it.
fn wild_integer() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            0u64, 1023, 1024, 1025, 4095, 4096, 4097, 99_999, 100_000, 100_001
        ])
        .prop_map(|n| n.to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
        (u64::MAX - 3..=u64::MAX).prop_map(|n| n.to_string()),
        Just("18446744073709551616".to_string()),
        Just("-1".to_string()),
    ]
}

/// Mostly an integer of `usual`, else a wild one: with seven fields, most configurations must
/// pass `check` for the property to test what `run` does with them.
fn integer(usual: std::ops::RangeInclusive<u64>) -> impl Strategy<Value = String> {
    prop_oneof![
        6 => usual.prop_map(|n| n.to_string()),
        1 => wild_integer(),
    ]
}

/// A number of calls per second, mostly within the bounds, else far below or above them.
fn rate() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => (-6i32..=4, 1u32..=9).prop_map(|(e, m)| format!("{m}e{e}")),
        1 => (-320i32..=308, 1u32..=9).prop_map(|(e, m)| format!("{m}e{e}")),
        1 => wild_integer(),
    ]
}

/// A duration in any unit humantime knows, from 0 to amounts that overflow it.
fn wild_duration() -> impl Strategy<Value = String> {
    let unit = prop::sample::select(vec!["ns", "us", "ms", "s", "m", "h", "d", "w", "M", "y"]);
    let amount = prop_oneof![
        0u64..=100_000,
        any::<u64>(),
        prop::sample::select(vec![99_999_999_999u64, 1 << 40, 1 << 53]),
    ];
    (amount, unit).prop_map(|(n, u)| format!("{n}{u}"))
}

/// Mostly `1..=max` of `unit`, else a wild duration.
fn duration(unit: &'static str, max: u64) -> impl Strategy<Value = String> {
    prop_oneof![
        6 => (1..=max).prop_map(move |n| format!("{n}{unit}")),
        1 => wild_duration(),
    ]
}

/// A window anywhere in the years RFC 3339 can write, around the day of the archive's event.
fn window() -> impl Strategy<Value = (String, String)> {
    let offset = prop::sample::select(vec!["+14:00", "Z", "-14:00"]);
    (0u32..=2026, 2027u32..=9999, offset.clone(), offset).prop_map(|(from, to, a, b)| {
        (
            format!("{from:04}-01-01T00:00:00{a}"),
            format!("{to:04}-12-31T23:59:59{b}"),
        )
    })
}

fn values() -> impl Strategy<Value = Values> {
    (
        (integer(1..=4096), rate(), duration("s", 3600)),
        // `stale_after` above an hour is above every timeout `check` accepts.
        (
            duration("d", 3652),
            duration("h", 720).prop_map(|d| format!("1h {d}")),
        ),
        (integer(1..=100_000), integer(1..=1024), window()),
        (
            integer(1..=100),
            duration("ms", 600_000),
            duration("s", 3600),
        ),
    )
        .prop_map(
            |((concurrency, rate, timeout), (dedup, stale), (batch, partitions, window), retry)| {
                Values {
                    concurrency,
                    rate_per_second: rate,
                    timeout,
                    dedup_window: dedup,
                    stale_after: stale,
                    batch_size: batch,
                    partitions,
                    window,
                    retry,
                }
            },
        )
}

/// The sweep job's `stale_after`.
fn stale_after(loaded: &LoadedConfig) -> Duration {
    loaded
        .jobs
        .iter()
        .find_map(|j| match &j.kind {
            JobKind::Sweep(s) => Some(s.stale_after),
            _ => None,
        })
        .expect("the sweep job")
}

/// A reservation abandoned a century ago by a crashed run: stale for any `stale_after`, past
/// any `dedup_window`.
async fn abandoned_reservation(db: &TestDb) {
    sqlx::query("delete from efeito_tentativa")
        .execute(&db.pool)
        .await
        .expect("clear");
    sqlx::query("delete from efeito_aplicado")
        .execute(&db.pool)
        .await
        .expect("clear");
    sqlx::query(
        "insert into efeito_aplicado (chave, evento_id, tipo_efeito, estado, execucao_id, criado_em, atualizado_em)
         values ('evt-1:notificar-vendedor', 'evt-1', 'notificar-vendedor', 'reservado', 'crashed',
                 now() - interval '100 years', now() - interval '100 years')",
    )
    .execute(&db.pool)
    .await
    .expect("insert an abandoned reservation");
}

/// What `run` and the sweeper build from an accepted configuration, used once.
async fn use_accepted(db: &TestDb, loaded: &LoadedConfig) -> Result<(), TestCaseError> {
    let effects = Effects::from_catalog(&loaded.effects);
    prop_assert!(effects.is_ok(), "providers: {:?}", effects.err());
    let effects = effects.unwrap();
    let effect = effects.get("notificar-vendedor").expect("the type");
    // Every pause of the retry policy, one past its last try too.
    let retry = effect.config.retry;
    for attempt in 1..=retry.attempts.saturating_add(1) {
        prop_assert!(retry.delay(attempt) <= retry.max, "{retry:?}");
    }
    let slot = effect.slot().await;
    // A call may time out (a 1 ns timeout is accepted); it must only come back.
    let _ = effect.call("evt-0:notificar-vendedor", &json!({})).await;
    drop(slot);
    abandoned_reservation(db).await;
    let config = SweeperConfig {
        stale_after: stale_after(loaded),
        ..SweeperConfig::default()
    };
    let sweeper = Sweeper::new(db.pool.clone(), effects, config);
    prop_assert!(sweeper.is_ok(), "sweeper: {:?}", sweeper.err());
    let swept = sweeper.unwrap().run_once().await;
    prop_assert!(swept.is_ok(), "sweep: {swept:?}");
    Ok(())
}

#[test]
fn whatever_check_accepts_run_and_the_sweeper_take_without_panic_or_out_of_range() {
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let (db, provider) = rt.block_on(async {
        let db = TestDb::new().await;
        insert(&db.pool, &paid_orders(1)).await;
        (db, sink(dedup()).await)
    });
    let mut runner = TestRunner::new(ProptestConfig {
        cases: 128,
        max_shrink_iters: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    let (accepted, refused) = (std::cell::Cell::new(0), std::cell::Cell::new(0));
    let outcome = runner.run(&values(), |v| {
        let dir = tempfile::tempdir().expect("tempdir");
        v.write(dir.path(), &provider.url());
        match load_dir(dir.path()) {
            Ok(loaded) => {
                accepted.set(accepted.get() + 1);
                rt.block_on(use_accepted(&db, &loaded))
            }
            Err(errors) => {
                refused.set(refused.get() + 1);
                for e in errors.0 {
                    prop_assert!(e.position.is_some(), "an error without a position: {e}");
                }
                Ok(())
            }
        }
    });
    if let Err(e) = outcome {
        panic!("{e}");
    }
    let (accepted, refused) = (accepted.get(), refused.get());
    assert!(
        accepted > 5 && refused > 5,
        "{accepted} accepted, {refused} refused"
    );
}

/// `run` then `sweep` of the real binary over one event, on a database of their own: both exit
/// 0 and leave no reservation behind.
async fn run_and_sweep(values: &Values) -> TestDb {
    let db = TestDb::new().await;
    insert(&db.pool, &paid_orders(1)).await;
    let provider = sink(dedup()).await;
    let dir = tempfile::tempdir().expect("tempdir");
    values.write(dir.path(), &provider.url());
    let check = run_bin_within(&db.url, dir.path(), &["check"]).await;
    assert_success(&check, &format!("check of {values:?}"));
    let run = run_bin_within(&db.url, dir.path(), &["run", JOB]).await;
    assert_success(&run, &format!("run of {values:?}"));
    let sweep = run_bin_within(&db.url, dir.path(), &["sweep"]).await;
    assert_success(&sweep, &format!("sweep of {values:?}"));
    assert!(
        keys_in_state(&db.pool, "reservado").await.is_empty(),
        "{values:?}"
    );
    db
}

#[tokio::test]
async fn run_and_sweep_take_the_largest_values_check_accepts() {
    let db = run_and_sweep(&Values::at_the_bounds(true)).await;
    assert_eq!(
        keys_in_state(&db.pool, "concluido").await,
        ["evt-1:notificar-vendedor"]
    );
}

#[tokio::test]
async fn run_and_sweep_take_the_smallest_values_check_accepts() {
    // A 1 ms timeout may fail the call and a 1 ns dedup_window makes the key `incerto` before
    // it: either way the key is settled, not left reserved.
    run_and_sweep(&Values::at_the_bounds(false)).await;
}

#[tokio::test]
async fn check_refuses_the_numbers_that_crashed_run_at_their_line_and_column() {
    let db = TestDb::new().await;
    let head = "notificar-vendedor:\n  webhook: { url: 'http://127.0.0.1:9/', timeout: 2s }\n  idempotent: true\n";
    let cases = [
        (
            EFFECTS_FILE,
            format!("{head}  concurrency: 18446744073709551615\n"),
            "4:16: concurrency must be from 1 to 4096",
        ),
        (
            EFFECTS_FILE,
            format!("{head}  dedup_window: 99999999999y\n"),
            "4:17: dedup_window must be at most 10years",
        ),
        (
            "sweeper.yaml",
            "name: sweeper\nkind: sweep\nstale_after: 1000y\n".into(),
            "3:14: stale_after must be at most 30days",
        ),
        (
            EFFECTS_FILE,
            format!("{head}  retry: {{ attempts: 0 }}\n"),
            "4:22: retry attempts must be from 1 to 100",
        ),
        (
            EFFECTS_FILE,
            format!("{head}  retry: {{ attempts: 18446744073709551615 }}\n"),
            "4:22: retry attempts must be from 1 to 100",
        ),
        (
            EFFECTS_FILE,
            format!("{head}  retry: {{ backoff: 2h }}\n"),
            "4:21: retry backoff must be at most 10m",
        ),
        (
            EFFECTS_FILE,
            format!("{head}  retry: {{ max_backoff: 99999999999y }}\n"),
            "4:25: retry max_backoff must be at most 1h",
        ),
        (
            EFFECTS_FILE,
            format!("{head}  retry: {{ backoff: 5s, max_backoff: 1s }}\n"),
            "4:10: retry backoff (5s) must not exceed max_backoff (1s)",
        ),
    ];
    for (file, text, expected) in cases {
        let jobs = jobs_dir("http://127.0.0.1:9/", &JobSpec::default());
        std::fs::write(jobs.path().join(file), &text).expect("write the file");

        let out = run_bin_within(&db.url, jobs.path(), &["check"]).await;

        assert_eq!(
            out.status.code(),
            Some(2),
            "{text}\n{}{}",
            stdout(&out),
            stderr(&out)
        );
        let expected = format!("{}:{expected}", jobs.path().join(file).display());
        assert!(
            stderr(&out).starts_with(&expected),
            "{expected}\nnot in:\n{}",
            stderr(&out)
        );
    }
}
