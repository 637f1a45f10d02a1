//! The console's status-code rules, over plain HTTP: no session → 303 to `/login` for a page and
//! 401 for a POST; a role without the right → 403; a POST without a valid `csrf_token` → 403;
//! the security headers on every answer; login throttling per account and per address, also
//! against a burst of concurrent guesses.

use super::*;

const PAGES: &[&str] = &[
    "/",
    "/executions/replay-2026-10-14-v2:simulacao",
    "/executions/replay-2026-10-14-v2:simulacao/diff.csv",
    "/review",
    "/audit",
];

const POSTS: &[&str] = &[
    "/logout",
    "/executions/replay-2026-10-14-v2:simulacao/approve",
    "/review/resolve",
];

async fn approvals(db: &TestDb) -> i64 {
    sqlx::query_scalar("select count(*) from reprocessamento_aprovacao")
        .fetch_one(&db.pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn without_a_session_a_page_redirects_to_login_and_a_post_gets_401() {
    let s = simulated().await;
    let console = ConsoleProc::start(&s.db.url, s.jobs.path(), &[]).await;
    let anonymous = Client::new(&console);
    let mut forged = Client::new(&console);
    forged.token = Some("f".repeat(64));

    for client in [&anonymous, &forged] {
        for page in PAGES {
            let answer = client.get(page).await;
            assert_eq!(answer.status, 303, "GET {page}");
            let location = answer.location().unwrap_or_default();
            assert!(
                location == "/login" || location.starts_with("/login?next=%2F"),
                "GET {page}: {location}"
            );
        }
        for path in POSTS {
            let answer = client
                .post(
                    path,
                    &[("csrf_token", "x"), ("key", "k"), ("outcome", "sent")],
                )
                .await;
            assert_eq!(answer.status, 401, "POST {path}");
        }
    }
    assert_eq!(approvals(&s.db).await, 0);
}

#[tokio::test]
async fn every_answer_carries_the_security_headers() {
    let s = simulated().await;
    let (console, finance) = signed_in(&s, FINANCE, "finance").await;

    for answer in [
        Client::new(&console).get("/login").await,
        Client::new(&console).get("/").await,
        Client::new(&console).get("/console.css").await,
        finance.get("/").await,
        finance.get("/no/such/page").await,
        finance.get(&format!("/executions/{JOB}:simulacao")).await,
    ] {
        let header = |name: &str| answer.headers.get(name).and_then(|v| v.to_str().ok());
        assert_eq!(
            header("content-security-policy"),
            Some("default-src 'self'")
        );
        assert_eq!(header("x-frame-options"), Some("DENY"));
        assert_eq!(header("referrer-policy"), Some("same-origin"));
        assert!(
            !answer.body.contains("<script") && !answer.body.contains("style=\""),
            "no script or inline style: {}",
            answer.body
        );
    }
}

#[tokio::test]
async fn a_role_without_the_right_gets_403_and_nothing_is_recorded() {
    let s = simulated().await;
    let key = uncertain(&s.db, "evt-3").await;
    for (email, role) in [
        ("vera@example.com", "viewer"),
        ("otto@example.com", "operator"),
        ("ana@example.com", "finance"),
    ] {
        add_user(&s.db.url, s.jobs.path(), email, role).await;
    }
    let console = ConsoleProc::start(&s.db.url, s.jobs.path(), &[]).await;
    let approve = format!("/executions/{JOB}:simulacao/approve");

    for email in ["vera@example.com", "otto@example.com"] {
        let client = Client::logged_in(&console, email).await;
        let csrf = client.csrf().await;
        let answer = client.post(&approve, &[("csrf_token", &csrf)]).await;
        assert_eq!(answer.status, 403, "{email} approving: {}", answer.body);
    }
    for email in ["vera@example.com", "ana@example.com"] {
        let client = Client::logged_in(&console, email).await;
        let csrf = client.csrf().await;
        let form = [
            ("csrf_token", csrf.as_str()),
            ("key", &key),
            ("outcome", "sent"),
        ];
        let answer = client.post("/review/resolve", &form).await;
        assert_eq!(answer.status, 403, "{email} resolving: {}", answer.body);
    }

    assert_eq!(approvals(&s.db).await, 0);
    assert_eq!(keys_in_state(&s.db.pool, "incerto").await, [key]);
}

#[tokio::test]
async fn a_post_without_or_with_another_sessions_csrf_token_gets_403() {
    let s = simulated().await;
    let key = uncertain(&s.db, "evt-3").await;
    add_user(&s.db.url, s.jobs.path(), "ana@example.com", "finance").await;
    add_user(&s.db.url, s.jobs.path(), "otto@example.com", "operator").await;
    let console = ConsoleProc::start(&s.db.url, s.jobs.path(), &[]).await;
    let finance = Client::logged_in(&console, "ana@example.com").await;
    let operator = Client::logged_in(&console, "otto@example.com").await;
    let (theirs, other) = (finance.csrf().await, operator.csrf().await);
    let approve = format!("/executions/{JOB}:simulacao/approve");

    // Missing, empty, another session's, or made up.
    for (mine, wrong) in [
        (None, None),
        (Some(""), Some("")),
        (Some(other.as_str()), Some(theirs.as_str())),
        (Some("0"), Some("0")),
    ] {
        let mut form = vec![("note", "ok")];
        form.extend(mine.map(|t| ("csrf_token", t)));
        assert_eq!(finance.post(&approve, &form).await.status, 403, "{mine:?}");
        assert_eq!(finance.post("/logout", &form).await.status, 403, "{mine:?}");
        let mut form = vec![("key", key.as_str()), ("outcome", "not-sent")];
        form.extend(wrong.map(|t| ("csrf_token", t)));
        assert_eq!(
            operator.post("/review/resolve", &form).await.status,
            403,
            "{wrong:?}"
        );
    }

    assert_eq!(approvals(&s.db).await, 0);
    assert_eq!(keys_in_state(&s.db.pool, "incerto").await, [key]);
    assert_eq!(
        finance.get("/").await.status,
        200,
        "a refused logout keeps the session"
    );
    let answer = finance.post(&approve, &[("csrf_token", &theirs)]).await;
    assert_eq!(answer.status, 303, "with its own token: {}", answer.body);
}

#[tokio::test]
async fn login_throttling_holds_per_account_and_per_address() {
    let s = simulated().await;
    for email in ["ana@example.com", "bia@example.com"] {
        add_user(&s.db.url, s.jobs.path(), email, "viewer").await;
    }
    let console =
        ConsoleProc::start(&s.db.url, s.jobs.path(), &["--trusted-proxy", "127.0.0.1"]).await;
    let from = |address: &str| {
        let mut c = Client::new(&console);
        c.forwarded_for = Some(address.to_string());
        c
    };

    // Per account: 5 failures, then even the right password is refused, from anywhere.
    for _ in 0..5 {
        assert_eq!(
            from("203.0.113.1")
                .login("ana@example.com", "wrong password!")
                .await
                .status,
            401
        );
    }
    let refused = from("203.0.113.2").login("ana@example.com", PASSWORD).await;
    assert_eq!(refused.status, 429, "{}", refused.body);
    assert!(refused.session_cookie().is_none());
    assert_eq!(
        from("203.0.113.2")
            .login("bia@example.com", PASSWORD)
            .await
            .status,
        303
    );

    // Per address: 20 failures over many accounts, then that address is refused.
    for i in 0..20 {
        let email = format!("nobody{i}@example.com");
        assert_eq!(
            from("198.51.100.7")
                .login(&email, "guess guess guess")
                .await
                .status,
            401
        );
    }
    assert_eq!(
        from("198.51.100.7")
            .login("bia@example.com", PASSWORD)
            .await
            .status,
        429
    );
    assert_eq!(
        from("198.51.100.8")
            .login("bia@example.com", PASSWORD)
            .await
            .status,
        303
    );

    // Past the window (the database's clock: the attempts are backdated), the account is back.
    sqlx::query("update console_tentativa_login set em = em - interval '16 minutes'")
        .execute(&s.db.pool)
        .await
        .unwrap();
    assert_eq!(
        from("203.0.113.3")
            .login("ana@example.com", PASSWORD)
            .await
            .status,
        303
    );
    let refusals = audit(&s.db)
        .await
        .into_iter()
        .filter(|(_, acao, _)| acao == "login-recusado")
        .count();
    assert_eq!(refusals, 25, "each refused password is in the audit");
}

#[tokio::test]
async fn a_burst_of_concurrent_wrong_logins_cannot_outrun_the_throttle() {
    let s = simulated().await;
    add_user(&s.db.url, s.jobs.path(), "ana@example.com", "viewer").await;
    let console = ConsoleProc::start(&s.db.url, s.jobs.path(), &[]).await;
    let (limit, slots) = (5, 4);

    let guesses = (0..40).map(|i| {
        let mut client = Client::new(&console);
        async move {
            let answer = client
                .login("ana@example.com", &format!("wrong guess {i}"))
                .await;
            answer.status.as_u16()
        }
    });
    let answers = futures::future::join_all(guesses).await;
    let right = Client::new(&console)
        .login("ana@example.com", PASSWORD)
        .await;

    let checked = answers.iter().filter(|&&s| s == 401).count();
    let throttled = answers.iter().filter(|&&s| s == 429).count();
    assert_eq!(checked + throttled, 40, "{answers:?}");
    assert!(
        (limit..=limit + slots).contains(&checked),
        "at most the limit and the slots in flight are checked: {answers:?}"
    );
    let refusals = audit(&s.db)
        .await
        .into_iter()
        .filter(|(_, acao, _)| acao == "login-recusado")
        .count();
    assert_eq!(
        refusals, checked,
        "each password checked and refused is recorded"
    );
    assert_eq!(right.status, 429, "{}", right.body);
    assert!(right.session_cookie().is_none());
}
