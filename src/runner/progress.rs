//! Progress of a run: a bar with events/s and ETA on a terminal, a log line every few seconds
//! otherwise.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// Progress: a bar with events/s and ETA on a terminal, a log line every few seconds otherwise.
pub(super) struct Progress {
    bar: Option<indicatif::ProgressBar>,
    key: String,
    total: u64,
    done: u64,
    started: Instant,
    start_done: u64,
    last_log: Instant,
}

impl Progress {
    pub(super) fn new(key: &str, total: u64, done: u64, enabled: bool) -> Self {
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

    pub(super) fn advance(&mut self, n: u64) {
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

    pub(super) fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}
