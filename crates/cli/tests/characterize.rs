//! `zns characterize` as a user runs it: the smoke suite on `emu:tiny`,
//! `results.json` checked against every field docs/results-json.md
//! documents (and nothing undocumented), the HTML report, the reference
//! table on `emu:zn540` and against another run (`--reference`),
//! comparisons, and devices that hold data.

mod common;

use std::path::{Path, PathBuf};

use common::{ok, zns, Out};
use serde_json::Value;

fn characterize(dir: &Path, extra: &[&str]) -> (Out, Value, String) {
    let out = dir.to_str().unwrap();
    let mut args = vec!["characterize", "--suite", "smoke", "--out", out];
    args.extend_from_slice(extra);
    let o = zns(&args);
    let json = std::fs::read_to_string(dir.join("results.json")).unwrap_or_default();
    let v = serde_json::from_str(&json).unwrap_or(Value::Null);
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap_or_default();
    (o, v, html)
}

/// One documented field: its path (`points[].latency.p99_us`), its type
/// word, whether it may be absent and whether it may be null.
#[derive(Debug)]
struct Field {
    path: String,
    kind: String,
    optional: bool,
    nullable: bool,
}

fn documented_fields() -> Vec<Field> {
    let out = documented_fields_in("results-json.md", "");
    assert!(out.len() > 60, "the field tables of docs/results-json.md were not found");
    out
}

/// The field tables of `docs/<file>` after the heading `from` up to the
/// next heading (the whole file when `from` is empty).
fn documented_fields_in(file: &str, from: &str) -> Vec<Field> {
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs").join(file);
    let text = std::fs::read_to_string(&doc).expect("the document");
    let mut out = Vec::new();
    let mut inside = from.is_empty();
    for line in text.lines() {
        if !from.is_empty() {
            if line.trim() == from {
                inside = true;
                continue;
            }
            if inside && line.starts_with('#') {
                break;
            }
        }
        if !inside {
            continue;
        }
        let cells: Vec<&str> = line.trim().trim_matches('|').split('|').map(str::trim).collect();
        if cells.len() != 3 || !cells[0].starts_with('`') {
            continue;
        }
        let kind = cells[1];
        let Some(word) = ["integer", "number", "string", "array", "object", "boolean"]
            .into_iter()
            .find(|w| kind.starts_with(w))
        else {
            continue;
        };
        out.push(Field {
            path: cells[0].trim_matches('`').to_string(),
            kind: word.to_string(),
            optional: kind.contains("optional"),
            nullable: kind.contains("or null"),
        });
    }
    out
}

/// Every value at `path` (`[]` walks every element of an array); `None`
/// for a missing key.
fn values_at<'a>(v: &'a Value, path: &str) -> Vec<Option<&'a Value>> {
    let mut cur: Vec<Option<&Value>> = vec![Some(v)];
    for seg in path.split('.') {
        let (key, each) = match seg.strip_suffix("[]") {
            Some(k) => (k, true),
            None => (seg, false),
        };
        let mut next = Vec::new();
        for c in cur {
            let Some(c) = c else { continue };
            if c.is_null() {
                continue;
            }
            let child = c.get(key);
            if each {
                match child.and_then(Value::as_array) {
                    Some(a) => next.extend(a.iter().map(Some)),
                    None => next.push(None),
                }
            } else {
                next.push(child);
            }
        }
        cur = next;
    }
    cur
}

fn type_ok(v: &Value, kind: &str) -> bool {
    match kind {
        "integer" => v.is_u64() || v.is_i64(),
        "number" => v.is_number(),
        "string" => v.is_string(),
        "array" => v.is_array(),
        "object" => v.is_object(),
        "boolean" => v.is_boolean(),
        _ => false,
    }
}

/// Every path in `v`, arrays as `[]`, not descending into free-form maps.
fn paths(v: &Value, prefix: &str, free_form: &[&str], out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                let p = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                out.push(p.clone());
                if !free_form.contains(&p.as_str()) {
                    paths(child, &p, free_form, out);
                }
            }
        }
        Value::Array(a) => {
            for child in a {
                if child.is_object() {
                    let p = format!("{prefix}[]");
                    paths(child, &p, free_form, out);
                }
            }
        }
        _ => {}
    }
}

fn check_against_docs(v: &Value) {
    let free_form = ["device.info", "summary", "host.experiments_wall_ns", "grid"];
    check_against(v, &documented_fields(), &free_form, "docs/results-json.md");
}

/// `v` has every field of `fields` with its type, and nothing else (below
/// the `free_form` objects).
fn check_against(v: &Value, fields: &[Field], free_form: &[&str], doc: &str) {
    for f in fields {
        for (i, found) in values_at(v, &f.path).into_iter().enumerate() {
            match found {
                None => assert!(f.optional, "{} (#{i}) is missing", f.path),
                Some(Value::Null) => assert!(f.nullable, "{} (#{i}) is null", f.path),
                Some(x) => assert!(type_ok(x, &f.kind), "{} (#{i}) is not {}: {x}", f.path, f.kind),
            }
        }
    }
    let mut seen = Vec::new();
    paths(v, "", free_form, &mut seen);
    seen.sort();
    seen.dedup();
    for p in seen {
        assert!(
            fields.iter().any(|f| f.path == p),
            "results.json has {p}, which {doc} does not document"
        );
    }
}

const EXPERIMENTS: [&str; 8] = [
    "qd1",
    "intra_zone",
    "inter_zone",
    "open",
    "zone_mgmt",
    "reads",
    "read_under_write",
    "reset_interference",
];

#[test]
fn smoke_suite_on_tiny_writes_documented_results_and_a_report() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let (o, v, html) = characterize(&out, &["--device", "emu:tiny", "--seed", "7"]);
    let o = ok(o);
    assert!(o.stdout.contains("wrote"), "{}", o.stdout);
    assert!(o.stdout.contains("experiment"), "{}", o.stdout);

    check_against_docs(&v);
    assert_eq!(v["schema_version"], 2);
    assert_eq!(v["suite"], "smoke");
    assert_eq!(v["seed"], 7);
    assert_eq!(v["device"]["uri"], "emu:tiny");
    assert_eq!(v["device"]["profile"], "tiny");
    assert!(["real", "virtual"].contains(&v["device"]["clock"].as_str().unwrap()));
    assert_eq!(v["device"]["info"]["zone_count"], 16);
    assert!(v["reference"].is_null(), "tiny has no reference figures");

    let exps = v["experiments"].as_array().unwrap();
    let names: Vec<&str> = exps.iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(names, EXPERIMENTS);
    for e in exps {
        assert!(e["error"].is_null(), "{e}");
        assert!(e["points"].as_u64().unwrap() > 0, "{e}");
    }

    let points = v["points"].as_array().unwrap();
    let mut ids: Vec<&str> = points.iter().map(|p| p["id"].as_str().unwrap()).collect();
    for p in points {
        assert!(p["ops"].as_u64().unwrap() > 0, "{p}");
        assert_eq!(p["latency"]["count"], p["ops"]);
        let l = &p["latency"];
        let f = |k: &str| l[k].as_f64().unwrap();
        assert!(f("min_us") <= f("p50_us") && f("p50_us") <= f("p99_us"), "{p}");
        assert!(f("p99_us") <= f("p99_99_us") && f("p99_99_us") <= f("max_us"), "{p}");
        assert_eq!(p["histogram"]["percentiles"].as_array().unwrap().len(), 14);
        assert!(!p["histogram"]["hdr"].as_str().unwrap().is_empty());
        if !["open", "close", "finish", "reset"].contains(&p["op"].as_str().unwrap()) {
            assert!(p["iops"].as_f64().unwrap() > 0.0, "{p}");
        }
    }
    for want in [
        "qd1/write/4KiB",
        "qd1/append/16KiB",
        "qd1/read/4KiB",
        "intra_zone/append/4KiB/qd=4",
        "inter_zone/write/4KiB/zones=4",
        "inter_zone/append/4KiB/zones=2",
        "open/explicit_open",
        "open/first_write/implicit",
        "open/first_append/explicit",
        "zone_mgmt/open/empty",
        "zone_mgmt/close/after_write",
        "zone_mgmt/finish/1LBA",
        "zone_mgmt/finish/full",
        "zone_mgmt/reset/full-1LBA",
        "zone_mgmt/reset_after_finish/50%",
        "read_qd/random/4KiB/qd=8",
        "read_qd/sequential/16KiB/qd=4",
        "read_zones/random/4KiB/zones=3",
        "read_under_write/read/4KiB/qd=4/rate=0%",
        "read_under_write/read/4KiB/qd=4/rate=100%",
        "read_under_write/write/16KiB/qd=4/rate=100%",
        "reset_interference/reset/idle",
        "reset_interference/reset/under_read",
        "reset_interference/append/under_resets",
        "reset_interference/write/baseline",
    ] {
        assert!(ids.contains(&want), "no point {want}: {ids:?}");
    }
    let n = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), n, "point ids are unique");
    assert!(v["summary"]["ceiling/write_mib_s"].as_f64().unwrap() > 0.0);
    assert!(v["summary"]["intra_zone/append/4KiB:max_kiops"].as_f64().unwrap() > 0.0);

    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.trim_end().ends_with("</html>"));
    assert!(html.matches("<svg").count() >= 15, "{} charts", html.matches("<svg").count());
    assert!(!html.contains("src=\"http"), "self-contained");

    // The device was left all-empty: a file-backed run checks that below.
}

#[test]
fn compare_prints_both_runs_and_writes_html() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    ok(characterize(&a, &["--device", "emu:tiny", "--only", "qd1,zone_mgmt"]).0);
    ok(characterize(&b, &["--device", "emu:tiny", "--only", "qd1"]).0);
    let (ja, jb) = (a.join("results.json"), b.join("results.json"));
    let page = dir.path().join("cmp.html");
    let o = ok(zns(&[
        "characterize",
        "--compare",
        ja.to_str().unwrap(),
        jb.to_str().unwrap(),
        "--html",
        page.to_str().unwrap(),
    ]));
    let header = o.stdout.lines().find(|l| l.starts_with("figure")).expect("table header");
    assert!(header.contains('A') && header.contains("B/A"), "{header}");
    let row = o.stdout.lines().find(|l| l.starts_with("qd1/write/4KiB:mean_us")).expect("row");
    assert_eq!(row.split_whitespace().count(), 4, "{row}");
    // In A only: no B and no ratio.
    let only_a = o.stdout.lines().find(|l| l.starts_with("zone_mgmt/reset/full:p50_us")).unwrap();
    assert!(only_a.ends_with(" -"), "{only_a}");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("<svg") && html.contains("B/A"));

    // A run against itself: every ratio is 1.
    let o = ok(zns(&["characterize", "--compare", ja.to_str().unwrap(), ja.to_str().unwrap()]));
    for line in o.stdout.lines().skip(3) {
        let ratio = line.split_whitespace().last().unwrap();
        assert!(ratio == "1.000" || ratio == "-", "{line}");
    }

    // Not a results file.
    let bogus = dir.path().join("bogus.json");
    std::fs::write(&bogus, "{\"hello\": 1}").unwrap();
    let o = zns(&["characterize", "--compare", bogus.to_str().unwrap(), ja.to_str().unwrap()]);
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("schema_version"), "{}", o.stderr);
}

#[test]
fn zn540_runs_get_the_reference_table() {
    let dir = tempfile::tempdir().unwrap();
    let (o, v, html) = characterize(dir.path(), &["--device", "emu:zn540", "--only", "qd1"]);
    let o = ok(o);
    assert!(o.stdout.contains("reference"), "{}", o.stdout);
    check_against_docs(&v);
    let r = &v["reference"];
    assert_eq!(r["profile"], "zn540");
    assert_eq!(r["kind"], "profile");
    assert!(r["file"].is_null() && r["curves"] == serde_json::json!([]), "{r}");
    let rows = r["rows"].as_array().unwrap();
    let row = rows.iter().find(|x| x["figure"] == "qd1/write/4KiB:mean_us").expect("row");
    assert_eq!(row["reference"], 11.36);
    let (m, q) = (row["measured"].as_f64().unwrap(), row["ratio"].as_f64().unwrap());
    assert!((q - m / 11.36).abs() < 1e-9);
    // Figures of experiments that did not run are listed, unmeasured.
    let reset = rows.iter().find(|x| x["figure"] == "zone_mgmt/reset/full:p50_us").unwrap();
    assert!(reset["measured"].is_null() && reset["ratio"].is_null());
    assert!(html.contains("Measured against the reference"));
    // The plots draw its figures over the measured curves.
    assert!(html.contains("reference: zn540"), "no reference legend in the plots");
}

#[test]
fn a_run_given_itself_as_the_reference_matches_it_everywhere() {
    // A virtual clock repeats a run exactly: the second run's figures are
    // the first's.
    let dir = tempfile::tempdir().unwrap();
    let args = ["--device", "emu:zn540,zones=32", "--only", "qd1,intra_zone", "--seed", "3"];
    let (o, first, _) = characterize(&dir.path().join("first"), &args);
    ok(o);
    let file = dir.path().join("first/results.json");
    let mut with_ref = args.to_vec();
    with_ref.extend_from_slice(&["--reference", file.to_str().unwrap()]);
    let (o, v, html) = characterize(&dir.path().join("second"), &with_ref);
    let o = ok(o);
    check_against_docs(&v);
    assert_eq!(first["reference"]["kind"], "profile", "without --reference: the profile's");

    let r = &v["reference"];
    assert_eq!(r["kind"], "run");
    assert_eq!(r["file"], "results.json");
    assert_eq!(r["device"], "emu:zn540,zones=32");
    let source = r["source"].as_str().unwrap();
    assert!(source.starts_with("results.json: a smoke run on emu:zn540,zones=32"), "{source}");
    let dir_name = dir.path().to_str().unwrap();
    assert!(!r.to_string().contains(dir_name), "no path in results.json: {r}");
    let rows = r["rows"].as_array().unwrap();
    assert!(rows.len() > 10, "{r}");
    for row in rows {
        // Equal values, up to the last bit JSON's decimal form keeps.
        let q = row["ratio"].as_f64().unwrap();
        assert!((q - 1.0).abs() < 1e-12, "{row}");
    }
    // The summary's ceilings are rows too; every other figure of the
    // shared points is a curve.
    assert!(rows.iter().any(|x| x["figure"] == "intra_zone/append/4KiB:max_kiops"), "{r}");
    let curves = r["curves"].as_array().unwrap();
    assert!(curves.iter().any(|c| c["figure"] == "intra_zone/append/4KiB/qd=4:p99_us"));

    // stdout: one line per measured figure, each at 1.000.
    let table: Vec<&str> = o
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("measured against the reference run results.json"))
        .skip(2)
        .take_while(|l| l.starts_with("  "))
        .collect();
    assert_eq!(table.len(), rows.len(), "{}", o.stdout);
    for line in table {
        assert!(line.ends_with(" 1.000"), "{line}");
    }
    // The plots draw it, named by file and device.
    assert!(html.contains("reference: results.json (emu:zn540,zones=32)"), "no reference legend");
    assert!(html.contains("reference run results.json") || html.contains("Measured against"));
}

#[test]
fn bad_reference_files_are_refused_before_the_device_is_touched() {
    let dir = tempfile::tempdir().unwrap();
    let (_, uri) = image(dir.path());
    // Data that --force would reset if the run started.
    let data = dir.path().join("data");
    std::fs::write(&data, b"precious").unwrap();
    ok(zns(&["--device", &uri, "write", "--lba", "0", "--input", data.to_str().unwrap()]));
    let read_back = || ok(zns(&["--device", &uri, "read", "--lba", "0", "--blocks", "1"])).stdout;
    let before = read_back();
    assert!(before.contains("precious"), "{before}");
    let good = dir.path().join("good");
    ok(characterize(&good, &["--device", "emu:tiny", "--only", "qd1"]).0);
    let text = std::fs::read_to_string(good.join("results.json")).unwrap();
    let mut other_lba: Value = serde_json::from_str(&text).unwrap();
    other_lba["device"]["info"]["block_size"] = 512.into();
    let mut future: Value = serde_json::from_str(&text).unwrap();
    future["schema_version"] = 3.into();
    let cases = [
        ("notes.txt", "zone notes".to_string(), "not a results.json"),
        ("other.json", "{\"hello\": 1}".to_string(), "no schema_version"),
        ("future.json", future.to_string(), "schema_version 3"),
        ("lba512.json", other_lba.to_string(), "512 B blocks, this one 4096 B"),
    ];
    for (name, body, want) in cases {
        let file = dir.path().join(name);
        std::fs::write(&file, body).unwrap();
        let out = dir.path().join("out");
        let args =
            ["--device", &uri, "--only", "qd1", "--force", "--reference", file.to_str().unwrap()];
        let (o, _, _) = characterize(&out, &args);
        assert_eq!(o.code, 1, "{name}: {}", o.stderr);
        assert!(
            o.stderr.contains("--reference") && o.stderr.contains(want),
            "{name}: {}",
            o.stderr
        );
        assert!(!out.exists(), "{name}: nothing is written");
        assert_eq!(read_back(), before, "{name}: the data is still there");
    }
    let o = zns(&["characterize", "--suite", "compare", "--reference", "x.json"]);
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("--reference"), "{}", o.stderr);
    let o = zns(&["characterize", "--compare", "a.json", "b.json", "--reference", "c.json"]);
    assert_eq!(o.code, 2, "{}", o.stderr);
}

fn image(dir: &Path) -> (PathBuf, String) {
    let path = dir.join("dev.img");
    ok(zns(&["emu", "create", path.to_str().unwrap(), "--profile", "tiny"]));
    let uri = format!("emu:file={}", path.display());
    (path, uri)
}

#[test]
fn devices_holding_data_are_refused_unless_forced_and_left_empty() {
    let dir = tempfile::tempdir().unwrap();
    let (_, uri) = image(dir.path());
    let data = dir.path().join("data");
    std::fs::write(&data, b"precious").unwrap();
    ok(zns(&["--device", &uri, "write", "--lba", "0", "--input", data.to_str().unwrap()]));

    let out = dir.path().join("out");
    let (o, _, _) = characterize(&out, &["--device", &uri, "--only", "qd1"]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(o.stderr.contains("not empty") && o.stderr.contains("--force"), "{}", o.stderr);

    let (o, v, _) =
        characterize(&out, &["--device", &uri, "--force", "--only", "qd1,open,zone_mgmt"]);
    ok(o);
    assert_eq!(v["experiments"].as_array().unwrap().len(), 3);
    let report = ok(zns(&["--device", &uri, "report-zones", "--format", "json"]));
    let zones: Value = serde_json::from_str(&report.stdout).unwrap();
    for z in zones["zones"].as_array().unwrap() {
        assert_eq!(z["state"], "EMPTY", "{z}");
    }
}

#[test]
fn bad_arguments_are_refused() {
    let o = zns(&["--device", "emu:tiny", "characterize", "--only", "nonsense"]);
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("unknown experiment"), "{}", o.stderr);
    let o = zns(&["characterize", "--suite", "huge"]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    let o = zns(&["characterize", "--html", "x.html"]);
    assert_eq!(o.code, 2, "{}", o.stderr);
}

#[test]
fn same_seed_same_figures_on_a_virtual_clock() {
    // The zn540 profile has a timing model, on the virtual clock by default.
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let args = ["--device", "emu:zn540", "--only", "qd1,open,reads", "--seed", "5"];
    let (o, va, _) = characterize(&a, &args);
    ok(o);
    assert_eq!(va["device"]["clock"], "virtual");
    let (o, vb, _) = characterize(&b, &args);
    ok(o);
    assert_eq!(va["points"], vb["points"], "a virtual clock makes runs repeatable");
    assert_eq!(va["duration"]["device_ns"], vb["duration"]["device_ns"]);
    // Device time is simulated: QD 1 4 KiB writes take the model's time.
    let p = va["points"].as_array().unwrap().iter().find(|p| p["id"] == "qd1/write/4KiB").unwrap();
    let mean = p["latency"]["mean_us"].as_f64().unwrap();
    assert!(mean > 5.0 && mean < 50.0, "{mean}");
}

#[test]
fn runs_on_a_virtual_clock_repeat_exactly_apart_from_the_host_object() {
    let dir = tempfile::tempdir().unwrap();
    let run = |name: &str, seed: &str| {
        let args = [
            "--device",
            "emu:zn540,zones=32",
            "--seed",
            seed,
            "--only",
            "qd1,inter_zone,reads,read_under_write",
        ];
        let (o, mut v, _) = characterize(&dir.path().join(name), &args);
        ok(o);
        assert_eq!(v["device"]["clock"], "virtual");
        let host = v.as_object_mut().unwrap().remove("host").expect("a host object");
        assert!(host["started_unix_s"].as_u64().unwrap() > 0, "{host}");
        assert!(host["wall_ns"].as_u64().unwrap() > 0, "{host}");
        assert_eq!(host["experiments_wall_ns"].as_object().unwrap().len(), 4, "{host}");
        v
    };
    let (a, b, c) = (run("a", "9"), run("b", "9"), run("c", "10"));
    assert!(a == b, "two runs with seed 9 differ outside host");
    assert!(a != c, "seeds 9 and 10 gave the same results");
}

const ZNS_TWIN: &str = "emu:small,zones=64,media=null";
const CONV_TWIN: &str = "emu:small-conv,zones=64,media=null";
/// The FDP twin and its conventional twin at 28 % over-provisioning: with
/// 7 %, 64 zones' flash leaves too few spare segments for an open one per
/// reclaim unit handle.
const FDP_TWIN: &str = "emu:small-fdp,zones=64,op=28,media=null";
const CONV28_TWIN: &str = "emu:small-conv,zones=64,op=28,media=null";

/// `zns characterize --suite compare` on the small untimed twins, sized to
/// take a few seconds.
fn compare_suite(dir: &Path, devices: &[&str]) -> Out {
    let mut args = vec!["characterize", "--suite", "compare", "--out", dir.to_str().unwrap()];
    for d in devices {
        args.extend_from_slice(&["--device", d]);
    }
    args.extend_from_slice(&[
        "--request-kib",
        "64",
        "--minutes",
        "0.005",
        "--bin-seconds",
        "0.05",
        "--read-seconds",
        "0.05",
        "--idle-reads",
        "100",
        "--reads-per-write",
        "2",
    ]);
    zns(&args)
}

/// The three-sided comparison, as `./scripts/test-all` runs it: every
/// field of results.json documented, the FDP side's write amplification
/// on the hot/cold workload below the conventional twin's, the report and
/// every chart written.
#[test]
fn compare_suite_writes_documented_results_a_report_and_the_charts() {
    let dir = tempfile::tempdir().unwrap();
    let o = ok(compare_suite(dir.path(), &[CONV28_TWIN, FDP_TWIN, ZNS_TWIN]));
    assert!(o.stdout.contains("WAF (data)") && o.stdout.contains("usable / raw"), "{}", o.stdout);
    assert!(o.stdout.contains("hot/cold: WAF (data)") && o.stdout.contains("FDP"), "{}", o.stdout);
    let text = std::fs::read_to_string(dir.path().join("results.json")).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["kind"], "zns-vs-conventional");
    assert_eq!(v["zns"]["device"]["uri"], ZNS_TWIN);
    assert_eq!(v["conventional"]["gc"], "device firmware");
    assert_eq!(v["fdp"]["device"]["uri"], FDP_TWIN);
    let top = documented_fields_in("compare.md", "### The comparison's `results.json`");
    assert!(top.len() > 15, "the top-level table of docs/compare.md was not found");
    check_against(&v, &top, &["zns", "conventional", "fdp"], "docs/compare.md");
    let side =
        documented_fields_in("compare.md", "#### Each side: `zns`, `conventional` and `fdp`");
    assert!(side.len() > 40, "the table of a side in docs/compare.md was not found");
    let free = [
        "device.info",
        "sustained.write_latency",
        "hot_cold.sustained.write_latency",
        "reads.idle",
        "reads.under_writes",
    ];
    for role in ["zns", "conventional", "fdp"] {
        check_against(&v[role], &side, &free, "docs/compare.md");
    }
    let waf = |role: &str, run: &str| {
        let run = if run.is_empty() { &v[role] } else { &v[role][run] };
        run["sustained"]["counters"]["waf"].as_f64().unwrap()
    };
    assert!(waf("conventional", "") > 1.0, "the firmware collected garbage");
    let (fdp, conv) = (waf("fdp", "hot_cold"), waf("conventional", "hot_cold"));
    assert!(fdp < conv, "hot/cold: FDP {fdp} against conventional {conv}");
    assert_eq!(v["fdp"]["hot_cold"]["sustained"]["counters"]["check"]["agrees"], true);
    let files = ["report.html", "throughput.svg", "throughput-zoom.svg", "waf-over-time.svg"];
    let more = ["waf.svg", "read-latency.svg", "capacity.svg", "hot-cold-throughput.svg"];
    for f in files.iter().chain(&more).chain(&["hot-cold-waf-over-time.svg"]) {
        assert!(dir.path().join(f).is_file(), "{f}");
    }
    let html = std::fs::read_to_string(dir.path().join("report.html")).unwrap();
    assert!(html.contains("Sustained uniform random writes") && html.contains("<svg"));
    assert!(html.contains("Sustained hot/cold random writes") && html.contains(FDP_TWIN));
}

#[test]
fn compare_suite_refuses_what_it_cannot_compare() {
    let dir = tempfile::tempdir().unwrap();
    let o = compare_suite(dir.path(), &[ZNS_TWIN]);
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("two or three times"), "{}", o.stderr);
    let o = compare_suite(dir.path(), &[ZNS_TWIN, "emu:tiny"]);
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("2 zoned devices"), "{}", o.stderr);
    let o = compare_suite(dir.path(), &[CONV_TWIN, CONV_TWIN]);
    assert!(o.stderr.contains("no zoned device"), "{}", o.stderr);
    let o = compare_suite(dir.path(), &[ZNS_TWIN, FDP_TWIN]);
    assert!(o.stderr.contains("no conventional device"), "{}", o.stderr);
    let out = dir.path().to_str().unwrap();
    let args = ["--device", ZNS_TWIN, "--device", CONV_TWIN, "--out", out, "--hot-percent", "100"];
    let o = zns(&[&["characterize", "--suite", "compare"], &args[..]].concat());
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("hot fraction 1"), "{}", o.stderr);
    assert!(!dir.path().join("results.json").exists());
    // Two devices are for the comparison only; its options too.
    let o = zns(&["--device", "emu:tiny", "--device", "emu:tiny", "characterize"]);
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("--suite compare"), "{}", o.stderr);
    let o = zns(&["--device", "emu:tiny", "characterize", "--minutes", "1"]);
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("only --suite compare takes --minutes"), "{}", o.stderr);
    let o = zns(&["--device", "emu:tiny", "characterize", "--cold-random"]);
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("only --suite compare takes --cold-random"), "{}", o.stderr);
    let o = zns(&["characterize", "--suite", "compare", "--only", "qd1"]);
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("--only"), "{}", o.stderr);
}

#[test]
fn a_custom_grid_sets_the_points_and_is_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let grid = "read_qds = [1, 3]\nread_sizes_kib = [8]\nread_ops = 40";
    let args = ["--device", "emu:tiny", "--only", "reads", "--grid", grid];
    let (o, v, _) = characterize(&dir.path().join("inline"), &args);
    ok(o);
    check_against_docs(&v);
    assert_eq!(v["grid"]["read_qds"], serde_json::json!([1, 3]));
    let ids: Vec<&str> =
        v["points"].as_array().unwrap().iter().map(|p| p["id"].as_str().unwrap()).collect();
    assert!(ids.contains(&"read_qd/random/8KiB/qd=3"), "{ids:?}");
    assert!(!ids.iter().any(|id| id.contains("random/4KiB/qd=")), "{ids:?}");
    // The same grid from a file.
    let file = dir.path().join("grid.toml");
    std::fs::write(&file, grid).unwrap();
    let args = ["--device", "emu:tiny", "--only", "reads", "--grid", file.to_str().unwrap()];
    let (o, w, _) = characterize(&dir.path().join("file"), &args);
    ok(o);
    assert_eq!(w["grid"], v["grid"]);
    // Without a grid, no grid field.
    let (o, plain, _) =
        characterize(&dir.path().join("plain"), &["--device", "emu:tiny", "--only", "qd1"]);
    ok(o);
    assert!(plain.get("grid").is_none());
    // Bad grids are refused before anything runs, naming the field.
    for (bad, want) in [
        ("read_qds = [2048]", "read_qds: 2048"),
        ("deep = 4", "unknown field"),
        ("no-such-file.toml", "no such file"),
    ] {
        let out = dir.path().join("bad");
        let (o, _, _) = characterize(&out, &["--device", "emu:tiny", "--grid", bad]);
        assert_eq!(o.code, 1, "{bad}: {}", o.stderr);
        assert!(o.stderr.contains(want), "{bad}: {}", o.stderr);
        assert!(!out.join("results.json").exists());
    }
}
