//! The timing model: when each command completes.
//!
//! A mechanistic model of an SSD, not a table of outputs. Every command
//! moves through the parts of a drive (parameters in [`TimingProfile`]):
//!
//! 1. **Host interface.** The submission entry is fetched (`fetch_ns`); a
//!    transfer over two memory pages first fetches its PRP list
//!    (`prp_list_ns`); data crosses the PCIe link, one pipe per direction
//!    shared by all commands (`link_to_host_mbps`, `link_from_host_mbps`);
//!    toward the host, the DMA engine's own work per command takes the
//!    link before the data (`link_to_host_command_ns`, plus
//!    `link_to_host_list_ns` with a PRP list), so one serial resource sets
//!    the read ceilings at every request size; the completion reaches the
//!    host after `post_ns`.
//! 2. **Controller.** `processing_units` firmware cores execute commands
//!    first come, first served, each command costing its opcode's time
//!    (`read_ns`, `write_ns`, `append_ns`, `open_ns`, ...). A write's
//!    bookkeeping (`write_overlap_ns`) overlaps its data transfer, on the
//!    core that processed it: a core runs a command to completion before
//!    it takes the next. A Zone
//!    Append additionally takes the zone's write pointer once its data is
//!    in the buffer (`append_serial_ns`), so appends to one zone take
//!    turns there while appends to different zones do not. The first
//!    write to a zone it opens implicitly pays for opening it, and a write
//!    or append to another zone than the one whose write context the
//!    controller holds first waits for that context to be fetched
//!    (`zone_switch_ns`, a wait during which the unit serves other
//!    commands). With
//!    logical blocks under 4 KiB, writes and appends also cost
//!    `small_lba_ns` per block (each block is merged into the 4 KiB
//!    mapping unit on its own). Before a
//!    data command's processing the unit may first finish a housekeeping
//!    task (`housekeeping_fraction` of them, exponentially long with mean
//!    `housekeeping_mean_ns`, drawn from the command's number): the tail
//!    of QD 1 latencies.
//! 3. **Write buffer.** A write completes once its data is in the buffer
//!    (`write_buffer_kib`). The buffer drains to the dies one program unit
//!    at a time; when it is full, writes wait for room. Reads of data still
//!    in the buffer need no flash. A write that enters a new stripe of its
//!    zone's erase blocks (`block_kib` on each of its dies; the first is
//!    bound at the open) first waits for the management core to bind it
//!    (`stripe_open_us`), while the dies go on programming.
//! 4. **Flash.** `channels` × `dies_per_channel` dies of `planes` planes,
//!    `page_kib` pages, `bits_per_cell` pages per word line programmed
//!    together: the program unit. A zone's data rotates over its set of
//!    `zone_stripe_dies` dies in a fixed order, starting at a die that
//!    depends on the zone (the radical inverse of its index: zones
//!    numbered together start on dies spread over the set), so a zone read
//!    alone uses all its dies and zones written together in step do not
//!    queue on the same dies. It rotates in program units, or in smaller
//!    chunks (`zone_stripe_kib`: a page, a page on every plane): each die
//!    then gathers its program unit from several stripe rows, the zone's
//!    incomplete stripe waits beside the write buffer (which still holds
//!    one unit of it), the dies' units are staggered (die `i` starts its
//!    first unit `i` mod rows chunks in) so that some complete in every
//!    row, and a large read of consecutive data goes to several dies and
//!    channels at once. A read senses its
//!    pages (`read_us` by page level) and moves them over its die's
//!    channel (`channel_mbps` plus `channel_overhead_ns` per transfer); a
//!    program moves a unit over the channel and programs it (`program_us`,
//!    plus `block_open_us` for a die's first program into an erase block);
//!    an erase takes `erase_us` per `block_kib` block (times 1 + up to
//!    `erase_variation`, one draw per reset). A die does one thing
//!    at a time and prefers reads to programs to erases. A read for a die
//!    that is programming suspends the program (`suspend_us`, at most
//!    `suspend_limit` times per program, then it waits): reads under
//!    writes wait, and that is where interference comes from. A reset's
//!    die work (erases, block closes) is suspended the same way at its own
//!    cost (`erase_suspend_us`, `erase_suspend_limit`), once the erase
//!    has run `erase_resume_min_us` since it started or resumed (a read
//!    arriving earlier waits for that): on the `zn540` profile cheaply,
//!    without practical limit and after 50 µs, so reads notice resets
//!    little, in their tail, while resets take longer under reads, as on
//!    the drive.
//! 5. **Zone management.** Finish pads the rest of a written zone through
//!    the buffer and the dies (the drive's write bandwidth) and completes
//!    when all of it is programmed; Finish of an empty zone only costs
//!    processing. Reset updates the zone's metadata on a management core
//!    (`reset_metadata_us`, so resets do not hold up I/O processing), drops
//!    the zone's data still in the buffer, then erases the blocks holding
//!    the zone's host data on every die in parallel: in proportion to what
//!    was written. A zone that was neither finished nor filled has a
//!    partly programmed block on each of its dies, closed first
//!    (`close_block_us`); blocks holding Finish padding are erased in the
//!    background. Close costs more while the zone has data not yet
//!    programmed.
//! 6. **Zone random write areas.** A write into a ZRWA costs what a write
//!    into the buffer costs (processing and the host transfer) but takes
//!    no buffer room and programs nothing: the window is controller memory
//!    of its own, and reads of it are buffer hits. Blocks committed (when
//!    a write reaches past the window, or by Flush Explicit ZRWA Range) go
//!    through the buffer to the dies like written data.
//!
//! The simulation is event driven (module `sim`); completions are posted when
//! the controller's [`Clock`] reaches them. Admin commands are not timed.
//! The model runs on model time: the clock's time divided by its dilation
//! factor ([`crate::clock::Dilation`]), so on a dilated clock every
//! modelled duration lasts that many times longer. Each completion posted
//! is counted with how long after its due time it was posted
//! ([`crate::clock::Lateness`]).

pub mod calibration;
mod profile;
pub(crate) mod sim;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use parking_lot::Mutex;
use zns_spec::{CompletionEntry, ZoneSendAction, ZoneState};

pub use profile::{TimingProfile, MAX_PLANES};

use crate::clock::{Clock, Lateness};
use crate::conv::{GcEvent, Placement};
use sim::{NsGeometry, Sim};

/// The written runs of a read, `(lba, blocks)` (for a namespace with an
/// FTL: physical blocks): a few inline, more (a fragmented read) in a
/// vector.
#[derive(Debug, Clone, Default)]
pub(crate) struct Runs {
    inline: [(u64, u64); 4],
    len: usize,
    spill: Vec<(u64, u64)>,
}

impl Runs {
    /// Adds a run.
    pub fn push(&mut self, lba: u64, blocks: u64) {
        if self.len < self.inline.len() {
            self.inline[self.len] = (lba, blocks);
            self.len += 1;
        } else {
            if self.spill.is_empty() {
                self.spill.extend_from_slice(&self.inline);
            }
            self.spill.push((lba, blocks));
        }
    }

    pub fn as_slice(&self) -> &[(u64, u64)] {
        if self.spill.is_empty() {
            &self.inline[..self.len]
        } else {
            &self.spill
        }
    }
}

/// A zone before a Zone Management Send acted on it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ZoneBefore {
    pub index: u32,
    pub state: ZoneState,
    /// Blocks written.
    pub written: u64,
}

impl ZoneBefore {
    /// Blocks a Finish pads to `capacity`: the rest of a zone that holds
    /// data and is not full (the drive programs it through its write
    /// path); nothing for an empty or full zone. The timing model and the
    /// media counters both take it from here.
    pub(crate) fn finish_padding(&self, capacity: u64) -> u64 {
        if self.written == 0 || self.state == ZoneState::Full {
            return 0;
        }
        capacity.saturating_sub(self.written)
    }
}

/// What the model needs to know of a command that ran.
#[derive(Debug, Clone, Default)]
pub(crate) enum Op {
    /// Processing only (failed commands, and commands of no other kind).
    #[default]
    Other,
    Flush,
    /// Zone Management Receive moving `bytes` to the host.
    Report {
        bytes: u64,
    },
    Read {
        nsid: u32,
        lba: u64,
        blocks: u64,
        /// Runs that are written (the rest reads as zeros).
        runs: Runs,
    },
    /// Write, Write Zeroes (no `dma`), Zone Append (`append`; `lba` is the
    /// assigned one). `placed`: where a conventional namespace's firmware
    /// put the blocks (empty for other namespaces). `zrwa_commit`: for a
    /// write into a zone random write area, the blocks it committed
    /// `(from lba, blocks)`; only those go to the flash.
    Write {
        nsid: u32,
        lba: u64,
        blocks: u64,
        opened: bool,
        filled: bool,
        dma: bool,
        append: bool,
        placed: Vec<Placement>,
        zrwa_commit: Option<(u64, u64)>,
    },
    /// Copy: `sources` as [`Op::Read`]'s runs; `placed` and `zrwa_commit`
    /// as [`Op::Write`]'s.
    Copy {
        nsid: u32,
        sources: Vec<(u64, u64)>,
        dest: u64,
        blocks: u64,
        opened: bool,
        filled: bool,
        placed: Vec<Placement>,
        zrwa_commit: Option<(u64, u64)>,
    },
    /// Zone Management Send; `committed`: blocks a Flush Explicit ZRWA
    /// Range committed (programmed from the zone's write pointer on).
    ZoneSend {
        nsid: u32,
        action: ZoneSendAction,
        zones: Vec<ZoneBefore>,
        committed: u64,
    },
}

/// How long (real time) a completion that fell due on one queue may stay
/// untaken and still hold the virtual clock for its host thread; past
/// this, that thread counts as busy elsewhere and the others go on.
const STALE_AFTER: std::time::Duration = std::time::Duration::from_millis(2);

/// The timing model of one controller and its clock.
///
/// Thread safety: `Send + Sync`; the simulation sits behind one mutex,
/// taken once per doorbell batch and once per poll.
#[derive(Debug)]
pub(crate) struct Timing {
    clock: Arc<Clock>,
    sim: Mutex<Sim>,
    profile: TimingProfile,
    ns: Vec<NsGeometry>,
    queues: usize,
    /// Completions posted, by how late (atomics: read without the lock).
    lateness: Lateness,
    /// Bytes of written data host reads found in the buffer, not yet
    /// programmed (served without a die read), over the controller's life.
    buffer_reads: std::sync::atomic::AtomicU64,
}

impl Timing {
    pub fn new(
        profile: &TimingProfile,
        namespaces: &[crate::profile::NamespaceProfile],
        queues: usize,
        clock: Arc<Clock>,
    ) -> Self {
        let ns: Vec<NsGeometry> = namespaces
            .iter()
            .map(|n| NsGeometry {
                block_bytes: n.block_size as u64,
                zone_blocks: match n.kind {
                    crate::profile::NamespaceKind::Zoned => n.zone_size,
                    crate::profile::NamespaceKind::Conventional => 0,
                },
                cap_blocks: n.zone_capacity,
                segment_blocks: n.ftl.as_ref().map_or(0, |f| f.segment_blocks),
            })
            .collect();
        Timing {
            sim: Mutex::new(Sim::new(profile, ns.clone(), queues)),
            clock,
            profile: profile.clone(),
            ns,
            queues,
            lateness: Lateness::default(),
            buffer_reads: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Installs (or with `None` removes) the sink of the model's trace
    /// events.
    pub fn set_trace(&self, sink: Option<Arc<dyn crate::trace::TraceSink>>) {
        self.sim.lock().set_trace(sink);
    }

    /// Completions posted so far, by how late they were posted.
    pub fn lateness(&self) -> &Lateness {
        &self.lateness
    }

    /// Hands the commands of one doorbell to the model: they arrive now,
    /// after the garbage collection the firmware of `namespaces` did so far
    /// (taken under the model's lock, so that a command on another thread
    /// that used a reclaimed segment is never planned before the reclaim).
    pub fn submit(
        &self,
        sqid: u16,
        cqid: u16,
        batch: &mut Vec<(CompletionEntry, Op)>,
        namespaces: &[crate::Namespace],
    ) {
        let mut sim = self.sim.lock();
        let now = self.clock.model_now_ns().max(sim.now());
        sim.set_wall(std::time::Instant::now());
        sim.run_until(now);
        let mut events: Vec<GcEvent> = Vec::new();
        let mut closed: Vec<(u32, u32)> = Vec::new();
        for ns in namespaces {
            if let Some(f) = ns.firmware() {
                // Segments closed partly written before the reclaims: a
                // later reclaim of one finds its data programmed.
                f.take_closed(&mut closed);
                for (segment, gen) in closed.drain(..) {
                    sim.close_segment(ns.nsid(), segment, gen);
                }
                f.take_events(&mut events);
                for e in events.drain(..) {
                    sim.collect(ns.nsid(), e);
                }
            }
        }
        for (cqe, op) in batch.drain(..) {
            sim.submit(sqid, cqid, cqe, op);
        }
        let buffered = sim.take_buffer_reads();
        if buffered > 0 {
            self.buffer_reads.fetch_add(buffered, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Bytes of written data that host reads (Read, Copy sources) took
    /// from the write buffer so far, the data not yet programmed: no die
    /// read served them, so they are not media reads.
    pub fn buffer_read_bytes(&self) -> u64 {
        self.buffer_reads.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Moves the completions of `cqid` whose time has come into `out`. On
    /// the virtual clock, when none has come but commands are outstanding
    /// and the host `waiting` (it consumed everything posted), the clock
    /// first moves to the earliest pending completion of any queue, unless
    /// another queue holds a completion that fell due and was not taken yet
    /// (its host thread is about to take it and must see it at its due
    /// time): see [`crate::clock`].
    pub fn take_ready(&self, cqid: u16, out: &mut Vec<CompletionEntry>, waiting: bool) {
        let mut sim = self.sim.lock();
        let now = self.clock.model_now_ns().max(sim.now());
        let wall = std::time::Instant::now();
        sim.set_wall(wall);
        sim.run_until(now);
        if self.clock.is_virtual()
            && waiting
            && !sim.has_ready(cqid)
            && sim.inflight(cqid) > 0
            && !sim.others_ready(cqid, wall, STALE_AFTER)
        {
            let before = sim.completions();
            while sim.completions() == before {
                match sim.step() {
                    Some(t) => self.clock.advance_to(self.clock.dilation().to_clock(t)),
                    None => break,
                }
            }
        }
        // Posted now: lateness is model time since each fell due (on the
        // virtual clock 0 unless the host let time pass without polling).
        let at = sim.now();
        let lateness = &self.lateness;
        sim.take(cqid, out, |due| lateness.record(at.saturating_sub(due)));
    }

    /// Commands of `cqid` submitted and not yet completed.
    pub fn outstanding(&self, cqid: u16) -> u32 {
        self.sim.lock().inflight(cqid)
    }

    /// Forgets the commands of submission queue `sqid` (deleted queue) or
    /// of every queue (controller reset): they never complete.
    pub fn cancel(&self, sqid: Option<u16>) {
        self.sim.lock().cancel(sqid);
    }

    /// Power loss: everything in the device is gone.
    pub fn power_cut(&self) {
        let mut sim = self.sim.lock();
        let now = sim.now();
        let trace = sim.trace().cloned();
        *sim = Sim::new(&self.profile, self.ns.clone(), self.queues);
        sim.set_trace(trace);
        sim.run_until(now);
    }
}
