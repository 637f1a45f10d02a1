//! `${VAR}` interpolation from the environment, applied to one string value at a time (inside the
//! deserializer of that value, never over the file's text: a value holding a newline or a colon
//! must not be able to change the YAML structure). `$${` is a literal `${`; a `$` followed by
//! anything else is kept as is.
//!
//! Error messages name the variable, never its value nor the surrounding text (a header value is
//! typically a secret once interpolated). So does the error of a value that does not pass its
//! check once interpolated (a token where a duration belongs): see [`referenced`].

/// Interpolates `${VAR}` references in `text` from the process environment.
pub(super) fn interpolate(text: &str) -> Result<String, String> {
    interpolate_with(text, |name| match std::env::var(name) {
        Ok(value) => Ok(Some(value)),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => {
            Err(format!("environment variable `{name}` is not valid UTF-8"))
        }
    })
}

/// Interpolates `${VAR}` references in `text`, looking variables up with `lookup`.
pub(super) fn interpolate_with(
    text: &str,
    lookup: impl Fn(&str) -> Result<Option<String>, String>,
) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        if let Some(after) = tail.strip_prefix("$${") {
            out.push_str("${");
            rest = after;
        } else if let Some(after) = tail.strip_prefix("${") {
            let end = after
                .find('}')
                .ok_or("unterminated `${` (write `$${` for a literal `${`)")?;
            let name = &after[..end];
            check_name(name)?;
            let value = lookup(name)?.ok_or_else(|| {
                format!("environment variable `{name}` is not set (referenced as `${{{name}}}`)")
            })?;
            out.push_str(&value);
            rest = &after[end + 1..];
        } else {
            out.push('$');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// The variables `text` refers to (`${VAR}`, not `$${`), in order: the names an error about the
/// interpolated value gives instead of the value.
pub(super) fn referenced(text: &str) -> Vec<String> {
    let names = std::cell::RefCell::new(Vec::new());
    let _ = interpolate_with(text, |name| {
        names.borrow_mut().push(name.to_owned());
        Ok(Some(String::new()))
    });
    names.into_inner()
}

/// A variable name: a letter or `_`, then letters, digits and `_`.
fn check_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if first_ok && chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        Ok(())
    } else {
        Err("invalid variable name inside `${…}`: use letters, digits and `_` (write `$${` for a literal `${`)".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Result<Option<String>, String> {
        Ok(match name {
            "HOST" => Some("example.com".into()),
            "TOKEN" => Some("s3cr3t: with colon\nand newline".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        })
    }

    #[test]
    fn a_variable_is_replaced_by_its_value() {
        let out = interpolate_with("https://${HOST}/hook", env).unwrap();
        assert_eq!(out, "https://example.com/hook");
    }

    #[test]
    fn a_value_with_a_colon_and_a_newline_is_taken_verbatim() {
        let out = interpolate_with("Bearer ${TOKEN}", env).unwrap();
        assert_eq!(out, "Bearer s3cr3t: with colon\nand newline");
    }

    #[test]
    fn an_unset_variable_is_an_error_naming_it() {
        let err = interpolate_with("x ${NOPE} y", env).unwrap_err();
        assert!(err.contains("`NOPE` is not set"), "{err}");
    }

    #[test]
    fn a_set_but_empty_variable_is_the_empty_string() {
        assert_eq!(interpolate_with("a${EMPTY}b", env).unwrap(), "ab");
    }

    #[test]
    fn a_double_dollar_brace_is_a_literal_dollar_brace() {
        let out = interpolate_with("$${HOST} and ${HOST}", env).unwrap();
        assert_eq!(out, "${HOST} and example.com");
    }

    #[test]
    fn a_lone_dollar_is_kept() {
        assert_eq!(interpolate_with("cost $5 $", env).unwrap(), "cost $5 $");
    }

    #[test]
    fn an_unterminated_reference_is_an_error() {
        let err = interpolate_with("${HOST", env).unwrap_err();
        assert!(err.contains("unterminated"), "{err}");
    }

    #[test]
    fn an_invalid_variable_name_is_an_error() {
        assert!(interpolate_with("${}", env).is_err());
        assert!(interpolate_with("${1X}", env).is_err());
        assert!(interpolate_with("${A-B}", env).is_err());
    }

    #[test]
    fn the_referenced_variables_are_listed_and_literal_ones_are_not() {
        assert_eq!(referenced("a ${X} $${Y} ${Z_1}"), ["X", "Z_1"]);
        assert!(referenced("no reference $5").is_empty());
    }

    #[test]
    fn an_interpolated_value_is_not_interpolated_again() {
        let lookup = |_: &str| Ok(Some("${HOST}".to_string()));
        assert_eq!(interpolate_with("${X}", lookup).unwrap(), "${HOST}");
    }
}
