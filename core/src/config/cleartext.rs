//! Credentials in clear: which webhooks send a header (a bearer token: every header value is
//! treated as a secret) or URL user-info over plain `http://` to a host off this machine, whether
//! `DATABASE_URL` reaches a server off this machine without checking its identity, and what
//! counts as "this machine". The loader refuses such a webhook unless its effect type says
//! `allow_insecure: true`; `serve`, `run` and `consume` log each exception at start.
//!
//! "This machine" is a loopback IP address (`127.0.0.0/8`, `::1`), `localhost` or a name under
//! `.localhost`, or a Unix socket. Names are not resolved: DNS is not proof of where a host is.

use std::str::FromStr;

use sqlx::postgres::{PgConnectOptions, PgSslMode};

use super::{EffectCatalog, EffectType};

/// Whether `host` (a URL's host, IPv6 in brackets or not) is this machine.
pub fn is_loopback_host(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    match host.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => {
            let host = host.trim_end_matches('.').to_ascii_lowercase();
            host == "localhost" || host.ends_with(".localhost")
        }
    }
}

/// Whether a webhook at `url` with `headers` sends credentials in clear off this machine.
pub(super) fn webhook_in_clear(url: &reqwest::Url, has_headers: bool) -> bool {
    let credentials = has_headers || !url.username().is_empty() || url.password().is_some();
    url.scheme() == "http" && credentials && !url.host_str().is_some_and(is_loopback_host)
}

/// `scheme://host:port` of a URL: what may be logged of it.
fn origin(url: &reqwest::Url) -> String {
    format!(
        "{}://{}{}",
        url.scheme(),
        url.host_str().unwrap_or(""),
        url.port().map(|p| format!(":{p}")).unwrap_or_default()
    )
}

/// The warning for an effect type that sends credentials in clear (allowed, since it loaded).
fn effect_warning(effect: &EffectType) -> Option<String> {
    let webhook = &effect.webhook;
    webhook_in_clear(&webhook.url, !webhook.headers.is_empty()).then(|| {
        format!(
            "effect type `{}` sends its credentials in clear (plain http) to {}, off this machine \
             (`allow_insecure: true` in effects.yaml)",
            effect.name,
            origin(&webhook.url)
        )
    })
}

/// The warning for a `DATABASE_URL` off this machine whose server's identity is not checked
/// (`sslmode` other than `verify-full` / `verify-ca`, from the URL or `PGSSLMODE`).
pub fn database_warning(url: &str) -> Option<String> {
    let options = PgConnectOptions::from_str(url).ok()?;
    if options.get_socket().is_some() || is_loopback_host(options.get_host()) {
        return None;
    }
    if matches!(
        options.get_ssl_mode(),
        PgSslMode::VerifyFull | PgSslMode::VerifyCa
    ) {
        return None;
    }
    Some(format!(
        "DATABASE_URL points at {}:{}, off this machine, without sslmode=verify-full or \
         verify-ca: the server's identity is not checked, so a machine in between could read \
         the data (and, without TLS, the password)",
        options.get_host(),
        options.get_port()
    ))
}

/// Every exception to "no credentials in clear" of this catalog and database: one line each, for
/// the log at start.
pub fn cleartext_warnings(catalog: &EffectCatalog, database_url: Option<&str>) -> Vec<String> {
    let mut warnings: Vec<String> = catalog.types.values().filter_map(effect_warning).collect();
    warnings.extend(database_url.and_then(database_warning));
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_addresses_and_localhost_are_this_machine_and_names_are_not_resolved() {
        for host in [
            "127.0.0.1",
            "127.8.9.1",
            "[::1]",
            "::1",
            "localhost",
            "LOCALHOST.",
            "a.localhost",
        ] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in [
            "10.0.0.1",
            "[fe80::1]",
            "0.0.0.0",
            "db.internal",
            "localhost.example.com",
            "",
        ] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }

    #[test]
    fn a_webhook_is_in_clear_with_credentials_over_http_off_the_machine() {
        let url = |s: &str| reqwest::Url::parse(s).unwrap();
        assert!(webhook_in_clear(&url("http://h.example/x"), true));
        assert!(webhook_in_clear(&url("http://u@h.example/x"), false));
        assert!(webhook_in_clear(&url("http://:p@h.example/x"), false));
        assert!(!webhook_in_clear(&url("http://h.example/x"), false));
        assert!(!webhook_in_clear(&url("https://u:p@h.example/x"), true));
        assert!(!webhook_in_clear(&url("http://u:p@127.0.0.1:9/x"), true));
    }

    #[test]
    fn a_database_off_the_machine_warns_unless_its_identity_is_verified() {
        let warns = |url: &str| database_warning(url).is_some();
        assert!(warns("postgres://u:pw@db.internal/x"));
        assert!(warns("postgres://u@db.internal/x?sslmode=require"));
        assert!(warns("postgres://u@10.1.2.3:6432/x?sslmode=prefer"));
        assert!(!warns("postgres://u@db.internal/x?sslmode=verify-full"));
        assert!(!warns("postgres://u@db.internal/x?sslmode=verify-ca"));
        assert!(!warns("postgres://u@127.0.0.1/x"));
        assert!(!warns("postgres://u@localhost:5433/x?sslmode=disable"));
        assert!(!warns("postgres://u@[::1]/x"));
        assert!(!warns("postgres:///x?host=/var/run/postgresql"));
        let shown = database_warning("postgres://u:s3cret@db.internal:6432/x").unwrap();
        assert!(
            shown.contains("db.internal:6432") && !shown.contains("s3cret"),
            "{shown}"
        );
    }
}
