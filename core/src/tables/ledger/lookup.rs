//! Reading one ledger row: what the ledger holds for a key (for a caller that was refused a
//! reservation and must say why: done, in flight, or waiting for a human).

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::PgPool;

/// A ledger row as it stands.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub key: String,
    pub estado: super::State,
    pub execution_id: String,
    pub resultado: Option<Value>,
    pub atualizado_em: DateTime<Utc>,
}

crate::tables::db::from_row!(Entry {
    key = "chave",
    estado,
    execution_id = "execucao_id",
    resultado,
    atualizado_em
});

/// The row of `key`, if the ledger holds it.
pub async fn entry(pool: &PgPool, key: &str) -> Result<Option<Entry>, sqlx::Error> {
    sqlx::query_as(
        r#"
        select chave, estado, execucao_id, resultado, atualizado_em
        from efeito_aplicado where chave = $1
        "#,
    )
    .bind(key)
    .fetch_optional(pool)
    .await
}

/// One effect of an order, as `explain` tells it: its row, the attempts made and why it is
/// `incerto` (when it is).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct OrderEffect {
    pub key: String,
    #[serde(skip)]
    pub event_id: String,
    #[serde(rename = "effect_type")]
    pub effect_type: String,
    #[serde(rename = "state")]
    pub estado: super::State,
    /// `incerto`, `reenvio-pendente` (a human queued it) or the state itself.
    pub status: String,
    #[serde(rename = "execution")]
    pub execution_id: String,
    #[serde(rename = "attempts")]
    pub tentativas: i64,
    #[serde(rename = "reason")]
    pub motivo: Option<super::Reason>,
    #[serde(rename = "http_status")]
    pub status_http: Option<i32>,
    #[serde(rename = "created_at")]
    pub criado_em: DateTime<Utc>,
    #[serde(rename = "updated_at")]
    pub atualizado_em: DateTime<Utc>,
}

crate::tables::db::from_row!(OrderEffect {
    key,
    event_id = "evento_id",
    effect_type = "tipo_efeito",
    estado,
    status,
    execution_id = "execucao_id",
    tentativas,
    motivo,
    status_http,
    criado_em,
    atualizado_em,
});

/// The ledger rows of these keys, with their attempt counts, by key (one probe of the primary
/// key each).
pub async fn of_keys(pool: &PgPool, keys: &[String]) -> Result<Vec<OrderEffect>, sqlx::Error> {
    sqlx::query_as(
        r#"
        select e.chave as key, e.evento_id, e.tipo_efeito, e.estado,
               case when e.reenvio_pedido_em is not null then 'reenvio-pendente'
                    else e.estado end as status,
               e.execucao_id,
               (select count(*) from efeito_tentativa_historico t where t.chave = e.chave) as tentativas,
               e.motivo_incerto as motivo, e.status_http_incerto as status_http,
               e.criado_em, e.atualizado_em
        from efeito_aplicado e
        where e.chave = any($1)
        order by e.chave
        "#,
    )
    .bind(keys)
    .fetch_all(pool)
    .await
}

/// How many keys an execution holds in each state (`reservado`, `concluido`, `incerto`).
pub async fn states_of_execution(
    pool: &PgPool,
    execution_id: &str,
) -> Result<Vec<(String, i64)>, sqlx::Error> {
    sqlx::query_as(
        r#"
        select estado, count(*)::bigint from efeito_aplicado
        where execucao_id = $1 group by estado order by estado
        "#,
    )
    .bind(execution_id)
    .fetch_all(pool)
    .await
}
