//! A decision acts, in a real browser: an operator resolves one key as not sent, then two more in
//! one decision, each through the confirmation page; the next `sweep` sends each exactly once, and the
//! review queue and the order's page show them done.

use testkit::chromedriver::ChromeDriver;

use super::browser::{appears, click, click_then_read, log_in, open_browser, OPERATOR};
use super::*;
use fantoccini::Locator;

/// The review page's rows.
async fn rows(browser: &fantoccini::Client) -> Vec<String> {
    let mut texts = Vec::new();
    for row in browser
        .find_all(Locator::Css("#review tbody tr"))
        .await
        .unwrap()
    {
        texts.push(row.text().await.unwrap());
    }
    texts
}

#[tokio::test]
async fn an_operators_not_sent_decisions_are_sent_once_by_the_next_sweep_in_a_real_browser() {
    assert!(
        ChromeDriver::installed(),
        "Debian's chromium and chromium-driver are needed"
    );
    let events = paid_orders(5);
    let db = seeded_db(&events, &[]).await;
    let provider = sink(testkit::sink::Behavior::default()).await;
    let spec = JobSpec {
        idempotent: false,
        on_failure: "keep",
        ..JobSpec::default()
    };
    let jobs = jobs_dir(&provider.url(), &spec);
    let mut keys = Vec::new();
    for id in ["evt-1", "evt-2", "evt-3"] {
        keys.push(uncertain(&db, id).await);
    }
    add_user(&db.url, jobs.path(), OPERATOR, "operator").await;
    let console = ConsoleProc::start(&db.url, jobs.path(), &[]).await;
    let driver = ChromeDriver::start().expect("chromedriver starts");
    let browser = open_browser(&driver).await;

    log_in(&browser, &console, OPERATOR).await;
    browser.goto(&console.url("/review")).await.unwrap();
    appears(&browser, Locator::Id("review")).await;
    let one = format!(
        "//tr[td[normalize-space()='{}']]//button[@value='not-sent']",
        keys[0]
    );
    click_then_read(
        &browser,
        Locator::XPath(&one),
        Locator::Id("confirm-decision"),
    )
    .await;
    let said = click_then_read(
        &browser,
        Locator::Id("confirm-decision"),
        Locator::Css("p.ok"),
    )
    .await;
    assert!(said.starts_with(keys[0].as_str()), "{said}");
    for key in &keys[1..] {
        click(
            &browser,
            Locator::Css(&format!("input[type=checkbox][value='{key}']")),
        )
        .await;
    }
    let listed = click_then_read(
        &browser,
        Locator::Css("#bulk button[value='not-sent']"),
        Locator::Id("confirm"),
    )
    .await;
    assert!(
        listed.contains(&keys[1]) && listed.contains(&keys[2]) && !listed.contains(&keys[0]),
        "{listed}"
    );
    click_then_read(
        &browser,
        Locator::Id("confirm-decision"),
        Locator::Css("p.ok"),
    )
    .await;
    let pending = rows(&browser).await;
    let swept = run_bin_within(&db.url, jobs.path(), &["sweep"]).await;
    browser.goto(&console.url("/review")).await.unwrap();
    let count = appears(&browser, Locator::Id("review-count"))
        .await
        .text()
        .await
        .unwrap();
    browser.goto(&console.url("/pedidos/ped-2")).await.unwrap();
    let state = appears(&browser, Locator::Css("#effects td.state"))
        .await
        .text()
        .await
        .unwrap();
    browser.close().await.unwrap();

    assert_eq!(pending.len(), 3);
    assert!(
        pending.iter().all(|r| r.contains("reenvio pendente")),
        "{pending:#?}"
    );
    assert_success(&swept, "sweep");
    assert!(stdout(&swept).contains("resent 3"), "{}", stdout(&swept));
    let deliveries = provider.deliveries();
    for key in &keys {
        assert_eq!(deliveries.get(key), Some(&1), "{key}");
    }
    assert_eq!(provider.received().len(), 3);
    assert_eq!(count, "0 efeito(s).");
    assert_eq!(state, "concluido");
    assert_eq!(keys_in_state(&db.pool, "concluido").await, keys);
}
