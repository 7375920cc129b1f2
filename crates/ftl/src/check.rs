//! Consistency check of an FTL: [`Ftl::check`].
//!
//! The check compares what the FTL believes with itself and with the
//! device:
//!
//! - every mapped logical block points into the capacity of a data zone,
//!   and the reverse map (P2L) of that block names it back; every P2L entry
//!   names a logical block that maps back to it;
//! - each zone's valid-block count equals a recount of the map;
//! - each zone's pool agrees with the device: full zones are Full, free
//!   zones Empty, open zones opened, closed or (nothing written yet)
//!   empty, with their write pointers adding up to what the FTL wrote into
//!   them; no block maps into a free or unusable zone or past an open
//!   zone's write pointer; metadata zones are usable;
//! - optionally, every mapped block reads back without an error.
//!
//! The check is meant for an FTL nobody is writing to (as `zns ftl check`
//! runs it): it first waits, a bounded time, for background garbage
//! collection to go idle, then freezes the map (the journal lock) while it
//! scans it. Writes in flight at the same time may show up as problems.

use std::fmt;
use std::time::{Duration, Instant};

use zns_device::{ReportFilter, ZoneState};

use crate::error::{FtlError, Result};
use crate::ftl::{Ftl, Shared};

/// Problems kept in a [`CheckReport`]; more are only counted.
pub const MAX_PROBLEMS: usize = 1000;

/// One inconsistency [`Ftl::check`] found.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CheckProblem {
    /// A logical block maps outside the capacity of the data zones.
    MapOutOfRange {
        /// Logical block.
        logical: u64,
        /// The physical block number (zone × stride + offset) it maps to.
        pba: u64,
        /// Where that is.
        reason: &'static str,
    },
    /// A logical block maps to a block whose reverse entry does not name
    /// it.
    L2pP2lMismatch {
        /// Logical block.
        logical: u64,
        /// Zone it maps into.
        zone: u32,
        /// Block offset inside the zone.
        offset: u32,
        /// The logical block the reverse entry names, if any.
        owner: Option<u64>,
    },
    /// A reverse entry names a logical block that does not map back to it.
    StaleP2l {
        /// Zone of the block.
        zone: u32,
        /// Block offset inside the zone.
        offset: u32,
        /// The logical block the reverse entry names.
        logical: u64,
        /// Where that logical block maps instead, as (zone, offset).
        maps_to: Option<(u32, u32)>,
    },
    /// A zone's valid-block count differs from a recount of the map.
    ValidCount {
        /// Zone.
        zone: u32,
        /// The count the FTL keeps.
        recorded: u32,
        /// Blocks of the zone that logical blocks map to.
        counted: u32,
    },
    /// A logical block maps into a zone that holds no data (free or
    /// unusable).
    MappedInUnwrittenZone {
        /// Logical block.
        logical: u64,
        /// Zone it maps into.
        zone: u32,
        /// Block offset inside the zone.
        offset: u32,
        /// The zone's pool (`free`, `unusable`).
        pool: &'static str,
    },
    /// A logical block maps into an open zone at or past the device's
    /// write pointer: its data was never written.
    MappedPastWritePointer {
        /// Logical block.
        logical: u64,
        /// Zone it maps into.
        zone: u32,
        /// Block offset inside the zone.
        offset: u32,
        /// Blocks the device says are written in the zone.
        written: u64,
    },
    /// The device's zone state does not fit the zone's pool.
    ZoneState {
        /// Zone.
        zone: u32,
        /// The zone's pool in the FTL (`metadata`, `full`, `open`, `free`).
        pool: &'static str,
        /// The state the device reports.
        state: ZoneState,
        /// The write pointer the device reports (blocks from the zone
        /// start), where it has one.
        written: Option<u64>,
        /// What the pool requires.
        expected: &'static str,
    },
    /// The write pointers of the open zones do not add up to the blocks
    /// the FTL wrote into them.
    OpenZonesWritten {
        /// Blocks the FTL completed in its open zones.
        ftl: u64,
        /// Blocks below the device's write pointers of those zones.
        device: u64,
    },
    /// The device reports a different number of zones than the FTL was
    /// formatted with.
    ZoneCount {
        /// Zones the FTL knows.
        expected: u32,
        /// Zones the device reported.
        reported: u64,
    },
    /// A mapped block's per-LBA metadata tag names another logical block,
    /// or none (`read_all`, on devices whose blocks carry tags).
    WrongTag {
        /// Zone.
        zone: u32,
        /// Block offset in the zone.
        offset: u32,
        /// The logical block the map says is there.
        logical: u64,
        /// The logical block the tag names (`None`: untagged).
        tagged: Option<u64>,
    },
    /// A mapped block's tag names it, but its data (or the tag) fails the
    /// tag's data checksum (`read_all`, FTLs formatted with data
    /// checksums): reads of it fail.
    DamagedData {
        /// Zone.
        zone: u32,
        /// Block offset in the zone.
        offset: u32,
        /// The logical block.
        logical: u64,
    },
    /// A metadata page is damaged that the mount did not need (a header
    /// copy, a page older than the checkpoint loaded, a page of a
    /// checkpoint): the state is intact, and `zns ftl check --repair`
    /// rewrites the log without it.
    DamagedMetadata {
        /// Metadata zone.
        zone: u32,
        /// Block in the zone.
        block: u32,
        /// What is wrong and what the page held.
        reason: String,
    },
    /// Reading mapped blocks back failed (`read_all`).
    ReadFailed {
        /// Zone.
        zone: u32,
        /// First block offset of the read.
        offset: u32,
        /// Blocks in the read.
        blocks: u32,
        /// The device's error.
        error: String,
    },
}

impl CheckProblem {
    /// A short name of the kind of problem (`l2p-p2l-mismatch`, ...), for
    /// machine-readable output.
    pub fn kind(&self) -> &'static str {
        match self {
            CheckProblem::MapOutOfRange { .. } => "map-out-of-range",
            CheckProblem::L2pP2lMismatch { .. } => "l2p-p2l-mismatch",
            CheckProblem::StaleP2l { .. } => "stale-p2l",
            CheckProblem::ValidCount { .. } => "valid-count",
            CheckProblem::MappedInUnwrittenZone { .. } => "mapped-in-unwritten-zone",
            CheckProblem::MappedPastWritePointer { .. } => "mapped-past-write-pointer",
            CheckProblem::ZoneState { .. } => "zone-state",
            CheckProblem::OpenZonesWritten { .. } => "open-zones-written",
            CheckProblem::ZoneCount { .. } => "zone-count",
            CheckProblem::ReadFailed { .. } => "read-failed",
            CheckProblem::DamagedMetadata { .. } => "damaged-metadata",
            CheckProblem::WrongTag { .. } => "wrong-tag",
            CheckProblem::DamagedData { .. } => "damaged-data",
        }
    }

    /// The zone the problem is in, when it is about one zone.
    pub fn zone(&self) -> Option<u32> {
        match *self {
            CheckProblem::L2pP2lMismatch { zone, .. }
            | CheckProblem::StaleP2l { zone, .. }
            | CheckProblem::ValidCount { zone, .. }
            | CheckProblem::MappedInUnwrittenZone { zone, .. }
            | CheckProblem::MappedPastWritePointer { zone, .. }
            | CheckProblem::ZoneState { zone, .. }
            | CheckProblem::ReadFailed { zone, .. }
            | CheckProblem::WrongTag { zone, .. }
            | CheckProblem::DamagedData { zone, .. }
            | CheckProblem::DamagedMetadata { zone, .. } => Some(zone),
            _ => None,
        }
    }
}

impl fmt::Display for CheckProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CheckProblem::DamagedMetadata { zone, block, reason } => write!(
                f,
                "metadata zone {zone} block {block}: {reason}; the FTL's state is intact, and \
                 `--repair` rewrites the log without it"
            ),
            CheckProblem::MapOutOfRange { logical, pba, reason } => {
                write!(f, "logical block {logical} maps to physical block {pba}, {reason}")
            }
            CheckProblem::L2pP2lMismatch { logical, zone, offset, owner } => {
                write!(f, "logical block {logical} maps to zone {zone} block {offset}, whose reverse map entry ")?;
                match owner {
                    Some(o) => write!(f, "names logical block {o}"),
                    None => write!(f, "is empty"),
                }
            }
            CheckProblem::StaleP2l { zone, offset, logical, maps_to } => {
                write!(f, "zone {zone} block {offset} claims logical block {logical}, which ")?;
                match maps_to {
                    Some((z, o)) => write!(f, "maps to zone {z} block {o}"),
                    None => write!(f, "is unmapped"),
                }
            }
            CheckProblem::ValidCount { zone, recorded, counted } => write!(
                f,
                "zone {zone}: the FTL counts {recorded} valid blocks, the map has {counted}"
            ),
            CheckProblem::MappedInUnwrittenZone { logical, zone, offset, pool } => write!(
                f,
                "logical block {logical} maps to zone {zone} block {offset}, but that zone is \
                 {pool}"
            ),
            CheckProblem::MappedPastWritePointer { logical, zone, offset, written } => write!(
                f,
                "logical block {logical} maps to zone {zone} block {offset}, at or past the \
                 device's write pointer ({written} blocks written)"
            ),
            CheckProblem::ZoneState { zone, pool, state, written, expected } => {
                write!(f, "zone {zone} ({pool} in the FTL) is {state:?} on the device")?;
                if let Some(w) = written {
                    write!(f, " with {w} blocks written")?;
                }
                write!(f, "; expected {expected}")
            }
            CheckProblem::OpenZonesWritten { ftl, device } => write!(
                f,
                "the FTL completed {ftl} blocks in its open zones, but the device's write \
                 pointers say {device}"
            ),
            CheckProblem::ZoneCount { expected, reported } => {
                write!(
                    f,
                    "the device reports {reported} zones, the FTL was formatted with {expected}"
                )
            }
            CheckProblem::ReadFailed { zone, offset, blocks, error } => {
                write!(f, "reading {blocks} blocks of zone {zone} at block {offset}: {error}")
            }
            CheckProblem::WrongTag { zone, offset, logical, tagged } => match tagged {
                Some(t) => write!(
                    f,
                    "block {offset} of zone {zone} holds logical block {logical} by the map, \
                     but its metadata tag names logical block {t}"
                ),
                None => write!(
                    f,
                    "block {offset} of zone {zone} holds logical block {logical} by the map, \
                     but its metadata carries no valid tag"
                ),
            },
            CheckProblem::DamagedData { zone, offset, logical } => write!(
                f,
                "block {offset} of zone {zone} (logical block {logical}) fails its data checksum: \
                 its data or tag is damaged (or another FTL's), and reads of it fail"
            ),
        }
    }
}

/// What [`Ftl::check`] looked at and found.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CheckReport {
    /// Logical blocks the FTL exposes.
    pub logical_blocks: u64,
    /// Logical blocks that are mapped (hold data).
    pub mapped_blocks: u64,
    /// Zones of the device.
    pub zones: u32,
    /// Metadata zones.
    pub meta_zones: u32,
    /// Full data zones.
    pub full_zones: u32,
    /// Open data zones (write heads).
    pub open_zones: u32,
    /// Free data zones.
    pub free_zones: u32,
    /// Zones left out as read-only or offline.
    pub unusable_zones: u32,
    /// Physical block entries of the reverse map scanned.
    pub physical_blocks_checked: u64,
    /// True when every mapped block was read back.
    pub read_all: bool,
    /// Blocks read back without an error (`read_all`).
    pub blocks_read: u64,
    /// Problems found, at most [`MAX_PROBLEMS`].
    pub problems: Vec<CheckProblem>,
    /// Problems found in all (more than `problems.len()` when some were
    /// left out).
    pub problems_total: u64,
}

impl CheckReport {
    /// Whether every problem found is damaged metadata the mount did not
    /// need ([`CheckProblem::DamagedMetadata`]): a repair restores
    /// everything.
    pub fn only_repairable(&self) -> bool {
        !self.is_ok()
            && self.problems_total == self.problems.len() as u64
            && self.problems.iter().all(|p| matches!(p, CheckProblem::DamagedMetadata { .. }))
    }

    /// True when no problem was found.
    pub fn is_ok(&self) -> bool {
        self.problems_total == 0
    }

    fn problem(&mut self, p: CheckProblem) {
        self.problems_total += 1;
        if self.problems.len() < MAX_PROBLEMS {
            self.problems.push(p);
        }
    }
}

/// The pool of a zone, as far as the check tells them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Meta,
    Full,
    Open,
    /// Free or unusable (told apart by the device's state).
    Other,
}

/// How long [`Ftl::check`] waits for garbage collection to go idle.
const GC_WAIT: Duration = Duration::from_secs(30);

/// True while garbage collection is reclaiming a zone or has one to
/// reclaim and wants to (by the watermarks, or empty zones it reclaims
/// ahead of need).
fn gc_busy(s: &Shared) -> Result<bool> {
    let p = s.zones.lock();
    if let Some(f) = p.failed() {
        return Err(FtlError::Failed(f.to_string()));
    }
    let victims = p.counts()[3];
    let wanted = p.gc_wanted() && crate::gc::select_victim(s, &p).is_some();
    Ok(victims > 0 || wanted || crate::gc::empty_ahead(s, &p).is_some())
}

/// Waits (at most [`GC_WAIT`]) until garbage collection has been idle for
/// a few consecutive looks.
fn wait_for_quiet_gc(s: &Shared) -> Result<()> {
    let start = Instant::now();
    let mut quiet = 0;
    while quiet < 3 {
        if gc_busy(s)? {
            quiet = 0;
            if start.elapsed() > GC_WAIT {
                tracing::warn!("garbage collection still busy; checking anyway");
                return Ok(());
            }
            s.zones.gc_notify();
        } else {
            quiet += 1;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}

impl Ftl {
    /// Verifies the FTL's invariants against itself and the device and,
    /// with `read_all`, reads every mapped block back:
    ///
    /// - every mapped logical block points into the capacity of a data
    ///   zone whose reverse-map (P2L) entry names it back, and every P2L
    ///   entry names a logical block that maps back to it;
    /// - each zone's valid-block count equals a recount of the map;
    /// - each zone's pool agrees with the device's zone state and write
    ///   pointer: full zones Full, free zones Empty, open zones opened,
    ///   closed or empty with write pointers adding up to the blocks the
    ///   FTL completed in them; nothing maps into a free or unusable zone,
    ///   or past an open zone's write pointer; metadata zones are usable.
    ///
    /// Meant for an FTL no one is writing to: it waits (at most 30 s) for
    /// background garbage collection to go idle, then holds the journal
    /// lock, which every map change needs, while it scans the map.
    ///
    /// Problems go into the report; an `Err` means the check itself could
    /// not run (a queue could not be created, the zone report failed, the
    /// FTL had stopped after a failure).
    pub fn check(&self, read_all: bool) -> Result<CheckReport> {
        let s = &self.shared;
        wait_for_quiet_gc(s)?;
        let layout = &s.layout;
        let mut r = CheckReport {
            logical_blocks: layout.logical,
            zones: layout.zones,
            meta_zones: layout.meta_zones,
            read_all,
            ..CheckReport::default()
        };
        let mut q = s.dev.queue(4).map_err(FtlError::device("create a queue"))?;
        {
            // Freeze the map: every change needs the journal lock.
            let _journal = s.journal.lock();
            let (kinds, ftl_open_written) = pool_kinds(s);
            let report = q
                .report_zones(0, ReportFilter::All, layout.zones as usize)
                .map_err(FtlError::device("report zones"))?;
            let written = check_zone_states(s, &mut r, &report, &kinds, ftl_open_written);
            let counted = check_l2p(s, &mut r, &report, &kinds, &written);
            check_p2l(s, &mut r, &counted);
        }
        for (zone, block, reason) in &s.mount_damage {
            r.problem(CheckProblem::DamagedMetadata {
                zone: *zone,
                block: *block,
                reason: reason.clone(),
            });
        }
        if read_all {
            read_back(s, &mut r)?;
        }
        if r.is_ok() {
            tracing::info!(mapped = r.mapped_blocks, "FTL check passed");
        } else {
            tracing::warn!(problems = r.problems_total, "FTL check found problems");
        }
        Ok(r)
    }
}

/// Each zone's pool as the FTL has it, and the blocks the FTL completed in
/// its open zones.
fn pool_kinds(s: &Shared) -> (Vec<Kind>, u64) {
    let layout = &s.layout;
    let p = s.zones.lock();
    let mut kinds = vec![Kind::Other; layout.zones as usize];
    for k in kinds.iter_mut().take(layout.meta_zones as usize) {
        *k = Kind::Meta;
    }
    let mut full_caps = 0u64;
    for z in p.full_zones() {
        kinds[z as usize] = Kind::Full;
        full_caps += layout.cap(z) as u64;
    }
    for z in p.open_zones() {
        kinds[z as usize] = Kind::Open;
    }
    (kinds, p.written_blocks(layout).saturating_sub(full_caps))
}

/// Checks each zone's pool against the device's zone `report` and counts
/// the pools; returns the blocks written per zone as the device says
/// (`None` where the zone is missing from the report).
fn check_zone_states(
    s: &Shared,
    r: &mut CheckReport,
    report: &[zns_device::Zone],
    kinds: &[Kind],
    ftl_open_written: u64,
) -> Vec<Option<u64>> {
    let zones = s.layout.zones;
    if report.len() as u64 != zones as u64 {
        r.problem(CheckProblem::ZoneCount { expected: zones, reported: report.len() as u64 });
    }
    let mut written = vec![None; zones as usize];
    let mut device_open_written = 0u64;
    for (z, d) in report.iter().enumerate().take(zones as usize) {
        let zone = z as u32;
        written[z] = Some(d.written());
        let wp = d.write_pointer.map(|w| w.saturating_sub(d.start));
        let bad = |pool: &'static str, expected: &'static str| CheckProblem::ZoneState {
            zone,
            pool,
            state: d.state,
            written: wp,
            expected,
        };
        let gone = matches!(d.state, ZoneState::ReadOnly | ZoneState::Offline);
        match kinds[z] {
            Kind::Meta if gone => r.problem(bad("metadata", "a writable zone")),
            Kind::Meta => {}
            Kind::Full => {
                r.full_zones += 1;
                if d.state != ZoneState::Full {
                    r.problem(bad("full", "Full"));
                }
            }
            Kind::Open => {
                r.open_zones += 1;
                device_open_written += d.written();
                let ok = matches!(
                    d.state,
                    ZoneState::Empty
                        | ZoneState::ImplicitlyOpen
                        | ZoneState::ExplicitlyOpen
                        | ZoneState::Closed
                );
                if !ok {
                    r.problem(bad("open", "opened, closed or empty"));
                }
            }
            Kind::Other if gone => r.unusable_zones += 1,
            Kind::Other => {
                r.free_zones += 1;
                if d.state != ZoneState::Empty {
                    r.problem(bad("free", "Empty"));
                }
            }
        }
    }
    if device_open_written != ftl_open_written {
        r.problem(CheckProblem::OpenZonesWritten {
            ftl: ftl_open_written,
            device: device_open_written,
        });
    }
    written
}

/// L2P → P2L: every mapped logical block points into a data zone's
/// capacity, below an open zone's write pointer, at a block whose P2L
/// entry names it back. Returns the mapped blocks counted per zone.
fn check_l2p(
    s: &Shared,
    r: &mut CheckReport,
    report: &[zns_device::Zone],
    kinds: &[Kind],
    written: &[Option<u64>],
) -> Vec<u32> {
    let layout = &s.layout;
    let zones = layout.zones;
    let mut counted = vec![0u32; zones as usize];
    let pool_name = |z: u32| match written_state(report, z) {
        Some(ZoneState::ReadOnly | ZoneState::Offline) => "unusable",
        _ => "free",
    };
    for l in 0..layout.logical {
        let Some(p) = s.map.lookup(l) else { continue };
        r.mapped_blocks += 1;
        let zone = layout.zone_of(p);
        let offset = layout.offset_of(p);
        let out = |reason| CheckProblem::MapOutOfRange { logical: l, pba: p as u64, reason };
        if zone >= zones {
            r.problem(out("past the last zone"));
            continue;
        }
        if layout.is_meta(zone) {
            r.problem(out("in a metadata zone"));
            continue;
        }
        if offset >= layout.cap(zone) {
            r.problem(out("past the zone's capacity"));
            continue;
        }
        counted[zone as usize] += 1;
        let owner = s.map.owner(p);
        if owner != Some(l) {
            r.problem(CheckProblem::L2pP2lMismatch { logical: l, zone, offset, owner });
        }
        match kinds[zone as usize] {
            Kind::Full | Kind::Meta => {}
            Kind::Open => {
                if let Some(w) = written[zone as usize] {
                    if offset as u64 >= w {
                        r.problem(CheckProblem::MappedPastWritePointer {
                            logical: l,
                            zone,
                            offset,
                            written: w,
                        });
                    }
                }
            }
            Kind::Other => r.problem(CheckProblem::MappedInUnwrittenZone {
                logical: l,
                zone,
                offset,
                pool: pool_name(zone),
            }),
        }
    }
    counted
}

/// P2L → L2P over every physical block number, and each zone's valid
/// count against the blocks `counted` in it.
fn check_p2l(s: &Shared, r: &mut CheckReport, counted: &[u32]) {
    let layout = &s.layout;
    for zone in 0..layout.zones {
        for offset in 0..layout.stride {
            let p = layout.pba(zone, offset);
            r.physical_blocks_checked += 1;
            let Some(l) = s.map.owner(p) else { continue };
            let back = if l < layout.logical { s.map.lookup(l) } else { None };
            if back != Some(p) {
                r.problem(CheckProblem::StaleP2l {
                    zone,
                    offset,
                    logical: l,
                    maps_to: back.map(|b| (layout.zone_of(b), layout.offset_of(b))),
                });
            }
        }
        let recorded = s.map.valid(zone);
        if recorded != counted[zone as usize] {
            r.problem(CheckProblem::ValidCount { zone, recorded, counted: counted[zone as usize] });
        }
    }
}

/// The state of zone `z` in `report`, if reported.
fn written_state(report: &[zns_device::Zone], z: u32) -> Option<ZoneState> {
    report.get(z as usize).map(|d| d.state)
}

/// Reads every valid block of the data zones, in runs of consecutive
/// blocks, each zone under its reclaim lock (as user reads do).
fn read_back(s: &Shared, r: &mut CheckReport) -> Result<()> {
    let layout = &s.layout;
    let mut ctx = s.new_ctx()?;
    let ms = s.tag_size();
    let max = layout.mdts_blocks.max(1);
    for zone in layout.meta_zones..layout.zones {
        let _guard = s.reclaim[zone as usize].read();
        let cap = layout.cap(zone);
        let mut o = 0u32;
        while o < cap {
            if s.map.owner(layout.pba(zone, o)).is_none() {
                o += 1;
                continue;
            }
            let mut k = 1u32;
            while o + k < cap && k < max && s.map.owner(layout.pba(zone, o + k)).is_some() {
                k += 1;
            }
            let lba = layout.zone_start(zone) + o as u64;
            let res = crate::tag::read_with_metadata(
                ctx.q.as_mut(),
                &mut ctx.big,
                &mut ctx.tags,
                lba,
                k as usize,
                ms,
            );
            if let (Ok(()), Some(t)) = (&res, &ctx.tags) {
                let bs = layout.block_size as usize;
                for (i, (tag, data)) in t.chunks_exact(ms).zip(ctx.big.chunks_exact(bs)).enumerate()
                {
                    let offset = o + i as u32;
                    let owner = s.map.owner(layout.pba(zone, offset));
                    let tagged = crate::tag::decode(tag, &s.tagging, data).map(|t| t.logical);
                    let Some(logical) = owner.filter(|&l| Some(l) != tagged) else { continue };
                    let claimed = crate::tag::claimed(tag);
                    if tagged.is_none() && s.tagging.data_crc && claimed == Some(logical) {
                        r.problem(CheckProblem::DamagedData { zone, offset, logical });
                    } else {
                        r.problem(CheckProblem::WrongTag { zone, offset, logical, tagged });
                    }
                }
            }
            match res {
                Ok(()) => r.blocks_read += k as u64,
                Err(e) => r.problem(CheckProblem::ReadFailed {
                    zone,
                    offset: o,
                    blocks: k,
                    error: e.to_string(),
                }),
            }
            o += k;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use zns_device::{Target, ZoneAction, ZonedDevice};

    use super::*;
    use crate::tag::{encode, Tag, Tagging};
    use crate::FtlConfig;

    fn setup() -> (Arc<dyn ZonedDevice>, Ftl) {
        let dev = zns_device::open("emu:tiny").unwrap();
        let ftl = Ftl::format(Arc::clone(&dev), FtlConfig::default()).unwrap();
        (dev, ftl)
    }

    fn kinds(r: &CheckReport) -> Vec<&'static str> {
        r.problems.iter().map(|p| p.kind()).collect()
    }

    /// Writes `blocks` blocks from logical block 0, one at a time.
    fn write(ftl: &Ftl, blocks: u64, fill: u8) {
        let bs = ftl.block_size() as usize;
        for l in 0..blocks {
            ftl.write(l, &vec![fill; bs]).unwrap();
        }
    }

    #[test]
    fn a_healthy_ftl_passes_before_and_after_gc_and_reopen() {
        let (dev, ftl) = setup();
        let r = ftl.check(true).unwrap();
        assert!(r.is_ok(), "{:?}", r.problems);
        assert_eq!((r.mapped_blocks, r.blocks_read), (0, 0));
        let n = ftl.capacity_blocks();
        // Several overwrites of the whole device: garbage collection runs.
        for round in 0..4u8 {
            write(&ftl, n, round);
        }
        ftl.flush().unwrap();
        assert!(ftl.stats().gc_victims > 0);
        let r = ftl.check(true).unwrap();
        assert!(r.is_ok(), "{:?}", r.problems);
        assert_eq!((r.mapped_blocks, r.blocks_read), (n, n));
        assert_eq!(r.full_zones + r.open_zones + r.free_zones + r.meta_zones, r.zones);
        ftl.close().unwrap();
        let ftl = Ftl::open(dev, FtlConfig::default()).unwrap();
        let r = ftl.check(false).unwrap();
        assert!(r.is_ok(), "{:?}", r.problems);
        assert_eq!((r.mapped_blocks, r.blocks_read), (n, 0));
    }

    #[test]
    fn map_corruption_is_found() {
        let (_dev, ftl) = setup();
        write(&ftl, 10, 1);
        let map = &ftl.shared.map;
        let p3 = map.lookup(3).unwrap();
        let p4 = map.lookup(4).unwrap();
        let p5 = map.lookup(5).unwrap();
        // Logical 3 forgets its block: the block's P2L entry is stale and
        // the zone's valid count is one too high.
        map.replay_set(3, None);
        // Logical 4 points at logical 5's block.
        map.replay_set(4, Some(p5));
        let r = ftl.check(false).unwrap();
        let k = kinds(&r);
        assert!(!r.is_ok());
        assert!(k.contains(&"stale-p2l"), "{k:?}");
        assert!(k.contains(&"valid-count"), "{k:?}");
        assert!(k.contains(&"l2p-p2l-mismatch"), "{k:?}");
        let zone = ftl.shared.layout.zone_of(p3);
        assert!(r.problems.iter().any(|p| matches!(
            p,
            CheckProblem::ValidCount { zone: z, recorded: 10, counted: 9 } if *z == zone
        )));
        assert!(r
            .problems
            .iter()
            .any(|p| matches!(p, CheckProblem::L2pP2lMismatch { logical: 4, owner: Some(5), .. })));
        for p in &r.problems {
            assert!(!p.to_string().is_empty());
        }
        // Put it back: healthy again.
        map.replay_set(3, Some(p3));
        map.replay_set(4, Some(p4));
        assert!(ftl.check(false).unwrap().is_ok());
    }

    #[test]
    fn blocks_mapped_into_free_zones_or_metadata_are_found() {
        let (_dev, ftl) = setup();
        write(&ftl, 3, 1);
        let layout = &ftl.shared.layout;
        let map = &ftl.shared.map;
        let free = {
            let p = ftl.shared.zones.lock();
            let used: Vec<u32> = p.open_zones().chain(p.full_zones()).collect();
            (layout.meta_zones..layout.zones).find(|z| !used.contains(z)).unwrap()
        };
        map.replay_set(0, Some(layout.pba(free, 0)));
        map.replay_set(1, Some(layout.pba(0, 0)));
        let r = ftl.check(false).unwrap();
        let k = kinds(&r);
        assert!(k.contains(&"mapped-in-unwritten-zone"), "{k:?}");
        assert!(k.contains(&"map-out-of-range"), "{k:?}");
        assert!(r.problems.iter().any(|p| p.to_string().contains("metadata zone")));
    }

    #[test]
    fn zone_states_changed_behind_the_ftls_back_are_found() {
        let (dev, ftl) = setup();
        let cap = dev.info().zone_capacity;
        // Fill at least one zone.
        write(&ftl, cap + 5, 7);
        ftl.flush().unwrap();
        let (full, open, free) = {
            let p = ftl.shared.zones.lock();
            let full = p.full_zones().next().unwrap();
            let open = p.open_zones().next().unwrap();
            drop(p);
            let layout = &ftl.shared.layout;
            let free = (layout.meta_zones..layout.zones)
                .find(|&z| z != full && z != open && ftl.shared.map.valid(z) == 0)
                .unwrap();
            (full, open, free)
        };
        let layout = &ftl.shared.layout;
        let mut q = dev.queue(4).unwrap();
        q.zone_action(ZoneAction::Reset, Target::Zone(layout.zone_start(full))).unwrap();
        let mut buf = q.alloc(layout.block_size as usize).unwrap();
        buf.fill(1);
        q.write(layout.zone_start(free), &buf).unwrap();
        let wp = q.zone(layout.zone_start(open)).unwrap().write_pointer.unwrap();
        q.write(wp, &buf).unwrap();
        let r = ftl.check(false).unwrap();
        let states: Vec<(u32, &str)> = r
            .problems
            .iter()
            .filter_map(|p| match p {
                CheckProblem::ZoneState { zone, pool, .. } => Some((*zone, *pool)),
                _ => None,
            })
            .collect();
        assert!(states.contains(&(full, "full")), "{:?}", r.problems);
        assert!(states.contains(&(free, "free")), "{:?}", r.problems);
        assert!(kinds(&r).contains(&"open-zones-written"), "{:?}", r.problems);
        assert_eq!(r.problems.iter().filter(|p| p.zone() == Some(full)).count(), 1);
    }

    #[test]
    fn block_tags_survive_relocation_and_wrong_tags_are_found() {
        for use_copy in [true, false] {
            // 16 zones of `small` (16 bytes of metadata per block).
            let dev = zns_device::open("emu:small,zones=16").unwrap();
            let config = FtlConfig { use_copy, ..FtlConfig::default() };
            let ftl = Ftl::format(Arc::clone(&dev), config).unwrap();
            assert_eq!(ftl.shared.tag_size(), 16);
            let n = ftl.capacity_blocks();
            let bs = ftl.block_size() as usize;
            let mut x = 0x9E37_79B9_7F4A_7C15u64;
            // Overwrite until GC has relocated blocks (it runs on its own
            // thread, so when depends on scheduling), at most 20 passes.
            let mut i = 0u64;
            while ftl.stats().gc_blocks_copied == 0 || i < 3 * n {
                assert!(i < 20 * n, "GC relocated no block in 20 passes");
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                ftl.write(x % n, &vec![i as u8; bs]).unwrap();
                i += 1;
            }
            let r = ftl.check(true).unwrap();
            assert!(r.is_ok(), "use_copy {use_copy}: {:?}", r.problems);
            assert_eq!(r.blocks_read, r.mapped_blocks);
            // Overwrite one block's tag behind the FTL's back.
            let layout = &ftl.shared.layout;
            let lba = layout.lba(ftl.shared.map.lookup(7).unwrap());
            let mut data = vec![0u8; bs];
            ftl.read(7, &mut data).unwrap();
            let mut tag = [0u8; 16];
            encode(Tag { logical: 999, seq: 1 }, &ftl.shared.tagging, &data, &mut tag);
            let emu = dev.emulator().unwrap();
            emu.namespaces()[0].media().write_metadata(lba, &tag).unwrap();
            let r = ftl.check(true).unwrap();
            assert_eq!(kinds(&r), vec!["wrong-tag"], "{:?}", r.problems);
            assert!(matches!(
                r.problems[0],
                CheckProblem::WrongTag { logical: 7, tagged: Some(999), .. }
            ));
            // A tag another FTL instance wrote does not verify: with data
            // checksums it cannot be told from damage to this block.
            let other = Tagging { key: ftl.shared.tagging.key ^ 1, ..ftl.shared.tagging };
            encode(Tag { logical: 7, seq: 1 }, &other, &data, &mut tag);
            emu.namespaces()[0].media().write_metadata(lba, &tag).unwrap();
            let r = ftl.check(true).unwrap();
            assert!(matches!(r.problems[..], [CheckProblem::DamagedData { logical: 7, .. }]));
        }
    }

    /// Flips one byte of logical block `l`'s data on the emulated media.
    fn flip_data(dev: &Arc<dyn ZonedDevice>, ftl: &Ftl, l: u64) {
        let layout = &ftl.shared.layout;
        let lba = layout.lba(ftl.shared.map.lookup(l).unwrap());
        let media = Arc::clone(dev.emulator().unwrap().namespaces()[0].media());
        let mut block = vec![0u8; layout.block_size as usize];
        media.read(lba, &mut block).unwrap();
        block[1234] ^= 0x20;
        media.write(lba, &block).unwrap();
    }

    #[test]
    fn a_flipped_data_byte_fails_reads_and_the_check_and_stays_damaged_when_moved() {
        for use_copy in [true, false] {
            let dev = zns_device::open("emu:small,zones=16").unwrap();
            let config = FtlConfig { use_copy, ..FtlConfig::default() };
            let ftl = Ftl::format(Arc::clone(&dev), config).unwrap();
            assert!(ftl.shared.tagging.data_crc);
            let bs = ftl.block_size() as usize;
            for l in 0..64u64 {
                ftl.write(l, &vec![l as u8 ^ 0x5A; bs]).unwrap();
            }
            ftl.flush().unwrap();
            flip_data(&dev, &ftl, 7);
            let mut one = vec![0u8; bs];
            let e = ftl.read(7, &mut one).unwrap_err();
            assert!(
                matches!(e, FtlError::DamagedData { logical: 7, why: "fails its checksum", .. }),
                "{e}"
            );
            assert!(e.to_string().contains("logical block 7 is damaged"), "{e}");
            let mut run = vec![0u8; 8 * bs];
            assert!(matches!(ftl.read(4, &mut run), Err(FtlError::DamagedData { logical: 7, .. })));
            for l in [6u64, 8, 63] {
                ftl.read(l, &mut one).unwrap();
                assert!(one.iter().all(|&b| b == l as u8 ^ 0x5A));
            }
            let r = ftl.check(true).unwrap();
            assert_eq!(kinds(&r), vec!["damaged-data"], "{:?}", r.problems);
            assert_eq!(ftl.stats().damaged_reads, 2);
            // GC moves the block (other blocks are overwritten until it
            // has): its copy still fails.
            let before = ftl.shared.map.lookup(7);
            let n = ftl.capacity_blocks();
            let (mut i, mut x) = (0u64, 0x2545_F491_4F6C_DD1Du64);
            while ftl.shared.map.lookup(7) == before {
                assert!(i < 40 * n, "GC never moved block 7");
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                ftl.write(64 + x % (n - 64), &vec![i as u8; bs]).unwrap();
                i += 1;
            }
            assert!(ftl.read(7, &mut one).is_err(), "use_copy {use_copy}: moved, then readable");
            let r = ftl.check(true).unwrap();
            assert_eq!(kinds(&r), vec!["damaged-data"], "use_copy {use_copy}: {:?}", r.problems);
            if !use_copy {
                assert!(ftl.stats().gc_damaged_blocks >= 1);
            }
            // Writing the block again heals it.
            ftl.write(7, &vec![1u8; bs]).unwrap();
            ftl.read(7, &mut one).unwrap();
            assert!(ftl.check(true).unwrap().is_ok());
        }
    }
}
