//! Why a run stopped with an error, and how a lost database is told: where and why.

use sqlx::PgPool;

use crate::engine::applier::{ApplyError, EffectFailure};
use crate::services::held::RecoverError;
use crate::tables::db;
use crate::tables::execution::{LockError, Rejected};

/// Why a run stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Locked(#[from] LockError),
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    #[error(transparent)]
    Apply(#[from] ApplyError),
    #[error("effect {} of event {} (posicao {}) failed after retries: {}; its key was released and the checkpoint stays before it — rerun when the provider is back", .0.key, .0.event_id, .0.posicao, .0.class)]
    EffectFailed(EffectFailure),
    #[error("invalid event {} (posicao {}) halted the run (on_invalid_event: stop): {}", .0.event_id, .0.posicao, .0.erro)]
    InvalidEvent(Rejected),
    #[error("lost the lock on execution {0} (database connection dropped); stopped so that no two processes run it")]
    LockLost(String),
    /// This process's ownership lease lapsed (it could not reach the database) and another
    /// process took its executions meanwhile: it stopped acting at the lapse, changed nothing
    /// since, and leaves them to their new owner.
    #[error("{0} taken over by another process while this one could not reach the database (its ownership lease lapsed); this process changed nothing since and stops")]
    TakenOver(String),
    #[error("job {0} is not a replay job")]
    NotReplay(String),
    /// A real run of a job whose `rule` is a candidate, not the rule in force: a candidate is
    /// only simulated (nothing is written for it but the diff).
    #[error("job {job} computes with the candidate rule {rule}, which is only simulated: run it with --simulate (or `simulate: true`); putting a rule in force is a release, not a job setting")]
    CandidateRule { job: String, rule: &'static str },
    /// `require_approved_simulation`: no approval, or the window changed since (`approval`).
    #[error(transparent)]
    NotApproved(#[from] crate::engine::approval::GateError),
    #[error(transparent)]
    Recover(#[from] RecoverError),
    /// A statement ran past the server's `statement_timeout` (SQLSTATE 57014).
    #[error("a statement ran past the server's statement_timeout ({message}); the checkpoint is kept: raise statement_timeout for this role, then run it again to resume")]
    StatementTimeout { message: String },
    /// The database stayed away past every retry and recovery.
    #[error(
        "lost the database at {target}: {cause}; the checkpoint is kept, run it again to resume"
    )]
    DatabaseLost { target: String, cause: String },
}

impl RunError {
    /// The database failure under this error, if it is one.
    pub(crate) fn database(&self) -> Option<&sqlx::Error> {
        match self {
            RunError::Database(e) | RunError::Apply(ApplyError::Database(e)) => Some(e),
            RunError::Locked(LockError::Database(e)) => Some(e),
            RunError::Recover(e) => e.database(),
            _ => None,
        }
    }

    /// Whether another process owns the execution: its lock is held elsewhere, or a write of this
    /// process found a newer ownership epoch (invariant `one-owner`) and changed nothing.
    pub fn lost_to_another(&self) -> bool {
        match self {
            RunError::Locked(LockError::Held { .. })
            | RunError::Recover(RecoverError::Lock(LockError::Held { .. }))
            | RunError::Recover(RecoverError::TakenOver(_)) => true,
            other => other
                .database()
                .is_some_and(crate::tables::execution::is_fenced),
        }
    }

    /// Why the database was lost, in words (see [`db::explain_loss`]).
    pub(crate) async fn cause(&self, pool: &PgPool) -> String {
        match self.database() {
            Some(e) => db::explain_loss(pool, e).await,
            None => self.to_string(),
        }
    }

    /// A lost database says where and why; any other error is returned as it is.
    pub(crate) async fn located(self, pool: &PgPool) -> RunError {
        match self.database() {
            Some(e) if db::is_statement_timeout(e) => RunError::StatementTimeout {
                message: db::describe(e),
            },
            Some(e) if db::is_transient(e) => RunError::DatabaseLost {
                target: db::target(pool),
                cause: db::explain_loss(pool, e).await,
            },
            _ => self,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pool that is never used: `located` reads only where it points.
    fn pool_at(port: u16) -> PgPool {
        db::pool_for(db::check_url(&format!("postgres://postgres@127.0.0.1:{port}/loja")).unwrap())
    }

    fn refused() -> sqlx::Error {
        sqlx::Error::Io(std::io::ErrorKind::ConnectionRefused.into())
    }

    #[tokio::test]
    async fn a_recovery_that_gave_up_on_the_database_names_the_server_and_the_cause() {
        let gave_up = RunError::from(RecoverError::Lock(LockError::Database(refused())));

        let message = gave_up.located(&pool_at(5999)).await.to_string();

        assert!(
            message.starts_with("lost the database at 127.0.0.1:5999/loja: connection refused"),
            "{message}"
        );
    }

    #[tokio::test]
    async fn a_lock_held_by_another_process_is_not_called_a_lost_database() {
        let held = RunError::from(RecoverError::Lock(LockError::Held {
            key: "k".into(),
            holder: "another process".into(),
        }));

        let message = held.located(&pool_at(5999)).await.to_string();

        assert_eq!(
            message,
            "execution k is already being run by another process"
        );
    }
}
