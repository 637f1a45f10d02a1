//! The executions list says what `serve` fires on its own: each scheduled job's schedule, its
//! next fire and its last run in the console's timezone (one clock on the page), and how its last
//! run ended (a verify job's says what it found, in Portuguese).

use super::*;
use replay_ledger::services::scheduler::runs::{self, JobRun, RunDetail};
use replay_ledger_core::tables::execution::State;

#[tokio::test]
async fn the_list_shows_each_scheduled_job_its_next_fire_and_its_last_run() {
    let db = TestDb::new().await;
    let jobs = jobs_dir("http://127.0.0.1:9/", &JobSpec::default());
    std::fs::write(
        jobs.path().join("sweeper.yaml"),
        "name: sweeper\nkind: sweep\nschedule: \"0 30 2 * * *\"\ntimezone: Europe/Berlin\nstale_after: 5m\n",
    )
    .unwrap();
    std::fs::write(
        jobs.path().join("verify.yaml"),
        "name: nightly-verify\nkind: verify\nschedule: \"0 0 6 * * *\"\nlookback: 3d\nreport_to: [financeiro@example.com]\n",
    )
    .unwrap();
    let at = chrono::Utc::now() - chrono::Duration::hours(3);
    runs::record(
        &db.pool,
        &JobRun {
            job: "nightly-verify".into(),
            started_at: at,
            finished_at: at,
            state: State::Finished,
            detail: Some("2 day(s) with differences".into()),
            data: Some(RunDetail::Verify {
                days_differing: 2,
                proposals: 1,
            }),
        },
    )
    .await
    .unwrap();
    add_user(&db.url, jobs.path(), "vera@example.com", "viewer").await;
    let console = ConsoleProc::start(&db.url, jobs.path(), &[]).await;
    let viewer = Client::logged_in(&console, "vera@example.com").await;

    let body = viewer.get("/").await.body;
    let section = body
        .split("id=\"scheduled\"")
        .nth(1)
        .unwrap_or_else(|| panic!("a scheduled-jobs section: {body}"));
    let row = |job: &str| {
        section
            .split("<tr>")
            .find(|r| r.contains(&format!(">{job}<")))
            .unwrap_or_else(|| panic!("a row for {job}: {section}"))
            .to_string()
    };
    let sweeper = row("sweeper");
    let verify = row("nightly-verify");
    assert!(
        sweeper.contains("0 30 2 * * *")
            // 02:30 in Berlin (+01:00 in winter, +02:00 in summer), in the console's UTC.
            && (sweeper.contains("01:30 +00:00") || sweeper.contains("00:30 +00:00"))
            && sweeper.contains("nunca rodou"),
        "{sweeper}"
    );
    assert!(
        verify.contains("06:00 +00:00")
            && verify.contains("2 dia(s) com diferenças; 1 correção(ões) proposta(s)")
            && verify.contains(&at.format("%Y-%m-%d %H:%M +00:00").to_string()),
        "{verify}"
    );
    // The job of the test's jobs directory has no schedule: it is not listed as scheduled.
    assert!(!section.contains(&format!(">{JOB}<")), "{section}");
}
