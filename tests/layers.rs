//! The import graph of `src/` between top-level modules follows the layers of
//! docs/architecture.md §2 and has no loop: a module may only use modules below it, so each
//! layer can be read, tested and replaced without the ones above. The check reads every
//! `crate::<module>` path in the source, so a new upward import or loop fails here the moment
//! it is written.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The top-level module a file belongs to (`src/ledger/claims.rs` → `ledger`).
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).expect("under src");
    let first = rel.components().next().expect("a component");
    let name = first.as_os_str().to_string_lossy();
    name.trim_end_matches(".rs").to_string()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every `crate::name` a file mentions outside comments, including `use crate::{a, b}` lists.
fn crate_refs(text: &str) -> BTreeSet<String> {
    let mut refs = BTreeSet::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            if let Some(list) = rest.strip_prefix('{') {
                // `use crate::{a::X, b}`: the names at the list's top level.
                let mut depth = 0;
                let mut item = String::new();
                for c in list.chars() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => break,
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            refs.insert(head(&item));
                            item.clear();
                            continue;
                        }
                        _ => {}
                    }
                    item.push(c);
                }
                if !item.trim().is_empty() {
                    refs.insert(head(&item));
                }
            } else {
                refs.insert(head(rest));
            }
        }
    }
    refs.retain(|r| !r.is_empty());
    refs
}

fn head(path: &str) -> String {
    path.trim()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// One cycle of `graph`, if it has any (depth-first search, three colours).
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(node.to_string(), 1);
        stack.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            match state.get(next.as_str()).copied().unwrap_or(0) {
                1 => {
                    let from = stack.iter().position(|n| n == next).unwrap_or(0);
                    let mut cycle = stack[from..].to_vec();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                0 => {
                    if let Some(c) = visit(next, graph, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(node.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for node in graph.keys() {
        if state.get(node.as_str()).copied().unwrap_or(0) == 0 {
            if let Some(c) = visit(node, graph, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

fn import_graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let modules: BTreeSet<String> = files.iter().map(|f| module_of(&src, f)).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let from = module_of(&src, file);
        if from == "lib" || from == "main" {
            continue;
        }
        let text = std::fs::read_to_string(file).expect("read source");
        let deps = graph.entry(from.clone()).or_default();
        for to in crate_refs(&text) {
            if to != from && modules.contains(&to) {
                deps.insert(to);
            }
        }
    }
    graph
}

/// The layers of docs/architecture.md §2, lowest first: a module may import only modules of
/// a lower layer. A new top-level module gets a line here and in that table.
const LAYERS: &[&[&str]] = &[
    &[
        "backoff", "choice", "clock", "control", "domain", "redact", "systemd",
    ],
    &[
        "cli",
        "datasets",
        "nova",
        "policy",
        "stats",
        "table",
        "transport_url",
    ],
    &["auth", "cloud"],
    &["ledger", "nova_db"],
    &["notifications", "placement"],
    &["configuration"],
    &["amqp", "backend", "telemetry"],
    &["scheduling"],
    &["rpc"],
    &["routes"],
    &["startup"],
    &["service"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

#[test]
fn every_module_imports_only_lower_layers() {
    let graph = import_graph();
    let mut wrong = Vec::new();
    for (from, deps) in &graph {
        let Some(own) = layer_of(from) else {
            wrong.push(format!(
                "{from} is in no layer: add it to LAYERS here and to docs/architecture.md §2"
            ));
            continue;
        };
        for to in deps {
            match layer_of(to) {
                Some(l) if l < own => {}
                Some(l) => wrong.push(format!(
                    "{from} (layer {own}) imports {to} (layer {l}): only lower layers"
                )),
                None => {}
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{}\n(see docs/architecture.md §2, \"Layers\")",
        wrong.join("\n")
    );
}

#[test]
fn top_level_modules_import_each_other_without_a_loop() {
    let graph = import_graph();
    if let Some(cycle) = find_cycle(&graph) {
        panic!(
            "import loop between top-level modules: {}\n(see docs/architecture.md §2, \"Layers\")",
            cycle.join(" → ")
        );
    }
}

#[test]
fn the_loop_finder_finds_a_planted_loop_and_reads_use_lists() {
    let refs = crate_refs("use crate::{a::X, b, c::{d, e}}; // crate::z\nlet x = crate::f::g();");
    assert_eq!(
        refs.into_iter().collect::<Vec<_>>(),
        ["a", "b", "c", "f"].map(String::from)
    );
    let mut graph = BTreeMap::new();
    graph.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    graph.insert("b".to_string(), BTreeSet::from(["c".to_string()]));
    graph.insert("c".to_string(), BTreeSet::from(["a".to_string()]));
    assert_eq!(find_cycle(&graph).map(|c| c.len()), Some(4));
    if let Some(deps) = graph.get_mut("c") {
        deps.clear();
    }
    assert_eq!(find_cycle(&graph), None);
}
