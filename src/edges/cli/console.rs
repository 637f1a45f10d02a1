//! `console [--addr 127.0.0.1:9188] [--insecure-cookies]`, and the console beside the scheduler
//! in `serve --console-addr ADDR`: the options both take, and how the server is started.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use anyhow::Context;
use sqlx::PgPool;

use super::{connect, Cli, Failure, Outcome};
use crate::edges::console::{self, Console, ConsoleConfig};
use crate::edges::http_server::HttpLimits;
use replay_ledger_core::shared::shutdown::{self, Shutdown};

/// The console's options, shared by `console` and `serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct ConsoleArgs {
    /// Session cookies without `Secure`, for plain HTTP on loopback only; behind a TLS proxy
    /// keep them secure.
    #[arg(long)]
    pub insecure_cookies: bool,
    /// A session unused for this long ends (e.g. 30m, 8h).
    #[arg(long, env = "CONSOLE_IDLE_TIMEOUT", default_value = "30m", value_parser = humantime::parse_duration)]
    pub idle_timeout: Duration,
    /// The address of a TLS proxy in front of the console (repeatable): requests from it name
    /// the client in `X-Forwarded-For`, for login throttling per address and the audit.
    #[arg(
        long = "trusted-proxy",
        env = "CONSOLE_TRUSTED_PROXIES",
        value_delimiter = ','
    )]
    pub trusted_proxies: Vec<IpAddr>,
    /// Times are shown in this timezone (e.g. America/Sao_Paulo).
    #[arg(long, env = "CONSOLE_TIMEZONE", default_value = "UTC")]
    pub timezone: chrono_tz::Tz,
    /// HTTP connections served at once by the console; more are closed at once.
    #[arg(long, env = "CONSOLE_MAX_CONNECTIONS", default_value_t = 256)]
    pub console_max_connections: usize,
}

impl ConsoleArgs {
    fn config(&self, cli: &Cli, addr: SocketAddr) -> ConsoleConfig {
        ConsoleConfig {
            addr,
            jobs_dir: cli.jobs_dir.clone(),
            secure_cookies: !self.insecure_cookies,
            idle_timeout: self.idle_timeout,
            trusted_proxies: self.trusted_proxies.clone(),
            timezone: self.timezone,
            http_limits: HttpLimits {
                max_connections: self.console_max_connections,
                ..HttpLimits::default()
            },
            ..ConsoleConfig::default()
        }
    }
}

/// A console bound to its address, ready to serve.
pub(super) struct Bound {
    console: Console,
    listener: tokio::net::TcpListener,
}

impl Bound {
    /// Serves until `shutdown`.
    pub(super) fn spawn(self, shutdown: Shutdown) -> tokio::task::JoinHandle<()> {
        tokio::spawn(self.console.serve(self.listener, shutdown))
    }
}

/// The console's connection: whose role it is (to say what to pass instead when it lacks a
/// privilege), and whether the database answered at start (a pool made while it was away is not
/// checked: it connects later).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Connected {
    /// The console's own URL (`console`, or `serve --console-database-url`).
    Own { reachable: bool },
    /// `serve` without `--console-database-url`: the daemon's `DATABASE_URL`.
    Daemons { reachable: bool },
}

/// Whether the console's role has what `grants --console` gives; exit status 2 and what to pass
/// instead when it lacks any (its logins would all answer 500). A database away at start, or a
/// check that fails, is logged and the console starts.
async fn check_privileges(pool: &PgPool, connected: Connected) -> Result<(), Failure> {
    let (Connected::Own { reachable } | Connected::Daemons { reachable }) = connected;
    if !reachable {
        return Ok(());
    }
    let (role, lacking) = match replay_ledger_core::tables::grants::console_lacks(pool).await {
        Ok(found) => found,
        Err(e) => {
            tracing::warn!(error = %replay_ledger_core::tables::db::describe(&e), "console: could not check the role's privileges; starting anyway");
            return Ok(());
        }
    };
    if lacking.is_empty() {
        warn_if_wider(pool, &role).await;
        return Ok(());
    }
    let instead = match connected {
        Connected::Daemons { .. } => "pass `--console-database-url` with a role granted `grants --console ROLE` (the worker's role may not read the console's tables)",
        Connected::Own { .. } => "connect as a role granted `grants --console ROLE`",
    };
    const SHOWN: usize = 3;
    let mut lacks = lacking[..lacking.len().min(SHOWN)].join(", ");
    if lacking.len() > SHOWN {
        lacks.push_str(&format!(" and {} more", lacking.len() - SHOWN));
    }
    Err(Failure::invalid(format_args!(
        "the database role `{}` may not serve the console (it lacks {lacks}): {instead}; see docs/src/security.md, Least privileges",
        replay_ledger_core::shared::text::inert(&role),
    )))
}

/// Says so, once at start, when the console's role can do more than `grants --console` gives: a
/// superuser, or a role that can write the engine's tables (the schema's owner, the worker's). The
/// console's pages write nothing but through its functions; a role that can, in a web server's
/// hands, is a wider door than the console needs.
async fn warn_if_wider(pool: &PgPool, role: &str) {
    let wider: Result<Option<String>, sqlx::Error> = sqlx::query_scalar(
        r#"
        select case
          when (select rolsuper from pg_roles where rolname = current_user) then 'is a superuser'
          when has_table_privilege('comissao', 'update')
               or has_table_privilege('efeito_aplicado', 'update')
               or has_table_privilege('efeito_aplicado', 'delete')
            then 'can write comissao and the ledger'
        end
        "#,
    )
    .fetch_one(pool)
    .await;
    if let Ok(Some(why)) = wider {
        tracing::warn!(
            role = %replay_ledger_core::shared::text::inert(role),
            "the console's database role {why}: serve the console as a role granted `grants --console` alone (docs/src/security.md)"
        );
    }
}

/// Binds the console's address with `pool`; exit status 2 and why when it cannot, or when the
/// role of `pool` lacks the console's privileges.
pub(super) async fn bind(
    cli: &Cli,
    args: &ConsoleArgs,
    addr: SocketAddr,
    pool: PgPool,
    connected: Connected,
) -> Result<Bound, Failure> {
    check_privileges(&pool, connected).await?;
    let config = args.config(cli, addr);
    let console = Console::new(pool, config)
        .map_err(|e| Failure::invalid(format_args!("invalid console configuration: {e}")))?;
    let (listener, local) = console::bind(addr).await.map_err(|e| {
        Failure::invalid(format_args!("cannot listen on {addr} for the console: {e}"))
    })?;
    if args.insecure_cookies && !local.ip().is_loopback() {
        tracing::warn!(addr = %local, "console: cookies without Secure on an address off loopback; put it behind TLS and drop --insecure-cookies");
    }
    tracing::info!(addr = %local, "console listening");
    Ok(Bound { console, listener })
}

/// `replay-ledger console`: serves the console until SIGTERM/SIGINT.
pub(super) async fn console(cli: &Cli, addr: SocketAddr, args: &ConsoleArgs) -> Outcome {
    let pool = connect(cli, true).await?;
    let connected = Connected::Own { reachable: true };
    let bound = bind(cli, args, addr, pool, connected).await?;
    let (trigger, stop) = shutdown::channel();
    shutdown::on_signals(trigger);
    bound.spawn(stop).await.context("the console's server")?;
    Ok(())
}

/// The console's pool in `serve`: `--console-database-url` (a role granted `--console`), else
/// the daemon's own (`daemon_reachable`: whether it connected at start).
pub(super) async fn pool_for_serve(
    url: Option<&str>,
    daemon: &PgPool,
    daemon_reachable: bool,
) -> anyhow::Result<(PgPool, Connected)> {
    match url {
        // Like the daemon's own pool: a database away for a cause time may cure is waited for
        // (the console's pages answer 503 meanwhile), anything else ends `serve` at once.
        Some(url) => {
            match replay_ledger_core::tables::db::connect(url, "console").await {
                Ok(pool) => Ok((pool, Connected::Own { reachable: true })),
                Err(e) if e.may_pass() => {
                    tracing::warn!("{e}; the console connects once it is back");
                    let pool = replay_ledger_core::tables::db::connect_lazy(url, "console")?;
                    Ok((pool, Connected::Own { reachable: false }))
                }
                Err(e) => Err(anyhow::Error::new(e)
                    .context("connecting to the database as the console's role")),
            }
        }
        None => Ok((
            daemon.clone(),
            Connected::Daemons {
                reachable: daemon_reachable,
            },
        )),
    }
}
