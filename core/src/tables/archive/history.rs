//! The archive as it stood at a moment (temporal queries: `comissao --as-of`, `explain --as-of`):
//! every `tipo` event that occurred up to an instant, an order's events together and newest first
//! — `versao`, then `posicao`, descending, the order in which the applier's version guard lets
//! them win, as [`super::reconcile::orders`] reads them for `verify`. One statement, streamed row
//! by row: the caller holds one order's events at a time, whatever the archive's size.

use chrono::{DateTime, Utc};
use futures::stream::BoxStream;
use futures::TryStreamExt;
use sqlx::PgConnection;

use super::{into_archived, Archived, ArchivedRow};

/// Every `tipo` event with `ocorrido_em <= until`, by `pedido_id`, then newest first, with when
/// it was archived (`None` for an event archived before the archive recorded that).
pub fn newest_first_until<'c>(
    conn: &'c mut PgConnection,
    tipo: &'c str,
    until: DateTime<Utc>,
) -> BoxStream<'c, Result<Archived, sqlx::Error>> {
    Box::pin(
        sqlx::query_as::<_, ArchivedRow>(
            r#"
            select e.posicao, e.id, e.tipo, e.pedido_id, e.versao, payload_da_regra(e.payload),
                   e.ocorrido_em, e.arquivado_em
            from evento_arquivado e
            where e.tipo = $1 and e.ocorrido_em <= $2
            order by e.pedido_id, e.versao desc, e.posicao desc
            "#,
        )
        .bind(tipo)
        .bind(until)
        .fetch(conn)
        .map_ok(into_archived),
    )
}
