//! An SMTP URL (lettre's form) checked before lettre sees it: each mistake named by the part at
//! fault and never quoting the URL, credentials in clear off this machine told apart, and the URL
//! shown only as `scheme://host:port`.

/// What lettre takes from an SMTP URL, checked before lettre sees it, so that each mistake gets a
/// reason naming the part at fault and never quoting the URL. A parameter lettre would ignore is
/// refused: `tsl=required` must not mean "no TLS".
pub(super) fn check_smtp_url(url: &str) -> Result<url::Url, String> {
    let invalid = |why: &str| why.to_string();
    // url's parse errors are fixed descriptions ("invalid port number"), never the input.
    let parsed = url::Url::parse(url).map_err(|e| invalid(&format!("it does not parse ({e})")))?;
    if !matches!(parsed.scheme(), "smtp" | "smtps") {
        return Err(invalid("the scheme must be `smtp` or `smtps`"));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(invalid("it has no host"));
    }
    for (name, value) in parsed.query_pairs() {
        let known = match &*name {
            "tls" => matches!(&*value, "required" | "opportunistic"),
            "allow_insecure" => matches!(&*value, "true" | "false"),
            _ => {
                return Err(invalid(
                    "it has a parameter other than `tls` and `allow_insecure` (not shown)",
                ))
            }
        };
        if !known {
            let expected = match &*name {
                "tls" => "`required` or `opportunistic`",
                _ => "`true` or `false`",
            };
            return Err(invalid(&format!(
                "the `{name}` parameter must be {expected} (the value given is not shown)"
            )));
        }
    }
    Ok(parsed)
}

/// Whether lettre would `AUTH` (a password in the URL, or `env_credentials`) without TLS to a
/// host off this machine: `smtp://` without `tls=required`.
pub(super) fn in_clear(url: &url::Url, env_credentials: bool) -> bool {
    let tls_required = url.scheme() == "smtps"
        || url
            .query_pairs()
            .any(|(name, value)| name == "tls" && value == "required");
    let credentials = url.password().is_some() || env_credentials;
    credentials
        && !tls_required
        && !url
            .host_str()
            .is_some_and(replay_ledger_core::config::is_loopback_host)
}

/// `allow_insecure=true` in the URL's query.
pub(super) fn allows_insecure(url: &url::Url) -> bool {
    url.query_pairs()
        .any(|(name, value)| name == "allow_insecure" && value == "true")
}

/// `scheme://host:port` of an SMTP URL, without credentials, path or query.
pub(super) fn redacted(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(u) => format!(
            "{}://{}{}",
            u.scheme(),
            u.host_str().unwrap_or(""),
            u.port().map(|p| format!(":{p}")).unwrap_or_default()
        ),
        Err(_) => "smtp://(invalid)".into(),
    }
}
