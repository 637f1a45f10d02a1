//! A console people choose, over HTTP: the login returns where the link
//! pointed (local paths only), the approval's confirmation page, the diff as a real spreadsheet
//! and sorted, per-state counts with the simulations awaiting approval, the audit filtered, and
//! an approval checked with none of the provider's secrets in the console's environment.

use std::io::Read;

use super::*;

#[tokio::test]
async fn the_login_returns_to_the_page_the_link_pointed_at_and_only_to_a_local_one() {
    let s = simulated().await;
    add_user(&s.db.url, s.jobs.path(), FINANCE, "finance").await;
    let console = ConsoleProc::start(&s.db.url, s.jobs.path(), &[]).await;
    let page = format!("/executions/{JOB}:simulacao");
    let anonymous = Client::new(&console);

    let redirect = anonymous.get(&page).await;
    let to_login = redirect.location().unwrap().to_string();
    let login_page = anonymous.get(&to_login).await;
    let mut browser = Client::new(&console);
    let back = browser
        .post(
            "/login",
            &[
                ("email", "ana@financeiro.example"),
                ("password", PASSWORD),
                ("next", &page),
            ],
        )
        .await;

    assert_eq!(
        to_login,
        format!(
            "/login?next={}",
            page.replace('/', "%2F").replace(':', "%3A")
        )
    );
    assert!(
        login_page
            .body
            .contains(&format!(r#"name="next" value="{page}""#)),
        "{}",
        login_page.body
    );
    assert_eq!(
        (back.status.as_u16(), back.location()),
        (303, Some(page.as_str()))
    );
    for hostile in [
        "//evil.example/x",
        "/\\evil.example",
        "https://evil.example/",
        "javascript:alert(1)",
    ] {
        let answer = browser
            .post(
                "/login",
                &[
                    ("email", "ana@financeiro.example"),
                    ("password", PASSWORD),
                    ("next", hostile),
                ],
            )
            .await;
        assert_eq!(
            (answer.status.as_u16(), answer.location()),
            (303, Some("/")),
            "{hostile}"
        );
    }
    browser.token = None;
}

/// The cells of the first sheet, as (reference, value) of numbers and shared strings' indexes.
fn sheet(bytes: &[u8]) -> String {
    let mut archive = zip::ZipArchive::new(std::io::Cursor::new(bytes)).expect("an xlsx is a zip");
    let mut xml = String::new();
    archive
        .by_name("xl/worksheets/sheet1.xml")
        .expect("the first sheet")
        .read_to_string(&mut xml)
        .unwrap();
    xml
}

#[tokio::test]
async fn the_diff_downloads_as_a_spreadsheet_of_reais_with_a_header_and_a_filter() {
    let s = simulated().await;
    let (console, viewer) = signed_in(&s, "vera@example.com", "viewer").await;
    let url = console.url(&format!("/executions/{JOB}:simulacao/diff.xlsx"));

    let response = reqwest::Client::new()
        .get(&url)
        .header(
            "cookie",
            format!("rl_console={}", viewer.token.clone().unwrap()),
        )
        .send()
        .await
        .unwrap();

    assert_eq!(response.status(), 200);
    let kind = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(kind.contains("spreadsheetml"), "{kind}");
    let xml = sheet(&response.bytes().await.unwrap());
    assert!(xml.contains("<autoFilter ref=\"A1:D11\"/>"), "{xml}");
    // ped-10: 5 % of R$ 100,00 after, 0.5 % before (the bug): 0.5 → 5, +4.5, as numbers.
    for value in ["<v>0.5</v>", "<v>5</v>", "<v>4.5</v>"] {
        assert!(xml.contains(value), "{value} in {xml}");
    }
}

#[tokio::test]
async fn the_diff_sorts_by_any_column_both_ways() {
    let s = simulated().await;
    let (_console, viewer) = signed_in(&s, "vera@example.com", "viewer").await;
    let page = format!("/executions/{JOB}:simulacao");
    // The first row's order: the text of its first cell (a link to the order's page).
    let first_row = |body: &str| {
        let diff = &body[body.find("id=\"diff\"").unwrap()..];
        let cell = &diff[diff.find("<tbody><tr><td>").unwrap() + 15..];
        let text = &cell[cell.find("\">").unwrap() + 2..];
        text[..text.find('<').unwrap()].to_string()
    };

    let by_difference = viewer.get(&format!("{page}?sort=diferenca&dir=desc")).await;
    let by_after = viewer.get(&format!("{page}?sort=depois&dir=asc")).await;
    let wrong = viewer.get(&format!("{page}?sort=preco")).await;

    assert_eq!(first_row(&by_difference.body), "ped-10");
    assert_eq!(first_row(&by_after.body), "ped-1");
    assert_eq!(wrong.status, 400);
}

#[tokio::test]
async fn the_list_counts_each_state_and_filters_the_simulations_awaiting_approval() {
    let s = simulated().await;
    let (_console, viewer) = signed_in(&s, "vera@example.com", "viewer").await;

    let all = viewer.get("/").await;
    let awaiting = viewer.get("/?state=aguardando-aprovacao").await;
    let running = viewer.get("/?state=em-andamento").await;

    assert!(
        all.body
            .contains("aguardando aprovação <span class=\"count\">1</span>"),
        "{}",
        all.body
    );
    assert!(
        all.body
            .contains("concluída <span class=\"count\">1</span>"),
        "{}",
        all.body
    );
    assert!(
        awaiting.body.contains(&format!("{JOB}:simulacao")),
        "{}",
        awaiting.body
    );
    assert!(
        !running.body.contains(&format!("{JOB}:simulacao</a>")),
        "{}",
        running.body
    );
}

#[tokio::test]
async fn the_audit_filters_by_who_and_what() {
    let s = simulated().await;
    add_user(&s.db.url, s.jobs.path(), FINANCE, "finance").await;
    let (console, _) = signed_in(&s, "otto@example.com", "operator").await;
    let ana = Client::logged_in(&console, FINANCE).await;

    let logins_of_otto = ana.get("/audit?quem=otto&acao=login").await;

    let body = &logins_of_otto.body;
    let table = &body[body.find("id=\"audit\"").expect("the audit table")..];
    assert!(table.contains("console:otto@example.com"), "{body}");
    assert!(!table.contains("console:ana@financeiro.example"), "{body}");
    assert!(!table.contains("conta criada"), "{body}");
    assert_eq!(ana.get("/audit?acao=nada").await.status, 400);
}

#[tokio::test]
async fn the_console_checks_an_approval_without_the_providers_secrets() {
    let s = simulated().await;
    add_user(&s.db.url, s.jobs.path(), FINANCE, "finance").await;
    let effects = s.jobs.path().join("effects.yaml");
    let text = std::fs::read_to_string(&effects).unwrap();
    std::fs::write(
        &effects,
        text.replace("Bearer test-token", "Bearer ${RL_TEST_NEVER_SET_TOKEN}"),
    )
    .unwrap();
    let console = ConsoleProc::start(&s.db.url, s.jobs.path(), &[]).await;
    let finance = Client::logged_in(&console, FINANCE).await;
    let page = format!("/executions/{JOB}:simulacao");

    let confirmation = finance.get(&format!("{page}/approve")).await;
    let csrf = confirmation.csrf().expect("the approval form");
    let approved = finance
        .post(&format!("{page}/approve"), &[("csrf_token", &csrf)])
        .await;

    assert!(
        confirmation.body.contains("Confirmar a aprovação"),
        "{}",
        confirmation.body
    );
    assert!(
        !confirmation.body.contains("RL_TEST_NEVER_SET_TOKEN"),
        "{}",
        confirmation.body
    );
    assert_eq!(approved.status, 303, "{}", approved.body);
}

#[tokio::test]
async fn an_executions_times_are_in_its_jobs_timezone_as_its_email_shows_them() {
    let events = paid_orders(3);
    let db = seeded_db(&events, &[]).await;
    let spec = JobSpec {
        extra: "timezone: America/Sao_Paulo\n".into(),
        ..JobSpec::default()
    };
    let jobs = jobs_dir("http://127.0.0.1:9/", &spec);
    run_job(&db, jobs.path(), JOB, Some(true), false)
        .await
        .expect("the simulation");
    add_user(&db.url, jobs.path(), "vera@example.com", "viewer").await;
    let console = ConsoleProc::start(&db.url, jobs.path(), &[]).await;
    let viewer = Client::logged_in(&console, "vera@example.com").await;

    let page = viewer.get(&format!("/executions/{JOB}:simulacao")).await;

    assert!(
        page.body
            .contains("2026-10-14 00:00 -03:00 → 2026-10-15 00:00 -03:00"),
        "{}",
        page.body
    );
}
