//! The live consumer (`replay-ledger consume`): follows `evento_arquivado` as it grows, through
//! the same applier as a replay, with execution id `ao-vivo` and the policy of a `kind: live` job.
//!
//! It works in rounds. A round takes a snapshot of the server (`pg_current_snapshot()`) and reads,
//! in (inserting transaction, `posicao`) order, the events of every transaction that snapshot
//! sees ended and the last round's did not ([`archive::snapshot::newly_visible`]): an event is
//! applied as soon as its transaction commits, whatever transaction is still open elsewhere on
//! the server, and one whose transaction commits after a later `posicao` is read in the round
//! after its commit — never skipped. What it applied is stored as that snapshot (plus the
//! round's cursor), with the tallies of each batch, in one transaction ([`state`]); the stored
//! checkpoint is the safe horizon, below the oldest transaction still running ([`horizon`] says
//! which one holds it).
//! The applier is idempotent (version guard, ledger), so a batch read again after a crash before
//! its commit changes nothing and sends nothing twice, and its figures are counted once.
//!
//! It wakes on `LISTEN evento_arquivado` (a trigger notifies per insert statement) and polls as a
//! fallback. A failure never stops it: a lost database is waited for, a provider that keeps
//! failing is retried after a pause, and after any error it settles its own reservations as a
//! restart would before trying again. Only an invalid event under `on_invalid_event: stop` halts it.

pub mod horizon;
mod lag;
mod start;
pub mod state;

pub use lag::{lag, Lag, LAG_CAP};

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::PgListener;
use sqlx::PgPool;

use crate::config::{Job, LiveJob, OnInvalidEvent};
use crate::engine::applier::{ApplyError, Retries};
use crate::engine::effects::Effects;
use crate::services::counters::Metrics;
use crate::services::held::{Held, RecoverError};
use crate::services::runner::RunError;
use crate::shared::shutdown::Shutdown;
use crate::shared::summary::Summary;
use crate::tables::archive::snapshot::{newly_visible, Snapshot};
use crate::tables::archive::{self, LivePosition};
use crate::tables::db;
use crate::tables::execution::{self, LockError, State};
use start::Start;
use state::{LiveState, Round};

/// The live consumer's execution id, as in the seed.
pub const LIVE_EXECUTION: &str = "ao-vivo";

/// How the consumer works. Defaults: poll every second, pause 5 s after a failure.
#[derive(Debug, Clone)]
pub struct ConsumerConfig {
    /// Without a checkpoint: start at the beginning of the archive instead of at "now".
    pub from_start: bool,
    /// The longest wait for new events when no notification arrives.
    pub poll: Duration,
    /// Pause before retrying a batch that failed.
    pub failure_pause: Duration,
    /// Staleness of reservations, database and provider retries.
    pub retries: Retries,
    pub started_by: String,
    /// Where each applied batch's events and effects are counted for `/metrics`, if served.
    pub metrics: Option<Arc<Metrics>>,
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        let runner = crate::services::runner::RunnerConfig::default();
        ConsumerConfig {
            from_start: false,
            poll: Duration::from_secs(1),
            failure_pause: Duration::from_secs(5),
            retries: runner.retries,
            started_by: runner.started_by,
            metrics: None,
        }
    }
}

/// What a consumer did until it stopped.
#[derive(Debug, Clone, Default)]
pub struct ConsumeReport {
    /// The live execution's figures since it first started (its tallies).
    pub summary: Summary,
    /// What this process applied.
    pub this_run: Summary,
    pub events_this_run: u64,
    pub checkpoint: Option<LivePosition>,
}

/// Follows the archive until shutdown. A database away while it starts is waited for, as it is
/// once running; another process holding the live execution ends it.
pub async fn consume(
    pool: &PgPool,
    database_url: &str,
    job: &Job,
    live: &LiveJob,
    effects: Effects,
    config: ConsumerConfig,
    mut shutdown: Shutdown,
) -> Result<ConsumeReport, RunError> {
    loop {
        let started = Start {
            pool,
            database_url,
            job,
            live,
        }
        .begin(effects.clone(), config.clone(), shutdown.clone())
        .await;
        match started {
            Ok(consumer) => return consumer.run().await,
            Err(err) if away(&err) => {
                tracing::warn!(
                    database = %db::target(pool),
                    cause = %err.cause(pool).await,
                    "the live consumer cannot start yet: the database is away; trying again"
                );
                pause(&mut shutdown, config.failure_pause).await;
                if shutdown.is_triggered() {
                    return Ok(ConsumeReport::default());
                }
            }
            Err(err) => return Err(err),
        }
    }
}

/// A failure that waiting may cure: the database is unreachable or restarting.
fn away(err: &RunError) -> bool {
    match err {
        RunError::Database(e) | RunError::Locked(LockError::Database(e)) => db::is_transient(e),
        _ => false,
    }
}

/// The consumer while it runs: what it holds and where it stands.
struct Consumer<'a> {
    pool: &'a PgPool,
    job: &'a str,
    live: &'a LiveJob,
    config: ConsumerConfig,
    listener: Option<PgListener>,
    held: Held,
    shutdown: Shutdown,
    /// What is stored.
    state: LiveState,
    /// The round being read: the stored one, or one begun since and not stored yet.
    round: Option<Round>,
    report: ConsumeReport,
}

impl Consumer<'_> {
    async fn run(mut self) -> Result<ConsumeReport, RunError> {
        while !self.shutdown.is_triggered() {
            if let Err(err) = self.held.check().await {
                // The lock's connection dropped: another process may take the execution.
                self.lost("hold the consumer's lock", &err).await;
                self.recover().await?;
                continue;
            }
            self.step().await?;
        }
        let ended = execution::finish(self.pool, self.held.owner(), State::Interrupted, None);
        if let Ok(Some(e)) = ended.await {
            self.report.summary = e.summary;
        }
        self.report.checkpoint = Some(self.state.checkpoint);
        self.held.release().await;
        Ok(self.report)
    }

    /// Reads, applies and stores one batch of the round, ends the round, or waits for events.
    /// Errors are waited out; only an invalid event under `on_invalid_event: stop` (or a lock
    /// taken by another process) ends it.
    async fn step(&mut self) -> Result<(), RunError> {
        let round = match self.round.clone() {
            Some(round) => round,
            None => match state::current_snapshot(self.pool).await {
                Ok(snapshot) => Round {
                    snapshot,
                    after: self.state.checkpoint,
                },
                Err(err) => return self.read_failed(err).await,
            },
        };
        let ranges = newly_visible(&self.state.seen, &round.snapshot);
        let limit = self.live.batch_size;
        let batch = match archive::read_round(self.pool, &ranges, round.after, limit).await {
            Ok(batch) => batch,
            Err(err) => return self.read_failed(err).await,
        };
        let Some(&(_, last_xid)) = batch.last() else {
            self.end_round(round.snapshot).await;
            wait_for_events(&mut self.listener, &mut self.shutdown, self.config.poll).await;
            return Ok(());
        };
        let complete = batch.len() < limit as usize;
        let events: Vec<_> = batch.into_iter().map(|(event, _)| event).collect();
        let last = LivePosition {
            xid: last_xid,
            posicao: events[events.len() - 1].posicao,
        };
        let Some(summary) = self.apply(&events, last).await? else {
            return Ok(());
        };
        let next = match complete {
            true => self.ended(&round.snapshot),
            false => LiveState {
                round: Some(Round {
                    snapshot: round.snapshot,
                    after: last,
                }),
                ..self.state.clone()
            },
        };
        self.store(next, complete, &summary).await;
        Ok(())
    }

    async fn read_failed(&mut self, err: sqlx::Error) -> Result<(), RunError> {
        if db::is_transient(&err) {
            self.lost("read the archive", &err).await;
        } else {
            tracing::warn!(error = %err, "reading the archive failed; retrying");
        }
        pause(&mut self.shutdown, self.config.failure_pause).await;
        Ok(())
    }

    /// Applies a batch; its figures when every event of it is settled, else `None` (the batch is
    /// read again: a provider kept failing, shutdown came mid-batch, or the database failed).
    async fn apply(
        &mut self,
        events: &[crate::domain::Event],
        last: LivePosition,
    ) -> Result<Option<Summary>, RunError> {
        let applied = self
            .held
            .applier()
            .apply_batch(events, &self.shutdown)
            .await;
        let outcome = match applied {
            Ok(outcome) => outcome,
            Err(err) => {
                match &err {
                    ApplyError::Database(e) => self.lost("apply a batch", e).await,
                    other => {
                        tracing::warn!(error = %other, "applying a batch failed; settling and retrying");
                    }
                }
                pause(&mut self.shutdown, self.config.failure_pause).await;
                self.recover().await?;
                return Ok(None);
            }
        };
        if let Some(rejected) = outcome.halted_on {
            if self.live.on_invalid_event == OnInvalidEvent::Stop {
                let (pool, erro) = (self.pool, Some(rejected.erro.as_str()));
                execution::finish(pool, self.held.owner(), State::Failed, erro).await?;
                return Err(RunError::InvalidEvent(rejected));
            }
        }
        if outcome.failure.is_some() || outcome.settled_through != Some(last.posicao) {
            if let Some(failure) = outcome.failure {
                tracing::warn!(key = %failure.key, class = %failure.class, "effect failed after retries; the batch will be retried");
                pause(&mut self.shutdown, self.config.failure_pause).await;
            }
            return Ok(None);
        }
        Ok(Some(outcome.summary))
    }

    /// The state once `snapshot`'s round is done: everything it sees is applied.
    fn ended(&self, snapshot: &Snapshot) -> LiveState {
        LiveState {
            checkpoint: self.state.checkpoint,
            seen: snapshot.clone(),
            round: None,
        }
    }

    /// A round whose read came back empty: done. Stored when a batch of it was stored or the
    /// checkpoint can move; otherwise nothing changed that a restart would need.
    async fn end_round(&mut self, snapshot: Snapshot) {
        let stored_round = self.state.round.is_some();
        let below = archive::newest_below(self.pool, snapshot.xmin).await;
        let moves = matches!(below, Ok(Some(p)) if p > self.state.checkpoint);
        let next = self.ended(&snapshot);
        if stored_round || moves {
            self.store(next, true, &Summary::default()).await;
        } else {
            self.round = None;
            self.state = next;
        }
    }

    /// Stores `next` with the batch's figures (and, when its round is done, the checkpoint moved
    /// to the horizon), together; a failure leaves the batch to be read again.
    async fn store(&mut self, mut next: LiveState, round_done: bool, batch: &Summary) {
        let (pool, scope) = (self.pool, &self.held.applier().config().pass.tally);
        let owner = self.held.owner();
        let horizon = next.seen.xmin;
        let saved = db::retry(
            "store the live state",
            self.config.retries.db_backoff,
            || {
                let mut next = next.clone();
                async move {
                    let mut tx = pool.begin().await?;
                    if round_done {
                        if let Some(p) = archive::newest_below(&mut *tx, horizon).await? {
                            next.checkpoint = next.checkpoint.max(p);
                        }
                    }
                    state::save(&mut tx, owner, scope, &next, batch).await?;
                    tx.commit().await?;
                    Ok(next)
                }
            },
        )
        .await;
        match saved {
            Ok(stored) => next = stored,
            Err(err) => {
                let (database, cause) = loss(pool, &err).await;
                tracing::warn!(
                    %database,
                    %cause,
                    "could not store the live state; the batch will be read again"
                );
                return;
            }
        }
        self.report.summary.add(batch);
        self.report.this_run.add(batch);
        self.report.events_this_run += batch.events_read;
        if let Some(metrics) = &self.config.metrics {
            metrics.add_work(self.job, batch);
        }
        self.round = next.round.clone();
        self.state = next;
    }

    /// Says that the database was lost, as the runner does: which server, and why.
    async fn lost(&self, step: &str, err: &sqlx::Error) {
        let (database, cause) = loss(self.pool, err).await;
        tracing::warn!(
            execution = LIVE_EXECUTION,
            %database,
            %cause,
            step,
            "lost the database; recovering"
        );
    }

    /// [`Held::recover`], then the stored state. A database still away is waited for (the
    /// consumer never stops for it); a lock taken by another process ends the consumer.
    async fn recover(&mut self) -> Result<(), RunError> {
        match self.held.recover().await {
            Ok(()) => {
                if let Ok(Some(stored)) = self.held.stored::<LiveState>().await {
                    self.round = stored.round.clone();
                    self.state = stored;
                }
                Ok(())
            }
            Err(RecoverError::Lock(err @ LockError::Held { .. })) => Err(err.into()),
            Err(RecoverError::TakenOver(key)) => Err(RunError::TakenOver(key)),
            Err(err) => {
                match err.database() {
                    Some(e) => {
                        let (database, cause) = loss(self.pool, e).await;
                        tracing::warn!(%database, %cause, "lost the database; still recovering");
                    }
                    None => tracing::warn!(error = %err, "could not recover yet; trying again"),
                }
                pause(&mut self.shutdown, self.config.failure_pause).await;
                Ok(())
            }
        }
    }
}

/// A lost database in words: which server (`host:port/database`) and why.
async fn loss(pool: &PgPool, err: &sqlx::Error) -> (String, String) {
    (db::target(pool), db::explain_loss(pool, err).await)
}

async fn listen(pool: &PgPool) -> Option<PgListener> {
    let mut listener = PgListener::connect_with(pool).await.ok()?;
    listener.listen("evento_arquivado").await.ok()?;
    Some(listener)
}

/// Waits for a notification, the poll interval, or shutdown, whichever comes first.
async fn wait_for_events(
    listener: &mut Option<PgListener>,
    shutdown: &mut Shutdown,
    poll: Duration,
) {
    match listener {
        Some(l) => {
            tokio::select! {
                _ = l.recv() => {}
                _ = tokio::time::sleep(poll) => {}
                _ = shutdown.triggered() => {}
            }
        }
        None => pause(shutdown, poll).await,
    }
}

async fn pause(shutdown: &mut Shutdown, how_long: Duration) {
    tokio::select! {
        _ = tokio::time::sleep(how_long) => {}
        _ = shutdown.triggered() => {}
    }
}
