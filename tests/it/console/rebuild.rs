//! The blue-green rebuild in the console: finance reads where the rebuild stands, the comparison
//! and the orders that differ, downloads the diff, and approves the swap of the comparison it was
//! shown, bound to its fingerprint. The swap itself is the command line's (`replay-ledger
//! rebuild`), which swaps only what was approved.

use super::*;

const PAGE: &str = "/reconstrucao";
const APPROVE: &str = "/reconstrucao/aprovar";

/// `replay-ledger rebuild` over the simulated database: built, followed, compared.
async fn rebuild(s: &Simulated) -> String {
    let out = run_bin(&s.db.url, s.jobs.path(), &["rebuild"]).await;
    assert_success(&out, "rebuild");
    stdout(&out)
}

fn form_of(page: &Answer) -> Vec<(&'static str, String)> {
    form_fields(page, &["csrf_token", "impressao"])
}

async fn post_form(client: &Client, form: &[(&'static str, String)]) -> Answer {
    post_fields(client, APPROVE, form).await
}

/// Who approved which rebuild, in order.
async fn approvals(db: &TestDb) -> Vec<(String, String)> {
    sqlx::query_as("select execucao_id, aprovado_por from reprocessamento_aprovacao order by id")
        .fetch_all(&db.pool)
        .await
        .expect("read the approvals")
}

#[tokio::test]
async fn finance_approves_the_comparison_it_was_shown_and_the_next_rebuild_swaps_exactly_that() {
    let s = simulated().await;
    let compared = rebuild(&s).await;
    assert!(compared.contains("10 orders differ"), "{compared}");
    let (_console, finance) = signed_in(&s, FINANCE, "finance").await;

    let page = finance.get(PAGE).await;
    let csv = finance.get("/reconstrucao/diff.csv").await;
    let shown = form_of(&page);
    // A writer changes an order after the page was read: the next rebuild follows it, and the
    // comparison (its fingerprint) is no longer the one shown.
    sqlx::query(
        "update comissao set valor_centavos = valor_centavos + 1 where pedido_id = 'ped-1'",
    )
    .execute(&s.db.pool)
    .await
    .unwrap();
    let again = rebuild(&s).await;
    let stale = post_form(&finance, &shown).await;
    let after_stale = approvals(&s.db).await;
    let fresh = post_form(&finance, &form_of(&finance.get(PAGE).await)).await;
    let approved_page = finance.get(PAGE).await;
    let swapped = rebuild(&s).await;

    assert_eq!(page.status, 200, "{}", page.body);
    for shown_on_page in [
        "Pedidos diferentes",
        "Voltam a uma versão mais antiga",
        "Linhas apagadas (pedido sem evento aceito)",
        "voltam a uma versão mais antiga e",
        "Checksum de comissao_nova",
        "ped-1",
        "Aprovar a troca",
    ] {
        assert!(
            page.body.contains(shown_on_page),
            "{shown_on_page}: {}",
            page.body
        );
    }
    assert_eq!(csv.status, 200);
    assert!(
        csv.body.starts_with(
            "\u{feff}pedido_id,antes,versao_antes,depois,versao_depois,diferenca,motivo"
        ),
        "the rebuild's diff carries both versions and why: {}",
        csv.body
    );
    assert_eq!(
        csv.body.lines().count(),
        11,
        "a header and the 10 orders: {}",
        csv.body
    );
    assert!(again.contains("fingerprint"), "{again}");
    assert_eq!(stale.status, 409, "{}", stale.body);
    assert!(
        stale
            .body
            .contains("A comparação mudou desde que você a abriu"),
        "{}",
        stale.body
    );
    assert!(after_stale.is_empty(), "nothing recorded: {after_stale:?}");
    assert_eq!(fresh.status, 303, "{}", fresh.body);
    let recorded = approvals(&s.db).await;
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    assert_eq!(recorded[0].1, format!("console:{FINANCE}"));
    assert!(
        recorded[0].0.starts_with("reconstrucao-comissao-"),
        "{recorded:?}"
    );
    assert!(
        approved_page.body.contains("Aprovada (aprovação"),
        "{}",
        approved_page.body
    );
    assert!(
        swapped.contains(&format!("by console:{FINANCE}")) && swapped.contains("swapped in"),
        "{swapped}"
    );
    let audited = audit(&s.db).await;
    assert!(
        audited
            .iter()
            .any(|(who, action, _)| who == &format!("console:{FINANCE}") && action == "aprovacao"),
        "{audited:?}"
    );
}

#[tokio::test]
async fn only_finance_approves_a_swap_and_a_forged_fingerprint_approves_nothing() {
    let s = simulated().await;
    rebuild(&s).await;
    add_user(&s.db.url, s.jobs.path(), "rui@operacao.example", "operator").await;
    let (console, finance) = signed_in(&s, FINANCE, "finance").await;
    let operator = Client::logged_in(&console, "rui@operacao.example").await;

    let operator_page = operator.get(PAGE).await;
    let operators_post = operator
        .post(
            APPROVE,
            &[
                (
                    "csrf_token",
                    &operator.get(PAGE).await.field("csrf_token").unwrap(),
                ),
                ("impressao", &form_of(&finance.get(PAGE).await)[1].1),
            ],
        )
        .await;
    let mut forged = form_of(&finance.get(PAGE).await);
    forged[1].1 = "#000000000000".into();
    let forged_post = post_form(&finance, &forged).await;
    let without_csrf = finance
        .post(APPROVE, &[("impressao", forged[1].1.as_str())])
        .await;

    assert_eq!(operator_page.status, 200);
    assert!(
        operator_page
            .body
            .contains("Só uma conta de finanças aprova."),
        "{}",
        operator_page.body
    );
    assert!(
        operator_page.field("impressao").is_none(),
        "no form for an operator"
    );
    assert_eq!(operators_post.status, 403, "{}", operators_post.body);
    assert_eq!(forged_post.status, 409, "{}", forged_post.body);
    assert_eq!(without_csrf.status, 403, "{}", without_csrf.body);
    assert!(approvals(&s.db).await.is_empty());
}
