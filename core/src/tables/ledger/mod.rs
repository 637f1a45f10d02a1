//! Every statement on `efeito_aplicado`, the effects ledger: one row per (event, effect type),
//! keyed `'<evento_id>:<tipo_efeito>'`, shared by the live consumer and every replay.
//!
//! A row moves `reservado` → `concluido` | `incerto`, or is deleted (released) so a later attempt
//! performs the effect. A move to `incerto` records why ([`Why`]) and since when; only a review
//! decision (`resolver_incerto`, see [`resolve`]) moves a row out of `incerto`: `enviado` to
//! `concluido`, `nao-enviado` to the resend queue (still `incerto`, `reenvio_pedido_em` set), from
//! which the next [`reserve`] of the key — the sweeper's, a replay's or the live consumer's —
//! takes it back to `reservado` (invariant `decision-acts`). Every change after
//! the reservation names the claim it expects (the row still `reservado`, `reserva_id = $token`)
//! and reports which rows it changed, so a slow, stale worker cannot settle a reservation that
//! someone else has since retaken (invariant `claim-conditioned`).
//!
//! The changes that name their keys (here, and the sweeper's in `sweep`) find their rows by one
//! probe of the primary key per key. A batch's statements pass their keys as an array the planner
//! cannot size (`any(array(select unnest($1)))`) or look each up in a lateral subquery, so it
//! plans probes whatever the ledger's size and statistics: given a known array of thousands of
//! keys, it read the whole ledger once per batch instead. They test `estado = 'reservado'` plainly
//! (`estado` is never null). They once said `estado is not distinct from 'reservado'`, the same
//! test hidden from the planner, when partial indexes on `estado = 'reservado'` existed and the
//! planner, whose statistics rarely see a reservation, took them for empty and read every
//! reservation in flight to settle a few. No index covers `estado` or `atualizado_em` any more, so
//! that a completion is a HOT update (migration `ledger_hot_completion`); scans by state (the
//! sweeper's, the settlement of an execution's abandoned reservations) read the table, once a
//! sweep or a take.

mod attempts;
mod lookup;
mod review;
mod sweep;
mod why;

pub use attempts::{
    histories as attempt_histories, history as attempt_history, past_dedup_window,
    record as record_attempts, within_dedup_window, Attempt, KeyAttempt,
};
pub use lookup::{entry, of_keys as effects_of_keys, states_of_execution, Entry, OrderEffect};
pub use review::{
    decision_of, decisions_on, last_decision_on, resolve, resolve_in_console, review_list,
    review_list_filtered, PastDecision, Resolution, ReviewError, ReviewFilter, ReviewItem, QUEUED,
};
pub use sweep::{claim_stale, queued_page, stale_page, uncertain_if_stale, StaleRow};
pub use why::{Reason, Why};

use std::collections::HashSet;

use crate::tables::archive::Partition;
use std::time::Duration;

use serde_json::Value;
use sqlx::PgPool;
use uuid::Uuid;

use crate::shared::words::db_words;
use crate::tables::execution::Owner;

db_words! {
    /// The state of a ledger row (`efeito_aplicado.estado`, the seed's words).
    pub enum State("ledger state") {
        /// Held by a claim; the call may be under way.
        Reserved = "reservado",
        /// The provider acknowledged it (or a human confirmed it went out).
        Done = "concluido",
        /// Nobody knows whether it went out; waits for a human, never resent automatically.
        Uncertain = "incerto",
    }
}

/// The claim a writer holds: its execution, a token unique to this process run and, for the owner
/// of an execution, the ownership epoch it took (invariant `one-owner`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub execution_id: String,
    pub token: Uuid,
    /// `Some` for the owner of an execution (a run, a partition, the live consumer): it reserves
    /// only while that epoch owns the execution, so after a new owner settled the execution's
    /// reservations no reservation of the old one can appear. `None` for the sweeper, which owns
    /// no execution and fences its retakes by staleness.
    pub owner: Option<Owner>,
    /// The owner's lease ([`crate::tables::execution::lease`]): once it lapsed, nothing more is
    /// reserved or called under this claim. `None`: no lease (the sweeper, tests).
    pub lease: Option<crate::tables::execution::Lease>,
}

impl Claim {
    /// A claim that owns no execution (the sweeper's).
    pub fn new(execution_id: impl Into<String>) -> Self {
        Claim {
            execution_id: execution_id.into(),
            token: Uuid::new_v4(),
            owner: None,
            lease: None,
        }
    }

    /// The same claim, acting only while `lease` is alive.
    pub fn with_lease(self, lease: crate::tables::execution::Lease) -> Self {
        Claim {
            lease: Some(lease),
            ..self
        }
    }

    /// Whether this claim may still reserve and call: its owner's lease (if any) is alive.
    pub fn may_act(&self) -> bool {
        self.lease.as_ref().is_none_or(|l| l.alive())
    }

    /// The claim of the owner of an execution whose ledger rows are filed as `execution_id`.
    pub fn owned(execution_id: impl Into<String>, owner: Owner) -> Self {
        Claim {
            owner: Some(owner),
            ..Claim::new(execution_id)
        }
    }
}

/// An effect to reserve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reservation<'a> {
    pub key: &'a str,
    pub event_id: &'a str,
    pub effect_type: &'a str,
}

/// Reserves keys for `claim`; returns the keys it now holds (invariant `one-row-per-key`: one row
/// per key, ever; the provider is called only for keys returned here).
///
/// A key already present is left alone, except a reservation that is stale (older than
/// `retake_stale_after`, `Some` only for a type whose provider deduplicates by key: the seed's
/// `RESERVAR`; for such a type, an owner's claim also retakes at once a reservation of its own
/// execution left by an earlier claim — it holds the newest epoch, so that claim is abandoned, and
/// counting its key as registered would let the checkpoint pass a key no one completes), a
/// reservation this very claim already holds (a retried statement whose first
/// try committed before the connection dropped), and an `incerto` key a human queued for a resend
/// (`review resolve --not-sent`, invariant `decision-acts`): whoever reserves it first — the
/// sweeper, a replay or the live consumer — performs it; the row lock and the re-checked `where`
/// let exactly one.
pub async fn reserve(
    pool: &PgPool,
    claim: &Claim,
    items: &[Reservation<'_>],
    retake_stale_after: Option<Duration>,
) -> Result<Vec<String>, sqlx::Error> {
    let keys: Vec<&str> = items.iter().map(|r| r.key).collect();
    let eventos: Vec<&str> = items.iter().map(|r| r.event_id).collect();
    let tipos: Vec<&str> = items.iter().map(|r| r.effect_type).collect();
    // One statement, on its snapshot. Each key is looked up once, by one probe of the primary
    // key (a lateral subquery the planner cannot turn into a scan of the ledger); a key missing
    // from the ledger is inserted (`do nothing` on a conflict with a concurrent insert). Only a
    // key found `reservado` may be retaken, and one queued for a resend taken back: those few
    // are updated by key, their conditions checked again on the row each update locks. The
    // updates cannot see the rows the insert adds, so no key is touched twice. An owner's claim
    // reserves only while its epoch owns the execution (`confirmar_dono`, evaluated once; it
    // fails the statement otherwise).
    sqlx::query_scalar(
        r#"
        with dono as materialized (
            select $8::text is null or confirmar_dono($8, $9) as ok
        ),
        lidas as materialized (
            select u.k, u.e, u.t, a.achada, a.estado, a.reserva_id, a.atualizado_em,
                   a.reenvio_pedido_em, a.execucao_id
            from unnest($1::text[], $2::text[], $3::text[]) as u(k, e, t)
            left join lateral (
                select true as achada, estado, reserva_id, atualizado_em, reenvio_pedido_em,
                       execucao_id
                from efeito_aplicado a where a.chave = u.k
                offset 0
            ) a on true
            where (select ok from dono)
        ),
        novas as (
            insert into efeito_aplicado (chave, evento_id, tipo_efeito, estado, execucao_id, reserva_id)
            select k, e, t, 'reservado', $4, $5
            from lidas
            where achada is null
            order by k
            on conflict (chave) do nothing
            returning chave
        ),
        retomadas as (
            update efeito_aplicado
            set execucao_id = $4, reserva_id = $5, atualizado_em = now()
            where chave = any(array(
                    select k from lidas
                    where estado = 'reservado'
                      and (reserva_id = $5
                           or ($6::boolean and (atualizado_em < now() - make_interval(secs => $7)
                                                or ($8::text is not null and execucao_id = $4))))))
              and estado = 'reservado'
              and (reserva_id = $5
                   or ($6::boolean and (atualizado_em < now() - make_interval(secs => $7)
                                        or ($8::text is not null and execucao_id = $4))))
            returning chave
        ),
        reenvios as (
            update efeito_aplicado
            set estado = 'reservado', execucao_id = $4, reserva_id = $5, atualizado_em = now(),
                reenvio_pedido_em = null, reenvio_desde = now(), incerto_desde = null,
                motivo_incerto = null,
                status_http_incerto = null
            where chave = any(array(
                    select k from lidas
                    where reenvio_pedido_em is not null
                      and estado = 'incerto'))
              and reenvio_pedido_em is not null
              and estado = 'incerto'
            returning chave
        )
        select chave from novas union all select chave from retomadas
        union all select chave from reenvios
        "#,
    )
    .bind(keys)
    .bind(eventos)
    .bind(tipos)
    .bind(&claim.execution_id)
    .bind(claim.token)
    .bind(retake_stale_after.is_some())
    .bind(retake_stale_after.map_or(0.0, |d| d.as_secs_f64()))
    .bind(claim.owner.as_ref().map(|o| &o.key))
    .bind(claim.owner.as_ref().map(|o| o.epoch))
    .fetch_all(pool)
    .await
}

/// Marks reservations of `claim` done, with the provider's answer, and appends the attempts that
/// tell something (see [`attempts`]), in one transaction; returns the keys changed. Without such
/// an attempt — every key done at its first try, the common case — it is one statement.
pub async fn complete(
    pool: &PgPool,
    claim: &Claim,
    keys: &[String],
    results: &[Option<Value>],
    tries: &[Attempt],
) -> Result<Vec<String>, sqlx::Error> {
    complete_with(pool, claim, keys, results, tries, Durable::OnCommit).await
}

/// [`complete`] for keys of a type whose provider deduplicates, committed without waiting for
/// the server to flush it to disk (`synchronous_commit = off` for this transaction alone).
///
/// Only a crash of the server itself can lose such a commit — at most the last few hundred
/// milliseconds of them — and never without every later commit, since the log is written and
/// flushed in order: a checkpoint that passed these keys, or anyone's commit made after seeing
/// them `concluido`, survives only with them (invariant `checkpoint-after-settle`). A lost
/// completion leaves its key `reservado` under the claim, and the key is retaken and called again
/// (the settlement at take, or the sweeper), which the provider deduplicates (invariant
/// `at-least-once`). The commit a server crash cannot lose is the reservation's, before the call
/// (invariant `one-row-per-key`); a non-idempotent key's completion goes through [`complete`],
/// since losing it would turn a sent effect into a false `incerto`.
pub async fn complete_deduplicated(
    pool: &PgPool,
    claim: &Claim,
    keys: &[String],
    results: &[Option<Value>],
    tries: &[Attempt],
) -> Result<Vec<String>, sqlx::Error> {
    complete_with(pool, claim, keys, results, tries, Durable::Soon).await
}

/// When a completion's commit reaches the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Durable {
    /// Before the commit returns (the server's `synchronous_commit`).
    OnCommit,
    /// Within the WAL writer's next flush, and before any later commit's.
    Soon,
}

async fn complete_with(
    pool: &PgPool,
    claim: &Claim,
    keys: &[String],
    results: &[Option<Value>],
    tries: &[Attempt],
    durable: Durable,
) -> Result<Vec<String>, sqlx::Error> {
    let telling = attempts::any_telling(tries);
    if !telling && durable == Durable::OnCommit {
        return mark_done(pool, claim, keys, results).await;
    }
    let mut tx = pool.begin().await?;
    if durable == Durable::Soon {
        sqlx::query("set local synchronous_commit = off")
            .execute(&mut *tx)
            .await?;
    }
    let changed = mark_done(&mut *tx, claim, keys, results).await?;
    if telling {
        attempts::record(&mut tx, claim, tries).await?;
    }
    tx.commit().await?;
    Ok(changed)
}

/// The completion itself: `concluido` with the answer, only where `claim` still holds the
/// reservation. It changes no indexed column, so PostgreSQL can make it a HOT update.
async fn mark_done<'c>(
    db: impl sqlx::PgExecutor<'c>,
    claim: &Claim,
    keys: &[String],
    results: &[Option<Value>],
) -> Result<Vec<String>, sqlx::Error> {
    // The keys' rows are found by the primary key (the keys as an array whose length the planner
    // does not know: it plans a few probes, never a scan — free to join the answers to the
    // ledger as it liked, it took a scan of the whole ledger when its statistics saw few
    // reservations), each answer looked up by its key in one JSON object.
    sqlx::query_scalar(
        r#"
        update efeito_aplicado e
        set estado = 'concluido', atualizado_em = now(),
            resultado = nullif($2::jsonb -> e.chave, 'null'::jsonb)
        where e.chave = any(array(select unnest($1::text[])))
          and e.estado = 'reservado' and e.reserva_id = $3
        returning e.chave
        "#,
    )
    .bind(keys)
    .bind(sqlx::types::Json(AnswersByKey(keys, results)))
    .bind(claim.token)
    .fetch_all(db)
    .await
}

/// The providers' answers as one JSON object keyed by effect key, written straight from the
/// slices (`null` where there was none).
struct AnswersByKey<'a>(&'a [String], &'a [Option<Value>]);

impl serde::Serialize for AnswersByKey<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let answers = self.1.iter().map(|r| r.as_ref().unwrap_or(&Value::Null));
        serializer.collect_map(self.0.iter().zip(answers))
    }
}

/// Deletes reservations of `claim` after a failed call of an idempotent type (`release`), so a
/// later attempt performs the effect; the attempts stay on record. Returns the keys released.
pub async fn release(
    pool: &PgPool,
    claim: &Claim,
    keys: &[String],
    tries: &[Attempt],
) -> Result<Vec<String>, sqlx::Error> {
    settle_held(
        pool,
        claim,
        keys,
        tries,
        r#"
        delete from efeito_aplicado
        where chave = any($1) and estado = 'reservado' and reserva_id = $2
        returning chave
        "#,
    )
    .await
}

/// Moves reservations of `claim` whose outcome is unknown to `incerto` (`keep`), each with why
/// (`why[i]` for `keys[i]`): out of the automatic flow, into the review queue, never resent
/// automatically (invariant `at-most-once`). Appends the attempts that explain them, in the same
/// transaction.
pub async fn mark_uncertain(
    pool: &PgPool,
    claim: &Claim,
    keys: &[String],
    why: &[Why],
    tries: &[Attempt],
) -> Result<Vec<String>, sqlx::Error> {
    debug_assert_eq!(keys.len(), why.len(), "one reason per key");
    let (reasons, statuses) = why::columns(why);
    let mut tx = pool.begin().await?;
    let changed = sqlx::query_scalar(
        r#"
        update efeito_aplicado e
        set estado = 'incerto', atualizado_em = now(), incerto_desde = now(),
            motivo_incerto = u.m, status_http_incerto = u.s
        from unnest($1::text[], $3::text[], $4::int4[]) as u(k, m, s)
        where e.chave = u.k and e.estado = 'reservado' and e.reserva_id = $2
        returning e.chave
        "#,
    )
    .bind(keys)
    .bind(claim.token)
    .bind(reasons)
    .bind(statuses)
    .fetch_all(&mut *tx)
    .await?;
    attempts::record(&mut tx, claim, tries).await?;
    tx.commit().await?;
    Ok(changed)
}

/// Runs one settlement statement (keys `$1`, the claim's token `$2`, returning the keys changed)
/// and appends the attempts that explain it, in one transaction.
async fn settle_held(
    pool: &PgPool,
    claim: &Claim,
    keys: &[String],
    tries: &[Attempt],
    statement: &'static str,
) -> Result<Vec<String>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let changed = sqlx::query_scalar(statement)
        .bind(keys)
        .bind(claim.token)
        .fetch_all(&mut *tx)
        .await?;
    attempts::record(&mut tx, claim, tries).await?;
    tx.commit().await?;
    Ok(changed)
}

/// Which of these keys the ledger already holds, in any state (a simulation's `ja-registrado`),
/// but a key queued for a resend: the real run would perform it.
pub async fn registered(pool: &PgPool, keys: &[String]) -> Result<HashSet<String>, sqlx::Error> {
    let rows: Vec<String> = sqlx::query_scalar(
        r#"
        select chave from efeito_aplicado
        where chave = any(array(select unnest($1::text[]))) and reenvio_pedido_em is null
        "#,
    )
    .bind(keys)
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().collect())
}

/// Of these keys, those `execucao_id` registered since `since` (an earlier attempt of its pass),
/// with their state.
pub async fn registered_by(
    pool: &PgPool,
    keys: &[String],
    execution_id: &str,
    since: chrono::DateTime<chrono::Utc>,
) -> Result<std::collections::HashMap<String, State>, sqlx::Error> {
    let rows: Vec<(String, State)> = sqlx::query_as(
        r#"
        select chave, estado from efeito_aplicado
        where chave = any(array(select unnest($1::text[])))
          and execucao_id = $2 and criado_em >= $3
        "#,
    )
    .bind(keys)
    .bind(execution_id)
    .bind(since)
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().collect())
}

/// What [`settle_abandoned`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settled {
    /// Reservations of idempotent types, released so this run performs them again.
    pub released: Vec<String>,
    /// Reservations of other types (non-idempotent or not declared), moved to `incerto`.
    pub uncertain: Vec<String>,
}

/// Settles the reservations an execution left `reservado` in an earlier process, or under an
/// earlier ownership epoch of a process that lost its lock. Called only by the owner, in a
/// transaction that confirms its epoch first (invariants `kill-and-rerun` and `one-owner`): every
/// earlier owner is then fenced, so none of its calls in flight can complete, release or add a
/// reservation after this settlement. An idempotent type's reservation is released (the run will
/// send it again and the provider deduplicates); any other becomes `incerto`
/// ([`Reason::CrashInFlight`]), because the call may have gone out.
pub async fn settle_abandoned(
    pool: &PgPool,
    owner: &Owner,
    execution_id: &str,
    idempotent_types: &[String],
    partition: Option<Partition>,
) -> Result<Settled, sqlx::Error> {
    // With partitions, only the keys of this partition's events: other partitions of the same
    // execution may be running right now in other processes.
    let (index, count) = partition.map_or((None, 1), |p| (Some(p.index as i32), p.count as i32));
    let mut tx = pool.begin().await?;
    owner.confirm(&mut tx).await?;
    let released: Vec<String> = sqlx::query_scalar(
        r#"
        delete from efeito_aplicado e
        where e.execucao_id = $1 and e.estado = 'reservado' and e.tipo_efeito = any($2)
          and ($3::int4 is null or exists (
                select 1 from evento_arquivado a
                where a.id = e.evento_id and particao_do_pedido(a.pedido_id, $4::int4) = $3))
        returning e.chave
        "#,
    )
    .bind(execution_id)
    .bind(idempotent_types)
    .bind(index)
    .bind(count)
    .fetch_all(&mut *tx)
    .await?;
    let uncertain: Vec<String> = sqlx::query_scalar(
        r#"
        update efeito_aplicado e
        set estado = 'incerto', atualizado_em = now(), incerto_desde = now(),
            motivo_incerto = $4, status_http_incerto = null
        where e.execucao_id = $1 and e.estado = 'reservado'
          and ($2::int4 is null or exists (
                select 1 from evento_arquivado a
                where a.id = e.evento_id and particao_do_pedido(a.pedido_id, $3::int4) = $2))
        returning e.chave
        "#,
    )
    .bind(execution_id)
    .bind(index)
    .bind(count)
    .bind(Reason::CrashInFlight)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(Settled {
        released,
        uncertain,
    })
}

/// How many effects wait for a human (`incerto`; served by the index on `incerto_desde`).
pub async fn review_queue_size(pool: &PgPool) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(
        "select count(*) from efeito_aplicado where incerto_desde is not null and estado = 'incerto'",
    )
        .fetch_one(pool)
        .await
}
