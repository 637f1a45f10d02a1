//! `replay-ledger-demo` (what `replay-ledger demo` runs): the whole story end to end, on a
//! database of its own. An archive
//! of 2026-10-14 with the commission bug already applied and ~30 % of the seller notifications
//! missing; a loopback webhook that records every key; then a simulation, the real run, and a
//! second real run that sends nothing. It checks what it shows and exits 1 if a check fails.
//! With `--console` ([`console`]) it then serves the web console over the scratch database until
//! Ctrl-C, and removes the database after.

mod console;
mod people;

use std::collections::{BTreeSet, HashMap};
use std::str::FromStr;

use anyhow::{bail, Context};
use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection, PgPool};
use testkit::archive::{self, DemoDay};
use testkit::pgtemp::TempCluster;
use testkit::sink::{Behavior, Sink, SinkConfig};

use replay_ledger_core::config::{self, JobKind};
use replay_ledger_core::domain::{self, effect_key, NOTIFY_SELLER};
use replay_ledger_core::engine::effects::Effects;
use replay_ledger_core::engine::plan::{Asked, Plan};
use replay_ledger_core::services::runner::{self, RunReport, RunnerConfig};
use replay_ledger_core::shared::shutdown::Shutdown;
use replay_ledger_core::shared::summary::StateOutcome;
use replay_ledger_core::{shared::money, tables::db};

/// The demo's command line: the options of `replay-ledger demo`, which hands them over as is.
#[derive(Debug, clap::Parser)]
#[command(
    name = "replay-ledger-demo",
    version,
    about = "The whole story end to end on a throwaway database: an archived day with the commission bug, a simulation, the real run, a second run that sends nothing. Uses DATABASE_URL when set (a scratch database on that server, dropped after), else a throwaway cluster from the local PostgreSQL binaries."
)]
struct Args {
    /// A server to make the scratch database on (else a throwaway cluster).
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    database_url: Option<String>,
    /// Events to generate.
    #[arg(long, default_value_t = 10_000)]
    events: u32,
    /// Then keep the scratch database and serve the web console over it on loopback, with a
    /// finance and an operator account printed, until Ctrl-C.
    #[arg(long)]
    console: bool,
    /// Where `--console` listens (a busy port falls back to a free one).
    #[arg(long, default_value = "127.0.0.1:9188")]
    console_addr: std::net::SocketAddr,
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    use clap::Parser;
    let args = Args::parse();
    replay_ledger::edges::cli::init_tracing();
    let console_addr = args.console.then_some(args.console_addr);
    match run(args.database_url.as_deref(), args.events, console_addr).await {
        Ok(true) => std::process::ExitCode::SUCCESS,
        Ok(false) => std::process::ExitCode::from(1),
        Err(err) => {
            eprintln!(
                "error: {}",
                replay_ledger_core::shared::text::inert(&format!("{err:#}"))
            );
            std::process::ExitCode::from(1)
        }
    }
}

const EFFECTS_YAML: &str = include_str!("../../jobs/effects.yaml");
const REPLAY_YAML: &str = include_str!("../../jobs/replay-2026-10-14.yaml");

/// Where the demo's data lives, and how to clean it up.
enum Scratch {
    Cluster(TempCluster),
    Database {
        admin: PgConnectOptions,
        name: String,
    },
}

/// Runs the story on a scratch database; whether every check held. With `console`, the console
/// then serves that database at the address until a stop signal.
async fn run(
    database_url: Option<&str>,
    events: u32,
    console: Option<std::net::SocketAddr>,
) -> anyhow::Result<bool> {
    let events = events.max(100);
    println!("replay-ledger demo: the 2026-10-14 commission bug, replayed\n");
    let (scratch, url) = match database_url {
        Some(url) => scratch_database(url).await?,
        None => {
            let cluster = TempCluster::start().await.context(
                "DATABASE_URL is not set, so the demo starts a throwaway PostgreSQL cluster from the local binaries",
            )?;
            let url = cluster.url();
            println!(
                "database: a throwaway PostgreSQL cluster ({}), removed at the end",
                redact(&url)
            );
            (Scratch::Cluster(cluster), url)
        }
    };
    let mut result = story(&url, events).await;
    if let (Ok(true), Some(addr)) = (&result, console) {
        if let Err(e) = console::serve(&url, addr).await {
            result = Err(e);
        }
    }
    match scratch {
        Scratch::Cluster(mut cluster) => cluster.stop().await,
        Scratch::Database { admin, name } => {
            if let Ok(mut conn) = admin.connect().await {
                let _ = sqlx::query(&format!("drop database if exists \"{name}\" with (force)"))
                    .execute(&mut conn)
                    .await;
            }
        }
    }
    result
}

/// A fresh database on the server of `url`, so the demo never touches the user's tables.
async fn scratch_database(url: &str) -> anyhow::Result<(Scratch, String)> {
    let admin = PgConnectOptions::from_str(url).context("parsing DATABASE_URL")?;
    let name = format!(
        "replay_ledger_demo_{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    );
    let mut conn = admin
        .connect()
        .await
        .context("connecting to DATABASE_URL")?;
    // `name` is ours (hex digits), not input: safe to place in the statement.
    sqlx::query(&format!("create database \"{name}\""))
        .execute(&mut conn)
        .await
        .context("creating a scratch database for the demo (the role needs CREATEDB)")?;
    conn.close().await.ok();
    let mut scratch_url = url::Url::parse(url).context("parsing DATABASE_URL")?;
    scratch_url.set_path(&name);
    println!("database: scratch database {name} on the DATABASE_URL server, dropped at the end");
    Ok((Scratch::Database { admin, name }, scratch_url.to_string()))
}

/// `postgres://user:secret@host/db` → `postgres://user:***@host/db`.
fn redact(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        Ok(u) => u.to_string(),
        Err(_) => "(unparsable url)".into(),
    }
}

async fn story(url: &str, events: u32) -> anyhow::Result<bool> {
    let pool = db::connect(url, "demo").await.context("connecting")?;
    db::migrate(&pool).await.context("applying migrations")?;
    let archive = seed_archive(&pool, events).await?;
    print_archive(&archive);
    let sink = Sink::start(SinkConfig {
        behavior: Behavior {
            dedup: true,
            ..Behavior::default()
        },
        ..SinkConfig::default()
    })
    .await
    .context("starting the loopback webhook")?;
    let (_jobs, job, effects) = example_jobs(&sink)?;
    let story = Story {
        pool: &pool,
        url,
        job: &job,
        effects: &effects,
        sink: &sink,
        archive: &archive,
    };
    let ok = story.simulate().await? & story.apply().await? & story.apply_again().await?;
    sink.shutdown().await;
    pool.close().await;
    println!();
    if ok {
        println!("demo: every check held.");
    } else {
        println!("demo: a check failed (see above).");
    }
    Ok(ok)
}

/// The three steps of the story, each printing what it did and whether its checks held.
struct Story<'a> {
    pool: &'a PgPool,
    url: &'a str,
    job: &'a config::Job,
    effects: &'a Effects,
    sink: &'a Sink,
    archive: &'a Archive,
}

impl Story<'_> {
    /// Step 1: the simulation writes only its diff.
    async fn simulate(&self) -> anyhow::Result<bool> {
        let pool = self.pool;
        println!(
            "step 1: simulation (`replay-ledger run {} --simulate`)",
            self.job.name
        );
        let before = checksums(pool).await?;
        let report = execute(pool, self.url, self.job, self.effects, Some(true), false).await?;
        print!("{report}");
        let after = checksums(pool).await?;
        let mut ok = verdict(
            before == after,
            "comissao and efeito_aplicado are byte-identical after the simulation",
        );
        ok &= verdict(
            !report.summary.state.contains_key(&StateOutcome::Written),
            "the simulation counts the orders it would change as `seria-gravado`, none as `gravado`",
        );
        print_largest_diffs(pool, &report.execution_id).await?;
        Ok(ok)
    }

    /// Step 2: the real run sends exactly the missing notifications and keeps newer versions.
    async fn apply(&self) -> anyhow::Result<bool> {
        let (pool, archive) = (self.pool, self.archive);
        println!(
            "\nstep 2: the real run (`replay-ledger run {}`)",
            self.job.name
        );
        let report = execute(pool, self.url, self.job, self.effects, Some(false), false).await?;
        print!("{report}");
        let delivered: BTreeSet<String> = self.sink.deliveries().into_keys().collect();
        let mut ok = verdict(
            delivered == archive.missing,
            &format!(
                "the provider received exactly the {} missing keys ({} received)",
                archive.missing.len(),
                delivered.len()
            ),
        );
        let kept: Option<i64> =
            sqlx::query_scalar("select versao_evento from comissao where pedido_id = $1")
                .bind(&archive.newer_order)
                .fetch_optional(pool)
                .await?;
        ok &= verdict(
            kept == Some(3),
            &format!("order {} still holds version 3", archive.newer_order),
        );
        Ok(ok)
    }

    /// Step 3: a new pass changes nothing and sends nothing.
    async fn apply_again(&self) -> anyhow::Result<bool> {
        println!(
            "\nstep 3: a second real run, as a new pass (`replay-ledger run {} --restart`)",
            self.job.name
        );
        let requests_before = self.sink.request_count();
        let report = execute(
            self.pool,
            self.url,
            self.job,
            self.effects,
            Some(false),
            true,
        )
        .await?;
        print!("{report}");
        let mut ok = verdict(
            self.sink.request_count() == requests_before,
            "the second run sent nothing: every key is already in the ledger",
        );
        ok &= verdict(
            report.summary.orders_changed == 0
                && !report.summary.state.contains_key(&StateOutcome::Written),
            "the second run changed no order: every row already held its value (`inalterado`)",
        );
        Ok(ok)
    }
}

/// What the generated archive holds, before anything runs.
fn print_archive(archive: &Archive) {
    println!(
        "archive: {} events of 2026-10-14 for {} orders (+{} on the days around it)",
        group(archive.in_window),
        group(archive.orders),
        group(archive.outside)
    );
    println!(
        "  comissao as the buggy consumer left it (÷1.000 instead of ÷100): {} orders, {} in all",
        group(archive.bug_rows),
        money::brl(archive.bug_total)
    );
    println!(
        "  seller notifications: {} sent on the day, {} missing; {} payloads are invalid",
        group(archive.sent as u64),
        group(archive.missing.len() as u64),
        archive.invalid
    );
    println!(
        "  order {} already got version 3 from the live consumer on 2026-10-15: the replay must keep it\n",
        archive.newer_order
    );
}

/// The example jobs directory, pointed at the loopback webhook: the replay job and its providers.
fn example_jobs(sink: &Sink) -> anyhow::Result<(tempfile::TempDir, config::Job, Effects)> {
    let jobs = tempfile::tempdir()?;
    std::fs::write(jobs.path().join("effects.yaml"), EFFECTS_YAML)?;
    std::fs::write(jobs.path().join("replay-2026-10-14.yaml"), REPLAY_YAML)?;
    // Before any provider is built: the example effects.yaml takes its URL and token from here.
    std::env::set_var("SELLER_WEBHOOK_URL", sink.url());
    std::env::set_var("SELLER_WEBHOOK_TOKEN", "demo-token");
    let loaded = config::load_dir(jobs.path()).map_err(|e| anyhow::anyhow!("{e}"))?;
    let job = loaded
        .jobs
        .iter()
        .find(|j| matches!(j.kind, JobKind::Replay(_)))
        .context("the example replay job")?
        .clone();
    let effects = Effects::from_catalog(&loaded.effects).context("providers")?;
    Ok((jobs, job, effects))
}

async fn execute(
    pool: &PgPool,
    url: &str,
    job: &config::Job,
    effects: &Effects,
    simulate: Option<bool>,
    restart: bool,
) -> anyhow::Result<RunReport> {
    let asked = Asked {
        simulate,
        restart,
        at: chrono::Utc::now(),
    };
    let plan = Plan::new(job, asked)?;
    let config = RunnerConfig {
        started_by: "demo".into(),
        ..RunnerConfig::default()
    };
    Ok(runner::run(pool, url, &plan, effects.clone(), config, Shutdown::never()).await?)
}

fn verdict(held: bool, what: &str) -> bool {
    println!("  {} {what}", if held { "ok:" } else { "FAILED:" });
    held
}

async fn checksums(pool: &PgPool) -> anyhow::Result<(Option<String>, Option<String>)> {
    let comissao = sqlx::query_scalar(
        "select md5(string_agg(c::text, ',' order by pedido_id)) from comissao c",
    )
    .fetch_one(pool)
    .await?;
    let ledger = sqlx::query_scalar(
        "select md5(string_agg(e::text, ',' order by chave)) from efeito_aplicado e",
    )
    .fetch_one(pool)
    .await?;
    Ok((comissao, ledger))
}

async fn print_largest_diffs(pool: &PgPool, execution_id: &str) -> anyhow::Result<()> {
    let rows: Vec<(String, Option<i64>, i64)> = sqlx::query_as(
        r#"
        select pedido_id, antes, depois from reprocessamento_diff
        where execucao_id = $1
        order by abs(depois - coalesce(antes, 0)) desc, pedido_id limit 5
        "#,
    )
    .bind(execution_id)
    .fetch_all(pool)
    .await?;
    println!("  largest changes in the diff finance reviews (reprocessamento_diff):");
    for (pedido, antes, depois) in rows {
        println!(
            "    {pedido:<12} {:>14} -> {:>14}",
            antes.map_or("(none)".into(), money::brl),
            money::brl(depois)
        );
    }
    Ok(())
}

fn group(n: u64) -> String {
    money::group_thousands(n)
}

/// What the generated archive holds, to check the runs against.
struct Archive {
    in_window: u64,
    outside: u64,
    orders: u64,
    /// Rows of `comissao` and their sum, as the buggy consumer left them.
    bug_rows: u64,
    bug_total: i64,
    sent: usize,
    missing: BTreeSet<String>,
    invalid: usize,
    newer_order: String,
}

/// Writes the generated day (`testkit::archive`), then what the buggy live consumer left: per
/// order the newest version's commission divided by 1,000 instead of 100, and the ledger rows of
/// the notifications that went out on the day.
async fn seed_archive(pool: &PgPool, events: u32) -> anyhow::Result<Archive> {
    let day = DemoDay::generate(events);
    archive::insert_events(pool, &day.events).await?;
    let in_window = day.in_window().count() as u64;
    if in_window == 0 {
        bail!("the generated window is empty");
    }

    let mut newest: HashMap<&str, (i64, i64)> = HashMap::new();
    for e in &day.events {
        let Ok(correct) = domain::calcular_comissao(&e.payload) else {
            continue;
        };
        let buggy = if e.pedido_id == day.newer_order && e.versao == 3 {
            correct
        } else {
            (correct as f64 / 10.0).round() as i64
        };
        let entry = newest.entry(&e.pedido_id).or_insert((buggy, e.versao));
        if e.versao >= entry.1 {
            *entry = (buggy, e.versao);
        }
    }
    let commissions: Vec<(String, i64, i64)> = newest
        .iter()
        .map(|(id, (valor, versao))| (id.to_string(), *valor, *versao))
        .collect();
    let key = |event_id: &String| effect_key(event_id, NOTIFY_SELLER);
    let notified: Vec<(String, String)> = day
        .notified
        .iter()
        .map(|event_id| (key(event_id), event_id.clone()))
        .collect();
    archive::buggy_consumer_left(pool, &commissions, &notified).await?;
    let (bug_rows, bug_total): (i64, i64) =
        sqlx::query_as("select count(*), coalesce(sum(valor_centavos), 0)::bigint from comissao")
            .fetch_one(pool)
            .await?;
    Ok(Archive {
        in_window,
        outside: day.events.len() as u64 - in_window,
        orders: day.orders,
        bug_rows: bug_rows.max(0) as u64,
        bug_total,
        sent: day.notified.len(),
        missing: day.not_notified.iter().map(key).collect(),
        invalid: day.invalid,
        newer_order: day.newer_order,
    })
}

#[cfg(test)]
mod tests {
    use crate::*;

    #[test]
    fn the_generator_writes_the_event_type_the_product_handles() {
        assert_eq!(archive::ORDER_PAID, domain::ORDER_PAID);
    }
}
