//! What the live consumer tells an operator when it stops and in `status`, and the
//! systemd unit it runs under.

use nix::sys::signal::Signal;
use replay_ledger_core::domain::Event;
use testkit::sink::Behavior;

use crate::helpers::*;

#[tokio::test]
async fn a_stopped_consumer_says_what_it_skipped_and_rejected_and_status_calls_it_stopped() {
    let db = TestDb::new().await;
    let provider = sink(Behavior::default()).await;
    let jobs = jobs_dir(&provider.url(), &JobSpec::default());
    std::fs::write(
        jobs.path().join("live.yaml"),
        "name: live\nkind: live\neffects:\n  notificar-vendedor: { mode: apply, on_failure: release }\n",
    )
    .unwrap();
    let cancelled = Event {
        tipo: "pedido.cancelado".into(),
        ..paid(2, "ped-2", 1, 1000, 5.0)
    };
    let invalid = Event {
        payload: serde_json::json!({"valorCentavos": "mil", "percentual": 5.0}),
        ..paid(3, "ped-3", 1, 1000, 5.0)
    };
    insert(
        &db.pool,
        &[paid(1, "ped-1", 1, 1000, 5.0), cancelled, invalid],
    )
    .await;
    let consumer = command(&db.url, jobs.path())
        .args(["consume", "--from-start"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn consume");
    wait_until("the three events are read", || async {
        replay_ledger_core::tables::execution::load(&db.pool, "ao-vivo")
            .await
            .unwrap()
            .is_some_and(|e| e.summary.events_read == 3)
    })
    .await;
    send_signal(&consumer, Signal::SIGTERM);
    let stopped = finish(consumer, "consume after SIGTERM").await;
    let status = run_bin(&db.url, jobs.path(), &["status"]).await;

    assert_success(&stopped, "consume");
    let summary = stdout(&stopped);
    assert!(
        summary.contains("3 events in this run (skipped 1, rejected 1)"),
        "{summary}"
    );
    assert!(summary.contains("effects: aplicado 1"), "{summary}");
    assert_success(&status, "status");
    let status = stdout(&status);
    let row = status
        .lines()
        .find(|l| l.starts_with("ao-vivo "))
        .unwrap_or_else(|| panic!("no ao-vivo row:\n{status}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(&cells[1..4], ["ao-vivo", "stopped", "live"], "{status}");
    assert!(
        status.contains("skipped 1 (other types), rejected 1 (invalid)"),
        "{status}"
    );
    assert!(
        status.contains("live consumer: 0 event(s) archived and not yet applied"),
        "{status}"
    );
    assert!(
        !status.contains("interrompida"),
        "a stopped consumer is not interrupted: {status}"
    );
}

#[test]
fn the_consumer_has_a_systemd_unit_of_its_own() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let unit = std::fs::read_to_string(root.join("deploy/replay-ledger-consume.service"))
        .expect("deploy/replay-ledger-consume.service");
    let serve = std::fs::read_to_string(root.join("deploy/replay-ledger.service")).unwrap();
    let value = |text: &str, key: &str| -> Option<String> {
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .find_map(|l| l.strip_prefix(&format!("{key}=")).map(str::to_string))
    };

    let exec = value(&unit, "ExecStart").expect("ExecStart");
    let args: Vec<&str> = exec.split_whitespace().collect();
    let at = args
        .iter()
        .position(|a| *a == "consume")
        .expect("runs consume");
    assert_eq!(args[at + 1], "--metrics-addr", "{exec}");
    // It runs beside `serve` on one host: its metrics port is not serve's default, and the flag
    // wins over a METRICS_ADDR in the shared environment file.
    let addr: std::net::SocketAddr = args[at + 2].parse().expect("an address");
    assert!(addr.ip().is_loopback() && addr.port() != 9187, "{exec}");
    assert_eq!(value(&unit, "KillSignal").as_deref(), Some("SIGTERM"));
    assert!(value(&unit, "LimitNOFILE").is_some());
    assert_eq!(
        value(&unit, "RestartPreventExitStatus").as_deref(),
        Some("2")
    );
    assert_eq!(
        value(&unit, "EnvironmentFile"),
        value(&serve, "EnvironmentFile")
    );
}
