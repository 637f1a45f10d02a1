//! The live consumer (`replay-ledger consume`): follows `evento_arquivado` as it grows, through
//! the same applier as a replay, with execution id `ao-vivo` and the policy of a `kind: live` job.
//!
//! It reads in (inserting transaction, `posicao`) order and only below the oldest transaction still
//! running, so an event whose transaction commits after a later `posicao` was committed is never
//! skipped (see the migration that adds `xid_insercao`). The price is latency: an event is seen
//! once every transaction that started before it has ended — a long transaction anywhere in the
//! database holds the consumer back for as long as it stays open.
//!
//! It wakes on `LISTEN evento_arquivado` (a trigger notifies per insert statement) and polls as a
//! fallback. A failure never stops it: a lost database is waited for, a provider that keeps
//! failing is retried after a pause, and after any error it settles its own reservations as a
//! restart would before trying again. Only an invalid event under `on_invalid_event: stop` halts it.

use std::time::Duration;

use sqlx::postgres::PgListener;
use sqlx::PgPool;

use crate::applier::{Policy, Retries};
use crate::archive::{self, LivePosition};
use crate::config::{Job, LiveJob, OnInvalidEvent};
use crate::db;
use crate::effects::Effects;
use crate::execution::{self, LockError, Mode, State};
use crate::held::{Held, HeldSpec, RecoverError};
use crate::runner::RunError;
use crate::shutdown::Shutdown;
use crate::summary::Summary;
use crate::tally::Scope;

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
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        let runner = crate::runner::RunnerConfig::default();
        ConsumerConfig {
            from_start: false,
            poll: Duration::from_secs(1),
            failure_pause: Duration::from_secs(5),
            retries: runner.retries,
            started_by: runner.started_by,
        }
    }
}

/// What a consumer did until it stopped.
#[derive(Debug, Clone, Default)]
pub struct ConsumeReport {
    pub summary: Summary,
    pub events_this_run: u64,
    pub checkpoint: Option<LivePosition>,
}

/// Follows the archive until shutdown.
pub async fn consume(
    pool: &PgPool,
    database_url: &str,
    job: &Job,
    live: &LiveJob,
    effects: Effects,
    config: ConsumerConfig,
    shutdown: Shutdown,
) -> Result<ConsumeReport, RunError> {
    let key = LIVE_EXECUTION;
    let spec = HeldSpec {
        key,
        execution_id: key,
        mode: Mode::Live,
        policy: Policy::from(live),
        retries: config.retries,
        partition: None,
        role: "consume",
    };
    let mut held = Held::take(pool, database_url, spec, effects).await?;
    let (pass, started_at) =
        execution::ensure_live(pool, key, &job.name, &config.started_by).await?;
    // Everything the live execution did since it first started is its own, so every batch may
    // meet keys it sent in an earlier attempt.
    held.begin(Scope::whole(key, pass), started_at, true);
    let summary = execution::load(pool, key)
        .await?
        .map(|e| e.summary)
        .unwrap_or_default();
    let position = match held.stored::<LivePosition>().await? {
        Some(position) => position,
        None => start_position(pool, &Scope::whole(key, pass), config.from_start).await?,
    };
    tracing::info!(
        execution = key,
        xid = position.xid,
        posicao = position.posicao,
        "live consumer starting"
    );
    if let Err(err) = held.settle_own().await {
        tracing::warn!(error = %err, "could not settle abandoned reservations yet");
    }
    let consumer = Consumer {
        pool,
        live,
        config,
        listener: listen(pool).await,
        held,
        shutdown,
        position,
        report: ConsumeReport {
            summary,
            ..ConsumeReport::default()
        },
    };
    consumer.run().await
}

/// The consumer while it runs: what it holds and where it stands.
struct Consumer<'a> {
    pool: &'a PgPool,
    live: &'a LiveJob,
    config: ConsumerConfig,
    listener: Option<PgListener>,
    held: Held,
    shutdown: Shutdown,
    position: LivePosition,
    report: ConsumeReport,
}

impl Consumer<'_> {
    async fn run(mut self) -> Result<ConsumeReport, RunError> {
        while !self.shutdown.is_triggered() {
            if !self.held.still_held().await {
                tracing::warn!(
                    execution = LIVE_EXECUTION,
                    "lost the consumer's lock (database connection dropped); taking it again"
                );
                self.recover().await?;
                continue;
            }
            self.step().await?;
        }
        let _ = execution::finish(self.pool, LIVE_EXECUTION, State::Interrupted, None).await;
        if let Ok(Some(e)) = execution::load(self.pool, LIVE_EXECUTION).await {
            self.report.summary = e.summary;
        }
        self.held.release().await;
        Ok(self.report)
    }

    /// Reads, applies and checkpoints one batch, or waits for one. Errors are waited out; only an
    /// invalid event under `on_invalid_event: stop` (or a lock taken by another process) ends it.
    async fn step(&mut self) -> Result<(), RunError> {
        let batch = match archive::read_live(self.pool, self.position, self.live.batch_size).await {
            Ok(batch) => batch,
            Err(err) => {
                tracing::warn!(error = %err, "reading the archive failed; retrying");
                pause(&mut self.shutdown, self.config.failure_pause).await;
                return Ok(());
            }
        };
        let Some(&(_, last_xid)) = batch.last() else {
            wait_for_events(&mut self.listener, &mut self.shutdown, self.config.poll).await;
            return Ok(());
        };
        let events: Vec<_> = batch.into_iter().map(|(event, _)| event).collect();
        let last = LivePosition {
            xid: last_xid,
            posicao: events[events.len() - 1].posicao,
        };
        let outcome = match self
            .held
            .applier()
            .apply_batch(&events, &self.shutdown)
            .await
        {
            Ok(outcome) => outcome,
            Err(err) => {
                tracing::warn!(error = %err, "applying a batch failed; settling and retrying");
                pause(&mut self.shutdown, self.config.failure_pause).await;
                return self.recover().await;
            }
        };
        if let Some(rejected) = outcome.halted_on {
            if self.live.on_invalid_event == OnInvalidEvent::Stop {
                let (pool, erro) = (self.pool, Some(rejected.erro.as_str()));
                execution::finish(pool, LIVE_EXECUTION, State::Failed, erro).await?;
                return Err(RunError::InvalidEvent(rejected));
            }
        }
        if outcome.failure.is_some() || outcome.settled_through != Some(last.posicao) {
            // A provider kept failing (its key released) or shutdown came mid-batch: the
            // checkpoint stays, and the batch is read again.
            if let Some(failure) = outcome.failure {
                tracing::warn!(key = %failure.key, class = %failure.class, "effect failed after retries; the batch will be retried");
                pause(&mut self.shutdown, self.config.failure_pause).await;
            }
            return Ok(());
        }
        self.report.summary.add(&outcome.summary);
        self.report.events_this_run += outcome.summary.events_read;
        self.advance(last, &outcome.summary).await;
        Ok(())
    }

    /// Stores the checkpoint and adds the batch's figures; a failure leaves the batch to be read
    /// again.
    async fn advance(&mut self, last: LivePosition, batch: &Summary) {
        let (pool, scope) = (self.pool, &self.held.applier().config().pass.tally);
        let saved = db::retry(
            "advance checkpoint",
            self.config.retries.db_backoff,
            || async {
                let mut tx = pool.begin().await?;
                execution::advance_live(&mut tx, scope, last, batch).await?;
                tx.commit().await
            },
        )
        .await;
        match saved {
            Ok(()) => self.position = last,
            Err(err) => {
                tracing::warn!(error = %err, "could not store the checkpoint; the batch will be read again");
            }
        }
        self.report.checkpoint = Some(self.position);
    }

    /// [`Held::recover`], then the stored checkpoint. A database still away is waited for (the
    /// consumer never stops for it); a lock taken by another process ends the consumer.
    async fn recover(&mut self) -> Result<(), RunError> {
        match self.held.recover().await {
            Ok(()) => {
                if let Ok(Some(stored)) = self.held.stored().await {
                    self.position = stored;
                }
                Ok(())
            }
            Err(RecoverError::Lock(err @ LockError::Held { .. })) => Err(err.into()),
            Err(err) => {
                tracing::warn!(error = %err, "could not recover yet; trying again");
                pause(&mut self.shutdown, self.config.failure_pause).await;
                Ok(())
            }
        }
    }
}

/// Without a checkpoint: the start of the archive (`--from-start`) or "now", stored at once.
async fn start_position(
    pool: &PgPool,
    scope: &Scope,
    from_start: bool,
) -> Result<LivePosition, sqlx::Error> {
    let start = if from_start {
        LivePosition {
            xid: 0,
            posicao: i64::MIN,
        }
    } else {
        archive::live_horizon(pool).await?
    };
    let mut conn = pool.acquire().await?;
    execution::advance_live(&mut conn, scope, start, &Summary::default()).await?;
    Ok(start)
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
