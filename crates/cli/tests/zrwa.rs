//! Zone random write areas from the command line: `zns identify`, `zns
//! zone open --zrwa`, writes in the window, `zns report-zones` and `zns
//! zone commit`, against a served emulator (a ZRWA lasts while the device
//! is powered, so the commands share one through `zns serve`).

mod common;

use std::io::Write;
use std::process::{Command, Stdio};

use common::{ok, zns, Server};

const DEV: &str = "emu:tiny,zrwa=16/4/2";
const NQN: &str = "nqn.2026-11.io.znskit:zrwa-cli";

/// `zns serve` of [`DEV`], stopped when dropped.
struct Served {
    _server: Server,
    uri: String,
}

impl Served {
    fn start() -> Served {
        let server =
            Server::start(&["--device", DEV, "serve", "--listen", "127.0.0.1:0", "--nqn", NQN]);
        let uri = format!("tcp:{}/{NQN}", server.addr);
        Served { _server: server, uri }
    }

    fn run(&self, args: &[&str]) -> common::Out {
        let mut all = vec!["--device", &self.uri];
        all.extend_from_slice(args);
        zns(&all)
    }

    fn write(&self, lba: &str, data: &[u8]) {
        let mut c = Command::new(env!("CARGO_BIN_EXE_zns"))
            .args(["--device", &self.uri, "write", "--lba", lba])
            .env_remove("ZNS_LOG")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        c.stdin.take().unwrap().write_all(data).unwrap();
        let o = c.wait_with_output().unwrap();
        assert!(o.status.success(), "write at {lba}: {}", String::from_utf8_lossy(&o.stderr));
    }
}

#[test]
fn identify_shows_the_zrwa_capabilities() {
    let out = ok(zns(&["--device", DEV, "identify"])).stdout;
    assert!(out.contains("zone random write area"), "{out}");
    assert!(out.contains("zrwasz    : 16") && out.contains("zrwafg    : 4"), "{out}");
    assert!(out.contains("zrwacap   : 0x1 (explicit flush)"), "{out}");
    let line = out.lines().find(|l| l.starts_with("zrwa ")).expect("a zrwa line");
    assert!(
        line.ends_with(
            "yes (16 blocks a window, committed in 4 blocks, 2 zones at once, explicit commits)"
        ),
        "{line}"
    );
    let json = ok(zns(&["--device", DEV, "identify", "--json"])).stdout;
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["capabilities"]["zrwa"]["size"], 16);
    assert_eq!(v["identify"]["zns_namespace"]["numzrwa"], 1);
    let plain = ok(zns(&["--device", "emu:tiny", "identify"])).stdout;
    let line = plain.lines().find(|l| l.starts_with("zrwa ")).expect("a zrwa line");
    assert!(line.ends_with(": no"), "{line}");
}

#[test]
fn zrwa_commands_refuse_what_the_device_would() {
    let e = zns(&["--device", "emu:tiny", "zone", "open", "--zone", "1", "--zrwa"]);
    assert_eq!(e.code, 1);
    assert!(e.stderr.contains("no zone random write areas"), "{}", e.stderr);
    assert!(e.stderr.contains("Invalid Zone Operation Request (SCT 1h, SC B6h)"), "{}", e.stderr);
    let e = zns(&["--device", "emu:tiny", "zone", "commit", "--lba", "0x43"]);
    assert!(e.stderr.contains("SC B6h"), "{}", e.stderr);
    assert_eq!(zns(&["--device", DEV, "zone", "open", "--all", "--zrwa"]).code, 2);
    assert_eq!(zns(&["--device", DEV, "zone", "commit", "--zone", "1"]).code, 2, "--blocks");
    assert_eq!(zns(&["--device", DEV, "zone", "commit"]).code, 2);
    // A fresh device: zone 1 has no ZRWA to commit.
    let e = zns(&["--device", DEV, "zone", "commit", "--zone", "1", "--blocks", "4"]);
    assert!(e.stderr.contains("ZRWA commit up to LBA 0x43: Invalid Field"), "{}", e.stderr);
}

#[test]
fn open_write_report_and_commit_a_zrwa() {
    let s = Served::start();
    let out = ok(s.run(&["zone", "open", "--zone", "1", "--zrwa"])).stdout;
    assert_eq!(out, "zone 1 at LBA 0x40: Explicitly Opened, with a ZRWA, write pointer 0x40\n");
    // Out of order in the window: the write pointer stays.
    s.write("0x44", &[b'b'; 4 * 4096]);
    s.write("0x40", &[b'a'; 4 * 4096]);
    let t = ok(s.run(&["report-zones", "--start-zone", "1", "--count", "1"])).stdout;
    assert!(t.contains("WP: 0x40 ") && t.ends_with("Attrs: 0x8 (ZRWA)\n"), "{t}");
    let j = ok(s.run(&["report-zones", "--start-zone", "1", "--count", "1", "--format", "json"]));
    let v: serde_json::Value = serde_json::from_str(&j.stdout).unwrap();
    assert_eq!(
        (v["zones"][0]["zrwa"].as_bool(), v["zones"][0]["attrs"].as_u64()),
        (Some(true), Some(8))
    );
    let out = ok(s.run(&["zone", "commit", "--zone", "1", "--blocks", "8"])).stdout;
    assert_eq!(out, "zone 1 at LBA 0x40: Explicitly Opened, with a ZRWA, write pointer 0x48\n");
    let r = ok(s.run(&["read", "--lba", "0x40", "--blocks", "8"])).stdout;
    assert_eq!(r.len(), 8 * 4096);
    assert!(r.as_bytes()[..4 * 4096].iter().all(|&b| b == b'a'));
    assert!(r.as_bytes()[4 * 4096..].iter().all(|&b| b == b'b'));
    // Before the write pointer now: the device's status.
    let e = s.run(&["zone", "commit", "--lba", "0x47"]);
    assert!(e.stderr.contains("Zone Boundary Error (SCT 1h, SC B8h)"), "{}", e.stderr);
    // Committing to the capacity fills the zone and ends the ZRWA.
    s.write("0x48", &[b'c'; 16 * 4096]);
    s.write("0x58", &[b'c'; 16 * 4096]); // past the window: commits 16
    s.write("0x68", &[b'c'; 8 * 4096]); // to the capacity: commits 8
    let t = ok(s.run(&["report-zones", "--start-zone", "1", "--count", "1"])).stdout;
    assert!(t.contains("WP: 0x60 "), "{t}");
    let out = ok(s.run(&["zone", "commit", "--lba", "0x6f"])).stdout;
    assert_eq!(out, "zone 1 at LBA 0x40: Full, write pointer none\n");
}
