//! The ownership lease (`reprocessamento_arrendamento`, issue 33). The holder of an execution's
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

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlx::PgConnection;

use super::owner::Owner;

/// The lease when `REPLAY_LEDGER_LEASE` is not set.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(15);

/// The lease of this process: `REPLAY_LEDGER_LEASE`, or [`DEFAULT_LEASE`]; at least 1 s.
pub fn configured() -> Result<Duration, String> {
    match std::env::var("REPLAY_LEDGER_LEASE") {
        Err(_) => Ok(DEFAULT_LEASE),
        Ok(raw) => match humantime::parse_duration(raw.trim()) {
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

    /// Whether it lapsed (as opposed to being alive).
    pub fn lapsed(&self) -> bool {
        !self.alive()
    }
}

/// What a lock's session confirms to keep its lease.
#[derive(Debug, Clone)]
pub enum Hold {
    /// An execution held under an ownership epoch: the confirmation is recorded for other
    /// processes to judge by, and fails once a newer owner took the execution.
    Owner(Owner),
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
        loop {
            tokio::time::sleep(lease.every()).await;
            if lease.lapsed() {
                return;
            }
            let sent = Instant::now();
            let confirmed = tokio::time::timeout(lease.every(), async {
                let mut conn = conn.lock().await;
                match &hold {
                    Hold::Owner(owner) => confirm(&mut conn, owner).await,
                    Hold::Session => sqlx::query("select 1")
                        .execute(&mut *conn)
                        .await
                        .map(|_| true),
                }
            })
            .await;
            match confirmed {
                Ok(Ok(true)) => lease.confirmed(sent),
                Ok(Ok(false)) => {
                    if let Hold::Owner(owner) = &hold {
                        tracing::debug!(execution = %owner.key, "a newer owner took the execution");
                    }
                    return;
                }
                Ok(Err(_)) | Err(_) => {}
            }
        }
    })
}

/// Confirms that `owner` still holds its epoch, on the lock's session: `false` when a newer
/// owner took the execution (the confirmation then changes nothing).
pub async fn confirm(conn: &mut PgConnection, owner: &Owner) -> Result<bool, sqlx::Error> {
    let done = sqlx::query(
        r#"
        insert into reprocessamento_arrendamento (execucao_id, epoca, confirmado_por)
        select d.execucao_id, d.epoca, current_setting('application_name')
        from reprocessamento_dono d where d.execucao_id = $1 and d.epoca = $2
        on conflict (execucao_id) do update
        set epoca = excluded.epoca, confirmado_em = now(), confirmado_por = excluded.confirmado_por
        where reprocessamento_arrendamento.epoca <= excluded.epoca
        "#,
    )
    .bind(&owner.key)
    .bind(owner.epoch)
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Ends every session of the process holding `key`'s lock, if its owner's last confirmation is
/// older than `2 × lease` by the database's clock (it stopped itself a lease ago): its lock is then
/// free. Returns how many sessions were ended (0: the holder is alive, or not ours to judge).
/// The holder's sessions are those whose `application_name` names the same host and process.
pub async fn end_lapsed_holder(
    conn: &mut PgConnection,
    key: &str,
    holder_pid: i32,
    lease: Duration,
) -> Result<u64, sqlx::Error> {
    let ended: i64 = sqlx::query_scalar(
        r#"
        with holder as (
          select a.application_name from pg_stat_activity a
          where a.pid = $2 and a.application_name like 'replay-ledger %'
            and exists (select 1 from reprocessamento_arrendamento r
                        where r.execucao_id = $1
                          and r.confirmado_em < now() - 2 * $3::interval)
        )
        select count(*) filter (where pg_terminate_backend(a.pid))
        from pg_stat_activity a, holder h
        where a.datname = current_database() and a.pid <> pg_backend_pid()
          and a.application_name like 'replay-ledger %'
          and split_part(a.application_name, ' ', 3) = split_part(h.application_name, ' ', 3)
        "#,
    )
    .bind(key)
    .bind(holder_pid)
    .bind(format!("{} milliseconds", lease.as_millis()))
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
