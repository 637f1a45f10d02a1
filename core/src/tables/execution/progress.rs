//! Every statement on `reprocessamento_progresso`: the pace a runner measures, published every
//! few seconds so the console can show a running execution moving inside a batch (the tallies
//! move only when a batch settles). Informational: no figure anyone acts on is read from here.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

/// The pace of one execution or partition, as its runner last published it.
#[derive(Debug, Clone, PartialEq)]
pub struct Pace {
    pub key: String,
    /// Events of settled batches, and the window's.
    pub events_done: i64,
    pub events_total: i64,
    /// Effect calls this process made in the pass so far (they move inside a batch).
    pub calls: i64,
    pub events_per_s: f64,
    pub effects_per_s: f64,
    pub eta_s: Option<i64>,
    /// The effect type whose rate limit held back most of the last interval's calls.
    pub rate_limited_by: Option<String>,
    pub at: DateTime<Utc>,
}

/// Publishes `pace` (its `at` is the database's `now()`).
pub async fn publish(pool: &PgPool, pace: &Pace) -> Result<(), sqlx::Error> {
    sqlx::query(
        r#"
        insert into reprocessamento_progresso
          (execucao_id, eventos_feitos, eventos_total, chamadas, eventos_por_s, efeitos_por_s,
           eta_s, limitado_por, atualizado_em)
        values ($1, $2, $3, $4, $5, $6, $7, $8, now())
        on conflict (execucao_id) do update
        set eventos_feitos = excluded.eventos_feitos, eventos_total = excluded.eventos_total,
            chamadas = excluded.chamadas, eventos_por_s = excluded.eventos_por_s,
            efeitos_por_s = excluded.efeitos_por_s, eta_s = excluded.eta_s,
            limitado_por = excluded.limitado_por, atualizado_em = now()
        "#,
    )
    .bind(&pace.key)
    .bind(pace.events_done)
    .bind(pace.events_total)
    .bind(pace.calls)
    .bind(pace.events_per_s)
    .bind(pace.effects_per_s)
    .bind(pace.eta_s)
    .bind(&pace.rate_limited_by)
    .execute(pool)
    .await?;
    Ok(())
}

/// The paces published for execution `key` and its partitions (`<key>:p<n>`) within the last
/// `fresh_secs` seconds, by key.
pub async fn of_execution(
    pool: &PgPool,
    key: &str,
    fresh_secs: f64,
) -> Result<Vec<Pace>, sqlx::Error> {
    let rows: Vec<PaceRow> = sqlx::query_as(
        r#"
        select execucao_id, eventos_feitos, eventos_total, chamadas, eventos_por_s, efeitos_por_s,
               eta_s, limitado_por, atualizado_em
        from reprocessamento_progresso
        where (execucao_id = $1 or (left(execucao_id, length($1) + 2) = $1 || ':p'
                                    and substr(execucao_id, length($1) + 3) ~ '^[0-9]+$'))
          and atualizado_em > now() - make_interval(secs => $2)
        order by execucao_id
        "#,
    )
    .bind(key)
    .bind(fresh_secs)
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().map(into_pace).collect())
}

type PaceRow = (
    String,
    i64,
    i64,
    i64,
    f64,
    f64,
    Option<i64>,
    Option<String>,
    DateTime<Utc>,
);

fn into_pace(row: PaceRow) -> Pace {
    let (
        key,
        events_done,
        events_total,
        calls,
        events_per_s,
        effects_per_s,
        eta_s,
        rate_limited_by,
        at,
    ) = row;
    Pace {
        key,
        events_done,
        events_total,
        calls,
        events_per_s,
        effects_per_s,
        eta_s,
        rate_limited_by,
        at,
    }
}
