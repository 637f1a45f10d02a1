//! The events of a window whose key of one effect type the ledger does not hold: what a real
//! run would still perform of that type (the approval's confirmation lists them). Streamed in
//! `posicao` order; only reads.

use chrono::{DateTime, Utc};
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use sqlx::PgPool;

use super::{into_event, EventRow};
use crate::domain::Event;

/// The statement of [`of_window`]: only the window's months of a partitioned archive.
pub const UNSENT_SQL: &str = r#"
        select e.posicao, e.id, e.tipo, e.pedido_id, e.versao, payload_da_regra(e.payload), e.ocorrido_em
        from evento_arquivado e
        where e.ocorrido_em >= $1 and e.ocorrido_em < $2 and e.tipo = any($3)
          and not exists (select 1 from efeito_aplicado l where l.chave = e.id || ':' || $4)
        order by e.posicao
        "#;

/// Every event of a `handled` type in `[from, to)` with no ledger row for its key
/// `'<evento_id>:<effect_type>'`, in `posicao` order.
pub fn of_window<'c>(
    pool: &'c PgPool,
    handled: &'c [String],
    effect_type: &'c str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> BoxStream<'c, Result<Event, sqlx::Error>> {
    sqlx::query_as::<_, EventRow>(UNSENT_SQL)
        .bind(from)
        .bind(to)
        .bind(handled)
        .bind(effect_type)
        .fetch(pool)
        .map_ok(into_event)
        .boxed()
}
