//! An approval binds what finance saw: the confirmation's form carries the simulation pass and
//! the fingerprint it showed, and the post records an approval only of exactly that pass and
//! that fingerprint, once. The confirmation says what approving will send.

use super::*;

const CONFIRM: &str = "/executions/replay-2026-10-14-v2:simulacao/approve";

fn form_of(page: &Answer) -> Vec<(&'static str, String)> {
    form_fields(page, &["csrf_token", "pass", "fingerprint"])
}

async fn post_form(client: &Client, form: &[(&'static str, String)]) -> Answer {
    post_fields(client, CONFIRM, form).await
}

async fn approvals(db: &TestDb) -> Vec<i32> {
    sqlx::query_scalar("select simulacao_passagem from reprocessamento_aprovacao order by id")
        .fetch_all(&db.pool)
        .await
        .expect("read the approvals")
}

#[tokio::test]
async fn a_confirmation_opened_before_the_simulation_ran_again_is_refused_with_409() {
    let s = simulated().await;
    let (_console, finance) = signed_in(&s, FINANCE, "finance").await;
    let seen = finance.get(CONFIRM).await;
    // An order lands in the window and the simulation is run again: pass 2, another diff.
    insert(&s.db.pool, &[paid(11, "ped-late", 1, 90_000_000, 1.0)]).await;
    run_job(&s.db, s.jobs.path(), JOB, Some(true), true)
        .await
        .expect("the new simulation");

    let stale = post_form(&finance, &form_of(&seen)).await;
    let recorded_after_stale = approvals(&s.db).await;
    let fresh = post_form(&finance, &form_of(&finance.get(CONFIRM).await)).await;

    assert_eq!(stale.status, 409, "{}", stale.body);
    assert!(
        stale
            .body
            .contains("A simulação mudou desde que você a abriu"),
        "{}",
        stale.body
    );
    assert_eq!(recorded_after_stale, Vec::<i32>::new());
    assert_eq!(fresh.status, 303, "{}", fresh.body);
    assert_eq!(approvals(&s.db).await, vec![2]);
}

#[tokio::test]
async fn a_fingerprint_other_than_the_one_shown_is_refused_with_409() {
    let s = simulated().await;
    let (_console, finance) = signed_in(&s, FINANCE, "finance").await;
    let mut form = form_of(&finance.get(CONFIRM).await);
    form[2].1 = "#000000000000".into();

    let answer = post_form(&finance, &form).await;

    assert_eq!(answer.status, 409, "{}", answer.body);
    assert!(approvals(&s.db).await.is_empty());
}

#[tokio::test]
async fn the_same_form_posted_again_records_no_second_approval() {
    let s = simulated().await;
    let (_console, finance) = signed_in(&s, FINANCE, "finance").await;
    let form = form_of(&finance.get(CONFIRM).await);

    let first = post_form(&finance, &form).await;
    let again = post_form(&finance, &form).await;
    let third = post_form(&finance, &form).await;

    assert_eq!(first.status, 303, "{}", first.body);
    assert_eq!(
        (again.status.as_u16(), third.status.as_u16()),
        (409, 409),
        "{}",
        again.body
    );
    assert!(again.body.contains("já aprovada"), "{}", again.body);
    assert_eq!(approvals(&s.db).await, vec![1]);
}

#[tokio::test]
async fn two_approvals_of_one_form_posted_at_once_record_one() {
    let s = simulated().await;
    let (_console, finance) = signed_in(&s, FINANCE, "finance").await;
    let form = form_of(&finance.get(CONFIRM).await);

    let (a, b) = tokio::join!(post_form(&finance, &form), post_form(&finance, &form));

    let mut statuses = [a.status.as_u16(), b.status.as_u16()];
    statuses.sort_unstable();
    assert_eq!(statuses, [303, 409], "{} / {}", a.body, b.body);
    assert_eq!(approvals(&s.db).await, vec![1]);
}

#[tokio::test]
async fn the_confirmation_says_how_many_messages_approving_will_send_and_lists_them() {
    let s = simulated().await;
    already_sent(&s.db.pool, &[&paid_orders(10)[0]]).await;
    let (_console, finance) = signed_in(&s, FINANCE, "finance").await;

    let page = finance.get(CONFIRM).await;
    let csv = finance
        .get("/executions/replay-2026-10-14-v2:simulacao/effects.csv")
        .await;

    assert!(
        page.body.contains("9 mensagens de notificar-vendedor"),
        "{}",
        page.body
    );
    assert!(page.body.contains("effects.csv") && page.body.contains("effects.xlsx"));
    assert!(page.body.contains("calcularComissao/2"), "{}", page.body);
    assert_eq!(csv.status, 200, "{}", csv.body);
    let lines: Vec<&str> = csv.body.lines().collect();
    assert_eq!(lines.len(), 10, "a header and 9 keys: {}", csv.body);
    assert!(lines[1..].iter().all(|l| l.contains(":notificar-vendedor")));
    assert!(
        !csv.body.contains("evt-1:notificar-vendedor"),
        "{}",
        csv.body
    );
}

#[tokio::test]
async fn a_scripts_post_without_the_pass_approves_once_and_its_replay_is_refused() {
    let s = simulated().await;
    let (_console, finance) = signed_in(&s, FINANCE, "finance").await;
    let csrf = finance.csrf().await;
    let form = [("csrf_token", csrf.as_str()), ("note", "ok")];

    let first = finance.post(CONFIRM, &form).await;
    let again = finance.post(CONFIRM, &form).await;

    assert_eq!(first.status, 303, "{}", first.body);
    assert_eq!(again.status, 409, "{}", again.body);
    assert_eq!(approvals(&s.db).await, vec![1]);
}
