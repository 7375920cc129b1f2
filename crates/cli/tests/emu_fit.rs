//! `zns emu fit` as a user runs it: characterize, fit, and run the
//! emulator as the fitted profile; bad input refused with nothing written.

mod common;

use common::{ok, zns};
use serde_json::Value;

#[test]
fn a_characterization_becomes_a_profile_the_emulator_runs() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let run_s = run.to_str().unwrap();
    ok(zns(&[
        "characterize",
        "--device",
        "emu:zn540,media=null,zones=32",
        "--suite",
        "smoke",
        "--only",
        "qd1,zone_mgmt,open",
        "--out",
        run_s,
    ]));
    let results = run.join("results.json");
    let profile = dir.path().join("mine.toml");
    let o = ok(zns(&[
        "emu",
        "fit",
        results.to_str().unwrap(),
        "--out",
        profile.to_str().unwrap(),
        "--rounds",
        "2",
    ]));
    // Every parameter is listed, with the figure that identified it or
    // the base's value kept.
    assert!(
        o.stdout.contains("write_ns") && o.stdout.contains("qd1/write/4KiB:mean_us"),
        "{}",
        o.stdout
    );
    assert!(o.stdout.contains("(kept from the base)"), "reads were not measured:\n{}", o.stdout);
    assert!(o.stdout.contains("use --device emu:profile="), "{}", o.stdout);
    // --base auto (the default): every built-in timed ZNS profile tried,
    // the zn540 structure chosen for a zn540 run.
    assert!(o.stdout.contains("base profiles tried"), "{}", o.stdout);
    assert!(
        o.stdout.lines().any(|l| l.contains("zn540") && l.contains("<- chosen")),
        "{}",
        o.stdout
    );
    let text = std::fs::read_to_string(&profile).unwrap();
    assert!(text.starts_with("# Fitted by `zns emu fit`"), "{text}");
    assert!(text.contains("name = \"mine\""), "{text}");
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("mine.fit.json")).unwrap())
            .unwrap();
    assert!(report["fit"]["parameters"].as_array().unwrap().len() > 10);
    assert!(report["fit"]["fitted"].as_array().is_some_and(|f| !f.is_empty()));
    // The fitted profile is a device: the measured geometry (32 zones).
    let uri = format!("emu:profile={},media=null", profile.display());
    let o = ok(zns(&["--device", &uri, "report-zones"]));
    assert_eq!(o.stdout.lines().filter(|l| l.contains("EMPTY")).count(), 32, "{}", o.stdout);
}

#[test]
fn bad_input_is_refused_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p.toml");
    let out_s = out.to_str().unwrap();
    let missing = dir.path().join("missing.json");
    let o = zns(&["emu", "fit", missing.to_str().unwrap(), "--out", out_s]);
    assert_ne!(o.code, 0);
    assert!(o.stderr.contains("missing.json"), "{}", o.stderr);
    let not_results = dir.path().join("x.json");
    std::fs::write(&not_results, "{\"a\": 1}").unwrap();
    let o = zns(&["emu", "fit", not_results.to_str().unwrap(), "--out", out_s]);
    assert_ne!(o.code, 0);
    assert!(o.stderr.contains("not a characterization result"), "{}", o.stderr);
    let o = zns(&["emu", "fit", "--reference", "zn540", "--holdout", "nope", "--out", out_s]);
    assert_ne!(o.code, 0);
    assert!(o.stderr.contains("unknown experiment \"nope\""), "{}", o.stderr);
    let o = zns(&["emu", "fit", "--reference", "tiny", "--out", out_s]);
    assert_ne!(o.code, 0);
    assert!(o.stderr.contains("no built-in reference"), "{}", o.stderr);
    let o = zns(&["emu", "fit", "--reference", "zn540", "--base", "tiny", "--out", out_s]);
    assert_ne!(o.code, 0);
    assert!(o.stderr.contains("no timing model"), "{}", o.stderr);
    assert!(!out.exists() && !dir.path().join("p.fit.json").exists());
    // A profile file that is not there is named.
    let o = zns(&["--device", "emu:profile=nowhere.toml", "report-zones"]);
    assert_ne!(o.code, 0);
    assert!(o.stderr.contains("nowhere.toml"), "{}", o.stderr);
}
