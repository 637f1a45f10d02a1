//! The reads of a blue-green rebuild (`replay-ledger rebuild`): the whole archive's `pedido.pago`
//! events in chunks by `posicao` (keyset paging on the primary key, resumable from a checkpoint),
//! and every such event of a set of orders, newest first, to re-derive the orders a live writer
//! changed meanwhile. The same `payload_da_regra` projection as every other read for the rule.

use sqlx::PgConnection;

use super::{into_event, EventRow};
use crate::domain::Event;

/// How much of the archive a rebuild has to read: the `tipo` events after `after`, and the
/// archive's highest `posicao` now.
pub async fn extent(
    conn: &mut PgConnection,
    tipo: &str,
    after: i64,
) -> Result<(i64, Option<i64>), sqlx::Error> {
    sqlx::query_as(
        r#"
        select (select count(*) from evento_arquivado where tipo = $1 and posicao > $2),
               (select max(posicao) from evento_arquivado)
        "#,
    )
    .bind(tipo)
    .bind(after)
    .fetch_one(conn)
    .await
}

/// The next chunk of `tipo` events after `after` and up to `upto`, in `posicao` order. Planned
/// with its values (not a cached generic plan) so it walks the primary key from `after`.
pub async fn chunk(
    conn: &mut PgConnection,
    tipo: &str,
    (after, upto): (i64, i64),
    limit: u32,
) -> Result<Vec<Event>, sqlx::Error> {
    let rows: Vec<EventRow> = sqlx::query_as(
        r#"
        select posicao, id, tipo, pedido_id, versao, payload_da_regra(payload), ocorrido_em
        from evento_arquivado
        where posicao > $1 and posicao <= $4 and tipo = $2
        order by posicao
        limit $3
        "#,
    )
    .bind(after)
    .bind(tipo)
    .bind(i64::from(limit))
    .bind(upto)
    .persistent(false)
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(into_event).collect())
}

/// Every `tipo` event of these orders, an order's events together, newest first (`versao` then
/// `posicao`, descending: the order in which the applier's version guard lets them win), as
/// `verify` reads them.
pub async fn of_orders(
    conn: &mut PgConnection,
    tipo: &str,
    pedido_ids: &[String],
) -> Result<Vec<Event>, sqlx::Error> {
    let rows: Vec<EventRow> = sqlx::query_as(
        r#"
        select posicao, id, tipo, pedido_id, versao, payload_da_regra(payload), ocorrido_em
        from evento_arquivado
        where pedido_id = any($1) and tipo = $2
        order by pedido_id, versao desc, posicao desc
        "#,
    )
    .bind(pedido_ids)
    .bind(tipo)
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(into_event).collect())
}

/// The orders with a `tipo` event archived after `after` (the build's target) that no writer of
/// `comissao` will apply: the order's row there is at a newer version than the event, so every
/// writer's version guard refuses it, no write is captured, and the event would reach
/// `comissao_nova` never. The rebuild re-derives these orders itself (at the comparison, and under
/// the swap's lock). An event a writer will apply is left to it: its write is captured, as before.
pub async fn orders_archived_after(
    conn: &mut PgConnection,
    tipo: &str,
    after: i64,
) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar(
        r#"
        select distinct e.pedido_id
        from evento_arquivado e
        join comissao c on c.pedido_id = e.pedido_id
        where e.tipo = $1 and e.posicao > $2 and c.versao_evento > e.versao
        order by e.pedido_id
        "#,
    )
    .bind(tipo)
    .bind(after)
    .fetch_all(conn)
    .await
}
