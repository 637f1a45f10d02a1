//! The `replay-ledger` command line: parses arguments, wires the parts together, prints for
//! humans (or JSON), and maps every outcome to the exit status of the contract, in one place:
//! 0 success, 2 invalid input or configuration, 1 any other failure, 130 stopped by a signal.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use sqlx::PgPool;

use crate::config::{self, ConfigErrors, JobKind};
use crate::effects::Effects;
use crate::runner::summary::counts;
use crate::runner::{self, Ended, RunError, RunnerConfig};
use crate::{db, demo, scheduler, shutdown};

mod failure;
mod ops;
mod reports;
mod roles;

/// Replays archived domain events on PostgreSQL to correct derived state (`comissao`) and to
/// perform the external side effects still missing, through an effects ledger
/// (`efeito_aplicado`) shared with the live consumer, so no message is sent twice where the
/// provider cannot deduplicate.
#[derive(Debug, Parser)]
#[command(name = "replay-ledger", version, about, long_about = None)]
pub struct Cli {
    /// PostgreSQL URL (e.g. postgres://user@host:5432/db?sslmode=require).
    #[arg(long, env = "DATABASE_URL", global = true, hide_env_values = true)]
    pub database_url: Option<String>,

    /// Directory holding the job files and effects.yaml.
    #[arg(long, default_value = "jobs", global = true)]
    pub jobs_dir: PathBuf,

    /// Do not apply migrations before working (for a role that does not own the schema).
    #[arg(long, global = true)]
    pub no_migrate: bool,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Apply the database migrations (idempotent).
    Migrate {
        /// Apply nothing: list every migration this binary carries as applied, pending, failed
        /// or changed (applied from a different file).
        #[arg(long)]
        status: bool,
    },
    /// Validate every file of the jobs directory; prints `ok: N jobs` or one error per line.
    Check,
    /// Run a replay job to the end of its window, resuming from its checkpoint.
    ///
    /// A simulation writes only diff rows (reprocessamento_diff) for finance to review; the real
    /// run corrects comissao and performs only the effects the ledger does not hold yet. Stop it
    /// with Ctrl-C or SIGTERM: no new effect call starts, calls in flight are answered and
    /// recorded, the checkpoint stays after the last wholly settled batch, exit 130; run it again
    /// to resume (a second signal exits at once).
    Run {
        /// A job's `name`, or a path to its YAML file.
        job: String,
        /// Simulate, whatever the job says: diff rows only, no state write, no effect.
        #[arg(long)]
        simulate: bool,
        /// Start a new pass from the window's start (the ledger keeps effects from repeating).
        #[arg(long)]
        restart: bool,
        /// For a job with `partitions`: how many partitions this process runs at once. Other
        /// processes, on this machine or others, may run the same job at the same time.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=1024))]
        workers: u16,
        /// Print the final summary as one JSON object (the same fields as `status --json`).
        #[arg(long)]
        json: bool,
    },
    /// One sweeper pass over stale reservations: retake those of idempotent types, move the
    /// others to `incerto`.
    Sweep {
        /// Age past which a reservation is abandoned (default: the sweep job's `stale_after`, else 5m).
        #[arg(long, value_parser = config::parse_stale_after)]
        stale_after: Option<std::time::Duration>,
    },
    /// Render an execution's report for finance (text, HTML, CSV of the diff) and e-mail it by
    /// SMTP (`SMTP_URL`, `REPORT_FROM`) exactly once, or write it as an `.eml` into `outbox/`.
    Report {
        /// An execution as `status` lists it: `<id>` (real run) or `<id>:simulacao`; a bare id
        /// with no real run means its simulation.
        execution: String,
        /// Write the `.eml` to this file instead of sending it.
        #[arg(long)]
        out: Option<PathBuf>,
        /// The job whose recipients get it: a report job, or a replay job with `report_to`
        /// (default: the execution's job when it has `report_to`, else the only report job).
        #[arg(long)]
        job: Option<String>,
    },
    /// Approve the finished simulation of a replay job, so that its real run may start
    /// (`require_approved_simulation: true`). The approval binds what the real run will do: the
    /// job's definition (window, event types, each effect's mode, on_failure and provider,
    /// on_invalid_event), the commission rule's version, the window's events and the diff's
    /// commissions. Who approved is the database role you are connected as.
    Approve {
        /// A replay job's `name`, or a path to its YAML file.
        job: String,
        /// A note kept with the approval (at most 500 characters, plain text).
        #[arg(long)]
        note: Option<String>,
        /// Deprecated: kept as a note, never as who approved.
        #[arg(long, hide = true)]
        by: Option<String>,
    },
    /// The approvals recorded: job, execution, simulation pass, totals, what they bind, who
    /// approved, the note, when; newest first.
    Approvals {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Grant each database role exactly its duty, as the owner that ran `migrate`: the worker
    /// runs, sweeps, consumes, serves and reports; the approver approves; the reviewer resolves
    /// review items; both read. Every privilege a role had on replay-ledger's tables is revoked
    /// first. The roles must exist.
    Grants {
        /// The role of `run`, `serve`, `consume`, `sweep` and `report`.
        #[arg(long)]
        worker: String,
        /// The role that approves simulations (`approve`).
        #[arg(long)]
        approver: Option<String>,
        /// The role that resolves review items (`review resolve`).
        #[arg(long)]
        reviewer: Option<String>,
        /// Print the SQL (one transaction) for a DBA to run as the owner, instead of running it.
        #[arg(long)]
        print: bool,
    },
    /// The manual-review queue of `incerto` effects (outcome unknown; never resent automatically).
    Review {
        #[command(subcommand)]
        action: ReviewAction,
    },
    /// Executions (and partitions), their checkpoints and progress, the scheduled jobs with their
    /// next fire and last run, and the size of the review queue.
    Status {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// The scheduler daemon: fires every job of the jobs directory that has a `schedule` (one
    /// process at a time per job, across machines), catches up a missed nightly run on start, and
    /// serves Prometheus `/metrics` and `/healthz`. Stops cleanly on SIGTERM/SIGINT (running jobs
    /// finish their batch) and exits 0.
    Serve {
        /// Where `/metrics` and `/healthz` listen.
        #[arg(long, env = "METRICS_ADDR", default_value = "127.0.0.1:9187")]
        metrics_addr: std::net::SocketAddr,
        /// HTTP connections served at once on the metrics address; more are closed at once. Keep
        /// it well under the open-files limit (LimitNOFILE).
        #[arg(long, env = "METRICS_MAX_CONNECTIONS", default_value_t = 256)]
        metrics_max_connections: usize,
    },
    /// The live consumer: follow `evento_arquivado` as it grows, through the same applier as a
    /// replay, with execution id `ao-vivo` and the policy of a `kind: live` job. Runs until
    /// SIGINT/SIGTERM. Out-of-order commits never make it skip an event.
    Consume {
        /// The `kind: live` job (default: the only one in the jobs dir).
        job: Option<String>,
        /// Without a checkpoint, start at the beginning of the archive instead of at "now".
        #[arg(long)]
        from_start: bool,
    },
    /// The whole story end to end: an archive of 2026-10-14 with the commission bug, a
    /// simulation, the real run, and a second run that sends nothing. Uses a scratch database on
    /// DATABASE_URL's server when set, else a throwaway cluster from the local PostgreSQL binaries.
    Demo {
        /// Events to generate.
        #[arg(long, default_value_t = 10_000)]
        events: u32,
    },
}

#[derive(Debug, Subcommand)]
pub enum ReviewAction {
    /// The `incerto` effects, oldest first: key, type, execution, why, age, attempts, last error.
    List {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
        /// Only effects of this type.
        #[arg(long = "type", value_name = "TYPE")]
        effect_type: Option<String>,
        /// Only effects of this execution (`execucao_id`).
        #[arg(long)]
        execution: Option<String>,
        /// Only effects older than this (real age: since the first attempt), e.g. 2h or 30m.
        #[arg(long, value_parser = ops::parse_age)]
        older_than: Option<std::time::Duration>,
    },
    /// Record what a human established about one `incerto` effect: `--sent` or `--not-sent`.
    #[command(group = clap::ArgGroup::new("decision").required(true))]
    Resolve {
        /// The ledger key, `<evento_id>:<tipo_efeito>`.
        key: String,
        /// It went out: the effect becomes `concluido`.
        #[arg(long, group = "decision")]
        sent: bool,
        /// It did not go out: the row is removed, so the next run performs it.
        #[arg(long, group = "decision")]
        not_sent: bool,
        /// A note kept with the decision (at most 500 characters, no control characters). Who
        /// resolved it is recorded as the database role you connect as.
        #[arg(long, conflicts_with = "by")]
        note: Option<String>,
        /// Deprecated: kept as the note; who resolved it is the database role.
        #[arg(long, value_name = "NAME")]
        by: Option<String>,
    },
}

/// Parses the command line, runs it, returns the exit status.
pub async fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            let _ = err.print();
            return ExitCode::from(if err.use_stderr() { 2 } else { 0 });
        }
    };
    init_tracing();
    let duty = roles::duty_of(&cli.command);
    let role = roles::connected_role(cli.database_url.as_deref());
    match dispatch(cli).await {
        Ok(code) => code,
        Err(err) => {
            if let Some(message) = roles::permission_denied(&err, &duty, role.as_deref()) {
                eprintln!("error: {message}");
                return ExitCode::from(1);
            }
            if let Some(errors) = err.downcast_ref::<ConfigErrors>() {
                for e in &errors.0 {
                    eprintln!("{e}");
                }
                return ExitCode::from(2);
            }
            eprintln!("error: {}", failure::describe(&err));
            ExitCode::from(1)
        }
    }
}

fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("RUST_LOG")
        .unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,hyper=warn,reqwest=warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    if std::env::var("LOG_FORMAT").is_ok_and(|f| f == "json") {
        builder.json().init();
    } else {
        builder.fmt_fields(inert_fields()).init();
    }
}

/// Plain log lines write every field value through [`crate::text::inert`]: an event id or an
/// error quoting one (`%` fields are written with `Display`, as they are) cannot end the line,
/// forge another, or drive the terminal. JSON lines escape by their own syntax.
fn inert_fields() -> impl for<'w> tracing_subscriber::fmt::FormatFields<'w> {
    use tracing_subscriber::field::MakeExt;
    tracing_subscriber::fmt::format::debug_fn(|w, field, value| {
        let text = crate::text::inert(&format!("{value:?}"));
        if field.name() == "message" {
            write!(w, "{text}")
        } else {
            write!(w, "{}={text}", field.name())
        }
    })
    .delimited(" ")
}

async fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    match &cli.command {
        Command::Check => check(&cli.jobs_dir),
        Command::Migrate { status } => ops::migrate(&cli, *status).await,
        Command::Run {
            job,
            simulate,
            restart,
            workers,
            json,
        } => {
            let how = RunHow {
                simulate: *simulate,
                restart: *restart,
                workers: usize::from(*workers),
                json: *json,
            };
            run(&cli, job, how).await
        }
        Command::Status { json } => ops::status(&cli, *json).await,
        Command::Sweep { stale_after } => ops::sweep(&cli, *stale_after).await,
        Command::Review { action } => ops::review(&cli, action).await,
        Command::Grants {
            worker,
            approver,
            reviewer,
            print,
        } => {
            let (approver, reviewer) = (approver.as_deref(), reviewer.as_deref());
            roles::grants(&cli, worker, approver, reviewer, *print).await
        }
        Command::Report {
            execution,
            out,
            job,
        } => reports::report(&cli, execution, out.as_deref(), job.as_deref()).await,
        Command::Approve { job, note, by } => {
            if by.is_some() {
                eprintln!("note: --by is kept as a note; who approves is the database role you are connected as");
            }
            reports::approve(&cli, job, note.as_deref().or(by.as_deref())).await
        }
        Command::Approvals { json } => reports::approvals(&cli, *json).await,
        Command::Consume { job, from_start } => consume(&cli, job.as_deref(), *from_start).await,
        Command::Demo { events } => demo::run(cli.database_url.as_deref(), *events).await,
        Command::Serve {
            metrics_addr,
            metrics_max_connections,
        } => serve(&cli, *metrics_addr, *metrics_max_connections).await,
    }
}

/// The jobs directory, and the SMTP settings of the environment (`SMTP_URL`, `REPORT_FROM`).
fn check(jobs_dir: &Path) -> anyhow::Result<ExitCode> {
    let loaded = config::load_dir(jobs_dir);
    let mail = crate::report::Mailer::from_env();
    if let (Ok(loaded), Ok(_)) = (&loaded, &mail) {
        println!("ok: {} jobs", loaded.jobs.len());
        return Ok(ExitCode::SUCCESS);
    }
    for e in loaded.err().into_iter().flatten() {
        eprintln!("{e}");
    }
    if let Err(e) = mail {
        eprintln!("error: {e}");
    }
    Ok(ExitCode::from(2))
}

/// Logs, at the start of a process that calls providers, every accepted exception to "no
/// credentials in clear" (see `config::cleartext_warnings`).
fn warn_in_clear(catalog: &config::EffectCatalog, cli: &Cli) {
    let smtp = crate::report::Mailer::cleartext_warning_from_env();
    for warning in config::cleartext_warnings(catalog, cli.database_url.as_deref())
        .into_iter()
        .chain(smtp)
    {
        tracing::warn!("{warning}");
    }
}

/// Connects, retrying while the server is unreachable, and applies migrations unless told not to.
async fn connect(cli: &Cli, migrate: bool) -> anyhow::Result<PgPool> {
    let url = cli
        .database_url
        .as_deref()
        .context("no database: set DATABASE_URL or pass --database-url")?;
    let pool = db::retry("connect", db::Backoff::default(), || {
        db::connect(url, "cli")
    })
    .await
    .context("connecting to the database")?;
    if migrate && !cli.no_migrate {
        db::migrate(&pool).await.context("applying migrations")?;
    }
    Ok(pool)
}

/// How `run` was asked to run.
struct RunHow {
    simulate: bool,
    restart: bool,
    workers: usize,
    json: bool,
}

async fn run(cli: &Cli, job_ref: &str, how: RunHow) -> anyhow::Result<ExitCode> {
    let (catalog, job) = config::find_job(&cli.jobs_dir, job_ref)?;
    let JobKind::Replay(replay) = &job.kind else {
        return Err(RunError::NotReplay(job.name.clone()).into());
    };
    let effects = Effects::from_catalog(&catalog).context("setting up effect providers")?;
    warn_in_clear(&catalog, cli);
    let pool = connect(cli, true).await?;
    let url = cli.database_url.clone().unwrap_or_default();
    let (trigger, stop) = shutdown::channel();
    shutdown::on_signals(trigger);
    let config = RunnerConfig {
        simulate: how.simulate.then_some(true),
        restart: how.restart,
        workers: how.workers,
        progress: how.workers == 1 && !how.json,
        retries: crate::applier::Retries {
            stale_after: sweep_stale_after(&cli.jobs_dir),
            ..Default::default()
        },
        ..RunnerConfig::default()
    };
    let mode = if how.simulate || replay.simulate {
        crate::execution::Mode::Simulation
    } else {
        crate::execution::Mode::Real
    };
    let key = crate::execution::checkpoint_key(
        &job.resolve_window(&replay.window, config.now).execution_id,
        mode,
    );
    let result = runner::run(&pool, &url, &job, replay, effects, config, stop).await;
    if how.json {
        print_execution_json(&pool, &key).await;
    }
    match result {
        Ok(report) => {
            if !how.json {
                print!("{report}");
            }
            let mailed = reports::after_run(&pool, &job, replay, &report).await;
            Ok(match report.ended {
                Ended::Interrupted => ExitCode::from(130),
                _ => mailed.unwrap_or(ExitCode::SUCCESS),
            })
        }
        Err(err) => {
            eprintln!("error: {err}");
            Ok(ExitCode::from(1))
        }
    }
}

/// `run --json`: the execution as stored, one JSON object on stdout (nothing if it was never
/// started, e.g. the approval gate refused it).
async fn print_execution_json(pool: &PgPool, key: &str) {
    match crate::execution::load(pool, key).await {
        Ok(Some(e)) => {
            let view = crate::execution::ExecutionView::from(&e);
            match serde_json::to_string(&view) {
                Ok(json) => println!("{json}"),
                Err(err) => eprintln!("error: could not write the summary as JSON: {err}"),
            }
        }
        Ok(None) => {}
        Err(err) => eprintln!("error: could not read the execution's figures: {err}"),
    }
}

async fn consume(cli: &Cli, job_ref: Option<&str>, from_start: bool) -> anyhow::Result<ExitCode> {
    let (catalog, job) = match job_ref {
        Some(name) => config::find_job(&cli.jobs_dir, name)?,
        None => {
            let loaded = config::load_dir(&cli.jobs_dir)?;
            let mut live = loaded
                .jobs
                .iter()
                .filter(|j| matches!(j.kind, JobKind::Live(_)));
            match (live.next(), live.next()) {
                (Some(job), None) => (loaded.effects.clone(), job.clone()),
                (None, _) => {
                    eprintln!("error: no `kind: live` job in {}", cli.jobs_dir.display());
                    return Ok(ExitCode::from(2));
                }
                (Some(_), Some(_)) => {
                    eprintln!(
                        "error: several `kind: live` jobs in {}: name one",
                        cli.jobs_dir.display()
                    );
                    return Ok(ExitCode::from(2));
                }
            }
        }
    };
    let JobKind::Live(live) = &job.kind else {
        eprintln!(
            "error: job {} is a {} job, not a live one",
            job.name,
            job.kind.label()
        );
        return Ok(ExitCode::from(2));
    };
    let effects = Effects::from_catalog(&catalog).context("setting up effect providers")?;
    warn_in_clear(&catalog, cli);
    let pool = connect(cli, true).await?;
    let url = cli.database_url.clone().unwrap_or_default();
    let (trigger, stop) = shutdown::channel();
    shutdown::on_signals(trigger);
    let config = crate::consumer::ConsumerConfig {
        from_start,
        retries: crate::applier::Retries {
            stale_after: sweep_stale_after(&cli.jobs_dir),
            ..Default::default()
        },
        ..Default::default()
    };
    match crate::consumer::consume(&pool, &url, &job, live, effects, config, stop).await {
        Ok(report) => {
            println!(
                "live consumer stopped: {} events in this run; effects: {}",
                report.events_this_run,
                counts(&report.summary.effects)
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(err) => {
            eprintln!("error: {err}");
            Ok(ExitCode::from(1))
        }
    }
}

/// The sweeper's `stale_after`, if a sweep job is configured: the age past which a reservation
/// of an idempotent type counts as abandoned. Default 5 minutes (the seed's).
fn sweep_stale_after(jobs_dir: &Path) -> std::time::Duration {
    config::load_dir(jobs_dir)
        .ok()
        .and_then(|loaded| {
            loaded.jobs.iter().find_map(|j| match &j.kind {
                JobKind::Sweep(s) => Some(s.stale_after),
                _ => None,
            })
        })
        .unwrap_or(std::time::Duration::from_secs(300))
}

/// `serve`: the scheduler daemon until SIGTERM/SIGINT.
async fn serve(
    cli: &Cli,
    metrics_addr: std::net::SocketAddr,
    max_connections: usize,
) -> anyhow::Result<ExitCode> {
    let loaded = config::load_dir(&cli.jobs_dir)?;
    let effects = Effects::from_catalog(&loaded.effects).context("setting up effect providers")?;
    warn_in_clear(&loaded.effects, cli);
    let pool = connect(cli, true).await?;
    let config = scheduler::SchedulerConfig {
        metrics_addr,
        http_limits: crate::http_server::HttpLimits {
            max_connections,
            ..Default::default()
        },
        stale_after: sweep_stale_after(&cli.jobs_dir),
        ..scheduler::SchedulerConfig::default()
    };
    let url = cli.database_url.clone().unwrap_or_default();
    let daemon = match scheduler::Scheduler::new(pool, url, loaded.jobs, effects, config) {
        Ok(daemon) => daemon,
        Err(err) => {
            eprintln!("error: {err}");
            return Ok(ExitCode::from(2));
        }
    };
    let (trigger, stop) = shutdown::channel();
    shutdown::on_signals(trigger);
    daemon.run(stop).await?;
    Ok(ExitCode::SUCCESS)
}
