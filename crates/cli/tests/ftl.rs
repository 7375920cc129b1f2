//! `zns ftl` as a user runs it: format on a persistent image, stats and
//! check on it, a short benchmark, and the errors of an unformatted device.

mod common;

use common::{ok, zns, Out};
use serde_json::Value;

/// A fresh `tiny` image in a temporary directory, and its URI.
fn image() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dev.img");
    ok(zns(&["emu", "create", path.to_str().unwrap(), "--profile", "tiny"]));
    let uri = format!("emu:file={}", path.display());
    (dir, uri)
}

fn json(o: &Out) -> Value {
    serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", o.stdout))
}

#[test]
fn format_stats_check_on_a_persistent_image() {
    let (_dir, uri) = image();
    let f = ok(zns(&["--device", &uri, "ftl", "format", "--op", "20"]));
    assert!(f.stdout.contains("formatted an FTL"), "{}", f.stdout);
    assert!(f.stdout.contains("blocks of 4096 bytes"), "{}", f.stdout);
    assert!(f.stderr.is_empty(), "a persistent device needs no warning: {}", f.stderr);

    let s = ok(zns(&["--device", &uri, "ftl", "stats", "--json"]));
    let v = json(&s);
    assert!(v["logical_blocks"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(v["block_size"], 4096);
    assert_eq!(v["valid_blocks"], 0);
    assert_eq!(v["user_blocks_written"], 0);
    assert!(v["map_bytes_per_block"].as_f64().unwrap() > 0.0);
    assert!(v["pools"]["meta"].as_u64().unwrap() > 0);

    let c = ok(zns(&["--device", &uri, "ftl", "check", "--read-all"]));
    assert!(c.stdout.contains("no problems found"), "{}", c.stdout);
    let c = ok(zns(&["--device", &uri, "ftl", "check", "--json"]));
    let v = json(&c);
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["problems"].as_array().unwrap().len(), 0);
    // Human stats too, after the FTL was opened and closed twice.
    let s = ok(zns(&["--device", &uri, "ftl", "stats"]));
    assert!(s.stdout.contains("logical blocks"), "{}", s.stdout);
}

#[test]
fn format_refuses_written_devices_without_force_and_bad_configs_change_nothing() {
    let (_dir, uri) = image();
    ok(zns(&["--device", &uri, "ftl", "format"]));
    let again = zns(&["--device", &uri, "ftl", "format"]);
    assert_eq!(again.code, 1);
    assert!(
        again.stderr.contains("--force") && again.stderr.contains("hold data"),
        "{}",
        again.stderr
    );
    // An impossible layout is refused before anything is erased.
    let bad = zns(&["--device", &uri, "ftl", "format", "--force", "--meta-zones", "15"]);
    assert_eq!(bad.code, 1);
    assert!(bad.stderr.contains("invalid FTL configuration"), "{}", bad.stderr);
    ok(zns(&["--device", &uri, "ftl", "check"]));
    ok(zns(&["--device", &uri, "ftl", "format", "--force"]));
}

#[test]
fn format_on_a_process_device_warns_but_works() {
    let f = ok(zns(&["--device", "emu:tiny", "ftl", "format", "--json"]));
    assert!(f.stderr.contains("warning") && f.stderr.contains("vanishes"), "{}", f.stderr);
    let v = json(&f);
    assert!(v["logical_blocks"].as_u64().unwrap() > 0);
    assert!(v["meta_zones"].as_u64().unwrap() > 0);
}

#[test]
fn unformatted_devices_and_bad_options_fail_cleanly() {
    let (_dir, uri) = image();
    for cmd in [["ftl", "stats"], ["ftl", "check"]] {
        let mut args = vec!["--device", uri.as_str()];
        args.extend_from_slice(&cmd);
        let o = zns(&args);
        assert_eq!(o.code, 1, "stdout: {}\nstderr: {}", o.stdout, o.stderr);
        assert!(o.stdout.is_empty(), "{}", o.stdout);
        assert_eq!(o.stderr.lines().count(), 1, "{}", o.stderr);
        assert!(o.stderr.starts_with("zns: "), "{}", o.stderr);
        assert!(o.stderr.contains("no FTL metadata and no data: format one with"), "{}", o.stderr);
        assert!(!o.stderr.contains("panicked"), "{}", o.stderr);
    }
    let o = zns(&["--device", "emu:tiny", "ftl", "stats"]);
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("holds no FTL"), "{}", o.stderr);
    // A persistent device is not benchmarked without --force.
    let o = zns(&["--device", &uri, "ftl", "bench", "--json"]);
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("--force"), "{}", o.stderr);
    // Bad option values are usage errors.
    for bad in [
        &["ftl", "format", "--op", "0"][..],
        &["ftl", "bench", "--workload", "pareto"],
        &["ftl", "bench", "--policy", "lru"],
        &["ftl", "bench", "--read-pct", "100"],
    ] {
        let o = zns(bad);
        assert_eq!(o.code, 2, "{bad:?}: {}", o.stderr);
    }
}

#[test]
fn a_short_bench_prints_every_key() {
    let o = ok(zns(&[
        "--device",
        "emu:tiny,media=null",
        "ftl",
        "bench",
        "--json",
        "--workload",
        "zipfian",
        "--warmup",
        "0.5",
        "--measure",
        "0.5",
        "--reads",
        "2000",
        "--read-pct",
        "10",
    ]));
    assert!(o.stderr.is_empty(), "no progress bars into a pipe: {}", o.stderr);
    let v = json(&o);
    for key in [
        "workload",
        "op",
        "waf",
        "map_bytes_per_block",
        "write_iops",
        "read_iops",
        "raw_write_iops",
        "raw_read_iops",
        "ns_per_io",
        "device",
        "threads",
        "policy",
        "write_mode",
        "gc",
        "duration_seconds",
    ] {
        assert!(!v[key].is_null(), "{key} missing: {v}");
    }
    assert_eq!(v["workload"], "zipfian");
    assert_eq!(v["zipf_theta"], 0.99);
    assert_eq!(v["device"], "emu:tiny,media=null");
    assert!(v["waf"].as_f64().unwrap() >= 1.0, "{v}");
    for key in ["write_iops", "read_iops", "raw_write_iops", "raw_read_iops"] {
        assert!(v[key].as_f64().unwrap() > 0.0, "{key}: {v}");
    }
    assert_eq!(v["phases"].as_array().unwrap().len(), 8);
    // Spare: asked, given by the data zones, worked with by GC.
    let sp = &v["spare"];
    let (nominal, device) = (sp["nominal"].as_f64().unwrap(), sp["device"].as_f64().unwrap());
    assert_eq!(nominal, 0.10, "{sp}");
    assert!(device > nominal, "the data zones hold the reserves too: {sp}");
    let effective = sp["effective"].as_f64().unwrap();
    assert!(effective > 0.0 && effective < device, "{sp}");
    assert!(sp["greedy_waf_effective"].as_f64().unwrap() > 1.0, "{sp}");
    for key in ["raw_write_iops_before", "raw_write_iops_after", "raw_read_iops_before"] {
        assert!(v[key].as_f64().unwrap() > 0.0, "{key}: {v}");
    }
}

/// Flips a byte of the first End page (page kind 4) of the FTL's
/// metadata log in the image at `path`.
fn damage_an_end_page(path: &std::path::Path) {
    use std::io::{Read, Seek, SeekFrom, Write};
    let mut f = std::fs::OpenOptions::new().read(true).write(true).open(path).unwrap();
    let mut block = vec![0u8; 4096];
    let mut at = 0u64;
    loop {
        f.seek(SeekFrom::Start(at)).unwrap();
        f.read_exact(&mut block).expect("an End page in the image");
        if &block[..4] == b"ZFTL" && block[4] == 4 {
            break;
        }
        at += 4096;
    }
    f.seek(SeekFrom::Start(at + 40)).unwrap();
    f.write_all(&[block[40] ^ 0x08]).unwrap();
}

#[test]
fn damaged_metadata_is_named_and_repaired_only_when_asked() {
    // On an image without data checksums the FTL's own page checksum finds
    // the damage; on one with them (the default) the device already fails
    // the read with Unrecovered Read Error, as a drive would: either way
    // the page is named as damaged and repaired only when asked.
    for (create, reason) in [(&["--no-checksums"][..], "checksum"), (&[], "Unrecovered Read Error")]
    {
        damaged_metadata_on(create, reason);
    }
}

fn damaged_metadata_on(create: &[&str], reason: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dev.img");
    let mut args = vec!["emu", "create", path.to_str().unwrap(), "--profile", "small"];
    args.extend_from_slice(create);
    ok(zns(&args));
    let uri = format!("emu:file={}", path.display());
    ok(zns(&["--device", &uri, "ftl", "format"]));
    // The format's End page, superseded by the close's checkpoint: the
    // mount passes over it, the check names it as repairable (3).
    damage_an_end_page(&path);
    let c = zns(&["--device", &uri, "ftl", "check"]);
    assert_eq!(c.code, 3, "{} {}", c.stdout, c.stderr);
    assert!(c.stdout.contains("problem: metadata zone 0 block"), "{}", c.stdout);
    assert!(c.stdout.contains(reason) && c.stdout.contains("not needed"), "{}", c.stdout);
    assert!(c.stderr.contains("`--repair` restores every block"), "{}", c.stderr);
    let r = ok(zns(&["--device", &uri, "ftl", "check", "--repair", "--json"]));
    let v = json(&r);
    assert_eq!(v["ok"], true, "{v}");
    let damage = v["repair"]["damage"].as_array().unwrap();
    assert_eq!(damage[0]["zone"], 0, "{v}");
    assert!(damage[0]["reason"].as_str().unwrap().contains(reason), "{v}");
    assert_eq!(v["repair"]["loses"], false, "{v}");
    // Repaired for good: a plain check passes, and a second repair finds
    // nothing to do.
    let c = ok(zns(&["--device", &uri, "ftl", "check", "--read-all"]));
    assert!(c.stdout.contains("no problems found"), "{}", c.stdout);
    let r = ok(zns(&["--device", &uri, "ftl", "check", "--repair"]));
    assert!(r.stdout.contains("nothing to repair"), "{}", r.stdout);
}

/// Offsets in the image of the FTL pages of kind `kind` in the first
/// metadata zone.
fn ftl_pages(path: &std::path::Path, kind: u8) -> Vec<u64> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(path).unwrap();
    let mut block = vec![0u8; 4096];
    let mut found = Vec::new();
    for at in (0..).map(|i| ftl_page(path, 1) + i * 4096u64) {
        f.seek(SeekFrom::Start(at)).unwrap();
        f.read_exact(&mut block).unwrap();
        if &block[..4] != b"ZFTL" {
            return found;
        }
        if block[4] == kind {
            found.push(at);
        }
    }
    found
}

#[test]
fn check_exit_codes_separate_clean_repairable_and_lost() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dev.img");
    ok(zns(&["emu", "create", path.to_str().unwrap(), "--profile", "small", "--no-checksums"]));
    let uri = format!("emu:file={}", path.display());
    ok(zns(&["--device", &uri, "ftl", "format"]));
    ok(zns(&["--device", &uri, "ftl", "check"]));
    // The newest End page: what the pages after the older checkpoint held
    // cannot be known, so a repair would have to accept a loss (4).
    let end = *ftl_pages(&path, 4).last().expect("an End page");
    flip_byte(&path, end + 40);
    let block = (end - ftl_page(&path, 1)) / 4096;
    let c = zns(&["--device", &uri, "ftl", "check"]);
    assert_eq!(c.code, 4, "{} {}", c.stdout, c.stderr);
    assert!(c.stderr.contains(&format!("zone 0 at block {block}:")), "{}", c.stderr);
    assert!(c.stderr.contains("a repair would lose blocks"), "{}", c.stderr);
    let r = zns(&["--device", &uri, "ftl", "check", "--repair"]);
    assert_eq!(r.code, 4, "{} {}", r.stdout, r.stderr);
    assert!(r.stderr.contains("nothing was changed") && r.stderr.contains("--accept-loss"));
    assert!(r.stdout.contains(&format!("zone 0 block {block}:")), "{}", r.stdout);
    // Nothing was changed: the same answer again.
    assert_eq!(zns(&["--device", &uri, "ftl", "check"]).stderr, c.stderr);
    let a = ok(zns(&["--device", &uri, "ftl", "check", "--repair", "--accept-loss"]));
    assert!(a.stdout.contains("the loss was accepted"), "{}", a.stdout);
    ok(zns(&["--device", &uri, "ftl", "check", "--read-all"]));
    let u = zns(&["--device", &uri, "ftl", "check", "--accept-loss"]);
    assert_eq!(u.code, 2, "--accept-loss needs --repair: {}", u.stderr);
}

/// The image's first block whose page starts with the FTL's magic and has
/// page kind `kind` (1: header), as an offset in the image file.
fn ftl_page(path: &std::path::Path, kind: u8) -> u64 {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(path).unwrap();
    let mut block = vec![0u8; 4096];
    let mut at = 0u64;
    loop {
        f.seek(SeekFrom::Start(at)).unwrap();
        f.read_exact(&mut block).expect("an FTL page of that kind in the image");
        if &block[..4] == b"ZFTL" && block[4] == kind {
            return at;
        }
        at += 4096;
    }
}

fn flip_byte(path: &std::path::Path, at: u64) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().read(true).write(true).open(path).unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, at).unwrap();
    f.write_all_at(&[b[0] ^ 0x08], at).unwrap();
}

#[test]
fn a_damaged_ftl_header_is_named_never_taken_for_an_empty_device() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dev.img");
    ok(zns(&["emu", "create", path.to_str().unwrap(), "--profile", "small"]));
    let uri = format!("emu:file={}", path.display());
    ok(zns(&["--device", &uri, "ftl", "format"]));
    // Both copies of the header: one alone is recovered from the other.
    flip_byte(&path, ftl_page(&path, 1) + 40);
    flip_byte(&path, ftl_page(&path, 1) + 4096 + 40);
    let zones = ok(zns(&["--device", &uri, "report-zones", "--format", "csv"])).stdout;
    // (`ftl serve` and `serve --ftl` open the FTL through the same path;
    // they are not run here, since a server that did start would not stop.)
    for cmd in [&["ftl", "stats"][..], &["ftl", "stats", "--json"]] {
        let mut args = vec!["--device", uri.as_str()];
        args.extend_from_slice(cmd);
        let o = zns(&args);
        assert_eq!((o.code, o.stdout.as_str()), (1, ""), "{cmd:?}: {}", o.stderr);
        assert_eq!(o.stderr.lines().count(), 1, "{}", o.stderr);
        let e = &o.stderr;
        assert!(!e.contains("format it first") && !e.contains("format one"), "{e}");
        assert!(e.contains("corrupt FTL metadata in zone 0 at block 0"), "{e}");
        assert!(e.contains("header page (its superblock") && e.contains("is damaged"), "{e}");
        assert!(e.contains(&format!("`zns --device {uri} ftl check` reports it")), "{e}");
    }
    // The check names it too, and as JSON for scripts; a repair cannot
    // rebuild the layout and says so; nothing on the device changed.
    let c = zns(&["--device", &uri, "ftl", "check", "--json"]);
    assert_eq!(c.code, 4, "{}", c.stderr);
    assert!(c.stderr.contains("header page (its superblock"), "{}", c.stderr);
    let v = json(&c);
    assert_eq!((v["ok"].as_bool(), v["opened"].as_bool()), (Some(false), Some(false)), "{v}");
    assert_eq!(v["error_kind"], "corrupt", "{v}");
    assert_eq!((v["damage"]["zone"].as_u64(), v["damage"]["block"].as_u64()), (Some(0), Some(0)));
    // The image's own data checksum catches the flipped byte before the
    // FTL's page checksum does: the device answers Unrecovered Read Error.
    let reason = v["damage"]["reason"].as_str().unwrap();
    assert!(reason.contains("Unrecovered Read Error"), "{v}");
    let r = zns(&["--device", &uri, "ftl", "check", "--repair"]);
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(r.stderr.contains("cannot be rebuilt"), "{}", r.stderr);
    let f = zns(&["--device", &uri, "ftl", "format"]);
    assert_eq!(f.code, 1, "{}", f.stderr);
    assert!(f.stderr.contains("--force"), "{}", f.stderr);
    assert_eq!(ok(zns(&["--device", &uri, "report-zones", "--format", "csv"])).stdout, zones);
}

#[test]
fn other_data_is_not_an_ftl_and_not_an_empty_device() {
    let (dir, uri) = image();
    let input = dir.path().join("x");
    std::fs::write(&input, b"not an FTL").unwrap();
    ok(zns(&["--device", &uri, "write", "--lba", "0", "--input", input.to_str().unwrap()]));
    let o = zns(&["--device", &uri, "ftl", "stats"]);
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("no FTL metadata, but 1 of its zones hold data"), "{}", o.stderr);
    assert!(o.stderr.contains("report-zones` shows the zones"), "{}", o.stderr);
    assert!(!o.stderr.contains("format it first"), "{}", o.stderr);
}

#[test]
fn bench_help_states_the_device_it_uses() {
    let h = ok(zns(&["ftl", "bench", "--help"])).stdout;
    assert!(h.contains("[default: emu:small,media=null]"), "{h}");
    assert!(!h.contains("[default: emu:zn540]"), "{h}");
    // And it uses it.
    let args =
        ["ftl", "bench", "--json", "--warmup", "0.02", "--measure", "0.02", "--reads", "100"];
    let o = ok(zns(&args));
    assert_eq!(json(&o)["device"], "emu:small,media=null");
    // Elsewhere the global default stands.
    let h = ok(zns(&["ftl", "stats", "--help"])).stdout;
    assert!(h.contains("[default: emu:zn540]"), "{h}");
}
