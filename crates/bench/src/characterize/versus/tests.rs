//! The comparison on small untimed twins (`small` and `small-conv`, 240
//! MiB of flash each, on the real clock): what it measures, what it
//! writes, and what it refuses.

use std::sync::Arc;

use zns_device::ZonedDevice;

use super::*;
use crate::characterize::progress::NoProgress;
use side::ConventionalSide;

const ZNS: &str = "emu:small,zones=64,media=null";
const CONV: &str = "emu:small-conv,zones=64,media=null";

fn open(uri: &str) -> Arc<dyn ZonedDevice> {
    zns_device::open(uri).unwrap()
}

/// A run of a few hundred milliseconds.
fn smoke() -> CompareOptions {
    CompareOptions {
        request_bytes: 64 << 10,
        precondition: 1.0,
        sustained_s: 0.3,
        bin_s: 0.05,
        settle_s: 0.0,
        idle_reads: 200,
        read_s: 0.05,
        reads_per_write: 4,
        ftl_op: None,
        seed: 3,
        force: false,
    }
}

fn invalid(r: Result<impl std::fmt::Debug, CharacterizeError>) -> String {
    match r {
        Err(CharacterizeError::Invalid(m)) => m,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn a_run_measures_both_sides_and_writes_its_files() {
    // The conventional device first: the suite sorts them.
    let r = run(vec![open(CONV), open(ZNS)], &smoke(), &NoProgress).unwrap();
    assert_eq!((r.zns.role.as_str(), r.conventional.role.as_str()), ("zns", "conventional"));
    assert_eq!(r.zns.device.uri, ZNS);
    assert!(
        (r.config.ftl_op - 0.07).abs() < 1e-3,
        "the twin's over-provisioning: {}",
        r.config.ftl_op
    );
    for s in [&r.zns, &r.conventional] {
        let blocks = s.capacity.usable_blocks;
        assert_eq!(s.fill.bytes, blocks / 16 * (64 << 10), "{}: every slot once", s.role);
        assert!(s.precondition.bytes >= blocks * 4096, "{}", s.role);
        let sus = &s.sustained;
        assert!(sus.mib_s.len() > sus.first_measured_bin, "{}: no measured bin", s.role);
        assert!(sus.mib_s.iter().all(|x| x.is_finite() && *x >= 0.0));
        assert!(sus.mean_mib_s > 0.0 && sus.min_mib_s <= sus.median_mib_s);
        assert_eq!(sus.waf.len(), sus.mib_s.len());
        assert_eq!(sus.waf_running.len(), sus.mib_s.len());
        let last = sus.waf_running.last().copied().flatten().unwrap();
        assert!(last >= 1.0, "{}: {last}", s.role);
        let c = sus.counters.expect("both sides count their writes");
        assert!(c.host_blocks > 0 && c.data_blocks >= c.host_blocks, "{}: {c:?}", s.role);
        assert!(c.waf_total >= c.waf);
        assert_eq!(s.reads.idle.count, 200);
        assert!(s.reads.under_writes.count >= 4, "{}", s.role);
        assert!(s.reads.writes.bytes > 0);
        let raw = s.capacity.raw_blocks.unwrap();
        assert!(blocks < raw, "{}: {blocks} usable of {raw} raw", s.role);
    }
    // After a capacity of random overwrites at 7 % spare, the firmware
    // moves blocks for every block written.
    let conv = r.conventional.sustained.counters.unwrap();
    assert!(conv.waf > 1.5, "conventional WAF {}", conv.waf);
    assert_eq!(conv.meta_blocks, 0);
    let zns = r.zns.sustained.counters.unwrap();
    assert!(zns.meta_blocks > 0, "the host FTL writes its log");
    // The twins have the same flash; the firmware's namespace is its
    // flash less the spare.
    assert_eq!(r.zns.capacity.raw_blocks, r.conventional.capacity.raw_blocks);
    let per = r.conventional.capacity.usable_per_raw.unwrap();
    assert!((per - 1.0 / 1.07).abs() < 0.01, "{per}");

    let dir = tempfile::tempdir().unwrap();
    let paths = write_outputs(&r, dir.path()).unwrap();
    assert_eq!(paths.len(), 8);
    let text = std::fs::read_to_string(dir.path().join("results.json")).unwrap();
    let back = CompareResults::from_json(&text).unwrap();
    assert_eq!(back.conventional.sustained.mib_s, r.conventional.sustained.mib_s);
    let charts = ["throughput.svg", "throughput-zoom.svg", "waf-over-time.svg", "waf.svg"];
    for name in charts.iter().chain(&["read-latency.svg"]) {
        let svg = std::fs::read_to_string(dir.path().join(name)).unwrap();
        assert!(svg.starts_with("<svg"), "{name}");
        assert!(svg.contains("ZNS + zns-ftl") && svg.contains("conventional"), "{name}");
        assert!(!svg.contains("no data"), "{name}");
    }
    let html = std::fs::read_to_string(dir.path().join("report.html")).unwrap();
    assert_eq!(html.matches("<svg").count(), 6);
    assert!(html.contains(ZNS) && html.contains(CONV));
    assert!(to_text(&r).contains("WAF (data)"));
}

#[test]
fn the_pair_must_be_one_zns_and_one_conventional_device() {
    let m = invalid(assign(vec![open(ZNS)]));
    assert!(m.contains("two devices") && m.contains("not 1"), "{m}");
    let m = invalid(assign(vec![open(ZNS), open("emu:tiny")]));
    assert!(m.contains("both are zoned"), "{m}");
    let m = invalid(assign(vec![open(CONV), open(CONV)]));
    assert!(m.contains("neither is zoned"), "{m}");
    let m = invalid(assign(vec![open(ZNS), open(CONV), open(ZNS)]));
    assert!(m.contains("not 3"), "{m}");
    // zn540-conv runs on the virtual clock, small on the real one.
    let m = invalid(assign(vec![open(ZNS), open("emu:zn540-conv,zones=1,media=null")]));
    assert!(m.contains("do not compare"), "{m}");
    let p = assign(vec![open(CONV), open(ZNS)]).unwrap();
    assert_eq!((p.zns.info().uri.as_str(), p.conventional.info().uri.as_str()), (ZNS, CONV));
}

#[test]
fn bad_options_are_refused_before_anything_is_written() {
    let bad = [
        CompareOptions { request_bytes: 6000, ..smoke() },
        CompareOptions { bin_s: 1.0, ..smoke() },
        CompareOptions { read_s: 0.0, ..smoke() },
        CompareOptions { reads_per_write: 0, ..smoke() },
        CompareOptions { ftl_op: Some(-0.1), ..smoke() },
        CompareOptions { precondition: f64::NAN, ..smoke() },
    ];
    for opts in bad {
        let m = invalid(run(vec![open(ZNS), open(CONV)], &opts, &NoProgress));
        assert!(!m.is_empty());
    }
}

#[test]
fn a_zns_device_holding_data_needs_force() {
    let zns = open(ZNS);
    let mut q = zns.queue(1).unwrap();
    let b = zns.alloc(4096).unwrap();
    q.write(0, &b).unwrap();
    let opts = CompareOptions { sustained_s: 0.05, bin_s: 0.05, precondition: 0.1, ..smoke() };
    match run(vec![Arc::clone(&zns), open(CONV)], &opts, &NoProgress) {
        Err(CharacterizeError::NotEmpty(1)) => {}
        other => panic!("{other:?}"),
    }
    let forced = CompareOptions { force: true, ..opts };
    run(vec![zns, open(CONV)], &forced, &NoProgress).unwrap();
}

/// The conventional side on the timed twin (one zone's worth of flash, 89
/// segments), on the virtual clock: garbage collection takes the dies'
/// time, and the same seed gives the same figures.
#[test]
fn on_the_virtual_clock_the_conventional_side_repeats_itself() {
    let plan = CompareOptions {
        request_bytes: 1 << 20,
        precondition: 0.5,
        sustained_s: 0.5,
        bin_s: 0.1,
        ..smoke()
    }
    .plan(4096);
    let once = || {
        let side = ConventionalSide::new(open("emu:zn540-conv,zones=1,media=null"));
        assert_eq!(side.device().clock_name(), "virtual");
        let fill = workload::fill(&side, &plan, &NoProgress).unwrap();
        let (_, sus) = workload::random_writes(&side, &plan, &NoProgress, &|| {}).unwrap();
        (fill, sus)
    };
    let (fill, a) = once();
    let (_, b) = once();
    assert_eq!(a.mib_s, b.mib_s, "the virtual clock repeats the run");
    assert_eq!(a.phase.device_ns, b.phase.device_ns);
    let c = a.counters.unwrap();
    assert!(c.waf > 1.5, "{c:?}");
    assert!(a.mean_mib_s < 0.5 * fill.mib_s, "{} MiB/s against {} fresh", a.mean_mib_s, fill.mib_s);
}
