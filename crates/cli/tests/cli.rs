//! The `zns` binary, run as a user would: every command on a fresh device
//! image, the output formats, and the error lines and exit codes.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

struct Out {
    code: i32,
    stdout: Vec<u8>,
    stderr: String,
}

impl Out {
    fn text(&self) -> String {
        String::from_utf8(self.stdout.clone()).expect("utf-8 stdout")
    }

    #[track_caller]
    fn ok(self) -> Self {
        assert_eq!(self.code, 0, "stderr: {}", self.stderr);
        assert!(self.stderr.is_empty(), "stderr: {}", self.stderr);
        self
    }

    /// Failed with exit code 1, one line on stderr, nothing on stdout.
    #[track_caller]
    fn failed(self) -> String {
        assert_eq!(self.code, 1, "stdout: {}\nstderr: {}", self.text(), self.stderr);
        assert!(self.stdout.is_empty(), "stdout: {}", self.text());
        assert_eq!(self.stderr.lines().count(), 1, "stderr: {}", self.stderr);
        let line = self.stderr.trim_end().to_string();
        assert!(line.starts_with("zns: "), "{line}");
        line
    }
}

fn zns(args: &[&str], stdin: Option<&[u8]>) -> Out {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_zns"));
    cmd.args(args)
        .env_remove("ZNS_DEVICE")
        .env_remove("ZNS_LOG")
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("run zns");
    if let Some(data) = stdin {
        child.stdin.take().unwrap().write_all(data).unwrap();
    }
    let o = child.wait_with_output().unwrap();
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: o.stdout,
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// A fresh `tiny` device image and the `--device` argument for it.
struct Image {
    _dir: tempfile::TempDir,
    path: PathBuf,
    uri: String,
}

impl Image {
    fn new() -> Image {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dev.img");
        let out = zns(&["emu", "create", path.to_str().unwrap(), "--profile", "tiny"], None).ok();
        assert!(out.text().contains("created"), "{}", out.text());
        let uri = format!("emu:file={}", path.display());
        Image { _dir: dir, path, uri }
    }

    fn run(&self, args: &[&str]) -> Out {
        let mut all = vec!["--device", self.uri.as_str()];
        all.extend_from_slice(args);
        zns(&all, None)
    }

    fn run_in(&self, args: &[&str], stdin: &[u8]) -> Out {
        let mut all = vec!["--device", self.uri.as_str()];
        all.extend_from_slice(args);
        zns(&all, Some(stdin))
    }

    fn file(&self, name: &str, data: &[u8]) -> String {
        let p = self.path.parent().unwrap().join(name);
        std::fs::write(&p, data).unwrap();
        p.to_str().unwrap().to_string()
    }

    fn report_json(&self) -> Value {
        serde_json::from_str(&self.run(&["report-zones", "--format", "json"]).ok().text()).unwrap()
    }
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

/// One zone as every format shows it: (slba, wp, cap, state) in blocks;
/// `wp` None where the zone has none.
type Row = (u64, Option<u64>, u64, String);

fn hex(s: &str) -> u64 {
    u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap_or_else(|_| panic!("hex {s:?}"))
}

fn field<'a>(line: &'a str, key: &str) -> &'a str {
    let at = line.find(key).unwrap_or_else(|| panic!("{key} in {line}")) + key.len();
    line[at..].split_whitespace().next().unwrap().trim_end_matches(',')
}

fn parse_table(text: &str) -> Vec<Row> {
    let mut lines = text.lines();
    let n: usize = lines.next().unwrap().strip_prefix("nr_zones: ").unwrap().parse().unwrap();
    let rows: Vec<Row> = lines
        .map(|l| {
            let wp = hex(field(l, "WP:"));
            (
                hex(field(l, "SLBA:")),
                (wp != u64::MAX).then_some(wp),
                hex(field(l, "Cap:")),
                field(l, "State:").to_string(),
            )
        })
        .collect();
    assert_eq!(rows.len(), n);
    rows
}

fn blkzone_state(cond: &str) -> &'static str {
    match cond {
        "1(em)" => "EMPTY",
        "2(oi)" => "IMP_OPENED",
        "3(oe)" => "EXP_OPENED",
        "4(cl)" => "CLOSED",
        "13(ro)" => "READONLY",
        "14(fu)" => "FULL",
        "15(of)" => "OFFLINE",
        other => panic!("zcond {other}"),
    }
}

/// blkzone lines, sectors of 512 bytes → blocks of 4096.
fn parse_blkzone(text: &str) -> Vec<Row> {
    text.lines()
        .map(|l| {
            assert!(l.starts_with("  start: 0x"), "{l}");
            let start = hex(field(l, "start:")) / 8;
            let len = hex(field(l, "len")) / 8;
            let cap = hex(field(l, "cap")) / 8;
            let wptr = hex(field(l, "wptr")) / 8;
            let zcond = l[l.find("zcond:").unwrap() + 6..].trim_start();
            let state = blkzone_state(zcond.split_whitespace().next().unwrap());
            assert!(l.ends_with("[type: 2(SEQ_WRITE_REQUIRED)]"), "{l}");
            let wp = match state {
                "FULL" => {
                    assert_eq!(wptr, len, "a full zone's wptr is its length");
                    None
                }
                _ => Some(start + wptr),
            };
            (start, wp, cap, state.to_string())
        })
        .collect()
}

fn parse_json(text: &str) -> Vec<Row> {
    let v: Value = serde_json::from_str(text).unwrap();
    let zones = v["zones"].as_array().unwrap();
    assert_eq!(v["nr_zones"].as_u64().unwrap() as usize, zones.len());
    assert_eq!(v["block_size"], 4096);
    zones
        .iter()
        .map(|z| {
            (
                z["slba"].as_u64().unwrap(),
                z["wp"].as_u64(),
                z["cap"].as_u64().unwrap(),
                z["state"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn parse_csv(text: &str) -> Vec<Row> {
    let mut lines = text.lines();
    assert_eq!(lines.next().unwrap(), "index,slba,wp,cap,size,state,type,attrs");
    lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            assert_eq!(f.len(), 8, "{l}");
            assert_eq!(f[6], "SEQWRITE_REQ");
            (
                f[1].parse().unwrap(),
                (!f[2].is_empty()).then(|| f[2].parse().unwrap()),
                f[3].parse().unwrap(),
                f[5].to_string(),
            )
        })
        .collect()
}

fn formats_agree(img: &Image, extra: &[&str]) -> Vec<Row> {
    let run = |format: &str| {
        let mut args = vec!["report-zones", "--format", format];
        args.extend_from_slice(extra);
        img.run(&args).ok().text()
    };
    let table = parse_table(&run("table"));
    assert_eq!(parse_blkzone(&run("blkzone")), table, "blkzone vs table");
    assert_eq!(parse_json(&run("json")), table, "json vs table");
    assert_eq!(parse_csv(&run("csv")), table, "csv vs table");
    table
}

#[test]
fn help_and_usage_errors() {
    let out = zns(&["--help"], None).ok();
    for cmd in [
        "list",
        "identify",
        "report-zones",
        "zone",
        "read",
        "write",
        "append",
        "write-zeroes",
        "copy",
        "emu",
        "bench",
    ] {
        assert!(out.text().contains(cmd), "{cmd} missing from help");
    }
    assert_eq!(zns(&["frobnicate"], None).code, 2);
    assert_eq!(zns(&["zone", "open"], None).code, 2, "a zone or --all is required");
    assert_eq!(zns(&["zone", "open", "--zone", "0", "--all"], None).code, 2, "not both");
    assert_eq!(zns(&["zone", "open", "--zone", "0", "--lba", "0"], None).code, 2, "not both");
    assert_eq!(zns(&["append", "--zone", "0", "--zone-start", "0"], None).code, 2, "not both");
    assert_eq!(zns(&["append"], None).code, 2, "a zone is required");
    assert_eq!(zns(&["read", "--lba", "ten"], None).code, 2);
    assert_eq!(zns(&["report-zones", "--state", "sleepy"], None).code, 2);
    assert_eq!(zns(&["bench", "overhead", "--seconds", "0"], None).code, 2);
    assert_eq!(zns(&["bench", "overhead", "--seconds", "soon"], None).code, 2);
}

#[test]
fn list_shows_profiles_and_machine_devices() {
    let t = zns(&["list"], None).ok().text();
    for p in ["emu:tiny", "emu:small", "emu:zn540", "emu:file=PATH"] {
        assert!(t.contains(p), "{p} in {t}");
    }
    assert!(t.contains("/sys/class/nvme"));
    assert!(t.contains("class 0108h"));
}

#[test]
fn emu_profiles_and_show_profile() {
    let t = zns(&["emu", "profiles"], None).ok().text();
    assert_eq!(t.lines().count(), 8);
    assert!(t.contains("zn540-conv ") && t.contains("small-conv "), "{t}");
    assert!(t.contains("zn540-fdp ") && t.contains("small-fdp "), "{t}");
    assert!(t.lines().next().unwrap().starts_with("tiny "));
    let toml = zns(&["emu", "show-profile", "small"], None).ok().text();
    assert!(toml.contains("name = \"small\"") && toml.contains("[[namespace]]"), "{toml}");
    let e = zns(&["emu", "show-profile", "huge"], None).failed();
    assert!(e.contains("no built-in profile named \"huge\"") && e.contains("tiny"), "{e}");
}

#[test]
fn emu_create_from_an_edited_profile_and_refusing_to_overwrite() {
    let img = Image::new();
    let e = zns(&["emu", "create", img.path.to_str().unwrap(), "--profile", "tiny"], None).failed();
    assert!(e.contains("already exists"), "{e}");
    // A profile copied from show-profile and edited.
    let toml = zns(&["emu", "show-profile", "tiny"], None).ok().text();
    let edited =
        toml.replace("name = \"tiny\"", "name = \"mine\"").replace("zones = 16", "zones = 20");
    let prof = img.file("mine.toml", edited.as_bytes());
    let path = img.path.parent().unwrap().join("mine.img");
    zns(&["emu", "create", path.to_str().unwrap(), "--profile", &prof], None).ok();
    let uri = format!("emu:file={}", path.display());
    let j: Value =
        serde_json::from_str(&zns(&["-d", &uri, "identify", "--json"], None).ok().text()).unwrap();
    assert_eq!(j["zone_count"], 20);
    let e = zns(&["emu", "create", "x.img", "--profile", "nosuch"], None).failed();
    assert!(e.contains("unknown profile \"nosuch\""), "{e}");
}

#[test]
fn identify_human_and_json_agree() {
    let img = Image::new();
    let t = img.run(&["identify"]).ok().text();
    for needle in [
        "sn        : ZNSKIT-TINY-0001",
        "mn        : znskit emulated ZNS SSD (tiny)",
        "NVMe Identify Controller:",
        "ZNS Identify Controller:",
        "ZNS Identify Namespace 1:",
        "zasl      : 4 (64 KiB)",
        "mor       : 3 (4 zones)",
        "mar       : 5 (6 zones)",
        "zones         : 16",
        "lbafe  0  : zsze:0x40 zdes:1 (in use)",
    ] {
        assert!(t.contains(needle), "{needle:?} in\n{t}");
    }
    let j: Value = serde_json::from_str(&img.run(&["identify", "--json"]).ok().text()).unwrap();
    assert_eq!(j["serial"], "ZNSKIT-TINY-0001");
    assert_eq!(j["zone_count"], 16);
    assert_eq!(j["zone_size"], 64);
    assert_eq!(j["zone_capacity"], 48);
    assert_eq!(j["max_open"], 4);
    assert_eq!(j["uri"], img.uri.as_str());
    assert_eq!(j["identify"]["controller"]["sn"], "ZNSKIT-TINY-0001");
    assert_eq!(j["identify"]["zns_namespace"]["mor"], 3);
    assert_eq!(j["identify"]["namespace"]["nsze"], 16 * 64);
    assert_eq!(j["conventional"]["blocks"], 1024);
    // The default device and $ZNS_DEVICE.
    let d: Value = serde_json::from_str(&zns(&["identify", "--json"], None).ok().text()).unwrap();
    assert_eq!(d["zone_count"], 904);
    let out = Command::new(env!("CARGO_BIN_EXE_zns"))
        .args(["identify", "--json"])
        .env("ZNS_DEVICE", "emu:small")
        .output()
        .unwrap();
    let s: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s["zone_count"], 256);
}

#[test]
fn report_formats_parse_and_agree() {
    let img = Image::new();
    // Zone 0 closed with 2 blocks, zone 2 full, zone 3 closed after an
    // append, the rest empty. (Each command ends with a controller shutdown,
    // which closes open zones, or empties them when nothing was written.)
    img.run_in(&["write", "--lba", "0"], &pattern(5000, 1)).ok();
    img.run(&["zone", "open", "--lba", "0x40"]).ok();
    img.run(&["zone", "finish", "--zone", "2"]).ok();
    img.run_in(&["append", "--zone-start", "0xc0"], b"x").ok();
    let all = formats_agree(&img, &[]);
    assert_eq!(all.len(), 16);
    assert_eq!(all[0], (0, Some(2), 48, "CLOSED".to_string()));
    assert_eq!(all[1], (0x40, Some(0x40), 48, "EMPTY".to_string()));
    assert_eq!(all[2], (0x80, None, 48, "FULL".to_string()));
    assert_eq!(all[3], (0xc0, Some(0xc1), 48, "CLOSED".to_string()));
    assert!(all[4..].iter().all(|r| r.3 == "EMPTY" && r.1 == Some(r.0)));
    assert_eq!(all.iter().filter(|r| r.3 == "EMPTY").count(), 13);

    let part = formats_agree(&img, &["--start-zone", "1", "--count", "3"]);
    assert_eq!(part, all[1..4]);
    let closed = formats_agree(&img, &["--state", "closed"]);
    assert_eq!(closed, vec![all[0].clone(), all[3].clone()]);
    let full = formats_agree(&img, &["--state", "full"]);
    assert_eq!(full, vec![all[2].clone()]);
    assert!(formats_agree(&img, &["--state", "explicit-open"]).is_empty());
    assert!(formats_agree(&img, &["--state", "offline"]).is_empty());
    assert_eq!(
        formats_agree(&img, &["--state", "empty", "--count", "2"]),
        vec![all[1].clone(), all[4].clone()]
    );
    // The exact table and blkzone lines.
    let t = img.run(&["report-zones", "--count", "1"]).ok().text();
    assert_eq!(
        t,
        "nr_zones: 1\nZone: 0      SLBA: 0x0        WP: 0x2        Cap: 0x30       State: CLOSED       \
         Type: SEQWRITE_REQ   Attrs: 0x0\n"
    );
    let b = img.run(&["report-zones", "--count", "1", "--format", "blkzone"]).ok().text();
    assert_eq!(
        b,
        "  start: 0x000000000, len 0x000200, cap 0x000180, wptr 0x000010 reset:0 non-seq:0, \
         zcond: 4(cl) [type: 2(SEQ_WRITE_REQUIRED)]\n"
    );
    let e = img.run(&["report-zones", "--start-zone", "16"]).failed();
    assert!(e.contains("zone 16 does not exist"), "{e}");
}

#[test]
fn zone_commands_walk_the_states() {
    let img = Image::new();
    let state = |i: usize| img.report_json()["zones"][i]["state"].as_str().unwrap().to_string();
    let out = img.run(&["zone", "open", "--lba", "0x40"]).ok().text();
    assert_eq!(out, "zone 1 at LBA 0x40: Explicitly Opened\n");
    // The shutdown at the end of each command closes open zones, and
    // empties an opened zone nothing was written to.
    assert_eq!(state(1), "EMPTY");
    img.run_in(&["write", "--lba", "0x40"], b"x").ok();
    assert_eq!(state(1), "CLOSED");
    let out = img.run(&["zone", "open", "--zone", "1"]).ok().text();
    assert_eq!(out, "zone 1 at LBA 0x40: Explicitly Opened\n");
    let out = img.run(&["zone", "close", "--lba", "64"]).ok().text();
    assert_eq!(out, "zone 1 at LBA 0x40: Closed\n");
    assert_eq!(state(1), "CLOSED");
    img.run(&["zone", "finish", "--zone-start", "0x40"]).ok();
    assert_eq!(state(1), "FULL");
    img.run(&["zone", "reset", "--zone", "1"]).ok();
    assert_eq!(state(1), "EMPTY");
    let e = img.run(&["zone", "offline", "--lba", "0x40"]).failed();
    assert_eq!(e, "zns: offline zone at LBA 0x40: Invalid Zone State Transition (SCT 1h, SC BFh)");
    let e = img.run(&["zone", "close", "--zone", "1"]).failed();
    assert!(e.ends_with("Invalid Zone State Transition (SCT 1h, SC BFh)"), "{e}");
    img.run(&["zone", "finish", "--lba", "0x80"]).ok();
    img.run(&["zone", "open", "--zone", "3"]).ok();
    let out = img.run(&["zone", "reset", "--all"]).ok().text();
    assert_eq!(out, "reset all zones: done\n");
    assert!(img.report_json()["zones"].as_array().unwrap().iter().all(|z| z["state"] == "EMPTY"));
    img.run(&["zone", "finish", "--all"]).ok();
    img.run(&["zone", "close", "--all"]).ok();
    img.run(&["zone", "open", "--all"]).ok();
    img.run(&["zone", "offline", "--all"]).ok();
    let e = img.run(&["zone", "open", "--lba", "0x41"]).failed();
    assert_eq!(
        e,
        "zns: open zone at LBA 0x41: not a zone's start LBA (it lies in zone 1, which starts at \
         LBA 0x40; --zone 1 names it): the device would answer Invalid Field in Command; nothing \
         was changed"
    );
}

#[test]
fn write_read_append_round_trips() {
    let img = Image::new();
    // 40 blocks: more than one command (MDTS is 32 blocks on tiny).
    let data = pattern(40 * 4096, 3);
    let input = img.file("in.bin", &data);
    let out = img.run(&["write", "--lba", "0", "--input", &input]).ok().text();
    assert_eq!(out, "wrote 40 blocks at LBA 0x0\n");
    let output = img.path.parent().unwrap().join("out.bin");
    img.run(&["read", "--lba", "0", "--blocks", "40", "--output", output.to_str().unwrap()]).ok();
    assert_eq!(std::fs::read(&output).unwrap(), data);
    // Stdout, and a partial block padded with zeroes.
    img.run_in(&["write", "--lba", "40", "--fua"], b"tail").ok();
    let got = img.run(&["read", "--lba", "0x28", "--blocks", "1"]).ok().stdout;
    assert_eq!(got.len(), 4096);
    assert_eq!(&got[..4], b"tail");
    assert!(got[4..].iter().all(|&b| b == 0));
    // Appends: 20 blocks take two commands (ZASL is 16 blocks on tiny).
    let a = pattern(20 * 4096 - 100, 9);
    let input = img.file("a.bin", &a);
    let out = img.run(&["append", "--zone-start", "0x40", "--input", &input]).ok().text();
    assert_eq!(out, "appended 20 blocks to zone 1 at LBA 0x40\n");
    let out = img.run_in(&["append", "--zone", "1"], b"more").ok().text();
    assert_eq!(out, "appended 1 block to zone 1 at LBA 0x54\n");
    let got = img.run(&["read", "--lba", "0x40", "--blocks", "20"]).ok().stdout;
    assert_eq!(&got[..a.len()], &a[..]);
    assert!(got[a.len()..].iter().all(|&b| b == 0));
    let z = &img.report_json()["zones"][1];
    assert_eq!(z["wp"], 0x55);
    let e = img.run_in(&["write", "--lba", "0x80"], b"").failed();
    assert!(e.contains("no data to write"), "{e}");
    let e = img.run(&["write", "--lba", "0x80", "--input", "/nonexistent/file"]).failed();
    assert!(e.contains("/nonexistent/file"), "{e}");
}

#[test]
fn write_off_the_write_pointer_fails_and_changes_nothing() {
    let img = Image::new();
    img.run_in(&["write", "--lba", "0"], &pattern(8192, 1)).ok();
    let before = img.report_json();
    let data_before = img.run(&["read", "--lba", "0", "--blocks", "4"]).ok().stdout;
    let e = img.run_in(&["write", "--lba", "0x5"], &pattern(4096, 2)).failed();
    assert_eq!(e, "zns: write at LBA 0x5: Zone Invalid Write (SCT 1h, SC BCh)");
    // Several commands' worth, off the write pointer: the first one fails.
    let e = img.run_in(&["write", "--lba", "0x0"], &pattern(40 * 4096, 2)).failed();
    assert_eq!(e, "zns: write at LBA 0x0: Zone Invalid Write (SCT 1h, SC BCh)");
    // Several commands' worth past the zone capacity: refused up front.
    let e = img.run_in(&["write", "--lba", "0x2"], &pattern(47 * 4096, 2)).failed();
    assert!(e.contains("does not fit") && e.contains("nothing was written"), "{e}");
    // One command past the capacity: the device refuses it.
    img.run(&["zone", "finish", "--zone", "1"]).ok();
    let e = img.run_in(&["write", "--lba", "0x40"], b"x").failed();
    assert_eq!(e, "zns: write at LBA 0x40: Zone Is Full (SCT 1h, SC B9h)");
    img.run(&["zone", "reset", "--lba", "0x40"]).ok();
    assert_eq!(img.report_json(), before);
    assert_eq!(img.run(&["read", "--lba", "0", "--blocks", "4"]).ok().stdout, data_before);
}

#[test]
fn write_zeroes_and_copy_write_blocks_without_host_data() {
    let img = Image::new();
    img.run_in(&["write", "--lba", "0"], &pattern(2 * 4096, 4)).ok();
    let out = img.run(&["write-zeroes", "--lba", "2", "--blocks", "3"]).ok().text();
    assert_eq!(out, "wrote zeroes to 3 blocks at LBA 0x2\n");
    let out = img.run(&["copy", "--source", "0:2", "--dest", "0x40"]).ok().text();
    assert_eq!(out, "copied 2 blocks from 1 range to LBA 0x40\n");
    let out = img.run(&["copy", "--source", "1:1", "--source", "0:1", "--dest", "0x42"]).ok();
    assert_eq!(out.text(), "copied 2 blocks from 2 ranges to LBA 0x42\n");
    let got = img.run(&["read", "--lba", "0x40", "--blocks", "4"]).ok().stdout;
    let data = pattern(2 * 4096, 4);
    assert_eq!(&got[..8192], &data[..]);
    assert_eq!((&got[8192..12288], &got[12288..]), (&data[4096..], &data[..4096]));
    let got = img.run(&["read", "--lba", "2", "--blocks", "3"]).ok().stdout;
    assert!(got.iter().all(|&b| b == 0));
    assert_eq!(img.report_json()["zones"][0]["wp"], 5);
    assert_eq!(img.report_json()["zones"][1]["wp"], 0x44);
    // Off the write pointer: the device's answer.
    let e = img.run(&["copy", "--source", "0:1", "--dest", "0x50"]).failed();
    assert_eq!(e, "zns: copy to LBA 0x50: Zone Invalid Write (SCT 1h, SC BCh)");
    let e = img.run(&["write-zeroes", "--lba", "0x10", "--blocks", "1"]).failed();
    assert_eq!(e, "zns: write zeroes at LBA 0x10: Zone Invalid Write (SCT 1h, SC BCh)");
    // Past the namespace: refused before anything is sent.
    let before = img.report_json();
    let e = img.run(&["write-zeroes", "--lba", "0x3ff", "--blocks", "2"]).failed();
    assert!(e.contains("reaches past the end of the namespace (1024 blocks"), "{e}");
    assert!(e.ends_with("LBA Out of Range; nothing was written"), "{e}");
    let e = img.run(&["copy", "--source", "0x3f0:0x20", "--dest", "5"]).failed();
    assert!(e.contains("source 32 blocks at LBA 0x3f0 reaches past the end"), "{e}");
    let e = img.run(&["copy", "--source", "0:1", "--dest", "0x400"]).failed();
    assert!(e.contains("the destination starts past the end"), "{e}");
    assert_eq!(img.report_json(), before);
    // The device's Copy limits, from a profile with small ones.
    let toml = zns(&["emu", "show-profile", "tiny"], None).ok().text();
    let toml = toml.replace(
        "read_across_zone_boundaries = true",
        "read_across_zone_boundaries = true\ncopy_max_range_blocks = 2\ncopy_max_blocks = 3\n\
         copy_max_ranges = 2",
    );
    let prof = img.file("copy.toml", toml.as_bytes());
    let path = img.path.parent().unwrap().join("copy.img");
    zns(&["emu", "create", path.to_str().unwrap(), "--profile", &prof], None).ok();
    let dev = format!("emu:file={}", path.display());
    zns(&["-d", &dev, "write-zeroes", "--lba", "0", "--blocks", "8"], None).ok();
    for (args, limit) in [
        (&["--source", "0:1", "--source", "1:1", "--source", "2:1"][..], "(MSRC)"),
        (&["--source", "0:3"], "(MSSRL)"),
        (&["--source", "0:2", "--source", "2:2"], "(MCL)"),
    ] {
        let mut all = vec!["-d", dev.as_str(), "copy", "--dest", "0x40"];
        all.extend_from_slice(args);
        let e = zns(&all, None).failed();
        assert!(e.contains(limit) && e.contains("Command Size Limit Exceeded"), "{e}");
    }
    zns(&["-d", &dev, "copy", "--source", "0:2", "--source", "4:1", "--dest", "0x40"], None).ok();
    assert!(usage_error(img.run(&["copy", "--dest", "0x40"])).contains("--source"));
    assert!(usage_error(img.run(&["copy", "--source", "4", "--dest", "0"])).contains("LBA:BLOCKS"));
}

/// Exit code 2, clap's error on stderr (returned), nothing on stdout.
#[track_caller]
fn usage_error(o: Out) -> String {
    assert_eq!(o.code, 2, "stderr: {}", o.stderr);
    assert!(o.stdout.is_empty());
    assert!(o.stderr.starts_with("error: "), "{}", o.stderr);
    o.stderr
}

#[test]
fn zones_are_named_by_index_or_start_lba_never_by_a_bare_number() {
    let img = Image::new();
    // A bare number: refused, saying what to write instead.
    for action in ["open", "close", "finish", "reset", "offline"] {
        let e = usage_error(img.run(&["zone", action, "0x40"]));
        assert!(e.contains("ambiguous: write --zone 0x40") && e.contains("--lba 0x40"), "{e}");
    }
    // --zone is the index report-zones prints, --lba the SLBA beside it.
    let t = img.run(&["report-zones", "--start-zone", "5", "--count", "1"]).ok().text();
    assert!(t.lines().nth(1).unwrap().starts_with("Zone: 5      SLBA: 0x140 "), "{t}");
    let out = img.run(&["zone", "finish", "--zone", "5"]).ok().text();
    assert_eq!(out, "zone 5 at LBA 0x140: Full\n");
    let out = img.run(&["zone", "reset", "--lba", "0x140"]).ok().text();
    assert_eq!(out, "zone 5 at LBA 0x140: Empty\n");
    let out = img.run_in(&["append", "--zone", "5"], b"x").ok().text();
    assert_eq!(out, "appended 1 block to zone 5 at LBA 0x140\n");
    let out = img.run_in(&["append", "--zone-start", "0x140"], b"y").ok().text();
    assert_eq!(out, "appended 1 block to zone 5 at LBA 0x141\n");
    let csv = img.run(&["report-zones", "--start-zone", "5", "--count", "1", "--format", "csv"]);
    assert_eq!(csv.ok().text().lines().nth(1).unwrap(), "5,320,322,48,64,CLOSED,SEQWRITE_REQ,0");
    // Zones that do not exist: nothing reaches the device.
    let before = img.report_json();
    let e = img.run(&["zone", "finish", "--zone", "16"]).failed();
    assert_eq!(e, "zns: zone 16 does not exist: the device has 16 zones (0 to 15)");
    let e = img.run_in(&["append", "--zone", "99"], b"x").failed();
    assert_eq!(e, "zns: zone 99 does not exist: the device has 16 zones (0 to 15)");
    let e = img.run_in(&["append", "--zone-start", "0x400"], b"x").failed();
    assert!(e.contains("starts past the end of the namespace (1024 blocks"), "{e}");
    assert!(e.contains("LBA Out of Range"), "{e}");
    assert_eq!(img.report_json(), before);
}

#[test]
fn ranges_past_the_namespace_fail_before_any_io() {
    let img = Image::new();
    img.run_in(&["write", "--lba", "0"], &pattern(4096, 1)).ok();
    let before = img.report_json();
    // The read that once wrote its output up to the failure: nothing on
    // stdout, one line naming the limit and the status.
    let e = img.run(&["read", "--lba", "0", "--blocks", "100000000"]).failed();
    assert_eq!(
        e,
        "zns: read of 100000000 blocks at LBA 0x0 reaches past the end of the namespace (1024 \
         blocks, last LBA 0x3ff): the device would answer LBA Out of Range; nothing was read"
    );
    let out = img.path.parent().unwrap().join("out.bin");
    let o = out.to_str().unwrap();
    let e = img.run(&["read", "--lba", "0x3f0", "--blocks", "0x11", "--output", o]).failed();
    assert!(e.contains("reaches past the end") && e.contains("last LBA 0x3ff"), "{e}");
    assert!(!out.exists(), "no output file is created");
    let e = img.run(&["read", "--lba", "0xffffffffffffffff", "--blocks", "2"]).failed();
    assert!(e.contains("starts past the end"), "{e}");
    img.run(&["read", "--lba", "0x3f0", "--blocks", "0x10", "--output", o]).ok();
    assert_eq!(std::fs::metadata(&out).unwrap().len(), 16 * 4096);
    // Writes: one command and several.
    let e = img.run_in(&["write", "--lba", "0x400"], b"x").failed();
    assert!(e.starts_with("zns: write of 1 block at LBA 0x400 starts past the end"), "{e}");
    assert!(e.ends_with("LBA Out of Range; nothing was written"), "{e}");
    let e = img.run_in(&["write", "--lba", "0x3f0"], &pattern(40 * 4096, 2)).failed();
    assert!(e.starts_with("zns: write of 40 blocks at LBA 0x3f0 reaches past the end"), "{e}");
    assert_eq!(img.report_json(), before, "nothing changed");
    // A device that does not read across zone boundaries: a read that
    // spans two zones is refused before the first command.
    let toml = zns(&["emu", "show-profile", "tiny"], None)
        .ok()
        .text()
        .replace("read_across_zone_boundaries = true", "read_across_zone_boundaries = false");
    let prof = img.file("norazb.toml", toml.as_bytes());
    let path = img.path.parent().unwrap().join("norazb.img");
    zns(&["emu", "create", path.to_str().unwrap(), "--profile", &prof], None).ok();
    let dev = format!("emu:file={}", path.display());
    let e = zns(&["-d", &dev, "read", "--lba", "0x3f", "--blocks", "2"], None).failed();
    assert_eq!(
        e,
        "zns: read of 2 blocks at LBA 0x3f crosses from zone 0 into zone 1, and the device does \
         not read across zone boundaries: it would answer Zone Boundary Error; nothing was read"
    );
    zns(&["-d", &dev, "read", "--lba", "0x3e", "--blocks", "2"], None).ok();
}

#[test]
fn errors_are_one_line_with_exit_code_1() {
    let e = zns(&["-d", "nvmf:nqn.2024-01.io.znskit:x", "identify"], None).failed();
    assert!(
        e.starts_with(
            "zns: invalid device URI \"nvmf:nqn.2024-01.io.znskit:x\": unknown device URI \
             scheme \"nvmf\" (known schemes: emu, pcie"
        ),
        "{e}"
    );
    let e = zns(&["-d", "emu:tiny,speed=11", "report-zones"], None).failed();
    assert!(e.contains("unknown option \"speed\"") && e.contains("profile, file, media, timing"));
    let e = zns(&["-d", "emu:tiny", "read", "--lba", "0x400"], None).failed();
    assert_eq!(
        e,
        "zns: read of 1 block at LBA 0x400 starts past the end of the namespace (1024 blocks, \
         last LBA 0x3ff): the device would answer LBA Out of Range; nothing was read"
    );
    let e = zns(&["-d", "emu:tiny", "zone", "reset", "--lba", "0x10000"], None).failed();
    assert_eq!(
        e,
        "zns: reset zone at LBA 0x10000 starts past the end of the namespace (1024 blocks, last \
         LBA 0x3ff): the device would answer LBA Out of Range; nothing was changed"
    );
    let e = zns(&["-d", "emu:file=/nonexistent/dev.img", "identify"], None).failed();
    assert!(e.contains("/nonexistent/dev.img"), "{e}");
    let e = zns(&["-d", "pcie:ffff:ff:1f.7", "identify"], None).failed();
    assert!(e.contains("cannot open pcie:ffff:ff:1f.7: no PCI device ffff:ff:1f.7"), "{e}");
    let img = Image::new();
    let e = img.run_in(&["append", "--zone-start", "0x41"], b"x").failed();
    assert!(e.starts_with("zns: zone append to zone at LBA 0x41: not a zone's start LBA"), "{e}");
    let e = zns(&["-d", &format!("{},profile=small", img.uri), "identify"], None).failed();
    assert!(e.contains("holds a \"tiny\" device, not \"small\""), "{e}");
    let _ = Path::new(&img.path);
}

#[test]
fn bench_overhead_prints_one_json_object_and_a_table() {
    let out = zns(&["bench", "overhead", "--json", "--seconds", "0.02"], None).ok();
    let v: Value = serde_json::from_str(&out.text()).expect("one JSON object on stdout");
    let positive = |key: &str| {
        let x = v[key].as_f64().unwrap_or_else(|| panic!("{key} in {v}"));
        assert!(x.is_finite() && x > 0.0, "{key} = {x}");
        x
    };
    let qd1 = positive("driver_ns_per_io_qd1");
    positive("driver_ns_per_io_qd32");
    positive("emulator_ns_per_io_qd1");
    positive("emulator_ns_per_io_qd32");
    positive("ios_per_sec_qd1");
    let iops32 = positive("ios_per_sec_qd32");
    assert!(v["method"].as_str().is_some_and(|m| m.contains("one thread")), "{v}");
    let samples = v["samples"].as_array().expect("samples");
    let configs: Vec<(&str, u64)> = samples
        .iter()
        .map(|s| (s["op"].as_str().unwrap(), s["queue_depth"].as_u64().unwrap()))
        .collect();
    assert_eq!(configs, [("read", 1), ("read", 32), ("write", 1), ("write", 32)]);
    for s in samples {
        assert!(s["ios"].as_u64().unwrap() > 0, "{s}");
        let total = s["total_ns_per_io"].as_f64().unwrap();
        let parts =
            s["driver_ns_per_io"].as_f64().unwrap() + s["emulator_ns_per_io"].as_f64().unwrap();
        assert!((total - parts).abs() < 1e-6 * total.max(1.0), "{s}");
    }
    assert_eq!(samples[0]["driver_ns_per_io"].as_f64(), Some(qd1));
    assert_eq!(samples[1]["ios_per_sec"].as_f64(), Some(iops32));

    let t = zns(&["bench", "overhead", "--seconds", "0.02"], None).ok().text();
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(lines.len(), 6, "{t}");
    assert!(lines[0].starts_with("op") && lines[0].contains("driver ns"), "{t}");
    for (line, (op, qd)) in
        lines[1..5].iter().zip([("read", 1), ("read", 32), ("write", 1), ("write", 32)])
    {
        let cols: Vec<&str> = line.split_whitespace().collect();
        assert_eq!((cols[0], cols[1].parse::<u32>().unwrap()), (op, qd), "{t}");
        assert_eq!(cols.len(), 6, "{t}");
        assert!(cols[2..].iter().all(|c| c.parse::<f64>().is_ok_and(|x| x > 0.0)), "{t}");
    }
}

#[test]
fn metadata_round_trips_and_is_refused_without_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("small.img");
    zns(&["emu", "create", path.to_str().unwrap(), "--profile", "small"], None).ok();
    let dev = format!("emu:file={}", path.display());
    let file = |name: &str, data: &[u8]| {
        let p = dir.path().join(name);
        std::fs::write(&p, data).unwrap();
        p.to_str().unwrap().to_string()
    };
    // 40 blocks (more than one command), 16 metadata bytes each, the
    // metadata file 5 bytes short: padded with zeroes.
    let data = pattern(40 * 4096, 5);
    let meta = pattern(40 * 16 - 5, 6);
    let (input, minput) = (file("d.bin", &data), file("m.bin", &meta));
    zns(&["-d", &dev, "write", "--lba", "0", "-i", &input, "--metadata", &minput], None).ok();
    let (out, mout) = (dir.path().join("o.bin"), dir.path().join("mo.bin"));
    let (o, mo) = (out.to_str().unwrap(), mout.to_str().unwrap());
    zns(&["-d", &dev, "read", "--lba", "0", "--blocks", "40", "-o", o, "--metadata", mo], None)
        .ok();
    assert_eq!(std::fs::read(&out).unwrap(), data);
    let back = std::fs::read(&mout).unwrap();
    assert_eq!(&back[..meta.len()], &meta[..]);
    assert!(back[meta.len()..].iter().all(|&b| b == 0) && back.len() == 40 * 16);
    // Too much metadata: refused before anything is written.
    let big = file("big.bin", &pattern(17, 1));
    let small = file("one.bin", &pattern(4096, 1));
    let e =
        zns(&["-d", &dev, "write", "--lba", "40", "-i", &small, "--metadata", &big], None).failed();
    assert!(e.contains("17 bytes for 1 block"), "{e}");
    // A format without metadata.
    let e = zns(&["-d", "emu:tiny", "write", "--lba", "0", "-i", &small, "--metadata", &big], None)
        .failed();
    assert!(e.contains("no per-LBA metadata"), "{e}");
}

/// Flips one byte of the image at `at`.
fn flip_image_byte(path: &std::path::Path, at: u64) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().read(true).write(true).open(path).unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, at).unwrap();
    f.write_all_at(&[b[0] ^ 0x01], at).unwrap();
}

#[test]
fn a_damaged_or_truncated_image_is_an_error_not_a_fresh_device() {
    let profile = zns_emulator::profile::Profile::by_name("tiny").unwrap();
    let l = zns_emulator::image::layout(&profile)[0];
    // Both zone-state slots damaged after 16 blocks were written.
    let img = Image::new();
    img.run_in(&["write", "--lba", "0"], &pattern(16 * 4096, 3)).ok();
    flip_image_byte(&img.path, l.zone_state_offset + 30);
    flip_image_byte(&img.path, l.zone_state_offset + l.slot_bytes + 30);
    let e = img.run(&["report-zones"]).failed();
    assert!(e.contains("namespace 1 has no valid zone-state slot"), "{e}");
    assert!(e.contains("not opened as a fresh device"), "{e}");
    assert_eq!(e.trim().lines().count(), 1, "one line: {e}");
    // Truncated below its data region.
    let img = Image::new();
    img.run_in(&["write", "--lba", "0"], &pattern(16 * 4096, 3)).ok();
    std::fs::OpenOptions::new().write(true).open(&img.path).unwrap().set_len(1_500_000).unwrap();
    let e = img.run(&["read", "--lba", "0"]).failed();
    assert!(e.contains("truncated: 1500000 bytes"), "{e}");
    // The newest slot damaged, the older one intact: the state the older
    // one and the data prove, read-only, and a warning saying so.
    let img = Image::new();
    img.run_in(&["write", "--lba", "0"], &pattern(16 * 4096, 3)).ok();
    img.run(&["zone", "reset", "--all"]).ok();
    // Damage the newer slot (the higher sequence number).
    let seq = |at: u64| {
        use std::os::unix::fs::FileExt;
        let mut b = [0u8; 8];
        std::fs::File::open(&img.path).unwrap().read_exact_at(&mut b, at).unwrap();
        u64::from_le_bytes(b)
    };
    let (a, b) = (seq(l.zone_state_offset), seq(l.zone_state_offset + l.slot_bytes));
    let newer = if a > b {
        ("A", l.zone_state_offset, a)
    } else {
        ("B", l.zone_state_offset + l.slot_bytes, b)
    };
    flip_image_byte(&img.path, newer.1 + 30);
    let out = img.run(&["report-zones"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let want = format!("slot {} fails its checksum (sequence {})", newer.0, newer.2);
    assert!(out.stderr.contains(&want), "{}", out.stderr);
    assert!(out.stderr.contains("the image is read-only"), "{}", out.stderr);
    let out = img.run_in(&["write", "--lba", "0"], &pattern(4096, 4));
    assert_eq!(out.code, 1, "{}", out.stderr);
    let e = out.stderr.lines().last().unwrap_or_default();
    assert!(e.contains("Namespace is Write Protected"), "{}", out.stderr);
}

/// A conventional twin identifies as a conventional drive: no ZNS data, no
/// zones; report-zones is a clear error; writes go anywhere.
#[test]
fn conventional_twins_identify_without_zones() {
    let t = zns(&["--device", "emu:small-conv", "identify"], None).ok().text();
    assert!(t.contains("Conventional namespace (NVM command set):"), "{t}");
    assert!(t.contains("none (not a zoned namespace)"), "{t}");
    assert!(!t.contains("ZNS Identify"), "{t}");
    assert!(t.contains("Device-side FTL") && t.contains("7.00 %"), "{t}");
    assert!(t.contains("Dataset Management"), "{t}");
    let j: Value = serde_json::from_slice(
        &zns(&["--device", "emu:zn540-conv,op=28", "identify", "--json"], None).ok().stdout,
    )
    .unwrap();
    assert_eq!(j["zoned"], false);
    assert_eq!(j["zone_count"], 0);
    assert!(j["identify"]["zns_namespace"].is_null());
    assert!((j["ftl"]["over_provisioning"].as_f64().unwrap() - 0.28).abs() < 1e-3, "{j}");
    let e = zns(&["--device", "emu:small-conv", "report-zones"], None).failed();
    assert!(e.contains("conventional namespace") && e.contains("no zones"), "{e}");
    let e = zns(&["--device", "emu:small-conv", "zone", "reset", "--lba", "0"], None).failed();
    assert!(e.contains("Invalid Command Opcode"), "{e}");
    let e = zns(&["--device", "emu:small-conv", "zone", "reset", "--zone", "0"], None).failed();
    assert!(e.contains("no zones"), "{e}");
    let e =
        zns(&["--device", "emu:small-conv", "append", "--zone-start", "0"], Some(b"x")).failed();
    assert!(e.contains("no zones"), "{e}");
    let t = zns(&["--device", "emu:small-conv", "write", "--lba", "12345"], Some(b"x")).ok();
    assert!(t.text().contains("wrote 1 block at LBA 0x3039"), "{}", t.text());
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("conv.img");
    let e =
        zns(&["emu", "create", img.to_str().unwrap(), "--profile", "small-conv"], None).failed();
    assert!(e.contains("device-side FTL"), "{e}");
    assert!(!img.exists());
}
