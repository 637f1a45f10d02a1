//! The daily loop in a real browser: Debian's Chromium, headless, driven over WebDriver
//! (chromedriver, fantoccini) against the real `replay-ledger console`, with the real binary
//! running the jobs. Finance logs in, opens the simulation from the list, searches the diff,
//! downloads the CSV, approves, and sees the gated real run proceed (finished, on the
//! simulation's page and in the list); an operator resolves one
//! `incerto` item as sent and another as not sent, and the next run sends the second exactly
//! once; both log out. With `CONSOLE_SCREENSHOTS=docs/src/img` it also writes the book's screenshots
//! (`docs/src/img/console-*.png`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use fantoccini::{Client as Browser, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use replay_ledger::services::report::{render, ExecutionReport};
use testkit::chromedriver::ChromeDriver;
use testkit::sink::Behavior;

use super::*;

const FINANCE: &str = "ana@financeiro.example";
pub(super) const OPERATOR: &str = "bruno@operacao.example";
/// The next run of the same window: not gated, so it runs once the operator has decided.
const NEXT: &str = "replay-2026-10-14-v3";

/// Where to write screenshots, when asked (`CONSOLE_SCREENSHOTS=docs/src/img`, relative to the crate).
fn screenshots() -> Option<PathBuf> {
    let dir = std::env::var("CONSOLE_SCREENSHOTS").ok()?;
    Some(Path::new(env!("CARGO_MANIFEST_DIR")).join(dir))
}

pub(super) async fn screenshot(browser: &Browser, name: &str) {
    if let Some(dir) = screenshots() {
        let png = browser.screenshot().await.expect("a screenshot");
        std::fs::create_dir_all(&dir).expect("the screenshot directory");
        std::fs::write(dir.join(format!("console-{name}.png")), png).expect("write a screenshot");
    }
}

pub(super) async fn open_browser(driver: &ChromeDriver) -> Browser {
    ClientBuilder::new(HttpConnector::new())
        .capabilities(driver.capabilities())
        .connect(&driver.url())
        .await
        .expect("a Chromium session over WebDriver")
}

/// Clicks the element `button` finds.
pub(super) async fn click(browser: &Browser, button: Locator<'_>) {
    browser.find(button).await.unwrap().click().await.unwrap();
}

/// Waits for the element `what` finds to appear (the next page, or an answer), and returns it.
pub(super) async fn appears(browser: &Browser, what: Locator<'_>) -> fantoccini::elements::Element {
    browser.wait().for_element(what).await.unwrap()
}

/// Clicks `button`, waits for the page it submits to replace the current one, then for `answer`
/// on the new page, and returns its text. Waiting for `answer` alone would race: the element may
/// already be on the old page (the diff's count, the previous resolution's message), and be read
/// there or go stale between being found and being read.
pub(super) async fn click_then_read(
    browser: &Browser,
    button: Locator<'_>,
    answer: Locator<'_>,
) -> String {
    let old_page = browser.find(Locator::Css("html")).await.unwrap();
    click(browser, button).await;
    gone(&old_page).await;
    appears(browser, answer).await.text().await.unwrap()
}

/// Waits (at most 60 s) until `element` no longer belongs to the page shown: a navigation ended.
/// Any other error while the page changes (the driver busy with the navigation) is transient:
/// ask again.
pub(super) async fn gone(element: &fantoccini::elements::Element) {
    let mut last = None;
    for _ in 0..600 {
        match element.tag_name().await {
            Err(e) if e.is_stale_element_reference() => return,
            Err(e) => last = Some(e.to_string()),
            Ok(_) => {}
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the page did not change within 60 s (last error: {last:?})");
}

/// Fills the login form and submits it; waits for the executions list.
pub(super) async fn log_in(browser: &Browser, console: &ConsoleProc, email: &str) {
    log_in_at(browser, &console.url(""), email, PASSWORD).await;
}

/// Logs in at the console served at `base` with `password` (the demo prints its own); waits
/// until the page names the account.
pub(super) async fn log_in_at(browser: &Browser, base: &str, email: &str, password: &str) {
    browser.goto(&format!("{base}/login")).await.unwrap();
    let field = browser.find(Locator::Id("email")).await.unwrap();
    field.send_keys(email).await.unwrap();
    let field = browser.find(Locator::Id("password")).await.unwrap();
    field.send_keys(password).await.unwrap();
    let who = click_then_read(
        browser,
        Locator::Css("form.login button"),
        Locator::Css("header.top .who"),
    )
    .await;
    assert!(who.contains(email), "{who}");
}

pub(super) async fn log_out(browser: &Browser, console: &ConsoleProc) {
    click(browser, Locator::Css("form.logout button")).await;
    appears(browser, Locator::Css("form.login")).await;
    // The session is over: a page sends the browser back to the login.
    browser.goto(&console.url("/")).await.unwrap();
    appears(browser, Locator::Css("form.login")).await;
}

/// Waits (at most 60 s) for one finished download in `dir` and returns its bytes.
async fn downloaded(dir: &Path) -> (String, Vec<u8>) {
    for _ in 0..600 {
        let done: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| Some(e.ok()?.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "csv"))
            .collect();
        if let [file] = done.as_slice() {
            let name = file.file_name().unwrap().to_string_lossy().into_owned();
            return (name, std::fs::read(file).unwrap());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no CSV was downloaded into {}", dir.display());
}

/// The archive, the gated job and its provider (which does not deduplicate and fails two keys,
/// so the real run leaves them `incerto`), the next job, the two accounts.
struct Scene {
    db: TestDb,
    jobs: tempfile::TempDir,
    provider: testkit::sink::Sink,
    sent: String,
    not_sent: String,
}

async fn scene() -> Scene {
    let events = paid_orders(30);
    let already = sent_share(&events, 3);
    let db = seeded_db(&events, &already).await;
    let (sent, not_sent) = (key(&events[3]), key(&events[4]));
    let provider = sink(Behavior {
        fail_keys: [sent.clone(), not_sent.clone()].into(),
        ..Default::default()
    })
    .await;
    let spec = JobSpec {
        idempotent: false,
        on_failure: "keep",
        extra: "require_approved_simulation: true\n".into(),
        ..JobSpec::default()
    };
    let jobs = jobs_dir(&provider.url(), &spec);
    let gated = std::fs::read_to_string(jobs.path().join(format!("{JOB}.yaml"))).unwrap();
    let next = gated
        .replace(&format!("name: {JOB}"), &format!("name: {NEXT}"))
        .replace("require_approved_simulation: true\n", "");
    std::fs::write(jobs.path().join(format!("{NEXT}.yaml")), next).unwrap();
    add_user(&db.url, jobs.path(), FINANCE, "finance").await;
    add_user(&db.url, jobs.path(), OPERATOR, "operator").await;
    Scene {
        db,
        jobs,
        provider,
        sent,
        not_sent,
    }
}

/// Finance: list → execution → search → CSV → approve.
async fn finance_approves(browser: &Browser, console: &ConsoleProc, s: &Scene, downloads: &Path) {
    log_in(browser, console, FINANCE).await;
    screenshot(browser, "executions").await;
    let simulation = format!("{JOB}:simulacao");
    let link = browser.find(Locator::LinkText(&simulation)).await.unwrap();
    link.click().await.unwrap();
    appears(browser, Locator::Id("diff")).await;
    let page = browser.current_url().await.unwrap();
    assert_eq!(page.path(), format!("/executions/{simulation}"));

    let search = browser.find(Locator::Id("q")).await.unwrap();
    search.send_keys("ped-17").await.unwrap();
    let count = click_then_read(
        browser,
        Locator::Css("#diff form button"),
        Locator::Id("diff-count"),
    )
    .await;
    assert!(count.starts_with("1 pedidos com “ped-17”"), "{count}");
    let rows = browser
        .find_all(Locator::Css("#diff tbody tr"))
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    assert!(rows[0].text().await.unwrap().starts_with("ped-17 "));

    click(browser, Locator::Id("csv")).await;
    // The search is still applied, so the screenshot of the page before approving shows it.
    let (name, bytes) = downloaded(downloads).await;
    let report = ExecutionReport::load(&s.db.pool, &simulation)
        .await
        .unwrap();
    assert_eq!(name, render::csv_name(&report));
    assert_eq!(
        bytes,
        render::csv(&report),
        "the report's CSV, byte for byte"
    );
    let csv = String::from_utf8(bytes).unwrap();
    assert_eq!(csv.lines().count(), 31, "a header and the 30 orders");

    // Approving goes through the confirmation page, which says what will be applied.
    click_then_read(
        browser,
        Locator::Id("approve-link"),
        Locator::Css("section#what"),
    )
    .await;
    browser
        .find(Locator::Id("note"))
        .await
        .unwrap()
        .send_keys("diff conferido")
        .await
        .unwrap();
    // Typing scrolled down to the note: the screenshot shows the page from its top.
    browser
        .execute("window.scrollTo(0, 0)", vec![])
        .await
        .unwrap();
    screenshot(browser, "execution").await;
    let approved = click_then_read(
        browser,
        Locator::Css("form.approve button"),
        Locator::Id("approved"),
    )
    .await;
    assert!(
        approved.starts_with(&format!("Aprovada por console:{FINANCE}")),
        "{approved}"
    );
}

/// Finance, after the real run: the simulation's page links the real run, whose page says it
/// finished, and the list says so too.
async fn finance_sees_the_real_run_proceed(browser: &Browser, console: &ConsoleProc) {
    let simulation = console.url(&format!("/executions/{JOB}:simulacao"));
    browser.goto(&simulation).await.unwrap();
    let approval = appears(browser, Locator::Id("approval")).await;
    let said = approval.text().await.unwrap();
    assert!(
        said.contains(&format!("A execução real já rodou: {JOB}")),
        "{said}"
    );
    let state = "//section[@id='identity']//tr[th[normalize-space()='Situação']]/td";
    let shown = click_then_read(
        browser,
        Locator::Css("#approval p a"),
        Locator::XPath(state),
    )
    .await;
    let page = browser.current_url().await.unwrap();
    assert_eq!(page.path(), format!("/executions/{JOB}"));
    assert_eq!(shown, "concluída", "the real run's page");
    browser.goto(&console.url("/")).await.unwrap();
    let row = format!("//table[@id='executions']//tr[td[1]/a[normalize-space()='{JOB}']]/td[4]");
    let listed = appears(browser, Locator::XPath(&row)).await;
    assert_eq!(listed.text().await.unwrap(), "concluída", "the list");
    log_out(browser, console).await;
}

/// Operator: the queue → one sent, one not sent.
async fn operator_resolves(browser: &Browser, console: &ConsoleProc, s: &Scene) {
    log_in(browser, console, OPERATOR).await;
    browser.goto(&console.url("/review")).await.unwrap();
    appears(browser, Locator::Id("review")).await;
    let rows = browser
        .find_all(Locator::Css("#review tbody tr"))
        .await
        .unwrap();
    assert_eq!(rows.len(), 2);
    screenshot(browser, "review").await;
    for (key, outcome) in [(&s.sent, "sent"), (&s.not_sent, "not-sent")] {
        let button = format!("//tr[td[normalize-space()='{key}']]//button[@value='{outcome}']");
        click_then_read(
            browser,
            Locator::XPath(&button),
            Locator::Id("confirm-decision"),
        )
        .await;
        let confirm = Locator::Id("confirm-decision");
        let said = click_then_read(browser, confirm, Locator::Css("p.ok")).await;
        assert!(said.starts_with(key.as_str()), "{said}");
    }
    let left = browser
        .find_all(Locator::Css("#review tbody tr"))
        .await
        .unwrap();
    assert_eq!(left.len(), 1, "the not-sent key stays, pending its resend");
    let pending = left[0].text().await.unwrap();
    assert!(
        pending.contains(s.not_sent.as_str()) && pending.contains("reenvio pendente"),
        "{pending}"
    );
    browser.goto(&console.url("/audit")).await.unwrap();
    let audit = browser
        .find(Locator::Id("audit"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for line in ["aprovou", "resolveu", "entrou", "saiu"] {
        assert!(audit.contains(line), "{line} in the audit:\n{audit}");
    }
    log_out(browser, console).await;
}

#[tokio::test]
async fn finance_approves_and_an_operator_settles_the_queue_in_a_real_browser() {
    assert!(
        ChromeDriver::installed(),
        "Debian's chromium and chromium-driver are needed (.ci/run installs them)"
    );
    let s = scene().await;
    let (db, jobs) = (&s.db, s.jobs.path());
    assert_success(
        &run_bin_within(&db.url, jobs, &["run", JOB, "--simulate"]).await,
        "the simulation",
    );
    let refused = run_bin_within(&db.url, jobs, &["run", JOB]).await;
    assert_eq!(
        refused.status.code(),
        Some(1),
        "no real run before the approval"
    );
    assert_eq!(s.provider.request_count(), 0);
    let console = ConsoleProc::start(&db.url, jobs, &["--timezone", "America/Sao_Paulo"]).await;
    let driver = ChromeDriver::start().expect("chromedriver starts");
    let browser = open_browser(&driver).await;

    finance_approves(&browser, &console, &s, &driver.downloads()).await;
    let real = run_bin_within(&db.url, jobs, &["run", JOB]).await;
    assert_success(&real, "the gated real run, approved in the console");
    finance_sees_the_real_run_proceed(&browser, &console).await;
    assert_eq!(keys_in_state(&db.pool, "incerto").await.len(), 2);
    s.provider.set_behavior(Behavior::default());
    let before = s.provider.received().len();
    operator_resolves(&browser, &console, &s).await;
    let next = run_bin_within(&db.url, jobs, &["run", NEXT]).await;
    browser.close().await.unwrap();

    assert_success(&next, "the next run");
    let after: Vec<String> = s.provider.received()[before..]
        .iter()
        .map(|r| r.key.clone())
        .collect();
    assert_eq!(
        after,
        std::slice::from_ref(&s.not_sent),
        "the next run sends the not-sent key exactly once"
    );
    assert!(keys_in_state(&db.pool, "incerto").await.is_empty());
    assert_eq!(keys_in_state(&db.pool, "concluido").await.len(), 30);
    let who: Vec<String> =
        sqlx::query_scalar("select resolvido_por from efeito_revisao order by id")
            .fetch_all(&db.pool)
            .await
            .unwrap();
    assert_eq!(
        who,
        [format!("console:{OPERATOR}"), format!("console:{OPERATOR}")]
    );
}
