//! The lock that keeps a job from running twice at the same time, in one process or across
//! several `serve` processes on different machines: a PostgreSQL session advisory lock on the
//! job's name, held on a connection of its own for the duration of one fire. A process that dies
//! loses its session and with it the lock.

use std::time::Duration;

use sqlx::{Connection, PgConnection};

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
}

/// A job's lock, held.
pub struct JobLock {
    conn: PgConnection,
    name: String,
}

impl JobLock {
    /// Takes the lock if it is free; `None` when another session holds it. Gives up after
    /// `limit` (an unreachable server must not stall the scheduler).
    pub async fn try_acquire(
        database_url: &str,
        name: &str,
        limit: Duration,
    ) -> Result<Option<JobLock>, JobLockError> {
        let attempt = async {
            let options = crate::tables::db::options(database_url, "serve")?;
            let mut conn = PgConnection::connect_with(&options).await?;
            let taken: bool = sqlx::query_scalar("select pg_try_advisory_lock($1, hashtext($2))")
                .bind(JOB_LOCK_CLASS)
                .bind(name)
                .fetch_one(&mut conn)
                .await?;
            if !taken {
                let _ = conn.close().await;
                return Ok(None);
            }
            Ok(Some(JobLock {
                conn,
                name: name.to_string(),
            }))
        };
        tokio::time::timeout(limit, attempt)
            .await
            .unwrap_or(Err(JobLockError::Timeout(limit)))
    }

    /// Releases the lock now (a lost connection already released it).
    pub async fn release(mut self) {
        let release = async {
            let _ = sqlx::query("select pg_advisory_unlock($1, hashtext($2))")
                .bind(JOB_LOCK_CLASS)
                .bind(&self.name)
                .execute(&mut self.conn)
                .await;
            let _ = self.conn.close().await;
        };
        let _ = tokio::time::timeout(RELEASE_TIMEOUT, release).await;
    }
}
