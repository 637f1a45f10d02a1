//! (t) `comissao --as-of` (the table as the archive says it stood at a moment) by the product's
//! own path, `history::table`, the call the command line and the console make, beside (u) its
//! floor: the same rows computed by one `select distinct on` with the rule in SQL, streamed to
//! the harness. The moment is the window's middle, so about half of the window's events count
//! (and the whole day before). Both are counted, summed and fingerprinted by the harness; they
//! must agree. Printed: each one's rate over the events that occurred by the moment, the ratio
//! (t)/(u) (target ≥ 0.8) and the peak RSS.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::Instant;

use chrono::{DateTime, Utc};
use futures::TryStreamExt;
use replay_ledger::services::history::{self, Query, Row};
use sqlx::PgPool;

use crate::data::{self, Shape};
use crate::{measure, Measured};

/// What a side handed over: rows, their cents, and a fingerprint of the rows (an order-free sum
/// of each row's hash), so two sides that agree on the count and the sum but not on the rows are
/// still told apart.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Tally {
    rows: u64,
    cents: i64,
    fingerprint: u64,
}

impl Tally {
    fn add(&mut self, pedido_id: &str, versao: i64, cents: i64) {
        let mut h = DefaultHasher::new();
        (pedido_id, versao, cents).hash(&mut h);
        self.rows += 1;
        self.cents += cents;
        self.fingerprint = self.fingerprint.wrapping_add(h.finish());
    }
}

pub async fn both(pool: &PgPool, shape: Shape, results: &mut Vec<Measured>) -> anyhow::Result<()> {
    let (from, to) = data::window()?;
    let at = from + (to - from) / 2;
    // What both read: every `pedido.pago` that occurred by the moment.
    let events: i64 = sqlx::query_scalar(
        "select count(*) from evento_arquivado where tipo = 'pedido.pago' and ocorrido_em <= $1",
    )
    .bind(at)
    .fetch_one(pool)
    .await?;
    let query = Query {
        as_of: at,
        compare_to: None,
        known_at: None,
        restated: false,
    };
    let mut product = Tally::default();
    let engine = measure(async {
        let t = Instant::now();
        let mut sink = |row: Row| match row {
            Row::Order(r) => {
                product.add(&r.pedido_id, r.versao_evento, r.valor_centavos);
                Ok(())
            }
            Row::Changed(d) => Err(std::io::Error::other(format!(
                "a change where the table was asked for: {d:?}"
            ))),
        };
        let totals = history::table(pool, &query, &mut sink).await?;
        let secs = t.elapsed().as_secs_f64();
        anyhow::ensure!(
            (totals.orders, totals.after_cents) == (product.rows, product.cents),
            "history::table's totals {totals:?} are not the rows it handed over {product:?}"
        );
        let label = "(t) comissao --as-of the window's middle";
        Ok(Measured::new(label, events, secs))
    })
    .await?;
    let mut by_hand = Tally::default();
    let floor = measure(async {
        let t = Instant::now();
        by_hand = one_statement(pool, at).await?;
        let label = "(u) --as-of's floor: one select distinct on";
        Ok(Measured::new(label, events, t.elapsed().as_secs_f64()))
    })
    .await?;
    anyhow::ensure!(
        product == by_hand,
        "comissao --as-of and its floor disagree: (t) {product:?}, (u) {by_hand:?}"
    );
    println!(
        "(t) on the {} archive, as of {at}: {:.0} events/s, peak RSS {} MB; (u) {:.0} events/s, peak RSS {} MB; (t)/(u) = {:.2} (target >= 0.8); both {} rows, sum {} cents, rows agree",
        shape.name(),
        engine.rate(),
        engine.rss_mb,
        floor.rate(),
        floor.rss_mb,
        engine.rate() / floor.rate().max(1e-9),
        product.rows,
        product.cents,
    );
    results.extend([engine, floor]);
    Ok(())
}

/// The table as of `at` in one statement, streamed: per order, the newest event (highest
/// version, then position) that occurred by `at` and that the rule accepts, with the rule in SQL
/// ([`data::accepted_sql`]: JavaScript's `Math.round`, a rejected event skipped so the next older
/// one decides); the same columns as the product's rows.
async fn one_statement(pool: &PgPool, at: DateTime<Utc>) -> anyhow::Result<Tally> {
    let sql = format!(
        r#"
        select distinct on (pedido_id) pedido_id, versao, {valor}, ocorrido_em
        from (select pedido_id, versao, posicao, ocorrido_em, {exact} as x
              from evento_arquivado e
              where tipo = 'pedido.pago' and ocorrido_em <= $1 and {accepted}) e
        order by pedido_id, versao desc, posicao desc
        "#,
        accepted = data::accepted_sql("e"),
        exact = data::exact_sql("e"),
        valor = data::rounded_sql("x"),
    );
    let mut rows = sqlx::query_as::<_, (String, i64, i64, DateTime<Utc>)>(&sql)
        .bind(at)
        .fetch(pool);
    let mut tally = Tally::default();
    while let Some((pedido_id, versao, cents, _)) = rows.try_next().await? {
        tally.add(&pedido_id, versao, cents);
    }
    Ok(tally)
}
