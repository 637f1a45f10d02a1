//! What a measurement cost, counted on the processes that did the work rather than on the whole
//! machine: this harness, the webhook's process, and PostgreSQL's backends of the scratch
//! database with the server's writers (WAL writer, checkpointer, background writer). The machine's
//! total (`/proc/stat`) is printed too, but anything else running on the machine lands in it;
//! this figure holds still when the machine is shared. Also the ledger's own write counters: how
//! many of its updates PostgreSQL did as HOT updates, and the WAL the server wrote.

use std::collections::HashMap;
use std::sync::OnceLock;

use sqlx::PgPool;

/// The processes to count, found again at each reading (PostgreSQL's backends come and go).
pub struct Probe {
    pool: PgPool,
    sink_pid: Option<u32>,
}

static PROBE: OnceLock<Probe> = OnceLock::new();

/// Sets the processes every later measurement counts.
pub fn install(pool: PgPool, sink_pid: Option<u32>) {
    let _ = PROBE.set(Probe { pool, sink_pid });
}

/// CPU seconds by process id, at one instant.
#[derive(Debug, Default, Clone)]
pub struct Reading(HashMap<u32, f64>);

impl Reading {
    /// CPU seconds spent since `before` by the processes of this reading; a process born in
    /// between counts whole. A backend that ended in between is missed (the pools keep theirs).
    pub fn since(&self, before: &Reading) -> f64 {
        self.0
            .iter()
            .map(|(pid, now)| now - before.0.get(pid).copied().unwrap_or(0.0))
            .sum()
    }
}

/// Reads the CPU of the counted processes; empty when no probe is installed.
pub async fn read() -> Reading {
    let Some(probe) = PROBE.get() else {
        return Reading::default();
    };
    let backends: Vec<i32> = sqlx::query_scalar(
        r#"
        select pid from pg_stat_activity
        where datname = current_database()
           or backend_type in ('walwriter', 'checkpointer', 'background writer')
        "#,
    )
    .fetch_all(&probe.pool)
    .await
    .unwrap_or_default();
    let pids = backends
        .into_iter()
        .filter_map(|p| u32::try_from(p).ok())
        .chain(probe.sink_pid)
        .chain(Some(std::process::id()));
    Reading(pids.filter_map(|p| Some((p, cpu_of(p)?))).collect())
}

/// CPU seconds a process has spent, user and system (`/proc/PID/stat`, ticks of 1/100 s).
pub fn cpu_of(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let user: f64 = fields.get(11)?.parse().ok()?;
    let system: f64 = fields.get(12)?.parse().ok()?;
    Some((user + system) / 100.0)
}

/// The ledger's write counters and the server's WAL position.
#[derive(Debug, Clone, Copy, Default)]
pub struct Writes {
    updates: i64,
    hot_updates: i64,
    inserts: i64,
    attempts: i64,
    commits: i64,
    wal_bytes: f64,
}

impl Writes {
    /// Reads them, after waiting out the statistics' flush interval (a backend publishes its
    /// counters at most once a second, when idle).
    pub async fn read(pool: &PgPool) -> anyhow::Result<Writes> {
        tokio::time::sleep(std::time::Duration::from_millis(1_500)).await;
        let (updates, hot_updates, inserts, attempts, commits, wal_bytes) = sqlx::query_as(
            r#"
            select e.n_tup_upd, e.n_tup_hot_upd, e.n_tup_ins, t.n_tup_ins, d.xact_commit,
                   pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::float8
            from pg_stat_user_tables e, pg_stat_user_tables t, pg_stat_database d
            where e.relname = 'efeito_aplicado' and t.relname = 'efeito_tentativa'
              and d.datname = current_database()
            "#,
        )
        .fetch_one(pool)
        .await?;
        Ok(Writes {
            updates,
            hot_updates,
            inserts,
            attempts,
            commits,
            wal_bytes,
        })
    }

    /// Prints what happened between `before` and `self`, per effect.
    pub fn print_since(&self, before: &Writes, effects: i64) {
        let n = effects.max(1) as f64;
        let updates = self.updates - before.updates;
        let hot = self.hot_updates - before.hot_updates;
        println!(
            "    ledger writes per effect: {:.2} inserts, {:.2} updates of which HOT {hot}/{updates} = {:.2}, {:.2} attempt rows, {:.3} commits; WAL {:.0} bytes per effect (the server's, whatever else ran)",
            (self.inserts - before.inserts) as f64 / n,
            updates as f64 / n,
            hot as f64 / updates.max(1) as f64,
            (self.attempts - before.attempts) as f64 / n,
            (self.commits - before.commits) as f64 / n,
            (self.wal_bytes - before.wal_bytes) / n,
        );
    }
}
