//! Every statement on `comissao` (the derived state), `reprocessamento_diff` (a simulation's
//! before/after) and `reprocessamento_correcao` (what a real run changed). Batches are set-based:
//! one statement per step over arrays.

use std::collections::HashMap;

use sqlx::{PgConnection, PgPool};

use crate::domain::CommissionRow;

/// A row of `comissao` as it stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Current {
    pub valor_centavos: i64,
    pub versao_evento: i64,
}

/// A change of one order's commission, written or (in a simulation) that would be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub pedido_id: String,
    pub antes: Option<i64>,
    pub depois: i64,
    pub versao: i64,
}

/// Reduces a batch, in `posicao` order, to one row per order: the newest version, and among equal
/// versions the last one, which is what applying the events one by one with the version guard
/// leaves behind. Sorted by `pedido_id` so concurrent writers lock rows in the same order.
pub fn newest_per_order(rows: impl IntoIterator<Item = CommissionRow>) -> Vec<CommissionRow> {
    let mut newest: HashMap<String, CommissionRow> = HashMap::new();
    for row in rows {
        match newest.get(&row.pedido_id) {
            Some(kept) if kept.versao > row.versao => {}
            _ => {
                newest.insert(row.pedido_id.clone(), row);
            }
        }
    }
    let mut rows: Vec<CommissionRow> = newest.into_values().collect();
    rows.sort_by(|a, b| a.pedido_id.cmp(&b.pedido_id));
    rows
}

/// The current rows of these orders; with `lock`, locked until the transaction ends so the
/// before-values reported stay true while the batch is written.
pub async fn current(
    conn: &mut PgConnection,
    pedido_ids: &[String],
    lock: bool,
) -> Result<HashMap<String, Current>, sqlx::Error> {
    let sql = if lock {
        r#"
        select pedido_id, valor_centavos, versao_evento from comissao
        where pedido_id = any($1) order by pedido_id for update
        "#
    } else {
        r#"
        select pedido_id, valor_centavos, versao_evento from comissao
        where pedido_id = any($1)
        "#
    };
    let rows: Vec<(String, i64, i64)> =
        sqlx::query_as(sql).bind(pedido_ids).fetch_all(conn).await?;
    Ok(rows
        .into_iter()
        .map(|(id, valor_centavos, versao_evento)| {
            (
                id,
                Current {
                    valor_centavos,
                    versao_evento,
                },
            )
        })
        .collect())
}

/// The version-guarded upsert of the seed, for a whole batch: a row is overwritten only by an
/// event of the same or a newer version (invariant 4). A row that already holds exactly this
/// value and version is left untouched (a replay of a correct day changes nothing, not even
/// `atualizado_em`). Returns the orders written.
pub async fn upsert_guarded(
    conn: &mut PgConnection,
    rows: &[CommissionRow],
) -> Result<Vec<String>, sqlx::Error> {
    let (ids, valores, versoes) = columns(rows);
    sqlx::query_scalar(
        r#"
        insert into comissao (pedido_id, valor_centavos, versao_evento)
        select * from unnest($1::text[], $2::bigint[], $3::bigint[])
        on conflict (pedido_id) do update
        set valor_centavos = excluded.valor_centavos,
            versao_evento = excluded.versao_evento,
            atualizado_em = now()
        where comissao.versao_evento <= excluded.versao_evento
          and (comissao.valor_centavos, comissao.versao_evento)
              is distinct from (excluded.valor_centavos, excluded.versao_evento)
        returning pedido_id
        "#,
    )
    .bind(ids)
    .bind(valores)
    .bind(versoes)
    .fetch_all(conn)
    .await
}

/// Writes a simulation's diff rows; a row already computed from a newer version is kept.
pub async fn upsert_diff(
    conn: &mut PgConnection,
    execucao_id: &str,
    changes: &[Change],
) -> Result<u64, sqlx::Error> {
    insert_changes(
        conn,
        execucao_id,
        changes,
        r#"
        insert into reprocessamento_diff (execucao_id, pedido_id, antes, depois, versao_evento)
        select $1, * from unnest($2::text[], $3::bigint[], $4::bigint[], $5::bigint[])
        on conflict (execucao_id, pedido_id) do update
        set antes = excluded.antes, depois = excluded.depois, versao_evento = excluded.versao_evento
        where reprocessamento_diff.versao_evento is null
           or reprocessamento_diff.versao_evento <= excluded.versao_evento
        "#,
    )
    .await
}

/// Runs a set-based insert of changes: `$1` the execution, `$2..$5` the columns of `changes`
/// (pedido_id, antes, depois, versao), one statement for the whole batch.
async fn insert_changes(
    conn: &mut PgConnection,
    execucao_id: &str,
    changes: &[Change],
    statement: &'static str,
) -> Result<u64, sqlx::Error> {
    let ids: Vec<&str> = changes.iter().map(|c| c.pedido_id.as_str()).collect();
    let antes: Vec<Option<i64>> = changes.iter().map(|c| c.antes).collect();
    let depois: Vec<i64> = changes.iter().map(|c| c.depois).collect();
    let versoes: Vec<i64> = changes.iter().map(|c| c.versao).collect();
    let done = sqlx::query(statement)
        .bind(execucao_id)
        .bind(ids)
        .bind(antes)
        .bind(depois)
        .bind(versoes)
        .execute(conn)
        .await?;
    Ok(done.rows_affected())
}

/// Forgets a simulation's diff, for a new pass (`--restart`).
pub async fn clear_diff(pool: &PgPool, execucao_id: &str) -> Result<u64, sqlx::Error> {
    let done = sqlx::query("delete from reprocessamento_diff where execucao_id = $1")
        .bind(execucao_id)
        .execute(pool)
        .await?;
    Ok(done.rows_affected())
}

/// The corrections a real run's batch wrote: every order the guarded upsert wrote whose value
/// changed, with the value it replaced (`current`, read under lock in the same transaction).
pub fn corrections(
    rows: &[CommissionRow],
    current: &HashMap<String, Current>,
    written: &[String],
) -> Vec<Change> {
    let written: std::collections::HashSet<&str> = written.iter().map(String::as_str).collect();
    rows.iter()
        .filter(|r| written.contains(r.pedido_id.as_str()))
        .map(|r| Change {
            pedido_id: r.pedido_id.clone(),
            antes: current.get(&r.pedido_id).map(|c| c.valor_centavos),
            depois: r.valor_centavos,
            versao: r.versao,
        })
        .filter(|c| c.antes != Some(c.depois))
        .collect()
}

/// Records a real run's corrections (`reprocessamento_correcao`), in the transaction of the state
/// write. An order corrected again by a later batch keeps the value from before the execution
/// first changed it, so the row says what the whole execution did to it.
pub async fn record_corrections(
    conn: &mut PgConnection,
    execucao_id: &str,
    changes: &[Change],
) -> Result<u64, sqlx::Error> {
    if changes.is_empty() {
        return Ok(0);
    }
    insert_changes(
        conn,
        execucao_id,
        changes,
        r#"
        insert into reprocessamento_correcao (execucao_id, pedido_id, antes, depois, versao_evento)
        select $1, * from unnest($2::text[], $3::bigint[], $4::bigint[], $5::bigint[])
        on conflict (execucao_id, pedido_id) do update
        set depois = excluded.depois, versao_evento = excluded.versao_evento, atualizado_em = now()
        "#,
    )
    .await
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
    /// `depois - antes`, a missing row counting as 0.
    pub fn diferenca(&self) -> i64 {
        self.depois - self.antes.unwrap_or(0)
    }
}

/// A simulation's diff, by `pedido_id`.
pub async fn diff_rows(pool: &PgPool, execucao_id: &str) -> Result<Vec<DiffRow>, sqlx::Error> {
    let rows: Vec<(String, Option<i64>, i64)> = sqlx::query_as(
        r#"
        select pedido_id, antes, depois from reprocessamento_diff
        where execucao_id = $1 order by pedido_id
        "#,
    )
    .bind(execucao_id)
    .fetch_all(pool)
    .await?;
    Ok(into_diff_rows(rows))
}

/// The corrections a real run wrote, by `pedido_id`.
pub async fn correction_rows(
    pool: &PgPool,
    execucao_id: &str,
) -> Result<Vec<DiffRow>, sqlx::Error> {
    let rows: Vec<(String, Option<i64>, i64)> = sqlx::query_as(
        r#"
        select pedido_id, antes, depois from reprocessamento_correcao
        where execucao_id = $1 order by pedido_id
        "#,
    )
    .bind(execucao_id)
    .fetch_all(pool)
    .await?;
    Ok(into_diff_rows(rows))
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
pub async fn diff_drift(pool: &PgPool, execucao_id: &str) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(
        r#"
        select count(*) from reprocessamento_diff d
        left join comissao c on c.pedido_id = d.pedido_id
        where d.execucao_id = $1 and c.valor_centavos is distinct from d.antes
        "#,
    )
    .bind(execucao_id)
    .fetch_one(pool)
    .await
}

/// A fingerprint of the `comissao` rows (value and version; absent rows too) of the orders in a
/// simulation's diff: any write to one of them changes it.
pub async fn diff_fingerprint(pool: &PgPool, execucao_id: &str) -> Result<String, sqlx::Error> {
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
    .bind(execucao_id)
    .fetch_one(pool)
    .await
}

fn columns(rows: &[CommissionRow]) -> (Vec<&str>, Vec<i64>, Vec<i64>) {
    (
        rows.iter().map(|r| r.pedido_id.as_str()).collect(),
        rows.iter().map(|r| r.valor_centavos).collect(),
        rows.iter().map(|r| r.versao).collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, valor: i64, versao: i64) -> CommissionRow {
        CommissionRow {
            pedido_id: id.into(),
            valor_centavos: valor,
            versao,
        }
    }

    #[test]
    fn a_batch_keeps_the_newest_version_and_the_last_of_equal_versions() {
        let rows = newest_per_order([
            row("b", 1, 2),
            row("a", 5, 1),
            row("b", 9, 1),
            row("a", 7, 1),
        ]);
        assert_eq!(rows, vec![row("a", 7, 1), row("b", 1, 2)]);
    }
}
