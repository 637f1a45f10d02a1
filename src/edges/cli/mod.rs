//! The `replay-ledger` command line: parses arguments, wires the parts together, prints for
//! humans (or JSON). Every command returns an [`Outcome`]; [`exit`] maps it to the exit status of
//! the contract, in one place: 0 success, 2 invalid input or configuration, 1 any other failure,
//! 130 stopped by a signal, 3 differences found.

use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use sqlx::PgPool;

use replay_ledger_core::config::{self, ConfigErrors};
use replay_ledger_core::tables::db;

pub use args::{Cli, Command, ReviewAction};
use daemons::{consume, run, serve, sweep_stale_after, RunHow};
pub use exit::{Class, Failure, Outcome};

mod args;
mod console;
mod daemons;
mod demo;
mod exit;
mod explain;
mod failure;
mod history;
mod kit;
mod ops;
mod rebuild;
mod reports;
mod roles;
pub mod settings;
mod users;
mod verify;

/// The binary's entry point: a multi-threaded runtime running [`main`]. Not `async`, so the binary
/// crate instantiates none of the library's futures: its build, the last and serial step of a
/// first build, compiles one call instead of the whole program a second time.
pub fn start() -> ExitCode {
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime.block_on(main()),
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            ExitCode::from(1)
        }
    }
}

/// Parses the command line, runs it, returns the exit status.
pub async fn main() -> ExitCode {
    let mut cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) if !err.use_stderr() => {
            // `--help`, `--version`: our own text, printed as clap lays it out.
            let _ = err.print();
            return ExitCode::SUCCESS;
        }
        Err(err) => {
            eprint!("{}", inert_clap_error(&err));
            return ExitCode::from(2);
        }
    };
    cli.settings = settings::Settings::from_env();
    replay_ledger_core::shared::process::install(cli.settings.process.clone());
    init_tracing_with(&cli.settings.log);
    let duty = roles::duty_of(&cli.command);
    let role = roles::connected_role(cli.database_url.as_deref());
    match dispatch(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            if let Some(err) = &failure.error {
                tell(err, &duty, role.as_deref());
            }
            failure.code()
        }
    }
}

/// clap's message for `err` as inert text: clap quotes values from the command line and the
/// environment raw (`WAIT_FOR_DB=$'1\r\nFORGED'`), so each value it quotes is escaped whole, its
/// own line breaks included, then every other hazard but clap's own line breaks.
fn inert_clap_error(err: &clap::Error) -> String {
    use clap::error::ContextValue;
    use replay_ledger_core::shared::text::{inert, is_hazard};
    let mut text = err.render().to_string();
    for (_, value) in err.context() {
        let quoted: Vec<&str> = match value {
            ContextValue::String(s) => vec![s.as_str()],
            ContextValue::Strings(v) => v.iter().map(String::as_str).collect(),
            _ => Vec::new(),
        };
        for q in quoted.into_iter().filter(|q| q.chars().any(is_hazard)) {
            text = text.replace(q, &inert(q));
        }
    }
    text.split('\n').map(inert).collect::<Vec<_>>().join("\n")
}

/// Says a failure once, on stderr, as inert text: a configuration error as one line per finding
/// (file:line:column first), a refusal for want of a privilege with the role to connect as, any
/// other error with its chain of causes.
fn tell(err: &anyhow::Error, duty: &roles::Duty, role: Option<&str>) {
    use replay_ledger_core::shared::text::inert;
    if let Some(message) = roles::permission_denied(err, duty, role) {
        eprintln!("error: {}", inert(&message));
    } else if let Some(e) = err.downcast_ref::<db::ConnectError>() {
        eprintln!("error: {}", inert(&e.to_string()));
    } else if let Some(errors) = err.downcast_ref::<ConfigErrors>() {
        for e in &errors.0 {
            for line in e.to_string().lines() {
                eprintln!("{}", inert(line));
            }
        }
    } else {
        eprintln!("error: {}", inert(&failure::describe(err)));
    }
}

/// Logs to stderr as the binary does: `RUST_LOG` (default `info`), plain lines with every field
/// inert, or JSON with `LOG_FORMAT=json`. Public for the demo's program, which logs the same way.
pub fn init_tracing() {
    init_tracing_with(&settings::Settings::from_env().log);
}

/// [`init_tracing`] with the logging settings already read.
fn init_tracing_with(log: &settings::LogSettings) {
    use tracing_subscriber::EnvFilter;
    let filter = log
        .filter
        .as_deref()
        .and_then(|f| EnvFilter::try_new(f).ok())
        .unwrap_or_else(|| EnvFilter::new("info,sqlx=warn,hyper=warn,reqwest=warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    if log.json {
        builder.json().init();
    } else {
        builder.fmt_fields(inert_fields()).init();
    }
}

/// Plain log lines write every field value through [`replay_ledger_core::shared::text::inert`]: an event id or an
/// error quoting one (`%` fields are written with `Display`, as they are) cannot end the line,
/// forge another, or drive the terminal. JSON lines escape by their own syntax.
fn inert_fields() -> impl for<'w> tracing_subscriber::fmt::FormatFields<'w> {
    use tracing_subscriber::field::MakeExt;
    tracing_subscriber::fmt::format::debug_fn(|w, field, value| {
        let text = replay_ledger_core::shared::text::inert(&format!("{value:?}"));
        if field.name() == "message" {
            write!(w, "{text}")
        } else {
            write!(w, "{}={text}", field.name())
        }
    })
    .delimited(" ")
}

async fn dispatch(cli: Cli) -> Outcome {
    match &cli.command {
        Command::Check => check(&cli),
        Command::Completions { shell } => kit::completions(*shell),
        Command::Man { out_dir } => kit::man(out_dir.as_deref()),
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
        Command::Explain {
            pedido,
            json,
            as_of,
            timezone,
        } => {
            let when = history::Moments::of(as_of.as_deref(), None, *timezone)?;
            explain::explain(&cli, pedido, *json, when.as_of).await
        }
        Command::Comissao {
            as_of,
            compare_to,
            known_at,
            restated,
            timezone,
            csv,
            xlsx,
            json,
        } => {
            let mut when = history::Moments::of(Some(as_of), compare_to.as_deref(), *timezone)?;
            when.known_at(known_at.as_deref(), *timezone, *restated)?;
            let form = history::form(csv.as_ref(), xlsx.as_ref(), *json);
            history::comissao(&cli, &when, &form).await
        }
        Command::Review { action } => ops::review(&cli, action).await,
        Command::Grants {
            worker,
            approver,
            reviewer,
            console,
            print,
        } => {
            let others = [approver, reviewer, console].map(Option::as_deref);
            roles::grants(&cli, worker, others, *print).await
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
        Command::Consume {
            job,
            from_start,
            metrics_addr,
            metrics_max_connections,
        } => {
            let http = daemons::MetricsHow::new(*metrics_addr, *metrics_max_connections);
            consume(&cli, job.as_deref(), *from_start, http).await
        }
        Command::Demo {
            events,
            console,
            console_addr,
        } => demo::hand_over(
            cli.database_url.as_deref(),
            *events,
            console.then_some(*console_addr),
        ),
        Command::Serve {
            metrics_addr,
            metrics_max_connections,
            console_addr,
            console_database_url,
            web,
        } => {
            let console = console_addr.map(|addr| daemons::ServeConsole {
                addr,
                database_url: console_database_url.clone(),
                args: web.clone(),
            });
            let http = daemons::MetricsHow::new(*metrics_addr, *metrics_max_connections);
            serve(&cli, http, console).await
        }
        Command::Console { addr, web } => console::console(&cli, *addr, web).await,
        Command::Users { action } => users::users(&cli, action).await,
        Command::Rebuild {
            approve,
            note,
            rollback,
            drop_previous,
            abandon,
            diff,
            chunk,
        } => {
            let args = rebuild::RebuildArgs {
                approve: approve.clone(),
                note: note.clone(),
                rollback: *rollback,
                drop_previous: *drop_previous,
                abandon: *abandon,
                diff: diff.clone(),
                chunk: *chunk,
            };
            rebuild::rebuild(&cli, &args).await
        }
        Command::Verify {
            from,
            to,
            timezone,
            job,
            json,
            emit_jobs,
        } => {
            let args = verify::VerifyArgs {
                from: *from,
                to: *to,
                timezone: *timezone,
                job: job.clone(),
                json: *json,
                emit_jobs: emit_jobs.clone(),
            };
            verify::verify(&cli, &args).await
        }
    }
}

/// The jobs directory, and the process's settings (`SMTP_URL`, `REPORT_FROM`, the lease, the
/// session settings).
fn check(cli: &Cli) -> Outcome {
    let loaded = config::load_dir(&cli.jobs_dir);
    let problems = cli.settings.validate();
    if let (Ok(loaded), true) = (&loaded, problems.is_empty()) {
        println!("ok: {} jobs", loaded.jobs.len());
        return Ok(());
    }
    for e in loaded.err().into_iter().flatten() {
        eprintln!("{e}");
    }
    for e in problems {
        eprintln!("error: {}", replay_ledger_core::shared::text::inert(&e));
    }
    Err(Failure::said(Class::Invalid))
}

/// Logs, at the start of a process that calls providers, every accepted exception to "no
/// credentials in clear" (see `config::cleartext_warnings`).
fn warn_in_clear(catalog: &config::EffectCatalog, cli: &Cli) {
    let smtp = crate::services::report::Mailer::cleartext_warning(&cli.settings.mail);
    for warning in config::cleartext_warnings(catalog, cli.database_url.as_deref())
        .into_iter()
        .chain(smtp)
    {
        tracing::warn!("{warning}");
    }
}

/// The database URL given, or the error that says how to give one.
fn database_url(cli: &Cli) -> anyhow::Result<&str> {
    cli.database_url
        .as_deref()
        .context("no database: set DATABASE_URL or pass --database-url")
}

/// Connects (waiting up to `--wait-for-db` for a server that is not reachable yet; the cause at
/// once otherwise), and applies migrations unless told not to.
async fn connect(cli: &Cli, migrate: bool) -> anyhow::Result<PgPool> {
    let url = database_url(cli)?;
    let pool = db::connect_waiting(url, "cli", cli.wait_for_db).await?;
    if migrate && !cli.no_migrate {
        db::migrate(&pool).await.context("applying migrations")?;
    }
    Ok(pool)
}
