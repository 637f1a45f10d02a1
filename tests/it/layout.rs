//! The product crate's shape, as the next engineer relies on it: imports between modules go one
//! way (no circle), and the product holds no `unsafe` code and no `libc`.
//!
//! The import graph is read from the sources: every `crate::a::b` and `super::x` path (in `use`
//! lines and inline) is an edge to the deepest module it names. A module using its own ancestors
//! (`super::Type` in a child) is how Rust splits a module into files, not a circle.
//!
//! The graph is checked twice: between files, and with every file collapsed into its top-level
//! module (`consumer::snapshot` → `consumer`). Two top-level modules that use each other through
//! different files have no file-level circle, yet neither can be understood, moved or tested
//! without the other.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Module = Vec<String>;

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file of `src/` with its module path (`applier/mod.rs` → `applier`).
fn modules() -> BTreeMap<Module, String> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("read src") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(&src(), &mut files);
    files
        .into_iter()
        .filter_map(|path| {
            let rel = path.strip_prefix(src()).ok()?.with_extension("");
            let mut parts: Module = rel
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect();
            if parts.last().is_some_and(|p| p == "mod") {
                parts.pop();
            }
            if parts == ["lib"] || parts == ["main"] {
                return None;
            }
            let text = std::fs::read_to_string(&path).expect("read a source file");
            // Unit tests may reach anywhere; they are not part of the import graph.
            let text = match text.find("#[cfg(test)]\nmod tests") {
                Some(at) => text[..at].to_string(),
                None => text,
            };
            Some((parts, text))
        })
        .collect()
}

/// The paths a file names: `crate::x::y`, `super::z`, and the items of `use crate::{…}` groups.
fn paths(module: &Module, text: &str) -> Vec<Module> {
    let mut found = Vec::new();
    let words = |s: &str| -> Vec<String> { s.split("::").map(str::to_string).collect() };
    for (prefix, base) in [
        ("crate::", Vec::new()),
        ("super::", module[..module.len() - 1].to_vec()),
    ] {
        for (at, _) in text.match_indices(prefix) {
            let rest = &text[at + prefix.len()..];
            if let Some(group) = rest.strip_prefix('{') {
                let group = &group[..group.find("};").unwrap_or(group.len())];
                for item in group
                    .split([',', '{', '}', '\n', ' '])
                    .filter(|s| !s.is_empty())
                {
                    found.push([base.clone(), words(item)].concat());
                }
            } else {
                let end = rest
                    .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                    .unwrap_or(rest.len());
                found.push([base.clone(), words(rest[..end].trim_end_matches(':'))].concat());
            }
        }
    }
    found
}

fn import_graph() -> BTreeMap<Module, BTreeSet<Module>> {
    let modules = modules();
    let known: BTreeSet<Module> = modules.keys().cloned().collect();
    let deepest = |path: &Module| {
        (1..=path.len())
            .rev()
            .map(|k| path[..k].to_vec())
            .find(|m| known.contains(m))
    };
    modules
        .iter()
        .map(|(module, text)| {
            let targets = paths(module, text)
                .iter()
                .filter_map(deepest)
                .filter(|t| t != module && !module.starts_with(t))
                .collect();
            (module.clone(), targets)
        })
        .collect()
}

/// A circle through `start`, if the graph has one: the modules on it, in order.
fn circle_through(
    graph: &BTreeMap<Module, BTreeSet<Module>>,
    start: &Module,
) -> Option<Vec<Module>> {
    let mut stack = vec![(start.clone(), vec![start.clone()])];
    let mut seen = BTreeSet::new();
    while let Some((at, path)) = stack.pop() {
        for next in graph.get(&at).into_iter().flatten() {
            if next == start {
                return Some(path);
            }
            if seen.insert(next.clone()) {
                stack.push((next.clone(), [path.clone(), vec![next.clone()]].concat()));
            }
        }
    }
    None
}

/// The graph with every module collapsed into its top-level module (`a::b::c` → `a`), without
/// the edges a top-level module has to itself.
fn top_level_graph(
    graph: &BTreeMap<Module, BTreeSet<Module>>,
) -> BTreeMap<Module, BTreeSet<Module>> {
    let mut top: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (module, targets) in graph {
        let from = module[..1].to_vec();
        let edges = top.entry(from.clone()).or_default();
        edges.extend(
            targets
                .iter()
                .map(|t| t[..1].to_vec())
                .filter(|t| *t != from),
        );
    }
    top
}

/// Every circle of the graph, one through each module on one, as `a → b → c`.
fn circles(graph: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<String> {
    graph
        .keys()
        .filter_map(|m| circle_through(graph, m))
        .map(|c| {
            c.iter()
                .map(|m| m.join("::"))
                .collect::<Vec<_>>()
                .join(" → ")
        })
        .collect()
}

#[test]
fn imports_between_the_products_modules_go_one_way() {
    let graph = import_graph();
    assert!(graph.len() > 20, "the sources were found: {graph:?}");
    let runner = vec!["runner".to_string()];
    assert!(
        graph.values().filter(|t| t.contains(&runner)).count() >= 2,
        "the graph sees imports (several modules use the runner)"
    );
    let circles = circles(&graph);
    assert!(circles.is_empty(), "import circles: {circles:#?}");
}

#[test]
fn imports_between_the_products_top_level_modules_go_one_way() {
    let graph = top_level_graph(&import_graph());
    let runner = vec!["runner".to_string()];
    assert!(
        graph.values().filter(|t| t.contains(&runner)).count() >= 2,
        "the collapsed graph keeps the imports (several modules use the runner)"
    );
    assert!(
        !graph.keys().any(|m| m.len() > 1),
        "every module is collapsed to its top level: {graph:?}"
    );
    let circles = circles(&graph);
    assert!(
        circles.is_empty(),
        "import circles between top-level modules: {circles:#?}"
    );
}

#[test]
fn the_product_has_no_unsafe_code_and_no_libc() {
    for (module, text) in modules() {
        assert!(
            !text.contains("unsafe {")
                && !text.contains("unsafe fn")
                && !text.contains("unsafe impl"),
            "unsafe code in {}",
            module.join("::")
        );
    }
    let manifest =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
            .expect("read Cargo.toml");
    assert!(
        !manifest.lines().any(|l| l.trim_start().starts_with("libc")),
        "the product's Cargo.toml names libc"
    );
}
