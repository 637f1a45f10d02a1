//! Renders the report of a demo-like simulation of 2026-10-14, without a database: prints the
//! plain-text part and writes the HTML part (the README shows both). Deterministic: the same
//! output every time.
//!
//! ```sh
//! cargo run --example report_example -- docs/report-example.html
//! ```

use std::collections::BTreeMap;

use chrono::{DateTime, TimeZone, Utc};
use replay_ledger::services::report::{render, ExecutionReport, Report};
use replay_ledger_core::shared::summary::{EffectOutcome, StateOutcome, Summary};
use replay_ledger_core::tables::commission::DiffRow;
use replay_ledger_core::tables::execution::{Execution, Mode, Rejected, State};
use replay_ledger_core::tables::ledger::{Reason, ReviewItem};

fn main() -> std::io::Result<()> {
    let out = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "docs/src/report-example.html".into());
    let report = example();
    print!("{}", render::text(&report));
    eprintln!("subject: {}", render::subject(&report));
    std::fs::write(&out, render::html(&report))?;
    eprintln!("wrote {out}");
    Ok(())
}

fn at(h: u32, m: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 10, 15, h, m, 0).unwrap()
}

/// 4,815 orders paid on 2026-10-14 at 5 %, whose commissions the bug divided by 1,000: the diff
/// multiplies them by ten; 3 orders had no commission yet and 2 had one set by hand too high.
fn rows() -> Vec<DiffRow> {
    let mut seed: u64 = 20261014;
    let mut next = move || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        seed >> 33
    };
    (1..=4815)
        .map(|i| {
            let valor = 1_500 + (next() % 33_000) as i64;
            let depois = (valor * 5 + 50) / 100;
            let antes = match i {
                17 | 2_048 | 4_100 => None,
                731 | 3_333 => Some(depois + 2_500),
                _ => Some((valor * 5 + 500) / 1000),
            };
            DiffRow {
                pedido_id: format!("ped-{i:06}"),
                antes,
                depois,
            }
        })
        .collect()
}

fn example() -> Report {
    let summary = Summary {
        events_read: 10_000,
        events_skipped: 5_183,
        events_rejected: 2,
        state: BTreeMap::from([(StateOutcome::WouldWrite, 4_815)]),
        orders_in_diff: 4_815,
        orders_changed: 4_815,
        total_before_centavos: 442_502,
        total_after_centavos: 4_364_272,
        effects: BTreeMap::from([
            (EffectOutcome::AlreadyRegistered, 3_381),
            (EffectOutcome::WouldApply, 1_434),
        ]),
        ..Summary::default()
    };
    let execution = Execution {
        key: "replay-2026-10-14-v2:simulacao".into(),
        job: "replay-2026-10-14-v2".into(),
        mode: Mode::Simulation,
        window_from: Some(Utc.with_ymd_and_hms(2026, 10, 14, 3, 0, 0).unwrap()),
        window_to: Some(Utc.with_ymd_and_hms(2026, 10, 15, 3, 0, 0).unwrap()),
        first: Some(1_000_001),
        last: Some(1_010_000),
        total_events: 10_000,
        state: State::Finished,
        pass: 1,
        started_by: "ana@ops-1".into(),
        started_at: at(12, 2),
        finished_at: Some(at(12, 4)),
        error: None,
        pass_summary: summary.clone(),
        summary,
        definition: None,
        checkpoint: Some(1_010_000),
        interrupt_asked_by: None,
        interrupt_asked_at: None,
    };
    let rejected = vec![
        Rejected {
            event_id: "evt-1004417".into(),
            posicao: 1_004_417,
            tipo: "pedido.pago".into(),
            erro: "payload de pedido.pago invalido: valorCentavos is not an integer".into(),
        },
        Rejected {
            event_id: "evt-1008902".into(),
            posicao: 1_008_902,
            tipo: "pedido.pago".into(),
            erro: "payload de pedido.pago invalido: percentual is missing".into(),
        },
    ];
    let review = vec![ReviewItem {
        key: "evt-0998812:notificar-vendedor".into(),
        effect_type: "notificar-vendedor".into(),
        execution_id: "ao-vivo".into(),
        motivo: Some(Reason::Timeout),
        status_http: None,
        desde: at(9, 45),
        primeira_tentativa: Some(at(9, 45)),
        ultima_tentativa: Some(at(9, 45)),
        idade_segundos: 8_100,
        tentativas: 1,
        ultimo_erro: Some("timeout".into()),
        event_id: "evt-0998812".into(),
        status: "incerto".into(),
        pedido_id: Some("ped-0998812".into()),
        valor_centavos: Some(1_234),
    }];
    let execution = ExecutionReport::from_parts(execution, Mode::Simulation, rows(), rejected);
    Report::new(
        "finance-daily",
        chrono_tz::America::Sao_Paulo,
        at(12, 5),
        Some(execution),
        review,
    )
}
