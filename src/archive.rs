//! Every read of `evento_arquivado`: the bounds of a window and its events in `posicao` order,
//! in batches after a checkpoint (keyset paging, never `OFFSET`).

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use crate::domain::Event;

/// The part of the archive an execution covers: `ocorrido_em` in `[from, to)` and `posicao` in
/// `(.., last]`. `last` is fixed when a pass starts, so events archived later with a higher
/// `posicao` are not chased (the next pass or the live consumer takes them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub first: i64,
    pub last: i64,
    pub count: i64,
}

/// The bounds of a window: `None` when it holds no event. Served by the
/// `(ocorrido_em, posicao)` index, so a day in an archive of many days reads only that day.
pub async fn bounds(
    pool: &PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Option<Window>, sqlx::Error> {
    let row: (Option<i64>, Option<i64>, i64) = sqlx::query_as(
        r#"
        select min(posicao), max(posicao), count(*)
        from evento_arquivado
        where ocorrido_em >= $1 and ocorrido_em < $2
        "#,
    )
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
        }),
        _ => None,
    })
}

/// How many events of the window lie after `after` (for progress and ETA on resume).
pub async fn remaining(pool: &PgPool, window: &Window, after: i64) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(
        r#"
        select count(*)
        from evento_arquivado
        where ocorrido_em >= $1 and ocorrido_em < $2 and posicao > $3 and posicao <= $4
        "#,
    )
    .bind(window.from)
    .bind(window.to)
    .bind(after)
    .bind(window.last)
    .fetch_one(pool)
    .await
}

/// The next batch of the window after `after`, in `posicao` order.
pub async fn read_batch(
    pool: &PgPool,
    window: &Window,
    after: i64,
    limit: u32,
) -> Result<Vec<Event>, sqlx::Error> {
    let rows: Vec<EventRow> = sqlx::query_as(
        r#"
            select posicao, id, tipo, pedido_id, versao, payload, ocorrido_em
            from evento_arquivado
            where posicao > $1 and posicao <= $2 and ocorrido_em >= $3 and ocorrido_em < $4
            order by posicao
            limit $5
            "#,
    )
    .bind(after)
    .bind(window.last)
    .bind(window.from)
    .bind(window.to)
    .bind(i64::from(limit))
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().map(into_event).collect())
}

type EventRow = (
    i64,
    String,
    String,
    String,
    i64,
    serde_json::Value,
    DateTime<Utc>,
);

fn into_event((posicao, id, tipo, pedido_id, versao, payload, ocorrido_em): EventRow) -> Event {
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
            select posicao, id, tipo, pedido_id, versao, payload, ocorrido_em
            from evento_arquivado where id = any($1)
            "#,
    )
    .bind(ids)
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().map(into_event).collect())
}
