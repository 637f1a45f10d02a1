//! The runner: the batch loop of one execution. Takes the execution's lock, settles what an
//! earlier dead process of the same execution left reserved, then reads a batch after the
//! checkpoint, applies it and advances the checkpoint past the settled prefix, until the window
//! ends, an effect fails for good, an invalid event halts it, or shutdown is asked for (always
//! between batches).

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use crate::applier::{Applier, ApplierConfig, ApplyError, EffectFailure};
use crate::archive::{self, Window};
use crate::config::{Job, ReplayJob};
use crate::db::{self, Backoff};
use crate::effects::Effects;
use crate::execution::{self, ExecutionLock, LockError, Mode, NewPass, Rejected, Summary};
use crate::ledger::{self, Claim};
use crate::shutdown::Shutdown;

/// How a run behaves beyond what the job says.
#[derive(Debug, Clone)]
pub struct RunnerConfig {
    /// Overrides the job's `simulate` when `Some`.
    pub simulate: Option<bool>,
    /// Starts a new pass from the window's start.
    pub restart: bool,
    /// Who or what started it (`user@host`, `serve`).
    pub started_by: String,
    /// Stale reservations of idempotent types older than this are retaken.
    pub stale_after: Duration,
    pub db_backoff: Backoff,
    pub call_backoff: Backoff,
    /// Show a progress bar (when stderr is a terminal) or log progress lines.
    pub progress: bool,
    /// The clock for `window: { previous: day }`.
    pub now: DateTime<Utc>,
}

impl Default for RunnerConfig {
    fn default() -> Self {
        RunnerConfig {
            simulate: None,
            restart: false,
            started_by: format!(
                "{}@{}",
                std::env::var("USER").unwrap_or_else(|_| "unknown".into()),
                db::hostname()
            ),
            stale_after: Duration::from_secs(300),
            db_backoff: Backoff::default(),
            call_backoff: Backoff {
                attempts: 4,
                base: Duration::from_millis(250),
                max: Duration::from_secs(5),
            },
            progress: true,
            now: Utc::now(),
        }
    }
}

/// How a run ended without error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// The window is done.
    Finished,
    /// It was already finished before this run; nothing was done.
    AlreadyFinished { at: Option<DateTime<Utc>> },
    /// Stopped between batches on request; a rerun resumes.
    Interrupted,
}

/// What a run reports.
#[derive(Debug, Clone)]
pub struct RunReport {
    pub execution_id: String,
    pub checkpoint_key: String,
    pub mode: Mode,
    pub ended: Ended,
    /// The whole execution's counts (all passes of this pass, across processes).
    pub summary: Summary,
    pub checkpoint: Option<i64>,
    pub rejected: Vec<Rejected>,
    pub elapsed: Duration,
    /// Events handled by this process.
    pub events_this_run: u64,
}

/// Why a run stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Locked(#[from] LockError),
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    #[error(transparent)]
    Apply(#[from] ApplyError),
    #[error("effect {} of event {} (posicao {}) failed after retries: {}; its key was released and the checkpoint stays before it — rerun when the provider is back", .0.key, .0.evento_id, .0.posicao, .0.class)]
    EffectFailed(EffectFailure),
    #[error("invalid event {} (posicao {}) halted the run (on_invalid_event: stop): {}", .0.evento_id, .0.posicao, .0.erro)]
    InvalidEvent(Rejected),
    #[error("lost the lock on execution {0} (database connection dropped); stopped so that no two processes run it")]
    LockLost(String),
    #[error("job {0} is not a replay job")]
    NotReplay(String),
}

/// Runs a replay job to the end of its window (or to a stop), resuming from its checkpoint.
pub async fn run(
    pool: &PgPool,
    database_url: &str,
    job: &Job,
    replay: &ReplayJob,
    effects: Effects,
    config: RunnerConfig,
    shutdown: Shutdown,
) -> Result<RunReport, RunError> {
    let started = Instant::now();
    let resolved = job.resolve_window(&replay.window, config.now);
    let mode = if config.simulate.unwrap_or(replay.simulate) {
        Mode::Simulation
    } else {
        Mode::Real
    };
    let key = execution::checkpoint_key(&resolved.execution_id, mode);
    let mut lock = ExecutionLock::acquire(database_url, &key, "run").await?;
    let mut report = RunReport {
        execution_id: resolved.execution_id.clone(),
        checkpoint_key: key.clone(),
        mode,
        ended: Ended::Finished,
        summary: Summary::default(),
        checkpoint: None,
        rejected: Vec::new(),
        elapsed: Duration::ZERO,
        events_this_run: 0,
    };

    let existing = execution::load(pool, &key).await?;
    let window = match existing {
        Some(ref e) if e.state == "concluida" && !config.restart => {
            report.ended = Ended::AlreadyFinished { at: e.finished_at };
            report.summary = e.summary.clone();
            report.checkpoint = e.checkpoint;
            report.rejected = execution::rejected(pool, &key).await?;
            lock.release().await;
            return Ok(report);
        }
        Some(ref e) if !config.restart => {
            execution::resume(pool, &key).await?;
            report.summary = e.summary.clone();
            e.first.zip(e.last).map(|(first, last)| Window {
                from: e.window_from.unwrap_or(resolved.from),
                to: e.window_to.unwrap_or(resolved.to),
                first,
                last,
                count: e.total_events,
            })
        }
        _ => {
            let window = archive::bounds(pool, resolved.from, resolved.to).await?;
            if mode == Mode::Simulation {
                crate::commission::clear_diff(pool, &resolved.execution_id).await?;
            }
            execution::start_pass(
                pool,
                &NewPass {
                    key: &key,
                    job: &job.name,
                    mode,
                    window_from: resolved.from,
                    window_to: resolved.to,
                    window,
                    started_by: &config.started_by,
                },
            )
            .await?;
            window
        }
    };

    let claim = Claim::new(resolved.execution_id.clone());
    if mode == Mode::Real {
        let settled =
            ledger::settle_abandoned(pool, &claim.execution_id, &effects.idempotent_types())
                .await?;
        if !settled.released.is_empty() || !settled.uncertain.is_empty() {
            tracing::warn!(
                execution = %claim.execution_id,
                released = settled.released.len(),
                uncertain = settled.uncertain.len(),
                "settled reservations abandoned by an earlier process of this execution"
            );
        }
    }
    let applier = Applier::new(
        pool.clone(),
        ApplierConfig {
            claim,
            checkpoint_key: key.clone(),
            mode,
            policy: replay.effects.clone(),
            event_types: replay.event_types.clone(),
            on_invalid_event: replay.on_invalid_event,
            stale_after: config.stale_after,
            db_backoff: config.db_backoff,
            call_backoff: config.call_backoff,
        },
        effects,
    );

    let result = match window {
        Some(window) => {
            batch_loop(
                pool,
                &applier,
                &window,
                replay.batch_size,
                &config,
                &shutdown,
                &mut lock,
                &mut report,
            )
            .await
        }
        None => Ok(Ended::Finished),
    };
    report.elapsed = started.elapsed();
    let (state, error) = match &result {
        Ok(Ended::Interrupted) => ("interrompida", None),
        Ok(_) => ("concluida", None),
        Err(e) => ("falhou", Some(e.to_string())),
    };
    db::retry("finish", config.db_backoff, || {
        execution::finish(pool, &key, state, error.as_deref())
    })
    .await?;
    report.rejected = execution::rejected(pool, &key).await.unwrap_or_default();
    lock.release().await;
    report.ended = result?;
    Ok(report)
}

#[allow(clippy::too_many_arguments)]
async fn batch_loop(
    pool: &PgPool,
    applier: &Applier,
    window: &Window,
    batch_size: u32,
    config: &RunnerConfig,
    shutdown: &Shutdown,
    lock: &mut ExecutionLock,
    report: &mut RunReport,
) -> Result<Ended, RunError> {
    let key = report.checkpoint_key.clone();
    let mut checkpoint = execution::load(pool, &key)
        .await?
        .and_then(|e| e.checkpoint)
        .unwrap_or(window.first.saturating_sub(1));
    let remaining = archive::remaining(pool, window, checkpoint).await?;
    let mut progress = Progress::new(
        &key,
        window.count.max(0) as u64,
        (window.count - remaining).max(0) as u64,
        config.progress,
    );
    loop {
        if shutdown.is_triggered() {
            progress.finish();
            return Ok(Ended::Interrupted);
        }
        if !lock.still_held().await {
            return Err(RunError::LockLost(key));
        }
        let events = db::retry("read batch", config.db_backoff, || {
            archive::read_batch(pool, window, checkpoint, batch_size)
        })
        .await?;
        let Some(last) = events.last().map(|e| e.posicao) else {
            progress.finish();
            return Ok(Ended::Finished);
        };
        let outcome = applier.apply_batch(&events, shutdown).await?;
        report.summary.add(&outcome.summary);
        report.events_this_run += outcome.summary.events_read;
        let advanced_to = outcome
            .settled_through
            .unwrap_or(checkpoint)
            .max(checkpoint);
        db::retry("advance checkpoint", config.db_backoff, || async {
            let mut tx = pool.begin().await?;
            execution::advance(&mut tx, &key, advanced_to, &report.summary).await?;
            tx.commit().await
        })
        .await?;
        report.checkpoint = Some(advanced_to);
        progress.advance(outcome.summary.events_read);
        tracing::debug!(execution = %key, batch_last = last, checkpoint = advanced_to, events = events.len(), "batch applied");
        if let Some(failure) = outcome.failure {
            progress.finish();
            return Err(RunError::EffectFailed(failure));
        }
        if let Some(rejected) = outcome.halted_on {
            progress.finish();
            return Err(RunError::InvalidEvent(rejected));
        }
        checkpoint = advanced_to;
    }
}

/// Progress: a bar with events/s and ETA on a terminal, a log line every few seconds otherwise.
struct Progress {
    bar: Option<indicatif::ProgressBar>,
    key: String,
    total: u64,
    done: u64,
    started: Instant,
    start_done: u64,
    last_log: Instant,
}

impl Progress {
    fn new(key: &str, total: u64, done: u64, enabled: bool) -> Self {
        let bar = (enabled && std::io::stderr().is_terminal()).then(|| {
            let bar = indicatif::ProgressBar::new(total);
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "{msg} [{bar:40}] {pos}/{len} events  {per_sec}  ETA {eta}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            bar.set_message(key.to_string());
            bar.set_position(done);
            bar
        });
        Progress {
            bar,
            key: key.to_string(),
            total,
            done,
            started: Instant::now(),
            start_done: done,
            last_log: Instant::now(),
        }
    }

    fn advance(&mut self, n: u64) {
        self.done += n;
        if let Some(bar) = &self.bar {
            bar.set_position(self.done);
        } else if self.last_log.elapsed() >= Duration::from_secs(5) {
            self.last_log = Instant::now();
            let secs = self.started.elapsed().as_secs_f64().max(1e-3);
            let rate = (self.done - self.start_done) as f64 / secs;
            let eta = if rate > 0.0 {
                (self.total.saturating_sub(self.done) as f64 / rate).round() as u64
            } else {
                0
            };
            tracing::info!(execution = %self.key, done = self.done, total = self.total, events_per_s = rate.round() as u64, eta_s = eta, "progress");
        }
    }

    fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}
