//! `cargo xtask crate-graph`: the workspace's crate graph, as Cargo sees
//! it (`cargo metadata`), written into docs/architecture.md between two
//! markers. A test checks the document against Cargo's metadata, so the
//! graph in the document cannot drift from the manifests.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::{Error, Result};

/// The document holding the graph.
pub const DOC: &str = "docs/architecture.md";

const BEGIN: &str =
    "<!-- crate-graph:begin (written by cargo xtask crate-graph; a test checks it) -->";
const END: &str = "<!-- crate-graph:end -->";

/// One workspace crate: its description and its dependencies on the other
/// workspace crates, for the library and binaries (`normal`) and for tests,
/// examples and benchmarks only (`dev`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Crate {
    description: String,
    normal: BTreeSet<String>,
    dev: BTreeSet<String>,
}

/// The crate graph from `cargo metadata`, written into docs/architecture.md
///
/// Writes the workspace's crate graph (from `cargo metadata`) into
/// docs/architecture.md between its crate-graph markers: a Mermaid diagram and a
/// table of each crate's layer, what it depends on, and what only its tests,
/// examples and benchmarks use. With --check, changes nothing and fails when the
/// document differs.
#[derive(Debug, Clone, clap::Parser)]
#[command(verbatim_doc_comment, args_override_self = true)]
pub struct Args {
    /// Change nothing; fail when the document differs from Cargo's metadata.
    #[arg(long)]
    check: bool,
}

/// Runs the task.
pub fn run(args: &Args) -> Result<()> {
    let check = args.check;
    let root = crate::vmtest::workspace_root();
    let graph = metadata(&root)?;
    let path = root.join(DOC);
    let doc = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
    let updated = replace_section(&doc, &render(&graph))?;
    if updated == doc {
        println!("{DOC}: the crate graph is up to date");
        return Ok(());
    }
    if check {
        return Err(Error::new(format!(
            "{DOC}: the crate graph differs from Cargo's metadata (run cargo xtask crate-graph)"
        )));
    }
    std::fs::write(&path, updated).map_err(|e| Error::io(&path, e))?;
    println!("{DOC}: crate graph written");
    Ok(())
}

/// The workspace's crates from `cargo metadata` run in `root`.
pub fn metadata(root: &Path) -> Result<BTreeMap<String, Crate>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(root)
        .output()
        .map_err(|e| Error::new(format!("cargo metadata: {e}")))?;
    if !out.status.success() {
        return Err(Error::new(format!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    let v: Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| Error::new(format!("cargo metadata: {e}")))?;
    Ok(graph_of(&v))
}

/// The graph in `cargo metadata`'s JSON (workspace members only).
fn graph_of(v: &Value) -> BTreeMap<String, Crate> {
    let packages = v["packages"].as_array().cloned().unwrap_or_default();
    let names: BTreeSet<String> =
        packages.iter().filter_map(|p| p["name"].as_str().map(String::from)).collect();
    let mut graph = BTreeMap::new();
    for p in &packages {
        let Some(name) = p["name"].as_str() else { continue };
        let mut c = Crate {
            description: p["description"].as_str().unwrap_or("").to_string(),
            ..Crate::default()
        };
        for d in p["dependencies"].as_array().into_iter().flatten() {
            let Some(dep) = d["name"].as_str().filter(|n| names.contains(*n)) else { continue };
            match d["kind"].as_str() {
                None | Some("normal") => c.normal.insert(dep.to_string()),
                _ => c.dev.insert(dep.to_string()),
            };
        }
        // A crate a library needs anyway is not a test-only dependency.
        c.dev = c.dev.difference(&c.normal).cloned().collect();
        graph.insert(name.to_string(), c);
    }
    graph
}

/// Each crate's layer: 0 for a crate that depends on no workspace crate,
/// else one more than the highest layer it depends on.
fn layers(graph: &BTreeMap<String, Crate>) -> BTreeMap<String, usize> {
    fn layer(
        name: &str,
        graph: &BTreeMap<String, Crate>,
        memo: &mut BTreeMap<String, usize>,
    ) -> usize {
        if let Some(&l) = memo.get(name) {
            return l;
        }
        // Cargo refuses cycles among normal dependencies.
        let deps: Vec<String> =
            graph.get(name).map(|c| c.normal.iter().cloned().collect()).unwrap_or_default();
        let l = deps.iter().map(|d| layer(d, graph, memo) + 1).max().unwrap_or(0);
        memo.insert(name.to_string(), l);
        l
    }
    let mut memo = BTreeMap::new();
    for name in graph.keys() {
        layer(name, graph, &mut memo);
    }
    memo
}

/// The section between the markers: a Mermaid diagram of the library
/// dependencies and a table by layer.
pub fn render(graph: &BTreeMap<String, Crate>) -> String {
    let layers = layers(graph);
    let mut order: Vec<(&String, &Crate)> = graph.iter().collect();
    order.sort_by_key(|(n, _)| (std::cmp::Reverse(layers[*n]), (*n).clone()));
    let mut s = format!("{BEGIN}\n\n```mermaid\ngraph TD\n");
    for (name, c) in &order {
        for d in &c.normal {
            s += &format!("  {} --> {}\n", node(name), node(d));
        }
        if c.normal.is_empty() && !graph.values().any(|o| o.normal.contains(*name)) {
            s += &format!("  {}\n", node(name));
        }
    }
    s += "```\n\n| layer | crate | depends on | tests, examples and benchmarks also use |\n";
    s += "|---|---|---|---|\n";
    for (name, c) in &order {
        let list = |set: &BTreeSet<String>| {
            if set.is_empty() {
                "-".to_string()
            } else {
                set.iter().map(|d| format!("`{d}`")).collect::<Vec<_>>().join(", ")
            }
        };
        s +=
            &format!("| {} | `{name}` | {} | {} |\n", layers[*name], list(&c.normal), list(&c.dev));
    }
    s += &format!("\n{END}");
    s
}

/// A Mermaid node for a crate: an identifier without hyphens, labelled
/// with the crate's name.
fn node(name: &str) -> String {
    format!("{}[{name}]", name.replace('-', "_"))
}

/// `doc` with the text between the markers (markers included) replaced
/// by `section`.
fn replace_section(doc: &str, section: &str) -> Result<String> {
    let missing = || Error::new(format!("{DOC} has no crate-graph markers ({BEGIN} ... {END})"));
    let start = doc.find(BEGIN).ok_or_else(missing)?;
    let end = doc[start..].find(END).ok_or_else(missing)? + start + END.len();
    Ok(format!("{}{section}{}", &doc[..start], &doc[end..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_architecture_document_shows_the_crate_graph_cargo_sees() {
        let root = crate::vmtest::workspace_root();
        let graph = metadata(&root).unwrap();
        assert!(graph.contains_key("zns-block") && graph.contains_key("zns-nvmf"), "{graph:?}");
        let doc = std::fs::read_to_string(root.join(DOC)).unwrap();
        let want = replace_section(&doc, &render(&graph)).unwrap();
        assert!(want == doc, "{DOC}: the crate graph is out of date: run cargo xtask crate-graph");
    }

    #[test]
    fn check_is_the_only_option() {
        let p = |a: &[&str]| crate::args::tests::parse::<Args>(a);
        assert!(!p(&[]).unwrap().unwrap().check && p(&["--check"]).unwrap().unwrap().check);
        assert!(p(&["--help"]).unwrap().is_none());
        assert!(p(&["--chekc"]).is_err() && p(&["check"]).is_err());
    }

    #[test]
    fn layers_rise_above_dependencies_and_test_only_use_is_kept_apart() {
        let v = serde_json::json!({"packages": [
            {"name": "a", "dependencies": []},
            {"name": "b", "dependencies": [{"name": "a", "kind": null}, {"name": "serde", "kind": null}]},
            {"name": "c", "dependencies": [
                {"name": "b", "kind": null}, {"name": "a", "kind": "dev"}, {"name": "b", "kind": "dev"}]},
        ]});
        let g = graph_of(&v);
        assert_eq!(g["b"].normal, BTreeSet::from(["a".to_string()]), "outside crates left out");
        assert_eq!(g["c"].dev, BTreeSet::from(["a".to_string()]), "b is a normal dependency");
        let l = layers(&g);
        assert_eq!((l["a"], l["b"], l["c"]), (0, 1, 2));
        let s = render(&g);
        assert!(s.contains("  c[c] --> b[b]\n") && s.contains("| 2 | `c` | `b` | `a` |"), "{s}");
        let doc = format!("x\n{BEGIN}\nold\n{END}\ny");
        assert_eq!(replace_section(&doc, "new").unwrap(), "x\nnew\ny");
        assert!(replace_section("no markers", "new").is_err());
    }
}
