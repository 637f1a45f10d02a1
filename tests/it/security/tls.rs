//! TLS where a local server can do it: the test PostgreSQL (Debian enables TLS with its snakeoil
//! certificate, issued to `localhost`) through `sslmode` in the URL, and SMTP's `tls=required` and
//! `smtps://`, which must refuse a server that offers no TLS rather than send in the clear.

use std::path::Path;

use replay_ledger_core::tables::db;

use crate::helpers::*;

/// The local server's certificate. A server without TLS fails the test that asks, saying how to
/// turn it on: these tests would otherwise prove nothing and pass.
async fn server_certificate(db: &TestDb) -> String {
    let ssl: String = sqlx::query_scalar("show ssl")
        .fetch_one(&db.pool)
        .await
        .expect("show ssl");
    let file: String = sqlx::query_scalar("show ssl_cert_file")
        .fetch_one(&db.pool)
        .await
        .expect("show ssl_cert_file");
    assert!(
        ssl == "on" && Path::new(&file).is_file(),
        "the test PostgreSQL does not serve TLS (ssl = {ssl}, ssl_cert_file = {file}): these \
         tests need it. Debian's postgresql turns it on with the snakeoil certificate of the \
         ssl-cert package (make-ssl-cert generate-default-snakeoil; ssl = on in postgresql.conf), \
         readable by this user"
    );
    file
}

/// The test database's URL with `host` and a query.
fn url_with(db: &TestDb, host: &str, query: &str) -> String {
    let mut url = url::Url::parse(&db.url).expect("the test URL parses");
    url.set_host(Some(host)).expect("a host");
    url.set_query(Some(query));
    url.to_string()
}

/// Whether this connection is encrypted, as the server sees it.
async fn encrypted(url: &str) -> Result<bool, String> {
    let pool = db::connect(url, "test").await.map_err(|e| e.to_string())?;
    let ssl = sqlx::query_scalar("select ssl from pg_stat_ssl where pid = pg_backend_pid()")
        .fetch_one(&pool)
        .await
        .map_err(|e| e.to_string())?;
    pool.close().await;
    Ok(ssl)
}

#[tokio::test]
async fn sslmode_in_the_url_encrypts_and_verify_full_checks_the_certificate() {
    let db = TestDb::new().await;
    let cert = server_certificate(&db).await;

    let required = encrypted(&url_with(&db, "127.0.0.1", "sslmode=require")).await;
    let verified = url_with(
        &db,
        "localhost",
        &format!("sslmode=verify-full&sslrootcert={cert}"),
    );
    let verified = encrypted(&verified).await;
    let wrong_name = url_with(
        &db,
        "127.0.0.1",
        &format!("sslmode=verify-full&sslrootcert={cert}"),
    );
    let wrong_name = encrypted(&wrong_name).await;
    let unknown_ca = encrypted(&url_with(&db, "localhost", "sslmode=verify-full")).await;
    let plain = encrypted(&url_with(&db, "127.0.0.1", "sslmode=disable")).await;

    assert!(required.expect("sslmode=require connects"), "not encrypted");
    assert!(
        verified.expect("verify-full with the server's CA connects"),
        "not encrypted"
    );
    assert!(
        wrong_name.is_err(),
        "verify-full accepted a host name the certificate lacks"
    );
    assert!(
        unknown_ca.is_err(),
        "verify-full accepted a certificate of an unknown CA"
    );
    assert!(
        !plain.expect("sslmode=disable connects"),
        "encrypted although disabled"
    );
}

#[tokio::test]
async fn the_binary_runs_over_verified_tls() {
    let db = TestDb::new().await;
    let cert = server_certificate(&db).await;
    let url = url_with(
        &db,
        "localhost",
        &format!("sslmode=verify-full&sslrootcert={cert}"),
    );
    insert(&db.pool, &paid_orders(5)).await;
    let provider = sink(dedup()).await;
    let jobs = jobs_dir(&provider.url(), &JobSpec::default());

    let out = run_bin_within(&url, jobs.path(), &["run", "replay-2026-10-14-v2"]).await;

    assert_success(&out, "run over verify-full TLS");
    assert_eq!(provider.delivery_count(), 5);
}

#[tokio::test]
async fn smtp_with_tls_required_or_smtps_never_sends_to_a_server_without_tls() {
    let f = crate::report::fixture("").await;
    f.simulate().await;
    let (_server, port, maildir) = super::smtp_server().await;
    for smtp_url in [
        format!("smtp://relatorios:pw@127.0.0.1:{port}?tls=required"),
        format!("smtps://relatorios:pw@127.0.0.1:{port}"),
    ] {
        let mut cmd = command(&f.db.url, f.jobs.path());
        cmd.args(["report", "replay-2026-10-14-v2", "--job", "finance-daily"])
            .env("SMTP_URL", &smtp_url)
            .env("REPORT_FROM", "relatorios@example.com");
        let out = output_of(cmd, "replay-ledger report").await;

        assert_eq!(
            out.status.code(),
            Some(1),
            "{smtp_url}: {}{}",
            stdout(&out),
            stderr(&out)
        );
        let delivered = std::fs::read_dir(maildir.path().join("maildir/new"))
            .map(|d| d.count())
            .unwrap_or(0);
        assert_eq!(delivered, 0, "{smtp_url} sent in the clear");
    }
}
