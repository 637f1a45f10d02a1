//! An HTTP/1 server for an axum [`Router`] that a flood of connections cannot exhaust: the one way
//! this crate listens on a socket (`/metrics` and `/healthz` of `serve`; later the web console).
//!
//! `axum::serve` accepts every connection and keeps each one as long as its client likes, so a few
//! hundred idle sockets use up the process's file descriptors and with them the database
//! connections of the jobs. [`serve_bounded`] owns the accept loop instead:
//!
//! - at most [`HttpLimits::max_connections`] connections are served at once; a connection
//!   accepted beyond that is **closed at once** (no answer). It costs a file descriptor for an
//!   instant, never for longer, and it never waits in a queue behind idle sockets;
//! - a client must send a complete request head within [`HttpLimits::header_read_timeout`] of
//!   connecting, and again within it of the end of each response on a kept-alive connection, or
//!   the connection is closed: this bounds both slowloris clients and idle keep-alive sockets;
//! - a handler that has not answered within [`HttpLimits::request_timeout`] answers 503;
//! - no connection lives longer than [`HttpLimits::max_connection_age`] (a slow reader of a large
//!   response, a slowly sent body);
//! - on shutdown it stops accepting, lets requests in progress finish (bounded by
//!   `request_timeout`) and returns once every connection is closed.
//!
//! Every request carries its peer's address as axum's `ConnectInfo<SocketAddr>` extension (the
//! console throttles logins per address).
//!
//! Where the console's promise (every answer a page in Portuguese with the security headers)
//! stops: a request head hyper cannot buffer — past its read buffer (hyper's default
//! `max_buf_size`, about 400 KiB) or with more than its 100 header fields — is refused by hyper
//! itself with a bare `431` (no body, no security headers) before any router runs. Heads between
//! the console's own limits (`guard`: 8 KiB target, 32 KiB or 64 header fields) and hyper's get
//! the console's page.
//!
//! What it does not do: tell a Prometheus scraper from an attacker. A client that keeps
//! reconnecting can hold every slot, and the server then closes other connections at once —
//! requests fail fast instead of hanging, and the rest of the process keeps its file descriptors.
//! Keep the port on loopback or behind a firewall.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Request, Response, StatusCode};
use axum::response::IntoResponse;
use axum::Router;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::{service_fn, Service as _};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use replay_ledger_core::shared::shutdown::Shutdown;

/// How much of the process a server's clients may hold. Defaults in brackets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// Connections served at once [256 connections]; one accepted beyond it is closed at once. Each holds a
    /// file descriptor, so keep it well under the process's open-files limit (`LimitNOFILE`):
    /// the database pool, the jobs' lock connections and the providers need theirs.
    pub max_connections: usize,
    /// The time a client has to send a complete request head, from connecting and from the end
    /// of each response on a kept-alive connection [5 s]. hyper starts this one timer whenever a
    /// connection waits for a request, so it is also the idle keep-alive timeout.
    pub header_read_timeout: Duration,
    /// The time a handler has to produce a response before the client gets 503 instead [10 s].
    pub request_timeout: Duration,
    /// The longest a connection may live, whatever it does [60 s]; a scraper that keeps its
    /// connection alive simply opens a new one.
    pub max_connection_age: Duration,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            max_connections: 256,
            header_read_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(10),
            max_connection_age: Duration::from_secs(60),
        }
    }
}

impl HttpLimits {
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=1_000_000).contains(&self.max_connections) {
            return Err("max_connections must be between 1 and 1000000".into());
        }
        let positive = [
            ("header_read_timeout", self.header_read_timeout),
            ("request_timeout", self.request_timeout),
            ("max_connection_age", self.max_connection_age),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, d)| d.is_zero()) {
            return Err(format!("{name} must be positive"));
        }
        Ok(())
    }
}

/// Serves `router` on `listener` within `limits` until `shutdown`, then waits for the open
/// connections to finish (see the module docs).
pub async fn serve_bounded(
    listener: TcpListener,
    router: Router,
    limits: HttpLimits,
    shutdown: Shutdown,
) {
    serve_bounded_answering(listener, router, limits, shutdown, timed_out).await;
}

/// As [`serve_bounded`], with `timed_out` as the answer to a handler that overran
/// `request_timeout`: that answer is made outside `router`, so its layers (the console's
/// security headers) are not on it unless `timed_out` puts them there.
pub async fn serve_bounded_answering(
    listener: TcpListener,
    router: Router,
    limits: HttpLimits,
    mut shutdown: Shutdown,
    timed_out: fn() -> Response<Body>,
) {
    warn_if_over_open_files_limit(limits.max_connections);
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let mut refused = Refused::default();
    loop {
        let (stream, peer) = tokio::select! {
            _ = shutdown.triggered() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    on_accept_error(&e).await;
                    continue;
                }
            },
        };
        match Arc::clone(&slots).try_acquire_owned() {
            Ok(slot) => {
                let server = Served {
                    router: router.clone(),
                    limits,
                    timed_out,
                };
                let conn = connection(stream, peer, server, slot, shutdown.clone());
                tokio::spawn(conn);
            }
            Err(_) => {
                drop(stream);
                refused.count(limits.max_connections);
            }
        }
    }
    drop(listener);
    // Every connection holds a slot until it ends.
    let _ = slots.acquire_many(limits.max_connections as u32).await;
}

/// What a connection serves, and within what.
struct Served {
    router: Router,
    limits: HttpLimits,
    timed_out: fn() -> Response<Body>,
}

/// Serves one connection within the limits; its slot is freed when it ends.
async fn connection(
    stream: TcpStream,
    peer: std::net::SocketAddr,
    served: Served,
    _slot: OwnedSemaphorePermit,
    mut shutdown: Shutdown,
) {
    let Served {
        router,
        limits,
        timed_out,
    } = served;
    let _ = stream.set_nodelay(true);
    let handling = Arc::new(AtomicBool::new(false));
    let router = TowerToHyperService::new(router);
    let in_handler = Arc::clone(&handling);
    let service = service_fn(move |mut request: Request<Incoming>| {
        request
            .extensions_mut()
            .insert(axum::extract::ConnectInfo(peer));
        let busy = Busy::new(&in_handler);
        let response = router.call(request);
        async move {
            let _busy = busy;
            match tokio::time::timeout(limits.request_timeout, response).await {
                Ok(answered) => answered,
                Err(_) => Ok(timed_out()),
            }
        }
    });
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    tokio::select! {
        result = conn.as_mut() => {
            if let Err(e) = result {
                tracing::trace!(error = %e, "http connection ended with an error");
            }
            return;
        }
        _ = tokio::time::sleep(limits.max_connection_age) => {}
        _ = shutdown.triggered() => {}
    }
    // Too old, or shutting down. The connection is pending, so outside a handler it waits for the
    // client (a request head, or room to write): close it now. Inside one, let the request finish.
    if handling.load(Ordering::Acquire) {
        conn.as_mut().graceful_shutdown();
        let _ = tokio::time::timeout(limits.request_timeout, conn).await;
    }
}

/// Marks a connection as inside a handler while it lives.
struct Busy(Arc<AtomicBool>);

impl Busy {
    fn new(flag: &Arc<AtomicBool>) -> Busy {
        flag.store(true, Ordering::Release);
        Busy(Arc::clone(flag))
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// What a client gets when its handler overran `request_timeout`.
pub fn timed_out() -> Response<Body> {
    (StatusCode::SERVICE_UNAVAILABLE, "request timed out\n").into_response()
}

/// A connection-level error (the peer gave up during the handshake) costs nothing; running out
/// of file descriptors or memory gets a pause so that the loop does not spin.
async fn on_accept_error(e: &std::io::Error) {
    use std::io::ErrorKind::*;
    if matches!(
        e.kind(),
        ConnectionAborted | ConnectionReset | ConnectionRefused | Interrupted
    ) {
        return;
    }
    tracing::warn!(error = %e, "http: accept failed; pausing 100 ms");
    tokio::time::sleep(Duration::from_millis(100)).await;
}

/// Counts connections closed for want of a slot, logged at most once a minute.
#[derive(Default)]
struct Refused {
    since_log: u64,
    logged_at: Option<Instant>,
}

impl Refused {
    const LOG_EVERY: Duration = Duration::from_secs(60);

    fn count(&mut self, max_connections: usize) {
        self.since_log += 1;
        if self
            .logged_at
            .is_some_and(|at| at.elapsed() < Self::LOG_EVERY)
        {
            return;
        }
        tracing::warn!(
            refused = self.since_log,
            max_connections,
            "http: connection limit reached; closing new connections at once"
        );
        self.since_log = 0;
        self.logged_at = Some(Instant::now());
    }
}

/// A bound above the open-files limit protects nothing: say so at start.
fn warn_if_over_open_files_limit(max_connections: usize) {
    let Some(open_files) = open_files_limit() else {
        return;
    };
    if max_connections as u64 * 2 > open_files {
        tracing::warn!(
            max_connections,
            open_files,
            "http: the connection bound is over half the open-files limit; raise LimitNOFILE or lower the bound"
        );
    }
}

/// The soft limit on open files of this process, as Linux reports it (`None` when unlimited or
/// unknown): the "Max open files" line of `/proc/self/limits`.
fn open_files_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}
