//! The advisory lock that lets one process at a time run an execution (invariant `kill-and-rerun`),
//! and says who holds it when it is taken. Taking the lock takes the execution's next ownership
//! epoch too ([`Owner`]): the lock keeps a second process out, the epoch fences the writes of a
//! process that lost its lock without knowing it yet (invariant `one-owner`).

use std::sync::Arc;
use std::time::Instant;

use chrono::{DateTime, Utc};
use sqlx::{Connection, PgConnection};

use super::lease::{self, Hold, Lease};
use super::owner::{try_advisory_lock, Owner, LOCK_CLASS, TAKE_PATIENCE};

/// Why the lock could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("execution {key} is already being run by {holder}")]
    Held { key: String, holder: String },
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

/// The lock on an execution, held on a connection of its own for as long as the process runs it.
/// Dropping it (or the process dying) releases it. While held, a task confirms the ownership
/// lease on that connection ([`lease`]).
pub struct ExecutionLock {
    /// Behind a mutex so that holders can ask [`ExecutionLock::still_held`] through a shared
    /// reference while batches borrow the rest of their state, and the lease's confirmer can
    /// use it between.
    conn: Arc<tokio::sync::Mutex<PgConnection>>,
    /// How a session is opened again: for the confirmer's retake, and for [`ExecutionLock::renew`].
    options: Box<sqlx::postgres::PgConnectOptions>,
    owner: Owner,
    lease: Lease,
    confirmer: tokio::task::JoinHandle<()>,
}

impl Drop for ExecutionLock {
    fn drop(&mut self) {
        self.confirmer.abort();
    }
}

/// Takes `key`'s lock on `conn` if it is free.
async fn try_lock(conn: &mut PgConnection, key: &str) -> Result<bool, sqlx::Error> {
    try_advisory_lock(conn, LOCK_CLASS, key).await
}

/// The session holding `key`'s lock in this database (advisory locks are per database: another
/// database on the server may hold a lock of the same name, which is not ours to judge or name):
/// its pid, application name, address and start. All but the pid are `None` when the holder is another role's session (PostgreSQL shows them only to the
/// same role, a superuser or `pg_read_all_stats`).
async fn holder_of(
    conn: &mut PgConnection,
    key: &str,
) -> Result<Option<HolderSession>, sqlx::Error> {
    sqlx::query_as(
        r#"
        select a.pid, a.application_name, a.client_addr::text, a.backend_start
        from pg_locks l join pg_stat_activity a on a.pid = l.pid
        where l.locktype = 'advisory' and l.granted
          and l.database = (select d.oid from pg_database d where d.datname = current_database())
          and l.classid = $1::oid and l.objid = hashtext($2)::oid and l.objsubid = 2
        limit 1
        "#,
    )
    .bind(LOCK_CLASS)
    .bind(key)
    .fetch_optional(conn)
    .await
}

type HolderSession = (i32, Option<String>, Option<String>, Option<DateTime<Utc>>);

/// Takes `key`'s next ownership epoch on the lock's session `conn`, and confirms its lease there.
async fn take_epoch(
    conn: &tokio::sync::Mutex<PgConnection>,
    key: &str,
    length: std::time::Duration,
) -> Result<(Owner, Lease), LockError> {
    let mut session = conn.lock().await;
    let owner = match Owner::take(&mut session, key, TAKE_PATIENCE).await {
        Ok(owner) => owner,
        // 55P03: the previous owner still holds a confirmed write open.
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("55P03") => {
            return Err(LockError::Held {
                key: key.to_string(),
                holder: "a process still writing under an earlier ownership epoch".into(),
            })
        }
        Err(e) => return Err(e.into()),
    };
    let sent = Instant::now();
    lease::confirm(&mut session, &owner, length).await?;
    Ok((owner, Lease::new(length, sent)))
}

/// The task that keeps `owner`'s `lease` confirmed on the lock's session (taking the lock again
/// on a new one if that session is lost).
fn keep_confirmed(
    conn: &Arc<tokio::sync::Mutex<PgConnection>>,
    owner: &Owner,
    options: &sqlx::postgres::PgConnectOptions,
    lease: &Lease,
) -> tokio::task::JoinHandle<()> {
    let hold = Hold::Owner {
        owner: owner.clone(),
        retake: Box::new(options.clone()),
    };
    lease::keep(conn.clone(), hold, lease.clone())
}

impl ExecutionLock {
    /// Takes the lock or says who holds it. A holder that has not confirmed its lease for twice
    /// the lease has stopped itself: its sessions are ended and the lock taken at once.
    pub async fn acquire(url: &str, key: &str, role: &str) -> Result<Self, LockError> {
        let options = crate::tables::db::options(url, role)?;
        let mut conn = PgConnection::connect_with(&options).await?;
        let length = lease::configured()
            .map_err(|e| LockError::Database(sqlx::Error::Configuration(e.into())))?;
        if try_lock(&mut conn, key).await? {
            return Self::own(conn, options, key, length).await;
        }
        let holder = holder_of(&mut conn, key).await?;
        if let Some((pid, ..)) = &holder {
            let ended = lease::end_lapsed_holder(&mut conn, key, *pid, length).await?;
            if ended > 0 {
                tracing::warn!(
                    execution = %key,
                    sessions = ended,
                    "its holder had not confirmed its lease for twice the lease: ended its sessions, the lock frees"
                );
                // The ended sessions let go as their backends exit: a moment.
                for _ in 0..20 {
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    if try_lock(&mut conn, key).await? {
                        return Self::own(conn, options, key, length).await;
                    }
                }
            }
        }
        let holder = match holder {
            Some((pid, app, addr, since)) => format!(
                "'{}' (database session pid {pid}{}{})",
                app.filter(|a| !a.is_empty())
                    .unwrap_or_else(|| "a session of another database role".into()),
                addr.map(|a| format!(" from {a}")).unwrap_or_default(),
                since
                    .map(|t| format!(", connected since {}", t.format("%Y-%m-%d %H:%M:%S UTC")))
                    .unwrap_or_default()
            ),
            None => "another process (it may just have finished)".to_string(),
        };
        Err(LockError::Held {
            key: key.to_string(),
            holder,
        })
    }

    /// With the lock taken on `conn`: takes the execution's next ownership epoch and starts
    /// confirming its lease.
    async fn own(
        conn: PgConnection,
        options: sqlx::postgres::PgConnectOptions,
        key: &str,
        length: std::time::Duration,
    ) -> Result<Self, LockError> {
        let conn = Arc::new(tokio::sync::Mutex::new(conn));
        let options = Box::new(options);
        let (owner, lease) = take_epoch(&conn, key, length).await?;
        let confirmer = keep_confirmed(&conn, &owner, &options, &lease);
        Ok(ExecutionLock {
            conn,
            options,
            owner,
            lease,
            confirmer,
        })
    }

    /// Takes the execution's next ownership epoch on the same lock and session: whatever this
    /// process still had in flight under the current epoch is fenced (taking the epoch waits for
    /// the writes it had confirmed to commit, and refuses every later one). What a recovery does
    /// when the lock itself survived, or was taken again by the confirmer after a restart, so
    /// that it fences as taking the lock anew would.
    pub async fn renew(&mut self) -> Result<(), LockError> {
        self.confirmer.abort();
        let (owner, lease) = take_epoch(&self.conn, &self.owner.key, self.lease.length()).await?;
        self.confirmer = keep_confirmed(&self.conn, &owner, &self.options, &lease);
        self.owner = owner;
        self.lease = lease;
        Ok(())
    }

    /// Takes the lock, waiting up to `patience` for a holder to let go (a brief critical section of
    /// another process, such as setting up a partitioned execution).
    pub async fn acquire_waiting(
        url: &str,
        key: &str,
        role: &str,
        patience: std::time::Duration,
    ) -> Result<Self, LockError> {
        let deadline = tokio::time::Instant::now() + patience;
        loop {
            match Self::acquire(url, key, role).await {
                Err(LockError::Held { .. }) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
                other => return other,
            }
        }
    }

    /// Takes the lock again after its connection was lost (a database restart), waiting up to
    /// `patience` while the server is unreachable, and, with `wait_for_holder`, while another
    /// process holds it (without, a holder's lock is returned at once as [`LockError::Held`]).
    pub async fn reacquire(
        url: &str,
        key: &str,
        role: &str,
        patience: std::time::Duration,
        wait_for_holder: bool,
    ) -> Result<Self, LockError> {
        let deadline = tokio::time::Instant::now() + patience;
        let mut pause = std::time::Duration::from_millis(200);
        loop {
            match Self::acquire(url, key, role).await {
                Ok(lock) => return Ok(lock),
                Err(LockError::Database(e)) if !crate::tables::db::is_transient(&e) => {
                    return Err(LockError::Database(e))
                }
                Err(held @ LockError::Held { .. }) if !wait_for_holder => return Err(held),
                Err(err) if tokio::time::Instant::now() >= deadline => return Err(err),
                Err(_) => {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(std::time::Duration::from_secs(5));
                }
            }
        }
    }

    /// Whether the lock is still held: its connection is alive. A lost connection means the lock
    /// is gone and another process may take the execution, so the holder must stop.
    pub async fn still_held(&self) -> bool {
        self.check().await.is_ok()
    }

    /// [`ExecutionLock::still_held`], with why its connection failed when it did. A lease that
    /// lapsed counts as a lost lock (another process may end this one's sessions and take it),
    /// and so does a connection that does not answer within the lease's confirmation period.
    pub async fn check(&self) -> Result<(), sqlx::Error> {
        let lapsed = || {
            sqlx::Error::Io(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the ownership lease lapsed: the database did not confirm it in time",
            ))
        };
        if self.lease.lapsed() {
            return Err(lapsed());
        }
        let answered = tokio::time::timeout(self.lease.every(), async {
            let mut conn = self.conn.lock().await;
            sqlx::query("select 1").execute(&mut *conn).await
        })
        .await;
        match answered {
            Ok(done) => done.map(|_| ()),
            Err(_) => Err(lapsed()),
        }
    }

    /// The ownership lease this lock confirms: whoever acts for the owner asks it first.
    pub fn lease(&self) -> &Lease {
        &self.lease
    }

    /// Whether the lease lapsed (the database could not be reached for a lease).
    pub fn lapsed(&self) -> bool {
        self.lease.lapsed()
    }

    pub fn key(&self) -> &str {
        &self.owner.key
    }

    /// The ownership epoch taken with the lock: what every write of the holder is fenced by.
    pub fn owner(&self) -> &Owner {
        &self.owner
    }

    /// The newest epoch this lock holds: the one taken with it, or the one its confirmer took
    /// when it took the lock again after a restart (which fences the first).
    pub fn newest_owner(&self) -> Owner {
        Owner {
            key: self.owner.key.clone(),
            epoch: self.owner.epoch.max(self.lease.epoch()),
        }
    }

    /// Stops confirming and unlocks, if the lock's session answers within a lease's
    /// confirmation period; the lock is then of no more use (a lost or lapsed one is replaced).
    pub async fn let_go(&self) {
        self.confirmer.abort();
        let _ = tokio::time::timeout(self.lease.every(), async {
            let mut conn = self.conn.lock().await;
            sqlx::query("select pg_advisory_unlock($1, hashtext($2))")
                .bind(LOCK_CLASS)
                .bind(&self.owner.key)
                .execute(&mut *conn)
                .await
        })
        .await;
    }

    /// Releases the lock now.
    pub async fn release(self) {
        self.confirmer.abort();
        let mut conn = self.conn.lock().await;
        let _ = sqlx::query("select pg_advisory_unlock($1, hashtext($2))")
            .bind(LOCK_CLASS)
            .bind(&self.owner.key)
            .execute(&mut *conn)
            .await;
    }
}
