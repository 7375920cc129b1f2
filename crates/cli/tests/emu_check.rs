//! `zns emu check` on clean and damaged device images: the summary, the
//! exit status (0 clean, 3 repairable, 4 lost, 1 not checked), the JSON,
//! `--repair`; and what the damage looks like to a `zns read`
//! (Unrecovered Read Error, exit status 1).

mod common;

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use common::{ok, zns};
use serde_json::Value;
use zns_emulator::image::{layout, NamespaceLayout};
use zns_emulator::profile::Profile;

/// A `tiny` image with 16 blocks written at LBA 0 of namespace 1 (zoned).
struct Image {
    _dir: tempfile::TempDir,
    path: PathBuf,
    layout: Vec<NamespaceLayout>,
}

impl Image {
    fn new() -> Image {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dev.img");
        let p = path.to_str().unwrap();
        ok(zns(&["emu", "create", p, "--profile", "tiny"]));
        let input = dir.path().join("in.bin");
        let data: Vec<u8> = (0..16 * 4096).map(|i| (i % 253) as u8 + 1).collect();
        std::fs::write(&input, data).unwrap();
        let dev = format!("emu:file={p}");
        ok(zns(&["-d", &dev, "write", "--lba", "0", "--input", input.to_str().unwrap()]));
        let layout = layout(&Profile::by_name("tiny").unwrap());
        Image { _dir: dir, path, layout }
    }

    fn p(&self) -> &str {
        self.path.to_str().unwrap()
    }

    fn flip(&self, at: u64) {
        flip(&self.path, at)
    }

    fn check(&self, extra: &[&str]) -> common::Out {
        let mut args = vec!["emu", "check", self.p()];
        args.extend_from_slice(extra);
        zns(&args)
    }

    fn json(&self, extra: &[&str]) -> (i32, Value) {
        let mut args = vec!["--json"];
        args.extend_from_slice(extra);
        let o = self.check(&args);
        (o.code, serde_json::from_str(&o.stdout).expect("JSON on stdout"))
    }
}

fn flip(path: &Path, at: u64) {
    let f = std::fs::OpenOptions::new().read(true).write(true).open(path).unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, at).unwrap();
    f.write_all_at(&[b[0] ^ 0x10], at).unwrap();
}

/// Failed: exit status 1 and one `zns:` line on stderr.
#[track_caller]
fn failed(o: &common::Out) -> String {
    failed_with(o, 1)
}

/// Failed with exit status `code` and one `zns:` line on stderr.
#[track_caller]
fn failed_with(o: &common::Out, code: i32) -> String {
    assert_eq!(o.code, code, "stdout: {}\nstderr: {}", o.stdout, o.stderr);
    assert_eq!(o.stderr.trim_end().lines().count(), 1, "{}", o.stderr);
    assert!(o.stderr.starts_with("zns: "), "{}", o.stderr);
    o.stderr.trim_end().to_string()
}

#[test]
fn a_clean_image_is_clean() {
    let img = Image::new();
    let o = ok(img.check(&[]));
    assert!(o.stderr.is_empty(), "{}", o.stderr);
    assert!(o.stdout.contains("tiny profile, format 3, data checksums"), "{}", o.stdout);
    assert!(o.stdout.contains("namespace 1 (zoned): zone state sequence"), "{}", o.stdout);
    assert!(o.stdout.contains("16 readable blocks, 16 verified, 0 damaged"), "{}", o.stdout);
    assert!(o.stdout.ends_with("no problems found\n"), "{}", o.stdout);
    let (code, v) = img.json(&[]);
    assert_eq!(code, 0);
    assert_eq!(v["ok"], true);
    assert_eq!(v["verdict"], "clean");
    assert_eq!(v["version"], 3);
    assert_eq!(v["data_checksums"], true);
    assert_eq!(v["length"], v["expected_length"]);
    assert_eq!(v["namespaces"][0]["kind"], "zoned");
    assert_eq!(v["namespaces"][0]["checked_blocks"], 16);
    assert_eq!(v["namespaces"][1]["checked_blocks"], 1024);
    assert_eq!(v["problems"].as_array().unwrap().len(), 0);
    assert!(v.get("repairs").is_none());
}

#[test]
fn a_flipped_data_bit_is_a_media_error_and_damage() {
    let img = Image::new();
    img.flip(img.layout[0].data_offset + 7 * 4096 + 100);
    // The read of the block, and of any range holding it, fails.
    let dev = format!("emu:file={}", img.p());
    let o = zns(&["-d", &dev, "read", "--lba", "6", "--blocks", "2"]);
    let e = failed(&o);
    assert!(e.contains("Unrecovered Read Error"), "{e}");
    assert!(o.stdout.is_empty(), "no data of a failed read is written out");
    ok(zns(&["-d", &dev, "read", "--lba", "8", "--blocks", "8"]));
    // The check names it: its data is lost (exit status 4).
    let o = img.check(&[]);
    let e = failed_with(&o, 4);
    assert!(e.contains("is damaged: 1 problem(s); data or zone state is lost"), "{e}");
    assert!(o.stdout.contains("problem: namespace 1: 1 block fails its data checksum"));
    let (code, v) = img.json(&[]);
    assert_eq!(code, 4);
    assert_eq!(v["ok"], false);
    assert_eq!(v["verdict"], "lost");
    assert_eq!(v["problems"][0]["kind"], "data");
    assert_eq!(v["problems"][0]["namespace"], 1);
    assert_eq!(v["namespaces"][0]["damaged_blocks"], serde_json::json!([7]));
    // Repair cannot bring data back: it says so, and the status stays 4.
    let (code, v) = img.json(&["--repair"]);
    assert_eq!(code, 4);
    assert!(v["repairs"][0].as_str().unwrap().starts_with("not repaired"), "{v}");
}

#[test]
fn damaged_slots_are_found_and_one_is_repaired_from_the_other() {
    let img = Image::new();
    let l = img.layout[0];
    let (_, v) = img.json(&[]);
    let seq = v["namespaces"][0]["sequence"].as_u64().unwrap();
    // The older slot: the image opens read-only, and the check reports
    // it as repairable (exit status 3).
    let older = l.zone_state_offset + ((seq - 1) % 2) * l.slot_bytes;
    img.flip(older + 200);
    let (code, v) = img.json(&[]);
    assert_eq!(code, 3, "{v}");
    assert_eq!(v["verdict"], "repairable");
    assert_eq!(v["problems"][0]["kind"], "slot");
    assert_eq!(v["problems"][0]["repairable"], true);
    let dev = format!("emu:file={}", img.p());
    let o = zns(&["-d", &dev, "report-zones", "--count", "1"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stderr.contains("read-only"), "{}", o.stderr);
    let input = img.path.with_extension("in");
    std::fs::write(&input, [7u8; 4096]).unwrap();
    let o = zns(&["-d", &dev, "write", "--lba", "16", "--input", input.to_str().unwrap()]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(o.stderr.contains("read-only"), "the warning says why: {}", o.stderr);
    let e = o.stderr.lines().last().unwrap();
    assert!(e.starts_with("zns: write at LBA 0x10: Namespace is Write Protected"), "{e}");
    // Repaired: both slots valid, the newest state kept.
    let o = ok(img.check(&["--repair"]));
    let want = "repair: namespace 1: zone-state slot B fails its checksum (sequence 1): slot B \
                rewritten with the zone state of sequence 2 (the data proves nothing newer)";
    assert!(o.stdout.contains(want), "{}", o.stdout);
    let (code, v) = img.json(&[]);
    assert_eq!(code, 0, "{v}");
    assert!(v["namespaces"][0]["slots"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s.as_str().unwrap().starts_with("valid")));
    // Both slots damaged: the device does not open; the check says why,
    // and a repair rebuilds the zone state from the data checksums.
    let img = Image::new();
    img.flip(l.zone_state_offset + 64);
    img.flip(l.zone_state_offset + l.slot_bytes + 64);
    let dev = format!("emu:file={}", img.p());
    let e = failed(&zns(&["-d", &dev, "report-zones"]));
    assert!(e.contains("no valid zone-state slot"), "{e}");
    let (code, v) = img.json(&[]);
    assert_eq!(code, 4);
    let kinds: Vec<&str> =
        v["problems"].as_array().unwrap().iter().map(|p| p["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["slot", "slot", "zone-state"]);
    // The rebuild keeps every block but cannot prove attributes and
    // states that leave no data: the repair says so, with status 4.
    let (code, v) = img.json(&["--repair"]);
    assert_eq!(code, 4, "{v}");
    assert_eq!(v["problems"].as_array().unwrap().len(), 0, "{v}");
    assert!(v["repairs"][0].as_str().unwrap().contains("rebuilt from the data checksums"), "{v}");
    let back = img.path.with_extension("out");
    let out = back.to_str().unwrap();
    ok(zns(&["-d", &dev, "read", "--lba", "0", "--blocks", "16", "--output", out]));
    let want: Vec<u8> = (0..16 * 4096).map(|i| (i % 253) as u8 + 1).collect();
    assert_eq!(std::fs::read(&back).unwrap(), want);
}

#[test]
fn truncation_and_damaged_structures_are_damage() {
    let img = Image::new();
    let f = std::fs::OpenOptions::new().write(true).open(&img.path).unwrap();
    f.set_len(img.layout[0].data_offset + 8 * 4096).unwrap();
    drop(f);
    let (code, v) = img.json(&[]);
    assert_eq!(code, 4);
    assert_eq!(v["problems"][0]["kind"], "length");
    assert!(v["problems"][0]["message"].as_str().unwrap().contains("truncated"));
    // Repair extends it; the blocks cut off now fail their checksum.
    let o = img.check(&["--repair"]);
    failed_with(&o, 4);
    assert!(o.stdout.contains("repair: extended the file"), "{}", o.stdout);
    let (_, v) = img.json(&[]);
    assert_eq!(v["length"], v["expected_length"]);
    assert_eq!(v["namespaces"][0]["damaged_total"], 8);

    for (at, kind) in [(20u64, "superblock"), (4096 + 30, "profile")] {
        let img = Image::new();
        img.flip(at);
        let (code, v) = img.json(&[]);
        assert_eq!(code, 4);
        assert_eq!(v["problems"][0]["kind"], kind);
        assert!(v["namespaces"].as_array().unwrap().is_empty());
        let o = img.check(&[]);
        assert!(o.stdout.contains(&format!("problem: the {kind}")), "{}", o.stdout);
    }
}

#[test]
fn images_without_checksums_and_missing_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plain.img");
    let p = path.to_str().unwrap();
    ok(zns(&["emu", "create", p, "--profile", "tiny", "--no-checksums"]));
    let o = ok(zns(&["emu", "check", p]));
    assert!(o.stdout.contains("no data checksums: data not verified"), "{}", o.stdout);
    let missing = dir.path().join("missing.img");
    let e = failed(&zns(&["emu", "check", missing.to_str().unwrap()]));
    assert!(e.contains("missing.img"), "{e}");
}
