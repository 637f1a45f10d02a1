//! The reads of a reconciliation (`verify`): the archive beside what was derived from it — each
//! order's `pedido.pago` events with its `comissao` row, and each event of a range with what the
//! ledger holds for its effect types. Streamed row by row (never collected), set-based, and only
//! ever reads: the caller runs them in one read-only, repeatable-read transaction so both see
//! the same snapshot.

use chrono::{DateTime, Utc};
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use sqlx::PgConnection;

use super::payload::Payload;
use super::{into_event, parse_xid};
use crate::domain::Event;

/// One `pedido.pago` event of an order, with the order's `comissao` row (on every row of it).
#[derive(Debug)]
pub struct OrderEvent {
    pub event: Event,
    /// The transaction that archived it (`xid_insercao`): whether the live consumer applied it.
    pub xid: u64,
    /// `(valor_centavos, versao_evento)` of the order's row; `None` when it has none.
    pub row: Option<(i64, i64)>,
}

/// One event of a range, with what the ledger holds for its key of the effect type asked about.
#[derive(Debug)]
pub struct RangeEvent {
    /// The payload is `null` unless the event is of a handled type and its key is missing or
    /// `incerto` (only then does the caller need the domain's decision).
    pub event: Event,
    /// The transaction that archived it (`xid_insercao`).
    pub xid: u64,
    pub effect_missing: bool,
    pub effect_uncertain: bool,
}

type OrderRow = (
    String,
    i64,
    String,
    i64,
    Payload,
    DateTime<Utc>,
    String,
    Option<i64>,
    Option<i64>,
);

/// The statement of [`orders`]: the orders are found by their events in the range (`d`, which
/// reads only the range's months of a partitioned archive); each order's events (`e`) are then
/// looked up by `pedido_id` in every month, since an older event still decides when the newest is
/// rejected.
pub const ORDERS_SQL: &str = r#"
        select e.pedido_id, e.posicao, e.id, e.versao, payload_da_regra(e.payload), e.ocorrido_em,
               e.xid_insercao::text, c.valor_centavos, c.versao_evento
        from evento_arquivado e
        left join comissao c on c.pedido_id = e.pedido_id
        where e.tipo = $3
          and e.pedido_id in (select d.pedido_id from evento_arquivado d
                              where d.tipo = $3 and d.ocorrido_em >= $1 and d.ocorrido_em < $2)
        order by e.pedido_id, e.versao desc, e.posicao desc
        "#;

/// Every `tipo` event of each order that has one in `[from, to)`, with its `comissao` row; an
/// order's events together, newest first (`versao` then `posicao`, descending: the order in
/// which the applier's version guard lets them win).
pub fn orders<'c>(
    conn: &'c mut PgConnection,
    tipo: &'c str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> BoxStream<'c, Result<OrderEvent, sqlx::Error>> {
    sqlx::query_as::<_, OrderRow>(ORDERS_SQL)
        .bind(from)
        .bind(to)
        .bind(tipo)
        .fetch(conn)
        .map(|row| {
            let (pedido_id, posicao, id, versao, payload, ocorrido_em, xid, valor, versao_evento) =
                row?;
            Ok(OrderEvent {
                event: into_event((
                    posicao,
                    id,
                    tipo.to_string(),
                    pedido_id,
                    versao,
                    payload,
                    ocorrido_em,
                )),
                xid: parse_xid(&xid)?,
                row: valor.zip(versao_evento),
            })
        })
        .boxed()
}

type RangeRow = (
    i64,
    String,
    String,
    String,
    i64,
    Payload,
    DateTime<Utc>,
    String,
    bool,
    bool,
);

/// The statement of [`events`]: only the range's months of a partitioned archive.
pub const EVENTS_SQL: &str = r#"
        select e.posicao, e.id, e.tipo, e.pedido_id, e.versao,
               case when $4::text is not null and e.tipo = any($3)
                         and (l.chave is null or l.estado = 'incerto')
                    then payload_da_regra(e.payload) else 'null'::jsonb end,
               e.ocorrido_em, e.xid_insercao::text,
               $4::text is not null and l.chave is null,
               coalesce(l.estado = 'incerto', false)
        from evento_arquivado e
        left join efeito_aplicado l
          on $4::text is not null and e.tipo = any($3) and l.chave = e.id || ':' || $4::text
        where e.ocorrido_em >= $1 and e.ocorrido_em < $2
        "#;

/// Every event in `[from, to)`, in no particular order, beside the ledger row of its key
/// `'<evento_id>:<effect_type>'` when it is of a `handled` type (no key is looked up without an
/// effect type). One join, so the planner may hash the ledger instead of probing it per event.
pub fn events<'c>(
    conn: &'c mut PgConnection,
    handled: &'c [String],
    effect_type: Option<&'c str>,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> BoxStream<'c, Result<RangeEvent, sqlx::Error>> {
    sqlx::query_as::<_, RangeRow>(EVENTS_SQL)
        .bind(from)
        .bind(to)
        .bind(handled)
        .bind(effect_type)
        .fetch(conn)
        .map(move |row| {
            let (
                posicao,
                id,
                tipo,
                pedido_id,
                versao,
                payload,
                ocorrido_em,
                xid,
                missing,
                uncertain,
            ) = row?;
            let handled_type = handled.contains(&tipo);
            Ok(RangeEvent {
                event: into_event((posicao, id, tipo, pedido_id, versao, payload, ocorrido_em)),
                xid: parse_xid(&xid)?,
                effect_missing: missing && handled_type,
                effect_uncertain: uncertain && handled_type,
            })
        })
        .boxed()
}

/// A `comissao` row that no archived `tipo` event accounts for.
#[derive(Debug)]
pub struct Orphan {
    pub pedido_id: String,
    pub versao_evento: i64,
    pub atualizado_em: DateTime<Utc>,
}

/// The `comissao` rows last written in `[from, to)` whose order has no `tipo` event in the archive
/// at all: no replay can reach them (it only writes what an archived event implies).
pub fn orphans<'c>(
    conn: &'c mut PgConnection,
    tipo: &'c str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> BoxStream<'c, Result<Orphan, sqlx::Error>> {
    sqlx::query_as::<_, (String, i64, DateTime<Utc>)>(
        r#"
        select c.pedido_id, c.versao_evento, c.atualizado_em
        from comissao c
        where c.atualizado_em >= $1 and c.atualizado_em < $2
          and not exists (select 1 from evento_arquivado e
                          where e.pedido_id = c.pedido_id and e.tipo = $3)
        order by c.pedido_id
        "#,
    )
    .bind(from)
    .bind(to)
    .bind(tipo)
    .fetch(conn)
    .map_ok(|(pedido_id, versao_evento, atualizado_em)| Orphan {
        pedido_id,
        versao_evento,
        atualizado_em,
    })
    .boxed()
}
