//! A moment of history as people write it: an RFC 3339 instant, or `YYYY-MM-DD[ HH:MM[:SS]]` in a
//! timezone, or `now`. "As of" a moment takes the events that occurred at or before it
//! (`ocorrido_em <= moment`), so a bare day means the close of that day: its last microsecond
//! (PostgreSQL's resolution), and `--as-of 2026-10-31` is "the table at the close of October".

use chrono::{DateTime, Duration, NaiveDate, NaiveDateTime, TimeZone, Utc};
use chrono_tz::Tz;

/// The instant `text` names, in `timezone` when it carries no offset; refused when PostgreSQL's
/// `timestamptz` cannot hold it (before 4713-11-24 BC), so a command says so before it writes
/// anything.
pub fn parse_moment(text: &str, timezone: Tz, now: DateTime<Utc>) -> Result<DateTime<Utc>, String> {
    let at = parse_unbounded(text, timezone, now)?;
    // PostgreSQL's earliest timestamptz, 4713-11-24 00:00 BC (proleptic year -4712); its latest
    // (294276 AD) lies beyond any instant chrono holds.
    let earliest = NaiveDate::from_ymd_opt(-4712, 11, 24)
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|d| Utc.from_utc_datetime(&d));
    if earliest.is_some_and(|earliest| at < earliest) {
        return Err(format!(
            "{:?} is before the earliest moment PostgreSQL holds (4713-11-24 BC)",
            text.trim()
        ));
    }
    Ok(at)
}

fn parse_unbounded(text: &str, timezone: Tz, now: DateTime<Utc>) -> Result<DateTime<Utc>, String> {
    let text = text.trim();
    if text == "now" {
        return Ok(now);
    }
    if let Ok(at) = DateTime::parse_from_rfc3339(text) {
        return Ok(at.with_timezone(&Utc));
    }
    if let Ok(day) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        let next = day
            .succ_opt()
            .ok_or_else(|| format!("{text:?} is past the last day there is"))?;
        return Ok(
            replay_ledger_core::config::day_start(timezone, next) - Duration::microseconds(1)
        );
    }
    let local = [
        "%Y-%m-%d %H:%M",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%dT%H:%M:%S",
    ]
    .iter()
    .find_map(|f| NaiveDateTime::parse_from_str(text, f).ok())
    .ok_or_else(|| {
        format!(
            "{text:?} is not a moment: write an RFC 3339 instant (2026-10-31T23:59:59-03:00), \
                 YYYY-MM-DD (the close of that day), YYYY-MM-DD HH:MM, or now"
        )
    })?;
    timezone
        .from_local_datetime(&local)
        .earliest()
        .map(|at| at.with_timezone(&Utc))
        .ok_or_else(|| {
            format!(
                "{text:?} does not exist in {} (a clock change)",
                timezone.name()
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_moment_before_postgresqls_earliest_is_refused() {
        let now = Utc::now();
        let said = parse_moment("-262143-01-01", chrono_tz::UTC, now).unwrap_err();
        assert!(said.contains("earliest moment PostgreSQL holds"), "{said}");
        assert!(parse_moment("-4712-11-25", chrono_tz::UTC, now).is_ok());
    }

    fn utc(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .unwrap()
            .with_timezone(&Utc)
    }

    #[test]
    fn a_bare_day_is_the_last_microsecond_of_that_day_in_the_timezone() {
        let sp: Tz = "America/Sao_Paulo".parse().unwrap();
        let at = parse_moment("2026-10-31", sp, Utc::now()).unwrap();
        assert_eq!(at, utc("2026-11-01T02:59:59.999999Z"));
    }

    #[test]
    fn an_instant_with_an_offset_ignores_the_timezone() {
        let sp: Tz = "America/Sao_Paulo".parse().unwrap();
        let at = parse_moment("2026-10-14T10:00:00Z", sp, Utc::now()).unwrap();
        assert_eq!(at, utc("2026-10-14T10:00:00Z"));
    }

    #[test]
    fn a_local_time_is_read_in_the_timezone() {
        let sp: Tz = "America/Sao_Paulo".parse().unwrap();
        let at = parse_moment("2026-10-14 09:30", sp, Utc::now()).unwrap();
        assert_eq!(at, utc("2026-10-14T12:30:00Z"));
    }

    #[test]
    fn anything_else_says_how_to_write_a_moment() {
        let err = parse_moment("yesterday", Tz::UTC, Utc::now()).unwrap_err();
        assert!(err.contains("YYYY-MM-DD"), "{err}");
    }
}
