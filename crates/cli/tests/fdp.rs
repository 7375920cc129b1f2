//! `zns fdp`, `zns write --placement` and the FDP fields of `zns
//! identify`, as a user runs them: on `emu:small-fdp` (a fresh device each
//! run), on a device without FDP (clear errors), and on an FDP device
//! served by `zns serve`, whose state lasts from one command to the next.

mod common;

use common::{ok, zns, Server};
use serde_json::Value;

const FDP: &str = "emu:small-fdp";
const NQN: &str = "nqn.2026-11.io.znskit:fdp-test";

fn json(o: common::Out) -> Value {
    serde_json::from_str(&ok(o).stdout).expect("JSON")
}

/// A file of `blocks` 4 KiB blocks to write.
fn data_file(dir: &tempfile::TempDir, blocks: usize) -> String {
    let path = dir.path().join(format!("data-{blocks}"));
    std::fs::write(&path, vec![0x5Au8; blocks * 4096]).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn fdp_status_update_write_and_identify_on_an_fdp_device() {
    let t = ok(zns(&["--device", FDP, "fdp", "status"])).stdout;
    assert!(t.contains("reclaim unit handles         : 8 (8 initially isolated)"), "{t}");
    assert!(t.contains("reclaim unit                 : 3.75 MiB (960 blocks)"), "{t}");
    assert!(t.contains("enabled                      : yes (configuration 0)"), "{t}");
    assert_eq!(t.matches("960 blocks (100.0 % of the unit)").count(), 8, "{t}");
    assert!(t.contains("write amplification          : - (nothing written)"), "{t}");
    let j = json(zns(&["--device", FDP, "fdp", "status", "--json"]));
    assert_eq!(j["fdp"]["endurance_group"], 1);
    assert_eq!(j["fdp"]["handles"].as_array().unwrap().len(), 8);
    assert_eq!(j["fdp"]["handles"][7], "initially_isolated");
    assert_eq!(j["fdp"]["reclaim_unit_bytes"], 960 * 4096);
    let handles = j["handles"].as_array().unwrap();
    assert_eq!(handles.len(), 8);
    assert!(handles.iter().all(|h| h["available_blocks"] == 960), "{j}");
    assert_eq!(handles[5]["placement_handle"], 5);
    assert!(j["statistics"]["waf"].is_null());

    let t = ok(zns(&["--device", FDP, "fdp", "update", "--handle", "2", "--handle", "5"])).stdout;
    assert_eq!(
        t,
        "placement handle 2: a new reclaim unit, 960 blocks available\n\
         placement handle 5: a new reclaim unit, 960 blocks available\n"
    );
    let e = zns(&["--device", FDP, "fdp", "update", "--handle", "8"]);
    assert_eq!(e.code, 1);
    let want = "zns: --handle 8: the namespace has 8 placement handles (0..=7)\n";
    assert_eq!(e.stderr, want);

    let dir = tempfile::tempdir().unwrap();
    let input = data_file(&dir, 3);
    let w = ["--device", FDP, "write", "--lba", "0x10", "--input", &input, "--placement", "3"];
    let t = ok(zns(&w)).stdout;
    assert_eq!(t, "wrote 3 blocks at LBA 0x10 through placement handle 3\n");
    let w = ["--device", FDP, "write", "--lba", "0", "--input", &input, "--placement", "8"];
    let e = zns(&w);
    assert_eq!(e.code, 1);
    assert!(
        e.stderr.contains("--placement 8: the namespace has 8 placement handles"),
        "{}",
        e.stderr
    );

    let t = ok(zns(&["--device", FDP, "identify"])).stdout;
    assert!(t.contains("ctratt    : 0x80010 (endurance groups, flexible data placement)"), "{t}");
    assert!(t.contains("endgidmax : 1") && t.contains("endgid    : 1"), "{t}");
    assert!(t.contains("Flexible Data Placement:\nendurance group              : 1"), "{t}");
    let j = json(zns(&["--device", FDP, "identify", "--json"]));
    assert_eq!(j["fdp"]["enabled"], true);
    assert_eq!(j["identify"]["namespace"]["endgid"], 1);
    assert_eq!(j["identify"]["controller"]["endgidmax"], 1);
}

#[test]
fn fdp_commands_are_refused_clearly_without_fdp() {
    for args in
        [&["fdp", "status"][..], &["fdp", "update", "--handle", "0"], &["fdp", "events", "--host"]]
    {
        let mut all = vec!["--device", "emu:small"];
        all.extend_from_slice(args);
        let o = zns(&all);
        assert_eq!(o.code, 1, "{args:?}: {}", o.stdout);
        assert!(
            o.stderr.contains("emu:small: namespace 1 has no Flexible Data Placement"),
            "{args:?}: {}",
            o.stderr
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let input = data_file(&dir, 1);
    let o =
        zns(&["--device", "emu:small", "write", "--lba", "0", "-i", &input, "--placement", "1"]);
    assert_eq!(o.code, 1);
    assert!(
        o.stderr.contains("--placement 1: emu:small namespace 1 has no Flexible Data Placement")
            && o.stderr.contains("nothing was written"),
        "{}",
        o.stderr
    );
    let t = ok(zns(&["--device", "emu:small", "identify"])).stdout;
    assert!(!t.contains("Flexible Data Placement") && t.contains("endgid    : 0"), "{t}");
    assert!(json(zns(&["--device", "emu:small", "identify", "--json"]))["fdp"].is_null());
}

#[test]
fn a_served_fdp_device_keeps_its_handles_from_one_command_to_the_next() {
    let server =
        Server::start(&["--device", FDP, "serve", "--listen", "127.0.0.1:0", "--nqn", NQN]);
    let uri = format!("tcp:{}/{NQN}/1", server.addr);
    let run = |args: &[&str]| {
        let mut all = vec!["--device", uri.as_str()];
        all.extend_from_slice(args);
        ok(zns(&all)).stdout
    };
    let dir = tempfile::tempdir().unwrap();
    let input = data_file(&dir, 8);
    run(&["fdp", "events", "--enable"]);
    run(&["write", "--lba", "0", "--input", &input, "--placement", "3"]);
    let j: Value = serde_json::from_str(&run(&["fdp", "status", "--json"])).unwrap();
    let avail: Vec<u64> = j["handles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["available_blocks"].as_u64().unwrap())
        .collect();
    assert_eq!(avail, [960, 960, 960, 952, 960, 960, 960, 960]);
    // Bytes with the 16 bytes of metadata a block carries; nothing moved.
    assert_eq!(j["statistics"]["host_bytes_written"], 8 * 4112);
    assert_eq!(j["statistics"]["waf"], 1.0);
    // The endurance group's page through the target: 8 blocks written,
    // one data unit (512,000 bytes) rounded up, as on the media.
    let j: Value = serde_json::from_str(&run(&["log", "endurance", "--json"])).unwrap();
    assert_eq!(
        (j["data_units_written"].as_u64(), j["media_units_written"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(j["write_amplification"], 1.0);
    assert_eq!(j["total_end_grp_capacity"], 1006632960u64);
    let t = run(&["log", "endurance"]);
    assert!(t.contains("write_amplification                  : 1.000"), "{t}");
    let t = run(&["fdp", "update", "--handle", "3"]);
    assert_eq!(t, "placement handle 3: a new reclaim unit, 960 blocks available\n");
    // Leaving a partly written unit is a host event.
    let t = run(&["fdp", "events", "--host"]);
    assert!(t.starts_with("Host events (log page 23h): 1\n"), "{t}");
    assert!(t.contains("reclaim unit not fully written") && t.contains("pid 3, nsid 1"), "{t}");
    let j: Value = serde_json::from_str(&run(&["fdp", "events", "--json"])).unwrap();
    assert_eq!(j["host"][0]["type"], 0);
    assert_eq!(j["controller"].as_array().unwrap().len(), 0);
    server.stop();
}
