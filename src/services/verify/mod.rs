//! Reconciliation (`verify`, invariant `exact-reconciliation`): the archive against what was
//! derived from it, day by day in a timezone. Per day of each order's newest `pedido.pago` (the
//! highest `versao`, then the highest `posicao`, of the events the rule accepts — the one the
//! applier's version guard lets win): is its `comissao` row what the domain's rule (upcasting
//! included) implies? Per day of events: does the ledger hold a row for each effect the job's
//! policy applies, and which are `incerto`?
//!
//! What a replay would not fix is set apart ([`apart`]): orders and effects the live consumer has
//! not reached yet, rows newer than the archive, rows with no archived event.
//!
//! It only reads, in one read-only repeatable-read transaction, streaming row by row: memory
//! holds one order's events, a counter per day and at most [`apart::LISTED`] listed orders,
//! whatever the range. The live consumer's stored position is read in the same snapshot as the
//! rows, so "applied" means applied as of that snapshot.

pub mod apart;
mod emit;
pub mod job;
mod progress;
pub mod propose;

use std::collections::BTreeMap;

use chrono::{DateTime, NaiveDate, Utc};
use chrono_tz::Tz;
use futures::TryStreamExt;
use serde::Serialize;
use sqlx::PgPool;

use apart::{NotReplayable, SetAside, Unfixable};
use replay_ledger_core::config::EffectMode;
use replay_ledger_core::domain;
use replay_ledger_core::engine::applier::Policy;
use replay_ledger_core::services::consumer::{state as live_state, LIVE_EXECUTION};
use replay_ledger_core::tables::archive::{reconcile, Applied};

pub use emit::{emit_jobs, EmitSpec};
pub use progress::Progress;

/// What to verify: days `[from, to)` in `timezone`, with the policy whose effects are checked.
#[derive(Debug, Clone)]
pub struct Request {
    pub from: NaiveDate,
    pub to: NaiveDate,
    pub timezone: Tz,
    /// `None`: no policy to check effects against (`effects_checked: false`).
    pub policy: Option<Policy>,
}

/// The counts of one day, or of the whole range.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Events that occurred that day.
    pub events: u64,
    /// Orders whose newest `pedido.pago` occurred that day.
    pub orders: u64,
    /// Of those, orders whose `comissao` row differs in value or version.
    pub orders_wrong: u64,
    /// Of those, orders with no `comissao` row.
    pub orders_missing: u64,
    /// Expected minus current, in cents; a missing row counts 0.
    pub difference_cents: i64,
    /// Effects the policy applies with no ledger row.
    pub effects_missing: u64,
    /// Effects whose ledger row is `incerto` (the review queue's, not differences).
    pub effects_uncertain: u64,
}

impl Counts {
    fn add(&mut self, o: &Counts) {
        self.events += o.events;
        self.orders += o.orders;
        self.orders_wrong += o.orders_wrong;
        self.orders_missing += o.orders_missing;
        self.difference_cents = self.difference_cents.saturating_add(o.difference_cents);
        self.effects_missing += o.effects_missing;
        self.effects_uncertain += o.effects_uncertain;
    }

    /// A wrong or missing order or a missing effect (an `incerto` key is not a difference).
    pub fn has_differences(&self) -> bool {
        self.orders_wrong + self.orders_missing + self.effects_missing > 0
    }
}

/// One day's counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Day {
    pub day: NaiveDate,
    #[serde(flatten)]
    pub counts: Counts,
    /// What is reported apart, not as differences.
    #[serde(flatten)]
    pub set_aside: SetAside,
}

/// What `verify` found: the JSON of its documented row (a contract scripts read).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Findings {
    pub from: NaiveDate,
    pub to: NaiveDate,
    pub timezone: String,
    pub clean: bool,
    pub effects_checked: bool,
    /// Every day of the range, in order.
    pub days: Vec<Day>,
    pub totals: Counts,
    /// The range's counts reported apart (kept out of `totals`, whose fields are the differences).
    pub set_aside_totals: SetAside,
    /// The orders a replay cannot fix, by order id (at most [`apart::LISTED`]).
    pub not_replayable: Vec<NotReplayable>,
}

impl Findings {
    /// The days with differences.
    pub fn differing(&self) -> impl Iterator<Item = &Day> {
        self.days.iter().filter(|d| d.counts.has_differences())
    }
}

impl Request {
    /// The first instant of the range and the first after it.
    pub fn bounds(&self) -> (DateTime<Utc>, DateTime<Utc>) {
        let start = |d| replay_ledger_core::config::day_start(self.timezone, d);
        (start(self.from), start(self.to))
    }

    /// The effect types checked: those the domain requests that the policy applies.
    fn effect_types(&self) -> Vec<String> {
        let Some(policy) = &self.policy else {
            return Vec::new();
        };
        domain::EFFECT_TYPES
            .iter()
            .filter(|t| {
                policy
                    .effects
                    .get(**t)
                    .is_some_and(|p| p.mode == EffectMode::Apply)
            })
            .map(|t| t.to_string())
            .collect()
    }

    fn day_of(&self, at: DateTime<Utc>) -> Option<NaiveDate> {
        let day = at.with_timezone(&self.timezone).date_naive();
        (self.from..self.to).contains(&day).then_some(day)
    }
}

/// Verifies the range; reads only.
#[tracing::instrument(skip_all, fields(from = %request.from, to = %request.to), err)]
pub async fn verify(
    pool: &PgPool,
    request: &Request,
    progress: &mut Progress,
) -> Result<Findings, sqlx::Error> {
    let mut scan = Scan::default();
    let mut tx = pool.begin().await?;
    sqlx::query("set transaction isolation level repeatable read, read only")
        .execute(&mut *tx)
        .await?;
    // No live consumer ever ran: nothing is pending for it.
    let live = live_state::load_in(&mut tx, LIVE_EXECUTION).await?;
    let applied = live.as_ref().map(live_state::LiveState::applied);
    check_orders(&mut tx, request, applied.as_ref(), &mut scan, progress).await?;
    check_orphans(&mut tx, request, &mut scan).await?;
    check_events(&mut tx, request, applied.as_ref(), &mut scan, progress).await?;
    tx.rollback().await?;
    progress.finish();
    Ok(findings(request, scan))
}

/// What the reads gather: per day, the differences and what is set apart; the listed orders.
#[derive(Default)]
struct Scan {
    days: BTreeMap<NaiveDate, (Counts, SetAside)>,
    not_replayable: Vec<NotReplayable>,
}

impl Scan {
    fn day(&mut self, day: NaiveDate) -> &mut (Counts, SetAside) {
        self.days.entry(day).or_default()
    }

    /// One order, decided by `expected`, whose event the live consumer has `applied` or not.
    fn order(
        &mut self,
        day: NaiveDate,
        row: &reconcile::OrderEvent,
        expected: &domain::CommissionRow,
        applied: bool,
    ) {
        let (c, set_aside) = self.day(day);
        c.orders += 1;
        match row.row {
            Some((valor, versao))
                if (valor, versao) == (expected.valor_centavos, expected.versao) => {}
            _ if !applied => set_aside.pending_live += 1,
            Some((_, versao)) if versao > expected.versao => {
                set_aside.orders_ahead_of_archive += 1;
                self.list(NotReplayable {
                    pedido_id: row.event.pedido_id.clone(),
                    day,
                    reason: Unfixable::AheadOfArchive,
                    versao_evento: versao,
                    archive_versao: Some(expected.versao),
                });
            }
            current => count_difference(c, expected, current),
        }
    }

    /// One event's key of one effect type: missing (a difference, or set apart while the live
    /// consumer has not applied the event) or `incerto`. Only an event the domain accepts asks for
    /// effects.
    fn effect(&mut self, day: NaiveDate, row: &reconcile::RangeEvent, live: Option<&Applied<'_>>) {
        if !(row.effect_missing || row.effect_uncertain)
            || !matches!(domain::commission(&row.event), Ok(Some(_)))
        {
            return;
        }
        let applied = live.is_none_or(|l| l.covers(row.xid, row.event.posicao));
        let (c, set_aside) = self.day(day);
        match applied {
            true => c.effects_missing += u64::from(row.effect_missing),
            false => set_aside.effects_pending_live += u64::from(row.effect_missing),
        }
        c.effects_uncertain += u64::from(row.effect_uncertain);
    }

    /// An order none of whose `pedido.pago` the rule accepts: a row of it is one no replay writes
    /// (by the day of its newest event).
    fn undecided(&mut self, request: &Request, order: OrderSeen) {
        let (Some((_, versao)), false) = (order.row, order.decided) else {
            return;
        };
        let Some(day) = request.day_of(order.newest) else {
            return;
        };
        self.day(day).1.orders_without_events += 1;
        self.list(NotReplayable {
            pedido_id: order.pedido_id,
            day,
            reason: Unfixable::WithoutAcceptedEvents,
            versao_evento: versao,
            archive_versao: None,
        });
    }

    fn list(&mut self, order: NotReplayable) {
        if self.not_replayable.len() < apart::LISTED {
            self.not_replayable.push(order);
        }
    }
}

/// Every order with a `pedido.pago` in the range: its newest accepted event against its row.
async fn check_orders(
    conn: &mut sqlx::PgConnection,
    request: &Request,
    live: Option<&Applied<'_>>,
    scan: &mut Scan,
    progress: &mut Progress,
) -> Result<(), sqlx::Error> {
    let (from, to) = request.bounds();
    let mut rows = reconcile::orders(conn, domain::ORDER_PAID, from, to);
    let mut order: Option<OrderSeen> = None;
    while let Some(row) = rows.try_next().await? {
        progress.advance(1);
        if order.as_ref().map(|o| o.pedido_id.as_str()) != Some(row.event.pedido_id.as_str()) {
            if let Some(done) = order.take() {
                scan.undecided(request, done);
            }
            order = Some(OrderSeen::first(&row));
        }
        let Some(seen) = order.as_mut().filter(|o| !o.decided) else {
            continue;
        };
        // A rejected event writes nothing: the order's next older event decides.
        let Ok(Some(commission)) = domain::commission(&row.event) else {
            continue;
        };
        seen.decided = true;
        if let Some(day) = request.day_of(row.event.ocorrido_em) {
            let applied = live.is_none_or(|l| l.covers(row.xid, row.event.posicao));
            scan.order(day, &row, &commission, applied);
        }
    }
    if let Some(done) = order {
        scan.undecided(request, done);
    }
    Ok(())
}

/// An order of the stream, from its first (newest) row: whether an accepted event decided it.
struct OrderSeen {
    pedido_id: String,
    row: Option<(i64, i64)>,
    newest: DateTime<Utc>,
    decided: bool,
}

impl OrderSeen {
    fn first(row: &reconcile::OrderEvent) -> OrderSeen {
        OrderSeen {
            pedido_id: row.event.pedido_id.clone(),
            row: row.row,
            newest: row.event.ocorrido_em,
            decided: false,
        }
    }
}

/// The `comissao` rows last written in the range whose order has no `pedido.pago` archived.
async fn check_orphans(
    conn: &mut sqlx::PgConnection,
    request: &Request,
    scan: &mut Scan,
) -> Result<(), sqlx::Error> {
    let (from, to) = request.bounds();
    let mut rows = reconcile::orphans(conn, domain::ORDER_PAID, from, to);
    while let Some(orphan) = rows.try_next().await? {
        let Some(day) = request.day_of(orphan.atualizado_em) else {
            continue;
        };
        scan.day(day).1.orders_without_events += 1;
        scan.list(NotReplayable {
            pedido_id: orphan.pedido_id,
            day,
            reason: Unfixable::WithoutEvents,
            versao_evento: orphan.versao_evento,
            archive_versao: None,
        });
    }
    Ok(())
}

/// A difference a replay fixes: a missing row, or one older or of another value.
fn count_difference(c: &mut Counts, expected: &domain::CommissionRow, row: Option<(i64, i64)>) {
    match row {
        None => {
            c.orders_missing += 1;
            c.difference_cents = c.difference_cents.saturating_add(expected.valor_centavos);
        }
        Some((valor, versao)) if (valor, versao) != (expected.valor_centavos, expected.versao) => {
            c.orders_wrong += 1;
            let delta = expected.valor_centavos.saturating_sub(valor);
            c.difference_cents = c.difference_cents.saturating_add(delta);
        }
        Some(_) => {}
    }
}

/// Every event of the range: counted, and its effects looked up in the ledger, one effect type
/// per pass (the events are counted in the first).
async fn check_events(
    conn: &mut sqlx::PgConnection,
    request: &Request,
    live: Option<&Applied<'_>>,
    scan: &mut Scan,
    progress: &mut Progress,
) -> Result<(), sqlx::Error> {
    let (from, to) = request.bounds();
    let handled: Vec<String> = request
        .policy
        .as_ref()
        .map(|p| p.event_types.clone())
        .unwrap_or_default();
    let effect_types = request.effect_types();
    let passes: Vec<Option<&str>> = match effect_types.is_empty() {
        true => vec![None],
        false => effect_types.iter().map(|t| Some(t.as_str())).collect(),
    };
    for (pass, effect_type) in passes.into_iter().enumerate() {
        let mut rows = reconcile::events(conn, &handled, effect_type, from, to);
        while let Some(row) = rows.try_next().await? {
            progress.advance(1);
            let Some(day) = request.day_of(row.event.ocorrido_em) else {
                continue;
            };
            scan.day(day).0.events += u64::from(pass == 0);
            scan.effect(day, &row, live);
        }
    }
    Ok(())
}

/// Every day of the range (zeros where nothing was found), and the totals.
fn findings(request: &Request, mut scan: Scan) -> Findings {
    let mut days = Vec::new();
    let (mut totals, mut set_aside_totals) = (Counts::default(), SetAside::default());
    let mut day = request.from;
    while day < request.to {
        let (counts, set_aside) = scan.days.remove(&day).unwrap_or_default();
        totals.add(&counts);
        set_aside_totals.add(&set_aside);
        days.push(Day {
            day,
            counts,
            set_aside,
        });
        day = day.succ_opt().unwrap_or(request.to);
    }
    Findings {
        from: request.from,
        to: request.to,
        timezone: request.timezone.name().to_string(),
        clean: !totals.has_differences(),
        effects_checked: !request.effect_types().is_empty(),
        days,
        totals,
        set_aside_totals,
        not_replayable: scan.not_replayable,
    }
}
