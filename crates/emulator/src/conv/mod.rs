//! The firmware of a conventional SSD: a page-mapped flash translation
//! layer with garbage collection inside the device, for conventional
//! namespaces whose profile has an `[namespace.ftl]` table.
//!
//! The namespace's media hold its flash, segment after segment (a segment
//! is the unit garbage collection reclaims: one erase block on every die).
//! Each logical block maps to a physical block through a
//! [`zns_ftl_core::PageMap`], the map the host FTL uses too.
//!
//! - **Writes** go to the host's open segment, relocated data to the GC's
//!   open segment; a rewrite leaves the old block invalid.
//! - **Flexible Data Placement** (a `[namespace.fdp]` table, [`fdp`]): a
//!   segment is a reclaim unit; each reclaim unit handle has its own open
//!   segment, a write with DTYPE 2h goes to the handle its placement
//!   identifier names (handle 0 without one, or for an invalid one, which
//!   is logged as an event), and garbage collection moves valid blocks into
//!   one shared segment (initially isolated handles) or the victim's
//!   handle's own (persistently isolated). Every segment remembers its
//!   handle; counters per handle, Reclaim Unit Handle Update and the event
//!   logs live there too. Without the table the firmware is the one-handle
//!   case: one host segment, one GC segment.
//! - **Garbage collection** runs inside the write that needs a segment,
//!   while the free segments are at the reserve plus one: a victim among
//!   the full segments ([`zns_ftl_core::select`]) has its valid blocks
//!   copied to the GC's segment and is erased (back to the free list).
//!   Only GC may take the last free segment.
//! - **Durability**: every map change since the map was last made durable
//!   keeps an undo record. Flush and FUA make the map durable, and so does
//!   erasing a victim (no durable map entry may point into an erased
//!   segment), and a long undo log. A power cut undoes the newest records,
//!   a random number of them: flushed blocks always survive, later ones
//!   survive in the order written, up to a random point.
//! - **Timing**: with a timing model, every victim is described to it
//!   ([`GcEvent`]) and every write says where its blocks went
//!   ([`Placement`]), so garbage collection's reads, programs and erases
//!   compete with host I/O on the same dies; a segment a Reclaim Unit
//!   Handle Update leaves partly written is reported closed, so the model
//!   programs what it holds.
//!
//! Thread safety: `Send + Sync`. Reads take the state lock shared, so a
//! block they translate cannot be moved and erased under them; writes,
//! deallocations and garbage collection take it exclusively.

pub mod fdp;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_fdp;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::{Mutex, RwLock};
use rand::Rng;
use zns_ftl_core::{select, Candidate, PageMap, VictimPolicy};
use zns_spec::fdp::{FdpEvent, FdpEventType, RuhStatusDescriptor};
use zns_spec::StatusCode;

use self::fdp::{FdpConfig, FdpState, FdpStats, Stream};
use crate::media::Media;
use crate::profile::{FdpProfile, FtlProfile, ProfileError};

/// Free segments only garbage collection may take.
const GC_RESERVE: usize = 1;

/// Undo records after which the firmware makes its map durable on its own
/// (a map checkpoint), so the log stays bounded when the host never
/// flushes.
const UNDO_LIMIT: usize = 1 << 16;

/// Where a run of a write's blocks went, for the timing model.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    /// Segment.
    pub segment: u32,
    /// The segment's erase count when written (its incarnation).
    pub gen: u32,
    /// First block offset in the segment.
    pub offset: u64,
    /// Blocks.
    pub blocks: u64,
}

/// One victim reclaimed by garbage collection, for the timing model.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GcEvent {
    /// The victim segment.
    pub segment: u32,
    /// Its erase count before this erase (the incarnation reclaimed).
    pub gen: u32,
    /// Offsets of the blocks that were valid and moved, ascending.
    pub valid: Vec<u32>,
    /// Where they went, in order.
    pub dest: Vec<Placement>,
}

/// Counters of a conventional namespace's firmware.
///
/// Thread safety: plain data (a snapshot).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FtlStats {
    /// Blocks the namespace exposes.
    pub exposed_blocks: u64,
    /// Blocks of flash in use by the firmware (whole segments).
    pub physical_blocks: u64,
    /// Blocks per segment.
    pub segment_blocks: u64,
    /// Segments.
    pub segments: u32,
    /// Free segments now.
    pub free_segments: u32,
    /// Blocks written by the host (Write, Copy).
    pub host_blocks: u64,
    /// Blocks garbage collection moved.
    pub gc_blocks: u64,
    /// Segments reclaimed.
    pub victims: u64,
    /// Erases of the most erased segment (each erases one block on every
    /// die of the segment).
    pub max_erases: u32,
    /// Erases of the least erased segment.
    pub min_erases: u32,
    /// Logical blocks mapped now.
    pub mapped_blocks: u64,
    /// Victim selection.
    pub policy: VictimPolicy,
}

impl FtlStats {
    /// Over-provisioning: flash in use over exposed blocks, less one.
    pub fn over_provisioning(&self) -> f64 {
        self.physical_blocks as f64 / self.exposed_blocks.max(1) as f64 - 1.0
    }

    /// Device write amplification: blocks programmed (host and moved) per
    /// host block; 0 before the first write.
    pub fn waf(&self) -> f64 {
        match self.host_blocks {
            0 => 0.0,
            h => (h + self.gc_blocks) as f64 / h as f64,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SegState {
    Free,
    Open,
    Full,
}

#[derive(Debug, Clone)]
struct Segment {
    state: SegState,
    /// Blocks written since the last erase.
    fill: u64,
    /// Erases so far.
    gen: u32,
    /// Sum over the blocks written of the logical time they were written.
    write_sum: u64,
    /// The reclaim unit handle whose data the segment holds since it was
    /// opened; `None` for a shared GC segment (and unused without FDP).
    owner: Option<u16>,
}

#[derive(Debug)]
struct State {
    segs: Vec<Segment>,
    free: VecDeque<u32>,
    /// The open segment of each host stream (one per reclaim unit handle).
    host_open: Vec<Option<u32>>,
    /// The open segment of each garbage-collection stream.
    gc_open: Vec<Option<u32>>,
    /// (logical block, where it was) for every map change not durable yet.
    undo: Vec<(u64, Option<u64>)>,
    /// Logical time: host blocks written so far.
    clock: u64,
    host_blocks: u64,
    gc_blocks: u64,
    victims: u64,
    mapped: u64,
    /// Segments holding blocks of the write in progress not mapped yet:
    /// garbage collection must not take them for garbage.
    pending: Vec<u32>,
    /// One block's data and metadata, for moving blocks.
    staging: Vec<u8>,
    meta_staging: Vec<u8>,
    /// Counters, event enablement and event logs of an FDP namespace.
    fdp: Option<FdpState>,
}

impl State {
    /// The open segment of `stream`.
    fn open_slot(&mut self, stream: Stream) -> &mut Option<u32> {
        match stream {
            Stream::Host(h) => &mut self.host_open[h as usize],
            Stream::Gc(i) => &mut self.gc_open[i as usize],
        }
    }
}

/// The firmware of one conventional namespace.
///
/// Thread safety: `Send + Sync` (see the module documentation).
pub struct Firmware {
    /// Made at the first write: a full-size drive's map takes gigabytes,
    /// which a device only opened (to identify it, say) need not pay.
    map: OnceLock<PageMap>,
    media: Arc<dyn Media>,
    segment_blocks: u64,
    segments: u32,
    physical: u64,
    exposed: u64,
    policy: VictimPolicy,
    block_size: usize,
    metadata_size: usize,
    /// Whether a timing model wants [`GcEvent`]s.
    timed: bool,
    state: RwLock<State>,
    events: Mutex<Vec<GcEvent>>,
    /// Segments (and their erase counts) left partly written by a Reclaim
    /// Unit Handle Update, for the timing model.
    closed: Mutex<Vec<(u32, u32)>>,
    /// Flexible Data Placement, when the namespace has it.
    fdp: Option<FdpConfig>,
    /// Blocks read by the host, for statistics.
    read_blocks: AtomicU64,
}

impl std::fmt::Debug for Firmware {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Firmware")
            .field("exposed", &self.exposed)
            .field("segment_blocks", &self.segment_blocks)
            .field("segments", &self.segments)
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl Firmware {
    /// Firmware for a fresh namespace (every segment erased, nothing
    /// mapped) over `media`, which holds the flash: `ftl.physical_blocks()`
    /// blocks of `block_size` bytes (and `metadata_size` bytes of metadata
    /// each). `timed`: a timing model will collect [`GcEvent`]s.
    pub fn new(
        ftl: &FtlProfile,
        block_size: u32,
        metadata_size: u16,
        media: Arc<dyn Media>,
        timed: bool,
    ) -> Result<Self, ProfileError> {
        let policy = ftl.victim_policy()?;
        let segments = ftl.segments() as u32;
        let exposed = ftl.exposed_blocks();
        let fresh = Segment { state: SegState::Free, fill: 0, gen: 0, write_sum: 0, owner: None };
        Ok(Firmware {
            map: OnceLock::new(),
            media,
            segment_blocks: ftl.segment_blocks,
            segments,
            physical: ftl.physical_blocks(),
            exposed,
            policy,
            block_size: block_size as usize,
            metadata_size: metadata_size as usize,
            timed,
            state: RwLock::new(State {
                segs: vec![fresh; segments as usize],
                free: (0..segments).collect(),
                host_open: vec![None],
                gc_open: vec![None],
                undo: Vec::new(),
                clock: 0,
                host_blocks: 0,
                gc_blocks: 0,
                victims: 0,
                mapped: 0,
                pending: Vec::new(),
                staging: vec![0; block_size as usize],
                meta_staging: vec![0; metadata_size as usize],
                fdp: None,
            }),
            events: Mutex::new(Vec::new()),
            closed: Mutex::new(Vec::new()),
            fdp: None,
            read_blocks: AtomicU64::new(0),
        })
    }

    /// The same firmware with Flexible Data Placement as `p` describes,
    /// for namespace `nsid`: an open segment per reclaim unit handle.
    pub fn with_fdp(mut self, p: &FdpProfile, nsid: u32) -> Self {
        let cfg = FdpConfig::new(p, nsid);
        let st = self.state.get_mut();
        st.host_open = vec![None; cfg.handles as usize];
        st.gc_open = vec![None; cfg.gc_streams() as usize];
        st.fdp = Some(FdpState::new(cfg.handles));
        self.fdp = Some(cfg);
        self
    }

    /// The Flexible Data Placement configuration, if the namespace has one.
    pub fn fdp(&self) -> Option<&FdpConfig> {
        self.fdp.as_ref()
    }

    /// Blocks per segment (a reclaim unit with FDP).
    pub fn segment_blocks(&self) -> u64 {
        self.segment_blocks
    }

    /// Blocks the namespace exposes.
    pub fn exposed_blocks(&self) -> u64 {
        self.exposed
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> FtlStats {
        let st = self.state.read();
        FtlStats {
            exposed_blocks: self.exposed,
            physical_blocks: self.physical,
            segment_blocks: self.segment_blocks,
            segments: self.segments,
            free_segments: st.free.len() as u32,
            host_blocks: st.host_blocks,
            gc_blocks: st.gc_blocks,
            victims: st.victims,
            max_erases: st.segs.iter().map(|g| g.gen).max().unwrap_or(0),
            min_erases: st.segs.iter().map(|g| g.gen).min().unwrap_or(0),
            mapped_blocks: st.mapped,
            policy: self.policy,
        }
    }

    /// Where logical block `lba` is on the flash, if it is mapped.
    pub fn lookup(&self, lba: u64) -> Option<u64> {
        let _st = self.state.read();
        self.map.get()?.lookup(lba)
    }

    /// The map, made now if it was not.
    fn map(&self) -> &PageMap {
        self.map.get_or_init(|| PageMap::new(self.exposed, self.physical, self.segment_blocks))
    }

    /// Calls `f(lba, blocks, physical)` for the runs of `[slba, slba +
    /// blocks)`, in order: `physical` is where a run of consecutive
    /// logical blocks sits consecutively on the flash, `None` for a run of
    /// unmapped blocks (they read as zeros). Holds the state lock shared
    /// meanwhile: nothing moves under `f`.
    pub(crate) fn read_extent(&self, slba: u64, blocks: u64, f: impl FnMut(u64, u64, Option<u64>)) {
        let _st = self.state.read();
        self.read_blocks.fetch_add(blocks, Ordering::Relaxed);
        self.runs(slba, blocks, f);
    }

    /// The mapped runs of `[slba, slba + blocks)` as (physical block,
    /// blocks), for the timing model.
    pub(crate) fn physical_runs(&self, slba: u64, blocks: u64, mut out: impl FnMut(u64, u64)) {
        let _st = self.state.read();
        self.runs(slba, blocks, |_, n, p| {
            if let Some(p) = p {
                out(p, n)
            }
        });
    }

    fn runs(&self, slba: u64, blocks: u64, mut f: impl FnMut(u64, u64, Option<u64>)) {
        let Some(map) = self.map.get() else {
            // Nothing was ever written.
            return f(slba, blocks, None);
        };
        let mut start = slba;
        let mut first = map.lookup(slba);
        let mut n = 0u64;
        for lba in slba..slba + blocks {
            let p = map.lookup(lba);
            let follows = match (first, p) {
                (None, None) => true,
                (Some(a), Some(b)) => b == a + n,
                _ => false,
            };
            if !follows {
                f(start, n, first);
                (start, first, n) = (lba, p, 0);
            }
            n += 1;
        }
        if n > 0 {
            f(start, n, first);
        }
    }

    /// Writes `blocks` logical blocks at `lba`: finds them room (collecting
    /// garbage when it must), has `store` put the data on the flash at the
    /// runs given (physical block, blocks), then maps them. Returns where
    /// they went when a timing model wants to know. When `store` fails
    /// the map is unchanged (the room it was given stays unused).
    /// `pid`: the placement identifier of a write with DTYPE 2h; on an FDP
    /// namespace it picks the reclaim unit handle (ignored otherwise).
    pub(crate) fn write(
        &self,
        lba: u64,
        blocks: u64,
        moves_data: bool,
        pid: Option<u16>,
        store: impl FnOnce(&[(u64, u64)]) -> Result<(), StatusCode>,
    ) -> Result<Vec<Placement>, StatusCode> {
        let mut st = self.state.write();
        let handle = match &self.fdp {
            None => 0,
            Some(cfg) => {
                let r = cfg.resolve(pid);
                if let (Some(p), Some(f)) = (r.invalid, st.fdp.as_mut()) {
                    f.invalid_pid(cfg, p);
                }
                r.handle
            }
        };
        let r = self.place(&mut st, lba, blocks, moves_data, handle, store);
        st.pending.clear();
        r
    }

    fn place(
        &self,
        st: &mut State,
        lba: u64,
        blocks: u64,
        moves_data: bool,
        handle: u16,
        store: impl FnOnce(&[(u64, u64)]) -> Result<(), StatusCode>,
    ) -> Result<Vec<Placement>, StatusCode> {
        let mut runs = [(0u64, 0u64); 4];
        let mut spill = Vec::new();
        let mut placed = Vec::new();
        let mut count = 0usize;
        let mut left = blocks;
        while left > 0 {
            let (seg, off, n) = self.room(st, Stream::Host(handle), left, moves_data)?;
            if !st.pending.contains(&seg) {
                st.pending.push(seg);
            }
            let p = seg as u64 * self.segment_blocks + off;
            let run = (p, n);
            if count < runs.len() {
                runs[count] = run;
            } else {
                if spill.is_empty() {
                    spill.extend_from_slice(&runs);
                }
                spill.push(run);
            }
            count += 1;
            if self.timed {
                let gen = st.segs[seg as usize].gen;
                placed.push(Placement { segment: seg, gen, offset: off, blocks: n });
            }
            left -= n;
        }
        let runs = if spill.is_empty() { &runs[..count] } else { &spill[..] };
        store(runs)?;
        let mut l = lba;
        for &(p, n) in runs {
            for i in 0..n {
                let old = self.map().assign(l, p + i);
                if old.is_none() {
                    st.mapped += 1;
                }
                st.undo.push((l, old));
                l += 1;
            }
        }
        st.clock += blocks;
        st.host_blocks += blocks;
        if let Some(f) = st.fdp.as_mut() {
            f.stats[handle as usize].host_blocks += blocks;
        }
        if st.undo.len() > UNDO_LIMIT {
            st.undo.clear();
        }
        Ok(placed)
    }

    /// Unmaps `blocks` logical blocks at `lba` (Write Zeroes, Dataset
    /// Management deallocate): they read as zeros.
    pub(crate) fn deallocate(&self, lba: u64, blocks: u64) {
        let Some(map) = self.map.get() else { return };
        let mut st = self.state.write();
        for l in lba..lba + blocks {
            if let Some(old) = map.unmap(l) {
                st.mapped -= 1;
                st.undo.push((l, Some(old)));
            }
        }
        if st.undo.len() > UNDO_LIMIT {
            st.undo.clear();
        }
    }

    /// Makes every map change so far durable (Flush, FUA).
    pub(crate) fn commit(&self) {
        self.state.write().undo.clear();
    }

    /// Power loss: undoes the newest map changes not yet durable, a random
    /// number of them, and forgets the events the timing model did not take.
    /// The blocks written meanwhile stay used (garbage) until their segment
    /// is reclaimed.
    pub(crate) fn power_cut(&self, rng: &mut impl Rng) {
        let mut st = self.state.write();
        let keep = rng.gen_range(0..=st.undo.len());
        while st.undo.len() > keep {
            let (l, old) = st.undo.pop().expect("a record");
            let undone = self.map().remap(l, old);
            match (undone.is_some(), old.is_some()) {
                (true, false) => st.mapped -= 1,
                (false, true) => st.mapped += 1,
                _ => {}
            }
        }
        st.undo.clear();
        self.events.lock().clear();
        self.closed.lock().clear();
        // Event enablement is a feature's current value: volatile.
        if let Some(f) = st.fdp.as_mut() {
            f.reset_features();
        }
    }

    /// Takes the garbage-collection events a timing model has not taken.
    pub(crate) fn take_events(&self, out: &mut Vec<GcEvent>) {
        let mut e = self.events.lock();
        if !e.is_empty() {
            out.append(&mut e);
        }
    }

    /// Takes the segments (segment, erase count) a Reclaim Unit Handle
    /// Update closed partly written that a timing model has not taken.
    pub(crate) fn take_closed(&self, out: &mut Vec<(u32, u32)>) {
        let mut c = self.closed.lock();
        if !c.is_empty() {
            out.append(&mut c);
        }
    }

    /// Room for up to `want` blocks in `stream`'s open segment, opening a
    /// new one (and collecting garbage first, for the host) when it is
    /// full: (segment, first offset, blocks).
    fn room(
        &self,
        st: &mut State,
        stream: Stream,
        want: u64,
        moves_data: bool,
    ) -> Result<(u32, u64, u64), StatusCode> {
        let seg = match *st.open_slot(stream) {
            Some(s) => s,
            None => {
                if let Stream::Host(_) = stream {
                    self.make_room(st, moves_data)?;
                }
                let s = st.free.pop_front().ok_or(StatusCode::InternalError)?;
                let owner = self.fdp.as_ref().and_then(|c| c.owner(stream));
                let g = &mut st.segs[s as usize];
                (g.state, g.fill, g.write_sum, g.owner) = (SegState::Open, 0, 0, owner);
                *st.open_slot(stream) = Some(s);
                s
            }
        };
        let clock = st.clock;
        let g = &mut st.segs[seg as usize];
        let off = g.fill;
        let n = want.min(self.segment_blocks - off);
        g.fill += n;
        g.write_sum += clock * n;
        if g.fill == self.segment_blocks {
            g.state = SegState::Full;
            *st.open_slot(stream) = None;
        }
        Ok((seg, off, n))
    }

    /// Collects garbage until the host may take a free segment and leave
    /// the reserve. Fails only when no segment can be reclaimed and none is
    /// free beyond the reserve, which the profile's minimum spare rules out.
    fn make_room(&self, st: &mut State, moves_data: bool) -> Result<(), StatusCode> {
        let mut tries = st.segs.len();
        while st.free.len() <= GC_RESERVE + 1 && tries > 0 {
            if !self.collect(st, moves_data)? {
                break;
            }
            tries -= 1;
        }
        if st.free.len() > GC_RESERVE {
            Ok(())
        } else {
            tracing::error!("conventional firmware: no segment to reclaim and none free");
            Err(StatusCode::InternalError)
        }
    }

    /// Reclaims one victim; false when no full segment holds an invalid
    /// block.
    fn collect(&self, st: &mut State, moves_data: bool) -> Result<bool, StatusCode> {
        let now = st.clock;
        let cap = self.segment_blocks as u32;
        let map = self.map();
        let pending = &st.pending;
        let full =
            |i: usize, g: &Segment| g.state == SegState::Full && !pending.contains(&(i as u32));
        let candidates = st.segs.iter().enumerate().filter(|(i, g)| full(*i, g)).map(|(i, g)| {
            let written_at = g.write_sum / g.fill.max(1);
            Candidate {
                id: i as u32,
                valid: map.valid(i as u32),
                capacity: cap,
                birth: written_at,
                written_at,
                resets: g.gen,
            }
        });
        let Some(victim) = select(self.policy, now, candidates) else { return Ok(false) };
        let base = victim as u64 * self.segment_blocks;
        let owner = st.segs[victim as usize].owner;
        let gc = self.fdp.as_ref().map_or(Stream::Gc(0), |c| c.gc_stream(owner));
        let mut valid = Vec::new();
        let mut dest: Vec<Placement> = Vec::new();
        let (mut moved, mut first_lba) = (0u64, None);
        for off in 0..self.segment_blocks {
            let p = base + off;
            let Some(l) = map.owner(p) else { continue };
            first_lba.get_or_insert(l);
            moved += 1;
            let (seg, to_off, _) = self.room(st, gc, 1, moves_data)?;
            let q = seg as u64 * self.segment_blocks + to_off;
            if moves_data {
                self.move_block(st, p, q)?;
            }
            let moved = map.relocate(l, p, q);
            debug_assert!(moved, "block {p} was valid under the lock");
            st.gc_blocks += 1;
            if self.timed {
                valid.push(off as u32);
                let gen = st.segs[seg as usize].gen;
                match dest.last_mut() {
                    Some(d) if d.segment == seg && d.offset + d.blocks == to_off => d.blocks += 1,
                    _ => dest.push(Placement { segment: seg, gen, offset: to_off, blocks: 1 }),
                }
            }
        }
        // No durable map entry may point into the victim once it is erased.
        st.undo.clear();
        if let Err(e) = self.media.deallocate(base, self.segment_blocks) {
            tracing::warn!(victim, error = %e, "media of an erased segment not released");
        }
        let g = &mut st.segs[victim as usize];
        let gen = g.gen;
        (g.state, g.fill, g.write_sum, g.gen) = (SegState::Free, 0, 0, gen + 1);
        st.free.push_back(victim);
        st.victims += 1;
        if let (Some(cfg), Some(f)) = (&self.fdp, st.fdp.as_mut()) {
            let s = f.stats_of(owner);
            s.moved_blocks += moved;
            s.erased_segments += 1;
            f.media_reallocated(cfg, owner, first_lba.unwrap_or(0), moved);
        }
        if self.timed {
            self.events.lock().push(GcEvent { segment: victim, gen, valid, dest });
        }
        Ok(true)
    }

    /// Copies one block's data and metadata from `from` to `to`.
    fn move_block(&self, st: &mut State, from: u64, to: u64) -> Result<(), StatusCode> {
        let fail = |_| StatusCode::InternalError;
        self.media.read(from, &mut st.staging[..self.block_size]).map_err(fail)?;
        self.media.write(to, &st.staging[..self.block_size]).map_err(fail)?;
        if self.metadata_size > 0 {
            self.media.read_metadata(from, &mut st.meta_staging).map_err(fail)?;
            self.media.write_metadata(to, &st.meta_staging).map_err(fail)?;
        }
        Ok(())
    }

    /// The Reclaim Unit Handle Status of every placement handle (one
    /// reclaim group): RUAMW is what the handle's open segment still
    /// takes, a whole segment when it has none open. `None` without FDP.
    pub fn ruh_status(&self) -> Option<Vec<RuhStatusDescriptor>> {
        let cfg = self.fdp.as_ref()?;
        let st = self.state.read();
        let status = (0..cfg.handles)
            .map(|h| {
                let fill = st.host_open[h as usize].map_or(0, |s| st.segs[s as usize].fill);
                RuhStatusDescriptor {
                    pid: cfg.pid_of(h),
                    ruhid: h,
                    time_remaining_secs: 0,
                    available_blocks: self.segment_blocks - fill,
                }
            })
            .collect();
        Some(status)
    }

    /// Reclaim Unit Handle Update: each placement identifier's handle
    /// leaves its open segment (closed as it is, a reclaim unit not fully
    /// written, which garbage collection reclaims like any other) and
    /// takes a fresh one at its next write. Checks every identifier
    /// first: one the namespace lacks changes nothing and fails with
    /// Invalid Field in Command (so does a namespace without FDP).
    pub(crate) fn ruh_update(&self, pids: &[u16]) -> Result<(), StatusCode> {
        let cfg = self.fdp.as_ref().ok_or(StatusCode::InvalidField)?;
        let handles = pids
            .iter()
            .map(|&p| cfg.handle_of(p).ok_or(StatusCode::InvalidField))
            .collect::<Result<Vec<u16>, StatusCode>>()?;
        let mut st = self.state.write();
        for h in handles {
            let Some(seg) = st.host_open[h as usize].take() else { continue };
            let g = &mut st.segs[seg as usize];
            g.state = SegState::Full;
            let gen = g.gen;
            if self.timed {
                self.closed.lock().push((seg, gen));
            }
            if let Some(f) = st.fdp.as_mut() {
                f.ru_not_fully_written(cfg, h);
            }
        }
        Ok(())
    }

    /// A snapshot of the FDP counters; `None` without FDP.
    pub fn fdp_stats(&self) -> Option<FdpStats> {
        let st = self.state.read();
        let f = st.fdp.as_ref()?;
        Some(FdpStats {
            handles: f.stats.clone(),
            shared: f.shared,
            segment_blocks: self.segment_blocks,
        })
    }

    /// The FDP events of one log (host events, or controller events),
    /// oldest first; empty without FDP.
    pub fn fdp_events(&self, host: bool) -> Vec<FdpEvent> {
        self.state.read().fdp.as_ref().map_or_else(Vec::new, |f| f.events(host))
    }

    /// Whether event type `t` is enabled on placement handle `h` (false
    /// without FDP or for a handle it lacks).
    pub fn fdp_event_enabled(&self, h: u16, t: FdpEventType) -> bool {
        self.state.read().fdp.as_ref().is_some_and(|f| f.enabled(h, t))
    }

    /// Enables or disables event types on placement handle `h` (Set
    /// Features 1Eh): Invalid Field in Command for a handle the namespace
    /// lacks or a type the firmware never reports, and nothing changes.
    pub(crate) fn set_fdp_events(
        &self,
        h: u16,
        types: &[u8],
        enable: bool,
    ) -> Result<(), StatusCode> {
        let cfg = self.fdp.as_ref().ok_or(StatusCode::InvalidField)?;
        if h >= cfg.handles {
            return Err(StatusCode::InvalidField);
        }
        let types = types
            .iter()
            .map(|&t| {
                FdpEventType::from_raw(t)
                    .filter(|t| fdp::SUPPORTED_EVENTS.contains(t))
                    .ok_or(StatusCode::InvalidField)
            })
            .collect::<Result<Vec<_>, StatusCode>>()?;
        let mut st = self.state.write();
        let f = st.fdp.as_mut().ok_or(StatusCode::InvalidField)?;
        for t in types {
            f.set_enabled(h, t, enable);
        }
        Ok(())
    }

    /// Controller reset: feature values go back to their defaults (every
    /// FDP event type disabled).
    pub(crate) fn reset_features(&self) {
        if let Some(f) = self.state.write().fdp.as_mut() {
            f.reset_features();
        }
    }

    /// Checks the firmware's invariants: the map's two directions agree,
    /// valid counts equal a recount, every mapped block lies in the
    /// written part of a segment that is not free, free segments hold
    /// nothing. Returns the first violation found.
    pub fn check(&self) -> Result<(), String> {
        let st = self.state.read();
        let mut counts = vec![0u32; st.segs.len()];
        let mut mapped = 0u64;
        let map = self.map();
        for l in 0..map.logical() {
            let Some(p) = map.lookup(l) else { continue };
            mapped += 1;
            if map.owner(p) != Some(l) {
                return Err(format!(
                    "logical block {l} maps to {p}, which names {:?}",
                    map.owner(p)
                ));
            }
            let seg = (p / self.segment_blocks) as usize;
            let g = &st.segs[seg];
            if g.state == SegState::Free || p % self.segment_blocks >= g.fill {
                return Err(format!(
                    "logical block {l} maps to block {p} of segment {seg}, which is {:?} with {} \
                     blocks written",
                    g.state, g.fill
                ));
            }
            counts[seg] += 1;
        }
        if mapped != st.mapped {
            return Err(format!("{mapped} blocks mapped, {} counted", st.mapped));
        }
        for (i, c) in counts.iter().enumerate() {
            if map.valid(i as u32) != *c {
                return Err(format!(
                    "segment {i}: {} valid counted, {c} mapped",
                    map.valid(i as u32)
                ));
            }
        }
        let free = st.segs.iter().filter(|g| g.state == SegState::Free).count();
        if free != st.free.len() {
            return Err(format!("{free} segments free, {} on the free list", st.free.len()));
        }
        if st.free.len() < GC_RESERVE {
            return Err(format!("{} free segments, below the reserve", st.free.len()));
        }
        // Every open segment is some stream's, and only one's.
        let slots: Vec<u32> = st.host_open.iter().chain(&st.gc_open).flatten().copied().collect();
        let open = st.segs.iter().filter(|g| g.state == SegState::Open).count();
        for (i, s) in slots.iter().enumerate() {
            if st.segs[*s as usize].state != SegState::Open || slots[..i].contains(s) {
                return Err(format!(
                    "segment {s} is a stream's open segment but not open, or twice"
                ));
            }
        }
        if open != slots.len() {
            return Err(format!("{open} segments open, {} streams hold one", slots.len()));
        }
        Ok(())
    }
}
