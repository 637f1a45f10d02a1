//! What holds the live consumer's checkpoint: the oldest transaction still running on the server,
//! in any database (transaction ids are server-wide). The consumer applies new events past it;
//! only its stored checkpoint waits. An operator who sees the checkpoint stand still wants to
//! know for how long and who holds it: [`HorizonWatch::read`] says both, for `/metrics` and the log.

use std::sync::Mutex;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use crate::shared::text::inert;

/// The oldest transaction running when it was read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Horizon {
    /// Its xid; `None` when no transaction with an xid was running (nothing holds the horizon).
    pub xid: Option<u64>,
    /// How long it has run: from its start when this role may see it (`pg_stat_activity` shows
    /// `xact_start` of other roles' sessions only to superusers and `pg_read_all_stats`; a
    /// prepared transaction's time is public), else since this process first saw it as the
    /// oldest — then a lower bound. Zero when none runs.
    pub age: Duration,
    /// Whether `age` is from the transaction's own start (else from when this process first saw
    /// it, or zero in a process that looked once).
    pub age_exact: bool,
    /// The backend running it, if it is a session (not a prepared transaction).
    pub pid: Option<i32>,
    /// Its database.
    pub database: Option<String>,
    /// A prepared transaction's `gid`.
    pub prepared: Option<String>,
}

/// Reads the horizon and remembers since when its holder has held it; warns once per holder
/// held longer than `warn_after` (when set).
#[derive(Debug, Default)]
pub struct HorizonWatch {
    warn_after: Option<Duration>,
    /// (xid, when this process first saw it as the oldest running transaction).
    first_seen: Mutex<Option<(u64, DateTime<Utc>)>>,
    warned: Mutex<Option<u64>>,
}

type HolderRow = (
    String,
    Option<i32>,
    Option<String>,
    Option<DateTime<Utc>>,
    Option<String>,
    Option<String>,
    Option<DateTime<Utc>>,
    DateTime<Utc>,
);

impl HorizonWatch {
    pub fn new(warn_after: Option<Duration>) -> Self {
        HorizonWatch {
            warn_after,
            ..HorizonWatch::default()
        }
    }

    /// The horizon now: one statement on `pg_current_snapshot()`, `pg_stat_activity` and
    /// `pg_prepared_xacts`.
    pub async fn read(&self, pool: &PgPool) -> Result<Horizon, sqlx::Error> {
        let row: Option<HolderRow> = sqlx::query_as(
            r#"
            select o.xid::text, a.pid, a.datname::text, a.xact_start, p.gid, p.database::text,
                   p.prepared, now()
            from (select x as xid from pg_snapshot_xip(pg_current_snapshot()) as x
                  order by x limit 1) o
            left join pg_stat_activity a on a.backend_xid = xid(o.xid)
            left join pg_prepared_xacts p on p.transaction = xid(o.xid)
            limit 1
            "#,
        )
        .fetch_optional(pool)
        .await?;
        let Some((xid, pid, datname, xact_start, gid, prepared_db, prepared_at, now)) = row else {
            *self.first_seen.lock().unwrap_or_else(|e| e.into_inner()) = None;
            return Ok(Horizon::default());
        };
        let xid: u64 = xid
            .parse()
            .map_err(|_| sqlx::Error::Protocol(format!("unexpected xid8 value {xid:?}")))?;
        let seen_since = self.first_seen_since(xid, now);
        let start = xact_start.or(prepared_at);
        let since = start.unwrap_or(seen_since);
        let horizon = Horizon {
            xid: Some(xid),
            age: (now - since).to_std().unwrap_or_default(),
            age_exact: start.is_some(),
            pid,
            database: datname.or(prepared_db),
            prepared: gid,
        };
        self.warn_if_held(&horizon);
        Ok(horizon)
    }

    /// When this process first saw `xid` as the oldest running transaction.
    fn first_seen_since(&self, xid: u64, now: DateTime<Utc>) -> DateTime<Utc> {
        let mut first = self.first_seen.lock().unwrap_or_else(|e| e.into_inner());
        match *first {
            Some((seen, since)) if seen == xid => since,
            _ => {
                *first = Some((xid, now));
                now
            }
        }
    }

    fn warn_if_held(&self, horizon: &Horizon) {
        let (Some(after), Some(xid)) = (self.warn_after, horizon.xid) else {
            return;
        };
        let mut warned = self.warned.lock().unwrap_or_else(|e| e.into_inner());
        if horizon.age < after || *warned == Some(xid) {
            return;
        }
        *warned = Some(xid);
        tracing::warn!(
            xid,
            pid = %horizon.pid.map_or_else(|| "-".to_string(), |p| p.to_string()),
            database = %inert(horizon.database.as_deref().unwrap_or("?")),
            prepared = %inert(horizon.prepared.as_deref().unwrap_or("-")),
            held_for_s = horizon.age.as_secs(),
            "a transaction open this long holds the live consumer's checkpoint (new events are still applied; see pg_stat_activity for that pid)"
        );
    }
}
