//! A report as finance reads it, in Portuguese: the subject, a plain-text part and an HTML part
//! (simple tables with inline styles, no external assets; maud escapes every value), plus the CSV
//! attachment's name and bytes. Both parts are built from the same sections, so they say the same.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use maud::{html, Markup, DOCTYPE};

use super::links;
use super::table::Table;
use super::{csv, ExecutionReport, Report, LIST_LIMIT};
use replay_ledger_core::shared::money::{brl, brl_signed, group_thousands};
use replay_ledger_core::shared::summary::{EffectOutcome, Summary, Totals};
use replay_ledger_core::tables::commission::DiffRow;
use replay_ledger_core::tables::execution::{Mode, State};
use replay_ledger_core::tables::ledger::{ReviewItem, QUEUED};

/// `[replay-ledger] replay-2026-10-14-v2 (simulação): 4.812 pedidos, +R$ 38.211,40`.
pub fn subject(report: &Report) -> String {
    replay_ledger_core::shared::text::inert(&match &report.execution {
        Some(e) => format!(
            "[replay-ledger] {} ({}): {}, {}",
            e.execution_id,
            mode_label(e.mode),
            plural(e.totals.changed, "pedido", "pedidos"),
            brl_signed(e.totals.difference())
        ),
        None => format!(
            "[replay-ledger] {}: {} aguardando revisão",
            report.sender,
            plural(report.review_total as u64, "efeito", "efeitos")
        ),
    })
}

/// The attachment's file name, e.g. `replay-2026-10-14-v2-simulacao.csv`.
pub fn csv_name(execution: &ExecutionReport) -> String {
    format!("{}-{}.csv", execution.execution_id, execution.mode.as_db())
}

/// The attachment: the full diff (see `csv`).
pub fn csv(execution: &ExecutionReport) -> Vec<u8> {
    csv::render(&execution.rows)
}

/// The plain-text part.
pub fn text(report: &Report) -> String {
    let mut out = String::new();
    let title = title(report);
    out.push_str(&format!("{title}\n{}\n", "=".repeat(title.chars().count())));
    out.push_str(&links::text(links::execution(report)));
    for section in sections(report) {
        out.push('\n');
        if let Some(heading) = &section.heading {
            out.push_str(&format!("{heading}\n"));
        }
        for line in &section.lines {
            out.push_str(&format!(
                "{}\n",
                replay_ledger_core::shared::text::inert(line)
            ));
        }
        if let Some(table) = &section.table {
            out.push_str(&table.text());
        }
    }
    out.push_str(&links::text(links::review(report)));
    out.push_str(&format!("\n-- \n{}\n", footer(report)));
    out
}

/// The HTML part: a complete document, inline styles only. Each block ends its line of the
/// message's source (the `"\n"`s), so the source reads block by block.
pub fn html(report: &Report) -> String {
    html! {
        (DOCTYPE) "\n"
        html lang="pt-BR" {
            "\n"
            head { "\n" meta charset="utf-8"; "\n" title { (subject(report)) } "\n" }
            "\n"
            body style="font-family: Arial, Helvetica, sans-serif; font-size: 14px; color: #222222; margin: 16px;" {
                "\n"
                h2 style="font-size: 18px; margin: 0 0 12px 0;" { (title(report)) } "\n"
                (links::html(links::execution(report)))
                @for section in sections(report) { (section.html()) }
                (links::html(links::review(report)))
                p style="margin-top: 24px; color: #666666; font-size: 12px;" { (footer(report)) } "\n"
            }
            "\n"
        }
        "\n"
    }
    .into_string()
}

fn title(report: &Report) -> String {
    match &report.execution {
        Some(e) => format!(
            "Reprocessamento {} ({})",
            e.execution_id,
            mode_label(e.mode)
        ),
        None => format!("Fila de revisão ({})", report.sender),
    }
}

fn footer(report: &Report) -> String {
    let mut footer = format!(
        "Gerado por replay-ledger ({}) em {}.",
        report.sender,
        time(report.generated_at, report.timezone)
    );
    if let Some(e) = &report.execution {
        footer.push_str(&format!(
            " O anexo {} traz o diff completo: uma linha por pedido (pedido_id, antes, depois, diferenca), valores em centavos; antes vazio = pedido sem comissão.",
            csv_name(e)
        ));
    }
    footer
}

/// A part of the report: a heading, lines of prose, a table.
struct Section {
    heading: Option<String>,
    lines: Vec<String>,
    table: Option<Table>,
}

impl Section {
    /// The section in the HTML part: what the text part says, as a heading, paragraphs, a table.
    fn html(&self) -> Markup {
        html! {
            @if let Some(heading) = &self.heading {
                h3 style="font-size: 15px; margin: 18px 0 6px 0;" { (heading) } "\n"
            }
            @for line in &self.lines { p style="margin: 4px 0;" { (line) } "\n" }
            @if let Some(table) = &self.table { (table.html()) }
        }
    }
}

fn sections(report: &Report) -> Vec<Section> {
    let mut out = Vec::new();
    if let Some(e) = &report.execution {
        out.push(identity(e, report.timezone));
        out.push(summary(e));
        if let Some(check) = &e.approved {
            out.push(approval(check, report.timezone, e.state));
        }
        out.push(rows_section(
            format!("As {} maiores alterações", e.largest.len()),
            &e.largest,
            e.largest.len(),
            "Nenhum pedido alterado.",
        ));
        out.push(rows_section(
            format!(
                "Pedidos novos (sem comissão antes): {}",
                group_thousands(e.new_count as u64)
            ),
            &e.new_orders,
            e.new_count,
            "Nenhum.",
        ));
        out.push(rows_section(
            format!(
                "Pedidos com comissão reduzida: {}",
                group_thousands(e.decreased_count as u64)
            ),
            &e.decreased,
            e.decreased_count,
            "Nenhum.",
        ));
        out.push(effects(&e.summary.effects));
        out.push(rejected(e));
    }
    out.push(review(report));
    out
}

fn identity(e: &ExecutionReport, tz: Tz) -> Section {
    let window = match (e.window_from, e.window_to) {
        (Some(from), Some(to)) => format!("{} → {}", time(from, tz), time(to, tz)),
        _ => "-".into(),
    };
    let mode = match e.mode {
        Mode::Simulation => {
            "simulação: nada foi gravado em comissao nem enviado; é a prévia para aprovação"
        }
        _ => "execução real: comissao corrigida e efeitos que faltavam executados",
    };
    let rows = vec![
        kv("Execução", format!("{} (passagem {})", e.key, e.pass)),
        kv("Job", e.job.clone()),
        kv("Modo", mode.to_string()),
        kv("Janela", window),
        kv(
            "Iniciada",
            format!("{} por {}", time(e.started_at, tz), e.started_by),
        ),
        kv(
            "Concluída",
            e.finished_at.map_or("-".into(), |t| time(t, tz)),
        ),
        kv("Situação", state_label(e.state).to_string()),
    ];
    Section {
        heading: None,
        lines: Vec::new(),
        table: Some(Table::key_value(rows, false)),
    }
}

fn summary(e: &ExecutionReport) -> Section {
    let rows = figure_rows(e.mode, &e.summary)
        .into_iter()
        .map(|(label, value)| kv(label, value))
        .collect();
    Section {
        heading: Some("Resumo".into()),
        lines: Vec::new(),
        table: Some(Table::key_value(rows, true)),
    }
}

/// An execution's figures (its tallies) as the report and the console both show them, label and
/// value: one list, so the two say the same. A real run's "Pedidos no diff" are its corrections;
/// events read in an older payload shape (upcast) are counted when there were any.
pub fn figure_rows(mode: Mode, s: &Summary) -> Vec<(&'static str, String)> {
    let t = Totals::of_summary(mode == Mode::Simulation, s);
    let mut rows = vec![("Eventos lidos", group_thousands(s.events_read))];
    // Only when there were some: most windows hold only today's shape.
    if s.events_upcast > 0 {
        rows.push((
            "Eventos em formato antigo (convertidos)",
            group_thousands(s.events_upcast),
        ));
    }
    rows.extend([
        (
            "Eventos ignorados (outros tipos)",
            group_thousands(s.events_skipped),
        ),
        ("Eventos rejeitados", group_thousands(s.events_rejected)),
        ("Pedidos no diff", group_thousands(t.orders)),
        ("Pedidos alterados", group_thousands(t.changed)),
        ("Comissões antes", brl(t.before_centavos)),
        ("Comissões depois", brl(t.after_centavos)),
        ("Diferença", brl_signed(t.difference())),
    ]);
    rows
}

/// What a real run of an approved simulation says about the approval, as the report and the
/// console both show it: the approved simulation's diff, and (once the run is finished) whether
/// it applied exactly that; a run still going says what it applied so far, and claims nothing.
pub fn approval_lines(check: &super::approved::Check, tz: Tz, state: State) -> Vec<String> {
    let (a, b) = (&check.approved, &check.applied);
    let who = format!("aprovado por {} em {}", check.by, time(check.at, tz));
    let mut lines = vec![format!(
        "Simulação aprovada: {} no diff, {} alterados, {}.",
        plural(a.orders, "pedido", "pedidos"),
        group_thousands(a.changed),
        brl_signed(a.difference())
    )];
    lines.push(if state != State::Finished {
        format!(
            "Execução {}: corrigidos até agora {} pedidos, {}; o confronto com o que foi {who} sai ao concluir.",
            state_label(state),
            group_thousands(b.changed),
            brl_signed(b.difference())
        )
    } else if check.exact() {
        format!(
            "Aplicou exatamente o que foi {who}: {} pedidos, {}.",
            group_thousands(b.changed),
            brl_signed(b.difference())
        )
    } else {
        format!(
            "Não aplicou exatamente o que foi {who}: aprovado {} pedidos, {}; aplicado {} pedidos, {}.",
            group_thousands(a.changed),
            brl_signed(a.difference()),
            group_thousands(b.changed),
            brl_signed(b.difference())
        )
    });
    if check.difference_count > check.differences.len() as u64 {
        lines.push(format!(
            "Os primeiros {} de {} pedidos diferentes.",
            check.differences.len(),
            group_thousands(check.difference_count)
        ));
    }
    lines
}

/// Approved = applied: whether the real run changed exactly what was approved.
fn approval(check: &super::approved::Check, tz: Tz, state: State) -> Section {
    let lines = approval_lines(check, tz, state);
    let table = (!check.differences.is_empty()).then(|| Table {
        headers: vec!["pedido", "aprovado", "aplicado"],
        right: vec![false, true, true],
        rows: check
            .differences
            .iter()
            .map(|d| {
                let show = |v: Option<i64>| v.map_or("-".into(), brl);
                vec![d.pedido_id.clone(), show(d.approved), show(d.applied)]
            })
            .collect(),
    });
    Section {
        heading: Some("Aprovação".into()),
        lines,
        table,
    }
}

fn rows_section(heading: String, rows: &[DiffRow], total: usize, empty: &str) -> Section {
    let mut lines = Vec::new();
    if rows.is_empty() {
        lines.push(empty.to_string());
    } else if total > rows.len() {
        lines.push(format!(
            "Os primeiros {} de {} (todos no anexo CSV).",
            rows.len(),
            group_thousands(total as u64)
        ));
    }
    let table = (!rows.is_empty()).then(|| Table {
        headers: vec!["pedido", "antes", "depois", "diferença"],
        right: vec![false, true, true, true],
        rows: rows
            .iter()
            .map(|r| {
                vec![
                    r.pedido_id.clone(),
                    r.antes.map_or("-".into(), brl),
                    brl(r.depois),
                    brl_signed(r.diferenca()),
                ]
            })
            .collect(),
    });
    Section {
        heading: Some(heading),
        lines,
        table,
    }
}

/// What each effect outcome means, for a reader who does not know the seed's names.
pub fn meaning(outcome: EffectOutcome) -> &'static str {
    match outcome {
        EffectOutcome::Applied => "executado por esta execução",
        EffectOutcome::AppliedEarlier => {
            "executado por esta execução numa tentativa anterior (interrompida)"
        }
        EffectOutcome::AlreadyRegistered => "já constava no ledger antes desta execução",
        EffectOutcome::WouldApply => "seria executado pela execução real",
        EffectOutcome::Suppressed => "não executado, por política do job",
        EffectOutcome::Uncertain => "resultado desconhecido: aguarda revisão",
        EffectOutcome::Released => "falhou e será tentado de novo",
    }
}

fn effects(counts: &BTreeMap<EffectOutcome, u64>) -> Section {
    let rows: Vec<Vec<String>> = counts
        .iter()
        .map(|(outcome, n)| {
            vec![
                outcome.to_string(),
                group_thousands(*n),
                meaning(*outcome).to_string(),
            ]
        })
        .collect();
    Section {
        heading: Some("Efeitos".into()),
        lines: if rows.is_empty() {
            vec!["Nenhum efeito.".into()]
        } else {
            Vec::new()
        },
        table: (!rows.is_empty()).then(|| Table {
            headers: vec!["resultado", "quantidade", "significado"],
            right: vec![false, true, false],
            rows,
        }),
    }
}

fn rejected(e: &ExecutionReport) -> Section {
    let shown: Vec<Vec<String>> = e
        .rejected
        .iter()
        .take(LIST_LIMIT)
        .map(|r| {
            vec![
                r.event_id.clone(),
                r.posicao.to_string(),
                r.tipo.clone(),
                r.erro.clone(),
            ]
        })
        .collect();
    let mut lines = Vec::new();
    if shown.is_empty() {
        lines.push("Nenhum.".to_string());
    } else if e.rejected.len() > shown.len() {
        lines.push(format!(
            "Os primeiros {} de {} (tabela evento_rejeitado).",
            shown.len(),
            group_thousands(e.rejected.len() as u64)
        ));
    }
    Section {
        heading: Some(format!(
            "Eventos rejeitados: {}",
            group_thousands(e.rejected.len() as u64)
        )),
        lines,
        table: (!shown.is_empty()).then(|| Table {
            headers: vec!["evento", "posição", "tipo", "erro"],
            right: vec![false, true, false, false],
            rows: shown,
        }),
    }
}

fn review(report: &Report) -> Section {
    let rows: Vec<Vec<String>> = report
        .review
        .iter()
        .map(|i| {
            vec![
                i.key.clone(),
                state_of(i).to_string(),
                i.effect_type.clone(),
                i.execution_id.clone(),
                age(i.idade_segundos),
                i.tentativas.to_string(),
                i.ultimo_erro.clone().unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    let mut lines = Vec::new();
    if rows.is_empty() {
        lines.push("Vazia: nenhum efeito com resultado desconhecido.".to_string());
    } else {
        lines.push("Resultado desconhecido: nunca reenviados automaticamente. Quem confirmar o que aconteceu registra com `replay-ledger review resolve CHAVE --sent` (saiu) ou `--not-sent` (não saiu; a próxima varredura o envia).".to_string());
        let queued = report.review.iter().filter(|i| i.status == QUEUED).count();
        if queued > 0 {
            lines.push(format!(
                "{} com reenvio pendente: a próxima varredura {}, sem esperar decisão.",
                group_thousands(queued as u64),
                if queued == 1 { "o envia" } else { "os envia" }
            ));
        }
        if report.review_total > rows.len() {
            lines.push(format!(
                "Os {} mais antigos de {} (`replay-ledger review list`).",
                rows.len(),
                group_thousands(report.review_total as u64)
            ));
        }
    }
    Section {
        heading: Some(format!(
            "Fila de revisão (efeitos incertos): {}",
            group_thousands(report.review_total as u64)
        )),
        lines,
        table: (!rows.is_empty()).then(|| Table {
            headers: vec![
                "chave",
                "situação",
                "tipo",
                "execução",
                "idade",
                "tentativas",
                "último erro",
            ],
            right: vec![false, false, false, false, true, true, false],
            rows,
        }),
    }
}

/// A review item's state in the words the console uses: waiting for a decision, or queued by
/// one (`--not-sent`) for the next sweep.
fn state_of(item: &ReviewItem) -> &'static str {
    if item.status == QUEUED {
        "reenvio pendente"
    } else {
        "incerto"
    }
}

fn kv(label: &str, value: String) -> Vec<String> {
    vec![label.to_string(), value]
}

pub fn mode_label(mode: Mode) -> &'static str {
    match mode {
        Mode::Simulation => "simulação",
        _ => "execução real",
    }
}

pub fn state_label(state: State) -> &'static str {
    match state {
        State::Finished => "concluída",
        State::Running => "em andamento",
        State::Failed => "falhou",
        State::Interrupted => "interrompida",
    }
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{} {}", group_thousands(n), if n == 1 { one } else { many })
}

/// A time as the report shows it (and the console, so the two read alike): minutes and offset, in
/// `tz`.
pub fn time(t: DateTime<Utc>, tz: Tz) -> String {
    t.with_timezone(&tz)
        .format("%Y-%m-%d %H:%M %:z")
        .to_string()
}

/// `3 min`, `2 h 05 min`, `4 d 3 h`: how old a review item is, in the report and the console.
pub fn age(seconds: i64) -> String {
    let s = seconds.max(0);
    let (d, h, m) = (s / 86_400, s % 86_400 / 3600, s % 3600 / 60);
    match (d, h) {
        (0, 0) => format!("{m} min"),
        (0, _) => format!("{h} h {m:02} min"),
        _ => format!("{d} d {h} h"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_in_minutes_hours_or_days() {
        assert_eq!(age(59), "0 min");
        assert_eq!(age(7_380), "2 h 03 min");
        assert_eq!(age(4 * 86_400 + 3 * 3600), "4 d 3 h");
    }

    #[test]
    fn counts_agree_in_number() {
        assert_eq!(plural(1, "pedido", "pedidos"), "1 pedido");
        assert_eq!(plural(4812, "pedido", "pedidos"), "4.812 pedidos");
    }
}
