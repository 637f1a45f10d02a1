//! The ownership lease (`reprocessamento_arrendamento`). The holder of an execution's
//! lock confirms every [`Lease::every`] that it still holds its epoch, on the lock's own session.
//! Its [`Lease`] is alive while the last confirmation was *sent* less than the lease ago: a host
//! cut off from the database stops itself within the lease — no new reservation, no new
//! provider call — even though its sockets say nothing (no FIN, no RST).
//!
//! Another process that finds the lock held by an owner whose last confirmation (by the
//! database's clock) is older than twice the lease knows that owner has stopped itself, and ends
//! that owner's sessions ([`end_lapsed_holder`]) so the lock is free at once, instead of waiting
//! for the server's TCP give-up (which a proxy or a half-open path may never trigger).
//!
//! The lease is `REPLAY_LEDGER_LEASE` (default `15s`, shorter than the ~30 s the server's
//! session settings give a silent peer, [`crate::tables::db::session`]).

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlx::{Connection, PgConnection};

use super::owner::{try_advisory_lock, Owner, LOCK_CLASS, TAKE_PATIENCE};

/// The lease when `REPLAY_LEDGER_LEASE` is not set.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(15);

/// The lease of this process: `REPLAY_LEDGER_LEASE` (as the edge installed it,
/// [`crate::shared::process`]), or [`DEFAULT_LEASE`]; at least 1 s.
pub fn configured() -> Result<Duration, String> {
    parse(crate::shared::process::settings().lease.as_deref())
}

/// A lease as given (`None`: the default), or why it cannot be one.
pub fn parse(given: Option<&str>) -> Result<Duration, String> {
    match given {
        None => Ok(DEFAULT_LEASE),
        Some(raw) => match humantime::parse_duration(raw.trim()) {
            Ok(d) if d >= Duration::from_secs(1) => Ok(d),
            Ok(_) => Err(format!("REPLAY_LEDGER_LEASE={raw:?}: at least 1s")),
            Err(e) => Err(format!("REPLAY_LEDGER_LEASE={raw:?}: {e} (e.g. `15s`)")),
        },
    }
}

/// Whether an owner may still act: shared by the lock's confirmer and everyone acting for it.
#[derive(Clone)]
pub struct Lease {
    inner: Arc<State>,
}

struct State {
    length: Duration,
    origin: Instant,
    /// When the last successful confirmation was sent, in nanoseconds after `origin`.
    confirmed: AtomicU64,
    /// Set once it lapsed: a lapsed lease is never alive again (a new lock brings a new lease).
    lapsed: AtomicBool,
    /// The newest epoch the confirmer confirmed (it takes the next one when it takes the lock
    /// again after a restart); 0 until it has.
    epoch: AtomicI64,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Lease({:?}, alive: {})", self.inner.length, self.alive())
    }
}

/// Two handles are equal when they are the same lease.
impl PartialEq for Lease {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}
impl Eq for Lease {}

impl Lease {
    /// A lease of `length`, confirmed as of `sent` (when the confirmation was sent).
    pub fn new(length: Duration, sent: Instant) -> Lease {
        let lease = Lease {
            inner: Arc::new(State {
                length,
                origin: sent,
                confirmed: AtomicU64::new(0),
                lapsed: AtomicBool::new(false),
                epoch: AtomicI64::new(0),
            }),
        };
        lease.confirmed(sent);
        lease
    }

    pub fn length(&self) -> Duration {
        self.inner.length
    }

    /// How often the holder confirms: three times a lease.
    pub fn every(&self) -> Duration {
        self.inner.length / 3
    }

    /// Records a confirmation that was sent at `sent` and succeeded.
    pub fn confirmed(&self, sent: Instant) {
        let at = sent.saturating_duration_since(self.inner.origin).as_nanos() as u64;
        self.inner.confirmed.fetch_max(at, Ordering::SeqCst);
    }

    /// Whether the owner may still act: its last confirmation was sent less than the lease ago.
    pub fn alive(&self) -> bool {
        if self.inner.lapsed.load(Ordering::SeqCst) {
            return false;
        }
        let at = Duration::from_nanos(self.inner.confirmed.load(Ordering::SeqCst));
        if self.inner.origin.elapsed().saturating_sub(at) < self.inner.length {
            return true;
        }
        self.inner.lapsed.store(true, Ordering::SeqCst);
        false
    }

    /// The newest epoch confirmed under this lease by its confirmer (0: none yet).
    pub fn epoch(&self) -> i64 {
        self.inner.epoch.load(Ordering::SeqCst)
    }

    /// Whether it lapsed (as opposed to being alive).
    pub fn lapsed(&self) -> bool {
        !self.alive()
    }
}

/// What a lock's session confirms to keep its lease.
#[derive(Debug, Clone)]
pub enum Hold {
    /// An execution held under an ownership epoch: the confirmation is recorded for other
    /// processes to judge by, and fails once a newer owner took the execution. A session lost
    /// with the lock on it (a database restart) is replaced by `retake`'s: the lock is taken
    /// again under the same epoch if no one took the execution meanwhile, so a restart shorter
    /// than the lease costs no lease.
    Owner {
        owner: Owner,
        retake: Box<sqlx::postgres::PgConnectOptions>,
    },
    /// A lock with no epoch (a job's lock in `serve`): a statement on the session is enough,
    /// since other processes judge its holder by the session's last activity.
    Session,
}

/// Keeps `lease` confirmed on the session `conn` holds a lock on, until it lapses or the hold is
/// gone: every [`Lease::every`], one confirmation of `hold`, bounded by that same time. An
/// unconfirmed round changes nothing, so the lease runs out unless a later one gets through.
/// The one lease loop of every lock this program leases; abort the task to stop it.
pub fn keep(
    conn: Arc<tokio::sync::Mutex<PgConnection>>,
    hold: Hold,
    lease: Lease,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut hold = hold;
        let mut failing = false;
        loop {
            // After a failed round, the next comes soon: a restarted server is back in a second
            // or two, well within the lease.
            let pause = if failing {
                RETRY_PAUSE.min(lease.every())
            } else {
                lease.every()
            };
            tokio::time::sleep(pause).await;
            if lease.lapsed() {
                return;
            }
            let sent = Instant::now();
            let confirmed = tokio::time::timeout(lease.every(), async {
                let mut conn = conn.lock().await;
                match &mut hold {
                    Hold::Owner { owner, retake } => {
                        confirm_or_retake(&mut conn, owner, retake, lease.length()).await
                    }
                    Hold::Session => sqlx::query("select 1")
                        .execute(&mut *conn)
                        .await
                        .map(|_| true),
                }
            })
            .await;
            failing = false;
            match confirmed {
                Ok(Ok(true)) => {
                    if let Hold::Owner { owner, .. } = &hold {
                        lease.inner.epoch.fetch_max(owner.epoch, Ordering::SeqCst);
                    }
                    lease.confirmed(sent);
                }
                Ok(Ok(false)) => {
                    if let Hold::Owner { owner, .. } = &hold {
                        tracing::debug!(execution = %owner.key, "a newer owner took the execution");
                    }
                    return;
                }
                Ok(Err(_)) | Err(_) => failing = true,
            }
        }
    })
}

/// How soon a failed confirmation is tried again.
const RETRY_PAUSE: Duration = Duration::from_millis(200);

/// Confirms on the lock's session `conn`; when that session is gone (the server restarted, or
/// ended it), takes the lock again on a new session, in `conn`'s place, under the execution's
/// next epoch, which becomes `owner`. `Ok(false)`: a newer owner took the execution. An error:
/// neither worked this time (the server is still away, or the old session still holds the
/// lock), to be tried again.
///
/// The next epoch, not the same: a server that restarted may have lost the last commits it had
/// acknowledged (those made without waiting for the disk), so what the process holds in memory
/// may be ahead of the database. Every write under the old epoch is now refused, and the run
/// recovers — from the checkpoint the database kept — as after any loss; its lease, kept alive,
/// says only that it may still act.
async fn confirm_or_retake(
    conn: &mut PgConnection,
    owner: &mut Owner,
    retake: &sqlx::postgres::PgConnectOptions,
    length: Duration,
) -> Result<bool, sqlx::Error> {
    let err = match confirm(conn, owner, length).await {
        Err(e) if !matches!(e, sqlx::Error::Database(_)) => e,
        // A server's error on a live session (or success) is not a lost session.
        other => return other,
    };
    if conn.ping().await.is_ok() {
        return Err(err);
    }
    match self::retake(retake, owner, length).await? {
        Some((session, next)) => {
            *conn = session;
            tracing::info!(
                execution = %owner.key,
                epoch = next.epoch,
                "the lock's session was lost; took the lock again under the next ownership epoch (the run resumes from its stored checkpoint)"
            );
            *owner = next;
            Ok(true)
        }
        None => Ok(false),
    }
}

/// Takes `owner`'s lock again on a new session after the one that held it was lost, if no one
/// took the execution meanwhile (whoever had, had taken a newer epoch), and takes the next epoch
/// there, its lease confirmed: `Some((session, next owner))`; `None` when a newer owner took it.
/// An error when the lock is held (the old session may not have ended yet) or the server does
/// not answer: the caller tries again while its lease lasts.
async fn retake(
    options: &sqlx::postgres::PgConnectOptions,
    owner: &Owner,
    length: std::time::Duration,
) -> Result<Option<(PgConnection, Owner)>, sqlx::Error> {
    let mut conn = PgConnection::connect_with(options).await?;
    if !try_advisory_lock(&mut conn, LOCK_CLASS, &owner.key).await? {
        return Err(sqlx::Error::Io(std::io::Error::new(
            std::io::ErrorKind::WouldBlock,
            "the execution's lock is still held",
        )));
    }
    let newest: Option<i64> =
        sqlx::query_scalar("select epoca from reprocessamento_dono where execucao_id = $1")
            .bind(&owner.key)
            .fetch_optional(&mut conn)
            .await?;
    if newest != Some(owner.epoch) {
        let _ = conn.close().await;
        return Ok(None);
    }
    let next = Owner::take(&mut conn, &owner.key, TAKE_PATIENCE).await?;
    if confirm(&mut conn, &next, length).await? {
        Ok(Some((conn, next)))
    } else {
        let _ = conn.close().await;
        Ok(None)
    }
}

/// Confirms that `owner` still holds its epoch, on the lock's session, with the `length` of its
/// lease (a taker waits twice it): `false` when a newer owner took the execution (the
/// confirmation then changes nothing).
pub async fn confirm(
    conn: &mut PgConnection,
    owner: &Owner,
    length: Duration,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query(
        r#"
        insert into reprocessamento_arrendamento (execucao_id, epoca, confirmado_por, prazo)
        select d.execucao_id, d.epoca, current_setting('application_name'), $3::interval
        from reprocessamento_dono d where d.execucao_id = $1 and d.epoca = $2
        on conflict (execucao_id) do update
        set epoca = excluded.epoca, confirmado_em = now(), confirmado_por = excluded.confirmado_por,
            prazo = excluded.prazo
        where reprocessamento_arrendamento.epoca <= excluded.epoca
        "#,
    )
    .bind(&owner.key)
    .bind(owner.epoch)
    .bind(millis(length))
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// An interval's text for PostgreSQL.
fn millis(length: Duration) -> String {
    format!("{} milliseconds", length.as_millis())
}

/// Ends every session of the process holding `key`'s lock, if its owner's last confirmation is
/// older than twice the lease (the longer of its own and `lease`) by the database's clock: it
/// stopped itself a lease ago, and its lock is then free. Returns how many sessions were ended
/// (0: the holder is alive, or not ours to judge).
///
/// The schema's function `reprocessamento_encerrar_caducado` judges, and ends the sessions its
/// owner may; this session ends the rest it may itself (its own role's). So a takeover works
/// between two worker roles when the owner has the privileges of both (the book's setup), and
/// within one role without; it never needs `pg_signal_backend`. The holder's sessions are those
/// whose `application_name` names the same host and process (`HOST:PID`, the pid always kept).
pub async fn end_lapsed_holder(
    conn: &mut PgConnection,
    key: &str,
    holder_pid: i32,
    lease: Duration,
) -> Result<u64, sqlx::Error> {
    let ended: i64 = sqlx::query_scalar(
        r#"
        select count(*) filter (where case when s.encerrada then true
                                           when pg_has_role(s.papel, 'USAGE')
                                           then pg_terminate_backend(s.pid)
                                           else false end)
        from reprocessamento_encerrar_caducado($1, $2, $3::interval) s
        "#,
    )
    .bind(key)
    .bind(holder_pid)
    .bind(millis(lease))
    .fetch_one(conn)
    .await?;
    Ok(ended as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_lapses_once_its_last_confirmation_was_sent_a_lease_ago_and_stays_lapsed() {
        let sent = Instant::now() - Duration::from_secs(20);
        let lease = Lease::new(Duration::from_secs(15), sent);
        assert!(lease.lapsed());
        lease.confirmed(Instant::now());
        assert!(lease.lapsed(), "a lapsed lease is never alive again");
        let fresh = Lease::new(Duration::from_secs(15), Instant::now());
        assert!(fresh.alive());
    }
}
