//! Archive text is inert (invariant `inert-text`): ESC sequences, BEL, `\r\n` and bidi overrides in
//! event ids and `pedido_id` reach no terminal, log line or mail text part as themselves — not
//! through the run summary's rejected events, the plain log lines, `review list`, `status`, nor the
//! report's text part (where `\r\n` in a `pedido_id` would forge lines of the mail body).

use serde_json::json;
use testkit::sink::Behavior;

use crate::helpers::*;

/// What must never come out raw: ESC, BEL, CR, U+202E, and a forged line.
fn assert_inert(what: &str, text: &str) {
    for (c, name) in [
        ('\u{1b}', "ESC"),
        ('\u{7}', "BEL"),
        ('\r', "CR"),
        ('\u{202e}', "U+202E"),
    ] {
        assert!(!text.contains(c), "{what} holds a raw {name}:\n{text:?}");
    }
    assert!(
        !text.lines().any(|l| l.starts_with("X-Forged")),
        "{what} holds a forged line:\n{text}"
    );
}

/// Events whose ids and orders carry hostile text: valid ones (diff rows, effects), one with an
/// invalid payload (a rejected event).
fn hostile_events() -> Vec<replay_ledger_core::domain::Event> {
    let mut events = Vec::new();
    for (i, (id, pedido)) in [
        ("evt-\u{1b}[2J\u{7}1", "ped-\r\nX-Forged: yes"),
        ("evt-\u{202e}2", "ped-\u{1b}]0;owned\u{7}"),
        ("evt-3\r\nX-Forged: id", "ped-\u{202e}3fdp.exe"),
    ]
    .into_iter()
    .enumerate()
    {
        let mut e = paid(i as i64 + 1, pedido, 1, 100_000, 5.0);
        e.id = id.into();
        events.push(e);
    }
    let mut invalid = paid(4, "ped-\u{1b}[31m4", 1, 1, 5.0);
    invalid.id = "evt-\u{1b}[31m\u{202e}bad\r\nX-Forged: rejected".into();
    invalid.payload = json!({"valorCentavos": "x", "percentual": 5});
    events.push(invalid);
    events
}

#[tokio::test]
async fn hostile_ids_reach_no_terminal_log_line_or_mail_body_as_themselves() {
    let db = TestDb::new().await;
    insert(&db.pool, &hostile_events()).await;
    // A provider that answers 500: under `keep` each key ends incerto, in the review queue.
    let provider = sink(Behavior {
        fail_status: Some(500),
        ..Behavior::default()
    })
    .await;
    let jobs = jobs_dir(
        &provider.url(),
        &JobSpec {
            idempotent: false,
            on_failure: "keep",
            ..JobSpec::default()
        },
    );
    std::fs::write(
        jobs.path().join("finance-daily.yaml"),
        "name: finance-daily\nkind: report\nto: [financeiro@example.com]\n",
    )
    .unwrap();
    let mut outputs = Vec::new();
    for args in [
        vec!["run", "replay-2026-10-14-v2", "--simulate"],
        vec!["run", "replay-2026-10-14-v2"],
        vec!["review", "list"],
        vec!["status"],
        vec!["approvals"],
    ] {
        let mut cmd = command(&db.url, jobs.path());
        cmd.env("RUST_LOG", "debug").args(&args);
        outputs.push((args.join(" "), output_of(cmd, "replay-ledger").await));
    }
    let eml = jobs.path().join("report.eml");
    let report = run_bin_within(
        &db.url,
        jobs.path(),
        &[
            "report",
            "replay-2026-10-14-v2:simulacao",
            "--out",
            eml.to_str().unwrap(),
        ],
    )
    .await;

    for (what, out) in &outputs {
        assert_inert(&format!("stdout of {what}"), &stdout(out));
        assert_inert(&format!("stderr of {what}"), &stderr(out));
    }
    assert!(
        stdout(&outputs[0].1).contains("evt-\\u{1b}[31m\\u{202e}bad\\r\\nX-Forged: rejected"),
        "the rejected event is shown, escaped:\n{}",
        stdout(&outputs[0].1)
    );
    assert_success(&report, "report --out");
    let mail = crate::report::smtp::parse(&std::fs::read(&eml).unwrap());
    // MIME ends its lines with CRLF; inside a line no CR may remain.
    let text = mail.text.replace("\r\n", "\n");
    assert_inert("the report's text part", &text);
    assert_inert("the report's subject", &mail.subject);
    assert!(
        mail.text.contains("ped-\\r\\nX-Forged: yes"),
        "the order is listed, escaped:\n{}",
        mail.text
    );
}

#[tokio::test]
async fn hostile_environment_values_reach_clap_errors_escaped_and_exit_2() {
    let jobs = tempfile::tempdir().expect("tempdir");
    let cases = [
        ("WAIT_FOR_DB", "check"),
        ("CONSOLE_TRUSTED_PROXIES", "console"),
        ("METRICS_MAX_CONNECTIONS", "consume"),
    ];
    for (var, command) in cases {
        for value in [
            "1\r\nFORGED: yes",
            "\u{1b}]0;owned\u{7}\u{1b}[2J",
            "x\nFORGED\u{202e}",
        ] {
            let mut cmd = crate::helpers::command("postgres://127.0.0.1:1/none", jobs.path());
            cmd.env(var, value).arg(command);

            let out = output_of(cmd, command).await;

            let what = format!("{var}={value:?} {command}");
            assert_eq!(out.status.code(), Some(2), "{what}: {}", stderr(&out));
            let said = stderr(&out);
            assert!(said.starts_with("error: invalid value"), "{what}: {said}");
            assert_inert(&what, &said);
            assert!(
                !said.lines().any(|l| l.starts_with("FORGED")),
                "{what}: {said}"
            );
        }
    }
}

/// A raw line feed in any value clap echoes from the command line (an unknown subcommand, an
/// invalid value, an unexpected argument, a value near a known one) is escaped: no line of the
/// error starts with what followed it.
#[tokio::test]
async fn hostile_command_line_values_reach_clap_errors_escaped_and_exit_2() {
    let jobs = tempfile::tempdir().expect("tempdir");
    let forged = "x\nFORGED: yes";
    let near = "ru\nn";
    let cases: Vec<Vec<&str>> = vec![
        vec![forged],
        vec![near],
        vec!["run", "job", forged],
        vec!["run", "job", "--simulat\ne"],
        vec!["consume", "--metrics-addr", forged],
        vec!["verify", "--from", forged],
        vec!["users", "add", "a@b.example", "--role", "financ\nFORGED"],
        vec!["completions", forged],
        vec!["rebuild", "--chunk", forged],
    ];
    for args in cases {
        let mut cmd = crate::helpers::command("postgres://127.0.0.1:1/none", jobs.path());
        cmd.args(&args);

        let out = output_of(cmd, "replay-ledger").await;

        let what = format!("{args:?}");
        let said = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{what}: {said}");
        assert_inert(&what, &said);
        assert!(
            !said.lines().any(|l| l.starts_with("FORGED")
                || l.trim_start().starts_with("e'")
                || l.starts_with('n')),
            "{what}: {said}"
        );
    }
}
