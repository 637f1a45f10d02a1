//! `reprocessamento_passagem`: every pass of an execution (a `--restart` starts a new one over
//! the same execution row), recorded by a trigger whenever the row starts or ends a pass, with
//! its figures summed from the tallies of that pass — so earlier passes stay reachable.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use super::{Mode, State};
use crate::shared::summary::Summary;

/// One pass of an execution, with its figures.
#[derive(Debug, Clone, PartialEq)]
pub struct PassRecord {
    pub pass: i32,
    pub mode: Mode,
    pub state: State,
    pub started_by: String,
    pub started_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    pub error: Option<String>,
    pub summary: Summary,
}

struct PassRow {
    passagem: i32,
    modo: Mode,
    estado: State,
    iniciada_por: String,
    iniciada_em: DateTime<Utc>,
    concluida_em: Option<DateTime<Utc>>,
    erro: Option<String>,
    contagem: serde_json::Value,
}

crate::tables::db::from_row!(PassRow {
    passagem,
    modo,
    estado,
    iniciada_por,
    iniciada_em,
    concluida_em,
    erro,
    contagem,
});

/// Every recorded pass of the execution with checkpoint key `key`, the newest first.
pub async fn passes(pool: &PgPool, key: &str) -> Result<Vec<PassRecord>, sqlx::Error> {
    let sql = format!(
        r#"
        select e.passagem, e.modo, e.estado, e.iniciada_por, e.iniciada_em, e.concluida_em,
               e.erro, {tallies} as contagem
        from reprocessamento_passagem e
        where e.execucao_id = $1
        order by e.passagem desc
        "#,
        tallies = crate::tables::tally::SUMMED_FOR_EXECUTION,
    );
    let rows: Vec<PassRow> = sqlx::query_as(&sql).bind(key).fetch_all(pool).await?;
    Ok(rows
        .into_iter()
        .map(|r| PassRecord {
            pass: r.passagem,
            mode: r.modo,
            state: r.estado,
            started_by: r.iniciada_por,
            started_at: r.iniciada_em,
            finished_at: r.concluida_em,
            error: r.erro,
            summary: crate::tables::tally::summary_of(&r.contagem),
        })
        .collect())
}
