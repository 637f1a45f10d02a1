//! What the code and the book cite exists. An invariant is cited by its name in backticks after
//! the word "invariant(s)", and every name cited is a heading of the book's invariants page; no
//! citation by number is left (the numbers were the design's, outside the repository). Every file
//! path a comment names (under `src/`, `core/`, `tests/`, `docs/`, `migrations/`, `testkit/`,
//! `examples/`) exists.
//!
//! The migrations are read by the other checks only: their text is frozen by the checksum each
//! migrated database holds, so their comments keep the design's numbers (the invariants page maps
//! them) and the paths that were right when they were written.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn invariants_page() -> PathBuf {
    root().join("docs").join("src").join("invariants.md")
}

/// How a file marks a comment, or `None` when all of its text is prose (Markdown).
fn comment_marker(path: &Path) -> Option<Option<&'static str>> {
    let name = path.file_name()?.to_str()?;
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    match ext {
        "md" => Some(None),
        "rs" | "mjs" | "js" => Some(Some("//")),
        "py" | "sh" | "toml" | "yml" | "yaml" | "service" => Some(Some("#")),
        _ if name == "run" || name == "Dockerfile" => Some(Some("#")),
        _ => None,
    }
}

/// The files whose citations are checked: the product, its tests and rigs, examples, the book,
/// the deployment files, CI and the manifests. Not `target/`, not the migrations, not this file
/// (its examples are made up).
fn cited_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if path.is_dir() {
                if !matches!(name, "target" | "node_modules" | "book") {
                    walk(&path, out);
                }
            } else if comment_marker(&path).is_some() && !path.ends_with("tests/it/citations.rs") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    for dir in [
        "src", "core", "tests", "testkit", "demo", "examples", "docs", "deploy", ".ci", "jobs",
    ] {
        walk(&root().join(dir), &mut files);
    }
    for file in [
        "Cargo.toml",
        "Dockerfile",
        "README.md",
        "CHANGELOG.md",
        "deny.toml",
    ] {
        let path = root().join(file);
        if path.exists() {
            files.push(path);
        }
    }
    files.sort();
    files
}

fn relative(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// The names the invariants page defines: its `## name` headings.
fn defined_names() -> BTreeSet<String> {
    let page = std::fs::read_to_string(invariants_page()).expect("docs/src/invariants.md");
    page.lines()
        .filter_map(|l| l.strip_prefix("## "))
        .map(|h| h.trim().to_string())
        .filter(|h| {
            !h.is_empty()
                && h.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        })
        .collect()
}

/// Skips whitespace and comment markers (a citation may wrap onto the next comment line).
fn skip_gap(text: &str) -> &str {
    let mut rest = text;
    loop {
        let trimmed = rest.trim_start();
        let stripped = ["//!", "///", "//", "--", "#", ">"]
            .iter()
            .find_map(|m| trimmed.strip_prefix(m).filter(|_| rest != trimmed));
        match stripped {
            Some(after) => rest = after,
            None => return trimmed,
        }
    }
}

/// A citation and the line it is on.
type Cited = (usize, String);

/// Every invariant citation of a text: the names cited (`invariant `a``, `invariants `a`, `b` and
/// `c``) and the citations by number (`invariant 4`, `invariants 1–5`), each with its line.
fn citations(text: &str) -> (Vec<Cited>, Vec<Cited>) {
    let mut names = Vec::new();
    let mut numbers = Vec::new();
    let lower = text.to_ascii_lowercase();
    let line_of = |at: usize| text[..at].matches('\n').count() + 1;
    // The book's guarantees were numbered too; they are the invariants now.
    let cited = ["invariant", "guarantee"].into_iter().flat_map(|word| {
        lower
            .match_indices(word)
            .map(move |(at, _)| (at, word.len()))
    });
    for (at, word_len) in cited {
        let before = lower[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '-') {
            continue;
        }
        let mut rest = &text[at + word_len..];
        rest = rest.strip_prefix('s').unwrap_or(rest);
        let after_word = skip_gap(rest);
        if after_word.len() == rest.len() && !rest.starts_with(char::is_whitespace) {
            continue; // "invariants_x", "invariant:" and the like: not a citation.
        }
        if after_word.starts_with(|c: char| c.is_ascii_digit()) {
            let cited: String = after_word
                .chars()
                .take_while(|c| c.is_ascii_digit() || matches!(c, '–' | '-' | ',' | ' '))
                .collect();
            let word = &text[at..at + word_len];
            numbers.push((line_of(at), format!("{word} {}", cited.trim())));
            continue;
        }
        let mut rest = after_word;
        while let Some(inner) = rest.strip_prefix('`') {
            let Some(end) = inner.find('`') else { break };
            names.push((line_of(at), inner[..end].to_string()));
            rest = skip_gap(&inner[end + 1..]);
            rest = rest.strip_prefix(',').map_or(rest, skip_gap);
            rest = rest.strip_prefix("and").map_or(rest, skip_gap);
            rest = rest.strip_prefix("or").map_or(rest, skip_gap);
        }
    }
    (names, numbers)
}

/// The text a file's comments hold (each comment's text on its own line), or all of it for prose.
fn commented(path: &Path, text: &str) -> String {
    match comment_marker(path).flatten() {
        None => text.to_string(),
        Some(marker) => text
            .lines()
            .map(|line| line.find(marker).map_or("", |at| &line[at..]))
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

/// The repository paths a text names: a known top folder, then path characters, ending `.rs`,
/// `.md` or `.sql`.
fn cited_paths(text: &str) -> Vec<String> {
    const TOPS: [&str; 7] = [
        "src/",
        "core/",
        "tests/",
        "docs/",
        "migrations/",
        "testkit/",
        "examples/",
    ];
    let is_path_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '/' | '-');
    let mut out = Vec::new();
    for top in TOPS {
        for (at, _) in text.match_indices(top) {
            let before = text[..at].chars().next_back();
            if before.is_some_and(|c| is_path_char(c) || c == '$' || c == '}') {
                continue;
            }
            let end = text[at..]
                .find(|c: char| !is_path_char(c))
                .map_or(text.len(), |n| at + n);
            let path = text[at..end].trim_end_matches('.');
            if [".rs", ".md", ".sql"].iter().any(|e| path.ends_with(e)) {
                out.push(path.to_string());
            }
        }
    }
    out
}

/// Whether a cited path exists: from the repository's root, from the crate the citing file
/// belongs to (`testkit/`), or from the citing file's folder.
fn path_exists(citing: &Path, cited: &str) -> bool {
    let mut bases = vec![root(), root().join("testkit")];
    if let Some(dir) = citing.parent() {
        bases.push(dir.to_path_buf());
    }
    bases.iter().any(|base| base.join(cited).exists())
}

#[test]
fn every_invariant_cited_is_named_on_the_invariants_page() {
    let defined = defined_names();
    assert_eq!(defined.len(), 18, "the invariants page names {defined:?}");
    let mut unknown = Vec::new();
    for file in cited_files() {
        if file == invariants_page() {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        for (line, name) in citations(&text).0 {
            if !defined.contains(&name) {
                unknown.push(format!("{}:{line}: invariant `{name}`", relative(&file)));
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "invariants cited but not on docs/src/invariants.md:\n{}",
        unknown.join("\n")
    );
}

#[test]
fn no_invariant_is_cited_by_number() {
    let mut numbered = Vec::new();
    for file in cited_files() {
        if file == invariants_page() {
            continue; // it maps the design's numbers to the names
        }
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        for (line, cited) in citations(&text).1 {
            numbered.push(format!("{}:{line}: {cited}", relative(&file)));
        }
    }
    assert!(
        numbered.is_empty(),
        "cite invariants by their name on docs/src/invariants.md, not by number:\n{}",
        numbered.join("\n")
    );
}

#[test]
fn every_file_path_a_comment_names_exists() {
    let mut stale = Vec::new();
    for file in cited_files() {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        for path in cited_paths(&commented(&file, &text)) {
            if !path_exists(&file, &path) {
                stale.push(format!("{}: {path}", relative(&file)));
            }
        }
    }
    assert!(
        stale.is_empty(),
        "paths named in comments that do not exist:\n{}",
        stale.join("\n")
    );
}

/// The checks find what they are for: a name, a number across a wrapped comment, a list, a path.
#[test]
fn the_checks_recognise_citations_as_they_are_written() {
    let text = "// one (invariant `a-b`), two (invariants `c`, `d` and `e`)\n\
                //! wrapped (invariant\n//! 14) and a loop invariant: none (guarantee 9)\n\
                /// see src/no/such.rs. and (tests/it/main.rs)\n";
    let (names, numbers) = citations(text);
    let names: Vec<&str> = names.iter().map(|(_, n)| n.as_str()).collect();
    assert_eq!(names, ["a-b", "c", "d", "e"]);
    let numbers: Vec<&str> = numbers.iter().map(|(_, n)| n.as_str()).collect();
    assert_eq!(numbers, ["invariant 14", "guarantee 9"]);
    assert_eq!(
        cited_paths(text),
        ["src/no/such.rs".to_string(), "tests/it/main.rs".to_string()]
    );
    assert!(!path_exists(&root().join("Cargo.toml"), "src/no/such.rs"));
    assert!(path_exists(&root().join("Cargo.toml"), "tests/it/main.rs"));
}

/// The headings of the Markdown files a pointer may name, as anchors (mdBook's and GitHub's
/// slugs), by the file's path from the repository's root: `README.md` and every chapter of the
/// book (`docs/src/*.md`).
type Sections = BTreeMap<String, BTreeSet<String>>;

fn sections() -> Sections {
    let mut out = Sections::new();
    out.insert(
        "README.md".to_string(),
        crate::docs::anchors(&root().join("README.md")),
    );
    let book = root().join("docs").join("src");
    for entry in std::fs::read_dir(&book).expect("docs/src") {
        let path = entry.expect("an entry").path();
        if path.extension().is_some_and(|e| e == "md") {
            out.insert(relative(&path), crate::docs::anchors(&path));
        }
    }
    out
}

/// Where a pointer points: a file (`None` for "the book": any of its chapters) and a section
/// (its title, or the start of it) or an exact `#anchor`.
#[derive(Debug, PartialEq)]
enum Target {
    Section(Option<String>, String),
    Anchor(String, String),
}

/// A section's title as a pointer writes it: words (letters, spaces, `-`, `'`) up to the first
/// other character; `None` unless it starts with a capital, as a title does.
fn title_at(text: &str) -> Option<String> {
    let title: String = text
        .chars()
        .take_while(|c| c.is_alphabetic() || matches!(c, ' ' | '-' | '\''))
        .collect();
    let title = title.trim();
    title
        .starts_with(char::is_uppercase)
        .then(|| title.to_string())
}

/// Every pointer to a section of the README or the book that a text holds, anywhere (strings the
/// binary prints, comments, prose): "README, Title", "the README's Title", "the book, Title",
/// "the book's Title", "docs/src/FILE.md, Title" and "docs/src/FILE.md#anchor".
fn section_pointers(text: &str) -> Vec<Target> {
    let mut found = Vec::new();
    for (lead, file) in [
        ("README, ", Some("README.md")),
        ("the README's ", Some("README.md")),
        ("the book, ", None),
        ("the book's ", None),
    ] {
        for (at, _) in text.match_indices(lead) {
            if let Some(title) = title_at(&text[at + lead.len()..]) {
                found.push(Target::Section(file.map(str::to_string), title));
            }
        }
    }
    let is_name_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '/');
    for (at, _) in text.match_indices("docs/src/") {
        let rest = &text[at..];
        let name_end = rest.find(|c: char| !is_name_char(c)).unwrap_or(rest.len());
        let Some(after) = rest[name_end..].strip_prefix(".md") else {
            continue;
        };
        let file = format!("{}.md", &rest[..name_end]);
        if let Some(fragment) = after.strip_prefix('#') {
            let end = fragment
                .find(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '-')))
                .unwrap_or(fragment.len());
            found.push(Target::Anchor(file, fragment[..end].to_string()));
        } else if let Some(title) = after.strip_prefix(", ").and_then(title_at) {
            found.push(Target::Section(Some(file), title));
        }
    }
    found
}

/// Whether a pointer's target is a heading of its file (or of the book): an `#anchor` exactly, a
/// title as the whole heading or its start ("Least privileges" names "Least privileges: one
/// database role per duty").
fn resolves(sections: &Sections, target: &Target) -> bool {
    match target {
        Target::Anchor(file, anchor) => sections.get(file).is_some_and(|a| a.contains(anchor)),
        Target::Section(file, title) => {
            let wanted = crate::docs::anchor(title);
            let holds = |anchors: &BTreeSet<String>| {
                anchors
                    .iter()
                    .any(|h| *h == wanted || h.starts_with(&format!("{wanted}-")))
            };
            match file {
                Some(file) => sections.get(file).is_some_and(holds),
                None => sections
                    .iter()
                    .filter(|(f, _)| f.starts_with("docs/"))
                    .any(|(_, anchors)| holds(anchors)),
            }
        }
    }
}

/// The pointers of the kinds that broke, anywhere in a file (strings the binary prints, comments,
/// the book): a section of the README or the book that is not a heading there (see
/// [`section_pointers`]), a `DESIGN.md` or a tracker's issue number (neither is in the
/// repository). Each returns what it found.
fn stale_pointers(text: &str, sections: &Sections) -> Vec<String> {
    let mut found = Vec::new();
    for word in ["issue ", "Issue ", "issues ", "Issues "] {
        for (at, _) in text.match_indices(word) {
            let after = &text[at + word.len()..];
            let number = after.strip_prefix('#').unwrap_or(after);
            let digits: String = number.chars().take_while(char::is_ascii_digit).collect();
            let starts_a_word = text[..at]
                .chars()
                .next_back()
                .is_none_or(|c| !c.is_alphanumeric());
            if !digits.is_empty() && starts_a_word {
                found.push(format!("{}{digits}", word));
            }
        }
    }
    let design = ["DESIGN", ".md"].concat();
    if text.contains(&design) {
        found.push(design);
    }
    for target in section_pointers(text) {
        if !resolves(sections, &target) {
            found.push(match target {
                Target::Section(Some(file), title) => format!("{file}, {title}"),
                Target::Section(None, title) => format!("the book, {title}"),
                Target::Anchor(file, anchor) => format!("{file}#{anchor}"),
            });
        }
    }
    found
}

#[test]
fn no_text_points_at_a_readme_section_gone_a_design_file_or_an_issue_tracker() {
    let sections = sections();
    let mut stale = Vec::new();
    let mut pointers = 0;
    for file in cited_files() {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        pointers += section_pointers(&text).len();
        for found in stale_pointers(&text, &sections) {
            stale.push(format!("{}: {found}", relative(&file)));
        }
    }
    assert!(
        stale.is_empty(),
        "pointers to nothing the repository holds:\n{}",
        stale.join("\n")
    );
    assert!(
        pointers > 0,
        "no pointer to a section found: the scan is broken"
    );
}

#[test]
fn the_pointer_check_finds_each_kind() {
    let sections: Sections = [
        ("README.md".to_string(), ["two-commands".to_string()].into()),
        (
            "docs/src/security.md".to_string(),
            ["least-privileges-one-database-role-per-duty".to_string()].into(),
        ),
    ]
    .into();
    let text = [
        "see README, Two commands; see README, Gone away; (issue 33) ",
        "DESIGN",
        ".md; see docs/src/security.md, Least privileges; docs/src/security.md, Most privileges. ",
        "docs/src/security.md#least-privileges-one-database-role-per-duty and ",
        "docs/src/security.md#least-privileges, docs/src/gone.md#x, the book's Least privileges, ",
        "the book, Nothing of the kind; the README's Two commands; the book's own words",
    ]
    .concat();
    assert_eq!(
        stale_pointers(&text, &sections),
        [
            "issue 33",
            &["DESIGN", ".md"].concat(),
            "README.md, Gone away",
            "the book, Nothing of the kind",
            "docs/src/security.md, Most privileges",
            "docs/src/security.md#least-privileges",
            "docs/src/gone.md#x",
        ]
    );
    assert_eq!(section_pointers(&text).len(), 10);
}
