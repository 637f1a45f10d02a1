//! Checked scalar values: each newtype parses and checks one YAML scalar inside its visitor, so an
//! error carries the scalar's line and column. Free-form values are `${VAR}`-interpolated; names
//! and identifiers are taken verbatim.

use std::time::Duration;

use chrono::{DateTime, FixedOffset};
use chrono_tz::Tz;
use secrecy::SecretString;
use serde::{Deserialize, Deserializer};

use super::context;
use super::de::{checked_f64, checked_u64, interpolated_str, plain_str, secret_str, Check};

/// Implements `Deserialize` for a newtype from a string scalar and a `fn(String) -> Check<T>`.
macro_rules! from_str_scalar {
    ($ty:ident, $how:ident, $expecting:literal, $parse:expr) => {
        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                $how(d, $expecting, $parse).map($ty)
            }
        }
    };
}

/// A job's `name`: `[a-z0-9._-]+`, unique in its directory.
#[derive(Debug, Clone)]
pub(super) struct JobName(pub String);
from_str_scalar!(JobName, plain_str, "a job name ([a-z0-9._-]+)", |s| {
    check_identifier(&s, "job name", "it is the execution id")?;
    context::claim_job_name(&s)?;
    Ok(s)
});

/// An event type handed to the domain, e.g. `pedido.pago`.
#[derive(Debug, Clone)]
pub(super) struct EventType(pub String);
from_str_scalar!(EventType, plain_str, "an event type", |s| {
    if s.trim().is_empty() {
        return Err("an event type cannot be empty".into());
    }
    Ok(s)
});

/// `rule`: the name of a commission rule (`crate::domain::rules`).
#[derive(Debug, Clone, Copy)]
pub(super) struct RuleName(pub crate::domain::Rule);
from_str_scalar!(RuleName, plain_str, "a commission rule's name", |s| {
    crate::domain::Rule::from_name(&s).ok_or_else(|| {
        let names: Vec<&str> = crate::domain::Rule::ALL.iter().map(|r| r.name()).collect();
        format!("unknown rule `{s}`: the rules are {}", names.join(", "))
    })
});

/// `schedule`: cron with seconds, checked by the parser the scheduler uses.
#[derive(Debug, Clone)]
pub(super) struct Schedule(pub String);
from_str_scalar!(
    Schedule,
    interpolated_str,
    "a cron schedule with seconds (`sec min hour day month weekday`, e.g. \"0 30 2 * * *\")",
    |s| {
        super::schedule_parser()
        .parse(&s)
        .map_err(|e| format!("invalid schedule `{s}`: {e} (cron with seconds: `sec min hour day month weekday`, e.g. \"0 30 2 * * *\")"))?;
        Ok(s)
    }
);

/// `timezone`: an IANA name.
#[derive(Debug, Clone, Copy)]
pub(super) struct Zone(pub Tz);
from_str_scalar!(Zone, interpolated_str, "an IANA timezone name", |s| {
    s.parse::<Tz>().map_err(|_| {
        format!("unknown timezone `{s}` (an IANA name such as `America/Sao_Paulo` or `UTC`)")
    })
});

/// A webhook's `timeout`: a positive duration of at most [`MAX_TIMEOUT`].
#[derive(Debug, Clone, Copy)]
pub(super) struct Timeout(pub Duration);
from_str_scalar!(
    Timeout,
    interpolated_str,
    "a duration from 1ns to 1h such as `10s`",
    |s| parse_bounded(&s, "timeout", MAX_TIMEOUT, "a webhook call takes seconds")
);

/// `dedup_window`: a positive duration of at most [`MAX_DEDUP_WINDOW`].
#[derive(Debug, Clone, Copy)]
pub(super) struct DedupWindow(pub Duration);
from_str_scalar!(
    DedupWindow,
    interpolated_str,
    "a duration from 1ns to 10 years such as `24h`",
    |s| parse_bounded(
        &s,
        "dedup_window",
        MAX_DEDUP_WINDOW,
        "leave it out for a provider that never forgets a key"
    )
);

/// An RFC 3339 timestamp with an explicit offset.
#[derive(Debug, Clone, Copy)]
pub(super) struct Timestamp(pub DateTime<FixedOffset>);
from_str_scalar!(
    Timestamp,
    interpolated_str,
    "an RFC 3339 timestamp with an offset (e.g. 2026-10-14T00:00:00-03:00)",
    |s| {
        DateTime::parse_from_rfc3339(s.trim()).map_err(|e| {
        format!("invalid timestamp `{s}`: {e} (RFC 3339 with an offset, e.g. 2026-10-14T00:00:00-03:00)")
    })
    }
);

/// A webhook URL: `http` or `https`, with a host. Never echoed in messages: it may hold a token.
#[derive(Debug, Clone)]
pub(super) struct HttpUrl(pub reqwest::Url);
from_str_scalar!(
    HttpUrl,
    interpolated_str,
    "an http(s) URL with a host",
    |s| { parse_http_url(&s) }
);

/// An e-mail address (`local@domain` or `Name <local@domain>`).
#[derive(Debug, Clone)]
pub(super) struct Email(pub String);
from_str_scalar!(
    Email,
    interpolated_str,
    "an e-mail address (`local@domain` or `Name <local@domain>`)",
    |s| {
        check_email(&s)?;
        Ok(s.trim().to_owned())
    }
);

/// A header value: interpolated, then held as a secret. Never echoed in messages.
#[derive(Debug, Clone)]
pub(super) struct HeaderValue(pub SecretString);
from_str_scalar!(
    HeaderValue,
    secret_str,
    "a header value (no newline or other control character)",
    |s| {
        if reqwest::header::HeaderValue::from_str(&s).is_err() {
            return Err("header value is not a valid HTTP header value (it holds a newline or another control character)".into());
        }
        Ok(SecretString::from(s))
    }
);

/// `batch_size`: 1..=100000.
#[derive(Debug, Clone, Copy)]
pub(super) struct BatchSize(pub u32);
impl<'de> Deserialize<'de> for BatchSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        checked_u64(d, "an integer from 1 to 100000", |n| match n {
            1..=100_000 => Ok(BatchSize(n as u32)),
            _ => Err(format!("batch_size must be from 1 to 100000, got {n}")),
        })
    }
}

/// `partitions`: 1 to 1024.
#[derive(Debug, Clone, Copy)]
pub(super) struct Partitions(pub u32);
impl<'de> Deserialize<'de> for Partitions {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        checked_u64(d, "an integer from 1 to 1024", |n| match n {
            1..=1024 => Ok(Partitions(n as u32)),
            _ => Err(format!("partitions must be from 1 to 1024, got {n}")),
        })
    }
}

/// `concurrency`: 1 to [`MAX_CONCURRENCY`].
#[derive(Debug, Clone, Copy)]
pub(super) struct Concurrency(pub usize);
impl<'de> Deserialize<'de> for Concurrency {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        checked_u64(d, "an integer from 1 to 4096", |n| {
            match usize::try_from(n) {
            Ok(c @ 1..=MAX_CONCURRENCY) => Ok(Concurrency(c)),
            _ => Err(format!(
                "concurrency must be from 1 to {MAX_CONCURRENCY}, got {n} (calls of one type in flight at once)"
            )),
        }
        })
    }
}

/// `breaker_after`: 1 to [`MAX_BREAKER_AFTER`] consecutive failures of a type before its calls
/// stop for the rest of the run.
#[derive(Debug, Clone, Copy)]
pub(super) struct BreakerAfter(pub u32);
pub(super) const MAX_BREAKER_AFTER: u64 = 1_000_000;
impl<'de> Deserialize<'de> for BreakerAfter {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        checked_u64(d, "an integer from 1 to 1000000", |n| {
            match n {
            1..=MAX_BREAKER_AFTER => Ok(BreakerAfter(n as u32)),
            _ => Err(format!(
                "breaker_after must be from 1 to {MAX_BREAKER_AFTER}, got {n} (consecutive failures of the type before its calls stop)"
            )),
        }
        })
    }
}

/// `breaker_budget`: how long the type's breaker may stay open (its calls paused, probed) before
/// the run gives up; 1 ns to 24 h such as `5m`.
#[derive(Debug, Clone, Copy)]
pub(super) struct BreakerBudget(pub Duration);
pub(super) const MAX_BREAKER_BUDGET: Duration = Duration::from_secs(24 * 3600);
from_str_scalar!(
    BreakerBudget,
    interpolated_str,
    "a duration from 1ns to 24h such as `5m`",
    |s| parse_bounded(
        &s,
        "breaker_budget",
        MAX_BREAKER_BUDGET,
        "a longer outage is better ridden out by the next run"
    )
);

/// `rate_per_second`: a finite number from [`MIN_RATE`] (one call every ~11.6 days; a smaller
/// one would make the interval between calls overflow a `Duration`) to [`MAX_RATE`].
#[derive(Debug, Clone, Copy)]
pub(super) struct Rate(pub f64);
impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        checked_f64(d, "a number from 0.000001 to 100000", |r| {
            if r.is_finite() && (MIN_RATE..=MAX_RATE).contains(&r) {
                Ok(Rate(r))
            } else {
                let got = if (1e-6..1e7).contains(&r.abs()) {
                    r.to_string()
                } else {
                    format!("{r:e}")
                };
                Err(format!(
                    "rate_per_second must be from 0.000001 (one call every 11.6 days) to 100000, got {got} (leave it out for no limit)"
                ))
            }
        })
    }
}

/// `stale_after`: a duration above every webhook timeout of the effect catalog, of at most
/// [`MAX_STALE_AFTER`].
#[derive(Debug, Clone, Copy)]
pub(super) struct StaleAfter(pub Duration);
from_str_scalar!(
    StaleAfter,
    interpolated_str,
    "a duration from 1ns to 30 days such as `5m`, above every webhook timeout",
    |s| {
        let stale_after = parse_stale_after(&s)?;
        context::check_stale_after(stale_after)?;
        Ok(stale_after)
    }
);

/// `lookback`: whole days, `1d` to `3660d` (`30d`: the 30 days before today).
#[derive(Debug, Clone, Copy)]
pub(super) struct Lookback(pub u32);
from_str_scalar!(
    Lookback,
    interpolated_str,
    "a number of days from 1d to 3660d, such as `30d`",
    |s| {
        let days = s
            .strip_suffix('d')
            .and_then(|n| n.parse::<u32>().ok())
            .filter(|n| (1..=3660).contains(n));
        days.ok_or_else(|| {
            format!("lookback must be whole days from 1d to 3660d, such as `30d`, got {s:?}")
        })
    }
);

/// `retry.attempts`: tries of one call, the first included: 1 (no retry) to
/// [`MAX_RETRY_ATTEMPTS`].
#[derive(Debug, Clone, Copy)]
pub(super) struct RetryAttempts(pub u32);
impl<'de> Deserialize<'de> for RetryAttempts {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        checked_u64(d, "an integer from 1 to 100", |n| {
            match u32::try_from(n) {
            Ok(a @ 1..=MAX_RETRY_ATTEMPTS) => Ok(RetryAttempts(a)),
            _ => Err(format!(
                "retry attempts must be from 1 to {MAX_RETRY_ATTEMPTS}, got {n} (tries of one call, the first included; 1 = no retry)"
            )),
        }
        })
    }
}

/// `retry.backoff`: the pause before the first retry, doubling after each; at most
/// [`MAX_RETRY_BACKOFF`].
#[derive(Debug, Clone, Copy)]
pub(super) struct RetryBackoff(pub Duration);
from_str_scalar!(
    RetryBackoff,
    interpolated_str,
    "a duration from 1ns to 10m such as `1s`",
    |s| parse_bounded(
        &s,
        "retry backoff",
        MAX_RETRY_BACKOFF,
        "the pause before the first retry; it doubles up to max_backoff"
    )
);

/// `retry.max_backoff`: the longest pause between two tries, and the longest `Retry-After` a
/// provider's answer is waited out for; at most [`MAX_RETRY_MAX_BACKOFF`].
#[derive(Debug, Clone, Copy)]
pub(super) struct MaxBackoff(pub Duration);
from_str_scalar!(
    MaxBackoff,
    interpolated_str,
    "a duration from 1ns to 1h such as `30s`",
    |s| parse_bounded(
        &s,
        "retry max_backoff",
        MAX_RETRY_MAX_BACKOFF,
        "a longer pause holds the batch; the next run retries instead"
    )
);

/// The most tries of one call.
pub const MAX_RETRY_ATTEMPTS: u32 = 100;
/// The longest `retry.backoff`.
pub const MAX_RETRY_BACKOFF: Duration = Duration::from_secs(600);
/// The longest `retry.max_backoff`.
pub const MAX_RETRY_MAX_BACKOFF: Duration = Duration::from_secs(3600);

/// The most calls of one type in flight at once.
pub const MAX_CONCURRENCY: usize = 4096;
/// The fewest calls per second a limit may allow.
pub const MIN_RATE: f64 = 1e-6;
/// The most calls per second a limit may allow (more is "unlimited": leave it out).
pub const MAX_RATE: f64 = 100_000.0;
/// The longest webhook `timeout`.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(3600);
/// The longest `dedup_window`: ten of humantime's years (365.25 days).
pub const MAX_DEDUP_WINDOW: Duration = Duration::from_secs(10 * 31_557_600);
/// The longest `stale_after`.
pub const MAX_STALE_AFTER: Duration = Duration::from_secs(30 * 86_400);

/// A `stale_after` (of a sweep job, or `sweep --stale-after`): a positive duration of at most
/// [`MAX_STALE_AFTER`]. The bounds keep every interval bound into SQL within PostgreSQL's range.
pub fn parse_stale_after(s: &str) -> Result<Duration, String> {
    parse_bounded(
        s,
        "stale_after",
        MAX_STALE_AFTER,
        "a crashed call is settled within minutes",
    )
}

pub(super) fn check_identifier(s: &str, what: &str, why: &str) -> Check<()> {
    let ok = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "invalid {what} `{s}`: use lowercase letters, digits, `.`, `_` and `-` ({why})"
        ))
    }
}

pub(super) fn parse_duration(s: &str) -> Check<Duration> {
    let d = humantime::parse_duration(s.trim())
        .map_err(|e| format!("invalid duration `{s}`: {e} (e.g. `10s`, `5m`, `1h 30m`)"))?;
    if d.is_zero() {
        return Err(format!("duration `{s}` must be greater than zero"));
    }
    Ok(d)
}

/// A positive duration of at most `max`; `why` says why the bound is enough.
fn parse_bounded(s: &str, what: &str, max: Duration, why: &str) -> Check<Duration> {
    let d = parse_duration(s)?;
    if d > max {
        return Err(format!(
            "{what} must be at most {} ({why}), got `{}`",
            humantime::format_duration(max),
            s.trim()
        ));
    }
    Ok(d)
}

fn parse_http_url(s: &str) -> Check<reqwest::Url> {
    // The URL may carry a token: the messages below never include it.
    let url = reqwest::Url::parse(s.trim()).map_err(|e| format!("invalid webhook url: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "webhook url must be http or https, not `{}`",
            url.scheme()
        ));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err("webhook url has no host".into());
    }
    Ok(url)
}

fn check_email(s: &str) -> Check<()> {
    let s = s.trim();
    let address = match (s.rfind('<'), s.strip_suffix('>')) {
        (Some(open), Some(inner)) => &inner[open + 1..],
        _ => s,
    };
    check_address_length(address)?;
    let mut parts = address.split('@');
    let ok = match (parts.next(), parts.next(), parts.next()) {
        (Some(local), Some(domain), None) => dot_atom(local) && host_name(domain),
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "invalid e-mail address `{s}` (expected `local@domain` or `Name <local@domain>`)"
        ))
    }
}

/// RFC 5322's dot-atom, the local part every mail system takes as it is: ASCII letters, digits
/// and ``!#$%&'*+/=?^_`{|}~-``, in dot-separated non-empty atoms (no quoted string: `"fin"@x`
/// is refused, not guessed at).
fn dot_atom(local: &str) -> bool {
    let atext = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+/=?^_`{|}~-".contains(c);
    !local.is_empty()
        && local
            .split('.')
            .all(|atom| !atom.is_empty() && atom.chars().all(atext))
}

/// A host name as DNS has it: dot-separated labels of 1 to 63 letters, digits and inner hyphens,
/// at least two of them, no empty label (`.example`, `x..example`) and no trailing dot.
fn host_name(domain: &str) -> bool {
    let label = |l: &str| {
        (1..=63).contains(&l.len())
            && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    domain.split('.').count() >= 2 && domain.split('.').all(label)
}

/// RFC 5321's limits: a path of at most 254 characters, a local part of at most 64. A longer
/// address is refused without being quoted (it may be a megabyte).
fn check_address_length(address: &str) -> Check<()> {
    let local = address.rsplit_once('@').map_or(address, |(local, _)| local);
    if address.chars().count() > 254 {
        return Err(format!(
            "an e-mail address of {} characters: at most 254 are allowed",
            address.chars().count()
        ));
    }
    if local.chars().count() > 64 {
        return Err(format!(
            "an e-mail address whose part before `@` has {} characters: at most 64 are allowed",
            local.chars().count()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_addresses_are_dot_atoms_at_host_names() {
        for good in [
            "fin@x.example",
            "Finance <fin.ops+dia@mail.x.example>",
            "a_b@x-y.example",
            "\"Fin, Ops\" <fin@x.example>",
        ] {
            assert!(check_email(good).is_ok(), "{good}");
        }
        for bad in [
            "\"fin\"@x.example",
            "fin@.example",
            "fin@x..example",
            "fin@x.example.",
            "fin@localhost",
            ".fin@x.example",
            "f..in@x.example",
            "fin@-x.example",
            "fın@x.example",
            "Fin <fin@x.example",
        ] {
            assert!(check_email(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations_accept_humantime_forms_and_refuse_zero() {
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("1h 30m").unwrap(), Duration::from_secs(5400));
        assert!(parse_duration("0s")
            .unwrap_err()
            .contains("greater than zero"));
        assert!(parse_duration("10")
            .unwrap_err()
            .contains("invalid duration `10`"));
    }

    #[test]
    fn webhook_urls_must_be_http_and_are_never_echoed() {
        assert!(parse_http_url("https://example.com/hook").is_ok());
        let err = parse_http_url("ftp://user:hunter2@example.com/").unwrap_err();
        assert!(
            err.contains("http or https") && !err.contains("hunter2"),
            "{err}"
        );
        let err = parse_http_url("not a url hunter2").unwrap_err();
        assert!(!err.contains("hunter2"), "{err}");
    }

    #[test]
    fn email_addresses_need_one_at_sign_with_both_sides() {
        assert!(check_email("financeiro@example.com").is_ok());
        assert!(check_email("Finance <financeiro@example.com>").is_ok());
        for bad in [
            "financeiro",
            "@example.com",
            "financeiro@",
            "a@b@c",
            "a b@c",
        ] {
            assert!(check_email(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_address_over_254_characters_or_a_local_part_over_64_is_refused_unquoted() {
        let local_64 = "a".repeat(64);
        assert!(check_email(&format!("{local_64}@example.com")).is_ok());
        let err = check_email(&format!("a{local_64}@example.com")).unwrap_err();
        assert!(
            err.contains("at most 64") && !err.contains(&local_64),
            "{err}"
        );
        let domain = format!("{}.com", "d".repeat(250));
        let err = check_email(&format!("f@{domain}")).unwrap_err();
        assert!(
            err.contains("at most 254") && !err.contains(&domain),
            "{err}"
        );
    }

    #[test]
    fn identifiers_are_lowercase_letters_digits_dots_dashes_and_underscores() {
        assert!(check_identifier("replay-2026-10-14.v2_x", "job name", "").is_ok());
        assert!(check_identifier("Replay", "job name", "").is_err());
        assert!(check_identifier("a:b", "job name", "").is_err());
        assert!(check_identifier("", "job name", "").is_err());
    }
}
