//! One language and one clock per page: every page of the console, for finance and for an
//! operator (and the login and error pages), over a scene with something on every page (a simulation approved and applied, a
//! sweep's and a verify's last runs, a proposal, an interrupted request, the review queue), is
//! read as its visible text (what is inside `code` and `pre` left out: identifiers and
//! definitions, not prose), and
//!
//! - no English word of prose appears in it (a list of words no Portuguese sentence uses:
//!   "the", "with", "see", "waits", "retaken", …), and
//! - every time on it is written in one timezone (one UTC offset; never "UTC" beside another
//!   offset).

use std::collections::BTreeSet;

use replay_ledger::services::scheduler::runs::{self, JobRun, RunDetail};
use replay_ledger_core::tables::execution::State;

use super::browser::OPERATOR;
use super::*;

/// Words of English prose that no Portuguese sentence of the console uses.
const ENGLISH: &[&str] = &[
    "the",
    "and",
    "with",
    "see",
    "waits",
    "wait",
    "retaken",
    "completed",
    "uncertain",
    "resent",
    "swapped",
    "orders",
    "differ",
    "differences",
    "failed",
    "finished",
    "running",
    "approval",
    "approved",
    "simulation",
    "execution",
    "not",
    "found",
    "please",
    "day",
    "days",
    "of",
    "to",
    "is",
    "are",
    "was",
    "this",
    "that",
    "which",
    "by",
    "at",
    "from",
    "stopped",
    "asked",
    "resume",
    "log",
    "none",
    "yes",
    "pending",
    "done",
];

/// The visible text of a page: tags gone, `code`, `pre`, `script`, `style` and `title` left out.
fn prose(html: &str) -> String {
    let mut text = html.to_string();
    for tag in ["code", "pre", "script", "style", "title"] {
        let (open, close) = (format!("<{tag}"), format!("</{tag}>"));
        while let Some(start) = text.find(&open) {
            let Some(end) = text[start..].find(&close) else {
                break;
            };
            text.replace_range(start..start + end + close.len(), " ");
        }
    }
    let mut out = String::with_capacity(text.len());
    let mut in_tag = false;
    for c in text.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => {
                in_tag = false;
                out.push('\n');
            }
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.replace("&nbsp;", " ")
        .replace("&amp;", "&")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
}

/// The English words of `text`, with the line each is on (identifiers — an e-mail, a key, a
/// job's name, a path — are not prose and are skipped).
fn english_in(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        for token in line.split_whitespace() {
            let identifier = token.contains('@')
                || token.contains('/')
                || token.contains('_')
                || token.contains(':')
                || token.contains('.') && !token.ends_with('.')
                || token.contains("replay-")
                || token.starts_with("ped-")
                || token.starts_with("evt-");
            if identifier {
                continue;
            }
            for word in token.split(|c: char| !c.is_alphabetic() && c != '(' && c != ')') {
                let w = word.to_lowercase();
                if ENGLISH.contains(&w.as_str()) || w == "day(s)" {
                    found.push(format!("{w}: {line}"));
                }
            }
        }
    }
    found
}

/// The UTC offsets the page writes times in (`AAAA-MM-DD HH:MM ±HH:MM`), and whether it says
/// "UTC" somewhere.
fn clocks(text: &str) -> (BTreeSet<String>, bool) {
    let b = text.as_bytes();
    let digits = |i: usize, n: usize| {
        b.get(i..i + n)
            .is_some_and(|d| d.iter().all(u8::is_ascii_digit))
    };
    let mut offsets = BTreeSet::new();
    for i in 0..b.len() {
        // 2026-12-06 08:00 -03:00
        let date = digits(i, 4)
            && b.get(i + 4) == Some(&b'-')
            && digits(i + 5, 2)
            && b.get(i + 7) == Some(&b'-')
            && digits(i + 8, 2)
            && b.get(i + 10) == Some(&b' ')
            && digits(i + 11, 2)
            && b.get(i + 13) == Some(&b':')
            && digits(i + 14, 2);
        if !date || i > 0 && b[i - 1].is_ascii_digit() {
            continue;
        }
        let mut j = i + 16;
        if b.get(j) == Some(&b':') && digits(j + 1, 2) {
            j += 3;
        }
        let offset = b.get(j) == Some(&b' ')
            && matches!(b.get(j + 1), Some(b'+' | b'-'))
            && digits(j + 2, 2)
            && b.get(j + 4) == Some(&b':')
            && digits(j + 5, 2);
        if offset {
            offsets.insert(text[j + 1..j + 7].to_string());
        }
    }
    let says_utc = text
        .split(|c: char| !c.is_alphanumeric())
        .any(|w| w == "UTC");
    (offsets, says_utc)
}

#[tokio::test]
async fn every_page_speaks_portuguese_and_keeps_one_clock() {
    let s = super::requests::scene().await;
    add_user(&s.db.url, s.jobs.path(), FINANCE, "finance").await;
    add_user(&s.db.url, s.jobs.path(), OPERATOR, "operator").await;
    std::fs::write(
        s.jobs.path().join("verify.yaml"),
        "name: nightly-verify\nkind: verify\nschedule: \"0 0 6 * * *\"\nlookback: 3d\nreport_to: [financeiro@example.com]\n",
    )
    .unwrap();
    std::fs::write(
        s.jobs.path().join("sweeper.yaml"),
        "name: sweeper\nkind: sweep\nschedule: \"0 30 2 * * *\"\nstale_after: 5m\n",
    )
    .unwrap();
    let at = chrono::Utc::now() - chrono::Duration::hours(3);
    for (job, detail) in [
        (
            "nightly-verify",
            RunDetail::Verify {
                days_differing: 1,
                proposals: 1,
            },
        ),
        (
            "sweeper",
            RunDetail::Sweep {
                retaken: 0,
                completed: 2,
                uncertain: 1,
                resent: 0,
            },
        ),
    ] {
        runs::record(
            &s.db.pool,
            &JobRun {
                job: job.into(),
                started_at: at,
                finished_at: at,
                state: State::Finished,
                detail: Some(detail.english()),
                data: Some(detail),
            },
        )
        .await
        .unwrap();
    }
    sqlx::query(
        "insert into job_proposto (nome, job_verificacao, dia, definicao, pedidos_errados, \
         pedidos_sem_comissao, efeitos_faltando, diferenca_centavos) \
         values ('reconcile-2026-10-14', 'nightly-verify', '2026-10-14', 'name: reconcile-2026-10-14', 3, 1, 2, 12345)",
    )
    .execute(&s.db.pool)
    .await
    .unwrap();
    let console = ConsoleProc::start(
        &s.db.url,
        s.jobs.path(),
        &["--timezone", "America/Sao_Paulo"],
    )
    .await;
    let finance = Client::logged_in(&console, FINANCE).await;
    super::requests::approve(&finance).await;
    let serve = crate::serve::Serve::start_with(&s.db.url, s.jobs.path(), "serve", |_| {});
    let csrf = finance.csrf().await;
    finance
        .post(
            &format!("{}/start", super::requests::SIMULATION),
            &[("csrf_token", &csrf)],
        )
        .await;
    wait_until("the approved run is applied", || async {
        execution_state(&s.db.pool, JOB).await.as_deref() == Some("concluida")
    })
    .await;
    let operator = Client::logged_in(&console, OPERATOR).await;
    let ocsrf = operator.csrf().await;
    operator.post("/sweep", &[("csrf_token", &ocsrf)]).await;
    wait_until("the sweep asked for is done", || async {
        super::requests::requests(&s.db)
            .await
            .iter()
            .all(|r| r.2 == "concluida" || r.2 == "falhou")
    })
    .await;
    drop(serve);
    let simulation = super::requests::SIMULATION;
    let run = format!("/executions/{JOB}");
    let pages: Vec<(&Client, String)> = [
        "/".to_string(),
        "/?state=concluida&ordem=antigas".into(),
        simulation.into(),
        format!("{simulation}/approve"),
        format!("{simulation}/start"),
        format!("{simulation}/resimulate"),
        run.clone(),
        format!("{run}/resume"),
        format!("{run}/interrupt"),
        "/pedidos/ped-1".into(),
        "/review".into(),
        "/audit".into(),
        "/verificacao".into(),
        "/historico".into(),
        "/historico?em=2026-10-15".into(),
        "/busca?q=nada-assim".into(),
        "/executions/ao-vivo".into(),
        "/reconstrucao".into(),
    ]
    .into_iter()
    .flat_map(|p| [(&finance, p.clone()), (&operator, p)])
    .chain([(&operator, "/sweep".to_string())])
    .collect();

    let mut english = Vec::new();
    let mut zones = Vec::new();
    for (client, path) in &pages {
        let page = client.get(path).await;
        assert!(
            page.status.is_success(),
            "{path}: {} {}",
            page.status,
            page.body
        );
        let text = prose(&page.body);
        english.extend(
            english_in(&text)
                .into_iter()
                .map(|w| format!("{path}: {w}")),
        );
        let (offsets, says_utc) = clocks(&text);
        // "UTC" beside times in another offset is two clocks; beside +00:00 it names the one.
        if offsets.len() > 1 || (says_utc && offsets.iter().any(|o| o != "+00:00")) {
            zones.push(format!("{path}: {offsets:?}, says UTC: {says_utc}"));
        }
    }

    // The pages without a session or with an error: the login, a page that does not exist, an
    // earlier pass that does not exist.
    let anonymous = Client::new(&console);
    for (client, path, status) in [
        (&anonymous, "/login".to_string(), 200),
        (&finance, "/executions/nao-existe".to_string(), 404),
        (&finance, format!("{run}?passagem=99"), 404),
    ] {
        let page = client.get(&path).await;
        assert_eq!(page.status.as_u16(), status, "{path}: {}", page.body);
        let text = prose(&page.body);
        english.extend(
            english_in(&text)
                .into_iter()
                .map(|w| format!("{path}: {w}")),
        );
    }

    assert!(
        english.is_empty(),
        "English on Portuguese pages:\n{}",
        english.join("\n")
    );
    assert!(
        zones.is_empty(),
        "more than one clock:\n{}",
        zones.join("\n")
    );
    // The test reads what it should: the pages hold times, in São Paulo's offset.
    let listed = prose(&finance.get("/").await.body);
    assert!(clocks(&listed).0.contains("-03:00"), "{listed}");
}

#[test]
fn the_word_check_finds_english_and_skips_identifiers() {
    assert_eq!(
        english_in("varredura feita: retaken 0, completed 2"),
        [
            "retaken: varredura feita: retaken 0, completed 2",
            "completed: varredura feita: retaken 0, completed 2"
        ]
    );
    assert!(english_in("1 day(s) with differences").len() >= 3);
    assert!(english_in("Iniciada por ana@financeiro.example em replay-2026-10-14-v2").is_empty());
    let (offsets, utc) = clocks("2026-12-06 08:00 -03:00 · 2026-12-06 11:00 UTC");
    assert!(offsets.contains("-03:00") && utc);
}
