//! Connections and migrations, and the one place that tells a transient database failure (worth
//! a retry with backoff) from a permanent one. Connecting, and why it failed: [`connect`].

mod connect;
mod migrations;
pub mod session;

pub use connect::{
    attempt, cause_for, cause_for_pools, check_url, connect, connect_lazy, connect_waiting,
    parse_wait, pool_for, session_options, target_of, Cause, ConnectError, ATTEMPT_LIMIT, MAX_WAIT,
};

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::PgConnectOptions;
use sqlx::PgPool;

pub use crate::shared::backoff::Backoff;

/// `sqlx::FromRow` for a struct read by column name (`field`, or `field = "column"`), written
/// out instead of derived: sqlx's derive macros would compile a second sqlx for the host.
/// Exported (hidden, as `__from_row`) for the periphery's rows; use it as `tables::db::from_row`.
#[doc(hidden)]
#[macro_export]
macro_rules! __from_row {
    ($ty:ident { $($field:ident $(= $column:literal)?),* $(,)? }) => {
        impl<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow> for $ty {
            fn from_row(row: &'r sqlx::postgres::PgRow) -> Result<Self, sqlx::Error> {
                use sqlx::Row;
                Ok($ty {
                    $($field: row.try_get($crate::tables::db::from_row!(@column $field $($column)?))?,)*
                })
            }
        }
    };
    (@column $field:ident) => { stringify!($field) };
    (@column $field:ident $column:literal) => { $column };
}
pub use crate::__from_row as from_row;

/// What other sessions see in `pg_stat_activity.application_name`: who holds a lock.
pub fn application_name(role: &str) -> String {
    application_name_of(role, &hostname(), std::process::id())
}

/// `replay-ledger ROLE HOST:PID` within PostgreSQL's 63 bytes: the host is cut when it must be,
/// never the pid, so the third word tells one process from every other — a takeover ends the
/// sessions whose third word is the holder's, and with a long host name cut off the pid, every
/// process of that host once looked like the holder.
pub fn application_name_of(role: &str, host: &str, pid: u32) -> String {
    const LIMIT: usize = 63;
    let head = format!("replay-ledger {role} ");
    let tail = format!(":{pid}");
    let room = LIMIT.saturating_sub(head.len() + tail.len());
    let mut cut = host.len().min(room);
    while !host.is_char_boundary(cut) {
        cut -= 1;
    }
    let mut name = format!("{head}{}{tail}", &host[..cut]);
    // A role so long that nothing of the host fits (none of ours is) is cut as before.
    name.truncate(LIMIT);
    name
}

/// The machine's host name, for "who holds it" messages.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| crate::shared::process::settings().hostname.clone())
        .unwrap_or_else(|| "localhost".into())
}

/// Connection options for `url`, tagged with an application name, with the server's give-up
/// settings ([`session`]).
pub fn options(url: &str, role: &str) -> Result<PgConnectOptions, sqlx::Error> {
    let options = PgConnectOptions::from_str(url)?.application_name(&application_name(role));
    session::tuned(options).map_err(|e| sqlx::Error::Configuration(e.into()))
}

/// A transaction whose commit does not wait for its WAL to reach the disk
/// (`synchronous_commit = off` for this transaction alone), for writes that a crash may take back
/// as a whole and that are then simply done again: a batch's derived state with its figures, the
/// checkpoint past it with the batch's tallies. Never for the ledger. Commits reach the disk in
/// WAL order, so the ledger's next commit (always synchronous, and made before any call) flushes
/// every relaxed commit before it: no effect is performed on a state write a crash could undo,
/// and a crash loses at most the last relaxed commits (about 0.2 s at the server's default
/// `wal_writer_delay`), which the run that resumes writes again from the stored checkpoint.
pub async fn begin_relaxed(
    pool: &PgPool,
) -> Result<sqlx::Transaction<'static, sqlx::Postgres>, sqlx::Error> {
    pool.begin_with("begin; set local synchronous_commit = off")
        .await
}

/// Applies the embedded migrations; idempotent.
pub async fn migrate(pool: &PgPool) -> Result<(), sqlx::migrate::MigrateError> {
    migrations::migrator().await?.run(pool).await
}

pub use migrations::RELEASES;

/// Applies only the migrations `release` shipped (see [`RELEASES`]), as that release did; `None`
/// for a release it does not know. The upgrade test's database of the previous release.
pub async fn migrate_as_released(
    pool: &PgPool,
    release: &str,
) -> Option<Result<(), sqlx::migrate::MigrateError>> {
    let migrator = match migrations::migrator_of(release).await? {
        Ok(migrator) => migrator,
        Err(e) => return Some(Err(e)),
    };
    Some(migrator.run(pool).await)
}

/// Where one embedded migration stands in a database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MigrationState {
    Applied,
    /// Started and failed: `migrate` stops there until someone repairs it.
    Failed,
    /// Applied, but the file embedded in this binary differs from what was applied.
    Changed,
    Pending,
}

impl MigrationState {
    pub fn as_str(self) -> &'static str {
        match self {
            MigrationState::Applied => "applied",
            MigrationState::Failed => "failed",
            MigrationState::Changed => "changed",
            MigrationState::Pending => "pending",
        }
    }
}

/// One embedded migration and where it stands.
#[derive(Debug, Clone)]
pub struct MigrationStatus {
    pub version: i64,
    pub description: String,
    pub state: MigrationState,
}

/// Every embedded migration, in order, with its state in this database; reads only (a database
/// that was never migrated has every migration pending).
pub async fn migration_status(pool: &PgPool) -> Result<Vec<MigrationStatus>, sqlx::Error> {
    let exists: bool = sqlx::query_scalar("select to_regclass('_sqlx_migrations') is not null")
        .fetch_one(pool)
        .await?;
    let applied: Vec<(i64, bool, Vec<u8>)> = if exists {
        sqlx::query_as("select version, success, checksum from _sqlx_migrations")
            .fetch_all(pool)
            .await?
    } else {
        Vec::new()
    };
    Ok(migrations::migrations()
        .iter()
        .filter(|m| !m.migration_type.is_down_migration())
        .map(|m| {
            let row = applied.iter().find(|(v, _, _)| *v == m.version);
            let state = match row {
                None => MigrationState::Pending,
                Some((_, false, _)) => MigrationState::Failed,
                Some((_, true, sum)) if sum.as_slice() != &*m.checksum => MigrationState::Changed,
                Some(_) => MigrationState::Applied,
            };
            MigrationStatus {
                version: m.version,
                description: m.description.to_string(),
                state,
            }
        })
        .collect())
}

/// A failure that a retry may cure: the connection was lost or refused, the server is shutting
/// down or restarting, a deadlock or serialization failure aborted the statement, or the server
/// ran out of disk space (an outage an operator ends by freeing space; the write changed nothing).
pub fn is_transient(err: &sqlx::Error) -> bool {
    match err {
        sqlx::Error::Io(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed
        | sqlx::Error::Tls(_) => true,
        // A connection opened while the server restarts can be answered with a stray byte
        // (`unexpected response from SSLRequest: 0x00`, seen after an immediate restart).
        sqlx::Error::Protocol(message) => message.contains("SSLRequest"),
        sqlx::Error::Database(db) => db.code().is_some_and(|code| {
            // 08: connection exception; 57P01-57P03: admin shutdown, crash shutdown, cannot
            // connect now; 40001/40P01: serialization failure, deadlock; 53300: too many clients;
            // 53100: disk full.
            code.starts_with("08")
                || matches!(
                    &*code,
                    "57P01" | "57P02" | "57P03" | "40001" | "40P01" | "53300" | "53100"
                )
        }),
        _ => false,
    }
}

/// The last transient failure a retried step of this process met, while no retried step has
/// succeeded since: what `/healthz` says of the database when it can still be read but not
/// written to (a full disk).
static TROUBLE: std::sync::Mutex<Option<(std::time::Instant, String)>> =
    std::sync::Mutex::new(None);

fn note_trouble(cause: Option<&str>) {
    let mut trouble = TROUBLE.lock().unwrap_or_else(|e| e.into_inner());
    match cause {
        Some(cause) => *trouble = Some((std::time::Instant::now(), cause.to_string())),
        None if trouble.is_some() => *trouble = None,
        None => {}
    }
}

/// Why this process's database steps are failing right now: the cause of the last transient
/// failure, if no retried step has succeeded since and it is at most `max_age` old.
pub fn trouble(max_age: Duration) -> Option<String> {
    let trouble = TROUBLE.lock().unwrap_or_else(|e| e.into_inner());
    trouble
        .as_ref()
        .filter(|(at, _)| at.elapsed() <= max_age)
        .map(|(_, cause)| cause.clone())
}

/// Runs `op` until it succeeds, fails permanently, or `backoff.attempts` transient failures.
pub async fn retry<T, F, Fut>(what: &str, backoff: Backoff, mut op: F) -> Result<T, sqlx::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, sqlx::Error>>,
{
    let mut attempt = 1;
    loop {
        let result = op().await;
        let cause = match &result {
            Ok(_) => {
                note_trouble(None);
                None
            }
            Err(err) if is_transient(err) => {
                let cause = cause_of(err).await;
                note_trouble(Some(&cause));
                Some(cause)
            }
            Err(_) => None,
        };
        match result {
            Ok(value) => return Ok(value),
            Err(err) if is_transient(&err) && attempt < backoff.attempts => {
                attempt += 1;
                let pause = backoff.delay(attempt);
                // The pool's own words hide the cause; the server's are said with their class
                // (`the server's disk is full (53100: …)`); any other error says its own.
                let error = match &err {
                    sqlx::Error::PoolTimedOut | sqlx::Error::Database(_) => {
                        cause.unwrap_or_default()
                    }
                    other => other.to_string(),
                };
                tracing::warn!(step = what, attempt, pause_ms = pause.as_millis() as u64, %error, "transient database failure; retrying");
                tokio::time::sleep(pause).await;
            }
            Err(err) => {
                if is_statement_timeout(&err) {
                    tracing::warn!(
                        step = what,
                        "the step ran past the server's statement_timeout; the checkpoint is kept"
                    );
                }
                return Err(err);
            }
        }
    }
}

/// What a transient failure says: [`describe`], or for a pool that timed out (which hides why its
/// connection attempts failed) the last connect error of this process's pools ([`cause_for_pools`]).
async fn cause_of(err: &sqlx::Error) -> String {
    match err {
        sqlx::Error::PoolTimedOut => cause_for_pools().await,
        other => describe(other),
    }
}

/// The server cancelled the statement at its `statement_timeout` (SQLSTATE 57014).
pub fn is_statement_timeout(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Database(db) if db.code().as_deref() == Some("57014"))
}

/// The server refused the statement for want of a privilege (SQLSTATE 42501,
/// `insufficient_privilege`): the connected role lacks the grant for this duty (see `grants`) —
/// a table, a column, `resolver_incerto`, or a guarded row (an `incerto` effect, an unfinished
/// execution marked `concluida`).
pub fn is_permission_denied(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Database(db) if db.code().as_deref() == Some("42501"))
}

/// Whether the database answers a trivial statement within a few seconds: tells a lost lock (its
/// session ended, the server still up) from a lost database.
pub async fn answers(pool: &PgPool) -> bool {
    let ping = sqlx::query("select 1").execute(pool);
    matches!(
        tokio::time::timeout(Duration::from_secs(3), ping).await,
        Ok(Ok(_))
    )
}

/// Where a pool connects, for messages: `host:port/database` (never the user or password).
pub fn target(pool: &PgPool) -> String {
    target_of(&pool.connect_options())
}

/// What went wrong with the database, in words an operator can act on: the cause, never the
/// connection string.
pub fn describe(err: &sqlx::Error) -> String {
    use std::io::ErrorKind;
    match err {
        sqlx::Error::Io(io) => match io.kind() {
            ErrorKind::ConnectionRefused => "connection refused".into(),
            // sqlx's words for this one are the protocol's ("expected to read 5 bytes, got 0
            // bytes at EOF"), not a cause.
            ErrorKind::UnexpectedEof => "connection lost (the server closed it)".into(),
            ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted | ErrorKind::BrokenPipe => {
                format!("connection lost ({io})")
            }
            ErrorKind::TimedOut => "connection timed out".into(),
            _ if io.to_string().contains("lookup address") => format!("unknown host ({io})"),
            _ => format!("I/O error: {io}"),
        },
        sqlx::Error::PoolTimedOut => "no connection within the pool's timeout".into(),
        sqlx::Error::PoolClosed => "the connection pool was closed".into(),
        sqlx::Error::Tls(e) => format!("TLS failed: {e}"),
        sqlx::Error::Database(db) => {
            let code = db.code().unwrap_or_default();
            let what = match &*code {
                "57P01" => "the server was shut down by an administrator",
                "57P02" => "the server crashed",
                "57P03" => "the server is starting up or shutting down",
                "53300" => "too many connections",
                "53100" => "the server's disk is full",
                "57014" => "the statement ran past statement_timeout",
                "28P01" | "28000" => "authentication failed",
                "3D000" => "the database does not exist",
                "42501" => "permission denied",
                c if c.starts_with("08") => "connection failure",
                _ => "server error",
            };
            format!("{what} ({code}: {})", db.message())
        }
        other => other.to_string(),
    }
}

/// Explains a lost database: the cause of `err`, or, when the pool only says that it timed out
/// (it hides why its connection attempts failed), its last connect error ([`cause_for`]).
pub async fn explain_loss(pool: &PgPool, err: &sqlx::Error) -> String {
    if !matches!(err, sqlx::Error::PoolTimedOut) {
        return describe(err);
    }
    cause_for(&pool.connect_options()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_host_name_is_cut_and_the_pid_kept() {
        let host = "ip-10-0-12-34.sa-east-1.compute.internal.example.org";
        let a = application_name_of("run", host, 4_194_304);
        let b = application_name_of("run", host, 4_194_305);
        assert!(a.len() <= 63, "{a}");
        assert!(a.ends_with(":4194304"), "{a}");
        assert_ne!(a.split(' ').nth(2), b.split(' ').nth(2));
        assert_eq!(
            application_name_of("run", "db-worker", 7),
            "replay-ledger run db-worker:7"
        );
        // A multi-byte host is cut at a character's edge.
        let wide = application_name_of("consume", &"é".repeat(40), 12);
        assert!(wide.len() <= 63 && wide.ends_with(":12"), "{wide}");
    }

    #[tokio::test]
    async fn a_step_failing_for_a_passing_cause_is_said_until_a_step_succeeds() {
        let quick = Backoff {
            attempts: 2,
            base: Duration::from_millis(1),
            max: Duration::from_millis(1),
        };
        let refused = || sqlx::Error::Io(std::io::ErrorKind::ConnectionRefused.into());

        let failed: Result<(), _> = retry("step", quick, || async { Err(refused()) }).await;
        let said = trouble(Duration::from_secs(60));
        retry("step", quick, || async { Ok(()) }).await.unwrap();

        assert!(failed.is_err());
        assert_eq!(said.as_deref(), Some("connection refused"));
        assert_eq!(trouble(Duration::from_secs(60)), None);
    }
}
