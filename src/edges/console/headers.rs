//! The headers every response carries, and the console's one stylesheet. The policy is strict:
//! `Content-Security-Policy: default-src 'self'` (no inline script or style, no other origin:
//! pages use only `/console.css`), `X-Frame-Options: DENY` (no framing, against clickjacking),
//! `Referrer-Policy: same-origin`, `X-Content-Type-Options: nosniff`; pages are `no-store`, so a
//! shared browser's back button does not show another user's data after logout.

use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};

pub(super) const STYLESHEET_PATH: &str = "/console.css";

const STYLESHEET: &str = include_str!("console.css");

/// Adds the security headers to a response.
pub(super) async fn secure(response: Response) -> Response {
    secured(response)
}

/// The server's 503 for a handler that overran its time, with the security headers: it is made
/// outside the router (see [`crate::edges::http_server::serve_bounded_answering`]).
pub(super) fn timed_out() -> Response {
    secured(crate::edges::http_server::timed_out())
}

fn secured(mut response: Response) -> Response {
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_SECURITY_POLICY, "default-src 'self'"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "same-origin"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    headers
        .entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    response
}

/// `GET /console.css`: no session needed (the login page uses it).
pub(super) async fn stylesheet() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "public, max-age=3600"),
        ],
        STYLESHEET,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_to_a_handler_that_overran_its_time_carries_the_security_headers() {
        let answer = timed_out();
        assert_eq!(answer.status(), 503);
        for (name, value) in [
            ("content-security-policy", "default-src 'self'"),
            ("x-frame-options", "DENY"),
            ("referrer-policy", "same-origin"),
        ] {
            assert_eq!(answer.headers()[name], value, "{name}");
        }
    }
}
