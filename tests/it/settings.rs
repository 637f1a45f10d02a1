//! The process's settings, one list: every variable the binary reads is in
//! `edges::cli::settings::variables()`, and the book's settings page (`docs/src/settings.md`) has
//! exactly its rows — name, flag, default, meaning. clap's `env` names and defaults and the
//! variables [`Settings::from_lookup`] asks for are held to the same list, so a variable added in
//! code without its row, or a row left for a variable gone, fails here.

use std::collections::BTreeSet;
use std::sync::Mutex;

use clap::CommandFactory;
use replay_ledger::edges::cli::settings::{variables, Settings, Variable};
use replay_ledger::edges::cli::Cli;

fn page() -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src/settings.md");
    std::fs::read_to_string(path).expect("read docs/src/settings.md")
}

/// The page's table as it must read: its header, then one row per variable.
fn expected_table() -> Vec<String> {
    let mut rows = vec![
        "| variable | flag | default | what |".to_string(),
        "| --- | --- | --- | --- |".to_string(),
    ];
    rows.extend(variables().iter().map(|v: &Variable| {
        format!(
            "| `{}` | {} | {} | {} |",
            v.name, v.flag, v.default, v.meaning
        )
    }));
    rows
}

#[test]
fn the_settings_page_lists_exactly_the_variables_of_the_settings() {
    let page = page();
    let table: Vec<String> = page
        .lines()
        .filter(|l| l.starts_with('|'))
        .map(str::to_string)
        .collect();
    let expected = expected_table();
    assert!(expected.len() > 20, "the settings list was read");
    assert_eq!(
        table,
        expected,
        "docs/src/settings.md's table differs from the settings; it must read:\n{}",
        expected.join("\n")
    );
}

/// Every `env` of the command line, with its default when clap has one.
fn clap_envs() -> Vec<(String, Option<String>)> {
    fn walk(cmd: &clap::Command, out: &mut Vec<(String, Option<String>)>) {
        for arg in cmd.get_arguments() {
            if let Some(env) = arg.get_env() {
                let default = arg
                    .get_default_values()
                    .first()
                    .map(|d| d.to_string_lossy().into_owned());
                out.push((env.to_string_lossy().into_owned(), default));
            }
        }
        for sub in cmd.get_subcommands() {
            walk(sub, out);
        }
    }
    let mut out = Vec::new();
    walk(&Cli::command(), &mut out);
    out
}

#[test]
fn every_variable_a_flag_reads_is_listed_with_its_flag_and_default() {
    let envs = clap_envs();
    assert!(envs.len() >= 10, "clap's env names were found: {envs:?}");
    let listed = variables();
    for (name, default) in envs {
        let row = listed
            .iter()
            .find(|v| v.name == name)
            .unwrap_or_else(|| panic!("{name} (a flag's env) is not among the settings"));
        assert_ne!(row.flag, "—", "{name} has a flag: its row must name it");
        if let Some(default) = default {
            assert!(
                row.default.contains(&format!("`{default}`")),
                "{name}: clap's default is {default:?}, the settings say {:?}",
                row.default
            );
        }
    }
}

#[test]
fn the_settings_read_exactly_the_listed_variables_no_flag_carries() {
    let asked = Mutex::new(BTreeSet::new());
    let _ = Settings::from_lookup(|name| {
        asked.lock().unwrap().insert(name.to_string());
        None
    });
    let asked = asked.into_inner().unwrap();
    let flagless: BTreeSet<String> = variables()
        .iter()
        .filter(|v| v.flag == "—")
        .map(|v| v.name.to_string())
        .collect();
    assert!(flagless.len() > 10, "{flagless:?}");
    assert_eq!(
        asked, flagless,
        "variables read vs variables listed without a flag"
    );
}

#[test]
fn a_bad_lease_or_session_setting_is_said_naming_its_variable() {
    let settings = Settings::from_lookup(|name| match name {
        "REPLAY_LEDGER_LEASE" => Some("10ms".into()),
        "REPLAY_LEDGER_TCP_KEEPALIVES_COUNT" => Some("many".into()),
        _ => None,
    });
    let problems = settings.validate();
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(
        problems[0].starts_with("REPLAY_LEDGER_LEASE"),
        "{problems:?}"
    );
    assert!(
        problems[1].starts_with("REPLAY_LEDGER_TCP_KEEPALIVES_COUNT"),
        "{problems:?}"
    );
    assert!(Settings::from_lookup(|_| None).validate().is_empty());
}
