//! The steps of a rebuild that act on an open one from outside its build: re-deriving queued
//! orders, the approval of what was shown, the swap under a short lock, the rollback, the drop of
//! the kept table, giving up. Each holds the one-rebuild-process lock where it writes.

use std::time::Duration;

use sqlx::pool::PoolConnection;
use sqlx::{PgConnection, PgPool, Postgres};

use super::{derive, RebuildError, Result};
use crate::domain::ORDER_PAID;
use crate::engine::approval::ConsoleSession;
use crate::tables::archive::rebuild as archive;
use crate::tables::commission::rebuild::{self as table, compare, swap as rename, Rebuild, Stage};

/// Attempts at taking `comissao` for a swap or rollback before giving up.
const LOCK_ATTEMPTS: u32 = 5;

/// The session advisory lock that lets one rebuild process work at a time; released when the
/// connection closes (a killed process releases it with its connection).
pub struct ProcessLock(Option<PoolConnection<Postgres>>);

impl Drop for ProcessLock {
    fn drop(&mut self) {
        // Closing the connection ends its session, and with it the advisory lock: never handed
        // back to the pool still holding it.
        if let Some(conn) = self.0.take() {
            drop(conn.detach());
        }
    }
}

impl ProcessLock {
    /// Lets the lock go and ends its session, waiting for both: a step this process starts next
    /// finds it free (dropping the lock ends the session too, but the server lets go only once
    /// it notices).
    pub async fn release(mut self) {
        if let Some(mut conn) = self.0.take() {
            let _ = sqlx::query(
                "select pg_advisory_unlock(hashtextextended('replay-ledger:rebuild', 0))",
            )
            .execute(&mut *conn)
            .await;
            let _ = sqlx::Connection::close(conn.detach()).await;
        }
    }
}

/// Runs `work` under the one-rebuild-process lock ([`Result::Err`] [`RebuildError::Busy`] when
/// another process holds it), released before this returns, whatever `work` returned.
pub async fn locked<T>(
    pool: &PgPool,
    work: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    let lock = hold_process_lock(pool).await?;
    let out = work.await;
    lock.release().await;
    out
}

pub async fn hold_process_lock(pool: &PgPool) -> Result<ProcessLock> {
    let mut conn = pool.acquire().await?;
    let held: bool = sqlx::query_scalar(
        "select pg_try_advisory_lock(hashtextextended('replay-ledger:rebuild', 0))",
    )
    .fetch_one(&mut *conn)
    .await?;
    match held {
        true => Ok(ProcessLock(Some(conn))),
        false => Err(RebuildError::Busy),
    }
}

/// Re-derives up to `limit` queued orders into `comissao_nova` (and their diff rows once the
/// rebuild was compared), in the caller's transaction. Returns how many.
pub async fn drain_some(conn: &mut PgConnection, rebuild: &Rebuild, limit: i64) -> Result<usize> {
    let orders = table::take_queued(conn, limit).await?;
    if orders.is_empty() {
        return Ok(0);
    }
    let events = archive::of_orders(conn, ORDER_PAID, &orders).await?;
    let rows = derive::newest_of_orders(&events);
    table::set_orders(conn, rebuild.id, &orders, &rows).await?;
    if rebuild.stage == Stage::Compared {
        compare::refresh(conn, &orders).await?;
    }
    Ok(orders.len())
}

/// Who approves a rebuild's comparison.
#[derive(Debug, Clone, Copy)]
pub enum Approver<'a> {
    /// The connected role (`replay-ledger rebuild --approve`).
    Role,
    /// The finance account of a live console session.
    Console(ConsoleSession<'a>),
}

/// Approves the open rebuild's comparison: only the one shown (`shown`, its fingerprint) and
/// only while it still is the rebuild's. Returns the approval's id and who gave it.
pub async fn approve(
    pool: &PgPool,
    by: Approver<'_>,
    shown: &str,
    note: Option<&str>,
) -> Result<(i64, String)> {
    let note = note.map(crate::shared::identity::check_note).transpose()?;
    let mut tx = pool.begin().await?;
    let rebuild = open_in(&mut tx, Stage::Compared, "comparada").await?;
    let (_, now) = compare::fingerprint(&mut tx, &rebuild.rule).await?;
    let stale = || RebuildError::Stale {
        shown: crate::shared::text::inert(shown),
        now: now.clone(),
    };
    if rebuild.fingerprint.as_deref() != Some(shown) || now != shown {
        return Err(stale());
    }
    if let Some((approval, by)) = rename::approval_of(&mut tx, &rebuild, shown).await? {
        return Err(RebuildError::AlreadyApproved {
            fingerprint: compare::short(shown).to_string(),
            approval,
            by,
        });
    }
    let recorded = match by {
        Approver::Role => rename::approve(&mut tx, &rebuild, shown, note.as_deref()).await,
        Approver::Console(session) => {
            rename::approve_in_console(
                &mut tx,
                session.token_digest,
                session.idle_timeout,
                rebuild.id,
                shown,
                note.as_deref(),
            )
            .await
        }
    };
    let approval = match recorded {
        Ok(approval) => approval,
        Err(e) if rename::is_stale(&e) => return Err(stale()),
        Err(e) => return Err(e.into()),
    };
    tx.commit().await?;
    tracing::info!(
        rebuild = rebuild.id,
        approval = approval.0,
        "rebuild comparison approved"
    );
    Ok(approval)
}

/// Refuses, naming each, when something hangs on `comissao` that a swap by renaming would not
/// carry (row-level security, policies, other triggers, rules, views, foreign keys).
pub async fn refuse_dependents(conn: &mut PgConnection) -> Result<()> {
    let found = rename::dependents(conn).await?;
    if found.is_empty() {
        return Ok(());
    }
    Err(RebuildError::Dependents(found.join(", ")))
}

/// Queues the orders with a `pedido.pago` archived after the build's target (see
/// [`archive::orders_archived_after`]).
pub async fn queue_archived_after_target(conn: &mut PgConnection, rebuild: &Rebuild) -> Result<()> {
    let Some(target) = rebuild.target else {
        return Ok(());
    };
    let orders = archive::orders_archived_after(conn, ORDER_PAID, target).await?;
    if !orders.is_empty() {
        table::queue(conn, &orders).await?;
    }
    Ok(())
}

/// Swaps `comissao_nova` in, in one transaction: `comissao` taken with a short lock timeout
/// (retried), nothing hanging on it that the rename would lose, the queue drained under the
/// lock (with the orders of every event archived since the build's target), and every row that
/// still differs one that approval `approval` was given for, as approved; then the tables are
/// renamed. Returns the new `comissao`'s count and checksum.
pub async fn swap(
    pool: &PgPool,
    rebuild: &Rebuild,
    approval: i64,
    approved: &str,
) -> Result<compare::Checksum> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let mut tx = pool.begin().await?;
        match rename::lock(&mut tx).await {
            Ok(()) => {}
            Err(e) if rename::is_lock_timeout(&e) && attempt < LOCK_ATTEMPTS => {
                drop(tx);
                tracing::info!(attempt, "comissao busy; the swap tries again");
                tokio::time::sleep(Duration::from_millis(50 * u64::from(attempt))).await;
                continue;
            }
            Err(e) if rename::is_lock_timeout(&e) => {
                return Err(RebuildError::LockTimeout(attempt, rename::LOCK_TIMEOUT))
            }
            Err(e) => return Err(e.into()),
        }
        refuse_dependents(&mut tx).await?;
        queue_archived_after_target(&mut tx, rebuild).await?;
        while drain_some(&mut tx, rebuild, 10_000).await? > 0 {}
        let beyond = rename::beyond_approval(&mut tx, approval, rebuild.target, ORDER_PAID).await?;
        if beyond > 0 {
            let (_, now) = compare::fingerprint(&mut tx, &rebuild.rule).await?;
            return Err(RebuildError::Changed {
                approved: compare::short(approved).to_string(),
                now: compare::short(&now).to_string(),
                beyond,
                again: String::new(),
            });
        }
        rename::swap(&mut tx, rebuild.id).await?;
        // The new `comissao` is the table whose checksum was kept as it was written (the drains
        // above included): no scan while the lock is held.
        let current = compare::checksum_new(&mut tx, rebuild.id).await?;
        tx.commit().await?;
        return Ok(current);
    }
}

/// Swaps the previous table back in (`--rollback`), carrying over the writes made since the swap.
/// Returns the rebuild and how many orders were carried.
pub async fn roll_back(pool: &PgPool) -> Result<(Rebuild, u64)> {
    locked(pool, roll_back_locked(pool)).await
}

async fn roll_back_locked(pool: &PgPool) -> Result<(Rebuild, u64)> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let mut tx = pool.begin().await?;
        let rebuild = open_in(&mut tx, Stage::Swapped, "trocada").await?;
        match rename::lock(&mut tx).await {
            Ok(()) => {}
            Err(e) if rename::is_lock_timeout(&e) && attempt < LOCK_ATTEMPTS => {
                drop(tx);
                tokio::time::sleep(Duration::from_millis(50 * u64::from(attempt))).await;
                continue;
            }
            Err(e) if rename::is_lock_timeout(&e) => {
                return Err(RebuildError::LockTimeout(attempt, rename::LOCK_TIMEOUT))
            }
            Err(e) => return Err(e.into()),
        }
        refuse_dependents(&mut tx).await?;
        let carried = rename::roll_back(&mut tx, rebuild.id).await?;
        tx.commit().await?;
        return Ok((rebuild, carried));
    }
}

/// Drops the table the last swap or rollback kept (`--drop-previous`), closing the rebuild.
pub async fn drop_previous(pool: &PgPool) -> Result<Rebuild> {
    locked(pool, drop_previous_locked(pool)).await
}

async fn drop_previous_locked(pool: &PgPool) -> Result<Rebuild> {
    let mut tx = pool.begin().await?;
    let rebuild = table::open(&mut tx).await?.ok_or(RebuildError::NoneOpen)?;
    if !matches!(rebuild.stage, Stage::Swapped | Stage::RolledBack) {
        return Err(RebuildError::Stage {
            id: rebuild.id,
            stage: rebuild.stage,
            wanted: "trocada or revertida",
        });
    }
    rename::drop_kept(&mut tx, &rebuild).await?;
    tx.commit().await?;
    Ok(rebuild)
}

/// Gives the open rebuild up before its swap (`--abandon`): `comissao_nova` dropped.
pub async fn abandon(pool: &PgPool) -> Result<Rebuild> {
    locked(pool, abandon_locked(pool)).await
}

async fn abandon_locked(pool: &PgPool) -> Result<Rebuild> {
    let mut tx = pool.begin().await?;
    let rebuild = table::open(&mut tx).await?.ok_or(RebuildError::NoneOpen)?;
    if !table::abandon(&mut tx, rebuild.id).await? {
        return Err(RebuildError::Stage {
            id: rebuild.id,
            stage: rebuild.stage,
            wanted: "construindo or comparada",
        });
    }
    tx.commit().await?;
    Ok(rebuild)
}

/// The open rebuild, locked, when it is at `stage`.
async fn open_in(conn: &mut PgConnection, stage: Stage, wanted: &'static str) -> Result<Rebuild> {
    let rebuild = table::open(conn).await?.ok_or(RebuildError::NoneOpen)?;
    if rebuild.stage != stage {
        return Err(RebuildError::Stage {
            id: rebuild.id,
            stage: rebuild.stage,
            wanted,
        });
    }
    Ok(rebuild)
}
