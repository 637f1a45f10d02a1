//! Every long-held lock behaves as the execution's: the job lock a `serve`
//! holds for the length of a fire is leased too. A `serve` cut off from the database (a proxy that
//! stops forwarding, closing nothing) no longer keeps its scheduled job from firing anywhere else:
//! another `serve` ends the silent holder's session once it has not confirmed for twice the lease,
//! fires the job and finishes the execution once; the cut `serve` changes nothing when back, says
//! so in one line, and goes on waiting for its next tick.

use std::time::{Duration, Instant};

use crate::helpers::*;
use crate::liveness::{everything, through};
use crate::serve::Serve;

const JOB: &str = "replay-2026-10-14-v2";
const EVENTS: i64 = 3000;

#[tokio::test]
async fn a_serve_cut_off_mid_fire_lets_another_serve_fire_the_job_and_changes_nothing_when_back() {
    let db = TestDb::new().await;
    let events = paid_orders(EVENTS);
    insert(&db.pool, &events).await;
    let provider = sink(testkit::sink::Behavior {
        delay: Duration::from_millis(10),
        ..testkit::sink::Behavior::default()
    })
    .await;
    let spec = JobSpec {
        idempotent: false,
        on_failure: "keep",
        concurrency: 8,
        batch_size: 100,
        timeout: "5s",
        extra: "schedule: \"* * * * * *\"\n".into(),
        ..JobSpec::default()
    };
    let jobs = jobs_dir(&provider.url(), &spec);
    let url = url::Url::parse(&db.url).expect("the test database's URL");
    let server = tokio::net::lookup_host((url.host_str().unwrap(), url.port().unwrap_or(5432)))
        .await
        .expect("the server's address")
        .next()
        .expect("an address");
    let proxy = testkit::proxy::Proxy::start(server).await.expect("a proxy");
    let cut_one = Serve::start_with(&through(&db.url, &proxy), jobs.path(), "cut", |_| {});
    wait_until("the first serve is mid-window", || async {
        provider.request_count() >= (EVENTS / 4) as usize
    })
    .await;
    let direct = Serve::start_with(&db.url, jobs.path(), "direct", |_| {});

    proxy.cut();
    let cut_at = Instant::now();
    let finished = eventually(Duration::from_secs(90), || async {
        execution_state(&db.pool, JOB).await.as_deref() == Some("concluida")
    })
    .await;
    eprintln!(
        "the execution finished {:?} after the cut",
        cut_at.elapsed()
    );
    let before = everything(&db.pool).await;
    proxy.resume();
    let resumed_at = Instant::now();
    let said_it = eventually(Duration::from_secs(60), || async {
        cut_one.log().contains("taken over")
    })
    .await;
    eprintln!(
        "the cut serve said so {:?} after the network's return",
        resumed_at.elapsed()
    );
    // A few ticks of the cut serve, back on the network, on a finished execution.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = everything(&db.pool).await;
    let log = cut_one.log();
    for line in log
        .lines()
        .filter(|l| l.contains("taken over") || l.contains("lease"))
    {
        eprintln!("cut serve: {line}");
    }
    for line in direct.log().lines().filter(|l| l.contains("lease")) {
        eprintln!("direct serve: {line}");
    }
    let (cut_status, _) = cut_one.terminate().await;
    let (direct_status, _) = direct.terminate().await;

    assert!(
        finished,
        "the other serve did not finish the execution within 90 s"
    );
    assert!(said_it, "the cut serve said nothing within 60 s:\n{log}");
    // What the operator is told (a debug line may quote a refused statement's own error).
    let lines = log
        .lines()
        .filter(|l| l.contains("taken over") && !l.contains(" DEBUG "))
        .count();
    assert_eq!(lines, 1, "one line says it was taken over:\n{log}");
    // Every table but the ownership epochs, which each no-op fire of a finished execution (by
    // either serve, every second) takes anew.
    assert_eq!(
        after[..5],
        before[..5],
        "the cut serve changed nothing when back"
    );
    assert!(
        cut_status.success(),
        "the cut serve exits 0 on SIGTERM: {cut_status}"
    );
    assert!(direct_status.success(), "{direct_status}");
    let twice: Vec<_> = provider
        .deliveries()
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .collect();
    assert!(twice.is_empty(), "keys sent twice: {twice:?}");
}

/// A sweep pass under a lock whose lease lapsed (its holder could not reach the database in
/// time) makes no call: another serve may be sweeping the same rows.
#[tokio::test]
async fn a_sweep_under_a_lapsed_lease_makes_no_call_and_says_why() {
    use replay_ledger_core::services::sweeper::{SweepError, Sweeper, SweeperConfig};
    use replay_ledger_core::tables::execution::Lease;
    let db = TestDb::new().await;
    let events = paid_orders(20);
    insert(&db.pool, &events).await;
    for event in &events {
        abandon_stale_reservation(&db.pool, event).await;
    }
    let provider = sink(dedup()).await;
    let jobs = jobs_dir(&provider.url(), &JobSpec::default());
    let catalog = replay_ledger_core::config::load_effects(&jobs.path().join("effects.yaml"))
        .expect("effects.yaml loads");
    let effects =
        replay_ledger_core::engine::effects::Effects::from_catalog(&catalog).expect("providers");
    let lapsed = Lease::new(
        Duration::from_secs(1),
        Instant::now() - Duration::from_secs(5),
    );
    let sweeper = Sweeper::new(db.pool.clone(), effects, SweeperConfig::default())
        .expect("a valid sweeper")
        .under_lease(lapsed);

    let swept = sweeper.run_once().await;

    assert!(matches!(swept, Err(SweepError::LeaseLapsed)), "{swept:?}");
    assert_eq!(provider.request_count(), 0, "no call");
    assert_eq!(
        keys_in_state(&db.pool, "reservado").await.len(),
        events.len()
    );
}

/// Two databases on one server, each with a `serve` and a job of the same name: a job lock is per
/// database, and so is the judging of its holder. Both holders here went silent (each its own
/// database's stopped `serve`); taking the job here ends this database's holder and leaves the
/// other database's session alone, for every name (which session PostgreSQL lists first depends
/// on the lock's hash).
#[tokio::test]
async fn a_serve_ends_a_silent_holder_in_its_own_database_only() {
    use replay_ledger::services::scheduler::JobLock;
    use replay_ledger_core::tables::db::application_name_of;
    use sqlx::ConnectOptions;
    replay_ledger_core::shared::process::install(
        replay_ledger_core::shared::process::ProcessSettings {
            lease: Some("1s".into()),
            ..Default::default()
        },
    );
    let db = TestDb::new().await;
    let other = TestDb::unmigrated().await;
    let session = |url: String, host: &'static str| async move {
        let options: sqlx::postgres::PgConnectOptions = url.parse().unwrap();
        options
            .application_name(&application_name_of("serve", host, 7))
            .connect()
            .await
            .unwrap()
    };
    let names: Vec<String> = (0..8).map(|i| format!("nightly-{i}")).collect();
    let mut held = Vec::new();
    for name in &names {
        let mut elsewhere = session(other.url.clone(), "elsewhere").await;
        hold_job_lock(&mut elsewhere, name).await;
        let mut stopped = session(db.url.clone(), "stopped").await;
        hold_job_lock(&mut stopped, name).await;
        held.push((elsewhere, stopped));
    }
    // Silent for more than twice the lease.
    tokio::time::sleep(Duration::from_millis(2_500)).await;

    for (name, (elsewhere, _stopped)) in names.iter().zip(held.iter_mut()) {
        let taken = JobLock::try_acquire(&db.url, name, Duration::from_secs(10))
            .await
            .expect("take the job's lock");

        let lock =
            taken.unwrap_or_else(|| panic!("{name}: the stopped serve's lock was not taken"));
        lock.release().await;
        sqlx::query("select 1")
            .execute(&mut *elsewhere)
            .await
            .unwrap_or_else(|e| panic!("{name}: the other database's serve was ended: {e}"));
    }
}

/// Takes job `name`'s lock on `conn`, as a `serve` firing it does.
async fn hold_job_lock(conn: &mut sqlx::PgConnection, name: &str) {
    sqlx::query("select pg_advisory_lock($1, hashtext($2))")
        .bind(0x5250_4c53_i32)
        .bind(name)
        .execute(conn)
        .await
        .expect("take the job's lock");
}
