//! An error about a value that came from the environment names the variable, never the value: a
//! token put where a duration belongs (`timeout: "${SELLER_WEBHOOK_TOKEN}"`) is not printed by
//! `check`, and an invalid `SMTP_URL` parameter is named, not echoed through lettre's message.

use super::{assert_no_secret, unique};
use crate::helpers::*;

/// Every interpolated field of the job files, each holding `${RL_TEST_ECHO}` where a mistake
/// could put a token: (file, text, line and column of the value).
fn files_with_the_variable() -> Vec<(&'static str, String, &'static str)> {
    let head = "notificar-vendedor:\n  webhook:\n    url: http://127.0.0.1:9/\n";
    let job = "name: x\nwindow: { previous: day }\n";
    vec![
        (
            "effects.yaml",
            format!("{head}    timeout: \"${{RL_TEST_ECHO}}\"\n  idempotent: true\n"),
            "4:14",
        ),
        (
            "effects.yaml",
            format!("{head}    timeout: \"5 ${{RL_TEST_ECHO}}\"\n  idempotent: true\n"),
            "4:14",
        ),
        (
            "effects.yaml",
            format!("{head}  idempotent: true\n  dedup_window: ${{RL_TEST_ECHO}}\n"),
            "5:17",
        ),
        (
            "effects.yaml",
            "t:\n  webhook: { url: \"https://${RL_TEST_ECHO}/\" }\n  idempotent: true\n".into(),
            "2:19",
        ),
        (
            "x.yaml",
            format!("{job}schedule: \"${{RL_TEST_ECHO}}\"\n"),
            "3:11",
        ),
        (
            "x.yaml",
            format!("{job}timezone: ${{RL_TEST_ECHO}}\n"),
            "3:11",
        ),
        (
            "x.yaml",
            "name: x\nwindow: { from: \"${RL_TEST_ECHO}\", to: 2026-10-15T00:00:00Z }\n".into(),
            "2:17",
        ),
        (
            "x.yaml",
            format!("{job}report_to: [\"${{RL_TEST_ECHO}}\"]\n"),
            "3:13",
        ),
        (
            "x.yaml",
            "name: x\nkind: sweep\nstale_after: ${RL_TEST_ECHO}\n".into(),
            "3:14",
        ),
    ]
}

#[tokio::test]
async fn check_names_the_variable_of_an_invalid_interpolated_value_and_never_shows_it() {
    // A value that is invalid everywhere: no duration, schedule, zone, time, address or host.
    let secret = format!("{} x y", unique("tok3n s3cr3t@"));
    let db = TestDb::new().await;
    for (file, text, position) in files_with_the_variable() {
        let jobs = jobs_dir("http://127.0.0.1:9/", &JobSpec::default());
        std::fs::write(jobs.path().join(file), &text).expect("write the file");
        let mut cmd = command(&db.url, jobs.path());
        cmd.arg("check").env("RL_TEST_ECHO", &secret);

        let out = output_of(cmd, "replay-ledger check").await;

        assert_eq!(out.status.code(), Some(2), "{text}\n{}", stderr(&out));
        let expected = format!("{}:{position}: ", jobs.path().join(file).display());
        let err = stderr(&out);
        assert!(
            err.starts_with(&expected),
            "{expected}\nnot at the start of:\n{err}"
        );
        assert!(
            err.contains("${RL_TEST_ECHO}"),
            "{text}\nthe variable is not named:\n{err}"
        );
        for part in secret.split([' ', '@', '-']).filter(|p| p.len() >= 5) {
            assert!(
                !err.contains(part),
                "{text}\nshows `{part}` of the value:\n{err}"
            );
        }
        assert_no_secret(&out, &format!("check of\n{text}"), &[&secret]);
    }
}

#[tokio::test]
async fn an_invalid_smtp_url_parameter_is_named_and_neither_it_nor_the_password_is_echoed() {
    let (password, tls) = (unique("smtp-password"), unique("tls-value"));
    let db = TestDb::new().await;
    let jobs = jobs_dir("http://127.0.0.1:9/", &JobSpec::default());
    let url = format!("smtp://relatorios:{password}@127.0.0.1:2525?tls={tls}");
    let mut cmd = command(&db.url, jobs.path());
    cmd.args(["report", "replay-2026-10-14-v2"])
        .env("SMTP_URL", &url)
        .env("REPORT_FROM", "relatorios@example.com");

    let out = output_of(cmd, "replay-ledger report").await;

    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("`tls`"),
        "the parameter is not named:\n{}",
        stderr(&out)
    );
    assert_no_secret(&out, "report with a bad tls parameter", &[&password, &tls]);
}
