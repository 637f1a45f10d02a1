//! The lock that keeps a job from running twice at the same time, in one process or across
//! several `serve` processes on different machines: a PostgreSQL session advisory lock on the
//! job's name, held on a connection of its own for the duration of one fire. A process that dies
//! loses its session and with it the lock.
//!
//! It is leased as an execution's lock is ([`replay_ledger_core::tables::execution::lease`]): while
//! held, a task confirms it on its session every third of the lease (`REPLAY_LEDGER_LEASE`,
//! 15 s). A holder cut off from the database — no FIN, no RST, its session left idle on the server
//! — stops confirming; another `serve` that finds the lock held by a session that has been idle
//! for twice the lease (by the database's clock) ends that session, so the lock frees and the job
//! fires there instead of never. The cut holder's own work is fenced by its execution's lease and
//! epoch; when it is back, releasing the lock finds its session ended, and it says so once.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlx::{Connection, PgConnection};

use replay_ledger_core::tables::execution::lease::{self, Hold, Lease};
use replay_ledger_core::tables::execution::try_advisory_lock;

/// The first key of a job's advisory lock: 'RPLS' (the execution lock of the runner uses 'RPLD',
/// so the two never collide); the second is `hashtext(name)`.
const JOB_LOCK_CLASS: i32 = 0x5250_4c53;

/// How long releasing may take before the connection is just dropped (which releases it too).
const RELEASE_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum JobLockError {
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    #[error("database: no connection within {0:?}")]
    Timeout(Duration),
    #[error("{0}")]
    Lease(String),
}

/// A job's lock, held.
pub struct JobLock {
    conn: Arc<tokio::sync::Mutex<PgConnection>>,
    name: String,
    lease: Lease,
    confirmer: tokio::task::JoinHandle<()>,
}

impl Drop for JobLock {
    fn drop(&mut self) {
        self.confirmer.abort();
    }
}

impl JobLock {
    /// Takes the lock if it is free; `None` when another session holds it. A holder whose session
    /// has been silent for twice the lease has stopped itself: its session is ended and the lock
    /// taken. Gives up after `limit` (an unreachable server must not stall the scheduler).
    pub async fn try_acquire(
        database_url: &str,
        name: &str,
        limit: Duration,
    ) -> Result<Option<JobLock>, JobLockError> {
        let attempt = async {
            let length = lease::configured().map_err(JobLockError::Lease)?;
            let options = replay_ledger_core::tables::db::options(database_url, "serve")?;
            let mut conn = PgConnection::connect_with(&options).await?;
            let sent = Instant::now();
            let mut taken = try_lock(&mut conn, name).await?;
            if !taken && end_silent_holder(&mut conn, name, length).await? {
                // The ended session lets go as its backend exits: a moment.
                for _ in 0..20 {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    taken = try_lock(&mut conn, name).await?;
                    if taken {
                        break;
                    }
                }
            }
            if !taken {
                let _ = conn.close().await;
                return Ok(None);
            }
            let lease = Lease::new(length, sent);
            let conn = Arc::new(tokio::sync::Mutex::new(conn));
            let confirmer = lease::keep(conn.clone(), Hold::Session, lease.clone());
            Ok(Some(JobLock {
                conn,
                name: name.to_string(),
                lease,
                confirmer,
            }))
        };
        tokio::time::timeout(limit, attempt)
            .await
            .unwrap_or(Err(JobLockError::Timeout(limit)))
    }

    /// The lease this lock confirms: whoever acts for the job under it asks it first.
    pub fn lease(&self) -> &Lease {
        &self.lease
    }

    /// Whether this holder stopped acting for the job: it could not confirm its lease in time.
    pub fn lapsed(&self) -> bool {
        self.lease.lapsed()
    }

    /// Releases the lock now (a lost connection already released it). A holder whose lease
    /// lapsed and whose session was ended meanwhile says so, once.
    pub async fn release(self) {
        self.confirmer.abort();
        let lapsed = self.lease.lapsed();
        let release = async {
            let mut conn = self.conn.lock().await;
            sqlx::query("select pg_advisory_unlock($1, hashtext($2))")
                .bind(JOB_LOCK_CLASS)
                .bind(&self.name)
                .execute(&mut *conn)
                .await
                .is_ok()
        };
        let unlocked = tokio::time::timeout(RELEASE_TIMEOUT, release).await;
        if lapsed && !matches!(unlocked, Ok(true)) {
            tracing::warn!(
                job = %self.name,
                "the job's lock was given up while this process could not reach the database (its lease lapsed); another serve may fire the job meanwhile, this one waits for the next tick"
            );
        }
    }
}

async fn try_lock(conn: &mut PgConnection, name: &str) -> Result<bool, sqlx::Error> {
    try_advisory_lock(conn, JOB_LOCK_CLASS, name).await
}

/// Ends the session holding job `name`'s lock in this database (a serve of another database on
/// the server is not ours to judge) if it is one of this program's and has been idle
/// for twice the lease (by the database's clock): its holder has stopped itself. Whether one
/// was ended.
async fn end_silent_holder(
    conn: &mut PgConnection,
    name: &str,
    lease: Duration,
) -> Result<bool, sqlx::Error> {
    let ended: Option<(String, bool)> = sqlx::query_as(
        r#"
        select a.application_name, pg_terminate_backend(a.pid)
        from pg_locks l join pg_stat_activity a on a.pid = l.pid
        where l.locktype = 'advisory' and l.granted
          and l.database = (select d.oid from pg_database d where d.datname = current_database())
          and l.classid = $1::oid and l.objid = hashtext($2)::oid and l.objsubid = 2
          and a.application_name like 'replay-ledger %'
          and a.state = 'idle' and a.state_change < now() - 2 * $3::interval
        limit 1
        "#,
    )
    .bind(JOB_LOCK_CLASS)
    .bind(name)
    .bind(format!("{} milliseconds", lease.as_millis()))
    .fetch_optional(conn)
    .await?;
    let Some((holder, true)) = ended else {
        return Ok(false);
    };
    tracing::warn!(
        job = %name,
        holder = %replay_ledger_core::shared::text::inert(&holder),
        "the job's lock holder had not confirmed its lease for twice the lease: ended its session, the lock frees"
    );
    Ok(true)
}
