//! Connections and migrations, and the one place that tells a transient database failure (worth
//! a retry with backoff) from a permanent one.

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::PgPool;

/// The migrations in `migrations/`, embedded in the binary.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// What other sessions see in `pg_stat_activity.application_name`: who holds a lock.
pub fn application_name(role: &str) -> String {
    let host = hostname();
    let mut name = format!("replay-ledger {role} {host}:{}", std::process::id());
    name.truncate(63);
    name
}

/// The machine's host name, for "who holds it" messages.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".into())
}

/// Connection options for `url`, tagged with an application name.
pub fn options(url: &str, role: &str) -> Result<PgConnectOptions, sqlx::Error> {
    Ok(PgConnectOptions::from_str(url)?.application_name(&application_name(role)))
}

/// A pool sized for one worker process.
pub async fn connect(url: &str, role: &str) -> Result<PgPool, sqlx::Error> {
    PgPoolOptions::new()
        .max_connections(10)
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(options(url, role)?)
        .await
}

/// Applies the embedded migrations; idempotent.
pub async fn migrate(pool: &PgPool) -> Result<(), sqlx::migrate::MigrateError> {
    MIGRATOR.run(pool).await
}

/// A failure that a retry may cure: the connection was lost or refused, the server is shutting
/// down or restarting, a deadlock or serialization failure aborted the statement.
pub fn is_transient(err: &sqlx::Error) -> bool {
    match err {
        sqlx::Error::Io(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed
        | sqlx::Error::Tls(_) => true,
        sqlx::Error::Database(db) => db.code().is_some_and(|code| {
            // 08: connection exception; 57P01-57P03: admin shutdown, crash shutdown, cannot
            // connect now; 40001/40P01: serialization failure, deadlock; 53300: too many clients.
            code.starts_with("08")
                || matches!(
                    &*code,
                    "57P01" | "57P02" | "57P03" | "40001" | "40P01" | "53300"
                )
        }),
        _ => false,
    }
}

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

/// Runs `op` until it succeeds, fails permanently, or `backoff.attempts` transient failures.
pub async fn retry<T, F, Fut>(what: &str, backoff: Backoff, mut op: F) -> Result<T, sqlx::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, sqlx::Error>>,
{
    let mut attempt = 1;
    loop {
        match op().await {
            Ok(value) => return Ok(value),
            Err(err) if is_transient(&err) && attempt < backoff.attempts => {
                attempt += 1;
                let pause = backoff.delay(attempt);
                tracing::warn!(step = what, attempt, pause_ms = pause.as_millis() as u64, error = %err, "transient database failure; retrying");
                tokio::time::sleep(pause).await;
            }
            Err(err) => return Err(err),
        }
    }
}
