//! People act from the console, confirmed and audited: `GET|POST /executions/{id}/start` (the
//! real run of an approved gated simulation; finance or an operator), `GET|POST
//! /executions/{id}/resume` (an interrupted or failed real run; an operator) and `GET|POST
//! /sweep` (a sweeper pass now; an operator). A GET is the confirmation (what will be done, who
//! asks); a POST (form `csrf_token`, `note`) records a request through `console_solicitar`, which
//! checks the session's role again and writes the audit row with it, and answers 303 back to the
//! page, which shows the request's state. The console runs nothing itself (its role cannot write
//! `comissao` or `efeito_aplicado`): `serve` claims the request and runs it as a fire of the job.

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use serde::Deserialize;

use super::error::PageError;
use super::session::Session;
use super::templates::{self, requests as page, segment};
use super::views::{Gate, Standing};
use super::{approve, Console};
use replay_ledger_core::config::JobKind;
use replay_ledger_core::shared::money::{brl, brl_signed};
use replay_ledger_core::shared::text::inert;
use replay_ledger_core::tables::execution::{self, Execution, Mode, State as Run};
use replay_ledger_core::tables::requests::{self, Action, Ask, Request};

/// How many requests an execution's page (and the sweep page) lists.
const SHOWN: i64 = 5;

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct RequestForm {
    csrf_token: Option<String>,
    note: Option<String>,
}

/// What an execution's page shows of requests: the links the account may follow, the requests.
pub(super) async fn of_execution(
    console: &Console,
    session: &Session,
    e: &Execution,
    standing: &Standing,
) -> Result<(page::Offer, Vec<Request>), PageError> {
    let id = execution::execution_id_of(&e.key);
    let list = requests::of_execution(&console.pool, id, SHOWN).await?;
    let open = page::any_open(&list);
    let offer = page::Offer {
        start: !open && session.role.may_start() && startable(standing),
        resume: !open && session.role.may_resume() && resumable(e),
        interrupt: session.role.may_interrupt() && interruptible(e),
    };
    Ok((offer, list))
}

fn startable(standing: &Standing) -> bool {
    matches!(
        standing,
        Standing::Approved {
            gate: Gate::Open,
            ..
        }
    )
}

fn resumable(e: &Execution) -> bool {
    e.mode == Mode::Real && matches!(e.state, Run::Interrupted | Run::Failed)
}

/// A real run in progress, not asked to stop yet (an execution's own row, not a partition's).
fn interruptible(e: &Execution) -> bool {
    e.mode == Mode::Real
        && e.state == Run::Running
        && e.interrupt_asked_by.is_none()
        && !execution::is_partition_key(&e.key)
}

/// The simulation of `id` (a simulation's key or its execution id) and where it stands.
async fn simulation(console: &Console, id: &str) -> Result<(Execution, Standing), PageError> {
    let key = execution::checkpoint_key(execution::execution_id_of(id), Mode::Simulation);
    let simulation = execution::load(&console.pool, &key)
        .await?
        .ok_or_else(|| PageError::NotFound(format!("Nenhuma simulação {}.", inert(&key))))?;
    let standing = approve::standing(console, &simulation).await?;
    Ok((simulation, standing))
}

/// Why the real run of this simulation cannot be asked for now, if it cannot.
fn start_refused(session: &Session, standing: &Standing) -> Option<String> {
    if !session.role.may_start() {
        return Some("Só uma conta de finanças ou de operador pede a execução real.".into());
    }
    match standing {
        Standing::Approved {
            gate: Gate::Open, ..
        } => None,
        Standing::Approved {
            gate: Gate::Ran(key),
            ..
        } => Some(format!("A execução real já rodou: {}.", inert(key))),
        Standing::Approved {
            gate: Gate::Closed(why),
            ..
        } => Some(format!("A execução real seria recusada agora: {why}")),
        _ => Some("Esta simulação não tem uma aprovação válida: aprove-a antes.".into()),
    }
}

/// `GET /executions/{id}/start`: the approved figures, the job, who asks, and the form.
pub(super) async fn start_confirm(
    State(console): State<Console>,
    session: Session,
    Path(id): Path<String>,
) -> Result<Response, PageError> {
    let (simulation, standing) = simulation(&console, &id).await?;
    let mut what = vec![
        ("Job", simulation.job.clone()),
        (
            "Execução real",
            execution::execution_id_of(&simulation.key).to_string(),
        ),
    ];
    if let Standing::Approved { approval, .. } = &standing {
        what.push(("Aprovada por", approval.by.clone()));
        let t = &approval.totals;
        what.push(("Pedidos alterados", t.changed.to_string()));
        what.push(("Total depois", brl(t.after_centavos)));
        what.push((
            "Diferença",
            brl_signed(t.after_centavos - t.before_centavos),
        ));
    }
    let markup = page::confirm(page::Confirm {
        session: &session,
        execution: &simulation,
        action: Action::Start,
        what,
        refused: start_refused(&session, &standing),
    });
    Ok(templates::html(markup).into_response())
}

/// `POST /executions/{id}/start`: 403 without the CSRF token or the role, 409 when the gate is
/// not open or the job has an open request; else the request is recorded and 303 to the page.
pub(super) async fn start(
    State(console): State<Console>,
    session: Session,
    Path(id): Path<String>,
    Form(form): Form<RequestForm>,
) -> Result<Response, PageError> {
    allowed(
        &session,
        &form,
        session.role.may_start(),
        "só uma conta de finanças ou de operador pede a execução real",
    )?;
    let (simulation, standing) = simulation(&console, &id).await?;
    let ask = Asked {
        action: Action::Start,
        execution: &simulation,
        execution_id: execution::execution_id_of(&simulation.key),
        refused: start_refused(&session, &standing),
    };
    ask_then_back(&console, &session, &form, ask).await
}

/// The execution of `key` (a real run to resume or to stop).
async fn run_named(console: &Console, key: &str) -> Result<Execution, PageError> {
    execution::load(&console.pool, key)
        .await?
        .ok_or_else(|| PageError::NotFound(format!("Nenhuma execução {}.", inert(key))))
}

fn resume_refused(session: &Session, e: &Execution) -> Option<String> {
    if !session.role.may_resume() {
        return Some("Só uma conta de operador pede para retomar uma execução.".into());
    }
    (!resumable(e))
        .then(|| "Só uma execução real interrompida ou que falhou pode ser retomada.".into())
}

/// `GET /executions/{id}/resume`: where the run stopped, who asks, and the form.
pub(super) async fn resume_confirm(
    State(console): State<Console>,
    session: Session,
    Path(id): Path<String>,
) -> Result<Response, PageError> {
    let run = run_named(&console, &id).await?;
    let mut what = vec![
        ("Job", run.job.clone()),
        ("Execução", run.key.clone()),
        ("Situação", run.state.as_db().to_string()),
        (
            "Checkpoint",
            run.checkpoint.map_or("-".into(), |c| c.to_string()),
        ),
    ];
    if let Some(error) = &run.error {
        what.push(("Erro", error.clone()));
    }
    let markup = page::confirm(page::Confirm {
        session: &session,
        execution: &run,
        action: Action::Resume,
        what,
        refused: resume_refused(&session, &run),
    });
    Ok(templates::html(markup).into_response())
}

/// `POST /executions/{id}/resume`: as a start, for an operator and a run to resume.
pub(super) async fn resume(
    State(console): State<Console>,
    session: Session,
    Path(id): Path<String>,
    Form(form): Form<RequestForm>,
) -> Result<Response, PageError> {
    allowed(
        &session,
        &form,
        session.role.may_resume(),
        "só uma conta de operador pede para retomar uma execução",
    )?;
    let run = run_named(&console, &id).await?;
    let ask = Asked {
        action: Action::Resume,
        execution: &run,
        execution_id: &run.key,
        refused: resume_refused(&session, &run),
    };
    ask_then_back(&console, &session, &form, ask).await
}

fn interrupt_refused(session: &Session, e: &Execution) -> Option<String> {
    if !session.role.may_interrupt() {
        return Some(
            "Só uma conta de finanças ou de operador pede para interromper uma execução.".into(),
        );
    }
    if let Some(by) = &e.interrupt_asked_by {
        return Some(format!("A interrupção já foi pedida por {}.", inert(by)));
    }
    (!interruptible(e)).then(|| "Só uma execução real em andamento pode ser interrompida.".into())
}

/// `GET /executions/{id}/interrupt`: where the run is, who asks, and the form.
pub(super) async fn interrupt_confirm(
    State(console): State<Console>,
    session: Session,
    Path(id): Path<String>,
) -> Result<Response, PageError> {
    let run = run_named(&console, &id).await?;
    let what = vec![
        ("Job", run.job.clone()),
        ("Execução", run.key.clone()),
        (
            "Checkpoint",
            run.checkpoint.map_or("-".into(), |c| c.to_string()),
        ),
    ];
    let markup = page::confirm(page::Confirm {
        session: &session,
        execution: &run,
        action: Action::Interrupt,
        what,
        refused: interrupt_refused(&session, &run),
    });
    Ok(templates::html(markup).into_response())
}

/// `POST /executions/{id}/interrupt`: records the ask (done at once, audited); the runner holding
/// the execution stops at its next batch boundary. 303 back to the run's page.
pub(super) async fn interrupt(
    State(console): State<Console>,
    session: Session,
    Path(id): Path<String>,
    Form(form): Form<RequestForm>,
) -> Result<Response, PageError> {
    allowed(
        &session,
        &form,
        session.role.may_interrupt(),
        "só uma conta de finanças ou de operador pede para interromper uma execução",
    )?;
    let run = run_named(&console, &id).await?;
    let ask = Asked {
        action: Action::Interrupt,
        execution: &run,
        execution_id: &run.key,
        refused: interrupt_refused(&session, &run),
    };
    ask_then_back(&console, &session, &form, ask).await
}

fn resimulate_refused(session: &Session, e: &Execution) -> Option<String> {
    if !session.role.may_start() {
        return Some("Só uma conta de finanças ou de operador pede uma nova simulação.".into());
    }
    (e.mode != Mode::Simulation || e.state == Run::Running)
        .then(|| "Só uma simulação que não está rodando pode ser simulada de novo.".into())
}

/// `GET /executions/{id}/resimulate`: the simulation to run again, who asks, and the form.
pub(super) async fn resimulate_confirm(
    State(console): State<Console>,
    session: Session,
    Path(id): Path<String>,
) -> Result<Response, PageError> {
    let (simulation, _) = simulation(&console, &id).await?;
    let what = vec![
        ("Job", simulation.job.clone()),
        ("Simulação", simulation.key.clone()),
        ("Passagem atual", simulation.pass.to_string()),
    ];
    let markup = page::confirm(page::Confirm {
        session: &session,
        execution: &simulation,
        action: Action::Simulate,
        what,
        refused: resimulate_refused(&session, &simulation),
    });
    Ok(templates::html(markup).into_response())
}

/// `POST /executions/{id}/resimulate`: asks `serve` for a new pass of the simulation, from the
/// window's start; 303 back to the simulation's page, which refreshes itself until it is done.
pub(super) async fn resimulate(
    State(console): State<Console>,
    session: Session,
    Path(id): Path<String>,
    Form(form): Form<RequestForm>,
) -> Result<Response, PageError> {
    allowed(
        &session,
        &form,
        session.role.may_start(),
        "só uma conta de finanças ou de operador pede uma nova simulação",
    )?;
    let (simulation, _) = simulation(&console, &id).await?;
    let ask = Asked {
        action: Action::Simulate,
        execution: &simulation,
        execution_id: execution::execution_id_of(&simulation.key),
        refused: resimulate_refused(&session, &simulation),
    };
    ask_then_back(&console, &session, &form, ask).await
}

/// The name of the sweep job of the jobs directory.
fn sweep_job(console: &Console) -> Option<String> {
    let dir = &console.config.jobs_dir;
    let loaded =
        replay_ledger_core::config::without_secrets(|| replay_ledger_core::config::load_dir(dir))
            .ok()?;
    loaded
        .jobs
        .into_iter()
        .find(|j| matches!(j.kind, JobKind::Sweep(_)))
        .map(|j| j.name)
}

fn sweep_refused(session: &Session, job: Option<&str>) -> Option<String> {
    if !session.role.may_sweep() {
        return Some("Só uma conta de operador pede uma varredura.".into());
    }
    job.is_none()
        .then(|| "O diretório de jobs não tem um job de varredura (kind: sweep).".into())
}

/// `GET /sweep`: the confirmation, and the sweeps asked for with their state.
pub(super) async fn sweep_confirm(
    State(console): State<Console>,
    session: Session,
) -> Result<Response, PageError> {
    let job = sweep_job(&console);
    let list = requests::of_action(&console.pool, Action::Sweep, SHOWN).await?;
    let refused = sweep_refused(&session, job.as_deref());
    let markup = page::sweep(
        &session,
        console.config.timezone,
        job.as_deref(),
        refused.as_deref(),
        &list,
    );
    Ok(templates::html(markup).into_response())
}

/// `POST /sweep`: an operator's request for a sweeper pass; 303 back to `/sweep`.
pub(super) async fn sweep(
    State(console): State<Console>,
    session: Session,
    Form(form): Form<RequestForm>,
) -> Result<Response, PageError> {
    super::csrf::check(&session, form.csrf_token.as_deref())?;
    if !session.role.may_sweep() {
        return Err(PageError::Forbidden(
            "só uma conta de operador pede uma varredura",
        ));
    }
    let job = sweep_job(&console);
    if let Some(why) = sweep_refused(&session, job.as_deref()) {
        return Err(PageError::Conflict(why));
    }
    let job = job.unwrap_or_default();
    record(&console, &session, Action::Sweep, &job, None, &form).await?;
    Ok(Redirect::to("/sweep").into_response())
}

/// Records the request as the session's account (with its audit row), or says why not.
async fn record(
    console: &Console,
    session: &Session,
    action: Action,
    job: &str,
    execution_id: Option<&str>,
    form: &RequestForm,
) -> Result<i64, PageError> {
    let note = form.note.as_deref().filter(|n| !n.trim().is_empty());
    if let Some(Err(e)) = note.map(replay_ledger_core::shared::identity::check_note) {
        return Err(PageError::BadRequest(format!("Nota recusada: {e}")));
    }
    let ask = Ask {
        token_digest: &session.token_digest,
        idle_timeout: console.config.idle_timeout,
        action,
        job,
        execution_id,
        note,
    };
    match requests::ask(&console.pool, ask).await {
        Ok(id) => Ok(id),
        Err(e) if replay_ledger_core::tables::db::is_permission_denied(&e) => {
            Err(PageError::Forbidden(
                "o banco recusou: a sessão expirou ou a conta não pode fazer este pedido",
            ))
        }
        Err(e) if requests::is_already_open(&e) => Err(PageError::Conflict(format!(
            "O job {} já tem um pedido aberto: aguarde o serve concluí-lo.",
            inert(job)
        ))),
        Err(e) => Err(e.into()),
    }
}

/// The CSRF token and the role, checked before anything is read: 403 otherwise.
fn allowed(
    session: &Session,
    form: &RequestForm,
    may: bool,
    forbidden: &'static str,
) -> Result<(), PageError> {
    super::csrf::check(session, form.csrf_token.as_deref())?;
    if may {
        Ok(())
    } else {
        Err(PageError::Forbidden(forbidden))
    }
}

/// A request about one execution, as a post asks it.
struct Asked<'a> {
    action: Action,
    execution: &'a Execution,
    /// What the request names: an execution id (start, new simulation) or a run's key.
    execution_id: &'a str,
    /// Why it cannot be asked now, if it cannot.
    refused: Option<String>,
}

/// 409 with why the request cannot be asked now; else it is recorded (and audited) as the
/// session's account and the answer is 303 back to the execution's page.
async fn ask_then_back(
    console: &Console,
    session: &Session,
    form: &RequestForm,
    ask: Asked<'_>,
) -> Result<Response, PageError> {
    if let Some(why) = ask.refused {
        return Err(PageError::Conflict(why));
    }
    let e = ask.execution;
    record(
        console,
        session,
        ask.action,
        &e.job,
        Some(ask.execution_id),
        form,
    )
    .await?;
    Ok(back_to(&e.key))
}

fn back_to(key: &str) -> Response {
    Redirect::to(&format!("/executions/{}", segment(key))).into_response()
}
