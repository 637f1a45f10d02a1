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

/// Publishes `pace` (its `at` is the database's `now()`), and keeps it as a sample of the run's
/// pace over time.
pub async fn publish(pool: &PgPool, pace: &Pace) -> Result<(), sqlx::Error> {
    sqlx::query(
        r#"
        with sample as (
          insert into reprocessamento_ritmo
            (execucao_id, eventos_feitos, chamadas, eventos_por_s, efeitos_por_s)
          values ($1, $2, $4, $5, $6)
          on conflict do nothing
        )
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

/// One sample of a run's pace over time.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub at: DateTime<Utc>,
    pub events_per_s: f64,
    pub effects_per_s: f64,
}

/// The pace of execution `key` over time, oldest first: per interval of `bucket_secs` (the
/// publishing interval), the events settled in it per second and the effect calls per second,
/// its partitions' added up.
pub async fn samples(
    pool: &PgPool,
    key: &str,
    bucket_secs: f64,
) -> Result<Vec<Sample>, sqlx::Error> {
    let rows: Vec<(DateTime<Utc>, f64, f64)> = sqlx::query_as(
        r#"
        select bucket, (sum(settled) / $2)::float8, sum(efeitos_por_s)::float8
        from (
          select to_timestamp(floor(extract(epoch from em) / $2) * $2) as bucket,
                 -- the events settled since the previous sample of the same runner
                 greatest(eventos_feitos - lag(eventos_feitos, 1, eventos_feitos)
                            over (partition by execucao_id order by em), 0) as settled,
                 efeitos_por_s
          from reprocessamento_ritmo
          where execucao_id = $1 or (left(execucao_id, length($1) + 2) = $1 || ':p'
                                     and substr(execucao_id, length($1) + 3) ~ '^[0-9]+$')
        ) s
        group by bucket
        order by bucket
        "#,
    )
    .bind(key)
    .bind(bucket_secs)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(at, events_per_s, effects_per_s)| Sample {
            at,
            events_per_s,
            effects_per_s,
        })
        .collect())
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
