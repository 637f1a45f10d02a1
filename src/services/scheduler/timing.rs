//! When a schedule fires, in its job's timezone: pure functions from a schedule, a timezone and an
//! instant to fire instants. Instants are UTC, so the two passes of a repeated hour are two
//! distinct instants. Which wall-clock times match is croner's (configured by
//! [`replay_ledger_core::config::schedule_parser`]); what a wall-clock time means on a daylight-saving switch
//! is decided here, by Vixie cron's rule:
//!
//! - a schedule whose **hour field is `*` or a step** (`*/2`, `1/3`, `8-18/2`) fires at every
//!   instant whose wall-clock time matches: in both passes of a repeated hour, and not at all in
//!   a spring gap (those times do not exist);
//! - a schedule with a **fixed hour** fires once in a repeated hour, in its first pass; a fixed
//!   time inside a spring gap fires just after the gap, in its first minute, at the time's own
//!   second, once (02:30:15 in a 02:00 → 03:00 gap fires at 03:00:15), as Vixie cron runs the
//!   jobs of skipped times right after the jump.
//!
//! [`next_fire_after`] is the one definition of the set of fire instants; [`last_fire`] and
//! [`next_fire`] are derived from it, so the daemon, its catch-up and `status` agree.

use chrono::{DateTime, Duration, Offset, SubsecRound, TimeZone, Timelike, Utc};
use chrono_tz::Tz;
use croner::Cron;

/// How far before `after` the search for offset switches starts: a switch this long ago can still
/// place a fire after `after` (a spring gap's shifted fires, a repeated hour's second pass). The
/// longest switches in tzdata are a day (Pacific/Apia skipped 2011-12-30).
const LOOKBACK: Duration = Duration::hours(26);
/// Offsets are probed this far apart when looking for a switch: no zone switches twice within it.
const PROBE: Duration = Duration::hours(6);
/// [`last_fire`] looks this far back at most (a schedule may fire only on 29 February).
const LAST_FIRE_HORIZON: Duration = Duration::days(4 * 366 + 1);

/// Parses a `schedule` (6 fields with seconds, an optional 7th for the year).
pub fn parse(schedule: &str) -> Result<Cron, String> {
    replay_ledger_core::config::schedule_parser()
        .parse(schedule)
        .map_err(|e| format!("invalid schedule `{schedule}`: {e}"))
}

/// The first fire strictly after `after`, by the rule of the module doc; `None` when the schedule
/// never fires again.
pub fn next_fire_after(cron: &Cron, tz: Tz, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let after = after.trunc_subsecs(0);
    let start = after - LOOKBACK;
    let mut span = Span {
        start,
        offset: offset_at(tz, start),
        before: None,
    };
    loop {
        let in_gap = span.gap_fire(cron, after);
        let plain = span.plain_fire(cron, after);
        let end = next_switch(tz, span.start, plain.unwrap_or(after + LOOKBACK));
        let plain = plain.filter(|t| end.is_none_or(|end| *t < end));
        let first = match (in_gap, plain) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if first.is_some() {
            return first;
        }
        let end = end?;
        span = Span {
            start: end,
            offset: offset_at(tz, end),
            before: Some(span.offset),
        };
    }
}

/// The latest fire at or before `at`: the one a daemon stopped at `at` missed last.
pub fn last_fire(cron: &Cron, tz: Tz, at: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let at = at.trunc_subsecs(0);
    let fires_by_at =
        |from: DateTime<Utc>| next_fire_after(cron, tz, from).is_some_and(|t| t <= at);
    // Widen the look back until a fire is in (lo, at], then narrow to the second before it.
    let mut back = Duration::seconds(1);
    let mut lo = at - back;
    while !fires_by_at(lo) {
        back = back * 2;
        if back > LAST_FIRE_HORIZON {
            return None;
        }
        lo = at - back;
    }
    let mut hi = at;
    while hi - lo > Duration::seconds(1) {
        let mid = lo + Duration::seconds((hi - lo).num_seconds() / 2);
        if fires_by_at(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    next_fire_after(cron, tz, lo)
}

/// The first fire after `now`, in `tz` (what `status` shows).
pub fn next_fire(cron: &Cron, tz: Tz, now: DateTime<Utc>) -> Option<DateTime<Tz>> {
    next_fire_after(cron, tz, now).map(|t| t.with_timezone(&tz))
}

/// Vixie cron's split: `true` when the hour field is `*` or a step, so the schedule follows the
/// wall clock through both passes of a repeated hour; `false` for a fixed hour (a list or range
/// of hours too).
fn hour_is_wild(cron: &Cron) -> bool {
    let hours = &cron.pattern.hours;
    hours.from_wildcard || hours.step > 1
}

/// A stretch of time from `start` on with one UTC offset, up to the next switch; `before` is the
/// offset before `start` when `start` is a switch.
struct Span {
    start: DateTime<Utc>,
    offset: i32,
    before: Option<i32>,
}

impl Span {
    /// The first fire after `after` at a wall-clock time this span shows (for a fixed hour, not
    /// one the span before already showed).
    fn plain_fire(&self, cron: &Cron, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let mut from =
            wall(self.start, self.offset).max(wall(after, self.offset) + Duration::seconds(1));
        if let Some(before) = self
            .before
            .filter(|b| *b > self.offset && !hour_is_wild(cron))
        {
            from = from.max(wall(self.start, before));
        }
        first_match_from(cron, from).map(|w| w - Duration::seconds(self.offset.into()))
    }

    /// For a fixed hour: the first fire after `after` for a wall-clock time the switch at `start`
    /// skipped. As Vixie cron runs a job whose time the clock jumped over just after the jump,
    /// such a time fires in the first minute after the gap, at its own second (02:30:15 in a
    /// 02:00 → 03:00 gap fires at 03:00:15); several skipped times of one second fire once.
    fn gap_fire(&self, cron: &Cron, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let before = self
            .before
            .filter(|b| *b < self.offset && !hour_is_wild(cron))?;
        let gap_end = wall(self.start, self.offset);
        let mut from = wall(self.start, before);
        let mut first: Option<DateTime<Utc>> = None;
        while let Some(skipped) = first_match_from(cron, from).filter(|w| *w < gap_end) {
            let fire = self.start + Duration::seconds(skipped.second().into());
            if fire > after && first.is_none_or(|f| fire < f) {
                first = Some(fire);
            }
            if first == Some(self.start) || first.is_some_and(|f| f <= after) {
                break;
            }
            from = skipped + Duration::seconds(1);
        }
        first
    }
}

/// The wall-clock time of `t` at `offset`, written as a UTC value (croner matches it as is).
fn wall(t: DateTime<Utc>, offset: i32) -> DateTime<Utc> {
    t + Duration::seconds(offset.into())
}

/// The first wall-clock time at or after `from` that the schedule matches.
fn first_match_from(cron: &Cron, from: DateTime<Utc>) -> Option<DateTime<Utc>> {
    cron.find_next_occurrence(&from, true).ok()
}

/// The first instant in (`from`, `until`] whose UTC offset differs from `from`'s.
fn next_switch(tz: Tz, from: DateTime<Utc>, until: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let offset = offset_at(tz, from);
    let mut lo = from;
    while lo < until {
        let mut hi = (lo + PROBE).min(until);
        if offset_at(tz, hi) != offset {
            while hi - lo > Duration::seconds(1) {
                let mid = lo + Duration::seconds((hi - lo).num_seconds() / 2);
                if offset_at(tz, mid) == offset {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            return Some(hi);
        }
        lo = hi;
    }
    None
}

/// The UTC offset of `tz` at `t`, in seconds.
fn offset_at(tz: Tz, t: DateTime<Utc>) -> i32 {
    tz.offset_from_utc_datetime(&t.naive_utc())
        .fix()
        .local_minus_utc()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn the_last_fire_of_a_nightly_schedule_is_found_in_the_job_timezone() {
        let cron = parse("0 30 2 * * *").unwrap();
        let tz: Tz = "America/Sao_Paulo".parse().unwrap();

        // 2026-10-15 04:00 UTC = 01:00 in São Paulo: tonight's 02:30 has not come yet.
        let last = last_fire(&cron, tz, utc("2026-10-15T04:00:00Z")).unwrap();

        assert_eq!(last, utc("2026-10-14T05:30:00Z"));
    }

    #[test]
    fn the_next_fire_is_after_now_in_the_job_timezone() {
        let cron = parse("0 0 7 * * *").unwrap();
        let tz: Tz = "America/Sao_Paulo".parse().unwrap();

        let next = next_fire(&cron, tz, utc("2026-10-15T10:00:00Z")).unwrap();

        assert_eq!(next.to_rfc3339(), "2026-10-16T07:00:00-03:00");
    }

    #[test]
    fn a_fire_is_strictly_after_a_sub_second_instant() {
        let cron = parse("* * * * * *").unwrap();

        let next = next_fire_after(&cron, Tz::UTC, utc("2026-10-15T04:00:07.400Z"));

        assert_eq!(next, Some(utc("2026-10-15T04:00:08Z")));
    }

    #[test]
    fn a_schedule_whose_years_are_over_never_fires_again() {
        let cron = parse("0 0 0 1 1 * 2020").unwrap();

        assert_eq!(
            next_fire_after(&cron, Tz::UTC, utc("2026-01-01T00:00:00Z")),
            None
        );
        assert_eq!(last_fire(&cron, Tz::UTC, utc("2026-01-01T00:00:00Z")), None);
    }

    #[test]
    fn a_yearly_fire_a_year_away_is_found_in_its_summer_offset() {
        let cron = parse("0 0 12 1 7 *").unwrap();
        let tz: Tz = "Europe/Berlin".parse().unwrap();

        let next = next_fire_after(&cron, tz, utc("2026-07-01T10:00:00Z"));

        assert_eq!(next, Some(utc("2027-07-01T10:00:00Z")));
    }

    #[test]
    fn the_switches_of_berlin_are_found_to_the_second() {
        let tz: Tz = "Europe/Berlin".parse().unwrap();

        let spring = next_switch(tz, utc("2026-03-01T00:00:00Z"), utc("2026-06-01T00:00:00Z"));
        let autumn = next_switch(tz, utc("2026-06-01T00:00:00Z"), utc("2026-12-01T00:00:00Z"));

        assert_eq!(spring, Some(utc("2026-03-29T01:00:00Z")));
        assert_eq!(autumn, Some(utc("2026-10-25T01:00:00Z")));
    }
}
