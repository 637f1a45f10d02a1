//! The book's table of every role's privileges (`docs/src/security.md`, "Every role's privileges,
//! table by table") is the truth: after `grants` as the book runs it, `has_table_privilege` and
//! `has_column_privilege` for the worker, the approver, the reviewer and the console, on every
//! table and view of the schema, say exactly what the table says — no more, no less.

use std::collections::BTreeMap;
use std::path::Path;

use super::privileges::{Grant, Setup};
use crate::helpers::*;

const MARKER: &str = "<!-- matrix.rs holds this table equal to the database -->";
const ROLES: [&str; 4] = ["worker", "approver", "reviewer", "console"];
const PRIVILEGES: [&str; 4] = ["select", "insert", "update", "delete"];

/// The book's table: table → the four roles' cells, as written (normalized spacing).
fn book() -> BTreeMap<String, Vec<String>> {
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src/security.md"))
            .expect("docs/src/security.md");
    let after = &text[text.find(MARKER).expect("the matrix's marker") + MARKER.len()..];
    after
        .lines()
        .skip_while(|l| l.trim().is_empty())
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .map(|l| {
            let cells: Vec<String> = l
                .trim()
                .trim_matches('|')
                .split('|')
                .map(|c| c.trim().trim_matches('`').to_string())
                .collect();
            (cells[0].clone(), cells[1..].to_vec())
        })
        .collect()
}

/// What `role` holds on `table`, written as the book writes it: `select, update (a, b)` — a
/// privilege on the whole table by its name, one on some columns with them — or `—`.
async fn held(pool: &sqlx::PgPool, role: &str, table: &str) -> String {
    let mut parts = Vec::new();
    for privilege in PRIVILEGES {
        let whole: bool = sqlx::query_scalar("select has_table_privilege($1, $2::regclass, $3)")
            .bind(role)
            .bind(table)
            .bind(privilege)
            .fetch_one(pool)
            .await
            .unwrap();
        if whole {
            parts.push(privilege.to_string());
            continue;
        }
        if privilege == "delete" {
            continue;
        }
        let columns: Vec<String> = sqlx::query_scalar(
            r#"
            select attname::text from pg_attribute
            where attrelid = $2::regclass and attnum > 0 and not attisdropped
              and has_column_privilege($1, $2::regclass, attname, $3)
            order by attnum
            "#,
        )
        .bind(role)
        .bind(table)
        .bind(privilege)
        .fetch_all(pool)
        .await
        .unwrap();
        if !columns.is_empty() {
            parts.push(format!("{privilege} ({})", columns.join(", ")));
        }
    }
    if parts.is_empty() {
        "—".into()
    } else {
        parts.join(", ")
    }
}

#[tokio::test]
async fn every_roles_privileges_on_every_table_are_the_books_table() {
    let provider = sink(testkit::sink::Behavior::default()).await;
    let setup = Setup::new(Grant::AsWritten, &provider.url(), &JobSpec::default()).await;
    let names = &setup.names;
    let roles = [
        &names.worker,
        &names.approver,
        &names.reviewer,
        &names.console,
    ];
    let tables: Vec<String> = sqlx::query_scalar(
        r#"
        select c.relname::text from pg_class c
        where c.relnamespace = current_schema()::regnamespace and c.relkind in ('r', 'v', 'p')
          and c.relname not like '\_sqlx%'
        order by 1
        "#,
    )
    .fetch_all(&setup.db.pool)
    .await
    .unwrap();
    let mut actual = BTreeMap::new();
    for table in &tables {
        let mut cells = Vec::new();
        for role in roles {
            cells.push(held(&setup.db.pool, role, table).await);
        }
        actual.insert(table.clone(), cells);
    }

    let book = book();
    let shown: String = actual
        .iter()
        .map(|(t, cells)| format!("| `{t}` | {} |\n", cells.join(" | ")))
        .collect();
    assert_eq!(
        book,
        actual,
        "the book's table ({} rows) is not what the database grants ({} tables); as granted, with columns {ROLES:?}:\n{shown}",
        book.len(),
        actual.len()
    );
}
