//! A running execution's page moves inside a batch: the pace its runner publishes (effect calls
//! made, effects/s, ETA, the rate limit that holds it back), not only the tallies that move when
//! a batch settles.

use std::time::Duration;

use super::*;

/// One batch of 80 orders whose provider answers each call in 200 ms, 2 at a time: the batch
/// takes seconds, and the page is read while it runs. `extra_effect` is added to the effect type.
async fn page_during_a_slow_batch(extra_effect: &str) -> Answer {
    let db = TestDb::new().await;
    insert(&db.pool, &paid_orders(80)).await;
    let provider = sink(testkit::sink::Behavior {
        delay: Duration::from_millis(200),
        ..dedup()
    })
    .await;
    let spec = JobSpec {
        concurrency: 2,
        batch_size: 1000,
        ..JobSpec::default()
    };
    let jobs = jobs_dir(&provider.url(), &spec);
    let effects = jobs.path().join("effects.yaml");
    let yaml = std::fs::read_to_string(&effects).unwrap() + extra_effect;
    std::fs::write(&effects, yaml).unwrap();
    add_user(&db.url, jobs.path(), "vera@example.com", "viewer").await;
    let console = ConsoleProc::start(&db.url, jobs.path(), &[]).await;
    let viewer = Client::logged_in(&console, "vera@example.com").await;
    let mut run = spawn_run(&db.url, jobs.path(), JOB);
    wait_until(
        "the runner publishes calls made inside the batch",
        || async {
            let calls: Option<i64> = sqlx::query_scalar(
                "select chamadas from reprocessamento_progresso where execucao_id = $1",
            )
            .bind(JOB)
            .fetch_optional(&db.pool)
            .await
            .unwrap();
            calls.is_some_and(|c| c > 0)
        },
    )
    .await;
    let page = viewer.get(&format!("/executions/{JOB}")).await;
    kill9(&mut run).await;
    page
}

#[tokio::test]
async fn a_running_executions_page_shows_calls_made_inside_a_batch_and_the_pace() {
    let page = page_during_a_slow_batch("").await;

    assert_eq!(page.status, 200, "{}", page.body);
    for shown in [
        "Ritmo agora",
        "<th scope=\"row\">Eventos de lotes assentados</th><td>0 de 80</td>",
        "Chamadas de efeito feitas nesta passagem",
        "Efeitos/s",
        "Tempo restante estimado",
    ] {
        assert!(page.body.contains(shown), "{shown} in {}", page.body);
    }
    assert!(
        !page
            .body
            .contains("<th scope=\"row\">Chamadas de efeito feitas nesta passagem (andam dentro do lote)</th><td>0</td>"),
        "calls made inside the batch are counted: {}",
        page.body
    );
}

#[tokio::test]
async fn a_run_held_back_by_a_rate_limit_says_so_on_its_page() {
    let page = page_during_a_slow_batch("  rate_per_second: 3\n").await;

    assert!(
        page.body.contains(
            "Contido pelo limite de taxa (rate_per_second) de <code>notificar-vendedor</code>"
        ),
        "{}",
        page.body
    );
}
