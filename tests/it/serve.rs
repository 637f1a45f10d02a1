//! `replay-ledger serve`, run as real processes: two daemons on one jobs directory run each
//! execution once, SIGTERM mid-run exits 0 and leaves the execution resumable, `/metrics` and
//! `/healthz` answer over HTTP, a missed night is caught up on start, and a daemon survives a
//! restart of its database (a throwaway cluster of the test's own).

use std::future::ready;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use chrono::{Duration as Days, Utc};
use nix::sys::signal::Signal;
use replay_ledger_core::domain::Event;
use sqlx::PgPool;
use testkit::pgtemp::TempCluster;
use testkit::sink::Behavior;
use tokio::process::Child;

use crate::helpers::*;

const JOB: &str = "replay-2026-10-14-v2";
const EVERY_SECOND: &str = "schedule: \"* * * * * *\"\n";
/// How long a daemon may take to exit after SIGTERM: its grace period (30 s) plus start-up slack.
const STOP_LIMIT: Duration = Duration::from_secs(40);

/// A running `serve`, its `/metrics` address and its log file. Killed if dropped.
pub(crate) struct Serve {
    pub(crate) child: Child,
    pub(crate) addr: SocketAddr,
    log: PathBuf,
}

impl Serve {
    fn start(db_url: &str, jobs: &Path, name: &str) -> Serve {
        Serve::start_with(db_url, jobs, name, |_| {})
    }

    /// As [`Serve::start`], with the command adjusted by `configure` first (environment, limits).
    pub(crate) fn start_with(
        db_url: &str,
        jobs: &Path,
        name: &str,
        configure: impl FnOnce(&mut tokio::process::Command),
    ) -> Serve {
        let addr = free_addr();
        let log = jobs.join(format!("{name}.log"));
        let file = std::fs::File::create(&log).expect("create the log file");
        let mut cmd = command(db_url, jobs);
        cmd.env("RUST_LOG", "info,replay_ledger=debug");
        // After the defaults, so a test may override them (RUST_LOG included).
        configure(&mut cmd);
        let child = cmd
            .args(["serve", "--metrics-addr", &addr.to_string()])
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("clone the log handle"))
            .stderr(file)
            .spawn()
            .expect("spawn replay-ledger serve");
        Serve { child, addr, log }
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub(crate) async fn get(&self, path: &str) -> Option<(u16, String)> {
        let url = format!("http://{}{path}", self.addr);
        let response = reqwest::Client::new()
            .get(url)
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .ok()?;
        let status = response.status().as_u16();
        Some((status, response.text().await.ok()?))
    }

    async fn health(&self) -> Option<u16> {
        self.get("/healthz").await.map(|(status, _)| status)
    }

    pub(crate) async fn metrics(&self) -> String {
        self.get("/metrics")
            .await
            .map(|(_, body)| body)
            .unwrap_or_default()
    }

    /// SIGTERM, then the exit status and how long it took.
    pub(crate) async fn terminate(mut self) -> (std::process::ExitStatus, Duration) {
        let asked = Instant::now();
        send_signal(&self.child, Signal::SIGTERM);
        let status = tokio::time::timeout(STOP_LIMIT, self.child.wait())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "serve did not exit within {STOP_LIMIT:?}; log:\n{}",
                    self.log()
                )
            })
            .expect("wait for serve");
        (status, asked.elapsed())
    }
}

/// A loopback address nobody listens on right now.
pub(crate) fn free_addr() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("local address")
}

/// One sample of `/metrics` text, e.g. `replay_ledger_events_total{job="x"}`; `None` if absent.
pub(crate) fn metrics_sample(metrics: &str, series: &str) -> Option<f64> {
    metrics.lines().find_map(|line| {
        line.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

pub(crate) fn sweep_job(dir: &Path, stale_after: &str) {
    std::fs::write(
        dir.join("sweeper.yaml"),
        format!("name: sweeper\nkind: sweep\n{EVERY_SECOND}stale_after: {stale_after}\n"),
    )
    .expect("write the sweep job");
}

async fn passes(pool: &PgPool, key: &str) -> Option<i32> {
    sqlx::query_scalar("select passagem from reprocessamento_execucao where execucao_id = $1")
        .bind(key)
        .fetch_optional(pool)
        .await
        .expect("read passagem")
}

pub(crate) async fn wait_healthy(serve: &Serve) {
    wait_until("serve answers /healthz with 200", || async {
        serve.health().await == Some(200)
    })
    .await;
}

#[tokio::test]
async fn two_serve_processes_on_one_jobs_dir_run_each_execution_exactly_once() {
    let events = paid_orders(400);
    let db = seeded_db(&events, &[]).await;
    let provider = sink(Behavior {
        delay: Duration::from_millis(2),
        ..Behavior::default()
    })
    .await;
    let spec = JobSpec {
        batch_size: 50,
        extra: EVERY_SECOND.into(),
        ..JobSpec::default()
    };
    let jobs = jobs_dir(&provider.url(), &spec);
    sweep_job(jobs.path(), "1m");

    let a = Serve::start(&db.url, jobs.path(), "a");
    let b = Serve::start(&db.url, jobs.path(), "b");
    wait_until("the execution is finished", || async {
        execution_state(&db.pool, JOB).await.as_deref() == Some("concluida")
    })
    .await;
    let already = format!("replay_ledger_runs_total{{job=\"{JOB}\",outcome=\"already_finished\"}}");
    wait_until("both daemons found it finished at a later tick", || async {
        metrics_sample(&a.metrics().await, &already).unwrap_or(0.0) >= 1.0
            && metrics_sample(&b.metrics().await, &already).unwrap_or(0.0) >= 1.0
    })
    .await;

    let deliveries = provider.deliveries();
    assert_eq!(deliveries.len(), events.len(), "every key was delivered");
    assert!(
        deliveries.values().all(|n| *n == 1),
        "a key was delivered twice"
    );
    assert_eq!(
        passes(&db.pool, JOB).await,
        Some(1),
        "one pass of the execution"
    );
    let (log_a, log_b) = (a.log(), b.log());
    let finished = |log: &str| log.matches("replay finished").count();
    assert_eq!(
        finished(&log_a) + finished(&log_b),
        1,
        "one daemon ran it\nA:\n{log_a}\nB:\n{log_b}"
    );
    let other = if finished(&log_a) == 1 {
        &log_b
    } else {
        &log_a
    };
    assert!(
        other.contains("already finished") || other.contains("another process is running this job"),
        "the other daemon skipped or found it finished:\n{other}"
    );
    for serve in [a, b] {
        let (status, _) = serve.terminate().await;
        assert!(status.success(), "serve exits 0 on SIGTERM, got {status}");
    }
}

#[tokio::test]
async fn sigterm_during_a_run_exits_0_and_a_later_run_finishes_the_execution() {
    let events = paid_orders(2000);
    let db = seeded_db(&events, &[]).await;
    let provider = sink(Behavior {
        delay: Duration::from_millis(20),
        ..Behavior::default()
    })
    .await;
    let spec = JobSpec {
        batch_size: 20,
        concurrency: 2,
        extra: EVERY_SECOND.into(),
        ..JobSpec::default()
    };
    let jobs = jobs_dir(&provider.url(), &spec);

    let serve = Serve::start(&db.url, jobs.path(), "serve");
    wait_until("100 keys were delivered", || {
        ready(provider.delivery_count() >= 100)
    })
    .await;
    let (status, took) = serve.terminate().await;

    assert!(status.success(), "serve exits 0 on SIGTERM, got {status}");
    assert!(
        took < Duration::from_secs(30),
        "it stopped within its grace period ({took:?})"
    );
    assert_eq!(
        execution_state(&db.pool, JOB).await.as_deref(),
        Some("interrompida")
    );
    let checkpoint = checkpoint(&db.pool, JOB).await.expect("a checkpoint");
    assert!(
        (1..2000).contains(&checkpoint),
        "checkpoint {checkpoint} inside the window"
    );

    provider.set_behavior(Behavior::default());
    let rerun = run_bin_within(&db.url, jobs.path(), &["run", JOB]).await;

    assert_success(&rerun, "the run after SIGTERM");
    assert_eq!(
        execution_state(&db.pool, JOB).await.as_deref(),
        Some("concluida")
    );
    let deliveries = provider.deliveries();
    assert_eq!(deliveries.len(), events.len(), "every key was delivered");
    assert!(
        deliveries.values().all(|n| *n == 1),
        "a key was delivered twice"
    );
}

#[tokio::test]
async fn metrics_scraped_over_http_after_a_run_hold_its_counts_and_the_review_queue() {
    let events = paid_orders(50);
    let db = seeded_db(&events, &[]).await;
    sqlx::query("insert into efeito_aplicado (chave, evento_id, tipo_efeito, estado, execucao_id) values ($1, $2, 'notificar-vendedor', 'incerto', 'ao-vivo')")
        .bind(key(&events[0]))
        .bind(&events[0].id)
        .execute(&db.pool)
        .await
        .expect("an incerto effect");
    let provider = sink(dedup()).await;
    let spec = JobSpec {
        extra: EVERY_SECOND.into(),
        ..JobSpec::default()
    };
    let jobs = jobs_dir(&provider.url(), &spec);

    let serve = Serve::start(&db.url, jobs.path(), "serve");
    let events_series = format!("replay_ledger_events_total{{job=\"{JOB}\"}}");
    let remaining = format!("replay_ledger_remaining_events{{execution=\"{JOB}\"}}");
    // The database gauges are read every few seconds, not per scrape: wait for both.
    wait_until(
        "/metrics counts the run's events and no event remains",
        || async {
            let metrics = serve.metrics().await;
            metrics_sample(&metrics, &events_series) == Some(50.0)
                && metrics_sample(&metrics, &remaining) == Some(0.0)
        },
    )
    .await;
    let metrics = serve.metrics().await;

    let applied = format!("replay_ledger_effects_total{{job=\"{JOB}\",outcome=\"aplicado\"}}");
    assert_eq!(metrics_sample(&metrics, &applied), Some(49.0), "{metrics}");
    let finished = format!("replay_ledger_runs_total{{job=\"{JOB}\",outcome=\"finished\"}}");
    assert_eq!(metrics_sample(&metrics, &finished), Some(1.0), "{metrics}");
    assert_eq!(
        metrics_sample(&metrics, "replay_ledger_review_queue"),
        Some(1.0),
        "{metrics}"
    );
    assert!(metrics.contains("# TYPE replay_ledger_events_total counter"));
    assert_eq!(serve.health().await, Some(200));
    let (status, _) = serve.terminate().await;
    assert!(status.success());
}

/// `n` paid events of the UTC day before today, at noon and after.
fn yesterdays_events(n: i64) -> Vec<Event> {
    let noon = (Utc::now() - Days::days(1))
        .date_naive()
        .and_hms_opt(12, 0, 0)
        .unwrap()
        .and_utc();
    (1..=n)
        .map(|i| Event {
            ocorrido_em: noon + Days::seconds(i),
            ..paid(i, &format!("ped-{i}"), 1, 1000 * i, 5.0)
        })
        .collect()
}

#[tokio::test]
async fn a_missed_night_is_caught_up_when_serve_starts() {
    let events = yesterdays_events(30);
    let db = seeded_db(&events, &[]).await;
    let provider = sink(Behavior::default()).await;
    let jobs = jobs_dir(&provider.url(), &JobSpec::default());
    std::fs::write(
        jobs.path().join("nightly.yaml"),
        "name: nightly\nschedule: \"0 0 0 * * *\"\nwindow:\n  previous: day\neffects:\n  notificar-vendedor: { mode: apply, on_failure: release }\n",
    )
    .expect("write the nightly job");
    let execution = format!(
        "nightly-{}",
        (Utc::now() - Days::days(1)).format("%Y-%m-%d")
    );

    let serve = Serve::start(&db.url, jobs.path(), "serve");
    wait_until("the missed night's execution is finished", || async {
        execution_state(&db.pool, &execution).await.as_deref() == Some("concluida")
    })
    .await;

    assert_eq!(
        provider.delivery_count(),
        events.len(),
        "each key of yesterday sent once"
    );
    assert!(serve.log().contains("catching up"), "{}", serve.log());
    let (status, _) = serve.terminate().await;
    assert!(status.success());
}

#[tokio::test]
async fn serve_survives_a_database_restart_and_its_next_tick_succeeds() {
    let mut cluster = TempCluster::start().await.expect("a throwaway cluster");
    let url = cluster.url();
    let provider = sink(dedup()).await;
    let spec = JobSpec {
        timeout: "1s",
        ..JobSpec::default()
    };
    let jobs = jobs_dir(&provider.url(), &spec);
    sweep_job(jobs.path(), "2s");
    let serve = Serve::start(&url, jobs.path(), "serve");
    wait_healthy(&serve).await;

    cluster.stop().await;
    wait_until("/healthz reports the database down", || async {
        serve.health().await == Some(503)
    })
    .await;
    wait_until("a tick failed and was logged", || {
        ready(serve.log().contains("retrying at the next tick"))
    })
    .await;
    cluster
        .start_again()
        .await
        .expect("start the cluster again");
    let pool = replay_ledger_core::tables::db::connect(&url, "test")
        .await
        .expect("connect");
    let event = paid(1, "ped-1", 1, 1000, 5.0);
    insert(&pool, std::slice::from_ref(&event)).await;
    abandon_stale_reservation(&pool, &event).await;

    wait_until("the sweep job retook the stale reservation", || async {
        keys_in_state(&pool, "concluido").await == vec![key(&event)]
    })
    .await;
    wait_healthy(&serve).await;
    assert_eq!(provider.deliveries().get(&key(&event)), Some(&1));
    assert!(serve.log().contains("job=sweeper"), "{}", serve.log());
    let (status, _) = serve.terminate().await;
    assert!(status.success(), "serve exits 0 on SIGTERM, got {status}");
}

/// A sweep leaves no execution row, yet `status` (text and JSON) says when it last ran and how it
/// ended, under a header row naming the columns.
#[tokio::test]
async fn status_shows_the_last_run_of_a_sweep_job_under_a_header() {
    let db = seeded_db(&paid_orders(3), &[]).await;
    let provider = sink(dedup()).await;
    let jobs = jobs_dir(&provider.url(), &JobSpec::default());
    sweep_job(jobs.path(), "10m");

    let serve = Serve::start(&db.url, jobs.path(), "serve");
    wait_until("status shows the sweep's last run", || async {
        let out = run_bin(&db.url, jobs.path(), &["status"]).await;
        stdout(&out)
            .lines()
            .any(|l| l.starts_with("sweeper ") && l.contains("concluida (started"))
    })
    .await;
    let (status, _) = serve.terminate().await;
    assert!(status.success());

    let out = run_bin(&db.url, jobs.path(), &["status"]).await;
    let text = stdout(&out);
    let header = text
        .lines()
        .find(|l| l.starts_with("JOB "))
        .unwrap_or_else(|| panic!("a header row over the jobs:\n{text}"));
    for column in ["KIND", "SCHEDULE", "NEXT FIRE", "LAST RUN"] {
        assert!(header.contains(column), "{header}");
    }
    let replay = text
        .lines()
        .find(|l| l.starts_with(JOB))
        .expect("the replay's row");
    assert!(replay.contains("no run recorded"), "{replay}");

    let out = run_bin(&db.url, jobs.path(), &["status", "--json"]).await;
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("status --json");
    let sweeper = json["jobs"]
        .as_array()
        .and_then(|jobs| jobs.iter().find(|j| j["name"] == "sweeper"))
        .unwrap_or_else(|| panic!("the sweeper in status --json: {json}"));
    assert_eq!(sweeper["last_run"]["state"], "concluida", "{sweeper}");
    assert!(sweeper["last_run"]["execution"].is_null(), "{sweeper}");
    assert!(sweeper["last_run"]["finished_at"].is_string(), "{sweeper}");

    assert_success(&run_bin(&db.url, jobs.path(), &["run", JOB]).await, "run");
    let text = stdout(&run_bin(&db.url, jobs.path(), &["status"]).await);
    let header = text
        .lines()
        .find(|l| l.starts_with("EXECUTION "))
        .unwrap_or_else(|| panic!("a header row over the executions:\n{text}"));
    for column in ["MODE", "STATE", "PROGRESS", "DURATION", "EVENTS", "ORDERS"] {
        assert!(header.contains(column), "{header}");
    }
    let row: Vec<&str> = text
        .lines()
        .find(|l| l.starts_with(&format!("{JOB} ")))
        .unwrap_or_else(|| panic!("the execution's row:\n{text}"))
        .split_whitespace()
        .collect();
    assert_eq!(row[3], "100%", "{row:?}");
    assert!(row[4].ends_with('s'), "a duration: {row:?}");
    assert_eq!(row[5], "3", "events read: {row:?}");
}
