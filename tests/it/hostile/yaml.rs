//! The YAML loader against random bytes, YAML-ish token soup, mutations of the example files in
//! `jobs/`, deep nesting, huge scalars and alias bombs: every load ends, quickly, in `Ok` or in
//! errors whose every line starts with the file's path, and never panics.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use replay_ledger_core::config::{load_dir, load_effects, load_job, EffectCatalog, EFFECTS_FILE};

/// Far above what a file of these sizes takes to load (milliseconds), far below a hang.
const LOAD_LIMIT: Duration = Duration::from_secs(10);

/// Cases per property: together they run in a few seconds on two cores.
fn cases(n: u32) -> ProptestConfig {
    ProptestConfig {
        cases: n,
        max_shrink_iters: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("jobs")
}

/// The example files of `jobs/`, as (file name, text), `effects.yaml` first.
fn examples() -> Vec<(String, String)> {
    let mut files: Vec<(String, String)> = std::fs::read_dir(examples_dir())
        .expect("jobs/ exists")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).expect("an example reads"))
        })
        .collect();
    files.sort_by_key(|(name, _)| (name != EFFECTS_FILE, name.clone()));
    files
}

fn set_example_env() {
    std::env::set_var("SELLER_WEBHOOK_URL", "http://127.0.0.1:9/seller");
    std::env::set_var("SELLER_WEBHOOK_TOKEN", "test-token");
}

fn example_catalog() -> EffectCatalog {
    set_example_env();
    load_effects(&examples_dir().join(EFFECTS_FILE)).expect("the example effects load")
}

/// Every line of `shown` starts with `path` (a message never spans lines: `check` prints one
/// error per line).
fn starts_every_line(shown: &str, path: &Path) -> Result<(), TestCaseError> {
    let prefix = path.display().to_string();
    for line in shown.lines() {
        prop_assert!(
            line.starts_with(&prefix),
            "an error line does not start with {prefix}: {line:?}\nwhole error: {shown:?}"
        );
    }
    Ok(())
}

/// Loads `bytes` as a job file (and as an effect catalog); asserts a clean outcome.
fn load_as_job_and_catalog(bytes: &[u8], catalog: &EffectCatalog) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("job.yaml");
    std::fs::write(&path, bytes).expect("write");
    let started = Instant::now();
    let job = load_job(&path, catalog);
    let effects = load_effects(&path);
    prop_assert!(
        started.elapsed() < LOAD_LIMIT,
        "took {:?}",
        started.elapsed()
    );
    if let Err(e) = job {
        starts_every_line(&e.to_string(), &path)?;
    }
    if let Err(e) = effects {
        starts_every_line(&e.to_string(), &path)?;
    }
    Ok(())
}

/// Loads a directory of `effects` and `job`; asserts a clean outcome.
fn load_as_dir(effects: &[u8], job: &[u8]) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join(EFFECTS_FILE), effects).expect("write");
    std::fs::write(dir.path().join("job.yaml"), job).expect("write");
    let started = Instant::now();
    let loaded = load_dir(dir.path());
    prop_assert!(
        started.elapsed() < LOAD_LIMIT,
        "took {:?}",
        started.elapsed()
    );
    if let Err(errors) = loaded {
        prop_assert!(!errors.0.is_empty(), "an error with no message");
        for e in errors.0 {
            prop_assert!(e.file.starts_with(dir.path()), "{e}");
            starts_every_line(&e.to_string(), &e.file)?;
        }
    }
    Ok(())
}

/// Pieces of YAML (and of this project's job files) that random text is made of.
fn yaml_token() -> impl Strategy<Value = String> {
    let fixed = prop::sample::select(vec![
        "\n",
        "\n  ",
        "\n    ",
        "  ",
        "\t",
        ": ",
        ":",
        "- ",
        "-",
        "? ",
        ",",
        "[",
        "]",
        "{",
        "}",
        "'",
        "\"",
        "\\",
        "|",
        "|-",
        ">",
        "#",
        "&a ",
        "*a",
        "&b ",
        "*b",
        "<<: *a",
        "!!str ",
        "!!int ",
        "!!binary ",
        "!custom ",
        "---\n",
        "...\n",
        "%YAML 1.2\n",
        "%TAG ! tag:x,1:\n",
        "${",
        "${X}",
        "$${",
        "}",
        "${SELLER_WEBHOOK_TOKEN}",
        "~",
        "null",
        "true",
        "no",
        "0x1F",
        "1e999",
        "-1",
        "18446744073709551616",
        ".nan",
        ".inf",
        "name",
        "kind",
        "replay",
        "sweep",
        "report",
        "live",
        "window",
        "from",
        "to",
        "previous",
        "day",
        "schedule",
        "timezone",
        "effects",
        "notificar-vendedor",
        "mode",
        "apply",
        "suppress",
        "on_failure",
        "release",
        "keep",
        "batch_size",
        "simulate",
        "webhook",
        "url",
        "headers",
        "Authorization",
        "idempotent",
        "concurrency",
        "timeout",
        "10s",
        "0s",
        "stale_after",
        "partitions",
        "2026-10-14T00:00:00-03:00",
        "0 30 2 * * *",
        "America/Sao_Paulo",
        "http://h/",
        "\u{feff}",
        "\u{202e}",
        "\u{0}",
        "\r",
        "\u{85}",
        "\u{2028}",
        "😀",
    ]);
    prop_oneof![
        6 => fixed.prop_map(str::to_owned),
        1 => "[a-z0-9._-]{0,12}",
        1 => any::<String>(),
    ]
}

fn yamlish_text() -> impl Strategy<Value = String> {
    prop::collection::vec(yaml_token(), 0..80).prop_map(|t| t.concat())
}

/// One edit of a file's text.
#[derive(Debug, Clone)]
enum Mutation {
    DeleteLine(usize),
    DuplicateLine(usize),
    SwapLines(usize, usize),
    ReplaceChar(usize, char),
    Insert(usize, String),
    IndentLine(usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<usize>().prop_map(Mutation::DeleteLine),
        any::<usize>().prop_map(Mutation::DuplicateLine),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::SwapLines(a, b)),
        (any::<usize>(), any::<char>()).prop_map(|(at, c)| Mutation::ReplaceChar(at, c)),
        (any::<usize>(), yaml_token()).prop_map(|(at, t)| Mutation::Insert(at, t)),
        (any::<usize>(), 0..6usize).prop_map(|(at, n)| Mutation::IndentLine(at, n)),
    ]
}

fn apply(text: &str, m: &Mutation) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let mut chars: Vec<char> = text.chars().collect();
    let n = lines.len().max(1);
    match m {
        Mutation::DeleteLine(i) if !lines.is_empty() => {
            lines.remove(i % n);
        }
        Mutation::DuplicateLine(i) if !lines.is_empty() => {
            let line = lines[i % n].clone();
            lines.insert(i % n, line);
        }
        Mutation::SwapLines(a, b) if !lines.is_empty() => lines.swap(a % n, b % n),
        Mutation::IndentLine(i, by) if !lines.is_empty() => {
            lines[i % n].insert_str(0, &" ".repeat(*by));
        }
        Mutation::ReplaceChar(at, c) if !chars.is_empty() => {
            let len = chars.len();
            chars[at % len] = *c;
            return chars.into_iter().collect();
        }
        Mutation::Insert(at, token) => {
            let at = at % (chars.len() + 1);
            chars.splice(at..at, token.chars());
            return chars.into_iter().collect();
        }
        _ => {}
    }
    lines.join("\n")
}

fn mutated_example() -> impl Strategy<Value = (usize, String)> {
    let files = examples();
    let count = files.len();
    (0..count, prop::collection::vec(mutation(), 1..5)).prop_map(move |(i, ms)| {
        let text = ms.iter().fold(files[i].1.clone(), |t, m| apply(&t, m));
        (i, text)
    })
}

proptest! {
    #![proptest_config(cases(256))]

    #[test]
    fn random_bytes_load_to_ok_or_a_clean_error(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        load_as_job_and_catalog(&bytes, &example_catalog())?;
    }
}

proptest! {
    #![proptest_config(cases(160))]

    #[test]
    fn yaml_like_text_loads_to_ok_or_a_clean_error(text in yamlish_text()) {
        load_as_job_and_catalog(text.as_bytes(), &example_catalog())?;
    }

    #[test]
    fn mutated_example_files_load_to_ok_or_a_clean_error((i, text) in mutated_example()) {
        let files = examples();
        load_as_job_and_catalog(text.as_bytes(), &example_catalog())?;
        // The same edit inside a whole directory: of the catalog, or of a job beside a good one.
        if files[i].0 == EFFECTS_FILE {
            load_as_dir(text.as_bytes(), files[1].1.as_bytes())?;
        } else {
            load_as_dir(files[0].1.as_bytes(), text.as_bytes())?;
        }
    }
}

/// `open` × depth, `value`, then `close` × depth.
fn nested(open: &str, value: &str, close: &str, depth: usize) -> String {
    format!("{}{value}{}", open.repeat(depth), close.repeat(depth))
}

/// Fails the test if loading `text` as a job or catalog (or inside a directory) is not clean.
fn assert_clean(text: &str) {
    load_as_job_and_catalog(text.as_bytes(), &example_catalog()).unwrap_or_else(|e| panic!("{e}"));
    load_as_dir(text.as_bytes(), text.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn deeply_nested_flow_collections_are_a_clean_error() {
    // Up to the limit of `[`/`{` per file (1000) the parser takes its time (quadratic in the
    // depth); beyond it the file is refused before parsing, naming the first opener too many.
    for depth in [200, 999, 1_001, 10_000, 200_000] {
        assert_clean(&format!("name: {}\n", nested("[", "x", "]", depth)));
        assert_clean(&format!(
            "name: x\neffects: {}\n",
            nested("{a: ", "b", "}", depth)
        ));
        assert_clean(&nested("[", "", "]", depth));
        assert_clean(&format!(
            "name: x\nkind: {}\n",
            nested("- ", "x", "", depth)
        ));
    }
}

#[test]
fn flow_nesting_beyond_the_limit_is_refused_at_its_line_and_column() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("job.yaml");
    std::fs::write(&path, format!("name: x\nkind: {}", "[".repeat(100_000))).expect("write");
    let started = Instant::now();
    let err = load_job(&path, &example_catalog()).expect_err("refused");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    let shown = err.to_string();
    let at = format!("{}:2:{}: ", path.display(), 6 + 1_000 + 1);
    assert!(
        shown.starts_with(&at) && shown.contains("nested"),
        "{shown}"
    );
}

#[test]
fn deeply_nested_block_mappings_are_a_clean_error() {
    let depth = 1_000;
    let mut text = String::from("name: x\nwindow:\n");
    for level in 1..depth {
        text.push_str(&format!("{}k{level}:\n", " ".repeat(level)));
    }
    text.push_str(&format!("{}end: 1\n", " ".repeat(depth)));
    assert_clean(&text);
}

#[test]
fn huge_files_and_scalars_load_or_fail_cleanly_and_quickly() {
    let limit = 1 << 20;
    let just_under = "a".repeat(limit - 64);
    assert_clean(&format!(
        "name: {just_under}\nwindow: {{ previous: day }}\n"
    ));
    assert_clean(&format!("name: x\n# {just_under}\n"));
    // Over the limit: refused unread, whatever the size.
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("job.yaml");
    let file = std::fs::File::create(&path).expect("create");
    file.set_len(8 << 30).expect("a sparse 8 GiB file");
    let started = Instant::now();
    let err = load_job(&path, &example_catalog()).expect_err("refused");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert!(err.to_string().contains("larger than 1024 KiB"), "{err}");
}

/// The peak resident memory of this process, in bytes (Linux).
fn peak_memory() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Nine levels of nine aliases each: 9^9 ≈ 387 million strings if expanded.
fn billion_laughs(use_as: &str) -> String {
    let mut text = String::from("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for level in 1..=8 {
        let prev = format!("*a{}", level - 1);
        let items = [prev.as_str(); 9].join(", ");
        text.push_str(&format!("a{level}: &a{level} [{items}]\n"));
    }
    text.push_str(use_as);
    text
}

#[test]
fn alias_bombs_are_refused_without_expanding_them() {
    let bombs = [
        billion_laughs("name: x\n"),
        billion_laughs("name: x\nkind: *a8\n"),
        billion_laughs("name: x\nwindow: { previous: day }\nevent_types: *a8\n"),
        billion_laughs("name: x\nkind: report\nto: *a8\n"),
        billion_laughs("notificar-vendedor:\n  webhook: { url: 'http://h/', headers: *a8 }\n  idempotent: true\n"),
        // A bomb hidden behind an alias of the whole document's keys.
        billion_laughs("name: x\nwindow: { previous: day }\nbatch_size: 10\neffects: { notificar-vendedor: *a8 }\n"),
    ];
    let started = Instant::now();
    for bomb in &bombs {
        assert_clean(bomb);
    }
    assert!(
        started.elapsed() < LOAD_LIMIT,
        "took {:?}",
        started.elapsed()
    );
    // Expanded, the bomb would need gigabytes; serde_norway stops replaying aliases long before.
    let peak = peak_memory();
    assert!(peak < 1 << 30, "peak memory {peak} bytes");
}

#[test]
fn a_merge_key_alias_cycle_is_a_clean_error() {
    assert_clean("a: &a\n  b: *a\nname: x\n");
    assert_clean("&a [*a]\n");
    assert_clean("name: &n x\nkind: *n\n");
    assert_clean("<<: {name: x}\nwindow: {previous: day}\n");
}

#[test]
fn odd_interpolations_are_a_clean_error() {
    std::env::set_var("RL_HOSTILE_SECRET", "hunter2-secret\nwith: newline");
    for text in [
        "name: x\ntimezone: ${\nwindow: {previous: day}\n",
        "name: x\ntimezone: \"${RL_HOSTILE_SECRET}\"\nwindow: {previous: day}\n",
        "name: x\nschedule: \"${RL_HOSTILE_SECRET}\"\nwindow: {previous: day}\n",
        "name: x\ntimezone: ${${X}}\nwindow: {previous: day}\n",
        "name: x\ntimezone: \"${ X }\"\nwindow: {previous: day}\n",
        "name: x\ntimezone: \"${RL_HOSTILE_UNSET_VARIABLE}\"\nwindow: {previous: day}\n",
    ] {
        assert_clean(text);
    }
}

#[test]
fn a_tiny_or_huge_rate_or_duration_is_refused_or_harmless() {
    for (rate, timeout) in [
        ("1e-300", "10s"),
        ("5e-324", "10s"),
        ("1e308", "10s"),
        ("1", "1ns"),
        ("1", "500000000y"),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(EFFECTS_FILE);
        let text = format!("t:\n  webhook: {{ url: 'http://127.0.0.1:9/', timeout: {timeout} }}\n  idempotent: true\n  rate_per_second: {rate}\n");
        std::fs::write(&path, text).expect("write");
        if let Ok(catalog) = load_effects(&path) {
            // What the worker builds from a loaded catalog must not panic either.
            let effects = replay_ledger_core::engine::effects::Effects::from_catalog(&catalog);
            assert!(effects.is_ok(), "rate {rate}, timeout {timeout}");
        }
    }
}
