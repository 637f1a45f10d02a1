//! Secrets stay out of what the worker prints. A full `run` of the real binary at `RUST_LOG=debug`
//! (text and JSON logs), then `status`, `review list`, `sweep` and `report` over SMTP, with a
//! database password in `DATABASE_URL`, a bearer token in a webhook header, a token in the webhook
//! URL's query, an SMTP password, and a marker inside every payload: none of them appears in
//! stdout or stderr. `check` on broken files that hold a secret does not echo it either.

mod cleartext;
mod console;
mod duties;
mod echo;
mod matrix;
mod privileges;
mod redirect;
mod tls;

use std::process::Output;

use serde_json::json;

use crate::helpers::*;

const JOB: &str = "replay-2026-10-14-v2";

/// A string no log line could contain by chance.
fn unique(what: &str) -> String {
    format!("{what}-{}", uuid::Uuid::new_v4().simple())
}

/// Everything the secrets could look like on the way out: as given, percent-encoded (URLs), and
/// base64-encoded the way SMTP `AUTH PLAIN` / `AUTH LOGIN` and HTTP basic auth carry them.
fn forms(secret: &str) -> Vec<String> {
    use base64_forms::encode;
    vec![
        secret.to_string(),
        url::form_urlencoded::byte_serialize(secret.as_bytes()).collect(),
        encode(secret.as_bytes()),
        encode(format!("\0relatorios\0{secret}").as_bytes()),
        encode(format!("relatorios:{secret}").as_bytes()),
    ]
}

/// A tiny base64 encoder (no dependency for one test).
mod base64_forms {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

    pub fn encode(bytes: &[u8]) -> String {
        let mut out = String::new();
        for chunk in bytes.chunks(3) {
            let b = [
                chunk[0],
                *chunk.get(1).unwrap_or(&0),
                *chunk.get(2).unwrap_or(&0),
            ];
            let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
            for i in 0..4 {
                if i <= chunk.len() {
                    out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
                } else {
                    out.push('=');
                }
            }
        }
        out
    }

    #[test]
    fn encodes_like_rfc_4648() {
        assert_eq!(encode(b"foobar"), "Zm9vYmFy");
        assert_eq!(encode(b"fooba"), "Zm9vYmE=");
        assert_eq!(encode(b"foob"), "Zm9vYg==");
    }
}

/// Asserts no form of any secret appears in the output of `what`.
fn assert_no_secret(output: &Output, what: &str, secrets: &[&str]) {
    let shown = format!("{}\n{}", stdout(output), stderr(output));
    for secret in secrets {
        for form in forms(secret) {
            assert!(
                !shown.contains(&form),
                "{what} printed a secret ({form}):\n{shown}"
            );
        }
    }
}

/// A login role with a password, allowed to do everything on the test database's tables.
async fn role_with_password(db: &TestDb, password: &str) -> String {
    let role = format!(
        "rl_secret_{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    );
    let database: String = sqlx::query_scalar("select current_database()")
        .fetch_one(&db.pool)
        .await
        .expect("current database");
    for sql in [
        format!("create role {role} login password '{password}'"),
        format!("grant all on database \"{database}\" to {role}"),
        format!("grant all on schema public to {role}"),
        format!("grant all on all tables in schema public to {role}"),
        format!("grant all on all sequences in schema public to {role}"),
    ] {
        sqlx::query(&sql)
            .execute(&db.pool)
            .await
            .expect("set up the role");
    }
    role
}

/// The test database's URL, logging in as `role` with `password`.
fn url_as(db: &TestDb, role: &str, password: &str) -> String {
    let mut url = url::Url::parse(&db.url).expect("the test URL parses");
    url.set_username(role).expect("a user name");
    url.set_password(Some(password)).expect("a password");
    url.to_string()
}

/// A jobs dir whose webhook carries `token` (interpolated from the environment) and a query
/// token, and a report job.
fn jobs_with_secrets(sink_url: &str, query_token: &str) -> tempfile::TempDir {
    let jobs = jobs_dir(sink_url, &JobSpec::default());
    std::fs::write(
        jobs.path().join("effects.yaml"),
        format!(
            "notificar-vendedor:\n  webhook:\n    url: {sink_url}hook?token={query_token}\n    timeout: 2s\n    headers: {{ Authorization: \"Bearer ${{RL_TEST_WEBHOOK_TOKEN}}\" }}\n  idempotent: true\n  concurrency: 4\n"
        ),
    )
    .expect("write effects.yaml");
    std::fs::write(
        jobs.path().join("finance-daily.yaml"),
        "name: finance-daily\nkind: report\nto: [financeiro@example.com]\n",
    )
    .expect("write the report job");
    jobs
}

/// Runs the binary at debug level (text, or JSON logs) with the secrets in its environment.
async fn run_logged(
    url: &str,
    jobs: &std::path::Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> Output {
    let mut cmd = command(url, jobs);
    cmd.args(args).env("RUST_LOG", "debug");
    for (k, v) in env {
        cmd.env(k, v);
    }
    output_of(cmd, &format!("replay-ledger {}", args.join(" "))).await
}

#[tokio::test]
async fn a_full_run_logged_at_debug_shows_no_payload_header_token_or_password() {
    let (token, query_token, db_password, marker, smtp_password) = (
        unique("webhook-token"),
        unique("query-token"),
        unique("db-password"),
        unique("payload-marker"),
        unique("smtp-password"),
    );
    let mut roles = privileges::Roles(Vec::new());
    let db = TestDb::new().await;
    let mut events = paid_orders(40);
    for e in &mut events {
        e.payload["nota"] = json!(format!("{marker} {}", e.id));
    }
    events[7].payload = json!({"valorCentavos": "not a number", "nota": marker}); // rejected
    insert(&db.pool, &events).await;
    let role = role_with_password(&db, &db_password).await;
    roles.0.push(role.clone());
    let url = url_as(&db, &role, &db_password);
    // The first calls fail, so retries and releases are logged too.
    let provider = sink(testkit::sink::Behavior {
        dedup: true,
        fail_first: 3,
        ..Default::default()
    })
    .await;
    let jobs = jobs_with_secrets(&provider.url(), &query_token);
    let env = [("RL_TEST_WEBHOOK_TOKEN", token.as_str())];
    let secrets = [
        token.as_str(),
        query_token.as_str(),
        db_password.as_str(),
        marker.as_str(),
        smtp_password.as_str(),
    ];

    let text = run_logged(&url, jobs.path(), &["run", JOB, "--simulate"], &env).await;
    let json_env = [
        ("RL_TEST_WEBHOOK_TOKEN", token.as_str()),
        ("LOG_FORMAT", "json"),
    ];
    let real = run_logged(&url, jobs.path(), &["run", JOB], &json_env).await;

    assert_success(&text, "the simulation");
    assert_success(&real, "the real run");
    assert!(
        stderr(&text).contains("DEBUG"),
        "debug logs expected:\n{}",
        stderr(&text)
    );
    assert!(
        stderr(&real).contains("\"level\":\"DEBUG\""),
        "JSON debug logs expected:\n{}",
        stderr(&real)
    );
    // The secrets were in use: the provider got the token, the run logged in as the role.
    let bearer = format!("Bearer {token}");
    assert!(provider
        .received()
        .iter()
        .any(|r| r.authorization.as_deref() == Some(bearer.as_str())));
    assert_no_secret(&text, "run --simulate (text logs)", &secrets);
    assert_no_secret(&real, "run (JSON logs)", &secrets);

    let smtp = smtp_server().await;
    let smtp_url = format!("smtp://relatorios:{smtp_password}@127.0.0.1:{}", smtp.1);
    let smtp_env = [
        ("SMTP_URL", smtp_url.as_str()),
        ("REPORT_FROM", "relatorios@example.com"),
        ("RL_TEST_WEBHOOK_TOKEN", token.as_str()),
    ];
    for args in [
        vec!["status"],
        vec!["status", "--json"],
        vec!["review", "list", "--json"],
        vec!["sweep"],
        vec!["report", JOB],
        vec!["check"],
    ] {
        let out = run_logged(&url, jobs.path(), &args, &smtp_env).await;
        assert_no_secret(&out, &args.join(" "), &secrets);
    }
}

/// A loopback SMTP server (aiosmtpd, store mode) and its port; `None`-free: panics if it cannot
/// start (`.ci/run` installs python3-aiosmtpd).
pub async fn smtp_server() -> (tokio::process::Child, u16, tempfile::TempDir) {
    use tokio::io::AsyncBufReadExt;
    let dir = tempfile::tempdir().expect("tempdir");
    for _ in 0..5 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/smtp/server.py");
        let mut child = tokio::process::Command::new("/usr/bin/python3")
            .arg(script)
            .arg(port.to_string())
            .arg(dir.path().join("maildir"))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn /usr/bin/python3 (python3-aiosmtpd)");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let ready =
            tokio::time::timeout(std::time::Duration::from_secs(30), lines.next_line()).await;
        if matches!(ready, Ok(Ok(Some(ref line))) if line == "ready") {
            return (child, port, dir);
        }
    }
    panic!("could not start the loopback SMTP server (python3-aiosmtpd)");
}

/// Broken effect files that hold the secret where a mistake could put it.
fn broken_effects(secret: &str) -> Vec<String> {
    let head =
        "notificar-vendedor:\n  idempotent: true\n  webhook:\n    url: http://127.0.0.1:9/\n";
    vec![
        // A missing colon makes the whole header one key.
        format!("{head}    headers: {{ Authorization Bearer {secret} }}\n"),
        format!("{head}    headers: {{ \"Authorization: Bearer {secret}\": x }}\n"),
        // The value where the mapping belongs, or in a list.
        format!("{head}    headers: Bearer {secret}\n"),
        format!("{head}    headers: [Authorization, Bearer {secret}]\n"),
        format!("{head}    headers: {{ Authorization: [Bearer {secret}] }}\n"),
        format!("{head}    headers: {{ Authorization: {{ Bearer: {secret} }} }}\n"),
        // A control character in the value (an interpolated token with a newline).
        format!("{head}    headers: {{ Authorization: \"Bearer {secret}\\u0007\" }}\n"),
        "notificar-vendedor:\n  idempotent: true\n  webhook:\n    url: http://127.0.0.1:9/\n    headers: { Authorization: \"Bearer ${RL_TEST_BAD_TOKEN}\" }\n".into(),
        // Given twice, or beside an unknown key, or after a syntax error.
        format!("{head}    headers: {{ Authorization: Bearer {secret}, authorization: x }}\n"),
        format!("{head}    headers: {{ Authorization: Bearer {secret} }}\n    timeot: 2s\n"),
        format!("{head}    headers: {{ Authorization: \"Bearer {secret} }}\n"),
        format!("{head}    headers:\n    Authorization: Bearer {secret}\n"),
        // The webhook URL (which may hold a token) where a mapping belongs, or malformed.
        format!("notificar-vendedor:\n  idempotent: true\n  webhook: https://hooks.example.com/{secret}\n"),
        format!("notificar-vendedor:\n  idempotent: true\n  webhook:\n    url: https://[{secret}/\n"),
        format!("notificar-vendedor:\n  idempotent: true\n  webhook:\n    url: ftp://u:{secret}@h/\n"),
    ]
}

#[tokio::test]
async fn check_on_broken_files_never_echoes_a_header_secret() {
    let secret = unique("header-secret");
    let db = TestDb::new().await;
    for effects in broken_effects(&secret) {
        let jobs = jobs_dir("http://127.0.0.1:9/", &JobSpec::default());
        std::fs::write(jobs.path().join("effects.yaml"), &effects).expect("write effects.yaml");
        let mut cmd = command(&db.url, jobs.path());
        cmd.arg("check")
            .env("RL_TEST_BAD_TOKEN", format!("{secret}\nsecond line"));
        let out = output_of(cmd, "replay-ledger check").await;
        assert_eq!(
            out.status.code(),
            Some(2),
            "{effects}\n{}{}",
            stdout(&out),
            stderr(&out)
        );
        assert_no_secret(&out, &format!("check of\n{effects}"), &[&secret]);
    }
}
