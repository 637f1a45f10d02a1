//! Reports to finance, against a real PostgreSQL and a real SMTP server on loopback (aiosmtpd):
//! what arrives, that it arrives once, and what happens when the server is down, rejects, hangs
//! up, or the sending process is killed after the server accepted the message.

mod approval;
mod bound;
mod html;
mod links;
pub(crate) mod smtp;

use std::time::Duration;

use chrono::Utc;
use replay_ledger::services::report::{self, Delivery, Mailer, Report};
use replay_ledger_core::config::{self, Job, JobKind, ReportJob};
use replay_ledger_core::shared::money::{brl, brl_signed, group_thousands};
use replay_ledger_core::tables::ledger;
use secrecy::SecretString;

use crate::helpers::*;
use smtp::{free_port, parse, Smtp};

const JOB: &str = "replay-2026-10-14-v2";
const SIMULATION: &str = "replay-2026-10-14-v2:simulacao";
/// The ledger key of the simulation's report sent by the report job.
const REPORT_KEY: &str = "finance-daily:replay-2026-10-14-v2:simulacao#1:email";
/// An order id a spreadsheet would evaluate as a formula.
const FORMULA_ID: &str = "=HYPERLINK(\"http://x\",\"y\")";

/// A database with the day of the bug, a jobs dir with the replay job (plus `extra`) and the
/// `finance-daily` report job, and the seller webhook.
pub struct Fixture {
    pub db: TestDb,
    pub jobs: tempfile::TempDir,
    _provider: testkit::sink::Sink,
}

pub async fn fixture(extra: &str) -> Fixture {
    let mut events = paid_orders(30);
    events.push(paid(31, FORMULA_ID, 1, 90_000_000, 10.0)); // among the largest changes
    let db = seeded_db(&events, &[]).await;
    // ped-2 has no commission yet (a new order); ped-3's goes down.
    for sql in [
        "delete from comissao where pedido_id = 'ped-2'",
        "update comissao set valor_centavos = 999999 where pedido_id = 'ped-3'",
    ] {
        sqlx::query(sql)
            .execute(&db.pool)
            .await
            .expect("arrange comissao");
    }
    let provider = sink(dedup()).await;
    let spec = JobSpec {
        extra: extra.into(),
        ..JobSpec::default()
    };
    let jobs = jobs_dir(&provider.url(), &spec);
    std::fs::write(
        jobs.path().join("finance-daily.yaml"),
        "name: finance-daily\nkind: report\ntimezone: America/Sao_Paulo\nto: [financeiro@example.com]\ncc: [auditoria@example.com]\n",
    )
    .expect("write the report job");
    Fixture {
        db,
        jobs,
        _provider: provider,
    }
}

impl Fixture {
    pub async fn simulate(&self) {
        run_job(&self.db, self.jobs.path(), JOB, Some(true), false)
            .await
            .expect("the simulation runs");
    }

    fn report_job(&self) -> (Job, ReportJob) {
        let (_, job) = config::find_job(self.jobs.path(), "finance-daily").expect("report job");
        let JobKind::Report(r) = &job.kind else {
            panic!("not a report job")
        };
        let r = r.clone();
        (job, r)
    }

    /// One tick of the report job through `mailer`.
    async fn tick(&self, mailer: &Mailer) -> report::ReportOutcome {
        let (job, r) = self.report_job();
        let loaded = config::load_dir(self.jobs.path()).expect("the jobs load");
        let gated = report::Gated::of(&loaded.jobs);
        report::run_report_job_with(&self.db.pool, &job, &r, Utc::now(), mailer, &gated)
            .await
            .expect("a report tick")
    }
}

fn smtp_mailer(url: &str) -> Mailer {
    Mailer::smtp(
        &SecretString::from(url.to_string()),
        "relatorios@example.com",
    )
    .expect("a valid SMTP URL")
    .with_timeout(Duration::from_secs(20))
}

/// The diff as SQL sees it, by order.
async fn diff_in_sql(db: &TestDb) -> Vec<(String, Option<i64>, i64, i64)> {
    sqlx::query_as(
        "select pedido_id, antes, depois, depois - coalesce(antes, 0) from reprocessamento_diff where execucao_id = $1 order by pedido_id",
    )
    .bind(JOB)
    .fetch_all(&db.pool)
    .await
    .expect("read the diff")
}

/// (orders changed, sum before, sum after) over `reprocessamento_diff`.
async fn totals_in_sql(db: &TestDb) -> (i64, i64, i64) {
    sqlx::query_as(
        "select count(*) filter (where antes is distinct from depois), coalesce(sum(coalesce(antes, 0)), 0)::bigint, coalesce(sum(depois), 0)::bigint from reprocessamento_diff where execucao_id = $1",
    )
    .bind(JOB)
    .fetch_one(&db.pool)
    .await
    .expect("sum the diff")
}

async fn state_of(db: &TestDb, key: &str) -> Option<String> {
    ledger::entry(&db.pool, key)
        .await
        .expect("read the ledger")
        .map(|e| e.estado.to_string())
}

#[tokio::test]
async fn a_simulations_report_arrives_with_subject_text_html_and_the_diff_as_csv() {
    let f = fixture("").await;
    f.simulate().await;
    let server = Smtp::start("store").await;

    let outcome = f.tick(&smtp_mailer(&server.url())).await;

    assert_eq!(outcome.sent(), 1, "{outcome:?}");
    let messages = server.messages();
    assert_eq!(messages.len(), 1);
    let r = parse(&messages[0]);
    let (changed, before, after) = totals_in_sql(&f.db).await;
    assert_eq!(
        r.subject,
        format!(
            "[replay-ledger] {JOB} (simulação): {} pedidos, {}",
            group_thousands(changed as u64),
            brl_signed(after - before)
        )
    );
    assert!(r.to.contains("financeiro@example.com") && r.from.contains("relatorios@example.com"));
    for expected in [brl(before), brl(after), brl_signed(after - before)] {
        assert!(
            r.text.contains(&expected),
            "text lacks {expected}:\n{}",
            r.text
        );
        assert!(r.html.contains(&expected), "html lacks {expected}");
    }
    assert!(r.text.contains("Pedidos novos (sem comissão antes): 1") && r.text.contains("ped-2"));
    assert!(r.text.contains("Pedidos com comissão reduzida: 1") && r.text.contains("ped-3"));
    assert!(r.html.starts_with("<!DOCTYPE html>") && r.html.contains("<table"));
    assert!(
        !r.html.contains("src=") && !r.html.contains("<link"),
        "no external assets"
    );
    assert!(
        r.html.contains("=HYPERLINK(&quot;http://x&quot;"),
        "ids are escaped"
    );
    let (name, ctype, csv) = r.attachment.expect("the CSV attachment");
    assert_eq!(
        (name.as_str(), ctype.as_str()),
        ("replay-2026-10-14-v2-simulacao.csv", "text/csv")
    );
    assert_same_rows(
        &smtp::csv_rows(&csv),
        &diff_in_sql(&f.db).await,
        "CSV vs reprocessamento_diff",
    );
    assert!(
        String::from_utf8_lossy(&csv).contains("'=HYPERLINK"),
        "formula guarded"
    );
}

#[tokio::test]
async fn a_report_the_server_was_down_for_is_retried_at_the_next_tick_and_delivered_once() {
    let f = fixture("").await;
    f.simulate().await;
    let port = free_port();
    let mailer = smtp_mailer(&format!("smtp://127.0.0.1:{port}"));

    let down = f.tick(&mailer).await;
    assert_eq!(down.failed(), 1, "{down:?}");
    assert_eq!(
        state_of(&f.db, REPORT_KEY).await,
        None,
        "released for the next tick"
    );
    let tries = ledger::attempt_history(&f.db.pool, REPORT_KEY)
        .await
        .unwrap();
    assert_eq!(tries.len(), 1);
    assert_eq!(tries[0].3.as_deref(), Some("refused"));

    let dir = tempfile::tempdir().unwrap();
    let server = Smtp::start_on(port, &dir.path().join("maildir"), "store")
        .await
        .expect("the server comes back on the same port");
    let back = f.tick(&mailer).await;
    let again = f.tick(&mailer).await;

    assert_eq!(back.sent(), 1, "{back:?}");
    assert!(again.deliveries.is_empty(), "{again:?}");
    assert_eq!(server.messages().len(), 1, "delivered exactly once");
    assert_eq!(
        state_of(&f.db, REPORT_KEY).await.as_deref(),
        Some("concluido")
    );
}

#[tokio::test]
async fn a_rejection_at_the_end_of_data_is_not_accepted_and_the_report_is_released() {
    let f = fixture("").await;
    f.simulate().await;
    let server = Smtp::start("reject").await;

    let outcome = f.tick(&smtp_mailer(&server.url())).await;

    assert!(
        matches!(&outcome.deliveries[..], [Delivery::Failed { class, .. }] if class == "smtp 554"),
        "{outcome:?}"
    );
    assert_eq!(state_of(&f.db, REPORT_KEY).await, None);
}

#[tokio::test]
async fn a_connection_lost_after_the_data_leaves_the_report_incerto_and_it_is_not_resent() {
    let f = fixture("").await;
    f.simulate().await;
    let server = Smtp::start("hangup").await;
    let mailer = smtp_mailer(&server.url());

    let first = f.tick(&mailer).await;
    let second = f.tick(&mailer).await;

    assert_eq!(first.uncertain(), 1, "{first:?}");
    assert!(
        second.deliveries.iter().all(|d| d.key() != REPORT_KEY),
        "{second:?}"
    );
    assert_eq!(
        state_of(&f.db, REPORT_KEY).await.as_deref(),
        Some("incerto")
    );
    let reports = server
        .messages()
        .iter()
        .filter(|m| parse(m).subject.contains(JOB))
        .count();
    assert_eq!(reports, 1, "the execution's report reached the server once");
    let queue = ledger::review_list(&f.db.pool).await.unwrap();
    assert!(queue
        .iter()
        .any(|i| i.key == REPORT_KEY && i.effect_type == "email"));
}

#[tokio::test]
async fn a_report_process_killed_after_the_server_accepted_ends_incerto_and_is_never_sent_twice() {
    let f = fixture("").await;
    f.simulate().await;
    let stalling = Smtp::start("stall").await;
    let mut child = command(&f.db.url, f.jobs.path())
        .args(["report", JOB])
        .env("SMTP_URL", stalling.url())
        .env("REPORT_FROM", "relatorios@example.com")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn replay-ledger report");
    wait_until("the server stored the message", || async {
        stalling.messages().len() == 1
    })
    .await;
    assert_eq!(
        state_of(&f.db, REPORT_KEY).await.as_deref(),
        Some("reservado")
    );

    kill9(&mut child).await;
    sqlx::query(
        "update efeito_aplicado set atualizado_em = now() - interval '10 minutes' where chave = $1",
    )
    .bind(REPORT_KEY)
    .execute(&f.db.pool)
    .await
    .unwrap();
    let sweep = run_bin_within(&f.db.url, f.jobs.path(), &["sweep"]).await;
    assert_success(&sweep, "sweep");
    let healthy = Smtp::start("store").await;
    let mut rerun = command(&f.db.url, f.jobs.path());
    rerun
        .args(["report", JOB])
        .env("SMTP_URL", healthy.url())
        .env("REPORT_FROM", "relatorios@example.com");
    let rerun = output_of(rerun, "replay-ledger report (rerun)").await;

    assert_eq!(
        state_of(&f.db, REPORT_KEY).await.as_deref(),
        Some("incerto")
    );
    assert_eq!(rerun.status.code(), Some(1), "{}", stderr(&rerun));
    assert!(stdout(&rerun).contains("incerto"), "{}", stdout(&rerun));
    assert_eq!(
        stalling.messages().len() + healthy.messages().len(),
        1,
        "delivered once"
    );
}

#[tokio::test]
async fn without_smtp_url_the_report_is_an_eml_in_the_outbox_that_parses_as_mime() {
    let f = fixture("").await;
    f.simulate().await;
    let cwd = tempfile::tempdir().unwrap();
    let mut cmd = command(&f.db.url, f.jobs.path());
    cmd.args(["report", JOB])
        .current_dir(cwd.path())
        .env_remove("SMTP_URL")
        .env_remove("REPORT_FROM");

    let output = output_of(cmd, "replay-ledger report").await;

    assert_success(&output, "report");
    let files: Vec<_> = std::fs::read_dir(cwd.path().join("outbox"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(files[0].extension().is_some_and(|e| e == "eml"));
    let r = parse(&std::fs::read(&files[0]).unwrap());
    assert!(r
        .subject
        .starts_with(&format!("[replay-ledger] {JOB} (simulação): ")));
    assert!(!r.text.is_empty() && r.html.contains("<table"));
    let (_, _, csv) = r.attachment.expect("the CSV attachment");
    assert_eq!(smtp::csv_rows(&csv), diff_in_sql(&f.db).await);
    assert_eq!(
        state_of(&f.db, REPORT_KEY).await,
        None,
        "a file is not an e-mail sent"
    );
}

#[tokio::test]
async fn a_real_runs_report_lists_exactly_the_corrections_it_wrote() {
    let f = fixture("").await;
    f.simulate().await;
    let before = commissions(&f.db.pool).await;

    run_job(&f.db, f.jobs.path(), JOB, Some(false), false)
        .await
        .expect("the real run");
    let report = Report::for_execution(
        &f.db.pool,
        JOB,
        "finance-daily",
        chrono_tz::UTC,
        Utc::now(),
        &report::Gated::default(),
    )
    .await
    .unwrap();

    let after = commissions(&f.db.pool).await;
    let mut changed: Vec<(String, Option<i64>, i64)> = after
        .iter()
        .map(|(id, valor, _)| {
            (
                id.clone(),
                before.iter().find(|b| &b.0 == id).map(|b| b.1),
                *valor,
            )
        })
        .filter(|(_, antes, depois)| *antes != Some(*depois))
        .collect();
    changed.sort();
    let e = report.execution.expect("an execution report");
    let rows: Vec<(String, Option<i64>, i64)> = e
        .rows
        .iter()
        .map(|r| (r.pedido_id.clone(), r.antes, r.depois))
        .collect();
    assert_same_rows(&rows, &changed, "corrections vs comissao before/after");
    let simulated: Vec<(String, Option<i64>, i64)> = diff_in_sql(&f.db)
        .await
        .into_iter()
        .filter(|(_, a, d, _)| *a != Some(*d))
        .map(|(id, a, d, _)| (id, a, d))
        .collect();
    assert_eq!(rows, simulated, "the real run did what the simulation said");
}

#[tokio::test]
async fn report_to_mails_the_executions_report_when_the_run_finishes_and_only_once() {
    let f = fixture("report_to: [financeiro@example.com]\n").await;
    let server = Smtp::start("store").await;
    let run = |args: &'static [&'static str]| {
        let mut cmd = command(&f.db.url, f.jobs.path());
        cmd.args(args)
            .env("SMTP_URL", server.url())
            .env("REPORT_FROM", "relatorios@example.com");
        output_of(cmd, "replay-ledger run --simulate")
    };

    let first = run(&["run", JOB, "--simulate"]).await;
    let again = run(&["run", JOB, "--simulate"]).await;

    assert_success(&first, "first run");
    assert_success(&again, "second run");
    assert!(stdout(&first).contains("report: "), "{}", stdout(&first));
    assert_eq!(server.messages().len(), 1);
    let key = format!("{JOB}:{SIMULATION}#1:email");
    assert_eq!(state_of(&f.db, &key).await.as_deref(), Some("concluido"));
}

#[tokio::test]
async fn a_tick_with_nothing_finished_mails_the_review_queue_once_a_day() {
    let f = fixture("").await;
    sqlx::query("insert into efeito_aplicado (chave, evento_id, tipo_efeito, estado, execucao_id) values ('evt-1:notificar-vendedor', 'evt-1', 'notificar-vendedor', 'incerto', 'ao-vivo')")
        .execute(&f.db.pool)
        .await
        .unwrap();
    let server = Smtp::start("store").await;
    let mailer = smtp_mailer(&server.url());

    let first = f.tick(&mailer).await;
    let second = f.tick(&mailer).await;

    assert_eq!(
        (first.sent(), second.deliveries.len()),
        (1, 0),
        "{first:?} {second:?}"
    );
    let r = parse(&server.messages()[0]);
    assert_eq!(
        r.subject,
        "[replay-ledger] finance-daily: 1 efeito aguardando revisão"
    );
    assert!(r.text.contains("evt-1:notificar-vendedor") && r.attachment.is_none());
}

#[tokio::test]
async fn a_partitioned_simulation_is_reported_once_as_a_whole() {
    let f = fixture("partitions: 3\n").await;
    f.simulate().await;
    let server = Smtp::start("store").await;

    let outcome = f.tick(&smtp_mailer(&server.url())).await;

    assert_eq!(outcome.deliveries.len(), 1, "{outcome:?}");
    let r = parse(&server.messages()[0]);
    let (_, _, csv) = r.attachment.expect("the CSV attachment");
    assert_same_rows(
        &smtp::csv_rows(&csv),
        &diff_in_sql(&f.db).await,
        "CSV vs the whole diff",
    );
}

#[tokio::test]
async fn a_send_that_times_out_waiting_for_the_final_reply_is_incerto() {
    let f = fixture("").await;
    f.simulate().await;
    let server = Smtp::start("stall").await;
    let mailer = smtp_mailer(&server.url()).with_timeout(Duration::from_secs(2));

    let outcome = f.tick(&mailer).await;

    assert!(
        matches!(&outcome.deliveries[..], [Delivery::Uncertain { class, .. }] if class == "timeout"),
        "{outcome:?}"
    );
    assert_eq!(
        state_of(&f.db, REPORT_KEY).await.as_deref(),
        Some("incerto")
    );
    assert_eq!(server.messages().len(), 1, "the server had it all along");
}
