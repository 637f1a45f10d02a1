//! Reading one ledger row: what the ledger holds for a key (for a caller that was refused a
//! reservation and must say why: done, in flight, or waiting for a human).

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::PgPool;

/// A ledger row as it stands.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub chave: String,
    pub estado: super::State,
    pub execucao_id: String,
    pub resultado: Option<Value>,
    pub atualizado_em: DateTime<Utc>,
}

crate::tables::db::from_row!(Entry {
    chave,
    estado,
    execucao_id,
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
