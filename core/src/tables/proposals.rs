//! Every statement on `job_proposto`: the corrections verify jobs propose, one gated replay job
//! per day found wrong, kept in the database (the daemon never writes the jobs directory). A
//! proposal's `definicao` is the YAML a job file would hold; the loader reads it as one.

use chrono::{DateTime, NaiveDate, Utc};
use sqlx::PgPool;

/// One proposal, as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proposal {
    /// The proposed job's name (`reconcile-<day>`, with a suffix when the day was proposed
    /// before and that proposal was applied).
    pub name: String,
    /// The verify job that proposed it.
    pub verify_job: String,
    pub day: NaiveDate,
    /// The job's YAML.
    pub definition: String,
    pub orders_wrong: i64,
    pub orders_missing: i64,
    pub effects_missing: i64,
    /// Expected minus current, in centavos.
    pub difference_cents: i64,
    pub proposed_at: DateTime<Utc>,
    /// The last verify that found the day still wrong.
    pub confirmed_at: DateTime<Utc>,
}

crate::tables::db::from_row!(Proposal {
    name = "nome",
    verify_job = "job_verificacao",
    day = "dia",
    definition = "definicao",
    orders_wrong = "pedidos_errados",
    orders_missing = "pedidos_sem_comissao",
    effects_missing = "efeitos_faltando",
    difference_cents = "diferenca_centavos",
    proposed_at = "proposto_em",
    confirmed_at = "confirmado_em"
});

const COLUMNS: &str = "nome, job_verificacao, dia, definicao, pedidos_errados, \
                       pedidos_sem_comissao, efeitos_faltando, diferenca_centavos, proposto_em, \
                       confirmado_em";

/// Records a new proposal; false when the name is taken (by another proposal).
pub async fn insert(pool: &PgPool, p: &Proposal) -> Result<bool, sqlx::Error> {
    let done = sqlx::query(
        r#"
        insert into job_proposto (nome, job_verificacao, dia, definicao, pedidos_errados,
                                  pedidos_sem_comissao, efeitos_faltando, diferenca_centavos)
        values ($1, $2, $3, $4, $5, $6, $7, $8)
        on conflict (nome) do nothing
        "#,
    )
    .bind(&p.name)
    .bind(&p.verify_job)
    .bind(p.day)
    .bind(&p.definition)
    .bind(p.orders_wrong)
    .bind(p.orders_missing)
    .bind(p.effects_missing)
    .bind(p.difference_cents)
    .execute(pool)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Records that a later verify found the proposal's day still wrong, with what it found.
pub async fn confirm(pool: &PgPool, p: &Proposal) -> Result<(), sqlx::Error> {
    sqlx::query(
        r#"
        update job_proposto
        set pedidos_errados = $2, pedidos_sem_comissao = $3, efeitos_faltando = $4,
            diferenca_centavos = $5, confirmado_em = now()
        where nome = $1
        "#,
    )
    .bind(&p.name)
    .bind(p.orders_wrong)
    .bind(p.orders_missing)
    .bind(p.effects_missing)
    .bind(p.difference_cents)
    .execute(pool)
    .await?;
    Ok(())
}

/// The proposal named `name`.
pub async fn named(pool: &PgPool, name: &str) -> Result<Option<Proposal>, sqlx::Error> {
    sqlx::query_as(&format!(
        "select {COLUMNS} from job_proposto where nome = $1"
    ))
    .bind(name)
    .fetch_optional(pool)
    .await
}

/// The newest proposal of `verify_job` for `day`.
pub async fn newest_for_day(
    pool: &PgPool,
    verify_job: &str,
    day: NaiveDate,
) -> Result<Option<Proposal>, sqlx::Error> {
    sqlx::query_as(&format!(
        "select {COLUMNS} from job_proposto where job_verificacao = $1 and dia = $2 \
         order by proposto_em desc, nome desc limit 1"
    ))
    .bind(verify_job)
    .bind(day)
    .fetch_optional(pool)
    .await
}

/// The names of proposals starting `prefix` (to pick a free one).
pub async fn names_like(pool: &PgPool, prefix: &str) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar("select nome from job_proposto where starts_with(nome, $1)")
        .bind(prefix)
        .fetch_all(pool)
        .await
}

/// The newest proposals, at most `limit`.
pub async fn newest(pool: &PgPool, limit: i64) -> Result<Vec<Proposal>, sqlx::Error> {
    sqlx::query_as(&format!(
        "select {COLUMNS} from job_proposto order by dia desc, proposto_em desc limit $1"
    ))
    .bind(limit)
    .fetch_all(pool)
    .await
}
