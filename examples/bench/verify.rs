//! (v) `verify` over the whole archive (the window and the days around it) beside (w) the same
//! per-day counts by one hand-written statement, measured in the same run: the engine's rate,
//! the ratio (target ≥ 0.7) and its peak RSS (target < 200 MB at 10,000,000 events).

use std::time::Instant;

use chrono::NaiveDate;
use replay_ledger::services::verify::{self, Progress, Request};
use replay_ledger_core::config::{JobKind, LoadedConfig};
use replay_ledger_core::engine::applier::Policy;
use sqlx::PgPool;

use crate::data::{self, Shape};
use crate::{measure, Measured};

/// Per day: events, orders, wrong, missing, difference, effects missing, incerto.
type Days = Vec<(NaiveDate, [i64; 7])>;

/// A day's row of the floor's statement.
type FloorRow = (NaiveDate, i64, i64, i64, i64, i64, i64, i64);

/// The days verified: every generated event falls in them (São Paulo).
fn request(loaded: &LoadedConfig) -> anyhow::Result<Request> {
    let job = loaded
        .job("bench-b")
        .ok_or_else(|| anyhow::anyhow!("bench-b"))?;
    let JobKind::Replay(replay) = &job.kind else {
        anyhow::bail!("bench-b is a replay job");
    };
    Ok(Request {
        from: NaiveDate::from_ymd_opt(2026, 10, 13).expect("a day"),
        to: NaiveDate::from_ymd_opt(2026, 10, 16).expect("a day"),
        timezone: chrono_tz::America::Sao_Paulo,
        policy: Some(Policy::from(replay)),
    })
}

/// Both measurements, from `comissao` as the bug left it and every effect registered; the
/// counts of both must agree.
pub async fn both(
    pool: &PgPool,
    loaded: &LoadedConfig,
    shape: Shape,
    results: &mut Vec<Measured>,
) -> anyhow::Result<()> {
    data::buggy_state(pool).await?;
    data::register_all(pool).await?;
    let request = request(loaded)?;
    let mut engine_days = Days::new();
    let engine = measure(async {
        let t = Instant::now();
        let found = verify::verify(pool, &request, &mut Progress::quiet()).await?;
        let secs = t.elapsed().as_secs_f64();
        engine_days = found
            .days
            .iter()
            .map(|d| {
                let c = d.counts;
                let n = |v: u64| v as i64;
                let counts = [
                    n(c.events),
                    n(c.orders),
                    n(c.orders_wrong),
                    n(c.orders_missing),
                    c.difference_cents,
                    n(c.effects_missing),
                    n(c.effects_uncertain),
                ];
                (d.day, counts)
            })
            .filter(|(_, c)| c.iter().any(|v| *v != 0))
            .collect();
        Ok(Measured::new(
            "(v) verify, whole archive, every order wrong",
            found.totals.events as i64,
            secs,
        ))
    })
    .await?;
    let mut floor_days = Days::new();
    let floor = measure(async {
        let t = Instant::now();
        floor_days = one_statement(pool, &request).await?;
        let events = floor_days.iter().map(|(_, c)| c[0]).sum();
        let label = "(w) verify's floor: one hand-written statement";
        Ok(Measured::new(label, events, t.elapsed().as_secs_f64()))
    })
    .await?;
    anyhow::ensure!(
        engine_days == floor_days,
        "verify and its floor disagree:\n{engine_days:?}\n{floor_days:?}"
    );
    println!(
        "(v) on the {} archive: {:.0} events/s, peak RSS {} MB; (w) {:.0} events/s; (v)/(w) = {:.2} (target >= 0.7); days agree: {}",
        shape.name(),
        engine.rate(),
        engine.rss_mb,
        floor.rate(),
        engine.rate() / floor.rate(),
        engine_days.len()
    );
    results.extend([engine, floor]);
    Ok(())
}

/// The same counts as `verify`, per day, in one statement: each order's newest event the rule
/// accepts (highest version, then position; [`data::accepted_sql`]: the rule in SQL, halves toward
/// +∞, a rejected event skipped so the next older one decides) against its row, and each
/// accepted event's ledger key (a rejected event asks for no effect).
async fn one_statement(pool: &PgPool, request: &Request) -> anyhow::Result<Days> {
    let (from, to) = request.bounds();
    let rows: Vec<FloorRow> = sqlx::query_as(&format!(
        r#"
        with newest as (
            select distinct on (e.pedido_id) e.pedido_id, e.versao, e.ocorrido_em,
                   {exact} as exato
            from evento_arquivado e
            where e.tipo = 'pedido.pago' and {accepted}
              and e.pedido_id in (select pedido_id from evento_arquivado
                                  where tipo = 'pedido.pago' and ocorrido_em >= $1 and ocorrido_em < $2)
            order by e.pedido_id, e.versao desc, e.posicao desc
        ),
        expected as (
            select pedido_id, versao, ocorrido_em, {valor} as valor
            from newest where ocorrido_em >= $1 and ocorrido_em < $2
        ),
        orders as (
            select (x.ocorrido_em at time zone $3)::date as day, count(*) as orders,
                   count(*) filter (where c.pedido_id is not null
                     and (c.valor_centavos, c.versao_evento) is distinct from (x.valor, x.versao)) as wrong,
                   count(*) filter (where c.pedido_id is null) as missing,
                   coalesce(sum(x.valor - coalesce(c.valor_centavos, 0)), 0)::bigint as difference
            from expected x left join comissao c on c.pedido_id = x.pedido_id
            group by 1
        ),
        events as (
            select (e.ocorrido_em at time zone $3)::date as day, count(*) as events,
                   count(*) filter (where e.tipo = 'pedido.pago' and l.chave is null
                                      and {accepted}) as missing,
                   count(*) filter (where l.estado = 'incerto' and {accepted}) as uncertain
            from evento_arquivado e
            left join efeito_aplicado l on l.chave = e.id || ':notificar-vendedor'
            where e.ocorrido_em >= $1 and e.ocorrido_em < $2
            group by 1
        )
        select day, coalesce(v.events, 0), coalesce(o.orders, 0), coalesce(o.wrong, 0),
               coalesce(o.missing, 0), coalesce(o.difference, 0), coalesce(v.missing, 0),
               coalesce(v.uncertain, 0)
        from events v full join orders o using (day)
        order by day
        "#,
        accepted = data::accepted_sql("e"),
        exact = data::exact_sql("e"),
        valor = data::rounded_sql("exato"),
    ))
    .bind(from)
    .bind(to)
    .bind(request.timezone.name())
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(day, a, b, c, d, e, f, g)| (day, [a, b, c, d, e, f, g]))
        .collect())
}
