//! The README and the book hold together: every relative link of `README.md` and of
//! `docs/src/*.md` names a file that exists and, with `#anchor`, a heading of that file (as
//! mdBook and GitHub make anchors); every chapter is in `SUMMARY.md`; and the README stays a
//! front door (at most 250 lines).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn book() -> PathBuf {
    root().join("docs").join("src")
}

fn chapters() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(book())
        .expect("docs/src")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    files.sort();
    files
}

/// A heading's anchor: lowercase, punctuation dropped, spaces as `-`.
pub(crate) fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a Markdown file's headings (outside code blocks).
pub(crate) fn anchors(file: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let mut fenced = false;
    let mut out = BTreeSet::new();
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            let heading = line.trim_start_matches('#');
            if heading.starts_with(' ') {
                out.insert(anchor(heading));
            }
        }
    }
    out
}

/// Every `](target)` of a Markdown file that is not a web address.
fn links(file: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(file).expect("a Markdown file");
    text.match_indices("](")
        .filter_map(|(at, _)| {
            let rest = &text[at + 2..];
            let end = rest.find(')')?;
            Some(rest[..end].to_string())
        })
        .filter(|t| !t.starts_with("http://") && !t.starts_with("https://") && !t.is_empty())
        .collect()
}

fn broken_links_of(file: &Path) -> Vec<String> {
    let dir = file.parent().expect("a folder");
    links(file)
        .into_iter()
        .filter(|target| {
            let (path, fragment) = target.split_once('#').unwrap_or((target, ""));
            let target_file = if path.is_empty() {
                file.to_path_buf()
            } else {
                dir.join(path)
            };
            if !target_file.exists() {
                return true;
            }
            !fragment.is_empty()
                && target_file.extension().is_some_and(|e| e == "md")
                && !anchors(&target_file).contains(fragment)
        })
        .map(|t| format!("{}: {t}", file.display()))
        .collect()
}

#[test]
fn every_link_of_the_readme_the_changelog_and_the_book_reaches_its_file_and_heading() {
    let mut broken = broken_links_of(&root().join("README.md"));
    broken.extend(broken_links_of(&root().join("CHANGELOG.md")));
    for chapter in chapters() {
        broken.extend(broken_links_of(&chapter));
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn every_chapter_is_in_the_books_summary() {
    let summary = std::fs::read_to_string(book().join("SUMMARY.md")).expect("SUMMARY.md");
    let missing: Vec<String> = chapters()
        .iter()
        .filter_map(|p| p.file_name()?.to_str().map(str::to_string))
        .filter(|name| name != "SUMMARY.md" && !summary.contains(&format!("]({name})")))
        .collect();
    assert!(missing.is_empty(), "not in SUMMARY.md: {missing:?}");
}

#[test]
fn the_readme_is_a_front_door_of_at_most_250_lines() {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    let lines = readme.lines().count();
    assert!(lines <= 250, "README.md has {lines} lines");
}

#[test]
fn ci_runs_exactly_the_readmes_test_command_last_after_building_the_book() {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    let command = readme
        .lines()
        .find(|l| l.starts_with("cargo nextest run"))
        .and_then(|l| l.split('#').next())
        .map(str::trim)
        .expect("the README's test command");
    let ci = std::fs::read_to_string(root().join(".ci/run")).expect(".ci/run");
    let steps: Vec<&str> = ci
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    assert_eq!(steps.last(), Some(&command), ".ci/run must end with it");
    assert!(
        steps.contains(&"mdbook build docs"),
        ".ci/run does not build the book"
    );
}

/// The `replay-ledger …` command lines of the shell blocks of `text`: leading `VAR=value`
/// assignments dropped, continued lines joined, a trailing `# comment` cut; lines holding a
/// placeholder (`…`, a synopsis's `[optional]`) or a shell construct (`|`, `$(`, `>`) are left
/// out.
fn command_lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_shell = false;
    let mut pending = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("```") {
            in_shell = !in_shell && matches!(trimmed, "```sh" | "```bash" | "```shell");
            pending.clear();
            continue;
        }
        if !in_shell {
            continue;
        }
        let mut line = trimmed.to_string();
        if !pending.is_empty() {
            line = format!("{pending} {line}");
            pending.clear();
        }
        if let Some(head) = line.strip_suffix('\\') {
            pending = head.trim().to_string();
            continue;
        }
        let code = match line.find(" #") {
            Some(at) => line[..at].trim().to_string(),
            None => line,
        };
        let mut words = code.as_str();
        while let Some((first, rest)) = words.split_once(' ') {
            if first.contains('=') && !first.starts_with('-') {
                words = rest.trim_start();
            } else {
                break;
            }
        }
        if words.starts_with("replay-ledger ")
            && !["…", " [", "|", "$(", ">", "<"]
                .iter()
                .any(|s| words.contains(s))
        {
            out.push(words.to_string());
        }
    }
    out
}

/// Splits a command line as a shell would for plain words and single or double quotes.
fn shell_words(line: &str) -> Vec<String> {
    let (mut words, mut word, mut quote, mut any) = (Vec::new(), String::new(), None, false);
    for c in line.chars() {
        match (quote, c) {
            (None, '\'' | '"') => {
                quote = Some(c);
                any = true;
            }
            (Some(q), c) if c == q => quote = None,
            (None, c) if c.is_whitespace() => {
                if any {
                    words.push(std::mem::take(&mut word));
                    any = false;
                }
            }
            (_, c) => {
                word.push(c);
                any = true;
            }
        }
    }
    if any {
        words.push(word);
    }
    words
}

#[test]
fn every_replay_ledger_command_of_the_readme_and_the_book_parses_with_the_clis_own_definition() {
    use clap::Parser;
    let mut files = chapters();
    files.push(root().join("README.md"));
    let (mut checked, mut refused) = (0, Vec::new());
    for file in &files {
        let text = std::fs::read_to_string(file).expect("a chapter");
        for line in command_lines(&text) {
            checked += 1;
            if let Err(e) = replay_ledger::edges::cli::Cli::try_parse_from(shell_words(&line)) {
                if !matches!(
                    e.kind(),
                    clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion
                ) {
                    let why = e.to_string();
                    let why = why.lines().next().unwrap_or_default().to_string();
                    refused.push(format!("{}: {line}\n    {why}", file.display()));
                }
            }
        }
    }
    assert!(checked > 30, "only {checked} command lines found");
    assert!(
        refused.is_empty(),
        "command lines the CLI refuses:\n{}",
        refused.join("\n")
    );
}

#[test]
fn command_lines_are_read_as_a_shell_would() {
    let text = "```sh\nDATABASE_URL=postgres://x replay-ledger --no-migrate run job   # c\nreplay-ledger approve j \\\n  --note 'a b'\nreplay-ledger grants …\necho replay-ledger x\n```\nreplay-ledger outside\n";
    let lines = command_lines(text);
    assert_eq!(
        lines,
        [
            "replay-ledger --no-migrate run job",
            "replay-ledger approve j --note 'a b'"
        ]
    );
    assert_eq!(
        shell_words(&lines[1]),
        ["replay-ledger", "approve", "j", "--note", "a b"]
    );
}

/// The public modules of a role folder (`pub mod x;` in its `mod.rs`).
fn public_modules(folder: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(folder.join("mod.rs")).unwrap_or_default();
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod "))
        .filter_map(|l| l.strip_suffix(';'))
        .map(str::to_string)
        .collect()
}

/// The rows of the layout page's table of folders: the folder (`core/src/tables/`) and the parts
/// its second cell names in backticks.
fn layout_rows(page: &str) -> Vec<(String, BTreeSet<String>)> {
    page.lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let folder = cells.get(1)?.strip_prefix('`')?.strip_suffix("/`")?;
            if !(folder.starts_with("src/") || folder.starts_with("core/src/")) {
                return None;
            }
            let parts = cells
                .get(2)?
                .split(',')
                .filter_map(|p| p.trim().strip_prefix('`')?.strip_suffix('`'))
                .map(str::to_string)
                .collect();
            Some((folder.to_string(), parts))
        })
        .collect()
}

/// Each crate's folders, with their public modules, as the sources hold them.
fn role_folders() -> Vec<(String, BTreeSet<String>)> {
    let mut out = Vec::new();
    for krate in ["src", "core/src"] {
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(root().join(krate))
            .expect("a crate's sources")
            .map(|e| e.expect("an entry").path())
            .filter(|p| p.is_dir())
            .collect();
        dirs.sort();
        for dir in dirs {
            let name = dir.file_name().and_then(|n| n.to_str()).expect("a name");
            out.push((format!("{krate}/{name}"), public_modules(&dir)));
        }
    }
    out
}

#[test]
fn the_layout_page_names_every_folder_and_public_module_of_both_crates_and_nothing_gone() {
    let page = std::fs::read_to_string(book().join("layout.md")).expect("layout.md");
    let rows: std::collections::BTreeMap<String, BTreeSet<String>> =
        layout_rows(&page).into_iter().collect();
    let folders: std::collections::BTreeMap<String, BTreeSet<String>> =
        role_folders().into_iter().collect();
    assert!(folders.len() >= 8, "folders found: {folders:?}");
    let mut wrong = Vec::new();
    for (folder, modules) in &folders {
        match rows.get(folder) {
            None => wrong.push(format!("{folder}/ has no row")),
            Some(parts) if parts != modules => wrong.push(format!(
                "{folder}/: the page names {parts:?}, the sources hold {modules:?}"
            )),
            Some(_) => {}
        }
    }
    for folder in rows.keys().filter(|f| !folders.contains_key(*f)) {
        wrong.push(format!("{folder}/ is on the page but not in the sources"));
    }
    assert!(
        wrong.is_empty(),
        "docs/src/layout.md is the one map of the code:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_layout_rows_are_read_as_written() {
    let page = "| folder | parts | role |\n| --- | --- | --- |\n\
                | `core/src/tables/` | `db`, `ledger` | the owners |\n\
                | `core/src/config/` | | parsed |\n| `replay-ledger` (`src/`) | x | y |\n";
    let rows = layout_rows(page);
    assert_eq!(
        rows,
        [
            (
                "core/src/tables".to_string(),
                ["db".to_string(), "ledger".to_string()].into()
            ),
            ("core/src/config".to_string(), BTreeSet::new()),
        ]
    );
    let tables = public_modules(&root().join("core/src/tables"));
    assert!(
        tables.contains("requests") && tables.contains("db"),
        "{tables:?}"
    );
}

/// The first cells of the table under a page's `## heading`, without their backticks or bold.
fn first_cells_under(page: &str, heading: &str) -> Vec<String> {
    let mut under = false;
    let mut out = Vec::new();
    for line in page.lines() {
        if line.starts_with("## ") {
            under = line.trim_start_matches("## ").trim() == heading;
        } else if under && line.starts_with('|') {
            let cell = line.split('|').nth(1).unwrap_or_default().trim();
            let inner = cell
                .strip_prefix('`')
                .and_then(|c| c.strip_suffix('`'))
                .or_else(|| cell.strip_prefix("**").and_then(|c| c.strip_suffix("**")));
            if let Some(inner) = inner {
                out.push(inner.to_string());
            }
        }
    }
    out
}

/// Every command the CLI defines, as typed (`run`, `review resolve`): the leaves of clap's tree,
/// without clap's own `help`.
fn cli_commands() -> BTreeSet<String> {
    fn walk(cmd: &clap::Command, prefix: &str, out: &mut BTreeSet<String>) {
        for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
            let path = format!("{prefix}{}", sub.get_name());
            if sub.has_subcommands() {
                walk(sub, &format!("{path} "), out);
            } else {
                out.insert(path);
            }
        }
    }
    use clap::CommandFactory;
    let mut out = BTreeSet::new();
    walk(&replay_ledger::edges::cli::Cli::command(), "", &mut out);
    out
}

/// The CLI's global options (`--jobs-dir`), without clap's own `--help` and `--version`.
fn cli_global_options() -> BTreeSet<String> {
    use clap::CommandFactory;
    replay_ledger::edges::cli::Cli::command()
        .get_arguments()
        .filter_map(|a| a.get_long())
        .filter(|l| !matches!(*l, "help" | "version"))
        .map(|l| format!("--{l}"))
        .collect()
}

#[test]
fn the_commands_page_names_every_command_option_and_exit_status_and_nothing_else() {
    use replay_ledger::edges::cli::Class;
    let page = std::fs::read_to_string(book().join("commands.md")).expect("commands.md");
    let named = |heading| -> BTreeSet<String> {
        let cells = first_cells_under(&page, heading);
        let set: BTreeSet<String> = cells.iter().cloned().collect();
        assert_eq!(
            set.len(),
            cells.len(),
            "{heading}: a row twice in {cells:?}"
        );
        set
    };

    let commands = cli_commands();
    assert!(
        commands.contains("review resolve") && commands.len() > 20,
        "{commands:?}"
    );
    assert_eq!(
        named("Commands"),
        commands,
        "the commands of docs/src/commands.md"
    );
    assert_eq!(
        named("Global options"),
        cli_global_options(),
        "the global options of docs/src/commands.md"
    );
    let statuses: BTreeSet<String> = std::iter::once(0)
        .chain(Class::ALL.iter().map(|c| c.status()))
        .map(|s| s.to_string())
        .collect();
    assert_eq!(
        named("Exit statuses"),
        statuses,
        "the exit statuses of docs/src/commands.md"
    );
}

#[test]
fn a_pages_table_is_read_row_by_row() {
    let page = "## Commands\n\n| command | does |\n| --- | --- |\n| `run` | runs |\n\
                | `review list` | lists |\n\n## Exit statuses\n\n| status | means |\n\
                | --- | --- |\n| **0** | fine |\n| **130** | stopped |\n";
    assert_eq!(first_cells_under(page, "Commands"), ["run", "review list"]);
    assert_eq!(first_cells_under(page, "Exit statuses"), ["0", "130"]);
    assert!(first_cells_under(page, "Settings").is_empty());
}

/// The releases of `CHANGELOG.md`: its `## [x.y.z] - date` headings, newest first.
fn changelog_releases(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("## ["))
        .filter_map(|l| l.split_once(']'))
        .map(|(version, _)| version.to_string())
        .collect()
}

#[test]
fn the_changelog_has_an_entry_for_every_release_and_says_which_upgrade_is_safe() {
    let text = std::fs::read_to_string(root().join("CHANGELOG.md")).expect("CHANGELOG.md");
    let mut released: Vec<String> = replay_ledger_core::tables::db::RELEASES
        .iter()
        .map(|(version, _)| version.to_string())
        .collect();
    released.reverse();
    assert_eq!(
        changelog_releases(&text),
        released,
        "CHANGELOG.md's releases, newest first, are core/src/tables/db/migrations.rs's RELEASES"
    );
    // Every entry after the first release says whether the upgrade to it is safe.
    for entry in text.split("\n## [").skip(1) {
        let version = entry.split(']').next().unwrap_or_default();
        if version != "0.1.0" {
            assert!(
                entry.contains("Upgrading from") && entry.contains("is safe"),
                "CHANGELOG.md's {version} does not say which upgrade to it is safe"
            );
        }
    }
}

#[test]
fn changelog_releases_are_read_from_their_headings() {
    let text =
        "# Changelog\n\n## [0.2.0] - 2026-12-02\n\n### Added\n- x\n\n## [0.1.0] - 2026-11-30\n";
    assert_eq!(changelog_releases(text), ["0.2.0", "0.1.0"]);
}
