//! A simulation's diff (`reprocessamento_diff`): its writes, and the reads of it and of a real
//! run's corrections (`reprocessamento_correcao`) that reports, the console and the approval gate
//! make.

use sqlx::{PgConnection, PgPool};

use super::Change;
use crate::shared::summary::Summary;

/// Writes a simulation's diff rows; a row already computed from a newer version is kept, and a
/// row that would not change is not written. Returns what the writes added to the simulation's
/// figures (orders in the diff, orders that would change, their totals before and after), to be
/// tallied in the same transaction: a batch written again adds nothing.
pub async fn upsert_diff(
    conn: &mut PgConnection,
    execution_id: &str,
    changes: &[Change],
) -> Result<Summary, sqlx::Error> {
    if changes.is_empty() {
        return Ok(Summary::default());
    }
    let ids: Vec<&str> = changes.iter().map(|c| c.pedido_id.as_str()).collect();
    let antes: Vec<Option<i64>> = changes.iter().map(|c| c.antes).collect();
    let depois: Vec<i64> = changes.iter().map(|c| c.depois).collect();
    let versoes: Vec<i64> = changes.iter().map(|c| c.versao).collect();
    let (added, changed, before, after): (i64, i64, i64, i64) = sqlx::query_as(
        r#"
        with gravadas as (
            insert into reprocessamento_diff (execucao_id, pedido_id, antes, depois, versao_evento)
            select $1, pedido_id, antes, depois, versao
            from unnest($2::text[], $3::bigint[], $4::bigint[], $5::bigint[])
              as u(pedido_id, antes, depois, versao)
            on conflict (execucao_id, pedido_id) do update
            set antes = excluded.antes, depois = excluded.depois,
                versao_evento = excluded.versao_evento,
                antes_anterior = reprocessamento_diff.antes,
                depois_anterior = reprocessamento_diff.depois
            where (reprocessamento_diff.versao_evento is null
                   or reprocessamento_diff.versao_evento <= excluded.versao_evento)
              and (reprocessamento_diff.antes, reprocessamento_diff.depois,
                   reprocessamento_diff.versao_evento)
                  is distinct from (excluded.antes, excluded.depois, excluded.versao_evento)
            returning antes, depois, antes_anterior, depois_anterior
        ),
        -- Each written row replaces its previous state in the figures: + new, - old (the old
        -- state is what the upsert itself replaced; `depois_anterior` is null for a new row).
        lados as (
            select 1 as sinal, antes, depois, (depois_anterior is null) as novo from gravadas
            union all
            select -1, antes_anterior, depois_anterior, false
            from gravadas where depois_anterior is not null
        )
        select coalesce(sum(case when novo then 1 else 0 end), 0)::bigint,
               coalesce(sum(case when antes is distinct from depois then sinal else 0 end), 0)
                 ::bigint,
               least(greatest(coalesce(sum(case when antes is distinct from depois
                                 then sinal * coalesce(antes, 0)::numeric end), 0),
                      -9223372036854775808), 9223372036854775807)::bigint,
               least(greatest(coalesce(sum(case when antes is distinct from depois
                                 then sinal * depois::numeric end), 0),
                      -9223372036854775808), 9223372036854775807)::bigint
        from lados
        "#,
    )
    .bind(execution_id)
    .bind(ids)
    .bind(antes)
    .bind(depois)
    .bind(versoes)
    .fetch_one(conn)
    .await?;
    let count = |n: i64| u64::try_from(n).unwrap_or(0);
    Ok(Summary {
        orders_in_diff: count(added),
        orders_changed: count(changed),
        orders_changed_back: count(-changed),
        total_before_centavos: before,
        total_after_centavos: after,
        ..Summary::default()
    })
}

/// Forgets a simulation's diff, for a new pass (`--restart`), while `owner` owns the simulation.
pub async fn clear_diff(
    pool: &PgPool,
    owner: &crate::tables::execution::Owner,
    execution_id: &str,
) -> Result<u64, sqlx::Error> {
    let done = sqlx::query(
        "delete from reprocessamento_diff where execucao_id = $1 and (select confirmar_dono($2, $3))",
    )
    .bind(execution_id)
    .bind(&owner.key)
    .bind(owner.epoch)
    .execute(pool)
    .await?;
    Ok(done.rows_affected())
}

/// One order of a report: its commission before and after, in cents.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DiffRow {
    pub pedido_id: String,
    /// `None`: the order had no commission row.
    pub antes: Option<i64>,
    pub depois: i64,
}

impl DiffRow {
    /// Sums over a diff, in cents: a missing `antes` counts as 0, a row whose value stays is not
    /// changed.
    pub fn totals(rows: &[DiffRow]) -> crate::shared::summary::Totals {
        let mut totals = crate::shared::summary::Totals::default();
        for row in rows {
            totals.orders += 1;
            if row.antes != Some(row.depois) {
                totals.changed += 1;
            }
            totals.before_centavos = totals
                .before_centavos
                .saturating_add(row.antes.unwrap_or(0));
            totals.after_centavos = totals.after_centavos.saturating_add(row.depois);
        }
        totals
    }

    /// `depois - antes`, a missing row counting as 0.
    pub fn diferenca(&self) -> i64 {
        self.depois - self.antes.unwrap_or(0)
    }
}

/// A simulation's diff, by `pedido_id`.
pub async fn diff_rows(pool: &PgPool, execution_id: &str) -> Result<Vec<DiffRow>, sqlx::Error> {
    let rows: Vec<(String, Option<i64>, i64)> = sqlx::query_as(
        r#"
        select pedido_id, antes, depois from reprocessamento_diff
        where execucao_id = $1 order by pedido_id
        "#,
    )
    .bind(execution_id)
    .fetch_all(pool)
    .await?;
    Ok(into_diff_rows(rows))
}

/// What a real run changed over all its passes, per order (the value before it first changed
/// the order, the value it left), in `pedido_id` order: the rows its figures sum.
pub async fn correction_rows(
    pool: &PgPool,
    execution_id: &str,
) -> Result<Vec<DiffRow>, sqlx::Error> {
    let rows: Vec<(String, Option<i64>, i64)> = sqlx::query_as(
        r#"
        select pedido_id, antes, depois from reprocessamento_correcao
        where execucao_id = $1 order by pedido_id
        "#,
    )
    .bind(execution_id)
    .fetch_all(pool)
    .await?;
    Ok(into_diff_rows(rows))
}

/// An order whose applied value differs from the approved one; `None` = not in that side.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Divergence {
    pub pedido_id: String,
    pub approved: Option<i64>,
    pub applied: Option<i64>,
}

/// The orders where a real run, over all its passes, did not apply what the simulation's diff
/// approved (the diff as the latest approval kept it): an approved change not applied (or applied to another value), or a change nobody approved.
/// Returns the first `limit` by `pedido_id` and how many in all.
pub async fn approved_vs_applied(
    pool: &PgPool,
    execution_id: &str,
    limit: usize,
) -> Result<(Vec<Divergence>, u64), sqlx::Error> {
    let rows: Vec<(String, Option<i64>, Option<i64>, i64)> = sqlx::query_as(
        r#"
        with aprovacao as (
            select max(id) as id from reprocessamento_aprovacao where execucao_id = $1
        ),
        -- The diff the latest approval kept (a later simulation does not change it); with no
        -- approval, the simulation's diff as it stands.
        aprovado as (
            select pedido_id, depois from reprocessamento_diff_aprovado
            where aprovacao_id = (select id from aprovacao) and antes is distinct from depois
            union all
            select pedido_id, depois from reprocessamento_diff
            where execucao_id = $1 and antes is distinct from depois
              and (select id from aprovacao) is null
        ),
        aplicado as (
            select pedido_id, depois from reprocessamento_correcao
            where execucao_id = $1
        ),
        diferentes as (
            select coalesce(a.pedido_id, c.pedido_id) as pedido_id, a.depois as aprovado,
                   c.depois as aplicado
            from aprovado a full join aplicado c using (pedido_id)
            where a.depois is distinct from c.depois
        )
        select pedido_id, aprovado, aplicado, count(*) over ()
        from diferentes order by pedido_id limit $2
        "#,
    )
    .bind(execution_id)
    .bind(i64::try_from(limit).unwrap_or(i64::MAX))
    .fetch_all(pool)
    .await?;
    let total = rows.first().map_or(0, |r| r.3.max(0) as u64);
    let listed = rows
        .into_iter()
        .map(|(pedido_id, approved, applied, _)| Divergence {
            pedido_id,
            approved,
            applied,
        })
        .collect();
    Ok((listed, total))
}

fn into_diff_rows(rows: Vec<(String, Option<i64>, i64)>) -> Vec<DiffRow> {
    rows.into_iter()
        .map(|(pedido_id, antes, depois)| DiffRow {
            pedido_id,
            antes,
            depois,
        })
        .collect()
}

/// How many orders of a simulation's diff no longer have, in `comissao`, the value the diff has
/// as `antes` (written since by someone else: the live consumer, another run, a human).
pub async fn diff_drift(pool: &PgPool, execution_id: &str) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(
        r#"
        select count(*) from reprocessamento_diff d
        left join comissao c on c.pedido_id = d.pedido_id
        where d.execucao_id = $1 and c.valor_centavos is distinct from d.antes
        "#,
    )
    .bind(execution_id)
    .fetch_one(pool)
    .await
}

/// A fingerprint of the `comissao` rows (value and version; absent rows too) of the orders in a
/// simulation's diff: any write to one of them changes it.
pub async fn diff_fingerprint(pool: &PgPool, execution_id: &str) -> Result<String, sqlx::Error> {
    sqlx::query_scalar(
        r#"
        select count(*)::text || ':' || coalesce(bit_xor(hashtextextended(
                 d.pedido_id || '|' || coalesce(c.valor_centavos::text, '-') || '|'
                 || coalesce(c.versao_evento::text, '-'), 0)), 0)::text
        from reprocessamento_diff d
        left join comissao c on c.pedido_id = d.pedido_id
        where d.execucao_id = $1
        "#,
    )
    .bind(execution_id)
    .fetch_one(pool)
    .await
}
