//! The discrete-event simulation behind the timing model.
//!
//! A command becomes a job: a list of steps ([`Step`]) executed in order,
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

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};

use zns_spec::{CompletionEntry, ZoneSendAction, ZoneState};

use super::profile::TimingProfile;
use super::{Op, ZoneBefore};

mod segments;

/// (NSID, zone index), or [`CONVENTIONAL`] for a conventional namespace.
pub(crate) type ZoneKey = (u32, u32);

/// Zone index standing for a whole conventional namespace.
pub(crate) const CONVENTIONAL: u32 = u32::MAX;

/// Memory page size for PRP purposes.
const MEMORY_PAGE: u64 = 4096;

/// Die operation classes, highest priority first: host reads, reads of
/// garbage collection, programs, erases of resets and of garbage
/// collection, background erases.
const CLASS_READ: usize = 0;
const CLASS_GC_READ: usize = 1;
const CLASS_PROGRAM: usize = 2;
const CLASS_ERASE: usize = 3;
const CLASS_BACKGROUND: usize = 4;
const CLASSES: usize = 5;

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

/// The profile in the units the simulation uses (nanoseconds, bytes).
#[derive(Debug, Clone)]
struct Params {
    fetch: u64,
    post: u64,
    to_host_mbps: u64,
    from_host_mbps: u64,
    prp_list: u64,
    to_host_command: u64,
    to_host_list: u64,
    units: usize,
    read: u64,
    write: u64,
    write_overlap: u64,
    append: u64,
    append_overlap: u64,
    append_serial: u64,
    /// Per logical block of a Write or Zone Append, for blocks under 4 KiB.
    small_lba: u64,
    implicit_open: u64,
    zone_switch: u64,
    flush: u64,
    other: u64,
    report: u64,
    open: u64,
    close: u64,
    close_buffered: u64,
    finish: u64,
    reset: u64,
    reset_metadata: u64,
    housekeeping_fraction: f64,
    housekeeping_mean: u64,
    channels: u32,
    dies: u32,
    stripe: u32,
    channel_mbps: u64,
    channel_overhead: u64,
    /// Bytes sensed at once (a page on every plane).
    sense_bytes: u64,
    read_levels: Vec<u64>,
    program: u64,
    program_variation: f64,
    block_open: u64,
    /// Management work when a zone's writes enter a new stripe of erase
    /// blocks (not its first).
    stripe_open: u64,
    suspend: u64,
    suspend_limit: u32,
    erase_suspend: u64,
    erase_suspend_limit: u32,
    /// Erase progress between suspends (ns).
    erase_resume_min: u64,
    erase: u64,
    erase_variation: f64,
    close_block: u64,
    /// Program unit bytes.
    unit: u64,
    /// Program units per erase block.
    units_per_block: u64,
    /// Bytes of the unit a zone's data rotates over its dies in.
    chunk: u64,
    /// Stripe rows each program unit of a zone gathers its data from
    /// (program unit / `chunk`; 1: a program unit holds consecutive data).
    rows: u64,
    buffer: u64,
}

impl Params {
    fn new(p: &TimingProfile) -> Self {
        let us = |v: u64| v.saturating_mul(1000);
        Params {
            fetch: p.fetch_ns,
            post: p.post_ns,
            to_host_mbps: p.link_to_host_mbps,
            from_host_mbps: p.link_from_host_mbps,
            prp_list: p.prp_list_ns,
            to_host_command: p.link_to_host_command_ns,
            to_host_list: p.link_to_host_list_ns,
            units: p.processing_units as usize,
            read: p.read_ns,
            write: p.write_ns,
            write_overlap: p.write_overlap_ns,
            append: p.append_ns,
            append_overlap: p.append_overlap_ns,
            append_serial: p.append_serial_ns,
            small_lba: p.small_lba_ns,
            implicit_open: p.implicit_open_ns,
            zone_switch: p.zone_switch_ns,
            flush: p.flush_ns,
            other: p.other_ns,
            report: p.report_ns,
            open: p.open_ns,
            close: p.close_ns,
            close_buffered: p.close_buffered_ns,
            finish: p.finish_ns,
            reset: p.reset_ns,
            reset_metadata: us(p.reset_metadata_us),
            housekeeping_fraction: p.housekeeping_fraction,
            housekeeping_mean: p.housekeeping_mean_ns,
            channels: p.channels,
            dies: p.dies(),
            stripe: p.zone_stripe_dies,
            channel_mbps: p.channel_mbps,
            channel_overhead: p.channel_overhead_ns,
            sense_bytes: p.page_kib as u64 * 1024 * p.planes as u64,
            read_levels: p.read_us.iter().map(|t| (t * 1000.0).round() as u64).collect(),
            program: us(p.program_us),
            program_variation: p.program_variation,
            block_open: us(p.block_open_us),
            stripe_open: us(p.stripe_open_us),
            suspend: us(p.suspend_us),
            suspend_limit: p.suspend_limit,
            erase_suspend: p
                .erase_suspend_us
                .map_or(us(p.suspend_us), |t| (t * 1000.0).round() as u64),
            erase_suspend_limit: p.erase_suspend_limit.unwrap_or(p.suspend_limit),
            erase_resume_min: p.erase_resume_min_us.map_or(0, |t| (t * 1000.0).round() as u64),
            erase: us(p.erase_us),
            erase_variation: p.erase_variation,
            close_block: us(p.close_block_us),
            unit: p.program_unit_bytes(),
            units_per_block: (p.block_kib as u64 * 1024 / p.program_unit_bytes()).max(1),
            chunk: p.stripe_unit_bytes(),
            rows: (p.program_unit_bytes() / p.stripe_unit_bytes()).max(1),
            buffer: p.write_buffer_kib as u64 * 1024,
        }
    }
}

/// Where a striped zone's data sits. Its data rotates over the zone's
/// `stripe` dies in chunks of `chunk` bytes (chunk `j` on die position
/// `i = j % stripe`, stripe row `j / stripe`), and each die gathers
/// `rows` chunks, from consecutive rows, into a program unit. The dies'
/// units are staggered: die position `i` starts its first unit `i % rows`
/// chunks in (those pages hold no zone data), so in every stripe row a
/// share of the dies complete a unit and the buffer drains evenly, rather
/// than every die at once in the last row of a stripe of units. Program
/// unit `u` is die position `u % stripe`'s `u / stripe`-th; its bytes
/// have "physical" offsets `u` × unit + offset in the unit (chunk by
/// chunk in row order, after the unit's leading pad). A segment of a
/// conventional namespace with an FTL is laid out the same way without
/// the stagger (`staggered` false): it holds whole program units on every
/// die, and pads would cost each die a partial program per segment.
#[derive(Debug, Clone, Copy)]
struct Layout {
    stripe: u64,
    rows: u64,
    chunk: u64,
    staggered: bool,
}

impl Params {
    /// The layout of a striped zone.
    fn layout(&self) -> Layout {
        Layout { stripe: self.stripe as u64, rows: self.rows, chunk: self.chunk, staggered: true }
    }
}

impl Layout {
    /// Chunks the first unit of die position `i` leaves out.
    #[inline]
    fn phase(&self, i: u64) -> u64 {
        if self.staggered {
            i % self.rows
        } else {
            0
        }
    }

    /// Bytes at the start of program unit `u` without zone data.
    #[inline]
    fn pad(&self, u: u64) -> u64 {
        let s = self.stripe;
        if u < s {
            self.phase(u) * self.chunk
        } else {
            0
        }
    }

    /// Zone chunk index in slot `r` (of `rows`) of program unit `u`, or
    /// `None` for a slot of the leading pad.
    #[inline]
    fn chunk_of(&self, u: u64, r: u64) -> Option<u64> {
        let s = self.stripe;
        let (m, i) = (u / s, u % s);
        (m * self.rows + r).checked_sub(self.phase(i)).map(|row| row * s + i)
    }

    /// Bytes of program unit `u` below zone offset `x`: they come first
    /// in the unit's physical layout, after its pad.
    fn unit_below(&self, u: u64, x: u64) -> u64 {
        (0..self.rows)
            .filter_map(|r| self.chunk_of(u, r))
            .map(|j| x.saturating_sub(j * self.chunk).min(self.chunk))
            .sum()
    }

    /// Whether chunk `j` of the zone is the last of its program unit.
    #[inline]
    fn ends_unit(&self, j: u64) -> bool {
        let s = self.stripe;
        (j / s + self.phase(j % s)) % self.rows == self.rows - 1
    }

    /// Program unit holding zone offset `off`, and the offset in the unit.
    #[inline]
    fn physical(&self, off: u64) -> (u64, u64) {
        let s = self.stripe;
        let j = off / self.chunk;
        let (row, i) = (j / s, j % s);
        let slot = row + self.phase(i);
        let (m, r) = (slot / self.rows, slot % self.rows);
        (m * s + i, r * self.chunk + off % self.chunk)
    }

    /// The last chunk of die position `i` that starts below zone offset
    /// `x`, if any.
    fn last_chunk(&self, i: u64, x: u64) -> Option<u64> {
        let (s, q) = (self.stripe, x.div_ceil(self.chunk));
        (q > i).then(|| i + (q - 1 - i) / s * s)
    }

    /// Program units of die position `i` holding some of the zone's first
    /// `x` bytes.
    fn die_units(&self, i: u64, x: u64) -> u64 {
        self.last_chunk(i, x).map_or(0, |j| self.physical(j * self.chunk).0 / self.stripe + 1)
    }
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

/// [`Sim::incarnation_mut`] on the maps alone, so the caller may still
/// read the simulation's parameters.
fn incarnation<'a>(
    zones: &'a mut BTreeMap<ZoneKey, ZoneSim>,
    retired: &'a mut BTreeMap<(ZoneKey, u32), ZoneSim>,
    zone: ZoneKey,
    gen: u32,
) -> Option<&'a mut ZoneSim> {
    match zones.get(&zone).is_some_and(|z| z.gen == gen) {
        true => zones.get_mut(&zone),
        false => retired.get_mut(&(zone, gen)),
    }
}

/// Nanoseconds to move `bytes` at `mbps` (10^6 bytes per second).
#[inline]
fn xfer(bytes: u64, mbps: u64) -> u64 {
    (bytes.saturating_mul(1000)).div_ceil(mbps.max(1))
}

/// A uniform number in [0, 1) from `x` (splitmix64 finalizer): fixed
/// pseudo-random draws that repeat run after run.
fn unit_interval(mut x: u64) -> f64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 31;
    (x >> 11) as f64 / (1u64 << 53) as f64
}

/// Whether a transfer of `bytes` needs a PRP list (more than two pages).
#[inline]
fn needs_prp_list(bytes: u64) -> bool {
    bytes.div_ceil(MEMORY_PAGE) > 2
}

/// A read of one die: `bytes` sensed in `sense` ns, then transferred.
#[derive(Debug, Clone, Copy)]
struct Piece {
    die: u32,
    bytes: u64,
    sense: u64,
}

/// Work put on a die by a reset (erases, block closes).
#[derive(Debug, Clone, Copy)]
struct DieWork {
    die: u32,
    ns: u64,
    class: usize,
    /// The job waits for it (background erases it does not).
    wait: bool,
}

/// One step of a job.
#[derive(Debug)]
enum Step {
    Delay(u64),
    /// `ns` of processing on a unit, after which the command goes on while
    /// the same unit does `ahead` ns more of its work: a firmware core runs
    /// a command's processing to completion before taking the next one.
    Unit {
        ns: u64,
        ahead: u64,
    },
    Mgmt(u64),
    Read(Vec<Piece>),
    LinkOut(u64),
    Admit(u64),
    /// Data into the buffer: the host transfer (when `dma`), ending no
    /// earlier than the command's processing ahead (`Unit::ahead`).
    Transfer {
        bytes: u64,
        dma: bool,
    },
    ZoneAdd {
        zone: ZoneKey,
        bytes: u64,
        filled: bool,
    },
    Serial(ZoneKey),
    /// Data into a segment of a namespace with an FTL: `bytes` at byte
    /// `at` of the segment's incarnation `gen` (`buffered`: host data
    /// holding write-buffer room; garbage collection's does not).
    SegmentAdd {
        zone: ZoneKey,
        gen: u32,
        at: u64,
        bytes: u64,
        buffered: bool,
    },
    /// Reads of garbage collection (below host reads).
    GcRead(Vec<Piece>),
    /// Waits until incarnation `gen` of a segment is programmed.
    AwaitRetired(ZoneKey, u32),
    /// The erase of incarnation `gen` of a segment is done: programs of
    /// later incarnations may start.
    Unblock(ZoneKey, u32),
    Pad {
        zone: ZoneKey,
        left: u64,
    },
    AwaitProgrammed(ZoneKey),
    DieOps(Vec<DieWork>),
    Post,
    Complete,
}

impl Step {
    /// Processing with nothing of the command's after it on the unit.
    fn unit(ns: u64) -> Step {
        Step::Unit { ns, ahead: 0 }
    }
}

#[derive(Debug)]
struct Job {
    steps: Vec<Step>,
    at: usize,
    /// Sub-operations (die reads, erases) still running.
    pending: u32,
    /// Buffer bytes granted while waiting.
    granted: u64,
    /// When the processing unit finishes the command's work (`Unit`).
    unit_done: u64,
    sqid: u16,
    cqid: u16,
    cqe: CompletionEntry,
    cancelled: bool,
    /// The device's own work (garbage collection): no command, no
    /// completion.
    internal: bool,
}

/// An operation on a die.
#[derive(Debug, Clone, Copy)]
enum DieOp {
    Read { job: u32, bytes: u64, sense: u64 },
    Program(u32),
    Timed { job: Option<u32>, ns: u64 },
}

#[derive(Debug, Default)]
struct Die {
    current: Option<DieOp>,
    queues: [VecDeque<DieOp>; CLASSES],
    /// Bumped when the current operation is suspended: its pending end
    /// event is then stale.
    epoch: u32,
    /// When the current program or erase does its array work (a program
    /// first moves its data over the channel).
    array_from: u64,
    /// When the current operation ends.
    until: u64,
    /// A program or erase suspended for reads: the operation, the array
    /// time it still needs, and how often it was suspended.
    suspended: Option<(DieOp, u64, u32)>,
    /// Suspensions of the current program or erase so far.
    suspends: u32,
    /// A suspend of the current erase is due once it has progressed
    /// enough ([`Ev::Suspend`] scheduled).
    suspend_armed: bool,
}

/// A program of `[start, start + bytes)` of a zone.
#[derive(Debug, Clone, Copy)]
struct Prog {
    zone: ZoneKey,
    gen: u32,
    start: u64,
    bytes: u64,
    /// Its data holds write-buffer room until programmed.
    buffered: bool,
}

/// What the model knows of one zone's data.
#[derive(Debug)]
struct ZoneSim {
    gen: u32,
    /// Bytes that reached the buffer, from the zone start.
    fill: u64,
    /// Bytes handed to programs (in a striped zone a count: its
    /// dispatched data is `[0, flushed)` and its program units complete in
    /// its first `scanned` chunks; otherwise also where the next program
    /// starts).
    dispatched: u64,
    /// Striped zone: chunks whose filling was checked for completing a
    /// program unit.
    scanned: u64,
    /// Striped zone: the zone offset below which all data was handed to
    /// programs (partial program units flushed, or on flash from before).
    flushed: u64,
    /// Striped zone: bytes of its incomplete stripe staged outside the
    /// write buffer (all it has not handed to programs beyond one program
    /// unit).
    staged: u64,
    /// Bytes programmed, contiguous from the zone start.
    programmed: u64,
    /// Programmed ranges past `programmed` (start → end).
    done: BTreeMap<u64, u64>,
    /// Programs queued or running.
    inflight: u32,
    /// When the append write-pointer step is free.
    serial_free: u64,
    /// Host data before a Finish padded the rest.
    host_end: Option<u64>,
    /// Jobs waiting for everything to be programmed.
    waiters: Vec<u32>,
    /// Its data holds write-buffer room (false for garbage collection's
    /// segments).
    buffered: bool,
}

impl ZoneSim {
    fn new(gen: u32, on_flash: u64) -> Self {
        ZoneSim {
            gen,
            fill: on_flash,
            dispatched: on_flash,
            scanned: 0,
            flushed: on_flash,
            staged: 0,
            programmed: on_flash,
            done: BTreeMap::new(),
            inflight: 0,
            serial_free: 0,
            host_end: None,
            waiters: Vec::new(),
            buffered: true,
        }
    }

    /// A striped zone whose first `on_flash` bytes are on flash: they
    /// and the units' pads count as programmed.
    fn striped(gen: u32, on_flash: u64, p: &Layout, unit: u64) -> Self {
        let mut z = ZoneSim::new(gen, on_flash);
        (z.programmed, z.scanned) = (0, on_flash / p.chunk);
        let s = p.stripe;
        let units = (0..s).map(|i| p.die_units(i, on_flash)).max().unwrap_or(0) * s;
        for u in 0..units.max(s) {
            let end = u * unit + p.pad(u) + p.unit_below(u, on_flash);
            if end > u * unit {
                z.done.insert(u * unit, end);
            }
        }
        while let Some((&a, &e)) = z.done.first_key_value() {
            if a > z.programmed {
                break;
            }
            z.programmed = z.programmed.max(e);
            z.done.pop_first();
        }
        z
    }

    /// Whether the byte at `off` (physical in a striped zone) is programmed.
    fn is_programmed(&self, off: u64) -> bool {
        off < self.programmed
            || self.done.range(..=off).next_back().is_some_and(|(_, &end)| off < end)
    }

    fn settled(&self) -> bool {
        self.inflight == 0 && self.dispatched == self.fill
    }
}

/// Events, ordered by time then by scheduling order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    Job(u32),
    SenseDone(u32, u32),
    DieFree(u32, u32),
    /// An erase on the die may be suspended now, for reads waiting.
    Suspend(u32),
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
    /// Segments (namespaces with an FTL) whose reclaimed incarnations'
    /// erases are pending, by incarnation: programs of later incarnations
    /// wait in `parked`.
    blocked: BTreeMap<ZoneKey, Vec<u32>>,
    parked: BTreeMap<ZoneKey, Vec<u32>>,
    /// Reclaimed incarnations of segments with programs still to finish.
    retired: BTreeMap<(ZoneKey, u32), ZoneSim>,
}

impl Sim {
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
            blocked: BTreeMap::new(),
            parked: BTreeMap::new(),
            retired: BTreeMap::new(),
            p,
        }
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

    fn schedule(&mut self, at: u64, ev: Ev) {
        self.seq += 1;
        self.events.push(Reverse((at, self.seq, ev)));
    }

    /// Takes command `op` arriving now from queue `sqid`, to complete with
    /// `cqe` on `cqid`.
    pub fn submit(&mut self, sqid: u16, cqid: u16, cqe: CompletionEntry, op: Op) {
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

    /// Starts a job of the device's own (no completion) with `steps`.
    fn start_internal(&mut self, mut steps: Vec<Step>) {
        steps.push(Step::Complete);
        let job = Job {
            steps,
            at: 0,
            pending: 0,
            granted: 0,
            unit_done: 0,
            sqid: 0,
            cqid: 0,
            cqe: CompletionEntry::default(),
            cancelled: true,
            internal: true,
        };
        let id = slot_in(&mut self.jobs, &mut self.free_jobs, job);
        self.advance(id);
    }

    // ---- planning -----------------------------------------------------

    fn geometry(&self, nsid: u32) -> NsGeometry {
        self.ns.get((nsid as usize).wrapping_sub(1)).copied().unwrap_or(NsGeometry {
            block_bytes: 4096,
            zone_blocks: 0,
            cap_blocks: 0,
            segment_blocks: 0,
        })
    }

    /// True for the zone keys of a namespace with an FTL (segments).
    fn is_segment(&self, zone: ZoneKey) -> bool {
        zone.1 != CONVENTIONAL && self.geometry(zone.0).segment_blocks > 0
    }

    /// True for a zone whose data rotates over its dies in chunks smaller
    /// than the program unit. A segment of a conventional namespace with
    /// an FTL (an erase block on every die) is laid out the same way when
    /// the profile stripes zones over every die: the twin's firmware
    /// places data on the same NAND as its ZNS twin. A conventional
    /// namespace without an FTL is not striped.
    fn is_striped(&self, zone: ZoneKey) -> bool {
        self.p.rows > 1
            && zone.1 != CONVENTIONAL
            && (!self.is_segment(zone) || self.p.stripe == self.p.dies)
    }

    /// Incarnation `gen` of `zone`: the current one, or a reclaimed
    /// segment's still programming.
    fn incarnation_mut(&mut self, zone: ZoneKey, gen: u32) -> Option<&mut ZoneSim> {
        incarnation(&mut self.zones, &mut self.retired, zone, gen)
    }

    /// Where a striped zone's or segment's data sits.
    fn layout(&self, zone: ZoneKey) -> Layout {
        Layout { staggered: !self.is_segment(zone), ..self.p.layout() }
    }

    /// Bytes a zone (or segment) holds at most.
    fn capacity_bytes(&self, zone: ZoneKey) -> u64 {
        let g = self.geometry(zone.0);
        match self.is_segment(zone) {
            true => g.segment_blocks * g.block_bytes,
            false => g.cap_blocks * g.block_bytes,
        }
    }

    /// The zone holding `lba` and the byte offset of `lba` in it.
    fn locate(&self, nsid: u32, lba: u64) -> (ZoneKey, u64) {
        let g = self.geometry(nsid);
        if g.zone_blocks == 0 {
            return ((nsid, CONVENTIONAL), lba * g.block_bytes);
        }
        let z = lba / g.zone_blocks;
        ((nsid, z as u32), (lba - z * g.zone_blocks) * g.block_bytes)
    }

    /// Stripes of erase blocks (an erase block on each of the zone's dies)
    /// a write of `bytes` at byte `at` of `zone` enters, its first stripe
    /// not counted (the zone's open binds it).
    fn stripes_entered(&self, zone: ZoneKey, at: u64, bytes: u64) -> u64 {
        if zone.1 == CONVENTIONAL || self.p.stripe_open == 0 || bytes == 0 {
            return 0;
        }
        let stripe = self.p.unit * self.p.units_per_block * self.p.stripe.max(1) as u64;
        // Stripe starts m · stripe (m ≥ 1) with at ≤ m · stripe < at + bytes.
        let first = at.div_ceil(stripe).max(1);
        let last = (at + bytes - 1) / stripe;
        (last + 1).saturating_sub(first)
    }

    /// Die `i` (of `zone_stripe_dies`) of a zone's die set: a zone's set
    /// is `zone_stripe_dies` consecutive dies (consecutive dies sit on
    /// different channels), sets of neighbouring zones side by side.
    fn set_die(&self, zone: ZoneKey, i: u64) -> u32 {
        let d = self.p.dies as u64;
        let s = self.p.stripe as u64;
        if self.is_segment(zone) {
            // A segment is an erase block on every die, from die 0.
            return (i % d) as u32;
        }
        match zone.1 {
            CONVENTIONAL => (i % d) as u32,
            z => ((z as u64 * s + i % s) % d) as u32,
        }
    }

    /// The die holding program unit `k` of `zone`: a fixed mapping, as
    /// the drive's. A zone's consecutive program units rotate over its die
    /// set starting at a die that depends on the zone, so a zone read or
    /// written alone uses all its dies in turn, and zones written together
    /// start on dies spread over the set (zones written in step do not
    /// queue on the same dies).
    fn die_of(&self, zone: ZoneKey, k: u64) -> u32 {
        if self.is_segment(zone) {
            return self.set_die(zone, k);
        }
        match zone.1 {
            CONVENTIONAL => self.set_die(zone, k),
            // The radical inverse of the zone index (its bits reversed, as
            // a fraction) times the set size: any 2^n consecutive zones
            // aligned on 2^n start on evenly spaced dies.
            z => {
                let offset = (z.reverse_bits() as u64 * self.p.stripe as u64) >> 32;
                self.set_die(zone, k + offset)
            }
        }
    }

    /// Array read time of `[off, off + bytes)` inside one program unit:
    /// one sense per page group (a page on every plane) touched, each as
    /// long as its page level.
    fn sense(&self, off_in_unit: u64, bytes: u64) -> u64 {
        let sb = self.p.sense_bytes;
        let levels = &self.p.read_levels;
        let (g0, g1) = (off_in_unit / sb, (off_in_unit + bytes - 1) / sb);
        (g0..=g1).map(|g| levels[g as usize % levels.len()]).sum()
    }

    /// Die reads for the written runs of a read: pieces split at program
    /// unit boundaries (in a striped zone at its chunks); data still in the
    /// buffer needs none.
    fn pieces(&self, nsid: u32, runs: &[(u64, u64)], out: &mut Vec<Piece>) {
        if self.geometry(nsid).segment_blocks > 0 {
            return self.segment_pieces(nsid, runs, out);
        }
        let bs = self.geometry(nsid).block_bytes;
        let unit = self.p.unit;
        for &(lba, blocks) in runs {
            let (zone, mut off) = self.locate(nsid, lba);
            let end = off + blocks * bs;
            let sim = self.zones.get(&zone);
            let striped = self.is_striped(zone);
            let span = if striped { self.p.chunk } else { unit };
            while off < end {
                let (k, in_unit) = if striped {
                    self.layout(zone).physical(off)
                } else {
                    (off / unit, off % unit)
                };
                let piece_end = end.min((off / span + 1) * span);
                let bytes = piece_end - off;
                let on_flash = match (zone.1, sim) {
                    (CONVENTIONAL, _) | (_, None) => true,
                    (_, Some(z)) => z.is_programmed(k * unit + in_unit),
                };
                if on_flash {
                    out.push(Piece {
                        die: self.die_of(zone, k),
                        bytes,
                        sense: self.sense(in_unit, bytes),
                    });
                }
                off = piece_end;
            }
        }
    }

    fn plan(&mut self, op: Op) -> Vec<Step> {
        let data = matches!(op, Op::Read { .. } | Op::Write { .. } | Op::Copy { .. });
        let hk = if data { self.housekeeping() } else { 0 };
        let mut s = self.plan_command(op);
        if let Some(Step::Unit { ns, .. }) = s.iter_mut().find(|st| matches!(st, Step::Unit { .. }))
        {
            *ns += hk;
        }
        s
    }

    /// The steps of a command, without housekeeping.
    fn plan_command(&mut self, op: Op) -> Vec<Step> {
        let p = &self.p;
        let mut s = vec![Step::Delay(p.fetch)];
        match op {
            Op::Other => s.push(Step::unit(p.other)),
            Op::Flush => s.push(Step::unit(p.flush)),
            Op::Report { bytes } => {
                s.push(Step::unit(p.report));
                s.push(Step::LinkOut(bytes));
            }
            Op::Read { nsid, lba, blocks, runs } => {
                s.push(Step::unit(p.read));
                let mut pieces = Vec::new();
                self.pieces(nsid, runs.as_slice(), &mut pieces);
                s.push(Step::Read(pieces));
                s.push(Step::LinkOut(blocks * self.geometry(nsid).block_bytes));
                let _ = lba;
            }
            Op::Write { nsid, lba, blocks, opened, filled, dma, append, placed, zrwa_commit } => {
                let block_bytes = self.geometry(nsid).block_bytes;
                let bytes = blocks * block_bytes;
                let (zone, at) = self.locate(nsid, lba);
                // What goes to the flash: the blocks written, or in a ZRWA
                // the blocks committed.
                let (at, flash) = match zrwa_commit {
                    Some((from, n)) => (self.locate(nsid, from).1, n * block_bytes),
                    None => (at, bytes),
                };
                let entered = self.stripes_entered(zone, at, flash);
                let switched = self.write_context.replace(zone) != Some(zone);
                let p = &self.p;
                let (pre, overlap) =
                    if append { (p.append, p.append_overlap) } else { (p.write, p.write_overlap) };
                let open = if opened { p.implicit_open } else { 0 };
                // The context fetch is a wait, not processing: the unit
                // serves other commands meanwhile.
                if switched && p.zone_switch > 0 {
                    s.push(Step::Delay(p.zone_switch));
                }
                // Blocks smaller than the 4 KiB mapping unit are handled one
                // by one (Write and Zone Append; not Write Zeroes).
                let small = if dma && block_bytes < 4096 { blocks * p.small_lba } else { 0 };
                s.push(Step::Unit { ns: pre + open + small, ahead: overlap });
                if entered > 0 {
                    s.push(Step::Mgmt(entered * p.stripe_open));
                }
                if flash > 0 {
                    s.push(Step::Admit(flash));
                }
                s.push(Step::Transfer { bytes, dma });
                if !placed.is_empty() {
                    self.segment_adds(nsid, &placed, true, &mut s);
                } else if flash > 0 || filled {
                    s.push(Step::ZoneAdd { zone, bytes: flash, filled });
                }
                if append {
                    s.push(Step::Serial(zone));
                }
            }
            Op::Copy { nsid, sources, dest, blocks, opened, filled, placed, zrwa_commit } => {
                let block_bytes = self.geometry(nsid).block_bytes;
                let bytes = blocks * block_bytes;
                let flash = zrwa_commit.map_or(bytes, |(_, n)| n * block_bytes);
                let (zone, _) = self.locate(nsid, dest);
                let open = if opened { p.implicit_open } else { 0 };
                s.push(Step::Unit { ns: p.other + open, ahead: p.write_overlap });
                let mut pieces = Vec::new();
                self.pieces(nsid, &sources, &mut pieces);
                s.push(Step::Read(pieces));
                if flash > 0 {
                    s.push(Step::Admit(flash));
                }
                s.push(Step::Transfer { bytes, dma: false });
                if !placed.is_empty() {
                    self.segment_adds(nsid, &placed, true, &mut s);
                } else if flash > 0 || filled {
                    s.push(Step::ZoneAdd { zone, bytes: flash, filled });
                }
            }
            Op::ZoneSend { nsid, action, zones, committed } => {
                self.plan_zone_send(nsid, action, &zones, &mut s);
                if let (Some(z), true) = (zones.first(), committed > 0) {
                    self.plan_commit(nsid, z, committed, &mut s);
                }
            }
        }
        s.push(Step::Post);
        s.push(Step::Complete);
        s
    }

    fn plan_zone_send(
        &mut self,
        nsid: u32,
        action: ZoneSendAction,
        zones: &[ZoneBefore],
        s: &mut Vec<Step>,
    ) {
        let n = zones.len().max(1) as u64;
        self.track_write_context(nsid, action, zones);
        let p = &self.p;
        match action {
            ZoneSendAction::Open => s.push(Step::unit(p.open * n)),
            ZoneSendAction::Close => {
                let buffered = zones
                    .iter()
                    .filter(|z| self.zones.get(&(nsid, z.index)).is_some_and(|zs| !zs.settled()))
                    .count() as u64;
                s.push(Step::unit(p.close * n + p.close_buffered * buffered));
            }
            ZoneSendAction::Finish => {
                s.push(Step::unit(p.finish * n));
                for z in zones {
                    self.plan_finish(nsid, z, s);
                }
            }
            ZoneSendAction::Reset => {
                s.push(Step::unit(p.reset * n));
                s.push(Step::Mgmt(p.reset_metadata * n));
                let mut work = Vec::new();
                for z in zones {
                    self.plan_reset(nsid, z, &mut work);
                }
                if !work.is_empty() {
                    s.push(Step::DieOps(work));
                }
            }
            _ => s.push(Step::unit(p.other * n)),
        }
    }

    /// The write context a zone management command leaves in the processing
    /// unit: an explicit Open of one zone brings that zone's in (its first
    /// write pays no switch), and a Close, Finish or Reset of the zone held
    /// saves or drops it (the next write to any zone fetches its own).
    fn track_write_context(&mut self, nsid: u32, action: ZoneSendAction, zones: &[ZoneBefore]) {
        match action {
            ZoneSendAction::Open if zones.len() == 1 => {
                self.write_context = Some((nsid, zones[0].index));
            }
            ZoneSendAction::Close | ZoneSendAction::Finish | ZoneSendAction::Reset
                if zones.iter().any(|z| self.write_context == Some((nsid, z.index))) =>
            {
                self.write_context = None;
            }
            _ => {}
        }
    }

    /// Flush Explicit ZRWA Range: the committed blocks go through the buffer
    /// to the dies, as written data does.
    fn plan_commit(&mut self, nsid: u32, z: &ZoneBefore, committed: u64, s: &mut Vec<Step>) {
        let g = self.geometry(nsid);
        let bytes = committed * g.block_bytes;
        let filled = z.written + committed >= g.cap_blocks;
        let zone = (nsid, z.index);
        let entered = self.stripes_entered(zone, z.written * g.block_bytes, bytes);
        if entered > 0 {
            s.push(Step::Mgmt(entered * self.p.stripe_open));
        }
        s.push(Step::Admit(bytes));
        s.push(Step::ZoneAdd { zone, bytes, filled });
    }

    /// Finish: a zone with data is padded to its capacity through the
    /// buffer, and done when all of it is programmed.
    fn plan_finish(&mut self, nsid: u32, z: &ZoneBefore, s: &mut Vec<Step>) {
        let g = self.geometry(nsid);
        if z.written == 0 || z.state == ZoneState::Full || g.zone_blocks == 0 {
            return;
        }
        let key = (nsid, z.index);
        let written = z.written * g.block_bytes;
        let gen = self.next_gen;
        let striped = self.is_striped(key);
        let p = &self.p;
        let sim = self.zones.entry(key).or_insert_with(|| match striped {
            true => ZoneSim::striped(gen, written, &p.layout(), p.unit),
            false => ZoneSim::new(gen, written),
        });
        if sim.gen == gen {
            self.next_gen += 1;
        }
        sim.host_end = Some(written);
        let left = (g.cap_blocks * g.block_bytes).saturating_sub(written);
        s.push(Step::Pad { zone: key, left });
        s.push(Step::AwaitProgrammed(key));
    }

    /// Reset: the zone's data still in the buffer is dropped and its queued
    /// programs cancelled; every die holding its data erases its blocks
    /// (closing a partly programmed block first when the zone was neither
    /// finished nor filled); blocks of Finish padding are erased in the
    /// background.
    fn plan_reset(&mut self, nsid: u32, z: &ZoneBefore, work: &mut Vec<DieWork>) {
        let g = self.geometry(nsid);
        if g.zone_blocks == 0 || z.written == 0 && z.state == ZoneState::Empty {
            return;
        }
        let key = (nsid, z.index);
        let unit = self.p.unit;
        let cap = g.cap_blocks * g.block_bytes;
        let written = z.written * g.block_bytes;
        let (flash, host) = match self.zones.remove(&key) {
            Some(old) => {
                // Staged data holds no buffer room.
                let mut freed = old.fill - old.dispatched - old.staged;
                for die in self.dies.iter_mut() {
                    let q = &mut die.queues[CLASS_PROGRAM];
                    q.retain(|op| match op {
                        DieOp::Program(id) => {
                            let pr = self.progs[*id as usize].expect("queued program is live");
                            if pr.zone == key && pr.gen == old.gen {
                                freed += pr.bytes;
                                self.progs[*id as usize] = None;
                                self.free_progs.push(*id);
                                self.progs_live -= 1;
                                false
                            } else {
                                true
                            }
                        }
                        _ => true,
                    });
                }
                let cancelled = freed - (old.fill - old.dispatched - old.staged);
                let flash = old.dispatched - cancelled;
                for w in old.waiters {
                    self.schedule(self.now, Ev::Job(w));
                }
                self.free_buffer(freed);
                (flash, old.host_end.unwrap_or(flash).min(flash))
            }
            None => {
                let host = written.min(cap);
                let finished = z.state == ZoneState::Full && written < cap;
                (if finished { cap } else { host }, host)
            }
        };
        // Program units on flash per die: (host data, all).
        let mut per_die: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
        if self.is_striped(key) {
            let l = self.layout(key);
            for i in 0..l.stripe {
                let all = l.die_units(i, flash);
                if all > 0 {
                    per_die.insert(self.die_of(key, i), (l.die_units(i, host), all));
                }
            }
        } else {
            for k in 0..flash.div_ceil(unit) {
                let die = self.die_of(key, k);
                let e = per_die.entry(die).or_default();
                e.0 += u64::from(k < host.div_ceil(unit));
                e.1 += 1;
            }
        }
        let upb = self.p.units_per_block;
        let unfinished = z.state != ZoneState::Full;
        let erase = self.erase_time(key);
        for (die, (h, all)) in per_die {
            if h > 0 && unfinished && h % upb != 0 {
                let ns = self.p.close_block;
                work.push(DieWork { die, ns, class: CLASS_ERASE, wait: true });
            }
            for _ in 0..h.div_ceil(upb) {
                work.push(DieWork { die, ns: erase, class: CLASS_ERASE, wait: true });
            }
            for _ in 0..all.div_ceil(upb).saturating_sub(h.div_ceil(upb)) {
                work.push(DieWork { die, ns: erase, class: CLASS_BACKGROUND, wait: false });
            }
        }
    }

    // ---- execution ------------------------------------------------------

    fn job(&mut self, id: u32) -> &mut Job {
        self.jobs[id as usize].as_mut().expect("live job")
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Job(id) => self.advance(id),
            Ev::SenseDone(die, epoch) => {
                let d = &self.dies[die as usize];
                if d.epoch != epoch {
                    return;
                }
                if let Some(DieOp::Read { bytes, .. }) = d.current {
                    let end = self.channel(die, bytes);
                    self.dies[die as usize].until = end;
                    self.schedule(end, Ev::DieFree(die, epoch));
                }
            }
            Ev::DieFree(die, epoch) => {
                if self.dies[die as usize].epoch == epoch {
                    self.die_free(die);
                }
            }
            Ev::Suspend(die) => {
                self.dies[die as usize].suspend_armed = false;
                let d = &self.dies[die as usize];
                let erasing = matches!(d.current, Some(DieOp::Timed { .. }));
                if erasing && d.suspended.is_none() && !d.queues[CLASS_READ].is_empty() {
                    let read = self.dies[die as usize].queues[CLASS_READ].pop_front();
                    if let Some(read) = read {
                        // Suspends now, or re-arms when the erase under way
                        // started or resumed since the event was set.
                        self.die_request_front(die, read);
                    }
                }
            }
        }
    }

    /// Runs job `id` from its current step until it has to wait.
    fn advance(&mut self, id: u32) {
        loop {
            let now = self.now;
            let job = self.job(id);
            let step = std::mem::replace(&mut job.steps[job.at], Step::Complete);
            job.at += 1;
            match step {
                Step::Delay(ns) => {
                    self.schedule(now + ns, Ev::Job(id));
                    return;
                }
                Step::Unit { ns, ahead } => {
                    let done = self.unit(now, ns + ahead);
                    self.job(id).unit_done = done;
                    self.schedule(done - ahead, Ev::Job(id));
                    return;
                }
                Step::Mgmt(ns) => {
                    let start = self.mgmt_free.max(now);
                    self.mgmt_free = start + ns;
                    self.schedule(start + ns, Ev::Job(id));
                    return;
                }
                Step::Read(pieces) => {
                    let n = pieces.len() as u32;
                    for pc in pieces {
                        let op = DieOp::Read { job: id, bytes: pc.bytes, sense: pc.sense };
                        self.die_request(pc.die, op, CLASS_READ);
                    }
                    if n > 0 {
                        self.job(id).pending += n;
                        return;
                    }
                }
                Step::LinkOut(bytes) => {
                    let list = needs_prp_list(bytes);
                    let start = now + if list { self.p.prp_list } else { 0 };
                    let begin = self.to_host_free.max(start);
                    // The DMA engine's per-command work takes the link
                    // as the data does: the read ceilings at every size.
                    let work = self.p.to_host_command + if list { self.p.to_host_list } else { 0 };
                    self.to_host_free = begin + work + xfer(bytes, self.p.to_host_mbps);
                    self.schedule(self.to_host_free, Ev::Job(id));
                    return;
                }
                Step::Admit(bytes) => {
                    let bytes = bytes.min(self.p.buffer);
                    let job = self.job(id);
                    if job.granted >= bytes {
                        job.granted -= bytes;
                    } else if !self.try_admit(bytes) {
                        let job = self.job(id);
                        job.at -= 1;
                        job.steps[job.at] = Step::Admit(bytes);
                        self.buffer_waiters.push_back((id, bytes));
                        self.relieve();
                        return;
                    }
                }
                Step::Transfer { bytes, dma } => {
                    let mut end = self.job(id).unit_done.max(now);
                    if dma {
                        let start = now + if needs_prp_list(bytes) { self.p.prp_list } else { 0 };
                        let begin = self.from_host_free.max(start);
                        self.from_host_free = begin + xfer(bytes, self.p.from_host_mbps);
                        end = end.max(self.from_host_free);
                    }
                    self.schedule(end, Ev::Job(id));
                    return;
                }
                Step::ZoneAdd { zone, bytes, filled } => {
                    self.zone_add(zone, bytes);
                    // A Finish waiting on the zone flushes late data too.
                    let waited = self.zones.get(&zone).is_some_and(|z| !z.waiters.is_empty());
                    self.dispatch(zone, filled || waited);
                }
                Step::Serial(zone) => {
                    let ns = self.p.append_serial;
                    let gen = self.next_gen;
                    if !self.zones.contains_key(&zone) {
                        let fresh = self.fresh_zone(zone, gen);
                        self.zones.insert(zone, fresh);
                    }
                    let z = self.zones.get_mut(&zone).expect("zone just made");
                    if z.gen == gen {
                        self.next_gen += 1;
                    }
                    let start = z.serial_free.max(now);
                    z.serial_free = start + ns;
                    self.schedule(start + ns, Ev::Job(id));
                    return;
                }
                Step::SegmentAdd { zone, gen, at, bytes, buffered } => {
                    self.segment_add(zone, gen, at, bytes, buffered);
                }
                Step::GcRead(pieces) => {
                    let n = pieces.len() as u32;
                    for pc in pieces {
                        let op = DieOp::Read { job: id, bytes: pc.bytes, sense: pc.sense };
                        self.die_request(pc.die, op, CLASS_GC_READ);
                    }
                    if n > 0 {
                        self.job(id).pending += n;
                        return;
                    }
                }
                Step::AwaitRetired(zone, gen) => {
                    if let Some(z) = self.retired.get_mut(&(zone, gen)) {
                        z.waiters.push(id);
                        return;
                    }
                }
                Step::Unblock(zone, gen) => self.unblock(zone, gen),
                Step::Pad { zone, mut left } => {
                    let granted = std::mem::take(&mut self.job(id).granted);
                    if granted > 0 {
                        self.zone_add(zone, granted);
                        left -= granted.min(left);
                        self.dispatch(zone, false);
                    }
                    while left > 0 {
                        let fill = self.zones.get(&zone).map_or(0, |z| z.fill);
                        let len = left.min(self.p.unit - fill % self.p.unit);
                        if !self.try_admit(len) {
                            let job = self.job(id);
                            job.at -= 1;
                            job.steps[job.at] = Step::Pad { zone, left };
                            self.buffer_waiters.push_back((id, len));
                            self.relieve();
                            return;
                        }
                        self.zone_add(zone, len);
                        left -= len;
                        self.dispatch(zone, false);
                    }
                    self.dispatch(zone, true);
                }
                Step::AwaitProgrammed(zone) => {
                    self.dispatch(zone, true);
                    if let Some(z) = self.zones.get_mut(&zone) {
                        if !z.settled() {
                            z.waiters.push(id);
                            return;
                        }
                    }
                }
                Step::DieOps(work) => {
                    let mut n = 0;
                    for w in work {
                        let job = w.wait.then_some(id);
                        n += u32::from(w.wait);
                        self.die_request(w.die, DieOp::Timed { job, ns: w.ns }, w.class);
                    }
                    if n > 0 {
                        self.job(id).pending += n;
                        return;
                    }
                }
                Step::Post => {
                    self.schedule(now + self.p.post, Ev::Job(id));
                    return;
                }
                Step::Complete => {
                    let job = self.jobs[id as usize].take().expect("live job");
                    self.free_jobs.push(id);
                    if !job.cancelled && !job.internal {
                        if let Some(r) = self.ready.get_mut(job.cqid as usize) {
                            if r.is_empty() {
                                self.ready_since[job.cqid as usize] = self.wall;
                            }
                            r.push_back((job.cqe, self.now));
                        }
                        if let Some(n) = self.inflight.get_mut(job.cqid as usize) {
                            *n = n.saturating_sub(1);
                        }
                        self.completions += 1;
                    }
                    return;
                }
            }
        }
    }

    /// A sub-operation of job `id` finished.
    fn piece_done(&mut self, id: u32) {
        let job = self.job(id);
        job.pending -= 1;
        if job.pending == 0 {
            self.schedule(self.now, Ev::Job(id));
        }
    }

    /// Reserves a processing unit for `ns` from `t`; returns the end.
    fn unit(&mut self, t: u64, ns: u64) -> u64 {
        let (i, free) = self
            .units
            .iter()
            .copied()
            .enumerate()
            .min_by_key(|&(i, f)| (f, i))
            .expect("at least one unit");
        let end = free.max(t) + ns;
        self.units[i] = end;
        end
    }

    /// Reserves die `die`'s channel for a transfer of `bytes` from now;
    /// returns its end.
    fn channel(&mut self, die: u32, bytes: u64) -> u64 {
        let ch = (die % self.p.channels) as usize;
        let start = self.channel_free[ch].max(self.now);
        let end = start + self.p.channel_overhead + xfer(bytes, self.p.channel_mbps);
        self.channel_free[ch] = end;
        end
    }

    /// tPROG of one program: the nominal time, varied by a fixed amount
    /// for its place (zone, unit) so runs repeat exactly.
    fn program_time(&self, prog: &Prog) -> u64 {
        // A die's first program into an erase block opens the block.
        let k = prog.start / self.p.unit;
        let per_die = match prog.zone.1 {
            CONVENTIONAL => k / self.p.dies as u64,
            _ if self.is_segment(prog.zone) => k / self.p.dies as u64,
            _ => k / self.p.stripe as u64,
        };
        let pad = if self.is_striped(prog.zone) { self.layout(prog.zone).pad(k) } else { 0 };
        let opens = prog.start % self.p.unit == pad && per_die % self.p.units_per_block == 0;
        let open = if opens { self.p.block_open } else { 0 };
        let v = self.p.program_variation;
        if v == 0.0 {
            return self.p.program + open;
        }
        let mut x = (prog.zone.0 as u64) << 32 ^ prog.zone.1 as u64;
        x = x.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (prog.start / self.p.unit);
        let u = unit_interval(x) * 2.0 - 1.0;
        (self.p.program as f64 * (1.0 + v * u)).round() as u64 + open
    }

    /// tBERS of the blocks of `zone` at this reset: `erase_us` × (1 + e),
    /// `e` uniform in [0, `erase_variation`), drawn from the zone and the
    /// number of resets so far (the wear of the blocks the zone held, the
    /// same for all of them).
    fn erase_time(&mut self, zone: ZoneKey) -> u64 {
        self.resets += 1;
        let w = self.p.erase_variation;
        if w <= 0.0 {
            return self.p.erase;
        }
        let x = ((zone.0 as u64) << 32 ^ zone.1 as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93)
            ^ self.resets.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let e = unit_interval(x) * w;
        (self.p.erase as f64 * (1.0 + e)).round() as u64
    }

    /// Housekeeping the processing unit runs before the next data
    /// command's processing (the mapping and buffer bookkeeping the
    /// firmware defers and runs in batches): with probability
    /// `housekeeping_fraction` a task of exponentially distributed length,
    /// drawn from the data command's number.
    fn housekeeping(&mut self) -> u64 {
        self.commands += 1;
        let (f, mean) = (self.p.housekeeping_fraction, self.p.housekeeping_mean);
        if f <= 0.0 || mean == 0 {
            return 0;
        }
        let u = unit_interval(self.commands.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        if u >= f {
            return 0;
        }
        // Given a task, u / f is uniform in [0, 1): an exponential draw.
        let e = -(1.0 - u / f).ln();
        (mean as f64 * e).round() as u64
    }

    /// Suspend latency and most suspensions of a die operation: programs
    /// use program suspend; a reset's die work (erases, and the programs
    /// closing a block before its erase) uses erase suspend.
    fn suspension(&self, op: &DieOp) -> (u64, u32) {
        match op {
            DieOp::Timed { .. } => (self.p.erase_suspend, self.p.erase_suspend_limit),
            _ => (self.p.suspend, self.p.suspend_limit),
        }
    }

    fn die_request(&mut self, die: u32, op: DieOp, class: usize) {
        let d = &self.dies[die as usize];
        let array_op = matches!(d.current, Some(DieOp::Program(_) | DieOp::Timed { .. }));
        let (suspend, limit) = d.current.as_ref().map_or((0, 0), |c| self.suspension(c));
        if d.current.is_none() {
            self.die_start(die, op, 0);
        } else if class == CLASS_READ && array_op && d.suspended.is_none() && d.suspends < limit {
            let erasing = matches!(d.current, Some(DieOp::Timed { .. }));
            let due = d.array_from + self.p.erase_resume_min;
            if erasing && self.p.erase_resume_min > 0 && self.now < due {
                // The erase has not progressed enough since it started or
                // resumed: the read waits for the moment it may suspend.
                self.dies[die as usize].queues[class].push_back(op);
                self.arm_suspend(die, due);
                return;
            }
            self.suspend_for(die, op, suspend);
        } else {
            self.dies[die as usize].queues[class].push_back(op);
        }
    }

    /// [`Sim::die_request`] for a read that waited for an erase to progress
    /// (it goes first among the waiting reads).
    fn die_request_front(&mut self, die: u32, read: DieOp) {
        let d = &self.dies[die as usize];
        let (suspend, limit) = d.current.as_ref().map_or((0, 0), |c| self.suspension(c));
        let due = d.array_from + self.p.erase_resume_min;
        if d.suspends >= limit {
            // The erase used up its suspensions: the read waits for its end.
            self.dies[die as usize].queues[CLASS_READ].push_front(read);
        } else if self.now < due {
            self.dies[die as usize].queues[CLASS_READ].push_front(read);
            self.arm_suspend(die, due);
        } else {
            self.suspend_for(die, read, suspend);
        }
    }

    /// Schedules a suspend of the die's erase at `due`, once.
    fn arm_suspend(&mut self, die: u32, due: u64) {
        if !std::mem::replace(&mut self.dies[die as usize].suspend_armed, true) {
            self.schedule(due, Ev::Suspend(die));
        }
    }

    /// Suspends the program or erase under way on `die` (once its data is
    /// on the die) and starts `read` first.
    fn suspend_for(&mut self, die: u32, read: DieOp, suspend: u64) {
        let d = &mut self.dies[die as usize];
        let at = self.now.max(d.array_from);
        let left = d.until.saturating_sub(at);
        let current = d.current.take().expect("busy die");
        d.suspended = Some((current, left, d.suspends + 1));
        d.epoch += 1;
        let delay = at - self.now + suspend;
        self.die_start(die, read, delay);
    }

    /// Starts `op` on an idle die, `delay` ns from now.
    fn die_start(&mut self, die: u32, op: DieOp, delay: u64) {
        let now = self.now + delay;
        let epoch = self.dies[die as usize].epoch;
        self.dies[die as usize].current = Some(op);
        match op {
            DieOp::Read { sense, .. } => self.schedule(now + sense, Ev::SenseDone(die, epoch)),
            DieOp::Program(id) => {
                let prog = self.progs[id as usize].expect("live program");
                let array_from = self.channel(die, prog.bytes);
                let until = array_from + self.program_time(&prog);
                let d = &mut self.dies[die as usize];
                (d.array_from, d.until, d.suspends) = (array_from, until, 0);
                self.schedule(until, Ev::DieFree(die, epoch));
            }
            DieOp::Timed { ns, .. } => {
                let d = &mut self.dies[die as usize];
                (d.array_from, d.until, d.suspends) = (now, now + ns, 0);
                self.schedule(now + ns, Ev::DieFree(die, epoch));
            }
        }
    }

    fn die_free(&mut self, die: u32) {
        match self.dies[die as usize].current.take() {
            Some(DieOp::Read { job, .. }) => self.piece_done(job),
            Some(DieOp::Program(id)) => self.program_done(id),
            Some(DieOp::Timed { job: Some(job), .. }) => self.piece_done(job),
            _ => {}
        }
        let d = &mut self.dies[die as usize];
        if d.current.is_some() {
            return;
        }
        if let Some(read) = d.queues[CLASS_READ].pop_front() {
            self.die_start(die, read, 0);
        } else if let Some((op, left, suspends)) = d.suspended.take() {
            // Resume: the rest of the array work, after the resume latency.
            let (suspend, _) = self.suspension(&op);
            let d = &mut self.dies[die as usize];
            let until = self.now + suspend + left;
            let epoch = d.epoch;
            (d.current, d.array_from, d.until, d.suspends) = (Some(op), self.now, until, suspends);
            self.schedule(until, Ev::DieFree(die, epoch));
        } else if let Some(op) = d.queues.iter_mut().find_map(|q| q.pop_front()) {
            self.die_start(die, op, 0);
        }
    }

    // ---- buffer and programs ----------------------------------------

    fn try_admit(&mut self, bytes: u64) -> bool {
        if self.buffer_waiters.is_empty() && self.buffer_used + bytes <= self.p.buffer {
            self.buffer_used += bytes;
            true
        } else {
            false
        }
    }

    fn free_buffer(&mut self, bytes: u64) {
        self.buffer_used = self.buffer_used.saturating_sub(bytes);
        while let Some(&(job, b)) = self.buffer_waiters.front() {
            if self.buffer_used + b > self.p.buffer {
                break;
            }
            self.buffer_waiters.pop_front();
            self.buffer_used += b;
            self.job(job).granted += b;
            self.schedule(self.now, Ev::Job(job));
        }
    }

    /// With writers waiting and no program under way to make room, the
    /// zone with buffered data first in order has its partial program unit
    /// programmed as it is.
    fn relieve(&mut self) {
        if self.buffer_waiters.is_empty() || self.progs_live > 0 {
            return;
        }
        let key =
            self.zones.iter().find(|(_, z)| z.buffered && z.fill > z.dispatched).map(|(k, _)| *k);
        if let Some(k) = key {
            self.dispatch(k, true);
        }
    }

    /// A zone the model has no data of yet, incarnation `gen`.
    fn fresh_zone(&self, zone: ZoneKey, gen: u32) -> ZoneSim {
        match self.is_striped(zone) {
            true => ZoneSim::striped(gen, 0, &self.layout(zone), self.p.unit),
            false => ZoneSim::new(gen, 0),
        }
    }

    fn zone_add(&mut self, zone: ZoneKey, bytes: u64) {
        let gen = self.next_gen;
        if !self.zones.contains_key(&zone) {
            let fresh = self.fresh_zone(zone, gen);
            self.zones.insert(zone, fresh);
        }
        let z = self.zones.get_mut(&zone).expect("zone just made");
        if z.gen == gen {
            self.next_gen += 1;
        }
        z.fill += bytes;
    }

    /// Programs the zone's complete program units (and, with `all`, the
    /// partial one at the end).
    fn dispatch(&mut self, zone: ZoneKey, all: bool) {
        let gen = self.zones.get(&zone).map(|z| z.gen);
        if let Some(gen) = gen {
            self.dispatch_gen(zone, gen, all);
        }
    }

    /// [`Sim::dispatch`] for incarnation `gen` of the zone (a reclaimed
    /// segment's, among the retired ones, or the current one).
    fn dispatch_gen(&mut self, zone: ZoneKey, gen: u32, all: bool) {
        if self.is_striped(zone) {
            self.dispatch_striped(zone, gen, all);
            return self.restage(zone, gen);
        }
        let unit = self.p.unit;
        loop {
            let Some(z) = self.incarnation_mut(zone, gen) else { return };
            let pending = z.fill - z.dispatched;
            if pending == 0 {
                return;
            }
            let boundary = (z.dispatched / unit + 1) * unit;
            let len = boundary - z.dispatched;
            if pending < len && !all {
                return;
            }
            let len = len.min(pending);
            let prog =
                Prog { zone, gen: z.gen, start: z.dispatched, bytes: len, buffered: z.buffered };
            z.dispatched += len;
            z.inflight += 1;
            self.start_program(prog);
        }
    }

    /// [`Sim::dispatch_gen`] for a striped zone or segment (incarnation
    /// `gen`): program units are programmed once complete, in the order
    /// the zone fills them; with `all`, what the incomplete ones hold too.
    fn dispatch_striped(&mut self, zone: ZoneKey, gen: u32, all: bool) {
        let (unit, chunk) = (self.p.unit, self.p.chunk);
        let cap = self.capacity_bytes(zone);
        let l = self.layout(zone);
        // A chunk completes its unit when it is the unit's last, or its
        // die's last in the zone (nothing more comes for the unit).
        let s = l.stripe;
        let last = |j: u64| l.ends_unit(j) || (j + s) * chunk >= cap;
        loop {
            let Some(z) = incarnation(&mut self.zones, &mut self.retired, zone, gen) else {
                return;
            };
            let j = z.scanned;
            if (j + 1) * chunk > z.fill {
                break;
            }
            z.scanned += 1;
            if !last(j) {
                continue;
            }
            // Its data below `flushed` went to an earlier program; a die's
            // last unit in the zone may hold fewer chunks.
            let u = l.physical(j * chunk).0;
            let from = l.unit_below(u, z.flushed);
            // (Data past the capacity: a write that was late for a Finish.)
            let bytes = l.unit_below(u, cap.max(z.fill)) - from;
            if bytes > 0 {
                let start = u * unit + l.pad(u) + from;
                let prog = Prog { zone, gen, start, bytes, buffered: z.buffered };
                z.dispatched += bytes;
                z.inflight += 1;
                self.start_program(prog);
            }
        }
        let Some(z) = incarnation(&mut self.zones, &mut self.retired, zone, gen) else { return };
        if !all || z.fill <= z.flushed {
            return;
        }
        let (flushed, fill) = (z.flushed, z.fill);
        z.flushed = fill;
        // Each die's last unit, if incomplete (complete ones went above).
        for i in 0..s {
            let Some(j) = l.last_chunk(i, fill) else { continue };
            if last(j) && (j + 1) * chunk <= fill {
                continue;
            }
            let u = l.physical(j * chunk).0;
            let (a, b) = (l.unit_below(u, flushed), l.unit_below(u, fill));
            if b > a {
                let z = incarnation(&mut self.zones, &mut self.retired, zone, gen)
                    .expect("zone just seen");
                let start = u * unit + l.pad(u) + a;
                let prog = Prog { zone, gen, start, bytes: b - a, buffered: z.buffered };
                z.dispatched += b - a;
                z.inflight += 1;
                self.start_program(prog);
            }
        }
    }

    /// A striped zone gathers a stripe of program units (one on each of
    /// its dies) before they are complete: what it has not handed to
    /// programs beyond one program unit is staged in the zone's own stripe
    /// area (as the drive keeps a write context per open zone), not in the
    /// write buffer, whose room bounds how far writes run ahead of the
    /// dies as it does for a zone without striping. Moves the difference
    /// between the two: room comes back as data is staged, and is taken
    /// again (even past the buffer's size: writes then wait) as complete
    /// program units leave the stripe area for the dies.
    /// Garbage collection's segments hold no buffer room, so nothing
    /// moves for them.
    fn restage(&mut self, zone: ZoneKey, gen: u32) {
        let unit = self.p.unit;
        let Some(z) = self.incarnation_mut(zone, gen).filter(|z| z.buffered) else { return };
        let target = (z.fill - z.dispatched).saturating_sub(unit);
        let before = std::mem::replace(&mut z.staged, target);
        if target > before {
            self.free_buffer(target - before);
        } else {
            self.buffer_used += before - target;
        }
    }

    /// Queues program `prog` on its die (or parks it until an erase).
    fn start_program(&mut self, prog: Prog) {
        let (zone, gen) = (prog.zone, prog.gen);
        let k = prog.start / self.p.unit;
        let id = slot_in(&mut self.progs, &mut self.free_progs, prog);
        self.progs_live += 1;
        if self.must_wait_erase(zone, gen) {
            self.parked.entry(zone).or_default().push(id);
            return;
        }
        let die = self.die_of(zone, k);
        self.die_request(die, DieOp::Program(id), CLASS_PROGRAM);
    }

    fn program_done(&mut self, id: u32) {
        let prog = self.progs[id as usize].take().expect("live program");
        self.free_progs.push(id);
        self.progs_live -= 1;
        if self.is_segment(prog.zone) {
            self.segment_programmed(&prog);
            if prog.buffered {
                self.free_buffer(prog.bytes);
            }
            self.relieve();
            return;
        }
        if let Some(z) = self.zones.get_mut(&prog.zone) {
            if z.gen == prog.gen {
                z.inflight -= 1;
                let end = prog.start + prog.bytes;
                if prog.start <= z.programmed {
                    z.programmed = z.programmed.max(end);
                    while let Some((&s, &e)) = z.done.first_key_value() {
                        if s > z.programmed {
                            break;
                        }
                        z.programmed = z.programmed.max(e);
                        z.done.pop_first();
                    }
                } else {
                    z.done.insert(prog.start, end);
                }
                if z.settled() && !z.waiters.is_empty() {
                    for w in std::mem::take(&mut z.waiters) {
                        self.schedule(self.now, Ev::Job(w));
                    }
                }
            }
        }
        self.free_buffer(prog.bytes);
        self.relieve();
    }
}
