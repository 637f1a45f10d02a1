//! Logging in and out. `POST /login` (form `email`, `password`) checks the password against the
//! account's argon2id hash and answers 303 to `/` with a new session's cookie; the old session of
//! the browser, if any, is dropped, so a session id never survives a login. Failed logins are
//! counted in `console_tentativa_login` (shared by every instance) per account and per address:
//! past the limit within the window, logins are refused with 429 without checking the password.
//! An unknown account costs the same hash check as a known one, so timing does not tell them apart.

use std::net::{IpAddr, SocketAddr};
use std::sync::LazyLock;

use axum::extract::{ConnectInfo, FromRequestParts, Query, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use serde::Deserialize;
use sqlx::PgPool;

use super::accounts::{self, normalize_email};
use super::error::PageError;
use super::session::{self, Session};
use super::{templates, Console, Throttle};

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct LoginQuery {
    next: Option<String>,
}

/// `GET /login` (`?next=/executions/…`: where the login returns, a local path only).
pub(super) async fn login_page(Query(query): Query<LoginQuery>) -> Response {
    let next = query.next.as_deref().and_then(local_path);
    templates::html(templates::login::page(None, next)).into_response()
}

/// `next` if it is a path of this console: one leading `/` (not `//`, which a browser reads as
/// another host), no backslash (read as `/` by browsers), only visible ASCII (as a browser sends
/// a path: anything else percent-encoded), and short; so a link cannot make the login send
/// anyone elsewhere.
pub(super) fn local_path(next: &str) -> Option<&str> {
    let local = next.starts_with('/')
        && !next.starts_with("//")
        && !next.contains('\\')
        && next.len() <= 2048
        && next.bytes().all(|b| (0x21..=0x7e).contains(&b));
    local.then_some(next)
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct LoginForm {
    email: String,
    password: String,
    /// Where to go once logged in (a local path; else `/`).
    next: Option<String>,
}

/// Password checks running at once: each holds 19 MiB for its tens of milliseconds, so a burst of
/// logins (the connection limit allows 256 at once) waits here instead of taking gigabytes.
static PASSWORD_CHECKS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(4);

/// A hash to check a password against when the account does not exist.
static DECOY: LazyLock<String> = LazyLock::new(|| {
    accounts::hash_password("not the password of any account").unwrap_or_default()
});

/// `POST /login`.
pub(super) async fn login(
    State(console): State<Console>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Result<Response, PageError> {
    let config = &console.config;
    let address = client_address(peer, &headers, &config.trusted_proxies).to_string();
    // As stored; anything that is not an address is still counted (made inert: a NUL or a
    // control character cannot reach the database), cut to an address's length.
    let email = normalize_email(&form.email).unwrap_or_else(|_| {
        replay_ledger_core::shared::text::inert(&form.email.trim().to_lowercase())
            .chars()
            .take(254)
            .collect()
    });
    let next = form.next.as_deref().and_then(local_path).unwrap_or("/");
    if !password_holds(&console, &email, &address, form.password).await? {
        let page = templates::login::page(Some(templates::login::REFUSED), Some(next));
        return Ok((StatusCode::UNAUTHORIZED, templates::html(page)).into_response());
    }
    let old = session::token_of(&headers, config.secure_cookies);
    session::discard(&console.pool, old.as_deref()).await?;
    let token = session::open(&console.pool, &email, &address, config.idle_timeout).await?;
    Ok((
        [(
            header::SET_COOKIE,
            session::set_cookie(&token, config.secure_cookies),
        )],
        Redirect::to(next),
    )
        .into_response())
}

/// Whether `password` is `email`'s: 429 ([`PageError::Throttled`]) past the throttle's limits,
/// else the check, a refusal recorded. The throttle's count, the check and the recording happen
/// under one of the [`PASSWORD_CHECKS`] slots, so a burst of concurrent guesses cannot all read
/// the count before any is recorded: at most the limit plus the slots in flight get checked.
async fn password_holds(
    console: &Console,
    email: &str,
    address: &str,
    password: String,
) -> Result<bool, PageError> {
    let _slot = PASSWORD_CHECKS.acquire().await;
    if throttled(&console.pool, email, address, console.config.throttle).await? {
        tracing::warn!(address = %replay_ledger_core::shared::text::inert(address), "console: login throttled");
        return Err(PageError::Throttled);
    }
    let account = accounts::credentials(&console.pool, email).await?;
    let (hash, known) = match &account {
        Some((_, hash)) => (hash.clone(), true),
        None => (DECOY.clone(), false),
    };
    let matches = tokio::task::spawn_blocking(move || accounts::verify_password(&password, &hash))
        .await
        .unwrap_or(false);
    if matches && known {
        return Ok(true);
    }
    sqlx::query("select console_recusar_login($1, $2)")
        .bind(email)
        .bind(address)
        .execute(&console.pool)
        .await?;
    Ok(false)
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct LogoutForm {
    csrf_token: Option<String>,
}

/// `POST /logout` (form `csrf_token`): the session ends, the cookie is cleared, 303 to `/login`.
pub(super) async fn logout(
    State(console): State<Console>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    session: Session,
    Form(form): Form<LogoutForm>,
) -> Result<Response, PageError> {
    super::csrf::check(&session, form.csrf_token.as_deref())?;
    let config = &console.config;
    let address = client_address(peer, &headers, &config.trusted_proxies).to_string();
    if let Some(token) = session::token_of(&headers, config.secure_cookies) {
        session::close(&console.pool, &token, &address).await?;
    }
    Ok((
        [(
            header::SET_COOKIE,
            session::clear_cookie(config.secure_cookies),
        )],
        Redirect::to("/login"),
    )
        .into_response())
}

/// A request's session, for every handler that takes one.
impl FromRequestParts<Console> for Session {
    type Rejection = PageError;

    /// No live session: a page redirects to `/login` (303), anything else gets 401.
    async fn from_request_parts(parts: &mut Parts, state: &Console) -> Result<Self, PageError> {
        let config = &state.config;
        let refused = || {
            if parts.method == Method::GET || parts.method == Method::HEAD {
                let asked = parts.uri.path_and_query().map(|p| p.as_str());
                PageError::Login(asked.and_then(local_path).map(str::to_string))
            } else {
                PageError::Unauthorized
            }
        };
        let Some(token) = session::token_of(&parts.headers, config.secure_cookies) else {
            return Err(refused());
        };
        match session::touch(&state.pool, &session::digest(&token)).await? {
            Some(session) => Ok(session),
            None => Err(refused()),
        }
    }
}

/// Whether logins for `email` or from `address` are over their limit of failures.
async fn throttled(
    pool: &PgPool,
    email: &str,
    address: &str,
    throttle: Throttle,
) -> Result<bool, sqlx::Error> {
    let (account, from_address): (i64, i64) = sqlx::query_as(
        r#"
        select count(*) filter (where email = $1), count(*) filter (where endereco = $2)
        from console_tentativa_login
        where not sucesso and em > now() - make_interval(secs => $3)
          and (email = $1 or endereco = $2)
        "#,
    )
    .bind(email)
    .bind(address)
    .bind(throttle.window.as_secs_f64())
    .fetch_one(pool)
    .await?;
    Ok(account >= throttle.per_account || from_address >= throttle.per_address)
}

/// The client's address: the peer's, unless the peer is a trusted proxy, in which case the
/// rightmost address of `X-Forwarded-For` that is not itself a trusted proxy (the left part of
/// that header is whatever the client sent, and proves nothing).
pub(super) fn client_address(peer: SocketAddr, headers: &HeaderMap, trusted: &[IpAddr]) -> IpAddr {
    let peer = peer.ip();
    if !trusted.contains(&peer) {
        return peer;
    }
    let forwarded: Vec<IpAddr> = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|a| a.trim().parse::<IpAddr>().ok())
        .collect::<Option<Vec<_>>>()
        .unwrap_or_default();
    forwarded
        .into_iter()
        .rev()
        .find(|a| !trusted.contains(a))
        .unwrap_or(peer)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(xff: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert("x-forwarded-for", xff.parse().unwrap());
        h
    }

    #[test]
    fn forwarded_for_counts_only_from_a_trusted_proxy_and_only_its_own_entry() {
        let proxy: IpAddr = "10.0.0.1".parse().unwrap();
        let peer = SocketAddr::new(proxy, 5000);
        let outsider = SocketAddr::new("192.0.2.9".parse().unwrap(), 5000);

        assert_eq!(
            client_address(peer, &headers("1.1.1.1, 203.0.113.7"), &[proxy]).to_string(),
            "203.0.113.7"
        );
        assert_eq!(
            client_address(outsider, &headers("203.0.113.7"), &[proxy]).to_string(),
            "192.0.2.9"
        );
        assert_eq!(
            client_address(peer, &headers("garbage"), &[proxy]).to_string(),
            "10.0.0.1"
        );
    }
}
