//! Files the console hands over (the diff, the messages an approval will send): a name that
//! travels in a header as it is, and the attachment response.

use axum::http::header;
use axum::response::{IntoResponse, Response};

/// A file name that travels in a header as it is.
pub(super) fn name(name: &str) -> String {
    name.chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
        .collect()
}

/// `bytes` as a download named `name` (already made safe by [`name`]).
pub(super) fn attachment(content_type: &str, name: &str, bytes: Vec<u8>) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type.to_string()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{name}\""),
            ),
        ],
        bytes,
    )
        .into_response()
}
