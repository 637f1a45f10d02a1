//! What a dashboard's users look for, in a real Chromium: the search box of every page finds an
//! order by its id, an effect by its key and an execution by its id; a run's page draws its pace
//! as a chart once it finished; the diff sorts order ids as people read them (ped-2 before
//! ped-10) and shows only the orders that change when asked; the executions list filters by
//! date; the commission table as of a moment downloads whole.

use std::time::Duration;

use fantoccini::Locator;
use testkit::chromedriver::ChromeDriver;
use testkit::sink::Behavior;

use super::browser::{click_then_read, log_in, open_browser};
use super::*;

const ORDERS: i64 = 12;

/// Types `what` into the header's search box and submits it; returns the page's heading.
async fn search(browser: &fantoccini::Client, what: &str) -> String {
    let field = browser.find(Locator::Id("busca")).await.unwrap();
    field.send_keys(what).await.unwrap();
    click_then_read(
        browser,
        Locator::Css("form.search button"),
        Locator::Css("main h1"),
    )
    .await
}

async fn texts(browser: &fantoccini::Client, css: &str) -> Vec<String> {
    let mut out = Vec::new();
    for e in browser.find_all(Locator::Css(css)).await.unwrap() {
        out.push(e.text().await.unwrap());
    }
    out
}

#[tokio::test]
async fn search_sort_filters_and_the_pace_chart_work_in_a_real_browser() {
    assert!(
        ChromeDriver::installed(),
        "Debian's chromium and chromium-driver are needed"
    );
    let events = paid_orders(ORDERS);
    let db = seeded_db(&events, &[]).await;
    // ped-1 is right already, then paid again at another value and once more at its own: the
    // simulation's diff keeps its row, unchanged in the end.
    sqlx::query(
        "update comissao set valor_centavos = 50, versao_evento = 1 where pedido_id = 'ped-1'",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    insert(
        &db.pool,
        &[
            paid(101, "ped-1", 2, 2000, 5.0),
            paid(102, "ped-1", 3, 1000, 5.0),
        ],
    )
    .await;
    // Slow enough that the run publishes its pace a few times (every 2 s).
    let provider = sink(Behavior {
        delay: Duration::from_millis(500),
        ..Behavior::default()
    })
    .await;
    let spec = JobSpec {
        concurrency: 1,
        batch_size: 3,
        ..JobSpec::default()
    };
    let jobs = jobs_dir(&provider.url(), &spec);
    run_job(&db, jobs.path(), JOB, Some(true), false)
        .await
        .expect("the simulation");
    run_job(&db, jobs.path(), JOB, Some(false), false)
        .await
        .expect("the run");
    add_user(&db.url, jobs.path(), FINANCE, "finance").await;
    let console = ConsoleProc::start(&db.url, jobs.path(), &[]).await;
    let driver = ChromeDriver::start().expect("chromedriver starts");
    let browser = open_browser(&driver).await;
    log_in(&browser, &console, FINANCE).await;

    let order_page = search(&browser, "ped-7").await;
    let key_page = search(&browser, &key(&events[2])).await;
    let key_url = browser.current_url().await.unwrap();
    let run_page = search(&browser, JOB).await;
    let chart_lines = browser
        .find_all(Locator::Css("svg#pace-chart polyline"))
        .await
        .unwrap()
        .len();
    browser
        .goto(&console.url(&format!("/executions/{JOB}:simulacao")))
        .await
        .unwrap();
    let diff_ids = texts(&browser, "#diff tbody td:first-child").await;
    browser
        .find(Locator::Id("only-changed"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    click_then_read(
        &browser,
        Locator::Css("#diff form.filter button"),
        Locator::Id("diff-count"),
    )
    .await;
    let changed_ids = texts(&browser, "#diff tbody td:first-child").await;
    let nothing = search(&browser, "ped-nenhum").await;
    let nothing_said = browser
        .find(Locator::Id("search-none"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let today = chrono::Utc::now().date_naive();
    browser
        .goto(&console.url(&format!("/?desde={today}&ordem=antigas")))
        .await
        .unwrap();
    let listed_today = texts(&browser, "#executions tbody tr").await.len();
    browser
        .goto(&console.url(&format!("/?desde={}", today.succ_opt().unwrap())))
        .await
        .unwrap();
    let listed_tomorrow = browser
        .find_all(Locator::Css("#executions tbody tr"))
        .await
        .unwrap()
        .len();
    browser.close().await.unwrap();

    assert!(order_page.contains("ped-7"), "{order_page}");
    assert!(key_page.contains("ped-3"), "{key_page}");
    assert_eq!(key_url.fragment(), Some("efeitos"));
    assert!(run_page.contains(JOB), "{run_page}");
    assert_eq!(chart_lines, 2, "events/s and effects/s are drawn");
    let natural: Vec<String> = (1..=ORDERS).map(|i| format!("ped-{i}")).collect();
    assert_eq!(diff_ids, natural, "ids sorted as people read them");
    assert_eq!(
        changed_ids,
        natural[1..].to_vec(),
        "only the orders that change"
    );
    assert!(
        nothing.contains("Busca") && nothing_said.contains("ped-nenhum"),
        "{nothing_said}"
    );
    assert_eq!(
        (listed_today, listed_tomorrow),
        (2, 0),
        "the simulation and the run, today"
    );
}

/// `/historico`: the table as of now has every order; its CSV download holds every row, equal to
/// the table itself.
#[tokio::test]
async fn the_table_as_of_a_moment_is_shown_and_downloads_whole() {
    let events = paid_orders(ORDERS);
    let db = seeded_db(&events, &[]).await;
    let jobs = jobs_dir("http://127.0.0.1:9/", &JobSpec::default());
    add_user(&db.url, jobs.path(), FINANCE, "finance").await;
    let console = ConsoleProc::start(&db.url, jobs.path(), &[]).await;
    let finance = Client::logged_in(&console, FINANCE).await;
    let moment = (chrono::Utc::now() + chrono::Duration::days(1))
        .format("%Y-%m-%d")
        .to_string();

    let page = finance.get(&format!("/historico?em={moment}")).await;
    let csv = finance
        .get(&format!("/historico?em={moment}&formato=csv"))
        .await;

    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        page.body.contains(&format!("{ORDERS} pedidos")),
        "{}",
        page.body
    );
    assert_eq!(csv.status, 200);
    let lines: Vec<&str> = csv.body.trim_end().split("\r\n").collect();
    assert_eq!(
        lines[0],
        "\u{feff}pedido_id,valor_centavos,versao_evento,ocorrido_em"
    );
    let mut ids: Vec<String> = lines[1..]
        .iter()
        .map(|l| l.split(',').next().unwrap().to_string())
        .collect();
    ids.sort();
    let mut expected: Vec<String> = events.iter().map(|e| e.pedido_id.clone()).collect();
    expected.sort();
    assert_eq!(ids, expected);
}
