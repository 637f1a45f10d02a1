//! When the pool times out, the cause is named: the pool retries a refused
//! connection, a server starting up (57P03) and one out of slots (53300) silently until its
//! timeout, then says only "pool timed out". What a retried step logs, and what `/healthz` says
//! of the database, is the last connect error instead — and a server this process was connected
//! to that now refuses every connection is said to have stopped (as PostgreSQL does after a full
//! `pg_wal`: it needs a manual start).

use std::time::Duration;

use replay_ledger_core::tables::db::{self, Backoff};
use sqlx::PgPool;
use testkit::pgtemp::TempCluster;

use crate::helpers::*;

/// One try: a step that times out is reported at once.
const ONCE: Backoff = Backoff {
    attempts: 1,
    base: Duration::from_millis(1),
    max: Duration::from_millis(1),
};

/// What this process says of the database after one retried step on `pool` timed out.
async fn said_after_a_timed_out_step(pool: &PgPool) -> String {
    let failed = db::retry("step", ONCE, || sqlx::query("select 1").execute(pool)).await;
    assert!(
        matches!(failed, Err(sqlx::Error::PoolTimedOut)),
        "the pool timed out: {failed:?}"
    );
    db::trouble(Duration::from_secs(600)).expect("a cause is kept")
}

fn pool_at(url: &str) -> PgPool {
    db::pool_for(db::check_url(url).expect("a PostgreSQL URL"))
}

#[tokio::test]
async fn a_pool_at_a_closed_port_says_the_connection_was_refused() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
        listener.local_addr().expect("local address").port()
    };
    let pool = pool_at(&format!("postgres://postgres@127.0.0.1:{port}/test"));

    let said = said_after_a_timed_out_step(&pool).await;

    assert!(said.contains("connection refused"), "{said}");
    assert!(!said.contains("does not answer"), "{said}");
}

#[tokio::test]
async fn a_role_out_of_connection_slots_is_named_53300_when_the_pool_times_out() {
    let admin = TestDb::new().await;
    let role = format!("rl_one_{}", uuid::Uuid::new_v4().simple());
    sqlx::query(&format!("create role {role} login connection limit 1"))
        .execute(&admin.pool)
        .await
        .expect("a role with one connection slot");
    let mut url = url::Url::parse(&admin.url).expect("the test database's URL");
    url.set_username(&role).expect("a user name");
    let holder = sqlx::PgPool::connect(url.as_str())
        .await
        .expect("the role's one session");
    let pool = pool_at(url.as_str());

    let said = said_after_a_timed_out_step(&pool).await;
    holder.close().await;
    pool.close().await;
    let _ = sqlx::query(&format!("drop role {role}"))
        .execute(&admin.pool)
        .await;

    assert!(said.contains("53300"), "{said}");
    assert!(said.contains("too many connections"), "{said}");
}

#[tokio::test]
async fn a_server_that_was_reached_and_now_refuses_every_connection_is_said_to_have_stopped() {
    let mut cluster = TempCluster::start().await.expect("a throwaway cluster");
    let pool = pool_at(&cluster.url());
    sqlx::query("select 1")
        .execute(&pool)
        .await
        .expect("the server answers");
    pool.close().await;
    let pool = pool_at(&cluster.url());
    cluster.stop().await;

    let said = said_after_a_timed_out_step(&pool).await;

    assert!(said.contains("connection refused"), "{said}");
    assert!(said.contains("has stopped"), "{said}");
    assert!(said.contains("pg_wal"), "{said}");
}
