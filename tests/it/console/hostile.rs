//! Hostile input against the console and the commands: each gets a clear 4xx
//! or a refusal at start (exit 2), and none writes an ERROR line to the log.

use std::process::{Output, Stdio};

use tokio::io::AsyncWriteExt;

use super::*;

fn assert_no_error_logged(console: &ConsoleProc) {
    let log = console.log();
    assert!(
        !log.lines().any(|l| l.contains(" ERROR ")),
        "an ERROR line in the console's log:\n{log}"
    );
}

fn assert_secure(answer: &Answer) {
    let header = |name: &str| answer.headers.get(name).and_then(|v| v.to_str().ok());
    assert_eq!(
        header("content-security-policy"),
        Some("default-src 'self'")
    );
    assert_eq!(header("x-frame-options"), Some("DENY"));
    assert_eq!(header("x-content-type-options"), Some("nosniff"));
}

#[tokio::test]
async fn a_nul_in_the_login_email_ids_or_filters_answers_400_and_logs_no_error() {
    let s = simulated().await;
    add_user(&s.db.url, s.jobs.path(), "ana@example.com", "operator").await;
    let console = ConsoleProc::start(&s.db.url, s.jobs.path(), &[]).await;
    let anonymous = Client::new(&console);
    for _ in 0..3 {
        let login = anonymous
            .post(
                "/login",
                &[("email", "ana\0@example.com"), ("password", "x")],
            )
            .await;
        assert!(
            login.status.is_client_error(),
            "{}: {}",
            login.status,
            login.body
        );
    }
    let operator = Client::logged_in(&console, "ana@example.com").await;
    for path in [
        "/executions/a%00b",
        "/executions/a%00b/diff.csv",
        "/?job=%00",
        "/?state=%00",
        "/review?type=%00&execution=%00",
        "/audit?quem=%00",
    ] {
        let answer = operator.get(path).await;
        assert_eq!(answer.status, 400, "GET {path}: {}", answer.body);
        assert!(answer.body.contains("lang=\"pt-BR\""), "{}", answer.body);
    }
    let csrf = operator.csrf().await;
    let answer = operator
        .post(
            "/review/resolve",
            &[("csrf_token", &csrf), ("key", "k\0"), ("outcome", "sent")],
        )
        .await;
    assert_eq!(answer.status, 400, "{}", answer.body);
    assert_no_error_logged(&console);
}

#[tokio::test]
async fn an_age_beyond_a_century_is_refused_not_ignored() {
    let s = simulated().await;
    let (console, operator) = signed_in(&s, "otto@example.com", "operator").await;

    let answer = operator.get("/review?older_than=200y").await;

    assert_eq!(answer.status, 400, "{}", answer.body);
    assert!(answer.body.contains("100 anos"), "{}", answer.body);
    assert_no_error_logged(&console);
}

#[tokio::test]
async fn answers_414_and_431_carry_the_security_headers() {
    let s = simulated().await;
    let console = ConsoleProc::start(&s.db.url, s.jobs.path(), &[]).await;
    let client = Client::new(&console);

    let long = client.get(&format!("/?job={}", "a".repeat(20_000))).await;
    let http = reqwest::Client::new();
    let mut request = http.get(console.url("/login"));
    for i in 0..8 {
        request = request.header(format!("x-filler-{i}"), "b".repeat(6_000));
    }
    let response = request.send().await.expect("GET with large headers");
    let large = Answer {
        status: response.status(),
        headers: response.headers().clone(),
        body: response.text().await.unwrap_or_default(),
    };

    assert_eq!(long.status, 414);
    assert_eq!(large.status, 431);
    assert_secure(&long);
    assert_secure(&large);
    assert!(
        long.body.contains("414 Endereço longo demais"),
        "{}",
        long.body
    );
}

#[tokio::test]
async fn axum_refusals_read_in_portuguese_with_their_status() {
    let s = simulated().await;
    let (_console, viewer) = signed_in(&s, "vera@example.com", "viewer").await;

    let bad_query = viewer
        .get(&format!("/executions/{JOB}:simulacao?page=muitas"))
        .await;
    let wrong_method = viewer.get("/logout").await;

    assert_eq!(bad_query.status, 400);
    assert_eq!(wrong_method.status, 405);
    for answer in [&bad_query, &wrong_method] {
        assert!(
            !answer.body.contains("Failed to deserialize"),
            "{}",
            answer.body
        );
        assert!(
            answer.body.contains("Execuções"),
            "the navigation: {}",
            answer.body
        );
        assert_secure(answer);
    }
}

#[tokio::test]
async fn an_idle_timeout_the_database_cannot_hold_is_refused_at_start() {
    let s = simulated().await;
    let mut cmd = command(&s.db.url, s.jobs.path());
    let addr = free_addr().to_string();
    cmd.args([
        "console",
        "--insecure-cookies",
        "--addr",
        &addr,
        "--idle-timeout",
        "100000y",
    ]);

    let out = output_of(cmd, "console --idle-timeout 100000y").await;

    assert_exits_saying(&out, 2, "at most 30 days");
}

async fn users_add(db_url: &str, jobs: &std::path::Path, email: &str, password: &[u8]) -> Output {
    let mut child = command(db_url, jobs)
        .args([
            "users",
            "add",
            email,
            "--role",
            "finance",
            "--password-stdin",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn users add");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(password).await.expect("write");
    drop(stdin);
    finish(child, "users add").await
}

#[tokio::test]
async fn passwords_of_spaces_nul_or_control_characters_and_look_alike_emails_are_refused() {
    let s = simulated().await;
    add_user(&s.db.url, s.jobs.path(), "ana@example.com", "finance").await;
    let spaces = format!("{}\n", " ".repeat(14));
    let nuls = format!("{}\n", "\0".repeat(20));
    let bell = "correct horse\u{7}battery\n".to_string();
    for password in [spaces, nuls, bell] {
        let out = users_add(
            &s.db.url,
            s.jobs.path(),
            "bia@example.com",
            password.as_bytes(),
        )
        .await;
        assert_exits_saying(&out, 2, "control character");
    }
    // `а` is Cyrillic (U+0430): beside ana@example.com, it reads the same.
    let out = users_add(
        &s.db.url,
        s.jobs.path(),
        "\u{430}na@example.com",
        format!("{PASSWORD}\n").as_bytes(),
    )
    .await;
    assert_exits_saying(&out, 2, "one script");
    let accounts: i64 = sqlx::query_scalar("select count(*) from console_usuario")
        .fetch_one(&s.db.pool)
        .await
        .unwrap();
    assert_eq!(accounts, 1, "only ana's account");
}

#[tokio::test]
async fn a_banner_comes_from_the_record_never_from_the_query_string() {
    let s = simulated().await;
    let (_console, operator) = signed_in(&s, "otto@example.com", "operator").await;

    let forged = operator
        .get("/review?resolved=Pague+R%24+10.000+para+a+conta+123&outcome=sent&decisao=999")
        .await;

    assert_eq!(forged.status, 200);
    assert!(!forged.body.contains("Pague"), "{}", forged.body);
    assert!(!forged.body.contains("role=\"status\""), "{}", forged.body);
}

#[tokio::test]
async fn two_consoles_with_different_idle_timeouts_judge_one_session_alike() {
    let s = simulated().await;
    add_user(&s.db.url, s.jobs.path(), "ana@example.com", "viewer").await;
    let short = ConsoleProc::start(&s.db.url, s.jobs.path(), &["--idle-timeout", "5m"]).await;
    let long = ConsoleProc::start(&s.db.url, s.jobs.path(), &["--idle-timeout", "8h"]).await;
    let on_short = Client::logged_in(&short, "ana@example.com").await;
    let mut on_long = Client::new(&long);
    on_long.token = on_short.token.clone();
    sqlx::query("update console_sessao set ultimo_uso = now() - interval '10 minutes'")
        .execute(&s.db.pool)
        .await
        .unwrap();

    let (a, b) = (on_short.get("/").await, on_long.get("/").await);

    assert_eq!((a.status.as_u16(), a.location()), (303, Some("/login")));
    assert_eq!((b.status.as_u16(), b.location()), (303, Some("/login")));
}

#[tokio::test]
async fn the_last_error_line_is_inert_whatever_the_database_url_held() {
    let jobs = tempfile::tempdir().unwrap();
    let server = url::Url::parse(&crate::helpers::server_url()).unwrap();
    let host = format!(
        "{}:{}",
        server.host_str().unwrap(),
        server.port().unwrap_or(5432)
    );
    let hostile = "%1b%5b2J%0d%0a";
    for url in [
        format!("postgres://x{hostile}@{host}/test"),
        format!("postgres://postgres@{host}/t{hostile}"),
        format!("postgres://postgres@{host}/test?sslmode={hostile}"),
        format!("postgres://postgres@{host}/test?options={hostile}"),
    ] {
        for args in [&["status"][..], &["migrate"], &["users", "list"]] {
            let out = run_bin_within(&url, jobs.path(), args).await;
            let err = stderr(&out);
            assert!(!out.status.success(), "{url} {args:?}");
            assert!(
                !err.contains('\u{1b}') && !err.contains('\r'),
                "raw control characters for {url} {args:?}: {err:?}"
            );
            let last = err.lines().last().unwrap_or_default();
            assert!(last.starts_with("error: "), "{url} {args:?}: {err}");
        }
    }
}

/// Sends `head` on a raw connection (no body follows) and reads the answer until the page ends.
async fn raw_answer(console: &ConsoleProc, head: &str) -> String {
    use tokio::io::AsyncReadExt;
    let mut stream = tokio::net::TcpStream::connect(console.addr)
        .await
        .expect("connect");
    stream.write_all(head.as_bytes()).await.expect("send");
    let mut answer = Vec::new();
    let read = async {
        let mut chunk = [0u8; 4096];
        while let Ok(n) = stream.read(&mut chunk).await {
            answer.extend_from_slice(&chunk[..n]);
            if n == 0 || String::from_utf8_lossy(&answer).contains("</html>") {
                break;
            }
        }
    };
    tokio::time::timeout(PROCESS_LIMIT, read)
        .await
        .expect("an answer");
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test]
async fn a_form_declaring_a_gigabyte_is_refused_with_413_in_portuguese_before_its_body() {
    let db = TestDb::new().await;
    let jobs = jobs_dir("http://127.0.0.1:9/", &JobSpec::default());
    let console = ConsoleProc::start(&db.url, jobs.path(), &[]).await;
    let head = "POST /login HTTP/1.1\r\nHost: console\r\n\
                Content-Type: application/x-www-form-urlencoded\r\n\
                Content-Length: 1000000000\r\n\r\n";

    let answer = raw_answer(&console, head).await;

    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("O formulário é grande demais."), "{answer}");
    assert_no_error_logged(&console);
}

#[tokio::test]
async fn an_address_in_nfc_or_nfd_is_one_account_and_odd_addresses_are_refused() {
    let db = TestDb::new().await;
    let jobs = jobs_dir("http://127.0.0.1:9/", &JobSpec::default());
    let password = format!("{PASSWORD}\n");
    let composed = "jos\u{e9}@example.com";
    let decomposed = "jose\u{301}@example.com";

    let first = users_add(&db.url, jobs.path(), composed, password.as_bytes()).await;
    let second = users_add(&db.url, jobs.path(), decomposed, password.as_bytes()).await;
    let trailing_dot = users_add(&db.url, jobs.path(), "fin@x.", password.as_bytes()).await;
    let quoted = users_add(&db.url, jobs.path(), "\"fin\"@x", password.as_bytes()).await;

    assert_success(&first, "users add in NFC");
    assert_success(&second, "users add in NFD");
    let emails: Vec<String> = sqlx::query_scalar("select email from console_usuario")
        .fetch_all(&db.pool)
        .await
        .expect("accounts");
    assert_eq!(emails, vec![composed.to_string()]);
    assert_eq!(
        trailing_dot.status.code(),
        Some(2),
        "{}",
        stderr(&trailing_dot)
    );
    assert_eq!(quoted.status.code(), Some(2), "{}", stderr(&quoted));
}
