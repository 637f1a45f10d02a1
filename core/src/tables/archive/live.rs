//! The live consumer's reads of `evento_arquivado`: by inserting transaction (`xid_insercao`),
//! never by a horizon. Which transactions a read covers comes from two snapshots (see
//! `snapshot`); these statements only walk the `(xid_insercao, posicao)` index over
//! the xid ranges they are given.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use super::snapshot::Snapshot;
use super::{into_event, parse_xid, Payload};
use crate::domain::Event;

/// An event's place in the live consumer's order: its inserting transaction, then `posicao`.
/// The stored checkpoint is one: every event at or before it is applied, and no transaction can
/// still add one there (its xid is below every transaction still running).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct LivePosition {
    pub xid: u64,
    pub posicao: i64,
}

impl LivePosition {
    /// Before every event.
    pub const START: LivePosition = LivePosition {
        xid: 0,
        posicao: i64::MIN,
    };
}

/// The next events after `after`, in (transaction, position) order, of the transactions in
/// `ranges` (sorted, disjoint, half-open xid ranges, as `snapshot::newly_visible` gives
/// them). Each range is one index range scan, limited to `limit` rows: a read costs at most
/// `limit` rows per range it touches, and never a row of a transaction outside them.
pub async fn read_round(
    pool: &PgPool,
    ranges: &[(u64, u64)],
    after: LivePosition,
    limit: u32,
) -> Result<Vec<(Event, u64)>, sqlx::Error> {
    type LiveRow = (
        i64,
        String,
        String,
        String,
        i64,
        Payload,
        DateTime<Utc>,
        String,
    );
    let ahead: Vec<&(u64, u64)> = ranges.iter().filter(|(_, hi)| *hi > after.xid).collect();
    if ahead.is_empty() {
        return Ok(Vec::new());
    }
    let lo: Vec<String> = ahead.iter().map(|(lo, _)| lo.to_string()).collect();
    let hi: Vec<String> = ahead.iter().map(|(_, hi)| hi.to_string()).collect();
    let rows: Vec<LiveRow> = sqlx::query_as(
        r#"
        select e.posicao, e.id, e.tipo, e.pedido_id, e.versao, e.payload, e.ocorrido_em,
               e.xid_insercao::text
        from unnest($1::text[]::xid8[], $2::text[]::xid8[]) as r(lo, hi)
        cross join lateral (
            select a.posicao, a.id, a.tipo, a.pedido_id, a.versao,
                   payload_da_regra(a.payload) as payload, a.ocorrido_em, a.xid_insercao
            from evento_arquivado a
            where a.xid_insercao >= r.lo and a.xid_insercao < r.hi
              and (a.xid_insercao, a.posicao) > ($3::text::xid8, $4)
            order by a.xid_insercao, a.posicao
            limit $5
        ) e
        order by e.xid_insercao, e.posicao
        limit $5
        "#,
    )
    .bind(lo)
    .bind(hi)
    .bind(after.xid.to_string())
    .bind(after.posicao)
    .bind(i64::from(limit))
    // Planned with the actual ranges every time, as `read_batch` is (see there).
    .persistent(false)
    .fetch_all(pool)
    .await?;
    rows.into_iter()
        .map(
            |(posicao, id, tipo, pedido_id, versao, payload, ocorrido_em, xid)| {
                let event =
                    into_event((posicao, id, tipo, pedido_id, versao, payload, ocorrido_em));
                Ok((event, parse_xid(&xid)?))
            },
        )
        .collect()
}

/// The last event, in the live order, of the transactions below `xid`: where the stored checkpoint
/// may move once every transaction below `xid` has ended and its events are applied. `None` when
/// there is none.
pub async fn newest_below<'c, E>(conn: E, xid: u64) -> Result<Option<LivePosition>, sqlx::Error>
where
    E: sqlx::PgExecutor<'c>,
{
    let row: Option<(String, i64)> = sqlx::query_as(
        r#"
        select xid_insercao::text, posicao from evento_arquivado
        where xid_insercao < $1::text::xid8
        order by xid_insercao desc, posicao desc
        limit 1
        "#,
    )
    .bind(xid.to_string())
    .fetch_optional(conn)
    .await?;
    row.map(|(x, posicao)| {
        Ok(LivePosition {
            xid: parse_xid(&x)?,
            posicao,
        })
    })
    .transpose()
}

/// What the live consumer has applied, as stored: the checkpoint, every event `seen` sees, and
/// in the round in progress every event its snapshot sees up to its cursor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied<'a> {
    pub checkpoint: LivePosition,
    pub seen: &'a Snapshot,
    pub round: Option<(&'a Snapshot, LivePosition)>,
}

impl Applied<'_> {
    /// Whether the event archived by transaction `xid` at `posicao` is among what the consumer
    /// has applied: the complement of [`pending`]'s filter, for a reader that has the row.
    pub fn covers(&self, xid: u64, posicao: i64) -> bool {
        let at = LivePosition { xid, posicao };
        at <= self.checkpoint
            || self.seen.visible(xid)
            || self
                .round
                .is_some_and(|(snapshot, cursor)| snapshot.visible(xid) && at <= cursor)
    }
}

/// Events archived (committed) and not yet applied by the live consumer, counted up to a cap.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pending {
    /// How many, at most the cap (then at least that many).
    pub events: i64,
    /// Seconds since the oldest of them was archived (`arquivado_em`; rows archived before that
    /// column existed have no age). Zero when there is none.
    pub oldest_age_seconds: f64,
}

/// The events no applied set covers, that this statement sees: of the transactions `seen` saw
/// running or that began after it, after the checkpoint, outside the round's done part. At most
/// `cap` rows are looked at, so a backlog of millions costs a bounded read.
pub async fn pending(
    pool: &PgPool,
    applied: &Applied<'_>,
    cap: i64,
) -> Result<Pending, sqlx::Error> {
    let running: Vec<String> = applied.seen.xip.iter().map(u64::to_string).collect();
    let (round, cursor) = match applied.round {
        Some((snapshot, cursor)) => (Some(snapshot.to_string()), Some(cursor)),
        None => (None, None),
    };
    let (events, age): (i64, Option<f64>) = sqlx::query_as(
        r#"
        select count(*)::bigint,
               greatest(extract(epoch from clock_timestamp() - min(arquivado_em)), 0)::float8
        from (
            select arquivado_em from evento_arquivado
            where (xid_insercao = any($1::text[]::xid8[]) or xid_insercao >= $2::text::xid8)
              and (xid_insercao, posicao) > ($3::text::xid8, $4)
              and not coalesce(pg_visible_in_snapshot(xid_insercao, $5::text::pg_snapshot)
                               and (xid_insercao, posicao) <= ($6::text::xid8, $7), false)
            limit $8
        ) p
        "#,
    )
    .bind(running)
    .bind(applied.seen.xmax.to_string())
    .bind(applied.checkpoint.xid.to_string())
    .bind(applied.checkpoint.posicao)
    .bind(round)
    .bind(cursor.map(|c| c.xid.to_string()))
    .bind(cursor.map(|c| c.posicao))
    .bind(cap)
    // A generic plan cannot know that `xid_insercao >= $2` is the archive's tail, not most of
    // it: planned with the values, it reads only the tail through the index.
    .persistent(false)
    .fetch_one(pool)
    .await?;
    Ok(Pending {
        events,
        oldest_age_seconds: age.unwrap_or(0.0),
    })
}

/// The newest event (by `posicao`, among the archive's last `look_back`) that the live consumer
/// has applied, without its payload: what its page calls the last event applied. `None` when
/// none of those is applied yet.
pub async fn newest_applied(
    pool: &PgPool,
    applied: &Applied<'_>,
    look_back: i64,
) -> Result<Option<crate::domain::Event>, sqlx::Error> {
    let rows: Vec<(String, super::EventRow)> = sqlx::query_as::<
        _,
        (
            String,
            i64,
            String,
            String,
            String,
            i64,
            super::payload::Payload,
            chrono::DateTime<chrono::Utc>,
        ),
    >(
        r#"
        select xid_insercao::text, posicao, id, tipo, pedido_id, versao, 'null'::jsonb, ocorrido_em
        from evento_arquivado where xid_insercao is not null
        order by posicao desc limit $1
        "#,
    )
    .bind(look_back)
    .fetch_all(pool)
    .await?
    .into_iter()
    .map(|(xid, p, i, t, o, v, pl, at)| (xid, (p, i, t, o, v, pl, at)))
    .collect();
    Ok(rows
        .into_iter()
        .find(|(xid, row)| xid.parse().is_ok_and(|x| applied.covers(x, row.0)))
        .map(|(_, row)| super::into_event(row)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(xid: u64, posicao: i64) -> LivePosition {
        LivePosition { xid, posicao }
    }

    #[test]
    fn what_the_consumer_applied_covers_its_checkpoint_its_snapshot_and_its_rounds_done_part() {
        // Transactions below 10 seen except 7 (running then); a round's snapshot also sees 7
        // and 12, done up to (7, 40).
        let seen = Snapshot::parse("5:10:7").unwrap();
        let round = Snapshot::parse("13:13:").unwrap();
        let applied = Applied {
            checkpoint: at(4, 30),
            seen: &seen,
            round: Some((&round, at(7, 40))),
        };

        assert!(applied.covers(3, 99), "below the checkpoint");
        assert!(applied.covers(9, 1), "seen ended");
        assert!(applied.covers(7, 40), "the round's done part");
        assert!(!applied.covers(7, 41), "the round's rest");
        assert!(!applied.covers(12, 1), "after the round's cursor");
        assert!(!applied.covers(13, 1), "began after every snapshot");
    }
}
