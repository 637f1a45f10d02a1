//! What an effect costs at the least, whatever the engine around it, measured by hand beside a
//! bare call of (h), so the engine's (g) has a floor to be set against:
//!
//! - (j) the window read: the archive's events, a batch at a time, to the client, each one's
//!   commission computed — what any run does to know which effects an event asks for;
//! - (k) the ledger's two writes: each effect's reservation, committed before the call
//!   (invariant `one-row-per-key`), and its completion, conditioned on the claim (invariant
//!   `claim-conditioned`), by the ledger's own functions, the reservations a batch at a time, the
//!   completions in groups of a chosen size.

use std::time::Instant;

use replay_ledger_core::tables::ledger::{self, Claim, Reservation};
use sqlx::PgPool;

use crate::data;
use crate::Measured;

/// (j) The window's events read a batch at a time, as the engine reads them (keyset on
/// `posicao`, every column), each one's commission computed; nothing written.
pub async fn window_read(pool: &PgPool, batch: i64) -> anyhow::Result<Measured> {
    let (from, to) = data::window()?;
    let t = Instant::now();
    let (mut after, mut total, mut sum) = (i64::MIN, 0i64, 0i64);
    loop {
        let rows: Vec<data::EventRow> = sqlx::query_as(
            "select posicao, id, tipo, pedido_id, versao, payload, ocorrido_em from evento_arquivado where posicao > $1 and ocorrido_em >= $2 and ocorrido_em < $3 order by posicao limit $4",
        )
        .bind(after)
        .bind(from)
        .bind(to)
        .bind(batch)
        .fetch_all(pool)
        .await?;
        let Some(last) = rows.last() else {
            break;
        };
        after = last.0;
        total += rows.len() as i64;
        sum += rows
            .iter()
            .map(|r| replay_ledger_core::domain::calcular_comissao(&r.5).unwrap_or(0))
            .sum::<i64>();
    }
    let secs = t.elapsed().as_secs_f64();
    println!("(j) window read: {total} events in {secs:.2} s (commissions sum {sum})");
    Ok(Measured::new(
        "(j) window read alone, batch by batch, by hand",
        total,
        secs,
    ))
}

/// The completion group sizes measured, with their labels: a few dozen, what a group commit
/// gathers while the one before it waits for the disk, and the largest group the engine writes.
pub const GROUPS: [(usize, &str); 2] = [
    (50, "(k) ledger floor: reserve + complete, groups of 50"),
    (1000, "(k) ledger floor: reserve + complete, groups of 1000"),
];

/// Every effect of the window (one per event the rule accepts) reserved (`batch` keys a
/// statement) and then completed (`group` keys a statement, each with an answer of the sink's
/// shape) by the ledger's own functions, as the engine calls them for a deduplicating type; the
/// ledger is left empty of them again.
pub async fn floor(
    pool: &PgPool,
    batch: i64,
    (group, label): (usize, &'static str),
) -> anyhow::Result<Measured> {
    data::register_none(pool).await?;
    let (from, to) = data::window()?;
    // Only an event the rule accepts asks for an effect.
    let ids: Vec<String> = sqlx::query_scalar(&format!(
        "select id from evento_arquivado e where ocorrido_em >= $1 and ocorrido_em < $2 and {} order by posicao",
        data::accepted_sql("e")
    ))
    .bind(from)
    .bind(to)
    .fetch_all(pool)
    .await?;
    let claim = Claim::new("piso");
    let stale_after = Some(std::time::Duration::from_secs(300));
    let t = Instant::now();
    for chunk in ids.chunks(usize::try_from(batch)?.max(1)) {
        let keys: Vec<String> = chunk
            .iter()
            .map(|id| format!("{id}:notificar-vendedor"))
            .collect();
        let items: Vec<Reservation<'_>> = keys
            .iter()
            .zip(chunk)
            .map(|(key, event_id)| Reservation {
                key,
                event_id,
                effect_type: "notificar-vendedor",
            })
            .collect();
        let reserved = ledger::reserve(pool, &claim, &items, stale_after).await?;
        anyhow::ensure!(reserved.len() == keys.len(), "a key was already reserved");
        for keys in keys.chunks(group.max(1)) {
            let answers: Vec<Option<serde_json::Value>> = (0..keys.len())
                .map(|i| Some(serde_json::json!({"id": i.to_string(), "recebido": true})))
                .collect();
            let done = ledger::complete_deduplicated(pool, &claim, keys, &answers, &[]).await?;
            anyhow::ensure!(done.len() == keys.len(), "a completion missed");
        }
    }
    let secs = t.elapsed().as_secs_f64();
    let n = ids.len() as i64;
    println!(
        "(k) ledger floor: {n} effects reserved {batch} a statement, completed {group} a statement, in {secs:.2} s"
    );
    data::register_none(pool).await?;
    Ok(Measured::new(label, n, secs))
}
