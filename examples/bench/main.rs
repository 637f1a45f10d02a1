//! The benchmark harness: events/s of the engine beside the set-based SQL floor, measured in the
//! same run on the same data.
//!
//! `cargo run --release --example bench -- --events 1000000`
//!
//! It generates N `pedido.pago` events of 2026-10-14 (plus N/10 on the day before and after, so
//! the window is a slice of the archive) in a scratch database on `DATABASE_URL`'s server (or a
//! throwaway cluster when it is unset), with `comissao` holding the buggy values, then measures:
//!
//! - (a) a simulation;
//! - (b) a real run whose effects are all already registered;
//! - (c) a real run whose effects all go to a loopback webhook that answers at once;
//! - (d) the floor: the same database work as (b) by hand-written set-based SQL, batch for batch;
//! - (e) the seed's approach: per-event round trips (upsert, reserve), on a sample.
//!
//! and prints events/s, the ratios (a)/(d), (b)/(d), (b)/(e), peak RSS and PostgreSQL's settings.

use std::str::FromStr;
use std::time::Instant;

use anyhow::Context;
use clap::Parser;
use replay_ledger::config::{self, JobKind};
use replay_ledger::db;
use replay_ledger::effects::Effects;
use replay_ledger::runner::{self, RunnerConfig};
use replay_ledger::shutdown::Shutdown;
use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, PgPool};
use testkit::pgtemp::TempCluster;
use testkit::sink::{Sink, SinkConfig};

#[derive(Debug, Parser)]
#[command(about = "Engine throughput beside the set-based SQL floor")]
struct Args {
    /// Events in the window.
    #[arg(long, default_value_t = 100_000)]
    events: i64,
    /// Batch size of the engine and the floor.
    #[arg(long, default_value_t = 5_000)]
    batch: i64,
    /// Events of the seed's per-event approach (it is slow; a sample says enough).
    #[arg(long, default_value_t = 10_000)]
    seed_sample: i64,
    /// Effect concurrency for (c).
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Skip (c), the run with effects.
    #[arg(long)]
    no_effects: bool,
    /// Keep the scratch database.
    #[arg(long)]
    keep: bool,
    /// Send (c)'s effects to this webhook instead of a sink inside the harness (e.g. one started
    /// with `cargo run --release --example sink`), so the harness's RSS is the engine's alone.
    #[arg(long)]
    sink_url: Option<String>,
    /// Internal: serve the loopback webhook (the harness starts itself this way, in a process of
    /// its own, so the sink's memory and CPU are not counted as the engine's RSS).
    #[arg(long, hide = true)]
    serve_sink: bool,
}

const DAY_START: &str = "2026-10-14T00:00:00-03:00";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.serve_sink {
        let sink = Sink::start(SinkConfig {
            record: false,
            ..SinkConfig::default()
        })
        .await?;
        println!("{}", sink.url());
        // Serve until the harness closes our stdin (or kills us).
        let mut line = String::new();
        let _ = tokio::io::AsyncBufReadExt::read_line(
            &mut tokio::io::BufReader::new(tokio::io::stdin()),
            &mut line,
        )
        .await;
        return Ok(());
    }
    let (cluster, admin_url) = match std::env::var("DATABASE_URL") {
        Ok(url) => (None, url),
        Err(_) => {
            let c = TempCluster::start().await?;
            let url = c.url();
            (Some(c), url)
        }
    };
    let name = format!("replay_ledger_bench_{}", std::process::id());
    let admin = PgConnectOptions::from_str(&admin_url)?;
    let mut conn = admin.connect().await?;
    sqlx::query(&format!("create database \"{name}\""))
        .execute(&mut conn)
        .await?;
    let mut url = url::Url::parse(&admin_url)?;
    url.set_path(&name);
    let url = url.to_string();
    let result = bench(&args, &url).await;
    if !args.keep {
        sqlx::query(&format!("drop database if exists \"{name}\" with (force)"))
            .execute(&mut conn)
            .await?;
    }
    drop(cluster);
    result
}

struct Measured {
    label: &'static str,
    events: i64,
    secs: f64,
}

impl Measured {
    fn rate(&self) -> f64 {
        self.events as f64 / self.secs.max(1e-9)
    }
}

async fn bench(args: &Args, url: &str) -> anyhow::Result<()> {
    let pool = db::connect(url, "bench").await?;
    db::migrate(&pool).await?;
    print_settings(&pool).await?;
    let t = Instant::now();
    generate(&pool, args.events).await?;
    println!(
        "generated {} events in the window (+{} around it) in {:.1} s",
        args.events,
        2 * (args.events / 10),
        t.elapsed().as_secs_f64()
    );
    println!("peak RSS after generation: {} MB", peak_rss_mb());
    print_batch_plan(&pool, args.batch).await?;

    // The webhook answers at once and keeps only counts, in a process of its own, so its memory
    // and work are not counted as the engine's.
    let mut sink_process = None;
    let sink_url = match &args.sink_url {
        Some(url) => url.clone(),
        None => {
            let mut child = tokio::process::Command::new(std::env::current_exe()?)
                .arg("--serve-sink")
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .kill_on_drop(true)
                .spawn()?;
            let stdout = child.stdout.take().context("sink stdout")?;
            let mut url = String::new();
            tokio::io::AsyncBufReadExt::read_line(&mut tokio::io::BufReader::new(stdout), &mut url)
                .await?;
            sink_process = Some(child);
            url.trim().to_string()
        }
    };
    let jobs = tempfile::tempdir()?;
    std::fs::write(
        jobs.path().join("effects.yaml"),
        format!("notificar-vendedor:\n  webhook:\n    url: {sink_url}\n    timeout: 10s\n  idempotent: true\n  concurrency: {}\n", args.concurrency),
    )?;
    std::fs::write(
        jobs.path().join("bench-p.yaml"),
        format!("name: bench-p\nwindow:\n  from: {DAY_START}\n  to: 2026-10-15T00:00:00-03:00\nbatch_size: {}\npartitions: 4\neffects:\n  notificar-vendedor: {{ mode: apply, on_failure: release }}\n", args.batch),
    )?;
    for job in ["bench-a", "bench-b", "bench-c"] {
        std::fs::write(
            jobs.path().join(format!("{job}.yaml")),
            format!("name: {job}\nwindow:\n  from: {DAY_START}\n  to: 2026-10-15T00:00:00-03:00\nbatch_size: {}\neffects:\n  notificar-vendedor: {{ mode: apply, on_failure: release }}\n", args.batch),
        )?;
    }
    let loaded = config::load_dir(jobs.path()).map_err(|e| anyhow::anyhow!("{e}"))?;
    let effects = Effects::from_catalog(&loaded.effects)?;
    let mut results = Vec::new();

    // (a) warms the cache for everyone after it.
    results.push(
        engine(
            &pool,
            url,
            &loaded,
            &effects,
            "bench-a",
            true,
            "(a) engine, simulation",
        )
        .await?,
    );
    register_all(&pool).await?;
    results.push(floor(&pool, args.batch).await?);
    results.push(
        engine(
            &pool,
            url,
            &loaded,
            &effects,
            "bench-b",
            false,
            "(b) engine, real run, effects already registered",
        )
        .await?,
    );
    results.push(seed_approach(&pool, args.seed_sample).await?);
    // (f) a simulation of the window split in 4 partitions, run by 1, 2 and 4 workers.
    let mut scaling = Vec::new();
    for workers in [1usize, 2, 4] {
        let job = loaded.job("bench-p").context("bench-p")?;
        let JobKind::Replay(replay) = &job.kind else {
            anyhow::bail!("not a replay job")
        };
        let config = RunnerConfig {
            simulate: Some(true),
            restart: true,
            workers,
            progress: false,
            started_by: "bench".into(),
            ..RunnerConfig::default()
        };
        let t = Instant::now();
        let report = runner::run(
            &pool,
            url,
            job,
            replay,
            effects.clone(),
            config,
            Shutdown::never(),
        )
        .await?;
        let secs = t.elapsed().as_secs_f64();
        println!(
            "(f) simulation in 4 partitions, {workers} worker(s): {} events in {secs:.2} s",
            report.events_this_run
        );
        scaling.push((workers, report.events_this_run as f64 / secs.max(1e-9)));
    }
    let rss_engine = peak_rss_mb();
    if !args.no_effects {
        sqlx::query("truncate efeito_aplicado, efeito_tentativa")
            .execute(&pool)
            .await?;
        let mut c = engine(
            &pool,
            url,
            &loaded,
            &effects,
            "bench-c",
            false,
            "(c) engine, real run, every effect to a loopback webhook",
        )
        .await?;
        c.label = "(c) engine, real run, every effect to a loopback webhook";
        println!(
            "    aplicado per the ledger: {}",
            sqlx::query_scalar::<_, i64>(
                "select count(*) from efeito_aplicado where estado = 'concluido'"
            )
            .fetch_one(&pool)
            .await?
        );
        results.push(c);
    }

    println!();
    println!(
        "{:<58} {:>10} {:>9} {:>12}",
        "measurement", "events", "seconds", "events/s"
    );
    for r in &results {
        println!(
            "{:<58} {:>10} {:>9.2} {:>12.0}",
            r.label,
            r.events,
            r.secs,
            r.rate()
        );
    }
    let get = |p: &str| {
        results
            .iter()
            .find(|r| r.label.starts_with(p))
            .map(Measured::rate)
            .unwrap_or(f64::NAN)
    };
    println!();
    println!(
        "(a)/(d) = {:.2}   (b)/(d) = {:.2}   (b)/(e) = {:.1}",
        get("(a)") / get("(d)"),
        get("(b)") / get("(d)"),
        get("(b)") / get("(e)")
    );
    let base = scaling.first().map_or(f64::NAN, |s| s.1);
    for (workers, rate) in &scaling {
        println!(
            "(f) 4 partitions, {workers} worker(s): {rate:.0} events/s, speed-up {:.2}",
            rate / base
        );
    }
    println!(
        "peak RSS: {} MB after (a),(b),(d),(e),(f); {} MB at the end",
        rss_engine,
        peak_rss_mb()
    );
    drop(sink_process);
    Ok(())
}

async fn engine(
    pool: &PgPool,
    url: &str,
    loaded: &config::LoadedConfig,
    effects: &Effects,
    job: &str,
    simulate: bool,
    label: &'static str,
) -> anyhow::Result<Measured> {
    let job = loaded.job(job).context("bench job")?;
    let JobKind::Replay(replay) = &job.kind else {
        anyhow::bail!("not a replay job")
    };
    let config = RunnerConfig {
        simulate: Some(simulate),
        progress: false,
        started_by: "bench".into(),
        ..RunnerConfig::default()
    };
    let t = Instant::now();
    let report = runner::run(
        pool,
        url,
        job,
        replay,
        effects.clone(),
        config,
        Shutdown::never(),
    )
    .await?;
    let secs = t.elapsed().as_secs_f64();
    println!(
        "{label}: {} events in {secs:.2} s; effects {:?}",
        report.events_this_run, report.summary.effects
    );
    Ok(Measured {
        label,
        events: report.events_this_run as i64,
        secs,
    })
}

/// The archive: a day before, the window, a day after; `comissao` with the bug (÷1000).
async fn generate(pool: &PgPool, n: i64) -> anyhow::Result<()> {
    let around = n / 10;
    let orders = (n * 4 / 5).max(1);
    sqlx::query(
        r#"
        insert into evento_arquivado (posicao, id, tipo, pedido_id, versao, payload, ocorrido_em)
        select g, 'evt-' || g, 'pedido.pago',
               case when g <= $2 then 'ped-old-' || g
                    when g > $2 + $1 then 'ped-new-' || g
                    else 'ped-' || ((g - $2 - 1) % $3) end,
               case when g <= $2 or g > $2 + $1 then 1 else 1 + (g - $2 - 1) / $3 end,
               jsonb_build_object('valorCentavos', 1000 + (g * 7919) % 500000,
                                  'percentual', (array[2.5, 5, 7.5, 10])[1 + g % 4]),
               $4::timestamptz + (g - $2 - 1) * (interval '86400 seconds' / $1)
        from generate_series(1, $1 + 2 * $2) as g
        "#,
    )
    .bind(n)
    .bind(around)
    .bind(orders)
    .bind(chrono::DateTime::parse_from_rfc3339(DAY_START)?)
    .execute(pool)
    .await?;
    buggy_comissao(pool).await?;
    sqlx::query("analyze").execute(pool).await?;
    Ok(())
}

/// `comissao` as the buggy consumer left it: per order the newest version, divided by 1000.
async fn buggy_comissao(pool: &PgPool) -> anyhow::Result<()> {
    sqlx::query(
        r#"
        insert into comissao (pedido_id, valor_centavos, versao_evento)
        select distinct on (pedido_id) pedido_id,
               round(((payload->>'valorCentavos')::numeric * (payload->>'percentual')::numeric) / 1000),
               versao
        from evento_arquivado order by pedido_id, versao desc
        on conflict (pedido_id) do update
        set valor_centavos = excluded.valor_centavos, versao_evento = excluded.versao_evento
        "#,
    )
    .execute(pool)
    .await?;
    Ok(())
}

/// Every effect of the window registered as done by the live consumer, for (b) and (d).
async fn register_all(pool: &PgPool) -> anyhow::Result<()> {
    sqlx::query(
        r#"
        insert into efeito_aplicado (chave, evento_id, tipo_efeito, estado, execucao_id)
        select id || ':notificar-vendedor', id, 'notificar-vendedor', 'concluido', 'ao-vivo'
        from evento_arquivado on conflict do nothing
        "#,
    )
    .execute(pool)
    .await?;
    sqlx::query("analyze efeito_aplicado").execute(pool).await?;
    Ok(())
}

/// (d) The floor: the database work of (b), by hand, batch for batch: keyset read, the
/// before-values locked, the version-guarded upsert of the batch reduced to the newest version
/// per order, the corrections recorded, the set-based reservation, the checkpoint; one
/// transaction per batch.
async fn floor(pool: &PgPool, batch: i64) -> anyhow::Result<Measured> {
    let (from, to): (chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>) = (
        chrono::DateTime::parse_from_rfc3339(DAY_START)?.into(),
        chrono::DateTime::parse_from_rfc3339("2026-10-15T00:00:00-03:00")?.into(),
    );
    let (first, last): (i64, i64) = sqlx::query_as("select min(posicao), max(posicao) from evento_arquivado where ocorrido_em >= $1 and ocorrido_em < $2")
        .bind(from)
        .bind(to)
        .fetch_one(pool)
        .await?;
    let t = Instant::now();
    let mut after = first - 1;
    let mut total = 0i64;
    loop {
        type Row = (
            i64,
            String,
            String,
            String,
            i64,
            serde_json::Value,
            chrono::DateTime<chrono::Utc>,
        );
        let rows: Vec<Row> = sqlx::query_as(
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
        let mut newest: std::collections::HashMap<&str, (i64, i64)> =
            std::collections::HashMap::new();
        for r in &rows {
            let v = ((r.5["valorCentavos"].as_f64().unwrap_or(0.0)
                * r.5["percentual"].as_f64().unwrap_or(0.0))
                / 100.0)
                .round() as i64;
            let e = newest.entry(&r.3).or_insert((v, r.4));
            if r.4 >= e.1 {
                *e = (v, r.4);
            }
        }
        let mut ids: Vec<&str> = newest.keys().copied().collect();
        ids.sort_unstable();
        let vals: Vec<i64> = ids.iter().map(|i| newest[i].0).collect();
        let vers: Vec<i64> = ids.iter().map(|i| newest[i].1).collect();
        let keys: Vec<String> = rows
            .iter()
            .map(|r| format!("{}:notificar-vendedor", r.1))
            .collect();
        let evs: Vec<&str> = rows.iter().map(|r| r.1.as_str()).collect();
        let mut tx = pool.begin().await?;
        let current = sqlx::query_as("select pedido_id, valor_centavos, versao_evento from comissao where pedido_id = any($1) order by pedido_id for update")
            .bind(&ids)
            .fetch_all(&mut *tx)
            .await?;
        let current: Vec<(String, i64, i64)> = current;
        let before: std::collections::HashMap<&str, i64> =
            current.iter().map(|(p, v, _)| (p.as_str(), *v)).collect();
        let written: Vec<String> = sqlx::query_scalar(
            "insert into comissao (pedido_id, valor_centavos, versao_evento) select * from unnest($1::text[], $2::bigint[], $3::bigint[]) on conflict (pedido_id) do update set valor_centavos = excluded.valor_centavos, versao_evento = excluded.versao_evento, atualizado_em = now() where comissao.versao_evento <= excluded.versao_evento and (comissao.valor_centavos, comissao.versao_evento) is distinct from (excluded.valor_centavos, excluded.versao_evento) returning pedido_id",
        )
        .bind(&ids)
        .bind(&vals)
        .bind(&vers)
        .fetch_all(&mut *tx)
        .await?;
        // The corrections a real run records for its report: the orders whose value changed.
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
    Ok(Measured {
        label: "(d) set-based SQL floor, by hand",
        events: total,
        secs,
    })
}

/// (e) The seed's applier: per event an upsert and a reservation, each its own round trip and
/// commit, as `aplicador.js` does with `pool.query`.
async fn seed_approach(pool: &PgPool, sample: i64) -> anyhow::Result<Measured> {
    type Row = (String, String, i64, serde_json::Value);
    let rows: Vec<Row> = sqlx::query_as(
        "select id, pedido_id, versao, payload from evento_arquivado where ocorrido_em >= $1 order by posicao limit $2",
    )
    .bind(chrono::DateTime::parse_from_rfc3339(DAY_START)?)
    .bind(sample)
    .fetch_all(pool)
    .await?;
    let t = Instant::now();
    for (id, pedido, versao, payload) in &rows {
        let valor = replay_ledger::domain::calcular_comissao(payload).unwrap_or(0);
        sqlx::query("insert into comissao (pedido_id, valor_centavos, versao_evento) values ($1, $2, $3) on conflict (pedido_id) do update set valor_centavos = excluded.valor_centavos, versao_evento = excluded.versao_evento, atualizado_em = now() where comissao.versao_evento <= excluded.versao_evento")
            .bind(pedido)
            .bind(valor)
            .bind(versao)
            .execute(pool)
            .await?;
        sqlx::query("insert into efeito_aplicado (chave, evento_id, tipo_efeito, estado, execucao_id) values ($1, $2, 'notificar-vendedor', 'reservado', 'seed') on conflict (chave) do update set execucao_id = excluded.execucao_id, atualizado_em = now() where efeito_aplicado.estado = 'reservado' and true and efeito_aplicado.atualizado_em < now() - interval '5 minutes' returning chave")
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
    Ok(Measured {
        label: "(e) the seed's per-event round trips (sample)",
        events: rows.len() as i64,
        secs,
    })
}

/// The plan of the engine's batch read, with real values: the window is a slice of the archive,
/// found through an index, never a scan of the whole archive.
async fn print_batch_plan(pool: &PgPool, batch: i64) -> anyhow::Result<()> {
    let from: chrono::DateTime<chrono::Utc> =
        chrono::DateTime::parse_from_rfc3339(DAY_START)?.into();
    let to = from + chrono::Duration::days(1);
    let (first, last): (i64, i64) = sqlx::query_as(
        "select min(posicao), max(posicao) from evento_arquivado where ocorrido_em >= $1 and ocorrido_em < $2",
    )
    .bind(from)
    .bind(to)
    .fetch_one(pool)
    .await?;
    let plan: Vec<String> = sqlx::query_scalar(
        r#"
        explain (costs off)
        select posicao, id, tipo, pedido_id, versao, payload, ocorrido_em
        from evento_arquivado
        where posicao >= $1 and posicao <= $2 and ocorrido_em >= $3 and ocorrido_em < $4
          and ($6::int4 is null or particao_do_pedido(pedido_id, $7::int4) = $6)
        order by posicao
        limit $5
        "#,
    )
    .bind(first)
    .bind(last)
    .bind(from)
    .bind(to)
    .bind(batch)
    .bind(None::<i32>)
    .bind(1i32)
    .persistent(false)
    .fetch_all(pool)
    .await?;
    println!("plan of a batch read (the engine's query, with its values):");
    for line in plan {
        println!("  {line}");
    }
    Ok(())
}

async fn print_settings(pool: &PgPool) -> anyhow::Result<()> {
    let rows: Vec<(String, String, Option<String>)> = sqlx::query_as(
        "select name, setting, unit from pg_settings where name in ('server_version', 'shared_buffers', 'fsync', 'synchronous_commit', 'work_mem', 'max_wal_size', 'wal_level') order by name",
    )
    .fetch_all(pool)
    .await?;
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    println!("machine: {cores} cores; PostgreSQL settings:");
    for (name, setting, unit) in rows {
        println!(
            "  {name} = {setting}{}",
            unit.map(|u| format!(" ({u})")).unwrap_or_default()
        );
    }
    Ok(())
}

/// Peak resident set size of this process (VmHWM), in MB.
fn peak_rss_mb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb / 1024)
}
