//! A webhook's redirect is not followed: a 307 would re-send the body and the `Idempotency-Key`
//! (and the configured headers) to another origin, and its answer would conclude the key. A 3xx
//! is a failure of class `redirect`, handled by the job's `on_failure`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::helpers::*;

const JOB: &str = "replay-2026-10-14-v2";

/// A loopback server that answers every request with `307 Temporary Redirect` to `location`;
/// returns its URL and how many requests it answered.
async fn redirecting_to(location: String) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/hook", listener.local_addr().expect("address"));
    let answered = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&answered);
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let (location, count) = (location.clone(), Arc::clone(&count));
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                count.fetch_add(1, Ordering::SeqCst);
                let answer = format!(
                    "HTTP/1.1 307 Temporary Redirect\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                );
                let _ = socket.write_all(answer.as_bytes()).await;
            });
        }
    });
    (url, answered)
}

/// The error classes recorded for `key`'s attempts.
async fn attempt_classes(db: &TestDb, key: &str) -> Vec<Option<String>> {
    sqlx::query_scalar("select classe_erro from efeito_tentativa where chave = $1 order by id")
        .bind(key)
        .fetch_all(&db.pool)
        .await
        .expect("read attempts")
}

#[tokio::test]
async fn a_redirect_is_not_followed_and_the_key_is_not_concluded() {
    let db = TestDb::new().await;
    let events = paid_orders(1);
    insert(&db.pool, &events).await;
    let elsewhere = sink(dedup()).await;
    let (url, redirects) = redirecting_to(format!("{}hook", elsewhere.url())).await;
    for (idempotent, on_failure, left) in
        [(true, "release", None), (false, "keep", Some("incerto"))]
    {
        sqlx::query("delete from efeito_aplicado")
            .execute(&db.pool)
            .await
            .expect("clear");
        let spec = JobSpec {
            idempotent,
            on_failure,
            ..JobSpec::default()
        };
        let jobs = jobs_dir(&url, &spec);

        let out = run_bin_within(&db.url, jobs.path(), &["run", JOB, "--restart"]).await;

        // Released, the key stops the run (exit 1, rerun later); kept, it is `incerto` (exit 0).
        let expected = if idempotent { 1 } else { 0 };
        assert_eq!(out.status.code(), Some(expected), "{}", stderr(&out));
        assert!(
            redirects.load(Ordering::SeqCst) >= 1,
            "the webhook was not called"
        );
        assert_eq!(elsewhere.request_count(), 0, "the redirect was followed");
        let state: Option<String> =
            sqlx::query_scalar("select estado from efeito_aplicado where chave = $1")
                .bind(key(&events[0]))
                .fetch_optional(&db.pool)
                .await
                .expect("read the ledger");
        assert_eq!(state.as_deref(), left, "on_failure: {on_failure}");
        let classes = attempt_classes(&db, &key(&events[0])).await;
        assert_eq!(
            classes.last(),
            Some(&Some("redirect".to_string())),
            "{classes:?}"
        );
    }
}
