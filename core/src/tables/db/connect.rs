//! Connecting to the database, and saying why it failed. The URL is checked before anything is
//! dialled: one that can never work (not `postgres://`, unparseable) is an input error. Then one
//! attempt — name lookup, TCP, TLS, authentication — bounded by [`ATTEMPT_LIMIT`], tells the cause
//! in words an operator can act on: connection refused, unknown host, no answer, authentication
//! failed, no such database. A caller that may wait (`--wait-for-db`) tries again while the cause
//! is one that time can cure, saying what it waits for.
//!
//! Every message names the server as `host:port/database`, never the user's password.

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Connection, PgConnection, PgPool};

use crate::shared::text::inert;

/// How long one attempt (lookup, TCP, TLS, authentication) may take before it counts as "no
/// answer".
pub const ATTEMPT_LIMIT: Duration = Duration::from_secs(5);
/// The pause between two attempts while waiting.
const PAUSE: Duration = Duration::from_secs(1);
/// While waiting, the cause is said again at least this often (and whenever it changes).
const REMIND_EVERY: Duration = Duration::from_secs(10);
/// The longest `--wait-for-db`.
pub const MAX_WAIT: Duration = Duration::from_secs(24 * 3600);

/// Why a connection could not be had.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The URL can never work, however long one waits: invalid input (exit 2).
    #[error("DATABASE_URL (or --database-url) {0}")]
    BadUrl(String),
    /// A session setting from the environment cannot be used: invalid input (exit 2).
    #[error("{0}")]
    BadSetting(String),
    /// The server could not be reached, or refused us.
    #[error("cannot connect to the database at {target}: {cause}")]
    Failed { target: String, cause: Cause },
}

impl ConnectError {
    pub fn is_bad_url(&self) -> bool {
        matches!(self, ConnectError::BadUrl(_) | ConnectError::BadSetting(_))
    }

    /// Whether waiting may cure it (see [`Cause::may_pass`]).
    pub fn may_pass(&self) -> bool {
        matches!(self, ConnectError::Failed { cause, .. } if cause.may_pass())
    }
}

/// Why one attempt failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Cause {
    #[error("connection refused to {0} (is the server running, on that port?)")]
    Refused(String),
    #[error("unknown host `{host}` ({detail})")]
    UnknownHost { host: String, detail: String },
    #[error("no answer from {addr} within {}", humantime::format_duration(*.after))]
    NoAnswer { addr: String, after: Duration },
    #[error("authentication failed for role `{role}` ({message})")]
    AuthFailed { role: String, message: String },
    #[error("database `{0}` does not exist")]
    NoDatabase(String),
    /// Starting up, shutting down, or out of connection slots.
    #[error("the server does not accept connections now ({0})")]
    NotAccepting(String),
    /// The network between here and the server (reset, unreachable).
    #[error("{0}")]
    Network(String),
    #[error("TLS failed: {0}")]
    Tls(String),
    #[error("{0}")]
    Other(String),
}

impl Cause {
    /// Whether time may cure it: the server is not up yet, its name does not resolve yet (a
    /// container's DNS), it is starting or full, or the network is. A wrong password, a missing
    /// database, a TLS or protocol failure stay as they are.
    pub fn may_pass(&self) -> bool {
        matches!(
            self,
            Cause::Refused(_)
                | Cause::UnknownHost { .. }
                | Cause::NoAnswer { .. }
                | Cause::NotAccepting(_)
                | Cause::Network(_)
        )
    }
}

/// The connection options of `url`, if it is a PostgreSQL URL that can work. Errors never quote
/// the URL (it may hold a password).
pub fn check_url(url: &str) -> Result<PgConnectOptions, ConnectError> {
    let parsed = url::Url::parse(url.trim()).map_err(|e| {
        ConnectError::BadUrl(format!(
            "is not a URL ({e}); expected postgres://user@host:5432/database"
        ))
    })?;
    if !matches!(parsed.scheme(), "postgres" | "postgresql") {
        return Err(ConnectError::BadUrl(format!(
            "is not a PostgreSQL URL: its scheme is `{}`, expected postgres:// or postgresql://",
            inert(parsed.scheme())
        )));
    }
    PgConnectOptions::from_str(url.trim()).map_err(|e| {
        // The innermost cause: sqlx wraps "error with configuration" around itself.
        let mut cause: &dyn std::error::Error = &e;
        while let Some(inner) = cause.source() {
            cause = inner;
        }
        let mut said = cause.to_string();
        if let Some(password) = parsed.password().filter(|p| !p.is_empty()) {
            let decoded = percent_decode(password);
            for form in [password, decoded.as_str()] {
                said = said.replace(form, "***");
            }
        }
        ConnectError::BadUrl(format!("cannot be used: {}", inert(&said)))
    })
}

fn percent_decode(s: &str) -> String {
    url::form_urlencoded::parse(format!("x={s}").as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default()
}

/// `host:port/database` (a socket: `dir/.s.PGSQL.port/database`), for messages.
pub fn target_of(options: &PgConnectOptions) -> String {
    format!("{}/{}", address_of(options), database_of(options))
}

fn address_of(options: &PgConnectOptions) -> String {
    match options.get_socket() {
        Some(dir) => format!("{}/.s.PGSQL.{}", dir.display(), options.get_port()),
        None => format!("{}:{}", options.get_host(), options.get_port()),
    }
}

/// The database connected to: the one named, else (as PostgreSQL does) the role's name.
fn database_of(options: &PgConnectOptions) -> String {
    options
        .get_database()
        .unwrap_or(options.get_username())
        .to_string()
}

/// A pool sized for one worker process, connecting when first used. Its server is watched, so
/// that its timeouts can be explained ([`cause_for`]).
pub fn pool_for(options: PgConnectOptions) -> PgPool {
    watch(&options);
    let reached = options.clone();
    PgPoolOptions::new()
        .max_connections(10)
        .acquire_timeout(Duration::from_secs(10))
        .after_connect(move |_, _| {
            seen(&reached);
            Box::pin(async { Ok(()) })
        })
        .connect_lazy_with(options)
}

/// The options of every session this program opens for `role`: the URL's, tagged with an
/// application name, with the server's give-up settings ([`super::session`]).
pub fn session_options(url: &str, role: &str) -> Result<PgConnectOptions, ConnectError> {
    let options = check_url(url)?.application_name(&super::application_name(role));
    super::session::tuned(options).map_err(ConnectError::BadSetting)
}

/// A pool for `url` that connects when first used: for a daemon that starts while its database
/// is away. Only the URL is checked.
pub fn connect_lazy(url: &str, role: &str) -> Result<PgPool, ConnectError> {
    Ok(pool_for(session_options(url, role)?))
}

/// A pool for `url` once one connection succeeded; the cause at once otherwise.
pub async fn connect(url: &str, role: &str) -> Result<PgPool, ConnectError> {
    connect_waiting(url, role, Duration::ZERO).await
}

/// A pool for `url` once one connection succeeded, trying again for up to `wait` while the cause
/// is one that time may cure, and saying what it waits for.
pub async fn connect_waiting(
    url: &str,
    role: &str,
    wait: Duration,
) -> Result<PgPool, ConnectError> {
    let options = session_options(url, role)?;
    let target = target_of(&options);
    let started = Instant::now();
    let mut said: Option<(Cause, Instant)> = None;
    loop {
        let cause = match attempt(&options).await {
            Ok(()) => {
                seen(&options);
                return Ok(pool_for(options));
            }
            Err(cause) => cause,
        };
        let left = wait.saturating_sub(started.elapsed());
        if !cause.may_pass() || left.is_zero() {
            return Err(ConnectError::Failed { target, cause });
        }
        let remind = said
            .as_ref()
            .is_none_or(|(before, at)| *before != cause || at.elapsed() >= REMIND_EVERY);
        if remind {
            if said.is_none() {
                tracing::info!(
                    "waiting up to {} for the database at {target}: {cause}",
                    humantime::format_duration(wait)
                );
            } else {
                tracing::info!(
                    "still waiting for the database at {target} ({} left): {cause}",
                    humantime::format_duration(Duration::from_secs(left.as_secs()))
                );
            }
            said = Some((cause, Instant::now()));
        }
        tokio::time::sleep(PAUSE.min(left)).await;
    }
}

/// One connection, closed again: `Ok` when the server accepted us, else why not.
pub async fn attempt(options: &PgConnectOptions) -> Result<(), Cause> {
    let addr = address_of(options);
    if options.get_socket().is_none() {
        resolve(options.get_host(), options.get_port()).await?;
    }
    match tokio::time::timeout(ATTEMPT_LIMIT, PgConnection::connect_with(options)).await {
        Ok(Ok(conn)) => {
            let _ = conn.close().await;
            Ok(())
        }
        Ok(Err(e)) => Err(classify(&e, options, &addr)),
        Err(_) => Err(Cause::NoAnswer {
            addr,
            after: ATTEMPT_LIMIT,
        }),
    }
}

/// Looks the host up before dialling, so that a name that does not resolve is told as such.
async fn resolve(host: &str, port: u16) -> Result<(), Cause> {
    let unknown = |detail: String| Cause::UnknownHost {
        host: inert(host),
        detail,
    };
    match tokio::time::timeout(ATTEMPT_LIMIT, tokio::net::lookup_host((host, port))).await {
        Ok(Ok(mut addrs)) => match addrs.next() {
            Some(_) => Ok(()),
            None => Err(unknown("the name has no address".into())),
        },
        Ok(Err(e)) => Err(unknown(e.to_string())),
        Err(_) => Err(unknown(format!(
            "the lookup took longer than {}",
            humantime::format_duration(ATTEMPT_LIMIT)
        ))),
    }
}

/// The cause of a failed connection attempt to `addr`.
fn classify(err: &sqlx::Error, options: &PgConnectOptions, addr: &str) -> Cause {
    use std::io::ErrorKind;
    match err {
        sqlx::Error::Io(io) => match io.kind() {
            // A socket file that is not there: no server listens in that directory.
            ErrorKind::ConnectionRefused | ErrorKind::NotFound => Cause::Refused(addr.to_string()),
            ErrorKind::TimedOut => Cause::NoAnswer {
                addr: addr.to_string(),
                after: ATTEMPT_LIMIT,
            },
            _ => Cause::Network(format!("{addr}: {io}")),
        },
        sqlx::Error::Tls(e) => Cause::Tls(inert(&e.to_string())),
        sqlx::Error::Database(db) => {
            let code = db.code().unwrap_or_default();
            let message = inert(db.message());
            match &*code {
                "28P01" | "28000" => Cause::AuthFailed {
                    role: inert(options.get_username()),
                    message,
                },
                "3D000" => Cause::NoDatabase(inert(&database_of(options))),
                "57P01" | "57P02" | "57P03" | "53300" => {
                    Cause::NotAccepting(format!("{message}; SQLSTATE {code}"))
                }
                c if c.starts_with("08") => Cause::Network(message),
                _ => Cause::Other(format!("{message} (SQLSTATE {code})")),
            }
        }
        other => Cause::Other(inert(&other.to_string())),
    }
}

// Why a pool gets no connection. sqlx's pool retries a refused connection, a server starting up
// or in recovery (57P03) and one out of slots (53300) silently until its acquire timeout, then
// says only "pool timed out": the cause is lost. So every pool this process builds is noted with
// its options; when one times out, one direct attempt with the same options ([`attempt`]) finds
// the last connect error, in the words of [`Cause`]. Tasks that ask within [`FRESH`] share one
// attempt, so a hundred steps timing out together do not dial a hundred times.
//
// A server this process was connected to (a pool got a connection, or a command's first attempt
// succeeded) that now refuses every connection has stopped. PostgreSQL does that after a full
// `pg_wal` (a PANIC, then no restart): it stays down until someone frees space and starts it, so
// the cause says so rather than letting an operator wait for it.

/// How long one attempt's answer stands for every task that asks.
const FRESH: Duration = Duration::from_secs(2);

/// One server (and role) this process connects to.
struct Server {
    options: PgConnectOptions,
    /// A connection to it succeeded once in this process.
    seen: AtomicBool,
    /// The last direct attempt: when, and what it found (`None`: it connected).
    last: tokio::sync::Mutex<Option<(Instant, Option<Cause>)>>,
}

static SERVERS: LazyLock<Mutex<HashMap<String, Arc<Server>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// Who and where: the role and `host:port/database`.
fn key_of(options: &PgConnectOptions) -> String {
    format!("{}@{}", options.get_username(), target_of(options))
}

fn server(options: &PgConnectOptions) -> Arc<Server> {
    let mut servers = SERVERS.lock().unwrap_or_else(|e| e.into_inner());
    servers
        .entry(key_of(options))
        .or_insert_with(|| {
            Arc::new(Server {
                options: options.clone(),
                seen: Default::default(),
                last: tokio::sync::Mutex::new(None),
            })
        })
        .clone()
}

/// Notes a pool's server, so that a timeout of any pool can be explained.
fn watch(options: &PgConnectOptions) {
    server(options);
}

/// Notes that a connection to this server succeeded.
fn seen(options: &PgConnectOptions) {
    server(options).seen.store(true, Ordering::Relaxed);
}

/// Why `options` gets no connection now, in words: the cause found by a direct attempt (shared
/// for [`FRESH`]), or that the server answers again.
pub async fn cause_for(options: &PgConnectOptions) -> String {
    let server = server(options);
    let mut last = server.last.lock().await;
    let found = match &*last {
        Some((at, found)) if at.elapsed() < FRESH => found.clone(),
        _ => {
            let found = attempt(&server.options).await.err();
            *last = Some((Instant::now(), found.clone()));
            found
        }
    };
    if found.is_none() {
        seen(options);
    }
    said(found, server.seen.load(Ordering::Relaxed))
}

/// [`cause_for`] every pool of this process, for a step that does not say which pool timed out
/// (a process has one, or several on the same server): each distinct answer once.
pub async fn cause_for_pools() -> String {
    let servers: Vec<Arc<Server>> = {
        let servers = SERVERS.lock().unwrap_or_else(|e| e.into_inner());
        servers.values().cloned().collect()
    };
    let mut said: Vec<String> = Vec::new();
    for server in servers {
        let cause = cause_for(&server.options).await;
        if !said.contains(&cause) {
            said.push(cause);
        }
    }
    match said.is_empty() {
        true => "no connection within the pool's timeout".into(),
        false => said.join("; "),
    }
}

/// The words for what an attempt found.
fn said(found: Option<Cause>, seen: bool) -> String {
    match found {
        None => "the pool timed out, though the server answers again".into(),
        Some(cause @ Cause::Refused(_)) if seen => format!(
            "{cause}; this process was connected to it before, so the server has stopped — \
             after a full disk (pg_wal) PostgreSQL stops with a PANIC and stays down until \
             space is freed and it is started by hand"
        ),
        Some(cause) => cause.to_string(),
    }
}

/// `--wait-for-db`: a duration from 0 to [`MAX_WAIT`] (`0s`: do not wait).
pub fn parse_wait(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s.trim())
        .map_err(|e| format!("invalid duration `{}`: {e} (e.g. `30s`, `2m`)", inert(s)))?;
    if d > MAX_WAIT {
        return Err(format!(
            "at most {} (a database that is not up within a day will not come)",
            humantime::format_duration(MAX_WAIT)
        ));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_of_another_scheme_is_refused_naming_the_scheme_only() {
        let err = check_url("mysql://root:hunter2@db:3306/app").unwrap_err();
        assert!(err.is_bad_url());
        let said = err.to_string();
        assert!(said.contains("scheme is `mysql`"), "{said}");
        assert!(!said.contains("hunter2"), "{said}");
    }

    #[test]
    fn an_unparseable_url_is_refused_without_quoting_it() {
        for url in ["not a url hunter2", "postgres://u:hunter2@h:notaport/db"] {
            let said = check_url(url).unwrap_err().to_string();
            assert!(said.starts_with("DATABASE_URL"), "{said}");
            assert!(!said.contains("hunter2"), "{said}");
        }
    }

    #[test]
    fn a_bad_parameter_is_refused_with_the_password_masked() {
        let said = check_url("postgres://u:hunter2@h/db?sslmode=hunter2")
            .unwrap_err()
            .to_string();
        assert!(!said.contains("hunter2"), "{said}");
    }

    #[test]
    fn the_target_names_host_port_and_database_but_not_the_user() {
        let options = check_url("postgres://alice:pw@db.example:6543/ledger").unwrap();
        assert_eq!(target_of(&options), "db.example:6543/ledger");
    }

    #[test]
    fn only_causes_that_time_can_cure_are_waited_for() {
        assert!(Cause::Refused("h:1".into()).may_pass());
        assert!(!Cause::NoDatabase("x".into()).may_pass());
        let auth = Cause::AuthFailed {
            role: "r".into(),
            message: "m".into(),
        };
        assert!(!auth.may_pass());
    }

    #[test]
    fn wait_for_db_takes_durations_up_to_a_day() {
        assert_eq!(parse_wait("0s"), Ok(Duration::ZERO));
        assert_eq!(parse_wait("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_wait("2d").is_err());
        assert!(parse_wait("soon").is_err());
    }

    #[test]
    fn a_refused_connection_to_a_server_seen_before_says_it_stopped() {
        let refused = Cause::Refused("db:5432".into());
        assert!(!said(Some(refused.clone()), false).contains("stopped"));
        let seen = said(Some(refused), true);
        assert!(seen.contains("has stopped"), "{seen}");
        assert!(seen.contains("started by hand"), "{seen}");
    }
}
