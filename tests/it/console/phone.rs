//! Finance follows the e-mail's link in a real Chromium: logs in, lands on the simulation, sorts
//! the diff, downloads the spreadsheet, confirms the approval. Then, at 390 px, the list, an
//! execution, the review queue and the audit scroll only inside their tables, never the page; and
//! an operator at 390 px finds a key's decisions on screen and its confirmation fits too.
//! With `CONSOLE_SCREENSHOTS=docs/src/img` it also writes the book's phone screenshots
//! (`docs/src/console.md`).

use std::io::Read;

use fantoccini::{Client as Browser, Locator};
use testkit::chromedriver::ChromeDriver;

use super::browser::{click_then_read, log_in, open_browser, screenshot, OPERATOR};
use super::*;

const FINANCE: &str = "ana@financeiro.example";

/// Clicks `what`, then waits for `then` on the page it leads to.
async fn follow(browser: &Browser, what: Locator<'_>, then: Locator<'_>) {
    let old = browser.find(Locator::Css("html")).await.unwrap();
    browser.find(what).await.unwrap().click().await.unwrap();
    for _ in 0..600 {
        if old.tag_name().await.is_err() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    browser.wait().for_element(then).await.unwrap();
}

async fn first_diff_row(browser: &Browser) -> String {
    let cell = browser
        .find(Locator::Css("#diff tbody tr td"))
        .await
        .unwrap();
    cell.text().await.unwrap()
}

/// Finance, from the e-mail's link to the confirmed approval.
async fn finance_from_the_emails_link(browser: &Browser, console: &ConsoleProc) {
    let simulation = format!("/executions/{JOB}:simulacao");
    browser.goto(&console.url(&simulation)).await.unwrap();
    browser
        .wait()
        .for_element(Locator::Css("form.login"))
        .await
        .unwrap();
    browser
        .find(Locator::Id("email"))
        .await
        .unwrap()
        .send_keys(FINANCE)
        .await
        .unwrap();
    browser
        .find(Locator::Id("password"))
        .await
        .unwrap()
        .send_keys(PASSWORD)
        .await
        .unwrap();
    follow(
        browser,
        Locator::Css("form.login button"),
        Locator::Id("diff"),
    )
    .await;
    let landed = browser.current_url().await.unwrap();
    assert_eq!(
        landed.path(),
        simulation,
        "the login returned to the e-mail's link"
    );

    follow(browser, Locator::LinkText("Diferença"), Locator::Id("diff")).await;
    follow(
        browser,
        Locator::Css("#diff th:nth-child(4) a"),
        Locator::Id("diff"),
    )
    .await;
    assert_eq!(
        first_diff_row(browser).await,
        "ped-10",
        "the largest difference first"
    );

    let cookie = browser.get_named_cookie("rl_console").await.unwrap();
    let xlsx = reqwest::Client::new()
        .get(console.url(&format!("{simulation}/diff.xlsx")))
        .header("cookie", format!("rl_console={}", cookie.value()))
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let mut archive = zip::ZipArchive::new(std::io::Cursor::new(xlsx.to_vec())).unwrap();
    let mut xml = String::new();
    archive
        .by_name("xl/worksheets/sheet1.xml")
        .unwrap()
        .read_to_string(&mut xml)
        .unwrap();
    assert!(
        xml.contains("<v>4.5</v>") && xml.contains("<autoFilter"),
        "{xml}"
    );

    follow(
        browser,
        Locator::Id("approve-link"),
        Locator::Css("section#what"),
    )
    .await;
    screenshot(browser, "confirm").await;
    follow(
        browser,
        Locator::Css("form.approve button"),
        Locator::Id("approved"),
    )
    .await;
    let approved = browser
        .find(Locator::Id("approved"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        approved.starts_with(&format!("Aprovada por console:{FINANCE}")),
        "{approved}"
    );
}

/// At 390 px wide, `path` scrolls only inside its boxes.
async fn fits_a_phone(browser: &Browser, console: &ConsoleProc, path: &str, shot: &str) {
    browser.goto(&console.url(path)).await.unwrap();
    browser
        .wait()
        .for_element(Locator::Css("main h1"))
        .await
        .unwrap();
    let sizes = browser
        .execute(
            "return [document.documentElement.scrollWidth, window.innerWidth]",
            vec![],
        )
        .await
        .unwrap();
    let (scroll, inner) = (sizes[0].as_i64().unwrap(), sizes[1].as_i64().unwrap());
    assert!(inner <= 420, "the window is a phone's: {inner} px");
    assert!(
        scroll <= inner,
        "{path}: the page is {scroll} px wide in {inner} px"
    );
    screenshot(browser, shot).await;
}

#[tokio::test]
async fn finance_follows_the_emails_link_approves_and_every_page_fits_a_phone() {
    assert!(
        ChromeDriver::installed(),
        "Debian's chromium and chromium-driver are needed"
    );
    let s = simulated().await;
    add_user(&s.db.url, s.jobs.path(), FINANCE, "finance").await;
    uncertain(&s.db, "evt-3").await;
    let console = ConsoleProc::start(
        &s.db.url,
        s.jobs.path(),
        &["--timezone", "America/Sao_Paulo"],
    )
    .await;
    let driver = ChromeDriver::start().expect("chromedriver starts");
    let browser = open_browser(&driver).await;

    finance_from_the_emails_link(&browser, &console).await;
    browser.set_window_size(390, 844).await.unwrap();
    let simulation = format!("/executions/{JOB}:simulacao");
    for (path, shot) in [
        ("/", "phone-executions"),
        (simulation.as_str(), "phone-execution"),
        ("/review", "phone-review"),
        ("/audit", "phone-audit"),
    ] {
        fits_a_phone(&browser, &console, path, shot).await;
    }
    browser.close().await.unwrap();
}

/// Where the element `xpath` finds ends on the screen, and how wide the window is, in px.
async fn right_edge(browser: &Browser, xpath: &str) -> (f64, f64) {
    let script = "const e = document.evaluate(arguments[0], document, null, \
                  XPathResult.FIRST_ORDERED_NODE_TYPE, null).singleNodeValue; \
                  return [e.getBoundingClientRect().right, window.innerWidth];";
    let sizes = browser
        .execute(script, vec![serde_json::Value::from(xpath)])
        .await
        .unwrap();
    (sizes[0].as_f64().unwrap(), sizes[1].as_f64().unwrap())
}

#[tokio::test]
async fn at_390_px_an_operator_reaches_a_keys_decisions_and_their_confirmation_fits() {
    assert!(
        ChromeDriver::installed(),
        "Debian's chromium and chromium-driver are needed"
    );
    let s = simulated().await;
    let approved = run_bin(&s.db.url, s.jobs.path(), &["approve", JOB]).await;
    assert_success(&approved, "approve");
    // Its provider answers 500 to every call: each message of the real run ends `incerto`, in the queue.
    run_job(&s.db, s.jobs.path(), JOB, None, false)
        .await
        .expect("the real run");
    let key = "evt-3:notificar-vendedor".to_string();
    add_user(&s.db.url, s.jobs.path(), OPERATOR, "operator").await;
    let console = ConsoleProc::start(&s.db.url, s.jobs.path(), &[]).await;
    let driver = ChromeDriver::start().expect("chromedriver starts");
    let browser = open_browser(&driver).await;
    browser.set_window_size(390, 844).await.unwrap();
    log_in(&browser, &console, OPERATOR).await;

    fits_a_phone(&browser, &console, "/review", "phone-review-operator").await;
    let button = format!("//tr[td[normalize-space()='{key}']]//button[@value='not-sent']");
    let (right, inner) = right_edge(&browser, &button).await;
    click_then_read(&browser, Locator::XPath(&button), Locator::Id("decision")).await;
    let confirmation = browser.current_url().await.unwrap();
    let path = format!("{}?{}", confirmation.path(), confirmation.query().unwrap());
    fits_a_phone(&browser, &console, &path, "phone-review-confirm").await;
    let simulation = format!("/executions/{JOB}:simulacao");
    let real = format!("/executions/{JOB}");
    for path in ["/", &simulation, &real, "/audit"] {
        fits_a_phone(&browser, &console, path, "phone-operator").await;
    }
    browser.close().await.unwrap();

    assert!(
        right <= inner,
        "the decision is on screen: it ends at {right} px in {inner} px"
    );
}
