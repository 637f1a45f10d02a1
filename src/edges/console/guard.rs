//! What every request must be before a handler sees it, and what every refusal looks like.
//!
//! - a request line longer than [`MAX_URI`] gets 414, a header block larger than
//!   [`MAX_HEADER_BYTES`] (or with more than [`MAX_HEADERS`] fields) gets 431 — answered here, in
//!   the router, so they carry the security headers like every other answer (hyper's own
//!   refusals, for heads past its buffer, are sent before any router runs);
//! - a body whose `Content-Length` declares more than the largest form gets 413 at once, before
//!   any of it is read (the connection then closes);
//! - a NUL anywhere in the path, the query or a form body (`%00` or the byte itself) gets 400:
//!   PostgreSQL's text cannot hold it, and no id, filter, e-mail or note has one;
//! - a refusal made by axum itself (a query string or form it could not read, a method a route
//!   does not take) becomes the console's error page, in Portuguese, its status kept.

use axum::body::{to_bytes, Body};
use axum::extract::Request;
use axum::http::{header, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::PageError;

/// The longest request target taken (path and query), in bytes.
pub(super) const MAX_URI: usize = 8 * 1024;
/// The largest header block taken (names and values), in bytes.
pub(super) const MAX_HEADER_BYTES: usize = 32 * 1024;
/// The most header fields taken.
pub(super) const MAX_HEADERS: usize = 64;
/// The largest form body taken (a login, an approval's note, a decision on many keys).
const MAX_FORM_BYTES: usize = 256 * 1024;

/// Refuses a request that is too large or holds a NUL; passes the rest on.
pub(super) async fn guard(request: Request, next: Next) -> Response {
    let target = request
        .uri()
        .path_and_query()
        .map_or("", |p| p.as_str())
        .to_string();
    if target.len() > MAX_URI {
        return refusal(
            StatusCode::URI_TOO_LONG,
            "O endereço pedido é longo demais.",
        );
    }
    let headers = request.headers();
    let header_bytes: usize = headers
        .iter()
        .map(|(k, v)| k.as_str().len() + v.len())
        .sum();
    if header_bytes > MAX_HEADER_BYTES || headers.len() > MAX_HEADERS {
        return refusal(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            "Os cabeçalhos do pedido são grandes demais.",
        );
    }
    if has_nul(target.as_bytes()) {
        return nul_refused();
    }
    if declared_length(&request).is_some_and(|n| n > MAX_FORM_BYTES as u64) {
        // Refused on the head alone: waiting for a body that large would hold the connection
        // until the request timeout. The connection closes, so its body is never read.
        let mut response = refusal(
            StatusCode::PAYLOAD_TOO_LARGE,
            "O formulário é grande demais.",
        );
        response.headers_mut().insert(
            header::CONNECTION,
            header::HeaderValue::from_static("close"),
        );
        return response;
    }
    let request = if request.method() == Method::POST {
        let (parts, body) = request.into_parts();
        let Ok(bytes) = to_bytes(body, MAX_FORM_BYTES).await else {
            return refusal(
                StatusCode::PAYLOAD_TOO_LARGE,
                "O formulário é grande demais.",
            );
        };
        if has_nul(&bytes) {
            return nul_refused();
        }
        Request::from_parts(parts, Body::from(bytes))
    } else {
        request
    };
    next.run(request).await
}

/// The body's length as its `Content-Length` declares it, if it does.
fn declared_length(request: &Request) -> Option<u64> {
    request
        .headers()
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

fn has_nul(bytes: &[u8]) -> bool {
    bytes.contains(&0) || bytes.windows(3).any(|w| w == b"%00")
}

fn nul_refused() -> Response {
    PageError::BadRequest(
        "O pedido contém um caractere nulo (NUL): nenhum dado válido o tem.".into(),
    )
    .into_response()
}

fn refusal(status: StatusCode, why: &str) -> Response {
    PageError::Refused(status, why.to_string()).into_response()
}

/// Turns an answer axum made itself (plain text in English, or an empty 405) into the console's
/// error page, in Portuguese, with the same status.
pub(super) async fn localize(response: Response) -> Response {
    let status = response.status();
    let html = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| !v.starts_with("text/plain"));
    if !(status.is_client_error() || status.is_server_error()) || html {
        return response;
    }
    let why = match status {
        StatusCode::BAD_REQUEST => {
            "O pedido não pôde ser lido: confira o endereço ou o formulário."
        }
        StatusCode::METHOD_NOT_ALLOWED => "Este endereço não aceita este método.",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "O formulário não veio no formato esperado.",
        StatusCode::UNPROCESSABLE_ENTITY => "Um campo do formulário ou do endereço é inválido.",
        StatusCode::PAYLOAD_TOO_LARGE => "O formulário é grande demais.",
        StatusCode::SERVICE_UNAVAILABLE => "O console está ocupado; tente de novo em instantes.",
        _ => "O pedido não pôde ser atendido.",
    };
    refusal(status, why)
}
