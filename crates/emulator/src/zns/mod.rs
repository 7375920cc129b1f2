//! The zone state machine of a zoned namespace (NVMe Zoned Namespace
//! Command Set).
//!
//! [`Zones`] owns every zone's state, write pointer, attributes and
//! descriptor extension, the open/active resource accounting, and the
//! volatile-write-cache model (which part of each zone survives a power
//! cut). It stores no data: the media below store blocks, and this layer
//! decides which of them are visible. A read learns from
//! [`Zones::read_extent`] which blocks lie below their zone's written extent;
//! everything at or past it reads as zeros. Reset, offline and power cuts
//! therefore never have to wipe media for correctness; they report the
//! ranges the caller may deallocate.
//!
//! What it implements:
//!
//! * Write, Write Zeroes and the Copy destination ([`Zones::write`],
//!   [`Zones::write_zeroes`], [`Zones::copy_destination`]) and Zone Append
//!   ([`Zones::append`]), validated in the order QEMU's ZNS controller uses,
//!   with implicit open and controller-initiated close of the oldest
//!   implicitly opened zone when open resources run out.
//! * Zone Management Send ([`Zones::send`], [`Zones::send_raw`]): Close,
//!   Finish, Open, Reset, Offline and Set Zone Descriptor Extension, each
//!   with Select All; Open with ZRWA Allocate and Flush Explicit ZRWA Range
//!   when the geometry has zone random write areas ([`ZrwaGeometry`]).
//! * Zone Management Receive ([`Zones::report`]): Report Zones and Extended
//!   Report Zones with every filter and Partial Report.
//! * Durability ([`Zones::flush`], FUA, [`Zones::power_cut`],
//!   [`Zones::encode_durable`], [`Zones::decode_durable`]).
//! * Controller-initiated changes for fault injection (read only, offline,
//!   zone active excursion, reset/finish recommended) and the Changed Zone
//!   List they feed.
//!
//! # Locking
//!
//! Each zone has its own mutex; one more mutex guards the resources (the
//! open/active counts and the queue of implicitly opened zones); a third,
//! the changed-zone list, is a leaf.
//!
//! * Lock order: resources before zone locks; the changed-zone list last.
//! * A zone's state changes only while its lock *and* the resources lock are
//!   held. Holding the resources lock therefore freezes every zone's state
//!   (open zones may still advance their write pointer short of capacity).
//! * Without the resources lock, a thread holds at most one zone lock and
//!   acquires nothing else while holding it (except the leaf changed-zone
//!   list). A write that needs a transition drops its zone lock, takes the
//!   resources lock, re-takes the zone lock and validates again.
//! * Only the holder of the resources lock may hold two zone locks (the
//!   target of a write and the implicitly opened zone it closes).
//!
//! No deadlock is possible: a thread waiting for a zone lock while holding
//! another lock is the unique holder of the resources lock, and every
//! thread it can wait for holds a single zone lock and waits for nothing.
//! The wait-for graph thus has no cycle. The one rule callers must keep:
//! the `data` callbacks run under a zone lock (and sometimes the resources
//! lock) and must not call back into the same [`Zones`].

#![warn(missing_docs)]

mod durable;
mod fault;
mod geometry;
mod io;
mod report;
mod resources;
mod send;
mod zone;

#[cfg(test)]
mod tests;

use std::fmt;

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};
use zns_spec::{StatusCode, ZoneDescriptor, ZoneState};

pub use durable::{DurableError, ProvenZone};
pub use geometry::{GeometryError, ZoneGeometry, ZrwaGeometry, MAX_DESCRIPTOR_EXTENSION_BYTES};
pub use io::WriteOutcome;
pub use send::SendOutcome;
pub use zone::ZoneInfo;

use crate::media::Generations;
use resources::Resources;
use zone::Zone;

/// Why a write-type command failed: a completion status, or the caller's
/// own data transfer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ZoneError<E> {
    /// The command fails with this status; nothing changed.
    Status(StatusCode),
    /// The `data` callback failed; nothing changed (no write pointer
    /// movement, no transition).
    Data(E),
}

impl<E> From<StatusCode> for ZoneError<E> {
    fn from(s: StatusCode) -> Self {
        ZoneError::Status(s)
    }
}

impl<E> ZoneError<E> {
    /// The status code, if this is a status.
    pub fn status(&self) -> Option<StatusCode> {
        match self {
            ZoneError::Status(s) => Some(*s),
            ZoneError::Data(_) => None,
        }
    }
}

impl<E: fmt::Display> fmt::Display for ZoneError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ZoneError::Status(s) => write!(f, "{s}"),
            ZoneError::Data(e) => write!(f, "data transfer failed: {e}"),
        }
    }
}

impl<E: fmt::Debug + fmt::Display> std::error::Error for ZoneError<E> {}

/// Controller-initiated zone changes not yet read by the host (the Changed
/// Zone List log page). Each zone appears once.
#[derive(Debug, Default)]
struct ChangedZones {
    order: std::collections::VecDeque<u32>,
    listed: Vec<bool>,
}

/// How many zone changes were ever recorded: a reader that saw the same
/// count has nothing new to take (see [`Zones::changed_zones_generation`]).
#[derive(Debug, Default)]
struct ChangeCount(AtomicU64);

/// The zones of one zoned namespace. `Send + Sync`; every method takes
/// `&self`.
pub struct Zones {
    geometry: ZoneGeometry,
    zones: Box<[ZoneCell]>,
    resources: Mutex<Resources>,
    changed: Mutex<ChangedZones>,
    change_count: ChangeCount,
    /// Each zone's write generation (advanced by Reset and Offline), shared
    /// with the data checksums of the namespace's media.
    generations: Arc<Generations>,
}

impl fmt::Debug for Zones {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Zones")
            .field("geometry", &self.geometry)
            .field("open", &self.open_zones())
            .field("active", &self.active_zones())
            .finish_non_exhaustive()
    }
}

impl Zones {
    /// All zones Empty.
    pub fn new(geometry: ZoneGeometry) -> Result<Self, GeometryError> {
        geometry.validate()?;
        let (geometry_zone_size, zone_count) = (geometry.zone_size, geometry.zones);
        let zones = (0..geometry.zones)
            .map(|i| {
                ZoneCell::new(Zone::new(
                    geometry.zone_start(i),
                    geometry.descriptor_extension_bytes,
                ))
            })
            .collect();
        Ok(Zones {
            changed: Mutex::new(ChangedZones {
                order: Default::default(),
                listed: vec![false; geometry.zones as usize],
            }),
            geometry,
            zones,
            resources: Mutex::new(Resources::default()),
            change_count: ChangeCount::default(),
            generations: Arc::new(Generations::new(geometry_zone_size, zone_count, false)),
        })
    }

    /// Traces every zone state transition to `tracer` from now on (`None`:
    /// stops).
    pub(crate) fn set_tracer(&self, tracer: Option<Arc<crate::trace::ZoneTracer>>) {
        self.resources.lock().trace = tracer;
    }

    /// The zones' write generations (shared with the media's checksums).
    pub fn generations(&self) -> &Arc<Generations> {
        &self.generations
    }

    /// Makes the write generations fixed at what they are: resets no
    /// longer advance them. For device images made before generations
    /// existed, whose checksums all belong to generation 0.
    pub fn fix_generations(&mut self) {
        let g = &self.geometry;
        let fixed = Generations::new(g.zone_size, g.zones, true);
        self.generations = Arc::new(fixed);
    }

    /// The geometry this namespace was built with.
    pub fn geometry(&self) -> &ZoneGeometry {
        &self.geometry
    }

    /// The zone holding `lba`, or `None` past the end of the namespace.
    pub fn zone_of(&self, lba: u64) -> Option<u32> {
        self.geometry.zone_of(lba)
    }

    /// The descriptor a report would return for zone `zone` (write pointer
    /// all ones in Full, Read Only and Offline); `None` for a bad index.
    pub fn descriptor(&self, zone: u32) -> Option<ZoneDescriptor> {
        let cap = self.geometry.zone_capacity;
        self.zones.get(zone as usize).map(|z| z.lock().descriptor(cap))
    }

    /// A snapshot of zone `zone`, with its written and durable extents.
    pub fn zone_info(&self, zone: u32) -> Option<ZoneInfo> {
        self.zones.get(zone as usize).map(|z| z.lock().info(zone))
    }

    /// The zone descriptor extension of zone `zone` (all zeros unless ZDEV
    /// is set); `None` for a bad index.
    pub fn extension(&self, zone: u32) -> Option<Vec<u8>> {
        self.zones.get(zone as usize).map(|z| z.lock().ext.to_vec())
    }

    /// Zones in ZSIO or ZSEO.
    pub fn open_zones(&self) -> u32 {
        self.resources.lock().open
    }

    /// Zones in ZSIO, ZSEO or ZSC.
    pub fn active_zones(&self) -> u32 {
        self.resources.lock().active
    }

    /// Zones holding a zone random write area.
    pub fn zrwa_zones(&self) -> u32 {
        self.resources.lock().zrwa
    }

    /// Implicitly opened zones, oldest first: the order in which the
    /// controller closes them to free open resources.
    pub fn implicitly_opened(&self) -> Vec<u32> {
        self.resources.lock().implicit.iter().copied().collect()
    }

    /// Verifies the internal invariants: the counts and the queue of
    /// implicitly opened zones match the zone states, limits are respected,
    /// and every write pointer lies where its state allows. Meant for tests
    /// and debugging; takes every lock in order.
    pub fn check_invariants(&self) -> Result<(), String> {
        let res = self.resources.lock();
        let g = &self.geometry;
        let (mut open, mut active, mut zrwa) = (0u32, 0u32, 0u32);
        let mut implicit = Vec::new();
        for (i, m) in self.zones.iter().enumerate() {
            let z = m.lock();
            let end = z.start + g.zone_capacity;
            let what = |s: &str| format!("zone {i} ({:?}, wp {}): {s}", z.state, z.wp - z.start);
            if z.state.is_open() {
                open += 1;
            }
            if z.state.is_active() {
                active += 1;
            }
            if z.state == ZoneState::ImplicitlyOpen {
                implicit.push(i as u32);
            }
            if z.has_zrwa() {
                zrwa += 1;
                let size = g.zrwa.map_or(0, |w| w.size);
                if !z.state.is_active() {
                    return Err(what("ZRWA on a zone that is not active"));
                }
                if z.window_end > (z.wp + size).min(end) {
                    return Err(what("ZRWA blocks past the window or the capacity"));
                }
            } else if z.window_end > z.wp {
                return Err(what("uncommitted blocks without a ZRWA"));
            }
            if z.wp < z.start || z.wp > end {
                return Err(what("write pointer outside the zone capacity"));
            }
            if z.durable_wp < z.start || z.durable_wp > z.wp {
                return Err(what("durable extent outside [start, wp]"));
            }
            match z.state {
                ZoneState::Empty | ZoneState::Offline if z.wp != z.start => {
                    return Err(what("written blocks in an Empty or Offline zone"));
                }
                ZoneState::Empty | ZoneState::Offline if z.attrs.0 != 0 => {
                    return Err(what("attributes set in an Empty or Offline zone"));
                }
                s if s.is_active() && z.wp == end => {
                    return Err(what("active zone at capacity (should be Full)"));
                }
                ZoneState::Full | ZoneState::ReadOnly | ZoneState::Offline
                    if z.durable_wp != z.wp =>
                {
                    return Err(what("undurable blocks in a Full, Read Only or Offline zone"));
                }
                _ => {}
            }
            if z.attrs.0 & !zone::KNOWN_ATTRIBUTES != 0 {
                return Err(what("unexpected attribute bits"));
            }
            if !z.has_extension() && z.ext.iter().any(|&b| b != 0) {
                return Err(what("extension bytes without ZDEV"));
            }
        }
        if zrwa != res.zrwa || g.zrwa.map_or(zrwa > 0, |w| zrwa > w.resources) {
            return Err(format!("counts say {} ZRWAs, zones hold {zrwa}", res.zrwa));
        }
        if open != res.open || active != res.active {
            return Err(format!(
                "counts say open {} active {}, states say open {open} active {active}",
                res.open, res.active
            ));
        }
        let mut queued: Vec<u32> = res.implicit.iter().copied().collect();
        queued.sort_unstable();
        if queued != implicit {
            return Err(format!(
                "implicit-open queue {:?} != ZSIO zones {implicit:?}",
                res.implicit
            ));
        }
        if g.max_open.is_some_and(|m| open > m) || g.max_active.is_some_and(|m| active > m) {
            return Err(format!("limits exceeded: open {open}, active {active}"));
        }
        Ok(())
    }

    /// Locks zone `index`.
    fn lock(&self, index: u32) -> ZoneGuard<'_> {
        self.zones[index as usize].lock()
    }

    /// LBA Out of Range unless `[slba, slba + blocks)` lies in the namespace.
    fn check_range(&self, slba: u64, blocks: u64) -> Result<(), StatusCode> {
        match slba.checked_add(blocks) {
            Some(end) if end <= self.geometry.namespace_blocks() => Ok(()),
            _ => Err(StatusCode::LbaOutOfRange),
        }
    }

    /// Adds zone `index` to the Changed Zone List.
    fn note_changed(&self, index: u32) {
        let mut c = self.changed.lock();
        if !c.listed[index as usize] {
            c.listed[index as usize] = true;
            c.order.push_back(index);
        }
        // Under the list's lock, so a reader that loads the new count and
        // then takes the list finds this zone in it.
        self.change_count.0.fetch_add(1, Ordering::Release);
    }
}

/// A zone behind its lock, with the part reads need published outside it.
///
/// Reads only need to know how far a zone is written (and whether it is
/// Offline); they load [`ZoneCell::read_view`] instead of taking the lock,
/// so a read costs no atomic read-modify-write here. Every change to a zone
/// goes through a [`ZoneGuard`], which publishes the view when it unlocks:
/// a reader sees a write pointer only after the data below it is stored,
/// as it would by taking the lock after the writer.
struct ZoneCell {
    zone: Mutex<Zone>,
    /// The write pointer, or [`OFFLINE_VIEW`].
    view: AtomicU64,
}

/// [`ZoneCell::view`] of an Offline zone (no LBA reaches it).
const OFFLINE_VIEW: u64 = u64::MAX;

impl ZoneCell {
    fn new(zone: Zone) -> ZoneCell {
        let view = AtomicU64::new(Self::view_of(&zone));
        ZoneCell { zone: Mutex::new(zone), view }
    }

    fn view_of(zone: &Zone) -> u64 {
        if zone.state == ZoneState::Offline {
            OFFLINE_VIEW
        } else {
            zone.visible_end()
        }
    }

    fn lock(&self) -> ZoneGuard<'_> {
        ZoneGuard { guard: self.zone.lock(), view: &self.view }
    }

    /// The zone's write pointer as of the last unlock, or `None` when the
    /// zone is Offline.
    #[inline]
    fn read_view(&self) -> Option<u64> {
        Some(self.view.load(Ordering::Acquire)).filter(|&v| v != OFFLINE_VIEW)
    }
}

/// A locked zone; publishes the zone's read view when dropped.
struct ZoneGuard<'a> {
    guard: MutexGuard<'a, Zone>,
    view: &'a AtomicU64,
}

impl Deref for ZoneGuard<'_> {
    type Target = Zone;

    fn deref(&self) -> &Zone {
        &self.guard
    }
}

impl DerefMut for ZoneGuard<'_> {
    fn deref_mut(&mut self) -> &mut Zone {
        &mut self.guard
    }
}

impl Drop for ZoneGuard<'_> {
    fn drop(&mut self) {
        // Release: the media stores made under the lock happen before.
        self.view.store(ZoneCell::view_of(&self.guard), Ordering::Release);
    }
}
