//! Progress of a run: a bar with events/s, effects/s and ETA on a terminal, a log line every few
//! seconds otherwise; either says when an effect type's rate limit is what holds the run back.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlx::PgPool;

use crate::engine::effects::{CallCount, Effects};
use crate::tables::execution::progress;

/// How often the log line is written off a terminal.
const LOG_EVERY: Duration = Duration::from_secs(5);
/// How often the bar's effects/s is sampled on a terminal.
const SAMPLE_EVERY: Duration = Duration::from_secs(1);
/// How often the pace is published for the console.
pub(super) const PUBLISH_EVERY: Duration = Duration::from_secs(2);

/// Progress: a bar on a terminal, a log line every few seconds otherwise.
pub(super) struct Progress {
    bar: Option<indicatif::ProgressBar>,
    key: String,
    total: u64,
    done: u64,
    /// `done`, for the task that publishes the pace to the database.
    shared_done: Arc<AtomicU64>,
    publisher: Option<tokio::task::JoinHandle<()>>,
    started: Instant,
    start_done: u64,
    calls: CallRate,
}

impl Progress {
    pub(super) fn new(key: &str, total: u64, done: u64, enabled: bool, effects: Effects) -> Self {
        let bar = (enabled && std::io::stderr().is_terminal()).then(|| {
            let bar = indicatif::ProgressBar::new(total);
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "{prefix} [{bar:40}] {pos}/{len} events  {per_sec}  ETA {eta}  {msg}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            bar.set_prefix(key.to_string());
            bar.set_position(done);
            bar
        });
        Progress {
            bar,
            key: key.to_string(),
            total,
            done,
            shared_done: Arc::new(AtomicU64::new(done)),
            publisher: None,
            started: Instant::now(),
            start_done: done,
            calls: CallRate::new(effects),
        }
    }

    pub(super) fn advance(&mut self, n: u64) {
        self.done += n;
        self.shared_done.store(self.done, Ordering::Relaxed);
        if let Some(bar) = &self.bar {
            bar.set_position(self.done);
            if let Some(sample) = self.calls.sample(SAMPLE_EVERY) {
                bar.set_message(sample.to_string());
            }
        } else if let Some(sample) = self.calls.sample(LOG_EVERY) {
            self.log(&sample);
        }
    }

    fn log(&self, sample: &CallSample) {
        let secs = self.started.elapsed().as_secs_f64().max(1e-3);
        let rate = (self.done - self.start_done) as f64 / secs;
        let eta = if rate > 0.0 {
            (self.total.saturating_sub(self.done) as f64 / rate).round() as u64
        } else {
            0
        };
        let (key, done, total) = (&self.key, self.done, self.total);
        let events_per_s = rate.round() as u64;
        let effects_per_s = sample.per_second.round() as u64;
        match &sample.rate_limited_by {
            Some(effect) => {
                tracing::info!(execution = %key, done, total, events_per_s, effects_per_s, rate_limited_by = %effect, eta_s = eta, "progress (held back by the rate limit of {effect})");
            }
            None => {
                tracing::info!(execution = %key, done, total, events_per_s, effects_per_s, eta_s = eta, "progress");
            }
        }
    }

    pub(super) fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
        if let Some(publisher) = self.publisher.take() {
            publisher.abort();
        }
    }

    /// From now until [`Progress::finish`] (or drop), publishes the pace to
    /// `reprocessamento_progresso` every [`PUBLISH_EVERY`]: events/s over the pass, effect
    /// calls/s over the last interval (these move inside a batch), the ETA and the rate limit that
    /// holds the run back, for the console. A failed write is logged at debug and tried again at
    /// the next tick: the pace is informational.
    pub(super) fn publish_to(&mut self, pool: PgPool, effects: Effects) {
        let (key, total, done) = (self.key.clone(), self.total, self.shared_done.clone());
        let start_done = self.done;
        self.publisher = Some(tokio::spawn(async move {
            let started = Instant::now();
            let base = effects.call_counts();
            let mut calls = CallRate::new(effects.clone());
            let mut tick = tokio::time::interval(PUBLISH_EVERY);
            tick.tick().await;
            loop {
                tick.tick().await;
                let Some(sample) = calls.sample(Duration::ZERO) else {
                    continue;
                };
                let now_done = done.load(Ordering::Relaxed);
                let made: u64 = effects
                    .call_counts()
                    .iter()
                    .map(|(t, c)| c.calls - base.get(t).map_or(0, |b| b.calls))
                    .sum();
                let elapsed = started.elapsed().as_secs_f64().max(1e-3);
                // Events move only when a batch settles; until the first one has, the effect
                // calls made so far (about one per event of a job that applies effects) give the
                // pace, so the ETA is not blank for the whole first batch.
                let rate = match now_done.saturating_sub(start_done) {
                    0 => made as f64 / elapsed,
                    settled => settled as f64 / elapsed,
                };
                let pace = progress::Pace {
                    key: key.clone(),
                    events_done: now_done as i64,
                    events_total: total as i64,
                    calls: made as i64,
                    events_per_s: rate,
                    effects_per_s: sample.per_second,
                    eta_s: (rate > 0.0)
                        .then(|| (total.saturating_sub(now_done) as f64 / rate).round() as i64),
                    rate_limited_by: sample.rate_limited_by,
                    at: chrono::Utc::now(),
                };
                if let Err(e) = progress::publish(&pool, &pace).await {
                    tracing::debug!(execution = %key, error = %e, "the pace could not be published");
                }
            }
        }));
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(publisher) = self.publisher.take() {
            publisher.abort();
        }
    }
}

/// Effect calls over the last interval.
struct CallSample {
    per_second: f64,
    /// The type whose rate limit held back most of its calls in the interval, if any did.
    rate_limited_by: Option<String>,
}

impl std::fmt::Display for CallSample {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:.0} effects/s", self.per_second)?;
        if let Some(effect) = &self.rate_limited_by {
            write!(f, " (held back by the rate limit of {effect})")?;
        }
        Ok(())
    }
}

/// Samples the effect types' call counters at most once per interval.
struct CallRate {
    effects: Effects,
    last: BTreeMap<String, CallCount>,
    at: Instant,
}

impl CallRate {
    fn new(effects: Effects) -> Self {
        let last = effects.call_counts();
        CallRate {
            effects,
            last,
            at: Instant::now(),
        }
    }

    /// The calls since the last sample, once `every` has passed since it.
    fn sample(&mut self, every: Duration) -> Option<CallSample> {
        let elapsed = self.at.elapsed();
        if elapsed < every {
            return None;
        }
        let now = self.effects.call_counts();
        let mut calls = 0;
        let mut held: Option<(&String, u64)> = None;
        for (name, count) in &now {
            let before = self.last.get(name).copied().unwrap_or_default();
            let (n, paced) = (count.calls - before.calls, count.paced - before.paced);
            calls += n;
            if paced * 2 > n && held.is_none_or(|(_, most)| paced > most) {
                held = Some((name, paced));
            }
        }
        let sample = CallSample {
            per_second: calls as f64 / elapsed.as_secs_f64(),
            rate_limited_by: held.map(|(name, _)| crate::shared::text::inert(name)),
        };
        self.last = now;
        self.at = Instant::now();
        Some(sample)
    }
}
