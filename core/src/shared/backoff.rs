//! A retry schedule: how many tries, and how long between them. The database's steps
//! (`tables::db::retry`) and the providers' calls (`retry:` in `effects.yaml`) are retried on it.

use std::time::Duration;

/// Backoff for transient failures: `attempts` tries, doubling from `base`.
#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    pub attempts: u32,
    pub base: Duration,
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            attempts: 6,
            base: Duration::from_millis(200),
            max: Duration::from_secs(10),
        }
    }
}

impl Backoff {
    /// The pause before try number `attempt` (1-based; the first try has none).
    pub fn delay(&self, attempt: u32) -> Duration {
        let factor = 2u32.saturating_pow(attempt.saturating_sub(2));
        self.base.saturating_mul(factor).min(self.max)
    }
}
