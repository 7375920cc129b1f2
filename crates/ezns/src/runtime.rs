//! The shared state of one eZNS instance: the base device, the tenants and
//! their logical zones, per physical zone write tokens, the arbiter and
//! the control queue.
//!
//! # Thread safety
//!
//! [`Ezns`] is `Send + Sync`, shared by every tenant device and queue.
//!
//! * **I/O path, no locks.** A write to an open logical zone reserves its
//!   blocks with one compare-exchange on the zone's write-pointer word
//!   (which carries a *fast* bit: the zone is open and its current stripe
//!   group has room); reads and writes find their stripe groups in a
//!   snapshot of the zone's map (`ArcSwap`, read without a lock); a
//!   physical zone takes one write at a time, claimed with a
//!   compare-exchange on its token (the blocks completed in order, plus a
//!   busy bit), so writes of one physical zone from any number of queues
//!   reach the device in order. The scheduler is atomics.
//! * **Cold path, locks.** Anything that changes a zone's state or its
//!   groups (opening, the first write to a new group, restripes, close,
//!   finish, reset) clears the fast bit and takes the zone's mutex, then
//!   the arbiter's mutex (resources, budgets, the allocator; taken with
//!   `lock_arb`, which traces what was done when it is let go), then the
//!   control mutex (the journal and internal commands), in that order
//!   only; a lock taken out of that order is only ever tried
//!   (`try_lock`), never waited for.
//! * **Progress.** Internal commands (journal blocks, finishes and resets
//!   of physical zones) run on the control queue, which whoever polls any
//!   tenant queue pumps (`try_lock`: one at a time, never waited for).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering::*};
use std::sync::Arc;

use arc_swap::ArcSwap;
use parking_lot::Mutex;
use zns_device::{DeviceInfo, ZoneState, ZonedDevice};

use crate::arbiter::{Arbiter, Holding};
use crate::config::{Config, Mode};
use crate::control::Control;
use crate::layout::Layout;
use crate::sched::{ReadCc, WriteAdmission};
use crate::trace::{ArbGuard, Tracer};

/// Fast bit of a zone's write-pointer word.
pub(crate) const FAST: u64 = 1 << 63;
/// Write-pointer bits of the word.
pub(crate) const WP: u64 = (1 << 56) - 1;

/// Busy bit of a physical zone's token: a write, finish or reset is in
/// flight.
pub(crate) const BUSY: u64 = 1 << 63;
/// Blocks-completed bits of the token.
pub(crate) const DONE: u64 = (1 << 62) - 1;

/// Commit state of a journal record.
pub(crate) const PENDING: u8 = 0;
/// The record is durable.
pub(crate) const COMMITTED: u8 = 1;
/// The record could not be written.
pub(crate) const FAILED: u8 = 2;

/// The commit state of a journal record, shared by whoever waits for it.
pub(crate) type Gate = Arc<AtomicU8>;

/// A gate already committed.
pub(crate) fn committed() -> Gate {
    Arc::new(AtomicU8::new(COMMITTED))
}

/// A stripe group as the runtime uses it.
///
/// Thread safety: `Sync` (its layout is fixed; gate and flags are atomic).
#[derive(Debug)]
pub(crate) struct Group {
    pub layout: Layout,
    /// The group's journal record; its writes wait for it.
    pub gate: Gate,
    /// The logical zone was reset: the group's pending writes fail.
    pub dead: AtomicBool,
}

impl Group {
    pub fn new(layout: Layout, gate: Gate) -> Arc<Group> {
        Arc::new(Group { layout, gate, dead: AtomicBool::new(false) })
    }
}

/// The groups of a logical zone, by start; each ends where the next
/// starts, the last at its own end.
pub(crate) type ZoneMap = Vec<Arc<Group>>;

/// The end of group `i` of `map`.
pub(crate) fn group_end(map: &ZoneMap, i: usize) -> u64 {
    map.get(i + 1).map_or(map[i].layout.end(), |n| n.layout.start)
}

/// What changes only under a zone's mutex.
#[derive(Debug)]
pub(crate) struct ZoneInner {
    pub state: ZoneState,
    /// Why the zone takes no more writes after a failed one.
    pub broken: Option<zns_device::Status>,
}

/// One logical zone.
///
/// Thread safety: `Sync`; see the module documentation.
#[derive(Debug)]
pub(crate) struct LZone {
    pub index: u32,
    /// Fast bit and reserved write pointer (offset in the zone).
    pub word: AtomicU64,
    /// Writes on the fast path end before this offset.
    pub seg_end: AtomicU64,
    /// The zone state for reports (a copy of `inner.state`).
    pub state: AtomicU8,
    pub map: ArcSwap<ZoneMap>,
    pub inner: Mutex<ZoneInner>,
    /// A restripe is due (spares to return or to take): the next slow
    /// path does it.
    pub restripe: AtomicBool,
    pub rcc: ReadCc,
    /// Write bytes in flight (write admission).
    pub wbytes: AtomicU64,
    /// A write failed: waiting writes of the zone fail too.
    pub failed: AtomicBool,
}

impl LZone {
    pub fn new(index: u32, read_window: u32) -> LZone {
        LZone {
            index,
            word: AtomicU64::new(0),
            seg_end: AtomicU64::new(0),
            state: AtomicU8::new(ZoneState::Empty as u8),
            map: ArcSwap::from_pointee(Vec::new()),
            inner: Mutex::new(ZoneInner { state: ZoneState::Empty, broken: None }),
            restripe: AtomicBool::new(false),
            rcc: ReadCc::new(read_window),
            wbytes: AtomicU64::new(0),
            failed: AtomicBool::new(false),
        }
    }

    /// The reserved write pointer (zone offset).
    pub fn wp(&self) -> u64 {
        self.word.load(Acquire) & WP
    }

    /// Zone state, for reports.
    pub fn state(&self) -> ZoneState {
        ZoneState::from_raw(self.state.load(Acquire)).unwrap_or(ZoneState::Offline)
    }

    /// Stops fast-path reservations; returns the write pointer.
    pub fn clear_fast(&self) -> u64 {
        self.word.fetch_and(!FAST, AcqRel) & WP
    }

    /// Sets the state (under the mutex) and its copy.
    pub fn set_state(&self, inner: &mut ZoneInner, s: ZoneState) {
        inner.state = s;
        self.state.store(s as u8, Release);
    }

    /// Reserves `n` blocks on the fast path: at the write pointer, which
    /// must be `at` when given. `None`: take the slow path.
    #[inline]
    pub fn try_reserve(&self, at: Option<u64>, n: u64) -> Option<u64> {
        loop {
            let w = self.word.load(Acquire);
            if w & FAST == 0 {
                return None;
            }
            let wp = w & WP;
            if at.is_some_and(|a| a != wp) || wp + n >= self.seg_end.load(Acquire) {
                return None;
            }
            if self.word.compare_exchange_weak(w, w + n, AcqRel, Acquire).is_ok() {
                return Some(wp);
            }
        }
    }
}

/// One physical zone's runtime state.
///
/// Thread safety: atomics.
#[derive(Debug, Default)]
pub(crate) struct PhysZone {
    /// Blocks completed in order from the zone start, plus [`BUSY`].
    pub token: AtomicU64,
    /// Who holds it as an active zone: `(tenant + 1) << 16 | budget`, 0
    /// when nobody.
    pub holder: AtomicU32,
}

impl PhysZone {
    pub fn set_holder(&self, h: Holding) {
        self.holder.store((h.tenant as u32 + 1) << 16 | h.budget as u32, Release);
    }

    /// Clears the holder, once; returns it.
    pub fn take_holder(&self) -> Option<Holding> {
        match self.holder.swap(0, AcqRel) {
            0 => None,
            v => Some(Holding { tenant: ((v >> 16) - 1) as u16, budget: (v & 0xFFFF) as u16 }),
        }
    }

    pub fn holder(&self) -> Option<Holding> {
        match self.holder.load(Acquire) {
            0 => None,
            v => Some(Holding { tenant: ((v >> 16) - 1) as u16, budget: (v & 0xFFFF) as u16 }),
        }
    }
}

/// Counters of one tenant.
///
/// Thread safety: atomics.
#[derive(Debug, Default)]
pub(crate) struct TenantStats {
    pub writes: AtomicU64,
    pub write_blocks: AtomicU64,
    pub reads: AtomicU64,
    pub read_blocks: AtomicU64,
}

/// One tenant namespace's runtime state.
#[derive(Debug)]
pub(crate) struct Tenant {
    pub name: String,
    pub info: DeviceInfo,
    pub zones: Box<[LZone]>,
    /// Device time of its last write.
    pub last_write: AtomicU64,
    /// Device time of its last read (0: none yet).
    pub last_read: AtomicU64,
    /// The arbiter marked it inactive (a copy for the fast path).
    pub inactive: AtomicBool,
    pub stats: TenantStats,
}

/// Geometry of the base device and of the logical zones.
#[derive(Debug, Clone)]
pub(crate) struct Geometry {
    pub bs: usize,
    pub phys_zones: u32,
    pub phys_size: u64,
    pub phys_cap: u64,
    pub mdts_blocks: u64,
    /// Stripe unit in blocks.
    pub unit: u64,
    /// Logical zone capacity and size in blocks.
    pub lcap: u64,
    pub lsize: u64,
    /// The two journal zones.
    pub journal: [u32; 2],
}

/// One eZNS instance: a base device and its tenants.
pub(crate) struct Ezns {
    pub base: Arc<dyn ZonedDevice>,
    pub config: Config,
    pub geo: Geometry,
    pub tenants: Vec<Tenant>,
    pub phys: Box<[PhysZone]>,
    pub arb: Mutex<Arbiter>,
    pub ctl: Mutex<Control>,
    /// Internal work waiting (so idle pumps skip the lock).
    pub ctl_work: AtomicU64,
    /// Internal commands whose completions a pump took (the background
    /// thread or `Instance::pump`) rather than a tenant queue's poll.
    pub pumped: AtomicU64,
    pub wadm: WriteAdmission,
    pub next_tick: AtomicU64,
    /// Where the instance was opened from (its registry key).
    pub key: Option<std::path::PathBuf>,
    /// What bringing it up found.
    pub recovery: crate::open::RecoveryReport,
    /// Where its stripe and balloon events go (the base emulator's trace).
    pub trace: Tracer,
}

impl std::fmt::Debug for Ezns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ezns")
            .field("base", &self.base.info().uri)
            .field("mode", &self.config.mode)
            .field("tenants", &self.tenants.len())
            .finish_non_exhaustive()
    }
}

impl Ezns {
    /// True in elastic mode with the scheduler's read congestion control.
    pub fn read_cc(&self) -> bool {
        self.config.mode == Mode::Elastic && self.config.scheduler.read_cc
    }

    /// True in elastic mode with write admission control.
    pub fn write_admission(&self) -> bool {
        self.config.mode == Mode::Elastic && self.config.scheduler.write_admission
    }

    /// Locks the arbiter; what the holder does to it is traced when the
    /// guard goes.
    pub fn lock_arb(&self) -> ArbGuard<'_> {
        ArbGuard { guard: self.arb.lock(), trace: &self.trace }
    }

    /// [`Ezns::lock_arb`] if the lock is free.
    pub fn try_lock_arb(&self) -> Option<ArbGuard<'_>> {
        Some(ArbGuard { guard: self.arb.try_lock()?, trace: &self.trace })
    }

    /// Device time now, in the modelled drive's time: a dilated emulator's
    /// clock divided by its factor. The scheduler's targets (`read_target_us`,
    /// the write admission's), `idle_ms` and `tick_ms` are in the drive's
    /// time; measured on the dilated clock every latency would look F
    /// times longer and every idle period F times shorter.
    pub fn now(&self) -> u64 {
        match self.base.emulator() {
            Some(emu) => emu.clock().model_now_ns(),
            None => self.base.now_ns(),
        }
    }

    /// Start LBA of physical zone `z`.
    pub fn zone_lba(&self, z: u32) -> u64 {
        z as u64 * self.geo.phys_size
    }

    /// Releases the active-zone holdings of `zones` (and frees those
    /// marked `true`), under the arbiter's lock.
    pub fn release(&self, zones: &[(u32, bool)]) {
        if zones.is_empty() {
            return;
        }
        let mut arb = self.lock_arb();
        for &(z, free) in zones {
            if let Some(h) = self.phys[z as usize].take_holder() {
                arb.release(h);
                arb.alloc.release(z, h.tenant as usize);
                arb.unparked(z);
            }
            if free {
                arb.alloc.free(z);
            }
        }
    }
}
