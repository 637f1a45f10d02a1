//! The product's shape, as the next engineer relies on it: imports between modules go one way (no
//! circle), imports between the role folders go down their order (edges, services, engine,
//! tables, then config, the domain and the shared words), the core crate (`core/`) depends on no
//! part of the periphery, and the product holds no `unsafe` code and no `libc`.
//!
//! The two source trees are read as one namespace: the core's modules and the periphery's have
//! different paths (`tables`, `engine`, `services::runner` are the core's; `edges`,
//! `services::report` the periphery's), and the periphery names the core's as
//! `replay_ledger_core::…` at the crossing, read here as the same module as the core's own
//! `crate::…`.
//!
//! The import graph is read from the sources: every `crate::a::b`, `replay_ledger_core::a::b` and
//! `super::x` path (in `use` lines and inline) is an edge to the deepest module it names. A module using its own ancestors
//! (`super::Type` in a child) is how Rust splits a module into files, not a circle.
//!
//! The graph is checked three times: between files; with every file collapsed into its part
//! (`services::consumer::state` → `services::consumer`, `config::de` → `config`), since two parts
//! that use each other through different files have no file-level circle, yet neither can be
//! understood, moved or tested without the other; and between the role folders themselves.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Module = Vec<String>;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The sources of the product's two crates: the periphery's and the core's.
fn sources() -> [PathBuf; 2] {
    [root().join("src"), root().join("core").join("src")]
}

/// The manifests of the product's two crates.
fn manifests() -> [(PathBuf, String); 2] {
    [
        root().join("Cargo.toml"),
        root().join("core").join("Cargo.toml"),
    ]
    .map(|path| {
        let text = std::fs::read_to_string(&path).expect("read a manifest");
        (path, text)
    })
}

/// The `[dependencies]` lines of a manifest.
fn dependencies(manifest: &str) -> Vec<&str> {
    manifest
        .split("\n[dependencies]\n")
        .nth(1)
        .expect("a [dependencies] table")
        .lines()
        .take_while(|l| !l.starts_with('['))
        .filter(|l| !l.trim_start().starts_with('#') && !l.trim().is_empty())
        .collect()
}

/// Every `.rs` file of both crates' sources with its module path (`applier/mod.rs` →
/// `applier`).
fn modules() -> BTreeMap<Module, String> {
    modules_of(&sources())
}

/// Every `.rs` file under these folders.
fn rust_files(roots: &[PathBuf]) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("read a source folder") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    for root in roots {
        walk(root, &mut files);
    }
    files
}

/// Every `.rs` file under these source roots with its module path.
fn modules_of(roots: &[PathBuf]) -> BTreeMap<Module, String> {
    let files = rust_files(roots);
    files
        .into_iter()
        .filter_map(|path| {
            let src = roots.iter().find(|r| path.starts_with(r))?;
            let rel = path.strip_prefix(src).ok()?.with_extension("");
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

/// The paths a file names: `crate::x::y`, `replay_ledger_core::x::y` (the core, from the
/// periphery), `super::z` (and `super::super::z`, each `super::` one module up), and the items of
/// `use crate::{…}` groups.
fn paths(module: &Module, text: &str) -> Vec<Module> {
    let mut found = Vec::new();
    let words = |s: &str| -> Vec<String> { s.split("::").map(str::to_string).collect() };
    for prefix in ["crate::", "replay_ledger_core::", "super::"] {
        for (start, _) in text.match_indices(prefix) {
            // A `super::` inside a chain was counted by the chain's first one.
            if prefix == "super::" && text[..start].ends_with("super::") {
                continue;
            }
            let mut at = start + prefix.len();
            let base = if prefix != "super::" {
                Vec::new()
            } else {
                let mut ups = 1;
                while text[at..].starts_with("super::") {
                    ups += 1;
                    at += "super::".len();
                }
                module[..module.len().saturating_sub(ups)].to_vec()
            };
            let rest = &text[at..];
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

/// The folders that group the parts by role, from the top: a folder's modules import only from
/// the folders after it (and from their own).
const ROLES: [&str; 7] = [
    "edges", "services", "engine", "tables", "config", "domain", "shared",
];

/// The part a module belongs to: two levels deep inside a role folder that holds parts
/// (`services::runner`), else its top-level module (`config`, `domain`).
fn part(module: &Module) -> Module {
    let grouped = ["edges", "services", "engine", "tables", "shared"];
    let depth = if grouped.contains(&module[0].as_str()) {
        2
    } else {
        1
    };
    module[..depth.min(module.len())].to_vec()
}

/// The graph with every module collapsed by `level`, without the edges a collapsed module has to
/// itself.
fn collapsed(
    graph: &BTreeMap<Module, BTreeSet<Module>>,
    level: fn(&Module) -> Module,
) -> BTreeMap<Module, BTreeSet<Module>> {
    let mut out: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (module, targets) in graph {
        let from = level(module);
        let edges = out.entry(from.clone()).or_default();
        edges.extend(targets.iter().map(level).filter(|t| *t != from));
    }
    out
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

fn runner() -> Module {
    vec!["services".to_string(), "runner".to_string()]
}

#[test]
fn imports_between_the_products_modules_go_one_way() {
    let graph = import_graph();
    assert!(graph.len() > 20, "the sources were found: {graph:?}");
    assert!(
        graph.values().filter(|t| t.contains(&runner())).count() >= 2,
        "the graph sees imports (several modules use the runner)"
    );
    let circles = circles(&graph);
    assert!(circles.is_empty(), "import circles: {circles:#?}");
}

#[test]
fn imports_between_the_products_parts_go_one_way() {
    let graph = collapsed(&import_graph(), part);
    assert!(
        graph.values().filter(|t| t.contains(&runner())).count() >= 2,
        "the collapsed graph keeps the imports (several parts use the runner)"
    );
    assert!(
        graph.keys().all(|m| *m == part(m)),
        "every module is collapsed to its part: {graph:?}"
    );
    let circles = circles(&graph);
    assert!(
        circles.is_empty(),
        "import circles between parts: {circles:#?}"
    );
}

#[test]
fn imports_between_the_role_folders_go_down_their_order() {
    let graph = collapsed(&import_graph(), |m| m[..1].to_vec());
    let rank = |m: &Module| ROLES.iter().position(|r| *r == m[0]);
    assert!(
        graph.keys().all(|m| rank(m).is_some()),
        "every top-level module is one of {ROLES:?}: {:?}",
        graph.keys().collect::<Vec<_>>()
    );
    let upward: Vec<String> = graph
        .iter()
        .flat_map(|(from, to)| to.iter().map(move |t| (from, t)))
        .filter(|(from, to)| rank(to) <= rank(from))
        .map(|(from, to)| format!("{} → {}", from[0], to[0]))
        .collect();
    assert!(upward.is_empty(), "imports up the order: {upward:#?}");
    assert!(
        graph[&vec!["edges".to_string()]].len() >= 4,
        "the graph sees the folders' imports"
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
    for (path, manifest) in manifests() {
        assert!(
            !manifest.lines().any(|l| l.trim_start().starts_with("libc")),
            "{} names libc",
            path.display()
        );
    }
}

#[test]
fn the_product_links_no_test_rig() {
    for (module, text) in modules() {
        assert!(
            !text.contains("testkit::"),
            "{} uses the test rigs (testkit): the product must not link them",
            module.join("::")
        );
    }
    for (path, manifest) in manifests() {
        let dependencies = dependencies(&manifest);
        assert!(
            dependencies.len() > 10,
            "the table of {} was read: {dependencies:?}",
            path.display()
        );
        assert!(
            !dependencies.iter().any(|l| l.contains("testkit")),
            "the [dependencies] of {} name the test rigs: {dependencies:#?}",
            path.display()
        );
    }
}

/// The layering the compiler holds: the core crate depends on neither the periphery's package
/// nor the crates only the periphery needs (HTTP server, templates, mail, the command line), and
/// none of its files names a periphery module. The compiler would refuse such a `crate::` path
/// today; this says why the manifest must not grow the dependency that would let it through.
#[test]
fn the_core_crate_depends_on_no_part_of_the_periphery() {
    let [(_, root_manifest), (_, core_manifest)] = manifests();
    let core = dependencies(&core_manifest);
    assert!(
        dependencies(&root_manifest)
            .iter()
            .any(|l| l.starts_with("replay-ledger-core")),
        "the periphery is built on the core"
    );
    for periphery in [
        "replay-ledger ",
        "replay-ledger.",
        "path = \"..\"",
        "axum",
        "hyper",
        "maud",
        "lettre",
        "clap",
        "argon2",
        "rust_xlsxwriter",
        "tracing-subscriber",
    ] {
        assert!(
            !core.iter().any(|l| l.contains(periphery)),
            "core/Cargo.toml depends on {periphery}, a part of the periphery: {core:#?}"
        );
    }
    let core_modules = modules_of(&[root().join("core").join("src")]);
    assert!(core_modules.len() > 50, "the core's sources were found");
    let periphery: BTreeSet<Module> = modules_of(&[root().join("src")])
        .into_keys()
        .filter(|m| !core_modules.contains_key(m))
        .collect();
    assert!(
        periphery.contains(&vec!["edges".to_string()]),
        "the periphery's modules were found"
    );
    let reaching: Vec<String> = core_modules
        .iter()
        .flat_map(|(module, text)| {
            paths(module, text)
                .into_iter()
                .filter(|p| periphery.iter().any(|m| p.starts_with(m)))
                .map(move |p| format!("{} → {}", module.join("::"), p.join("::")))
        })
        .collect();
    assert!(
        reaching.is_empty(),
        "the core names the periphery: {reaching:#?}"
    );
}

/// The statements that write `comissao` and `efeito_aplicado` live with the modules that own
/// those tables (`tables::commission`, `tables::ledger`), and nowhere else in the product or the
/// demo's program: a second writer would skip the version guard or the ledger's states. The test
/// rigs play the seed's buggy consumer (`testkit`), and the benchmark's floors are hand-written
/// references; neither is the product.
#[test]
fn only_the_owning_tables_modules_write_comissao_and_the_ledger() {
    let owners = [
        root().join("core/src/tables/commission"),
        root().join("core/src/tables/ledger"),
    ];
    let files = rust_files(&[
        root().join("src"),
        root().join("core/src"),
        root().join("demo/src"),
    ]);
    let mut writers = Vec::new();
    let mut owned = 0;
    for file in &files {
        let text = std::fs::read_to_string(file)
            .expect("a source file")
            .to_lowercase();
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        for table in ["comissao", "efeito_aplicado"] {
            for verb in ["insert into", "update", "delete from", "truncate"] {
                let statement = format!("{verb} {table}");
                let writes = text.match_indices(&statement).any(|(at, _)| {
                    !text[at + statement.len()..]
                        .starts_with(|c: char| c.is_alphanumeric() || c == '_')
                });
                if writes && owners.iter().any(|o| file.starts_with(o)) {
                    owned += 1;
                } else if writes {
                    writers.push(format!(
                        "{}: {statement}",
                        file.strip_prefix(root()).unwrap_or(file).display()
                    ));
                }
            }
        }
    }
    assert!(owned >= 4, "the owners' statements were found ({owned})");
    assert!(
        writers.is_empty(),
        "written outside the modules that own them: {writers:#?}"
    );
}

/// The environment is read at the edge only (`src/edges/`: the command line's settings and clap's
/// `env` flags), once, into one settings value handed down; no part below reads a variable of
/// its own. The one exception is the job files' `${VAR}` references (`core/src/config/interp.rs`):
/// their names are the job author's, not the program's, and are read when a job file is loaded.
/// Not scanned: the tests, the test rigs (`testkit/`), the demo's program (`demo/`), the examples
/// and build scripts (there are none) — they drive the product, they are not it.
#[test]
fn the_environment_is_read_only_at_the_edge() {
    let edge = root().join("src/edges");
    let job_files = root().join("core/src/config/interp.rs");
    let reads = [
        "env::var(",
        "env::var_os(",
        "env::vars(",
        "env::vars_os(",
        "var_os(",
    ];
    let mut at_edge = 0;
    let mut below = Vec::new();
    for file in rust_files(&sources()) {
        let text = std::fs::read_to_string(&file).expect("a source file");
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if !reads.iter().any(|r| code.contains(r)) {
                continue;
            }
            if file.starts_with(&edge) {
                at_edge += 1;
            } else if file != job_files {
                let rel = file.strip_prefix(root()).unwrap_or(&file);
                below.push(format!("{}:{}: {}", rel.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(at_edge >= 1, "the edge's own reads were found");
    assert!(
        below.is_empty(),
        "the environment read below the edge (add the variable to the edge's settings and hand \
         it down): {below:#?}"
    );
}

#[test]
fn a_chain_of_super_resolves_one_module_up_per_super() {
    let module: Module = ["edges", "console", "templates", "live"]
        .map(String::from)
        .to_vec();
    let named = paths(
        &module,
        "use super::super::live::LiveView;\nuse super::pace;\nuse super::super::{views::Gate, session};\n",
    );
    let named: Vec<String> = named.iter().map(|p| p.join("::")).collect();
    assert_eq!(
        named,
        [
            "edges::console::live::LiveView",
            "edges::console::templates::pace",
            "edges::console::views::Gate",
            "edges::console::session",
        ]
    );
}
