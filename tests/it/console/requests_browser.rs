//! Finance starts the approved gated real run in a real Chromium: the link on the simulation's
//! page, the confirmation that says what will be applied and who asks, the button, and the page
//! that refreshes itself until a real `serve` has carried the request out.

use fantoccini::Locator;
use testkit::chromedriver::ChromeDriver;

use super::browser::{appears, click, click_then_read, log_in, open_browser};
use super::requests::{approve, requests, scene, SIMULATION};
use super::*;
use crate::serve::Serve;

#[tokio::test]
async fn finance_clicks_through_the_start_confirmation_and_sees_the_run_done_in_a_real_browser() {
    assert!(
        ChromeDriver::installed(),
        "Debian's chromium and chromium-driver are needed"
    );
    let s = scene().await;
    add_user(&s.db.url, s.jobs.path(), FINANCE, "finance").await;
    let console = ConsoleProc::start(&s.db.url, s.jobs.path(), &[]).await;
    approve(&Client::logged_in(&console, FINANCE).await).await;
    let _serve = Serve::start_with(&s.db.url, s.jobs.path(), "serve", |_| {});
    let driver = ChromeDriver::start().expect("chromedriver starts");
    let browser = open_browser(&driver).await;

    log_in(&browser, &console, FINANCE).await;
    browser.goto(&console.url(SIMULATION)).await.unwrap();
    let confirmation =
        click_then_read(&browser, Locator::Id("start-link"), Locator::Css("main")).await;
    click(&browser, Locator::Id("confirm-request")).await;
    let done = appears(&browser, Locator::Css("tr.request-concluida"))
        .await
        .text()
        .await
        .unwrap();
    let url = browser.current_url().await.unwrap();
    browser.close().await.unwrap();

    assert!(
        confirmation.contains("Iniciar a execução real")
            && confirmation.contains(&format!("console:{FINANCE}")),
        "{confirmation}"
    );
    assert!(url.path().ends_with(":simulacao"), "{url}");
    assert!(done.contains("concluída"), "{done}");
    assert_eq!(requests(&s.db).await[0].2, "concluida");
    assert_eq!(
        execution_state(&s.db.pool, JOB).await.as_deref(),
        Some("concluida")
    );
    assert_eq!(s.provider.request_count(), 10);
}
