//! Commands in flight: reads, writes and Zone Appends submitted to the
//! namespace's device queue without waiting, so a host's queue depth
//! reaches the device (a modelled drive serves them in parallel, and the
//! device's batched path costs less per command than one at a time).
//!
//! Only commands that need nothing more from the host qualify: a read
//! whose data fits a buffer of [`BUFFER_BYTES`], a write or append of at
//! most that much whose data is here (in the capsule, or fetched by R2T
//! before). Anything else, and anything a check would
//! refuse, runs alone (`crate::io::execute`), which gives it its status;
//! so a command in flight fails only with the device's own status.
//! Buffers are made on first need, at most [`DEPTH`] per namespace, and
//! reused: steady-state I/O allocates nothing.

use zns_device::{Completion, IoBuffer, OpKind, ZoneOp};
use zns_spec::command::{ReadWrite, ZoneAppend};
use zns_spec::{IoOpcode, SubmissionEntry};

use crate::controller::Controller;
use crate::io::{count, device_error, IoContext, IoDone};
use crate::subsystem::Subsystem;

/// Most commands in flight on one connection.
pub(crate) const DEPTH: usize = 32;

/// Size of a buffer of a command in flight (or the namespace's transfer
/// limit, if smaller): larger commands run alone.
pub(crate) const BUFFER_BYTES: usize = 128 * 1024;

/// What a command in flight needs at its completion.
#[derive(Debug, Clone, Copy)]
struct Slot {
    cid: u16,
    opcode: IoOpcode,
    /// Bytes for the host (reads) or from it (writes).
    len: usize,
}

/// The connection's commands in flight, by tag.
#[derive(Debug)]
pub(crate) struct Inflight {
    slots: Vec<Option<Slot>>,
    free: Vec<usize>,
}

impl Default for Inflight {
    fn default() -> Self {
        Inflight { slots: vec![None; DEPTH], free: (0..DEPTH).rev().collect() }
    }
}

impl Inflight {
    /// Commands in flight.
    pub(crate) fn len(&self) -> usize {
        DEPTH - self.free.len()
    }
}

/// A command in flight completed: its CID, how it ended, and its buffer
/// (for a read, the data for the host are its first `done.data` bytes).
pub(crate) struct Finished {
    pub cid: u16,
    pub done: IoDone,
    /// The lane it ran on: where its buffer goes back ([`give_back`]).
    pub lane: usize,
    pub buffer: Option<IoBuffer>,
}

/// Returns a buffer of a command in flight to its lane once its data has
/// gone, for the next command.
pub(crate) fn give_back(ctx: &mut IoContext, lane: usize, buffer: IoBuffer) {
    if let Some(Some(l)) = ctx.lanes.get_mut(lane) {
        l.spare.push(buffer);
    }
}

/// Submits `sqe` to its namespace's queue if it qualifies (see the module
/// documentation); `false`: run it alone. `host` is its in-capsule data,
/// `room` the bytes its descriptor offers for data to the host.
pub(crate) fn start(
    ctx: &mut IoContext,
    sub: &Subsystem,
    sqe: &SubmissionEntry,
    host: &[u8],
    room: usize,
) -> bool {
    let Some(op) = IoOpcode::from_raw(sqe.opcode()) else { return false };
    if !matches!(op, IoOpcode::Read | IoOpcode::Write | IoOpcode::ZoneAppend) {
        return false;
    }
    let Some(ns) = sub.namespace(sqe.nsid) else { return false };
    let conventional = ns.conventional().is_some();
    if ns.block().is_some() || (conventional && op == IoOpcode::ZoneAppend) {
        return false;
    }
    let (zone_op, blocks) = match op {
        IoOpcode::Read => {
            let c = ReadWrite::decode(sqe);
            (ZoneOp::Read { lba: c.slba }, c.blocks)
        }
        IoOpcode::Write => {
            let c = ReadWrite::decode(sqe);
            (ZoneOp::Write { lba: c.slba, fua: c.fua, placement: c.placement() }, c.blocks)
        }
        _ => {
            let c = ZoneAppend::decode(sqe);
            (ZoneOp::Append { zslba: c.zslba, fua: c.fua }, c.blocks)
        }
    };
    let len = blocks as usize * ns.block_size() as usize;
    let offered = if op == IoOpcode::Read { room } else { host.len() };
    let size = BUFFER_BYTES.min(ns.mdts_bytes());
    if len == 0 || len > offered || len > size || ctx.inflight.free.is_empty() {
        return false;
    }
    let tag = *ctx.inflight.free.last().expect("checked");
    let Ok(lane) = ctx.lane_state(ns) else { return false };
    let mut buf = match lane.spare.pop() {
        Some(b) => b,
        None if lane.made < DEPTH => match lane.queue.alloc(size) {
            Ok(b) => {
                lane.made += 1;
                b
            }
            Err(_) => return false,
        },
        None => return false,
    };
    if buf.set_len(len).is_err() {
        lane.spare.push(buf);
        return false;
    }
    if op != IoOpcode::Read {
        buf.as_mut_slice().copy_from_slice(&host[..len]);
    }
    match lane.queue.submit(zone_op, Some(buf), tag as u64) {
        Ok(()) => {
            // A write reaches the device at once: it changes zone states
            // (opens a zone, fills one), and another connection's command
            // arriving after it must find them changed, as when commands
            // ran the moment they were read. Reads wait for the batch's
            // doorbell.
            if op == IoOpcode::Read {
                lane.unrung = true;
            } else {
                lane.queue.ring();
            }
            ctx.inflight.free.pop();
            ctx.inflight.slots[tag] = Some(Slot { cid: sqe.cid(), opcode: op, len });
            true
        }
        Err(rejected) => {
            if let Some(b) = rejected.buffer {
                lane.spare.push(b);
            }
            false
        }
    }
}

/// Rings the doorbell of every lane with commands submitted since its
/// last ring.
pub(crate) fn ring(ctx: &mut IoContext) {
    for lane in ctx.lanes.iter_mut().flatten() {
        if lane.unrung {
            lane.queue.ring();
            lane.unrung = false;
        }
    }
}

/// Delivers up to `max` completed commands in flight to `f` (counted in
/// the controller's statistics first), which keeps its buffer or hands it
/// back for the next command; returns how many. Never blocks.
pub(crate) fn complete(
    ctx: &mut IoContext,
    ctrl: &Controller,
    max: usize,
    f: &mut dyn FnMut(Finished) -> Option<IoBuffer>,
) -> usize {
    if ctx.inflight.len() == 0 {
        return 0;
    }
    ring(ctx);
    let mut n = 0;
    let IoContext { lanes, inflight, .. } = ctx;
    for (index, lane) in lanes.iter_mut().enumerate() {
        let Some(lane) = lane.as_mut().filter(|l| l.queue.outstanding() > 0) else { continue };
        let spare = &mut lane.spare;
        if n >= max {
            break;
        }
        lane.queue.poll(max - n, &mut |c: Completion| {
            let tag = c.tag as usize;
            let Some(slot) = inflight.slots.get_mut(tag).and_then(|s| s.take()) else {
                // Not a command in flight: a queue's lone commands never
                // come back through poll.
                tracing::error!(tag, "completion of an unknown command in flight");
                return;
            };
            inflight.free.push(tag);
            let done = match &c.result {
                Ok(v) if c.op == OpKind::Append => IoDone::ok(*v, 0),
                Ok(_) if slot.opcode == IoOpcode::Read => IoDone::ok(0, slot.len),
                Ok(_) => IoDone::ok(0, 0),
                Err(e) => device_error(e),
            };
            count(
                ctrl,
                slot.opcode,
                &done,
                if slot.opcode == IoOpcode::Read { 0 } else { slot.len },
            );
            let kept = f(Finished { cid: slot.cid, done, lane: index, buffer: c.buffer });
            spare.extend(kept);
            n += 1;
        });
    }
    n
}

/// Waits (bounded) for every command in flight, dropping the results: the
/// connection is ending.
pub(crate) fn abandon(ctx: &mut IoContext) {
    if ctx.inflight.len() == 0 {
        return;
    }
    let timeout = std::time::Duration::from_secs(10);
    for lane in ctx.lanes.iter_mut().flatten() {
        if let Err(e) = lane.queue.drain(timeout, &mut |_| {}) {
            tracing::warn!(error = %e, "commands in flight at the connection's end");
        }
    }
    ctx.inflight = Inflight::default();
}
