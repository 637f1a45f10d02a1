//! The loopback webhook the effects go to, in a process of its own, and the HTTP reference: the
//! same sink driven by a minimal keep-alive client at the engine's concurrency, no database.

use std::time::{Duration, Instant};

use anyhow::Context;
use futures::stream::{self, StreamExt};
use testkit::sink::{Sink, SinkConfig};

use crate::Measured;

/// Serves the sink until stdin closes: the harness starts itself this way, so the sink's memory
/// and CPU are not counted as the engine's.
pub async fn serve_sink() -> anyhow::Result<()> {
    let sink = Sink::start(SinkConfig {
        record: false,
        ..SinkConfig::default()
    })
    .await?;
    println!("{}", sink.url());
    let mut line = String::new();
    let _ = tokio::io::AsyncBufReadExt::read_line(
        &mut tokio::io::BufReader::new(tokio::io::stdin()),
        &mut line,
    )
    .await;
    Ok(())
}

/// The sink process; it ends when this is dropped.
pub struct SinkProcess {
    pub url: String,
    /// The sink's process, when the harness started it (its CPU is counted with the work's).
    pub pid: Option<u32>,
    _child: Option<tokio::process::Child>,
}

pub async fn start_sink(given: Option<&str>) -> anyhow::Result<SinkProcess> {
    if let Some(url) = given {
        return Ok(SinkProcess {
            url: url.to_string(),
            pid: None,
            _child: None,
        });
    }
    let mut child = tokio::process::Command::new(std::env::current_exe()?)
        .arg("--serve-sink")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let stdout = child.stdout.take().context("sink stdout")?;
    let mut url = String::new();
    tokio::io::AsyncBufReadExt::read_line(&mut tokio::io::BufReader::new(stdout), &mut url).await?;
    Ok(SinkProcess {
        url: url.trim().to_string(),
        pid: child.id(),
        _child: Some(child),
    })
}

/// (h) `requests` POSTs of the engine's shape (JSON body, `Idempotency-Key`), `concurrency` at a
/// time over keep-alive connections, each answer read whole; nothing else.
pub async fn reference(url: &str, requests: i64, concurrency: usize) -> anyhow::Result<Measured> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .pool_max_idle_per_host(concurrency)
        .build()?;
    let t = Instant::now();
    let failed = stream::iter(0..requests)
        .map(|i| {
            let client = client.clone();
            async move {
                let body = serde_json::json!({
                    "eventoId": format!("ref-{i}"),
                    "pedidoId": format!("ped-{i}"),
                    "valorCentavos": 1000 + i,
                });
                let answer = client
                    .post(url)
                    .header("Idempotency-Key", format!("ref-{i}:notificar-vendedor"))
                    .json(&body)
                    .send()
                    .await;
                match answer {
                    Ok(r) if r.status().is_success() => r.bytes().await.is_err(),
                    _ => true,
                }
            }
        })
        .buffer_unordered(concurrency)
        .filter(|failed| futures::future::ready(*failed))
        .count()
        .await;
    let secs = t.elapsed().as_secs_f64();
    println!("(h) HTTP reference: {requests} requests in {secs:.2} s, {failed} failed");
    anyhow::ensure!(failed == 0, "the sink failed {failed} requests");
    Ok(Measured::new(
        "(h) HTTP reference, keep-alive client, no database",
        requests,
        secs,
    ))
}
