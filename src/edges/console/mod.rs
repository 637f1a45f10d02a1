//! The web console (`replay-ledger console`, `serve --console-addr`): finance reads a
//! simulation's diff and approves it, operators settle the review queue, everyone reads what
//! executions did and who did what. Server-rendered HTML (maud, escaping by default), no
//! JavaScript, one stylesheet of its own, served by [`crate::edges::http_server`] with the metrics
//! server's limits.
//!
//! - [`accounts`]: console accounts and their roles (viewer, finance, operator), argon2id;
//! - `session`, `csrf`, `auth`: sessions in PostgreSQL (so instances share them; only a digest of
//!   the cookie's token is stored; idle expiry by the database's clock), the CSRF token bound to
//!   each session, login with throttling per account and per address, logout;
//! - `executions`, `approve`, `review`, `audit`, `pedidos` (one order's story): the pages.
//!   Every figure comes from the tallies
//!   and the report model ([`crate::services::report`]), the approval is [`replay_ledger_core::engine::approval`]'s (the CLI's
//!   checks and fingerprint), a decision is [`replay_ledger_core::tables::ledger`]'s;
//! - `templates`, `views`, `headers`, `error`, `guard`: markup, the models handlers fill and
//!   templates render (so templates import no handler), security headers, error pages, and what
//!   every request must be before a handler sees it (sizes, no NUL; axum's refusals localized).
//!
//! - `rebuild`: the blue-green rebuild of `comissao` — its progress, the comparison and the
//!   orders that differ, and finance's approval of the swap, bound to the fingerprint shown;
//! - `requests`: people act — start an approved gated real run, resume a real run, sweep now —
//!   each confirmed (GET) and posted with the CSRF token; the console only records the request
//!   (audited), `serve` runs it ([`crate::services::scheduler`]).
//!
//! Who did it is proven, not claimed: the console records an approval or a review decision only
//! through `security definer` functions that take the session's token digest and check the
//! account's role in the database (see `migrations/20261202010000_console.sql`).

pub mod accounts;
mod approve;
mod audit;
mod auth;
mod csrf;
mod download;
mod error;
mod executions;
mod guard;
mod headers;
mod history;
mod jobs;
mod live;
mod pedidos;
mod rebuild;
mod requests;
mod review;
mod search;
mod session;
mod templates;
mod verification;
mod views;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::routing::{get, post};
use axum::Router;
use chrono_tz::Tz;
use sqlx::PgPool;

use crate::edges::http_server::{serve_bounded_answering, HttpLimits};
use replay_ledger_core::shared::shutdown::Shutdown;

pub use accounts::{Account, AccountError, Role};

/// How many failed logins are tolerated, and over how long. Defaults in brackets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Throttle {
    /// Failed logins are counted over this [15 min].
    pub window: Duration,
    /// Failed logins of one account within the window before its logins are refused [5].
    pub per_account: i64,
    /// Failed logins from one address within the window before its logins are refused [20].
    pub per_address: i64,
}

impl Default for Throttle {
    fn default() -> Self {
        Throttle {
            window: Duration::from_secs(15 * 60),
            per_account: 5,
            per_address: 20,
        }
    }
}

/// The longest idle timeout (and throttle window) the console takes: beyond it a session would
/// never end, and the database's intervals are bounded.
pub const MAX_IDLE_TIMEOUT: Duration = Duration::from_secs(30 * 24 * 3600);

/// How the console behaves. Defaults in brackets.
#[derive(Debug, Clone)]
pub struct ConsoleConfig {
    /// Where it listens [`127.0.0.1:9188`]; port 0 picks a free one.
    pub addr: SocketAddr,
    /// The jobs directory: an approval binds the job's definition as configured there.
    pub jobs_dir: PathBuf,
    /// Session cookies carry `Secure` [true]; off only for plain-HTTP loopback use.
    pub secure_cookies: bool,
    /// A session unused for this long is over [30 min].
    pub idle_timeout: Duration,
    pub throttle: Throttle,
    /// Requests from these addresses (the company's TLS proxy) name the client in
    /// `X-Forwarded-For`; from any other, the peer is the client [none].
    pub trusted_proxies: Vec<IpAddr>,
    /// Times of pages that belong to no job (review, audit) are shown in this timezone [UTC];
    /// an execution's, in its job's `timezone`, as its e-mail shows them.
    pub timezone: Tz,
    /// Connections and timeouts, as the metrics server's [`HttpLimits::default`].
    pub http_limits: HttpLimits,
}

impl Default for ConsoleConfig {
    fn default() -> Self {
        ConsoleConfig {
            addr: SocketAddr::from(([127, 0, 0, 1], 9188)),
            jobs_dir: PathBuf::from("jobs"),
            secure_cookies: true,
            idle_timeout: Duration::from_secs(30 * 60),
            throttle: Throttle::default(),
            trusted_proxies: Vec::new(),
            timezone: Tz::UTC,
            http_limits: HttpLimits::default(),
        }
    }
}

impl ConsoleConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.idle_timeout.is_zero() || self.throttle.window.is_zero() {
            return Err("the idle timeout and the throttle window must be positive".into());
        }
        if self.idle_timeout > MAX_IDLE_TIMEOUT || self.throttle.window > MAX_IDLE_TIMEOUT {
            return Err(
                "the idle timeout and the throttle window may be at most 30 days (e.g. 30m, 8h, 7d)"
                    .into(),
            );
        }
        if self.throttle.per_account < 1 || self.throttle.per_address < 1 {
            return Err("the login throttle limits must be at least 1".into());
        }
        self.http_limits.validate()
    }
}

/// What every handler shares.
#[derive(Clone)]
pub struct Console {
    pool: PgPool,
    config: Arc<ConsoleConfig>,
    /// The jobs directory, loaded once and again only when it changes.
    jobs: Arc<jobs::JobsCache>,
}

impl Console {
    /// The timezone an execution of `job` is shown in: the job's own (as its e-mail shows
    /// times), else the console's.
    pub(crate) fn timezone_of(&self, job: &str) -> Tz {
        self.jobs
            .find_job(job)
            .map_or(self.config.timezone, |(_, job)| job.timezone)
    }

    /// The job named `name`: the jobs directory's, else a verify job's proposal (read against
    /// the directory's effect types), with the effect catalog.
    pub(crate) async fn find_job(
        &self,
        name: &str,
    ) -> Result<
        (
            replay_ledger_core::config::EffectCatalog,
            replay_ledger_core::config::Job,
        ),
        String,
    > {
        let inert =
            |e: &dyn std::fmt::Display| replay_ledger_core::shared::text::inert(&e.to_string());
        let missing = match self.jobs.find_job(name) {
            Ok(found) => return Ok(found),
            Err(e) => e,
        };
        let loaded = self.jobs.get();
        let Ok(dir) = loaded.as_ref() else {
            return Err(inert(&missing));
        };
        match crate::services::verify::propose::find(&self.pool, name, &dir.effects).await {
            Ok(Some(job)) => Ok((dir.effects.clone(), job)),
            Ok(None) => Err(inert(&missing)),
            Err(e) => Err(inert(&e)),
        }
    }

    pub fn new(pool: PgPool, config: ConsoleConfig) -> Result<Console, String> {
        config.validate()?;
        Ok(Console {
            pool,
            jobs: Arc::new(jobs::JobsCache::new(config.jobs_dir.clone())),
            config: Arc::new(config),
        })
    }

    /// Every route of the console, with the security headers on every response.
    pub fn router(&self) -> Router {
        Router::new()
            .route("/login", get(auth::login_page).post(auth::login))
            .route("/logout", post(auth::logout))
            .route("/", get(executions::list))
            .route("/executions/{id}", get(executions::detail))
            .route("/executions/{id}/diff.csv", get(executions::diff_csv))
            .route(
                "/executions/{id}/approve",
                get(approve::confirm).post(approve::approve),
            )
            .route("/executions/{id}/diff.xlsx", get(executions::diff_xlsx))
            .route("/executions/{id}/effects.csv", get(approve::effects_csv))
            .route("/executions/{id}/effects.xlsx", get(approve::effects_xlsx))
            .route("/pedidos/{pedido_id}", get(pedidos::detail))
            .route("/review", get(review::list))
            .route("/review/confirm", get(review::confirm))
            .route("/review/resolve", post(review::resolve))
            .route("/audit", get(audit::list))
            .route("/busca", get(search::search))
            .route("/verificacao", get(verification::page))
            .route("/historico", get(history::page))
            .route(
                "/executions/{id}/start",
                get(requests::start_confirm).post(requests::start),
            )
            .route(
                "/executions/{id}/resume",
                get(requests::resume_confirm).post(requests::resume),
            )
            .route(
                "/executions/{id}/resimulate",
                get(requests::resimulate_confirm).post(requests::resimulate),
            )
            .route(
                "/executions/{id}/interrupt",
                get(requests::interrupt_confirm).post(requests::interrupt),
            )
            .route("/sweep", get(requests::sweep_confirm).post(requests::sweep))
            .route("/reconstrucao", get(rebuild::page))
            .route("/reconstrucao/aprovar", post(rebuild::approve))
            .route("/reconstrucao/diff.csv", get(rebuild::diff_csv))
            .route("/reconstrucao/diff.xlsx", get(rebuild::diff_xlsx))
            .route(headers::STYLESHEET_PATH, get(headers::stylesheet))
            .fallback(error::not_found)
            .layer(axum::middleware::map_response(guard::localize))
            .layer(axum::middleware::from_fn(guard::guard))
            .layer(axum::middleware::map_response(headers::secure))
            .with_state(self.clone())
    }

    /// Serves on `listener` until `shutdown`, within the configured limits; every answer,
    /// the server's own 503 included, carries the security headers.
    pub async fn serve(self, listener: tokio::net::TcpListener, shutdown: Shutdown) {
        let limits = self.config.http_limits;
        let router = self.router();
        serve_bounded_answering(listener, router, limits, shutdown, headers::timed_out).await;
    }
}

/// Binds `addr` (port 0 = any free port); returns the listener and the address it got.
pub async fn bind(addr: SocketAddr) -> std::io::Result<(tokio::net::TcpListener, SocketAddr)> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    Ok((listener, local))
}
