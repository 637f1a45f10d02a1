//! Blue-green rebuild of `comissao` (`replay-ledger rebuild`, `kind: rebuild`): the seed's
//! "Faça em nova tabela e troque depois de validar", in its six steps.
//!
//! 1. A new table `comissao_nova`, shaped and granted as `comissao`.
//! 2. The archive's `pedido.pago` read once, in one ordered stream (an order's events together,
//!    newest first), each order decided by the domain's one rule (upcasters included) and its
//!    row written once, by binary `COPY`, into `comissao_nova` with no index yet; the indexes
//!    (and the constraints they back) are built once after the load, as pg_restore does. The
//!    checkpoint is the last order loaded, moved in each chunk's own transaction, so a killed
//!    rebuild resumes after it; a kill during the index build leaves no index, and the next run
//!    builds them all. The next chunk is read and decided while one is written, and the new
//!    table's checksum is kept as it is written.
//! 3. The live events followed: the build reads the archive up to its highest `posicao` when the
//!    rebuild opened; from then on the live writers apply the new events, and triggers on
//!    `comissao` queue every order anybody writes while the rebuild is open (the live consumer, a
//!    replay, the seed's JavaScript consumer); each is re-derived from the archive into the new
//!    table, until the queue is empty. An event no writer has applied yet is in neither table.
//! 4. Compared by count and checksum, with the list of orders that differ and its fingerprint.
//! 5. Swapped only once an approval names that fingerprint: in one transaction that takes
//!    `comissao` with a short `lock_timeout` (retried), drains the queue under the lock, checks
//!    the fingerprint still holds and renames the tables ([`swap`]). Writers keep writing
//!    `comissao` by name; their prepared statements are re-planned on the new table.
//! 6. The previous table is kept for `--rollback`, and dropped only by `--drop-previous`.
//!
//! One rebuild process at a time (a session advisory lock); one rebuild open at a time.

mod derive;
mod swap;

use std::time::{Duration, Instant};

use futures::TryStreamExt;
use sqlx::PgPool;

use crate::domain::{self, CommissionRow, ORDER_PAID};
use crate::shared::shutdown::Shutdown;
use crate::tables::archive::rebuild as archive;
use crate::tables::commission::rebuild::{self as table, compare};
use crate::tables::db;

pub use swap::{abandon, approve, drop_previous, roll_back, Approver};
pub use table::compare::{short as short_fingerprint, Checksum, Comparison, DiffRow, RowSum};
pub use table::{Rebuild, Stage};

/// How a rebuild runs.
#[derive(Debug, Clone)]
pub struct RebuildConfig {
    /// `pedido.pago` events per chunk of the load (one transaction each, ending at an order's
    /// last event); default 20,000.
    pub chunk: u32,
    /// Orders re-derived per transaction when following the writers; default 1,000.
    pub follow_batch: i64,
    /// How often a progress line is said; default 2 s.
    pub progress_every: Duration,
}

impl Default for RebuildConfig {
    fn default() -> Self {
        RebuildConfig {
            chunk: 20_000,
            follow_batch: 1_000,
            progress_every: Duration::from_secs(2),
        }
    }
}

impl RebuildConfig {
    /// Chunk and batch sizes within 1..=1,000,000.
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=1_000_000).contains(&self.chunk) {
            return Err(format!("chunk {} must be within 1..=1000000", self.chunk));
        }
        if !(1..=1_000_000).contains(&self.follow_batch) {
            return Err(format!(
                "follow batch {} must be within 1..=1000000",
                self.follow_batch
            ));
        }
        Ok(())
    }
}

/// Why a rebuild did not go on.
#[derive(Debug, thiserror::Error)]
pub enum RebuildError {
    #[error("another rebuild process is running (one at a time)")]
    Busy,
    #[error("rebuild {id} is {stage}: the kept table must be dropped (`replay-ledger rebuild --drop-previous`) or the swap rolled back (`--rollback`) before a new rebuild")]
    Kept { id: i64, stage: Stage },
    #[error("no rebuild is open")]
    NoneOpen,
    #[error("rebuild {id} is {stage}, not {wanted}")]
    Stage {
        id: i64,
        stage: Stage,
        wanted: &'static str,
    },
    #[error("the comparison shown was {shown}, it is {now} now: run `replay-ledger rebuild` to see it again, then approve what it shows")]
    Stale { shown: String, now: String },
    #[error("the differences changed while the swap held the table: {beyond} differing orders are not as approved ({approved} approved, {now} under the lock); nothing was swapped. Compared again: {again}")]
    Changed {
        approved: String,
        now: String,
        beyond: i64,
        /// What to approve now (the new comparison), once compared again.
        again: String,
    },
    #[error("comissao has what a swap by renaming would not carry to the rebuilt table: {0}. Nothing was changed: remove them for the rebuild and put them back after the swap, or correct comissao in place with a replay")]
    Dependents(String),
    #[error("this comparison ({fingerprint}) is already approved (approval {approval} by {by}): run `replay-ledger rebuild` to swap it in")]
    AlreadyApproved {
        fingerprint: String,
        approval: i64,
        by: String,
    },
    #[error("comissao stayed busy: the swap's lock request timed out {0} times (lock_timeout {1}); nothing was swapped, try again")]
    LockTimeout(u32, &'static str),
    #[error(
        "stopped by a signal; the checkpoint is kept: run `replay-ledger rebuild` again to resume"
    )]
    Interrupted,
    #[error(transparent)]
    Note(#[from] crate::shared::identity::NoteError),
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
}

pub type Result<T, E = RebuildError> = std::result::Result<T, E>;

/// What a `rebuild` run ended with.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Built, followed and compared: waiting for an approval of `comparison.fingerprint`.
    Compared(Comparison),
    /// Still waiting for an approval of the comparison shown earlier (which still holds).
    AwaitingApproval { fingerprint: String, orders: i64 },
    /// Swapped in, under the approval `approval` given by `by`.
    Swapped {
        approval: i64,
        by: String,
        current: Checksum,
    },
}

/// A line of progress, said as the rebuild goes.
pub type Say<'a> = &'a mut (dyn FnMut(&str) + Send);

/// Runs the rebuild as far as it can go now: opens one (or resumes the open one), reads the whole
/// archive into `comissao_nova`, follows the writers until caught up, then compares — or, when
/// the comparison shown was approved and still holds, swaps.
#[tracing::instrument(skip_all, err)]
pub async fn run(
    pool: &PgPool,
    config: &RebuildConfig,
    shutdown: &Shutdown,
    say: Say<'_>,
) -> Result<Outcome> {
    swap::locked(pool, run_locked(pool, config, shutdown, say)).await
}

async fn run_locked(
    pool: &PgPool,
    config: &RebuildConfig,
    shutdown: &Shutdown,
    say: Say<'_>,
) -> Result<Outcome> {
    let rebuild = open_or_start(pool, say).await?;
    let mut work = Work {
        pool,
        config,
        shutdown,
        say,
        rebuild,
    };
    work.build().await?;
    work.follow().await?;
    work.finish().await
}

/// The open rebuild to go on with, or a new one. A new one is committed before the archive's
/// extent is read: from its commit on every write to `comissao` is queued, so an event archived
/// after the extent (beyond the build's reach) is caught through the writer that applies it.
async fn open_or_start(pool: &PgPool, say: Say<'_>) -> Result<Rebuild> {
    let mut tx = pool.begin().await?;
    let mut rebuild = match table::open(&mut tx).await? {
        Some(r) if r.stage.in_progress() => {
            say(&format!(
                "rebuild {}: resuming ({}), {} of {} events read, {}",
                r.id,
                r.stage,
                r.events_read,
                r.events_total,
                r.load_checkpoint()
            ));
            r
        }
        Some(r) => {
            return Err(RebuildError::Kept {
                id: r.id,
                stage: r.stage,
            })
        }
        None => {
            swap::refuse_dependents(&mut tx).await?;
            let r = table::start(&mut tx, domain::RULE_VERSION).await?;
            tx.commit().await?;
            say(&format!(
                "rebuild {}: comissao_nova created under {}; writes to comissao are followed from now on",
                r.id,
                domain::RULE_VERSION
            ));
            r
        }
    };
    if rebuild.target.is_none() {
        let mut conn = pool.acquire().await?;
        let (total, target) = archive::extent(&mut conn, ORDER_PAID, i64::MIN).await?;
        table::set_extent(&mut conn, rebuild.id, total, target).await?;
        (rebuild.events_total, rebuild.target) = (total, target.or(Some(i64::MIN)));
        say(&format!(
            "rebuild {}: {total} {ORDER_PAID} events to read, up to posicao {}",
            rebuild.id,
            opt(target)
        ));
    }
    Ok(rebuild)
}

/// A rebuild under way in this process.
struct Work<'a, 'b> {
    pool: &'a PgPool,
    config: &'a RebuildConfig,
    shutdown: &'a Shutdown,
    say: Say<'b>,
    rebuild: Rebuild,
}

impl Work<'_, '_> {
    /// Loads the archive into `comissao_nova` after the checkpoint, then builds its indexes: the
    /// next chunk is read and decided ([`read_ordered`]) while this one is written, so the
    /// archive's scan, the rule and the writes overlap instead of taking turns. Nothing to do
    /// once built.
    async fn build(&mut self) -> Result<()> {
        if self.rebuild.built_at.is_some() {
            return Ok(());
        }
        let started = Instant::now();
        let (mut said, mut read_here) = (Instant::now(), 0);
        if !self.rebuild.load_prepared || self.rebuild.checkpoint_order.is_none() {
            let mut tx = self.pool.begin().await?;
            self.rebuild = table::prepare_load(&mut tx, self.rebuild.id).await?;
            tx.commit().await?;
        }
        let mut sum = RowSum::parse(self.rebuild.new_sum.as_deref(), self.rebuild.new_rows)?;
        let after = self.rebuild.checkpoint_order.clone();
        let upto = self.rebuild.target.unwrap_or(i64::MIN);
        // One chunk waiting while one is written: at most three chunks in memory.
        let (sender, mut chunks) = tokio::sync::mpsc::channel(1);
        let reader = ReadAhead(tokio::spawn(read_ordered(
            self.pool.clone(),
            (after, upto),
            self.config.chunk,
            sender,
        )));
        while let Some(chunk) = chunks.recv().await {
            read_here += self.load(chunk?, &mut sum).await?;
            if said.elapsed() >= self.config.progress_every {
                said = Instant::now();
                self.progress(started.elapsed(), read_here);
            }
        }
        drop(reader);
        if self.shutdown.is_triggered() {
            return Err(RebuildError::Interrupted);
        }
        (self.say)(&format!(
            "rebuild {}: {} orders loaded; building comissao_nova's indexes",
            self.rebuild.id, sum.rows
        ));
        let mut tx = self.pool.begin().await?;
        table::finish_load(&mut tx, self.rebuild.id).await?;
        tx.commit().await?;
        // The planner's figures for the table, before the comparison joins it.
        sqlx::query("analyze comissao_nova")
            .execute(self.pool)
            .await?;
        self.rebuild.checkpoint = self.rebuild.target;
        self.rebuild.built_at = Some(chrono::Utc::now());
        if read_here > 0 {
            self.progress(started.elapsed(), read_here);
        }
        Ok(())
    }

    /// A progress line: events read of the total, the checkpoint, the pace of this process.
    fn progress(&mut self, elapsed: Duration, read_here: usize) {
        let r = &self.rebuild;
        let rate = read_here as f64 / elapsed.as_secs_f64().max(1e-3);
        (self.say)(&format!(
            "rebuild {}: {} of {} events ({:.0}%), {}, {rate:.0} events/s",
            r.id,
            r.events_read,
            r.events_total.max(r.events_read),
            r.progress() * 100.0,
            r.load_checkpoint(),
        ));
    }

    /// One chunk's rows, loaded with the checkpoint after it and the table's checksum in one
    /// transaction. Returns how many events it read.
    async fn load(&mut self, chunk: Chunk, sum: &mut RowSum) -> Result<usize> {
        if self.shutdown.is_triggered() {
            return Err(RebuildError::Interrupted);
        }
        let Chunk { rows, last, read } = chunk;
        let mut next = *sum;
        for row in &rows {
            next.add(&row.pedido_id, row.valor_centavos, row.versao);
        }
        let mut tx = db::begin_relaxed(self.pool).await?;
        if !table::load_chunk(&mut tx, self.rebuild.id, &rows, &last, read, &next).await? {
            return Err(RebuildError::Stage {
                id: self.rebuild.id,
                stage: Stage::Abandoned,
                wanted: "open",
            });
        }
        tx.commit().await?;
        *sum = next;
        self.rebuild.checkpoint_order = Some(last);
        self.rebuild.events_read += read;
        self.rebuild.new_rows = sum.rows;
        Ok(read as usize)
    }

    /// Re-derives the orders the live writers wrote, and those with an event archived after the
    /// build's target, until the queue is empty; how many.
    async fn follow(&mut self) -> Result<usize> {
        let mut did = 0;
        {
            let mut conn = self.pool.acquire().await?;
            swap::queue_archived_after_target(&mut conn, &self.rebuild).await?;
        }
        loop {
            if self.shutdown.is_triggered() {
                return Err(RebuildError::Interrupted);
            }
            let mut tx = self.pool.begin().await?;
            let n = swap::drain_some(&mut tx, &self.rebuild, self.config.follow_batch).await?;
            tx.commit().await?;
            if n == 0 {
                break;
            }
            self.rebuild.orders_rederived += n as i64;
            did += n;
        }
        if did > 0 {
            (self.say)(&format!(
                "rebuild {}: caught up with the live writers ({did} orders re-derived)",
                self.rebuild.id
            ));
        }
        Ok(did)
    }

    /// Compares, or swaps what was approved. An approval binds the comparison it was given for
    /// (its fingerprint); the swap then checks, under its lock, that every row that still
    /// differs is one that was approved, as approved: writes that made an order agree since do
    /// not void it.
    async fn finish(&mut self) -> Result<Outcome> {
        if self.rebuild.stage == Stage::Building {
            return self.compare().await;
        }
        let mut conn = self.pool.acquire().await?;
        let shown = self.rebuild.fingerprint.clone().unwrap_or_default();
        if let Some((approval, by)) =
            table::swap::approval_of(&mut conn, &self.rebuild, &shown).await?
        {
            drop(conn);
            let current = match swap::swap(self.pool, &self.rebuild, approval, &shown).await {
                Ok(current) => current,
                Err(RebuildError::Changed {
                    approved,
                    now,
                    beyond,
                    ..
                }) => {
                    // The approval no longer covers the differences: a new comparison to
                    // approve, so the next run does not try the same swap again.
                    let again = match self.compare().await? {
                        Outcome::Compared(c) => format!(
                            "{} orders differ; review them, then `replay-ledger rebuild --approve '{}'` and `replay-ledger rebuild`",
                            c.orders_differing, c.fingerprint
                        ),
                        _ => "run `replay-ledger rebuild`".to_string(),
                    };
                    return Err(RebuildError::Changed {
                        approved,
                        now,
                        beyond,
                        again,
                    });
                }
                Err(e) => return Err(e),
            };
            (self.say)(&format!(
                "rebuild {}: swapped in (approval {approval} by {by}); comissao has {} rows, checksum {}; the previous table is comissao_anterior",
                self.rebuild.id, current.count, current.digest
            ));
            return Ok(Outcome::Swapped {
                approval,
                by,
                current,
            });
        }
        let (orders, now) =
            compare::restamp(&mut conn, self.rebuild.id, &self.rebuild.rule).await?;
        if shown != now {
            (self.say)(&format!(
                "rebuild {}: the differences changed since the comparison shown ({} then, {} now): comparing again",
                self.rebuild.id,
                compare::short(&shown),
                compare::short(&now)
            ));
            return self.compare().await;
        }
        Ok(Outcome::AwaitingApproval {
            fingerprint: now,
            orders,
        })
    }

    /// The whole comparison, in one repeatable-read snapshot; then the writes that raced with it
    /// are re-derived and the fingerprint stamped as it stands.
    async fn compare(&mut self) -> Result<Outcome> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("set transaction isolation level repeatable read")
            .execute(&mut *tx)
            .await?;
        let mut comparison = compare::compare(&mut tx, self.rebuild.id, &self.rebuild.rule).await?;
        tx.commit().await?;
        self.rebuild.stage = Stage::Compared;
        // Orders written meanwhile are re-derived and their diff rows refreshed; only then can
        // the fingerprint have moved.
        if self.follow().await? > 0 {
            let mut conn = self.pool.acquire().await?;
            let (orders, stamp) =
                compare::restamp(&mut conn, self.rebuild.id, &self.rebuild.rule).await?;
            comparison.orders_differing = orders;
            comparison.fingerprint = stamp;
            let mut conn = self.pool.acquire().await?;
            (comparison.older_versions, comparison.deleted) =
                compare::effects_beyond_values(&mut conn).await?;
        }
        Ok(Outcome::Compared(comparison))
    }
}

/// A chunk of the archive, read and decided: the rows it writes (one per order that has an
/// accepted event), the last order it holds whole (the checkpoint once written) and how many
/// events it read.
#[derive(Default)]
struct Chunk {
    rows: Vec<CommissionRow>,
    last: String,
    read: i64,
}

/// Reads the `pedido.pago` events up to `upto` of the orders after `after` in one ordered stream,
/// on a connection of its own, decides each order by the domain's rule and hands the rows on in
/// chunks of at least `limit` events that end at an order's last event; ends (closing the
/// channel) at the archive's end, on the first error (handed on), or when nobody takes its
/// chunks any more.
async fn read_ordered(
    pool: PgPool,
    (after, upto): (Option<String>, i64),
    limit: u32,
    out: tokio::sync::mpsc::Sender<Result<Chunk, sqlx::Error>>,
) {
    let read = async {
        let mut conn = pool.acquire().await?;
        let mut events = archive::ordered(&mut conn, ORDER_PAID, after.as_deref(), upto);
        let (mut orders, mut chunk) = (derive::Orders::default(), Chunk::default());
        while let Some(event) = events.try_next().await? {
            if chunk.read >= i64::from(limit) && orders.starts_another(&event) {
                chunk.last = orders.current().unwrap_or_default().to_string();
                if out.send(Ok(std::mem::take(&mut chunk))).await.is_err() {
                    return Ok(());
                }
            }
            orders.take(&event, &mut chunk.rows);
            chunk.read += 1;
        }
        if let Some(last) = orders.current() {
            chunk.last = last.to_string();
            let _ = out.send(Ok(chunk)).await;
        }
        Ok::<_, sqlx::Error>(())
    };
    if let Err(e) = read.await {
        let _ = out.send(Err(e)).await;
    }
}

/// The read-ahead task, stopped when the build stops (finished, failed or interrupted).
struct ReadAhead(tokio::task::JoinHandle<()>);

impl Drop for ReadAhead {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The open rebuild's row, or the newest one (for `status`, `/metrics`).
pub async fn latest(pool: &PgPool) -> Result<Option<Rebuild>, sqlx::Error> {
    table::latest(pool).await
}

/// Of the differing rows: how many the swap moves to an older `versao_evento`, how many it
/// deletes.
pub async fn compare_effects_beyond_values(
    conn: &mut sqlx::PgConnection,
) -> Result<(i64, i64), sqlx::Error> {
    compare::effects_beyond_values(conn).await
}

/// The differing orders of the open rebuild's comparison (at most `limit`).
pub async fn diff(pool: &PgPool, limit: i64) -> Result<Vec<DiffRow>, sqlx::Error> {
    compare::rows(pool, limit).await
}

fn opt(n: Option<i64>) -> String {
    n.map_or("-".into(), |n| n.to_string())
}
