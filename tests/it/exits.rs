//! One way out: the same class of mistake ends every command with the same exit
//! status — 2 for input or configuration that can never work (a job of the wrong kind included),
//! 1 for a refusal or a failure — and says what was wrong, driven through the real binary.

use crate::helpers::*;

const SWEEP_JOB: &str =
    "name: sweeper\nkind: sweep\nschedule: \"0 */5 * * * *\"\nstale_after: 5m\n";

/// A jobs directory with the replay job and a sweep job.
fn jobs() -> tempfile::TempDir {
    let dir = jobs_dir("http://127.0.0.1:9/", &JobSpec::default());
    std::fs::write(dir.path().join("sweeper.yaml"), SWEEP_JOB).expect("write the sweep job");
    dir
}

/// A loopback URL nobody answers on.
fn nobody_listening() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let port = listener.local_addr().expect("its address").port();
    format!("postgres://postgres@127.0.0.1:{port}/test")
}

#[tokio::test]
async fn each_class_of_mistake_exits_the_same_on_every_command() {
    let db = TestDb::new().await;
    let dir = jobs();
    let away = nobody_listening();
    let cases: Vec<(&str, &str, Vec<&str>, i32, &str)> = vec![
        (
            "wrong kind",
            &db.url,
            vec!["run", "sweeper"],
            2,
            "job sweeper is a sweep job, not a replay one",
        ),
        (
            "wrong kind",
            &db.url,
            vec!["approve", "sweeper"],
            2,
            "job sweeper is a sweep job, not a replay one",
        ),
        (
            "wrong kind",
            &db.url,
            vec!["consume", "sweeper", "--metrics-addr", "127.0.0.1:0"],
            2,
            "job sweeper is a sweep job, not a live one",
        ),
        (
            "unknown job",
            &db.url,
            vec!["run", "no-such-job"],
            2,
            "no-such-job",
        ),
        (
            "unknown job",
            &db.url,
            vec!["approve", "no-such-job"],
            2,
            "no-such-job",
        ),
        (
            "bad note",
            &db.url,
            vec![
                "review",
                "resolve",
                "evt-1:notificar-vendedor",
                "--sent",
                "--note",
                "a\u{1}b",
            ],
            2,
            "--note",
        ),
        (
            "bad note",
            &db.url,
            vec!["approve", "replay-2026-10-14-v2", "--note", "a\u{1}b"],
            2,
            "--note",
        ),
        (
            "bad role",
            &db.url,
            vec!["grants", "--worker", "pg_worker"],
            2,
            "pg_worker",
        ),
        (
            "no such account",
            &db.url,
            vec!["users", "remove", "nobody@example.com"],
            2,
            "no console account",
        ),
        (
            "refused",
            &db.url,
            vec!["approve", "replay-2026-10-14-v2"],
            1,
            "no simulation of replay-2026-10-14-v2",
        ),
        (
            "database away",
            &away,
            vec!["status"],
            1,
            "connection refused",
        ),
        (
            "database away",
            &away,
            vec!["run", "replay-2026-10-14-v2"],
            1,
            "connection refused",
        ),
    ];

    for (class, url, args, code, words) in cases {
        let out = run_bin_within(url, dir.path(), &args).await;

        let said = stderr(&out);
        assert_eq!(out.status.code(), Some(code), "{class}: {args:?}\n{said}");
        assert_eq!(
            said.matches(words).count(),
            1,
            "{class}: {args:?} should say {words:?} once:\n{said}"
        );
    }
}
