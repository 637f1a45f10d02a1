//! One truth on every page, at every moment: during a slow real run the
//! execution page's figures agree with each other and never run ahead of `status --json`; after
//! it they equal it; the real run's page and its report state the same diff; an earlier pass
//! stays reachable after a `--restart`.

use std::time::Duration;

use testkit::sink::Behavior;

use super::*;

/// A figure of an execution's page: the value of the facts row labelled `label`, as a number.
fn fact(body: &str, label: &str) -> i64 {
    let at = body
        .find(&format!(">{label}</th>"))
        .unwrap_or_else(|| panic!("no “{label}” on the page:\n{body}"));
    let rest = &body[at..];
    let start = rest.find("<td>").expect("a value") + 4;
    let end = rest[start..].find("</td>").expect("its end") + start;
    let digits: String = rest[start..end]
        .chars()
        .filter(|c| c.is_ascii_digit() || *c == '-')
        .collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("“{label}”: {}", &rest[start..end]))
}

/// `status --json`'s entry for `execution`, if it is listed yet.
async fn status_of(
    db_url: &str,
    jobs: &std::path::Path,
    execution: &str,
) -> Option<serde_json::Value> {
    let out = run_bin_within(db_url, jobs, &["status", "--json"]).await;
    assert_success(&out, "status --json");
    let all: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    all["executions"]
        .as_array()?
        .iter()
        .find(|e| e["execution"] == execution)
        .cloned()
}

/// A day of 40 orders, a gated job over a provider that answers slowly, its simulation approved.
async fn approved_day(delay: Duration) -> (TestDb, tempfile::TempDir, testkit::sink::Sink) {
    let events = paid_orders(40);
    let db = seeded_db(&events, &[]).await;
    let provider = sink(Behavior {
        dedup: true,
        delay,
        ..Behavior::default()
    })
    .await;
    let spec = JobSpec {
        batch_size: 5,
        concurrency: 2,
        extra: "require_approved_simulation: true\n".into(),
        ..JobSpec::default()
    };
    let jobs = jobs_dir(&provider.url(), &spec);
    run_job(&db, jobs.path(), JOB, Some(true), false)
        .await
        .expect("the simulation");
    let out = run_bin(&db.url, jobs.path(), &["approve", JOB]).await;
    assert_success(&out, "approve");
    (db, jobs, provider)
}

#[tokio::test]
async fn during_a_slow_real_run_the_page_never_runs_ahead_of_status_and_agrees_with_itself() {
    let (db, jobs, _provider) = approved_day(Duration::from_millis(150)).await;
    add_user(&db.url, jobs.path(), "ana@financeiro.example", "finance").await;
    let console = ConsoleProc::start(&db.url, jobs.path(), &[]).await;
    let finance = Client::logged_in(&console, "ana@financeiro.example").await;
    let page = format!("/executions/{JOB}");
    let mut run = spawn_run_captured(&db.url, jobs.path(), JOB);

    let mut samples = 0;
    let mut seen_running = false;
    while run.try_wait().expect("the run").is_none() {
        let Some(before) = status_of(&db.url, jobs.path(), JOB).await else {
            continue; // the run has not started its pass yet
        };
        let answer = finance.get(&page).await;
        let after = status_entry(&db.url, jobs.path(), JOB).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        let body = &answer.body;
        let (read, changed) = (fact(body, "Eventos lidos"), fact(body, "Pedidos alterados"));
        for (label, figure, key) in [
            ("Eventos lidos", read, "events_read"),
            ("Pedidos alterados", changed, "orders_changed"),
        ] {
            let (low, high) = (before[key].as_i64().unwrap(), after[key].as_i64().unwrap());
            assert!(
                low <= figure && figure <= high,
                "{label} {figure} outside status --json's {low}..={high}"
            );
        }
        assert!(
            changed <= read,
            "orders changed ({changed}) beyond the events read ({read}) on one page"
        );
        if read == 0 {
            assert!(
                body.contains("Nenhum efeito"),
                "effects before any event: {body}"
            );
        }
        if body.contains("<td>em andamento</td>") {
            seen_running = true;
            assert!(body.contains(r#"<meta http-equiv="refresh" content="5">"#));
            assert!(
                !body.contains("Aplicou exatamente"),
                "a running run claims it applied what was approved"
            );
        }
        samples += 1;
    }
    let out = finish(run, "the real run").await;
    assert_success(&out, "the real run");
    assert!(
        samples > 0 && seen_running,
        "the page was read during the run"
    );

    let status = status_entry(&db.url, jobs.path(), JOB).await;
    let body = finance.get(&page).await.body;
    assert_eq!(
        fact(&body, "Eventos lidos"),
        status["events_read"].as_i64().unwrap()
    );
    assert_eq!(
        fact(&body, "Pedidos alterados"),
        status["orders_changed"].as_i64().unwrap()
    );
    assert_eq!(
        fact(&body, "Comissões depois"),
        status["total_after_cents"].as_i64().unwrap()
    );
    assert!(
        !body.contains("http-equiv=\"refresh\""),
        "a finished page stays put"
    );
}

#[tokio::test]
async fn the_real_runs_page_and_its_report_state_the_same_diff() {
    let (db, jobs, _provider) = approved_day(Duration::ZERO).await;
    add_user(&db.url, jobs.path(), "ana@financeiro.example", "finance").await;
    run_job(&db, jobs.path(), JOB, None, false)
        .await
        .expect("the real run");
    let console = ConsoleProc::start(&db.url, jobs.path(), &[]).await;
    let finance = Client::logged_in(&console, "ana@financeiro.example").await;
    let body = finance.get(&format!("/executions/{JOB}")).await.body;

    use replay_ledger::services::report::{render, Gated, Report};
    let report = Report::for_execution(
        &db.pool,
        JOB,
        JOB,
        chrono_tz::Tz::UTC,
        chrono::Utc::now(),
        &Gated::default(),
    )
    .await
    .expect("the report");
    let text = render::text(&report);
    let in_report = |label: &str| -> i64 {
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with(label))
            .unwrap_or_else(|| panic!("no {label} in the report:\n{text}"));
        line[label.len() + line.find(label).unwrap()..]
            .chars()
            .filter(char::is_ascii_digit)
            .collect::<String>()
            .parse()
            .unwrap()
    };
    assert_eq!(fact(&body, "Pedidos no diff"), 40, "{body}");
    for label in ["Pedidos no diff", "Pedidos alterados", "Eventos lidos"] {
        assert_eq!(fact(&body, label), in_report(label), "{label}");
    }
    let approved = "Simulação aprovada: 40 pedidos no diff, 40 alterados";
    assert!(body.contains(approved), "{body}");
    assert!(text.contains(approved), "{text}");
    assert!(body.contains("Aplicou exatamente o que foi aprovado"));
}

#[tokio::test]
async fn an_earlier_pass_stays_reachable_with_its_figures_after_a_restart() {
    let s = simulated().await;
    add_user(&s.db.url, s.jobs.path(), "vera@example.com", "viewer").await;
    let key = format!("{JOB}:simulacao");
    let first = status_entry(&s.db.url, s.jobs.path(), &key).await;
    sqlx::query(
        "update comissao set valor_centavos = valor_centavos + 1 where pedido_id = 'ped-1'",
    )
    .execute(&s.db.pool)
    .await
    .expect("move one order");
    run_job(&s.db, s.jobs.path(), JOB, Some(true), true)
        .await
        .expect("the second pass");
    let console = ConsoleProc::start(&s.db.url, s.jobs.path(), &[]).await;
    let viewer = Client::logged_in(&console, "vera@example.com").await;

    let current = viewer.get(&format!("/executions/{key}")).await.body;
    assert!(current.contains("id=\"passes\""), "{current}");
    let link = format!("/executions/{}?passagem=1", key.replace(':', "%3A"));
    let link_on_page = current.contains(&link.replace("%3A", ":")) || current.contains(&link);
    assert!(link_on_page, "a link to pass 1 on the page: {current}");

    let earlier = viewer.get(&format!("/executions/{key}?passagem=1")).await;
    assert_eq!(earlier.status, 200, "{}", earlier.body);
    for (label, json) in [
        ("Eventos lidos", "events_read"),
        ("Pedidos no diff", "orders_in_diff"),
        ("Pedidos alterados", "orders_changed"),
        ("Comissões depois", "total_after_cents"),
    ] {
        assert_eq!(
            fact(&earlier.body, label),
            first[json].as_i64().unwrap(),
            "{label} of pass 1"
        );
    }
    assert_eq!(
        viewer
            .get(&format!("/executions/{key}?passagem=9"))
            .await
            .status,
        404
    );
}

/// A figure of a report's text: the digits of the line that starts with `label`.
fn report_figure(text: &str, label: &str) -> i64 {
    let line = text
        .lines()
        .map(str::trim_start)
        .find(|l| l.starts_with(label))
        .unwrap_or_else(|| panic!("no {label} in the report:\n{text}"));
    line[label.len()..]
        .chars()
        .filter(|c| c.is_ascii_digit() || *c == '-')
        .collect::<String>()
        .parse()
        .unwrap_or_else(|_| panic!("{label}: {line}"))
}

/// The cells of the executions list's row of `execution`, as text.
fn list_row(body: &str, execution: &str) -> Vec<String> {
    let link = format!("href=\"/executions/{execution}\"");
    let at = body
        .find(&link)
        .unwrap_or_else(|| panic!("no row of {execution} in the list:\n{body}"));
    let start = body[..at].rfind("<tr").expect("the row's start");
    let row = &body[start..body[at..].find("</tr>").expect("the row's end") + at];
    row.split("<td")
        .skip(1)
        .map(|cell| {
            let text = &cell[cell.find('>').expect("a cell") + 1..];
            let mut plain = String::new();
            let mut in_tag = false;
            for c in text.chars() {
                match c {
                    '<' => in_tag = true,
                    '>' => in_tag = false,
                    c if !in_tag => plain.push(c),
                    _ => {}
                }
            }
            plain
        })
        .collect()
}

#[tokio::test]
async fn a_real_runs_no_op_second_pass_leaves_its_first_passs_corrections_on_every_surface() {
    let events = paid_orders(40);
    let db = seeded_db(&events, &[]).await;
    let provider = sink(Behavior {
        dedup: true,
        ..Behavior::default()
    })
    .await;
    let jobs = jobs_dir(&provider.url(), &JobSpec::default());
    add_user(&db.url, jobs.path(), "ana@financeiro.example", "finance").await;
    run_job(&db, jobs.path(), JOB, None, false)
        .await
        .expect("the real run");
    run_job(&db, jobs.path(), JOB, None, true)
        .await
        .expect("a second pass, with nothing left to correct");
    // 40 orders of 1,000 × i cents at 5 %: 5 × i before the fix, 50 × i after.
    let (before, after) = (5 * 820, 50 * 820);

    let status = status_entry(&db.url, jobs.path(), JOB).await;
    assert_eq!(status["pass"], 2, "{status}");
    for (field, want) in [
        ("orders_changed", 40),
        ("orders_in_diff", 40),
        ("total_before_cents", before),
        ("total_after_cents", after),
    ] {
        assert_eq!(status[field], want, "status --json's {field}: {status}");
    }

    let console = ConsoleProc::start(&db.url, jobs.path(), &[]).await;
    let finance = Client::logged_in(&console, "ana@financeiro.example").await;
    let row = list_row(&finance.get("/").await.body, JOB);
    assert_eq!(row[6], "40", "orders changed in the list: {row:?}");
    assert_eq!(row[9], "+R$ 369,00", "the difference in the list: {row:?}");
    let page = finance.get(&format!("/executions/{JOB}")).await.body;
    assert_eq!(fact(&page, "Pedidos alterados"), 40, "{page}");
    assert_eq!(fact(&page, "Pedidos no diff"), 40);
    assert_eq!(fact(&page, "Comissões depois"), after);

    use replay_ledger::services::report::{render, Gated, Report};
    let report = Report::for_execution(
        &db.pool,
        JOB,
        JOB,
        chrono_tz::Tz::UTC,
        chrono::Utc::now(),
        &Gated::default(),
    )
    .await
    .expect("the report");
    let text = render::text(&report);
    assert_eq!(report_figure(&text, "Pedidos alterados"), 40, "{text}");
    assert_eq!(report_figure(&text, "Comissões depois"), after, "{text}");
    let rows = report.execution.expect("the execution's part").rows;
    assert_eq!(
        rows.len(),
        40,
        "the report's CSV lists the run's corrections"
    );
}
