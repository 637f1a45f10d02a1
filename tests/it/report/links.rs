//! With `CONSOLE_URL` set, the report links its execution to the console's page — "Revisar e
//! aprovar" while a finished simulation of a gated job awaits approval, "Abrir no console" once
//! approved or when the job needs no approval — and the review queue to the console's; without
//! it, no link.

use super::*;

/// `report JOB --out FILE` with `console_url` (or none) in the environment; the parsed mail.
async fn report_with(f: &Fixture, console_url: Option<&str>, name: &str) -> smtp::Received {
    let out = f.jobs.path().join(name);
    let mut cmd = command(&f.db.url, f.jobs.path());
    cmd.args(["report", JOB, "--out"])
        .arg(&out)
        .env_remove("SMTP_URL")
        .env_remove("CONSOLE_URL");
    if let Some(url) = console_url {
        cmd.env("CONSOLE_URL", url);
    }
    assert_success(&output_of(cmd, "replay-ledger report").await, "report");
    parse(&std::fs::read(&out).unwrap())
}

#[tokio::test]
async fn the_report_links_a_simulation_awaiting_approval_to_its_console_page() {
    let f = fixture("require_approved_simulation: true\n").await;
    f.simulate().await;
    sqlx::query(
        "insert into efeito_aplicado (chave, evento_id, tipo_efeito, estado, execucao_id) values ('evt-1:notificar-vendedor', 'evt-1', 'notificar-vendedor', 'incerto', $1)",
    )
    .bind(JOB)
    .execute(&f.db.pool)
    .await
    .unwrap();
    let page = format!("https://console.example.com/rl/executions/{SIMULATION}");

    let awaiting = report_with(&f, Some("https://console.example.com/rl/"), "a.eml").await;
    let approve = run_bin_within(&f.db.url, f.jobs.path(), &["approve", JOB]).await;
    let approved = report_with(&f, Some("https://console.example.com/rl"), "b.eml").await;
    let plain = report_with(&f, None, "c.eml").await;

    let line = |r: &smtp::Received, l: String| r.text.lines().any(|x| x.trim_end() == l);
    assert!(
        line(&awaiting, format!("Revisar e aprovar: {page}")),
        "{}",
        awaiting.text
    );
    assert!(
        awaiting.html.contains(&format!("<a href=\"{page}\""))
            && awaiting.html.contains(">Revisar e aprovar</a>"),
        "{}",
        awaiting.html
    );
    assert!(
        awaiting
            .text
            .contains("https://console.example.com/rl/review"),
        "{}",
        awaiting.text
    );
    assert_success(&approve, "approve");
    assert!(
        line(&approved, format!("Abrir no console: {page}")),
        "{}",
        approved.text
    );
    assert!(!approved.text.contains("Revisar e aprovar"));
    assert!(!plain.text.contains("console.example.com") && !plain.html.contains("/executions/"));
}

#[tokio::test]
async fn the_report_of_a_job_that_needs_no_approval_only_opens_the_console_page() {
    let f = fixture("").await;
    f.simulate().await;
    let page = format!("https://console.example.com/executions/{SIMULATION}");

    let report = report_with(&f, Some("https://console.example.com"), "a.eml").await;

    assert!(
        report
            .text
            .lines()
            .any(|l| l.trim_end() == format!("Abrir no console: {page}")),
        "{}",
        report.text
    );
    assert!(
        !report.text.contains("Revisar e aprovar"),
        "{}",
        report.text
    );
    assert!(
        !report.html.contains("Revisar e aprovar"),
        "{}",
        report.html
    );
}
