//! `kind: verify` jobs, fired by `serve`'s scheduler: `verify` of the `lookback` days before today
//! in the job's timezone, with the live consumer's policy; when it finds differences, one e-mail
//! to `report_to` — an effect of the ledger like the reports (key `<job>:verify-<fire>:email`), so
//! a run mails at most once — with the days, the counts, the net difference in reais, the
//! suggested jobs and, with `CONSOLE_URL`, a console link per day. A clean run mails nothing.

use chrono::{DateTime, Utc};
use maud::html;
use sqlx::PgPool;

use super::{Day, Findings, Progress, Request};
use crate::config::{Job, VerifyJob};
use crate::engine::applier::Policy;
use crate::services::report::deliver::{self, Delivery, ReportKey};
use crate::services::report::jobs::message_id;
use crate::services::report::{Mailer, Recipients};
use crate::shared::money;

/// What a verify run found and whether it mailed.
#[derive(Debug)]
pub struct VerifyRun {
    pub findings: Findings,
    pub delivery: Option<Delivery>,
}

/// One run of a verify job at `at`; mails through `mailer` when it finds differences.
#[tracing::instrument(skip_all, fields(job = %job.name), err)]
pub async fn run(
    pool: &PgPool,
    job: &Job,
    verify_job: &VerifyJob,
    policy: Option<Policy>,
    at: DateTime<Utc>,
    mailer: &Mailer,
) -> anyhow::Result<VerifyRun> {
    let (from, to) = verify_job.range(job.timezone, at);
    let request = Request {
        from,
        to,
        timezone: job.timezone,
        policy,
    };
    let findings = super::verify(pool, &request, &mut Progress::shown()).await?;
    let t = &findings.totals;
    let apart = &findings.set_aside_totals;
    tracing::info!(from = %from, to = %to, clean = findings.clean, orders_wrong = t.orders_wrong, orders_missing = t.orders_missing, effects_missing = t.effects_missing, pending_live = apart.waiting_for_live(), not_replayable = apart.not_replayable(), "verify run");
    if findings.clean {
        return Ok(VerifyRun {
            findings,
            delivery: None,
        });
    }
    let key = ReportKey::new(
        &job.name,
        &format!("verify-{}", at.format("%Y%m%dT%H%M%SZ")),
    );
    let recipients = Recipients {
        to: verify_job.report_to.clone(),
        cc: Vec::new(),
    };
    let console = mailer.console_url();
    let message = mailer.plain_message(
        &subject(&findings),
        &recipients,
        &message_id(&key),
        text(&findings, console.as_deref()),
        html(&findings, console.as_deref()),
    )?;
    let delivery = deliver::deliver(pool, mailer, &key, &message).await?;
    tracing::info!("{}", delivery.describe(&mailer.target()));
    Ok(VerifyRun {
        findings,
        delivery: Some(delivery),
    })
}

fn subject(f: &Findings) -> String {
    let days = f.differing().count();
    format!(
        "Verificação: diferenças em {days} dia(s) entre {} e {} — {}",
        f.from,
        f.to.pred_opt().unwrap_or(f.to),
        money::brl_signed(f.totals.difference_cents)
    )
}

/// The suggested replay job of a day (the name `verify --emit-jobs` gives it).
fn suggested(day: &Day) -> String {
    format!("reconcile-{}", day.day.format("%Y-%m-%d"))
}

fn day_line(d: &Day) -> String {
    let c = &d.counts;
    format!(
        "{}: {} pedido(s), {} com valor ou versão errada, {} sem comissão, diferença {}; {} efeito(s) faltando, {} incerto(s)",
        d.day,
        c.orders,
        c.orders_wrong,
        c.orders_missing,
        money::brl_signed(c.difference_cents),
        c.effects_missing,
        c.effects_uncertain
    )
}

fn link(console: Option<&str>, day: &Day) -> Option<String> {
    console.map(|base| format!("{base}/executions/{}", suggested(day)))
}

fn text(f: &Findings, console: Option<&str>) -> String {
    let mut out = format!(
        "A verificação de {} a {} ({}) encontrou diferenças entre o arquivo de eventos e as tabelas.\n\n",
        f.from, f.to, f.timezone
    );
    for d in f.differing() {
        out.push_str(&format!(
            "{}\n  job sugerido: {}\n",
            day_line(d),
            suggested(d)
        ));
        if let Some(url) = link(console, d) {
            out.push_str(&format!("  Abrir no console: {url}\n"));
        }
    }
    out.push_str(&format!(
        "\nDiferença líquida (esperado menos atual): {}\n\nPróximo passo: replay-ledger verify --from {} --to {} --timezone {} --emit-jobs jobs escreve um job por dia; simule, aprove e execute cada um.\n",
        money::brl_signed(f.totals.difference_cents),
        f.from,
        f.to,
        f.timezone
    ));
    if let Some(note) = not_replayable_note(f) {
        out.push_str(&format!("\n{note}\n"));
    }
    out
}

/// Orders no replay fixes, when there are any: how many, and who must act (the list is in
/// `replay-ledger verify`'s output).
fn not_replayable_note(f: &Findings) -> Option<String> {
    let n = f.set_aside_totals.not_replayable();
    (n > 0).then(|| {
        format!(
            "{n} pedido(s) com linha em comissao que nenhum replay corrige (versão mais nova que o arquivo, ou sem pedido.pago aceito no arquivo): faltam eventos no arquivo. Confira o log de origem ou corrija a linha à mão; a lista sai em replay-ledger verify --from {} --to {}.",
            f.from, f.to
        )
    })
}

fn html(f: &Findings, console: Option<&str>) -> String {
    html! {
        p { "A verificação de " (f.from) " a " (f.to) " (" (f.timezone) ") encontrou diferenças." }
        ul {
            @for d in f.differing() {
                li {
                    (day_line(d)) br;
                    "job sugerido: " code { (suggested(d)) }
                    @if let Some(url) = link(console, d) {
                        " — " a href=(url) { "Abrir no console" }
                    }
                }
            }
        }
        p { "Diferença líquida (esperado menos atual): " (money::brl_signed(f.totals.difference_cents)) }
        @if let Some(note) = not_replayable_note(f) { p { (note) } }
    }
    .into_string()
}
