//! The benchmark harness: events/s of the engine beside what PostgreSQL itself can do with the
//! same data, measured in the same run.
//!
//! `cargo run --release --example bench -- --events 1000000 [--shape adjacent|spread]`
//!
//! It generates N `pedido.pago` events of 2026-10-14 (plus N/10 on the day before and after, so
//! the window is a slice of the archive) by SQL, in a scratch database on `DATABASE_URL`'s server
//! (or a throwaway cluster when it is unset), with `comissao` holding the buggy values. The
//! window's shape (`--shape`, see [`data::Shape`]): `adjacent` (default), 4N/5 orders, a second
//! version for N/5 of them, consecutive events on consecutive orders; or `spread`, 2N/5 orders
//! with 2.5 versions each scattered over the window, some ties of version and some events the
//! rule rejects. Then it measures, each from the same wrong `comissao`:
//!
//! - (r) the reference: the whole window's correction in one statement, no round trips;
//! - (a) the engine's simulation (the orders it would change and their sum agree with (r)'s);
//! - (b) the engine's real run, every effect already registered (leaves `comissao` as (r) does);
//! - (d) the batched floor: the database work of (b) by hand-written SQL, batch for batch (leaves
//!   `comissao` as (r) does);
//! - (e) the seed's approach: per-event round trips (upsert, reserve), on a sample;
//! - (f) a simulation in 4 partitions run by 1, 2 and 4 workers;
//! - (h) the HTTP reference: the loopback sink driven by a minimal keep-alive client at the
//!   engine's concurrency, no database;
//! - (c) the engine's real run with every effect missing, each call to that sink;
//! - (g) the same with `comissao` already right: the effects alone, beside (h);
//! - (j) and (k) an effect's floor: the window read alone, by hand, and each effect's reservation
//!   and completion by the ledger's own functions (completions in groups of 50 and of 1000), no
//!   call and no engine;
//! - (p) the plans of every statement of a real run, as PostgreSQL chose them;
//! - (v) `verify` over the whole archive, beside (w) its floor: the same counts in one statement;
//! - (x) `rebuild` of `comissao` over the whole archive, beside (y) one `INSERT … SELECT` of it;
//! - (t) `comissao --as-of` the window's middle (the table as the archive says it stood then),
//!   beside (u) its floor: the same rows by one `select distinct on`, streamed;
//!
//! and prints events/s, the ratios, the peak RSS of each measurement, the CPU time the whole
//! machine spent per event (every process: the harness, PostgreSQL and the webhook, so the cost
//! of an effect can be set beside the cost of a bare call) and PostgreSQL's settings.

mod as_of;
mod cost;
mod data;
mod effect_floor;
mod http;
mod plans;
mod rebuild;
mod reference;
mod verify;

use std::str::FromStr;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use replay_ledger_core::config;
use replay_ledger_core::engine::effects::Effects;
use replay_ledger_core::engine::plan::{Asked, Plan};
use replay_ledger_core::services::runner::{self, RunnerConfig};
use replay_ledger_core::shared::shutdown::{self, Shutdown};
use replay_ledger_core::shared::summary::Summary;
use replay_ledger_core::tables::db;
use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, PgPool};
use testkit::pgtemp::TempCluster;

use data::{Shape, DAY_END, DAY_START};

#[derive(Debug, Parser)]
#[command(about = "Engine throughput beside what PostgreSQL itself does with the same data")]
struct Args {
    /// Events in the window.
    #[arg(long, default_value_t = 100_000)]
    events: i64,
    /// How the window's events fall on orders: `adjacent`, 1.25 versions per order, consecutive
    /// events on consecutive orders; `spread`, 2.5 versions per order scattered over the window,
    /// with ties of version and events the rule rejects.
    #[arg(long, value_enum, default_value_t = Shape::Adjacent)]
    shape: Shape,
    /// Batch size of the engine and the floor.
    #[arg(long, default_value_t = 5_000)]
    batch: i64,
    /// Events of the seed's per-event approach (it is slow; a sample says enough).
    #[arg(long, default_value_t = 10_000)]
    seed_sample: i64,
    /// Effect concurrency for (c) and (h).
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Requests of the HTTP reference (h); default: as many as (c)'s effects, at most 300,000.
    #[arg(long)]
    http_requests: Option<i64>,
    /// Only these measurements, e.g. `--only r,b,h,c` (default: all of r,a,b,d,e,f,p,h,j,k,c,g,v,x,t).
    #[arg(long, value_delimiter = ',')]
    only: Vec<char>,
    /// How long (p) runs with every statement explained.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    plans_for: Duration,
    /// Keep the scratch database.
    #[arg(long)]
    keep: bool,
    /// Send the effects to this webhook instead of a sink the harness starts in a process of its
    /// own (e.g. one started with `cargo run --release --example sink`).
    #[arg(long)]
    sink_url: Option<String>,
    /// Internal: serve the loopback webhook (the harness starts itself this way).
    #[arg(long, hide = true)]
    serve_sink: bool,
}

impl Args {
    fn wants(&self, step: char) -> bool {
        self.only.is_empty() || self.only.contains(&step)
    }
}

/// The binary's allocator, so the engine is measured as it runs.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.serve_sink {
        return http::serve_sink().await;
    }
    plans::install();
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
    let result = bench(&args, &url, &mut conn, &name).await;
    if !args.keep {
        sqlx::query(&format!("drop database if exists \"{name}\" with (force)"))
            .execute(&mut conn)
            .await?;
    }
    drop(cluster);
    result
}

pub struct Measured {
    label: &'static str,
    events: i64,
    secs: f64,
    /// Peak RSS of this process during the measurement, in MB.
    rss_mb: u64,
    /// CPU seconds this process spent (user + system).
    cpu_secs: f64,
    /// CPU seconds the whole machine spent: this process, PostgreSQL, the webhook, anything else.
    machine_cpu_secs: f64,
    /// CPU seconds of the processes that did the work ([`cost`]): steady on a shared machine.
    procs_cpu_secs: f64,
}

impl Measured {
    pub fn new(label: &'static str, events: i64, secs: f64) -> Self {
        Measured {
            label,
            events,
            secs,
            rss_mb: 0,
            cpu_secs: 0.0,
            machine_cpu_secs: 0.0,
            procs_cpu_secs: 0.0,
        }
    }

    fn rate(&self) -> f64 {
        self.events as f64 / self.secs.max(1e-9)
    }

    /// CPU µs the processes that did the work spent per event.
    fn procs_us(&self) -> f64 {
        self.procs_cpu_secs * 1e6 / self.events.max(1) as f64
    }
}

/// Runs one measurement with this process's peak RSS reset before it and read after it.
async fn measure<F>(step: F) -> anyhow::Result<Measured>
where
    F: std::future::Future<Output = anyhow::Result<Measured>>,
{
    reset_peak_rss();
    let (cpu, machine, procs) = (cpu_secs(), machine_cpu_secs(), cost::read().await);
    let mut measured = step.await?;
    measured.rss_mb = peak_rss_mb();
    measured.cpu_secs = cpu_secs() - cpu;
    measured.machine_cpu_secs = machine_cpu_secs() - machine;
    measured.procs_cpu_secs = cost::read().await.since(&procs);
    Ok(measured)
}

async fn bench(
    args: &Args,
    url: &str,
    admin: &mut sqlx::PgConnection,
    database: &str,
) -> anyhow::Result<()> {
    let pool = db::connect(url, "bench").await?;
    db::migrate(&pool).await?;
    print_settings(&pool).await?;
    let t = Instant::now();
    data::generate(&pool, args.events, args.shape).await?;
    data::buggy_state(&pool).await?;
    println!(
        "generated {} events in the window (+{} around it) in {:.1} s, by SQL",
        args.events,
        2 * (args.events / 10),
        t.elapsed().as_secs_f64()
    );
    println!("{}", data::describe(&pool, args.shape).await?);
    println!("peak RSS after generation: {} MB", peak_rss_mb());

    let sink = http::start_sink(args.sink_url.as_deref()).await?;
    cost::install(pool.clone(), sink.pid);
    let jobs = tempfile::tempdir()?;
    std::fs::write(
        jobs.path().join("effects.yaml"),
        format!("notificar-vendedor:\n  webhook:\n    url: {}\n    timeout: 10s\n  idempotent: true\n  concurrency: {}\n", sink.url, args.concurrency),
    )?;
    std::fs::write(
        jobs.path().join("bench-f.yaml"),
        format!("name: bench-f\nwindow:\n  from: {DAY_START}\n  to: {DAY_END}\nbatch_size: {}\npartitions: 4\neffects:\n  notificar-vendedor: {{ mode: apply, on_failure: release }}\n", args.batch),
    )?;
    for job in ["bench-a", "bench-b", "bench-c", "bench-g", "bench-p"] {
        std::fs::write(
            jobs.path().join(format!("{job}.yaml")),
            format!("name: {job}\nwindow:\n  from: {DAY_START}\n  to: {DAY_END}\nbatch_size: {}\neffects:\n  notificar-vendedor: {{ mode: apply, on_failure: release }}\n", args.batch),
        )?;
    }
    let loaded = config::load_dir(jobs.path()).map_err(|e| anyhow::anyhow!("{e}"))?;
    let effects = Effects::from_catalog(&loaded.effects)?;
    let run_engine = |job: &'static str, simulate: bool, label: &'static str| {
        engine(
            &pool,
            url,
            &loaded,
            &effects,
            job,
            simulate,
            label,
            Shutdown::never(),
        )
    };
    let mut results = Vec::new();
    let mut reference_state = None;
    let mut reference_written = None;
    let mut simulated = None;

    data::register_all(&pool).await?;
    if args.wants('p') {
        explain_a_real_run(
            &pool,
            url,
            &loaded,
            &effects,
            admin,
            database,
            args.plans_for,
        )
        .await?;
        data::register_all(&pool).await?;
        data::buggy_state(&pool).await?;
    }
    if args.wants('a') {
        results.push(
            measure(async {
                let (measured, summary) =
                    run_engine("bench-a", true, "(a) engine, simulation").await?;
                simulated = Some(reference::Written {
                    orders: i64::try_from(summary.orders_changed)?,
                    after_cents: summary.total_after_centavos,
                });
                Ok(measured)
            })
            .await?,
        );
    }
    if args.wants('r') {
        data::buggy_state(&pool).await?;
        results.push(
            measure(async {
                let (measured, written) = reference::one_statement(&pool).await?;
                reference_written = Some(written);
                Ok(measured)
            })
            .await?,
        );
        reference_state = Some(data::state_fingerprint(&pool).await?);
    }
    match (simulated, reference_written) {
        (Some(a), Some(r)) if a == r => println!(
            "    (a) would change what (r) changed: {} orders, sum {} cents",
            a.orders, a.after_cents
        ),
        (Some(a), Some(r)) => {
            anyhow::bail!("(a) would change {a:?}, (r) changed {r:?}")
        }
        _ => {}
    }
    if args.wants('b') {
        data::buggy_state(&pool).await?;
        let label = "(b) engine, real run, effects already registered";
        results.push(measure(async { Ok(run_engine("bench-b", false, label).await?.0) }).await?);
        same_as_reference("(b)", &pool, reference_state.as_deref()).await?;
    }
    if args.wants('d') {
        data::buggy_state(&pool).await?;
        results.push(measure(reference::floor(&pool, args.batch)).await?);
        same_as_reference("(d)", &pool, reference_state.as_deref()).await?;
    }
    if args.wants('e') {
        results.push(measure(reference::seed_approach(&pool, args.seed_sample)).await?);
    }
    // (t) before (v) and (x): a measurement's peak RSS starts from what the process holds when
    // it starts, and the rebuild leaves memory the allocator has not given back yet.
    if args.wants('t') {
        as_of::both(&pool, args.shape, &mut results).await?;
    }
    if args.wants('v') {
        verify::both(&pool, &loaded, args.shape, &mut results).await?;
    }
    if args.wants('x') {
        rebuild::both(&pool, args.shape, &mut results).await?;
    }
    let mut scaling = Vec::new();
    if args.wants('f') {
        for workers in [1usize, 2, 4] {
            scaling.push((
                workers,
                partitions(&pool, url, &loaded, &effects, workers).await?,
            ));
        }
    }
    // One effect per event the rule accepts (every event, in the adjacent shape).
    let effects_run = data::accepted_in_window(&pool).await?;
    if args.wants('h') {
        let requests = args.http_requests.unwrap_or(effects_run.min(300_000));
        results.push(measure(http::reference(&sink.url, requests, args.concurrency)).await?);
    }
    if args.wants('j') {
        results.push(measure(effect_floor::window_read(&pool, args.batch)).await?);
    }
    if args.wants('k') {
        for group in effect_floor::GROUPS {
            results.push(measure(effect_floor::floor(&pool, args.batch, group)).await?);
        }
    }
    if args.wants('c') {
        data::buggy_state(&pool).await?;
        data::register_none(&pool).await?;
        let label = "(c) engine, real run, every effect to the loopback sink";
        results.push(measure(async { Ok(run_engine("bench-c", false, label).await?.0) }).await?);
        all_effects_done(&pool, effects_run).await?;
    }
    if args.wants('g') {
        // `comissao` is put right first (by the reference statement, not timed), so the run's
        // only work besides reading the window is the effects.
        println!("(g) first, not timed: comissao put right by the reference statement");
        data::buggy_state(&pool).await?;
        reference::one_statement(&pool).await?;
        data::register_none(&pool).await?;
        let label = "(g) engine, real run, effects alone, comissao right";
        let before = cost::Writes::read(&pool).await?;
        results.push(measure(async { Ok(run_engine("bench-g", false, label).await?.0) }).await?);
        cost::Writes::read(&pool)
            .await?
            .print_since(&before, effects_run);
        all_effects_done(&pool, effects_run).await?;
    }

    println!();
    println!(
        "{:<56} {:>10} {:>8} {:>11} {:>8} {:>8} {:>12} {:>10}",
        "measurement",
        "events",
        "seconds",
        "events/s",
        "CPU s",
        "RSS MB",
        "machine µs/ev",
        "procs µs/ev"
    );
    for r in &results {
        println!(
            "{:<56} {:>10} {:>8.2} {:>11.0} {:>8.2} {:>8} {:>12.1} {:>10.1}",
            r.label,
            r.events,
            r.secs,
            r.rate(),
            r.cpu_secs,
            r.rss_mb,
            r.machine_cpu_secs * 1e6 / r.events.max(1) as f64,
            r.procs_us()
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
        "(b)/(r) = {:.2}   (a)/(r) = {:.2}   (b)/(d) = {:.2}   (b)/(e) = {:.1}   effects (c)/(h) = {:.2}   (t)/(u) = {:.2}",
        get("(b)") / get("(r)"),
        get("(a)") / get("(r)"),
        get("(b)") / get("(d)"),
        get("(b)") / get("(e)"),
        get("(c)") / get("(h)"),
        get("(t)") / get("(u)"),
    );
    // (c) does (b)'s work and one call per event. Where both are bound by the same cores, their
    // times per event add up, so (c) can at best reach 1 / (1/(b) + 1/(h)).
    let ceiling = 1.0 / (1.0 / get("(b)") + 1.0 / get("(h)"));
    println!(
        "effects alone (g)/(h) = {:.2}   (c) at best, 1/(1/(b) + 1/(h)) = {ceiling:.0} events/s = {:.2} x (h); (c) reached {:.2} of it",
        get("(g)") / get("(h)"),
        ceiling / get("(h)"),
        get("(c)") / ceiling,
    );
    let procs_us = |p: &str| {
        results
            .iter()
            .find(|r| r.label.starts_with(p))
            .map_or(f64::NAN, Measured::procs_us)
    };
    println!(
        "CPU per effect (g) / per bare call (h), processes that did the work: {:.1} µs / {:.1} µs = {:.2} x",
        procs_us("(g)"),
        procs_us("(h)"),
        procs_us("(g)") / procs_us("(h)"),
    );
    let j = procs_us("(j)");
    for (_, k) in effect_floor::GROUPS {
        if results.iter().any(|r| r.label == k) {
            println!(
                "{k}: {:.1} µs per effect; a bare call, the window read (j) and these writes, ((h) + (j) + (k)) / (h) = {:.2} x",
                procs_us(k),
                (procs_us("(h)") + j + procs_us(k)) / procs_us("(h)"),
            );
        }
    }
    let base = scaling.first().map_or(f64::NAN, |s| s.1);
    for (workers, rate) in &scaling {
        println!(
            "(f) 4 partitions, {workers} worker(s): {rate:.0} events/s, speed-up {:.2}",
            rate / base
        );
    }
    drop(sink);
    Ok(())
}

/// `comissao` is as the reference (r) left it, when (r) ran.
async fn same_as_reference(
    step: &str,
    pool: &PgPool,
    reference: Option<&str>,
) -> anyhow::Result<()> {
    let state = data::state_fingerprint(pool).await?;
    match reference {
        Some(r) if r == state => println!("    comissao after {step} = after (r): {state}"),
        Some(r) => anyhow::bail!("comissao after {step} differs from (r): {state} vs {r}"),
        None => println!("    comissao after {step}: {state}"),
    }
    Ok(())
}

/// Every effect of the window is `concluido` in the ledger: one per event the rule accepts.
async fn all_effects_done(pool: &PgPool, expected: i64) -> anyhow::Result<()> {
    let done: i64 =
        sqlx::query_scalar("select count(*) from efeito_aplicado where estado = 'concluido'")
            .fetch_one(pool)
            .await?;
    println!("    effects done per the ledger: {done}");
    anyhow::ensure!(
        done == expected,
        "expected {expected} effects done, found {done}"
    );
    Ok(())
}

/// (f) A simulation of the window split in 4 partitions, run by `workers` workers; events/s.
async fn partitions(
    pool: &PgPool,
    url: &str,
    loaded: &config::LoadedConfig,
    effects: &Effects,
    workers: usize,
) -> anyhow::Result<f64> {
    let job = loaded.job("bench-f").context("bench-f")?;
    let asked = Asked {
        simulate: Some(true),
        restart: true,
        at: chrono::Utc::now(),
    };
    let plan = Plan::new(job, asked)?;
    let config = RunnerConfig {
        workers,
        progress: false,
        started_by: "bench".into(),
        ..RunnerConfig::default()
    };
    let t = Instant::now();
    let report = runner::run(pool, url, &plan, effects.clone(), config, Shutdown::never()).await?;
    let secs = t.elapsed().as_secs_f64();
    println!(
        "(f) simulation in 4 partitions, {workers} worker(s): {} events in {secs:.2} s",
        report.events_this_run
    );
    Ok(report.events_this_run as f64 / secs.max(1e-9))
}

/// (p) A real run over the whole window for a few seconds, with every statement explained: the
/// first events' effects are taken out of the ledger so the call path is explained too.
async fn explain_a_real_run(
    pool: &PgPool,
    url: &str,
    loaded: &config::LoadedConfig,
    effects: &Effects,
    admin: &mut sqlx::PgConnection,
    database: &str,
    run_for: Duration,
) -> anyhow::Result<()> {
    let (from, _) = data::window()?;
    sqlx::query(
        r#"
        delete from efeito_aplicado where evento_id in (
            select id from evento_arquivado where ocorrido_em >= $1 order by posicao limit 20000)
        "#,
    )
    .bind(from)
    .execute(pool)
    .await?;
    plans::explain_on(admin, database).await?;
    // New sessions load auto_explain: a pool of its own.
    let explained = db::connect(url, "bench").await?;
    let (trigger, stop) = shutdown::channel();
    tokio::spawn(async move {
        tokio::time::sleep(run_for).await;
        trigger.trigger();
    });
    let ran = engine(
        &explained, url, loaded, effects, "bench-p", false, "(p)", stop,
    )
    .await
    .map(|_| ());
    explained.close().await;
    plans::explain_off(admin, database).await?;
    ran?;
    plans::print();
    Ok(())
}

#[allow(clippy::too_many_arguments)]
async fn engine(
    pool: &PgPool,
    url: &str,
    loaded: &config::LoadedConfig,
    effects: &Effects,
    job: &str,
    simulate: bool,
    label: &'static str,
    shutdown: Shutdown,
) -> anyhow::Result<(Measured, Summary)> {
    let job = loaded.job(job).context("bench job")?;
    let asked = Asked {
        simulate: Some(simulate),
        ..Asked::at(chrono::Utc::now())
    };
    let plan = Plan::new(job, asked)?;
    let config = RunnerConfig {
        progress: false,
        started_by: "bench".into(),
        ..RunnerConfig::default()
    };
    let t = Instant::now();
    let report = runner::run(pool, url, &plan, effects.clone(), config, shutdown).await?;
    let secs = t.elapsed().as_secs_f64();
    let s = &report.summary;
    println!(
        "{label}: {} events in {secs:.2} s; {} rejected; orders changed {} (sum after {} cents); effects {:?}",
        report.events_this_run, s.events_rejected, s.orders_changed, s.total_after_centavos, s.effects
    );
    let measured = Measured::new(label, report.events_this_run as i64, secs);
    Ok((measured, report.summary))
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

/// Resets this process's peak RSS (VmHWM) to its current RSS (`/proc/self/clear_refs`, 5).
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// CPU seconds this process has spent, user and system (`/proc/self/stat`, in clock ticks of
/// 1/100 s, as on Linux).
fn cpu_secs() -> f64 {
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            let after = s.rsplit_once(')')?.1;
            let fields: Vec<&str> = after.split_whitespace().collect();
            let user: f64 = fields.get(11)?.parse().ok()?;
            let system: f64 = fields.get(12)?.parse().ok()?;
            Some((user + system) / 100.0)
        })
        .unwrap_or(0.0)
}

/// CPU seconds the machine has spent busy since boot, every core and process together
/// (`/proc/stat`: user, nice, system, irq, softirq, in ticks of 1/100 s; not steal, the time
/// the host gave another tenant).
fn machine_cpu_secs() -> f64 {
    std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| {
            let cpu = s.lines().next()?.strip_prefix("cpu ")?;
            let ticks: Vec<f64> = cpu
                .split_whitespace()
                .filter_map(|t| t.parse().ok())
                .collect();
            // user nice system idle iowait irq softirq steal
            let busy = [0, 1, 2, 5, 6]
                .iter()
                .filter_map(|i| ticks.get(*i))
                .sum::<f64>();
            Some(busy / 100.0)
        })
        .unwrap_or(0.0)
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
