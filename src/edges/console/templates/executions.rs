//! The executions list and an execution's page.

use chrono_tz::Tz;
use maud::{html, Markup};

use super::super::session::Session;
use super::super::views::{Gate, Standing};
use super::{
    facts, figures, layout, layout_refreshing, query_value, segment, time, Attr, Inert, Part,
};
use crate::services::report::render::{approval_lines, mode_label, state_label};
use crate::services::report::{approved, ExecutionReport, LIST_LIMIT};
use replay_ledger_core::shared::money::{brl, brl_signed, group_thousands};
use replay_ledger_core::shared::summary::Totals;
use replay_ledger_core::shared::text::natural_cmp;
use replay_ledger_core::tables::commission::DiffRow;
use replay_ledger_core::tables::execution::{Execution, Mode, PassRecord, State};

/// Diff rows per page of an execution's page.
pub(in crate::edges::console) const PAGE_SIZE: usize = 50;

/// Which executions the list shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::edges::console) enum Wanted {
    All,
    State(State),
    /// Finished simulations of gated jobs that nobody approved yet.
    Awaiting,
}

/// The list's filter: the jobs to choose from, what is chosen, and how many executions are in
/// each state.
pub(in crate::edges::console) struct Filter<'a> {
    pub jobs: Vec<&'a str>,
    pub job: Option<&'a str>,
    pub wanted: Wanted,
    pub counts: Vec<(State, usize)>,
    /// Keys of the simulations awaiting approval.
    pub awaiting: &'a std::collections::BTreeSet<String>,
    /// Started within these days (in the console's timezone), when given.
    pub since: Option<chrono::NaiveDate>,
    pub until: Option<chrono::NaiveDate>,
    pub order: Order,
    /// Who asked from the console for a run: execution key → `console:<email>`.
    pub askers: &'a std::collections::HashMap<String, String>,
}

/// The list's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::edges::console) enum Order {
    Newest,
    Oldest,
    /// The largest difference (in absolute value) first.
    Difference,
}

impl Order {
    pub fn apply(self, list: &mut [&Execution]) {
        match self {
            Order::Newest => list.sort_by_key(|e| std::cmp::Reverse(e.started_at)),
            Order::Oldest => list.sort_by_key(|e| e.started_at),
            Order::Difference => list.sort_by(|a, b| {
                let size = |e: &Execution| totals(e).difference().unsigned_abs();
                size(b)
                    .cmp(&size(a))
                    .then_with(|| b.started_at.cmp(&a.started_at))
            }),
        }
    }

    fn word(self) -> &'static str {
        match self {
            Order::Newest => "recentes",
            Order::Oldest => "antigas",
            Order::Difference => "diferenca",
        }
    }
}

/// Who started a run, as people say it: the account that asked from the console, else the role
/// and host that ran it.
fn started_by<'a>(
    e: &'a Execution,
    askers: &'a std::collections::HashMap<String, String>,
) -> &'a str {
    let id = replay_ledger_core::tables::execution::execution_id_of(&e.key);
    match askers.get(&e.key).or_else(|| askers.get(id)) {
        Some(by) if e.mode != Mode::Simulation => by.strip_prefix("console:").unwrap_or(by),
        _ => &e.started_by,
    }
}

fn totals(e: &Execution) -> Totals {
    Totals::of_summary(e.mode == Mode::Simulation, &e.summary)
}

fn progress(e: &Execution) -> String {
    e.progress_percent()
        .map_or("-".into(), |p| format!("{p:.0} %"))
}

fn mode(e: &Execution) -> &'static str {
    match e.mode {
        Mode::Live => "ao vivo",
        other => mode_label(other),
    }
}

/// `GET /`.
pub(in crate::edges::console) fn list(
    session: &Session,
    tz: Tz,
    executions: &[&Execution],
    filter: &Filter<'_>,
    scheduled: &[crate::services::scheduler::status::JobStatus],
) -> Markup {
    let chip = |label: &str, word: &str, n: usize, on: bool| {
        let href = match filter.job {
            Some(job) => format!("/?job={}&state={word}", query_value(job)),
            None => format!("/?state={word}"),
        };
        html! { a.chip href=(href) aria-current=[on.then_some("true")] { (label) " " span.count { (n) } } }
    };
    let body = html! {
        nav.counts #counts {
            @for (s, n) in &filter.counts {
                (chip(state_label(*s), s.as_db(), *n, filter.wanted == Wanted::State(*s)))
            }
            (chip("aguardando aprovação", "aguardando-aprovacao", filter.awaiting.len(), filter.wanted == Wanted::Awaiting))
        }
        form.filter method="get" action="/" {
            label for="job" { "Job" }
            select #job name="job" {
                option value="" { "todos" }
                @for job in &filter.jobs {
                    option value=(Attr(job)) selected[filter.job == Some(*job)] { (Inert(job)) }
                }
            }
            label for="state" { "Situação" }
            select #state name="state" {
                option value="" { "todas" }
                @for s in State::ALL {
                    option value=(s.as_db()) selected[filter.wanted == Wanted::State(*s)] { (state_label(*s)) }
                }
                option value="aguardando-aprovacao" selected[filter.wanted == Wanted::Awaiting] { "aguardando aprovação" }
            }
            label for="desde" { "De" }
            input #desde type="date" name="desde" value=[filter.since.map(|d| d.to_string())];
            label for="ate" { "Até" }
            input #ate type="date" name="ate" value=[filter.until.map(|d| d.to_string())];
            label for="ordem" { "Ordem" }
            select #ordem name="ordem" {
                @for (o, label) in [(Order::Newest, "mais recentes"), (Order::Oldest, "mais antigas"), (Order::Difference, "maior diferença")] {
                    option value=(o.word()) selected[filter.order == o] { (label) }
                }
            }
            button type="submit" { "Filtrar" }
        }
        p.more { a href="/reconstrucao" { "Reconstrução de comissao (blue-green)" } }
        @if executions.is_empty() {
            p { "Nenhuma execução." }
        } @else {
            div.scroll { table.data #executions {
                thead { tr {
                    th { "Execução" } th { "Job" } th { "Modo" } th { "Situação" }
                    th.num { "Progresso" } th.num { "Eventos" } th.num { "Pedidos alterados" }
                    th.num { "Antes" } th.num { "Depois" } th.num { "Diferença" }
                    th { "Iniciada por" } th { "Iniciada em" }
                } }
                tbody {
                    @for e in executions {
                        @let t = totals(e);
                        tr {
                            td { a href={ "/executions/" (segment(&e.key)) } { (Inert(&e.key)) } }
                            td { (Inert(&e.job)) }
                            td { (mode(e)) }
                            td { (state_label(e.state))
                                @if filter.awaiting.contains(&e.key) { br; span.badge { "aguardando aprovação" } } }
                            td.num { (progress(e)) }
                            td.num { (group_thousands(e.summary.events_read)) }
                            td.num { (group_thousands(t.changed)) }
                            td.num { (brl(t.before_centavos)) }
                            td.num { (brl(t.after_centavos)) }
                            td.num { (brl_signed(t.difference())) }
                            td.started-by { (Inert(started_by(e, filter.askers))) }
                            td { (time(e.started_at, tz)) }
                        }
                    }
                }
            } }
        }
        (super::scheduled::section(scheduled, tz))
    };
    // While something runs, the list moves: it reloads itself like a running execution's page.
    let running = filter
        .counts
        .iter()
        .any(|(state, n)| *state == State::Running && *n > 0);
    if running {
        layout_refreshing("Execuções", Part::Executions, session, body)
    } else {
        layout("Execuções", Part::Executions, session, body)
    }
}

/// What an execution's page shows.
pub(in crate::edges::console) struct Detail<'a> {
    pub session: &'a Session,
    pub tz: Tz,
    pub execution: &'a Execution,
    /// The verify job's proposal this execution's job is, if it is one.
    pub proposal: Option<&'a replay_ledger_core::tables::proposals::Proposal>,
    /// The run's pace over time, for its chart.
    pub samples: &'a [replay_ledger_core::tables::execution::progress::Sample],
    /// `None` for the live consumer (no diff).
    pub report: Option<&'a ExecutionReport>,
    pub standing: &'a Standing,
    /// What the account may ask `serve` for, and the requests about this execution.
    pub offer: &'a super::requests::Offer,
    pub requests: &'a [replay_ledger_core::tables::requests::Request],
    pub search: Option<&'a str>,
    /// Only the diff's rows whose commission changes.
    pub only_changed: bool,
    pub page: usize,
    /// Every pass of the execution, the newest first.
    pub passes: &'a [PassRecord],
    /// How the diff is ordered (default: by order id, ascending).
    pub sort: Sort,
    /// A running execution's pace, as its runners published it lately.
    pub paces: &'a [replay_ledger_core::tables::execution::progress::Pace],
}

/// A column the diff sorts by (`?sort=pedido|antes|depois|diferenca&dir=asc|desc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(in crate::edges::console) enum SortKey {
    #[default]
    Order,
    Before,
    After,
    Difference,
}

impl SortKey {
    pub fn parse(word: &str) -> Option<SortKey> {
        Some(match word {
            "pedido" => SortKey::Order,
            "antes" => SortKey::Before,
            "depois" => SortKey::After,
            "diferenca" => SortKey::Difference,
            _ => return None,
        })
    }

    fn word(self) -> &'static str {
        match self {
            SortKey::Order => "pedido",
            SortKey::Before => "antes",
            SortKey::After => "depois",
            SortKey::Difference => "diferenca",
        }
    }
}

/// The diff's order: a column and a direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(in crate::edges::console) struct Sort {
    pub key: SortKey,
    pub descending: bool,
}

impl Sort {
    fn apply(self, rows: &mut [&DiffRow]) {
        rows.sort_by(|a, b| {
            let by = match self.key {
                SortKey::Order => natural_cmp(&a.pedido_id, &b.pedido_id),
                SortKey::Before => a.antes.cmp(&b.antes),
                SortKey::After => a.depois.cmp(&b.depois),
                SortKey::Difference => a.diferenca().cmp(&b.diferenca()),
            };
            let by = by.then_with(|| natural_cmp(&a.pedido_id, &b.pedido_id));
            if self.descending {
                by.reverse()
            } else {
                by
            }
        });
    }

    fn query(self) -> String {
        format!(
            "sort={}&dir={}",
            self.key.word(),
            if self.descending { "desc" } else { "asc" }
        )
    }
}

/// `GET /executions/{id}`. Every figure is the loaded row's (one snapshot of the tallies); the
/// lists, written as batches go, are shown once the execution is finished, so no list runs ahead
/// of the figures. A running execution's page refreshes itself every few seconds.
pub(in crate::edges::console) fn detail(d: Detail<'_>) -> Markup {
    let e = d.execution;
    let finished = e.state == State::Finished;
    let body = html! {
        (identity(e, d.tz))
        @if let Some(p) = d.proposal { (proposal(p, d.tz)) }
        @if e.state == State::Running { (super::pace::section(d.paces)) }
        (super::pace::chart(d.samples, d.tz))
        (figures::figures(e.mode, &e.summary))
        (approval(d.session, e, d.standing, d.tz))
        (super::requests::section(e, d.offer, d.requests, d.tz))
        @if let Some(report) = d.report {
            @if let Some(check) = &report.approved { (applied(check, d.tz, e.state)) }
            (figures::effects(&e.summary))
            @if finished {
                (rows_section("largest", &format!("As {} maiores alterações", report.largest.len()), &report.largest, report.largest.len()))
                (rows_section("new", &format!("Pedidos novos (sem comissão antes): {}", group_thousands(report.new_count as u64)), &report.new_orders, report.new_count))
                (rows_section("decreased", &format!("Pedidos com comissão reduzida: {}", group_thousands(report.decreased_count as u64)), &report.decreased, report.decreased_count))
                (rejected(report))
                (diff(e, report, DiffView { search: d.search, only_changed: d.only_changed, page: d.page, sort: d.sort }))
            } @else {
                p #lists-pending { "As listas de pedidos e o diff aparecem quando a execução for concluída; os números acima contam os lotes já assentados." }
            }
        } @else {
            (figures::effects(&e.summary))
        }
        (figures::passes(e, d.passes, d.tz))
    };
    let title = format!(
        "Execução {}",
        replay_ledger_core::shared::text::inert(&e.key)
    );
    if e.state == State::Running || super::requests::any_open(d.requests) {
        layout_refreshing(&title, Part::Executions, d.session, body)
    } else {
        layout(&title, Part::Executions, d.session, body)
    }
}

fn identity(e: &Execution, tz: Tz) -> Markup {
    let window = match (e.window_from, e.window_to) {
        (Some(from), Some(to)) => format!("{} → {}", time(from, tz), time(to, tz)),
        _ => "-".into(),
    };
    let mut rows = vec![
        ("Execução", format!("{} (passagem {})", e.key, e.pass)),
        ("Job", e.job.clone()),
        ("Modo", mode(e).to_string()),
        ("Situação", state_label(e.state).to_string()),
        ("Progresso", progress(e)),
        ("Janela", window),
        (
            "Iniciada",
            format!("{} por {}", time(e.started_at, tz), e.started_by),
        ),
        (
            "Concluída",
            e.finished_at.map_or("-".into(), |t| time(t, tz)),
        ),
    ];
    // The rule it computed with, as recorded with it: a candidate's simulation says which.
    if let Some(rule) = e.definition.as_ref().and_then(|d| d.get("rule")?.as_str()) {
        rows.push(("Regra", rule.to_string()));
    }
    if let Some(error) = &e.error {
        rows.push(("Erro", error.clone()));
    }
    if let Some(by) = &e.interrupt_asked_by {
        let at = e
            .interrupt_asked_at
            .map(|t| time(t, tz))
            .unwrap_or_default();
        let what = if e.state == State::Running {
            "para ao fim do lote em curso"
        } else {
            "parou no checkpoint acima"
        };
        rows.push(("Interrupção pedida", format!("{at} por {by}: {what}")));
    }
    html! { section #identity { h2 { "Execução" } (facts(&rows)) } }
}

/// A proposal's job: who proposed it for which day, what verify found, and its definition.
fn proposal(p: &replay_ledger_core::tables::proposals::Proposal, tz: Tz) -> Markup {
    html! { section #proposal {
        h2 { "Correção proposta por " (Inert(&p.verify_job)) }
        p { "A verificação " (Inert(&p.verify_job)) " encontrou o dia " (p.day.format("%d/%m/%Y"))
            " errado (" (group_thousands(p.orders_wrong as u64)) " pedido(s) com valor ou versão errada, "
            (group_thousands(p.orders_missing as u64)) " sem comissão, "
            (group_thousands(p.effects_missing as u64)) " efeito(s) faltando; diferença "
            (brl_signed(p.difference_cents)) ") e propôs esta correção em " (time(p.proposed_at, tz))
            ". Ela não está no diretório de jobs: fica guardada no banco, e a aprovação a liga a esta definição como a de qualquer job." }
        details open { summary { "Definição do job" } pre.definition { (p.definition) } }
    } }
}

fn approval(session: &Session, e: &Execution, standing: &Standing, tz: Tz) -> Markup {
    let action = format!("/executions/{}/approve", segment(&e.key));
    let inner = match standing {
        Standing::NotNeeded => return html! {},
        Standing::NoJob(why) => html! {
            p.warning { "O job desta simulação não pôde ser lido no diretório de jobs: " (Inert(why)) }
        },
        Standing::Unfinished => html! { p { "Simulação não concluída: nada a aprovar ainda." } },
        Standing::Approvable if session.role.may_approve() => html! {
            p { "Simulação concluída, nada mudou desde então: a aprovação liga esta prévia à execução real." }
            p { a.button #approve-link href=(action) { "Revisar e aprovar…" } }
        },
        Standing::Approvable => html! {
            p { "Aguardando aprovação de uma conta de finanças." }
        },
        Standing::Changed { what, fields } => html! {
            p.warning { "Não pode ser aprovada: algo mudou desde a simulação. Peça uma nova simulação e aprove a nova." }
            @if session.role.may_start() {
                p { a.button #resimulate-link href={ "/executions/" (segment(&e.key)) "/resimulate" } { "Simular de novo" } }
            }
            @if fields.is_empty() {
                p { "Detalhe: " code { (Inert(what)) } }
            } @else {
                table.data #changes {
                    thead { tr { th { "Campo" } th { "Na simulação" } th { "Agora" } } }
                    tbody { @for f in fields { tr {
                        td { (Inert(&f.field)) }
                        td { (Inert(f.then.as_deref().unwrap_or("(ausente)"))) }
                        td { (Inert(f.now.as_deref().unwrap_or("(ausente)"))) }
                    } } }
                }
            }
        },
        Standing::Approved { approval, gate } => html! {
            p.ok #approved { "Aprovada por " (Inert(&approval.by)) " em " (time(approval.at, tz))
                @if let Some(note) = &approval.note { " — “" (Inert(note)) "”" } "." }
            @match gate {
                Gate::Open => p { "A execução real pode começar." },
                Gate::Ran(key) => p { "A execução real já rodou: " a href={ "/executions/" (segment(key)) } { (Inert(key)) } "." },
                Gate::Closed(why) => p.warning { "A execução real seria recusada agora: " (Inert(why)) },
            }
        },
    };
    html! { section #approval { h2 { "Aprovação" } (inner) } }
}

/// A real run of an approved simulation: the approved diff and whether it applied exactly that,
/// in the report's words.
fn applied(check: &approved::Check, tz: Tz, state: State) -> Markup {
    let lines = approval_lines(check, tz, state);
    let ok = state == State::Finished && check.exact();
    let warn = state == State::Finished && !check.exact();
    html! {
        section #applied {
            h2 { "Aprovado × aplicado" }
            @for line in &lines {
                p.ok[ok].warning[warn] { (Inert(line)) }
            }
        }
    }
}

fn diff_row(r: &DiffRow) -> Markup {
    html! {
        tr {
            td { a href={ "/pedidos/" (segment(&r.pedido_id)) } { (Inert(&r.pedido_id)) } }
            td.num { (r.antes.map_or("-".into(), brl)) }
            td.num { (brl(r.depois)) }
            td.num { (brl_signed(r.diferenca())) }
        }
    }
}

fn diff_table(rows: &[DiffRow]) -> Markup {
    html! {
        div.scroll { table.data {
            thead { tr { th { "Pedido" } th.num { "Antes" } th.num { "Depois" } th.num { "Diferença" } } }
            tbody { @for r in rows { (diff_row(r)) } }
        } }
    }
}

fn rows_section(id: &str, heading: &str, rows: &[DiffRow], total: usize) -> Markup {
    html! {
        section id=(id) {
            h2 { (heading) }
            @if rows.is_empty() { p { "Nenhum." } }
            @else {
                @if total > rows.len() { p { "Os primeiros " (rows.len()) " de " (group_thousands(total as u64)) " (todos no CSV)." } }
                (diff_table(rows))
            }
        }
    }
}

fn rejected(report: &ExecutionReport) -> Markup {
    html! {
        section #rejected {
            h2 { "Eventos rejeitados: " (group_thousands(report.rejected.len() as u64)) }
            @if report.rejected.is_empty() { p { "Nenhum." } }
            @else {
                @if report.rejected.len() > LIST_LIMIT { p { "Os primeiros " (LIST_LIMIT) " (tabela evento_rejeitado)." } }
                table.data {
                    thead { tr { th { "Evento" } th.num { "Posição" } th { "Tipo" } th { "Erro" } } }
                    tbody { @for r in report.rejected.iter().take(LIST_LIMIT) { tr {
                        td { (Inert(&r.event_id)) } td.num { (r.posicao) } td { (Inert(&r.tipo)) } td { (Inert(&r.erro)) }
                    } } }
                }
            }
        }
    }
}

/// How the diff is shown: searched, only its changes, which page, in which order.
struct DiffView<'a> {
    search: Option<&'a str>,
    only_changed: bool,
    page: usize,
    sort: Sort,
}

/// The whole diff, searched by `pedido_id`, sorted and paginated, with the CSV and XLSX links.
fn diff(e: &Execution, report: &ExecutionReport, view: DiffView<'_>) -> Markup {
    let DiffView {
        search,
        only_changed,
        page,
        sort,
    } = view;
    let base = format!("/executions/{}", segment(&e.key));
    let mut found: Vec<&DiffRow> = report
        .rows
        .iter()
        .filter(|r| !only_changed || r.antes != Some(r.depois))
        // The id as typed, or as the page shows it (a control character escaped).
        .filter(|r| {
            search.is_none_or(|q| {
                r.pedido_id.contains(q)
                    || replay_ledger_core::shared::text::inert(&r.pedido_id).contains(q)
            })
        })
        .collect();
    sort.apply(&mut found);
    let pages = found.len().div_ceil(PAGE_SIZE).max(1);
    let page = page.min(pages);
    let shown: Vec<DiffRow> = found
        .iter()
        .skip((page - 1) * PAGE_SIZE)
        .take(PAGE_SIZE)
        .map(|r| (*r).clone())
        .collect();
    let mut q = search.map_or(String::new(), |q| format!("q={}&", query_value(q)));
    if only_changed {
        q.push_str("alterados=1&");
    }
    let link = |p: usize| format!("{base}?{q}{}&page={p}#diff", sort.query());
    let header = |key: SortKey, label: &str, numeric: bool| {
        let descending = sort.key == key && !sort.descending;
        let to = Sort { key, descending };
        let mark = match (sort.key == key, sort.descending) {
            (true, false) => " ▲",
            (true, true) => " ▼",
            _ => "",
        };
        html! {
            th.num[numeric] { a.sort href={ (base) "?" (q) (to.query()) "#diff" } { (label) (mark) } }
        }
    };
    html! {
        section #diff {
            h2 { "Diff completo" }
            p.downloads {
                a #csv href={ (base) "/diff.csv" } download { "Baixar CSV (" (group_thousands(report.rows.len() as u64)) " pedidos)" }
                " · "
                a #xlsx href={ (base) "/diff.xlsx" } download { "Baixar planilha (XLSX)" }
            }
            form.filter method="get" action=(base) {
                label for="q" { "Pedido" }
                input #q type="search" name="q" value=(Attr(search.unwrap_or("")));
                label.check { input #only-changed type="checkbox" name="alterados" value="1" checked[only_changed]; " só os alterados" }
                button type="submit" { "Buscar" }
            }
            p #diff-count { (group_thousands(found.len() as u64)) " pedidos"
                @if let Some(q) = search { " com “" (Inert(q)) "”" } "; página " (page) " de " (pages) "." }
            @if !shown.is_empty() {
                div.scroll { table.data {
                    thead { tr {
                        (header(SortKey::Order, "Pedido", false))
                        (header(SortKey::Before, "Antes", true))
                        (header(SortKey::After, "Depois", true))
                        (header(SortKey::Difference, "Diferença", true))
                    } }
                    tbody { @for r in &shown { (diff_row(r)) } }
                } }
            }
            nav.pages {
                @if page > 1 { a rel="prev" href=(link(page - 1)) { "← anterior" } }
                @if page < pages { a rel="next" href=(link(page + 1)) { "próxima →" } }
            }
        }
    }
}
