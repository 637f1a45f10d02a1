//! `http_server::serve_bounded` on real loopback sockets: the connection bound, the header-read
//! timeout, the request timeout and a graceful shutdown — what any router served by it (metrics,
//! the console) can rely on.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::routing::get;
use axum::Router;
use replay_ledger::edges::http_server::{serve_bounded, HttpLimits};
use replay_ledger_core::shared::shutdown::{self, ShutdownTrigger};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::helpers::*;

/// How long a test waits for the server to do what it should before failing.
const PATIENCE: Duration = Duration::from_secs(20);

/// Limits that hold idle connections for longer than any test lasts, unless a test says otherwise.
fn patient(max_connections: usize) -> HttpLimits {
    HttpLimits {
        max_connections,
        header_read_timeout: Duration::from_secs(300),
        request_timeout: Duration::from_secs(300),
        max_connection_age: Duration::from_secs(300),
    }
}

async fn start(
    router: Router,
    limits: HttpLimits,
) -> (SocketAddr, ShutdownTrigger, JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("local address");
    let (trigger, stop) = shutdown::channel();
    let server = tokio::spawn(serve_bounded(listener, router, limits, stop));
    (addr, trigger, server)
}

fn hello() -> Router {
    Router::new().route("/", get(|| async { "hello" }))
}

async fn status(addr: SocketAddr, path: &str) -> Option<u16> {
    let response = reqwest::Client::new()
        .get(format!("http://{addr}{path}"))
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .ok()?;
    Some(response.status().as_u16())
}

/// Whether the server closes `stream` (EOF or reset) within [`PATIENCE`].
async fn closed_by_server(stream: &mut TcpStream) -> bool {
    let mut buf = [0u8; 256];
    let read = async {
        while let Ok(n) = stream.read(&mut buf).await {
            if n == 0 {
                return;
            }
        }
    };
    tokio::time::timeout(PATIENCE, read).await.is_ok()
}

#[tokio::test]
async fn a_connection_beyond_the_bound_is_closed_and_a_freed_slot_serves_again() {
    let (addr, _trigger, _server) = start(hello(), patient(2)).await;
    let mut held = Vec::new();
    for _ in 0..2 {
        held.push(TcpStream::connect(addr).await.expect("connect"));
    }

    let mut third = TcpStream::connect(addr).await.expect("connect");

    assert!(
        closed_by_server(&mut third).await,
        "the third connection was kept"
    );
    drop(held.pop());
    assert!(
        eventually(PATIENCE, || async { status(addr, "/").await == Some(200) }).await,
        "a request after a slot was freed was not served"
    );
}

#[tokio::test]
async fn a_client_that_never_finishes_its_request_head_is_disconnected() {
    let limits = HttpLimits {
        header_read_timeout: Duration::from_millis(500),
        ..patient(4)
    };
    let (addr, _trigger, _server) = start(hello(), limits).await;
    let mut slow = TcpStream::connect(addr).await.expect("connect");
    slow.write_all(b"GET / HTTP/1.1\r\n").await.expect("write");

    let mut closed = false;
    for line in 0..100 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if slow
            .write_all(format!("x-{line}: 1\r\n").as_bytes())
            .await
            .is_err()
        {
            closed = true;
            break;
        }
    }

    assert!(
        closed || closed_by_server(&mut slow).await,
        "the slow client was kept"
    );
}

#[tokio::test]
async fn a_handler_that_overruns_the_request_timeout_answers_503() {
    let router = Router::new().route(
        "/slow",
        get(|| async {
            tokio::time::sleep(Duration::from_secs(300)).await;
            "late"
        }),
    );
    let limits = HttpLimits {
        request_timeout: Duration::from_millis(200),
        ..patient(4)
    };
    let (addr, _trigger, _server) = start(router, limits).await;

    assert_eq!(status(addr, "/slow").await, Some(503));
}

#[tokio::test]
async fn shutdown_finishes_the_request_in_progress_closes_idle_connections_and_returns() {
    let started = Arc::new(Notify::new());
    let release = Arc::new(Notify::new());
    let (s, r) = (Arc::clone(&started), Arc::clone(&release));
    let router = Router::new().route(
        "/work",
        get(move || async move {
            s.notify_one();
            r.notified().await;
            "done"
        }),
    );
    let (addr, trigger, server) = start(router, patient(4)).await;
    let mut idle = TcpStream::connect(addr).await.expect("connect");
    let request = tokio::spawn(async move {
        let response = reqwest::get(format!("http://{addr}/work")).await.ok()?;
        response.text().await.ok()
    });
    started.notified().await;

    trigger.trigger();
    assert!(
        closed_by_server(&mut idle).await,
        "an idle connection was kept"
    );
    release.notify_one();

    let body = tokio::time::timeout(PATIENCE, request)
        .await
        .expect("the request ended");
    assert_eq!(body.expect("request task").as_deref(), Some("done"));
    tokio::time::timeout(PATIENCE, server)
        .await
        .expect("serve_bounded returned after shutdown")
        .expect("server task");
}
