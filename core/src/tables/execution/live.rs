//! The live consumer's execution (`ao-vivo`) and its checkpoint: the same tables as a replay's
//! (`reprocessamento_execucao`, `reprocessamento_checkpoint`), with the checkpoint also holding the
//! inserting transaction (`ultimo_xid`) of the last settled event, since the consumer reads by
//! transaction, not by `posicao` alone.

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgPool};

use super::{touch, Owner};
use crate::shared::summary::Summary;
use crate::tables::archive::LivePosition;
use crate::tables::tally::{self, Scope};

/// The live consumer's checkpoint: (transaction, position) of the last settled event.
pub async fn live_checkpoint<'c, E>(conn: E, key: &str) -> Result<Option<LivePosition>, sqlx::Error>
where
    E: sqlx::PgExecutor<'c>,
{
    let row: Option<(Option<String>, i64)> = sqlx::query_as(
        "select ultimo_xid::text, ultima_posicao from reprocessamento_checkpoint where execucao_id = $1",
    )
    .bind(key)
    .fetch_optional(conn)
    .await?;
    Ok(row.and_then(|(xid, posicao)| {
        Some(LivePosition {
            xid: xid?.parse().ok()?,
            posicao,
        })
    }))
}

/// Moves the live consumer's checkpoint and adds the batch's figures, together, while `owner`
/// still owns the live execution (for the rest of the caller's transaction).
pub async fn advance_live(
    conn: &mut PgConnection,
    owner: &Owner,
    scope: &Scope,
    to: LivePosition,
    batch: &Summary,
) -> Result<(), sqlx::Error> {
    owner.confirm(&mut *conn).await?;
    sqlx::query(
        r#"
        insert into reprocessamento_checkpoint (execucao_id, ultima_posicao, ultimo_xid)
        values ($1, $2, $3::text::xid8)
        on conflict (execucao_id) do update
        set ultima_posicao = excluded.ultima_posicao, ultimo_xid = excluded.ultimo_xid,
            atualizado_em = now()
        "#,
    )
    .bind(&scope.key)
    .bind(to.posicao)
    .bind(to.xid.to_string())
    .execute(&mut *conn)
    .await?;
    tally::add(conn, scope, batch).await?;
    touch(conn, &scope.key).await?;
    Ok(())
}

/// Makes sure the live consumer's execution row exists and says it is running; returns its pass
/// and when it first started (everything it did since is its own).
pub async fn ensure_live(
    pool: &PgPool,
    owner: &Owner,
    job: &str,
    started_by: &str,
) -> Result<(i32, DateTime<Utc>), sqlx::Error> {
    let mut tx = pool.begin().await?;
    owner.confirm(&mut tx).await?;
    let started = sqlx::query_as(
        r#"
        insert into reprocessamento_execucao (execucao_id, job, modo, estado, iniciada_por)
        values ($1, $2, 'ao-vivo', 'em-andamento', $3)
        on conflict (execucao_id) do update
        set job = excluded.job, estado = 'em-andamento', erro = null,
            iniciada_por = excluded.iniciada_por, atualizado_em = now()
        returning passagem, iniciada_em
        "#,
    )
    .bind(&owner.key)
    .bind(job)
    .bind(started_by)
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(started)
}
