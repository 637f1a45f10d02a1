//! The order's page as of a moment (`/pedidos/{id}?as_of=`): what the table would have
//! said then, as `explain --as-of` tells it.

use super::*;
use crate::history::archived;

#[tokio::test]
async fn the_order_page_as_of_a_moment_shows_the_value_the_archive_implied_then() {
    let (db, jobs, _) = archived().await;
    add_user(&db.url, jobs.path(), "vera@example.com", "viewer").await;
    let console = ConsoleProc::start(&db.url, jobs.path(), &[]).await;
    let viewer = Client::logged_in(&console, "vera@example.com").await;

    let then = viewer
        .get("/pedidos/ped-b?as_of=2026-10-12T08:00:00Z")
        .await;
    let now = viewer.get("/pedidos/ped-b").await;

    assert_eq!(then.status, 200, "{}", then.body);
    // v3 (50,000 × 2 %) had occurred by then; v2, archived later, had not.
    assert!(
        then.body.contains("Esperada pelo arquivo em"),
        "{}",
        then.body
    );
    assert!(then.body.contains("R$ 10,00"), "{}", then.body);
    assert!(!then.body.contains("evt-6"), "{}", then.body);
    assert!(now.body.contains("evt-6"), "{}", now.body);
}

#[tokio::test]
async fn an_order_page_asked_as_of_a_moment_that_cannot_be_read_is_400() {
    let (db, jobs, _) = archived().await;
    add_user(&db.url, jobs.path(), "vera@example.com", "viewer").await;
    let console = ConsoleProc::start(&db.url, jobs.path(), &[]).await;
    let viewer = Client::logged_in(&console, "vera@example.com").await;

    let page = viewer.get("/pedidos/ped-b?as_of=ontem").await;

    assert_eq!(page.status, 400, "{}", page.body);
}

#[tokio::test]
async fn a_candidate_rules_simulation_shows_its_rule_and_diff_the_way_finance_reads_diffs() {
    use crate::candidate_rule::{today, CANDIDATE};
    let (db, jobs) = today("teto-10pct").await;
    assert_success(
        &run_bin_within(&db.url, jobs.path(), &["run", CANDIDATE]).await,
        "the candidate's simulation",
    );
    add_user(&db.url, jobs.path(), "vera@example.com", "viewer").await;
    let console = ConsoleProc::start(&db.url, jobs.path(), &[]).await;
    let viewer = Client::logged_in(&console, "vera@example.com").await;

    let page = viewer
        .get(&format!("/executions/{CANDIDATE}:simulacao"))
        .await;
    let csv = viewer
        .get(&format!("/executions/{CANDIDATE}:simulacao/diff.csv"))
        .await;

    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("teto-10pct/1"), "{}", page.body);
    assert_eq!(csv.status, 200, "{}", csv.body);
    for row in [
        "ped-1,1500,1000,-500",
        "ped-3,6000,3000,-3000",
        "ped-4,2500,1000,-1500",
    ] {
        assert!(csv.body.contains(row), "{row} not in:\n{}", csv.body);
    }
}
