//! The live consumer's page, `/executions/ao-vivo`: where it stands while it runs, and an
//! answer (not a 404) when the `ao-vivo` keys come from another consumer.

use super::*;

#[tokio::test]
async fn the_live_consumers_page_shows_its_position_the_last_event_and_its_keys() {
    let db = TestDb::new().await;
    let provider = sink(dedup()).await;
    let jobs = jobs_dir(&provider.url(), &JobSpec::default());
    std::fs::write(
        jobs.path().join("live.yaml"),
        "name: live\nkind: live\neffects:\n  notificar-vendedor: { mode: apply, on_failure: release }\n",
    )
    .unwrap();
    // A transaction opened elsewhere before the events were archived, and left open, holds the
    // consumer's safe horizon (its stored checkpoint) back; the page still says which event it
    // applied last.
    let mut holder = db.pool.begin().await.unwrap();
    sqlx::query("select pg_current_xact_id()")
        .execute(&mut *holder)
        .await
        .unwrap();
    insert(&db.pool, &paid_orders(3)).await;
    let mut consumer = command(&db.url, jobs.path())
        .args(["consume", "--from-start"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn consume");
    wait_until("the three events are applied", || async {
        replay_ledger_core::tables::execution::load(&db.pool, "ao-vivo")
            .await
            .unwrap()
            .is_some_and(|e| e.summary.events_read == 3)
    })
    .await;
    add_user(&db.url, jobs.path(), "vera@example.com", "viewer").await;
    let console = ConsoleProc::start(&db.url, jobs.path(), &[]).await;
    let viewer = Client::logged_in(&console, "vera@example.com").await;

    let page = viewer.get("/executions/ao-vivo").await;
    kill9(&mut consumer).await;
    holder.rollback().await.unwrap();

    assert_eq!(page.status, 200, "{}", page.body);
    for shown in [
        "Consumidor ao vivo",
        "em andamento",
        "antes do primeiro evento",
        "Eventos arquivados ainda não aplicados",
        "Último evento aplicado: <code>evt-3</code>",
        "href=\"/pedidos/ped-3\"",
        "<th scope=\"row\">concluido</th><td>3</td>",
        "http-equiv=\"refresh\"",
    ] {
        assert!(page.body.contains(shown), "{shown} in {}", page.body);
    }
}

#[tokio::test]
async fn keys_of_another_live_consumer_lead_to_a_page_that_says_so() {
    let s = simulated().await;
    already_sent(&s.db.pool, &[&paid_orders(10)[0]]).await;
    let (_console, viewer) = signed_in(&s, "vera@example.com", "viewer").await;

    let page = viewer.get("/executions/ao-vivo").await;

    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        page.body.contains("nunca rodou neste banco"),
        "{}",
        page.body
    );
    assert!(
        page.body
            .contains("<th scope=\"row\">concluido</th><td>1</td>"),
        "{}",
        page.body
    );
}
