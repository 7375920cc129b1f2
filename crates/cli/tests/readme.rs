//! The README and docs/cli.md as a newcomer reads them: their tables of
//! device URIs and the `--device` help agree with the one list of URI
//! forms in zns-device (`zns_device::uri::URI_FORMS`).

mod common;

use std::path::PathBuf;

use zns_device::uri::{help_text, markdown_table};

fn repo_file(rel: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The Markdown table of device URIs in `text`: the lines from `| URI |
/// device |` (followed by the `emu:` row) to the first line that is not a
/// table row.
fn uri_table(text: &str, file: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let start = (0..lines.len())
        .find(|&i| {
            lines[i] == "| URI | device |"
                && lines.get(i + 2).is_some_and(|l| l.starts_with("| `emu:` |"))
        })
        .unwrap_or_else(|| panic!("{file} has no table of device URIs"));
    let rows = lines[start..].iter().take_while(|l| l.starts_with('|'));
    rows.map(|l| format!("{l}\n")).collect()
}

#[test]
fn the_uri_tables_of_the_readme_and_docs_are_the_list_in_code() {
    let want = markdown_table();
    for file in ["README.md", "docs/cli.md"] {
        let got = uri_table(&repo_file(file), file);
        assert!(
            got == want,
            "{file}: its table of device URIs is not the list in code; it should read:\n{want}"
        );
    }
}

/// Words separated by single spaces: help texts may be wrapped.
fn words(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn the_device_help_lists_every_form_of_the_list_in_code() {
    let long = common::ok(common::zns(&["--help"])).stdout;
    assert!(words(&long).contains(&words(&help_text())), "zns --help:\n{long}");
    // Every subcommand carries the global option, with the same text.
    let sub = common::ok(common::zns(&["report-zones", "--help"])).stdout;
    assert!(words(&sub).contains(&words(&help_text())), "zns report-zones --help:\n{sub}");
    // -h: one line naming every scheme the parser accepts.
    let short = common::ok(common::zns(&["-h"])).stdout;
    let line = short
        .lines()
        .find(|l| l.trim_start().starts_with("-d, --device"))
        .expect("a --device line");
    for scheme in zns_device::uri::SCHEMES {
        assert!(line.contains(&format!("{scheme}:...")), "{scheme} in {line}");
    }
}
