//! Every statement of a blue-green rebuild of `comissao` (migration `rebuild`): its state row
//! (`comissao_reconstrucao`), the new table `comissao_nova`, the queue of orders live writers
//! changed meanwhile (`comissao_reconstrucao_fila`, filled by triggers on `comissao`), the
//! comparison and its diff (`comissao_reconstrucao_diff`, in [`compare`]) and the swap by renaming
//! (in [`swap`]). One rebuild is open at a time (a partial unique index says so).

pub mod compare;
pub mod swap;

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgPool};

use crate::domain::CommissionRow;
use crate::shared::words::db_words;

db_words! {
    /// Where a rebuild stands.
    pub enum Stage("rebuild state") {
        /// `comissao_nova` is being built from the archive, or kept up with the live writers.
        Building = "construindo",
        /// Compared with `comissao`: waiting for an approval of what was shown, then the swap.
        Compared = "comparada",
        /// Swapped in; the previous table is kept as `comissao_anterior`.
        Swapped = "trocada",
        /// Swapped back (`--rollback`); the rebuilt table is kept as `comissao_nova`.
        RolledBack = "revertida",
        /// The kept table was dropped (`--drop-previous`).
        Closed = "encerrada",
        /// Given up before the swap (`--abandon`): `comissao_nova` dropped.
        Abandoned = "abandonada",
    }
}

impl Stage {
    /// Whether the rebuild is still under way (the `rebuild_in_progress` gauge).
    pub fn in_progress(self) -> bool {
        matches!(self, Stage::Building | Stage::Compared)
    }
}

/// A rebuild's row.
#[derive(Debug, Clone, PartialEq)]
pub struct Rebuild {
    pub id: i64,
    pub stage: Stage,
    pub rule: String,
    /// Every `pedido.pago` up to here is in `comissao_nova`: set to the target once the load is
    /// through (the load's own checkpoint is [`Rebuild::checkpoint_order`]).
    pub checkpoint: Option<i64>,
    /// The load's checkpoint: every order up to this `pedido_id` (in the database's order) is in
    /// `comissao_nova`.
    pub checkpoint_order: Option<String>,
    /// Whether the load was prepared: `comissao_nova`'s indexes recorded and dropped (they are
    /// built again once the load is through).
    pub load_prepared: bool,
    /// `comissao_nova`'s rows and checksum, kept as it is written ([`compare::RowSum`]).
    pub new_rows: i64,
    pub new_sum: Option<String>,
    /// The archive's highest `posicao` when the build started.
    pub target: Option<i64>,
    pub events_total: i64,
    pub events_read: i64,
    pub orders_rederived: i64,
    pub started_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub built_at: Option<DateTime<Utc>>,
    pub compared_at: Option<DateTime<Utc>>,
    pub count_current: Option<i64>,
    pub checksum_current: Option<String>,
    pub count_new: Option<i64>,
    pub checksum_new: Option<String>,
    pub orders_differing: Option<i64>,
    /// The fingerprint of the comparison shown: what an approval binds.
    pub fingerprint: Option<String>,
    pub approval_id: Option<i64>,
    pub swapped_at: Option<DateTime<Utc>>,
    pub rolled_back_at: Option<DateTime<Utc>>,
}

impl<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow> for Rebuild {
    fn from_row(row: &'r sqlx::postgres::PgRow) -> Result<Self, sqlx::Error> {
        use sqlx::Row;
        Ok(Rebuild {
            id: row.try_get("id")?,
            stage: row.try_get("estado")?,
            rule: row.try_get("versao_regra")?,
            checkpoint: row.try_get("ultima_posicao")?,
            checkpoint_order: row.try_get("ultimo_pedido_id")?,
            load_prepared: row
                .try_get::<Option<Vec<String>>, _>("indices_adiados")?
                .is_some(),
            new_rows: row.try_get("nova_linhas")?,
            new_sum: row.try_get("nova_resumo")?,
            target: row.try_get("alvo_posicao")?,
            events_total: row.try_get("eventos_total")?,
            events_read: row.try_get("eventos_lidos")?,
            orders_rederived: row.try_get("pedidos_refeitos")?,
            started_at: row.try_get("iniciado_em")?,
            updated_at: row.try_get("atualizado_em")?,
            built_at: row.try_get("construida_em")?,
            compared_at: row.try_get("comparada_em")?,
            count_current: row.try_get("contagem_atual")?,
            checksum_current: row.try_get("checksum_atual")?,
            count_new: row.try_get("contagem_nova")?,
            checksum_new: row.try_get("checksum_nova")?,
            orders_differing: row.try_get("pedidos_diferentes")?,
            fingerprint: row.try_get("impressao")?,
            approval_id: row.try_get("aprovacao_id")?,
            swapped_at: row.try_get("trocada_em")?,
            rolled_back_at: row.try_get("revertida_em")?,
        })
    }
}

impl Rebuild {
    /// The execution id its approvals are recorded under (`reprocessamento_aprovacao`).
    pub fn execution_id(&self) -> String {
        format!("reconstrucao-comissao-{}", self.id)
    }

    /// Where the load stands, as a line says it: the last order loaded (inert), or, once loaded,
    /// the archive's `posicao` it was read to.
    pub fn load_checkpoint(&self) -> String {
        match (&self.checkpoint_order, self.built_at) {
            (_, Some(_)) => format!(
                "read to posicao {}",
                self.checkpoint.map_or("-".into(), |c| c.to_string())
            ),
            (Some(order), None) => {
                format!("checkpoint pedido_id {}", crate::shared::text::inert(order))
            }
            (None, None) => "nothing loaded yet".to_string(),
        }
    }

    /// Share of the archive read, 0..=1.
    pub fn progress(&self) -> f64 {
        match self.events_total {
            0 => 1.0,
            total => (self.events_read as f64 / total as f64).min(1.0),
        }
    }
}

/// The rebuild still open (not closed nor abandoned), if any.
pub async fn open(conn: &mut PgConnection) -> Result<Option<Rebuild>, sqlx::Error> {
    sqlx::query_as(
        "select * from comissao_reconstrucao where estado not in ('encerrada', 'abandonada')",
    )
    .fetch_optional(conn)
    .await
}

/// The newest rebuild, whatever its state (for `status` and `/metrics`).
pub async fn latest(pool: &PgPool) -> Result<Option<Rebuild>, sqlx::Error> {
    sqlx::query_as("select * from comissao_reconstrucao order by id desc limit 1")
        .fetch_optional(pool)
        .await
}

/// Opens a rebuild: its row (from which on every write to `comissao` is captured) and a new empty
/// `comissao_nova` shaped and granted as `comissao`, in the caller's transaction. The queue and the
/// diff of any earlier rebuild are emptied.
pub async fn start(conn: &mut PgConnection, rule: &str) -> Result<Rebuild, sqlx::Error> {
    sqlx::query("delete from comissao_reconstrucao_fila")
        .execute(&mut *conn)
        .await?;
    sqlx::query("delete from comissao_reconstrucao_diff")
        .execute(&mut *conn)
        .await?;
    let rebuild = sqlx::query_as(
        r#"
        insert into comissao_reconstrucao (estado, versao_regra)
        values ('construindo', $1)
        returning *
        "#,
    )
    .bind(rule)
    .fetch_one(&mut *conn)
    .await?;
    sqlx::query("select comissao_nova_criar()")
        .execute(&mut *conn)
        .await?;
    Ok(rebuild)
}

/// Records how much of the archive the build reads: `target`, the archive's highest `posicao`
/// (`i64::MIN` for an empty archive), and the `total` events up to it.
pub async fn set_extent(
    conn: &mut PgConnection,
    id: i64,
    total: i64,
    target: Option<i64>,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        r#"
        update comissao_reconstrucao
        set eventos_total = $2, alvo_posicao = coalesce($3, -9223372036854775808),
            atualizado_em = now()
        where id = $1 and alvo_posicao is null
        "#,
    )
    .bind(id)
    .bind(total)
    .bind(target)
    .execute(conn)
    .await?;
    Ok(())
}

/// Prepares `comissao_nova` for the load, in the caller's transaction, unless it already was:
/// emptied, its figures and checkpoints cleared, its indexes (and the constraints they back)
/// recorded and dropped — as pg_restore loads a table before it indexes it. A rebuild opened by
/// an earlier version (its table indexed, its checkpoint by `posicao`) is loaded again from the
/// start this way. Returns the rebuild as it stands.
pub async fn prepare_load(conn: &mut PgConnection, id: i64) -> Result<Rebuild, sqlx::Error> {
    let prepared: bool = sqlx::query_scalar(
        "select indices_adiados is not null from comissao_reconstrucao where id = $1 for update",
    )
    .bind(id)
    .fetch_one(&mut *conn)
    .await?;
    if !prepared {
        sqlx::query("truncate comissao_nova")
            .execute(&mut *conn)
            .await?;
        sqlx::query(
            r#"
            update comissao_reconstrucao
            set eventos_lidos = 0, ultima_posicao = null, ultimo_pedido_id = null,
                nova_linhas = 0, nova_resumo = null, atualizado_em = now()
            where id = $1
            "#,
        )
        .bind(id)
        .execute(&mut *conn)
        .await?;
        sqlx::query("select comissao_nova_adiar_indices($1)")
            .bind(id)
            .execute(&mut *conn)
            .await?;
    }
    sqlx::query_as("select * from comissao_reconstrucao where id = $1")
        .bind(id)
        .fetch_one(conn)
        .await
}

/// Loads a chunk of rows (one per order, every order after the checkpoint up to `last` that has
/// one) into `comissao_nova` by binary `COPY`, and moves the checkpoint to `last` with the
/// events read and the table's checksum `sum` (these rows counted in), in the caller's
/// transaction. False when the rebuild is no longer loading.
pub async fn load_chunk(
    conn: &mut PgConnection,
    id: i64,
    rows: &[CommissionRow],
    last: &str,
    read: i64,
    sum: &compare::RowSum,
) -> Result<bool, sqlx::Error> {
    let moved = sqlx::query(
        r#"
        update comissao_reconstrucao
        set ultimo_pedido_id = $2, eventos_lidos = eventos_lidos + $3, nova_linhas = $4,
            nova_resumo = $5, atualizado_em = now()
        where id = $1 and estado = 'construindo' and construida_em is null
          and (ultimo_pedido_id is null or ultimo_pedido_id < $2)
        "#,
    )
    .bind(id)
    .bind(last)
    .bind(read)
    .bind(sum.rows)
    .bind(sum.text())
    .execute(&mut *conn)
    .await?
    .rows_affected();
    if moved == 0 {
        return Ok(false);
    }
    if rows.is_empty() {
        return Ok(true);
    }
    let mut copy = conn
        .copy_in_raw(
            "copy comissao_nova (pedido_id, valor_centavos, versao_evento) from stdin (format binary)",
        )
        .await?;
    copy.send(copy_binary(rows)).await?;
    copy.finish().await?;
    Ok(true)
}

/// `rows` in COPY's binary format: the signature, flags and header extension (none), each row as
/// its field count and each field's length and bytes (text as UTF-8, `int8` big-endian), the
/// trailer.
fn copy_binary(rows: &[CommissionRow]) -> Vec<u8> {
    let mut out =
        Vec::with_capacity(21 + rows.iter().map(|r| 30 + r.pedido_id.len()).sum::<usize>());
    out.extend_from_slice(b"PGCOPY\n\xff\r\n\0");
    out.extend_from_slice(&0i32.to_be_bytes());
    out.extend_from_slice(&0i32.to_be_bytes());
    for row in rows {
        out.extend_from_slice(&3i16.to_be_bytes());
        let id = row.pedido_id.as_bytes();
        out.extend_from_slice(&(id.len() as i32).to_be_bytes());
        out.extend_from_slice(id);
        for n in [row.valor_centavos, row.versao] {
            out.extend_from_slice(&8i32.to_be_bytes());
            out.extend_from_slice(&n.to_be_bytes());
        }
    }
    out.extend_from_slice(&(-1i16).to_be_bytes());
    out
}

/// Ends the load, in the caller's transaction: `comissao_nova`'s indexes and the constraints they
/// back built (all or, killed, none), the checkpoint set to the target, the build marked done.
pub async fn finish_load(conn: &mut PgConnection, id: i64) -> Result<(), sqlx::Error> {
    sqlx::query("select comissao_nova_indexar($1)")
        .bind(id)
        .execute(&mut *conn)
        .await?;
    sqlx::query(
        r#"
        update comissao_reconstrucao
        set ultima_posicao = alvo_posicao, construida_em = coalesce(construida_em, now()),
            atualizado_em = now()
        where id = $1
        "#,
    )
    .bind(id)
    .execute(conn)
    .await?;
    Ok(())
}

/// Takes up to `limit` orders from the queue of those live writers changed (removing them, in the
/// caller's transaction: a write after it queues the order again).
pub async fn take_queued(conn: &mut PgConnection, limit: i64) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar(
        r#"
        delete from comissao_reconstrucao_fila
        where pedido_id in (select pedido_id from comissao_reconstrucao_fila
                            order by pedido_id limit $1 for update skip locked)
        returning pedido_id
        "#,
    )
    .bind(limit)
    .fetch_all(conn)
    .await
}

/// Queues `orders` to be re-derived, as a write to `comissao` would.
pub async fn queue(conn: &mut PgConnection, orders: &[String]) -> Result<(), sqlx::Error> {
    sqlx::query(
        "insert into comissao_reconstrucao_fila (pedido_id) select unnest($1::text[]) on conflict do nothing",
    )
    .bind(orders)
    .execute(conn)
    .await?;
    Ok(())
}

/// How many orders wait in the queue.
pub async fn queued(conn: &mut PgConnection) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("select count(*) from comissao_reconstrucao_fila")
        .fetch_one(conn)
        .await
}

/// Sets the rows of `orders` in `comissao_nova` to exactly what the archive implies (`rows`, one
/// per order that has one); an order without one loses its row. Counted as re-derived, and the
/// table's kept checksum follows: the orders' old rows taken out, their new rows counted in.
pub async fn set_orders(
    conn: &mut PgConnection,
    id: i64,
    orders: &[String],
    rows: &[CommissionRow],
) -> Result<(), sqlx::Error> {
    let (kept_rows, kept_sum): (i64, Option<String>) = sqlx::query_as(
        "select nova_linhas, nova_resumo from comissao_reconstrucao where id = $1 for update",
    )
    .bind(id)
    .fetch_one(&mut *conn)
    .await?;
    let mut sum = compare::RowSum::parse(kept_sum.as_deref(), kept_rows)?;
    let before: Vec<(String, i64, i64)> = sqlx::query_as(
        "select pedido_id, valor_centavos, versao_evento from comissao_nova where pedido_id = any($1)",
    )
    .bind(orders)
    .fetch_all(&mut *conn)
    .await?;
    for (pedido_id, valor, versao) in &before {
        sum.remove(pedido_id, *valor, *versao);
    }
    for row in rows {
        sum.add(&row.pedido_id, row.valor_centavos, row.versao);
    }
    let (ids, valores, versoes) = columns(rows);
    sqlx::query(
        r#"
        delete from comissao_nova
        where pedido_id = any($1) and not (pedido_id = any($2))
        "#,
    )
    .bind(orders)
    .bind(&ids)
    .execute(&mut *conn)
    .await?;
    sqlx::query(
        r#"
        insert into comissao_nova (pedido_id, valor_centavos, versao_evento)
        select * from unnest($1::text[], $2::int8[], $3::int8[])
        on conflict (pedido_id) do update
        set valor_centavos = excluded.valor_centavos, versao_evento = excluded.versao_evento,
            atualizado_em = now()
        where (comissao_nova.valor_centavos, comissao_nova.versao_evento)
              is distinct from (excluded.valor_centavos, excluded.versao_evento)
        "#,
    )
    .bind(ids)
    .bind(valores)
    .bind(versoes)
    .execute(&mut *conn)
    .await?;
    sqlx::query(
        r#"
        update comissao_reconstrucao
        set pedidos_refeitos = pedidos_refeitos + $2, nova_linhas = $3, nova_resumo = $4,
            atualizado_em = now()
        where id = $1
        "#,
    )
    .bind(id)
    .bind(orders.len() as i64)
    .bind(sum.rows)
    .bind(sum.text())
    .execute(conn)
    .await?;
    Ok(())
}

/// Gives an open rebuild up before its swap: `comissao_nova` dropped, the queue and diff emptied.
/// False when the open rebuild was already swapped (roll back or drop the previous table instead).
pub async fn abandon(conn: &mut PgConnection, id: i64) -> Result<bool, sqlx::Error> {
    let done = sqlx::query(
        r#"
        update comissao_reconstrucao set estado = 'abandonada', encerrada_em = now(),
               atualizado_em = now()
        where id = $1 and estado in ('construindo', 'comparada')
        "#,
    )
    .bind(id)
    .execute(&mut *conn)
    .await?
    .rows_affected();
    if done == 0 {
        return Ok(false);
    }
    sqlx::query("drop table if exists comissao_nova")
        .execute(&mut *conn)
        .await?;
    sqlx::query("delete from comissao_reconstrucao_fila")
        .execute(&mut *conn)
        .await?;
    sqlx::query("delete from comissao_reconstrucao_diff")
        .execute(conn)
        .await?;
    Ok(true)
}

fn columns(rows: &[CommissionRow]) -> (Vec<String>, Vec<i64>, Vec<i64>) {
    (
        rows.iter().map(|r| r.pedido_id.clone()).collect(),
        rows.iter().map(|r| r.valor_centavos).collect(),
        rows.iter().map(|r| r.versao).collect(),
    )
}
