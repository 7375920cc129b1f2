//! Zone pools and write heads.
//!
//! Every zone is in one pool: metadata, free (empty), open (a write head
//! of some stream), full, victim (being reclaimed) or unusable (read-only
//! or offline). Streams own their open zones as *heads*; a writer takes a
//! [`Grant`] of blocks in a head, writes them, then completes the grant.
//! A head whose blocks have all completed is sealed: the zone is full and
//! garbage collection may pick it.
//!
//! The FTL never has more zones open than the device allows: each stream
//! has a fixed most-heads count, and their sum plus the metadata log's zone
//! is at most the smaller of the open and active limits. Free zones below
//! the GC reserve go only to garbage collection, which can therefore always
//! finish a victim and give back a zone.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::config::StreamPlan;
use crate::error::{FtlError, Result};
use crate::layout::Layout;
use crate::map::Map;

/// The pool a zone is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pool {
    Meta,
    Free,
    Open,
    Full,
    Victim,
    Unusable,
}

/// Who asks for blocks: users wait for GC when free zones run low; GC
/// takes from the reserve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Who {
    User,
    Gc,
}

/// An open zone of a stream.
#[derive(Debug)]
struct Head {
    zone: u32,
    cap: u32,
    /// Blocks handed out (the write pointer, for plain writes).
    reserved: u32,
    /// Blocks written.
    completed: u32,
    /// A plain writer owns the head.
    busy: bool,
}

/// Blocks of a head granted to one writer.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Grant {
    pub stream: usize,
    pub zone: u32,
    /// First block offset (plain writes write exactly there).
    pub offset: u32,
    pub blocks: u32,
    /// The writer owns the head (plain writes, Copy); otherwise the head is
    /// shared and the data must be appended.
    pub exclusive: bool,
}

/// Per-zone facts for victim selection and temperature inference.
#[derive(Debug, Default)]
pub(crate) struct ZoneInfo {
    /// Sum over written blocks of their birth time (user blocks written
    /// when the data was first written).
    birth_sum: AtomicU64,
    /// Sum over written blocks of the time they were written into this
    /// zone.
    write_sum: AtomicU64,
    /// Blocks written since the last reset.
    written: AtomicU32,
    /// Resets done by this FTL instance.
    pub resets: AtomicU32,
    /// Stream role the zone was opened for (`Role as u32`).
    pub role: AtomicU32,
    /// Two samples of (valid blocks, time), older first, taken while the
    /// zone is full (see [`ZoneInfo::sample`]): the recent rate at which
    /// its valid blocks die.
    samples: [(AtomicU32, AtomicU64); 2],
}

impl ZoneInfo {
    /// Records `blocks` blocks born at `birth`, written at `now`.
    pub fn add(&self, birth: u64, now: u64, blocks: u32) {
        self.birth_sum.fetch_add(birth * blocks as u64, Ordering::Relaxed);
        self.write_sum.fetch_add(now * blocks as u64, Ordering::Relaxed);
        self.written.fetch_add(blocks, Ordering::Relaxed);
    }

    /// Mean time the zone's blocks were written into it (`now` when none
    /// were).
    pub fn written_at(&self, now: u64) -> u64 {
        match self.written.load(Ordering::Relaxed) {
            0 => now,
            n => self.write_sum.load(Ordering::Relaxed) / n as u64,
        }
    }

    /// Mean birth time of the zone's blocks (`now` when none were written).
    pub fn birth(&self, now: u64) -> u64 {
        match self.written.load(Ordering::Relaxed) {
            0 => now,
            n => self.birth_sum.load(Ordering::Relaxed) / n as u64,
        }
    }

    /// Records that `valid` blocks are valid at `now`, keeping the last
    /// two samples spaced at least half the zone's age apart (counted from
    /// the mean write time), so the older one is between a quarter and
    /// about half the age back.
    pub fn sample(&self, valid: u32, now: u64) {
        let written = self.written_at(now);
        let (_, last) = &self.samples[1];
        let last_t = last.load(Ordering::Relaxed);
        if last_t == 0 || now.saturating_sub(last_t) * 2 >= now.saturating_sub(written) {
            let (v0, t0) = &self.samples[0];
            let (v1, t1) = &self.samples[1];
            v0.store(v1.load(Ordering::Relaxed), Ordering::Relaxed);
            t0.store(t1.load(Ordering::Relaxed), Ordering::Relaxed);
            v1.store(valid, Ordering::Relaxed);
            t1.store(now.max(1), Ordering::Relaxed);
        }
    }

    /// The rate (per block of logical time) at which the zone's valid
    /// blocks died recently, `valid` of them valid at `now`: from the
    /// older sample when there is one, else from the whole zone since it
    /// was written (all `written` blocks valid at the mean write time).
    pub fn recent_death_rate(&self, valid: u32, now: u64) -> f64 {
        let (v0, t0) = &self.samples[0];
        let (mut from, mut at) = (v0.load(Ordering::Relaxed), t0.load(Ordering::Relaxed));
        if at == 0 || at >= now || from == 0 {
            from = self.written.load(Ordering::Relaxed);
            at = self.written_at(now);
        }
        let dt = (now.saturating_sub(at) + 1) as f64;
        (from.max(1) as f64 / valid.max(1) as f64).ln().max(0.0) / dt
    }

    /// Whether a user write replacing a block of this zone (`valid` of its
    /// blocks valid at `now`, mean birth `birth`) is hot, for a hot
    /// threshold of `threshold` blocks of logical time: the replaced data
    /// lived (since the zone's mean birth) shorter than the threshold
    /// scaled down by the zone's
    /// recent death rate when that is below one per threshold —
    /// `age < T · min(1, rate · T)`. A block of a zone whose blocks
    /// hardly die (cold data, with a few hot blocks among it) must have
    /// lived much shorter than `T` to count as hot; a zone of hot data
    /// keeps the plain lifetime test.
    pub fn replaces_hot(&self, birth: u64, valid: u32, now: u64, threshold: u64) -> bool {
        let t = threshold as f64;
        let age = now.saturating_sub(birth) as f64;
        age < t * (self.recent_death_rate(valid, now) * t).min(1.0)
    }

    fn clear(&self) {
        self.birth_sum.store(0, Ordering::Relaxed);
        self.write_sum.store(0, Ordering::Relaxed);
        self.written.store(0, Ordering::Relaxed);
        for (v, t) in &self.samples {
            v.store(0, Ordering::Relaxed);
            t.store(0, Ordering::Relaxed);
        }
    }
}

/// The update history of a logical block, one byte kept in the map
/// ([`Map::history`]): the coarse time of its last user write (the low
/// [`History::TIME_BITS`] bits of the logical time in units of an eighth
/// of the hot threshold, wrapping every eight thresholds) and a two-bit
/// saturating counter, raised when a write replaces data that lived
/// shorter than half the threshold and lowered otherwise. The block is
/// hot while the counter is at least two: a single short (or long) life
/// does not move a block between hot and cold, two do. 0 means no history
/// (never written since the mount).
pub(crate) struct History;

impl History {
    /// Bits of the coarse time.
    pub const TIME_BITS: u32 = 6;
    const TIME_MASK: u64 = (1 << Self::TIME_BITS) - 1;
    /// Units of coarse time per hot threshold.
    const UNITS: u64 = 8;
    /// A life shorter than this many units raises the counter.
    const SHORT: u64 = Self::UNITS;
    const MAX: u8 = 3;
    /// The counter at or above which a block is hot.
    const HOT: u8 = 2;

    /// Logical time per unit of coarse time.
    fn unit(threshold: u64) -> u64 {
        (threshold / Self::UNITS).max(1)
    }

    /// The history byte of a block written at `now` with counter `count`
    /// (never 0: a zero time with a zero counter is stored as time 1).
    fn encode(now: u64, threshold: u64, count: u8) -> u8 {
        let t = (now / Self::unit(threshold)) & Self::TIME_MASK;
        let h = ((count as u64) << Self::TIME_BITS | t) as u8;
        h.max(1)
    }

    /// Units of coarse time since the write recorded in `h` (modulo the
    /// wrap) and its counter.
    fn decode(h: u8, now: u64, threshold: u64) -> (u64, u8) {
        let t = (now / Self::unit(threshold)) & Self::TIME_MASK;
        let then = h as u64 & Self::TIME_MASK;
        (t.wrapping_sub(then) & Self::TIME_MASK, h >> Self::TIME_BITS)
    }
}

/// The pools, under one lock.
#[derive(Debug)]
pub(crate) struct Pools {
    pool: Vec<Pool>,
    free: VecDeque<u32>,
    heads: Vec<Vec<Head>>,
    /// Half-written zones found at recovery, (zone, blocks written): the
    /// next heads any stream opens continue them, before free zones (a
    /// Finish would pad them, at up to a second each on real drives).
    resume: VecDeque<(u32, u32)>,
    max_heads: Vec<u32>,
    /// Streams both users and GC write to.
    shared_with_gc: Vec<bool>,
    reserve: usize,
    gc_low: usize,
    gc_high: usize,
    /// Users waiting for a free zone.
    waiting: usize,
    /// GC found nothing to reclaim while users wait.
    stalled: bool,
    /// GC was asked to run (a foreground request or a watermark crossing).
    pub(crate) gc_requested: bool,
    pub(crate) shutdown: bool,
    failed: Option<String>,
}

impl Pools {
    /// True when users wait for a zone and none may be given to them.
    pub fn users_blocked(&self) -> bool {
        self.waiting > 0 && self.free.len() <= self.reserve
    }

    /// True when background GC should run.
    pub fn gc_wanted(&self) -> bool {
        self.gc_requested || self.free.len() <= self.reserve + self.gc_low
    }

    /// Free zones users may still take: those above the GC reserve.
    pub fn user_free(&self) -> usize {
        self.free.len().saturating_sub(self.reserve)
    }

    /// True when GC has done enough for now.
    pub fn gc_satisfied(&self) -> bool {
        self.free.len() >= self.reserve + self.gc_high
    }

    /// Zones per pool: (free, open, full, victim, meta, unusable).
    pub fn counts(&self) -> [usize; 6] {
        let mut c = [0usize; 6];
        for p in &self.pool {
            c[match p {
                Pool::Free => 0,
                Pool::Open => 1,
                Pool::Full => 2,
                Pool::Victim => 3,
                Pool::Meta => 4,
                Pool::Unusable => 5,
            }] += 1;
        }
        c
    }

    /// Blocks written in full zones and open zones: the space that holds
    /// valid or invalid data.
    pub fn written_blocks(&self, layout: &Layout) -> u64 {
        let full: u64 = self.full_zones().map(|z| layout.cap(z) as u64).sum();
        let open: u64 = self.heads.iter().flatten().map(|h| h.completed as u64).sum();
        let resume: u64 = self.resume.iter().map(|&(_, w)| w as u64).sum();
        full + open + resume
    }

    /// Open zones: write heads, and half-written zones waiting to become
    /// heads again.
    pub fn open_zones(&self) -> impl Iterator<Item = u32> + '_ {
        self.heads.iter().flatten().map(|h| h.zone).chain(self.resume.iter().map(|&(z, _)| z))
    }

    /// Full zones, for victim selection.
    pub fn full_zones(&self) -> impl Iterator<Item = u32> + '_ {
        self.pool.iter().enumerate().filter(|(_, p)| **p == Pool::Full).map(|(z, _)| z as u32)
    }

    /// The failure that stopped the FTL, if any.
    pub fn failed(&self) -> Option<&str> {
        self.failed.as_deref()
    }
}

/// Zone pools, heads, and per-zone information.
///
/// Thread safety: `Send + Sync`; the pools are behind one mutex (taken
/// twice per write request and once per GC step, never across device
/// commands), per-zone information is atomic.
#[derive(Debug)]
pub(crate) struct Zones {
    pools: Mutex<Pools>,
    /// Heads and free zones changed.
    changed: Condvar,
    /// Wakes the GC thread.
    gc_wake: Condvar,
    pub info: Box<[ZoneInfo]>,
    /// Times a user waited for a free zone.
    waits: AtomicU64,
    /// Set once `Pools::failed` is: lets the I/O paths check for failure
    /// without taking the pools' lock.
    stopped: AtomicBool,
}

impl Zones {
    /// Whether [`Zones::fail`] was called; the reason is in the pools.
    #[inline]
    pub fn has_failed(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }

    /// Times a user waited for garbage collection to free a zone.
    pub fn user_waits(&self) -> u64 {
        self.waits.load(Ordering::Relaxed)
    }

    /// Pools for `layout`, with each zone in the pool `pool` gives.
    pub fn new(
        layout: &Layout,
        plan: &StreamPlan,
        gc_low: u32,
        gc_high: u32,
        pool: Vec<Pool>,
        resume: Vec<(u32, u32)>,
    ) -> Self {
        debug_assert!(resume.iter().all(|&(z, _)| pool[z as usize] == Pool::Open));
        let free = pool
            .iter()
            .enumerate()
            .filter(|(_, p)| **p == Pool::Free)
            .map(|(z, _)| z as u32)
            .collect();
        Zones {
            pools: Mutex::new(Pools {
                pool,
                free,
                heads: plan.max_heads.iter().map(|_| Vec::new()).collect(),
                resume: resume.into(),
                max_heads: plan.max_heads.clone(),
                shared_with_gc: plan.shared_with_gc(),
                reserve: plan.reserve as usize,
                gc_low: gc_low as usize,
                gc_high: gc_high as usize,
                waiting: 0,
                stalled: false,
                gc_requested: false,
                shutdown: false,
                failed: None,
            }),
            changed: Condvar::new(),
            gc_wake: Condvar::new(),
            info: (0..layout.zones).map(|_| ZoneInfo::default()).collect(),
            waits: AtomicU64::new(0),
            stopped: AtomicBool::new(false),
        }
    }

    /// The pools, locked.
    pub fn lock(&self) -> MutexGuard<'_, Pools> {
        self.pools.lock()
    }

    /// Grants up to `want` blocks of an open zone of `stream`, opening a
    /// free zone when the stream's heads are used up. A user waits while
    /// free zones are at the GC reserve; `exclusive` asks for a head no one
    /// else writes (plain writes, Copy).
    pub fn reserve(
        &self,
        layout: &Layout,
        stream: usize,
        want: u32,
        who: Who,
        exclusive: bool,
        role: u32,
    ) -> Result<Grant> {
        let mut p = self.pools.lock();
        let mut waited = false;
        let result = loop {
            if let Some(f) = &p.failed {
                break Err(FtlError::Failed(f.clone()));
            }
            // In a stream GC also writes to, users keep off the open zones
            // while free zones are at the reserve: GC then needs at most one
            // new zone per victim, which the victim gives back.
            let keep_off =
                who == Who::User && p.shared_with_gc[stream] && p.free.len() <= p.reserve;
            let heads = &mut p.heads[stream];
            if let Some(h) = heads.iter_mut().find(|h| h.reserved < h.cap && !h.busy && !keep_off) {
                let blocks = want.min(h.cap - h.reserved);
                let g = Grant { stream, zone: h.zone, offset: h.reserved, blocks, exclusive };
                h.reserved += blocks;
                h.busy = exclusive;
                break Ok(g);
            }
            let room = (heads.len() as u32) < p.max_heads[stream];
            if room && !keep_off {
                // A half-written zone takes no free zone.
                if let Some((zone, written)) = p.resume.pop_front() {
                    self.info[zone as usize].role.store(role, Ordering::Relaxed);
                    p.heads[stream].push(Head {
                        zone,
                        cap: layout.cap(zone),
                        reserved: written,
                        completed: written,
                        busy: false,
                    });
                    continue;
                }
            }
            if room || keep_off {
                let allowed = match who {
                    Who::User => p.free.len() > p.reserve,
                    Who::Gc => !p.free.is_empty(),
                };
                if allowed && !keep_off {
                    let zone = p.free.pop_front().expect("a free zone");
                    p.pool[zone as usize] = Pool::Open;
                    let info = &self.info[zone as usize];
                    info.role.store(role, Ordering::Relaxed);
                    p.heads[stream].push(Head {
                        zone,
                        cap: layout.cap(zone),
                        reserved: 0,
                        completed: 0,
                        busy: false,
                    });
                    if p.gc_wanted() {
                        self.gc_wake.notify_one();
                    }
                    continue;
                }
                if who == Who::Gc {
                    break Err(FtlError::Failed(
                        "garbage collection found no free zone (the GC reserve is exhausted)"
                            .into(),
                    ));
                }
                if p.stalled {
                    // GC found nothing to reclaim while free zones were at
                    // the reserve (it clears this when a zone fills or
                    // blocks are discarded).
                    break Err(FtlError::NoSpace);
                }
                if !waited {
                    p.waiting += 1;
                    waited = true;
                    self.waits.fetch_add(1, Ordering::Relaxed);
                }
                self.gc_wake.notify_one();
            }
            self.changed.wait_for(&mut p, Duration::from_millis(50));
        };
        if waited {
            p.waiting -= 1;
        }
        result
    }

    /// Gives back a grant whose blocks are written: the head is free for
    /// the next writer, and sealed once every block is written.
    pub fn complete(&self, g: &Grant) {
        let mut p = self.pools.lock();
        let heads = &mut p.heads[g.stream];
        let Some(i) = heads.iter().position(|h| h.zone == g.zone) else {
            debug_assert!(false, "grant of a zone that is no head");
            return;
        };
        let h = &mut heads[i];
        h.completed += g.blocks;
        if g.exclusive {
            h.busy = false;
        }
        if h.completed == h.cap {
            heads.swap_remove(i);
            p.pool[g.zone as usize] = Pool::Full;
            // A new candidate for garbage collection.
            p.stalled = false;
        }
        drop(p);
        self.changed.notify_all();
    }

    /// Takes the idle head holding the most invalid blocks (per `invalid`)
    /// out of its stream and makes it full, for the caller to finish on the
    /// device: the last resort of GC when no full zone has an invalid
    /// block. `None` when no idle head has one.
    pub fn close_out_head(&self, p: &mut Pools, invalid: impl Fn(u32, u32) -> u32) -> Option<u32> {
        // Half-written zones waiting to be continued count as idle heads.
        let resumed = p
            .resume
            .iter()
            .enumerate()
            .map(|(i, &(z, w))| (i, invalid(z, w)))
            .filter(|&(_, n)| n > 0)
            .max_by_key(|&(_, n)| n);
        if let Some((i, _)) = resumed {
            let (zone, _) = p.resume.remove(i).expect("listed");
            p.pool[zone as usize] = Pool::Full;
            return Some(zone);
        }
        let (s, i, _) = p
            .heads
            .iter()
            .enumerate()
            .flat_map(|(s, hs)| hs.iter().enumerate().map(move |(i, h)| (s, i, h)))
            .filter(|(_, _, h)| !h.busy && h.completed == h.reserved)
            .map(|(s, i, h)| (s, i, invalid(h.zone, h.completed)))
            .filter(|&(_, _, n)| n > 0)
            .max_by_key(|&(_, _, n)| n)?;
        let h = p.heads[s].swap_remove(i);
        p.pool[h.zone as usize] = Pool::Full;
        Some(h.zone)
    }

    /// Marks `zone` a victim of garbage collection.
    pub fn take_victim(&self, p: &mut Pools, zone: u32) {
        debug_assert_eq!(p.pool[zone as usize], Pool::Full);
        p.pool[zone as usize] = Pool::Victim;
    }

    /// A reclaimed (reset) victim becomes free.
    pub fn release_victim(&self, zone: u32) {
        let mut p = self.pools.lock();
        debug_assert_eq!(p.pool[zone as usize], Pool::Victim);
        p.pool[zone as usize] = Pool::Free;
        p.free.push_back(zone);
        p.stalled = false;
        let info = &self.info[zone as usize];
        info.clear();
        info.resets.fetch_add(1, Ordering::Relaxed);
        drop(p);
        self.changed.notify_all();
    }

    /// A victim that could not be reclaimed goes back to the full pool.
    pub fn return_victim(&self, zone: u32) {
        let mut p = self.pools.lock();
        if p.pool[zone as usize] == Pool::Victim {
            p.pool[zone as usize] = Pool::Full;
        }
    }

    /// GC found nothing to reclaim: waiting users get [`FtlError::NoSpace`].
    pub fn set_stalled(&self, p: &mut Pools, stalled: bool) {
        p.stalled = stalled;
        self.changed.notify_all();
    }

    /// Something became reclaimable (a discard): GC may succeed again.
    pub fn unstall(&self) {
        let mut p = self.pools.lock();
        if p.stalled {
            p.stalled = false;
            p.gc_requested = true;
            self.gc_wake.notify_one();
        }
    }

    /// Stops every writer with `why`.
    pub fn fail(&self, why: &str) {
        let mut p = self.pools.lock();
        if p.failed.is_none() {
            tracing::error!(reason = why, "FTL stopped");
            p.failed = Some(why.to_string());
            self.stopped.store(true, Ordering::Release);
        }
        drop(p);
        self.changed.notify_all();
        self.gc_wake.notify_all();
    }

    /// Asks the GC thread to stop.
    pub fn shutdown(&self) {
        self.pools.lock().shutdown = true;
        self.gc_wake.notify_all();
        self.changed.notify_all();
    }

    /// Waits (the GC thread) until GC is wanted or `timeout` passes.
    pub fn gc_wait(&self, p: &mut MutexGuard<'_, Pools>, timeout: Duration) {
        self.gc_wake.wait_for(p, timeout);
    }

    /// Whether a user write replacing a block of `zone`, whose blocks'
    /// mean birth is `birth`, is hot: see [`ZoneInfo::replaces_hot`]
    /// ([`Zones::classify_write`] asks this for blocks without history).
    pub fn replaces_hot(&self, zone: u32, birth: u64, map: &Map, now: u64, threshold: u64) -> bool {
        self.info[zone as usize].replaces_hot(birth, map.valid(zone), now, threshold)
    }

    /// Whether a user write of logical block `l`, whose data is now at
    /// `at` (`None`: unmapped), is hot, updating the block's history (see
    /// [`History`]) for a write at `now` with a hot threshold of
    /// `threshold` blocks of logical time. The age of the replaced data is
    /// the larger of the time since the block's recorded write (which
    /// wraps) and the time since its zone's blocks were written (a lower
    /// bound for data a GC relocated since). Without history the zone
    /// decides ([`ZoneInfo::replaces_hot`]), with the counter set just to
    /// the hot or the cold side. Unmapped blocks are cold.
    pub fn classify_write(
        &self,
        map: &Map,
        layout: &Layout,
        l: u64,
        at: Option<u32>,
        now: u64,
        threshold: u64,
    ) -> bool {
        let count = match at {
            None => 0,
            Some(p) => {
                let zone = layout.zone_of(p);
                let info = &self.info[zone as usize];
                match map.history(l) {
                    0 => {
                        let birth = info.birth(now);
                        if self.replaces_hot(zone, birth, map, now, threshold) {
                            History::HOT
                        } else {
                            History::HOT - 1
                        }
                    }
                    h => {
                        let (units, count) = History::decode(h, now, threshold);
                        let unit = History::unit(threshold);
                        let zone_units = now.saturating_sub(info.written_at(now)) / unit;
                        if units.max(zone_units) < History::SHORT {
                            (count + 1).min(History::MAX)
                        } else {
                            count.saturating_sub(1)
                        }
                    }
                }
            }
        };
        map.set_history(l, History::encode(now, threshold, count));
        count >= History::HOT
    }

    /// Wakes the GC thread.
    pub fn gc_notify(&self) {
        self.gc_wake.notify_one();
    }

    /// Wakes the GC thread to look at the zones again (a write or discard
    /// may have emptied a full zone, see `gc::empty_ahead`). Notified under
    /// the pools' lock: the GC thread holds it from its last look until it
    /// waits, so the wake-up cannot fall in between and be lost.
    pub fn poke_gc(&self) {
        let _p = self.pools.lock();
        self.gc_wake.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{FtlConfig, StreamPlan};

    fn setup(zones: u32) -> (Layout, Zones) {
        let layout = Layout {
            block_size: 4096,
            zone_size: 16,
            zones,
            caps: vec![10; zones as usize].into(),
            stride: 10,
            meta_zones: 1,
            mdts_blocks: 8,
            zasl_blocks: 4,
            logical: 20,
        };
        let plan = StreamPlan::new(&FtlConfig::default(), 8).unwrap();
        let mut pool = vec![Pool::Free; zones as usize];
        pool[0] = Pool::Meta;
        let z = Zones::new(&layout, &plan, 1, 2, pool, Vec::new());
        (layout, z)
    }

    #[test]
    fn grants_fill_heads_and_seal_them() {
        let (l, z) = setup(8);
        let g = z.reserve(&l, 0, 6, Who::User, true, 0).unwrap();
        assert_eq!((g.zone, g.offset, g.blocks), (1, 0, 6));
        z.complete(&g);
        let g = z.reserve(&l, 0, 6, Who::User, true, 0).unwrap();
        assert_eq!((g.zone, g.offset, g.blocks), (1, 6, 4));
        z.complete(&g);
        assert_eq!(z.lock().counts(), [6, 0, 1, 0, 1, 0]);
        let g = z.reserve(&l, 1, 3, Who::User, false, 1).unwrap();
        assert_eq!(g.zone, 2);
        let g2 = z.reserve(&l, 1, 3, Who::User, false, 1).unwrap();
        assert_eq!((g2.zone, g2.offset), (2, 3), "shared heads hand out disjoint blocks");
        z.complete(&g);
        z.complete(&g2);
        let mut p = z.lock();
        assert_eq!(p.full_zones().collect::<Vec<_>>(), vec![1]);
        z.take_victim(&mut p, 1);
        drop(p);
        z.release_victim(1);
        assert_eq!(z.lock().counts()[0], 6);
        assert_eq!(z.info[1].resets.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn death_rates_come_from_recent_samples() {
        let i = ZoneInfo::default();
        // 1000 blocks written around time 1000; at 2000, 500 are valid.
        i.add(1000, 1000, 1000);
        let r = i.recent_death_rate(500, 2000);
        assert!((r - 2f64.ln() / 1001.0).abs() < 1e-9, "{r}");
        // Samples at 2000 (500 valid) and 3000 (450): the older one gives
        // the recent rate, ln(500/450) over the 1000 since.
        i.sample(500, 2000);
        i.sample(450, 3000);
        let r = i.recent_death_rate(400, 4000);
        assert!((r - (500f64 / 400.0).ln() / 2001.0).abs() < 1e-9, "{r}");
        // A sample closer than half the age to the last is not kept.
        i.sample(440, 3100);
        let r2 = i.recent_death_rate(400, 4000);
        assert_eq!(r, r2);
        // Nothing died lately: no rate; the zone's data is cold.
        let c = ZoneInfo::default();
        c.add(0, 0, 100);
        c.sample(100, 1000);
        c.sample(100, 2000);
        assert_eq!(c.recent_death_rate(100, 3000), 0.0);
        assert!(!c.replaces_hot(2999, 100, 3000, 1000));
        // A fast-dying zone keeps the plain lifetime test.
        let h = ZoneInfo::default();
        h.add(0, 0, 100);
        assert!(h.replaces_hot(0, 10, 500, 1000) && !h.replaces_hot(0, 10, 1500, 1000));
        i.clear();
        assert_eq!(i.recent_death_rate(0, 10), 0.0);
    }

    #[test]
    fn history_needs_two_short_lives_to_make_a_block_hot() {
        let (l, z) = setup(4);
        let m = Map::new(&l);
        let t = 800; // hot threshold; units of 100
        let zone_of_1 = Some(l.stride);
        z.info[1].add(0, 0, 10);
        // Unmapped: cold, history recorded.
        assert!(!z.classify_write(&m, &l, 0, None, 0, t));
        assert_ne!(m.history(0), 0);
        // Short lives raise the counter: cold (1), then hot (2, 3).
        assert!(!z.classify_write(&m, &l, 0, zone_of_1, 100, t));
        assert!(z.classify_write(&m, &l, 0, zone_of_1, 200, t));
        assert!(z.classify_write(&m, &l, 0, zone_of_1, 300, t));
        // One long life (a zone written long ago) keeps it hot, two do not.
        let far = 20 * t;
        z.info[2].add(far - 2 * t, far - 2 * t, 10);
        let zone_of_2 = Some(2 * l.stride);
        assert!(z.classify_write(&m, &l, 0, zone_of_2, far, t));
        assert!(!z.classify_write(&m, &l, 0, zone_of_2, far + 2 * t, t));
        // The coarse time wraps: a short life after one is still short.
        let (units, count) = History::decode(History::encode(63 * 100, t, 1), 65 * 100, t);
        assert_eq!((units, count), (2, 1));
        // Without history the zone decides (a fresh zone: hot data).
        z.info[3].add(far, far, 10);
        assert!(z.classify_write(&m, &l, 1, Some(3 * l.stride), far + 10, t));
    }

    #[test]
    fn users_stop_at_the_reserve_and_gc_does_not() {
        // 1 meta zone, 3 free zones, reserve 2: users get one zone.
        let (l, z) = setup(4);
        let g = z.reserve(&l, 0, 10, Who::User, true, 0).unwrap();
        z.complete(&g);
        z.fail("test");
        assert!(matches!(z.reserve(&l, 0, 1, Who::User, true, 0), Err(FtlError::Failed(_))));
        let (l, z) = setup(4);
        let g = z.reserve(&l, 0, 10, Who::User, true, 0).unwrap();
        z.complete(&g);
        let mut p = z.lock();
        z.set_stalled(&mut p, true);
        drop(p);
        assert!(matches!(z.reserve(&l, 0, 1, Who::User, true, 0), Err(FtlError::NoSpace)));
        let g = z.reserve(&l, 2, 10, Who::Gc, true, 2).unwrap();
        assert_eq!(g.blocks, 10);
    }
}
