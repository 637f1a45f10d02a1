//! Reconciliation (`verify`, invariant 15): the archive against what was derived from it, day by
//! day in a timezone. Per day of each order's newest `pedido.pago` (the highest `versao`, then the
//! highest `posicao`, of the events the rule accepts — the one the applier's version guard lets
//! win): is its `comissao` row what the domain's rule (upcasting included) implies? Per day of
//! events: does the ledger hold a row for each effect the job's policy applies, and which are
//! `incerto`?
//!
//! It only reads, in one read-only repeatable-read transaction, streaming row by row: memory
//! holds one order's events and a counter per day, whatever the range.

mod emit;
pub mod job;
mod progress;

use std::collections::BTreeMap;

use chrono::{DateTime, NaiveDate, Utc};
use chrono_tz::Tz;
use futures::TryStreamExt;
use serde::Serialize;
use sqlx::PgPool;

use crate::config::EffectMode;
use crate::domain;
use crate::engine::applier::Policy;
use crate::tables::archive::reconcile;

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
}

/// What `verify` found: the JSON of DESIGN.md's `verify` row.
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
        let start = |d| crate::config::day_start(self.timezone, d);
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
    let mut days: BTreeMap<NaiveDate, Counts> = BTreeMap::new();
    let mut tx = pool.begin().await?;
    sqlx::query("set transaction isolation level repeatable read, read only")
        .execute(&mut *tx)
        .await?;
    check_orders(&mut tx, request, &mut days, progress).await?;
    check_events(&mut tx, request, &mut days, progress).await?;
    tx.rollback().await?;
    progress.finish();
    Ok(findings(request, days))
}

/// Every order with a `pedido.pago` in the range: its newest accepted event against its row.
async fn check_orders(
    conn: &mut sqlx::PgConnection,
    request: &Request,
    days: &mut BTreeMap<NaiveDate, Counts>,
    progress: &mut Progress,
) -> Result<(), sqlx::Error> {
    let (from, to) = request.bounds();
    let mut rows = reconcile::orders(conn, domain::ORDER_PAID, from, to);
    let mut decided: Option<String> = None;
    while let Some(row) = rows.try_next().await? {
        progress.advance(1);
        if decided.as_deref() == Some(row.event.pedido_id.as_str()) {
            continue;
        }
        // A rejected event writes nothing: the order's next older event decides.
        let Ok(Some(decision)) = domain::handle(&row.event) else {
            continue;
        };
        decided = Some(row.event.pedido_id.clone());
        if let Some(day) = request.day_of(row.event.ocorrido_em) {
            count_order(days.entry(day).or_default(), &decision.commission, row.row);
        }
    }
    Ok(())
}

fn count_order(c: &mut Counts, expected: &domain::CommissionRow, row: Option<(i64, i64)>) {
    c.orders += 1;
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
    days: &mut BTreeMap<NaiveDate, Counts>,
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
            let c = days.entry(day).or_default();
            c.events += u64::from(pass == 0);
            // Only an event the domain accepts asks for effects.
            if (row.effect_missing || row.effect_uncertain)
                && matches!(domain::handle(&row.event), Ok(Some(_)))
            {
                c.effects_missing += u64::from(row.effect_missing);
                c.effects_uncertain += u64::from(row.effect_uncertain);
            }
        }
    }
    Ok(())
}

/// Every day of the range (zeros where nothing was found), and the totals.
fn findings(request: &Request, mut found: BTreeMap<NaiveDate, Counts>) -> Findings {
    let mut days = Vec::new();
    let mut totals = Counts::default();
    let mut day = request.from;
    while day < request.to {
        let counts = found.remove(&day).unwrap_or_default();
        totals.add(&counts);
        days.push(Day { day, counts });
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
    }
}
