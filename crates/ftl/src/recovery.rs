//! Recovery: rebuilds the map from the metadata log.
//!
//! 1. The superblock is read from the first header page that decodes: the
//!    first written zone's two header pages (one on FTLs formatted before
//!    the copy existed), then those of the zones after it.
//! 2. Every written metadata zone is read up to its write pointer and
//!    placed in the log by the sequence numbers of its pages (one page
//!    that decodes places the zone; see [`crate::logread`]), so a damaged
//!    page keeps its place and its neighbours tell what it can have held.
//! 3. The newest complete checkpoint (its Begin, every chunk and its End
//!    there, found or known by their place) is loaded, and every record
//!    of the pages after its Begin record is replayed (last change wins).
//!    The mount passes over damage that held no records: a header copy, a
//!    page older than the checkpoint, a page of a checkpoint. A damaged
//!    page after the checkpoint that may have held records fails the
//!    mount, naming it (pages are one block and one-block writes are
//!    atomic on power loss, so a crash leaves fewer pages, never a
//!    damaged one).
//! 4. [`crate::Ftl::repair`] (`zns ftl check --repair`) also replays the
//!    pages on both sides of such a page, loads an older complete
//!    checkpoint when the newest is damaged, and falls back on the newest
//!    checkpoint begun, its readable chunks and a scan of every block tag
//!    when none is complete. Where records are unknown it scans every
//!    block tag for versions newer than the map keeps, drops mappings
//!    whose block's tag names another logical block, and says what it
//!    cannot account for: such a repair writes nothing unless the loss is
//!    accepted. [`crate::Ftl::diagnose`] tells the same without writing.
//! 5. Rescan (with [`FtlConfig::rescan`] and tags of at least 16 bytes):
//!    blocks written after the last durable log page are adopted by their
//!    tags. Every page carries the write watermark W read after its
//!    contents were taken, so a block tagged with a sequence number at or
//!    above the largest W of the log was written after everything the log
//!    says — newer than any mapping or unmapping in it. A data zone is
//!    rescanned when its last written block carries such a number; its
//!    blocks the log does not map are read, and of the tags at or above W
//!    the highest number for each logical block wins. Copies made by
//!    garbage collection never outrank what they copy (see [`crate::tag`]),
//!    and a zone is reset only after its blocks' moves are logged, so a
//!    version that was moved is still found where it was written. Blocks
//!    numbered below W that the log does not name are garbage: their
//!    writes were in flight while the log was written, never flushed.
//! 6. Every mapping must point into the written part of a data zone, and
//!    no two logical blocks may share a block; P2L and valid counts are
//!    rebuilt. The adopted mappings are logged with a page of the new
//!    mount generation, durably, before anything else is written (so
//!    write sequence numbers never repeat across mounts). Data zones left
//!    open become write heads again (the next heads the streams open
//!    continue them: a Finish would pad them); only those beyond the
//!    streams' heads are finished. Metadata zones older than the
//!    checkpoint are reset, and the log continues in the newest metadata
//!    zone.

use std::collections::HashMap;
use std::sync::Arc;

use zns_device::{
    DeviceInfo, IoBuffer, ReportFilter, StatusCode, Target, Zone, ZoneAction, ZoneQueue, ZoneState,
    ZonedDevice,
};

use crate::config::FtlConfig;
use crate::config::StreamPlan;
use crate::error::{FtlError, Result};
use crate::ftl::{open_budget, Parts, Shared};
use crate::journal::{Body, Page, PageError, Record, Superblock, NO_MAGIC};
use crate::layout::Layout;
use crate::logread::{self, Role, Slot, Span};
use crate::map::Map;
use crate::meta::{LogZrwa, MetaWriter};
use crate::stats::Counters;
use crate::tag::{self, Tag, Tagging};
use crate::zones::Pool;

/// A damaged place of the metadata log: (zone, block, what is wrong).
pub type Damage = (u32, u32, String);

/// What a repair ([`crate::Ftl::repair`]) found, restored, and could not
/// account for.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RepairReport {
    /// Every damaged place of the metadata log: (zone, block, what was
    /// wrong and what it held). Empty when the log was intact.
    pub damage: Vec<Damage>,
    /// Damaged pages after the checkpoint loaded that may have held map
    /// changes (zone, block): what they changed is unknown, so the repair
    /// cannot account for every block (a discard in one may be undone).
    pub unknown_pages: Vec<(u32, u32)>,
    /// Metadata zones of which no page could be read (reset by the
    /// repair).
    pub dropped_zones: Vec<u32>,
    /// Logical blocks whose mapping was dropped and not found again: the
    /// block it pointed to is unwritten or its tag names another block
    /// (they read as zeros).
    pub unmapped: Vec<u64>,
    /// Logical blocks kept whose data fails its checksum (reads fail).
    pub damaged_blocks: Vec<u64>,
    /// Blocks adopted by their tags: written after the log, or (where
    /// records are unknown) newer than what the kept log maps.
    pub adopted: u64,
    /// No complete checkpoint was left: the map was rebuilt from the
    /// chunks of the newest checkpoint begun, the log after it and every
    /// data block's tag (discarded blocks may come back).
    pub partial_checkpoint: bool,
    /// Blocks the scan of every tag mapped, where records were unknown.
    pub scanned: u64,
}

impl RepairReport {
    /// Whether nothing was damaged or lost.
    pub fn is_clean(&self) -> bool {
        self.damage.is_empty() && !self.loses()
    }

    /// Whether the repair cannot account for every block: map changes are
    /// unknown, mappings were dropped, or blocks fail their checksum.
    /// Such a repair is written only when the loss is accepted.
    pub fn loses(&self) -> bool {
        self.partial_checkpoint
            || !self.unknown_pages.is_empty()
            || !self.unmapped.is_empty()
            || !self.damaged_blocks.is_empty()
    }

    /// One line on what is lost, for errors.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        if let Some((z, b)) = self.unknown_pages.first() {
            parts.push(format!(
                "{} damaged log page(s) held unknown map changes (first: zone {z} block {b})",
                self.unknown_pages.len()
            ));
        }
        if self.partial_checkpoint {
            parts.push("no complete checkpoint is left".to_string());
        }
        if !self.unmapped.is_empty() {
            parts.push(format!("{} logical blocks would read as zeros", self.unmapped.len()));
        }
        if !self.damaged_blocks.is_empty() {
            parts.push(format!(
                "{} logical blocks fail their data checksum",
                self.damaged_blocks.len()
            ));
        }
        parts.join("; ")
    }
}

impl PageError {
    /// Why the page does not decode, in words.
    fn describe(&self) -> String {
        match self {
            PageError::Blank => "is blank (all zeros)".to_string(),
            PageError::Bad(w) => format!("is damaged ({w})"),
        }
    }
}

/// What recovery is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// An ordinary mount: damage that may have held records fails it.
    Mount,
    /// A repair; one that cannot account for every block is written only
    /// with `accept_loss`.
    Repair {
        /// Write a repair that loses blocks.
        accept_loss: bool,
    },
    /// What a repair would do, without writing anything.
    Diagnose,
}

impl Mode {
    fn repairs(self) -> bool {
        self != Mode::Mount
    }
}

/// A device with written zones but no FTL header where the FTL's would be.
fn not_empty(report: &[Zone]) -> FtlError {
    let written = report
        .iter()
        .filter(|z| !matches!(z.state, ZoneState::Empty | ZoneState::ReadOnly | ZoneState::Offline))
        .count();
    match written {
        0 => FtlError::NotFormatted,
        n => FtlError::NotEmpty { written_zones: n as u64 },
    }
}

/// Every header page of the FTL's metadata zones, damaged: the FTL's
/// superblock (its geometry and layout) is gone.
fn damaged_header(zone: u32, e: &PageError) -> FtlError {
    corrupt(
        zone,
        0,
        format!(
            "the FTL's header page (its superblock: geometry and layout) {}, and no copy of it \
             could be read; nothing was changed. The layout it holds cannot be rebuilt (`zns \
             ftl check --repair` cannot help), and the data zones are untouched: `zns \
             report-zones` lists them and `zns read` dumps any block, this page included",
            e.describe()
        ),
    )
}

/// A page inside a zone's write pointer that does not decode. NVMe writes
/// of one block are atomic on power loss (AWUPF is at least one block) and
/// every page is one block, so a write torn by a crash leaves no such
/// page, only fewer pages: this is damage to a written page.
fn damaged(zone: u32, block: u32, why: &str) -> FtlError {
    corrupt(
        zone,
        block,
        format!(
            "{why}; it lies below the zone's write pointer, so it was written whole (a torn \
             write leaves no page) and later damaged. `zns ftl check` tells what a repair \
             restores, `zns ftl check --repair` repairs"
        ),
    )
}

fn corrupt(zone: u32, block: u32, reason: impl Into<String>) -> FtlError {
    FtlError::Corrupt { zone: zone as u64, block: block as u64, reason: reason.into() }
}

/// Reads `blocks` blocks of `zone` from its start and decodes them.
fn read_zone(
    q: &mut dyn ZoneQueue,
    layout: &Layout,
    zone: u32,
    blocks: u32,
) -> Result<Vec<std::result::Result<Page, PageError>>> {
    let bs = layout.block_size as usize;
    let mut out = Vec::with_capacity(blocks as usize);
    let mut buf =
        q.alloc(layout.mdts_blocks as usize * bs).map_err(FtlError::device("allocate a buffer"))?;
    let mut at = 0u32;
    while at < blocks {
        let n = (blocks - at).min(layout.mdts_blocks);
        buf.set_len(n as usize * bs).map_err(FtlError::device("size a buffer"))?;
        match q.read(layout.zone_start(zone) + at as u64, &mut buf) {
            Ok(()) => {
                for i in 0..n as usize {
                    out.push(Page::decode(&buf[i * bs..(i + 1) * bs]));
                }
            }
            // A block the device cannot read back (a drive's ECC failure,
            // an emulated image's data checksum): read the run a block at
            // a time, so each unreadable one is a damaged page like any
            // other, named and repairable, instead of failing the mount.
            Err(e) if e.is_status(StatusCode::UnrecoveredReadError) => {
                buf.set_len(bs).map_err(FtlError::device("size a buffer"))?;
                for i in 0..n {
                    out.push(match q.read(layout.zone_start(zone) + (at + i) as u64, &mut buf) {
                        Ok(()) => Page::decode(&buf[..bs]),
                        Err(e) if e.is_status(StatusCode::UnrecoveredReadError) => {
                            Err(PageError::Bad("unreadable: Unrecovered Read Error".into()))
                        }
                        Err(e) => return Err(FtlError::device("read metadata")(e)),
                    });
                }
            }
            Err(e) => return Err(FtlError::device("read metadata")(e)),
        }
        at += n;
    }
    Ok(out)
}

/// Blocks written in zone `i` of `report`.
fn written(report: &[Zone], i: usize) -> u32 {
    report[i].written() as u32
}

/// The superblock, from the first header page that decodes, and the
/// header pages found damaged before it. Only header pages of the FTL's
/// own (its magic) are passed over: a first written zone that does not
/// start with the FTL's pages holds other data.
fn read_superblock(
    q: &mut dyn ZoneQueue,
    report: &[Zone],
    probe: &Layout,
) -> Result<(Superblock, Vec<Damage>)> {
    let first =
        report.iter().position(|z| z.state != ZoneState::Empty).ok_or(FtlError::NotFormatted)?;
    let mut damage = Vec::new();
    let mut first_error = None;
    for zone in first..report.len() {
        if report[zone].state == ZoneState::Empty {
            continue;
        }
        let pages = read_zone(q, probe, zone as u32, written(report, zone).min(2))?;
        for (offset, page) in pages.iter().enumerate() {
            match page {
                Ok(Page { body: Body::Header(sb), .. }) if zone < sb.meta_zones as usize => {
                    if zone != first && damage.is_empty() {
                        // Every header before was damaged or absent.
                        tracing::warn!(zone, "the superblock is read from a later metadata zone");
                    }
                    return Ok((*sb, damage));
                }
                Err(PageError::Bad(why)) if why.contains("version") => {
                    return Err(FtlError::Incompatible(why.clone()))
                }
                // The first block of the first zone is not the FTL's:
                // other data, never taken for an empty device.
                Err(PageError::Bad(why)) if why == NO_MAGIC && zone == first && offset == 0 => {
                    return Err(not_empty(report))
                }
                Err(e @ PageError::Bad(why)) if why != NO_MAGIC => {
                    damage.push((
                        zone as u32,
                        offset as u32,
                        format!("header page {}", e.describe()),
                    ));
                    first_error.get_or_insert((zone as u32, e.clone()));
                }
                _ if zone == first && offset == 0 => return Err(not_empty(report)),
                _ => {}
            }
        }
        // Past the metadata zones the copies could be in: stop at the
        // first zone without any page of the FTL's.
        if !pages.iter().any(|p| matches!(p, Err(PageError::Bad(w)) if w != NO_MAGIC))
            && zone != first
        {
            break;
        }
    }
    match first_error {
        Some((zone, e)) => Err(damaged_header(zone, &e)),
        None => Err(not_empty(report)),
    }
}

/// Checks the superblock against the device; the layout it describes.
fn layout_of(sb: &Superblock, probe: Layout, info: &DeviceInfo, first: u32) -> Result<Layout> {
    if sb.features & !crate::journal::KNOWN_FEATURES != 0 {
        return Err(FtlError::Incompatible(format!(
            "formatted with features {:#x}, of which this version knows {:#x}",
            sb.features,
            crate::journal::KNOWN_FEATURES
        )));
    }
    let zones = probe.zones;
    let stride = probe.stride;
    let geometry = (sb.block_size, sb.zone_size, sb.zones, sb.stride);
    if geometry != (info.block_size, info.zone_size, zones, stride) {
        return Err(FtlError::Incompatible(format!(
            "formatted for {} zones of {} blocks (capacity {}) of {} bytes; the device has {zones} \
             zones of {} blocks (capacity {stride}) of {} bytes",
            sb.zones, sb.zone_size, sb.stride, sb.block_size, info.zone_size, info.block_size
        )));
    }
    if first >= sb.meta_zones || sb.meta_zones >= zones || sb.logical == 0 {
        return Err(corrupt(first, 0, "the header's metadata zone count does not fit"));
    }
    Ok(Layout { meta_zones: sb.meta_zones, logical: sb.logical, ..probe })
}

/// The metadata log as read and placed.
struct LogRead {
    /// Every block of the placed zones, in log order (missing pages
    /// between zones as slots of their own).
    slots: Vec<Slot>,
    /// (first sequence number, zone) of every placed zone, in log order.
    bases: Vec<(u64, u32)>,
    /// Zones of which no page decodes: they cannot be placed.
    unplaced: Vec<u32>,
}

/// Reads every written metadata zone and places its pages in the log.
fn read_log(
    q: &mut dyn ZoneQueue,
    layout: &Layout,
    report: &[Zone],
    sb: &Superblock,
) -> Result<LogRead> {
    let hp = sb.header_pages();
    let mut zones: Vec<(u64, u32, Vec<Slot>)> = Vec::new();
    let mut unplaced = Vec::new();
    for z in 0..layout.meta_zones {
        let state = report[z as usize].state;
        if state == ZoneState::Empty {
            continue;
        }
        if matches!(state, ZoneState::ReadOnly | ZoneState::Offline) {
            return Err(corrupt(z, 0, format!("metadata zone is {state:?}")));
        }
        let pages = read_zone(q, layout, z, written(report, z as usize))?;
        match place_zone(z, pages, sb, hp)? {
            Some((base, slots)) => zones.push((base, z, slots)),
            None => unplaced.push(z),
        }
    }
    zones.sort_by_key(|&(base, z, _)| (base, z));
    let mut slots: Vec<Slot> = Vec::new();
    let mut bases = Vec::new();
    let mut next: Option<(u64, u32)> = None;
    for (base, z, zone_slots) in zones {
        if let Some((expected, prev)) = next {
            if base < expected {
                return Err(corrupt(
                    z,
                    0,
                    format!("its pages are numbered from {base}, inside zone {prev}'s"),
                ));
            }
            if base > expected {
                slots.push(Slot {
                    zone: z,
                    offset: 0,
                    seq: expected,
                    page: Err(PageError::Bad(format!(
                        "log pages {expected}..{base} are missing before this zone"
                    ))),
                    missing: true,
                });
            }
        }
        next = Some((base + zone_slots.len() as u64, z));
        bases.push((base, z));
        slots.extend(zone_slots);
    }
    Ok(LogRead { slots, bases, unplaced })
}

/// Places the pages of metadata zone `z`: the sequence number of its
/// first page (`None` when no page decodes) and its slots. A page whose
/// number does not fit its place, or a header where none belongs, is
/// damage like any other.
fn place_zone(
    z: u32,
    pages: Vec<std::result::Result<Page, PageError>>,
    sb: &Superblock,
    hp: u32,
) -> Result<Option<(u64, Vec<Slot>)>> {
    let mut votes = HashMap::<u64, usize>::new();
    for (o, p) in pages.iter().enumerate() {
        match p {
            Ok(Page { body: Body::Header(h), .. }) if h != sb => {
                return Err(corrupt(z, o as u32, "header of another FTL instance or geometry"))
            }
            Ok(Page { body, .. }) if o == 0 && !matches!(body, Body::Header(_)) => {
                return Err(corrupt(z, 0, "metadata zone without a header page"))
            }
            Ok(p) if p.seq >= o as u64 => *votes.entry(p.seq - o as u64).or_default() += 1,
            _ => {}
        }
    }
    let Some((&base, _)) = votes.iter().max_by_key(|&(&b, &n)| (n, std::cmp::Reverse(b))) else {
        return Ok(None);
    };
    let slots = pages
        .into_iter()
        .enumerate()
        .map(|(o, page)| {
            let o = o as u32;
            let seq = base + o as u64;
            let page = match page {
                Ok(p) if p.seq != seq => {
                    Err(PageError::Bad(format!("page sequence {} where {seq} belongs", p.seq)))
                }
                Ok(Page { body: Body::Header(_), .. }) if o >= hp => {
                    Err(PageError::Bad("a header page past the zone's headers".into()))
                }
                other => other,
            };
            Slot { zone: z, offset: o, seq, page, missing: false }
        })
        .collect();
    Ok(Some((base, slots)))
}

/// Everything recovery found, before anything is written.
pub(crate) struct Analysis {
    info: DeviceInfo,
    report: Vec<Zone>,
    layout: Layout,
    sb: Superblock,
    map: Map,
    log: LogRead,
    /// The zone holding the Begin page of the checkpoint loaded.
    begin_zone: u32,
    ckpt: u64,
    /// Highest checkpoint id, page sequence number and mount generation
    /// anywhere in the log: numbering goes on after them.
    max_ckpt: u64,
    last_seq: u64,
    max_generation: u32,
    replayed: u64,
    /// Mappings adopted by their tags, logged when the mount is sealed.
    adopted: Vec<(u64, u32)>,
    rescanned_zones: u64,
    /// What the damage was and what a repair restores.
    pub repair: RepairReport,
}

/// The checkpoint to load: its span and whether it is only begun.
fn choose_checkpoint(
    log: &LogRead,
    spans: &[Span],
    mode: Mode,
    first: u32,
) -> Result<(Span, bool)> {
    if let Some(c) = spans.iter().rev().find(|c| c.complete) {
        return Ok((*c, false));
    }
    if mode.repairs() {
        // Repair falls back on the newest checkpoint begun: its chunks
        // that are there, the log after it, the tags.
        if let Some(c) = spans.iter().rev().find(|c| c.begin.1.is_some()) {
            return Ok((*c, true));
        }
    }
    // Damage took every complete checkpoint: name the damage.
    match log.slots.iter().find(|s| !s.is_ok()) {
        Some(s) => {
            let why = match &s.page {
                Err(e) => format!("metadata page {}; no complete checkpoint is left", e.describe()),
                Ok(_) => unreachable!("a damaged slot"),
            };
            Err(damaged(s.zone, s.offset, &why))
        }
        None => {
            let (z, o) = log.unplaced.first().map_or((first, 0), |&z| (z, 0));
            Err(corrupt(z, o, "no complete checkpoint in the metadata log"))
        }
    }
}

/// Sorted, merged ranges of logical blocks.
#[derive(Debug, Default)]
struct Ranges(Vec<(u64, u64)>);

impl Ranges {
    fn push(&mut self, from: u64, n: u64) {
        self.0.push((from, from + n));
    }

    fn finish(&mut self) {
        self.0.sort_unstable();
        let mut out: Vec<(u64, u64)> = Vec::with_capacity(self.0.len());
        for &(a, b) in &self.0 {
            match out.last_mut() {
                Some(last) if a <= last.1 => last.1 = last.1.max(b),
                _ => out.push((a, b)),
            }
        }
        self.0 = out;
    }

    fn contains(&self, l: u64) -> bool {
        let i = self.0.partition_point(|&(_, b)| b <= l);
        self.0.get(i).is_some_and(|&(a, _)| a <= l)
    }
}

/// Loads checkpoint `c`'s chunks into `map`.
fn load_chunks(slots: &[Slot], c: &Span, map: &Map, layout: &Layout) -> Result<()> {
    let physical = layout.physical() as u64;
    let end = c.end.map_or(slots.len(), |e| e + 1);
    for s in &slots[c.begin.0..end] {
        let Ok(Page { body: Body::Chunk { ckpt, first, entries }, .. }) = &s.page else {
            continue;
        };
        if *ckpt != c.id {
            continue;
        }
        if first.checked_add(entries.len() as u64).is_none_or(|e| e > layout.logical) {
            return Err(corrupt(s.zone, s.offset, "checkpoint chunk past the logical capacity"));
        }
        for (i, &p) in entries.iter().enumerate() {
            if p != u32::MAX {
                if p as u64 >= physical {
                    return Err(corrupt(s.zone, s.offset, format!("checkpoint entry {p}")));
                }
                map.replay_set(first + i as u64, Some(p));
            }
        }
    }
    Ok(())
}

/// Replays every record after checkpoint `c`'s Begin record; returns the
/// records replayed and the logical blocks changed after `last_unknown`
/// (their state is known whatever the unknown pages held).
fn replay(
    slots: &[Slot],
    c: &Span,
    last_unknown: Option<usize>,
    map: &Map,
    layout: &Layout,
) -> Result<(u64, Ranges)> {
    let physical = layout.physical() as u64;
    let in_range = |l: u64, n: u64| l.checked_add(n).is_some_and(|end| end <= layout.logical);
    let mut replayed = 0u64;
    let mut known = Ranges::default();
    for (i, s) in slots.iter().enumerate().skip(c.begin.0) {
        let Some(records) = s.records() else { continue };
        let skip = match (i == c.begin.0, c.begin.1) {
            (true, Some(r)) => r + 1,
            (true, None) => continue,
            _ => 0,
        };
        let after = last_unknown.is_some_and(|u| i > u);
        for r in &records[skip..] {
            match *r {
                Record::Map { l, p } => {
                    if !in_range(l as u64, 1) || p as u64 >= physical {
                        return Err(corrupt(s.zone, s.offset, format!("record maps {l} to {p}")));
                    }
                    map.replay_set(l as u64, Some(p));
                    if after {
                        known.push(l as u64, 1);
                    }
                }
                Record::Unmap { l, blocks } => {
                    if !in_range(l as u64, blocks as u64) {
                        return Err(corrupt(
                            s.zone,
                            s.offset,
                            format!("record unmaps {blocks} at {l}"),
                        ));
                    }
                    for x in l as u64..l as u64 + blocks as u64 {
                        map.replay_set(x, None);
                    }
                    if after {
                        known.push(l as u64, blocks as u64);
                    }
                }
                Record::CheckpointBegin { .. } => {}
            }
            replayed += 1;
        }
    }
    known.finish();
    Ok((replayed, known))
}

/// What each damaged slot held: the report's damage list and the slots
/// that may have held records.
fn classify(
    log: &LogRead,
    c: &Span,
    spans: &[Span],
    hp: u32,
    report: &mut RepairReport,
) -> Vec<usize> {
    let mut unknown = Vec::new();
    for (i, s) in log.slots.iter().enumerate() {
        let Err(e) = &s.page else { continue };
        let role = logread::role(&log.slots, i, c.begin.0, spans, hp);
        if s.missing && role == Role::Superseded {
            // Pages missing before the checkpoint loaded are no damage: a
            // checkpoint cut short while it reset the zones it made
            // unnecessary leaves some of them, the next mount resets
            // the rest.
            continue;
        }
        let why = match s.missing {
            true => format!("{}; {}", e.describe(), role.describe()),
            false => format!("metadata page {}: {}", e.describe(), role.describe()),
        };
        tracing::warn!(zone = s.zone, block = s.offset, reason = %why, "damaged metadata page");
        report.damage.push((s.zone, s.offset, why));
        if role == Role::Unknown {
            unknown.push(i);
            report.unknown_pages.push((s.zone, s.offset));
        }
    }
    for &z in &log.unplaced {
        report.damage.push((z, 0, "no page of the metadata zone could be read".into()));
        report.dropped_zones.push(z);
    }
    unknown
}

/// Reads and checks everything the FTL on `dev` holds and rebuilds its
/// map, writing nothing. Fails where `mode` does not allow the damage
/// found (an ordinary mount and unknown records).
pub(crate) fn analyze(dev: &dyn ZonedDevice, config: &FtlConfig, mode: Mode) -> Result<Analysis> {
    let info = dev.info().clone();
    info.require_zoned().map_err(FtlError::device("open the device"))?;
    let mut q = dev.queue(4).map_err(FtlError::device("create a queue"))?;
    let report = q
        .report_zones(0, ReportFilter::All, info.zone_count as usize)
        .map_err(FtlError::device("report zones"))?;
    let zones = report.len() as u32;
    let caps: Box<[u32]> = report.iter().map(|z| z.capacity as u32).collect();
    let stride = caps.iter().copied().max().unwrap_or(0);
    let probe = Layout {
        block_size: info.block_size,
        zone_size: info.zone_size,
        zones,
        caps,
        stride,
        meta_zones: 0,
        mdts_blocks: info.max_transfer_blocks().min(u32::MAX as u64) as u32,
        zasl_blocks: ((info.zasl_bytes / info.block_size as usize) as u32).max(1),
        logical: 0,
    };
    let (sb, header_damage) = read_superblock(q.as_mut(), &report, &probe)?;
    let first = report.iter().position(|z| z.state != ZoneState::Empty).unwrap_or(0) as u32;
    let layout = layout_of(&sb, probe, &info, first)?;
    let hp = sb.header_pages();
    let log = read_log(q.as_mut(), &layout, &report, &sb)?;
    let spans = logread::checkpoints(&log.slots, hp);
    let (chosen, partial) = choose_checkpoint(&log, &spans, mode, first)?;
    let mut rep = RepairReport { partial_checkpoint: partial, ..RepairReport::default() };
    let unknown = classify(&log, &chosen, &spans, hp, &mut rep);
    // Header copies read before the superblock was found: named once.
    for d in header_damage {
        if !rep.damage.iter().any(|e| (e.0, e.1) == (d.0, d.1)) {
            rep.damage.push(d);
        }
    }
    if mode == Mode::Mount {
        if let Some(&i) = unknown.first() {
            let s = &log.slots[i];
            let why = format!(
                "metadata page {}",
                s.page.as_ref().err().map_or(String::new(), PageError::describe)
            );
            return Err(damaged(s.zone, s.offset, &why));
        }
        if let Some(&z) = log.unplaced.first() {
            return Err(damaged(z, 0, "no page of the metadata zone decodes"));
        }
    }
    let pages = || log.slots.iter().filter_map(|s| s.page.as_ref().ok());
    let last_seq = log.slots.last().map_or(0, |s| s.seq);
    let max_generation = pages().map(|p| p.generation).max().unwrap_or(0);
    let max_ckpt = spans.iter().map(|c| c.id).max().unwrap_or(0);

    // Load the checkpoint, then replay what was logged after it began.
    let map = Map::new(&layout);
    load_chunks(&log.slots, &chosen, &map, &layout)?;
    let (replayed, known) = replay(&log.slots, &chosen, unknown.last().copied(), &map, &layout)?;

    let mut a = Analysis {
        begin_zone: log.slots[chosen.begin.0].zone,
        info,
        report,
        layout,
        sb,
        map,
        log,
        ckpt: chosen.id,
        max_ckpt,
        last_seq,
        max_generation,
        replayed,
        adopted: Vec::new(),
        rescanned_zones: 0,
        repair: rep,
    };
    adopt_and_verify(&mut a, q.as_mut(), config, mode, &unknown, &known)?;
    if let Mode::Repair { accept_loss: false } = mode {
        if a.repair.loses() {
            return Err(FtlError::RepairLoses(Box::new(a.repair)));
        }
    }
    Ok(a)
}

/// Adopts blocks by their tags (written after the log; where records are
/// unknown, newer than what the kept log maps) and, for a repair, drops
/// mappings whose block does not hold their logical block.
fn adopt_and_verify(
    a: &mut Analysis,
    q: &mut dyn ZoneQueue,
    config: &FtlConfig,
    mode: Mode,
    unknown: &[usize],
    known: &Ranges,
) -> Result<()> {
    let pages = || a.log.slots.iter().filter_map(|s| s.page.as_ref().ok());
    let watermark = pages().map(|p| p.watermark).max().unwrap_or(0);
    let ms = a.info.metadata_size as usize;
    let tagging = Tagging {
        key: a.sb.instance,
        data_crc: a.sb.features & crate::journal::FEATURE_DATA_CRC != 0,
    };
    let generation = a.max_generation + 1;
    let below = tag::first_seq(generation);
    let rescan =
        config.rescan && config.tag_blocks && a.info.capabilities.metadata && ms >= tag::SEQUENCED;
    if rescan {
        let window = Window { from: watermark, below };
        let found = rescan_zones(q, &a.layout, &a.report, &a.map, window, ms, tagging)?;
        for &(l, p) in &found.adopted {
            a.map.replay_set(l, Some(p));
        }
        a.rescanned_zones = found.zones;
        a.adopted = found.adopted;
    }
    if !mode.repairs() {
        return Ok(());
    }
    let tagged = config.tag_blocks && a.info.capabilities.metadata && ms >= 8;
    let r = &mut a.repair;
    verify_mappings(q, &a.layout, &a.report, &a.map, tagged.then_some((ms, tagging)), r)?;
    let uncertain = r.partial_checkpoint || !unknown.is_empty() || !r.dropped_zones.is_empty();
    if uncertain && rescan {
        // Versions newer than the kept state, where records are unknown:
        // the watermark of the log before the first unknown page bounds
        // what the log before it can have mapped.
        let before = unknown.first().copied().unwrap_or(a.log.slots.len());
        let from = a.log.slots[..before]
            .iter()
            .filter_map(|s| s.page.as_ref().ok())
            .map(|p| p.watermark)
            .max()
            .unwrap_or(0);
        let lost: std::collections::HashSet<u64> = r.unmapped.iter().copied().collect();
        let scan = Scan { from, below, known, lost: &lost, any_unmapped: r.partial_checkpoint };
        let found = scan_all_tags(q, &a.layout, &a.report, &a.map, ms, tagging, &scan)?;
        for &(l, p) in &found {
            a.map.replay_set(l, Some(p));
        }
        r.scanned = found.len() as u64;
        r.unmapped.retain(|l| a.map.lookup(*l).is_none());
        a.adopted.extend(found);
    }
    r.adopted = a.adopted.len() as u64;
    Ok(())
}

/// Writes what recovery decided: resets the metadata zones it no longer
/// needs, seals the mount with a log page of its generation (the adopted
/// mappings in it), and closes out the data zones the streams cannot
/// continue. A repair's log goes on in a fresh metadata zone (the caller
/// writes a checkpoint there).
fn mount(dev: Arc<dyn ZonedDevice>, config: FtlConfig, a: Analysis, mode: Mode) -> Result<Shared> {
    let mut q = dev.queue(4).map_err(FtlError::device("create a queue"))?;
    let repair = mode.repairs();
    let (pools, resume, finish) = data_pools(dev.as_ref(), &config, &a)?;
    let layout = &a.layout;

    // Metadata zones older than the checkpoint's are reset; so are, by a
    // repair, those of which nothing could be read.
    let keep_from = a.log.bases.iter().find(|&&(_, z)| z == a.begin_zone).map_or(0, |&(s, _)| s);
    let mut first_seq = vec![None; layout.meta_zones as usize];
    let mut stale: Vec<u32> = a.log.bases.iter().filter(|b| b.0 < keep_from).map(|b| b.1).collect();
    if repair {
        stale.extend(&a.log.unplaced);
    }
    for &z in &stale {
        q.zone_action(ZoneAction::Reset, Target::Zone(layout.zone_start(z)))
            .map_err(FtlError::device("reset an old metadata zone"))?;
    }
    for &(seq, z) in a.log.bases.iter().filter(|b| b.0 >= keep_from) {
        first_seq[z as usize] = Some(seq);
    }
    // The log continues in its newest zone; a repaired log in a fresh one,
    // so the checkpoint written there frees every zone that held damage.
    let current = match repair {
        true => None,
        false => a.log.bases.last().map(|&(_, z)| (z, written(&a.report, z as usize))),
    };
    let meta_q = dev.queue(4).map_err(FtlError::device("create a queue"))?;
    let meta = MetaWriter::new(
        meta_q,
        layout,
        a.sb,
        first_seq,
        current,
        a.last_seq + 1,
        a.max_generation + 1,
        a.max_ckpt,
        LogZrwa::choose(&a.info, &config, layout),
    )?;
    let mapped = (0..layout.zones).map(|z| a.map.valid(z) as u64).sum::<u64>();
    let resumed = resume.len();
    // Damage the mount passed over stays on the device until the log
    // moves past it: `Ftl::check` reports it.
    let damage = match repair {
        true => Vec::new(),
        false => a.repair.damage.clone(),
    };
    let generation = a.max_generation + 1;
    let parts =
        Parts { layout: a.layout, map: a.map, meta, pools, resume, clock: 0, generation, damage };
    let shared = Shared::new(dev, config, parts)?;
    {
        let mut j = shared.journal.lock();
        for &(l, p) in &a.adopted {
            j.push(Record::Map { l: l as u32, p });
        }
    }
    shared.meta.lock().seal_mount(&shared.meta_ctx())?;
    for &zone in &finish {
        q.zone_action(ZoneAction::Finish, Target::Zone(shared.layout.zone_start(zone)))
            .map_err(FtlError::device("finish a half-written zone"))?;
    }
    let finishes = finish.len() as u64;
    tracing::info!(
        checkpoint = a.ckpt,
        replayed = a.replayed,
        mapped,
        rescanned_zones = a.rescanned_zones,
        rescued = a.adopted.len(),
        resumed,
        finished = finishes,
        generation,
        "FTL recovered"
    );
    let c = &shared.stats;
    Counters::add(&c.zone_finishes, finishes);
    Counters::add(&c.zone_resets, stale.len() as u64);
    Counters::add(&c.rescanned_zones, a.rescanned_zones);
    Counters::add(&c.rescued_blocks, a.adopted.len() as u64);
    Counters::add(&c.resumed_zones, resumed as u64);
    Ok(shared)
}

/// The data zones' pools after the map is rebuilt: half-written zones
/// become heads again, as many as the streams can hold (those with the
/// most room left); the rest (returned last) are closed out once the
/// mount is sealed.
#[allow(clippy::type_complexity)]
fn data_pools(
    dev: &dyn ZonedDevice,
    config: &FtlConfig,
    a: &Analysis,
) -> Result<(Vec<Pool>, Vec<(u32, u32)>, Vec<u32>)> {
    let layout = &a.layout;
    let mut half_written = Vec::new();
    let mut extent = vec![0u32; layout.zones as usize];
    let mut pools = Vec::with_capacity(layout.zones as usize);
    for (i, z) in a.report.iter().enumerate() {
        let zone = i as u32;
        if layout.is_meta(zone) {
            pools.push(Pool::Meta);
            continue;
        }
        let pool = match z.state {
            ZoneState::Empty => Pool::Free,
            ZoneState::Full => {
                extent[i] = z.capacity as u32;
                Pool::Full
            }
            ZoneState::ImplicitlyOpen | ZoneState::ExplicitlyOpen | ZoneState::Closed => {
                extent[i] = written(&a.report, i);
                half_written.push((zone, written(&a.report, i)));
                Pool::Full
            }
            ZoneState::ReadOnly => {
                extent[i] = z.capacity as u32;
                Pool::Unusable
            }
            _ => Pool::Unusable,
        };
        pools.push(pool);
    }
    a.map.rebuild(layout, &extent)?;
    let heads =
        StreamPlan::new(config, open_budget(dev).saturating_sub(1))?.max_heads.iter().sum::<u32>()
            as usize;
    half_written.sort_by_key(|&(zone, w)| (w, zone));
    let finish = half_written.split_off(heads.min(half_written.len()));
    for &(zone, _) in &half_written {
        pools[zone as usize] = Pool::Open;
    }
    Ok((pools, half_written, finish.into_iter().map(|(z, _)| z).collect()))
}

/// Recovers the FTL on `dev` (see the module documentation). A repair
/// returns what it found (`None`: the log was intact and nothing lost).
pub(crate) fn recover(
    dev: Arc<dyn ZonedDevice>,
    config: FtlConfig,
    mode: Mode,
) -> Result<(Shared, Option<RepairReport>)> {
    let a = analyze(dev.as_ref(), &config, mode)?;
    let report = (mode.repairs() && !a.repair.is_clean()).then(|| a.repair.clone());
    Ok((mount(dev, config, a, mode)?, report))
}

/// What a scan of every tag adopts (where records are unknown).
struct Scan<'a> {
    /// Versions numbered from here on are newer than anything the log
    /// before the first unknown page maps.
    from: u64,
    /// Numbers from here on are not this FTL's before this mount.
    below: u64,
    /// Logical blocks changed after the last unknown page: known exactly.
    known: &'a Ranges,
    /// Logical blocks whose mapping was dropped: any version found is
    /// better than none.
    lost: &'a std::collections::HashSet<u64>,
    /// Without a complete checkpoint, every unmapped block may have been
    /// mapped by the missing chunks.
    any_unmapped: bool,
}

/// Where records are unknown: reads every written block of every data
/// zone and, for each logical block not known exactly, adopts the newest
/// version whose verified tag names it when it is newer than the block
/// the map keeps for it (or the map keeps none). Returns the adoptions.
fn scan_all_tags(
    q: &mut dyn ZoneQueue,
    layout: &Layout,
    report: &[Zone],
    map: &Map,
    ms: usize,
    tagging: Tagging,
    scan: &Scan<'_>,
) -> Result<Vec<(u64, u32)>> {
    let bs = layout.block_size as usize;
    let mdts = layout.mdts_blocks.max(1);
    let mut reader = TagReader {
        data: q.alloc(mdts as usize * bs).map_err(FtlError::device("allocate a buffer"))?,
        meta: Some(q.alloc(mdts as usize * ms).map_err(FtlError::device("allocate a buffer"))?),
        ms,
        tagging,
    };
    // The tag of the block each logical block is mapped to, and the
    // newest unmapped version of each.
    let mut kept: HashMap<u64, u64> = HashMap::new();
    let mut newest: HashMap<u64, (u64, u32)> = HashMap::new();
    for zone in layout.meta_zones..layout.zones {
        let z = &report[zone as usize];
        let written = match z.state {
            ZoneState::Full => layout.cap(zone),
            ZoneState::ImplicitlyOpen | ZoneState::ExplicitlyOpen | ZoneState::Closed => {
                (z.written() as u32).min(layout.cap(zone))
            }
            _ => continue,
        };
        let mut o = 0u32;
        while o < written {
            let k = (written - o).min(mdts);
            let p0 = layout.pba(zone, o);
            let tags = match reader.read(q, layout.lba(p0), k) {
                Ok(t) => t,
                Err(e) => {
                    tracing::warn!(zone, block = o, error = %e, "cannot read block tags");
                    o += k;
                    continue;
                }
            };
            for (i, t) in tags.into_iter().enumerate() {
                let Some(t) = t.filter(|t| t.logical < layout.logical && t.seq < scan.below) else {
                    continue;
                };
                let p = p0 + i as u32;
                if map.lookup(t.logical) == Some(p) {
                    kept.insert(t.logical, t.seq);
                    continue;
                }
                if scan.known.contains(t.logical) {
                    continue;
                }
                let e = newest.entry(t.logical).or_insert((t.seq, p));
                if t.seq > e.0 {
                    *e = (t.seq, p);
                }
            }
            o += k;
        }
    }
    let mut out: Vec<(u64, u32)> = newest
        .into_iter()
        .filter(|&(l, (seq, _))| match (map.lookup(l), kept.get(&l)) {
            // A copy by read and write carries 0: only versions written
            // after the log before the damage outrank it.
            (Some(_), Some(&0)) => seq >= scan.from,
            (Some(_), Some(&s)) => seq > s,
            (Some(_), None) => false,
            (None, _) => scan.any_unmapped || scan.lost.contains(&l) || seq >= scan.from,
        })
        .map(|(l, (_, p))| (l, p))
        .collect();
    out.sort_unstable();
    Ok(out)
}

/// Repair: drops every mapping that points past a zone's written extent
/// or (with `tags`: metadata bytes and tagging) to a block whose tag names
/// another logical block; keeps, and lists, blocks whose tag names them
/// but whose data fails its checksum.
fn verify_mappings(
    q: &mut dyn ZoneQueue,
    layout: &Layout,
    report: &[Zone],
    map: &Map,
    tags: Option<(usize, Tagging)>,
    r: &mut RepairReport,
) -> Result<()> {
    let extent = |zone: u32| match report[zone as usize].state {
        ZoneState::Full => layout.cap(zone),
        ZoneState::ImplicitlyOpen | ZoneState::ExplicitlyOpen | ZoneState::Closed => {
            (report[zone as usize].written() as u32).min(layout.cap(zone))
        }
        _ => 0,
    };
    let mut reader = match tags {
        Some((ms, tagging)) => Some(TagReader {
            data: q
                .alloc(layout.block_size as usize)
                .map_err(FtlError::device("allocate a buffer"))?,
            meta: Some(q.alloc(ms).map_err(FtlError::device("allocate a buffer"))?),
            ms,
            tagging,
        }),
        None => None,
    };
    for l in 0..layout.logical {
        let Some(p) = map.lookup(l) else { continue };
        let (zone, offset) = (layout.zone_of(p), layout.offset_of(p));
        if layout.is_meta(zone) || offset >= extent(zone) {
            map.replay_set(l, None);
            r.unmapped.push(l);
            continue;
        }
        let Some(reader) = reader.as_mut() else { continue };
        match reader.claim(q, layout.lba(p))? {
            (Some(t), _) if t.logical == l => {}
            (None, Some(c)) if c == l && reader.tagging.data_crc => r.damaged_blocks.push(l),
            _ => {
                map.replay_set(l, None);
                r.unmapped.push(l);
            }
        }
    }
    if !r.unmapped.is_empty() {
        tracing::warn!(
            blocks = r.unmapped.len(),
            "repair dropped mappings whose blocks name others"
        );
    }
    Ok(())
}

/// The write sequence numbers a rescan adopts: written after the log
/// (`from` on) and before this mount (`below`; anything higher is not a
/// tag this FTL wrote).
#[derive(Debug, Clone, Copy)]
struct Window {
    from: u64,
    below: u64,
}

/// What a rescan found.
#[derive(Debug, Default)]
struct Rescue {
    /// Zones whose blocks were read.
    zones: u64,
    /// (logical, PBA): the newest version of each logical block written
    /// after the log.
    adopted: Vec<(u64, u32)>,
}

/// A data buffer and its metadata for reading tags.
struct TagReader {
    data: IoBuffer,
    meta: Option<IoBuffer>,
    ms: usize,
    tagging: Tagging,
}

impl TagReader {
    /// The verified tag of the block at `lba`, and the logical block its
    /// metadata names unverified.
    fn claim(&mut self, q: &mut dyn ZoneQueue, lba: u64) -> Result<(Option<Tag>, Option<u64>)> {
        let t = self.read(q, lba, 1)?[0];
        let meta = self.meta.as_ref().expect("the metadata buffer is back after every read");
        Ok((t, tag::claimed(&meta[..self.ms])))
    }

    /// The tags of `k` blocks from `lba` (at most MDTS).
    fn read(&mut self, q: &mut dyn ZoneQueue, lba: u64, k: u32) -> Result<Vec<Option<Tag>>> {
        let r =
            tag::read_with_metadata(q, &mut self.data, &mut self.meta, lba, k as usize, self.ms);
        r.map_err(FtlError::device("read block tags"))?;
        let meta = self.meta.as_ref().expect("the metadata buffer is back after every read");
        let bs = self.data.len() / k.max(1) as usize;
        Ok(meta
            .chunks_exact(self.ms)
            .zip(self.data.chunks_exact(bs))
            .map(|(m, d)| tag::decode(m, &self.tagging, d))
            .collect())
    }
}

/// Reads the tags of the data zones written after the log and picks the
/// newest version of every logical block among them (see the module
/// documentation). A zone whose tags cannot be read is left out with a
/// warning: what it holds was never flushed.
fn rescan_zones(
    q: &mut dyn ZoneQueue,
    layout: &Layout,
    report: &[Zone],
    map: &Map,
    window: Window,
    ms: usize,
    tagging: Tagging,
) -> Result<Rescue> {
    let mut mapped = vec![0u64; layout.physical().div_ceil(64)];
    for l in 0..layout.logical {
        if let Some(p) = map.lookup(l) {
            mapped[p as usize / 64] |= 1 << (p % 64);
        }
    }
    let is_mapped = |p: u32| mapped[p as usize / 64] & (1 << (p % 64)) != 0;
    let bs = layout.block_size as usize;
    let mdts = layout.mdts_blocks.max(1);
    let mut reader = TagReader {
        data: q.alloc(mdts as usize * bs).map_err(FtlError::device("allocate a buffer"))?,
        meta: Some(q.alloc(mdts as usize * ms).map_err(FtlError::device("allocate a buffer"))?),
        ms,
        tagging,
    };
    let mut newest: HashMap<u64, (u64, u32)> = HashMap::new();
    let mut out = Rescue::default();
    for zone in layout.meta_zones..layout.zones {
        let z = &report[zone as usize];
        let written = match z.state {
            ZoneState::Full
            | ZoneState::ImplicitlyOpen
            | ZoneState::ExplicitlyOpen
            | ZoneState::Closed => (z.written() as u32).min(layout.cap(zone)),
            _ => continue,
        };
        if written == 0 {
            continue;
        }
        let lba_of = |o: u32| layout.lba(layout.pba(zone, o));
        match reader.read(q, lba_of(written - 1), 1) {
            Ok(t) if matches!(t[0], Some(t) if t.seq >= window.from) => {}
            Ok(_) => continue,
            Err(e) => {
                tracing::warn!(zone, error = %e, "cannot read a zone's last tag; not rescanned");
                continue;
            }
        }
        out.zones += 1;
        let mut o = 0u32;
        while o < written {
            if is_mapped(layout.pba(zone, o)) {
                o += 1;
                continue;
            }
            let mut k = 1u32;
            while o + k < written && k < mdts && !is_mapped(layout.pba(zone, o + k)) {
                k += 1;
            }
            match reader.read(q, lba_of(o), k) {
                Ok(tags) => {
                    for (i, t) in tags.into_iter().enumerate() {
                        let Some(t) = t.filter(|t| t.seq >= window.from) else { continue };
                        let p = layout.pba(zone, o + i as u32);
                        if t.logical >= layout.logical || t.seq >= window.below {
                            tracing::warn!(
                                zone,
                                block = o + i as u32,
                                logical = t.logical,
                                seq = t.seq,
                                "a block tag out of range; not adopted"
                            );
                            continue;
                        }
                        let e = newest.entry(t.logical).or_insert((t.seq, p));
                        if t.seq > e.0 {
                            *e = (t.seq, p);
                        }
                    }
                }
                Err(e) => tracing::warn!(zone, block = o, blocks = k, error = %e,
                    "cannot read block tags; those blocks are not adopted"),
            }
            o += k;
        }
    }
    out.adopted = newest.into_iter().map(|(l, (_, p))| (l, p)).collect();
    out.adopted.sort_unstable();
    Ok(out)
}
