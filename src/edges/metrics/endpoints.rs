//! `/metrics` and `/healthz` over HTTP, and the one task that reads the database for them.
//!
//! HTTP clients never reach the database: [`DbSnapshot::run`] reads the database gauges on a
//! timer, one connection at a time, and the handlers only look at its last reading. A flood of
//! scrapes then costs no database connection, and the jobs keep the pool. The server itself is
//! [`crate::edges::http_server::serve_bounded`]: bounded connections, timed-out slow clients.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use chrono::Utc;
use sqlx::PgPool;

use super::{DbGauges, Metrics, CONTENT_TYPE};
use crate::edges::http_server::{serve_bounded, HttpLimits};
use replay_ledger_core::services::consumer::horizon::HorizonWatch;
use replay_ledger_core::shared::shutdown::Shutdown;

/// The last reading of the database gauges, shared by the task that reads them and the handlers.
#[derive(Debug, Default)]
pub struct DbSnapshot {
    last: Mutex<Option<Reading>>,
    /// Since when the live consumer's horizon has been held, across readings.
    horizon: HorizonWatch,
}

#[derive(Debug, Clone)]
struct Reading {
    at: Instant,
    gauges: Result<Arc<DbGauges>, String>,
}

impl DbSnapshot {
    pub fn new() -> Self {
        DbSnapshot::default()
    }

    /// One that also logs a warning when the live consumer's horizon has been held longer than
    /// `after` (once per transaction holding it): the live consumer's own reader.
    pub fn warning_after(after: Duration) -> Self {
        DbSnapshot {
            horizon: HorizonWatch::new(Some(after)),
            ..DbSnapshot::default()
        }
    }

    /// Reads the gauges every `every` (each read giving up after `limit`) until `shutdown`.
    pub async fn run(
        self: Arc<Self>,
        pool: PgPool,
        every: Duration,
        limit: Duration,
        mut shutdown: Shutdown,
    ) {
        loop {
            self.refresh(&pool, limit).await;
            tokio::select! {
                _ = shutdown.triggered() => return,
                _ = tokio::time::sleep(every) => {}
            }
        }
    }

    /// One reading, kept whether it succeeded or not.
    pub async fn refresh(&self, pool: &PgPool, limit: Duration) {
        let gauges = DbGauges::read_watching(pool, limit, &self.horizon).await;
        if let Err(e) = &gauges {
            tracing::debug!(error = %e, "database gauges unavailable");
        }
        self.store(Instant::now(), gauges);
    }

    fn store(&self, at: Instant, gauges: Result<DbGauges, String>) {
        let reading = Reading {
            at,
            gauges: gauges.map(Arc::new),
        };
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Some(reading);
    }

    /// The gauges of the last reading, if it succeeded and is at most `max_age` old at `now`;
    /// else why not.
    pub fn current(&self, now: Instant, max_age: Duration) -> Result<Arc<DbGauges>, String> {
        let last = self.last.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let Some(reading) = last else {
            return Err("database: not read yet".into());
        };
        let age = now.saturating_duration_since(reading.at);
        if age > max_age {
            return Err(format!("database: last read {}s ago", age.as_secs()));
        }
        reading.gauges
    }
}

/// What the HTTP handlers need.
#[derive(Clone)]
pub struct HttpState {
    pub metrics: Arc<Metrics>,
    /// The database gauges, kept fresh by [`DbSnapshot::run`].
    pub db: Arc<DbSnapshot>,
    /// A reading older than this counts as no reading: `/healthz` fails and `/metrics` shows
    /// `replay_ledger_database_up 0`.
    pub db_max_age: Duration,
    /// `/healthz` fails when the heartbeat is older than this.
    pub heartbeat_max_age: Duration,
}

/// `/metrics` and `/healthz`.
pub fn router(state: HttpState) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .with_state(state)
}

impl HttpState {
    /// The database as both endpoints tell it: the gauges of the last reading, unless that
    /// reading failed or is stale, or this process's own database steps are failing right now —
    /// so `/metrics` never says `replay_ledger_database_up 1` while `/healthz` says the database
    /// is away.
    fn database(&self) -> Result<Arc<DbGauges>, String> {
        usable(
            self.db.current(Instant::now(), self.db_max_age),
            replay_ledger_core::tables::db::trouble(self.db_max_age),
        )
    }
}

/// A reading is usable when it is current and no step of this process is failing.
fn usable(
    reading: Result<Arc<DbGauges>, String>,
    trouble: Option<String>,
) -> Result<Arc<DbGauges>, String> {
    let gauges = reading?;
    match trouble {
        Some(cause) => Err(format!("database: {cause}")),
        None => Ok(gauges),
    }
}

async fn metrics(State(state): State<HttpState>) -> impl IntoResponse {
    let body = super::render(&state.metrics, state.database().ok().as_deref());
    ([(header::CONTENT_TYPE, CONTENT_TYPE)], body)
}

async fn healthz(State(state): State<HttpState>) -> impl IntoResponse {
    match health(&state) {
        Ok(()) => (StatusCode::OK, "ok\n".to_string()),
        Err(reason) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("unhealthy: {reason}\n"),
        ),
    }
}

/// Healthy when the last database reading succeeded and is recent, the process's own database
/// steps are not failing (a server that can be read but refuses writes, for want of disk), and
/// the heartbeat is recent.
fn health(state: &HttpState) -> Result<(), String> {
    state.database()?;
    match state.metrics.heartbeat_age(Utc::now()) {
        Some(age) if age <= state.heartbeat_max_age => Ok(()),
        Some(age) => Err(format!("scheduler: last heartbeat {}s ago", age.as_secs())),
        None => Err("scheduler: no heartbeat yet".into()),
    }
}

/// How `/metrics` and `/healthz` are served beside a daemon (`serve`, `consume`). Defaults in
/// brackets.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// Where they listen [`127.0.0.1:9187`]; port 0 picks a free one.
    pub addr: std::net::SocketAddr,
    /// What HTTP clients may hold: connections, timeouts [`HttpLimits::default`].
    pub limits: HttpLimits,
    /// How often the one reader of the database gauges reads them [5 s]: HTTP clients never
    /// reach the database. A reading older than twice this plus `read_timeout` counts as failed.
    pub refresh_every: Duration,
    /// Each reading gives up after this [2 s]; a failed reading makes `/healthz` fail.
    pub read_timeout: Duration,
    /// `/healthz` requires a heartbeat (every 5 s) younger than this [30 s].
    pub heartbeat_max_age: Duration,
    /// Log a warning when the live consumer's horizon has been held longer than this (the live
    /// consumer's own endpoint) [none].
    pub horizon_warning: Option<Duration>,
}

impl Default for Endpoint {
    fn default() -> Self {
        Endpoint {
            addr: std::net::SocketAddr::from(([127, 0, 0, 1], 9187)),
            limits: HttpLimits::default(),
            refresh_every: Duration::from_secs(5),
            read_timeout: Duration::from_secs(2),
            heartbeat_max_age: Duration::from_secs(30),
            horizon_warning: None,
        }
    }
}

impl Endpoint {
    pub fn validate(&self) -> Result<(), String> {
        if self.refresh_every.is_zero() || self.read_timeout.is_zero() {
            return Err("the gauges' refresh and read timeout must be positive".into());
        }
        self.limits.validate()?;
        if self.heartbeat_max_age < Duration::from_secs(10) {
            return Err(
                "heartbeat_max_age must be at least 10s (the heartbeat beats every 5s)".into(),
            );
        }
        Ok(())
    }

    /// Binds the address, starts the one reader of the database gauges, and serves until
    /// `shutdown`; returns the address it got and the server's task.
    pub async fn start(
        &self,
        pool: &PgPool,
        metrics: Arc<Metrics>,
        shutdown: &Shutdown,
    ) -> std::io::Result<(std::net::SocketAddr, tokio::task::JoinHandle<()>)> {
        let (listener, local) = bind(self.addr).await?;
        let db = Arc::new(match self.horizon_warning {
            Some(after) => DbSnapshot::warning_after(after),
            None => DbSnapshot::new(),
        });
        let reader = Arc::clone(&db).run(
            pool.clone(),
            self.refresh_every,
            self.read_timeout,
            shutdown.clone(),
        );
        tokio::spawn(reader);
        let state = HttpState {
            metrics,
            db,
            db_max_age: self.refresh_every * 2 + self.read_timeout,
            heartbeat_max_age: self.heartbeat_max_age,
        };
        tracing::info!(addr = %local, "serving /metrics and /healthz");
        let server = serve(listener, state, self.limits, shutdown.clone());
        Ok((local, tokio::spawn(server)))
    }
}

/// Binds `addr` (port 0 = any free port); returns the listener and the address it got.
pub async fn bind(
    addr: std::net::SocketAddr,
) -> std::io::Result<(tokio::net::TcpListener, std::net::SocketAddr)> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    Ok((listener, local))
}

/// Serves the router on `listener` within `limits` until `shutdown`.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: HttpState,
    limits: HttpLimits,
    shutdown: Shutdown,
) {
    serve_bounded(listener, router(state), limits, shutdown).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX_AGE: Duration = Duration::from_secs(15);

    #[test]
    fn a_fresh_successful_reading_is_current() {
        let snapshot = DbSnapshot::new();
        let at = Instant::now();
        snapshot.store(
            at,
            Ok(DbGauges {
                review_queue: 3,
                ..DbGauges::default()
            }),
        );

        let gauges = snapshot.current(at + Duration::from_secs(5), MAX_AGE);

        assert_eq!(gauges.map(|g| g.review_queue), Ok(3));
    }

    #[test]
    fn a_failed_stale_or_missing_reading_says_why_it_is_not_current() {
        let snapshot = DbSnapshot::new();
        let at = Instant::now();
        let reason = |s: &DbSnapshot, now| s.current(now, MAX_AGE).map(|_| ()).unwrap_err();

        assert_eq!(reason(&snapshot, at), "database: not read yet");
        snapshot.store(at, Err("database: connection refused".into()));
        assert_eq!(reason(&snapshot, at), "database: connection refused");
        snapshot.store(at, Ok(DbGauges::default()));
        assert_eq!(
            reason(&snapshot, at + Duration::from_secs(40)),
            "database: last read 40s ago"
        );
    }

    #[test]
    fn a_fresh_reading_is_not_usable_while_the_process_own_steps_fail() {
        let fresh = || Ok(Arc::new(DbGauges::default()));
        let failing = Some("the server's disk is full".to_string());

        let verdict = usable(fresh(), failing);

        assert_eq!(
            verdict.as_ref().map(|_| ()).unwrap_err(),
            "database: the server's disk is full"
        );
        let exposition =
            crate::edges::metrics::render(&Metrics::default(), verdict.ok().as_deref());
        assert!(exposition.contains("replay_ledger_database_up 0\n"));
        assert!(usable(fresh(), None).is_ok());
    }
}
