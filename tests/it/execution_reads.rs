//! How often a plain `replay-ledger run` of the real binary reads its execution's row of
//! `reprocessamento_execucao`: once inside the runner (when it opens the pass), never after it —
//! `--json` and the report a job with `report_to` mails use the execution the run hands back.
//!
//! How the reads are counted: the binary is pointed (`DATABASE_URL`, `sslmode=disable` so the
//! bytes can be read) at a loopback TCP proxy in front of the test's PostgreSQL, which forwards
//! every byte both ways and decodes the frontend's messages of the wire protocol on the way: a
//! simple `Query`, and the extended protocol's `Parse` (statement name → text, per connection)
//! and `Bind` (one execution of a named or unnamed statement). Each executed statement whose text
//! names `reprocessamento_execucao` is recorded in the order the proxy saw it, over every
//! connection of the process (the pool's and the execution lock's). A *read* is a statement that
//! selects from or joins the table (`from reprocessamento_execucao`, `join
//! reprocessamento_execucao`); an `insert`/`update` of the row (even one that returns it) is a
//! write. "After the runner" is after the last write of the table, the one that records how the
//! pass ended: what follows is the command line and the mailer.
//!
//! Why not the server's own counters: `pg_stat_user_tables`/`pg_stat_xact_*` count scans, not who
//! made them or which statement, and `pg_stat_statements` needs `shared_preload_libraries` (not
//! set on the test server). The wire is exact: what the binary sent is what is counted. The reads a
//! server-side function makes (`confirmar_dono`'s fencing check inside a write) are not
//! statements of the binary's and are not counted.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::helpers::*;
use crate::report::smtp::Smtp;

const JOB: &str = "replay-2026-10-14-v2";
const TABLE: &str = "reprocessamento_execucao";

/// What the binary did to `reprocessamento_execucao`, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Touch {
    Read(String),
    Write(String),
}

/// A loopback proxy in front of the test server that records the statements naming [`TABLE`].
struct Wire {
    addr: std::net::SocketAddr,
    seen: Arc<Mutex<Vec<Touch>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Wire {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Wire {
    async fn start(upstream: std::net::SocketAddr) -> Wire {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the proxy");
        let addr = listener.local_addr().expect("proxy addr");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let recorded = Arc::clone(&seen);
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let recorded = Arc::clone(&recorded);
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(upstream).await {
                        let _ = relay(client, server, recorded).await;
                    }
                });
            }
        });
        Wire { addr, seen, task }
    }

    /// `url` (the test's database) reached through this proxy, in clear.
    fn url(&self, url: &str) -> String {
        let mut through = url::Url::parse(url).expect("test url");
        through.set_host(Some("127.0.0.1")).expect("host");
        through.set_port(Some(self.addr.port())).expect("port");
        through.query_pairs_mut().append_pair("sslmode", "disable");
        through.to_string()
    }

    fn touches(&self) -> Vec<Touch> {
        self.seen.lock().expect("seen").clone()
    }
}

/// Forwards one connection both ways, decoding what the client sends.
async fn relay(
    client: TcpStream,
    server: TcpStream,
    seen: Arc<Mutex<Vec<Touch>>>,
) -> std::io::Result<()> {
    let (mut from_client, mut to_client) = client.into_split();
    let (mut from_server, mut to_server) = server.into_split();
    let back = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut from_server, &mut to_client).await;
        let _ = to_client.shutdown().await;
    });
    // Untyped messages first: SSLRequest/GSSENCRequest (refused: sslmode=disable sends none) and
    // the StartupMessage, or a CancelRequest on a connection of its own.
    loop {
        let len = from_client.read_i32().await?;
        let mut body = vec![0; (len - 4).max(0) as usize];
        from_client.read_exact(&mut body).await?;
        to_server.write_i32(len).await?;
        to_server.write_all(&body).await?;
        let code = body
            .get(..4)
            .map_or(0, |b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]));
        if code != 80877103 && code != 80877104 {
            break;
        }
    }
    let mut statements: HashMap<String, String> = HashMap::new();
    loop {
        let kind = from_client.read_u8().await?;
        let len = from_client.read_i32().await?;
        let mut body = vec![0; (len - 4).max(0) as usize];
        from_client.read_exact(&mut body).await?;
        let mut fields = body.split(|b| *b == 0).map(String::from_utf8_lossy);
        match kind {
            b'Q' => record(&seen, &fields.next().unwrap_or_default()),
            b'P' => {
                let name = fields.next().unwrap_or_default().into_owned();
                let text = fields.next().unwrap_or_default().into_owned();
                statements.insert(name, text);
            }
            b'B' => {
                let _portal = fields.next();
                let name = fields.next().unwrap_or_default();
                if let Some(text) = statements.get(name.as_ref()) {
                    record(&seen, text);
                }
            }
            _ => {}
        }
        to_server.write_u8(kind).await?;
        to_server.write_i32(len).await?;
        to_server.write_all(&body).await?;
        if kind == b'X' {
            break;
        }
    }
    back.abort();
    Ok(())
}

/// Records a statement that names [`TABLE`], as a read or a write.
fn record(seen: &Mutex<Vec<Touch>>, text: &str) {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let lower = flat.to_lowercase();
    if !lower.contains(TABLE) {
        return;
    }
    let read = ["from ", "join "]
        .iter()
        .any(|k| lower.contains(&format!("{k}{TABLE}")));
    let touch = if read {
        Touch::Read(flat)
    } else {
        Touch::Write(flat)
    };
    seen.lock().expect("seen").push(touch);
}

/// The reads before the last write (the runner's) and after it (the command line's, the mailer's).
fn reads_inside_and_after(touches: &[Touch]) -> (Vec<String>, Vec<String>) {
    let last_write = touches
        .iter()
        .rposition(|t| matches!(t, Touch::Write(_)))
        .expect("the run wrote its execution");
    let reads = |ts: &[Touch]| -> Vec<String> {
        ts.iter()
            .filter_map(|t| match t {
                Touch::Read(s) => Some(s.clone()),
                Touch::Write(_) => None,
            })
            .collect()
    };
    (
        reads(&touches[..last_write]),
        reads(&touches[last_write + 1..]),
    )
}

/// The test server's address (the proxy's upstream).
fn upstream(url: &str) -> std::net::SocketAddr {
    let url = url::Url::parse(url).expect("test url");
    let host = url.host_str().expect("host");
    let port = url.port().unwrap_or(5432);
    std::net::ToSocketAddrs::to_socket_addrs(&(host, port))
        .expect("resolve the test server")
        .next()
        .expect("an address")
}

/// Runs `cmd` to its end (asserting it succeeded) and says what it read of its execution.
async fn reads_of(
    wire: &Wire,
    cmd: tokio::process::Command,
    what: &str,
) -> (Vec<String>, Vec<String>) {
    let out = output_of(cmd, what).await;
    assert_success(&out, what);
    reads_inside_and_after(&wire.touches())
}

fn assert_reads(inside: &[String], after: &[String], what: &str) {
    let short = |reads: &[String]| -> String {
        reads
            .iter()
            .map(|r| format!("  {}…", r.chars().take(100).collect::<String>()))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(
        inside.len() <= 1 && after.is_empty(),
        "{what}: the execution's row was read {} times inside the runner (at most once) and {} \
         times after it (never: the run hands it back)\ninside:\n{}\nafter:\n{}",
        inside.len(),
        after.len(),
        short(inside),
        short(after)
    );
}

#[tokio::test]
async fn a_plain_run_with_json_reads_its_execution_once_inside_the_runner_and_never_after() {
    let db = seeded_db(&paid_orders(250), &[]).await;
    let provider = sink(dedup()).await;
    let jobs = jobs_dir(&provider.url(), &JobSpec::default());
    let wire = Wire::start(upstream(&db.url)).await;
    let mut cmd = command(&wire.url(&db.url), jobs.path());
    cmd.args(["run", JOB, "--json"]);

    let (inside, after) = reads_of(&wire, cmd, "run --json").await;

    assert_reads(&inside, &after, "run --json");
    assert!(
        wire.touches().iter().any(|t| matches!(t, Touch::Write(_))),
        "the proxy saw the run's writes"
    );
}

#[tokio::test]
async fn a_run_whose_job_mails_its_report_reads_its_execution_once_and_not_for_the_mail() {
    let f = crate::report::fixture("report_to: [financeiro@example.com]\n").await;
    let server = Smtp::start("store").await;
    let wire = Wire::start(upstream(&f.db.url)).await;
    let mut cmd = command(&wire.url(&f.db.url), f.jobs.path());
    cmd.args(["run", JOB, "--simulate"])
        .env("SMTP_URL", server.url())
        .env("REPORT_FROM", "relatorios@example.com");

    let (inside, after) = reads_of(&wire, cmd, "run --simulate (report_to)").await;

    assert_eq!(server.messages().len(), 1, "the report was mailed");
    assert_reads(&inside, &after, "run with report_to");
}

#[test]
fn a_select_of_the_table_is_a_read_and_an_update_returning_it_is_a_write() {
    let seen = Mutex::new(Vec::new());
    record(
        &seen,
        "select e.job\n  from reprocessamento_execucao e where x",
    );
    record(&seen, "select 1 from evento_rejeitado");
    record(
        &seen,
        "with e as (update reprocessamento_execucao set estado = $2 returning *) select * from e",
    );
    let touches = seen.into_inner().unwrap();
    assert!(
        matches!(touches[..], [Touch::Read(_), Touch::Write(_)]),
        "{touches:?}"
    );
    let (inside, after) = reads_inside_and_after(&touches);
    assert_eq!((inside.len(), after.len()), (1, 0));
}
