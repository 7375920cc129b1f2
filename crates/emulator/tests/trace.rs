//! Trace events of a known command sequence, checked event by event: the
//! commands' phases, the flash operations they caused, the channel
//! transfers, and a read behind a program on the same die waiting for it.

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
    for &(cid, _) in &reads {
        let cmd = CommandId { sqid: qid, cid };
        let (queued, started, done) = phases(&events, cmd);
        let flash = flash_of(&events, cmd);
        let [TraceEvent::Flash {
            die,
            op: FlashOp::Read,
            start_ns,
            end_ns,
            bytes: 4096,
            suspended: false,
            ..
        }] = flash[..]
        else {
            panic!("read {cid}: {flash:?}")
        };
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
