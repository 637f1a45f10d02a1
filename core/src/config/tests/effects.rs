//! `effects.yaml`: defaults, required keys, limits, headers as secrets.

use std::time::Duration;

use secrecy::ExposeSecret;

use super::*;

#[test]
fn an_effect_type_gets_the_defaults() {
    let cat = effects("t:\n  webhook: { url: 'http://localhost:8080/x' }\n  idempotent: false\n")
        .unwrap();
    let t = &cat.types["t"];
    assert_eq!(
        (t.name.as_str(), t.idempotent, t.concurrency),
        ("t", false, 16)
    );
    assert_eq!(t.webhook.timeout, Duration::from_secs(10));
    assert_eq!((t.rate_per_second, t.dedup_window), (None, None));
    assert!(t.webhook.headers.is_empty());
}

#[test]
fn idempotent_has_no_default() {
    let err = effects("t:\n  webhook: { url: 'http://localhost/' }\n").unwrap_err();
    assert_eq!(err, "e.yaml:2:3: missing field `idempotent`");
}

#[test]
fn a_webhook_url_must_be_http_or_https() {
    let err =
        effects("t:\n  webhook: { url: 'ftp://example.com/' }\n  idempotent: true\n").unwrap_err();
    assert_eq!(
        err,
        "e.yaml:2:19: webhook url must be http or https, not `ftp`"
    );
}

#[test]
fn limits_must_be_positive() {
    let with = |kv: &str| {
        effects(&format!(
            "t:\n  webhook: {{ url: 'http://h/' }}\n  idempotent: true\n  {kv}\n"
        ))
    };
    assert!(with("concurrency: 0")
        .unwrap_err()
        .starts_with("e.yaml:4:16: concurrency must be from 1 to 4096"));
    assert!(with("rate_per_second: 0")
        .unwrap_err()
        .starts_with("e.yaml:4:20: rate_per_second must be from 0.000001"));
    assert!(with("dedup_window: 0s")
        .unwrap_err()
        .contains("greater than zero"));
    assert_eq!(
        with("rate_per_second: 2.5").unwrap().types["t"].rate_per_second,
        Some(2.5)
    );
}

#[test]
fn limits_have_an_upper_bound_refused_at_the_value() {
    let with = |kv: &str| {
        effects(&format!(
            "t:\n  webhook: {{ url: 'http://h/', timeout: 1h }}\n  idempotent: true\n  {kv}\n"
        ))
    };
    for (kv, expected) in [
        (
            "concurrency: 18446744073709551615",
            "e.yaml:4:16: concurrency must be from 1 to 4096, got 18446744073709551615",
        ),
        (
            "concurrency: 4097",
            "e.yaml:4:16: concurrency must be from 1 to 4096",
        ),
        (
            "rate_per_second: 1e300",
            "e.yaml:4:20: rate_per_second must be from 0.000001 (one call every 11.6 days) to 100000, got 1e300",
        ),
        (
            "dedup_window: 99999999999y",
            "e.yaml:4:17: dedup_window must be at most 10years",
        ),
        (
            "dedup_window: 11y",
            "e.yaml:4:17: dedup_window must be at most 10years",
        ),
    ] {
        let err = with(kv).unwrap_err();
        assert!(err.starts_with(expected), "{kv}: {err}");
    }
    let at_the_bounds =
        with("concurrency: 4096\n  rate_per_second: 100000\n  dedup_window: 10y").unwrap();
    let t = &at_the_bounds.types["t"];
    assert_eq!((t.concurrency, t.rate_per_second), (4096, Some(100_000.0)));
    assert_eq!(
        (t.webhook.timeout, t.dedup_window),
        (MAX_TIMEOUT, Some(MAX_DEDUP_WINDOW))
    );
}

#[test]
fn a_token_where_a_duration_belongs_is_named_by_its_variable_and_not_shown() {
    std::env::set_var("CONFIG_UNIT_TOKEN_45", "hunter2-token");
    let err = effects("t:\n  webhook: { url: 'http://h/', timeout: '${CONFIG_UNIT_TOKEN_45}' }\n  idempotent: true\n").unwrap_err();
    assert_eq!(
        err,
        "e.yaml:2:41: the value from `${CONFIG_UNIT_TOKEN_45}` is not valid here: expected a \
         duration from 1ns to 1h such as `10s` (the value is not shown: it comes from the environment)"
    );
}

#[test]
fn a_token_over_plain_http_off_the_machine_needs_allow_insecure() {
    let bearer = "headers: { Authorization: 'Bearer x' }";
    let err = effects(&format!(
        "t:\n  webhook: {{ url: 'http://h.example/', {bearer} }}\n  idempotent: true\n"
    ))
    .unwrap_err();
    assert!(
        err.starts_with("e.yaml:2:3: effect type `t` would send its credentials (a header, or user-info in the URL) in clear"),
        "{err}"
    );
    let allowed = effects(&format!(
        "t:\n  webhook: {{ url: 'http://h.example/', {bearer} }}\n  idempotent: true\n  allow_insecure: true\n"
    ));
    assert!(allowed.is_ok(), "{allowed:?}");
    let flow = effects("{ t: { webhook: { url: 'http://u:p@h.example/' }, idempotent: true } }")
        .unwrap_err();
    assert!(flow.starts_with("e.yaml:1:6: effect type `t`"), "{flow}");
}

#[test]
fn a_webhook_timeout_is_at_most_an_hour() {
    let err = effects("t:\n  webhook: { url: 'http://h/', timeout: 61m }\n  idempotent: true\n")
        .unwrap_err();
    assert!(
        err.starts_with("e.yaml:2:41: timeout must be at most 1h"),
        "{err}"
    );
}

#[test]
fn header_values_are_interpolated_and_never_shown_in_debug_output() {
    std::env::set_var("CONFIG_UNIT_TOKEN_43", "hunter2: not yaml");
    let cat = effects("t:\n  webhook:\n    url: 'https://h/path?token=abc'\n    headers: { Authorization: 'Bearer ${CONFIG_UNIT_TOKEN_43}' }\n  idempotent: true\n").unwrap();
    let (name, value) = &cat.types["t"].webhook.headers[0];
    assert_eq!(
        (name.as_str(), value.expose_secret()),
        ("Authorization", "Bearer hunter2: not yaml")
    );
    let debug = format!("{cat:?}");
    assert!(
        !debug.contains("hunter2") && !debug.contains("token=abc"),
        "{debug}"
    );
}

#[test]
fn a_header_value_is_never_quoted_in_an_error() {
    std::env::set_var("CONFIG_UNIT_TOKEN_44", "hunter2\nX: y");
    let newline = effects("t:\n  webhook:\n    url: 'http://h/'\n    headers: { A: '${CONFIG_UNIT_TOKEN_44}' }\n  idempotent: true\n").unwrap_err();
    assert!(
        newline.starts_with("e.yaml:4:19: the value from `${CONFIG_UNIT_TOKEN_44}` is not valid here: expected a header value")
            && !newline.contains("hunter2"),
        "{newline}"
    );
    let scalar = effects(
        "t:\n  webhook:\n    url: 'http://h/'\n    headers: 'Bearer hunter2'\n  idempotent: true\n",
    )
    .unwrap_err();
    assert!(
        scalar.starts_with("e.yaml:4:14: headers must be a mapping") && !scalar.contains("hunter2"),
        "{scalar}"
    );
}

#[test]
fn the_idempotency_key_header_cannot_be_overridden() {
    let err = effects("t:\n  webhook: { url: 'http://h/', headers: { idempotency-key: x } }\n  idempotent: true\n").unwrap_err();
    assert!(
        err.starts_with("e.yaml:2:43: the `Idempotency-Key` header is set by replay-ledger"),
        "{err}"
    );
}

#[test]
fn an_unknown_key_in_a_webhook_is_an_error() {
    let err = effects("t:\n  webhook: { url: 'http://h/', timout: 5s }\n  idempotent: true\n")
        .unwrap_err();
    assert!(
        err.starts_with(
            "e.yaml:2:32: unknown field `timout`, expected one of `url`, `timeout`, `headers`"
        ),
        "{err}"
    );
}

#[test]
fn an_effect_type_defined_twice_is_an_error() {
    let one = "t:\n  webhook: { url: 'http://h/' }\n  idempotent: true\n";
    let err = effects(&format!("{one}{one}")).unwrap_err();
    assert_eq!(err, "e.yaml:4:1: effect type `t` is defined twice");
}

#[test]
fn retry_defaults_ride_out_a_minute_long_outage() {
    let cat = effects("t:\n  webhook: { url: 'http://h/' }\n  idempotent: true\n").unwrap();
    let retry = cat.types["t"].retry;
    assert_eq!(retry.attempts, 8);
    let pauses: std::time::Duration = (2..=retry.attempts).map(|n| retry.delay(n)).sum();
    assert!(pauses >= Duration::from_secs(60), "{pauses:?}");
}

#[test]
fn a_partial_retry_takes_the_other_defaults_and_keeps_backoff_below_max() {
    let with = |retry: &str| {
        let text = format!(
            "t:\n  webhook: {{ url: 'http://h/' }}\n  idempotent: true\n  retry: {retry}\n"
        );
        effects(&text).map(|c| c.types["t"].retry)
    };
    let r = with("{ attempts: 3 }").unwrap();
    assert_eq!(
        (r.attempts, r.base, r.max),
        (3, Duration::from_secs(1), Duration::from_secs(30))
    );
    let r = with("{ backoff: 2m }").unwrap();
    assert_eq!(
        (r.base, r.max),
        (Duration::from_secs(120), Duration::from_secs(120))
    );
    let r = with("{ max_backoff: 100ms }").unwrap();
    assert_eq!(
        (r.base, r.max),
        (Duration::from_millis(100), Duration::from_millis(100))
    );
    assert!(with("{ attempt: 3 }")
        .unwrap_err()
        .contains("unknown field `attempt`"));
}

#[test]
fn a_non_idempotent_type_makes_one_try() {
    let cat = effects("t:\n  webhook: { url: 'http://h/' }\n  idempotent: false\n").unwrap();
    assert_eq!(cat.types["t"].retry.attempts, 1);
    let cat = effects(
        "t:\n  webhook: { url: 'http://h/' }\n  idempotent: false\n  retry: { attempts: 1 }\n",
    )
    .unwrap();
    assert_eq!(cat.types["t"].retry.attempts, 1);
}
