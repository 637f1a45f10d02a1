//! The batch loop of one execution (or partition) that this process holds: read a batch after
//! the checkpoint, apply it, move the checkpoint past whole settled batches (invariant
//! `checkpoint-after-settle`), with the next batches read and written while earlier ones' effects
//! are in flight.

use std::collections::VecDeque;
use std::future::Future;

use futures::stream::{FuturesOrdered, Stream, StreamExt};
use sqlx::PgPool;

use super::pass::Standing;
use super::progress::Progress;
use super::{Context, Ended, RunError, RunReport, RunnerConfig};
use crate::config::OnInvalidEvent;
use crate::domain::Event;
use crate::engine::applier::{ApplyError, BatchOutcome, StateTurn};
use crate::services::held::Held;
use crate::shared::shutdown::Shutdown;
use crate::shared::summary::Summary;
use crate::tables::archive::{self, Window};
use crate::tables::db;
use crate::tables::execution::{self, Interrupt};

/// The batch loop of one held execution over its window: reads batches after the checkpoint,
/// applies them `depth` at a time, and moves the checkpoint past whole, settled batches.
pub(super) struct Batches<'a> {
    pool: &'a PgPool,
    held: &'a Held,
    window: &'a Window,
    batch_size: u32,
    config: &'a RunnerConfig,
    shutdown: &'a Shutdown,
    report: &'a mut RunReport,
    progress: Progress,
    /// The last settled position; `None` before the window's first event (no position lies
    /// before one at i64::MIN, so "first - 1" cannot stand for it).
    checkpoint: Option<i64>,
    /// The first position not read yet; `None` past i64::MAX.
    read_from: Option<i64>,
    exhausted: bool,
    /// False once a batch could not be wholly settled: no later batch may move the checkpoint.
    advancing: bool,
    /// Why the loop stops reading, once it knows.
    stop: Option<Result<Ended, RunError>>,
}

impl<'a> Batches<'a> {
    /// Starts from where the pass stands (`from`: as the runner opened it, or as stored after a
    /// recovery).
    pub(super) async fn new(
        ctx: &Context<'a>,
        held: &'a Held,
        window: &'a Window,
        report: &'a mut RunReport,
        from: Standing,
    ) -> Result<Batches<'a>, RunError> {
        let (pool, config) = (ctx.pool, ctx.config);
        let key = report.checkpoint_key.clone();
        report.summary = from.summary;
        let checkpoint = from.checkpoint;
        let read_from = checkpoint.map_or(Some(window.first), |c| c.checked_add(1));
        let remaining = match read_from {
            Some(from) => archive::remaining(pool, window, from).await?,
            None => 0,
        };
        let mut progress = Progress::new(
            &key,
            window.count.max(0) as u64,
            (window.count - remaining).max(0) as u64,
            config.progress,
            held.applier().effects().clone(),
        );
        progress.publish_to(pool.clone(), held.applier().effects().clone());
        Ok(Batches {
            pool,
            held,
            window,
            batch_size: ctx.plan.replay.batch_size,
            config,
            shutdown: ctx.shutdown,
            report,
            progress,
            checkpoint,
            read_from,
            exhausted: read_from.is_none(),
            advancing: true,
            stop: None,
        })
    }

    /// Batches are applied `depth` at a time: the next one is read, decided and written while the
    /// current one's effects are in flight. Their outcomes come back in order, and the checkpoint
    /// moves only while every batch before has been wholly settled (invariant
    /// `checkpoint-after-settle`). Under `on_invalid_event: stop` no batch may run ahead of a halt,
    /// so one at a time.
    pub(super) async fn run(mut self) -> Result<Ended, RunError> {
        let applier = self.held.applier();
        let shutdown = self.shutdown;
        let depth = match applier.config().policy.on_invalid_event {
            OnInvalidEvent::Stop => 1,
            OnInvalidEvent::Record => self.config.pipeline_depth.max(1),
        };
        let mut in_flight = FuturesOrdered::new();
        let mut finished = VecDeque::new();
        // The state steps of the batches in flight commit in the order they were read.
        let mut last_turn = None;
        loop {
            while self.stop.is_none() && !self.exhausted && in_flight.len() + finished.len() < depth
            {
                let read =
                    driving(Box::pin(self.next_batch()), &mut in_flight, &mut finished).await;
                if let Some(events) = read {
                    let last = events[events.len() - 1].posicao;
                    let turn = StateTurn::next(&mut last_turn);
                    in_flight.push_back(async move {
                        let outcome = applier.apply_batch_in_turn(&events, shutdown, turn).await;
                        (last, outcome)
                    });
                }
            }
            let next = match finished.pop_front() {
                Some(batch) => Some(batch),
                None => in_flight.next().await,
            };
            let Some((last, outcome)) = next else {
                break;
            };
            let settle = Box::pin(self.settle(last, outcome));
            driving(settle, &mut in_flight, &mut finished).await;
        }
        self.progress.finish();
        match self.stop {
            Some(ended) => ended,
            None if self.shutdown.is_triggered() || !self.advancing => Ok(Ended::Interrupted),
            None => Ok(Ended::Finished),
        }
    }

    /// Reads the next batch, or records why there is none (the end of the window, shutdown, a
    /// lost lock, a database failure).
    async fn next_batch(&mut self) -> Option<Vec<Event>> {
        let Some(from) = self.read_from else {
            self.exhausted = true;
            return None;
        };
        if self.shutdown.is_triggered() {
            self.stop = Some(Ok(Ended::Interrupted));
            return None;
        }
        if !self.held.still_held().await {
            self.stop = Some(Err(RunError::LockLost(self.held.key().to_string())));
            return None;
        }
        let (pool, window, size) = (self.pool, self.window, self.batch_size);
        let read = db::retry("read batch", self.config.retries.db_backoff, || {
            archive::read_batch(pool, window, from, size)
        })
        .await;
        match read {
            Err(err) => {
                self.stop = Some(Err(err.into()));
                None
            }
            Ok(events) if events.is_empty() => {
                self.exhausted = true;
                None
            }
            Ok(events) => {
                self.read_from = events[events.len() - 1].posicao.checked_add(1);
                self.exhausted = self.read_from.is_none();
                Some(events)
            }
        }
    }

    /// Takes a batch's outcome, in order. The checkpoint moves by whole batches: past a batch
    /// once every event of it is settled (invariant `checkpoint-after-settle`), never into its
    /// middle, so a batch left partly unsettled (a failure, a stop) is read again as a whole by the
    /// run that resumes it, and the stored summary, which counts whole batches, counts each event
    /// once.
    async fn settle(&mut self, last: i64, outcome: Result<BatchOutcome, ApplyError>) {
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(err) => {
                self.advancing = false;
                self.stop.get_or_insert(Err(err.into()));
                return;
            }
        };
        self.report.events_this_run += outcome.summary.events_read;
        self.progress.advance(outcome.summary.events_read);
        if self.advancing && outcome.settled_through >= Some(last) {
            self.report.summary.add(&outcome.summary);
            match self.advance(last, &outcome.summary).await {
                Err(err) => {
                    self.advancing = false;
                    self.stop.get_or_insert(Err(err.into()));
                    return;
                }
                Ok(Interrupt { asked_by: Some(by) }) if self.stop.is_none() => {
                    tracing::info!(execution = %self.held.key(), asked_by = %by, checkpoint = last, "asked from the console to stop: stopping at this batch boundary");
                    self.report.stopped_by = Some(by);
                    self.stop = Some(Ok(Ended::Interrupted));
                }
                Ok(_) => {}
            }
            self.checkpoint = Some(last);
        } else {
            self.advancing = false;
        }
        self.report.checkpoint = self.checkpoint;
        tracing::debug!(execution = %self.held.key(), batch_last = last, checkpoint = ?self.checkpoint, "batch applied");
        if let Some(failure) = outcome.failure {
            self.stop
                .get_or_insert(Err(RunError::EffectFailed(failure)));
        }
        if let Some(rejected) = outcome.halted_on {
            self.stop
                .get_or_insert(Err(RunError::InvalidEvent(rejected)));
        }
    }

    /// Stores the checkpoint past the batch and adds the batch's figures, together, while this
    /// process still owns the execution (a fenced write fails and changes nothing).
    async fn advance(&self, last: i64, batch: &Summary) -> Result<Interrupt, sqlx::Error> {
        let (pool, scope) = (self.pool, &self.held.applier().config().pass.tally);
        let owner = self.held.owner();
        db::retry(
            "advance checkpoint",
            self.config.retries.db_backoff,
            || async {
                let mut tx = db::begin_relaxed(pool).await?;
                let asked = execution::advance(&mut tx, owner, scope, last, batch).await?;
                tx.commit().await?;
                Ok(asked)
            },
        )
        .await
    }
}

/// Runs `work` (reading the next batch, settling one) while the batches in flight go on: their
/// statements are sent and their effects performed meanwhile, and those that finish are kept, in
/// order, for the loop to settle. (The callers box `work`: held inline, it made a run's future
/// larger than the `large_futures` lint allows.)
async fn driving<T, S: Stream + Unpin>(
    work: impl Future<Output = T>,
    in_flight: &mut S,
    finished: &mut VecDeque<S::Item>,
) -> T {
    let mut work = std::pin::pin!(work);
    loop {
        tokio::select! {
            biased;
            out = &mut work => return out,
            Some(batch) = in_flight.next() => finished.push_back(batch),
        }
    }
}
