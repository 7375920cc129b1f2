//! Trace events of a known command sequence, checked event by event: the
//! commands' phases, the flash operations they caused (and the planes
//! each covers), the channel transfers, and a read behind a program on
//! the same die waiting for it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use zns_emulator::clock::ClockMode;
use zns_emulator::harness::Harness;
use zns_emulator::host::ProcessMemory;
use zns_emulator::profile::Profile;
use zns_emulator::timing::calibration::Bench;
use zns_emulator::trace::{CommandId, CommandKind, FlashOp, TraceEvent, TraceSink};
use zns_emulator::{Emulator, MediaChoice};
use zns_spec::{ZoneSendAction, ZoneState};

/// How long one completion may take before the test fails instead of
/// hanging.
const PATIENCE: Duration = Duration::from_secs(60);

/// Keeps every event.
#[derive(Default)]
struct Recorder(Mutex<Vec<TraceEvent>>);

impl TraceSink for Recorder {
    fn event(&self, event: &TraceEvent) {
        self.0.lock().push(*event);
    }
}

/// A zn540 without data on the virtual clock; with `suspend`, programs
/// may be suspended for reads as the profile says, else never.
fn harness(suspend: bool) -> Harness {
    let mut p = Profile::by_name("zn540").unwrap();
    if !suspend {
        p.timing.as_mut().unwrap().suspend_limit = 0;
    }
    let memory = ProcessMemory::new();
    let ctrl = Emulator::with_profile(p)
        .media(MediaChoice::Null)
        .clock(ClockMode::Virtual)
        .build(memory.clone())
        .unwrap();
    ctrl.set_data_transfer(false);
    Harness::start(ctrl, memory, 256).unwrap()
}

fn reap(h: &mut Harness, n: usize) {
    for i in 0..n {
        let start = Instant::now();
        let e = loop {
            if let Some(e) = h.io.reap(&h.ctrl, &h.memory) {
                break e;
            }
            assert!(start.elapsed() < PATIENCE, "completion {i} of {n} not within {PATIENCE:?}");
            std::hint::spin_loop();
        };
        assert!(e.status().is_success(), "{e:?}");
    }
}

/// Writes `blocks` at `lba` in 128 KiB commands and waits for them all.
fn fill(h: &mut Harness, lba: u64, blocks: u64) -> Vec<u16> {
    let mut cids = Vec::new();
    for i in 0..blocks / 32 {
        cids.push(h.io.push(&h.memory, Bench::write(lba + i * 32, 32)));
    }
    h.io.ring(&h.ctrl);
    reap(h, cids.len());
    cids
}

/// Lets every program finish: one second of device time.
fn settle(h: &mut Harness) {
    let t = h.ctrl.clock().now_ns();
    h.ctrl.clock().advance_to(t + 1_000_000_000);
    // A command after the jump runs the model up to it.
    let e = h.io(Bench::send(0, ZoneSendAction::Open));
    assert!(e.status().is_success());
}

/// The flash operations of `cmd`.
fn flash_of(events: &[TraceEvent], cmd: CommandId) -> Vec<TraceEvent> {
    events
        .iter()
        .filter(|e| matches!(e, TraceEvent::Flash { cmd: Some(c), .. } if *c == cmd))
        .copied()
        .collect()
}

#[test]
fn a_read_behind_a_program_on_its_die_starts_when_the_program_ends() {
    let mut h = harness(false);
    let sink: Arc<Recorder> = Arc::new(Recorder::default());
    h.ctrl.add_trace_sink(sink.clone());
    // 8 MiB of zone 0 on flash, then 8 MiB more being written while 4 KiB
    // reads of the first part arrive: the dies are programming.
    fill(&mut h, 0, 2048);
    settle(&mut h);
    let writes: Vec<u16> =
        (0..64).map(|i| h.io.push(&h.memory, Bench::write(2048 + i * 32, 32))).collect();
    h.io.ring(&h.ctrl);
    reap(&mut h, writes.len());
    let reads: Vec<(u16, u64)> = (0..32)
        .map(|i| {
            let lba = i * 61 % 2048;
            (h.io.push(&h.memory, Bench::read(lba, 1)), lba)
        })
        .collect();
    h.io.ring(&h.ctrl);
    reap(&mut h, reads.len());
    settle(&mut h);
    let events = sink.0.lock().clone();
    let qid = h.io.qid();

    // The first write, event by event: queued, fetched, started on a
    // processing unit, completed with success; no flash operation of its
    // own (its data is programmed from the buffer).
    let first = CommandId { sqid: qid, cid: 0 };
    let mine: Vec<&TraceEvent> = events
        .iter()
        .filter(|e| match e {
            TraceEvent::Queued { cmd, .. }
            | TraceEvent::Started { cmd, .. }
            | TraceEvent::Completed { cmd, .. } => *cmd == first,
            TraceEvent::Flash { cmd, .. } | TraceEvent::Transfer { cmd, .. } => *cmd == Some(first),
            _ => false,
        })
        .collect();
    let [TraceEvent::Queued { at_ns: q, kind, nsid, lba, blocks, fetched_ns, .. }, TraceEvent::Started { at_ns: s, .. }, TraceEvent::Completed { at_ns: c, status, .. }] =
        mine[..]
    else {
        panic!("first write: {mine:?}")
    };
    assert_eq!((*kind, *nsid, *lba, *blocks, *status), (CommandKind::Write, 1, 0, 32, 0));
    assert_eq!(*fetched_ns, q + 3000, "zn540 fetches in 3 us");
    assert!(q < s && s < c, "{q} {s} {c}");
    // Zone 0 went Empty -> Implicitly Opened with it.
    assert!(events.iter().any(|e| matches!(
        e,
        TraceEvent::ZoneState {
            nsid: 1,
            zone: 0,
            from: ZoneState::Empty,
            to: ZoneState::ImplicitlyOpen,
            ..
        }
    )));

    // Each read: one flash read on one die, its transfer on that die's
    // channel after the sensing, all between its start and completion.
    let channels = 8;
    let mut waited = 0;
    for &(cid, lba) in &reads {
        let cmd = CommandId { sqid: qid, cid };
        let (queued, started, done) = phases(&events, cmd);
        let flash = flash_of(&events, cmd);
        let [TraceEvent::Flash {
            die,
            op: FlashOp::Read,
            start_ns,
            end_ns,
            bytes: 4096,
            planes,
            suspended: false,
            ..
        }] = flash[..]
        else {
            panic!("read {cid}: {flash:?}")
        };
        assert_eq!(planes, zn540_plane_of(lba), "read {cid} of LBA {lba}");
        assert!(queued <= started && started <= start_ns && end_ns <= done, "read {cid}");
        let xfer: Vec<&TraceEvent> = events
            .iter()
            .filter(|e| matches!(e, TraceEvent::Transfer { cmd: Some(c), .. } if *c == cmd))
            .collect();
        let [TraceEvent::Transfer {
            channel, die: tdie, start_ns: ts, end_ns: te, bytes: 4096, ..
        }] = xfer[..]
        else {
            panic!("read {cid} transfers: {xfer:?}")
        };
        assert_eq!((*channel, *tdie), (die % channels, die));
        assert!(start_ns < *ts && *te == end_ns, "read {cid}: sense then transfer");
        // Nothing else on its die while it runs (programs are never
        // suspended here); a read that arrived while its die was
        // programming starts exactly when that program ends.
        for e in &events {
            if let TraceEvent::Flash { die: d, start_ns: s, end_ns: t, op, .. } = *e {
                if d == die && (s, t) != (start_ns, end_ns) {
                    assert!(t <= start_ns || s >= end_ns, "read {cid} overlaps {e:?}");
                    if op == FlashOp::Program && s <= queued && t == start_ns {
                        waited += 1;
                    }
                }
            }
        }
    }
    assert!(waited > 0, "no read arrived while its die was programming: {events:#?}");
}

/// The plane of 4 KiB block `lba` of a zn540 zone as a mask: zones rotate
/// over their dies in 32 KiB chunks, each a page group (a 16 KiB page on
/// each of the 2 planes, plane 0 first), and chunks sit at page-group
/// boundaries of their program units.
fn zn540_plane_of(lba: u64) -> u32 {
    1 << (lba % 8 / 4)
}

#[test]
fn flash_operations_name_the_planes_they_cover() {
    let mut h = harness(false);
    let sink: Arc<Recorder> = Arc::new(Recorder::default());
    fill(&mut h, 0, 2048);
    settle(&mut h);
    h.ctrl.add_trace_sink(sink.clone());
    // (LBA, blocks, planes): a block on plane 0, one on plane 1, 8 KiB
    // across the page boundary (both), a whole page group (both), a page
    // on plane 0 of the next group.
    let cases = [(0, 1, 0b01), (5, 1, 0b10), (3, 2, 0b11), (8, 8, 0b11), (16, 4, 0b01)];
    let qid = h.io.qid();
    for (lba, blocks, want) in cases {
        let cid = h.io.push(&h.memory, Bench::read(lba, blocks));
        h.io.ring(&h.ctrl);
        reap(&mut h, 1);
        let events = sink.0.lock().clone();
        let flash = flash_of(&events, CommandId { sqid: qid, cid });
        let [TraceEvent::Flash { op: FlashOp::Read, bytes, planes, .. }] = flash[..] else {
            panic!("read of {blocks} at {lba}: {flash:?}")
        };
        assert_eq!((bytes, planes), (blocks * 4096, want), "read of {blocks} at {lba}");
    }
    // Programs of a write and the erases (and block closes) of a reset
    // cover both planes: a program unit and an erase block span them.
    fill(&mut h, 2048, 1024);
    settle(&mut h);
    let e = h.io(Bench::send(0, ZoneSendAction::Reset));
    assert!(e.status().is_success());
    settle(&mut h);
    let events = sink.0.lock().clone();
    let mut ops = std::collections::BTreeMap::new();
    for e in &events {
        if let TraceEvent::Flash { op, planes, .. } = *e {
            if op != FlashOp::Read {
                assert_eq!(planes, 0b11, "{e:?}");
                *ops.entry(op.name()).or_insert(0) += 1;
            }
        }
    }
    for op in ["program", "erase", "close block"] {
        assert!(ops.get(op).is_some_and(|&n| n > 0), "no {op}: {ops:?}");
    }
}

/// Queued, started and completed times of `cmd`.
fn phases(events: &[TraceEvent], cmd: CommandId) -> (u64, u64, u64) {
    let (mut q, mut s, mut c) = (None, None, None);
    for e in events {
        match *e {
            TraceEvent::Queued { at_ns, cmd: x, .. } if x == cmd => q = Some(at_ns),
            TraceEvent::Started { at_ns, cmd: x } if x == cmd => s = Some(at_ns),
            TraceEvent::Completed { at_ns, cmd: x, status: 0 } if x == cmd => c = Some(at_ns),
            _ => {}
        }
    }
    match (q, s, c) {
        (Some(q), Some(s), Some(c)) => (q, s, c),
        other => panic!("{cmd:?}: {other:?}"),
    }
}

#[test]
fn a_read_suspends_a_program_which_resumes_after_it() {
    let mut h = harness(true);
    let sink: Arc<Recorder> = Arc::new(Recorder::default());
    h.ctrl.add_trace_sink(sink.clone());
    fill(&mut h, 0, 2048);
    settle(&mut h);
    let writes: Vec<u16> =
        (0..64).map(|i| h.io.push(&h.memory, Bench::write(2048 + i * 32, 32))).collect();
    h.io.ring(&h.ctrl);
    reap(&mut h, writes.len());
    for i in 0..32 {
        h.io.push(&h.memory, Bench::read(i * 61 % 2048, 1));
    }
    h.io.ring(&h.ctrl);
    reap(&mut h, 32);
    settle(&mut h);
    let events = sink.0.lock().clone();
    // A program span cut by a suspension, a suspend event at its end, a
    // read on the die after it and the program resumed later.
    let cut = events.iter().find_map(|e| match *e {
        TraceEvent::Flash { die, op: FlashOp::Program, end_ns, suspended: true, .. } => {
            Some((die, end_ns))
        }
        _ => None,
    });
    let (die, at) = cut.expect("a program suspended for a read");
    assert!(events.iter().any(|e| matches!(*e,
        TraceEvent::Suspend { die: d, at_ns, op: FlashOp::Program } if d == die && at_ns == at)));
    let read_after = events.iter().any(|e| {
        matches!(*e,
        TraceEvent::Flash { die: d, op: FlashOp::Read, start_ns, .. } if d == die && start_ns >= at)
    });
    let resumed = events.iter().any(|e| {
        matches!(*e,
        TraceEvent::Resume { die: d, at_ns, op: FlashOp::Program } if d == die && at_ns > at)
    });
    assert!(read_after && resumed, "die {die} at {at}");
    // Removing the sink stops the events.
    let dynsink: Arc<dyn TraceSink> = sink.clone();
    assert!(h.ctrl.remove_trace_sink(&dynsink));
    let n = sink.0.lock().len();
    let e = h.io(Bench::read(0, 1));
    assert!(e.status().is_success());
    assert_eq!(sink.0.lock().len(), n);
}
