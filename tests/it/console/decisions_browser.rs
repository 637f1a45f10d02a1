//! Operator decisions that are safe, in a real browser: a decision of the
//! review queue — "foi enviado" or "não foi enviado", for one key — only leads to a
//! confirmation that shows the key's attempts (a resend that already failed with HTTP 500) and
//! the decisions taken on it before; only the confirmation's button records it, with its audit
//! row.

use testkit::chromedriver::ChromeDriver;

use super::browser::{click_then_read, log_in, open_browser, OPERATOR};
use super::*;
use fantoccini::Locator;

/// How many review decisions console accounts recorded.
async fn console_decisions(db: &TestDb) -> i64 {
    sqlx::query_scalar("select count(*) from efeito_revisao where resolvido_por like 'console:%'")
        .fetch_one(&db.pool)
        .await
        .expect("count the decisions")
}

/// The text of the element `css` finds.
async fn text_of(browser: &fantoccini::Client, css: &str) -> String {
    let element = browser.find(Locator::Css(css)).await.unwrap();
    element.text().await.unwrap()
}

/// The queue's button `outcome` in the row of `key`.
fn decision_button(key: &str, outcome: &str) -> String {
    format!("//tr[td[normalize-space()='{key}']]//button[@value='{outcome}']")
}

#[tokio::test]
async fn a_decision_shows_the_keys_failed_resend_and_is_recorded_only_when_confirmed() {
    assert!(
        ChromeDriver::installed(),
        "Debian's chromium and chromium-driver are needed"
    );
    let db = seeded_db(&paid_orders(2), &[]).await;
    let (key, other) = (uncertain(&db, "evt-1").await, uncertain(&db, "evt-2").await);
    let provider = sink(testkit::sink::Behavior {
        fail_keys: [key.clone()].into(),
        ..Default::default()
    })
    .await;
    let spec = JobSpec {
        idempotent: false,
        on_failure: "keep",
        ..JobSpec::default()
    };
    let jobs = jobs_dir(&provider.url(), &spec);
    let resolve = ["review", "resolve", &key, "--not-sent"];
    assert_success(
        &run_bin_within(&db.url, jobs.path(), &resolve).await,
        "resolve",
    );
    let swept = run_bin_within(&db.url, jobs.path(), &["sweep"]).await;
    assert_success(&swept, "the resend, which fails with HTTP 500");
    add_user(&db.url, jobs.path(), OPERATOR, "operator").await;
    let console = ConsoleProc::start(&db.url, jobs.path(), &[]).await;
    let driver = ChromeDriver::start().expect("chromedriver starts");
    let browser = open_browser(&driver).await;
    log_in(&browser, &console, OPERATOR).await;

    browser.goto(&console.url("/review")).await.unwrap();
    let sent = Locator::XPath(&decision_button(&other, "sent"));
    let asked = click_then_read(&browser, sent, Locator::Id("decision")).await;
    let after_sent_click = console_decisions(&db).await;
    let cancel = Locator::LinkText("Cancelar e voltar à revisão");
    click_then_read(&browser, cancel, Locator::Id("review")).await;
    let not_sent = Locator::XPath(&decision_button(&key, "not-sent"));
    let warned = click_then_read(&browser, not_sent, Locator::Id("resend-warning")).await;
    let attempts = text_of(&browser, "#attempts").await;
    let earlier = text_of(&browser, "#decisions").await;
    let after_not_sent_click = console_decisions(&db).await;
    let confirm = Locator::Id("confirm-decision");
    let said = click_then_read(&browser, confirm, Locator::Css("p.ok")).await;
    browser.close().await.unwrap();

    assert!(asked.contains("1 efeito(s) foram enviados"), "{asked}");
    assert_eq!(after_sent_click, 0, "a click in the queue records nothing");
    assert!(warned.contains("1 tentativa(s) com falha"), "{warned}");
    assert!(
        attempts.contains(&key) && attempts.contains("falha") && attempts.contains("500"),
        "the failed resend is shown: {attempts}"
    );
    assert!(
        earlier.contains("não enviado") && earlier.contains("postgres"),
        "the earlier decision is shown: {earlier}"
    );
    assert_eq!(after_not_sent_click, 0, "only the confirmation records");
    assert!(said.starts_with(key.as_str()), "{said}");
    assert_eq!(console_decisions(&db).await, 1);
    let recorded = audit(&db).await;
    assert!(
        recorded
            .iter()
            .any(|(who, what, target)| who.contains(OPERATOR)
                && what == "resolucao"
                && target.as_deref().is_some_and(|t| t.contains(&key))),
        "{recorded:#?}"
    );
    assert_eq!(provider.received().len(), 1, "only the sweep's resend");
}
