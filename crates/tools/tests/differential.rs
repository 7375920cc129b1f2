//! The differential tester (`zns-differential`) against the emulator
//! itself: an emulated device and a reference built from its Identify data
//! agree on every command; a peer that gets one thing wrong is caught; the
//! catalogued divergences match exactly what they describe.

#[allow(dead_code)]
#[path = "../src/bin/zns-differential/compare.rs"]
mod compare;
#[allow(dead_code)]
#[path = "../src/bin/zns-differential/divergence.rs"]
mod divergence;
#[allow(dead_code)]
#[path = "../src/bin/zns-differential/generate.rs"]
mod generate;
#[allow(dead_code)]
#[path = "../src/bin/zns-differential/reference.rs"]
mod reference;
#[allow(dead_code)]
#[path = "../src/bin/zns-differential/rng.rs"]
mod rng;
#[allow(dead_code)]
#[path = "../src/bin/zns-differential/run.rs"]
mod run;

use zns_device::{
    Completion, Data, DeviceInfo, IoBuffer, Rejected, Result, StatusCode, Target, Zone, ZoneAction,
    ZoneAttributes, ZoneOp, ZoneQueue, ZoneState, ZoneType,
};

use compare::{Observed, Outcome, Snapshot};
use divergence::{explain, repair, Case};
use run::{Config, Side};

fn config(count: u64) -> Config {
    Config {
        seed: 0x5eed,
        first: 0,
        count,
        min_len: 20,
        max_len: 50,
        verbose: false,
        max_differences: 5,
    }
}

fn pair(peer_q: Box<dyn ZoneQueue>, info: &DeviceInfo) -> (Side, Side) {
    let reference = reference::open(info).expect("reference");
    let ours =
        Side { name: "emu".into(), q: reference.queue(4).unwrap(), busy: Default::default() };
    (Side { name: "peer".into(), q: peer_q, busy: Default::default() }, ours)
}

#[test]
fn an_emulated_device_agrees_with_its_reference() {
    for uri in ["emu:tiny", "emu:small", "emu:tiny,zrwa=16/4/2"] {
        let dev = zns_device::open(uri).unwrap();
        let (mut peer, mut ours) = pair(dev.queue(4).unwrap(), dev.info());
        let g = run::geometry(peer.q.as_ref(), ours.q.as_ref()).unwrap();
        let mut out = Vec::new();
        let t = run::run(&mut peer, &mut ours, &g, &config(150), &mut out).unwrap();
        let text = String::from_utf8_lossy(&out);
        assert_eq!(t.unexplained, 0, "{uri}:\n{text}");
        assert!(t.accepted.is_empty(), "{uri}: {:?}", t.accepted);
        assert_eq!(t.sequences, 150);
        if uri == "emu:tiny" {
            // The generator reaches the rules it is meant to reach.
            for status in [
                "Success",
                "Zone Invalid Write",
                "Zone Boundary Error",
                "Zone Is Full",
                "Too Many Active Zones",
                "Too Many Open Zones",
                "Invalid Zone State Transition",
                "LBA Out of Range",
                "Invalid Field in Command",
            ] {
                assert!(t.by_status.contains_key(status), "{status} never seen: {:?}", t.by_status);
            }
        }
        if uri.contains("zrwa") {
            // ZRWA opens, window writes and commits, and their refusals.
            for kind in ["zone open with ZRWA", "ZRWA commit"] {
                assert!(t.by_kind.get(kind).is_some_and(|&n| n > 20), "{kind}: {:?}", t.by_kind);
            }
            for status in ["ZRWA Resources Unavailable", "Invalid Zone Operation Request"] {
                assert!(t.by_status.contains_key(status), "{status} never seen: {:?}", t.by_status);
            }
        }
    }
}

#[test]
fn the_reference_profile_copies_the_geometry() {
    let dev = zns_device::open("emu:tiny").unwrap();
    let text = reference::profile_toml(dev.info()).unwrap();
    for line in ["zones = 16", "zone_size = 64", "zone_capacity = 48", "max_open = 4"] {
        assert!(text.contains(line), "{line} in\n{text}");
    }
    let r = reference::open(dev.info()).unwrap();
    let (a, b) = (dev.info(), r.info());
    assert_eq!((a.mdts_bytes, a.zasl_bytes), (b.mdts_bytes, b.zasl_bytes));
    assert_eq!(a.capabilities.extension_bytes, b.capabilities.extension_bytes);
    assert!(b.capabilities.zrwa.is_none());
    // Zone random write areas are copied too.
    let dev = zns_device::open("emu:small,zrwa=64/8/3").unwrap();
    let r = reference::open(dev.info()).unwrap();
    assert_eq!(r.info().capabilities.zrwa, dev.info().capabilities.zrwa);
    assert!(r.info().capabilities.zrwa.is_some());
}

/// A queue that reports Zone Append LBAs one block too far: the kind of
/// bug the differential test exists to catch.
struct OffByOne(Box<dyn ZoneQueue>);

impl ZoneQueue for OffByOne {
    fn info(&self) -> &DeviceInfo {
        self.0.info()
    }
    fn alloc(&self, len: usize) -> Result<IoBuffer> {
        self.0.alloc(len)
    }
    fn capacity(&self) -> usize {
        self.0.capacity()
    }
    fn outstanding(&self) -> usize {
        self.0.outstanding()
    }
    fn submit(&mut self, op: ZoneOp, b: Option<IoBuffer>, tag: u64) -> Result<(), Rejected> {
        self.0.submit(op, b, tag)
    }
    fn ring(&mut self) {
        self.0.ring()
    }
    fn poll(&mut self, max: usize, f: &mut dyn FnMut(Completion)) -> usize {
        self.0.poll(max, f)
    }
    fn execute(&mut self, op: &ZoneOp, data: Data<'_>) -> Result<u64> {
        let r = self.0.execute(op, data)?;
        Ok(if matches!(op, ZoneOp::Append { .. }) { r + 1 } else { r })
    }
}

#[test]
fn a_wrong_append_lba_is_an_unexplained_difference() {
    let dev = zns_device::open("emu:tiny").unwrap();
    let broken = Box::new(OffByOne(dev.queue(4).unwrap()));
    let (mut peer, mut ours) = pair(broken, dev.info());
    let g = run::geometry(peer.q.as_ref(), ours.q.as_ref()).unwrap();
    let mut out = Vec::new();
    let t = run::run(&mut peer, &mut ours, &g, &config(50), &mut out).unwrap();
    let text = String::from_utf8_lossy(&out);
    assert!(t.unexplained > 0);
    assert!(text.contains("DIFF sequence") && text.contains("zone append"), "{text}");
}

fn zone(index: u64, state: ZoneState, wp: u64) -> Zone {
    Zone {
        index,
        start: index * 64,
        size: 64,
        capacity: 48,
        write_pointer: state.has_write_pointer().then_some(index * 64 + wp),
        state,
        zone_type: ZoneType::SequentialWriteRequired,
        attributes: ZoneAttributes(0),
    }
}

fn snap(zones: Vec<Zone>) -> Snapshot {
    let n = zones.len();
    Snapshot { zones, ext: vec![Vec::new(); n] }
}

fn geometry() -> generate::Geometry {
    generate::Geometry {
        zones: 4,
        zone_size: 64,
        blocks: 256,
        block_size: 4096,
        max_blocks: 32,
        max_append_blocks: 16,
        ext: 0,
        max_open: Some(2),
        max_active: Some(3),
        write_zeroes: true,
        zrwa: Some((16, 4)),
    }
}

fn failed(code: StatusCode) -> Observed {
    Observed { outcome: Outcome::Failed(code.status()), data: None }
}

#[test]
fn divergences_match_exactly_what_they_describe() {
    use ZoneState::*;
    let g = geometry();
    // Two implicitly opened zones and a closed one: open and active
    // resources are all taken.
    let before = snap(vec![
        zone(0, ImplicitlyOpen, 4),
        zone(1, ImplicitlyOpen, 2),
        zone(2, Closed, 1),
        zone(3, Empty, 0),
    ]);
    let write = generate::Cmd {
        op: ZoneOp::Write { lba: 192, fua: false, placement: None },
        bytes: 4096,
        fill: 1,
    };
    let tmaz = failed(StatusCode::TooManyActiveZones);
    let mut closed = before.clone();
    closed.zones[0] = zone(0, Closed, 4);
    let case = |cmd, peer, peer_after, ours, ours_after| {
        explain(&Case { g: &g, cmd, before: &before, peer, peer_after, ours, ours_after })
            .map(|d| d.id)
    };
    assert_eq!(case(&write, &tmaz, &closed, &tmaz, &before), Some("close-before-resource-check"));
    // The reference catches up by closing that zone.
    let c = Case {
        g: &g,
        cmd: &write,
        before: &before,
        peer: &tmaz,
        peer_after: &closed,
        ours: &tmaz,
        ours_after: &before,
    };
    let fix = repair("close-before-resource-check", &c).unwrap();
    assert_eq!(fix.len(), 1);
    assert_eq!(fix[0].op, ZoneOp::Zone { action: ZoneAction::Close, target: Target::Zone(0) });
    assert!(repair("failed-extension-write", &c).is_none());
    // Any other change, or another outcome, is not that divergence.
    let mut wrong = before.clone();
    wrong.zones[2] = zone(2, ExplicitlyOpen, 1);
    assert_eq!(case(&write, &tmaz, &wrong, &tmaz, &before), None);
    let ok = Observed { outcome: Outcome::Done(0), data: None };
    assert_eq!(case(&write, &ok, &closed, &tmaz, &before), None);

    // Open with Select All: the peer cascades, the reference refuses.
    let open_all = generate::Cmd {
        op: ZoneOp::Zone { action: ZoneAction::Open, target: Target::All },
        bytes: 0,
        fill: 0,
    };
    let tmoz = failed(StatusCode::TooManyOpenZones);
    let mut cascade = before.clone();
    cascade.zones[0] = zone(0, ExplicitlyOpen, 4);
    cascade.zones[1] = zone(1, Closed, 2);
    cascade.zones[2] = zone(2, ExplicitlyOpen, 1);
    assert_eq!(case(&open_all, &tmoz, &cascade, &tmoz, &before), Some("open-all-one-by-one"));
    let c = Case {
        g: &g,
        cmd: &open_all,
        before: &before,
        peer: &tmoz,
        peer_after: &cascade,
        ours: &tmoz,
        ours_after: &before,
    };
    // Opens of implicitly opened zones first, then closes, then opens of
    // closed zones: the open resources never run out on the way.
    let fix: Vec<ZoneOp> =
        repair("open-all-one-by-one", &c).unwrap().into_iter().map(|c| c.op).collect();
    let zone_op = |action, z: u64| ZoneOp::Zone { action, target: Target::Zone(z * 64) };
    assert_eq!(
        fix,
        [zone_op(ZoneAction::Open, 0), zone_op(ZoneAction::Close, 1), zone_op(ZoneAction::Open, 2)]
    );
    let mut moved_wp = cascade.clone();
    moved_wp.zones[2] = zone(2, ExplicitlyOpen, 3);
    assert_eq!(case(&open_all, &tmoz, &moved_wp, &tmoz, &before), None);

    // A write across the end of a Full zone.
    let full = snap(vec![zone(0, Full, 48), zone(1, Empty, 0), zone(2, Empty, 0)]);
    let across = generate::Cmd {
        op: ZoneOp::Write { lba: 62, fua: false, placement: None },
        bytes: 4 * 4096,
        fill: 1,
    };
    let c = Case {
        g: &g,
        cmd: &across,
        before: &full,
        peer: &failed(StatusCode::ZoneIsFull),
        peer_after: &full,
        ours: &failed(StatusCode::ZoneBoundaryError),
        ours_after: &full,
    };
    assert_eq!(explain(&c).map(|d| d.id), Some("check-order"));
    let inside = generate::Cmd {
        op: ZoneOp::Write { lba: 40, fua: false, placement: None },
        bytes: 4 * 4096,
        fill: 1,
    };
    assert_eq!(explain(&Case { cmd: &inside, ..c }).map(|d| d.id), None);
}

#[test]
fn zrwa_divergences_match_exactly_what_they_describe() {
    use ZoneState::*;
    let g = geometry();
    let plain = |op| generate::Cmd { op, bytes: 0, fill: 0 };
    // Zone 1 has a ZRWA (window 16, unit 4) with its write pointer at 8.
    let mut with = zone(1, ExplicitlyOpen, 8);
    with.attributes = ZoneAttributes(ZoneAttributes::ZRWA_VALID);
    let before = snap(vec![zone(0, ImplicitlyOpen, 4), with, zone(2, Empty, 0), zone(3, Empty, 0)]);
    let case = |cmd: &generate::Cmd, peer: &Observed, peer_after: &Snapshot, ours: &Observed| {
        explain(&Case { g: &g, cmd, before: &before, peer, peer_after, ours, ours_after: &before })
            .map(|d| d.id)
    };
    let (field, boundary) =
        (failed(StatusCode::InvalidField), failed(StatusCode::ZoneBoundaryError));

    // Open with ZRWA Allocate of a Full zone: alignment first, or state first.
    let full = snap(vec![zone(0, Full, 48), zone(1, Empty, 0), zone(2, Empty, 0)]);
    let open_full = plain(ZoneOp::OpenZrwa { zslba: 0 });
    let c = Case {
        g: &g,
        cmd: &open_full,
        before: &full,
        peer: &failed(StatusCode::ZrwaResourcesUnavailable),
        peer_after: &full,
        ours: &failed(StatusCode::InvalidZoneStateTransition),
        ours_after: &full,
    };
    assert_eq!(explain(&c).map(|d| d.id), Some("zrwa-open-full-zone"));
    let open_empty = plain(ZoneOp::OpenZrwa { zslba: 64 });
    assert_eq!(explain(&Case { cmd: &open_empty, ..c }).map(|d| d.id), None);

    // Commit up to one past the window (8 + 16): the unit check against the window check.
    let one_past = plain(ZoneOp::CommitZrwa { lba: 64 + 8 + 16 });
    assert_eq!(case(&one_past, &field, &before, &boundary), Some("zrwa-commit-one-past"));
    let two_past = plain(ZoneOp::CommitZrwa { lba: 64 + 8 + 17 });
    assert_eq!(case(&two_past, &field, &before, &boundary), None);
    assert_eq!(case(&one_past, &boundary, &before, &field), None);

    // An append to a ZRWA zone that is also not aimed at a zone start.
    let append =
        generate::Cmd { op: ZoneOp::Append { zslba: 65, fua: false }, bytes: 4096, fill: 1 };
    let izor = failed(StatusCode::InvalidZoneOperationRequest);
    assert_eq!(case(&append, &izor, &before, &field), Some("zrwa-append-check-order"));
    let elsewhere =
        generate::Cmd { op: ZoneOp::Append { zslba: 129, fua: false }, bytes: 4096, fill: 1 };
    assert_eq!(case(&elsewhere, &izor, &before, &field), None);

    // Open with ZRWA Allocate of an Empty zone with the open resources
    // taken (2 of 2) and no ZRWA left: the peer closes zone 0 first.
    let open = plain(ZoneOp::OpenZrwa { zslba: 128 });
    let none_left = failed(StatusCode::ZrwaResourcesUnavailable);
    let mut closed = before.clone();
    closed.zones[0] = zone(0, Closed, 4);
    assert_eq!(
        case(&open, &none_left, &closed, &none_left),
        Some("zrwa-close-before-resource-check")
    );
    let c = Case {
        g: &g,
        cmd: &open,
        before: &before,
        peer: &none_left,
        peer_after: &closed,
        ours: &none_left,
        ours_after: &before,
    };
    let fix = repair("zrwa-close-before-resource-check", &c).unwrap();
    assert_eq!(fix[0].op, ZoneOp::Zone { action: ZoneAction::Close, target: Target::Zone(0) });
    let tmaz = failed(StatusCode::TooManyActiveZones);
    assert_eq!(case(&open, &none_left, &closed, &tmaz), None);
    let mut other = before.clone();
    other.zones[2] = zone(2, Closed, 0);
    assert_eq!(case(&open, &none_left, &other, &none_left), None);
}

#[test]
fn zrwa_sequences_need_alike_windows_not_alike_resource_counts() {
    let geometry = |a: &str, b: &str| {
        let (a, b) = (zns_device::open(a).unwrap(), zns_device::open(b).unwrap());
        run::geometry(a.queue(4).unwrap().as_ref(), b.queue(4).unwrap().as_ref()).unwrap().zrwa
    };
    assert_eq!(geometry("emu:small,zrwa=64/8/3", "emu:small,zrwa=64/8/2"), Some((64, 8)));
    assert_eq!(geometry("emu:small,zrwa=64/8/3", "emu:small,zrwa=32/8/3"), None);
    assert_eq!(geometry("emu:small,zrwa=64/8/3", "emu:small"), None);
}
