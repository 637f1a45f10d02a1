//! Progress of a verification: a spinner with rows read and rows/s on a terminal, a log line
//! every 5 s otherwise (and nothing at all when it is not wanted, e.g. in tests of the counts).

use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// How often the log line is written off a terminal.
const LOG_EVERY: Duration = Duration::from_secs(5);

/// Rows read so far, shown or logged.
pub struct Progress {
    bar: Option<indicatif::ProgressBar>,
    log: bool,
    rows: u64,
    started: Instant,
    logged: Instant,
}

impl Progress {
    /// A spinner on a terminal, else a log line every 5 s.
    pub fn shown() -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = indicatif::ProgressBar::new_spinner();
            bar.set_style(
                indicatif::ProgressStyle::with_template("verify {spinner} {pos} rows  {per_sec}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
            );
            bar
        });
        Progress {
            log: bar.is_none(),
            bar,
            ..Progress::quiet()
        }
    }

    /// Nothing shown.
    pub fn quiet() -> Self {
        Progress {
            bar: None,
            log: false,
            rows: 0,
            started: Instant::now(),
            logged: Instant::now(),
        }
    }

    pub(super) fn advance(&mut self, n: u64) {
        self.rows += n;
        if let Some(bar) = &self.bar {
            if self.rows % 4096 == 0 {
                bar.set_position(self.rows);
            }
        } else if self.log && self.rows % 4096 == 0 && self.logged.elapsed() >= LOG_EVERY {
            let secs = self.started.elapsed().as_secs_f64().max(1e-3);
            let rows_per_s = (self.rows as f64 / secs).round() as u64;
            tracing::info!(rows = self.rows, rows_per_s, "verify progress");
            self.logged = Instant::now();
        }
    }

    pub(super) fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}
