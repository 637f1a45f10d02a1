//! What `verify` reports apart from the differences a replay fixes.
//! None of it makes exit 3, an emitted job or an e-mail:
//!
//! - **pending live**: an order whose newest `pedido.pago` the live consumer (`ao-vivo`) has not
//!   applied yet, or an effect of such an event — committed before verify's snapshot, not yet
//!   reached by the consumer ("ainda não aplicados pelo consumidor ao vivo"). It resolves itself
//!   when the consumer catches up; verify again then.
//! - **not replayable**: a `comissao` row written from a version newer than the archive's newest
//!   accepted `pedido.pago` of its order (the version guard keeps a replay from touching it), or a
//!   row whose order has no `pedido.pago` archived at all (a replay writes only what an archived
//!   event implies). A person must act: archive the missing events, or correct the row by hand.

use chrono::NaiveDate;
use serde::Serialize;

/// The most orders [`Findings::not_replayable`](super::Findings) lists (the counts are exact):
/// memory stays bounded whatever the range.
pub const LISTED: usize = 1000;

/// The counts set apart, of one day or of the range.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SetAside {
    /// Orders whose row differs from their newest `pedido.pago`, an event the live consumer has
    /// not applied yet.
    pub pending_live: u64,
    /// Effects missing for events the live consumer has not applied yet.
    pub effects_pending_live: u64,
    /// Orders whose `comissao.versao_evento` is newer than the archive's newest accepted
    /// `pedido.pago` of the order (by the day of that event).
    pub orders_ahead_of_archive: u64,
    /// `comissao` rows whose order has no `pedido.pago` archived (by the day the row was last
    /// written, `atualizado_em`), or only ones the rule rejects (by the day of the newest).
    pub orders_without_events: u64,
}

impl SetAside {
    pub(super) fn add(&mut self, o: &SetAside) {
        self.pending_live += o.pending_live;
        self.effects_pending_live += o.effects_pending_live;
        self.orders_ahead_of_archive += o.orders_ahead_of_archive;
        self.orders_without_events += o.orders_without_events;
    }

    /// Orders a replay cannot fix.
    pub fn not_replayable(&self) -> u64 {
        self.orders_ahead_of_archive + self.orders_without_events
    }

    /// Orders or effects waiting for the live consumer.
    pub fn waiting_for_live(&self) -> u64 {
        self.pending_live + self.effects_pending_live
    }
}

/// Why a replay cannot fix an order's row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unfixable {
    /// `comissao.versao_evento` is newer than the archive's newest accepted `pedido.pago`.
    AheadOfArchive,
    /// No `pedido.pago` of the order is archived.
    WithoutEvents,
    /// Every archived `pedido.pago` of the order is one the rule rejects (it writes nothing).
    WithoutAcceptedEvents,
}

/// One order a replay cannot fix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NotReplayable {
    pub pedido_id: String,
    pub day: NaiveDate,
    pub reason: Unfixable,
    /// The row's `versao_evento`.
    pub versao_evento: i64,
    /// The version of the archive's newest accepted `pedido.pago`; `None` when there is none.
    pub archive_versao: Option<i64>,
}

impl NotReplayable {
    /// What it is, in words, for people.
    pub fn describe(&self) -> String {
        match (self.reason, self.archive_versao) {
            (Unfixable::AheadOfArchive, Some(v)) => format!(
                "comissao at versao {}, the archive's newest pedido.pago is versao {v}",
                self.versao_evento
            ),
            (Unfixable::WithoutAcceptedEvents, _) => format!(
                "comissao at versao {}, the rule rejects every pedido.pago of this order",
                self.versao_evento
            ),
            _ => format!(
                "comissao at versao {}, no pedido.pago of this order in the archive",
                self.versao_evento
            ),
        }
    }
}

/// What a person can do about orders a replay cannot fix.
pub const WHAT_TO_DO: &str = "a replay cannot fix these rows: the archive is missing events for \
these orders. Check the source's event log and archive the missing pedido.pago events (a replay \
of their day then fixes the row), or correct the row by hand; replay-ledger explain PEDIDO shows \
an order's story.";
