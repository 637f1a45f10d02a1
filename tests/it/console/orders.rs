//! An order's page (`/pedidos/{id}`) tells what `explain` tells; review rows show the order and
//! the amount and link to it; one decision covers several keys, after a confirmation, all or
//! none.

use replay_ledger_core::shared::money::brl;

use super::*;
use crate::explain::{explain_json, multi_version_order};

#[tokio::test]
async fn the_order_page_agrees_with_explain_json_for_a_multi_version_order() {
    let (db, jobs) = multi_version_order().await;
    add_user(&db.url, jobs.path(), "vera@example.com", "viewer").await;
    let console = ConsoleProc::start(&db.url, jobs.path(), &[]).await;
    let viewer = Client::logged_in(&console, "vera@example.com").await;

    let page = viewer.get("/pedidos/ped-1").await;
    let story = explain_json(&db, jobs.path(), "ped-1").await;

    assert_eq!(page.status, 200, "{}", page.body);
    let cents = |v: &serde_json::Value| brl(v.as_i64().unwrap());
    let mut expected = vec![
        cents(&story["comissao"]["valor_centavos"]),
        cents(&story["expected_cents"]),
        "consistente".to_string(),
        "rejeitado: payload de pedido.pago invalido".to_string(),
    ];
    for e in story["events"].as_array().unwrap() {
        expected.push(e["id"].as_str().unwrap().to_string());
    }
    for c in story["corrections"].as_array().unwrap() {
        expected.push(format!("/executions/{}", c["execution"].as_str().unwrap()));
        expected.push(cents(&c["before_cents"]));
        expected.push(cents(&c["after_cents"]));
    }
    for e in story["effects"].as_array().unwrap() {
        expected.push(e["key"].as_str().unwrap().to_string());
    }
    assert_eq!(story["effects"].as_array().unwrap().len(), 2);
    for text in &expected {
        assert!(
            page.body.contains(text.as_str()),
            "{text} not on the page:\n{}",
            page.body
        );
    }
    assert_eq!(
        page.body
            .matches("<td class=\"state\">concluido</td>")
            .count(),
        2
    );
}

#[tokio::test]
async fn hostile_order_ids_get_a_4xx_never_a_500() {
    let s = simulated().await;
    add_user(&s.db.url, s.jobs.path(), "vera@example.com", "viewer").await;
    let console = ConsoleProc::start(&s.db.url, s.jobs.path(), &[]).await;
    let viewer = Client::logged_in(&console, "vera@example.com").await;
    let long = format!("/pedidos/{}", "p".repeat(6000));

    for (path, status) in [
        ("/pedidos/ped-404", 404),
        ("/pedidos/ped%00-1", 400),
        ("/pedidos/%00", 400),
        ("/pedidos/%1b%5b2J", 404),
    ] {
        let answer = viewer.get(path).await;
        assert_eq!(answer.status, status, "{path}: {}", answer.body);
    }
    let answer = viewer.get(&long).await;
    assert!(answer.status.is_client_error(), "{}", answer.status);
    assert!(!console.log().contains("ERROR"), "{}", console.log());
}

/// Three `incerto` keys of the simulated window, an operator's session and its CSRF token.
async fn three_uncertain_keys() -> (Simulated, ConsoleProc, Client, [String; 3]) {
    let s = simulated().await;
    let keys = [
        uncertain(&s.db, "evt-2").await,
        uncertain(&s.db, "evt-3").await,
        uncertain(&s.db, "evt-4").await,
    ];
    add_user(&s.db.url, s.jobs.path(), "otto@example.com", "operator").await;
    let console = ConsoleProc::start(&s.db.url, s.jobs.path(), &[]).await;
    let operator = Client::logged_in(&console, "otto@example.com").await;
    (s, console, operator, keys)
}

/// `POST /review/resolve` of one decision for `keys`, with the session's CSRF token.
async fn decide(operator: &Client, keys: &[&str], outcome: &str) -> Answer {
    let csrf = operator.get("/review").await.csrf().unwrap();
    let mut form = vec![("csrf_token", csrf.as_str()), ("outcome", outcome)];
    form.extend(keys.iter().map(|k| ("key", *k)));
    operator.post("/review/resolve", &form).await
}

async fn queued(db: &TestDb) -> Vec<String> {
    sqlx::query_scalar(
        "select chave from efeito_aplicado where reenvio_pedido_em is not null order by chave",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn review_rows_show_the_order_and_the_amount_linked_to_the_orders_page() {
    let (_s, _console, operator, _keys) = three_uncertain_keys().await;

    let page = operator.get("/review").await;

    // evt-3: order ped-3, 5 % of R$ 30,00.
    assert!(
        page.body.contains("<a href=\"/pedidos/ped-3\">ped-3</a>"),
        "{}",
        page.body
    );
    assert!(page.body.contains("R$ 1,50"), "{}", page.body);
}

#[tokio::test]
async fn one_decision_resolves_several_keys_after_a_confirmation() {
    let (s, _console, operator, keys) = three_uncertain_keys().await;

    let confirm = operator
        .get(&format!(
            "/review/confirm?key={}&key={}&outcome=not-sent",
            keys[0], keys[2]
        ))
        .await;
    let nothing_yet = queued(&s.db).await;
    let decided = decide(&operator, &[&keys[0], &keys[2]], "not-sent").await;
    let after = operator.get("/review").await;

    assert_eq!(confirm.status, 200, "{}", confirm.body);
    for key in [&keys[0], &keys[2]] {
        assert!(
            confirm
                .body
                .contains(&format!("name=\"key\" value=\"{key}\"")),
            "{}",
            confirm.body
        );
    }
    assert!(!confirm.body.contains(&format!("value=\"{}\"", keys[1])));
    assert!(nothing_yet.is_empty(), "the confirmation changes nothing");
    assert_eq!(decided.status, 303, "{}", decided.body);
    assert_eq!(queued(&s.db).await, [keys[0].clone(), keys[2].clone()]);
    let pending = "<td class=\"state\">reenvio pendente</td>";
    assert_eq!(after.body.matches(pending).count(), 2, "{}", after.body);
}

#[tokio::test]
async fn a_decision_with_a_key_that_cannot_be_resolved_resolves_none() {
    let (s, _console, operator, keys) = three_uncertain_keys().await;

    let refused = decide(
        &operator,
        &[&keys[0], "evt-404:notificar-vendedor"],
        "not-sent",
    )
    .await;

    assert_eq!(refused.status, 404, "{}", refused.body);
    assert!(queued(&s.db).await.is_empty());
    assert_eq!(keys_in_state(&s.db.pool, "incerto").await.len(), 3);
}

#[tokio::test]
async fn a_decision_naming_a_key_with_a_nul_byte_is_refused_with_400() {
    let (s, console, operator, keys) = three_uncertain_keys().await;

    let refused = decide(&operator, &[&keys[0], "evt-1\0:notificar-vendedor"], "sent").await;

    assert_eq!(refused.status, 400, "{}", refused.body);
    assert_eq!(keys_in_state(&s.db.pool, "incerto").await.len(), 3);
    assert!(!console.log().contains("ERROR"), "{}", console.log());
}

#[tokio::test]
async fn every_diff_row_links_to_its_orders_page() {
    let s = simulated().await;
    add_user(&s.db.url, s.jobs.path(), "vera@example.com", "viewer").await;
    let console = ConsoleProc::start(&s.db.url, s.jobs.path(), &[]).await;
    let viewer = Client::logged_in(&console, "vera@example.com").await;

    let page = viewer.get(&format!("/executions/{JOB}:simulacao")).await;
    let order = viewer.get("/pedidos/ped-7").await;

    assert_eq!(page.status, 200);
    for i in 1..=10 {
        let link = format!("<a href=\"/pedidos/ped-{i}\">ped-{i}</a>");
        assert!(page.body.contains(&link), "{link} not on the page");
    }
    assert_eq!(order.status, 200, "{}", order.body);
    assert!(order.body.contains("evt-7"), "{}", order.body);
}
