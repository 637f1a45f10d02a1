//! History as a tool: the commission table as the archive says it stood at a moment
//! (`comissao --as-of`), and what changed between two moments (`--compare-to`).
//!
//! "What the table said then" is what the archive up to then implies: per order, the newest
//! `pedido.pago` that occurred at or before the moment and that the rule accepts (highest
//! `versao`, then highest `posicao` — the one the applier's version guard lets win), decided by
//! the domain's rule and upcasters in force ([`domain::handle`], the very call `verify` makes).
//! No second calculator: the archive's read is one statement ordered as `verify`'s, the value is
//! the domain's.
//!
//! Streamed: the statement's rows arrive by order, one order's events are held at a time, and
//! each order's row goes to the caller's sink as soon as the order is complete, so memory does
//! not grow with the archive.

pub mod export;
pub mod moment;

use chrono::{DateTime, Utc};
use futures::TryStreamExt;
use serde::Serialize;
use sqlx::PgPool;

use crate::domain::{self, Event};
use crate::tables::archive::history;
use crate::tables::commission::DiffRow;

pub use moment::parse_moment;

/// What to compute: the table as of `as_of`, or, with `compare_to`, the orders whose value
/// differs between the two moments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Query {
    pub as_of: DateTime<Utc>,
    pub compare_to: Option<DateTime<Utc>>,
}

impl Query {
    /// The earlier and the later moment (the same twice without `compare_to`).
    pub fn moments(&self) -> (DateTime<Utc>, DateTime<Utc>) {
        let other = self.compare_to.unwrap_or(self.as_of);
        (self.as_of.min(other), self.as_of.max(other))
    }
}

/// An order's commission as of a moment: the value and version of the event that decided it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AsOfRow {
    pub pedido_id: String,
    pub valor_centavos: i64,
    pub versao_evento: i64,
    /// When the deciding event occurred.
    pub ocorrido_em: DateTime<Utc>,
}

/// One row handed to the sink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Row {
    /// The table as of the moment: one order.
    Order(AsOfRow),
    /// Between two moments: an order whose value differs, `antes` at the earlier moment (none:
    /// no accepted event yet), `depois` at the later.
    Changed(DiffRow),
}

/// The sums over what was handed to the sink.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    /// Orders in the table (or, comparing, orders whose value differs).
    pub orders: u64,
    /// Their commissions at the earlier moment (comparing; an order without one counts 0).
    pub before_cents: i64,
    /// Their commissions as of the moment (comparing: the later one).
    pub after_cents: i64,
}

#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    #[error("writing the table: {0}")]
    Write(#[from] std::io::Error),
}

/// Computes the table (or the changes) and hands each row to `sink`, in `pedido_id` order.
/// Reads only, in one statement (one snapshot).
#[tracing::instrument(skip_all, fields(as_of = %query.as_of), err)]
pub async fn table(
    pool: &PgPool,
    query: &Query,
    sink: &mut dyn FnMut(Row) -> std::io::Result<()>,
) -> Result<Totals, HistoryError> {
    let (earlier, later) = query.moments();
    let mut conn = pool.acquire().await?;
    let mut rows = history::newest_first_until(&mut conn, domain::ORDER_PAID, later);
    let mut totals = Totals::default();
    let mut order: Option<Seen> = None;
    while let Some(event) = rows.try_next().await? {
        if order.as_ref().map(|o| o.pedido_id.as_str()) != Some(event.pedido_id.as_str()) {
            if let Some(done) = order.take() {
                done.emit(query, &mut totals, sink)?;
            }
            order = Some(Seen::new(&event));
        }
        if let Some(seen) = order.as_mut() {
            seen.take(&event, earlier);
        }
    }
    if let Some(done) = order {
        done.emit(query, &mut totals, sink)?;
    }
    Ok(totals)
}

/// The commission an order's events imply as of `at`: the first event of `events` (newest
/// first) that occurred at or before `at` and that the rule accepts. For one order's story.
pub fn as_of(events_newest_first: &[Event], at: DateTime<Utc>) -> Option<AsOfRow> {
    events_newest_first
        .iter()
        .filter(|e| e.ocorrido_em <= at)
        .find_map(decided)
}

/// The event's row, when the rule accepts it.
fn decided(event: &Event) -> Option<AsOfRow> {
    let Ok(Some(decision)) = domain::handle(event) else {
        return None;
    };
    Some(AsOfRow {
        pedido_id: event.pedido_id.clone(),
        valor_centavos: decision.commission.valor_centavos,
        versao_evento: decision.commission.versao,
        ocorrido_em: event.ocorrido_em,
    })
}

/// One order of the stream: what decided it at the later moment and at the earlier one.
struct Seen {
    pedido_id: String,
    later: Option<AsOfRow>,
    earlier: Option<AsOfRow>,
}

impl Seen {
    fn new(event: &Event) -> Seen {
        Seen {
            pedido_id: event.pedido_id.clone(),
            later: None,
            earlier: None,
        }
    }

    /// The next older event: it decides each moment not decided yet that it occurred by (every
    /// event of the stream occurred by the later moment). A rejected event decides nothing.
    fn take(&mut self, event: &Event, earlier: DateTime<Utc>) {
        let at_earlier = self.earlier.is_none() && event.ocorrido_em <= earlier;
        if self.later.is_some() && !at_earlier {
            return;
        }
        let Some(row) = decided(event) else {
            return;
        };
        if at_earlier {
            self.earlier = Some(row.clone());
        }
        self.later.get_or_insert(row);
    }

    fn emit(
        self,
        query: &Query,
        totals: &mut Totals,
        sink: &mut dyn FnMut(Row) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        let Some(later) = self.later else {
            return Ok(());
        };
        if query.compare_to.is_none() {
            totals.orders += 1;
            totals.after_cents = totals.after_cents.saturating_add(later.valor_centavos);
            return sink(Row::Order(later));
        }
        let antes = self.earlier.map(|e| e.valor_centavos);
        if antes == Some(later.valor_centavos) {
            return Ok(());
        }
        totals.orders += 1;
        totals.before_cents = totals.before_cents.saturating_add(antes.unwrap_or(0));
        totals.after_cents = totals.after_cents.saturating_add(later.valor_centavos);
        sink(Row::Changed(DiffRow {
            pedido_id: self.pedido_id,
            antes,
            depois: later.valor_centavos,
        }))
    }
}
