//! The discrete-event simulation behind the timing model.
//!
//! A command becomes a job: a list of steps ([`plan::Step`]) executed in order,
//! each taking a resource for a while or waiting for something. Resources:
//!
//! * processing units (first come, first served, `processing_units` of
//!   them) and one management unit for zone metadata work;
//! * the host link, one pipe per direction;
//! * the write buffer (bytes; writers wait in order for room);
//! * per zone, the append write-pointer step;
//! * flash channels (one transfer at a time) and dies. A die runs one
//!   operation at a time (read: sense then transfer; program: transfer
//!   then program; erase) and picks the next by class: reads, then
//!   programs, then erases of resets, then background erases. A read for
//!   a die busy programming or erasing suspends that operation (program
//!   suspend and erase suspend each with their own latency and limit) or,
//!   past the limit, waits for it: interference between reads, writes
//!   and resets comes out of this.
//!
//! Data written sits in the buffer and is counted per zone; whenever a
//! zone has a whole program unit, the unit is programmed on the die its
//! place in the zone maps to (the zone's program units, or smaller chunks
//! of its data, rotate over its dies), and the buffer room comes back when
//! the program ends. Reads of
//! data still in the buffer, or of unwritten blocks, touch no die.
//!
//! Events are processed in time order, ties in the order they were
//! scheduled, and every collection iterated is ordered: the same
//! submissions at the same times give the same completion times.
//!
//! | module | concern |
//! |---|---|
//! | `params` | the profile in the simulation's units (nanoseconds, bytes), transfer times |
//! | `layout` | where a zone's data sits: stripes, program units, the die of each |
//! | `plan` | a command as a job's steps |
//! | `job` | events in time order; a job's steps run until it has to wait |
//! | `host` | processing units, the management unit, the host link, completions |
//! | `buffer` | the write buffer: room, writers waiting for it, Finish padding |
//! | `zone` | each zone's data on its way from the buffer to programs |
//! | `die` | channels and dies: reads, programs, erases, program and erase suspend |
//! | `draws` | fixed pseudo-random draws: program and erase times, housekeeping |
//! | `segments` | segments of a conventional namespace with an FTL, its garbage collection |
//! | `trace` | trace events for an installed sink ([`crate::trace`]) |

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::sync::Arc;

use zns_spec::CompletionEntry;

use super::profile::TimingProfile;
use super::Op;
use crate::trace::{CommandId, TraceSink};

mod buffer;
mod die;
mod draws;
mod host;
mod job;
mod layout;
mod params;
mod plan;
mod segments;
mod trace;
mod zone;

use die::Die;
use job::{Ev, Job};
use params::Params;
use zone::{Prog, ZoneSim};

/// (NSID, zone index), or [`CONVENTIONAL`] for a conventional namespace.
pub(crate) type ZoneKey = (u32, u32);

/// Zone index standing for a whole conventional namespace.
pub(crate) const CONVENTIONAL: u32 = u32::MAX;

/// Geometry of one namespace as the model needs it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NsGeometry {
    /// Logical block size in bytes.
    pub block_bytes: u64,
    /// Zone size in blocks (0 for a conventional namespace).
    pub zone_blocks: u64,
    /// Zone capacity in blocks.
    pub cap_blocks: u64,
    /// Blocks per segment of a conventional namespace with an FTL (0:
    /// none). Its zone keys are `(nsid, segment)`.
    pub segment_blocks: u64,
}

/// Puts `v` in a free slot of `slots` (one `free` names, else a new one
/// at the end) and returns its index.
fn slot_in<T>(slots: &mut Vec<Option<T>>, free: &mut Vec<u32>, v: T) -> u32 {
    match free.pop() {
        Some(id) => {
            slots[id as usize] = Some(v);
            id
        }
        None => {
            slots.push(Some(v));
            (slots.len() - 1) as u32
        }
    }
}

/// The simulation state. Not thread safe by itself: the controller keeps
/// it behind one mutex.
#[derive(Debug)]
pub(crate) struct Sim {
    p: Params,
    ns: Vec<NsGeometry>,
    now: u64,
    seq: u64,
    events: BinaryHeap<Reverse<(u64, u64, Ev)>>,
    jobs: Vec<Option<Job>>,
    free_jobs: Vec<u32>,
    units: Vec<u64>,
    mgmt_free: u64,
    to_host_free: u64,
    from_host_free: u64,
    /// The zone whose write context the processing unit holds: the last
    /// one written (or opened explicitly), none after it was closed,
    /// finished or reset.
    write_context: Option<ZoneKey>,
    channel_free: Vec<u64>,
    dies: Vec<Die>,
    progs: Vec<Option<Prog>>,
    free_progs: Vec<u32>,
    progs_live: u32,
    buffer_used: u64,
    buffer_waiters: VecDeque<(u32, u64)>,
    zones: BTreeMap<ZoneKey, ZoneSim>,
    next_gen: u32,
    /// Completions due, with the model time they fell due at.
    ready: Vec<VecDeque<(CompletionEntry, u64)>>,
    /// When each queue's ready list last became non-empty (real time).
    ready_since: Vec<Option<std::time::Instant>>,
    /// Real time of the call processing events (for `ready_since`).
    wall: Option<std::time::Instant>,
    inflight: Vec<u32>,
    /// Completions produced so far (for the virtual clock's jumps).
    completions: u64,
    /// Data commands submitted so far (draws of the housekeeping delay).
    commands: u64,
    /// Resets of zones holding data so far (draws of the erase time).
    resets: u64,
    /// Bytes of written data that host reads (Read, Copy sources) found
    /// still in the buffer, not yet programmed, since last taken
    /// ([`Sim::take_buffer_reads`]): served without a die read.
    buffer_reads: u64,
    /// Segments (namespaces with an FTL) whose reclaimed incarnations'
    /// erases are pending, by incarnation: programs of later incarnations
    /// wait in `parked`.
    blocked: BTreeMap<ZoneKey, Vec<u32>>,
    parked: BTreeMap<ZoneKey, Vec<u32>>,
    /// Reclaimed incarnations of segments with programs still to finish.
    retired: BTreeMap<(ZoneKey, u32), ZoneSim>,
    /// Where trace events go, when a sink is installed.
    trace: Option<Arc<dyn TraceSink>>,
}

impl Sim {
    /// The simulation of a drive of `profile` with namespaces `ns` and
    /// `queues` completion queues, at time 0 with nothing in flight.
    pub fn new(profile: &TimingProfile, ns: Vec<NsGeometry>, queues: usize) -> Self {
        let p = Params::new(profile);
        Sim {
            ns,
            now: 0,
            seq: 0,
            events: BinaryHeap::new(),
            jobs: Vec::new(),
            free_jobs: Vec::new(),
            units: vec![0; p.units],
            mgmt_free: 0,
            to_host_free: 0,
            from_host_free: 0,
            write_context: None,
            channel_free: vec![0; p.channels as usize],
            dies: (0..p.dies).map(|_| Die::default()).collect(),
            progs: Vec::new(),
            free_progs: Vec::new(),
            progs_live: 0,
            buffer_used: 0,
            buffer_waiters: VecDeque::new(),
            zones: BTreeMap::new(),
            next_gen: 1,
            ready: (0..queues).map(|_| VecDeque::new()).collect(),
            ready_since: vec![None; queues],
            wall: None,
            inflight: vec![0; queues],
            completions: 0,
            commands: 0,
            resets: 0,
            buffer_reads: 0,
            blocked: BTreeMap::new(),
            parked: BTreeMap::new(),
            retired: BTreeMap::new(),
            trace: None,
            p,
        }
    }

    /// Bytes host reads took from the buffer since the last call (data
    /// written but not yet programmed: no die read), and resets the count.
    pub fn take_buffer_reads(&mut self) -> u64 {
        std::mem::take(&mut self.buffer_reads)
    }

    /// Installs (or with `None` removes) the sink of trace events.
    pub fn set_trace(&mut self, sink: Option<Arc<dyn TraceSink>>) {
        self.trace = sink;
    }

    /// The installed sink of trace events.
    pub fn trace(&self) -> Option<&Arc<dyn TraceSink>> {
        self.trace.as_ref()
    }

    /// Simulated time reached.
    pub fn now(&self) -> u64 {
        self.now
    }

    /// Completions produced since creation.
    pub fn completions(&self) -> u64 {
        self.completions
    }

    /// Commands of completion queue `cqid` not yet completed.
    pub fn inflight(&self, cqid: u16) -> u32 {
        self.inflight.get(cqid as usize).copied().unwrap_or(0)
    }

    /// Moves the completions of `cqid` whose time has come into `out`,
    /// oldest first, telling `due` the model time each fell due at.
    pub fn take(&mut self, cqid: u16, out: &mut Vec<CompletionEntry>, mut due: impl FnMut(u64)) {
        if let Some(r) = self.ready.get_mut(cqid as usize) {
            out.extend(r.drain(..).map(|(c, t)| {
                due(t);
                c
            }));
            self.ready_since[cqid as usize] = None;
        }
    }

    /// True when `cqid` has completions whose time has come.
    pub fn has_ready(&self, cqid: u16) -> bool {
        self.ready.get(cqid as usize).is_some_and(|r| !r.is_empty())
    }

    /// True when a queue other than `cqid` holds completions that became
    /// due less than `fresh` ago (real time) and are not taken yet.
    pub fn others_ready(
        &self,
        cqid: u16,
        now: std::time::Instant,
        fresh: std::time::Duration,
    ) -> bool {
        self.ready_since.iter().enumerate().any(|(q, since)| {
            q != cqid as usize && since.is_some_and(|s| now.saturating_duration_since(s) < fresh)
        })
    }

    /// Sets the real time the next completions count as due from.
    pub fn set_wall(&mut self, now: std::time::Instant) {
        self.wall = Some(now);
    }

    /// Time of the next event, if any.
    pub fn next_event(&self) -> Option<u64> {
        self.events.peek().map(|Reverse((t, _, _))| *t)
    }

    /// Processes every event up to and including time `t`; the simulated
    /// time becomes `t`.
    pub fn run_until(&mut self, t: u64) {
        while let Some(&Reverse((when, _, ev))) = self.events.peek() {
            if when > t {
                break;
            }
            self.events.pop();
            self.now = when;
            self.handle(ev);
        }
        self.now = self.now.max(t);
    }

    /// Processes the events of the earliest pending time only; returns
    /// that time, or `None` when nothing is pending.
    pub fn step(&mut self) -> Option<u64> {
        let t = self.next_event()?;
        self.run_until(t);
        Some(t)
    }

    /// Drops the completions of every command of submission queue `sqid`
    /// (all queues for `None`) still in flight; their internal work goes on.
    pub fn cancel(&mut self, sqid: Option<u16>) {
        for job in self.jobs.iter_mut().flatten() {
            if !job.cancelled && !job.internal && sqid.is_none_or(|q| q == job.sqid) {
                job.cancelled = true;
                if let Some(n) = self.inflight.get_mut(job.cqid as usize) {
                    *n = n.saturating_sub(1);
                }
            }
        }
        match sqid {
            None => self.ready.iter_mut().for_each(|r| r.clear()),
            Some(q) => {
                for r in self.ready.iter_mut() {
                    r.retain(|(c, _)| c.sq_id != q);
                }
            }
        }
        for (r, since) in self.ready.iter().zip(self.ready_since.iter_mut()) {
            if r.is_empty() {
                *since = None;
            }
        }
    }

    /// Takes command `op` arriving now from queue `sqid`, to complete with
    /// `cqe` on `cqid`.
    pub fn submit(&mut self, sqid: u16, cqid: u16, cqe: CompletionEntry, op: Op) {
        if self.trace.is_some() {
            self.trace_queued(CommandId { sqid, cid: cqe.cid }, cqid, &op);
        }
        let steps = self.plan(op);
        let job = Job {
            steps,
            at: 0,
            pending: 0,
            granted: 0,
            unit_done: 0,
            sqid,
            cqid,
            cqe,
            cancelled: false,
            internal: false,
        };
        let id = slot_in(&mut self.jobs, &mut self.free_jobs, job);
        if let Some(n) = self.inflight.get_mut(cqid as usize) {
            *n += 1;
        }
        self.advance(id);
    }
}
