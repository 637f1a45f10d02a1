//! The manual-review queue: `incerto` effects, whose outcome only a human can establish, and the
//! two decisions on them (recorded in `efeito_revisao` by the `security definer` function
//! `resolver_incerto`, under the session's database role: the worker's role may not decide).

use std::time::Duration;

use std::collections::HashMap;

use super::Reason;
use crate::domain;
use crate::shared::words::db_words;
use crate::tables::archive;
use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgPool;

/// One effect waiting for a human. JSON keys are English (`review list --json`); values keep the
/// database's words.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReviewItem {
    pub key: String,
    #[serde(rename = "event_id")]
    pub event_id: String,
    #[serde(rename = "effect_type")]
    pub effect_type: String,
    #[serde(rename = "execution")]
    pub execution_id: String,
    /// Why its outcome is unknown (none for a row another program made `incerto`).
    #[serde(rename = "reason")]
    pub motivo: Option<Reason>,
    /// The provider's answer, when the reason is an HTTP status.
    #[serde(rename = "http_status")]
    pub status_http: Option<i32>,
    /// When it became `incerto`.
    #[serde(rename = "uncertain_since")]
    pub desde: DateTime<Utc>,
    /// When its first attempt started and its last one ended (none: no call was recorded).
    #[serde(rename = "first_attempt_at")]
    pub primeira_tentativa: Option<DateTime<Utc>>,
    #[serde(rename = "last_attempt_at")]
    pub ultima_tentativa: Option<DateTime<Utc>>,
    #[serde(rename = "attempts")]
    pub tentativas: i64,
    #[serde(rename = "last_error")]
    pub ultimo_erro: Option<String>,
    /// Its real age: since its first attempt, or since the key was first reserved if earlier.
    #[serde(rename = "age_seconds")]
    pub idade_segundos: i64,
    /// `incerto` (waits for a human) or `reenvio-pendente` (a human said it did not go out: the
    /// next sweep, or a replay or the live consumer covering the event, sends it).
    pub status: String,
    /// The order of its event (none: the event is not in the archive).
    #[serde(rename = "order_id")]
    pub pedido_id: Option<String>,
    /// The commission its message carries (`valorCentavos`), by the domain's rule; none when the
    /// event is gone or its payload is rejected.
    #[serde(rename = "amount_cents")]
    pub valor_centavos: Option<i64>,
}

crate::tables::db::from_row!(ReviewItem {
    key,
    event_id = "evento_id",
    effect_type = "tipo_efeito",
    execution_id = "execucao_id",
    motivo,
    status_http,
    desde,
    primeira_tentativa,
    ultima_tentativa,
    tentativas,
    ultimo_erro,
    idade_segundos,
    status,
    pedido_id,
    valor_centavos,
});

/// Which `incerto` effects to list; the default lists them all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReviewFilter {
    pub effect_type: Option<String>,
    pub execution: Option<String>,
    /// Only effects whose real age exceeds this.
    pub older_than: Option<Duration>,
}

/// The whole queue, oldest first.
pub async fn review_list(pool: &PgPool) -> Result<Vec<ReviewItem>, sqlx::Error> {
    review_list_filtered(pool, &ReviewFilter::default()).await
}

/// The queue, oldest first (by real age), with reason, attempts and the last error from the
/// attempt history.
pub async fn review_list_filtered(
    pool: &PgPool,
    filter: &ReviewFilter,
) -> Result<Vec<ReviewItem>, sqlx::Error> {
    let items: Vec<ReviewItem> = sqlx::query_as(
        r#"
        select e.chave as key, e.evento_id, e.tipo_efeito, e.execucao_id,
               e.motivo_incerto as motivo, e.status_http_incerto as status_http,
               coalesce(e.incerto_desde, e.atualizado_em) as desde,
               t.primeira as primeira_tentativa, t.ultima as ultima_tentativa,
               coalesce(t.n, 0) as tentativas,
               (select t.classe_erro from efeito_tentativa t
                where t.chave = e.chave and t.classe_erro is not null
                order by t.iniciada_em desc, t.id desc limit 1) as ultimo_erro,
               extract(epoch from now() - least(t.primeira, e.criado_em))::bigint
                 as idade_segundos,
               case when e.reenvio_pedido_em is null then 'incerto' else 'reenvio-pendente' end
                 as status,
               a.pedido_id, null::int8 as valor_centavos
        from efeito_aplicado e
        left join evento_arquivado a on a.id = e.evento_id
        left join lateral (
            select min(iniciada_em) as primeira, max(concluida_em) as ultima, count(*) as n
            from efeito_tentativa t where t.chave = e.chave
        ) t on true
        where e.incerto_desde is not null and e.estado = 'incerto'
          and ($1::text is null or e.tipo_efeito = $1)
          and ($2::text is null or e.execucao_id = $2)
          and ($3::float8 is null
               or least(t.primeira, e.criado_em) < now() - make_interval(secs => $3))
        order by least(t.primeira, e.criado_em), e.chave
        "#,
    )
    .bind(filter.effect_type.as_deref())
    .bind(filter.execution.as_deref())
    .bind(filter.older_than.map(|d| d.as_secs_f64()))
    .fetch_all(pool)
    .await?;
    with_amounts(pool, items).await
}

/// Fills each item's amount: the commission its event implies, by the domain's rule (the
/// applier's), from the archived event.
async fn with_amounts(
    pool: &PgPool,
    mut items: Vec<ReviewItem>,
) -> Result<Vec<ReviewItem>, sqlx::Error> {
    let ids: Vec<String> = items.iter().map(|i| i.event_id.clone()).collect();
    let events: HashMap<String, domain::Event> = archive::by_ids(pool, &ids)
        .await?
        .into_iter()
        .map(|e| (e.id.clone(), e))
        .collect();
    for (item, id) in items.iter_mut().zip(&ids) {
        item.valor_centavos = events
            .get(id)
            .and_then(|e| domain::handle(e).ok().flatten())
            .map(|d| d.commission.valor_centavos);
    }
    Ok(items)
}

db_words! {
    /// A human's answer about an `incerto` effect (`efeito_revisao.decisao`).
    pub enum Resolution("review decision") {
        /// It went out: the row becomes `concluido`.
        Sent = "enviado",
        /// It did not: the key is queued, and the next sweep (or a replay or the live consumer
        /// covering the event, whichever reserves it first) performs it.
        NotSent = "nao-enviado",
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    #[error("no effect with key {0} in the ledger")]
    NotFound(String),
    #[error(
        "effect {key} is {state}, not incerto: only effects waiting for review can be resolved"
    )]
    NotUncertain { key: String, state: super::State },
    #[error("effect {0} is already queued for a resend: the next sweep sends it")]
    AlreadyQueued(String),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

/// What `resolver_incerto_como` answered: the row's state before the call (`reenvio-pendente`
/// for a key already queued), none when there is no such key.
fn decided(key: &str, before: Option<String>) -> Result<(), ReviewError> {
    let Some(before) = before else {
        return Err(ReviewError::NotFound(key.to_string()));
    };
    if before == QUEUED {
        return Err(ReviewError::AlreadyQueued(key.to_string()));
    }
    match before.parse::<super::State>() {
        Ok(super::State::Uncertain) => Ok(()),
        Ok(state) => Err(ReviewError::NotUncertain {
            key: key.to_string(),
            state,
        }),
        Err(_) => Err(ReviewError::NotFound(key.to_string())),
    }
}

/// The status of a queued key (`review list --json`'s `status`).
pub const QUEUED: &str = "reenvio-pendente";

/// Resolves one `incerto` effect, recording the decision with the session's database role (the
/// authenticated identity, returned) and `note`, in one transaction inside the database
/// (`resolver_incerto`). The change is conditioned on the row still being `incerto`, so two
/// people resolving at once cannot both act. A role without the reviewer's grant gets a database
/// error of code 42501 (see `db::is_permission_denied`).
pub async fn resolve(
    pool: &PgPool,
    key: &str,
    resolution: Resolution,
    note: Option<&str>,
) -> Result<String, ReviewError> {
    let (before, by): (Option<String>, String) =
        sqlx::query_as("select resolver_incerto($1, $2, $3), session_user::text")
            .bind(key)
            .bind(resolution)
            .bind(note)
            .fetch_one(pool)
            .await?;
    decided(key, before).map(|()| by)
}

/// The last decision `who` recorded on `key` (its `efeito_revisao.id`), if any: what the console
/// names in the address it returns to, so the page's banner is read back from the record.
pub async fn last_decision_on(
    pool: &PgPool,
    key: &str,
    who: &str,
) -> Result<Option<i64>, sqlx::Error> {
    sqlx::query_scalar("select max(id) from efeito_revisao where chave = $1 and resolvido_por = $2")
        .bind(key)
        .bind(who)
        .fetch_one(pool)
        .await
}

/// The decision `id`, if `who` recorded it, with the others of the same decision (one decision
/// for several keys is one transaction, so its rows share `resolvido_em`): each key and what was
/// decided, as recorded.
pub async fn decision_of(
    pool: &PgPool,
    id: i64,
    who: &str,
) -> Result<Vec<(String, Resolution)>, sqlx::Error> {
    sqlx::query_as(
        r#"
        select r.chave, r.decisao
        from efeito_revisao d
        join efeito_revisao r on r.resolvido_por = d.resolvido_por and r.resolvido_em = d.resolvido_em
        where d.id = $1 and d.resolvido_por = $2
        order by r.id
        "#,
    )
    .bind(id)
    .bind(who)
    .fetch_all(pool)
    .await
}

/// A decision recorded on a key (`efeito_revisao`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PastDecision {
    pub key: String,
    pub decision: Resolution,
    pub by: String,
    pub at: DateTime<Utc>,
    pub note: Option<String>,
}

/// Every decision recorded on `keys`, oldest first: a key said "not sent" once may be back in
/// the queue because its resend failed, and whoever decides again must see that.
pub async fn decisions_on(
    pool: &PgPool,
    keys: &[String],
) -> Result<Vec<PastDecision>, sqlx::Error> {
    sqlx::query_as(
        r#"
        select chave as key, decisao as decision, resolvido_por as by, resolvido_em as at, nota as note
        from efeito_revisao
        where chave = any($1) order by id
        "#,
    )
    .bind(keys)
    .fetch_all(pool)
    .await
}

crate::tables::db::from_row!(PastDecision {
    key,
    decision,
    by,
    at,
    note,
});

/// Resolves `incerto` effects as [`resolve`] does, one decision for all of `keys`, recorded as
/// the operator account of a console session (`console:<email>`) by the `security definer`
/// function `console_resolver_incerto`, which refuses with 42501 unless the session
/// (`token_digest`, used within `idle_timeout`) is live and its account is an operator's. All or
/// nothing: one transaction, undone at the first key that cannot be resolved.
pub async fn resolve_in_console(
    pool: &PgPool,
    token_digest: &str,
    idle_timeout: Duration,
    keys: &[String],
    resolution: Resolution,
    note: Option<&str>,
) -> Result<(), ReviewError> {
    let mut tx = pool.begin().await?;
    for key in keys {
        let before: Option<String> = sqlx::query_scalar(
            "select console_resolver_incerto($1, make_interval(secs => $2), $3, $4, $5)",
        )
        .bind(token_digest)
        .bind(idle_timeout.as_secs_f64())
        .bind(key)
        .bind(resolution)
        .bind(note)
        .fetch_one(&mut *tx)
        .await?;
        decided(key, before)?;
    }
    tx.commit().await?;
    Ok(())
}
