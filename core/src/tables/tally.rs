//! Every statement on `reprocessamento_contagem`: the tallies of an execution, one row per figure.
//!
//! A tally is added in the same transaction as the fact it counts — orders and totals with the
//! state write that records the correction (or the diff row), events and outcomes with the
//! checkpoint that passes the batch — so a figure can never run ahead of, or lag behind, what the
//! tables hold, whatever interrupts the run. Every surface reads these rows (see
//! `execution::load`).

use sqlx::PgConnection;

use crate::shared::summary::Summary;

/// Where a batch's figures are added up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    /// The checkpoint key that counts (a partition counts under its own key).
    pub key: String,
    /// The execution the figures add up into: a partition's parent, else the key itself.
    pub aggregate: String,
    /// The pass of the execution: a new pass starts from zero.
    pub pass: i32,
}

impl Scope {
    /// The scope of an execution that is not a partition.
    pub fn whole(key: &str, pass: i32) -> Self {
        Scope {
            key: key.to_string(),
            aggregate: key.to_string(),
            pass,
        }
    }
}

/// Adds `summary`'s figures to the scope's tallies (in the caller's transaction).
pub async fn add(
    conn: &mut PgConnection,
    scope: &Scope,
    summary: &Summary,
) -> Result<(), sqlx::Error> {
    add_rows(conn, scope, summary.to_tallies()).await
}

async fn add_rows(
    conn: &mut PgConnection,
    scope: &Scope,
    rows: Vec<(String, i64)>,
) -> Result<(), sqlx::Error> {
    if rows.is_empty() {
        return Ok(());
    }
    let (measures, values): (Vec<String>, Vec<i64>) = rows.into_iter().unzip();
    sqlx::query(
        r#"
        insert into reprocessamento_contagem (execucao_id, agregado, passagem, medida, valor)
        select $1, $2, $3, m, v from unnest($4::text[], $5::bigint[]) as u(m, v)
        order by m
        on conflict (execucao_id, passagem, medida) do update
        set valor = least(greatest(reprocessamento_contagem.valor::numeric + excluded.valor,
                                   -9223372036854775808), 9223372036854775807)::bigint
        "#,
    )
    .bind(&scope.key)
    .bind(&scope.aggregate)
    .bind(scope.pass)
    .bind(measures)
    .bind(values)
    .execute(conn)
    .await?;
    Ok(())
}

/// Adds the figures of a batch's state write to the scope's tallies as pending on the batch
/// (the batch's last `posicao`), in the caller's transaction: committed with the state they
/// count, so a crash cannot lose or double them, but shown only once the checkpoint passes the
/// batch ([`settle_pending`]), together with its events and effects — so no figure on any
/// surface runs ahead of another (orders changed beside "0 events read").
pub async fn add_pending(
    conn: &mut PgConnection,
    scope: &Scope,
    batch_last: i64,
    summary: &Summary,
) -> Result<(), sqlx::Error> {
    let rows: Vec<(String, i64)> = summary
        .to_tallies()
        .into_iter()
        .map(|(m, v)| (format!("{PENDING}{batch_last}:{m}"), v))
        .collect();
    add_rows(conn, scope, rows).await
}

/// Forgets every figure of the scope's pass (a pass that starts again counts from zero).
pub async fn clear(conn: &mut PgConnection, scope: &Scope) -> Result<(), sqlx::Error> {
    sqlx::query("delete from reprocessamento_contagem where execucao_id = $1 and passagem = $2")
        .bind(&scope.key)
        .bind(scope.pass)
        .execute(conn)
        .await?;
    Ok(())
}

/// Moves the pending figures of every batch up to `through` into the scope's tallies (in the
/// transaction that moves the checkpoint there).
pub async fn settle_pending(
    conn: &mut PgConnection,
    scope: &Scope,
    through: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        r#"
        with moved as (
          delete from reprocessamento_contagem
          where execucao_id = $1 and passagem = $2 and medida like 'pendente:%'
            and split_part(medida, ':', 2)::bigint <= $4
          returning regexp_replace(medida, '^pendente:-?[0-9]+:', '') as m, valor
        )
        insert into reprocessamento_contagem (execucao_id, agregado, passagem, medida, valor)
        select $1, $3, $2, m, least(greatest(sum(valor), -9223372036854775808),
                                    9223372036854775807)::bigint
        from moved group by m order by m
        on conflict (execucao_id, passagem, medida) do update
        set valor = least(greatest(reprocessamento_contagem.valor::numeric + excluded.valor,
                                   -9223372036854775808), 9223372036854775807)::bigint
        "#,
    )
    .bind(&scope.key)
    .bind(scope.pass)
    .bind(&scope.aggregate)
    .bind(through)
    .execute(conn)
    .await?;
    Ok(())
}

/// The prefix of a pending figure's measure: `pendente:<batch's last posicao>:<measure>`.
const PENDING: &str = "pendente:";

/// The part of a select that reads an execution's figures as one JSON object (measure → sum),
/// for the execution `e` (columns `execucao_id`, `passagem`): its own tallies and, for a
/// partitioned execution, those of its partitions.
pub const SUMMED_FOR_EXECUTION: &str = r#"
    (select coalesce(jsonb_object_agg(s.medida, s.total), '{}'::jsonb)
     from (select t.medida, sum(t.valor)::bigint as total
           from reprocessamento_contagem t
           where (t.execucao_id = e.execucao_id or t.agregado = e.execucao_id)
             and t.passagem = e.passagem and t.medida not like 'pendente:%'
           group by t.medida) s)
"#;

/// The part of a select that reads what every pass of the execution `e` (up to its current
/// one) added to its run's figures (`execucao:<measure>`), summed, as one JSON object.
pub const SUMMED_FOR_RUN: &str = r#"
    (select coalesce(jsonb_object_agg(s.medida, s.total), '{}'::jsonb)
     from (select t.medida, sum(t.valor)::bigint as total
           from reprocessamento_contagem t
           where (t.execucao_id = e.execucao_id or t.agregado = e.execucao_id)
             and t.passagem <= e.passagem and t.medida like 'execucao:%'
           group by t.medida) s)
"#;

/// A summary from the JSON object [`SUMMED_FOR_EXECUTION`] selects.
pub fn summary_of(object: &serde_json::Value) -> Summary {
    let rows = object
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.as_str(), v.as_i64()?)));
    Summary::from_tallies(rows)
}
