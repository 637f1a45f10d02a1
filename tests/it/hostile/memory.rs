//! The peak memory of real `replay-ledger` processes fed hostile input: a window of events whose
//! payloads are tens of megabytes of fields the rule never reads. The peak is the kernel's
//! `ru_maxrss` of this test's finished children (nextest runs each test in its own process, so
//! the children are this test's own).

use chrono::{DateTime, Utc};
use nix::sys::resource::{getrusage, UsageWho};

use crate::helpers::*;

const JOB: &str = "replay-2026-10-14-v2";

/// The stated bound on a `run` or `verify` process's peak resident memory, whatever the payloads.
const PEAK_BOUND_MIB: i64 = 100;

/// Each large payload's junk field: 30 MiB of text.
const JUNK_BYTES: i32 = 30 << 20;

/// The highest peak resident memory, in MiB, of the children this process has waited for.
fn peak_of_children_mib() -> i64 {
    getrusage(UsageWho::RUSAGE_CHILDREN)
        .expect("getrusage")
        .max_rss()
        / 1024
}

/// Inside the job's window (2026-10-14 at -03:00).
fn inside_window(posicao: i64) -> DateTime<Utc> {
    day_start() + chrono::Duration::hours(12) + chrono::Duration::seconds(posicao)
}

/// Archives `pedido.pago` events of `pedido-<n>` whose payload is `rule` plus a 30 MiB junk field
/// (built by PostgreSQL: the test process never holds it).
async fn archive_large(db: &TestDb, posicao: i64, rule: &str) {
    sqlx::query(
        "insert into evento_arquivado (posicao, id, tipo, pedido_id, versao, payload, ocorrido_em)
         values ($1, 'evt-' || $1, 'pedido.pago', 'pedido-' || $1, 1,
                 $2::jsonb || jsonb_build_object('anexo', repeat(md5($1::text), $3 / 32)), $4)",
    )
    .bind(posicao)
    .bind(rule)
    .bind(JUNK_BYTES)
    .bind(inside_window(posicao))
    .execute(&db.pool)
    .await
    .expect("archive a large event");
}

#[tokio::test]
async fn a_window_of_thirty_megabyte_payloads_is_run_and_verified_within_the_memory_bound() {
    let db = TestDb::new().await;
    for posicao in 1..=8 {
        let rule = format!(
            r#"{{"valorCentavos": {}, "percentual": 5}}"#,
            1000 * posicao
        );
        archive_large(&db, posicao, &rule).await;
    }
    archive_large(&db, 9, r#"{"valor": 159.9, "percentual": "5"}"#).await;
    let provider = sink(dedup()).await;
    let jobs = jobs_dir(&provider.url(), &JobSpec::default());

    let run = run_bin_within(&db.url, jobs.path(), &["run", JOB]).await;
    let verify = ["verify", "--from", "2026-10-14", "--to", "2026-10-15"];
    let verified = run_bin_within(&db.url, jobs.path(), &verify).await;

    assert_success(&run, "the run over large payloads");
    let mut expected: Vec<(String, i64, i64)> = (1..=8)
        .map(|i| (format!("pedido-{i}"), 50 * i, 1))
        .collect();
    expected.push(("pedido-9".into(), 800, 1));
    assert_eq!(commissions(&db.pool).await, expected);
    assert_eq!(provider.delivery_count(), 9);
    assert_success(&verified, "verify over large payloads");
    let peak = peak_of_children_mib();
    assert!(
        peak < PEAK_BOUND_MIB,
        "peak resident memory {peak} MiB, bound {PEAK_BOUND_MIB} MiB"
    );
}

/// A jobs directory holding `effects.yaml` and `job.yaml` with `text`.
fn jobs_with(text: &str) -> tempfile::TempDir {
    let jobs = jobs_dir("http://127.0.0.1:9/", &JobSpec::default());
    std::fs::remove_file(jobs.path().join("replay-2026-10-14-v2.yaml")).expect("remove job");
    std::fs::write(jobs.path().join("job.yaml"), text).expect("write job");
    jobs
}

/// `[&x <scalar>, *x, *x, …]`: one ~880 KB scalar used `1 + aliases` times, in a file under 1 MiB.
fn aliased(scalar: &str, aliases: usize) -> String {
    format!("[&x {scalar}{}]", ", *x".repeat(aliases))
}

#[tokio::test]
async fn a_job_file_whose_aliases_repeat_a_large_scalar_is_refused_by_check_within_the_memory_bound(
) {
    let db = TestDb::new().await;
    let event_types = aliased(&"t".repeat(880_000), 1000);
    let event_types_job = jobs_with(&format!(
        "name: bomb\nwindow: {{ previous: day }}\nevent_types: {event_types}\n"
    ));
    let recipients = aliased(&format!("f@{}.com", "d".repeat(880_000)), 1000);
    let report_job = jobs_with(&format!(
        "name: bomb\nkind: report\nschedule: \"0 0 7 * * *\"\nto: {recipients}\n"
    ));

    let types = run_bin_within(&db.url, event_types_job.path(), &["check"]).await;
    let report = run_bin_within(&db.url, report_job.path(), &["check"]).await;

    assert_exits_saying(&types, 2, "YAML aliases repeat a value");
    assert_exits_saying(&report, 2, "at most 254 are allowed");
    let peak = peak_of_children_mib();
    assert!(peak < 100, "peak resident memory {peak} MiB, bound 100 MiB");
}
