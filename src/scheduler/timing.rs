//! When a schedule fires, in its job's timezone: pure functions over croner, the parser
//! tokio-cron-scheduler uses (configured the same way by [`crate::config::schedule_parser`]).

use std::time::Duration;

use chrono::{DateTime, Offset, SubsecRound, TimeZone, Utc};
use chrono_tz::Tz;
use croner::Cron;

/// A tick later than this after the occurrence it stands for is not taken for it: it is the
/// mark of a schedule computed with a stale UTC offset (tokio-cron-scheduler fixes the offset
/// when a job is registered; see [`offset_seconds`]), or of a process that was frozen.
pub const MAX_FIRE_LAG: Duration = Duration::from_secs(10 * 60);

/// Parses a `schedule` (6 fields with seconds, an optional 7th for the year).
pub fn parse(schedule: &str) -> Result<Cron, String> {
    crate::config::schedule_parser()
        .parse(schedule)
        .map_err(|e| format!("invalid schedule `{schedule}`: {e}"))
}

/// The latest occurrence at or before `now`, in `tz`: the fire a tick at `now` stands for, or
/// the last one a stopped daemon missed.
pub fn last_fire(cron: &Cron, tz: Tz, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let now = now.trunc_subsecs(0).with_timezone(&tz);
    cron.find_previous_occurrence(&now, true)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// The first occurrence after `now`, in `tz`.
pub fn next_fire(cron: &Cron, tz: Tz, now: DateTime<Utc>) -> Option<DateTime<Tz>> {
    cron.find_next_occurrence(&now.trunc_subsecs(0).with_timezone(&tz), false)
        .ok()
}

/// The fire a tick at `now` stands for, if the tick is not too late for it ([`MAX_FIRE_LAG`]).
pub fn fire_of_tick(cron: &Cron, tz: Tz, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let fire = last_fire(cron, tz, now)?;
    let lag = (now - fire).to_std().unwrap_or_default();
    (lag <= MAX_FIRE_LAG).then_some(fire)
}

/// The UTC offset of `tz` at `now`, in seconds. tokio-cron-scheduler computes a job's ticks
/// with the offset its timezone had at registration; the scheduler re-registers a job when this
/// changes (a daylight-saving switch).
pub fn offset_seconds(tz: Tz, now: DateTime<Utc>) -> i32 {
    tz.offset_from_utc_datetime(&now.naive_utc())
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
    fn a_tick_at_the_fire_second_stands_for_that_fire() {
        let cron = parse("* * * * * *").unwrap();
        let now = utc("2026-10-15T04:00:07.400Z");

        assert_eq!(
            fire_of_tick(&cron, Tz::UTC, now),
            Some(utc("2026-10-15T04:00:07Z"))
        );
    }

    #[test]
    fn a_tick_an_hour_off_the_schedule_stands_for_no_fire() {
        let cron = parse("0 30 2 * * *").unwrap();
        let tz: Tz = "America/New_York".parse().unwrap();

        // 02:30 EST computed with a stale offset fires at 03:30 EDT after the spring switch.
        let tick = utc("2026-03-08T07:30:00Z");

        assert_eq!(fire_of_tick(&cron, tz, tick), None);
    }

    #[test]
    fn the_next_fire_is_after_now_in_the_job_timezone() {
        let cron = parse("0 0 7 * * *").unwrap();
        let tz: Tz = "America/Sao_Paulo".parse().unwrap();

        let next = next_fire(&cron, tz, utc("2026-10-15T10:00:00Z")).unwrap();

        assert_eq!(next.to_rfc3339(), "2026-10-16T07:00:00-03:00");
    }

    #[test]
    fn the_offset_changes_across_a_daylight_saving_switch() {
        let tz: Tz = "America/New_York".parse().unwrap();

        let before = offset_seconds(tz, utc("2026-03-08T06:00:00Z"));
        let after = offset_seconds(tz, utc("2026-03-08T08:00:00Z"));

        assert_eq!((before, after), (-5 * 3600, -4 * 3600));
    }
}
