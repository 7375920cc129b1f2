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

/// One `$ command` of a console block and the output the README shows.
struct Example {
    command: String,
    output: Vec<String>,
    line: usize,
}

/// The console blocks of the README section headed `heading`, in order.
fn console_examples(text: &str, heading: &str) -> Vec<Example> {
    let start = text.find(heading).unwrap_or_else(|| panic!("no section {heading}"));
    let end = text[start + heading.len()..]
        .find("\n## ")
        .map_or(text.len(), |e| start + heading.len() + e);
    let first_line = text[..start].lines().count();
    let mut examples: Vec<Example> = Vec::new();
    let mut in_console = false;
    for (i, line) in text[start..end].lines().enumerate() {
        match (in_console, line) {
            (false, "```console") => in_console = true,
            (true, "```") => in_console = false,
            (true, l) => match l.strip_prefix("$ ") {
                Some(cmd) => examples.push(Example {
                    command: cmd.to_string(),
                    output: Vec::new(),
                    line: first_line + i + 1,
                }),
                None => examples
                    .last_mut()
                    .unwrap_or_else(|| {
                        panic!("README line {}: output before a command", first_line + i + 1)
                    })
                    .output
                    .push(l.to_string()),
            },
            _ => {}
        }
    }
    examples
}

/// Whether `got` matches `want`, where a `want` line `...` stands for
/// any number of lines (the README shows excerpts); every other line must
/// be equal, trailing spaces aside.
fn matches(want: &[String], got: &[&str]) -> bool {
    match want.split_first() {
        None => got.is_empty(),
        Some((w, rest)) if w == "..." => (0..=got.len()).any(|skip| matches(rest, &got[skip..])),
        Some((w, rest)) => {
            got.first().is_some_and(|g| g.trim_end() == w.trim_end()) && matches(rest, &got[1..])
        }
    }
}

/// The examples of the README's command-line section, run in order in
/// one fresh directory as a user would paste them: each `$ ` line through
/// `bash`, stdout and stderr together, `zns` being this build, with the
/// environment the README sets (`export`) and no other `ZNS_` variable.
/// Each output must be the README's, line by line; the only thing allowed
/// to vary is what a `...` line elides. A command the README shows
/// failing (its output starts with `zns: `) must exit non-zero, every
/// other one zero.
#[test]
fn the_readme_examples_print_what_the_readme_shows() {
    let readme = repo_file("README.md");
    let examples = console_examples(&readme, "## The `zns` command line");
    assert!(examples.len() >= 10, "the section's examples were found: {}", examples.len());
    let dir = tempfile::tempdir().unwrap();
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_zns"));
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut env: Vec<(String, String)> = Vec::new();
    let mut failures = Vec::new();
    for ex in &examples {
        if let Some(assign) = ex.command.strip_prefix("export ") {
            let (k, v) = assign.split_once('=').expect("export K=V");
            env.push((k.to_string(), v.to_string()));
            assert!(ex.output.is_empty(), "README line {}: export prints nothing", ex.line);
            continue;
        }
        let o = std::process::Command::new("bash")
            .arg("-c")
            .arg(format!("{{ {}\n}} 2>&1", ex.command))
            .current_dir(dir.path())
            .env("PATH", &path)
            .env_remove("ZNS_DEVICE")
            .env_remove("ZNS_LOG")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run bash");
        let text = String::from_utf8_lossy(&o.stdout);
        let got: Vec<&str> = text.lines().collect();
        let fails =
            ex.output.first().is_some_and(|l| l.starts_with("zns: ") || l.starts_with("error: "));
        if !matches(&ex.output, &got) || o.status.success() == fails {
            failures.push(format!(
                "README line {}: $ {}\n(exit status {:?})\n--- README shows:\n{}\n--- it printed:\n{}",
                ex.line,
                ex.command,
                o.status.code(),
                ex.output.join("\n"),
                text.trim_end()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
