//! `demo --console`: the real process runs the story, keeps its scratch
//! database, serves the console on loopback with two printed accounts; a login with the printed
//! password works; a gated simulation waits for approval and three `incerto` keys for a decision;
//! finance approves, then starts the real run and an operator asks for a sweep by clicking the
//! buttons in a real Chromium, and the demo's own `serve` carries both out (the pages show them
//! done); SIGINT stops it, exit 0, and the scratch database is gone.

use fantoccini::Locator;
use nix::sys::signal::Signal;
use testkit::chromedriver::ChromeDriver;
use tokio::io::{AsyncBufReadExt, BufReader};

use super::browser::{appears, click, log_in_at, open_browser};
use super::*;

#[tokio::test]
async fn demo_console_serves_the_story_until_ctrl_c_then_removes_its_database() {
    let cwd = tempfile::tempdir().unwrap();
    let mut child = tokio::process::Command::new(bin())
        .args(["demo", "--events", "200", "--console", "--console-addr"])
        .arg(free_addr().to_string())
        .current_dir(cwd.path())
        .env("DATABASE_URL", crate::helpers::server_url())
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn demo --console");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let (mut database, mut url, mut finance, mut operator) = (None, None, None, None);
    let read = tokio::time::timeout(PROCESS_LIMIT, async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(rest) = line.strip_prefix("database: scratch database ") {
                database = rest.split_whitespace().next().map(str::to_string);
            }
            if let Some(rest) = line.strip_prefix("console: ") {
                url = rest.split_whitespace().next().map(str::to_string);
            }
            if line.trim_start().starts_with("finance ") {
                finance = line.rsplit("password: ").next().map(str::to_string);
            }
            if line.trim_start().starts_with("operator ") {
                operator = line.rsplit("password: ").next().map(str::to_string);
                break;
            }
        }
    })
    .await;
    assert!(read.is_ok(), "the demo printed its console and accounts");
    let (database, url, password) = (database.unwrap(), url.unwrap(), finance.unwrap());
    let mut browser = Client::at(url.trim_end_matches('/'));
    let login = browser.login("financeiro@demo.example", &password).await;
    let page = browser.get("/").await;
    let review = browser.get("/review").await;
    let gated = browser.get("/executions/replay-2026-10-15:simulacao").await;

    assert_eq!(login.status, 303, "{}", login.body);
    assert!(page.body.contains("replay-2026-10-14"), "{}", page.body);
    // Something for both human loops: an approval to give, decisions to make.
    assert!(gated.body.contains("Revisar e aprovar"), "{}", gated.body);
    assert!(review.body.contains("3 efeito(s)."), "{}", review.body);

    // Both buttons of the demo do what they say, clicked in a real Chromium: its `serve` runs
    // beside the console.
    const GATED: &str = "/executions/replay-2026-10-15:simulacao";
    super::requests::approve_at(&browser, GATED).await;
    assert!(
        ChromeDriver::installed(),
        "Debian's chromium and chromium-driver are needed"
    );
    let driver = ChromeDriver::start().expect("chromedriver starts");
    let base = url.trim_end_matches('/').to_string();
    let finance_tab = open_browser(&driver).await;
    log_in_at(&finance_tab, &base, "financeiro@demo.example", &password).await;
    finance_tab.goto(&format!("{base}{GATED}")).await.unwrap();
    click(&finance_tab, Locator::Id("start-link")).await;
    click(&finance_tab, Locator::Id("confirm-request")).await;
    let started = appears(&finance_tab, Locator::Css("tr.request-concluida"))
        .await
        .text()
        .await
        .unwrap();
    finance_tab.close().await.unwrap();
    let operations_tab = open_browser(&driver).await;
    log_in_at(
        &operations_tab,
        &base,
        "operacao@demo.example",
        &operator.unwrap(),
    )
    .await;
    operations_tab
        .goto(&format!("{base}/review"))
        .await
        .unwrap();
    click(&operations_tab, Locator::Id("sweep-link")).await;
    click(&operations_tab, Locator::Id("confirm-request")).await;
    let swept = appears(&operations_tab, Locator::Css("tr.request-concluida"))
        .await
        .text()
        .await
        .unwrap();
    operations_tab.close().await.unwrap();
    assert!(started.contains("concluída"), "the start: {started}");
    assert!(swept.contains("varredura feita"), "the sweep: {swept}");
    let scratch = TestDb::attach(&database_url(&database)).await;
    let done = || async {
        sqlx::query_as::<_, (String, String)>(
            "select acao, estado from execucao_solicitada order by id",
        )
        .fetch_all(&scratch.pool)
        .await
        .unwrap()
    };
    wait_until("the demo's serve carries out both requests", || async {
        let asked = done().await;
        asked.len() == 2
            && asked
                .iter()
                .all(|(_, state)| state != "pendente" && state != "em-andamento")
    })
    .await;
    assert_eq!(
        done().await,
        [
            ("executar".to_string(), "concluida".to_string()),
            ("varrer".to_string(), "concluida".to_string())
        ]
    );
    let real: Option<String> = sqlx::query_scalar(
        "select estado from reprocessamento_execucao where execucao_id = 'replay-2026-10-15'",
    )
    .fetch_optional(&scratch.pool)
    .await
    .unwrap();
    assert_eq!(
        real.as_deref(),
        Some("concluida"),
        "the approved real run ran"
    );
    drop(scratch);
    send_signal(&child, Signal::SIGINT);
    let status = tokio::time::timeout(PROCESS_LIMIT, child.wait())
        .await
        .expect("the demo stops on SIGINT")
        .unwrap();
    assert!(status.success(), "{status:?}");
    let admin = TestDb::attach(&crate::helpers::server_url()).await;
    let left: i64 = sqlx::query_scalar("select count(*) from pg_database where datname = $1")
        .bind(&database)
        .fetch_one(&admin.pool)
        .await
        .unwrap();
    assert_eq!(left, 0, "the scratch database {database} is removed");
}

/// The server's URL with `database` for its database.
fn database_url(database: &str) -> String {
    let mut url = url::Url::parse(&crate::helpers::server_url()).expect("the server's URL");
    url.set_path(database);
    url.to_string()
}
