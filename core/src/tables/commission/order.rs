//! One order's commission and the corrections real runs made to it, as `explain` tells them.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgPool;

/// The order's `comissao` row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Stored {
    pub valor_centavos: i64,
    pub versao_evento: i64,
    pub atualizado_em: DateTime<Utc>,
}

crate::tables::db::from_row!(Stored {
    valor_centavos,
    versao_evento,
    atualizado_em
});

/// The `comissao` row of `pedido_id`, if any.
pub async fn row_of(pool: &PgPool, pedido_id: &str) -> Result<Option<Stored>, sqlx::Error> {
    sqlx::query_as(
        r#"
        select valor_centavos, versao_evento, atualizado_em from comissao where pedido_id = $1
        "#,
    )
    .bind(pedido_id)
    .fetch_optional(pool)
    .await
}

/// A correction a real run's pass wrote to the order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Correction {
    #[serde(rename = "execution")]
    pub execution_id: String,
    #[serde(rename = "pass")]
    pub passagem: i32,
    /// The value it replaced (none: the order had no row).
    #[serde(rename = "before_cents")]
    pub antes: Option<i64>,
    #[serde(rename = "after_cents")]
    pub depois: i64,
    pub versao_evento: i64,
    #[serde(rename = "recorded_at")]
    pub registrado_em: DateTime<Utc>,
}

crate::tables::db::from_row!(Correction {
    execution_id = "execucao_id",
    passagem,
    antes,
    depois,
    versao_evento,
    registrado_em
});

/// Every correction of `pedido_id`, oldest first.
pub async fn corrections_of(
    pool: &PgPool,
    pedido_id: &str,
) -> Result<Vec<Correction>, sqlx::Error> {
    sqlx::query_as(
        r#"
        select execucao_id, passagem, antes, depois, versao_evento, registrado_em
        from reprocessamento_correcao where pedido_id = $1
        order by registrado_em, execucao_id, passagem
        "#,
    )
    .bind(pedido_id)
    .fetch_all(pool)
    .await
}
