//! `relatorio_job`: from when on a report job reports finished executions.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

/// The instant from which `job` reports executions finished; set to `first` the first time the
/// job asks (so a new report job looks back a bounded time, not over the whole history).
pub async fn since(
    pool: &PgPool,
    job: &str,
    first: DateTime<Utc>,
) -> Result<DateTime<Utc>, sqlx::Error> {
    sqlx::query_scalar(
        r#"
        with created as (
          insert into relatorio_job (job, desde) values ($1, $2)
          on conflict (job) do nothing
          returning desde
        )
        select desde from created
        union all
        select desde from relatorio_job where job = $1
        limit 1
        "#,
    )
    .bind(job)
    .bind(first)
    .fetch_one(pool)
    .await
}
