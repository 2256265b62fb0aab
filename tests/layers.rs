//! The import graph of `src/` between top-level modules is the table of docs/architecture.md
//! §2, "Layers": each row's layer, modules and the modules they import. The test reads that
//! table and every `crate::<module>` path in the source, and fails when they disagree (an
//! import the table does not list, a listed import the code no longer makes, a module in no
//! row or a row naming no module), when a module imports one of the same or a higher layer,
//! and on any loop. So the table cannot drift from the code, and each layer can be read,
//! tested and replaced without the ones above.

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

/// One row of docs/architecture.md §2's table: `| layer | modules | import |`.
#[derive(Debug, PartialEq)]
struct Row {
    layer: usize,
    modules: Vec<String>,
    /// The modules every module of the row imports: the backquoted names of the third column
    /// outside parentheses (a parenthesis explains; "nothing of the crate" is the empty set).
    imports: BTreeSet<String>,
}

/// The backquoted names of `text` outside parentheses.
fn quoted_names(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut depth = 0usize;
    let mut quoted: Option<String> = None;
    for c in text.chars() {
        match (c, &mut quoted) {
            ('`', Some(name)) => {
                if depth == 0 {
                    names.push(std::mem::take(name));
                }
                quoted = None;
            }
            (_, Some(name)) => name.push(c),
            ('`', None) => quoted = Some(String::new()),
            ('(', None) => depth += 1,
            (')', None) => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    names
}

/// The first table of the section headed `## 2.` in `markdown`, or why it cannot be read.
fn layer_table(markdown: &str) -> Result<Vec<Row>, String> {
    let section = markdown
        .split("\n## ")
        .find(|s| s.starts_with("2."))
        .ok_or("no section \"## 2.\"")?;
    let mut rows = Vec::new();
    let lines = section.lines().skip_while(|l| !l.starts_with('|'));
    // The header and the separator, then the rows up to the table's end.
    for line in lines.skip(2).take_while(|l| l.starts_with('|')) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        let [layer, modules, imports] = cells[..] else {
            return Err(format!("not three columns: {line}"));
        };
        let layer = layer
            .parse()
            .map_err(|_| format!("layer {layer:?} is not a number: {line}"))?;
        let modules = quoted_names(modules);
        if modules.is_empty() {
            return Err(format!("a row naming no module: {line}"));
        }
        rows.push(Row {
            layer,
            modules,
            imports: quoted_names(imports).into_iter().collect(),
        });
    }
    if rows.is_empty() {
        return Err("no table in section 2".into());
    }
    Ok(rows)
}

/// Where the table and the import graph disagree, one line each.
fn disagreements(rows: &[Row], graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let mut wrong = Vec::new();
    let mut layer_of = BTreeMap::new();
    for row in rows {
        for module in &row.modules {
            if layer_of.insert(module.as_str(), row.layer).is_some() {
                wrong.push(format!("`{module}` is in two rows"));
            }
        }
    }
    for module in graph.keys() {
        if !layer_of.contains_key(module.as_str()) {
            wrong.push(format!("`{module}` is in no row: add it"));
        }
    }
    for row in rows {
        for module in &row.modules {
            let Some(actual) = graph.get(module) else {
                wrong.push(format!("`{module}` is no module of src/"));
                continue;
            };
            let unlisted: Vec<_> = actual.difference(&row.imports).collect();
            let unused: Vec<_> = row.imports.difference(actual).collect();
            if !unlisted.is_empty() {
                wrong.push(format!(
                    "`{module}` imports {unlisted:?}, which its row omits"
                ));
            }
            if !unused.is_empty() {
                wrong.push(format!(
                    "`{module}`'s row lists {unused:?}, which it does not import"
                ));
            }
            for to in actual {
                match layer_of.get(to.as_str()) {
                    Some(&l) if l >= row.layer => wrong.push(format!(
                        "`{module}` (layer {}) imports `{to}` (layer {l}): only lower layers",
                        row.layer
                    )),
                    _ => {}
                }
            }
        }
    }
    wrong
}

#[test]
fn the_layer_table_of_the_architecture_doc_is_the_import_graph() {
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/architecture.md");
    let markdown = std::fs::read_to_string(&doc).expect("docs/architecture.md");
    let rows = layer_table(&markdown).unwrap_or_else(|e| panic!("docs/architecture.md §2: {e}"));
    let wrong = disagreements(&rows, &import_graph());
    assert!(
        wrong.is_empty(),
        "docs/architecture.md §2, \"Layers\", disagrees with src/:\n{}",
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

#[test]
fn the_table_reader_names_each_disagreement() {
    let doc = "# T\n\n## 1. One\n\n| a | b | c |\n|---|---|---|\n| 9 | `zzz` | x |\n\n\
        ## 2. Layers\n\ntext\n\n| layer | modules | import |\n|---|---|---|\n\
        | 0 | `clock`, `domain` | nothing of the crate (`table` aside) |\n\
        | 1 | `table` | `domain`, `clock` (for `ledger`) |\n\
        | 1 | `ledger` | `table` |\n\nafter\n";
    let rows = layer_table(doc).expect("a table");
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[0].modules, ["clock", "domain"]);
    assert!(rows[0].imports.is_empty());
    assert_eq!(
        rows[1].imports,
        BTreeSet::from(["clock".to_string(), "domain".to_string()])
    );
    let graph = BTreeMap::from([
        ("clock".to_string(), BTreeSet::new()),
        ("domain".to_string(), BTreeSet::new()),
        ("table".to_string(), BTreeSet::from(["domain".to_string()])),
        ("ledger".to_string(), BTreeSet::from(["table".to_string()])),
        ("stats".to_string(), BTreeSet::new()),
    ]);
    assert_eq!(
        disagreements(&rows, &graph),
        [
            "`stats` is in no row: add it",
            "`table`'s row lists [\"clock\"], which it does not import",
            "`ledger` (layer 1) imports `table` (layer 1): only lower layers",
        ]
    );
    assert!(layer_table("## 2. Layers\n\nno table\n").is_err());
    assert!(layer_table("## 2. Layers\n\n| h | h | h |\n|-|-|-|\n| x | `a` | |\n").is_err());
}
