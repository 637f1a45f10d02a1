//! The process's settings: every environment variable the binary reads, read once, here, into one
//! [`Settings`] value that the command line hands down — to the mailer and the scheduler as
//! fields and parameters, to the core's connections and locks by installing its part
//! ([`replay_ledger_core::shared::process`]). Nothing below the edge reads the environment.
//!
//! The variables that also have a flag are read by clap (`env = …` on the flag: the flag wins);
//! the others by [`Settings::from_lookup`]. [`variables`] lists them all, with their defaults and
//! meaning: the book's settings page (`docs/src/settings.md`) is held equal to it by a test, and
//! so are clap's `env` names and defaults.
//!
//! What stays outside: a job file's `${VAR}` references (`config::interp`). Their names are the
//! job author's, not the program's — any variable, chosen per deployment for the secrets of a
//! provider — so they cannot be a field of a fixed settings value; they are read when the job
//! file is loaded, by the loader, and the layout test names that one exception.

use secrecy::SecretString;

use crate::services::report::{MailSettings, Mailer};
use replay_ledger_core::shared::process::ProcessSettings;

/// One variable of the process: its name, the flag that overrides it (if any), its default and
/// what it sets — a row of the settings page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variable {
    pub name: &'static str,
    /// The flag as `--help` prints it, `—` when there is none.
    pub flag: &'static str,
    pub default: String,
    pub meaning: &'static str,
}

/// Every variable the binary reads, in the order of the settings page.
pub fn variables() -> Vec<Variable> {
    let row = |name, flag, default: &str, meaning| Variable {
        name,
        flag,
        default: default.to_string(),
        meaning,
    };
    let mut rows = vec![
        row("DATABASE_URL", "`--database-url`", "—", "the PostgreSQL URL (`?sslmode=require` for TLS)"),
        row("WAIT_FOR_DB", "`--wait-for-db`", "`0s`", "wait this long for a database not reachable yet"),
        row("METRICS_ADDR", "`--metrics-addr`", "`127.0.0.1:9187`", "where `serve` and `consume` serve `/metrics` and `/healthz`"),
        row("METRICS_MAX_CONNECTIONS", "`--metrics-max-connections`", "`256`", "connections served at once on the metrics address"),
        row("CONSOLE_ADDR", "`--addr` (`console`), `--console-addr` (`serve`)", "`127.0.0.1:9188` (`console`); none (`serve` then serves no console)", "where the web console listens"),
        row("CONSOLE_DATABASE_URL", "`--console-database-url`", "`DATABASE_URL`", "the console's database role"),
        row("CONSOLE_TIMEZONE", "`--timezone` (`console`, `serve`)", "`UTC`", "the zone every time of the console's pages is shown in (e.g. `America/Sao_Paulo`)"),
        row("CONSOLE_IDLE_TIMEOUT", "`--idle-timeout`", "`30m`", "a console session ends after this long unused"),
        row("CONSOLE_MAX_CONNECTIONS", "`--console-max-connections`", "`256`", "HTTP connections the console serves at once"),
        row("CONSOLE_TRUSTED_PROXIES", "`--trusted-proxy` (repeatable)", "none", "TLS proxies whose `X-Forwarded-For` is believed (comma-separated)"),
        row("CONSOLE_URL", "—", "none", "the console's public address, for the links in e-mailed reports (an `http(s)://` URL; anything else is ignored with a warning)"),
        row("SMTP_URL", "—", "none (reports go to `outbox/`)", "the mail server, `smtp://` or `smtps://`"),
        row("SMTP_USERNAME", "—", "none", "the mail server's login, with `SMTP_PASSWORD` (instead of the URL's)"),
        row("SMTP_PASSWORD", "—", "none", "the password of `SMTP_USERNAME`"),
        row("REPORT_FROM", "—", "`replay-ledger <replay-ledger@localhost>` (required with `SMTP_URL`)", "the reports' sender address"),
        row("REPLAY_LEDGER_LEASE", "—", "`15s` (at least `1s`)", "the ownership lease ([operating](operating.md))"),
    ];
    for (name, default) in replay_ledger_core::tables::db::session::variables() {
        rows.push(row(
            name,
            "—",
            &format!("`{default}`"),
            "a server-side session setting that ends a silent peer's session (`default`: the server's own; [operating](operating.md))",
        ));
    }
    rows.extend([
        row("HOSTNAME", "—", "none", "the host word of every session's `application_name`, when the kernel's host name cannot be read"),
        row("RUST_LOG", "—", "`info`", "the log filter"),
        row("LOG_FORMAT", "—", "text", "`json` for one JSON object per line"),
    ]);
    rows
}

/// How the process logs: `RUST_LOG`, `LOG_FORMAT`.
#[derive(Debug, Clone, Default)]
pub struct LogSettings {
    pub filter: Option<String>,
    pub json: bool,
}

/// The process's settings that no flag carries (those are clap's, in [`super::Cli`]).
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// The core's part: the lease, the session settings, `HOSTNAME`.
    pub process: ProcessSettings,
    /// How reports leave: `SMTP_*`, `REPORT_FROM`, `CONSOLE_URL`.
    pub mail: MailSettings,
    pub log: LogSettings,
}

impl Settings {
    /// From the process's environment: the one place the binary reads it (clap aside).
    pub fn from_env() -> Settings {
        Settings::from_lookup(|name| std::env::var(name).ok())
    }

    /// From `get` (a variable's value by name; `None`: unset).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Settings {
        let session = replay_ledger_core::tables::db::session::variables()
            .filter_map(|(name, _)| Some((name.to_string(), get(name)?)))
            .collect();
        Settings {
            process: ProcessSettings {
                lease: get("REPLAY_LEDGER_LEASE"),
                session,
                hostname: get("HOSTNAME"),
            },
            mail: MailSettings {
                smtp_url: get("SMTP_URL").map(SecretString::from),
                username: get("SMTP_USERNAME"),
                password: get("SMTP_PASSWORD").map(SecretString::from),
                from: get("REPORT_FROM"),
                console_url: get("CONSOLE_URL"),
            },
            log: LogSettings {
                filter: get("RUST_LOG"),
                json: get("LOG_FORMAT").is_some_and(|f| f == "json"),
            },
        }
    }

    /// Every value that cannot be used, said as the part that uses it would say it (`check`
    /// prints them; each part still refuses its own when it comes to use it).
    pub fn validate(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if let Err(e) =
            replay_ledger_core::tables::execution::lease::parse(self.process.lease.as_deref())
        {
            problems.push(e);
        }
        if let Err(e) =
            replay_ledger_core::tables::db::session::server_settings_of(&self.process.session)
        {
            problems.push(e);
        }
        if let Err(e) = Mailer::from_settings(&self.mail) {
            problems.push(e.to_string());
        }
        problems
    }
}
