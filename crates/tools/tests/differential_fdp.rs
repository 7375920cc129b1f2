//! The FDP mode of the differential tester (`zns-differential --fdp`)
//! against the emulator itself: an emulated FDP namespace agrees with a
//! reference built from its own description; a peer that drops placement
//! identifiers is caught by the comparison and by the placement check; the
//! reference takes QEMU's shape; the catalogued divergences match exactly
//! what they describe.

#[allow(dead_code)]
#[path = "../src/bin/zns-differential/compare.rs"]
mod compare;
#[allow(dead_code)]
#[path = "../src/bin/zns-differential/divergence.rs"]
mod divergence;
#[allow(dead_code)]
#[path = "../src/bin/zns-differential/fdp/mod.rs"]
mod fdp;
#[allow(dead_code)]
#[path = "../src/bin/zns-differential/generate.rs"]
mod generate;
#[allow(dead_code)]
#[path = "../src/bin/zns-differential/rng.rs"]
mod rng;
#[allow(dead_code)]
#[path = "../src/bin/zns-differential/run.rs"]
mod run;

use compare::Outcome;
use fdp::command::{FdpCmd, FdpOp, NsidChoice};
use fdp::compare::{differences, state, FdpState, Seen};
use fdp::divergence::{explain, repair, Case};
use fdp::reference::{self, FdpGeometry};
use fdp::run::{placement_check, FdpSide};
use fdp::target::{Queue, Reply, Target, Transfer};
use zns_spec::fdp::FdpStatsLog;
use zns_spec::{StatusCode, SubmissionEntry};

fn config(count: u64) -> run::Config {
    run::Config {
        seed: 0xfd9,
        first: 0,
        count,
        min_len: 20,
        max_len: 40,
        verbose: false,
        max_differences: 5,
    }
}

/// Runs the FDP comparison of `peer` with a reference built from its
/// description.
fn compare_with_reference(peer: &mut dyn Target, count: u64) -> (fdp::run::Tally, String) {
    let g = reference::describe(peer).expect("an FDP peer");
    let mut ours = reference::open(&g).expect("the reference");
    let mut p = FdpSide { state: state(peer, &g).unwrap(), target: peer };
    let mut o = FdpSide { state: state(&mut ours, &g).unwrap(), target: &mut ours };
    let mut out = Vec::new();
    let t = fdp::run::run(&mut p, &mut o, &g, &config(count), &mut out).unwrap();
    (t, String::from_utf8_lossy(&out).into_owned())
}

#[test]
fn an_emulated_fdp_namespace_agrees_with_its_reference() {
    let mut peer = fdp::open("emu:small-fdp").unwrap();
    let (t, text) = compare_with_reference(peer.as_mut(), 40);
    assert_eq!(t.unexplained, 0, "{text}");
    assert!(t.accepted.is_empty(), "{:?}", t.accepted);
    assert_eq!(t.sequences, 40);
    // The generator reaches what it is meant to reach.
    for kind in [
        "placed write",
        "write",
        "read",
        "I/O management receive",
        "I/O management send",
        "get log page",
        "get features 1Dh",
        "get features 1Eh",
    ] {
        assert!(t.by_kind.get(kind).is_some_and(|&n| n > 5), "{kind}: {:?}", t.by_kind);
    }
    for status in
        ["Success", "Invalid Field in Command", "LBA Out of Range", "Invalid Namespace or Format"]
    {
        assert!(t.by_status.contains_key(status), "{status} never seen: {:?}", t.by_status);
    }
    assert_eq!(t.placed.len(), 8, "every handle took placed writes: {:?}", t.placed);
    let g = reference::describe(peer.as_mut()).unwrap();
    let lines = placement_check(peer.as_mut(), &g, 7).unwrap();
    assert_eq!(lines.len(), 8);
}

/// A path that loses the placement: every write reaches the device
/// without its directive (DTYPE and DSPEC cleared), the bug the placement
/// check exists to catch.
struct DropsPlacement(Box<dyn Target>);

impl Target for DropsPlacement {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn nsid(&self) -> u32 {
        self.0.nsid()
    }
    fn max_transfer(&self) -> usize {
        self.0.max_transfer()
    }
    fn run(&mut self, queue: Queue, sqe: &SubmissionEntry, data: &Transfer) -> Reply {
        let mut e = *sqe;
        if queue == Queue::Io && e.opcode() == 0x01 {
            e.cdw12 &= !(0xF << 20);
            e.cdw13 = 0;
        }
        self.0.run(queue, &e, data)
    }
}

#[test]
fn a_path_that_drops_placement_identifiers_is_caught() {
    let mut peer = DropsPlacement(fdp::open("emu:small-fdp").unwrap());
    let (t, text) = compare_with_reference(&mut peer, 10);
    assert!(t.unexplained > 0, "{text}");
    assert!(text.contains("DIFF sequence") && text.contains("RUAMW"), "{text}");
    let g = reference::describe(&mut peer).unwrap();
    let e = placement_check(&mut peer, &g, 7).unwrap_err();
    assert!(e.contains("placed with identifier 1"), "{e}");
}

fn qemu_like() -> FdpGeometry {
    FdpGeometry {
        blocks: 16384,
        block_size: 4096,
        metadata_size: 0,
        endgid: 1,
        handles: 8,
        ruhs: 8,
        ru_blocks: 256,
        mdts_log2: 7,
        volatile_write_cache: true,
        max_blocks: 128,
        model: "QEMU NVMe Ctrl".into(),
    }
}

#[test]
fn the_reference_takes_the_shape_of_qemus_fdp_namespace() {
    let g = qemu_like();
    let text = reference::profile_toml(&g).unwrap();
    for line in ["segment_blocks = 256", "handles = 8", "block_size = 4096", "mdts_log2 = 7"] {
        assert!(text.contains(line), "{line} in\n{text}");
    }
    let mut ours = reference::open(&g).unwrap();
    let d = reference::describe(&mut ours).unwrap();
    assert_eq!((d.blocks, d.block_size, d.handles, d.ruhs, d.ru_blocks), (16384, 4096, 8, 8, 256));
    // Sizes that are no whole number of units come out exact too.
    let odd = FdpGeometry { blocks: 16383, ru_blocks: 96, handles: 3, ruhs: 3, ..g.clone() };
    assert_eq!(reference::ftl_for(&odd).unwrap().exposed_blocks(), 16383);
    // A reclaim unit far larger than the namespace needs more flash than
    // the emulator allows: a clear error, not a different namespace.
    let huge = FdpGeometry { ru_blocks: 24576, ..g };
    let e = reference::profile_toml(&huge).unwrap_err().to_string();
    assert!(e.contains("exposes exactly 16384 blocks"), "{e}");
}

// ---- The catalogue --------------------------------------------------------

fn st(ruamw: &[u64], mbmw: u128) -> FdpState {
    FdpState {
        ruamw: ruamw.iter().enumerate().map(|(h, &r)| (h as u16, h as u16, r)).collect(),
        stats: FdpStatsLog {
            host_bytes_written: 0,
            media_bytes_written: mbmw,
            media_bytes_erased: 0,
        },
    }
}

fn seen(outcome: Outcome, data: Option<Vec<u8>>, before: FdpState, after: FdpState) -> Seen {
    Seen { reply: Reply { outcome, data }, before, after }
}

fn failed(code: StatusCode) -> Outcome {
    Outcome::Failed(code.status())
}

fn small() -> FdpGeometry {
    FdpGeometry { blocks: 4096, handles: 4, ruhs: 4, ru_blocks: 16, ..qemu_like() }
}

fn explained(g: &FdpGeometry, cmd: &FdpCmd, peer: &Seen, ours: &Seen) -> Option<&'static str> {
    let differ = differences(peer, ours);
    assert!(!differ.is_empty(), "the case shows no difference");
    explain(&Case { g, cmd, peer, ours, differ: &differ }).map(|d| d.id)
}

fn cmd(op: FdpOp) -> FdpCmd {
    FdpCmd { op, fill: 3 }
}

#[test]
fn accounting_divergences_match_qemus_rule_exactly() {
    let g = small();
    let b = 4096u128;
    let before = st(&[10, 16, 16, 16], 0);
    // A write of 10 blocks through handle 0 fills its unit: the peer counts
    // the 10 twice in MBMW.
    let write = cmd(FdpOp::Write { lba: 0, blocks: 10, fua: false, placement: Some(0) });
    let mut after = st(&[16, 16, 16, 16], 0);
    after.stats.host_bytes_written = 10 * b;
    after.stats.media_bytes_written = 10 * b;
    let ours = seen(Outcome::Done(0), None, before.clone(), after.clone());
    let mut peer_after = after.clone();
    peer_after.stats.media_bytes_written = 20 * b;
    let peer = seen(Outcome::Done(0), None, before.clone(), peer_after.clone());
    assert_eq!(explained(&g, &write, &peer, &ours), Some("qemu-mbmw-counts-units-left"));
    // One block more than the rule: unexplained.
    let mut wrong = peer_after.clone();
    wrong.stats.media_bytes_written = 21 * b;
    let peer = seen(Outcome::Done(0), None, before.clone(), wrong);
    assert_eq!(explained(&g, &write, &peer, &ours), None);

    // An update of handles 0 and 1: 10 + 16 blocks counted by the peer.
    let up = cmd(FdpOp::IoMgmtSend { mo: 1, pids: vec![0, 1] });
    let after = st(&[16, 16, 16, 16], 0);
    let ours = seen(Outcome::Done(0), None, before.clone(), after.clone());
    let peer = seen(Outcome::Done(0), None, before.clone(), st(&[16, 16, 16, 16], 26 * b));
    assert_eq!(explained(&g, &up, &peer, &ours), Some("qemu-mbmw-counts-units-left"));

    // A write naming identifier 9 that fills handle 0's unit: the peer
    // keeps the unit and counts on from 10 (13 blocks: 10 - 3 = 7 left).
    let invalid = cmd(FdpOp::Write { lba: 0, blocks: 13, fua: false, placement: Some(9) });
    let ours = seen(Outcome::Done(0), None, before.clone(), st(&[13, 16, 16, 16], 0));
    let peer = seen(Outcome::Done(0), None, before.clone(), st(&[7, 16, 16, 16], 0));
    let c_differ = differences(&peer, &ours);
    let case = Case { g: &g, cmd: &invalid, peer: &peer, ours: &ours, differ: &c_differ };
    assert_eq!(explain(&case).map(|d| d.id), Some("qemu-invalid-pid-keeps-unit"));
    let fix = repair("qemu-invalid-pid-keeps-unit", &case).unwrap();
    assert_eq!(fix.len(), 2, "handle 0 updated on both sides");
    let peer = seen(Outcome::Done(0), None, before.clone(), st(&[8, 16, 16, 16], 0));
    assert_eq!(explained(&g, &invalid, &peer, &ours), None, "not QEMU's count");

    // An update of 2, then 7 (invalid): the peer updated handle 2 first.
    let stops = cmd(FdpOp::IoMgmtSend { mo: 1, pids: vec![2, 7] });
    let before = st(&[10, 16, 5, 16], 0);
    let ours = seen(failed(StatusCode::InvalidField), None, before.clone(), before.clone());
    let peer =
        seen(failed(StatusCode::InvalidField), None, before.clone(), st(&[10, 16, 16, 16], 5 * b));
    let c_differ = differences(&peer, &ours);
    let case = Case { g: &g, cmd: &stops, peer: &peer, ours: &ours, differ: &c_differ };
    assert_eq!(explain(&case).map(|d| d.id), Some("qemu-ruh-update-stops-at-invalid"));
    let fix = repair("qemu-ruh-update-stops-at-invalid", &case).unwrap();
    assert_eq!(fix[0].1.op, FdpOp::IoMgmtSend { mo: 1, pids: vec![2] });
    assert!(!fix[0].0, "on the reference");

    // Every handle at once: the peer refuses the count.
    let every = cmd(FdpOp::IoMgmtSend { mo: 1, pids: vec![0, 1, 2, 3] });
    let ours = seen(Outcome::Done(0), None, before.clone(), st(&[16, 16, 16, 16], 0));
    let peer = seen(failed(StatusCode::InvalidField), None, before.clone(), before.clone());
    assert_eq!(explained(&g, &every, &peer, &ours), Some("qemu-ruh-update-of-every-handle"));
    let three = cmd(FdpOp::IoMgmtSend { mo: 1, pids: vec![0, 1, 2] });
    assert_eq!(explained(&g, &three, &peer, &ours), None);
}

#[test]
fn command_divergences_match_exactly_what_they_describe() {
    let g = small();
    let s = st(&[16, 16, 16, 16], 0);
    let same = |o: Outcome, d: Option<Vec<u8>>| seen(o, d, s.clone(), s.clone());
    let field = failed(StatusCode::InvalidField);

    let mo0 = cmd(FdpOp::IoMgmtReceive { mo: 0, dwords: 4 });
    let peer = same(Outcome::Done(0), Some(vec![0; 16]));
    assert_eq!(
        explained(&g, &mo0, &peer, &same(field.clone(), None)),
        Some("io-management-operation-0")
    );
    let mo2 = cmd(FdpOp::IoMgmtReceive { mo: 2, dwords: 4 });
    assert_eq!(explained(&g, &mo2, &peer, &same(field.clone(), None)), None);

    // The statistics page is 64 bytes: offset 64 is its end.
    let at_end = cmd(FdpOp::GetLog { lid: 0x22, lsi: 1, lsp: 0, offset: 64, dwords: 4 });
    let zeros = same(Outcome::Done(0), Some(vec![0; 16]));
    assert_eq!(
        explained(&g, &at_end, &same(field.clone(), None), &zeros),
        Some("log-offset-at-end")
    );
    let past = cmd(FdpOp::GetLog { lid: 0x22, lsi: 1, lsp: 0, offset: 68, dwords: 4 });
    assert_eq!(explained(&g, &past, &same(field.clone(), None), &zeros), None);

    // The configurations page: MAXPIDS and NNSS differ, and FDPVWC.
    let cfg = cmd(FdpOp::GetLog { lid: 0x20, lsi: 1, lsp: 0, offset: 0, dwords: 24 });
    let mut ours_page = vec![0u8; 96];
    ours_page[18] = 0x90;
    ours_page[26] = 3;
    ours_page[28] = 1;
    let mut peer_page = ours_page.clone();
    (peer_page[18], peer_page[26], peer_page[28], peer_page[29]) = (0x80, 127, 0, 1);
    let peer = same(Outcome::Done(0), Some(peer_page.clone()));
    let ours = same(Outcome::Done(0), Some(ours_page.clone()));
    assert_eq!(explained(&g, &cfg, &peer, &ours), Some("qemu-fdp-configuration-fields"));
    let mut runs = peer_page.clone();
    runs[32] ^= 1; // RUNS differs: not explained
    assert_eq!(explained(&g, &cfg, &same(Outcome::Done(0), Some(runs)), &ours), None);
    let mut fewer = peer_page;
    fewer[26] = 2; // MAXPIDS below the namespace's handles
    assert_eq!(explained(&g, &cfg, &same(Outcome::Done(0), Some(fewer)), &ours), None);

    // Get Features 1Eh: six types against three, enabled bits alike.
    let ev = cmd(FdpOp::GetEventsFeature { nsid: NsidChoice::Own, handle: 0, event_types: 8 });
    let list = |types: &[u8]| {
        let mut v = vec![0u8; 16];
        for (i, t) in types.iter().enumerate() {
            v[2 * i] = *t;
        }
        v
    };
    let peer = same(Outcome::Done(6), Some(list(&[0, 1, 2, 3, 0x80, 0x81])));
    let ours = same(Outcome::Done(3), Some(list(&[0, 3, 0x80])));
    assert_eq!(explained(&g, &ev, &peer, &ours), Some("qemu-lists-every-event-type"));
    let mut on = list(&[0, 3, 0x80]);
    on[1] = 1; // the reference says 00h is enabled, the peer not
    assert_eq!(explained(&g, &ev, &peer, &same(Outcome::Done(3), Some(on))), None);

    let f = cmd(FdpOp::GetFdpFeature { endgid: 0x101 });
    let ok = same(Outcome::Done(1), None);
    assert_eq!(explained(&g, &f, &ok, &same(field.clone(), None)), Some("qemu-endgid-low-byte"));
    let f2 = cmd(FdpOp::GetFdpFeature { endgid: 2 });
    assert_eq!(explained(&g, &f2, &ok, &same(field.clone(), None)), None);

    let nsid = cmd(FdpOp::GetEventsFeature {
        nsid: NsidChoice::Other(u32::MAX),
        handle: 0,
        event_types: 4,
    });
    let bad_ns = same(failed(StatusCode::InvalidNamespaceOrFormat), None);
    assert_eq!(
        explained(&g, &nsid, &same(field.clone(), None), &bad_ns),
        Some("features-1eh-inactive-nsid")
    );
    let own = cmd(FdpOp::GetEventsFeature { nsid: NsidChoice::Own, handle: 0, event_types: 4 });
    assert_eq!(explained(&g, &own, &same(field, None), &bad_ns), None);
}
