//! History as a tool: the commission table as the archive says it stood at a moment
//! (`comissao --as-of`), and what changed between two moments (`--compare-to`).
//!
//! Two times, named. *As of* a moment is event time: the events that occurred by then, read
//! with everything archived since (today's reading of that day). *As known at* a moment is what
//! the system knew then: only the events archived by then (`arquivado_em`; an event archived
//! before the archive recorded that counts as known). A closed period's *restatements* are the
//! orders whose value as of its close differs between what was known then and what is known now.
//!
//! "What the table said then" is what the archive up to then implies: per order, the newest
//! `pedido.pago` that occurred at or before the moment and that the rule accepts (highest
//! `versao`, then highest `posicao` — the one the applier's version guard lets win), decided by
//! the domain's rule and upcasters in force ([`domain::commission`], the very call `verify` makes).
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

use replay_ledger_core::domain::{self, Event};
use replay_ledger_core::tables::archive::history;
use replay_ledger_core::tables::commission::DiffRow;

pub use moment::parse_moment;

/// What to compute: the table as of `as_of` (as known at `known_at`, if given); with
/// `compare_to`, the orders whose value differs between the two moments (both as known at
/// `known_at`); with `restated`, the orders whose value as of `as_of` differs between what was
/// known at `known_at` and what is known now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Query {
    pub as_of: DateTime<Utc>,
    pub compare_to: Option<DateTime<Utc>>,
    pub known_at: Option<DateTime<Utc>>,
    pub restated: bool,
}

/// One reading of the archive: the events that occurred by `at` and were archived by `known`
/// (`None`: everything archived).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    pub at: DateTime<Utc>,
    pub known: Option<DateTime<Utc>>,
}

impl Reading {
    /// Whether this reading holds `event`, archived at `archived`.
    fn sees(&self, event: &Event, archived: Option<DateTime<Utc>>) -> bool {
        event.ocorrido_em <= self.at
            && self
                .known
                .is_none_or(|known| archived.is_none_or(|a| a <= known))
    }
}

impl Query {
    /// Whether rows are changes between two readings rather than the table.
    pub fn comparing(&self) -> bool {
        self.compare_to.is_some() || self.restated
    }

    /// The reading a change starts from (`antes`) and the one it ends at (`depois`); without a
    /// comparison, the one reading twice.
    pub fn readings(&self) -> (Reading, Reading) {
        let known = self.known_at;
        if self.restated {
            let at = self.as_of;
            return (Reading { at, known }, Reading { at, known: None });
        }
        let other = self.compare_to.unwrap_or(self.as_of);
        (
            Reading {
                at: self.as_of.min(other),
                known,
            },
            Reading {
                at: self.as_of.max(other),
                known,
            },
        )
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
    sink: &mut (dyn FnMut(Row) -> std::io::Result<()> + Send),
) -> Result<Totals, HistoryError> {
    let (antes, depois) = query.readings();
    let mut conn = pool.acquire().await?;
    let until = antes.at.max(depois.at);
    let mut rows = history::newest_first_until(&mut conn, domain::ORDER_PAID, until);
    let mut totals = Totals::default();
    let mut order: Option<Seen> = None;
    while let Some((event, archived)) = rows.try_next().await? {
        if order.as_ref().map(|o| o.pedido_id.as_str()) != Some(event.pedido_id.as_str()) {
            if let Some(done) = order.take() {
                done.emit(query, &mut totals, sink)?;
            }
            order = Some(Seen::new(&event));
        }
        if let Some(seen) = order.as_mut() {
            seen.take(&event, archived, &antes, &depois);
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
    let Ok(Some(row)) = domain::commission(event) else {
        return None;
    };
    Some(AsOfRow {
        pedido_id: row.pedido_id,
        valor_centavos: row.valor_centavos,
        versao_evento: row.versao,
        ocorrido_em: event.ocorrido_em,
    })
}

/// One order of the stream: what decided it in each reading.
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

    /// The next older event: it decides each reading not decided yet that holds it. A rejected
    /// event decides nothing.
    fn take(
        &mut self,
        event: &Event,
        archived: Option<DateTime<Utc>>,
        antes: &Reading,
        depois: &Reading,
    ) {
        let for_earlier = self.earlier.is_none() && antes.sees(event, archived);
        let for_later = self.later.is_none() && depois.sees(event, archived);
        if !for_earlier && !for_later {
            return;
        }
        let Some(row) = decided(event) else {
            return;
        };
        if for_earlier {
            self.earlier = Some(row.clone());
        }
        if for_later {
            self.later = Some(row);
        }
    }

    fn emit(
        self,
        query: &Query,
        totals: &mut Totals,
        sink: &mut (dyn FnMut(Row) -> std::io::Result<()> + Send),
    ) -> std::io::Result<()> {
        let Some(later) = self.later else {
            return Ok(());
        };
        if !query.comparing() {
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
