//! What a request that cannot be served gets: the status code of the contract (303 to `/login`
//! for a page without a session, 401 for any other request without one, 403 for a role without
//! the right or a missing CSRF token; 503 while the database is away) and a short page that says
//! why.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};

use super::templates;

/// Why a request was not served.
#[derive(Debug)]
pub(super) enum PageError {
    /// A page without a session: 303 to `/login`, with the page asked for as `next` (a local
    /// path, checked by whoever makes the error) unless it is `/`.
    Login(Option<String>),
    /// Anything else without a session: 401.
    Unauthorized,
    /// The session's role may not, or the CSRF token is missing or wrong: 403.
    Forbidden(&'static str),
    NotFound(String),
    /// The request is malformed (an unknown outcome, a note refused): 400.
    BadRequest(String),
    /// The state does not allow it now (an approval whose data changed): 409.
    Conflict(String),
    /// As [`PageError::Conflict`], with the button that does what the state needs first (a new
    /// simulation after the data changed): why, the button's link, its label.
    ConflictWithAction {
        why: String,
        /// What changed, as the engine says it (identifiers, set as code).
        detail: Option<String>,
        href: String,
        label: &'static str,
    },
    /// Too many failed logins: 429, with the login page.
    Throttled,
    /// Any other status the console answers with, and why (414, 431, 413 …).
    Refused(StatusCode, String),
    Database(sqlx::Error),
}

impl From<sqlx::Error> for PageError {
    fn from(e: sqlx::Error) -> Self {
        PageError::Database(e)
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let mut action = None;
        let (status, message) = match self {
            PageError::ConflictWithAction {
                why,
                detail,
                href,
                label,
            } => {
                action = Some(templates::ErrorAction {
                    detail,
                    href,
                    label,
                });
                (StatusCode::CONFLICT, why)
            }
            PageError::Login(next) => {
                let to = match next.as_deref() {
                    Some(next) if next != "/" => {
                        format!("/login?next={}", templates::query_value(next))
                    }
                    _ => "/login".to_string(),
                };
                return Redirect::to(&to).into_response();
            }
            PageError::Unauthorized => (
                StatusCode::UNAUTHORIZED,
                "Sessão ausente ou expirada: entre de novo.".to_string(),
            ),
            PageError::Forbidden(why) => (StatusCode::FORBIDDEN, why.to_string()),
            PageError::NotFound(what) => (StatusCode::NOT_FOUND, what),
            PageError::BadRequest(why) => (StatusCode::BAD_REQUEST, why),
            PageError::Conflict(why) => (StatusCode::CONFLICT, why),
            PageError::Refused(status, why) => (status, why),
            PageError::Throttled => {
                return (
                    StatusCode::TOO_MANY_REQUESTS,
                    templates::html(templates::login::page(
                        Some(templates::login::THROTTLED),
                        None,
                    )),
                )
                    .into_response()
            }
            PageError::Database(e) if replay_ledger_core::tables::db::is_transient(&e) => {
                tracing::warn!(error = %e, "console: the database is away");
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "O banco de dados está fora do alcance agora; tente de novo em instantes."
                        .to_string(),
                )
            }
            // Text the database cannot hold (a NUL, an invalid encoding) came from the request.
            PageError::Database(e) if is_unholdable_text(&e) => (
                StatusCode::BAD_REQUEST,
                "O pedido contém texto que o banco de dados não aceita (um caractere nulo, por exemplo).".to_string(),
            ),
            PageError::Database(e) => {
                tracing::error!(error = %e, "console: database error");
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "Erro ao consultar o banco de dados; tente de novo.".to_string(),
                )
            }
        };
        let page = templates::error_page_with(status, &message, action);
        (
            status,
            [(header::CACHE_CONTROL, "no-store")],
            templates::html(page),
        )
            .into_response()
    }
}

/// Whether the database refused a value's text itself (SQLSTATE 22021, character not in the
/// encoding; 22P05, untranslatable character): the request's fault, not the console's.
fn is_unholdable_text(e: &sqlx::Error) -> bool {
    e.as_database_error()
        .and_then(|d| d.code())
        .is_some_and(|c| c == "22021" || c == "22P05")
}

/// A path no route serves.
pub(super) async fn not_found() -> PageError {
    PageError::NotFound("Página não encontrada.".into())
}
