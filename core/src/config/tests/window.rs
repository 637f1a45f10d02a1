//! `Job::resolve_window`: a window made concrete for one execution.

use chrono::TimeZone;

use super::*;

#[test]
fn previous_day_in_sao_paulo_runs_from_3am_to_3am_utc_and_names_the_day() {
    let job =
        job("name: nightly\ntimezone: America/Sao_Paulo\nwindow: { previous: day }\n").unwrap();
    let resolved = job.resolve_window(&WindowSpec::PreviousDay, utc("2026-10-15T12:00:00Z"));
    assert_eq!(resolved.execution_id, "nightly-2026-10-14");
    assert_eq!(
        (resolved.from, resolved.to),
        (utc("2026-10-14T03:00:00Z"), utc("2026-10-15T03:00:00Z"))
    );
}

#[test]
fn previous_day_is_judged_in_the_jobs_timezone_not_in_utc() {
    let job = job("name: n\ntimezone: America/Sao_Paulo\nwindow: { previous: day }\n").unwrap();
    // 02:00Z on the 15th is still 23:00 on the 14th in São Paulo: yesterday is the 13th.
    let resolved = job.resolve_window(&WindowSpec::PreviousDay, utc("2026-10-15T02:00:00Z"));
    assert_eq!(resolved.execution_id, "n-2026-10-13");
    assert_eq!(resolved.from, utc("2026-10-13T03:00:00Z"));
}

#[test]
fn previous_day_across_a_dst_change_lasts_25_hours() {
    let job = job("name: n\ntimezone: America/New_York\nwindow: { previous: day }\n").unwrap();
    let now = chrono_tz::America::New_York
        .with_ymd_and_hms(2026, 11, 2, 9, 0, 0)
        .unwrap();
    let resolved = job.resolve_window(&WindowSpec::PreviousDay, now.with_timezone(&Utc));
    assert_eq!(resolved.execution_id, "n-2026-11-01");
    assert_eq!(
        (resolved.from, resolved.to),
        (utc("2026-11-01T04:00:00Z"), utc("2026-11-02T05:00:00Z"))
    );
}

#[test]
fn a_fixed_window_resolves_to_utc_under_the_jobs_name() {
    let text =
        "name: once\nwindow: { from: 2026-10-14T00:00:00-03:00, to: 2026-10-15T00:00:00-03:00 }\n";
    let job = job(text).unwrap();
    let resolved = job.resolve_window(&replay(&job).window, Utc::now());
    assert_eq!(
        resolved,
        ResolvedWindow {
            execution_id: "once".into(),
            from: utc("2026-10-14T03:00:00Z"),
            to: utc("2026-10-15T03:00:00Z"),
        }
    );
}

#[test]
fn window_all_covers_every_instant_an_archive_holds_under_the_jobs_name() {
    let job = job("name: history\nrule: teto-10pct\nwindow: all\nsimulate: true\n").unwrap();
    let resolved = job.resolve_window(&replay(&job).window, Utc::now());
    assert_eq!(resolved.execution_id, "history");
    assert_eq!(resolved.from, utc("0001-01-01T00:00:00Z"));
    assert_eq!(resolved.to, utc("9999-12-31T00:00:00Z"));
    assert_eq!(replay(&job).rule, crate::domain::Rule::Teto10Pct);
}

#[test]
fn a_window_word_other_than_all_says_the_forms_at_its_line() {
    let err = job("name: n\nwindow: everything\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("`all`") && err.contains(":2:"), "{err}");
}
