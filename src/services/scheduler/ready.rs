//! A daemon started while its database was away: once the database answers, apply the migrations
//! (unless told not to), let the jobs fire and catch up the missed nights — the start-up steps
//! that a database present at start gets before the first fire. Until then each attempt says why
//! the database cannot be had.

use std::sync::Arc;
use std::time::Duration;

use super::fire::Shared;

/// The longest pause between two attempts.
const MAX_PAUSE: Duration = Duration::from_secs(15);

/// Tries every few seconds (doubling up to [`MAX_PAUSE`]) until the database answers and the
/// migrations are applied, or shutdown.
pub(super) async fn when_back(shared: Arc<Shared>) {
    let mut shutdown = shared.shutdown.clone();
    let mut pause = Duration::from_secs(1);
    loop {
        match prepare(&shared).await {
            Ok(()) => {
                tracing::info!(
                    database = %replay_ledger_core::tables::db::target(&shared.pool),
                    "the database answers: jobs fire from now on"
                );
                shared.set_ready();
                if shared.config.catch_up {
                    super::spawn_catch_up(&shared);
                }
                return;
            }
            Err(cause) => {
                tracing::warn!(
                    database = %replay_ledger_core::tables::db::target(&shared.pool),
                    cause = %cause,
                    "the database is still away; no job fires until it answers"
                );
            }
        }
        tokio::select! {
            _ = shutdown.triggered() => return,
            _ = tokio::time::sleep(pause) => {}
        }
        pause = (pause * 2).min(MAX_PAUSE);
    }
}

/// One attempt: a connection, then the migrations when asked for; why not, in words.
async fn prepare(shared: &Shared) -> Result<(), String> {
    replay_ledger_core::tables::db::attempt(&shared.pool.connect_options())
        .await
        .map_err(|cause| cause.to_string())?;
    if shared.config.migrate_when_back {
        replay_ledger_core::tables::db::migrate(&shared.pool)
            .await
            .map_err(|e| format!("applying migrations: {e}"))?;
    }
    Ok(())
}
