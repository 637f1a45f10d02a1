//! The manual-review queue: `incerto` effects, whose outcome only a human can establish, and the
//! two decisions on them (recorded in `efeito_revisao`).

use crate::words::db_words;
use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgPool;

/// One effect waiting for a human.
#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow)]
pub struct ReviewItem {
    pub key: String,
    pub tipo_efeito: String,
    pub execucao_id: String,
    pub desde: DateTime<Utc>,
    pub idade_segundos: i64,
    pub tentativas: i64,
    pub ultimo_erro: Option<String>,
}

/// The queue, oldest first, with attempts and the last error from the attempt history.
pub async fn review_list(pool: &PgPool) -> Result<Vec<ReviewItem>, sqlx::Error> {
    sqlx::query_as(
        r#"
        select e.chave as key, e.tipo_efeito, e.execucao_id, e.atualizado_em as desde,
               extract(epoch from now() - e.atualizado_em)::bigint as idade_segundos,
               (select count(*) from efeito_tentativa t where t.chave = e.chave) as tentativas,
               (select t.classe_erro from efeito_tentativa t
                where t.chave = e.chave and t.classe_erro is not null
                order by t.iniciada_em desc, t.id desc limit 1) as ultimo_erro
        from efeito_aplicado e
        where e.estado = 'incerto'
        order by e.atualizado_em, e.chave
        "#,
    )
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

/// Resolves one `incerto` effect and records who did it, in one transaction. The change is
/// conditioned on the row still being `incerto`, so two people resolving at once cannot both act.
pub async fn resolve(
    pool: &PgPool,
    key: &str,
    resolution: Resolution,
    by: &str,
) -> Result<(), ReviewError> {
    let mut tx = pool.begin().await?;
    let changed: Option<(String, String)> = match resolution {
        Resolution::Sent => {
            sqlx::query_as(
                r#"
                update efeito_aplicado set estado = 'concluido', atualizado_em = now()
                where chave = $1 and estado = 'incerto'
                returning tipo_efeito, execucao_id
                "#,
            )
            .bind(key)
            .fetch_optional(&mut *tx)
            .await?
        }
        Resolution::NotSent => {
            sqlx::query_as(
                r#"
                delete from efeito_aplicado where chave = $1 and estado = 'incerto'
                returning tipo_efeito, execucao_id
                "#,
            )
            .bind(key)
            .fetch_optional(&mut *tx)
            .await?
        }
    };
    let Some((tipo, execucao)) = changed else {
        let state: Option<super::State> =
            sqlx::query_scalar("select estado from efeito_aplicado where chave = $1")
                .bind(key)
                .fetch_optional(&mut *tx)
                .await?;
        return Err(match state {
            Some(state) => ReviewError::NotUncertain {
                key: key.to_string(),
                state,
            },
            None => ReviewError::NotFound(key.to_string()),
        });
    };
    sqlx::query(
        r#"
        insert into efeito_revisao (chave, tipo_efeito, execucao_id, decisao, resolvido_por)
        values ($1, $2, $3, $4, $5)
        "#,
    )
    .bind(key)
    .bind(tipo)
    .bind(execucao)
    .bind(resolution)
    .bind(by)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}
