//! Files the console hands over (the diff, the messages an approval will send): a name that
//! travels in a header as it is, and the attachment response.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

use super::error::PageError;

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

/// A spreadsheet as a download named `name`, or, when it could not be written, a 500 page that
/// points to the CSV (the cause goes to the log).
pub(super) fn spreadsheet(
    name: &str,
    written: Result<Vec<u8>, impl std::fmt::Display>,
) -> Result<Response, PageError> {
    let bytes = written.map_err(|e| {
        tracing::warn!(error = %e, "console: the spreadsheet could not be written");
        PageError::Refused(
            StatusCode::INTERNAL_SERVER_ERROR,
            "A planilha não pôde ser gerada; use o CSV.".into(),
        )
    })?;
    Ok(attachment(
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        name,
        bytes,
    ))
}
