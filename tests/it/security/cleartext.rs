//! Credentials never go out in clear without a word. `check` refuses a webhook that sends a
//! header (a bearer token) or URL user-info over plain `http://` to a host off the machine, and an
//! `SMTP_URL` that would `AUTH` without TLS off the machine, unless the effect type
//! (`allow_insecure: true`) or `SMTP_URL` (`allow_insecure=true`) says so; `serve` then warns at
//! start for each such exception, and `serve` and `run` warn when `DATABASE_URL` points off the
//! machine without `sslmode=verify-full` or `verify-ca`.

use std::path::Path;
use std::process::Stdio;

use nix::sys::signal::Signal;

use crate::helpers::*;

/// A webhook of `notificar-vendedor` at `url`, with `rest` (headers, `allow_insecure`) after it.
fn effects(url: &str, rest: &str) -> String {
    format!("notificar-vendedor:\n  webhook:\n    url: {url}\n{rest}  idempotent: true\n")
}

const BEARER: &str = "    headers: { Authorization: \"Bearer t0ken\" }\n";

/// `check` of a jobs directory with `effects.yaml` = `text`, and `env`.
async fn check(db: &TestDb, text: &str, env: &[(&str, &str)]) -> (std::process::Output, String) {
    let jobs = jobs_dir("http://127.0.0.1:9/", &JobSpec::default());
    let path = jobs.path().join("effects.yaml");
    std::fs::write(&path, text).expect("write effects.yaml");
    let mut cmd = command(&db.url, jobs.path());
    cmd.arg("check")
        .env_remove("SMTP_URL")
        .env_remove("SMTP_USERNAME")
        .env_remove("SMTP_PASSWORD");
    for (k, v) in env {
        cmd.env(k, v);
    }
    (
        output_of(cmd, "replay-ledger check").await,
        path.display().to_string(),
    )
}

#[tokio::test]
async fn check_refuses_a_token_or_user_info_over_plain_http_off_the_machine() {
    let db = TestDb::new().await;
    for text in [
        effects("http://hooks.example.com/x", BEARER),
        effects("http://user:pass@hooks.example.com/x", ""),
        effects("http://10.0.0.7:8080/x", BEARER),
    ] {
        let (out, path) = check(&db, &text, &[]).await;

        assert_eq!(out.status.code(), Some(2), "{text}\n{}", stdout(&out));
        let err = stderr(&out);
        assert!(err.starts_with(&format!("{path}:2:3: ")), "{text}\n{err}");
        assert!(err.contains("allow_insecure: true"), "{text}\n{err}");
    }
}

#[tokio::test]
async fn check_accepts_tls_loopback_no_credentials_or_an_explicit_allow_insecure() {
    let db = TestDb::new().await;
    for text in [
        effects("https://hooks.example.com/x", BEARER),
        effects("http://127.0.0.1:8080/x", BEARER),
        effects("http://localhost:8080/x", BEARER),
        effects("http://[::1]:8080/x", BEARER),
        effects("http://hooks.example.com/x", ""),
        effects("http://hooks.example.com/x", BEARER) + "  allow_insecure: true\n",
    ] {
        let (out, _) = check(&db, &text, &[]).await;

        assert_eq!(out.status.code(), Some(0), "{text}\n{}", stderr(&out));
    }
}

#[tokio::test]
async fn check_refuses_smtp_auth_without_tls_off_the_machine_unless_smtp_url_allows_it() {
    let db = TestDb::new().await;
    let text = effects("http://127.0.0.1:9/", "");
    let from = ("REPORT_FROM", "relatorios@example.com");
    let refused: [&[(&str, &str)]; 3] = [
        &[
            ("SMTP_URL", "smtp://relatorios:pw@mail.example.com:25"),
            from,
        ],
        &[
            ("SMTP_URL", "smtp://mail.example.com:587?tls=opportunistic"),
            ("SMTP_USERNAME", "relatorios"),
            ("SMTP_PASSWORD", "pw"),
            from,
        ],
        &[("SMTP_URL", "smtp://relatorios:pw@192.0.2.25"), from],
    ];
    for env in refused {
        let (out, _) = check(&db, &text, env).await;

        assert_eq!(out.status.code(), Some(2), "{env:?}\n{}", stdout(&out));
        let err = stderr(&out);
        assert!(
            err.contains("SMTP_URL") && err.contains("allow_insecure=true"),
            "{env:?}\n{err}"
        );
    }
    let accepted: [&[(&str, &str)]; 5] = [
        &[
            (
                "SMTP_URL",
                "smtp://relatorios:pw@mail.example.com:587?tls=required",
            ),
            from,
        ],
        &[("SMTP_URL", "smtps://relatorios:pw@mail.example.com"), from],
        &[("SMTP_URL", "smtp://relatorios:pw@127.0.0.1:25"), from],
        &[("SMTP_URL", "smtp://mail.example.com:25"), from],
        &[
            (
                "SMTP_URL",
                "smtp://relatorios:pw@mail.example.com:25?allow_insecure=true",
            ),
            from,
        ],
    ];
    for env in accepted {
        let (out, _) = check(&db, &text, env).await;

        assert_eq!(out.status.code(), Some(0), "{env:?}\n{}", stderr(&out));
    }
}

/// Starts `args` of the binary with `env`, its stderr in `log`; waits until the log shows
/// `ready`, then stops it (SIGTERM, then SIGKILL) and returns the log.
async fn log_until(
    db_url: &str,
    jobs: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    ready: &str,
) -> String {
    let log = jobs.join(format!("{}.log", args[0]));
    let file = std::fs::File::create(&log).expect("create the log");
    let mut cmd = command(db_url, jobs);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(file);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn replay-ledger");
    let read = || std::fs::read_to_string(&log).unwrap_or_default();
    let deadline = tokio::time::Instant::now() + PROCESS_LIMIT;
    while !read().contains(ready) {
        let exited = child.try_wait().expect("poll the child").is_some();
        // It may have logged the line and exited since the read above.
        assert!(
            !exited || read().contains(ready),
            "{args:?} exited before logging {ready:?}:\n{}",
            read()
        );
        assert!(
            tokio::time::Instant::now() < deadline,
            "{args:?} never logged {ready:?}:\n{}",
            read()
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    if child.try_wait().expect("poll the child").is_none() {
        send_signal(&child, Signal::SIGTERM);
    }
    let stopped = tokio::time::timeout(std::time::Duration::from_secs(40), child.wait()).await;
    if stopped.is_err() {
        let _ = child.start_kill();
    }
    read()
}

#[tokio::test]
async fn serve_warns_at_start_once_for_each_allowed_exception() {
    let db = TestDb::new().await;
    let jobs = jobs_dir("http://127.0.0.1:9/", &JobSpec::default());
    let text = effects("http://hooks.example.com/x", BEARER) + "  allow_insecure: true\n";
    std::fs::write(jobs.path().join("effects.yaml"), text).expect("write effects.yaml");
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .to_string();
    let env = [
        (
            "SMTP_URL",
            "smtp://relatorios:pw@mail.example.com:25?allow_insecure=true",
        ),
        ("REPORT_FROM", "relatorios@example.com"),
    ];

    let log = log_until(
        &db.url,
        jobs.path(),
        &["serve", "--metrics-addr", &addr],
        &env,
        "serving /metrics",
    )
    .await;

    let warnings: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("in clear"))
        .collect();
    assert_eq!(warnings.len(), 2, "{log}");
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("notificar-vendedor") && w.contains("http://hooks.example.com")),
        "{log}"
    );
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("SMTP_URL") && w.contains("smtp://mail.example.com:25")),
        "{log}"
    );
    assert!(
        !log.contains("DATABASE_URL"),
        "the test database is on this machine:\n{log}"
    );
    assert!(!log.contains("t0ken") && !log.contains(":pw@"), "{log}");
}

#[tokio::test]
async fn serve_run_and_consume_warn_when_the_database_is_off_the_machine_without_verify_full() {
    let jobs = jobs_dir("http://127.0.0.1:9/", &JobSpec::default());
    std::fs::write(
        jobs.path().join("live.yaml"),
        "name: live\nkind: live\neffects:\n  notificar-vendedor: { mode: apply, on_failure: keep }\n",
    )
    .unwrap();
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .to_string();
    // `.invalid` never resolves: the process warns, then fails to connect (or is stopped).
    let url = "postgres://worker:s3cret@db.example.invalid:5432/marketplace?sslmode=require";
    for args in [
        vec!["serve", "--metrics-addr", &addr],
        vec!["run", "replay-2026-10-14-v2"],
        vec!["consume", "--metrics-addr", &addr],
    ] {
        let log = log_until(url, jobs.path(), &args, &[], "DATABASE_URL").await;

        let warning = log
            .lines()
            .find(|l| l.contains("DATABASE_URL"))
            .unwrap_or_default();
        assert!(
            warning.contains("WARN") && warning.contains("verify-full"),
            "{args:?}\n{log}"
        );
        assert!(warning.contains("db.example.invalid"), "{args:?}\n{log}");
        assert!(!log.contains("s3cret"), "{args:?}\n{log}");
    }
}
