//! What PostgreSQL itself can do with the same data, measured beside the engine: the whole
//! window's correction in one statement, the hand-written batched floor, the seed's per-event
//! round trips.

use std::collections::HashMap;
use std::time::Instant;

use sqlx::PgPool;

use crate::data;
use crate::Measured;

/// What the window's correction wrote: the orders whose row changed and the sum of their new
/// values, in cents (what a simulation of the window counts as `orders_changed` and
/// `total_after_centavos`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    pub orders: i64,
    pub after_cents: i64,
}

/// The real limit: the window's correction in **one statement**, no round trips. The window read
/// once, the commission rule in SQL ([`data::accepted_sql`]: JavaScript's `Math.round`, halves
/// toward +∞, and the events the rule rejects skipped), the newest accepted version per order
/// (the last event among equal versions), the version-guarded upsert that skips identical rows,
/// and the reservation of every accepted event's effect not yet in the ledger (an anti-join).
pub async fn one_statement(pool: &PgPool) -> anyhow::Result<(Measured, Written)> {
    let (from, to) = data::window()?;
    let t = Instant::now();
    let (events, written, after_cents, reserved): (i64, i64, i64, i64) = sqlx::query_as(&format!(
        r#"
        with janela as (
            select posicao, id, pedido_id, versao,
                   case when {accepted} then {exact} end as exato
            from evento_arquivado e
            where ocorrido_em >= $1 and ocorrido_em < $2 and tipo = 'pedido.pago'
        ),
        novas as (
            select distinct on (pedido_id) pedido_id, versao, {valor} as valor
            from janela
            where exato is not null
            order by pedido_id, versao desc, posicao desc
        ),
        gravadas as (
            insert into comissao (pedido_id, valor_centavos, versao_evento)
            select pedido_id, valor, versao from novas
            on conflict (pedido_id) do update
            set valor_centavos = excluded.valor_centavos,
                versao_evento = excluded.versao_evento,
                atualizado_em = now()
            where comissao.versao_evento <= excluded.versao_evento
              and (comissao.valor_centavos, comissao.versao_evento)
                  is distinct from (excluded.valor_centavos, excluded.versao_evento)
            returning valor_centavos
        ),
        reservadas as (
            insert into efeito_aplicado (chave, evento_id, tipo_efeito, estado, execucao_id)
            select j.id || ':notificar-vendedor', j.id, 'notificar-vendedor', 'reservado',
                   'referencia'
            from janela j
            where j.exato is not null
              and not exists (select 1 from efeito_aplicado e
                              where e.chave = j.id || ':notificar-vendedor')
            on conflict (chave) do nothing
            returning 1
        )
        select (select count(*) from janela), (select count(*) from gravadas),
               (select coalesce(sum(valor_centavos), 0)::bigint from gravadas),
               (select count(*) from reservadas)
        "#,
        accepted = data::accepted_sql("e"),
        exact = data::exact_sql("e"),
        valor = data::rounded_sql("exato"),
    ))
    .bind(from)
    .bind(to)
    .fetch_one(pool)
    .await?;
    let secs = t.elapsed().as_secs_f64();
    println!(
        "(r) one statement: {events} events in {secs:.2} s; {written} orders written (sum {after_cents} cents), {reserved} effects reserved"
    );
    let measured = Measured::new(
        "(r) one statement in PostgreSQL (the reference)",
        events,
        secs,
    );
    let written = Written {
        orders: written,
        after_cents,
    };
    Ok((measured, written))
}

/// (d) The batched floor: the database work of a real run by hand, batch for batch: keyset
/// read, the before-values locked, the version-guarded upsert of the batch reduced to the newest
/// accepted version per order, the corrections recorded, the set-based reservation of the
/// accepted events' effects, the checkpoint; one transaction per batch.
pub async fn floor(pool: &PgPool, batch: i64) -> anyhow::Result<Measured> {
    let (from, to) = data::window()?;
    let (first, last): (i64, i64) = sqlx::query_as("select min(posicao), max(posicao) from evento_arquivado where ocorrido_em >= $1 and ocorrido_em < $2")
        .bind(from)
        .bind(to)
        .fetch_one(pool)
        .await?;
    let t = Instant::now();
    let mut after = first - 1;
    let mut total = 0i64;
    loop {
        let rows: Vec<data::EventRow> = sqlx::query_as(
            "select posicao, id, tipo, pedido_id, versao, payload, ocorrido_em from evento_arquivado where posicao > $1 and posicao <= $2 and ocorrido_em >= $3 and ocorrido_em < $4 order by posicao limit $5",
        )
        .bind(after)
        .bind(last)
        .bind(from)
        .bind(to)
        .bind(batch)
        .persistent(false)
        .fetch_all(pool)
        .await?;
        let Some(end) = rows.last().map(|r| r.0) else {
            break;
        };
        total += rows.len() as i64;
        // The events the rule accepts, with their commission: a rejected one writes nothing
        // and asks for no effect.
        let accepted: Vec<(&data::EventRow, i64)> = rows
            .iter()
            .filter_map(|r| data::rule(&r.1, &r.3, &r.5).map(|v| (r, v)))
            .collect();
        let mut newest: HashMap<&str, (i64, i64)> = HashMap::new();
        for (r, v) in &accepted {
            let e = newest.entry(&r.3).or_insert((*v, r.4));
            if r.4 >= e.1 {
                *e = (*v, r.4);
            }
        }
        let mut ids: Vec<&str> = newest.keys().copied().collect();
        ids.sort_unstable();
        let vals: Vec<i64> = ids.iter().map(|i| newest[i].0).collect();
        let vers: Vec<i64> = ids.iter().map(|i| newest[i].1).collect();
        let keys: Vec<String> = accepted
            .iter()
            .map(|(r, _)| format!("{}:notificar-vendedor", r.1))
            .collect();
        let evs: Vec<&str> = accepted.iter().map(|(r, _)| r.1.as_str()).collect();
        let mut tx = pool.begin().await?;
        let current: Vec<(String, i64, i64)> = sqlx::query_as("select pedido_id, valor_centavos, versao_evento from comissao where pedido_id = any($1) order by pedido_id for update")
            .bind(&ids)
            .fetch_all(&mut *tx)
            .await?;
        let before: HashMap<&str, i64> = current.iter().map(|(p, v, _)| (p.as_str(), *v)).collect();
        let written: Vec<String> = sqlx::query_scalar(
            "insert into comissao (pedido_id, valor_centavos, versao_evento) select * from unnest($1::text[], $2::bigint[], $3::bigint[]) on conflict (pedido_id) do update set valor_centavos = excluded.valor_centavos, versao_evento = excluded.versao_evento, atualizado_em = now() where comissao.versao_evento <= excluded.versao_evento and (comissao.valor_centavos, comissao.versao_evento) is distinct from (excluded.valor_centavos, excluded.versao_evento) returning pedido_id",
        )
        .bind(&ids)
        .bind(&vals)
        .bind(&vers)
        .fetch_all(&mut *tx)
        .await?;
        let changed: Vec<&String> = written
            .iter()
            .filter(|p| before.get(p.as_str()) != Some(&newest[p.as_str()].0))
            .collect();
        let antes: Vec<Option<i64>> = changed
            .iter()
            .map(|p| before.get(p.as_str()).copied())
            .collect();
        let depois: Vec<i64> = changed.iter().map(|p| newest[p.as_str()].0).collect();
        let versoes: Vec<i64> = changed.iter().map(|p| newest[p.as_str()].1).collect();
        sqlx::query(
            "insert into reprocessamento_correcao (execucao_id, pedido_id, antes, depois, versao_evento) select 'floor', * from unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[]) on conflict (execucao_id, pedido_id) do update set depois = excluded.depois, versao_evento = excluded.versao_evento, atualizado_em = now()",
        )
        .bind(&changed)
        .bind(&antes)
        .bind(&depois)
        .bind(&versoes)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "insert into efeito_aplicado (chave, evento_id, tipo_efeito, estado, execucao_id) select k, e, 'notificar-vendedor', 'reservado', 'floor' from unnest($1::text[], $2::text[]) as u(k, e) on conflict (chave) do nothing returning chave",
        )
        .bind(&keys)
        .bind(&evs)
        .fetch_all(&mut *tx)
        .await?;
        sqlx::query("insert into reprocessamento_checkpoint (execucao_id, ultima_posicao) values ('floor', $1) on conflict (execucao_id) do update set ultima_posicao = excluded.ultima_posicao, atualizado_em = now()")
            .bind(end)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        after = end;
    }
    let secs = t.elapsed().as_secs_f64();
    println!("(d) floor: {total} events in {secs:.2} s");
    Ok(Measured::new("(d) batched SQL floor, by hand", total, secs))
}

/// (e) The seed's applier: per event an upsert and a reservation, each its own round trip and
/// commit, as `aplicador.js` does with `pool.query`.
pub async fn seed_approach(pool: &PgPool, sample: i64) -> anyhow::Result<Measured> {
    type Row = (String, String, i64, serde_json::Value);
    let (from, _) = data::window()?;
    let rows: Vec<Row> = sqlx::query_as(
        "select id, pedido_id, versao, payload from evento_arquivado where ocorrido_em >= $1 order by posicao limit $2",
    )
    .bind(from)
    .bind(sample)
    .fetch_all(pool)
    .await?;
    let t = Instant::now();
    for (id, pedido, versao, payload) in &rows {
        // The seed's applier throws on a payload the rule rejects: nothing written for it.
        let Some(valor) = data::rule(id, pedido, payload) else {
            continue;
        };
        sqlx::query("insert into comissao (pedido_id, valor_centavos, versao_evento) values ($1, $2, $3) on conflict (pedido_id) do update set valor_centavos = excluded.valor_centavos, versao_evento = excluded.versao_evento, atualizado_em = now() where comissao.versao_evento <= excluded.versao_evento")
            .bind(pedido)
            .bind(valor)
            .bind(versao)
            .execute(pool)
            .await?;
        sqlx::query("insert into efeito_aplicado (chave, evento_id, tipo_efeito, estado, execucao_id) values ($1, $2, 'notificar-vendedor', 'reservado', 'seed') on conflict (chave) do update set execucao_id = excluded.execucao_id, atualizado_em = now() where efeito_aplicado.estado = 'reservado' and efeito_aplicado.atualizado_em < now() - interval '5 minutes' returning chave")
            .bind(format!("{id}:notificar-vendedor"))
            .bind(id)
            .fetch_optional(pool)
            .await?;
    }
    let secs = t.elapsed().as_secs_f64();
    println!(
        "(e) seed's per-event approach: {} events in {secs:.2} s",
        rows.len()
    );
    Ok(Measured::new(
        "(e) the seed's per-event round trips (sample)",
        rows.len() as i64,
        secs,
    ))
}
