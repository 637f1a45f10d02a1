//! (x) `rebuild` over the whole archive beside (y) one `INSERT … SELECT` of the same history into a
//! fresh table (the rule in SQL, the newest version per order), measured in the same run. The
//! rebuild's own record splits its time: the build (every event read, decided and written into
//! the new table: the work the one statement does, target ≥ 0.8 of its rate) and then following
//! the writers and comparing the two tables whole (count, checksum, the list of differing orders
//! and its fingerprint), which the one statement does not do. Peak RSS too. Both must write the
//! same rows: the same fingerprint (count, sum and an order-free hash of the rows), taken of the
//! rebuild's new table before it is abandoned and of the floor's after its timing.

use std::time::Instant;

use replay_ledger_core::services::rebuild::{self, Outcome, RebuildConfig};
use replay_ledger_core::shared::shutdown::Shutdown;
use sqlx::PgPool;

use crate::data::{self, Shape};
use crate::{measure, Measured};

pub async fn both(pool: &PgPool, shape: Shape, results: &mut Vec<Measured>) -> anyhow::Result<()> {
    data::buggy_state(pool).await?;
    let mut rows_rebuilt = 0;
    let mut build_secs = 0.0;
    let engine = measure(async {
        let t = Instant::now();
        let mut quiet = |_: &str| {};
        let done = rebuild::run(
            pool,
            &RebuildConfig::default(),
            &Shutdown::never(),
            &mut quiet,
        )
        .await?;
        let secs = t.elapsed().as_secs_f64();
        let Outcome::Compared(c) = done else {
            anyhow::bail!("the rebuild did not stop at its comparison: {done:?}");
        };
        rows_rebuilt = c.new.count;
        let r = rebuild::latest(pool).await?.expect("the rebuild's row");
        let built = r.built_at.expect("the rebuild was built") - r.started_at;
        build_secs = built.num_milliseconds() as f64 / 1000.0;
        Ok(Measured::new(
            "(x) rebuild of comissao, whole archive, compared",
            r.events_read,
            secs,
        ))
    })
    .await?;
    let rebuilt = data::table_fingerprint(&mut *pool.acquire().await?, "comissao_nova").await?;
    rebuild::abandon(pool).await?;
    let mut rows_floor = 0;
    // The floor's table lives in this transaction, rolled back once its rows are fingerprinted.
    let mut tx = pool.begin().await?;
    let floor = measure(async {
        let t = Instant::now();
        let (events, rows) = one_statement(&mut tx).await?;
        rows_floor = rows;
        let label = "(y) rebuild's floor: one INSERT … SELECT";
        Ok(Measured::new(label, events, t.elapsed().as_secs_f64()))
    })
    .await?;
    let by_floor = data::table_fingerprint(&mut tx, "comissao_piso").await?;
    tx.rollback().await?;
    anyhow::ensure!(
        rows_rebuilt == rows_floor,
        "the rebuild wrote {rows_rebuilt} rows, its floor {rows_floor}"
    );
    anyhow::ensure!(
        rebuilt == by_floor,
        "the rebuild's rows differ from its floor's: {rebuilt} vs {by_floor}"
    );
    let build_rate = engine.events as f64 / build_secs.max(1e-3);
    println!(
        "(x) on the {} archive: {:.2} s in all, peak RSS {} MB: build {build_secs:.2} s ({build_rate:.0} events/s), then follow and compare {:.2} s; (y) {:.2} s, {:.0} events/s; build/(y) = {:.2} (target >= 0.8), whole/(y) = {:.2}; {rows_floor} rows each, the same rows",
        shape.name(),
        engine.secs,
        engine.rss_mb,
        engine.secs - build_secs,
        floor.secs,
        floor.rate(),
        build_rate / floor.rate().max(1e-9),
        engine.rate() / floor.rate().max(1e-9)
    );
    results.push(engine);
    results.push(floor);
    Ok(())
}

/// The whole history into a new table in one statement, in the caller's transaction (which
/// rolls it back): the rule in SQL ([`data::accepted_sql`]: JavaScript's `Math.round`, the
/// events it rejects skipped), the newest accepted version per order (the last event among equal
/// versions). Returns (events, rows).
async fn one_statement(tx: &mut sqlx::PgConnection) -> anyhow::Result<(i64, i64)> {
    sqlx::query("create table comissao_piso (like comissao including all)")
        .execute(&mut *tx)
        .await?;
    let rows = sqlx::query(&format!(
        r#"
        insert into comissao_piso (pedido_id, valor_centavos, versao_evento)
        select distinct on (pedido_id) pedido_id, {valor}, versao
        from (select pedido_id, versao, posicao, {exact} as x
              from evento_arquivado e where tipo = 'pedido.pago' and {accepted}) e
        order by pedido_id, versao desc, posicao desc
        "#,
        accepted = data::accepted_sql("e"),
        exact = data::exact_sql("e"),
        valor = data::rounded_sql("x"),
    ))
    .execute(&mut *tx)
    .await?
    .rows_affected() as i64;
    let events: i64 =
        sqlx::query_scalar("select count(*) from evento_arquivado where tipo = 'pedido.pago'")
            .fetch_one(&mut *tx)
            .await?;
    Ok((events, rows))
}
