//! The manual-review queue: `incerto` effects, whose outcome only a human can establish, and the
//! two decisions on them (recorded in `efeito_revisao` by the `security definer` function
//! `resolver_incerto`, under the session's database role: the worker's role may not decide).

use std::time::Duration;

use super::Reason;
use crate::shared::words::db_words;
use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgPool;

/// One effect waiting for a human. JSON keys are English (`review list --json`); values keep the
/// database's words.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReviewItem {
    pub key: String,
    #[serde(rename = "effect_type")]
    pub tipo_efeito: String,
    #[serde(rename = "execution")]
    pub execucao_id: String,
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
}

crate::tables::db::from_row!(ReviewItem {
    key,
    tipo_efeito,
    execucao_id,
    motivo,
    status_http,
    desde,
    primeira_tentativa,
    ultima_tentativa,
    tentativas,
    ultimo_erro,
    idade_segundos,
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
    sqlx::query_as(
        r#"
        select e.chave as key, e.tipo_efeito, e.execucao_id,
               e.motivo_incerto as motivo, e.status_http_incerto as status_http,
               coalesce(e.incerto_desde, e.atualizado_em) as desde,
               t.primeira as primeira_tentativa, t.ultima as ultima_tentativa,
               coalesce(t.n, 0) as tentativas,
               (select t.classe_erro from efeito_tentativa t
                where t.chave = e.chave and t.classe_erro is not null
                order by t.iniciada_em desc, t.id desc limit 1) as ultimo_erro,
               extract(epoch from now() - least(t.primeira, e.criado_em))::bigint
                 as idade_segundos
        from efeito_aplicado e
        left join lateral (
            select min(iniciada_em) as primeira, max(concluida_em) as ultima, count(*) as n
            from efeito_tentativa t where t.chave = e.chave
        ) t on true
        where e.estado = 'incerto'
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
    .await
}

db_words! {
    /// A human's answer about an `incerto` effect (`efeito_revisao.decisao`).
    pub enum Resolution("review decision") {
        /// It went out: the row becomes `concluido`.
        Sent = "enviado",
        /// It did not: the row is removed, so the next run performs it.
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
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

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
    let (before, by): (Option<super::State>, String) =
        sqlx::query_as("select resolver_incerto($1, $2, $3), session_user::text")
            .bind(key)
            .bind(resolution)
            .bind(note)
            .fetch_one(pool)
            .await?;
    match before {
        Some(super::State::Uncertain) => Ok(by),
        Some(state) => Err(ReviewError::NotUncertain {
            key: key.to_string(),
            state,
        }),
        None => Err(ReviewError::NotFound(key.to_string())),
    }
}

/// Resolves one `incerto` effect as [`resolve`] does, recorded as the operator account of a
/// console session (`console:<email>`, returned) by the `security definer` function
/// `console_resolver_incerto`, which refuses with 42501 unless the session (`token_digest`, used
/// within `idle_timeout`) is live and its account is an operator's.
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

/// The decision `id`, if `who` recorded it: the key and the decision, as recorded.
pub async fn decision_of(
    pool: &PgPool,
    id: i64,
    who: &str,
) -> Result<Option<(String, Resolution)>, sqlx::Error> {
    sqlx::query_as("select chave, decisao from efeito_revisao where id = $1 and resolvido_por = $2")
        .bind(id)
        .bind(who)
        .fetch_optional(pool)
        .await
}

pub async fn resolve_in_console(
    pool: &PgPool,
    token_digest: &str,
    idle_timeout: Duration,
    key: &str,
    resolution: Resolution,
    note: Option<&str>,
) -> Result<(), ReviewError> {
    let before: Option<super::State> = sqlx::query_scalar(
        "select console_resolver_incerto($1, make_interval(secs => $2), $3, $4, $5)",
    )
    .bind(token_digest)
    .bind(idle_timeout.as_secs_f64())
    .bind(key)
    .bind(resolution)
    .bind(note)
    .fetch_one(pool)
    .await?;
    match before {
        Some(super::State::Uncertain) => Ok(()),
        Some(state) => Err(ReviewError::NotUncertain {
            key: key.to_string(),
            state,
        }),
        None => Err(ReviewError::NotFound(key.to_string())),
    }
}
