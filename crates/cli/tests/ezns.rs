//! `zns ezns` and tenant URIs (`ezns:config=PATH,tenant=NAME`) through the
//! `zns` binary, on a persistent `small` image.

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

fn zns(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_zns"))
        .args(args)
        .current_dir(dir)
        .env_remove("ZNS_DEVICE")
        .env_remove("ZNS_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("run zns");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8(o.stdout).unwrap(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn ok(dir: &Path, args: &[&str]) -> String {
    let (code, out, err) = zns(dir, args);
    assert_eq!(code, 0, "zns {args:?}: {err}");
    out
}

const CONFIG: &str = r#"
device = "emu:file=dev.img"
zone_scale = 4
max_width = 4
headroom = 1

[[tenant]]
name = "a"
zones = 24
active_zones = 2

[[tenant]]
name = "b"
zones = 24
active_zones = 2
"#;

#[test]
fn tenants_are_devices_and_status_shows_them() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ok(d, &["emu", "create", "dev.img", "--profile", "small"]);
    std::fs::write(d.join("ezns.toml"), CONFIG).unwrap();
    let out = ok(d, &["ezns", "status", "--config", "ezns.toml"]);
    assert!(out.contains("formatted") && out.contains("\na ") && out.contains("\nb "), "{out}");
    let a = "ezns:config=ezns.toml,tenant=a";
    std::fs::write(d.join("x.txt"), b"logical zones\n").unwrap();
    ok(d, &["-d", a, "write", "--lba", "0", "--input", "x.txt"]);
    let out = ok(d, &["-d", a, "append", "--zone-start", "0", "--input", "x.txt"]);
    assert!(out.contains("at LBA 0x1"), "{out}");
    let back = ok(d, &["-d", a, "read", "--lba", "1", "--blocks", "1"]);
    assert!(back.starts_with("logical zones\n"), "{back:?}");
    let report = ok(d, &["-d", a, "report-zones", "--format", "json"]);
    let v: Value = serde_json::from_str(&report).unwrap();
    let zones = v["zones"].as_array().expect("zones");
    assert_eq!(zones.len(), 24);
    // Each command is a power cycle: the zone comes back Closed.
    assert_eq!(zones[0]["state"], "CLOSED", "{report}");
    let out = ok(d, &["ezns", "status", "--config", "ezns.toml", "--json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["recovery"]["closed"], 1, "{out}");
    let t = &v["status"]["tenants"][0];
    assert_eq!((t["name"].as_str(), t["active"].as_u64()), (Some("a"), Some(1)), "{out}");
    assert_eq!(t["stripes"][0]["wp"], 2, "{out}");
    // Tenant b is untouched.
    let report =
        ok(d, &["-d", "ezns:config=ezns.toml,tenant=b", "report-zones", "--state", "empty"]);
    assert!(report.starts_with("nr_zones: 24"), "{report}");
}

#[test]
fn bad_tenant_uris_fail_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ok(d, &["emu", "create", "dev.img", "--profile", "small"]);
    std::fs::write(d.join("ezns.toml"), CONFIG).unwrap();
    for (uri, why) in [
        ("ezns:config=ezns.toml,tenant=zz", "no tenant \"zz\""),
        ("ezns:config=missing.toml,tenant=a", "cannot read missing.toml"),
        ("ezns:tenant=a", "expected ezns:config=PATH,tenant=NAME"),
    ] {
        let (code, out, err) = zns(d, &["-d", uri, "identify"]);
        assert_eq!(code, 1, "{uri}: {out}");
        assert!(
            err.starts_with("zns: ") && err.contains(why) && err.lines().count() == 1,
            "{uri}: {err}"
        );
    }
    std::fs::write(d.join("big.toml"), CONFIG.replace("zones = 24", "zones = 200")).unwrap();
    let (code, _, err) = zns(d, &["ezns", "status", "-c", "big.toml"]);
    assert_eq!(code, 1);
    assert!(err.contains("does not fit"), "{err}");
}

#[test]
fn bench_runs_at_smoke_scale_and_refuses_small_devices() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = ok(d, &["ezns", "bench", "--scale", "smoke", "--out", "res"]);
    assert!(out.contains("on emu:small-zone,media=null,zones=2048 (clock virtual)"), "{out}");
    for figure in ["balloon/alone/writer_mib_s", "isolation/2w/p99_9_us", "kv/A/kops_s"] {
        assert!(out.contains(figure), "{figure} missing: {out}");
    }
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("res/ezns.json")).unwrap()).unwrap();
    assert_eq!(json["scale"], "smoke");
    assert_eq!(json["utilization"].as_array().map(Vec::len), Some(8));
    assert!(d.join("res/ezns-balloon-spares.svg").exists());
    let out = ok(d, &["ezns", "bench", "--replot", "res/ezns.json", "--out", "plots"]);
    assert_eq!(out.lines().count(), 6, "{out}");
    let svg = std::fs::read_to_string(d.join("plots/ezns-kv-p999.svg")).unwrap();
    assert_eq!(svg, std::fs::read_to_string(d.join("res/ezns-kv-p999.svg")).unwrap());
    assert!(!d.join("plots/ezns.json").exists());
    std::fs::write(d.join("bad.json"), "{}").unwrap();
    let (code, _, err) = zns(d, &["ezns", "bench", "--replot", "bad.json"]);
    assert_eq!(code, 1);
    assert!(err.contains("bad.json") && err.contains("missing field"), "{err}");
    let (code, _, _) = zns(d, &["ezns", "bench", "--replot", "res/ezns.json", "--seed", "2"]);
    assert_eq!(code, 2);
    let (code, _, err) =
        zns(d, &["-d", "emu:small-zone,media=null,zones=100", "ezns", "bench", "--scale", "smoke"]);
    assert_eq!(code, 1);
    assert!(err.starts_with("zns: ") && err.contains("need at least"), "{err}");
    let (code, _, err) = zns(d, &["ezns", "bench", "--scale", "huge"]);
    assert_eq!(code, 2, "{err}");
}
