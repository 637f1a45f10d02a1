//! The plans of every statement the engine sends per batch, as PostgreSQL chose them during a
//! real run over the whole window: `auto_explain` loaded for the bench database, its plans sent
//! to the client as notices, which sqlx hands to `tracing` (target `sqlx::postgres::notice`) and
//! a layer here collects. One plan per distinct statement is printed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

static CAPTURING: AtomicBool = AtomicBool::new(false);
static NOTICES: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct Notices;

impl<S: tracing::Subscriber> Layer<S> for Notices {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        if !CAPTURING.load(Ordering::Relaxed) {
            return;
        }
        struct Message(Option<String>);
        impl tracing::field::Visit for Message {
            fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
                if field.name() == "message" {
                    self.0 = Some(value.to_string());
                }
            }
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                if field.name() == "message" {
                    self.0 = Some(format!("{value:?}"));
                }
            }
        }
        let mut message = Message(None);
        event.record(&mut message);
        if let Some(m) = message.0 {
            NOTICES.lock().expect("notices").push(m);
        }
    }
}

/// Installs the collector (only PostgreSQL's notices reach it).
pub fn install() {
    // A static filter: every other callsite is disabled once, not asked at each event.
    let only_notices = tracing_subscriber::filter::Targets::new()
        .with_target("sqlx::postgres::notice", tracing::Level::INFO);
    tracing_subscriber::registry()
        .with(Notices.with_filter(only_notices))
        .init();
}

/// Makes every new session of `database` explain each statement it runs to its client.
pub async fn explain_on(admin: &mut sqlx::PgConnection, database: &str) -> anyhow::Result<()> {
    for setting in [
        "set session_preload_libraries = 'auto_explain'",
        "set auto_explain.log_min_duration = 0",
        "set auto_explain.log_level = 'notice'",
    ] {
        sqlx::query(&format!("alter database \"{database}\" {setting}"))
            .execute(&mut *admin)
            .await?;
    }
    CAPTURING.store(true, Ordering::Relaxed);
    Ok(())
}

pub async fn explain_off(admin: &mut sqlx::PgConnection, database: &str) -> anyhow::Result<()> {
    CAPTURING.store(false, Ordering::Relaxed);
    sqlx::query(&format!("alter database \"{database}\" reset all"))
        .execute(&mut *admin)
        .await?;
    Ok(())
}

/// Prints one plan per distinct statement captured, and says whether any of them sorts or scans
/// a whole table.
pub fn print() {
    let notices = std::mem::take(&mut *NOTICES.lock().expect("notices"));
    // Per distinct statement: how often it ran, its total and slowest time, the slowest plan.
    let mut seen: std::collections::BTreeMap<String, (u32, f64, f64, String)> = Default::default();
    for notice in notices {
        let Some((head, rest)) = notice.split_once("Query Text:") else {
            continue;
        };
        let ms: f64 = head
            .split_whitespace()
            .nth(1)
            .and_then(|d| d.parse().ok())
            .unwrap_or(0.0);
        let (query, plan) = split_query(rest);
        let entry = seen.entry(query).or_default();
        entry.0 += 1;
        entry.1 += ms;
        if ms >= entry.2 {
            entry.2 = ms;
            entry.3 = plan;
        }
    }
    println!(
        "plans of the statements of a real run ({} distinct):",
        seen.len()
    );
    let mut suspicious = 0;
    for (query, (runs, total, slowest, plan)) in &seen {
        let short: String = query.chars().take(110).collect();
        println!("- {short}{}", if query.len() > 110 { " …" } else { "" });
        println!("    ran {runs} times, {total:.1} ms in all, slowest {slowest:.1} ms:");
        for line in plan.lines().filter(|l| !l.trim().is_empty()) {
            // Conditions over a batch's arrays print every value: the first ones say enough.
            let shown: String = line.chars().take(150).collect();
            let cut = if shown.len() < line.len() { " …" } else { "" };
            println!("    {shown}{cut}");
        }
        if plan.contains("Seq Scan on evento_arquivado")
            || plan.contains("Seq Scan on comissao")
            || plan.contains("Seq Scan on efeito_aplicado")
        {
            suspicious += 1;
        }
    }
    println!("statements whose plan scans a whole table: {suspicious}");
}

/// The statement's text, on one line, and its plan: the plan starts at the first line that is
/// not indented like the statement and names a plan node.
fn split_query(rest: &str) -> (String, String) {
    let mut lines = rest.lines();
    let mut query = Vec::new();
    let mut plan = Vec::new();
    for line in lines.by_ref() {
        let node = line.trim_start();
        let is_plan = [
            "Insert",
            "Update",
            "Delete",
            "Result",
            "Limit",
            "Index",
            "Seq",
            "Nested",
            "Hash",
            "Merge",
            "Aggregate",
            "Sort",
            "Append",
            "CTE",
            "Subquery",
            "Function",
            "Bitmap",
            "LockRows",
            "Unique",
            "Materialize",
            "Memoize",
            "ProjectSet",
            "HashAggregate",
            "GroupAggregate",
            "WindowAgg",
            "Gather",
        ]
        .iter()
        .any(|n| node.starts_with(n) && node.contains("(cost="));
        if is_plan {
            plan.push(line.to_string());
            break;
        }
        query.push(node.to_string());
    }
    plan.extend(lines.map(str::to_string));
    let query = query
        .join(" ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    (query, plan.join("\n"))
}
