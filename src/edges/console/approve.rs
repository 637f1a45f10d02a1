//! The approval of a simulation in the console: what the execution page says about it,
//! `GET /executions/{id}/approve` (the confirmation: what will be applied) and
//! `POST /executions/{id}/approve` (form `csrf_token`, `note`). Both go through
//! [`replay_ledger_core::engine::approval`] — the same checks and fingerprint as `replay-ledger approve`, against the
//! job as configured in the jobs directory now — so what the page offers is what the CLI would
//! record, and the real run's gate checks the same binding. When anything changed since the
//! simulation ran, the page says what (field by field for the job's definition) instead of
//! offering the button.

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use chrono::Utc;
use serde::Deserialize;

use super::error::PageError;
use super::session::Session;
use super::views::{Gate, Standing};
use super::Console;
use replay_ledger_core::config::JobKind;
use replay_ledger_core::engine::approval::{
    self, sends, Approval, ApprovalError, RunStart, Target,
};
use replay_ledger_core::engine::effects::Effects;
use replay_ledger_core::engine::plan::Plan;
use replay_ledger_core::tables::execution::{self, Execution, Mode, State as Run};

/// A gated job of the jobs directory, planned for one execution.
struct Configured {
    plan: Plan,
    effects: Effects,
}

impl Configured {
    fn target(&self) -> Target<'_> {
        Target {
            plan: &self.plan,
            effects: &self.effects,
        }
    }
}

/// The job of a simulation, as configured now, if it requires an approved simulation.
async fn configured(
    console: &Console,
    simulation: &Execution,
) -> Result<Option<Configured>, String> {
    let (catalog, job) = console.find_job(&simulation.job).await?;
    let JobKind::Replay(replay) = &job.kind else {
        return Ok(None);
    };
    if !replay.require_approved_simulation {
        return Ok(None);
    }
    let plan = Plan::of_execution(&job, simulation).ok_or_else(|| {
        let id = execution::execution_id_of(&simulation.key);
        format!("the job {} no longer resolves to {id}", job.name)
    })?;
    let effects = Effects::from_catalog(&catalog).map_err(|e| e.to_string())?;
    Ok(Some(Configured { plan, effects }))
}

/// Where the simulation `e` stands.
pub(super) async fn standing(console: &Console, e: &Execution) -> Result<Standing, PageError> {
    if e.mode != Mode::Simulation {
        return Ok(Standing::NotNeeded);
    }
    let c = match configured(console, e).await {
        Ok(Some(c)) => c,
        Ok(None) => return Ok(Standing::NotNeeded),
        Err(why) => return Ok(Standing::NoJob(why)),
    };
    if e.state != Run::Finished {
        return Ok(Standing::Unfinished);
    }
    let pool = &console.pool;
    if let Some(approval) = approval::latest(pool, c.plan.execution_id()).await? {
        let same = approval.simulation_pass == e.pass
            && Some(approval.simulation_finished_at) == e.finished_at;
        if same {
            let gate = gate(console, &c, &approval).await?;
            return Ok(Standing::Approved {
                approval: Box::new(approval),
                gate,
            });
        }
    }
    match approval::candidate(pool, c.target()).await {
        Ok(_) => Ok(Standing::Approvable),
        Err(err) => refusal(err),
    }
}

/// What the real run's gate says now, unless the real run already started since the approval.
async fn gate(console: &Console, c: &Configured, approval: &Approval) -> Result<Gate, PageError> {
    let real = c.plan.in_mode(Mode::Real);
    let run = execution::load(&console.pool, &real.key).await?;
    if let Some(run) = run.filter(|r| r.started_at > approval.at) {
        return Ok(Gate::Ran(run.key));
    }
    let start = RunStart {
        pool: &console.pool,
        plan: &real,
        definition: real.definition(&c.effects),
    };
    Ok(match approval::would_open(start).await {
        Ok(_) => Gate::Open,
        Err(approval::GateError::Database(e)) => return Err(e.into()),
        Err(refused) => Gate::Closed(refused.to_string()),
    })
}

/// An approval refused: what the page says instead of the button.
fn refusal(err: ApprovalError) -> Result<Standing, PageError> {
    match err {
        ApprovalError::Redefined {
            changes, fields, ..
        } => Ok(Standing::Changed {
            what: changes,
            fields,
        }),
        ApprovalError::Changed { what, .. } => Ok(Standing::Changed {
            what,
            fields: Vec::new(),
        }),
        ApprovalError::Unfinished { .. } | ApprovalError::NoSimulation { .. } => {
            Ok(Standing::Unfinished)
        }
        // Said only by a post: what was shown is no longer what an approval would record.
        refused @ (ApprovalError::Stale { .. } | ApprovalError::AlreadyApproved { .. }) => {
            Ok(Standing::Changed {
                what: replay_ledger_core::shared::text::inert(&refused.to_string()),
                fields: Vec::new(),
            })
        }
        ApprovalError::Note(e) => Err(PageError::BadRequest(e.to_string())),
        ApprovalError::Database(e) => Err(e.into()),
    }
}

/// `GET /executions/{id}/approve`: what an approval binds — the simulation's figures, the job's
/// definition, the diff's largest changes — and the form that records it (finance only; anyone
/// else reads why not). Nothing is recorded by this page.
pub(super) async fn confirm(
    State(console): State<Console>,
    session: Session,
    Path(id): Path<String>,
) -> Result<Response, PageError> {
    let key = execution::checkpoint_key(execution::execution_id_of(&id), Mode::Simulation);
    let simulation = execution::load(&console.pool, &key)
        .await?
        .ok_or_else(|| no_simulation(&key))?;
    let standing = standing(&console, &simulation).await?;
    let report =
        crate::services::report::ExecutionReport::of_execution(&console.pool, simulation.clone())
            .await
            .map_err(|e| match e {
                crate::services::report::ReportError::Database(e) => PageError::from(e),
                other => {
                    PageError::NotFound(replay_ledger_core::shared::text::inert(&other.to_string()))
                }
            })?;
    let definition = replay_ledger_core::engine::definition::Definition::from_json(
        simulation.definition.as_ref(),
    );
    let c = configured(&console, &simulation).await.ok().flatten();
    let seen = match (&standing, &c) {
        (Standing::Approvable, Some(c)) => seen_now(&console, c, &simulation).await?,
        _ => None,
    };
    let sends = match &c {
        Some(c) => Some(sends::count_by_type(&console.pool, &c.plan, &simulation).await?),
        None => None,
    };
    let markup = super::templates::approve::confirm(super::templates::approve::Confirm {
        session: &session,
        tz: console.timezone_of(&simulation.job),
        execution: &simulation,
        report: &report,
        standing: &standing,
        definition: definition.as_ref(),
        seen: seen.as_ref(),
        sends: sends.as_ref(),
    });
    Ok(super::templates::html(markup).into_response())
}

/// What the confirmation binds its form to: the pass whose figures it shows and the fingerprint
/// an approval would record now. `None` when the simulation can no longer be approved (the page
/// then says why, from its standing, on the next load).
async fn seen_now(
    console: &Console,
    c: &Configured,
    shown: &Execution,
) -> Result<Option<(i32, String)>, PageError> {
    match approval::candidate(&console.pool, c.target()).await {
        Ok(candidate) => Ok(Some((shown.pass, candidate.fingerprint.short()))),
        Err(ApprovalError::Database(e)) => Err(e.into()),
        Err(_) => Ok(None),
    }
}

/// `GET /executions/{id}/effects.csv`: the messages approving the simulation will send.
pub(super) async fn effects_csv(
    State(console): State<Console>,
    _session: Session,
    Path(id): Path<String>,
) -> Result<Response, PageError> {
    let mut out = crate::services::report::sends::Csv::default();
    let key = messages(&console, &id, |s| out.push(&s)).await?;
    Ok(super::download::attachment(
        "text/csv; charset=utf-8",
        &format!("{}-mensagens.csv", super::download::name(&key)),
        out.finish(),
    ))
}

/// `GET /executions/{id}/effects.xlsx`: the same list as a spreadsheet, written as the window is
/// read (constant memory: a window of 300,000 messages is not held whole).
pub(super) async fn effects_xlsx(
    State(console): State<Console>,
    _session: Session,
    Path(id): Path<String>,
) -> Result<Response, PageError> {
    let name = |key: &str| format!("{}-mensagens.xlsx", super::download::name(key));
    let mut out = match crate::services::report::sends::Xlsx::new() {
        Ok(out) => out,
        Err(e) => return super::download::spreadsheet(&name(&id), Err::<Vec<u8>, _>(e)),
    };
    let key = messages(&console, &id, |s| out.push(&s)).await?;
    super::download::spreadsheet(&name(&key), out.finish())
}

/// The simulation of `id`; hands `f` every message its approval would send now, as the window is
/// read. Returns the simulation's key.
async fn messages(
    console: &Console,
    id: &str,
    f: impl FnMut(sends::Send),
) -> Result<String, PageError> {
    let key = execution::checkpoint_key(execution::execution_id_of(id), Mode::Simulation);
    let simulation = execution::load(&console.pool, &key)
        .await?
        .ok_or_else(|| no_simulation(&key))?;
    let c = match configured(console, &simulation).await {
        Ok(Some(c)) => c,
        Ok(None) => {
            return Err(PageError::NotFound(
                "O job desta simulação não exige aprovação.".into(),
            ))
        }
        Err(why) => return Err(PageError::NotFound(why)),
    };
    sends::each(&console.pool, &c.plan, &simulation, f).await?;
    Ok(key)
}

fn no_simulation(key: &str) -> PageError {
    PageError::NotFound(format!(
        "Nenhuma simulação {}.",
        replay_ledger_core::shared::text::inert(key)
    ))
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct ApproveForm {
    csrf_token: Option<String>,
    note: Option<String>,
    /// The simulation pass the confirmation showed.
    pass: Option<String>,
    /// The fingerprint the confirmation showed ([`approval::Fingerprint::short`]).
    fingerprint: Option<String>,
}

impl ApproveForm {
    /// What the confirmation showed, when the form says it: the browser's form always does. A
    /// post without both (a script's, like `replay-ledger approve`) approves the latest
    /// finished pass after the same checks; one with only one of them, or a pass that is not a
    /// number, is refused.
    fn seen(&self) -> Result<Option<approval::Seen<'_>>, PageError> {
        match (self.pass.as_deref(), self.fingerprint.as_deref()) {
            (None, None) => Ok(None),
            (Some(pass), Some(fingerprint)) => {
                let pass = pass.trim().parse().map_err(|_| {
                    PageError::BadRequest("O campo pass não é um número de passagem.".into())
                })?;
                Ok(Some(approval::Seen { pass, fingerprint }))
            }
            _ => Err(PageError::BadRequest(
                "O formulário traz só um de pass e fingerprint: abra a confirmação de novo.".into(),
            )),
        }
    }
}

/// `POST /executions/{id}/approve`: 401 without a session, 403 without the CSRF token or the
/// finance role, 409 when the simulation cannot be approved now (and why); else the approval is
/// recorded as the account and the browser goes back to the execution (303).
pub(super) async fn approve(
    State(console): State<Console>,
    session: Session,
    Path(id): Path<String>,
    Form(form): Form<ApproveForm>,
) -> Result<Response, PageError> {
    super::csrf::check(&session, form.csrf_token.as_deref())?;
    if !session.role.may_approve() {
        return Err(PageError::Forbidden(
            "só uma conta de finanças (finance) aprova simulações",
        ));
    }
    let seen = form.seen()?;
    let note = form.note.as_deref().filter(|n| !n.trim().is_empty());
    if let Some(Err(e)) = note.map(replay_ledger_core::shared::identity::check_note) {
        return Err(PageError::BadRequest(format!("Nota recusada: {e}")));
    }
    let key = execution::checkpoint_key(execution::execution_id_of(&id), Mode::Simulation);
    let simulation = execution::load(&console.pool, &key)
        .await?
        .ok_or_else(|| no_simulation(&key))?;
    let c = match configured(&console, &simulation).await {
        Ok(Some(c)) => c,
        Ok(None) => {
            return Err(PageError::Conflict(
                "O job desta simulação não exige aprovação (require_approved_simulation).".into(),
            ))
        }
        Err(why) => return Err(PageError::Conflict(why)),
    };
    let recorded = approval::approve_in_console(
        &console.pool,
        session.for_database(console.config.idle_timeout),
        c.target(),
        seen,
        note,
        Utc::now(),
    )
    .await;
    match recorded {
        Ok(_) => Ok(
            Redirect::to(&format!("/executions/{}", super::templates::segment(&key)))
                .into_response(),
        ),
        Err(ApprovalError::Database(e)) if replay_ledger_core::tables::db::is_permission_denied(&e) => Err(
            PageError::Forbidden("o banco recusou: a sessão expirou ou a conta não é de finanças"),
        ),
        Err(ApprovalError::Database(e)) => Err(e.into()),
        Err(ApprovalError::Note(e)) => Err(PageError::BadRequest(format!("Nota recusada: {e}"))),
        Err(ApprovalError::Stale { pass, .. }) => Err(PageError::Conflict(format!(
            "A simulação mudou desde que você a abriu (agora é a passagem {pass}, com outros números ou outros dados): nada foi aprovado. Abra a confirmação de novo e revise."
        ))),
        Err(ApprovalError::AlreadyApproved { pass, by, .. }) => Err(PageError::Conflict(format!(
            "Esta simulação (passagem {pass}) já aprovada por {}: nada foi registrado de novo.",
            replay_ledger_core::shared::text::inert(&by)
        ))),
        Err(refused) => {
            tracing::info!(execution = %key, why = %refused, "console: approval refused, the data changed");
            let detail = match &refused {
                ApprovalError::Redefined { fields, .. } if !fields.is_empty() => fields
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; "),
                ApprovalError::Changed { what, .. } => what.clone(),
                other => other.to_string(),
            };
            Err(PageError::ConflictWithAction {
                why: "Os dados mudaram desde a simulação (o arquivo, a tabela comissao ou a definição do job): nada foi aprovado. Peça uma nova simulação e aprove a nova.".into(),
                detail: Some(detail),
                href: format!("/executions/{}/resimulate", super::templates::segment(&key)),
                label: "Simular de novo",
            })
        }
    }
}
