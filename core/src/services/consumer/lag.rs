//! How far behind the live consumer is: events archived and not yet applied, and the
//! transaction its checkpoint waits for.

use sqlx::PgPool;

use super::horizon::{Horizon, HorizonWatch};
use super::{state, LIVE_EXECUTION};
use crate::tables::archive::{self, LivePosition, Pending};

/// Events the live consumer has not applied yet, counted up to this many per reading.
pub const LAG_CAP: i64 = 100_000;

/// How far behind the live consumer is, as `/metrics` and `status` show it.
#[derive(Debug, Clone, PartialEq)]
pub struct Lag {
    /// Events archived (committed) and not yet applied; at most [`LAG_CAP`].
    pub pending: Pending,
    /// The oldest transaction still running on the server: what the checkpoint waits for.
    pub horizon: Horizon,
    pub checkpoint: LivePosition,
}

/// The live consumer's lag; `None` when it never started in this database.
pub async fn lag(pool: &PgPool, watch: &HorizonWatch) -> Result<Option<Lag>, sqlx::Error> {
    let Some(stored) = state::load(pool, LIVE_EXECUTION).await? else {
        return Ok(None);
    };
    let pending = archive::pending(pool, &stored.applied(), LAG_CAP).await?;
    let horizon = watch.read(pool).await?;
    Ok(Some(Lag {
        pending,
        horizon,
        checkpoint: stored.checkpoint,
    }))
}
