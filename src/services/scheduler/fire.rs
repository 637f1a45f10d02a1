//! What one fire of a job does, by kind, with its locks, its log lines and its metrics: a replay
//! job runs its execution through the runner, a sweep job makes one sweeper pass, a report job
//! sends the finance report, a live job is not scheduled. Each runs under the job's lock.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use croner::Cron;
use sqlx::PgPool;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::lock::JobLock;
use super::runs::RunDetail;
use super::SchedulerConfig;
use replay_ledger_core::config::{Job, JobKind, ReplayJob, SweepJob, WindowSpec};
use replay_ledger_core::engine::effects::Effects;
use replay_ledger_core::engine::plan::{Asked, Plan};
use replay_ledger_core::services::counters::{Metrics, RunOutcome};
use replay_ledger_core::services::runner::{self, Ended, RunError, RunReport, RunnerConfig};
use replay_ledger_core::services::sweeper::{Sweeper, SweeperConfig};
use replay_ledger_core::shared::shutdown::Shutdown;
use replay_ledger_core::shared::summary::Summary;
use replay_ledger_core::tables::execution::State;
use replay_ledger_core::tables::execution::{self, Lease, LockError};

/// A job the scheduler fires, with its parsed schedule.
pub(super) struct Scheduled {
    pub job: Job,
    pub cron: Cron,
}

/// Everything a fire needs, shared by every fire of the process.
pub(super) struct Shared {
    pub pool: PgPool,
    pub database_url: String,
    pub effects: Effects,
    pub config: SchedulerConfig,
    pub metrics: Arc<Metrics>,
    pub jobs: Vec<Scheduled>,
    /// Every job of the jobs directory, scheduled or not (console requests name any).
    pub all_jobs: Vec<Job>,
    pub gated: crate::services::report::Gated,
    pub live_policy: Option<replay_ledger_core::engine::applier::Policy>,
    pub proposal_spec: Option<crate::services::verify::EmitSpec>,
    pub catalog: replay_ledger_core::config::EffectCatalog,
    /// Passed to the runner: it finishes the batch in hand and stops.
    pub shutdown: Shutdown,
    pub in_flight: InFlight,
    /// The jobs firing in this process right now.
    busy: Mutex<HashSet<String>>,
    /// False while a database that was away at start has not answered (and been migrated) yet.
    ready: AtomicBool,
}

impl Shared {
    pub fn new(scheduler: super::Scheduler, shutdown: Shutdown) -> Self {
        let ready = !scheduler.config.away_at_start;
        Shared {
            pool: scheduler.pool,
            database_url: scheduler.database_url,
            effects: scheduler.effects,
            config: scheduler.config,
            metrics: scheduler.metrics,
            jobs: scheduler.jobs,
            all_jobs: scheduler.all_jobs,
            gated: scheduler.gated,
            live_policy: scheduler.live_policy,
            proposal_spec: scheduler.proposal_spec,
            catalog: scheduler.catalog,
            shutdown,
            in_flight: InFlight::new(),
            busy: Mutex::new(HashSet::new()),
            ready: AtomicBool::new(ready),
        }
    }

    /// From now on jobs fire (see `SchedulerConfig::away_at_start`).
    pub fn set_ready(&self) {
        self.ready.store(true, Ordering::Release);
    }

    /// Whether jobs may fire (the database answered since start).
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// The catch-up of a `previous: day` job on start: fires it for `at`, its last occurrence,
    /// unless that execution is already finished.
    pub async fn catch_up(&self, idx: usize, at: DateTime<Utc>) {
        let job = &self.jobs[idx].job;
        let Ok(plan) = Plan::new(job, Asked::at(at)) else {
            return;
        };
        let key = plan.key;
        if let Ok(Some(e)) = execution::load(&self.pool, &key).await {
            if e.state == State::Finished {
                tracing::debug!(job = %job.name, execution = %key, "last fire already done; nothing to catch up");
                return;
            }
            if stopped_by_a_person(&e) {
                tracing::info!(job = %job.name, execution = %key, "last fire was stopped from the console; it waits to be resumed");
                return;
            }
        }
        tracing::info!(job = %job.name, execution = %key, fire = %at, "catching up the last fire, missed or unfinished");
        self.fire(idx, at).await;
    }

    /// Fires job `idx` for the occurrence `at`, unless shutdown began, the job is already firing
    /// in this process, or another process holds its lock.
    pub async fn fire(&self, idx: usize, at: DateTime<Utc>) {
        let Some(_running) = self.in_flight.enter(&self.shutdown) else {
            return;
        };
        let job = &self.jobs[idx].job;
        let Some(_busy) = self.claim(&job.name) else {
            tracing::debug!(job = %job.name, "the previous fire is still running; skipping this tick");
            return;
        };
        if matches!(job.kind, JobKind::Live(_)) {
            return;
        }
        if !self.ready.load(Ordering::Acquire) {
            tracing::warn!(job = %job.name, "the database has not answered since serve started; retrying at the next tick");
            self.metrics.record_run(&job.name, RunOutcome::Failed);
            return;
        }
        let lock = match JobLock::try_acquire(
            &self.database_url,
            &job.name,
            self.config.lock_timeout,
        )
        .await
        {
            Ok(Some(lock)) => lock,
            Ok(None) => {
                tracing::debug!(job = %job.name, "another process is running this job; skipping this tick");
                self.metrics
                    .record_run(&job.name, RunOutcome::LockedElsewhere);
                return;
            }
            Err(e) => {
                tracing::warn!(job = %job.name, error = %e, "could not take the job's lock; retrying at the next tick");
                self.metrics.record_run(&job.name, RunOutcome::Failed);
                return;
            }
        };
        match &job.kind {
            JobKind::Replay(replay) => self.fire_replay(job, replay, at).await,
            JobKind::Sweep(sweep) => {
                self.fire_sweep(job, sweep, lock.lease()).await;
            }
            JobKind::Report(report_job) => {
                let started = Utc::now();
                let ran = crate::services::report::fire(
                    &self.pool,
                    job,
                    report_job,
                    at,
                    &self.gated,
                    &self.config.mail,
                )
                .await;
                self.record_plain(&job.name, ran);
                let detail = (!ran).then_some(RunDetail::SeeLog);
                self.record_job_run(&job.name, started, ran, detail).await;
            }
            JobKind::Verify(verify_job) => self.fire_verify(job, verify_job, at).await,
            JobKind::Rebuild(rebuild_job) => self.fire_rebuild(job, rebuild_job).await,
            JobKind::Live(_) => {}
        }
        lock.release().await;
    }

    /// A rebuild fire: as far as `replay-ledger rebuild` goes now (build, follow, compare, or the
    /// swap of an approved comparison); progress lines go to the log.
    async fn fire_rebuild(&self, job: &Job, rebuild_job: &replay_ledger_core::config::RebuildJob) {
        use replay_ledger_core::services::rebuild::{self, Outcome, RebuildConfig};
        let started = Utc::now();
        let mut config = RebuildConfig::default();
        if let Some(chunk) = rebuild_job.chunk {
            config.chunk = chunk;
        }
        let name = job.name.clone();
        let mut say = |line: &str| tracing::info!(job = %name, "{line}");
        let ran = rebuild::run(&self.pool, &config, &self.shutdown, &mut say).await;
        let detail = match &ran {
            Ok(Outcome::Compared(c)) => RunDetail::RebuildCompared {
                orders_differing: c.orders_differing,
                fingerprint: c.fingerprint.clone(),
            },
            Ok(Outcome::AwaitingApproval { fingerprint, .. }) => RunDetail::RebuildAwaiting {
                fingerprint: fingerprint.clone(),
            },
            Ok(Outcome::Swapped { approval, .. }) => RunDetail::RebuildSwapped {
                approval: *approval,
            },
            Err(e) => {
                tracing::warn!(job = %job.name, error = %e, "rebuild did not finish; it resumes at the next tick");
                RunDetail::Failed {
                    error: e.to_string(),
                }
            }
        };
        self.record_plain(&job.name, ran.is_ok());
        self.record_job_run(&job.name, started, ran.is_ok(), Some(detail))
            .await;
    }

    /// A verify fire: the lookback days checked; for each day found wrong a proposal (unless
    /// `propose: false`) whose simulation runs here; finance mailed when days differ, each day
    /// linking to its proposal's simulation; the figures kept for `/metrics`.
    async fn fire_verify(
        &self,
        job: &Job,
        verify_job: &replay_ledger_core::config::VerifyJob,
        at: DateTime<Utc>,
    ) {
        let started = Utc::now();
        let ran = self.verify_and_propose(job, verify_job, at).await;
        let detail = match &ran {
            Ok(run) => {
                let t = &run.findings.totals;
                self.metrics.record_verify(
                    &job.name,
                    Utc::now(),
                    t.orders_wrong,
                    t.orders_missing,
                    t.effects_missing,
                );
                Some(RunDetail::Verify {
                    days_differing: run.findings.differing().count() as u64,
                    proposals: run.proposals as u64,
                })
            }
            Err(e) => {
                tracing::warn!(job = %job.name, error = %e, "verify run failed; retrying at the next tick");
                Some(RunDetail::SeeLog)
            }
        };
        self.record_plain(&job.name, ran.is_ok());
        self.record_job_run(&job.name, started, ran.is_ok(), detail)
            .await;
    }

    async fn verify_and_propose(
        &self,
        job: &Job,
        verify_job: &replay_ledger_core::config::VerifyJob,
        at: DateTime<Utc>,
    ) -> anyhow::Result<crate::services::verify::job::VerifyRun> {
        use crate::services::verify::{job as verify, propose};
        let mailer = crate::services::report::Mailer::from_settings(&self.config.mail)?;
        let policy = self.live_policy.clone();
        let findings = verify::check(&self.pool, job, verify_job, policy, at).await?;
        let mut proposed = Vec::new();
        if verify_job.propose && !findings.clean {
            match &self.proposal_spec {
                Some(spec) => {
                    let spec = crate::services::verify::EmitSpec {
                        timezone: job.timezone,
                        ..spec.clone()
                    };
                    proposed = propose::propose(
                        &self.pool,
                        job,
                        &verify_job.report_to,
                        &findings,
                        &spec,
                        &self.catalog,
                        &self.all_jobs,
                    )
                    .await?;
                    for p in &proposed {
                        if let Some(plan) = &p.simulate {
                            self.simulate_proposal(plan).await;
                        }
                    }
                }
                None => {
                    tracing::warn!(job = %job.name, "days differ, but no correction is proposed: proposals take the `kind: live` job's policy, and the jobs directory has none");
                }
            }
        }
        verify::mail(
            &self.pool, job, verify_job, at, findings, &proposed, &mailer,
        )
        .await
    }

    /// Runs a proposal's simulation under its job's lock, as a fire of that job would. Its report
    /// is not mailed: the verify's own message announces it.
    async fn simulate_proposal(&self, plan: &Plan) {
        let mut plan = plan.clone();
        plan.replay.report_to.clear();
        let lock =
            JobLock::try_acquire(&self.database_url, &plan.job.name, self.config.lock_timeout);
        let Ok(Some(lock)) = lock.await else {
            tracing::info!(job = %plan.job.name, "the proposal's job is held by another process; its simulation runs at the next verify");
            return;
        };
        let (outcome, _, _) = self.run_replay(&plan).await;
        tracing::info!(job = %plan.job.name, execution = %plan.key, ?outcome, "simulated a proposed correction");
        lock.release().await;
    }

    /// The job named `name`: the jobs directory's, else a verify job's proposal (read against
    /// the directory's effect types); `None` when neither has it or the proposal cannot be read.
    pub(super) async fn job_named(&self, name: &str) -> Option<Job> {
        if let Some(job) = self.all_jobs.iter().find(|j| j.name == name) {
            return Some(job.clone());
        }
        match crate::services::verify::propose::find(&self.pool, name, &self.catalog).await {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(job = %name, error = %e, "a proposal could not be read");
                None
            }
        }
    }

    pub(super) fn claim(&self, name: &str) -> Option<Busy<'_>> {
        let mut busy = self.busy.lock().unwrap_or_else(|e| e.into_inner());
        busy.insert(name.to_string()).then(|| Busy {
            set: &self.busy,
            name: name.to_string(),
        })
    }

    /// A replay fire: first the unfinished executions of earlier days (a `previous: day` job's
    /// failed night is retried at the next fire, not forgotten), then this fire's execution.
    async fn fire_replay(&self, job: &Job, replay: &ReplayJob, at: DateTime<Utc>) {
        let Ok(plan) = Plan::new(job, Asked::at(at)) else {
            return;
        };
        if replay.window == WindowSpec::PreviousDay {
            for earlier in self.unfinished_earlier_days(&plan, at).await {
                if self.shutdown.is_triggered() {
                    return;
                }
                self.run_replay(&earlier).await;
            }
        }
        if self.shutdown.is_triggered() {
            return;
        }
        if let Ok(Some(e)) = execution::load(&self.pool, &plan.key).await {
            if stopped_by_a_person(&e) {
                tracing::info!(job = %job.name, execution = %plan.key, "stopped from the console; it waits to be resumed (the console's Retomar, or `run`)");
                return;
            }
        }
        self.run_replay(&plan).await;
    }

    /// The plans of the unfinished executions of the job of `current` whose day ended within
    /// `retry_window` before `at`, oldest first.
    async fn unfinished_earlier_days(&self, current: &Plan, at: DateTime<Utc>) -> Vec<Plan> {
        let job = &current.job;
        let since = at - chrono::Duration::from_std(self.config.retry_window).unwrap_or_default();
        let executions = match execution::list(&self.pool).await {
            Ok(list) => list,
            Err(e) => {
                tracing::debug!(job = %job.name, error = %e, "could not list earlier executions");
                return Vec::new();
            }
        };
        let mut plans: Vec<Plan> = executions
            .into_iter()
            .filter(|e| {
                e.job == job.name
                    && e.mode == current.mode
                    && e.state != State::Finished
                    && !stopped_by_a_person(e)
                    && e.key != current.key
                    && e.window_to.is_some_and(|to| to >= since && to <= at)
            })
            .filter_map(|e| Plan::of_execution(job, &e))
            .collect();
        plans.sort_by_key(|p| p.window.to);
        plans
    }

    /// Runs the execution of `plan` and records how it went; returns the outcome, one line
    /// saying it (what a console request shows), and whether it stopped because someone asked
    /// from the console.
    pub(super) async fn run_replay(&self, plan: &Plan) -> (RunOutcome, String, bool) {
        let (job, key) = (&plan.job, &plan.key);
        let before = match execution::load(&self.pool, key).await {
            Ok(existing) => existing.map(|e| e.pass_summary).unwrap_or_default(),
            Err(e) => {
                tracing::warn!(job = %job.name, execution = %key, error = %e, "replay not started: database unavailable; retrying at the next tick");
                self.metrics.record_run(&job.name, RunOutcome::Failed);
                return (
                    RunOutcome::Failed,
                    "o banco de dados não respondeu; nada foi executado".into(),
                    false,
                );
            }
        };
        let config = RunnerConfig {
            started_by: self.config.started_by.clone(),
            retries: replay_ledger_core::engine::applier::Retries {
                stale_after: self.config.stale_after,
                ..Default::default()
            },
            progress: false,
            ..RunnerConfig::default()
        };
        let runner::RunEnd { result, execution } = runner::run_to_end(
            &self.pool,
            &self.database_url,
            plan,
            self.effects.clone(),
            config,
            self.shutdown.clone(),
        )
        .await;
        let locked = matches!(result, Err(RunError::Locked(_)));
        let after = match (&result, execution) {
            (Ok(report), _) => Some(report.summary.clone()),
            // Another process runs it: what it does is not this run's work.
            (Err(_), _) if locked => None,
            // Failed: the pass as this process closed it.
            (Err(_), Some(e)) => Some(e.pass_summary),
            // Failed before it closed the pass (or lost it to another process): as stored.
            (Err(_), None) => execution::load(&self.pool, key)
                .await
                .ok()
                .flatten()
                .map(|e| e.pass_summary),
        };
        if let Some(after) = after {
            self.metrics
                .add_work(&job.name, &difference(&after, &before));
        }
        let said = super::said::said(&result);
        let asked = matches!(&result, Ok(r) if r.stopped_by.is_some());
        let ran = result.as_ref().ok().cloned();
        let outcome = log_outcome(&job.name, key, result);
        if let (RunOutcome::Finished, Some(ran)) = (outcome, &ran) {
            self.metrics.record_success(&job.name, Utc::now());
            self.mail_report(plan, ran).await;
        }
        self.metrics.record_run(&job.name, outcome);
        (outcome, said, asked)
    }

    /// `report_to`: the finished execution's report, sent once (the ledger keeps it from being
    /// sent twice; a failed send is retried by the next fire that finds it finished).
    async fn mail_report(&self, plan: &Plan, ran: &RunReport) {
        let (job, replay, key) = (&plan.job, &plan.replay, &plan.key);
        if replay.report_to.is_empty() {
            return;
        }
        let sent = match crate::services::report::Mailer::from_settings(&self.config.mail) {
            Ok(mailer) => crate::services::report::after_run(
                &self.pool,
                job,
                replay,
                ran,
                Utc::now(),
                &mailer,
            )
            .await
            .map(|_| ())
            .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        if let Err(e) = sent {
            tracing::warn!(job = %job.name, execution = %key, error = %e, "the execution's report was not sent; retrying at the next tick");
        }
    }

    /// Records a fire that either ran (`finished`) or failed.
    fn record_plain(&self, job: &str, ran: bool) {
        if ran {
            self.metrics.record_run(job, RunOutcome::Finished);
            self.metrics.record_success(job, Utc::now());
        } else {
            self.metrics.record_run(job, RunOutcome::Failed);
        }
    }

    /// Stores when a sweep or report job last ran, for `status`; a failure to store it is logged.
    async fn record_job_run(
        &self,
        job: &str,
        started_at: DateTime<Utc>,
        ok: bool,
        detail: Option<RunDetail>,
    ) {
        let run = super::runs::JobRun {
            job: job.to_string(),
            started_at,
            finished_at: Utc::now(),
            state: if ok { State::Finished } else { State::Failed },
            detail: detail.as_ref().map(RunDetail::english),
            data: detail,
        };
        if let Err(e) = super::runs::record(&self.pool, &run).await {
            tracing::warn!(job, error = %e, "could not record the job's run for status");
        }
    }

    /// A sweep fire: one sweeper pass. Returns whether it ran, and its counts or why not.
    /// A sweep fire: one pass, making no new call once the lease of the job's lock lapsed.
    pub(super) async fn fire_sweep(
        &self,
        job: &Job,
        sweep: &SweepJob,
        lease: &Lease,
    ) -> (bool, RunDetail) {
        let started = Utc::now();
        let config = SweeperConfig {
            stale_after: sweep.stale_after,
            ..SweeperConfig::default()
        };
        let result = match Sweeper::new(self.pool.clone(), self.effects.clone(), config) {
            Ok(sweeper) => sweeper.under_lease(lease.clone()).run_once().await,
            Err(e) => Err(e),
        };
        match &result {
            Ok(outcome) => {
                self.metrics.add_sweep(outcome);
                tracing::debug!(job = %job.name, ?outcome, "sweep pass done");
            }
            Err(e) => {
                tracing::warn!(job = %job.name, error = %e, "sweep failed; retrying at the next tick");
            }
        }
        self.record_plain(&job.name, result.is_ok());
        let detail = match &result {
            Ok(o) => RunDetail::Sweep {
                retaken: o.retaken,
                completed: o.completed,
                uncertain: o.uncertain,
                resent: o.resent,
            },
            Err(e) => RunDetail::Failed {
                error: replay_ledger_core::shared::text::inert(&e.to_string()),
            },
        };
        self.record_job_run(&job.name, started, result.is_ok(), Some(detail.clone()))
            .await;
        (result.is_ok(), detail)
    }
}

/// An execution someone stopped from the console: a fire leaves it for a person to resume (the
/// console's Retomar, or `run`), which clears the ask.
fn stopped_by_a_person(e: &execution::Execution) -> bool {
    e.state == State::Interrupted && e.interrupt_asked_by.is_some()
}

/// Logs how a replay run ended, with why when it failed, and names the outcome.
fn log_outcome(job: &str, key: &str, result: Result<RunReport, RunError>) -> RunOutcome {
    match result {
        Ok(report) => match report.ended {
            Ended::Finished => {
                tracing::info!(job, execution = key, events = report.events_this_run, effects = ?report.summary.effects, "replay finished");
                RunOutcome::Finished
            }
            Ended::AlreadyFinished { .. } => {
                tracing::debug!(job, execution = key, "already finished; nothing to do");
                RunOutcome::AlreadyFinished
            }
            Ended::Interrupted => {
                match &report.stopped_by {
                    Some(by) => {
                        tracing::info!(job, execution = key, checkpoint = ?report.checkpoint, asked_by = %by, "replay stopped as asked from the console; it waits to be resumed (the console's Retomar, or `run`)");
                    }
                    None => {
                        tracing::info!(job, execution = key, checkpoint = ?report.checkpoint, "replay stopped by shutdown; the next fire or `run` resumes it");
                    }
                }
                RunOutcome::Interrupted
            }
        },
        Err(RunError::Locked(LockError::Held { holder, .. })) => {
            tracing::info!(job, execution = key, %holder, "the execution is being run by another process; skipping this tick");
            RunOutcome::LockedElsewhere
        }
        Err(e) => {
            tracing::warn!(job, execution = key, error = %e, "replay failed; retrying at the next tick");
            RunOutcome::Failed
        }
    }
}

/// What a run added to an execution's counts: `after - before`, per count (summaries are
/// cumulative per execution, across processes and runs).
pub(super) fn difference(after: &Summary, before: &Summary) -> Summary {
    let mut delta = Summary {
        events_read: after.events_read.saturating_sub(before.events_read),
        events_upcast: after.events_upcast.saturating_sub(before.events_upcast),
        ..Summary::default()
    };
    for (reason, n) in &after.rejected_by_reason {
        let was = before.rejected_by_reason.get(reason).copied().unwrap_or(0);
        delta.count_rejected(reason, n.saturating_sub(was));
    }
    for (outcome, n) in &after.effects {
        let was = before.effects.get(outcome).copied().unwrap_or(0);
        delta.count_effect(*outcome, n.saturating_sub(was));
    }
    delta
}

/// Marks a job as firing in this process until dropped.
pub(super) struct Busy<'a> {
    set: &'a Mutex<HashSet<String>>,
    name: String,
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.set
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.name);
    }
}

/// The fires running now, so shutdown can wait for them; closed to new ones once shutdown began.
pub(super) struct InFlight(Arc<Semaphore>);

/// More fires than can ever run at once.
const MAX_IN_FLIGHT: u32 = 1 << 20;

impl InFlight {
    fn new() -> Self {
        InFlight(Arc::new(Semaphore::new(MAX_IN_FLIGHT as usize)))
    }

    /// A token for one fire; `None` once shutdown began.
    pub fn enter(&self, shutdown: &Shutdown) -> Option<OwnedSemaphorePermit> {
        let permit = Arc::clone(&self.0).try_acquire_owned().ok()?;
        // Checked after taking the token: a shutdown that began before this check finds the
        // token taken and waits for it in `drain`.
        (!shutdown.is_triggered()).then_some(permit)
    }

    /// Resolves once every fire that entered has ended.
    pub async fn drain(&self) {
        let _ = self.0.acquire_many(MAX_IN_FLIGHT).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_difference_of_two_summaries_is_what_the_run_added() {
        let mut before = Summary {
            events_read: 100,
            ..Summary::default()
        };
        before.count_effect(
            replay_ledger_core::shared::summary::EffectOutcome::Applied,
            40,
        );
        let mut after = Summary {
            events_read: 250,
            ..Summary::default()
        };
        after.count_effect(
            replay_ledger_core::shared::summary::EffectOutcome::Applied,
            90,
        );
        after.count_effect(
            replay_ledger_core::shared::summary::EffectOutcome::AlreadyRegistered,
            10,
        );

        let delta = difference(&after, &before);

        assert_eq!(delta.events_read, 150);
        assert_eq!(
            delta
                .effects
                .get(&replay_ledger_core::shared::summary::EffectOutcome::Applied),
            Some(&50)
        );
        assert_eq!(
            delta
                .effects
                .get(&replay_ledger_core::shared::summary::EffectOutcome::AlreadyRegistered),
            Some(&10)
        );
    }
}
