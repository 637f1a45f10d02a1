//! The reads of a blue-green rebuild (`replay-ledger rebuild`): the whole archive's `pedido.pago`
//! events in one ordered stream, an order's events together (resumable after the last order
//! loaded), and every such event of a set of orders, newest first, to re-derive the orders a
//! live writer changed meanwhile. The same `payload_da_regra` projection as every other read for the rule.

use futures::stream::BoxStream;
use futures::TryStreamExt;
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

/// Every `tipo` event up to `upto` of the orders after `after` (all orders when `None`), an
/// order's events together and newest first (`versao` then `posicao`, descending: the order in
/// which the applier's version guard lets them win), orders by `pedido_id` in the database's
/// order (which `after` compares in too). One statement, streamed row by row: the caller holds
/// one order at a time, and the server sorts the archive (spilling to disk past `work_mem`).
pub fn ordered<'c>(
    conn: &'c mut PgConnection,
    tipo: &'c str,
    after: Option<&'c str>,
    upto: i64,
) -> BoxStream<'c, Result<Event, sqlx::Error>> {
    Box::pin(
        sqlx::query_as::<_, EventRow>(
            r#"
            select posicao, id, tipo, pedido_id, versao, payload_da_regra(payload), ocorrido_em
            from evento_arquivado
            where tipo = $1 and posicao <= $3 and ($2::text is null or pedido_id > $2)
            order by pedido_id, versao desc, posicao desc
            "#,
        )
        .bind(tipo)
        .bind(after)
        .bind(upto)
        .persistent(false)
        .fetch(conn)
        .map_ok(into_event),
    )
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
