//! The report e-mail reads the same whatever renders it: each kind of report, built without a
//! database, against its parts as they were rendered when the HTML part was built from strings
//! (`fixtures/<name>.html`, `fixtures/<name>.txt`).
//!
//! The plain-text part is compared byte for byte. The HTML part is compared byte for byte after
//! one normalisation, applied to both sides: the character reference `&#39;` is read as the
//! apostrophe it stands for. The string renderer escaped `'` as `&#39;`; maud leaves it as is,
//! which is the same character to a reader (every attribute is double-quoted, and in text an
//! apostrophe is plain text). The replacement cannot touch an escaped `&#39;` typed in the data,
//! which both write as `&amp;#39;`. Nothing else is normalised: tags, attributes, styles, hrefs,
//! text and the line breaks between elements must be the same.

use std::collections::BTreeMap;

use chrono::{DateTime, TimeZone, Utc};
use replay_ledger::services::report::approved::Check;
use replay_ledger::services::report::{render, ExecutionReport, Report};
use replay_ledger_core::shared::summary::{EffectOutcome, Summary, Totals};
use replay_ledger_core::tables::commission::{DiffRow, Divergence};
use replay_ledger_core::tables::execution::{Execution, Mode, Rejected, State};
use replay_ledger_core::tables::ledger::{Reason, ReviewItem};

/// What a reader sees the same: see the module's doc.
fn normalised(html: &str) -> String {
    html.replace("&#39;", "'")
}

fn fixture(name: &str) -> String {
    let path = format!(
        "{}/tests/it/report/fixtures/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"))
}

fn assert_reads_as_before(name: &str, report: &Report) {
    assert_eq!(
        render::text(report),
        fixture(&format!("{name}.txt")),
        "the text part of {name}"
    );
    assert_eq!(
        normalised(&render::html(report)),
        normalised(&fixture(&format!("{name}.html"))),
        "the HTML part of {name}"
    );
}

fn at(h: u32, m: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 10, 15, h, m, 0).unwrap()
}

fn execution(key: &str, mode: Mode, state: State, summary: Summary) -> Execution {
    Execution {
        key: key.into(),
        job: "replay-2026-10-14-v2".into(),
        mode,
        window_from: Some(Utc.with_ymd_and_hms(2026, 10, 14, 3, 0, 0).unwrap()),
        window_to: Some(Utc.with_ymd_and_hms(2026, 10, 15, 3, 0, 0).unwrap()),
        first: Some(1),
        last: Some(100),
        total_events: 100,
        state,
        pass: 1,
        started_by: "ana@ops-1".into(),
        started_at: at(12, 2),
        finished_at: Some(at(12, 4)),
        error: None,
        pass_summary: summary.clone(),
        summary,
        definition: None,
        checkpoint: Some(100),
        interrupt_asked_by: None,
        interrupt_asked_at: None,
    }
}

/// 30 orders: 24 new (more than a report lists), 3 whose commission goes down, 3 unchanged.
fn rows() -> Vec<DiffRow> {
    (1..=30)
        .map(|i| DiffRow {
            pedido_id: format!("ped-{i:03}"),
            antes: match i {
                1..=24 => None,
                25..=27 => Some(10_000 + i),
                _ => Some(500 * i),
            },
            depois: 500 * i,
        })
        .collect()
}

/// 2 new orders, 3 whose commission goes down, 3 unchanged: where the links are what matters.
fn few_rows() -> Vec<DiffRow> {
    rows().split_off(22)
}

fn summary(effects: &[(EffectOutcome, u64)]) -> Summary {
    Summary {
        events_read: 12_345,
        events_skipped: 1_000,
        events_rejected: 22,
        orders_in_diff: 30,
        orders_changed: 27,
        total_before_centavos: 30_078,
        total_after_centavos: 232_500,
        effects: effects.iter().copied().collect::<BTreeMap<_, _>>(),
        ..Summary::default()
    }
}

/// 22 rejected events: more than a report lists.
fn rejected() -> Vec<Rejected> {
    (1..=22)
        .map(|i| Rejected {
            event_id: format!("evt-{i:04}"),
            posicao: 1_000 + i,
            tipo: "pedido.pago".into(),
            erro: "payload de pedido.pago invalido: percentual is missing".into(),
        })
        .collect()
}

fn review_item(i: i64, error: Option<&str>) -> ReviewItem {
    ReviewItem {
        key: format!("evt-{i:07}:notificar-vendedor"),
        effect_type: "notificar-vendedor".into(),
        execution_id: "ao-vivo".into(),
        motivo: Some(Reason::Timeout),
        status_http: None,
        desde: at(9, 45),
        primeira_tentativa: Some(at(9, 45)),
        ultima_tentativa: Some(at(9, 45)),
        idade_segundos: 8_100 + 86_400 * (i % 3) + 60 * i,
        tentativas: i,
        ultimo_erro: error.map(String::from),
        event_id: format!("evt-{i:07}"),
        status: "incerto".into(),
        pedido_id: Some(format!("ped-{i:07}")),
        valor_centavos: Some(1_234),
    }
}

fn report(execution: Option<ExecutionReport>, review: Vec<ReviewItem>) -> Report {
    Report::new(
        "finance-daily",
        chrono_tz::America::Sao_Paulo,
        at(12, 5),
        execution,
        review,
    )
}

fn simulation(rows: Vec<DiffRow>, rejected: Vec<Rejected>) -> ExecutionReport {
    let summary = summary(&[
        (EffectOutcome::AlreadyRegistered, 3_381),
        (EffectOutcome::WouldApply, 1),
    ]);
    let e = execution(
        "replay-2026-10-14-v2:simulacao",
        Mode::Simulation,
        State::Finished,
        summary,
    );
    ExecutionReport::from_parts(e, Mode::Simulation, rows, rejected)
}

fn totals(changed: u64, before: i64, after: i64) -> Totals {
    Totals {
        orders: changed,
        changed,
        before_centavos: before,
        after_centavos: after,
    }
}

/// A real run of an approved simulation that applied one order less than approved.
fn real_run(check: Check, rows: Vec<DiffRow>) -> ExecutionReport {
    let summary = summary(&[
        (EffectOutcome::Applied, 1_200),
        (EffectOutcome::AppliedEarlier, 3),
        (EffectOutcome::Suppressed, 7),
        (EffectOutcome::Uncertain, 1),
        (EffectOutcome::Released, 2),
    ]);
    let e = execution("replay-2026-10-14-v2", Mode::Real, State::Finished, summary);
    let mut report = ExecutionReport::from_parts(e, Mode::Real, rows, Vec::new());
    report.approved = Some(check);
    report
}

fn inexact() -> Check {
    Check {
        by: "bia@financeiro".into(),
        at: at(12, 30),
        approved: totals(28, 30_078, 233_000),
        applied: totals(27, 30_078, 232_500),
        differences: vec![
            Divergence {
                pedido_id: "ped-031".into(),
                approved: Some(500),
                applied: None,
            },
            Divergence {
                pedido_id: "ped-032".into(),
                approved: Some(700),
                applied: Some(900),
            },
        ],
        difference_count: 35,
    }
}

fn exact() -> Check {
    Check {
        by: "bia@financeiro".into(),
        at: at(12, 30),
        approved: totals(27, 30_078, 232_500),
        applied: totals(27, 30_078, 232_500),
        differences: Vec::new(),
        difference_count: 0,
    }
}

#[test]
fn a_simulations_report_reads_as_before() {
    let report = report(
        Some(simulation(rows(), rejected())),
        vec![review_item(998_812, Some("timeout"))],
    );
    assert_reads_as_before("simulation", &report);
}

#[test]
fn a_real_runs_report_that_did_not_apply_what_was_approved_reads_as_before() {
    assert_reads_as_before(
        "real_run",
        &report(Some(real_run(inexact(), rows())), Vec::new()),
    );
}

#[test]
fn a_report_of_the_review_queue_alone_reads_as_before() {
    let review = (1..=52)
        .map(|i| review_item(i, (i % 2 == 0).then_some("resposta HTTP 502")))
        .collect();
    assert_reads_as_before("review_only", &report(None, review));
}

#[test]
fn events_read_in_an_older_shape_are_counted_in_the_report_and_only_when_there_are_some() {
    let mut old_shapes = simulation(rows(), Vec::new());
    old_shapes.summary.events_upcast = 1_204;

    let text = render::text(&report(Some(old_shapes), Vec::new()));
    let none = render::text(&report(Some(simulation(rows(), Vec::new())), Vec::new()));

    let line = text
        .lines()
        .find(|l| l.contains("formato antigo"))
        .unwrap_or_else(|| panic!("no line on older shapes in:\n{text}"));
    assert!(line.contains("1.204"), "{line}");
    assert!(!none.contains("formato antigo"), "{none}");
}

#[test]
fn a_key_an_operator_said_was_not_sent_reads_as_a_pending_resend_not_as_awaiting_a_decision() {
    let mut queued = review_item(2, Some("resposta HTTP 502"));
    queued.status = replay_ledger_core::tables::ledger::QUEUED.into();
    let report = report(None, vec![review_item(1, None), queued]);

    let text = render::text(&report);
    let html = render::html(&report);

    let row = |key: &str| {
        text.lines()
            .find(|l| l.contains(key))
            .unwrap_or_else(|| panic!("no row for {key} in:\n{text}"))
            .to_string()
    };
    assert!(
        row("evt-0000001:").contains(" incerto "),
        "{}",
        row("evt-0000001:")
    );
    assert!(
        row("evt-0000002:").contains("reenvio pendente"),
        "{}",
        row("evt-0000002:")
    );
    assert!(
        text.contains("1 com reenvio pendente: a próxima varredura o envia, sem esperar decisão."),
        "{text}"
    );
    assert!(html.contains("reenvio pendente"));
}

#[test]
fn a_report_of_an_empty_review_queue_with_a_console_reads_as_before() {
    let report =
        report(None, Vec::new()).with_console_url(Some("https://console.example.com".into()));
    assert_reads_as_before("review_only_empty", &report);
}

#[test]
fn a_report_linking_a_simulation_awaiting_approval_to_the_console_reads_as_before() {
    let mut simulation = simulation(few_rows(), Vec::new());
    simulation.awaiting_approval = true;
    let report = report(Some(simulation), vec![review_item(7, None)])
        .with_console_url(Some("https://console.example.com/ops/".into()));
    assert_reads_as_before("links_awaiting_approval", &report);
}

#[test]
fn a_report_linking_a_real_run_that_applied_what_was_approved_reads_as_before() {
    let report = report(Some(real_run(exact(), few_rows())), Vec::new())
        .with_console_url(Some("https://console.example.com".into()));
    assert_reads_as_before("links_real_run", &report);
}

#[test]
fn a_report_of_an_interrupted_run_with_nothing_to_show_reads_as_before() {
    let mut e = execution(
        "replay-2026-10-14-v3:simulacao",
        Mode::Simulation,
        State::Interrupted,
        Summary::default(),
    );
    (e.window_from, e.window_to, e.finished_at) = (None, None, None);
    let execution = ExecutionReport::from_parts(e, Mode::Simulation, Vec::new(), Vec::new());
    assert_reads_as_before("nothing_to_show", &report(Some(execution), Vec::new()));
}

/// Markup, character references, quotes and control characters in every value that comes from
/// data or configuration.
const HOSTILE: &str = "<b>x</b> & \"q\" 'a' &amp; &#39; \u{1b}[31m\u{7}\r\n\u{202e}\u{85}";

fn hostile_execution() -> ExecutionReport {
    let mut e = execution(
        &format!("run-{HOSTILE}"),
        Mode::Real,
        State::Failed,
        summary(&[(EffectOutcome::Applied, 1)]),
    );
    e.job = format!("job-{HOSTILE}");
    e.started_by = format!("ana-{HOSTILE}");
    let rows = vec![DiffRow {
        pedido_id: format!("ped-{HOSTILE}"),
        antes: Some(100),
        depois: 50,
    }];
    let rejected = vec![Rejected {
        event_id: format!("evt-{HOSTILE}"),
        posicao: 7,
        tipo: format!("tipo-{HOSTILE}"),
        erro: format!("erro-{HOSTILE}"),
    }];
    let mut report = ExecutionReport::from_parts(e, Mode::Real, rows, rejected);
    let mut check = inexact();
    check.by = format!("bia-{HOSTILE}");
    check.differences[0].pedido_id = format!("ped-{HOSTILE}");
    report.approved = Some(check);
    report.awaiting_approval = true;
    report
}

#[test]
fn a_report_of_hostile_values_reads_as_before() {
    let mut item = review_item(3, Some(&format!("erro-{HOSTILE}")));
    item.key = format!("chave-{HOSTILE}");
    item.effect_type = format!("tipo-{HOSTILE}");
    item.execution_id = format!("exec-{HOSTILE}");
    let mut report = Report::new(
        &format!("sender-{HOSTILE}"),
        chrono_tz::UTC,
        at(12, 5),
        Some(hostile_execution()),
        vec![item],
    );
    report.console_url = Some("https://console.example.com/a&b'c<d>\"e".into());
    assert_reads_as_before("hostile", &report);
}
