//! Sessions live in PostgreSQL: a login always makes a new session id, an idle session is over
//! by the database's clock (rows backdated, no sleeping), two console instances share sessions,
//! and the console runs inside `serve` beside `/metrics`.

use super::*;

#[tokio::test]
async fn the_session_id_changes_at_every_login_and_the_old_one_stops_working() {
    let s = simulated().await;
    add_user(&s.db.url, s.jobs.path(), "ana@example.com", "viewer").await;
    let console = ConsoleProc::start(&s.db.url, s.jobs.path(), &[]).await;
    let mut browser = Client::logged_in(&console, "ana@example.com").await;
    let first = browser.clone();

    let again = browser.login("ana@example.com", PASSWORD).await;

    assert_eq!(again.status, 303);
    assert_ne!(browser.token, first.token, "a new id at the second login");
    assert_eq!(browser.get("/").await.status, 200);
    let old = first.get("/").await;
    assert_eq!((old.status.as_u16(), old.location()), (303, Some("/login")));
    let stored: Vec<String> = sqlx::query_scalar("select id_hash from console_sessao")
        .fetch_all(&s.db.pool)
        .await
        .unwrap();
    assert_eq!(stored.len(), 1, "the old session was dropped");
    assert!(
        !stored.contains(browser.token.as_ref().unwrap()),
        "only a digest is stored"
    );
}

#[tokio::test]
async fn a_session_idle_past_its_timeout_is_refused_and_a_recent_one_is_not() {
    let s = simulated().await;
    add_user(&s.db.url, s.jobs.path(), "ana@example.com", "finance").await;
    let console = ConsoleProc::start(&s.db.url, s.jobs.path(), &[]).await;
    let browser = Client::logged_in(&console, "ana@example.com").await;
    let csrf = browser.csrf().await;
    let idle = |minutes: i32| {
        let pool = s.db.pool.clone();
        async move {
            sqlx::query("update console_sessao set ultimo_uso = now() - make_interval(mins => $1)")
                .bind(minutes)
                .execute(&pool)
                .await
                .unwrap();
        }
    };

    idle(29).await;
    assert_eq!(
        browser.get("/").await.status,
        200,
        "29 minutes idle is still a session"
    );
    idle(31).await;

    let page = browser.get("/").await;
    assert_eq!(
        (page.status.as_u16(), page.location()),
        (303, Some("/login"))
    );
    let approve = format!("/executions/{JOB}:simulacao/approve");
    assert_eq!(
        browser
            .post(&approve, &[("csrf_token", &csrf)])
            .await
            .status,
        401
    );
    let approvals: i64 = sqlx::query_scalar("select count(*) from reprocessamento_aprovacao")
        .fetch_one(&s.db.pool)
        .await
        .unwrap();
    assert_eq!(approvals, 0);
}

#[tokio::test]
async fn two_console_instances_share_sessions() {
    let s = simulated().await;
    add_user(&s.db.url, s.jobs.path(), "ana@example.com", "viewer").await;
    let a = ConsoleProc::start(&s.db.url, s.jobs.path(), &[]).await;
    let b = ConsoleProc::start(&s.db.url, s.jobs.path(), &[]).await;
    let on_a = Client::logged_in(&a, "ana@example.com").await;
    let mut on_b = Client::new(&b);
    on_b.token = on_a.token.clone();

    let page = on_b.get("/").await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("ana@example.com"));
    let csrf = on_b.csrf().await;
    assert_eq!(
        on_b.post("/logout", &[("csrf_token", &csrf)]).await.status,
        303
    );

    let after = on_a.get("/").await;
    assert_eq!(
        (after.status.as_u16(), after.location()),
        (303, Some("/login"))
    );
}

#[tokio::test]
async fn the_console_runs_inside_serve_beside_the_metrics() {
    let s = simulated().await;
    add_user(&s.db.url, s.jobs.path(), "ana@example.com", "finance").await;
    let (metrics, console_addr) = (free_addr(), free_addr());
    let args = [
        "serve",
        "--metrics-addr",
        &metrics.to_string(),
        "--console-addr",
        &console_addr.to_string(),
        "--insecure-cookies",
    ];
    let serve = ConsoleProc::spawn(&s.db.url, s.jobs.path(), &args, console_addr).await;
    let browser = Client::logged_in(&serve, "ana@example.com").await;

    let page = browser.get(&format!("/executions/{JOB}:simulacao")).await;
    let scrape = reqwest::get(format!("http://{metrics}/metrics"))
        .await
        .unwrap();

    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("Revisar e aprovar"), "{}", page.body);
    assert_eq!(scrape.status(), 200);
    assert!(scrape.text().await.unwrap().contains("replay_ledger_"));
}

#[tokio::test]
async fn removing_an_account_ends_its_sessions_and_the_audit_says_who_did_what() {
    let s = simulated().await;
    add_user(&s.db.url, s.jobs.path(), "ana@example.com", "viewer").await;
    let console = ConsoleProc::start(&s.db.url, s.jobs.path(), &[]).await;
    let browser = Client::logged_in(&console, "ana@example.com").await;
    let listed = run_bin_within(&s.db.url, s.jobs.path(), &["users", "list"]).await;

    let removed = run_bin_within(
        &s.db.url,
        s.jobs.path(),
        &["users", "remove", "ana@example.com"],
    )
    .await;
    let again = run_bin_within(
        &s.db.url,
        s.jobs.path(),
        &["users", "remove", "ana@example.com"],
    )
    .await;

    assert!(stdout(&listed).contains("ana@example.com") && stdout(&listed).contains("viewer"));
    assert_success(&removed, "users remove");
    assert_eq!(again.status.code(), Some(2), "{}", stderr(&again));
    assert_eq!(browser.get("/").await.status, 303);
    let actions: Vec<String> = audit(&s.db).await.into_iter().map(|(_, a, _)| a).collect();
    assert_eq!(actions, ["usuario-criado", "login", "usuario-removido"]);
}

/// While its database is away the console answers 503 (not 500, not a hang) and keeps running;
/// once the database is back the same session works again.
#[tokio::test]
async fn the_console_answers_503_while_its_database_is_away_and_recovers() {
    let mut cluster = testkit::pgtemp::TempCluster::start()
        .await
        .expect("a throwaway cluster from the local binaries");
    let provider = sink(dedup()).await;
    let jobs = jobs_dir(&provider.url(), &JobSpec::default());
    assert_success(
        &run_bin(&cluster.url(), jobs.path(), &["migrate"]).await,
        "migrate",
    );
    add_user(&cluster.url(), jobs.path(), "ana@example.com", "viewer").await;
    let console = ConsoleProc::start(&cluster.url(), jobs.path(), &[]).await;
    let browser = Client::logged_in(&console, "ana@example.com").await;
    assert_eq!(browser.get("/").await.status, 200);

    cluster.stop().await;
    let away = browser.get("/").await;
    assert_eq!(away.status, 503, "{}", away.body);
    cluster
        .start_again()
        .await
        .expect("the cluster starts again");

    let back = eventually(PROCESS_LIMIT, || async {
        browser.get("/").await.status == 200
    })
    .await;
    assert!(back, "the session works again; log:\n{}", console.log());
}

#[tokio::test]
async fn without_insecure_cookies_the_session_cookie_is_host_only_http_only_strict_and_secure() {
    let s = simulated().await;
    add_user(&s.db.url, s.jobs.path(), "ana@example.com", "finance").await;
    let addr = free_addr();
    let args = ["console", "--addr", &addr.to_string()];
    let console = ConsoleProc::spawn(&s.db.url, s.jobs.path(), &args, addr).await;

    let answer = Client::new(&console)
        .login("ana@example.com", PASSWORD)
        .await;

    assert_eq!(answer.status, 303, "{}", answer.body);
    let cookie = answer
        .headers
        .get(reqwest::header::SET_COOKIE)
        .and_then(|v| v.to_str().ok())
        .expect("a Set-Cookie");
    let mut parts = cookie.split(';').map(str::trim);
    let (name, token) = parts.next().unwrap().split_once('=').unwrap();
    let attributes: Vec<&str> = parts.collect();
    assert_eq!(name, "__Host-rl_console", "{cookie}");
    assert_eq!(token.len(), 64, "{cookie}");
    for attribute in ["Path=/", "HttpOnly", "SameSite=Strict", "Secure"] {
        assert!(attributes.contains(&attribute), "{attribute} in {cookie}");
    }
    assert!(
        !attributes.iter().any(|a| a.starts_with("Domain")),
        "a __Host- cookie names no domain: {cookie}"
    );
    let page = reqwest::Client::new()
        .get(console.url("/"))
        .header("cookie", format!("{name}={token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        page.status(),
        200,
        "the session works under its secure name"
    );
}
