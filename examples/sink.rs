//! A standalone loopback webhook for trying the worker by hand: point `SELLER_WEBHOOK_URL` at
//! the URL it prints. On Ctrl-C it prints how many requests and keys it received (never bodies
//! or header values).
//!
//! `cargo run --example sink -- --port 8089 [--dedup] [--fail-status 500] [--delay-ms 50]`

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use clap::Parser;
use testkit::sink::{Behavior, Sink, SinkConfig};

#[derive(Debug, Parser)]
#[command(about = "A loopback webhook that records what it receives")]
struct Args {
    /// Port on 127.0.0.1 (0 = any free port).
    #[arg(long, default_value_t = 8089)]
    port: u16,
    /// Behave as an idempotent provider: a repeated Idempotency-Key is not a new delivery.
    #[arg(long)]
    dedup: bool,
    /// Answer this status to every request, delivering nothing.
    #[arg(long)]
    fail_status: Option<u16>,
    /// Fail the first N requests with 500.
    #[arg(long, default_value_t = 0)]
    fail_first: usize,
    /// Answer after this many milliseconds.
    #[arg(long, default_value_t = 0)]
    delay_ms: u64,
    /// Deliver, then answer 500 (the provider did it; the client cannot know).
    #[arg(long)]
    accept_then_fail: bool,
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let args = Args::parse();
    let behavior = Behavior {
        dedup: args.dedup,
        fail_status: args.fail_status,
        fail_first: args.fail_first,
        delay: Duration::from_millis(args.delay_ms),
        accept_then_fail: args.accept_then_fail,
        ..Behavior::default()
    };
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, args.port));
    let sink = Sink::start(SinkConfig {
        addr,
        behavior,
        record: true,
    })
    .await?;
    println!("sink listening on {} (Ctrl-C to stop)", sink.url());
    tokio::signal::ctrl_c().await?;
    let keys = sink
        .received()
        .iter()
        .map(|r| r.key.as_str())
        .collect::<std::collections::HashSet<_>>()
        .len();
    println!(
        "received {} requests for {keys} distinct keys; {} new deliveries",
        sink.request_count(),
        sink.delivery_count()
    );
    sink.shutdown().await;
    Ok(())
}
