//! `zns characterize --trace` on `emu:zn540`: the trace file parses as a
//! JSON trace-event document (what ui.perfetto.dev and chrome://tracing
//! open) with named die, channel, queue and zone tracks whose slices are
//! consistent, and the report draws the run's die utilization and zone
//! states.

mod common;

use std::collections::{BTreeMap, HashMap};

use common::{ok, zns, Server};
use serde_json::Value;

/// `(pid, tid)` → name, and pid → process name, from the metadata events.
fn names(events: &[Value]) -> (HashMap<(u64, u64), String>, HashMap<u64, String>) {
    let (mut threads, mut procs) = (HashMap::new(), HashMap::new());
    for e in events.iter().filter(|e| e["ph"] == "M") {
        let pid = e["pid"].as_u64().expect("pid");
        let name = e["args"]["name"].as_str().expect("name").to_string();
        match e["name"].as_str() {
            Some("thread_name") => {
                threads.insert((pid, e["tid"].as_u64().expect("tid")), name);
            }
            Some("process_name") => {
                procs.insert(pid, name);
            }
            other => panic!("metadata {other:?}"),
        }
    }
    (threads, procs)
}

/// Checks slices on each thread of process `pid` never overlap; returns
/// how many there are per thread.
fn sequential_slices(events: &[Value], pid: u64) -> BTreeMap<u64, usize> {
    let mut by_tid: BTreeMap<u64, Vec<(f64, f64)>> = BTreeMap::new();
    for e in events.iter().filter(|e| e["ph"] == "X" && e["pid"] == pid) {
        let ts = e["ts"].as_f64().expect("ts");
        let dur = e["dur"].as_f64().expect("dur");
        assert!(dur >= 0.0, "{e}");
        by_tid.entry(e["tid"].as_u64().expect("tid")).or_default().push((ts, ts + dur));
    }
    for (tid, spans) in &mut by_tid {
        spans.sort_by(|a, b| a.partial_cmp(b).unwrap());
        for w in spans.windows(2) {
            assert!(w[0].1 <= w[1].0 + 1e-6, "pid {pid} tid {tid}: {:?} overlaps {:?}", w[0], w[1]);
        }
    }
    by_tid.into_iter().map(|(t, s)| (t, s.len())).collect()
}

#[test]
fn a_characterize_trace_is_a_valid_trace_with_die_and_channel_tracks() {
    let dir = tempfile::tempdir().unwrap();
    let (out, trace) = (dir.path().join("out"), dir.path().join("run.json"));
    let o = ok(zns(&[
        "--device",
        "emu:zn540",
        "characterize",
        "--suite",
        "quick",
        "--out",
        out.to_str().unwrap(),
        "--trace",
        trace.to_str().unwrap(),
    ]));
    assert!(o.stdout.contains("wrote trace"), "{}", o.stdout);
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    assert_eq!(doc["displayTimeUnit"], "ns");
    // The run makes millions of events; the trace keeps the last 500,000.
    assert_eq!(doc["otherData"]["events"], 500_000);
    assert!(doc["otherData"]["dropped"].as_u64().unwrap() > 1_000_000, "{}", doc["otherData"]);
    let events = doc["traceEvents"].as_array().expect("traceEvents");
    for e in events {
        let ph = e["ph"].as_str().expect("ph");
        assert!(["M", "X", "i", "b", "n", "e", "C"].contains(&ph), "{e}");
        assert!(e["pid"].is_u64(), "{e}");
        if ph != "M" {
            assert!(e["ts"].as_f64().is_some_and(|t| t >= 0.0), "{e}");
            assert!(e["name"].is_string(), "{e}");
        }
    }
    let (threads, procs) = names(events);
    let pid_of = |name: &str| *procs.iter().find(|(_, n)| *n == name).expect(name).0;
    let (dies, channels) = (pid_of("dies"), pid_of("channels"));
    pid_of("queue 1");
    pid_of("write buffer");
    pid_of("zones 0-63");
    // zn540: 8 channels of 4 dies; every die and channel worked.
    let die_slices = sequential_slices(events, dies);
    let channel_slices = sequential_slices(events, channels);
    assert_eq!((die_slices.len(), channel_slices.len()), (32, 8), "{die_slices:?}");
    for &die in die_slices.keys() {
        assert_eq!(threads[&(dies, die)], format!("die {die} (channel {})", die % 8));
    }
    for &ch in channel_slices.keys() {
        assert_eq!(threads[&(channels, ch)], format!("channel {ch}"));
    }
    let ops: Vec<&str> = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["pid"] == dies)
        .filter_map(|e| e["name"].as_str())
        .collect();
    for op in ["read", "program", "erase"] {
        assert!(ops.contains(&op), "no {op} on the dies");
    }
    // Commands: every begin has its end on the same track, not before it.
    let mut begun: HashMap<u64, (f64, &Value)> = HashMap::new();
    let mut done = 0;
    for e in events {
        match e["ph"].as_str() {
            Some("b") => {
                assert_eq!(e["cat"], "command");
                begun.insert(e["id"].as_u64().unwrap(), (e["ts"].as_f64().unwrap(), &e["pid"]));
            }
            Some("e") => {
                let (ts, pid) = begun.remove(&e["id"].as_u64().unwrap()).expect("begun");
                assert!(e["ts"].as_f64().unwrap() >= ts && *pid == e["pid"], "{e}");
                assert!(e["args"]["status"].is_string(), "{e}");
                done += 1;
            }
            _ => {}
        }
    }
    assert!(begun.is_empty() && done > 500, "{} open, {done} done", begun.len());
    // Zones: state slices on per-zone threads of the zone groups.
    let zone_slice = events.iter().find(|e| {
        e["ph"] == "X" && e["pid"].as_u64().is_some_and(|p| p >= 1000) && e["name"] != "Empty"
    });
    let z = zone_slice.expect("a zone state in the trace");
    let states = ["Implicitly Opened", "Explicitly Opened", "Closed", "Full"];
    assert!(states.contains(&z["name"].as_str().unwrap()), "{z}");
    let tid = z["tid"].as_u64().unwrap();
    assert_eq!(threads[&(z["pid"].as_u64().unwrap(), tid)], format!("zone {tid}"));

    // The report: the run's activity from the same events.
    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    let a = &results["activity"];
    assert_eq!(a["die_busy"].as_array().map(Vec::len), Some(32), "{a}");
    let busy: f64 = a["die_busy"][0].as_array().unwrap().iter().filter_map(Value::as_f64).sum();
    assert!(busy > 0.0, "die 0 never busy: {a}");
    assert!(a["zone_rows"][0]["states"].as_str().unwrap().contains('F'), "{a}");
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("Die utilization over time") && html.contains("Zone states over time"));

    // The trace drawn: 200 µs of its dies and channels from a die's
    // operation on.
    let op = events.iter().find(|e| e["ph"] == "X" && e["pid"] == dies).expect("a die slice");
    let die = &threads[&(dies, op["tid"].as_u64().unwrap())];
    let from = op["ts"].as_f64().unwrap();
    let svg = dir.path().join("trace.svg");
    let (from, to) = (from.to_string(), (from + 200.0).to_string());
    let o = ok(zns(&[
        "trace",
        "view",
        trace.to_str().unwrap(),
        "-o",
        svg.to_str().unwrap(),
        "--from-us",
        &from,
        "--to-us",
        &to,
        "--only",
        "die",
        "--only",
        "channel",
    ]));
    assert!(o.stdout.contains("drawn to"), "{}", o.stdout);
    let drawn = std::fs::read_to_string(&svg).unwrap();
    assert!(drawn.starts_with("<svg") && drawn.contains(die.as_str()), "{die} not drawn");
    assert!(!drawn.contains("zone 0") && drawn.matches("<rect").count() > 2, "no bars drawn");

    // Its figures: the commands counted from the same begin/end pairs,
    // the dies' operations, the slowest commands slowest first.
    let o = ok(zns(&["trace", "summary", trace.to_str().unwrap(), "--json", "--slowest", "4"]));
    let sum: Value = serde_json::from_str(&o.stdout).unwrap();
    let counted: u64 =
        sum["commands"].as_array().unwrap().iter().map(|c| c["count"].as_u64().unwrap()).sum();
    assert_eq!(counted, done, "{sum}");
    let kinds: Vec<&str> =
        sum["commands"].as_array().unwrap().iter().filter_map(|c| c["kind"].as_str()).collect();
    assert!(kinds.contains(&"read") || kinds.contains(&"write"), "{kinds:?}");
    for c in sum["commands"].as_array().unwrap() {
        let (p50, p99, max) = (
            c["p50_us"].as_f64().unwrap(),
            c["p99_us"].as_f64().unwrap(),
            c["max_us"].as_f64().unwrap(),
        );
        assert!(0.0 <= p50 && p50 <= p99 && p99 <= max, "{c}");
    }
    let flash: Vec<&str> =
        sum["flash"].as_array().unwrap().iter().filter_map(|f| f["op"].as_str()).collect();
    assert!(flash.contains(&"program") && flash.contains(&"read"), "{flash:?}");
    let slow: Vec<f64> = sum["slowest"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["latency_us"].as_f64().unwrap())
        .collect();
    assert!(slow.len() == 4 && slow.windows(2).all(|w| w[0] >= w[1]), "{slow:?}");
    let o = ok(zns(&["trace", "summary", trace.to_str().unwrap()]));
    assert!(
        o.stdout.contains("write buffer:") && o.stdout.contains("slowest commands:"),
        "{}",
        o.stdout
    );
}

#[test]
fn a_trace_needs_an_emulator_with_a_timing_model() {
    let o = zns(&["--device", "emu:tiny", "characterize", "--suite", "smoke", "--trace", "t.json"]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(o.stderr.contains("trace= needs the timing model"), "{}", o.stderr);
    let o = zns(&["--device", "zbd:/dev/nonexistent", "serve", "--trace", "t.json"]);
    assert!(o.stderr.contains("--trace takes one emu: device"), "{}", o.stderr);
    let o = zns(&["--device", "emu:zn540,trace_events=5", "identify"]);
    assert!(o.stderr.contains("trace_events= sizes a trace: it needs trace=FILE"), "{}", o.stderr);
}

#[test]
fn zns_serve_writes_its_trace_when_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("serve.json");
    let t = trace.to_str().unwrap();
    let args = ["--device", "emu:zn540", "serve", "--listen", "127.0.0.1:0", "--nqn", NQN];
    let server = Server::start(&[&args[..], &["--trace", t]].concat());
    // A write through the target: a command on the served device.
    let remote = format!("tcp:{}/{NQN}/1", server.addr);
    let data = dir.path().join("data");
    std::fs::write(&data, vec![0x5a; 8 * 4096]).unwrap();
    ok(zns(&["--device", &remote, "write", "--lba", "0", "--input", data.to_str().unwrap()]));
    let stdout = server.stop();
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&trace).unwrap())
        .unwrap_or_else(|e| panic!("{e}: {stdout}"));
    let events = doc["traceEvents"].as_array().expect("events");
    let write = events.iter().find(|e| e["ph"] == "b" && e["name"] == "write");
    assert!(write.is_some_and(|w| w["args"]["blocks"] == 8), "no write of 8 blocks: {doc}");
}

/// `zns serve --trace` on the tenants of an eZNS configuration traces
/// their base device: its commands, and eZNS's stripe groups on the
/// tenants' tracks.
#[test]
fn zns_serve_traces_the_base_device_of_ezns_tenants_with_their_stripes() {
    let dir = tempfile::tempdir().unwrap();
    let config = common::two_tenants(dir.path());
    let trace = dir.path().join("ezns.json");
    let uri = |t: &str| format!("ezns:config={},tenant={t}", config.display());
    let nqn = "nqn.2026-11.io.znskit:ezns-trace";
    let server = Server::start(&[
        "--device",
        &uri("a"),
        "--device",
        &uri("b"),
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--nqn",
        nqn,
        "--trace",
        trace.to_str().unwrap(),
    ]);
    let data = dir.path().join("data");
    std::fs::write(&data, vec![0x5a; 4096]).unwrap();
    let input = data.to_str().unwrap();
    // Tenant b (namespace 2) writes its logical zone 1.
    let remote = format!("tcp:{}/{nqn}/2", server.addr);
    let o = ok(zns(&["--device", &remote, "report-zones", "--format", "json"]));
    let zones: Value = serde_json::from_str(&o.stdout).unwrap();
    let zslba = zones["zones"][1]["slba"].as_u64().unwrap_or_else(|| panic!("{}", o.stdout));
    ok(zns(&["--device", &remote, "write", "--lba", &zslba.to_string(), "--input", input]));
    let stdout = server.stop();
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&trace).unwrap())
        .unwrap_or_else(|e| panic!("{e}: {stdout}"));
    let events = doc["traceEvents"].as_array().expect("events");
    let (threads, procs) = names(events);
    let pid = *procs.iter().find(|(_, n)| *n == "eZNS tenants").expect("eZNS tenants").0;
    assert_eq!(threads[&(pid, 1)], "tenant b");
    let stripe = events
        .iter()
        .find(|e| e["ph"] == "i" && e["pid"] == pid && e["name"] == "stripe")
        .unwrap_or_else(|| panic!("no stripe mark: {doc}"));
    assert_eq!((stripe["tid"].as_u64(), stripe["args"]["lzone"].as_u64()), (Some(1), Some(1)));
    let zones = stripe["args"]["zones"].as_array().expect("zones");
    assert!(!zones.is_empty() && zones.len() <= 4, "{stripe}");
    assert_eq!(stripe["args"]["budgets"][0], "b");
    // The device's side of the write: a command and its flash work.
    assert!(events.iter().any(|e| e["ph"] == "b" && e["name"] == "write"), "{doc}");
    let o = zns(&["--device", &uri("a"), "--device", "emu:zn540", "serve", "--trace", "t.json"]);
    assert!(o.stderr.contains("plus the base device of 1 eZNS configuration"), "{}", o.stderr);
}

const NQN: &str = "nqn.2026-11.io.znskit:trace";
