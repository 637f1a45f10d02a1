//! What people asked for from the console (`execucao_solicitada`), carried out by `serve`: every
//! [`POLL`] the daemon claims the pending requests (each is taken by one daemon only) and runs each
//! through the same path as a fire of its job — the job's lock, the runner, the approval gate —
//! then records `concluida` or `falhou` with one line saying what happened. The job is found among
//! every job of the jobs directory, scheduled or not; an unknown job, a job of the wrong kind, an
//! execution that does not exist, a job already running or a gate that refuses all end `falhou`
//! with why. The console's role cannot write `comissao` or `efeito_aplicado`: this is where the
//! work happens, as the worker.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;

use super::fire::Shared;
use super::lock::JobLock;
use replay_ledger_core::config::{Job, JobKind};
use replay_ledger_core::engine::plan::Plan;
use replay_ledger_core::services::counters::RunOutcome;
use replay_ledger_core::shared::text::inert;
use replay_ledger_core::tables::execution::{self, Lease, Mode, State};
use replay_ledger_core::tables::requests::{self, Action, Request, RequestState};

/// How often pending requests are looked for.
pub(super) const POLL: Duration = Duration::from_secs(2);

/// A request `em-andamento` for longer than this whose job's lock nobody holds was left by a
/// `serve` that died: its run resumes, or it ends `falhou` so the job may be asked for again.
/// Well above the time between a claim and taking the job's lock (`lock_timeout`, 10 s by
/// default; twice it when longer).
const ABANDONED_AFTER: Duration = Duration::from_secs(20);

/// The loop that claims requests until shutdown; each claimed request runs on its own task.
pub(super) fn spawn(shared: &Arc<Shared>) -> JoinHandle<()> {
    let shared = Arc::clone(shared);
    tokio::spawn(async move {
        let mut shutdown = shared.shutdown.clone();
        loop {
            tokio::select! {
                _ = shutdown.triggered() => return,
                _ = tokio::time::sleep(POLL) => {}
            }
            if shared.is_ready() {
                settle_abandoned(&shared).await;
                claim_all(&shared).await;
            }
        }
    })
}

/// Claims every pending request now, starting each.
async fn claim_all(shared: &Arc<Shared>) {
    while !shared.shutdown.is_triggered() {
        match requests::claim_next(&shared.pool).await {
            Ok(Some(request)) => {
                tracing::info!(request = request.id, job = %request.job, action = %request.action, by = %request.asked_by, "console request claimed");
                let shared = Arc::clone(shared);
                tokio::spawn(async move { answer(&shared, request).await });
            }
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(error = %e, "could not look for console requests; trying again shortly");
                return;
            }
        }
    }
}

/// The requests a dead `serve` left `em-andamento`: those whose job's lock this process can take
/// (whoever runs a request holds it for the whole run). A replay's run (`executar`, `retomar`)
/// is resumed from its checkpoint, as the `serve` that died would have gone on — finance's
/// approved run does not wait for someone with a shell; anything else ends `falhou`.
async fn settle_abandoned(shared: &Arc<Shared>) {
    let after = ABANDONED_AFTER.max(shared.config.lock_timeout * 2);
    let stale = match requests::running_since_before(&shared.pool, after).await {
        Ok(stale) => stale,
        Err(e) => {
            tracing::debug!(error = %e, "could not look for abandoned console requests");
            return;
        }
    };
    for request in stale {
        let replay = shared
            .all_jobs
            .iter()
            .any(|j| j.name == request.job && matches!(j.kind, JobKind::Replay(_)));
        if replay && matches!(request.action, Action::Start | Action::Resume) {
            let shared = Arc::clone(shared);
            tokio::spawn(async move { resume_abandoned(&shared, request).await });
            continue;
        }
        let Some(_busy) = shared.claim(&request.job) else {
            continue;
        };
        let lock = JobLock::try_acquire(&shared.database_url, &request.job, Duration::from_secs(1));
        let Ok(Some(lock)) = lock.await else {
            continue;
        };
        let why = "o serve que executava este pedido parou antes de concluí-lo; peça de novo";
        if let Ok(true) =
            requests::finish(&shared.pool, request.id, RequestState::Failed, why).await
        {
            tracing::warn!(request = request.id, job = %request.job, "a console request left running by a stopped serve ended falhou");
        }
        lock.release().await;
    }
}

/// Resumes the run of a request a dead `serve` left `em-andamento`, under the job's lock (none
/// other holds it, so nobody runs it), and records how it ended.
async fn resume_abandoned(shared: &Shared, request: Request) {
    let Some(job) = shared.job_named(&request.job).await else {
        return;
    };
    let job = &job;
    let Some(_busy) = shared.claim(&job.name) else {
        return;
    };
    let lock = JobLock::try_acquire(&shared.database_url, &job.name, Duration::from_secs(1));
    let Ok(Some(lock)) = lock.await else {
        return;
    };
    let Some(_running) = shared.in_flight.enter(&shared.shutdown) else {
        lock.release().await;
        return;
    };
    tracing::warn!(request = request.id, job = %request.job, "a console request left running by a stopped serve: resuming its run from the checkpoint");
    let (state, line) = by_kind(shared, job, &request, lock.lease()).await;
    lock.release().await;
    let line = format!("retomada depois que o serve anterior parou: {line}");
    match requests::finish(&shared.pool, request.id, state, &line).await {
        Ok(_) => {}
        Err(e) => {
            tracing::warn!(request = request.id, error = %e, "could not record how the request ended");
        }
    }
}

/// Carries out one claimed request and records how it ended.
async fn answer(shared: &Shared, request: Request) {
    // Held until the request is recorded as ended: a graceful stop waits for that too, so no
    // request is left `em-andamento` by a `serve` that stopped cleanly.
    let running = shared.in_flight.enter(&shared.shutdown);
    let (state, line) = match &running {
        None => (
            RequestState::Failed,
            "o serve estava parando; nada foi executado, peça de novo".to_string(),
        ),
        Some(_) => carry_out(shared, &request).await,
    };
    tracing::info!(request = request.id, job = %request.job, state = %state, "console request ended");
    match requests::finish(&shared.pool, request.id, state, &line).await {
        Ok(true) => {}
        Ok(false) => tracing::warn!(
            request = request.id,
            "the request was no longer em-andamento"
        ),
        Err(e) => {
            tracing::warn!(request = request.id, error = %e, "could not record how the request ended");
        }
    }
    drop(running);
}

/// Runs the request under its job's lock, as a fire would.
async fn carry_out(shared: &Shared, request: &Request) -> (RequestState, String) {
    let Some(job) = shared.job_named(&request.job).await else {
        return failed(format!(
            "o job {} não existe no diretório de jobs do serve nem entre as correções propostas",
            inert(&request.job)
        ));
    };
    let job = &job;
    let Some(_busy) = shared.claim(&job.name) else {
        return failed("o job já está rodando neste serve; peça de novo quando terminar".into());
    };
    let lock =
        match JobLock::try_acquire(&shared.database_url, &job.name, shared.config.lock_timeout)
            .await
        {
            Ok(Some(lock)) => lock,
            Ok(None) => {
                return failed(
                    "outro processo está rodando este job; peça de novo quando terminar".into(),
                )
            }
            Err(e) => {
                return failed(format!(
                    "a trava do job não pôde ser tomada: {}",
                    super::said::line(&e)
                ))
            }
        };
    let ended = by_kind(shared, job, request, lock.lease()).await;
    lock.release().await;
    ended
}

/// What the request's action does with a job of this kind.
async fn by_kind(
    shared: &Shared,
    job: &Job,
    request: &Request,
    lease: &Lease,
) -> (RequestState, String) {
    match (request.action, &job.kind) {
        (Action::Sweep, JobKind::Sweep(sweep)) => {
            match shared.fire_sweep(job, sweep, lease).await {
                (true, counts) => (
                    RequestState::Done,
                    format!("varredura feita: {}", counts.portuguese()),
                ),
                (false, _) => failed("a varredura falhou; veja o log do serve".into()),
            }
        }
        (Action::Start, JobKind::Replay(replay)) if replay.simulate => failed(format!(
            "o job {} é só de simulação (simulate: true): nenhuma execução real é iniciada por ele",
            inert(&job.name)
        )),
        (Action::Start, JobKind::Replay(replay)) if !replay.require_approved_simulation => {
            failed(format!(
                "o job {} não exige simulação aprovada (require_approved_simulation): o console só inicia execuções reais aprovadas",
                inert(&job.name)
            ))
        }
        (Action::Simulate, JobKind::Replay(replay)) if !replay.require_approved_simulation => {
            failed(format!(
                "o job {} não exige simulação aprovada: o console só pede novas simulações de jobs que exigem",
                inert(&job.name)
            ))
        }
        (Action::Simulate, JobKind::Replay(_)) => match plan(shared, job, request).await {
            Ok(plan) => {
                let mut plan = plan.in_mode(Mode::Simulation);
                plan.restart = true;
                let (outcome, said, _) = shared.run_replay(&plan).await;
                match outcome {
                    RunOutcome::Finished => (RequestState::Done, format!("nova simulação {said}")),
                    _ => (RequestState::Failed, said),
                }
            }
            Err(why) => failed(why),
        },
        (Action::Start | Action::Resume, JobKind::Replay(_)) => {
            match plan(shared, job, request).await {
                Ok(plan) => {
                    let (outcome, said, asked_to_stop) = shared.run_replay(&plan).await;
                    match outcome {
                        RunOutcome::Finished | RunOutcome::AlreadyFinished => {
                            (RequestState::Done, said)
                        }
                        // Stopped as someone asked: the request did what it could.
                        RunOutcome::Interrupted if asked_to_stop => (RequestState::Done, said),
                        _ => (RequestState::Failed, said),
                    }
                }
                Err(why) => failed(why),
            }
        }
        (action, kind) => failed(format!(
            "o job {} é um job {}: não serve para {action}",
            inert(&job.name),
            kind.label()
        )),
    }
}

/// The real run's plan: of the approved simulation's execution (`executar`), or of the real run
/// to resume (`retomar`), as the job is configured now.
async fn plan(shared: &Shared, job: &Job, request: &Request) -> Result<Plan, String> {
    let id = request
        .execution_id
        .as_deref()
        .ok_or("o pedido não diz qual execução")?;
    let key = match request.action {
        Action::Start | Action::Simulate => {
            execution::checkpoint_key(execution::execution_id_of(id), Mode::Simulation)
        }
        _ => id.to_string(),
    };
    let existing = execution::load(&shared.pool, &key)
        .await
        .map_err(|e| format!("o banco de dados não respondeu: {}", super::said::line(&e)))?
        .ok_or_else(|| format!("não há execução {}", inert(&key)))?;
    if request.action == Action::Resume
        && (existing.mode != Mode::Real || existing.state == State::Finished)
    {
        return Err(format!(
            "a execução {} não é uma execução real a retomar",
            inert(&key)
        ));
    }
    let plan = Plan::of_execution(job, &existing).ok_or_else(|| {
        format!(
            "o job {} não planeja mais a execução {}",
            inert(&job.name),
            inert(&key)
        )
    })?;
    Ok(plan.in_mode(Mode::Real))
}

fn failed(why: String) -> (RequestState, String) {
    (RequestState::Failed, why)
}
