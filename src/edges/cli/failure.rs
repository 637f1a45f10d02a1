//! How a failure is told to the operator: its chain of causes, each said once.

/// The error and its causes joined by `: `, skipping a cause whose text the one before already
/// says (sqlx's "error returned from database: X" wraps a source that says "X" again).
pub(super) fn describe(err: &anyhow::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if parts.last().is_some_and(|before| before.contains(&text)) {
            continue;
        }
        parts.push(text);
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::describe;

    #[derive(Debug, thiserror::Error)]
    #[error("error returned from database: database \"x\" does not exist")]
    struct Outer(#[source] Inner);

    #[derive(Debug, thiserror::Error)]
    #[error("database \"x\" does not exist")]
    struct Inner;

    #[test]
    fn a_cause_already_said_by_its_wrapper_is_not_repeated() {
        let err = anyhow::Error::new(Outer(Inner)).context("connecting to the database");
        assert_eq!(
            describe(&err),
            "connecting to the database: error returned from database: database \"x\" does not exist"
        );
    }

    #[test]
    fn distinct_causes_are_all_said() {
        let err = anyhow::anyhow!("connection refused").context("connecting to 127.0.0.1:1");
        assert_eq!(
            describe(&err),
            "connecting to 127.0.0.1:1: connection refused"
        );
    }
}
