//! Liveness of ownership when a worker host is cut off by the network (issue 33): every session
//! the product opens asks the server to give up a silent peer in about 30 s.

use crate::helpers::*;

/// The four give-up settings of the session `pool` hands out, as `pg_settings` shows them.
async fn give_up_settings(conn: &mut sqlx::PgConnection) -> Vec<(String, String)> {
    sqlx::query_as(
        r#"
        select name, setting from pg_settings
        where name in ('tcp_keepalives_idle', 'tcp_keepalives_interval',
                       'tcp_keepalives_count', 'tcp_user_timeout')
        order by name
        "#,
    )
    .fetch_all(conn)
    .await
    .expect("read pg_settings")
}

fn expected() -> Vec<(String, String)> {
    [
        ("tcp_keepalives_count", "3"),
        ("tcp_keepalives_idle", "10"),
        ("tcp_keepalives_interval", "5"),
        ("tcp_user_timeout", "30000"),
    ]
    .iter()
    .map(|(n, v)| (n.to_string(), v.to_string()))
    .collect()
}

#[tokio::test]
async fn every_session_the_product_opens_asks_the_server_to_give_up_a_silent_peer_in_30_s() {
    let db = TestDb::new().await;
    let mut pooled = db.pool.acquire().await.expect("a pooled session");
    let options = replay_ledger::tables::db::options(&db.url, "run").expect("options");
    let mut lock_session = sqlx::Connection::connect_with(&options)
        .await
        .expect("a lock's session");

    assert_eq!(give_up_settings(&mut pooled).await, expected(), "pool");
    assert_eq!(
        give_up_settings(&mut lock_session).await,
        expected(),
        "a lock's own session"
    );
}
