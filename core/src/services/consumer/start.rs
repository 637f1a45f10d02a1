//! How the live consumer starts: it takes the `ao-vivo` execution's lock, marks it running, and
//! loads where it stands — or, the first time, stores where it starts.

use crate::config::{Job, LiveJob};
use crate::engine::applier::Policy;
use crate::engine::effects::Effects;
use crate::services::held::{Held, HeldSpec};
use crate::services::runner::RunError;
use crate::shared::shutdown::Shutdown;
use crate::shared::summary::Summary;
use crate::tables::archive::{self, LivePosition};
use crate::tables::execution::{self, Mode};
use crate::tables::tally::Scope;

use super::state::{self, LiveState};
use super::{listen, ConsumeReport, Consumer, ConsumerConfig, LIVE_EXECUTION};
use crate::tables::archive::snapshot::Snapshot;
use sqlx::PgPool;

/// What the consumer starts from.
pub(super) struct Start<'a> {
    pub(super) pool: &'a PgPool,
    pub(super) database_url: &'a str,
    pub(super) job: &'a Job,
    pub(super) live: &'a LiveJob,
}

impl<'a> Start<'a> {
    /// Takes the live execution's lock, marks it running, and loads (or stores) where it stands.
    pub(super) async fn begin(
        self,
        effects: Effects,
        config: ConsumerConfig,
        shutdown: Shutdown,
    ) -> Result<Consumer<'a>, RunError> {
        let (pool, key) = (self.pool, LIVE_EXECUTION);
        let spec = HeldSpec {
            key,
            execution_id: key,
            mode: Mode::Live,
            policy: Policy::from(self.live),
            retries: config.retries,
            partition: None,
            role: "consume",
        };
        let mut held = Held::take(pool, self.database_url, spec, effects).await?;
        let (pass, started_at) =
            execution::ensure_live(pool, held.owner(), &self.job.name, &config.started_by).await?;
        // Everything the live execution did since it first started is its own, so every batch
        // may meet keys it sent in an earlier attempt.
        held.begin(Scope::whole(key, pass), started_at, true);
        let summary = execution::load(pool, key)
            .await?
            .map(|e| e.summary)
            .unwrap_or_default();
        let state = match held.stored::<LiveState>().await? {
            Some(state) => state,
            None => {
                let scope = Scope::whole(key, pass);
                start_state(pool, held.owner(), &scope, config.from_start).await?
            }
        };
        tracing::info!(
            execution = key,
            xid = state.checkpoint.xid,
            posicao = state.checkpoint.posicao,
            seen = %state.seen,
            "live consumer starting"
        );
        if let Err(err) = held.settle_own().await {
            tracing::warn!(error = %err, "could not settle abandoned reservations yet");
        }
        if let Some(metrics) = &config.metrics {
            metrics.add_work(&self.job.name, &Summary::default());
        }
        Ok(Consumer {
            pool,
            job: &self.job.name,
            live: self.live,
            config,
            listener: listen(pool).await,
            held,
            shutdown,
            round: state.round.clone(),
            state,
            report: ConsumeReport {
                summary,
                ..ConsumeReport::default()
            },
        })
    }
}

/// Without a checkpoint: the start of the archive (`--from-start`), or "now" — every event of a
/// transaction ended by now is history, left alone — stored at once.
async fn start_state(
    pool: &PgPool,
    owner: &execution::Owner,
    scope: &Scope,
    from_start: bool,
) -> Result<LiveState, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let start = if from_start {
        LiveState {
            checkpoint: LivePosition::START,
            seen: Snapshot::nothing(),
            round: None,
        }
    } else {
        let seen = state::current_snapshot(&mut *tx).await?;
        let checkpoint = archive::newest_below(&mut *tx, seen.xmin)
            .await?
            .unwrap_or(LivePosition::START);
        LiveState {
            checkpoint,
            seen,
            round: None,
        }
    };
    state::save(&mut tx, owner, scope, &start, &Summary::default()).await?;
    tx.commit().await?;
    Ok(start)
}
