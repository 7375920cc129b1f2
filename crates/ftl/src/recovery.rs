//! Recovery: rebuilds the map from the metadata log.
//!
//! 1. The first non-empty zone must be a metadata zone whose header page
//!    names the geometry; every metadata zone is read up to its write
//!    pointer and its pages decoded.
//! 2. Live zones are ordered by the sequence number of their header page.
//!    The newest checkpoint whose End page, Begin record and every chunk
//!    are present is loaded, and every record logged after its Begin
//!    record is replayed (last change wins).
//! 3. From the checkpoint's Begin zone on, page sequence numbers must
//!    follow each other and every page must decode. Pages are one block
//!    and NVMe writes of one block are atomic on power loss, so a crash
//!    leaves fewer pages, never a torn one: a page below a zone's write
//!    pointer that does not decode, the newest included, is damage, and
//!    the mount fails naming it (a commit of the log's ZRWA fills its
//!    last unit with empty pages, never leaves it blank).
//!    [`crate::Ftl::repair`] (`zns ftl check
//!    --repair`) instead cuts the log before the damage (falling back on
//!    the newest checkpoint begun, its readable chunks and a scan of every
//!    block tag when no complete checkpoint is left), drops mappings whose
//!    block's tag names another logical block, and reports what was lost.
//! 4. Rescan (with [`FtlConfig::rescan`] and tags of at least 16 bytes):
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
//! 5. Every mapping must point into the written part of a data zone, and
//!    no two logical blocks may share a block; P2L and valid counts are
//!    rebuilt. The adopted mappings are logged with a page of the new
//!    mount generation, durably, before anything else is written (so
//!    write sequence numbers never repeat across mounts). Data zones left
//!    open become write heads again (the next heads the streams open
//!    continue them: a Finish would pad them); only those beyond the
//!    streams' heads are finished. Metadata zones older than the
//!    checkpoint are reset, and the log continues in the newest metadata
//!    zone.

use std::sync::Arc;

use std::collections::HashMap;

use zns_device::{
    IoBuffer, ReportFilter, StatusCode, Target, Zone, ZoneAction, ZoneQueue, ZoneState, ZonedDevice,
};

use crate::config::FtlConfig;
use crate::config::StreamPlan;
use crate::error::{FtlError, Result};
use crate::ftl::{open_budget, Parts, Shared};
use crate::journal::{Body, Page, PageError, Record, NO_MAGIC};
use crate::layout::Layout;
use crate::map::Map;
use crate::meta::{LogZrwa, MetaWriter};
use crate::stats::Counters;
use crate::tag::{self, Tag, Tagging};
use crate::zones::Pool;

/// One block of the metadata log as read.
struct Entry {
    zone: u32,
    offset: u32,
    page: std::result::Result<Page, PageError>,
}

/// What a repair ([`crate::Ftl::repair`]) dropped or could not keep.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RepairReport {
    /// Where the log was damaged: (zone, block, what was wrong), one entry
    /// per place the log was cut (later places come from re-checking the
    /// shorter log). Empty when the log was intact.
    pub damage: Vec<(u32, u32, String)>,
    /// Log pages dropped: the damaged ones and every page after them.
    pub dropped_pages: u64,
    /// Map records in dropped pages that could still be read: mapping
    /// changes lost unless the block tags brought them back.
    pub lost_map_records: u64,
    /// Unmap (discard) records in dropped pages that could still be read:
    /// discarded blocks may read their old data again.
    pub lost_unmap_records: u64,
    /// Metadata zones whose every page was dropped (reset for the log).
    pub dropped_zones: Vec<u32>,
    /// Logical blocks whose mapping was dropped: the block it pointed to
    /// is unwritten or its tag names another block (they read as zeros).
    pub unmapped: Vec<u64>,
    /// Logical blocks kept whose data fails its checksum (reads fail).
    pub damaged_blocks: Vec<u64>,
    /// Blocks adopted by their tags (written after the kept log).
    pub adopted: u64,
    /// No complete checkpoint was left: the map was rebuilt from the
    /// chunks of the newest checkpoint begun, the log after it and every
    /// data block's tag (discarded blocks may come back).
    pub partial_checkpoint: bool,
    /// Blocks a full scan of the tags mapped (with `partial_checkpoint`).
    pub scanned: u64,
}

/// The report's name while recovery fills it.
type Rollback = RepairReport;

impl RepairReport {
    /// Records the log cut at (`zone`, `block`) for `why`, dropping
    /// `entries` (the damaged page and everything after it).
    fn drop_pages(&mut self, zone: u32, block: u32, why: String, entries: &[Entry]) {
        tracing::warn!(zone, block, reason = %why, dropped = entries.len(), "metadata log cut");
        self.damage.push((zone, block, why));
        self.dropped_pages += entries.len() as u64;
        for e in entries {
            if e.offset == 0 && !self.dropped_zones.contains(&e.zone) {
                self.dropped_zones.push(e.zone);
            }
            if let Ok(Page { body: Body::Log(records), .. }) = &e.page {
                for r in records {
                    match r {
                        Record::Map { .. } => self.lost_map_records += 1,
                        Record::Unmap { .. } => self.lost_unmap_records += 1,
                        Record::CheckpointBegin { .. } => {}
                    }
                }
            }
        }
    }

    /// Whether nothing was lost or dropped.
    pub fn is_clean(&self) -> bool {
        self.damage.is_empty()
            && self.unmapped.is_empty()
            && self.damaged_blocks.is_empty()
            && !self.partial_checkpoint
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

/// The header page of the first written metadata zone, damaged: the
/// FTL's superblock (its geometry and layout), of which no other copy is
/// kept once a checkpoint has recycled the older metadata zones.
fn damaged_header(zone: u32, e: &PageError) -> FtlError {
    corrupt(
        zone,
        0,
        format!(
            "the FTL's header page (its superblock: geometry and layout) {}; nothing was \
             changed. The layout it holds cannot be rebuilt (`zns ftl check --repair` cannot \
             help), and the data zones are untouched: `zns report-zones` lists them and `zns \
             read` dumps any block, this page included",
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
             write leaves no page) and later damaged. `zns ftl check --repair` rolls the log back \
             to the page before it and reports what is lost"
        ),
    )
}

/// The newest complete checkpoint of `list` (its id, the index of the
/// page holding its Begin record, and the record's index there), with the
/// highest checkpoint id anywhere in the list.
fn newest_checkpoint(list: &[Entry]) -> (u64, Option<(u64, usize, usize)>) {
    let mut max_ckpt = 0u64;
    let mut begins = HashMap::new();
    let mut chunk_count = HashMap::<u64, u64>::new();
    for (i, e) in list.iter().enumerate() {
        match &e.page {
            Ok(Page { body: Body::Log(records), .. }) => {
                for (r, rec) in records.iter().enumerate() {
                    if let Record::CheckpointBegin { id } = rec {
                        begins.insert(*id, (i, r));
                        max_ckpt = max_ckpt.max(*id);
                    }
                }
            }
            Ok(Page { body: Body::Chunk { ckpt, .. }, .. }) => {
                *chunk_count.entry(*ckpt).or_default() += 1;
            }
            Ok(Page { body: Body::End { ckpt, .. }, .. }) => max_ckpt = max_ckpt.max(*ckpt),
            _ => {}
        }
    }
    let chosen = list.iter().enumerate().rev().find_map(|(i, e)| match &e.page {
        Ok(Page { body: Body::End { ckpt, chunks }, .. }) => {
            let &(bi, br) = begins.get(ckpt)?;
            (bi < i && chunk_count.get(ckpt).copied().unwrap_or(0) == *chunks)
                .then_some((*ckpt, bi, br))
        }
        _ => None,
    });
    (max_ckpt, chosen)
}

/// The newest checkpoint whose Begin record is in `list`, complete or not.
fn newest_begun(list: &[Entry]) -> Option<(u64, usize, usize)> {
    list.iter().enumerate().rev().find_map(|(i, e)| match &e.page {
        Ok(Page { body: Body::Log(records), .. }) => {
            records.iter().enumerate().rev().find_map(|(r, rec)| match rec {
                Record::CheckpointBegin { id } => Some((*id, i, r)),
                _ => None,
            })
        }
        _ => None,
    })
}

/// Checks that the pages of `list` decode and follow each other; returns
/// the last sequence number and the highest generation, or the index of
/// the first page that breaks the log and why.
fn check_sequence(list: &[Entry]) -> std::result::Result<(u64, u32), (usize, String)> {
    let mut prev: Option<u64> = None;
    let mut max_generation = 0u32;
    for (i, e) in list.iter().enumerate() {
        let p = e.page.as_ref().map_err(|err| (i, format!("metadata page {}", err.describe())))?;
        if let Some(s) = prev.filter(|&s| p.seq != s + 1) {
            return Err((i, format!("page sequence {} follows {s}", p.seq)));
        }
        prev = Some(p.seq);
        max_generation = max_generation.max(p.generation);
    }
    Ok((prev.unwrap_or(0), max_generation))
}

/// Reads `blocks` blocks of `zone` from its start and decodes them.
fn read_zone(q: &mut dyn ZoneQueue, layout: &Layout, zone: u32, blocks: u32) -> Result<Vec<Entry>> {
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
                    let page = Page::decode(&buf[i * bs..(i + 1) * bs]);
                    out.push(Entry { zone, offset: at + i as u32, page });
                }
            }
            // A block the device cannot read back (a drive's ECC failure,
            // an emulated image's data checksum): read the run a block at
            // a time, so each unreadable one is a damaged page like any
            // other, named and repairable, instead of failing the mount.
            Err(e) if e.is_status(StatusCode::UnrecoveredReadError) => {
                buf.set_len(bs).map_err(FtlError::device("size a buffer"))?;
                for i in 0..n {
                    let page = match q.read(layout.zone_start(zone) + (at + i) as u64, &mut buf) {
                        Ok(()) => Page::decode(&buf[..bs]),
                        Err(e) if e.is_status(StatusCode::UnrecoveredReadError) => {
                            Err(PageError::Bad("unreadable: Unrecovered Read Error".into()))
                        }
                        Err(e) => return Err(FtlError::device("read metadata")(e)),
                    };
                    out.push(Entry { zone, offset: at + i, page });
                }
            }
            Err(e) => return Err(FtlError::device("read metadata")(e)),
        }
        at += n;
    }
    Ok(out)
}

fn corrupt(zone: u32, block: u32, reason: impl Into<String>) -> FtlError {
    FtlError::Corrupt { zone: zone as u64, block: block as u64, reason: reason.into() }
}

/// Recovers the FTL on `dev`. With `repair`, damage to the log rolls it
/// back to the page before the damage instead of failing, mappings whose
/// block's tag does not name them are dropped, and the log moves to a
/// fresh zone (the caller writes a checkpoint there); what was lost is
/// returned.
pub(crate) fn recover(
    dev: Arc<dyn ZonedDevice>,
    config: FtlConfig,
    repair: bool,
) -> Result<(Shared, Option<Rollback>)> {
    let info = dev.info().clone();
    info.require_zoned().map_err(FtlError::device("open the device"))?;
    let mut q = dev.queue(4).map_err(FtlError::device("create a queue"))?;
    let report = q
        .report_zones(0, ReportFilter::All, info.zone_count as usize)
        .map_err(FtlError::device("report zones"))?;
    let zones = report.len() as u32;
    let caps: Box<[u32]> = report.iter().map(|z| z.capacity as u32).collect();
    let stride = caps.iter().copied().max().unwrap_or(0);
    let written = |i: usize| report[i].written() as u32;

    // The first written zone holds a header naming the geometry.
    let first =
        report.iter().position(|z| z.state != ZoneState::Empty).ok_or(FtlError::NotFormatted)?;
    let mut probe = Layout {
        block_size: info.block_size,
        zone_size: info.zone_size,
        zones,
        caps: caps.clone(),
        stride,
        meta_zones: 0,
        mdts_blocks: info.max_transfer_blocks().min(u32::MAX as u64) as u32,
        zasl_blocks: ((info.zasl_bytes / info.block_size as usize) as u32).max(1),
        logical: 0,
    };
    let head = read_zone(q.as_mut(), &probe, first as u32, written(first).min(1))?;
    let sb = match head.first().map(|e| &e.page) {
        Some(Ok(Page { body: Body::Header(sb), .. })) => *sb,
        Some(Err(PageError::Bad(why))) if why.contains("version") => {
            return Err(FtlError::Incompatible(why.clone()))
        }
        // The FTL's own page, damaged: the header naming the layout. Not
        // "no FTL", which would invite a format over the data.
        Some(Err(e @ PageError::Bad(why))) if why != NO_MAGIC => {
            return Err(damaged_header(first as u32, e))
        }
        // Written zones that do not start with the FTL's pages: other
        // data, never taken for an empty device.
        _ => return Err(not_empty(&report)),
    };
    if sb.features & !crate::journal::KNOWN_FEATURES != 0 {
        return Err(FtlError::Incompatible(format!(
            "formatted with features {:#x}, of which this version knows {:#x}",
            sb.features,
            crate::journal::KNOWN_FEATURES
        )));
    }
    let geometry = (sb.block_size, sb.zone_size, sb.zones, sb.stride);
    if geometry != (info.block_size, info.zone_size, zones, stride) {
        return Err(FtlError::Incompatible(format!(
            "formatted for {} zones of {} blocks (capacity {}) of {} bytes; the device has {zones} \
             zones of {} blocks (capacity {stride}) of {} bytes",
            sb.zones, sb.zone_size, sb.stride, sb.block_size, info.zone_size, info.block_size
        )));
    }
    if first as u32 >= sb.meta_zones || sb.meta_zones >= zones || sb.logical == 0 {
        return Err(corrupt(first as u32, 0, "the header's metadata zone count does not fit"));
    }
    probe.meta_zones = sb.meta_zones;
    probe.logical = sb.logical;
    let layout = probe;
    let physical = layout.physical() as u64;

    // Every live metadata zone, in log order.
    let mut rollback: Option<Rollback> = None;
    let mut live: Vec<(u64, Vec<Entry>)> = Vec::new();
    for z in 0..layout.meta_zones {
        if report[z as usize].state == ZoneState::Empty {
            continue;
        }
        if matches!(report[z as usize].state, ZoneState::ReadOnly | ZoneState::Offline) {
            return Err(corrupt(z, 0, format!("metadata zone is {:?}", report[z as usize].state)));
        }
        let entries = read_zone(q.as_mut(), &layout, z, written(z as usize))?;
        let seq = match entries.first().map(|e| &e.page) {
            Some(Ok(Page { seq, body: Body::Header(h), .. })) if *h == sb => *seq,
            Some(Ok(Page { body: Body::Header(_), .. })) => {
                return Err(corrupt(z, 0, "header of another FTL instance or geometry"))
            }
            Some(Ok(_)) => return Err(corrupt(z, 0, "metadata zone without a header page")),
            Some(Err(e)) if repair => {
                // Without its header a zone cannot be placed in the log.
                let why = format!("unreadable header page ({})", e.describe());
                rollback.get_or_insert_with(Rollback::default).drop_pages(z, 0, why, &entries);
                continue;
            }
            Some(Err(e)) => return Err(damaged(z, 0, &format!("header page {}", e.describe()))),
            None => continue,
        };
        live.push((seq, entries));
    }
    live.sort_by_key(|(s, _)| *s);
    let list: Vec<Entry> = live.into_iter().flat_map(|(_, e)| e).collect();

    let mut list: Vec<Entry> = list;
    let pages = || list.iter().filter_map(|e| e.page.as_ref().ok());
    // Highest numbers anywhere in the log, dropped pages included: a
    // repaired log never reuses them.
    let all_max_seq = pages().map(|p| p.seq).max().unwrap_or(0);
    let all_max_generation = pages().map(|p| p.generation).max().unwrap_or(0);
    let all_max_ckpt = newest_checkpoint(&list).0;
    let (ckpt, begin_index, begin_record, max_ckpt, begin_zone, last_seq, max_generation) = loop {
        let (max_ckpt, chosen) = newest_checkpoint(&list);
        let chosen = match chosen {
            Some(c) => Some(c),
            // Damage took every complete checkpoint: name the damage.
            None => match list.iter().position(|e| e.page.is_err()) {
                Some(i) if !repair => {
                    let why = format!(
                        "metadata page {}",
                        list[i].page.as_ref().err().map_or(String::new(), PageError::describe)
                    );
                    return Err(damaged(list[i].zone, list[i].offset, &why));
                }
                Some(i) => {
                    let (z, o) = (list[i].zone, list[i].offset);
                    let why = "metadata page does not decode (no complete checkpoint before it)"
                        .to_string();
                    rollback.get_or_insert_with(Rollback::default).drop_pages(
                        z,
                        o,
                        why,
                        &list[i..],
                    );
                    list.truncate(i);
                    continue;
                }
                // Repair falls back on the newest checkpoint begun: its
                // chunks that are there, the log after it, the tags.
                None if repair => newest_begun(&list).inspect(|_| {
                    rollback.get_or_insert_with(Rollback::default).partial_checkpoint = true;
                }),
                None => None,
            },
        };
        let Some((ckpt, begin_index, begin_record)) = chosen else {
            let (z, o) = list.last().map_or((first as u32, 0), |e| (e.zone, e.offset));
            return Err(corrupt(z, o, "no complete checkpoint in the metadata log"));
        };
        let begin_zone = list[begin_index].zone;
        let start =
            list.iter().position(|e| e.zone == begin_zone).expect("the begin zone is listed");
        match check_sequence(&list[start..]) {
            Ok((last_seq, max_generation)) => {
                break (
                    ckpt,
                    begin_index,
                    begin_record,
                    max_ckpt,
                    begin_zone,
                    last_seq,
                    max_generation,
                )
            }
            Err((i, why)) => {
                let e = &list[start + i];
                if !repair {
                    return Err(damaged(e.zone, e.offset, &why));
                }
                let (z, o) = (e.zone, e.offset);
                rollback.get_or_insert_with(Rollback::default).drop_pages(
                    z,
                    o,
                    why,
                    &list[start + i..],
                );
                list.truncate(start + i);
            }
        }
    };
    let (last_seq, max_generation, max_ckpt) = match repair {
        true => (
            all_max_seq.max(last_seq),
            all_max_generation.max(max_generation),
            all_max_ckpt.max(max_ckpt),
        ),
        false => (last_seq, max_generation, max_ckpt),
    };
    if let Some(r) = &rollback {
        // Zones whose every page was dropped: empty them for the log.
        for &z in &r.dropped_zones {
            q.zone_action(ZoneAction::Reset, Target::Zone(layout.zone_start(z)))
                .map_err(FtlError::device("reset a metadata zone"))?;
        }
    }

    // Load the checkpoint, then replay what was logged after it began.
    let map = Map::new(&layout);
    let in_range = |l: u64, n: u64| l.checked_add(n).is_some_and(|end| end <= layout.logical);
    for e in &list[begin_index..] {
        if let Ok(Page { body: Body::Chunk { ckpt: c, first, entries }, .. }) = &e.page {
            if *c != ckpt {
                continue;
            }
            if !in_range(*first, entries.len() as u64) {
                return Err(corrupt(
                    e.zone,
                    e.offset,
                    "checkpoint chunk past the logical capacity",
                ));
            }
            for (i, &p) in entries.iter().enumerate() {
                if p != u32::MAX {
                    if p as u64 >= physical {
                        return Err(corrupt(e.zone, e.offset, format!("checkpoint entry {p}")));
                    }
                    map.replay_set(first + i as u64, Some(p));
                }
            }
        }
    }
    let mut replayed = 0u64;
    for (i, e) in list.iter().enumerate().skip(begin_index) {
        let Ok(Page { body: Body::Log(records), .. }) = &e.page else { continue };
        let skip = if i == begin_index { begin_record + 1 } else { 0 };
        for r in &records[skip..] {
            match *r {
                Record::Map { l, p } => {
                    if !in_range(l as u64, 1) || p as u64 >= physical {
                        return Err(corrupt(e.zone, e.offset, format!("record maps {l} to {p}")));
                    }
                    map.replay_set(l as u64, Some(p));
                }
                Record::Unmap { l, blocks } => {
                    if !in_range(l as u64, blocks as u64) {
                        return Err(corrupt(
                            e.zone,
                            e.offset,
                            format!("record unmaps {blocks} at {l}"),
                        ));
                    }
                    for x in l as u64..l as u64 + blocks as u64 {
                        map.replay_set(x, None);
                    }
                }
                Record::CheckpointBegin { .. } => {}
            }
            replayed += 1;
        }
    }

    // Blocks written after the log: adopt the newest version of each.
    let watermark =
        list.iter().filter_map(|e| e.page.as_ref().ok()).map(|p| p.watermark).max().unwrap_or(0);
    let generation = max_generation + 1;
    let ms = info.metadata_size as usize;
    let rescan =
        config.rescan && config.tag_blocks && info.capabilities.metadata && ms >= tag::SEQUENCED;
    let found = if rescan {
        let window = Window { from: watermark, below: tag::first_seq(generation) };
        let tagging = Tagging {
            key: sb.instance,
            data_crc: sb.features & crate::journal::FEATURE_DATA_CRC != 0,
        };
        rescan_zones(q.as_mut(), &layout, &report, &map, window, ms, tagging)?
    } else {
        Rescue::default()
    };
    for &(l, p) in &found.adopted {
        map.replay_set(l, Some(p));
    }
    if let (true, Some(r)) = (repair, rollback.as_mut()) {
        r.adopted = found.adopted.len() as u64;
    }
    if rollback.as_ref().is_some_and(|r| r.partial_checkpoint) && rescan {
        let tagging = Tagging {
            key: sb.instance,
            data_crc: sb.features & crate::journal::FEATURE_DATA_CRC != 0,
        };
        let scanned = scan_all_tags(q.as_mut(), &layout, &report, &map, ms, tagging)?;
        rollback.as_mut().expect("partial").scanned = scanned;
    }
    if repair {
        let tagging = Tagging {
            key: sb.instance,
            data_crc: sb.features & crate::journal::FEATURE_DATA_CRC != 0,
        };
        let tagged = config.tag_blocks && info.capabilities.metadata && ms >= 8;
        let r = rollback.get_or_insert_with(RepairReport::default);
        verify_mappings(q.as_mut(), &layout, &report, &map, tagged.then_some((ms, tagging)), r)?;
        if r.is_clean() {
            rollback = None;
        }
    }

    // Data zones: what is written, which pool. Half-written zones become
    // heads again, as many as the streams can hold (those with the most
    // room left); the rest are closed out once the mount is sealed.
    let mut half_written = Vec::new();
    let mut extent = vec![0u32; zones as usize];
    let mut pools = Vec::with_capacity(zones as usize);
    for (i, z) in report.iter().enumerate() {
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
                extent[i] = written(i);
                half_written.push((zone, written(i)));
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
    map.rebuild(&layout, &extent)?;
    let heads = StreamPlan::new(&config, open_budget(dev.as_ref()).saturating_sub(1))?
        .max_heads
        .iter()
        .sum::<u32>() as usize;
    half_written.sort_by_key(|&(zone, w)| (w, zone));
    let finish = half_written.split_off(heads.min(half_written.len()));
    let resume = half_written;
    for &(zone, _) in &resume {
        pools[zone as usize] = Pool::Open;
    }

    // The metadata log continues in its newest zone.
    let mut first_seq = vec![None; layout.meta_zones as usize];
    let mut order: Vec<(u64, u32)> = Vec::new();
    let mut resets = 0u64;
    for e in &list {
        if e.offset == 0 {
            if let Ok(p) = &e.page {
                order.push((p.seq, e.zone));
            }
        }
    }
    let keep_from = order.iter().find(|(_, z)| *z == begin_zone).map_or(0, |(s, _)| *s);
    for &(seq, z) in &order {
        if seq < keep_from {
            q.zone_action(ZoneAction::Reset, Target::Zone(layout.zone_start(z)))
                .map_err(FtlError::device("reset an old metadata zone"))?;
            resets += 1;
        } else {
            first_seq[z as usize] = Some(seq);
        }
    }
    // A repaired log goes on in a fresh zone, so the checkpoint written
    // there frees every zone that held damage.
    let current = match repair {
        true => None,
        false => order.last().map(|&(_, z)| (z, written(z as usize))),
    };
    let meta_q = dev.queue(4).map_err(FtlError::device("create a queue"))?;
    let meta = MetaWriter::new(
        meta_q,
        &layout,
        sb,
        first_seq,
        current,
        last_seq + 1,
        generation,
        max_ckpt,
        LogZrwa::choose(&info, &config, &layout),
    )?;
    let mapped = (0..layout.zones).map(|z| map.valid(z) as u64).sum::<u64>();
    let resumed = resume.len();
    let parts = Parts { layout, map, meta, pools, resume, clock: 0, generation };
    let shared = Shared::new(dev, config, parts)?;
    {
        let mut j = shared.journal.lock();
        for &(l, p) in &found.adopted {
            j.push(Record::Map { l: l as u32, p });
        }
    }
    shared.meta.lock().seal_mount(&shared.meta_ctx())?;
    for &(zone, _) in &finish {
        q.zone_action(ZoneAction::Finish, Target::Zone(shared.layout.zone_start(zone)))
            .map_err(FtlError::device("finish a half-written zone"))?;
    }
    let finishes = finish.len() as u64;
    tracing::info!(
        checkpoint = ckpt,
        replayed,
        mapped,
        rescanned_zones = found.zones,
        rescued = found.adopted.len(),
        resumed,
        finished = finishes,
        generation,
        "FTL recovered"
    );
    let c = &shared.stats;
    Counters::add(&c.zone_finishes, finishes);
    Counters::add(&c.zone_resets, resets);
    Counters::add(&c.rescanned_zones, found.zones);
    Counters::add(&c.rescued_blocks, found.adopted.len() as u64);
    Counters::add(&c.resumed_zones, resumed as u64);
    Ok((shared, rollback))
}

/// Repair without a complete checkpoint: maps every unmapped logical
/// block to the newest block whose verified tag names it, reading every
/// written block of every data zone. Returns the blocks mapped.
fn scan_all_tags(
    q: &mut dyn ZoneQueue,
    layout: &Layout,
    report: &[Zone],
    map: &Map,
    ms: usize,
    tagging: Tagging,
) -> Result<u64> {
    let bs = layout.block_size as usize;
    let mdts = layout.mdts_blocks.max(1);
    let mut reader = TagReader {
        data: q.alloc(mdts as usize * bs).map_err(FtlError::device("allocate a buffer"))?,
        meta: Some(q.alloc(mdts as usize * ms).map_err(FtlError::device("allocate a buffer"))?),
        ms,
        tagging,
    };
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
            for (i, t) in reader.read(q, layout.lba(p0), k)?.into_iter().enumerate() {
                let Some(t) = t.filter(|t| t.logical < layout.logical) else { continue };
                if map.lookup(t.logical).is_some() {
                    continue;
                }
                let p = p0 + i as u32;
                let e = newest.entry(t.logical).or_insert((t.seq, p));
                if t.seq > e.0 {
                    *e = (t.seq, p);
                }
            }
            o += k;
        }
    }
    for (&l, &(_, p)) in &newest {
        map.replay_set(l, Some(p));
    }
    Ok(newest.len() as u64)
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
