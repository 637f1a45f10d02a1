//! Every read of `evento_arquivado`: the bounds of a window and its events in `posicao` order,
//! in batches after a checkpoint (keyset paging, never `OFFSET`); the live consumer's reads by
//! inserting transaction are in `live.rs`, and the snapshots that say which transactions a read
//! covers in `snapshot.rs` (pure).
//!
//! Every read for the engine selects `payload_da_regra(payload)` (migration `rule_payload`), not
//! the payload: only the fields the commission rule and its upcasters read, each bounded, so a
//! batch of 50 MB payloads costs the worker a few bytes per event, and the rule decides the same.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use crate::domain::Event;

pub mod history;
mod live;
mod payload;
pub mod rebuild;
pub mod reconcile;
pub mod snapshot;
pub mod unsent;
pub use live::{newest_applied, newest_below, pending, read_round, Applied, LivePosition, Pending};
use payload::Payload;

/// The part of the archive an execution covers: `ocorrido_em` in `[from, to)` and `posicao` in
/// `(.., last]`. `last` is fixed when a pass starts, so events archived later with a higher
/// `posicao` are not chased (the next pass or the live consumer takes them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub first: i64,
    pub last: i64,
    /// Events in the window (in the partition, when there is one).
    pub count: i64,
    /// Only the events of one partition of the window.
    pub partition: Option<Partition>,
}

/// One of `count` partitions of a window, by a stable hash of `pedido_id`: every event of an
/// order falls in the same partition, so an order's events keep their order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Partition {
    pub index: u32,
    pub count: u32,
}

impl Partition {
    /// The SQL parameters of the partition filter: (index, count), or (null, 1) for none.
    fn params(p: Option<Partition>) -> (Option<i32>, i32) {
        p.map_or((None, 1), |p| (Some(p.index as i32), p.count as i32))
    }
}

impl Window {
    /// The same window restricted to one partition, with its event count.
    pub async fn partition(
        &self,
        pool: &PgPool,
        partition: Partition,
    ) -> Result<Window, sqlx::Error> {
        let mut part = Window {
            partition: Some(partition),
            ..*self
        };
        part.count = remaining(pool, &part, self.first).await?;
        Ok(part)
    }
}

/// The statement of [`bounds`]: it names the window's `ocorrido_em` range, so on an archive
/// partitioned by month it reads only the window's months.
pub const BOUNDS_SQL: &str = r#"
        select min(posicao), max(posicao), count(*)
        from evento_arquivado
        where ocorrido_em >= $1 and ocorrido_em < $2
        "#;

/// The bounds of a window: `None` when it holds no event. Served by the
/// `(ocorrido_em, posicao)` index, so a day in an archive of many days reads only that day.
pub async fn bounds(
    pool: &PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Option<Window>, sqlx::Error> {
    let row: (Option<i64>, Option<i64>, i64) = sqlx::query_as(BOUNDS_SQL)
        .bind(from)
        .bind(to)
        .fetch_one(pool)
        .await?;
    Ok(match row {
        (Some(first), Some(last), count) => Some(Window {
            from,
            to,
            first,
            last,
            count,
            partition: None,
        }),
        _ => None,
    })
}

/// The statement of [`remaining`] (`$1`..`$4`: window from, to, first and last position).
pub const REMAINING_SQL: &str = r#"
        select count(*)
        from evento_arquivado
        where ocorrido_em >= $1 and ocorrido_em < $2 and posicao >= $3 and posicao <= $4
          and ($5::int4 is null or particao_do_pedido(pedido_id, $6::int4) = $5)
        "#;

/// How many events of the window lie at or after `from` (for progress and ETA on resume).
pub async fn remaining(pool: &PgPool, window: &Window, from: i64) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(REMAINING_SQL)
        .bind(window.from)
        .bind(window.to)
        .bind(from)
        .bind(window.last)
        .bind(Partition::params(window.partition).0)
        .bind(Partition::params(window.partition).1)
        .fetch_one(pool)
        .await
}

/// The statement of [`read_batch`] (`$3`, `$4`: the window's `ocorrido_em` range).
pub const READ_BATCH_SQL: &str = r#"
            select posicao, id, tipo, pedido_id, versao, payload_da_regra(payload), ocorrido_em
            from evento_arquivado
            where posicao >= $1 and posicao <= $2 and ocorrido_em >= $3 and ocorrido_em < $4
              and ($6::int4 is null or particao_do_pedido(pedido_id, $7::int4) = $6)
            order by posicao
            limit $5
            "#;

/// The next batch of the window from `from` on (inclusive: a cursor "after" a position could not
/// start before an event at i64::MIN), in `posicao` order.
pub async fn read_batch(
    pool: &PgPool,
    window: &Window,
    from: i64,
    limit: u32,
) -> Result<Vec<Event>, sqlx::Error> {
    let rows: Vec<EventRow> = sqlx::query_as(READ_BATCH_SQL)
        .bind(from)
        .bind(window.last)
        .bind(window.from)
        .bind(window.to)
        .bind(i64::from(limit))
        .bind(Partition::params(window.partition).0)
        .bind(Partition::params(window.partition).1)
        // Planned with the actual values every time: a cached generic plan does not know how wide
        // the `ocorrido_em` range is, picks the `(ocorrido_em, posicao)` index and sorts the whole
        // window for every batch (quadratic; seen at 1,000,000 events). With the values, the planner
        // walks the primary key from `from` and stops after `limit` rows.
        .persistent(false)
        .fetch_all(pool)
        .await?;
    Ok(rows.into_iter().map(into_event).collect())
}

type EventRow = (i64, String, String, String, i64, Payload, DateTime<Utc>);

/// An event with when it reached the archive (`None`: before the archive recorded that).
pub type Archived = (Event, Option<DateTime<Utc>>);

/// An [`EventRow`] and its `arquivado_em`.
type ArchivedRow = (
    i64,
    String,
    String,
    String,
    i64,
    Payload,
    DateTime<Utc>,
    Option<DateTime<Utc>>,
);

fn into_archived(
    (posicao, id, tipo, pedido_id, versao, payload, ocorrido_em, arquivado_em): ArchivedRow,
) -> Archived {
    (
        into_event((posicao, id, tipo, pedido_id, versao, payload, ocorrido_em)),
        arquivado_em,
    )
}

fn into_event((posicao, id, tipo, pedido_id, versao, payload, ocorrido_em): EventRow) -> Event {
    let payload = payload.into_value(&id, posicao);
    Event {
        posicao,
        id,
        tipo,
        pedido_id,
        versao,
        payload,
        ocorrido_em,
    }
}

/// Events by id, for re-executing an effect from its archived event (the sweeper).
pub async fn by_ids(pool: &PgPool, ids: &[String]) -> Result<Vec<Event>, sqlx::Error> {
    let rows: Vec<EventRow> = sqlx::query_as(
        r#"
            select posicao, id, tipo, pedido_id, versao, payload_da_regra(payload), ocorrido_em
            from evento_arquivado where id = any($1)
            "#,
    )
    .bind(ids)
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().map(into_event).collect())
}

/// The event at `posicao`, if the archive holds one (the live consumer's last applied event).
pub async fn at(pool: &PgPool, posicao: i64) -> Result<Option<Event>, sqlx::Error> {
    let row: Option<EventRow> = sqlx::query_as(
        r#"
            select posicao, id, tipo, pedido_id, versao, 'null'::jsonb, ocorrido_em
            from evento_arquivado where posicao = $1
            "#,
    )
    .bind(posicao)
    .fetch_optional(pool)
    .await?;
    Ok(row.map(into_event))
}

/// Every event of one order, in `posicao` order (an order's story: `explain`), found by the hash
/// index on `pedido_id`, with when each was archived (`None`: before the archive recorded it).
pub async fn of_order(pool: &PgPool, pedido_id: &str) -> Result<Vec<Archived>, sqlx::Error> {
    let rows: Vec<ArchivedRow> = sqlx::query_as(
        r#"
            select posicao, id, tipo, pedido_id, versao, payload_da_regra(payload), ocorrido_em,
                   arquivado_em
            from evento_arquivado where pedido_id = $1 order by posicao
            "#,
    )
    .bind(pedido_id)
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().map(into_archived).collect())
}

/// What a window of the archive holds, summed up so that a change shows: the number of events,
/// the highest `posicao`, and an order-independent hash over each event's id, version, position
/// and payload. The approval gate compares it between approval and the real run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprint {
    pub count: i64,
    pub max_posicao: Option<i64>,
    pub hash: String,
}

/// The statement of [`fingerprint`].
pub const FINGERPRINT_SQL: &str = r#"
        select count(*), max(posicao),
               coalesce(bit_xor(hashtextextended(
                 id || '|' || versao || '|' || posicao || '|' || md5(payload::text), 0)), 0)::text
        from evento_arquivado
        where ocorrido_em >= $1 and ocorrido_em < $2
        "#;

/// The fingerprint of `ocorrido_em` in `[from, to)`, in one pass over the window (no sort).
pub async fn fingerprint(
    pool: &PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Fingerprint, sqlx::Error> {
    let (count, max_posicao, hash): (i64, Option<i64>, String) = sqlx::query_as(FINGERPRINT_SQL)
        .bind(from)
        .bind(to)
        .fetch_one(pool)
        .await?;
    Ok(Fingerprint {
        count,
        max_posicao,
        hash,
    })
}

/// An `xid8` read as text.
fn parse_xid(text: &str) -> Result<u64, sqlx::Error> {
    text.parse()
        .map_err(|_| sqlx::Error::Protocol(format!("unexpected xid8 value {text:?}")))
}
