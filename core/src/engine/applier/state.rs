//! The state step of a batch, in one transaction with the rejected events and the figures it
//! adds: the version-guarded upsert of `comissao` and the corrections (a real run), the upsert
//! alone (the live consumer), or the diff rows (a simulation); and the per-event state outcomes
//! as the seed would count them, one event at a time.

use std::collections::{HashMap, HashSet};

use super::{Applier, ApplyError, Decided};
use crate::domain::CommissionRow;
use crate::shared::summary::{StateOutcome, Summary};
use crate::tables::commission::{self, Change};
use crate::tables::db;
use crate::tables::execution::{self, Mode, Rejected};

impl Applier {
    /// The state step, in one transaction with the rejected events and the figures it adds
    /// (orders changed, totals): the version-guarded upsert and the corrections, or, in a
    /// simulation, the diff rows (none for an order whose current row is newer). The transaction
    /// first confirms that this applier's owner still owns the execution (invariant `one-owner`).
    pub(super) async fn write_state(
        &self,
        decided: &[Decided],
        rejected: &[Rejected],
        batch_last: i64,
        summary: &mut Summary,
    ) -> Result<(), ApplyError> {
        if decided.is_empty() && rejected.is_empty() {
            return Ok(());
        }
        let rows = commission::newest_per_order(decided.iter().map(|d| &d.decision.commission));
        let ids: Vec<String> = rows.iter().map(|r| r.pedido_id.clone()).collect();
        let written = db::retry("state", self.config.retries.db_backoff, || async {
            let mut tx = db::begin_relaxed(&self.pool).await?;
            if let Some(owner) = &self.config.claim.owner {
                owner.confirm(&mut tx).await?;
            }
            let written = self.write_rows(&mut tx, &rows, &ids, batch_last).await?;
            execution::record_rejected(&mut tx, &self.config.checkpoint_key, rejected).await?;
            tx.commit().await?;
            Ok(written)
        })
        .await?;
        let changed = match self.config.mode {
            Mode::Simulation => StateOutcome::WouldWrite,
            Mode::Real | Mode::Live => StateOutcome::Written,
        };
        count_state(decided, &written, changed, summary);
        Ok(())
    }

    /// The writes of the state step in `tx`, with their figures tallied there too.
    async fn write_rows(
        &self,
        tx: &mut sqlx::PgConnection,
        rows: &[CommissionRow],
        ids: &[String],
        batch_last: i64,
    ) -> Result<Written, sqlx::Error> {
        let (current, changed, figures) = match self.config.mode {
            Mode::Simulation => {
                let current = commission::current(tx, ids).await?;
                let changes = would_write(rows, &current);
                let figures =
                    commission::upsert_diff(tx, self.diff_execution_id(), &changes).await?;
                let changed = changes
                    .iter()
                    .filter(|c| {
                        c.antes != Some(c.depois) || current_version(&current, c) != Some(c.versao)
                    })
                    .map(|c| c.pedido_id.clone())
                    .collect();
                (current, changed, figures)
            }
            Mode::Real => {
                let recording = commission::Recording {
                    execution_id: self.diff_execution_id(),
                    pass: self.config.pass.tally.pass,
                };
                let (current, written, figures) =
                    upsert_with_before(tx, rows, ids, Some(recording)).await?;
                let mut changed: HashSet<String> = written.into_iter().collect();
                if self.config.pass.earlier_attempts_since.is_some() {
                    changed.extend(self.changed_earlier(tx, rows, &current).await?);
                }
                (current, changed, figures)
            }
            Mode::Live => {
                let (current, written, _) = upsert_with_before(tx, rows, ids, None).await?;
                let figures = live_figures(rows, &current, &written);
                (current, written.into_iter().collect(), figures)
            }
        };
        // A replay's figures wait for the checkpoint that passes the batch (they are shown with
        // its events and effects); the live consumer's count when written, as before.
        let scope = &self.config.pass.tally;
        match self.config.mode {
            Mode::Live => crate::tables::tally::add(tx, scope, &figures).await?,
            _ => crate::tables::tally::add_pending(tx, scope, batch_last, &figures).await?,
        }
        Ok(Written {
            current,
            changed,
            newest: rows.to_vec(),
        })
    }

    /// Orders whose row an earlier attempt of this pass changed to exactly the batch's value and
    /// version (the row is in place now, so this attempt writes nothing to them).
    async fn changed_earlier(
        &self,
        tx: &mut sqlx::PgConnection,
        rows: &[CommissionRow],
        current: &HashMap<String, commission::Current>,
    ) -> Result<Vec<String>, sqlx::Error> {
        let in_place: Vec<String> = rows
            .iter()
            .filter(|r| {
                current.get(&r.pedido_id).is_some_and(|c| {
                    c.valor_centavos == r.valor_centavos && c.versao_evento == r.versao
                })
            })
            .map(|r| r.pedido_id.clone())
            .collect();
        if in_place.is_empty() {
            return Ok(Vec::new());
        }
        let (id, pass) = (self.diff_execution_id(), self.config.pass.tally.pass);
        let corrected = commission::corrected_in_pass(tx, id, pass, &in_place).await?;
        Ok(in_place
            .into_iter()
            .filter(|o| corrected.contains_key(o))
            .collect())
    }
}

/// The guarded upsert of a batch's rows (a real run's corrections recorded with it), and each
/// order's row before it: for an order written, the row the upsert replaced (none if it
/// inserted one); for the others (a newer row kept, or the same value already in place), the
/// row as it stands. Returns that, the orders written, and what the corrections added to the
/// pass's figures.
async fn upsert_with_before(
    tx: &mut sqlx::PgConnection,
    rows: &[CommissionRow],
    ids: &[String],
    recording: Option<commission::Recording<'_>>,
) -> Result<(HashMap<String, commission::Current>, Vec<String>, Summary), sqlx::Error> {
    let upserted = commission::upsert_guarded(tx, rows, recording).await?;
    let mut current = upserted.untouched;
    let mut written = Vec::with_capacity(upserted.written.len());
    for (id, before) in upserted.written {
        if let Some(before) = before {
            current.insert(id.clone(), before);
        }
        written.push(id);
    }
    // Orders another writer changed between the statement's read and its write: read now.
    let seen: HashSet<&str> = written.iter().map(String::as_str).collect();
    let changed_meanwhile: Vec<String> = ids
        .iter()
        .filter(|id| !seen.contains(id.as_str()) && !current.contains_key(id.as_str()))
        .cloned()
        .collect();
    if !changed_meanwhile.is_empty() {
        current.extend(commission::current(tx, &changed_meanwhile).await?);
    }
    Ok((current, written, upserted.figures))
}

/// The diff rows a simulation writes: every order whose current row is not newer.
fn would_write(
    rows: &[CommissionRow],
    current: &HashMap<String, commission::Current>,
) -> Vec<Change> {
    rows.iter()
        .filter(|r| {
            current
                .get(&r.pedido_id)
                .is_none_or(|c| c.versao_evento <= r.versao)
        })
        .map(|r| Change {
            pedido_id: r.pedido_id.clone(),
            antes: current.get(&r.pedido_id).map(|c| c.valor_centavos),
            depois: r.valor_centavos,
            versao: r.versao,
        })
        .collect()
}

/// What the state step found and did for a batch's orders.
struct Written {
    /// The orders' rows before the batch.
    current: HashMap<String, commission::Current>,
    /// Orders whose row this execution changed to the batch's newest value and version (now, or
    /// in an earlier attempt of this pass); in a simulation, the orders whose row would change.
    changed: HashSet<String>,
    /// The batch's newest row per order.
    newest: Vec<CommissionRow>,
}

/// The state outcome of every event (the seed's per-event words, as if applied one by one):
/// an order's row newer than the event → `ignorado-versao-mais-nova`; a row this execution
/// changed to the order's newest value → `changed` (`gravado`; in a simulation `seria-gravado`,
/// since it writes no row) — an older event of the same order too: it was written, then
/// overwritten; a row already holding that value and version → `inalterado`.
fn count_state(
    decided: &[Decided],
    written: &Written,
    changed: StateOutcome,
    summary: &mut Summary,
) {
    let newest: HashMap<&str, &CommissionRow> = written
        .newest
        .iter()
        .map(|r| (r.pedido_id.as_str(), r))
        .collect();
    for d in decided {
        let row = &d.decision.commission;
        let before = written.current.get(&row.pedido_id);
        let outcome = if before.is_some_and(|c| c.versao_evento > row.versao) {
            StateOutcome::NewerKept
        } else if written.changed.contains(&row.pedido_id) {
            changed
        } else if newest.get(row.pedido_id.as_str()).is_some_and(|n| {
            before.is_some_and(|c| {
                c.valor_centavos == n.valor_centavos && c.versao_evento == n.versao
            })
        }) {
            StateOutcome::Unchanged
        } else {
            StateOutcome::NewerKept
        };
        summary.count_state(outcome, 1);
    }
}

/// The live consumer's figures for a batch: the orders whose value the upsert changed.
fn live_figures(
    rows: &[CommissionRow],
    current: &HashMap<String, commission::Current>,
    written: &[String],
) -> Summary {
    let mut figures = Summary::default();
    for change in commission::corrections(rows, current, written) {
        figures.orders_changed += 1;
        let before = change.antes.unwrap_or(0);
        figures.total_before_centavos = figures.total_before_centavos.saturating_add(before);
        figures.total_after_centavos = figures.total_after_centavos.saturating_add(change.depois);
    }
    figures
}

/// The version of the order's current row, if it has one.
fn current_version(current: &HashMap<String, commission::Current>, change: &Change) -> Option<i64> {
    current.get(&change.pedido_id).map(|c| c.versao_evento)
}
