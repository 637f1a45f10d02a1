//! The CSRF token: every form that changes something carries the session's token in a hidden
//! `csrf_token` field, and a POST without it (or with another session's) gets 403. The token is
//! random per session (`console_sessao.csrf`), so a page of another site cannot know it; the
//! session cookie is also `SameSite=Strict`, which keeps other sites' requests from carrying it.

use super::error::PageError;
use super::session::Session;

/// 403 unless `given` is `session`'s CSRF token.
pub(super) fn check(session: &Session, given: Option<&str>) -> Result<(), PageError> {
    match given {
        Some(token) if same(token, &session.csrf) => Ok(()),
        _ => Err(PageError::Forbidden(
            "o formulário expirou ou não veio desta sessão (csrf_token): recarregue a página e tente de novo",
        )),
    }
}

/// Whether two tokens are equal, in time that does not depend on where they differ.
pub(super) fn same(given: &str, expected: &str) -> bool {
    let (a, b) = (given.as_bytes(), expected.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_same_token_matches() {
        assert!(same("abc123", "abc123"));
        assert!(!same("abc124", "abc123"));
        assert!(!same("abc12", "abc123"));
        assert!(!same("", "abc123"));
    }
}
