//! Daylight-saving switches, against a table written by hand: around both switches of
//! Europe/Berlin and America/New_York in 2026 and of America/Sao_Paulo in 2018/2019 (its last
//! daylight-saving summer), each schedule's successive fires as UTC instants. The rule (Vixie
//! cron's): a schedule whose hour field is `*` or a step fires in both passes of a repeated hour
//! and skips the hours that do not exist; a fixed hour fires once in a repeated hour (the first
//! pass), and a fixed time inside a spring gap fires just after the gap, in its first minute, at
//! the time's own second (02:30:15 → 03:00:15).
//!
//! Every expected instant was worked out by hand from the switch times in the comments; the
//! local time of each fire is written next to it.

use chrono::{DateTime, Duration, LocalResult, NaiveDateTime, Offset, TimeZone, Timelike, Utc};
use chrono_tz::Tz;
use replay_ledger::services::scheduler::job_statuses;
use replay_ledger::services::scheduler::timing::{last_fire, next_fire_after, parse};
use replay_ledger_core::config::{load_dir, EFFECTS_FILE};

fn utc(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s)
        .unwrap_or_else(|e| panic!("{s}: {e}"))
        .with_timezone(&Utc)
}

/// One row: from `after`, the schedule fires at `fires`, in this order, and at no instant between.
struct Row {
    zone: &'static str,
    schedule: &'static str,
    after: &'static str,
    fires: &'static [&'static str],
}

const HOURLY: &str = "0 0 * * * *";
const HALF_HOURLY: &str = "0 */30 * * * *";

// Europe/Berlin: 2026-03-29 01:00Z, 02:00 CET (+01) -> 03:00 CEST (+02): 02:00-02:59 do not exist.
//                2026-10-25 01:00Z, 03:00 CEST (+02) -> 02:00 CET (+01): 02:00-02:59 twice.
// America/New_York: 2026-03-08 07:00Z, 02:00 EST (-05) -> 03:00 EDT (-04).
//                   2026-11-01 06:00Z, 02:00 EDT (-04) -> 01:00 EST (-05): 01:00-01:59 twice.
// America/Sao_Paulo: 2018-11-04 03:00Z, 00:00 (-03) -> 01:00 (-02): 00:00-00:59 do not exist.
//                    2019-02-17 02:00Z, 00:00 (-02) -> 23:00 (-03) of the 16th: 23:00-23:59 twice.
const TABLE: &[Row] = &[
    // ---- Europe/Berlin, spring ----
    Row {
        zone: "Europe/Berlin",
        schedule: HOURLY,
        after: "2026-03-28T23:30:00Z", // 00:30 CET
        fires: &[
            "2026-03-29T00:00:00Z", // 01:00 CET
            "2026-03-29T01:00:00Z", // 03:00 CEST (02:00 does not exist)
            "2026-03-29T02:00:00Z", // 04:00 CEST
        ],
    },
    Row {
        zone: "Europe/Berlin",
        schedule: HALF_HOURLY,
        after: "2026-03-29T00:10:00Z", // 01:10 CET
        fires: &[
            "2026-03-29T00:30:00Z", // 01:30 CET
            "2026-03-29T01:00:00Z", // 03:00 CEST
            "2026-03-29T01:30:00Z", // 03:30 CEST
        ],
    },
    Row {
        zone: "Europe/Berlin",
        schedule: "0 30 2 * * *",
        after: "2026-03-28T00:00:00Z",
        fires: &[
            "2026-03-28T01:30:00Z", // 02:30 CET
            "2026-03-29T01:00:00Z", // 03:00 CEST: 02:30 is in the gap, fired just after it
            "2026-03-30T00:30:00Z", // 02:30 CEST
        ],
    },
    Row {
        zone: "Europe/Berlin",
        schedule: "15 30 2 * * SUN",
        after: "2026-03-28T12:00:00Z",
        fires: &[
            "2026-03-29T01:00:15Z", // 03:00:15 CEST: 02:30:15 is in the gap
            "2026-04-05T00:30:15Z", // 02:30:15 CEST
        ],
    },
    // ---- Europe/Berlin, autumn ----
    Row {
        zone: "Europe/Berlin",
        schedule: HOURLY,
        after: "2026-10-24T23:30:00Z", // 01:30 CEST
        fires: &[
            "2026-10-25T00:00:00Z", // 02:00 CEST, first pass
            "2026-10-25T01:00:00Z", // 02:00 CET, second pass
            "2026-10-25T02:00:00Z", // 03:00 CET
            "2026-10-25T03:00:00Z", // 04:00 CET
        ],
    },
    Row {
        zone: "Europe/Berlin",
        schedule: HALF_HOURLY,
        after: "2026-10-24T23:40:00Z", // 01:40 CEST
        fires: &[
            "2026-10-25T00:00:00Z", // 02:00 CEST
            "2026-10-25T00:30:00Z", // 02:30 CEST
            "2026-10-25T01:00:00Z", // 02:00 CET
            "2026-10-25T01:30:00Z", // 02:30 CET
            "2026-10-25T02:00:00Z", // 03:00 CET
        ],
    },
    Row {
        zone: "Europe/Berlin",
        schedule: "0 30 2 * * *",
        after: "2026-10-24T12:00:00Z",
        fires: &[
            "2026-10-25T00:30:00Z", // 02:30 CEST, first pass only
            "2026-10-26T01:30:00Z", // 02:30 CET
        ],
    },
    Row {
        zone: "Europe/Berlin",
        schedule: "15 30 2 * * SUN",
        after: "2026-10-24T12:00:00Z",
        fires: &[
            "2026-10-25T00:30:15Z", // 02:30:15 CEST, first pass only
            "2026-11-01T01:30:15Z", // 02:30:15 CET
        ],
    },
    // ---- America/New_York, spring ----
    Row {
        zone: "America/New_York",
        schedule: HOURLY,
        after: "2026-03-08T05:30:00Z", // 00:30 EST
        fires: &[
            "2026-03-08T06:00:00Z", // 01:00 EST
            "2026-03-08T07:00:00Z", // 03:00 EDT
            "2026-03-08T08:00:00Z", // 04:00 EDT
        ],
    },
    Row {
        zone: "America/New_York",
        schedule: HALF_HOURLY,
        after: "2026-03-08T06:10:00Z", // 01:10 EST
        fires: &[
            "2026-03-08T06:30:00Z", // 01:30 EST
            "2026-03-08T07:00:00Z", // 03:00 EDT
            "2026-03-08T07:30:00Z", // 03:30 EDT
        ],
    },
    Row {
        zone: "America/New_York",
        schedule: "0 30 2 * * *",
        after: "2026-03-07T12:00:00Z",
        fires: &[
            "2026-03-08T07:00:00Z", // 03:00 EDT: 02:30 is in the gap
            "2026-03-09T06:30:00Z", // 02:30 EDT
        ],
    },
    Row {
        zone: "America/New_York",
        schedule: "15 30 2 * * SUN",
        after: "2026-03-07T12:00:00Z",
        fires: &[
            "2026-03-08T07:00:15Z", // 03:00:15 EDT: 02:30:15 is in the gap
            "2026-03-15T06:30:15Z", // 02:30:15 EDT
        ],
    },
    // ---- America/New_York, autumn ----
    Row {
        zone: "America/New_York",
        schedule: HOURLY,
        after: "2026-11-01T04:30:00Z", // 00:30 EDT
        fires: &[
            "2026-11-01T05:00:00Z", // 01:00 EDT
            "2026-11-01T06:00:00Z", // 01:00 EST
            "2026-11-01T07:00:00Z", // 02:00 EST
        ],
    },
    Row {
        zone: "America/New_York",
        schedule: HALF_HOURLY,
        after: "2026-11-01T04:50:00Z", // 00:50 EDT
        fires: &[
            "2026-11-01T05:00:00Z", // 01:00 EDT
            "2026-11-01T05:30:00Z", // 01:30 EDT
            "2026-11-01T06:00:00Z", // 01:00 EST
            "2026-11-01T06:30:00Z", // 01:30 EST
            "2026-11-01T07:00:00Z", // 02:00 EST
        ],
    },
    Row {
        zone: "America/New_York",
        schedule: "0 30 1 * * *",
        after: "2026-10-31T12:00:00Z",
        fires: &[
            "2026-11-01T05:30:00Z", // 01:30 EDT, first pass only
            "2026-11-02T06:30:00Z", // 01:30 EST
        ],
    },
    Row {
        zone: "America/New_York",
        schedule: "15 30 1 * * SUN",
        after: "2026-10-31T12:00:00Z",
        fires: &[
            "2026-11-01T05:30:15Z", // 01:30:15 EDT, first pass only
            "2026-11-08T06:30:15Z", // 01:30:15 EST
        ],
    },
    // ---- America/Sao_Paulo, spring (2018) ----
    Row {
        zone: "America/Sao_Paulo",
        schedule: HOURLY,
        after: "2018-11-04T01:30:00Z", // 22:30 -03 on the 3rd
        fires: &[
            "2018-11-04T02:00:00Z", // 23:00 -03
            "2018-11-04T03:00:00Z", // 01:00 -02 (00:00 does not exist)
            "2018-11-04T04:00:00Z", // 02:00 -02
        ],
    },
    Row {
        zone: "America/Sao_Paulo",
        schedule: HALF_HOURLY,
        after: "2018-11-04T02:10:00Z", // 23:10 -03 on the 3rd
        fires: &[
            "2018-11-04T02:30:00Z", // 23:30 -03
            "2018-11-04T03:00:00Z", // 01:00 -02
            "2018-11-04T03:30:00Z", // 01:30 -02
        ],
    },
    Row {
        zone: "America/Sao_Paulo",
        schedule: "0 0 0 * * *",
        after: "2018-11-02T12:00:00Z",
        fires: &[
            "2018-11-03T03:00:00Z", // 00:00 -03
            "2018-11-04T03:00:00Z", // 01:00 -02: midnight is in the gap
            "2018-11-05T02:00:00Z", // 00:00 -02
        ],
    },
    Row {
        zone: "America/Sao_Paulo",
        schedule: "15 30 0 * * SUN",
        after: "2018-11-03T12:00:00Z",
        fires: &[
            "2018-11-04T03:00:15Z", // 01:00:15 -02: 00:30:15 is in the gap
            "2018-11-11T02:30:15Z", // 00:30:15 -02
        ],
    },
    // ---- America/Sao_Paulo, autumn (2019) ----
    Row {
        zone: "America/Sao_Paulo",
        schedule: HOURLY,
        after: "2019-02-17T00:30:00Z", // 22:30 -02 on the 16th
        fires: &[
            "2019-02-17T01:00:00Z", // 23:00 -02, first pass
            "2019-02-17T02:00:00Z", // 23:00 -03, second pass
            "2019-02-17T03:00:00Z", // 00:00 -03 on the 17th
        ],
    },
    Row {
        zone: "America/Sao_Paulo",
        schedule: HALF_HOURLY,
        after: "2019-02-17T00:40:00Z", // 22:40 -02 on the 16th
        fires: &[
            "2019-02-17T01:00:00Z", // 23:00 -02
            "2019-02-17T01:30:00Z", // 23:30 -02
            "2019-02-17T02:00:00Z", // 23:00 -03
            "2019-02-17T02:30:00Z", // 23:30 -03
            "2019-02-17T03:00:00Z", // 00:00 -03
        ],
    },
    Row {
        zone: "America/Sao_Paulo",
        schedule: "0 30 23 * * *",
        after: "2019-02-16T12:00:00Z",
        fires: &[
            "2019-02-17T01:30:00Z", // 23:30 -02 on the 16th, first pass only
            "2019-02-18T02:30:00Z", // 23:30 -03 on the 17th
        ],
    },
    Row {
        zone: "America/Sao_Paulo",
        schedule: "0 0 0 * * *",
        after: "2019-02-15T12:00:00Z",
        fires: &[
            "2019-02-16T02:00:00Z", // 00:00 -02 on the 16th
            "2019-02-17T03:00:00Z", // 00:00 -03 on the 17th (midnight -02 never came)
            "2019-02-18T03:00:00Z", // 00:00 -03
        ],
    },
];

#[test]
fn every_schedule_fires_at_the_hand_written_instants_around_daylight_saving_switches() {
    let mut wrong = Vec::new();
    for row in TABLE {
        let tz: Tz = row.zone.parse().unwrap();
        let cron = parse(row.schedule).unwrap();
        let mut after = utc(row.after);
        for expected in row.fires {
            let got = next_fire_after(&cron, tz, after);
            if got != Some(utc(expected)) {
                wrong.push(format!(
                    "{} `{}` after {}: expected {expected}, got {got:?}",
                    row.zone,
                    row.schedule,
                    after.to_rfc3339()
                ));
                break;
            }
            after = utc(expected);
        }
    }
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
}

#[test]
fn the_last_fire_at_or_before_an_instant_is_the_table_fire_before_it() {
    let mut wrong = Vec::new();
    for row in TABLE {
        let tz: Tz = row.zone.parse().unwrap();
        let cron = parse(row.schedule).unwrap();
        for pair in row.fires.windows(2) {
            let (earlier, later) = (utc(pair[0]), utc(pair[1]));
            let just_before = later - chrono::Duration::seconds(1);
            for (at, expected) in [(later, later), (just_before, earlier)] {
                let got = last_fire(&cron, tz, at);
                if got != Some(expected) {
                    wrong.push(format!(
                        "{} `{}` at {}: expected {}, got {got:?}",
                        row.zone,
                        row.schedule,
                        at.to_rfc3339(),
                        expected.to_rfc3339()
                    ));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
}

#[test]
fn status_in_the_second_pass_of_a_repeated_hour_shows_tomorrows_fire_not_a_past_one() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(EFFECTS_FILE), "{}\n").unwrap();
    std::fs::write(
        dir.path().join("sweeper.yaml"),
        "name: sweeper\nkind: sweep\nschedule: \"0 30 2 * * *\"\ntimezone: Europe/Berlin\nstale_after: 5m\n",
    )
    .unwrap();
    let jobs = load_dir(dir.path()).unwrap_or_else(|e| panic!("{e}")).jobs;
    // 02:15 CET, the second pass of 02:00-02:59: today's 02:30 fired in the first pass.
    let now = utc("2026-10-25T01:15:00Z");

    let status = job_statuses(&jobs, &[], &[], now);

    let next = status[0].next_fire.expect("a next fire");
    assert!(next > now, "next fire {next} is not after {now}");
    assert_eq!(next.to_rfc3339(), "2026-10-26T02:30:00+01:00");
}

/// The rule written the slow way, for one instant: does `schedule` fire at `t`? `wild`: the
/// hour field is `*` or a step (said by hand for each schedule below).
fn fires_at(cron: &croner::Cron, wild: bool, tz: Tz, t: DateTime<Utc>) -> bool {
    let matches = |wall: NaiveDateTime| cron.is_time_matching(&wall.and_utc()).unwrap();
    let local = t.with_timezone(&tz);
    let first_pass = tz.from_local_datetime(&local.naive_local()).earliest() == Some(local);
    if matches(local.naive_local()) && (wild || first_pass) {
        return true;
    }
    // A fixed time a spring gap skipped fires in the first minute after the gap, at its second.
    let minute = t - Duration::seconds(t.second().into());
    let offset = |i: DateTime<Utc>| tz.offset_from_utc_datetime(&i.naive_utc()).fix();
    let (before, after) = (offset(minute - Duration::seconds(1)), offset(minute));
    if wild || before.local_minus_utc() >= after.local_minus_utc() {
        return false;
    }
    let (start, end) = (minute.naive_utc() + before, minute.naive_utc() + after);
    let mut wall = start;
    while wall < end {
        if wall.second() == t.second()
            && tz.from_local_datetime(&wall) == LocalResult::None
            && matches(wall)
        {
            return true;
        }
        wall += Duration::seconds(1);
    }
    false
}

#[test]
fn the_fires_around_each_switch_are_the_instants_the_rule_picks_one_by_one() {
    // (schedule, hour field is `*` or a step, the one second of the minute it fires at)
    let schedules = [
        ("0 0 * * * *", true, 0),
        ("0 */30 * * * *", true, 0),
        ("0 45 */2 * * *", true, 0),
        ("0 20 3/2 * * *", true, 0),
        ("0 30 2 * * *", false, 0),
        ("15 30 2 * * SUN", false, 15),
        ("0 30 1 * * *", false, 0),
        ("0 0 0 * * *", false, 0),
        ("0 30 23 * * *", false, 0),
        ("0 15 1-3 * * *", false, 0),
        ("0 * 2 * * *", false, 0),
        ("7 10,50 0,1,2,23 * * *", false, 7),
    ];
    let switches = [
        ("Europe/Berlin", "2026-03-29T01:00:00Z"),
        ("Europe/Berlin", "2026-10-25T01:00:00Z"),
        ("America/New_York", "2026-03-08T07:00:00Z"),
        ("America/New_York", "2026-11-01T06:00:00Z"),
        ("America/Sao_Paulo", "2018-11-04T03:00:00Z"),
        ("America/Sao_Paulo", "2019-02-17T02:00:00Z"),
    ];
    for (zone, switch) in switches {
        let tz: Tz = zone.parse().unwrap();
        let (from, to) = (
            utc(switch) - Duration::hours(30),
            utc(switch) + Duration::hours(30),
        );
        for (schedule, wild, second) in schedules {
            let cron = parse(schedule).unwrap();
            let expected: Vec<_> = (0..=(to - from).num_minutes())
                .map(|m| from + Duration::minutes(m) + Duration::seconds(second))
                .filter(|t| *t > from && *t <= to && fires_at(&cron, wild, tz, *t))
                .collect();

            let mut got = Vec::new();
            let mut after = from;
            while let Some(t) = next_fire_after(&cron, tz, after).filter(|t| *t <= to) {
                got.push(t);
                after = t;
            }

            assert_eq!(got, expected, "{zone} `{schedule}` around {switch}");
            for pair in got.windows(2) {
                let before_second = last_fire(&cron, tz, pair[1] - Duration::seconds(1));
                assert_eq!(
                    before_second,
                    Some(pair[0]),
                    "{zone} `{schedule}` last fire"
                );
            }
        }
    }
}
