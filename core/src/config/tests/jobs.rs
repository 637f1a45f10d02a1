//! Job files: defaults, kinds, checked values and the positions of their errors.

use std::time::Duration;

use super::*;

#[test]
fn a_minimal_replay_job_gets_the_defaults() {
    let job = job("name: r\nwindow: { previous: day }\n").unwrap();
    assert_eq!(
        (job.name.as_str(), job.timezone, job.schedule.as_deref()),
        ("r", chrono_tz::UTC, None)
    );
    let r = replay(&job);
    assert_eq!(r.window, WindowSpec::PreviousDay);
    assert!(!r.simulate);
    assert_eq!(r.batch_size, 1000);
    assert_eq!(r.event_types, ["pedido.pago"]);
    assert!(r.effects.is_empty());
    assert_eq!(r.on_invalid_event, OnInvalidEvent::Record);
}

#[test]
fn a_fixed_window_keeps_its_offsets() {
    let text =
        "name: r\nwindow:\n  from: 2026-10-14T00:00:00-03:00\n  to: 2026-10-15T00:00:00-03:00\n";
    let WindowSpec::Fixed { from, to } = replay(&job(text).unwrap()).window else {
        panic!("not a fixed window");
    };
    assert_eq!(from.to_rfc3339(), "2026-10-14T00:00:00-03:00");
    assert_eq!(to.with_timezone(&Utc), utc("2026-10-15T03:00:00Z"));
}

#[test]
fn the_seeds_portuguese_words_are_accepted_for_mode_and_on_failure() {
    let text = "name: r\nwindow: { previous: day }\neffects:\n  notify: { mode: aplicar, on_failure: liberar }\n  sms: { mode: suprimir, on_failure: manter }\n";
    let r = replay(&job(text).unwrap()).effects.clone();
    assert_eq!(
        r["notify"],
        EffectPolicy {
            mode: EffectMode::Apply,
            on_failure: OnFailure::Release
        }
    );
    assert_eq!(
        r["sms"],
        EffectPolicy {
            mode: EffectMode::Suppress,
            on_failure: OnFailure::Keep
        }
    );
}

#[test]
fn mode_defaults_to_apply_and_on_failure_to_keep() {
    let r = job("name: r\nwindow: { previous: day }\neffects: { sms: {} }\n").unwrap();
    let expected = EffectPolicy {
        mode: EffectMode::Apply,
        on_failure: OnFailure::Keep,
    };
    assert_eq!(replay(&r).effects["sms"], expected);
}

#[test]
fn an_unknown_key_is_an_error_with_its_line_and_column() {
    let text = "name: r\nwindow: { previous: day }\neffects:\n  notify:\n    mode: apply\n    on_falure: release\n";
    let err = job(text).unwrap_err();
    assert_eq!(
        err,
        "t.yaml:6:5: unknown field `on_falure`, expected `mode` or `on_failure`"
    );
}

#[test]
fn a_key_of_another_kind_is_an_unknown_key() {
    let err =
        job("name: s\nkind: sweep\nstale_after: 5m\nwindow: { previous: day }\n").unwrap_err();
    assert!(
        err.starts_with("t.yaml:4:1: unknown field `window`, expected one of"),
        "{err}"
    );
}

#[test]
fn a_live_job_takes_no_schedule_and_no_window() {
    let live = job("name: l\nkind: live\n").unwrap();
    assert!(matches!(
        live.kind,
        JobKind::Live(LiveJob {
            batch_size: 1000,
            ..
        })
    ));
    assert!(job("name: l\nkind: live\nschedule: '0 * * * * *'\n")
        .unwrap_err()
        .starts_with("t.yaml:3:1: unknown field `schedule`"));
    assert!(job("name: l\nkind: live\nwindow: { previous: day }\n")
        .unwrap_err()
        .starts_with("t.yaml:3:1: unknown field `window`"));
}

#[test]
fn an_unknown_kind_is_an_error() {
    let err = job("name: r\nkind: replya\n").unwrap_err();
    assert!(
        err.starts_with("t.yaml:2:7: unknown variant `replya`, expected one of `replay`"),
        "{err}"
    );
}

#[test]
fn a_missing_field_is_an_error_at_its_mapping() {
    assert_eq!(
        job("name: r\n").unwrap_err(),
        "t.yaml:1:1: missing field `window`"
    );
    assert_eq!(job("").unwrap_err(), "t.yaml:1:1: missing field `name`");
}

#[test]
fn a_job_name_outside_the_allowed_characters_is_an_error() {
    let err = job("name: Replay:1\nwindow: { previous: day }\n").unwrap_err();
    assert!(
        err.starts_with("t.yaml:1:7: invalid job name `Replay:1`"),
        "{err}"
    );
}

#[test]
fn a_schedule_needs_its_seconds_field() {
    let ok = job("name: r\nschedule: '0 30 2 * * *'\nwindow: { previous: day }\n").unwrap();
    assert_eq!(ok.schedule.as_deref(), Some("0 30 2 * * *"));
    let err = job("name: r\nschedule: '30 2 * * *'\nwindow: { previous: day }\n").unwrap_err();
    assert!(
        err.starts_with("t.yaml:2:11: invalid schedule `30 2 * * *`"),
        "{err}"
    );
}

#[test]
fn an_unknown_timezone_is_an_error() {
    let err = job("name: r\ntimezone: America/Sao_Pablo\nwindow: { previous: day }\n").unwrap_err();
    assert!(
        err.starts_with("t.yaml:2:11: unknown timezone `America/Sao_Pablo`"),
        "{err}"
    );
}

#[test]
fn batch_size_must_be_from_1_to_100000() {
    let at = |n: &str| {
        job(&format!(
            "name: r\nwindow: {{ previous: day }}\nbatch_size: {n}\n"
        ))
    };
    assert_eq!(replay(&at("100000").unwrap()).batch_size, 100_000);
    assert!(at("0")
        .unwrap_err()
        .starts_with("t.yaml:3:13: batch_size must be from 1 to 100000"));
    assert!(at("100001").unwrap_err().contains("got 100001"));
    let negative = at("-1").unwrap_err();
    assert!(
        negative.starts_with("t.yaml:3:13: invalid type: integer `-1`"),
        "{negative}"
    );
}

#[test]
fn an_empty_event_types_list_is_an_error() {
    let err = job("name: r\nwindow: { previous: day }\nevent_types: []\n").unwrap_err();
    assert!(
        err.starts_with("t.yaml:3:14: event_types is empty"),
        "{err}"
    );
}

#[test]
fn a_reversed_or_empty_window_is_an_error() {
    let text = "name: r\nwindow:\n  from: 2026-10-15T00:00:00Z\n  to: 2026-10-14T00:00:00Z\n";
    assert!(job(text)
        .unwrap_err()
        .starts_with("t.yaml:3:3: window is empty or reversed"));
    let empty = "name: r\nwindow: { from: 2026-10-14T03:00:00Z, to: 2026-10-14T00:00:00-03:00 }\n";
    assert!(job(empty)
        .unwrap_err()
        .starts_with("t.yaml:2:9: window is empty or reversed"));
}

#[test]
fn a_window_is_either_from_and_to_or_previous_day() {
    let mixed = "name: r\nwindow: { from: 2026-10-14T00:00:00Z, previous: day }\n";
    assert!(job(mixed)
        .unwrap_err()
        .starts_with("t.yaml:2:9: a window is either"));
    let week = "name: r\nwindow: { previous: week }\n";
    assert!(job(week)
        .unwrap_err()
        .starts_with("t.yaml:2:21: unknown variant `week`"));
}

#[test]
fn a_timestamp_without_an_offset_is_an_error() {
    let text = "name: r\nwindow: { from: 2026-10-14T00:00:00, to: 2026-10-15T00:00:00Z }\n";
    assert!(job(text)
        .unwrap_err()
        .starts_with("t.yaml:2:17: invalid timestamp `2026-10-14T00:00:00`"));
}

#[test]
fn an_effect_type_missing_from_the_catalog_is_an_error_at_its_key() {
    let err = job("name: r\nwindow: { previous: day }\neffects:\n  notfy: {}\n").unwrap_err();
    assert_eq!(
        err,
        "t.yaml:4:3: unknown effect type `notfy`: effects.yaml defines `notify`, `sms`"
    );
}

#[test]
fn an_effect_type_listed_twice_is_an_error() {
    let err =
        job("name: r\nwindow: { previous: day }\neffects:\n  sms: {}\n  sms: {}\n").unwrap_err();
    assert!(
        err.starts_with("t.yaml:5:3:") && err.contains("twice"),
        "{err}"
    );
}

#[test]
fn release_on_a_non_idempotent_type_is_refused() {
    let text = "name: r\nwindow: { previous: day }\neffects:\n  sms: { on_failure: release }\n";
    let err = job(text).unwrap_err();
    assert!(
        err.starts_with("t.yaml:4:8: `on_failure: release` is refused for `sms`"),
        "{err}"
    );
    assert!(err.contains("could duplicate a message"), "{err}");
}

#[test]
fn release_on_an_idempotent_type_and_keep_on_any_type_are_accepted() {
    let text = "name: r\nwindow: { previous: day }\neffects:\n  notify: { on_failure: release }\n  sms: { on_failure: keep }\n";
    assert!(job(text).is_ok());
}

#[test]
fn stale_after_is_at_most_thirty_days() {
    let err = job("name: s\nkind: sweep\nstale_after: 99999999999y\n").unwrap_err();
    assert!(
        err.starts_with("t.yaml:3:14: stale_after must be at most 30days"),
        "{err}"
    );
    let ok = job("name: s\nkind: sweep\nstale_after: 30d\n").unwrap();
    assert!(
        matches!(ok.kind, JobKind::Sweep(SweepJob { stale_after }) if stale_after == MAX_STALE_AFTER)
    );
}

#[test]
fn stale_after_must_exceed_every_webhook_timeout() {
    let err = job("name: s\nkind: sweep\nstale_after: 30s\n").unwrap_err();
    assert!(
        err.starts_with("t.yaml:3:14: stale_after (30s) must be greater than"),
        "{err}"
    );
    assert!(err.contains("`sms` has timeout 30s"), "{err}");
    let ok = job("name: s\nkind: sweep\nstale_after: 31s\n").unwrap();
    assert!(
        matches!(ok.kind, JobKind::Sweep(SweepJob { stale_after }) if stale_after == Duration::from_secs(31))
    );
}

#[test]
fn a_bad_duration_is_an_error_with_its_position() {
    let err = job("name: s\nkind: sweep\nstale_after: 5 minutos\n").unwrap_err();
    assert!(
        err.starts_with("t.yaml:3:14: invalid duration `5 minutos`"),
        "{err}"
    );
}

#[test]
fn a_report_needs_well_formed_recipients() {
    let ok =
        job("name: f\nkind: report\nto: [a@example.com]\ncc: ['B <b@example.com>']\n").unwrap();
    let JobKind::Report(report) = ok.kind else {
        panic!("not a report")
    };
    assert_eq!(
        (report.to, report.cc),
        (
            vec!["a@example.com".into()],
            vec!["B <b@example.com>".into()]
        )
    );
    assert!(job("name: f\nkind: report\nto: []\n")
        .unwrap_err()
        .starts_with("t.yaml:3:5: `to` is empty"));
    let bad = job("name: f\nkind: report\nto: [a@example.com, financeiro]\n").unwrap_err();
    assert!(
        bad.starts_with("t.yaml:3:21: invalid e-mail address `financeiro`"),
        "{bad}"
    );
}

#[test]
fn an_unset_variable_is_an_error_naming_it_at_its_value() {
    let err = job("name: f\nkind: report\nto:\n  - ${CONFIG_UNIT_UNSET_VAR_41}\n").unwrap_err();
    assert_eq!(err, "t.yaml:4:5: environment variable `CONFIG_UNIT_UNSET_VAR_41` is not set (referenced as `${CONFIG_UNIT_UNSET_VAR_41}`)");
}

#[test]
fn a_variable_value_cannot_change_the_yaml_structure() {
    std::env::set_var("CONFIG_UNIT_TO_42", "x@example.com]\ncc: [y@example.com");
    let err = job("name: f\nkind: report\nto: [\"${CONFIG_UNIT_TO_42}\"]\n").unwrap_err();
    assert!(
        err.starts_with("t.yaml:3:6: the value from `${CONFIG_UNIT_TO_42}` is not valid here: expected an e-mail address"),
        "{err}"
    );
}

#[test]
fn a_verify_job_looks_back_whole_days_from_today_in_its_timezone() {
    let ok = job("name: v\nkind: verify\ntimezone: America/Sao_Paulo\nlookback: 30d\nreport_to: [f@example.com]\n").unwrap();
    let JobKind::Verify(verify) = &ok.kind else {
        panic!("not a verify job")
    };
    // 02:00 UTC on 15 October is still the 14th in São Paulo.
    let (from, to) = verify.range(ok.timezone, utc("2026-10-15T02:00:00Z"));
    assert_eq!(
        (from.to_string(), to.to_string()),
        ("2026-09-14".into(), "2026-10-14".into())
    );
    let err =
        job("name: v\nkind: verify\nlookback: 30h\nreport_to: [f@example.com]\n").unwrap_err();
    assert!(
        err.starts_with("t.yaml:3:11: lookback must be whole days"),
        "{err}"
    );
    let err = job(
        "name: v\nkind: verify\nlookback: 30d\nreport_to: [f@example.com]\nto: [x@example.com]\n",
    )
    .unwrap_err();
    assert!(err.contains("unknown field `to`"), "{err}");
}
