//! The small things an operator meets on the first night, each through the real binary:
//! `migrate --status`, `review resolve` without a decision, an error that says its cause once,
//! an empty sweep pass that stays quiet but still counts, and progress that says what holds a run.

use testkit::sink::Behavior;

use crate::helpers::*;
use crate::serve::{metrics_sample, sweep_job, wait_healthy, Serve};

/// Every migration file the binary embeds, by version (the file name's leading number).
fn migration_versions() -> Vec<String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
    let mut versions: Vec<String> = std::fs::read_dir(dir)
        .expect("read migrations/")
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            Some(name.split('_').next()?.to_string())
        })
        .collect();
    versions.sort();
    versions
}

/// The state `migrate --status` gives each version: the first word of the line naming it.
fn states(text: &str, versions: &[String]) -> Vec<String> {
    versions
        .iter()
        .map(|v| {
            let line = text
                .lines()
                .find(|l| l.split_whitespace().nth(1) == Some(v.as_str()))
                .unwrap_or_else(|| panic!("a line for migration {v}:\n{text}"));
            line.split_whitespace()
                .next()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

#[tokio::test]
async fn migrate_status_lists_every_migration_as_pending_then_applied() {
    let db = TestDb::unmigrated().await;
    let jobs = tempfile::tempdir().expect("tempdir");
    let versions = migration_versions();

    let before = run_bin(&db.url, jobs.path(), &["migrate", "--status"]).await;
    assert_success(&before, "migrate --status on an empty database");
    let pending = states(&stdout(&before), &versions);
    assert!(pending.iter().all(|s| s == "pending"), "{pending:?}");
    let tables: i64 =
        sqlx::query_scalar("select count(*) from pg_tables where tablename = 'efeito_aplicado'")
            .fetch_one(&db.pool)
            .await
            .expect("count tables");
    assert_eq!(tables, 0, "--status only reads: it applies nothing");

    assert_success(
        &run_bin(&db.url, jobs.path(), &["migrate"]).await,
        "migrate",
    );
    let after = run_bin(&db.url, jobs.path(), &["migrate", "--status"]).await;
    assert_success(&after, "migrate --status after migrate");
    let applied = states(&stdout(&after), &versions);
    assert!(applied.iter().all(|s| s == "applied"), "{applied:?}");
}

#[tokio::test]
async fn review_resolve_without_a_decision_names_both_flags() {
    let jobs = tempfile::tempdir().expect("tempdir");
    let out = run_bin(
        &server_url(),
        jobs.path(),
        &["review", "resolve", "e-1:notificar-vendedor"],
    )
    .await;
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("--sent") && err.contains("--not-sent"),
        "{err}"
    );
}

#[tokio::test]
async fn a_database_error_says_its_cause_once() {
    let jobs = tempfile::tempdir().expect("tempdir");
    let mut url = url::Url::parse(&server_url()).expect("url");
    url.set_path("rl_no_such_database");
    let out = run_bin(url.as_str(), jobs.path(), &["status"]).await;
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.matches("does not exist").count(), 1, "{err}");
    assert!(err.contains("rl_no_such_database"), "{err}");
}

/// An idle sweeper fires every second: no line at info about it, yet its passes are counted.
#[tokio::test]
async fn an_empty_sweep_pass_is_quiet_at_info_but_counted() {
    let db = TestDb::new().await;
    let provider = sink(dedup()).await;
    let jobs = jobs_dir(&provider.url(), &JobSpec::default());
    sweep_job(jobs.path(), "10m");

    let serve = Serve::start_with(&db.url, jobs.path(), "serve", |cmd| {
        // Info for everything, debug for the scheduler's fires: the pass is there, at debug.
        cmd.env(
            "RUST_LOG",
            "info,replay_ledger::services::scheduler::fire=debug",
        );
    });
    wait_healthy(&serve).await;
    let passes = || async {
        let (_, body) = serve.get("/metrics").await.unwrap_or_default();
        metrics_sample(
            &body,
            "replay_ledger_runs_total{job=\"sweeper\",outcome=\"finished\"}",
        )
    };
    wait_until("three sweep passes are counted", || async {
        passes().await.is_some_and(|n| n >= 3.0)
    })
    .await;
    let log = serve.log();
    let (status, _) = serve.terminate().await;
    assert!(status.success());
    let said: Vec<&str> = log.lines().filter(|l| l.contains("sweep pass")).collect();
    assert!(
        said.iter().any(|l| l.contains("sweep pass done")),
        "an empty pass is logged at debug:\n{log}"
    );
    assert!(
        said.iter().all(|l| l.contains("DEBUG")),
        "an empty pass logs nothing at info:\n{log}"
    );
}

/// Off a terminal, progress is a log line every few seconds: with a provider paced at 10 calls a
/// second, the line says how many effects a second go out and that the rate limit holds the run.
#[tokio::test]
async fn progress_says_effects_per_second_and_that_the_rate_limit_holds_the_run() {
    let events = paid_orders(80);
    let db = seeded_db(&events, &[]).await;
    let provider = sink(Behavior::default()).await;
    let jobs = jobs_dir(&provider.url(), &JobSpec::default());
    let effects = std::fs::read_to_string(jobs.path().join("effects.yaml")).expect("read");
    std::fs::write(
        jobs.path().join("effects.yaml"),
        format!("{effects}  rate_per_second: 10\n"),
    )
    .expect("write effects.yaml");

    let out = output_of(
        {
            let mut cmd = command(&db.url, jobs.path());
            cmd.args(["run", "replay-2026-10-14-v2"]);
            cmd
        },
        "a paced run",
    )
    .await;
    assert_success(&out, "a paced run");
    let err = stderr(&out);
    let line = err
        .lines()
        .find(|l| l.contains("progress"))
        .unwrap_or_else(|| panic!("a progress line:\n{err}"));
    assert!(line.contains("effects_per_s="), "{line}");
    assert!(
        line.contains("rate_limited_by=notificar-vendedor"),
        "{line}"
    );
}
