//! The order's page (`/pedidos/{id}`) shows each event's inputs and says why an order is
//! inconsistent; at 390 px it is no wider than the phone.

use fantoccini::Locator;
use testkit::chromedriver::ChromeDriver;

use super::browser::{log_in, open_browser, screenshot};
use super::*;
use crate::explain::multi_version_order;
use crate::explain_inputs::two_shapes_and_a_row_ahead;

#[tokio::test]
async fn the_order_page_shows_each_events_inputs_and_why_the_order_is_inconsistent() {
    let (db, jobs) = two_shapes_and_a_row_ahead().await;
    add_user(&db.url, jobs.path(), "vera@example.com", "viewer").await;
    let console = ConsoleProc::start(&db.url, jobs.path(), &[]).await;
    let viewer = Client::logged_in(&console, "vera@example.com").await;

    let page = viewer.get("/pedidos/ped-7").await;

    assert_eq!(page.status, 200, "{}", page.body);
    for text in [
        "R$ 100,00 (valorCentavos 10000) × 5.0 %",
        "formato atual",
        "valor 159.90 → R$ 159,90 (valorCentavos 15990) × 5 %",
        "formato antigo (valor em reais), convertido na leitura",
        "calcularComissao/2",
        "inconsistente",
        "Por que está inconsistente: versão 3 na tabela, o arquivo só tem a versão 2",
    ] {
        assert!(
            page.body.contains(text),
            "{text} not on the page:\n{}",
            page.body
        );
    }
}

#[tokio::test]
async fn the_order_page_of_a_corrected_multi_version_order_fits_a_390_px_phone() {
    assert!(
        ChromeDriver::installed(),
        "Debian's chromium and chromium-driver are needed"
    );
    let (db, jobs) = multi_version_order().await;
    sqlx::query("update comissao set versao_evento = 4 where pedido_id = 'ped-1'")
        .execute(&db.pool)
        .await
        .unwrap();
    add_user(&db.url, jobs.path(), "vera@example.com", "viewer").await;
    let console =
        ConsoleProc::start(&db.url, jobs.path(), &["--timezone", "America/Sao_Paulo"]).await;
    let driver = ChromeDriver::start().expect("chromedriver starts");
    let browser = open_browser(&driver).await;
    log_in(&browser, &console, "vera@example.com").await;
    browser.set_window_size(390, 844).await.unwrap();

    browser.goto(&console.url("/pedidos/ped-1")).await.unwrap();
    browser
        .wait()
        .for_element(Locator::Id("events"))
        .await
        .unwrap();
    let sizes = browser
        .execute("return [document.documentElement.scrollWidth, window.innerWidth, document.querySelectorAll('#events tbody tr, #corrections tbody tr, #effects tbody tr').length]", vec![])
        .await
        .unwrap();
    screenshot(&browser, "phone-pedido").await;
    browser.close().await.unwrap();

    let (scroll, inner, rows) = (
        sizes[0].as_i64().unwrap(),
        sizes[1].as_i64().unwrap(),
        sizes[2].as_i64().unwrap(),
    );
    assert!(inner <= 390, "the window is a phone's: {inner} px");
    assert!(
        rows >= 6,
        "three events, a correction, two effects: {rows} rows"
    );
    assert!(
        scroll <= 390,
        "/pedidos/ped-1 is {scroll} px wide at {inner} px"
    );
}
