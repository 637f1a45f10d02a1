//! Every statement on `job_rodada`: the last run of each job that leaves no execution behind (a
//! sweep, a report job), for `status`.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use replay_ledger_core::tables::execution::State;

/// A job's last run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRun {
    pub job: String,
    pub started_at: DateTime<Utc>,
    pub finished_at: DateTime<Utc>,
    /// `concluida` or `falhou`.
    pub state: State,
    /// Counts, or why it failed.
    pub detail: Option<String>,
}

/// Records a job's run, replacing its previous one.
pub async fn record(pool: &PgPool, run: &JobRun) -> Result<(), sqlx::Error> {
    sqlx::query(
        r#"
        insert into job_rodada (job, iniciada_em, concluida_em, resultado, detalhe)
        values ($1, $2, $3, $4, $5)
        on conflict (job) do update
        set iniciada_em = excluded.iniciada_em, concluida_em = excluded.concluida_em,
            resultado = excluded.resultado, detalhe = excluded.detalhe
        "#,
    )
    .bind(&run.job)
    .bind(run.started_at)
    .bind(run.finished_at)
    .bind(run.state)
    .bind(&run.detail)
    .execute(pool)
    .await?;
    Ok(())
}

/// A row of `job_rodada`, in its column order.
type Row = (String, DateTime<Utc>, DateTime<Utc>, State, Option<String>);

/// Every job's last run.
pub async fn all(pool: &PgPool) -> Result<Vec<JobRun>, sqlx::Error> {
    let rows: Vec<Row> = sqlx::query_as(
        "select job, iniciada_em, concluida_em, resultado, detalhe from job_rodada order by job",
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(job, started_at, finished_at, state, detail)| JobRun {
            job,
            started_at,
            finished_at,
            state,
            detail,
        })
        .collect())
}
