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
//!   compete with host I/O on the same dies.
//!
//! Thread safety: `Send + Sync`. Reads take the state lock shared, so a
//! block they translate cannot be moved and erased under them; writes,
//! deallocations and garbage collection take it exclusively.

#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::{Mutex, RwLock};
use rand::Rng;
use zns_ftl_core::{select, Candidate, PageMap, VictimPolicy};
use zns_spec::StatusCode;

use crate::media::Media;
use crate::profile::{FtlProfile, ProfileError};

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
}

/// Which open segment a block goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stream {
    Host,
    Gc,
}

#[derive(Debug)]
struct State {
    segs: Vec<Segment>,
    free: VecDeque<u32>,
    host_open: Option<u32>,
    gc_open: Option<u32>,
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
        let fresh = Segment { state: SegState::Free, fill: 0, gen: 0, write_sum: 0 };
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
                host_open: None,
                gc_open: None,
                undo: Vec::new(),
                clock: 0,
                host_blocks: 0,
                gc_blocks: 0,
                victims: 0,
                mapped: 0,
                pending: Vec::new(),
                staging: vec![0; block_size as usize],
                meta_staging: vec![0; metadata_size as usize],
            }),
            events: Mutex::new(Vec::new()),
            read_blocks: AtomicU64::new(0),
        })
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
    pub(crate) fn write(
        &self,
        lba: u64,
        blocks: u64,
        moves_data: bool,
        store: impl FnOnce(&[(u64, u64)]) -> Result<(), StatusCode>,
    ) -> Result<Vec<Placement>, StatusCode> {
        let mut st = self.state.write();
        let r = self.place(&mut st, lba, blocks, moves_data, store);
        st.pending.clear();
        r
    }

    fn place(
        &self,
        st: &mut State,
        lba: u64,
        blocks: u64,
        moves_data: bool,
        store: impl FnOnce(&[(u64, u64)]) -> Result<(), StatusCode>,
    ) -> Result<Vec<Placement>, StatusCode> {
        let mut runs = [(0u64, 0u64); 4];
        let mut spill = Vec::new();
        let mut placed = Vec::new();
        let mut count = 0usize;
        let mut left = blocks;
        while left > 0 {
            let (seg, off, n) = self.room(st, Stream::Host, left, moves_data)?;
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
    }

    /// Takes the garbage-collection events a timing model has not taken.
    pub(crate) fn take_events(&self, out: &mut Vec<GcEvent>) {
        let mut e = self.events.lock();
        if !e.is_empty() {
            out.append(&mut e);
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
        let open = match stream {
            Stream::Host => st.host_open,
            Stream::Gc => st.gc_open,
        };
        let seg = match open {
            Some(s) => s,
            None => {
                if stream == Stream::Host {
                    self.make_room(st, moves_data)?;
                }
                let s = st.free.pop_front().ok_or(StatusCode::InternalError)?;
                let g = &mut st.segs[s as usize];
                (g.state, g.fill, g.write_sum) = (SegState::Open, 0, 0);
                match stream {
                    Stream::Host => st.host_open = Some(s),
                    Stream::Gc => st.gc_open = Some(s),
                }
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
            match stream {
                Stream::Host => st.host_open = None,
                Stream::Gc => st.gc_open = None,
            }
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
        let mut valid = Vec::new();
        let mut dest: Vec<Placement> = Vec::new();
        for off in 0..self.segment_blocks {
            let p = base + off;
            let Some(l) = map.owner(p) else { continue };
            let (seg, to_off, _) = self.room(st, Stream::Gc, 1, moves_data)?;
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
        Ok(())
    }
}
