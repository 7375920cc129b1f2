//! The eZNS experiments at smoke scale on the small-zone profile: every
//! experiment produces its points, the figures are sane, eZNS lends
//! spares where static striping cannot, and bad devices are refused with
//! a clear error.

use std::sync::Arc;

use zns_bench::characterize::NoProgress;
use zns_bench::ezns::{self, EznsBenchError, EznsResults, Options, Scale};
use zns_device::{ZoneAction, ZonedDevice};

const DEVICE: &str = "emu:small-zone,media=null,zones=2048";

fn smoke() -> Options {
    Options { scale: Scale::Smoke, seed: 7, force: false }
}

fn run(uri: &str) -> Result<EznsResults, EznsBenchError> {
    ezns::run(zns_device::open(uri).expect("device"), &smoke(), &NoProgress)
}

fn check_balloon(r: &EznsResults) {
    let b = &r.balloon;
    assert_eq!(b.runs.iter().map(|x| x.mode.as_str()).collect::<Vec<_>>(), ["static", "elastic"]);
    for run in &b.runs {
        // Three phases of 24 ms sampled every 2 ms.
        assert!(run.samples.len() >= 30, "{} samples", run.samples.len());
        assert_eq!(run.phases.len(), 3);
        // The idle tenants' last writes drain early in the phase; by its
        // end they write nothing.
        let end = 2.0 * b.phase_ms;
        let last: Vec<_> = run.samples.iter().filter(|s| s.t_ms <= end).rev().take(2).collect();
        assert!(last.iter().all(|s| s.others_mib_s == 0.0), "{}: {last:?}", run.mode);
        assert!(run.phases[1].writer_mib_s > 0.0 && run.phases[0].others_mib_s > 0.0);
        assert!(run.phases[2].others_mib_s > 0.0, "{}: the others never came back", run.mode);
    }
    let (st, el) = (&b.runs[0], &b.runs[1]);
    assert_eq!(st.lent_most, 0, "static striping lent spares");
    assert!(st.samples.iter().all(|s| s.writer_width == st.samples[0].writer_width));
    assert!(el.lent_most > 0, "eZNS lent no spare to the lone writer");
    assert!(
        el.phases[1].lent_spares > 0.0 && el.phases[1].writer_width > st.phases[1].writer_width
    );
}

fn check_isolation(r: &EznsResults) {
    assert_eq!(r.isolation.len(), 6);
    for p in &r.isolation {
        assert!(p.reads > 100, "{p:?}");
        assert!(p.p50_us > 0.0 && p.p50_us <= p.p99_us && p.p99_us <= p.p99_9_us, "{p:?}");
        assert_eq!(p.write_mib_s > 0.0, p.writers > 0, "{p:?}");
    }
}

fn check_utilization(r: &EznsResults) {
    assert_eq!(r.utilization.len(), 8);
    let bw = |m: &str, n: u32| {
        r.utilization.iter().find(|p| p.mode == m && p.tenants == n).expect("point").device_mib_s
    };
    // Static striping scales with the tenants writing; one eZNS tenant
    // with idle neighbours stripes wider than its static width.
    assert!(bw("static", 4) > 3.0 * bw("static", 1), "{:?}", r.utilization);
    assert!(bw("elastic", 1) > 1.5 * bw("static", 1), "{:?}", r.utilization);
}

fn check_kv(r: &EznsResults) {
    assert_eq!(r.kv.len(), 8);
    for p in &r.kv {
        assert!(p.kops_s > 0.0 && p.p99_9_us >= p.p99_us, "{p:?}");
        assert!(p.read_p99_9_us > 0.0, "{p:?}");
        assert_eq!(p.mix == "C", p.update_p99_9_us == 0.0, "{p:?}");
    }
    assert!(r.kv_mean.is_some());
}

#[test]
fn smoke_run_measures_all_four_experiments() {
    let r = run(DEVICE).expect("smoke run");
    assert_eq!(r.device.clock, "virtual");
    assert_eq!(r.device.dies, 128);
    check_balloon(&r);
    check_isolation(&r);
    check_utilization(&r);
    check_kv(&r);
    assert!(r.summary.iter().any(|c| c.figure == "kv/F/p99_9_us"));
    let dir = tempfile::tempdir().unwrap();
    let paths = ezns::write_outputs(&r, dir.path()).unwrap();
    assert_eq!(paths.len(), 7);
    for p in &paths[1..] {
        let svg = std::fs::read_to_string(p).unwrap();
        assert!(svg.contains("<svg") && !svg.contains("no data"), "{}", p.display());
    }
    let back = ezns::read_results(&paths[0]).unwrap();
    let json = serde_json::to_value(&back).unwrap();
    for k in ["balloon", "isolation", "utilization", "kv", "summary", "scaling"] {
        assert!(json.get(k).is_some(), "ezns.json has no {k}");
    }
    assert_eq!(back.isolation.len(), r.isolation.len());
}

#[test]
fn bad_devices_are_refused() {
    let e = run("emu:small-conv,media=null").unwrap_err().to_string();
    assert!(e.contains("no zones"), "{e}");
    let e = run("emu:small-zone,media=null,zones=300").unwrap_err().to_string();
    assert!(e.contains("need at least") && e.contains("zones="), "{e}");
    let dev: Arc<dyn ZonedDevice> = zns_device::open(DEVICE).unwrap();
    let mut q = dev.queue(2).unwrap();
    q.write(0, &dev.alloc(4096).unwrap()).unwrap();
    drop(q);
    let e = ezns::run(Arc::clone(&dev), &smoke(), &NoProgress).unwrap_err().to_string();
    assert!(e.contains("not empty") && e.contains("--force"), "{e}");
    let mut q = dev.queue(2).unwrap();
    q.zone_action(ZoneAction::Reset, zns_device::Target::All).unwrap();
}

#[test]
fn scale_names_parse() {
    assert_eq!("smoke".parse::<Scale>().unwrap(), Scale::Smoke);
    assert_eq!("full".parse::<Scale>().unwrap(), Scale::Full);
    assert!("huge".parse::<Scale>().unwrap_err().contains("smoke, full"));
}
