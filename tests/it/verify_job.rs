//! A scheduled `kind: verify` job in `serve`, with a real SMTP server on loopback: one e-mail per
//! run when the lookback days differ from the archive (each run's key settled `concluido` in the
//! ledger), none when they are right; `/metrics` shows what the last run found.

use chrono::{Duration, Utc};

use crate::helpers::*;
use crate::report::smtp::{parse, Smtp};
use crate::serve::Serve;

const JOB: &str = "verify-daily";

/// Three orders paid two days ago (UTC), their rows right, a jobs dir with the verify job
/// (every 2 s, 3 days back), and the loopback SMTP server.
async fn setup() -> (TestDb, tempfile::TempDir, Smtp) {
    let db = TestDb::new().await;
    let when = Utc::now() - Duration::days(2);
    let events: Vec<_> = (1..=3)
        .map(|i| replay_ledger_core::domain::Event {
            ocorrido_em: when + Duration::seconds(i),
            ..paid(i, &format!("ped-{i}"), 1, 1000 * i, 5.0)
        })
        .collect();
    insert(&db.pool, &events).await;
    sqlx::query("insert into comissao (pedido_id, valor_centavos, versao_evento) values ('ped-1', 50, 1), ('ped-2', 100, 1), ('ped-3', 150, 1)")
        .execute(&db.pool)
        .await
        .unwrap();
    let jobs = jobs_dir("http://127.0.0.1:9/", &JobSpec::default());
    std::fs::write(
        jobs.path().join("verify.yaml"),
        format!("name: {JOB}\nkind: verify\nschedule: \"*/2 * * * * *\"\nlookback: 3d\nreport_to: [financeiro@example.com]\n"),
    )
    .unwrap();
    (db, jobs, Smtp::start("store").await)
}

fn serve(db: &TestDb, jobs: &tempfile::TempDir, smtp: &Smtp) -> Serve {
    Serve::start_with(&db.url, jobs.path(), "serve", |cmd| {
        cmd.env("SMTP_URL", smtp.url())
            .env("REPORT_FROM", "relatorios@example.com")
            .env("CONSOLE_URL", "https://console.example.com");
    })
}

/// Waits until `/metrics` says a verify run ended, and returns the exposition.
async fn after_a_run(serve: &Serve) -> String {
    let wanted = format!("replay_ledger_verify_last_run_timestamp_seconds{{job=\"{JOB}\"}}");
    let ran = eventually(PROCESS_LIMIT, || async {
        let scraped = serve.get("/metrics").await;
        scraped.is_some_and(|(_, body)| body.contains(&wanted))
    })
    .await;
    assert!(
        ran,
        "no verify run within {PROCESS_LIMIT:?}:\n{}",
        serve.log()
    );
    serve
        .get("/metrics")
        .await
        .map(|(_, body)| body)
        .unwrap_or_default()
}

#[tokio::test]
async fn a_verify_job_mails_finance_once_per_run_that_finds_differences() {
    let (db, jobs, smtp) = setup().await;
    sqlx::query("delete from comissao where pedido_id = 'ped-2'")
        .execute(&db.pool)
        .await
        .unwrap();
    let serve = serve(&db, &jobs, &smtp);

    let metrics = after_a_run(&serve).await;
    wait_until("the first mail arrives", || async {
        !smtp.messages().is_empty()
    })
    .await;
    let (status, _) = serve.terminate().await;

    assert!(status.success());
    assert!(
        metrics.contains(&format!(
            "replay_ledger_verify_orders_missing{{job=\"{JOB}\"}} 1"
        )),
        "{metrics}"
    );
    let sent: Vec<String> = sqlx::query_scalar(
        "select chave from efeito_aplicado where tipo_efeito = 'email' and estado = 'concluido' order by chave",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap();
    let messages = smtp.messages();
    assert_eq!(messages.len(), sent.len(), "one mail per run: {sent:?}");
    assert!(
        sent.iter()
            .all(|k| k.starts_with(&format!("{JOB}:verify-"))),
        "{sent:?}"
    );
    let mail = parse(&messages[0]);
    let day = (Utc::now() - Duration::days(2)).date_naive();
    assert!(
        mail.text.contains(&format!(
            "{day}: 3 pedido(s), 0 com valor ou versão errada, 1 sem comissão, diferença +R$ 1,00"
        )),
        "{}",
        mail.text
    );
    assert!(
        mail.text
            .contains(&format!("job sugerido: reconcile-{day}")),
        "{}",
        mail.text
    );
    assert!(
        mail.text.contains(&format!(
            "https://console.example.com/executions/reconcile-{day}"
        )),
        "{}",
        mail.text
    );
    assert_eq!(mail.to, "financeiro@example.com");
}

#[tokio::test]
async fn a_verify_job_that_finds_the_days_right_mails_nothing() {
    let (db, jobs, smtp) = setup().await;
    let serve = serve(&db, &jobs, &smtp);

    let metrics = after_a_run(&serve).await;
    let (status, _) = serve.terminate().await;

    assert!(status.success());
    assert!(
        metrics.contains(&format!(
            "replay_ledger_verify_orders_wrong{{job=\"{JOB}\"}} 0"
        )),
        "{metrics}"
    );
    assert!(smtp.messages().is_empty());
}

#[tokio::test]
async fn a_verify_jobs_mail_says_how_many_rows_no_replay_can_fix_and_what_to_do() {
    let (db, jobs, smtp) = setup().await;
    sqlx::query("delete from comissao where pedido_id = 'ped-2'")
        .execute(&db.pool)
        .await
        .unwrap();
    sqlx::query("update comissao set versao_evento = 5 where pedido_id = 'ped-3'")
        .execute(&db.pool)
        .await
        .unwrap();
    let serve = serve(&db, &jobs, &smtp);

    let metrics = after_a_run(&serve).await;
    wait_until("the first mail arrives", || async {
        !smtp.messages().is_empty()
    })
    .await;
    serve.terminate().await;

    assert!(
        metrics.contains(&format!(
            "replay_ledger_verify_orders_wrong{{job=\"{JOB}\"}} 0"
        )),
        "a row ahead of the archive is not a replay's difference: {metrics}"
    );
    let mail = parse(&smtp.messages()[0]);
    assert!(
        mail.text.contains(
            "1 pedido(s) com linha em comissao que nenhum replay corrige (versão mais nova que o arquivo"
        ),
        "{}",
        mail.text
    );
    assert!(
        mail.text
            .contains("Confira o log de origem ou corrija a linha à mão"),
        "{}",
        mail.text
    );
}

/// `propose: false`: a verify job beside a `kind: live` job (whose policy proposals take) mails
/// the suggested job as before and proposes nothing: no proposal, no simulation.
#[tokio::test]
async fn a_verify_job_with_propose_false_mails_the_suggested_job_and_proposes_nothing() {
    let (db, jobs, smtp) = setup().await;
    sqlx::query("delete from comissao where pedido_id = 'ped-2'")
        .execute(&db.pool)
        .await
        .unwrap();
    std::fs::write(
        jobs.path().join("live.yaml"),
        "name: live\nkind: live\neffects:\n  notificar-vendedor: { mode: suppress }\n",
    )
    .unwrap();
    std::fs::write(
        jobs.path().join("verify.yaml"),
        format!("name: {JOB}\nkind: verify\nschedule: \"*/2 * * * * *\"\nlookback: 3d\nreport_to: [financeiro@example.com]\npropose: false\n"),
    )
    .unwrap();
    let serve = serve(&db, &jobs, &smtp);

    after_a_run(&serve).await;
    wait_until("the first mail arrives", || async {
        !smtp.messages().is_empty()
    })
    .await;
    serve.terminate().await;

    let mail = parse(&smtp.messages()[0]);
    let day = (Utc::now() - Duration::days(2)).date_naive();
    assert!(
        mail.text
            .contains(&format!("job sugerido: reconcile-{day}")),
        "{}",
        mail.text
    );
    let proposals: i64 = sqlx::query_scalar("select count(*) from job_proposto")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    let simulations: i64 = sqlx::query_scalar(
        "select count(*) from reprocessamento_execucao where modo = 'simulacao'",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!((proposals, simulations), (0, 0));
}
