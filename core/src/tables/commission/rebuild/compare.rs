//! The comparison of `comissao_nova` with `comissao`: each table's count and checksum, the orders
//! whose row differs (`comissao_reconstrucao_diff`, kept up as live writes are re-derived), and
//! the fingerprint of that diff with the rule's version: what finance is shown and approves.
//!
//! A table's checksum is order-independent ([`RowSum`]): per row the SHA-256 of an unambiguous
//! encoding, summed as four 64-bit lanes. So the new table's is kept while it is written (the
//! load adds each row, a re-derivation takes the old row out and puts the new one in) and the
//! current table's is one streamed read with no sort. The schema's `comissao_resumo(table)`
//! computes the same sum in SQL, for anyone who wants to check either table.

use chrono::{DateTime, Utc};
use futures::TryStreamExt;
use sha2::{Digest, Sha256};
use sqlx::{PgConnection, PgPool};

/// A table's count and checksum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checksum {
    pub count: i64,
    /// `sha256-soma:` and 64 hex digits ([`RowSum`]).
    pub digest: String,
}

/// The count and order-independent checksum of a set of `comissao` rows: per row the SHA-256 of
/// `<bytes of pedido_id>:<pedido_id>:<valor_centavos>:<versao_evento>` (the length first, so no
/// id can pass for two fields), its 32 bytes read as four big-endian 64-bit lanes, each lane
/// summed modulo 2^64. Adding and taking rows out commute, so it is kept as rows are written;
/// the schema's `comissao_resumo(table)` computes the same by one scan.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RowSum {
    pub rows: i64,
    lanes: [u64; 4],
}

/// What a stored checksum's text must start with.
const SUM_PREFIX: &str = "sha256-soma:";

impl RowSum {
    fn lanes_of(pedido_id: &str, valor: i64, versao: i64) -> [u64; 4] {
        Self::lanes_of_encoded(
            format!("{}:{pedido_id}:{valor}:{versao}", pedido_id.len()).as_bytes(),
        )
    }

    fn lanes_of_encoded(encoded: &[u8]) -> [u64; 4] {
        let bytes = Sha256::digest(encoded);
        std::array::from_fn(|i| {
            u64::from_be_bytes(bytes[8 * i..8 * i + 8].try_into().expect("8 bytes"))
        })
    }

    /// Counts a row in.
    pub fn add(&mut self, pedido_id: &str, valor: i64, versao: i64) {
        self.add_lanes(Self::lanes_of(pedido_id, valor, versao));
    }

    /// Counts in a row of another shape, already encoded unambiguously.
    fn add_encoded(&mut self, encoded: &[u8]) {
        self.add_lanes(Self::lanes_of_encoded(encoded));
    }

    fn add_lanes(&mut self, lanes: [u64; 4]) {
        for (sum, lane) in self.lanes.iter_mut().zip(lanes) {
            *sum = sum.wrapping_add(lane);
        }
        self.rows += 1;
    }

    /// Takes a row counted in out again.
    pub fn remove(&mut self, pedido_id: &str, valor: i64, versao: i64) {
        let lanes = Self::lanes_of(pedido_id, valor, versao);
        for (sum, lane) in self.lanes.iter_mut().zip(lanes) {
            *sum = sum.wrapping_sub(lane);
        }
        self.rows -= 1;
    }

    /// The stored text: `sha256-soma:` and the four lanes in hex.
    pub fn text(&self) -> String {
        let hex: String = self.lanes.iter().map(|l| format!("{l:016x}")).collect();
        format!("{SUM_PREFIX}{hex}")
    }

    /// A sum stored as [`RowSum::text`] (`None`: nothing counted yet) over `rows` rows.
    pub fn parse(text: Option<&str>, rows: i64) -> Result<RowSum, sqlx::Error> {
        let Some(text) = text else {
            return Ok(RowSum::default());
        };
        let bad = || sqlx::Error::Decode(format!("not a table checksum: {text:?}").into());
        let hex = text.strip_prefix(SUM_PREFIX).ok_or_else(bad)?;
        if hex.len() != 64 || !hex.is_ascii() {
            return Err(bad());
        }
        let mut lanes = [0u64; 4];
        for (i, lane) in lanes.iter_mut().enumerate() {
            *lane = u64::from_str_radix(&hex[16 * i..16 * i + 16], 16).map_err(|_| bad())?;
        }
        Ok(RowSum { rows, lanes })
    }

    pub fn checksum(&self) -> Checksum {
        Checksum {
            count: self.rows,
            digest: self.text(),
        }
    }
}

/// What a comparison found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comparison {
    pub at: DateTime<Utc>,
    pub current: Checksum,
    pub new: Checksum,
    pub orders_differing: i64,
    pub fingerprint: String,
    /// Differing rows the swap moves to an older `versao_evento`.
    pub older_versions: i64,
    /// Differing rows the swap deletes (no accepted event for the order).
    pub deleted: i64,
}

/// One order whose row differs: `None` where a table has no row for it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DiffRow {
    pub pedido_id: String,
    pub antes: Option<i64>,
    pub versao_antes: Option<i64>,
    pub depois: Option<i64>,
    pub versao_depois: Option<i64>,
}

impl DiffRow {
    /// Why the row differs, as the diff's `motivo` column says it (pt-BR words, like the seed's
    /// states): a row with no row before, a row deleted (no accepted event), a row that goes
    /// back to an older version, one whose version alone changes, one corrected by a newer
    /// version, one whose value is corrected at the same version.
    pub fn why(&self) -> &'static str {
        match (
            self.antes,
            self.depois,
            self.versao_antes,
            self.versao_depois,
        ) {
            (None, _, _, _) => "sem-linha-antes",
            (_, None, _, _) => "apagada-sem-evento-aceito",
            (_, _, Some(before), Some(after)) if after < before => "volta-a-versao-mais-antiga",
            (a, d, _, _) if a == d => "so-a-versao-muda",
            (_, _, Some(before), Some(after)) if after > before => "versao-mais-nova",
            _ => "valor-corrigido",
        }
    }
}

/// The count and checksum of `comissao`, by one scan with no sort: its rows streamed and summed
/// here ([`RowSum`]), which the schema's `comissao_resumo` computes the same in SQL, slower.
pub async fn checksum_current(conn: &mut PgConnection) -> Result<Checksum, sqlx::Error> {
    let mut sum = RowSum::default();
    let mut rows = sqlx::query_as::<_, (String, i64, i64)>(
        "select pedido_id, valor_centavos, versao_evento from comissao",
    )
    .fetch(conn);
    while let Some((pedido_id, valor, versao)) = rows.try_next().await? {
        sum.add(&pedido_id, valor, versao);
    }
    Ok(sum.checksum())
}

/// The count and checksum of `comissao_nova` kept as it was written (its rebuild's row).
pub async fn checksum_new(conn: &mut PgConnection, id: i64) -> Result<Checksum, sqlx::Error> {
    let (rows, text): (i64, Option<String>) =
        sqlx::query_as("select nova_linhas, nova_resumo from comissao_reconstrucao where id = $1")
            .bind(id)
            .fetch_one(conn)
            .await?;
    Ok(RowSum::parse(text.as_deref(), rows)?.checksum())
}

/// Compares the two tables whole, in the caller's (repeatable-read) transaction: the diff written
/// anew (one join of both tables), the current table's checksum (one scan) beside the new one's
/// as it was kept while written, the fingerprint; the rebuild becomes `comparada` with these figures, and
/// any approval of an earlier comparison no longer counts.
pub async fn compare(
    conn: &mut PgConnection,
    id: i64,
    rule: &str,
) -> Result<Comparison, sqlx::Error> {
    sqlx::query("delete from comissao_reconstrucao_diff")
        .execute(&mut *conn)
        .await?;
    // Both tables by their primary keys, merged in `pedido_id` order: no hash table of either
    // (which spills to disk past `work_mem` at millions of orders), and the diff's own key
    // written in order. For this transaction only.
    sqlx::query("set local enable_hashjoin = off")
        .execute(&mut *conn)
        .await?;
    sqlx::query(
        r#"
        insert into comissao_reconstrucao_diff
          (pedido_id, antes, versao_antes, depois, versao_depois)
        select coalesce(c.pedido_id, n.pedido_id), c.valor_centavos, c.versao_evento,
               n.valor_centavos, n.versao_evento
        from comissao c
        full join comissao_nova n on n.pedido_id = c.pedido_id
        where (c.valor_centavos, c.versao_evento) is distinct from (n.valor_centavos, n.versao_evento)
        "#,
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query("set local enable_hashjoin to default")
        .execute(&mut *conn)
        .await?;
    let current = checksum_current(conn).await?;
    let new = checksum_new(conn, id).await?;
    let (orders_differing, fingerprint) = fingerprint(conn, rule).await?;
    let (older_versions, deleted) = effects_beyond_values(conn).await?;
    let at: DateTime<Utc> = sqlx::query_scalar(
        r#"
        update comissao_reconstrucao
        set estado = 'comparada', comparada_em = now(), atualizado_em = now(),
            contagem_atual = $2, checksum_atual = $3, contagem_nova = $4, checksum_nova = $5,
            pedidos_diferentes = $6, impressao = $7, aprovacao_id = null
        where id = $1 and estado in ('construindo', 'comparada')
        returning comparada_em
        "#,
    )
    .bind(id)
    .bind(current.count)
    .bind(&current.digest)
    .bind(new.count)
    .bind(&new.digest)
    .bind(orders_differing)
    .bind(&fingerprint)
    .fetch_one(conn)
    .await?;
    Ok(Comparison {
        at,
        current,
        new,
        orders_differing,
        fingerprint,
        older_versions,
        deleted,
    })
}

/// The diff rows of `orders` computed again from both tables as they stand (after their rows in
/// `comissao_nova` were re-derived).
pub async fn refresh(conn: &mut PgConnection, orders: &[String]) -> Result<(), sqlx::Error> {
    sqlx::query("delete from comissao_reconstrucao_diff where pedido_id = any($1)")
        .bind(orders)
        .execute(&mut *conn)
        .await?;
    sqlx::query(
        r#"
        insert into comissao_reconstrucao_diff
          (pedido_id, antes, versao_antes, depois, versao_depois)
        select u.pedido_id, c.valor_centavos, c.versao_evento, n.valor_centavos, n.versao_evento
        from unnest($1::text[]) as u(pedido_id)
        left join comissao c on c.pedido_id = u.pedido_id
        left join comissao_nova n on n.pedido_id = u.pedido_id
        where (c.valor_centavos, c.versao_evento) is distinct from (n.valor_centavos, n.versao_evento)
        "#,
    )
    .bind(orders)
    .execute(conn)
    .await?;
    Ok(())
}

/// The diff's size and fingerprint with the rule's version: `sha256:` and the full SHA-256 of
/// `<bytes of the rule>:<rule>:<count>:<sum>`, where the sum is the order-independent
/// [`RowSum`] of the diff's rows, each encoded as
/// `<bytes of pedido_id>:<pedido_id>:<antes>:<versao_antes>:<depois>:<versao_depois>` (`-` for
/// a missing value, which no number is; the id's length first, so an id holding `:` or `,`
/// cannot pass for two). Two equal fingerprints mean the same orders differ by the same values
/// and versions under the same rule. The diff is read once, in whatever order the table gives,
/// with no sort. People are shown [`short`] of it; what they approve binds the whole.
pub async fn fingerprint(
    conn: &mut PgConnection,
    rule: &str,
) -> Result<(i64, String), sqlx::Error> {
    let mut sum = RowSum::default();
    let mut rows = sqlx::query_as::<_, DiffTuple>(
        "select pedido_id, antes, versao_antes, depois, versao_depois from comissao_reconstrucao_diff",
    )
    .fetch(conn);
    let field = |n: Option<i64>| n.map_or("-".to_string(), |n| n.to_string());
    while let Some((pedido_id, antes, versao_antes, depois, versao_depois)) =
        rows.try_next().await?
    {
        sum.add_encoded(
            format!(
                "{}:{pedido_id}:{}:{}:{}:{}",
                pedido_id.len(),
                field(antes),
                field(versao_antes),
                field(depois),
                field(versao_depois)
            )
            .as_bytes(),
        );
    }
    let whole = Sha256::digest(format!("{}:{rule}:{}:{}", rule.len(), sum.rows, sum.text()));
    let hex: String = whole.iter().map(|b| format!("{b:02x}")).collect();
    Ok((sum.rows, format!("sha256:{hex}")))
}

/// The start of a fingerprint, as people read it beside the figures (`sha256:` and 16 hex
/// digits); the whole is what an approval binds.
pub fn short(fingerprint: &str) -> &str {
    let end = "sha256:".len() + 16;
    fingerprint.get(..end).unwrap_or(fingerprint)
}

/// What the comparison's differing rows do that is not a change of value: rows the swap would
/// move to an older `versao_evento` (the current row is ahead of the archive, or newer than any
/// accepted event), and rows it would delete (orders with no accepted event).
pub async fn effects_beyond_values(conn: &mut PgConnection) -> Result<(i64, i64), sqlx::Error> {
    sqlx::query_as(
        r#"
        select count(*) filter (where versao_depois < versao_antes),
               count(*) filter (where depois is null)
        from comissao_reconstrucao_diff
        "#,
    )
    .fetch_one(conn)
    .await
}

type DiffTuple = (String, Option<i64>, Option<i64>, Option<i64>, Option<i64>);

/// The diff's rows, by order id (for the CSV/XLSX finance reads), at most `limit`.
pub async fn rows(pool: &PgPool, limit: i64) -> Result<Vec<DiffRow>, sqlx::Error> {
    let rows: Vec<DiffTuple> = sqlx::query_as(
        r#"
        select pedido_id, antes, versao_antes, depois, versao_depois
        from comissao_reconstrucao_diff order by pedido_id limit $1
        "#,
    )
    .bind(limit)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(
            |(pedido_id, antes, versao_antes, depois, versao_depois)| DiffRow {
                pedido_id,
                antes,
                versao_antes,
                depois,
                versao_depois,
            },
        )
        .collect())
}

/// Stamps the rebuild with its diff's fingerprint as it stands (after live writes were
/// re-derived): what `rebuild` shows next and an approval must name.
pub async fn restamp(
    conn: &mut PgConnection,
    id: i64,
    rule: &str,
) -> Result<(i64, String), sqlx::Error> {
    let (orders, stamp) = fingerprint(conn, rule).await?;
    sqlx::query(
        r#"
        update comissao_reconstrucao set pedidos_diferentes = $2, impressao = $3
        where id = $1 and estado = 'comparada'
        "#,
    )
    .bind(id)
    .bind(orders)
    .bind(&stamp)
    .execute(conn)
    .await?;
    Ok((orders, stamp))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_sum_is_the_same_in_any_order_and_takes_a_row_out_exactly() {
        let rows = [("ped-1", 10, 1), ("ped-2", 20, 2), ("p:3,x", 30, 3)];
        let (mut forward, mut backward) = (RowSum::default(), RowSum::default());
        for (p, v, n) in rows {
            forward.add(p, v, n);
        }
        for (p, v, n) in rows.iter().rev() {
            backward.add(p, *v, *n);
        }
        assert_eq!(forward, backward);

        let mut changed = forward;
        changed.remove("ped-2", 20, 2);
        changed.add("ped-2", 21, 2);
        assert_ne!(changed, forward);
        changed.remove("ped-2", 21, 2);
        changed.add("ped-2", 20, 2);
        assert_eq!(changed, forward);

        assert_eq!(RowSum::parse(Some(&forward.text()), 3).unwrap(), forward);
        assert!(RowSum::parse(Some("md5:abc"), 3).is_err());
        assert_eq!(RowSum::parse(None, 0).unwrap(), RowSum::default());
    }

    #[test]
    fn an_id_holding_the_separator_cannot_pass_for_two_fields() {
        let (mut a, mut b) = (RowSum::default(), RowSum::default());
        a.add("p:1", 2, 3);
        b.add("p", 1, 23);
        assert_ne!(a, b);
    }
}
