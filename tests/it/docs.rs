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
fn every_link_of_the_readme_and_the_book_reaches_its_file_and_heading() {
    let mut broken = broken_links_of(&root().join("README.md"));
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
