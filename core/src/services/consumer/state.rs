//! Every statement on `consumo_ao_vivo`: what the live consumer has applied, stored with its
//! checkpoint (`reprocessamento_checkpoint`) and the tallies of the batch that moved it, in one
//! transaction ([`save`]), so after any interruption the figures, the checkpoint and what counts
//! as applied agree (invariant `one-truth-for-numbers`).

use sqlx::{PgConnection, PgPool};

use crate::services::held::Checkpoint;
use crate::shared::summary::Summary;
use crate::tables::archive::snapshot::Snapshot;
use crate::tables::archive::{self, LivePosition};
use crate::tables::execution;
use crate::tables::tally::Scope;

/// Where the live consumer stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveState {
    /// The safe horizon: every event at or before it is applied, and no transaction can still
    /// archive one there.
    pub checkpoint: LivePosition,
    /// Every event of a transaction this snapshot sees is applied.
    pub seen: Snapshot,
    /// The round in progress, if one has applied a batch.
    pub round: Option<Round>,
}

/// A round: the events of the transactions `snapshot` sees and `LiveState::seen` did not, read
/// in (transaction, position) order; those up to `after` are applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Round {
    pub snapshot: Snapshot,
    pub after: LivePosition,
}

impl LiveState {
    /// The applied set as the archive's reads take it.
    pub fn applied(&self) -> archive::Applied<'_> {
        archive::Applied {
            checkpoint: self.checkpoint,
            seen: &self.seen,
            round: self.round.as_ref().map(|r| (&r.snapshot, r.after)),
        }
    }
}

/// Why a stored state could not be read.
fn protocol(err: impl std::fmt::Display) -> sqlx::Error {
    sqlx::Error::Protocol(err.to_string())
}

/// The stored state of the live execution `key`; `None` when it has no checkpoint yet. A
/// checkpoint without a state row is one the horizon-bound consumer of earlier versions left:
/// every event up to it applied, none after it — the same as a snapshot that sees the
/// transactions below its xid, with the checkpoint itself for the rest of its transaction.
pub async fn load(pool: &PgPool, key: &str) -> Result<Option<LiveState>, sqlx::Error> {
    load_in(&mut *pool.acquire().await?, key).await
}

/// As [`load`], on `conn` (inside the caller's transaction, so in its snapshot: `verify`).
pub async fn load_in(conn: &mut PgConnection, key: &str) -> Result<Option<LiveState>, sqlx::Error> {
    let Some(checkpoint) = execution::live_checkpoint(&mut *conn, key).await? else {
        return Ok(None);
    };
    type Row = (String, Option<String>, Option<String>, Option<i64>);
    let row: Option<Row> = sqlx::query_as(
        r#"
        select visto::text, rodada::text, rodada_ultimo_xid::text, rodada_ultima_posicao
        from consumo_ao_vivo where execucao_id = $1
        "#,
    )
    .bind(key)
    .fetch_optional(&mut *conn)
    .await?;
    let Some((seen, round, round_xid, round_posicao)) = row else {
        return Ok(Some(LiveState {
            checkpoint,
            seen: Snapshot::below(checkpoint.xid),
            round: None,
        }));
    };
    let round = match (round, round_xid, round_posicao) {
        (Some(snapshot), Some(x), Some(p)) => Some(Round {
            snapshot: Snapshot::parse(&snapshot).map_err(protocol)?,
            after: LivePosition {
                xid: x.parse().map_err(protocol)?,
                posicao: p,
            },
        }),
        _ => None,
    };
    Ok(Some(LiveState {
        checkpoint,
        seen: Snapshot::parse(&seen).map_err(protocol)?,
        round,
    }))
}

/// Stores `state`, with the checkpoint and the figures of the batch that brought it there (in the
/// caller's transaction), while `owner` owns the live execution.
pub async fn save(
    conn: &mut PgConnection,
    owner: &execution::Owner,
    scope: &Scope,
    state: &LiveState,
    batch: &Summary,
) -> Result<(), sqlx::Error> {
    execution::advance_live(&mut *conn, owner, scope, state.checkpoint, batch).await?;
    let round = state.round.as_ref();
    sqlx::query(
        r#"
        insert into consumo_ao_vivo
          (execucao_id, visto, rodada, rodada_ultimo_xid, rodada_ultima_posicao)
        values ($1, $2::text::pg_snapshot, $3::text::pg_snapshot, $4::text::xid8, $5)
        on conflict (execucao_id) do update
        set visto = excluded.visto, rodada = excluded.rodada,
            rodada_ultimo_xid = excluded.rodada_ultimo_xid,
            rodada_ultima_posicao = excluded.rodada_ultima_posicao, atualizado_em = now()
        "#,
    )
    .bind(&scope.key)
    .bind(state.seen.to_string())
    .bind(round.map(|r| r.snapshot.to_string()))
    .bind(round.map(|r| r.after.xid.to_string()))
    .bind(round.map(|r| r.after.posicao))
    .execute(conn)
    .await?;
    Ok(())
}

/// The snapshot of this moment: the transactions that have ended, server-wide.
pub async fn current_snapshot<'c, E>(conn: E) -> Result<Snapshot, sqlx::Error>
where
    E: sqlx::PgExecutor<'c>,
{
    let text: String = sqlx::query_scalar("select pg_current_snapshot()::text")
        .fetch_one(conn)
        .await?;
    Snapshot::parse(&text).map_err(protocol)
}

impl Checkpoint for LiveState {
    async fn load(pool: &PgPool, key: &str) -> Result<Option<Self>, sqlx::Error> {
        load(pool, key).await
    }
}
