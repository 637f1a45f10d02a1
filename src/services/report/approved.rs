//! Approved = applied, as finance reads it: after a real run of an approved simulation, the
//! report says whether the run changed exactly the orders, to exactly the values, that were
//! approved, and lists the orders where it did not (a newer event the live consumer wrote since,
//! say: the run keeps the newer row, and the approved value is not applied).

use sqlx::PgPool;

use replay_ledger_core::shared::summary::{Summary, Totals};
use replay_ledger_core::tables::commission::{self, Divergence};

/// How many differing orders a report lists (with the total count).
pub const LIMIT: usize = 20;

/// What was approved against what the real run applied.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    /// Who approved, when, and the totals approved.
    pub by: String,
    pub at: chrono::DateTime<chrono::Utc>,
    pub approved: Totals,
    /// The run's totals (its tallies).
    pub applied: Totals,
    /// Orders whose applied value differs from the approved one (at most [`LIMIT`]).
    pub differences: Vec<Divergence>,
    pub difference_count: u64,
}

impl Check {
    /// The run applied exactly what was approved.
    pub fn exact(&self) -> bool {
        self.difference_count == 0
            && self.approved.changed == self.applied.changed
            && self.approved.before_centavos == self.applied.before_centavos
            && self.approved.after_centavos == self.applied.after_centavos
    }
}

/// The check for the real run `execution_id` (over all its passes), if an approval exists for
/// it.
pub async fn check(
    pool: &PgPool,
    execution_id: &str,
    figures: &Summary,
) -> Result<Option<Check>, sqlx::Error> {
    let Some(approval) = replay_ledger_core::engine::approval::latest(pool, execution_id).await?
    else {
        return Ok(None);
    };
    let (differences, count) = commission::approved_vs_applied(pool, execution_id, LIMIT).await?;
    Ok(Some(Check {
        by: approval.by,
        at: approval.at,
        approved: approval.totals,
        applied: Totals::of_summary(false, figures),
        differences,
        difference_count: count,
    }))
}
