//! A database that is not there: every command that connects says the cause — a
//! closed port, an unknown host, a wrong password, a database that does not exist, a URL that is
//! not PostgreSQL's — and exits 1 (2 for a URL that can never work), never printing the password;
//! `--wait-for-db` waits for a server that starts after the command; `serve` started while its
//! database is away keeps running with `/healthz` at 503 and works once the database is back.

use std::future::ready;
use std::process::{Output, Stdio};

use testkit::pgtemp::TempCluster;

use crate::helpers::*;
use crate::serve::{sweep_job, wait_healthy, Serve};

const JOB: &str = "replay-2026-10-14-v2";
/// In every URL below, so that a test can tell it was never printed.
const PASSWORD: &str = "s3cretDbPassw0rd";

/// A loopback port nobody listens on right now.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("local address").port()
}

fn url_at(host: &str, port: u16, db: &str) -> String {
    format!("postgres://postgres:{PASSWORD}@{host}:{port}/{db}")
}

/// Stdout and stderr of a finished command, as one text.
fn said(out: &Output) -> String {
    format!("{}{}", stdout(out), stderr(out))
}

/// The command exited with `code`, said `phrases`, and never the password or the pool's
/// "timed out" (which hides the cause).
fn assert_says(out: &Output, what: &str, code: i32, phrases: &[&str]) {
    let text = said(out);
    assert_eq!(out.status.code(), Some(code), "{what}:\n{text}");
    for phrase in phrases {
        assert!(text.contains(phrase), "{what}: no `{phrase}` in:\n{text}");
    }
    assert!(
        !text.contains(PASSWORD),
        "{what} printed the password:\n{text}"
    );
    assert!(!text.contains("pool timed out"), "{what}:\n{text}");
}

/// The commands that connect, with what they need in the jobs directory.
fn connecting_commands() -> Vec<Vec<&'static str>> {
    vec![
        vec!["run", JOB],
        vec!["status"],
        vec!["migrate"],
        vec!["sweep"],
        vec!["review", "list"],
        vec!["approvals"],
        vec!["report", JOB],
        vec!["grants", "--worker", "nobody"],
        vec!["consume", "--metrics-addr", "127.0.0.1:0"],
    ]
}

#[tokio::test]
async fn every_command_names_a_closed_port_as_refused_and_exits_1() {
    let port = closed_port();
    let url = url_at("127.0.0.1", port, "test");
    let jobs = jobs_dir("http://127.0.0.1:9/", &JobSpec::default());
    std::fs::write(
        jobs.path().join("live.yaml"),
        "name: live\nkind: live\neffects:\n  notificar-vendedor: { mode: apply, on_failure: keep }\n",
    )
    .unwrap();
    let runs = connecting_commands().into_iter().map(|args| {
        let (url, jobs) = (url.clone(), jobs.path().to_path_buf());
        async move {
            let out = run_bin_within(&url, &jobs, &args).await;
            (args, out)
        }
    });

    let outputs = futures::future::join_all(runs).await;

    let target = format!("the database at 127.0.0.1:{port}/test");
    let refused = format!("connection refused to 127.0.0.1:{port}");
    for (args, out) in outputs {
        assert_says(&out, &args.join(" "), 1, &[&target, &refused]);
    }
}

#[tokio::test]
async fn an_unknown_host_is_named_and_exits_1() {
    let url = url_at("replay-ledger-db.invalid", 5432, "test");
    let jobs = jobs_dir("http://127.0.0.1:9/", &JobSpec::default());

    let out = run_bin_within(&url, jobs.path(), &["run", JOB]).await;

    assert_says(&out, "run", 1, &["unknown host `replay-ledger-db.invalid`"]);
}

/// A server that takes the connection and never speaks (a hung host, a firewall that accepts):
/// the one attempt is given 5 s, then the cause is said, not retried for a minute.
#[tokio::test]
async fn a_server_that_accepts_but_never_answers_is_named_and_exits_1() {
    // The kernel completes the handshake from the listen backlog; nothing ever reads or writes.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    let port = silent.local_addr().expect("local address").port();
    let jobs = jobs_dir("http://127.0.0.1:9/", &JobSpec::default());

    let out = run_bin_within(&url_at("127.0.0.1", port, "test"), jobs.path(), &["status"]).await;
    drop(silent);

    assert_says(
        &out,
        "status",
        1,
        &[
            &format!("the database at 127.0.0.1:{port}/test"),
            &format!("no answer from 127.0.0.1:{port} within 5s"),
        ],
    );
}

/// A server out of connection slots for the role says so: the cause is one time may cure, so it
/// is said as such (and `--wait-for-db` would wait for it), not as a failure of the URL.
#[tokio::test]
async fn a_role_out_of_connection_slots_is_said_as_not_accepting_and_exits_1() {
    let role = format!("rl_full_{}", uuid::Uuid::new_v4().simple());
    let admin = TestDb::new().await;
    sqlx::query(&format!("create role {role} login connection limit 0"))
        .execute(&admin.pool)
        .await
        .expect("a role with no connection slot");
    let mut url = url::Url::parse(&server_url()).expect("the server URL");
    url.set_username(&role).expect("a user name");
    let jobs = jobs_dir("http://127.0.0.1:9/", &JobSpec::default());

    let out = run_bin_within(url.as_str(), jobs.path(), &["status"]).await;
    sqlx::query(&format!("drop role {role}"))
        .execute(&admin.pool)
        .await
        .expect("drop the role");

    assert_says(
        &out,
        "status",
        1,
        &[
            "the server does not accept connections now",
            "too many connections for role",
        ],
    );
}

#[tokio::test]
async fn a_database_that_does_not_exist_is_named_and_exits_1() {
    let missing = format!("rl_missing_{}", uuid::Uuid::new_v4().simple());
    let mut url = url::Url::parse(&server_url()).expect("the server URL");
    url.set_path(&missing);
    url.set_password(Some(PASSWORD)).expect("a password");
    let jobs = jobs_dir("http://127.0.0.1:9/", &JobSpec::default());

    let out = run_bin_within(url.as_str(), jobs.path(), &["status"]).await;

    let host = format!(
        "{}:{}",
        url.host_str().unwrap(),
        url.port_or_known_default().unwrap()
    );
    assert_says(
        &out,
        "status",
        1,
        &[
            &format!("the database at {host}/{missing}"),
            &format!("database `{missing}` does not exist"),
        ],
    );
}

#[tokio::test]
async fn a_wrong_password_is_an_authentication_failure_and_exits_1() {
    let right = "rightPassw0rd";
    let cluster = TempCluster::start_with_password(right)
        .await
        .expect("a throwaway cluster with scram auth");
    let jobs = jobs_dir("http://127.0.0.1:9/", &JobSpec::default());
    let good = run_bin_within(&cluster.url(), jobs.path(), &["migrate"]).await;
    assert_success(&good, "migrate with the right password");

    let wrong = url_at("127.0.0.1", cluster.port(), "postgres");
    let out = run_bin_within(&wrong, jobs.path(), &["status"]).await;

    assert_says(
        &out,
        "status with a wrong password",
        1,
        &["authentication failed for role `postgres`"],
    );
    assert!(!said(&out).contains(right), "{}", said(&out));
}

#[tokio::test]
async fn a_url_that_can_never_work_exits_2_at_once() {
    let jobs = jobs_dir("http://127.0.0.1:9/", &JobSpec::default());
    let cases = [
        ("mysql://x", "mysql"),
        (
            "mysql://root:s3cretDbPassw0rd@db:3306/app",
            "not a PostgreSQL URL",
        ),
        ("not a url s3cretDbPassw0rd", "DATABASE_URL"),
        (
            "postgres://u:s3cretDbPassw0rd@127.0.0.1:notaport/db",
            "DATABASE_URL",
        ),
    ];
    for (url, phrase) in cases {
        for args in [vec!["status"], vec!["run", JOB], vec!["serve"]] {
            let out = run_bin_within(url, jobs.path(), &args).await;
            assert_says(
                &out,
                &format!("{} with {url}", args.join(" ")),
                2,
                &[phrase],
            );
        }
    }
}

#[tokio::test]
async fn wait_for_db_waits_for_a_server_that_starts_after_the_command() {
    let mut cluster = TempCluster::start().await.expect("a throwaway cluster");
    cluster.stop().await;
    let jobs = jobs_dir("http://127.0.0.1:9/", &JobSpec::default());
    let log = jobs.path().join("migrate.log");
    let file = std::fs::File::create(&log).expect("create the log");
    let mut cmd = command(&cluster.url(), jobs.path());
    cmd.env("WAIT_FOR_DB", "100s")
        .arg("migrate")
        .stdin(Stdio::null())
        .stdout(file.try_clone().expect("clone the log handle"))
        .stderr(file);
    let mut child = cmd.spawn().expect("spawn replay-ledger migrate");
    let port = cluster.port();
    let waiting = format!("waiting up to 1m 40s for the database at 127.0.0.1:{port}/postgres");
    wait_until("migrate says what it waits for", || {
        ready(
            std::fs::read_to_string(&log)
                .unwrap_or_default()
                .contains(&waiting),
        )
    })
    .await;
    assert!(child.try_wait().expect("poll").is_none(), "it still waits");

    cluster.start_again().await.expect("start the cluster");
    let status = tokio::time::timeout(PROCESS_LIMIT, child.wait())
        .await
        .expect("migrate ends once the server is up")
        .expect("wait for migrate");

    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(status.success(), "{status}:\n{text}");
    assert!(text.contains("connection refused"), "{text}");
    let db = TestDb::attach(&cluster.url()).await;
    let migrated: bool = sqlx::query_scalar("select to_regclass('efeito_aplicado') is not null")
        .fetch_one(&db.pool)
        .await
        .expect("look for the ledger");
    assert!(migrated, "migrate applied the migrations");
}

#[tokio::test]
async fn wait_for_db_gives_up_with_the_cause() {
    let port = closed_port();
    let url = url_at("127.0.0.1", port, "test");
    let jobs = jobs_dir("http://127.0.0.1:9/", &JobSpec::default());
    std::fs::write(
        jobs.path().join("live.yaml"),
        "name: live\nkind: live\neffects:\n  notificar-vendedor: { mode: apply, on_failure: keep }\n",
    )
    .unwrap();

    let out = run_bin_within(&url, jobs.path(), &["--wait-for-db", "2s", "status"]).await;

    assert_says(
        &out,
        "status --wait-for-db 2s",
        1,
        &[
            &format!("waiting up to 2s for the database at 127.0.0.1:{port}/test"),
            &format!("connection refused to 127.0.0.1:{port}"),
        ],
    );
}

#[tokio::test]
async fn serve_started_while_the_database_is_away_keeps_running_and_works_once_it_is_back() {
    let mut cluster = TempCluster::start().await.expect("a throwaway cluster");
    cluster.stop().await;
    let provider = sink(dedup()).await;
    let spec = JobSpec {
        timeout: "1s",
        ..JobSpec::default()
    };
    let jobs = jobs_dir(&provider.url(), &spec);
    sweep_job(jobs.path(), "2s");
    let url = cluster.url();
    let mut serve = Serve::start_with(&url, jobs.path(), "serve", |_| {});

    wait_until(
        "/healthz answers 503 while the database is away",
        || async { serve.get("/healthz").await.map(|(s, _)| s) == Some(503) },
    )
    .await;
    wait_until("a fire failed and was logged", || {
        ready(serve.log().contains("job=sweeper") && serve.log().contains("next tick"))
    })
    .await;
    assert!(
        serve.child.try_wait().expect("poll").is_none(),
        "serve runs"
    );
    assert!(
        serve.log().contains("connection refused"),
        "{}",
        serve.log()
    );

    cluster.start_again().await.expect("start the cluster");
    let db = TestDb::attach(&url).await;
    wait_until("serve applied the migrations", || async {
        sqlx::query_scalar::<_, bool>("select to_regclass('efeito_aplicado') is not null")
            .fetch_one(&db.pool)
            .await
            .unwrap_or(false)
    })
    .await;
    let event = paid(1, "ped-1", 1, 1000, 5.0);
    insert(&db.pool, std::slice::from_ref(&event)).await;
    abandon_stale_reservation(&db.pool, &event).await;

    wait_until("the sweep job retook the stale reservation", || async {
        keys_in_state(&db.pool, "concluido").await == vec![key(&event)]
    })
    .await;
    wait_healthy(&serve).await;
    assert!(!serve.log().contains(PASSWORD));
    let (status, _) = serve.terminate().await;
    assert!(status.success(), "serve exits 0 on SIGTERM, got {status}");
}
