//! `zns serve` as a user runs it: several devices as namespaces (a
//! device's conventional namespace after its zoned one), the
//! printed connect line, an NVMe/TCP connection initialized, SIGTERM.

use std::io::{BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};

use zns_spec::tcp::{Digests, IcReq, IcResp, IC_PDU_SIZE};

mod common;

use common::{read_until, wait_exit};

#[test]
fn serve_exports_every_device_and_stops_on_sigterm() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_zns"))
        .args(["--device", "emu:tiny", "--device", "emu:small", "serve"])
        .args(["--listen", "127.0.0.1:0", "--nqn", "nqn.2026-11.io.znskit:cli-test"])
        .env_remove("ZNS_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run zns serve");
    let out = BufReader::new(child.stdout.take().unwrap());
    let (text, mut out) = read_until(&mut child, out, "zns serve's `nvme connect` line", |l| {
        l.contains("nvme connect")
    });
    let addr = text
        .lines()
        .find_map(|l| l.strip_prefix("listening on "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| {
            let _ = child.kill();
            let _ = child.wait();
            panic!("no listening line: {text}")
        })
        .to_string();
    assert!(text.contains("namespace 1: emu:tiny"), "{text}");
    // tiny's conventional namespace follows its zoned one.
    assert!(text.contains("namespace 2: emu:tiny, namespace 2 (conventional, 4.0 MiB"), "{text}");
    assert!(text.contains("namespace 3: emu:small"), "{text}");
    assert!(text.contains("-n nqn.2026-11.io.znskit:cli-test"), "{text}");

    let mut s = TcpStream::connect(&addr).unwrap();
    let req = IcReq { pfv: 0, hpda: 0, digests: Digests { header: true, data: false }, maxr2t: 0 };
    s.write_all(&req.to_bytes()).unwrap();
    let mut b = [0u8; IC_PDU_SIZE];
    s.read_exact(&mut b).unwrap();
    assert_eq!(IcResp::from_bytes(&b).digests, req.digests);
    drop(s);

    // SAFETY: kill(2) on our own child's pid has no memory effects.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let status = wait_exit(&mut child, "zns serve to exit after SIGTERM");
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    assert!(status.success(), "{status}: {rest}");
    assert!(rest.contains("stopped after") && rest.contains("1 connections"), "{rest}");

    let two = Command::new(env!("CARGO_BIN_EXE_zns"))
        .args(["--device", "emu:tiny", "--device", "emu:small", "identify"])
        .output()
        .unwrap();
    assert_eq!(two.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&two.stderr).contains("only `zns serve`"));
}

#[test]
fn serve_exports_an_ftl_as_a_conventional_namespace_and_checkpoints_it() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("ftl.img");
    let zns = env!("CARGO_BIN_EXE_zns");
    let ok = |args: &[&str]| {
        let o = Command::new(zns).args(args).output().unwrap();
        assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
    };
    ok(&["emu", "create", img.to_str().unwrap(), "--profile", "small"]);
    let uri = format!("emu:file={}", img.display());
    ok(&["--device", &uri, "ftl", "format"]);
    // Only --ftl: no zoned namespace is added.
    let mut child = Command::new(zns)
        .args(["serve", "--listen", "127.0.0.1:0", "--ftl", &uri])
        .env_remove("ZNS_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run zns serve");
    let out = BufReader::new(child.stdout.take().unwrap());
    let (text, mut out) = read_until(&mut child, out, "zns serve's `nvme connect` line", |l| {
        l.contains("nvme connect")
    });
    assert!(text.contains(&format!("namespace 1: FTL on {uri} (conventional")), "{text}");
    assert!(!text.contains("namespace 2"), "{text}");
    // While served, the image is locked.
    let busy = Command::new(zns).args(["--device", &uri, "ftl", "check"]).output().unwrap();
    assert_eq!(busy.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&busy.stderr).contains("in use"));
    // SAFETY: kill(2) on our own child's pid has no memory effects.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let status = wait_exit(&mut child, "zns serve to exit after SIGTERM");
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    assert!(status.success(), "{status}: {rest}");
    assert!(rest.contains("1 FTL checkpoint(s) written"), "{rest}");
    ok(&["--device", &uri, "ftl", "check"]);
}

/// A conventional twin beside its zoned twin in one subsystem: the twin
/// is a conventional namespace, and znskit's `tcp:` initiator reaches both:
/// the zoned one, and the twin as a device without zones.
#[test]
fn serve_exports_a_conventional_twin_beside_a_zoned_device() {
    let nqn = "nqn.2026-11.io.znskit:twins";
    let server = common::Server::start(&[
        "--device",
        "emu:small",
        "--device",
        "emu:small-conv",
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--nqn",
        nqn,
    ]);
    let zoned = zns_device::open(&format!("tcp:{}/{nqn}/1", server.addr)).unwrap();
    assert!(zoned.info().zoned && zoned.info().zone_count == 256);
    let remote = zns_device::open(&format!("tcp:{}/{nqn}/2", server.addr)).unwrap();
    let twin = zns_device::open("emu:small-conv").unwrap();
    assert!(!remote.info().zoned);
    assert_eq!(remote.info().namespace_blocks, twin.info().namespace_blocks);
    drop((zoned, remote));
    let text = server.stop();
    let mib = (twin.info().namespace_blocks * 4096) as f64 / (1 << 20) as f64;
    assert!(text.contains("namespace 1: emu:small (256 zones"), "{text}");
    let line =
        format!("namespace 2: emu:small-conv (conventional, {mib:.1} MiB, 4096-byte blocks)");
    assert!(text.contains(&line), "{line} not in {text}");
    assert!(!text.contains("namespace 3"), "{text}");
    assert!(text.contains(" 0 ended by transport errors"), "{text}");
}

/// `zns log` through a served subsystem of a zoned device and its twin:
/// the OCP extended page adds up the bytes both media took.
#[test]
fn zns_log_shows_the_media_bytes_of_every_device_served() {
    let nqn = "nqn.2026-11.io.znskit:log";
    let server = common::Server::start(&[
        "--device",
        "emu:small",
        "--device",
        "emu:small-conv",
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--nqn",
        nqn,
    ]);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::write(&data, vec![0x5Au8; 2 * 4096]).unwrap();
    let (zoned, twin) =
        (format!("tcp:{}/{nqn}/1", server.addr), format!("tcp:{}/{nqn}/2", server.addr));
    let input = data.to_str().unwrap();
    common::ok(common::zns(&["-d", &zoned, "write", "--lba", "0", "--input", input]));
    common::ok(common::zns(&["-d", &twin, "write", "--lba", "100", "--input", input]));
    common::ok(common::zns(&["-d", &twin, "write", "--lba", "7", "--input", input]));
    let o = common::ok(common::zns(&["-d", &zoned, "log", "ocp-smart", "--json"]));
    let j: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(j["physical_media_units_written"], 6 * 4096, "{j}");
    assert_eq!(j["log_page_guid"], "0xAFD514C97C6F4F9CA4F2BFEA2810AFC5");
    // Each connection is a controller of its own: its SMART counts start
    // at zero, the media's do not.
    let o = common::ok(common::zns(&["-d", &zoned, "log", "smart", "--json"]));
    let j: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!((j["data_units_written"].as_u64(), j["temperature"].as_u64()), (Some(0), Some(313)));
    let o = common::ok(common::zns(&["-d", &twin, "log", "ocp-smart"]));
    assert!(
        o.stdout.contains("Physical media units written         : 24576 (0.0 MiB)"),
        "{}",
        o.stdout
    );
    // A device this process emulates has its own counters, none written.
    let o = common::ok(common::zns(&["-d", "emu:small-conv", "log", "ocp-smart", "--json"]));
    assert!(o.stdout.contains("\"physical_media_units_written\": 0"), "{}", o.stdout);
    server.stop();
}

/// The tenants of one eZNS configuration as namespaces of one subsystem:
/// one instance, so one base device (its late completions reported once),
/// a timed base on the real clock as `zns serve` serves timed devices,
/// each tenant's writes in its own logical zones, and the base's media
/// counted in the OCP extended SMART log.
#[test]
fn serve_exports_the_tenants_of_one_ezns_instance_over_one_base_device() {
    let dir = tempfile::tempdir().unwrap();
    let config = common::two_tenants(dir.path());
    let nqn = "nqn.2026-11.io.znskit:tenants";
    let uri = |t: &str| format!("ezns:config={},tenant={t}", config.display());
    let (a, b) = (uri("a"), uri("b"));
    let server = common::Server::start(&[
        "--device",
        &a,
        "--device",
        &b,
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--nqn",
        nqn,
    ]);
    let data = dir.path().join("data");
    std::fs::write(&data, vec![0xA5u8; 4096]).unwrap();
    let input = data.to_str().unwrap();
    let (ta, tb) = (format!("tcp:{}/{nqn}/1", server.addr), format!("tcp:{}/{nqn}/2", server.addr));
    common::ok(common::zns(&["-d", &ta, "write", "--lba", "0", "--input", input]));
    let o = common::ok(common::zns(&["-d", &tb, "report-zones", "--state", "empty"]));
    assert!(o.stdout.starts_with("nr_zones: 8"), "b is untouched: {}", o.stdout);
    let o = common::ok(common::zns(&["-d", &ta, "report-zones", "--state", "empty"]));
    assert!(o.stdout.starts_with("nr_zones: 7"), "{}", o.stdout);
    // The drive-wide media count is the base's, answered on the tenants'
    // controller: a's block and eZNS's journal, counted once.
    let o = common::ok(common::zns(&["-d", &ta, "log", "ocp-smart", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    let media = v["physical_media_units_written"].as_u64().unwrap();
    assert!((4096..64 * 4096).contains(&media), "{}", o.stdout);
    let text = server.stop();
    for (ns, t) in [(1, &a), (2, &b)] {
        let line = text
            .lines()
            .find(|l| l.contains(&format!("namespace {ns}: {t}")))
            .unwrap_or_else(|| panic!("no namespace {ns} in {text}"));
        assert!(line.contains("real"), "the base is timed: the real clock: {line}");
    }
    assert_eq!(text.matches("late completions").count(), 1, "one base device: {text}");
    // What eZNS wrote beyond the tenants' data, once for the instance.
    let ezns: Vec<&str> = text.lines().filter(|l| l.contains("journal blocks written")).collect();
    assert_eq!(ezns.len(), 1, "{text}");
    assert!(ezns[0].contains("eZNS (elastic) on emu:"), "{text}");
    assert!(ezns[0].contains("0 finishes sent (0 blocks padded)"), "{text}");
    let journal: u64 = ezns[0]
        .split(" journal blocks")
        .next()
        .and_then(|h| h.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{text}"));
    assert!(journal >= 1, "the journal's first block at least: {text}");
}
