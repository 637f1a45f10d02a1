//! Sessions (`console_sessao`): a random token in an `HttpOnly`, `SameSite=Strict` cookie
//! (`Secure` unless configured off), of which the database keeps only the SHA-256 digest. A
//! request's session is looked up and touched in one statement, with idle expiry judged by the
//! database's `now()` against the idle timeout kept in the session's row (the one of the
//! instance that opened it), so every console instance agrees on it. A login always makes a new
//! token.

use std::time::Duration;

use argon2::password_hash::rand_core::{OsRng, RngCore};
use axum::http::{header, HeaderMap};
use sha2::{Digest, Sha256};
use sqlx::PgPool;

use super::accounts::Role;

/// The cookie's name: with `Secure`, the `__Host-` prefix also makes the browser refuse it from a
/// subdomain or for another path.
pub(super) fn cookie_name(secure: bool) -> &'static str {
    if secure {
        "__Host-rl_console"
    } else {
        "rl_console"
    }
}

/// 32 random bytes from the operating system, hex-encoded.
pub(super) fn random_token() -> String {
    let mut bytes = [0u8; 32];
    OsRng.fill_bytes(&mut bytes);
    hex(&bytes)
}

/// The SHA-256 of a token, hex-encoded: what the database keeps.
pub(super) fn digest(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The `Set-Cookie` value that opens a session.
pub(super) fn set_cookie(token: &str, secure: bool) -> String {
    format!(
        "{}={token}; Path=/; HttpOnly; SameSite=Strict{}",
        cookie_name(secure),
        if secure { "; Secure" } else { "" }
    )
}

/// The `Set-Cookie` value that removes it.
pub(super) fn clear_cookie(secure: bool) -> String {
    format!(
        "{}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0{}",
        cookie_name(secure),
        if secure { "; Secure" } else { "" }
    )
}

/// The session token a request carries, if any.
pub(super) fn token_of(headers: &HeaderMap, secure: bool) -> Option<String> {
    let name = cookie_name(secure);
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, v)| *k == name && !v.is_empty())
        .map(|(_, v)| v.to_string())
}

/// The logged-in account of a request.
#[derive(Debug, Clone)]
pub(super) struct Session {
    pub email: String,
    pub role: Role,
    /// The token every form of this session carries.
    pub csrf: String,
    /// The digest of the cookie's token: how the database functions know the session.
    pub token_digest: String,
}

impl Session {
    /// The digest and idle timeout, as the database functions take them.
    pub fn for_database(
        &self,
        idle_timeout: Duration,
    ) -> replay_ledger_core::engine::approval::ConsoleSession<'_> {
        replay_ledger_core::engine::approval::ConsoleSession {
            token_digest: &self.token_digest,
            idle_timeout,
        }
    }
}

/// The live session of a token digest, marked as used now; `None` when there is none or it was
/// idle for longer than its own timeout.
pub(super) async fn touch(
    pool: &PgPool,
    token_digest: &str,
) -> Result<Option<Session>, sqlx::Error> {
    let row: Option<(String, Role, String)> = sqlx::query_as(
        r#"
        update console_sessao s set ultimo_uso = now()
        from console_usuario u
        where s.id_hash = $1 and u.email = s.email
          and s.ultimo_uso > now() - s.ocioso
        returning s.email, u.papel, s.csrf
        "#,
    )
    .bind(token_digest)
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|(email, role, csrf)| Session {
        email,
        role,
        csrf,
        token_digest: token_digest.to_string(),
    }))
}

/// Opens a session for `email` (its password checked): the session, the successful attempt and
/// the audit row, together; the session keeps `idle_timeout` as its own. Returns the token for
/// the cookie.
pub(super) async fn open(
    pool: &PgPool,
    email: &str,
    address: &str,
    idle_timeout: Duration,
) -> Result<String, sqlx::Error> {
    let (token, csrf) = (random_token(), random_token());
    sqlx::query("select console_abrir_sessao($1, $2, $3, $4, make_interval(secs => $5))")
        .bind(digest(&token))
        .bind(email)
        .bind(csrf)
        .bind(address)
        .bind(idle_timeout.as_secs_f64())
        .execute(pool)
        .await?;
    Ok(token)
}

/// Ends the session of a token, with its audit row (`logout`).
pub(super) async fn close(pool: &PgPool, token: &str, address: &str) -> Result<(), sqlx::Error> {
    sqlx::query("select console_fechar_sessao($1, $2)")
        .bind(digest(token))
        .bind(address)
        .execute(pool)
        .await?;
    Ok(())
}

/// Drops a session without an audit row (the old session of a browser that logs in again), and
/// every session idle past its own timeout.
pub(super) async fn discard(pool: &PgPool, token: Option<&str>) -> Result<(), sqlx::Error> {
    sqlx::query(
        r#"
        delete from console_sessao
        where id_hash = $1 or ultimo_uso < now() - ocioso
        "#,
    )
    .bind(token.map(digest))
    .execute(pool)
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cookie_is_http_only_strict_and_secure_unless_told_otherwise() {
        let secure = set_cookie("t", true);
        assert_eq!(
            secure,
            "__Host-rl_console=t; Path=/; HttpOnly; SameSite=Strict; Secure"
        );
        assert_eq!(
            set_cookie("t", false),
            "rl_console=t; Path=/; HttpOnly; SameSite=Strict"
        );
    }

    #[test]
    fn the_token_is_found_among_other_cookies() {
        let mut headers = HeaderMap::new();
        headers.insert(header::COOKIE, "a=1; rl_console=abc; b=2".parse().unwrap());

        assert_eq!(token_of(&headers, false).as_deref(), Some("abc"));
        assert_eq!(token_of(&headers, true), None);
    }

    #[test]
    fn tokens_are_random_and_only_their_digest_is_kept() {
        let (a, b) = (random_token(), random_token());

        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
        assert_ne!(digest(&a), a);
        assert_eq!(digest(&a), digest(&a));
    }
}
