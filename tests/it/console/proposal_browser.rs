//! From a wrong day to a fixed day without a shell, in a real Chromium: a scheduled verify job in
//! a real `serve` finds a day wrong, proposes its correction (kept in the database: nothing is
//! written into the jobs directory) and runs the proposal's simulation; its e-mail links to that
//! simulation in the console; finance opens the link, approves, starts the real run; `serve`
//! applies it and mails its report; the next verify finds every day right and proposes nothing
//! more.

use chrono::{Duration, Utc};
use fantoccini::Locator;
use testkit::chromedriver::ChromeDriver;
use testkit::sink::Behavior;

use super::browser::{appears, click, click_then_read, log_in, open_browser};
use super::*;
use crate::report::smtp::{parse, Smtp};
use crate::serve::{metrics_sample, Serve};

const VERIFY: &str = "verify-daily";

/// The job files of `dir` with their contents (the processes' logs, which the test helpers keep
/// there, left out).
fn listing(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            let path = e.as_ref().unwrap().path();
            path.extension().is_none_or(|x| x != "log")
        })
        .map(|e| {
            let path = e.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&path).unwrap())
        })
        .collect();
    files.sort();
    files
}

#[tokio::test]
async fn a_day_verify_finds_wrong_is_proposed_simulated_approved_started_reported_and_then_clean() {
    assert!(
        ChromeDriver::installed(),
        "Debian's chromium and chromium-driver are needed"
    );
    // Three orders paid two days ago; the second one's commission never written.
    let db = TestDb::new().await;
    let when = Utc::now() - Duration::days(2);
    let events: Vec<_> = (1..=3)
        .map(|i| replay_ledger_core::domain::Event {
            ocorrido_em: when + Duration::seconds(i),
            ..paid(i, &format!("ped-{i}"), 1, 1000 * i, 5.0)
        })
        .collect();
    insert(&db.pool, &events).await;
    sqlx::query(
        "insert into comissao (pedido_id, valor_centavos, versao_evento) values ('ped-1', 50, 1), ('ped-3', 150, 1)",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    already_sent(&db.pool, &[&events[0], &events[2]]).await;
    let provider = sink(Behavior::default()).await;
    let jobs = jobs_dir(&provider.url(), &JobSpec::default());
    std::fs::write(
        jobs.path().join("live.yaml"),
        "name: live\nkind: live\nbatch_size: 50\neffects:\n  notificar-vendedor: { mode: apply, on_failure: keep }\n",
    )
    .unwrap();
    std::fs::write(
        jobs.path().join("verify.yaml"),
        format!("name: {VERIFY}\nkind: verify\nschedule: \"*/2 * * * * *\"\nlookback: 3d\nreport_to: [financeiro@example.com]\n"),
    )
    .unwrap();
    let files_before = listing(jobs.path());
    add_user(&db.url, jobs.path(), FINANCE, "finance").await;
    let console = ConsoleProc::start(&db.url, jobs.path(), &[]).await;
    let console_url = console.url("");
    let smtp = Smtp::start("store").await;
    let serve = Serve::start_with(&db.url, jobs.path(), "serve", |cmd| {
        cmd.env("SMTP_URL", smtp.url())
            .env("REPORT_FROM", "relatorios@example.com")
            .env("CONSOLE_URL", console_url.trim_end_matches('/'));
    });
    let day = when.date_naive();
    let proposal = format!("reconcile-{day}");
    let simulation = format!("{proposal}:simulacao");

    // The verify's e-mail, once the proposal's simulation is there to approve.
    wait_until("a verify e-mail proposing the day's correction", || async {
        smtp.messages()
            .iter()
            .any(|m| parse(m).text.contains("correção proposta"))
    })
    .await;
    let mail = smtp
        .messages()
        .iter()
        .map(|m| parse(m))
        .find(|m| m.text.contains("correção proposta"))
        .unwrap();
    let link = mail
        .text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Abrir no console: "))
        .expect("a console link")
        .to_string();
    let simulated = execution_state(&db.pool, &simulation).await;

    let driver = ChromeDriver::start().expect("chromedriver starts");
    let browser = open_browser(&driver).await;
    log_in(&browser, &console, FINANCE).await;
    browser.goto(&link).await.unwrap();
    let page = appears(&browser, Locator::Css("main"))
        .await
        .text()
        .await
        .unwrap();
    click(&browser, Locator::Id("approve-link")).await;
    click_then_read(
        &browser,
        Locator::Css("form.approve button[type=submit]"),
        Locator::Id("approved"),
    )
    .await;
    click(&browser, Locator::Id("start-link")).await;
    click(&browser, Locator::Id("confirm-request")).await;
    wait_until("the proposal's real run is applied", || async {
        execution_state(&db.pool, &proposal).await.as_deref() == Some("concluida")
    })
    .await;
    browser.close().await.unwrap();
    wait_until("the real run's report is mailed", || async {
        smtp.messages().iter().any(|m| {
            let m = parse(m);
            !m.subject.starts_with("Verificação") && m.text.contains(&proposal)
        })
    })
    .await;
    // The next verify that ran after the correction finds every day right.
    let applied_at = Utc::now().timestamp() as f64;
    wait_until(
        "a verify after the correction finds the days right",
        || async {
            let metrics = serve.metrics().await;
            let series =
                |name: &str| metrics_sample(&metrics, &format!("{name}{{job=\"{VERIFY}\"}}"));
            series("replay_ledger_verify_last_run_timestamp_seconds")
                .is_some_and(|t| t > applied_at + 1.0)
                && series("replay_ledger_verify_orders_missing") == Some(0.0)
                && series("replay_ledger_verify_effects_missing") == Some(0.0)
        },
    )
    .await;
    let (status, _) = serve.terminate().await;

    assert!(status.success());
    assert_eq!(
        simulated.as_deref(),
        Some("concluida"),
        "simulated before mailing"
    );
    assert!(
        link.ends_with(&format!("/executions/{simulation}")),
        "{link}"
    );
    assert!(
        page.contains(&format!("Correção proposta por {VERIFY}"))
            && page.contains("require_approved_simulation: true"),
        "the proposal's definition is shown: {page}"
    );
    let proposals: Vec<String> = sqlx::query_scalar("select nome from job_proposto")
        .fetch_all(&db.pool)
        .await
        .unwrap();
    assert_eq!(proposals, std::slice::from_ref(&proposal));
    assert_eq!(
        listing(jobs.path()),
        files_before,
        "nothing written into the jobs directory"
    );
    let rows = commissions(&db.pool).await;
    assert_eq!(
        rows,
        [("ped-1", 50), ("ped-2", 100), ("ped-3", 150)].map(|(p, v)| (p.to_string(), v, 1))
    );
    assert_eq!(provider.deliveries().get(&key(&events[1])), Some(&1));
    assert_eq!(provider.delivery_count(), 1, "only the missing message");
}
