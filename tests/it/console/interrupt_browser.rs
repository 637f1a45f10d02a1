//! A real run stopped and resumed from the console, in a real Chromium: finance starts the
//! approved gated run, sees it running, asks it to stop (confirmed, audited); the run ends its
//! batch in progress and stops `interrompida` with its checkpoint kept; an operator resumes it
//! from the same page and `serve` finishes it from that checkpoint. The provider does not
//! deduplicate, so a message sent twice would show: every order's key is delivered exactly once.

use std::time::Duration;

use fantoccini::Locator;
use testkit::chromedriver::ChromeDriver;
use testkit::sink::Behavior;

use super::browser::{appears, click, log_in, log_out, open_browser, OPERATOR};
use super::requests::{approve, requests, SIMULATION};
use super::*;
use crate::serve::Serve;

const ORDERS: i64 = 60;
const RUN: &str = "/executions/replay-2026-10-14-v2";

#[tokio::test]
async fn finance_stops_a_running_real_run_and_an_operator_resumes_it_nothing_sent_twice() {
    assert!(
        ChromeDriver::installed(),
        "Debian's chromium and chromium-driver are needed"
    );
    let events = paid_orders(ORDERS);
    let db = seeded_db(&events, &[]).await;
    // A provider slow enough (one message at a time, 150 ms each) that the run is still going
    // when finance asks it to stop.
    let provider = sink(Behavior {
        delay: Duration::from_millis(150),
        ..Behavior::default()
    })
    .await;
    let spec = JobSpec {
        idempotent: false,
        on_failure: "keep",
        concurrency: 1,
        batch_size: 5,
        extra: "require_approved_simulation: true\n".into(),
        ..JobSpec::default()
    };
    let jobs = jobs_dir(&provider.url(), &spec);
    run_job(&db, jobs.path(), JOB, Some(true), false)
        .await
        .expect("the simulation");
    add_user(&db.url, jobs.path(), FINANCE, "finance").await;
    add_user(&db.url, jobs.path(), OPERATOR, "operator").await;
    let console = ConsoleProc::start(&db.url, jobs.path(), &[]).await;
    approve(&Client::logged_in(&console, FINANCE).await).await;
    let serve = Serve::start_with(&db.url, jobs.path(), "serve", |_| {});
    let driver = ChromeDriver::start().expect("chromedriver starts");
    let browser = open_browser(&driver).await;

    // Finance starts the run, then stops it from its page while it runs.
    log_in(&browser, &console, FINANCE).await;
    browser.goto(&console.url(SIMULATION)).await.unwrap();
    click(&browser, Locator::Id("start-link")).await;
    click(&browser, Locator::Id("confirm-request")).await;
    appears(&browser, Locator::Css("tr.request-em-andamento")).await;
    browser.goto(&console.url(RUN)).await.unwrap();
    click(&browser, Locator::Id("interrupt-link")).await;
    let confirmation = appears(&browser, Locator::Css("main"))
        .await
        .text()
        .await
        .unwrap();
    browser
        .find(Locator::Id("note"))
        .await
        .unwrap()
        .send_keys("valores a conferir")
        .await
        .unwrap();
    click(&browser, Locator::Id("confirm-request")).await;
    wait_until("the run stops at a batch boundary", || async {
        execution_state(&db.pool, JOB).await.as_deref() == Some("interrompida")
    })
    .await;
    let (checkpoint, last): (Option<i64>, Option<i64>) = sqlx::query_as(
        "select c.ultima_posicao, e.posicao_final from reprocessamento_execucao e \
         left join reprocessamento_checkpoint c using (execucao_id) where e.execucao_id = $1",
    )
    .bind(JOB)
    .fetch_one(&db.pool)
    .await
    .unwrap();
    let sent_before_resume = provider.delivery_count();
    browser.goto(&console.url(RUN)).await.unwrap();
    let stopped = appears(&browser, Locator::Id("identity"))
        .await
        .text()
        .await
        .unwrap();
    log_out(&browser, &console).await;

    // An operator resumes it from the same page; serve finishes it from the checkpoint.
    log_in(&browser, &console, OPERATOR).await;
    browser.goto(&console.url(RUN)).await.unwrap();
    click(&browser, Locator::Id("resume-link")).await;
    click(&browser, Locator::Id("confirm-request")).await;
    wait_until("the resumed run finishes", || async {
        execution_state(&db.pool, JOB).await.as_deref() == Some("concluida")
    })
    .await;
    browser.close().await.unwrap();

    assert!(
        confirmation.contains("Interromper a execução real")
            && confirmation.contains(&format!("console:{FINANCE}")),
        "{confirmation}"
    );
    assert!(
        checkpoint.is_some_and(|c| Some(c) < last) && sent_before_resume < ORDERS as usize,
        "stopped mid-run: checkpoint {checkpoint:?} of {last:?}, {sent_before_resume} sent\n{}",
        serve.log()
    );
    assert!(
        stopped.contains("interrompida") && stopped.contains(&format!("por console:{FINANCE}")),
        "{stopped}"
    );
    let asked: Vec<(String, String, String)> = requests(&db)
        .await
        .into_iter()
        .map(|(acao, _, estado, por, _)| (acao, estado, por))
        .collect();
    assert_eq!(
        asked,
        [
            ("executar", "concluida", FINANCE),
            ("interromper", "concluida", FINANCE),
            ("retomar", "concluida", OPERATOR),
        ]
        .map(|(a, e, p)| (a.to_string(), e.to_string(), format!("console:{p}")))
    );
    let audited: Vec<(String, String, Option<String>)> =
        sqlx::query_as("select quem, acao, detalhe from console_auditoria order by id")
            .fetch_all(&db.pool)
            .await
            .unwrap();
    assert!(
        audited.iter().any(
            |(quem, acao, detalhe)| quem == &format!("console:{FINANCE}")
                && acao == "solicitacao"
                && detalhe.as_deref().is_some_and(
                    |d| d.starts_with("interromper ") && d.ends_with("valores a conferir")
                )
        ),
        "{audited:?}"
    );
    let deliveries = provider.deliveries();
    assert_eq!(deliveries.len(), ORDERS as usize, "{deliveries:?}");
    assert!(deliveries.values().all(|n| *n == 1), "{deliveries:?}");
    assert_eq!(
        keys_in_state(&db.pool, "concluido").await.len(),
        ORDERS as usize
    );
}
