//! Finance, in a real Chromium, approves exactly what it saw: a confirmation opened before the
//! simulation ran again is refused when its button is clicked (409, nothing recorded), and the
//! confirmation says how many messages approving will send.

use fantoccini::Locator;
use testkit::chromedriver::ChromeDriver;

use super::browser::{click_then_read, log_in, open_browser};
use super::*;

#[tokio::test]
async fn a_confirmation_left_open_while_the_simulation_ran_again_approves_nothing_in_a_real_browser(
) {
    assert!(
        ChromeDriver::installed(),
        "Debian's chromium and chromium-driver are needed"
    );
    let s = simulated().await;
    add_user(&s.db.url, s.jobs.path(), FINANCE, "finance").await;
    let console = ConsoleProc::start(&s.db.url, s.jobs.path(), &[]).await;
    let driver = ChromeDriver::start().expect("chromedriver starts");
    let browser = open_browser(&driver).await;
    log_in(&browser, &console, FINANCE).await;
    browser
        .goto(&console.url(&format!("/executions/{JOB}:simulacao/approve")))
        .await
        .unwrap();
    let shown = browser
        .find(Locator::Css("#sends"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    insert(&s.db.pool, &[paid(11, "ped-late", 1, 90_000_000, 1.0)]).await;
    run_job(&s.db, s.jobs.path(), JOB, Some(true), true)
        .await
        .expect("the simulation, again");

    let answer = click_then_read(
        &browser,
        Locator::Css("form.approve button[type=submit]"),
        Locator::Css("main"),
    )
    .await;
    browser.close().await.unwrap();

    assert!(
        shown.contains("10 mensagens de notificar-vendedor"),
        "{shown}"
    );
    assert!(
        answer.contains("A simulação mudou desde que você a abriu"),
        "{answer}"
    );
    let approvals: i64 = sqlx::query_scalar("select count(*) from reprocessamento_aprovacao")
        .fetch_one(&s.db.pool)
        .await
        .unwrap();
    assert_eq!(approvals, 0);
}
