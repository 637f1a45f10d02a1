//! The sweeper's statements: find reservations older than `stale_after`, move them to `incerto`,
//! or claim them for a retake; find the keys a human queued for a resend. Each change re-checks staleness in its `where`, so of two sweepers
//! racing on a row exactly one acts on it.

use std::time::Duration;

use sqlx::PgPool;

use super::{Claim, Why};

/// A stale reservation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaleRow {
    pub key: String,
    pub event_id: String,
    pub effect_type: String,
}

crate::tables::db::from_row!(StaleRow {
    key = "chave",
    event_id = "evento_id",
    effect_type = "tipo_efeito"
});

/// The oldest stale reservations, at most `limit`. A scan of the ledger, once a sweep: no index
/// covers `estado`, so that a completion can be a HOT update (see the migration
/// `ledger_hot_completion`).
pub async fn stale_page(
    pool: &PgPool,
    stale_after: Duration,
    limit: i64,
) -> Result<Vec<StaleRow>, sqlx::Error> {
    sqlx::query_as(
        r#"
        select chave, evento_id, tipo_efeito from efeito_aplicado
        where estado = 'reservado' and atualizado_em < now() - make_interval(secs => $1)
        order by atualizado_em, chave
        limit $2
        "#,
    )
    .bind(stale_after.as_secs_f64())
    .bind(limit)
    .fetch_all(pool)
    .await
}

/// The oldest keys of these types a human queued for a resend (`review resolve --not-sent`), at
/// most `limit` (served by the partial index on the queued rows). They are performed by reserving
/// them ([`super::reserve`]), like any key; a key of another type (a report's e-mail) is left to
/// whoever sends that type.
pub async fn queued_page(
    pool: &PgPool,
    types: &[String],
    limit: i64,
) -> Result<Vec<StaleRow>, sqlx::Error> {
    sqlx::query_as(
        r#"
        select chave, evento_id, tipo_efeito from efeito_aplicado
        where reenvio_pedido_em is not null and estado = 'incerto' and tipo_efeito = any($1)
        order by reenvio_pedido_em, chave
        limit $2
        "#,
    )
    .bind(types)
    .bind(limit)
    .fetch_all(pool)
    .await
}

/// Moves still-stale reservations to `incerto`, each with why (`why[i]` for `keys[i]`: a type
/// whose provider cannot deduplicate, whose call may have gone out, or one not declared): only a
/// human may decide.
pub async fn uncertain_if_stale(
    pool: &PgPool,
    keys: &[String],
    why: &[Why],
    stale_after: Duration,
) -> Result<Vec<String>, sqlx::Error> {
    debug_assert_eq!(keys.len(), why.len(), "one reason per key");
    let (reasons, statuses) = super::why::columns(why);
    sqlx::query_scalar(
        r#"
        update efeito_aplicado e
        set estado = 'incerto', atualizado_em = now(), incerto_desde = now(),
            motivo_incerto = u.m, status_http_incerto = u.s
        from unnest($1::text[], $3::text[], $4::int4[]) as u(k, m, s)
        where e.chave = u.k and e.estado = 'reservado'
          and e.atualizado_em < now() - make_interval(secs => $2)
        returning e.chave
        "#,
    )
    .bind(keys)
    .bind(stale_after.as_secs_f64())
    .bind(reasons)
    .bind(statuses)
    .fetch_all(pool)
    .await
}

/// Claims still-stale reservations for `claim` (a new token), fencing out their old holder.
pub async fn claim_stale(
    pool: &PgPool,
    claim: &Claim,
    keys: &[String],
    stale_after: Duration,
) -> Result<Vec<StaleRow>, sqlx::Error> {
    sqlx::query_as(
        r#"
        update efeito_aplicado
        set execucao_id = $2, reserva_id = $3, atualizado_em = now()
        where chave = any($1) and estado = 'reservado'
          and atualizado_em < now() - make_interval(secs => $4)
        returning chave, evento_id, tipo_efeito
        "#,
    )
    .bind(keys)
    .bind(&claim.execution_id)
    .bind(claim.token)
    .bind(stale_after.as_secs_f64())
    .fetch_all(pool)
    .await
}
