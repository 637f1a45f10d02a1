//! The generated archive and the state each measurement starts from.

use std::time::Instant;

use sqlx::PgPool;

/// The window's first instant; the window is that day in São Paulo.
pub const DAY_START: &str = "2026-10-14T00:00:00-03:00";
pub const DAY_END: &str = "2026-10-15T00:00:00-03:00";

/// An archived event as the harness reads it: `posicao`, `id`, `tipo`, `pedido_id`, `versao`,
/// `payload`, `ocorrido_em`.
pub type EventRow = (
    i64,
    String,
    String,
    String,
    i64,
    serde_json::Value,
    chrono::DateTime<chrono::Utc>,
);

pub fn window() -> anyhow::Result<(chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>)> {
    Ok((
        chrono::DateTime::parse_from_rfc3339(DAY_START)?.into(),
        chrono::DateTime::parse_from_rfc3339(DAY_END)?.into(),
    ))
}

/// Rows generated per statement: progress on a long generation, and no single transaction of
/// millions of rows.
const CHUNK: i64 = 1_000_000;

/// How the window's events fall on orders (`--shape`). The days around the window are the same
/// in both: N/10 orders on each, one event each, version 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Shape {
    /// `4N/5` orders in `posicao` order, each once (version 1), then the first N/5 of them again
    /// (version 2, 4N/5 positions later): 1.25 versions per order, consecutive events on
    /// consecutive orders, every payload accepted, no two events of an order with one version.
    Adjacent,
    /// `2N/5` orders, 2.5 versions per order, each order's events scattered over the whole
    /// window and consecutive events on orders far apart (see [`generate`]), with ties of
    /// version and events the rule rejects at a few percent.
    Spread,
}

impl Shape {
    pub fn name(self) -> &'static str {
        match self {
            Shape::Adjacent => "adjacent",
            Shape::Spread => "spread",
        }
    }
}

/// The commission rule in force (`calcularComissao`, the current payload shape) in SQL, first
/// part: whether it accepts `e`, a row of `evento_arquivado`. It rejects, as `domain::handle`
/// does: an `id` or `pedido_id` longer than 1024 bytes; `valorCentavos` not a JSON number, or not
/// an integer; `percentual` not a JSON number (a numeric string is not one); a result beyond
/// JavaScript's safe integers (`|x| ≤ 2^53 − 1` of the exact product says the same of its
/// rounding: past 2^52 every double is an integer). The type checks guard the casts (`case`, so
/// no cast meets a value that is not a number). The older payload shape (`valor` in reais,
/// upcast by the domain) is not read here: the generated archive has none, and a floor that met
/// one would disagree with the engine, which the harness reports.
///
/// The expressions are written to be flattened into the statement (no `offset 0` fence): the
/// scan then filters and computes in one pass, and may run in parallel workers. A fenced
/// subquery that computed the product once took longer.
pub fn accepted_sql(e: &str) -> String {
    let v = format!("({e}.payload ->> 'valorCentavos')::float8");
    format!(
        "(case when jsonb_typeof({e}.payload -> 'valorCentavos') = 'number' \
              and jsonb_typeof({e}.payload -> 'percentual') = 'number' \
              and octet_length({e}.id) <= 1024 and octet_length({e}.pedido_id) <= 1024 \
         then {v} = floor({v}) and abs({}) <= 9007199254740991 \
         else false end)",
        exact_sql(e)
    )
}

/// The rule's second part, for an event it accepts ([`accepted_sql`]): the exact product as
/// JavaScript computes it, in float8 (IEEE doubles, as JavaScript's numbers).
pub fn exact_sql(e: &str) -> String {
    format!(
        "(({e}.payload ->> 'valorCentavos')::float8 * ({e}.payload ->> 'percentual')::float8 / 100)"
    )
}

/// The rule's last part, over the exact product `x` ([`exact_sql`]): JavaScript's `Math.round`
/// (halves toward +∞; not `floor(x + 0.5)`), as bigint cents.
pub fn rounded_sql(x: &str) -> String {
    format!("(case when {x} - floor({x}) >= 0.5 then floor({x}) + 1 else floor({x}) end)::bigint")
}

/// The commission the rule in force gives an event, by the domain's own calls (as
/// `domain::handle` decides it: the ids' length, then the payload, upcast if older); `None`
/// where it rejects the event.
pub fn rule(id: &str, pedido_id: &str, payload: &serde_json::Value) -> Option<i64> {
    use replay_ledger_core::domain;
    if id.len() > domain::MAX_ID_BYTES || pedido_id.len() > domain::MAX_ID_BYTES {
        return None;
    }
    domain::commission_of(payload).ok().map(|(cents, _)| cents)
}

/// The orders of the spread window, and the multiplier that scatters its events over them: the
/// integer nearest `orders` × (√5 − 1)/2 (Fibonacci hashing: consecutive events land far apart
/// in the order ids) that is coprime with `orders`, so `i ↦ i × multiplier mod orders` is a
/// permutation of each run of `orders` consecutive events.
fn spread_orders(n: i64) -> (i64, i64) {
    let orders = (n * 2 / 5).max(1);
    let gcd = |mut a: i64, mut b: i64| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    let mut multiplier = ((orders as f64 * 0.618_033_988_749_895).round() as i64).max(1);
    while gcd(multiplier, orders) != 1 {
        multiplier += 1;
    }
    (orders, multiplier)
}

/// The archive, generated by SQL in the database: N/10 events on the day before, the window's N
/// events, N/10 on the day after, `posicao` in time order. Each day around the window has an
/// order per event (version 1).
///
/// - [`Shape::Adjacent`]: the window holds `orders = 4N/5` orders: every order's first event
///   (version 1), then the first N/5 orders again with version 2.
/// - [`Shape::Spread`]: the window holds `orders = 2N/5` orders. The window's `i`-th event
///   (from 0) is of order `i × m mod orders` (`m` from [`spread_orders`]), so each run of
///   `orders` consecutive events holds every order once, in a scattered order, and an order's
///   events are `orders` positions apart, over the whole window; its version is one more than
///   the events it had before (`1 + i / orders`). Every 31st event from the 7th (of those with
///   an earlier event) takes its predecessor's version instead: a tie, decided by `posicao`.
///   Every 29th event from the 3rd has a payload the rule rejects, by turns: `valorCentavos` as a
///   string of digits, `valorCentavos` with a fraction, `percentual` as a string.
pub async fn generate(pool: &PgPool, n: i64, shape: Shape) -> anyhow::Result<()> {
    let around = n / 10;
    let total = n + 2 * around;
    let (orders, multiplier) = match shape {
        Shape::Adjacent => ((n * 4 / 5).max(1), 1),
        Shape::Spread => spread_orders(n),
    };
    // `i`: the event's place in the window, from 0. Adjacent's multiplier is 1: event `i` is of
    // order `i mod orders`, as the harness has always generated it.
    let (pedido, versao, valor, percentual) = match shape {
        Shape::Adjacent => (
            "'ped-' || ((i * $7) % $3)",
            "1 + i / $3",
            "to_jsonb(v)",
            "to_jsonb(p)",
        ),
        Shape::Spread => (
            "'ped-' || ((i * $7) % $3)",
            "1 + i / $3 - (i >= $3 and i % 31 = 7)::int",
            "case when i % 29 = 3 and (i / 29) % 3 = 0 then to_jsonb(v::text) \
                  when i % 29 = 3 and (i / 29) % 3 = 1 then to_jsonb(v + 0.5) \
                  else to_jsonb(v) end",
            "case when i % 29 = 3 and (i / 29) % 3 = 2 then to_jsonb(p::text) \
                  else to_jsonb(p) end",
        ),
    };
    let sql = format!(
        r#"
        insert into evento_arquivado (posicao, id, tipo, pedido_id, versao, payload, ocorrido_em)
        select g, 'evt-' || g, 'pedido.pago',
               case when g <= $2 then 'ped-old-' || g
                    when g > $2 + $1 then 'ped-new-' || g
                    else {pedido} end,
               case when i < 0 or i >= $1 then 1 else {versao} end,
               case when i < 0 or i >= $1
                    then jsonb_build_object('valorCentavos', v, 'percentual', p)
                    else jsonb_build_object('valorCentavos', {valor}, 'percentual', {percentual})
               end,
               $4::timestamptz + i * (interval '86400 seconds' / $1)
        from generate_series($5::bigint, $6::bigint) as g,
             lateral (select g - $2 - 1 as i, 1000 + (g * 7919) % 500000 as v,
                             (array[2.5, 5, 7.5, 10])[1 + g % 4] as p) as x
        "#
    );
    let t = Instant::now();
    let mut from = 1;
    while from <= total {
        let to = (from + CHUNK - 1).min(total);
        sqlx::query(&sql)
            .bind(n)
            .bind(around)
            .bind(orders)
            .bind(chrono::DateTime::parse_from_rfc3339(DAY_START)?)
            .bind(from)
            .bind(to)
            .bind(multiplier)
            .execute(pool)
            .await?;
        if total > CHUNK {
            println!(
                "  generated {to} of {total} events ({:.0} s)",
                t.elapsed().as_secs_f64()
            );
        }
        from = to + 1;
    }
    sqlx::query("vacuum analyze evento_arquivado")
        .execute(pool)
        .await?;
    Ok(())
}

/// What the generated window holds, as the header says it: orders, versions per order, ties
/// (events with the version of an earlier event of their order) and events the rule rejects.
pub async fn describe(pool: &PgPool, shape: Shape) -> anyhow::Result<String> {
    let (from, to) = window()?;
    let (events, orders, ties, rejected): (i64, i64, i64, i64) = sqlx::query_as(&format!(
        r#"
        select count(*), count(distinct e.pedido_id),
               count(*) - count(distinct (e.pedido_id, e.versao)),
               count(*) filter (where not {})
        from evento_arquivado e
        where e.ocorrido_em >= $1 and e.ocorrido_em < $2
        "#,
        accepted_sql("e")
    ))
    .bind(from)
    .bind(to)
    .fetch_one(pool)
    .await?;
    Ok(format!(
        "shape {}: {orders} orders in the window, {:.2} versions per order, {ties} ties, {rejected} events the rule rejects",
        shape.name(),
        events as f64 / orders.max(1) as f64
    ))
}

/// The window's events the rule accepts: each asks for one effect.
pub async fn accepted_in_window(pool: &PgPool) -> anyhow::Result<i64> {
    let (from, to) = window()?;
    Ok(sqlx::query_scalar(&format!(
        "select count(*) from evento_arquivado e where e.ocorrido_em >= $1 and e.ocorrido_em < $2 and {}",
        accepted_sql("e")
    ))
    .bind(from)
    .bind(to)
    .fetch_one(pool)
    .await?)
}

/// `comissao` as the buggy consumer left it (per order the newest accepted event, the highest
/// version and then position, as the version guard lets win, divided by 1000; an event the rule
/// rejects wrote nothing), rewritten from scratch so every measurement starts from the same wrong
/// table, without the dead rows of the one before; and every table vacuumed, so no measurement
/// shares the machine with autovacuum working off what the one before wrote (a simulation's
/// million diff rows, a real run's corrections).
pub async fn buggy_state(pool: &PgPool) -> anyhow::Result<()> {
    sqlx::query("truncate comissao").execute(pool).await?;
    sqlx::query(&format!(
        r#"
        insert into comissao (pedido_id, valor_centavos, versao_evento)
        select distinct on (pedido_id) pedido_id,
               round(((payload->>'valorCentavos')::numeric * (payload->>'percentual')::numeric)
                     / 1000),
               versao
        from evento_arquivado e
        where {}
        order by pedido_id, versao desc, posicao desc
        "#,
        accepted_sql("e")
    ))
    .execute(pool)
    .await?;
    sqlx::query("vacuum analyze").execute(pool).await?;
    Ok(())
}

/// Every effect of the archive registered as done by the live consumer.
pub async fn register_all(pool: &PgPool) -> anyhow::Result<()> {
    sqlx::query("truncate efeito_aplicado, efeito_tentativa")
        .execute(pool)
        .await?;
    sqlx::query(
        r#"
        insert into efeito_aplicado (chave, evento_id, tipo_efeito, estado, execucao_id)
        select id || ':notificar-vendedor', id, 'notificar-vendedor', 'concluido', 'ao-vivo'
        from evento_arquivado
        "#,
    )
    .execute(pool)
    .await?;
    sqlx::query("vacuum analyze efeito_aplicado")
        .execute(pool)
        .await?;
    Ok(())
}

/// No effect registered: a run must perform every one.
pub async fn register_none(pool: &PgPool) -> anyhow::Result<()> {
    sqlx::query("truncate efeito_aplicado, efeito_tentativa")
        .execute(pool)
        .await?;
    Ok(())
}

/// What `comissao` holds, as one comparable value: two runs that leave the same table agree.
pub async fn state_fingerprint(pool: &PgPool) -> anyhow::Result<String> {
    let mut conn = pool.acquire().await?;
    table_fingerprint(&mut conn, "comissao").await
}

/// What a table of `comissao`'s columns holds, as one comparable value: its rows, their sum and
/// an order-free hash of every row.
pub async fn table_fingerprint(
    conn: &mut sqlx::PgConnection,
    table: &str,
) -> anyhow::Result<String> {
    Ok(sqlx::query_scalar(&format!(
        r#"
        select count(*)::text || ' rows, sum ' || coalesce(sum(valor_centavos), 0)::text
               || ', hash ' || coalesce(sum(hashtextextended(
                    pedido_id || ':' || valor_centavos || ':' || versao_evento, 0)::numeric), 0)
                 ::text
        from {table}
        "#
    ))
    .fetch_one(conn)
    .await?)
}
