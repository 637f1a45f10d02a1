//! `kind: verify` jobs, fired by `serve`'s scheduler: `verify` of the `lookback` days before today
//! in the job's timezone, with the live consumer's policy; when it finds differences, one e-mail
//! to `report_to` — an effect of the ledger like the reports (key `<job>:verify-<fire>:email`), so
//! a run mails at most once — with the days, the counts, the net difference in reais, each day's
//! proposal (see [`super::propose`]) or suggested job and, with `CONSOLE_URL`, a console link per
//! day. A clean run mails nothing.

use chrono::{DateTime, Utc};
use maud::html;
use sqlx::PgPool;

use super::propose::Proposed;
use super::{Day, Findings, Progress, Request};
use crate::services::report::deliver::{self, Delivery, ReportKey};
use crate::services::report::jobs::message_id;
use crate::services::report::{Mailer, Recipients};
use replay_ledger_core::config::{Job, VerifyJob};
use replay_ledger_core::engine::applier::Policy;
use replay_ledger_core::shared::money;

/// What a verify run found and whether it mailed.
#[derive(Debug)]
pub struct VerifyRun {
    pub findings: Findings,
    pub delivery: Option<Delivery>,
    /// The corrections proposed (or confirmed) for the days found wrong.
    pub proposals: usize,
}

/// The days a verify job's run at `at` checks, and what it found there.
#[tracing::instrument(skip_all, fields(job = %job.name), err)]
pub async fn check(
    pool: &PgPool,
    job: &Job,
    verify_job: &VerifyJob,
    policy: Option<Policy>,
    at: DateTime<Utc>,
) -> anyhow::Result<Findings> {
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
    Ok(findings)
}

/// Mails what a run found to `report_to` when it found differences (at most once per run: the
/// ledger keeps the message's key), each day with its proposal's simulation to approve when
/// there is one, else the suggested job.
pub async fn mail(
    pool: &PgPool,
    job: &Job,
    verify_job: &VerifyJob,
    at: DateTime<Utc>,
    findings: Findings,
    proposed: &[Proposed],
    mailer: &Mailer,
) -> anyhow::Result<VerifyRun> {
    if findings.clean {
        return Ok(VerifyRun {
            findings,
            delivery: None,
            proposals: 0,
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
    let links = Links {
        console: console.as_deref(),
        proposed,
    };
    let message = mailer.plain_message(
        &subject(&findings),
        &recipients,
        &message_id(&key),
        text(&findings, &links),
        html(&findings, &links),
    )?;
    let delivery = deliver::deliver(pool, mailer, &key, &message).await?;
    tracing::info!("{}", delivery.describe(&mailer.target()));
    Ok(VerifyRun {
        findings,
        delivery: Some(delivery),
        proposals: proposed.len(),
    })
}

/// Where a day's line points: its proposal's simulation in the console, or the suggested job.
struct Links<'a> {
    console: Option<&'a str>,
    proposed: &'a [Proposed],
}

impl Links<'_> {
    fn proposal(&self, day: &Day) -> Option<&Proposed> {
        self.proposed.iter().find(|p| p.proposal.day == day.day)
    }

    /// The job a day's correction runs as: its proposal, or the name `--emit-jobs` gives it.
    fn job(&self, day: &Day) -> String {
        self.proposal(day)
            .map_or_else(|| suggested(day), |p| p.proposal.name.clone())
    }

    /// The console's page of the day's proposal's simulation (to approve), or of the suggested
    /// job's execution.
    fn url(&self, day: &Day) -> Option<String> {
        let base = self.console?;
        Some(match self.proposal(day) {
            Some(p) => format!("{base}/executions/{}", p.simulation_key),
            None => format!("{base}/executions/{}", suggested(day)),
        })
    }
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

fn text(f: &Findings, links: &Links<'_>) -> String {
    let mut out = format!(
        "A verificação de {} a {} ({}) encontrou diferenças entre o arquivo de eventos e as tabelas.\n\n",
        f.from, f.to, f.timezone
    );
    for d in f.differing() {
        match links.proposal(d) {
            Some(p) => out.push_str(&format!(
                "{}\n  correção proposta: {} (simulação pronta para aprovar no console)\n",
                day_line(d),
                p.proposal.name
            )),
            None => out.push_str(&format!(
                "{}\n  job sugerido: {}\n",
                day_line(d),
                links.job(d)
            )),
        }
        if let Some(url) = links.url(d) {
            out.push_str(&format!("  Abrir no console: {url}\n"));
        }
    }
    out.push_str(&format!(
        "\nDiferença líquida (esperado menos atual): {}\n",
        money::brl_signed(f.totals.difference_cents),
    ));
    if links.proposed.is_empty() {
        out.push_str(&format!(
            "\nPróximo passo: replay-ledger verify --from {} --to {} --timezone {} --emit-jobs jobs escreve um job por dia; simule, aprove e execute cada um.\n",
            f.from, f.to, f.timezone
        ));
    } else {
        out.push_str("\nPróximo passo: abra cada simulação no console, confira o diff, aprove e inicie a execução real; o relatório dela segue por e-mail.\n");
    }
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

fn html(f: &Findings, links: &Links<'_>) -> String {
    html! {
        p { "A verificação de " (f.from) " a " (f.to) " (" (f.timezone) ") encontrou diferenças." }
        ul {
            @for d in f.differing() {
                li {
                    (day_line(d)) br;
                    @if let Some(p) = links.proposal(d) {
                        "correção proposta: " code { (p.proposal.name) } " (simulação pronta para aprovar)"
                    } @else {
                        "job sugerido: " code { (links.job(d)) }
                    }
                    @if let Some(url) = links.url(d) {
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
