//! `serve` under a flood of connections to its metrics port, as the real binary on loopback with a
//! low open-files limit (as under systemd): idle sockets and slowloris clients sending one header
//! line a second neither keep `/metrics` and `/healthz` from answering nor starve the scheduled
//! sweep of file descriptors and database connections, and the server closes them itself.

use std::net::SocketAddr;
use std::time::Duration;

use futures::future::join_all;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::helpers::*;
use crate::serve::{sweep_job, wait_healthy, Serve};

/// The open-files limit `serve` runs with: well under the flood.
const OPEN_FILES: u64 = 256;
/// The connection bound the test gives `serve` (`METRICS_MAX_CONNECTIONS`): above the slowloris
/// clients, who connect first and so take slots, and well under the whole flood.
const MAX_CONNECTIONS: &str = "64";
const IDLE: usize = 300;
const SLOW: usize = 50;
/// How long a slowloris client keeps sending header lines (one a second) before giving up.
const SLOW_LINES: u32 = 40;
/// How long the test waits for an answer, or for the server to close the flood's sockets.
const PATIENCE: Duration = Duration::from_secs(40);

/// Sets the running child's RLIMIT_NOFILE to `n` (soft and hard), as `LimitNOFILE=n` would,
/// with util-linux's `prlimit` (the test needs no unsafe code for it). The daemon has opened only
/// a handful of files by then; the flood comes later.
fn limit_open_files(pid: u32, n: u64) {
    let status = std::process::Command::new("prlimit")
        .arg(format!("--pid={pid}"))
        .arg(format!("--nofile={n}:{n}"))
        .status()
        .expect("run prlimit (util-linux; .ci/run installs it)");
    assert!(status.success(), "prlimit failed: {status}");
}

/// Opens up to `n` connections; those the kernel did not complete are left out.
async fn connect_many(addr: SocketAddr, n: usize) -> Vec<TcpStream> {
    let connects = (0..n).map(|_| async move {
        tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(addr))
            .await
            .ok()?
            .ok()
    });
    join_all(connects).await.into_iter().flatten().collect()
}

/// Whether the server closes `stream` (EOF or reset) within `limit`.
async fn closed_by_server(mut stream: TcpStream, limit: Duration) -> bool {
    let mut buf = [0u8; 512];
    let read = async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => continue,
            }
        }
    };
    tokio::time::timeout(limit, read).await.is_ok()
}

/// A slowloris client: a request line, then one header line a second, never the blank line that
/// ends the head. Returns whether the server closed the connection before it gave up.
async fn slowloris(mut stream: TcpStream) -> bool {
    if stream
        .write_all(b"GET /metrics HTTP/1.1\r\n")
        .await
        .is_err()
    {
        return true;
    }
    let mut buf = [0u8; 512];
    for line in 0..SLOW_LINES {
        tokio::select! {
            read = stream.read(&mut buf) => match read {
                Ok(0) | Err(_) => return true,
                Ok(_) => {} // an answer (e.g. 408) before the close
            },
            _ = tokio::time::sleep(Duration::from_secs(1)) => {
                let header = format!("x-slow-{line}: 1\r\n");
                if stream.write_all(header.as_bytes()).await.is_err() {
                    return true;
                }
            }
        }
    }
    false
}

async fn answers_200(serve: &Serve, path: &str) -> bool {
    matches!(serve.get(path).await, Some((200, _)))
}

#[tokio::test]
async fn a_flood_of_idle_and_slow_connections_leaves_metrics_healthz_and_the_sweeper_working() {
    let db = TestDb::new().await;
    let provider = sink(dedup()).await;
    let jobs = jobs_dir(&provider.url(), &JobSpec::default());
    sweep_job(jobs.path(), "5s");
    let serve = Serve::start_with(&db.url, jobs.path(), "serve", |cmd| {
        cmd.env("METRICS_MAX_CONNECTIONS", MAX_CONNECTIONS);
    });
    limit_open_files(serve.child.id().expect("serve is running"), OPEN_FILES);
    wait_healthy(&serve).await;

    let slow: Vec<_> = connect_many(serve.addr, SLOW)
        .await
        .into_iter()
        .map(|stream| tokio::spawn(slowloris(stream)))
        .collect();
    let idle = connect_many(serve.addr, IDLE).await;
    let event = paid(1, "ped-1", 1, 1000, 5.0);
    insert(&db.pool, std::slice::from_ref(&event)).await;
    abandon_stale_reservation(&db.pool, &event).await;

    assert!(
        eventually(PATIENCE, || answers_200(&serve, "/metrics")).await,
        "/metrics did not answer 200 while {} idle sockets were open; log:\n{}",
        idle.len(),
        serve.log()
    );
    assert!(
        eventually(PATIENCE, || answers_200(&serve, "/healthz")).await,
        "/healthz did not answer 200 during the flood; log:\n{}",
        serve.log()
    );
    assert!(
        eventually(PATIENCE, || async {
            keys_in_state(&db.pool, "concluido").await == vec![key(&event)]
        })
        .await,
        "the sweep job did not retake the stale reservation during the flood; log:\n{}",
        serve.log()
    );
    let slow_closed = join_all(slow).await;
    let slow_open = slow_closed
        .iter()
        .filter(|c| !matches!(c, Ok(true)))
        .count();
    assert_eq!(slow_open, 0, "slowloris connections the server kept open");
    let idle_total = idle.len();
    let idle_closed = join_all(idle.into_iter().map(|s| closed_by_server(s, PATIENCE))).await;
    let idle_open = idle_closed.iter().filter(|c| !**c).count();
    assert_eq!(
        idle_open, 0,
        "idle connections (of {idle_total}) the server kept open"
    );
    assert_eq!(provider.deliveries().get(&key(&event)), Some(&1));
    let (status, _) = serve.terminate().await;
    assert!(status.success(), "serve exits 0 on SIGTERM, got {status}");
}
