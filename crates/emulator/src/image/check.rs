//! Verifying a device image end to end, and repairing it on request.
//!
//! [`check`] reads everything the image keeps: the superblock, the profile
//! text, the layout table, the file's length, both zone-state slots of
//! every zoned namespace (that the newest decodes, and that the two are
//! neighbours), and the data and metadata of every block that can be read
//! back (every written block of a zoned namespace, every block of a
//! conventional one) against their checksums. It changes nothing.
//!
//! When a namespace's slots cannot be trusted (a damaged slot, records
//! that are not neighbours), the zone state is rebuilt from the newest
//! valid record and the data region (see the `recover` module): the report
//! names each zone whose state the data proves differs from the record,
//! and any block that nothing accounts for.
//!
//! Each problem is either repairable (`--repair` restores everything: a
//! damaged or stale slot whose state the data proves) or a loss (damaged
//! data or metadata, blocks no checksum accounts for, a truncated file, a
//! namespace without a valid record, a damaged superblock, profile or
//! layout table); [`CheckReport::verdict`] says which holds.
//!
//! With `repair`, it then keeps all it can and says what was lost: the
//! rebuilt zone state is written as the next record (the valid one is
//! never touched); a file cut short is extended back to its layout
//! (blocks whose data was cut off and whose checksum is gone too are
//! marked lost, so they read as Unrecovered Read Error rather than zeros);
//! a namespace with no valid record gets a zone state rebuilt from its
//! data checksums. What cannot be brought back stays reported: damaged
//! data and metadata (reads of those blocks keep failing until they are
//! rewritten), and damage to the superblock, profile or layout table.
//! Opening an image never repairs anything.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use super::format::{image_end, NamespaceLayout, CHECKSUM_BYTES, VERSION_LEGACY};
use super::recover::{assess, Assessment, ZoneChange};
use super::slot::{slot_record, Slot, SLOT_NAMES};
use super::{lock, no_valid_slot, read_structure, read_up_to, truncated, ImageError};
use crate::media::{
    generation_checksum, generation_matches, generation_of, Generations, LOST, NO_CHECKSUM, PENDING,
};
use crate::profile::{NamespaceKind, NamespaceProfile, Profile};
use crate::zns::Zones;

/// Most damaged block numbers a report lists per namespace (all are counted).
pub const LISTED_BLOCKS: usize = 64;

/// One thing wrong with an image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// What part: `superblock`, `profile`, `layout`, `length`, `slot`,
    /// `zones` (the data proves a newer zone state than the newest valid
    /// record), `lost` (blocks or zone state nothing can bring back),
    /// `zone-state`, `data` or `metadata`.
    pub kind: &'static str,
    /// The namespace it concerns, if one.
    pub nsid: Option<u32>,
    /// In words for the user.
    pub message: String,
    /// `--repair` restores everything this problem concerns; false when
    /// data or state is lost.
    pub repairable: bool,
}

/// How an image stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing wrong.
    Clean,
    /// Damaged, and `--repair` restores everything (nothing lost).
    Repairable,
    /// Data or zone state is lost (or was lost by the repair).
    Lost,
}

/// What was found in one namespace.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NamespaceReport {
    /// Namespace identifier.
    pub nsid: u32,
    /// True for a zoned namespace.
    pub zoned: bool,
    /// Each zone-state slot, A then B: `valid (sequence N)`, `never
    /// written`, or what is wrong with it (zoned namespaces).
    pub slots: Vec<String>,
    /// Sequence number of the zone state in use (the newest valid slot).
    pub sequence: Option<u64>,
    /// Zones whose state the data proves differs from the newest valid
    /// record, when the slots cannot be trusted (what `--repair` restores).
    pub changed_zones: Vec<ZoneChange>,
    /// Blocks beyond the write pointers the data proves that hold data no
    /// checksum accounts for.
    pub unaccounted_blocks: u64,
    /// Blocks that can be read back: written blocks of zoned namespaces,
    /// every block of a conventional one.
    pub readable_blocks: u64,
    /// Blocks whose data was verified against a checksum (or found to be
    /// zeros where none was ever stored).
    pub checked_blocks: u64,
    /// Blocks that fail their checksum, up to [`LISTED_BLOCKS`].
    pub damaged_blocks: Vec<u64>,
    /// Blocks that fail their checksum, all of them.
    pub damaged_total: u64,
    /// Blocks whose metadata fails its checksum, up to [`LISTED_BLOCKS`].
    pub damaged_metadata: Vec<u64>,
    /// Blocks whose metadata fails its checksum, all of them.
    pub damaged_metadata_total: u64,
    /// Blocks whose last write or deallocation was interrupted (a killed
    /// process): they hold their old or new data, unverified; a repair
    /// checksums them as they are.
    pub unverified_blocks: u64,
}

/// The result of [`check`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CheckReport {
    /// The image's path, as given.
    pub path: String,
    /// Format version, when the superblock could be read.
    pub version: Option<u32>,
    /// Profile name, when the profile could be read.
    pub profile: Option<String>,
    /// Whether written blocks carry data checksums.
    pub data_checksums: bool,
    /// Whether blocks' metadata carries checksums.
    pub metadata_checksums: bool,
    /// Length of the file in bytes.
    pub length: u64,
    /// Length its layout needs, when known.
    pub expected_length: Option<u64>,
    /// Per namespace, NSID 1 first (empty when the layout is unknown).
    pub namespaces: Vec<NamespaceReport>,
    /// Everything wrong, in the order found.
    pub problems: Vec<Problem>,
    /// What a repair did and what it lost (empty without `repair`).
    pub repairs: Vec<String>,
    /// The repair lost data or zone state (it says what in `repairs`).
    pub repair_lost: bool,
}

impl CheckReport {
    /// True when nothing is wrong.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }

    /// Clean, repairable without loss, or lost: what is wrong now and, after
    /// a repair, what the repair could not keep.
    pub fn verdict(&self) -> Verdict {
        if self.repair_lost || self.problems.iter().any(|p| !p.repairable) {
            Verdict::Lost
        } else if self.problems.is_empty() {
            Verdict::Clean
        } else {
            Verdict::Repairable
        }
    }

    fn problem(&mut self, kind: &'static str, nsid: Option<u32>, message: String) {
        self.problems.push(Problem { kind, nsid, message, repairable: false });
    }

    fn repairable(&mut self, kind: &'static str, nsid: Option<u32>, message: String) {
        self.problems.push(Problem { kind, nsid, message, repairable: true });
    }
}

/// Verifies the image at `path` (see the module documentation); with
/// `repair`, repairs what can be repaired, then verifies it again and
/// returns that second report with the repairs listed. `progress` is told
/// (blocks verified, blocks to verify) as the data is read.
///
/// Errors: the file cannot be opened or read, or another process has the
/// image open. Everything wrong with the image itself is in the report.
pub fn check(
    path: &Path,
    repair: bool,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<CheckReport, ImageError> {
    let p = path.display().to_string();
    let io = |source| ImageError::Io { path: p.clone(), source };
    let file = OpenOptions::new().read(true).write(repair).open(path).map_err(io)?;
    lock(&file, &p)?;
    let report = inspect(&file, &p, progress).map_err(io)?;
    let pending = report.namespaces.iter().any(|n| n.unverified_blocks > 0);
    if !repair || (report.is_ok() && !pending) {
        return Ok(report);
    }
    let (repairs, lost) = fix(&file, &report).map_err(io)?;
    file.sync_all().map_err(io)?;
    let mut after = inspect(&file, &p, progress).map_err(io)?;
    after.repairs = repairs;
    after.repair_lost = lost;
    Ok(after)
}

/// What one namespace's zone state gives the data verification.
struct Readable {
    /// Block extents whose data can be read back.
    extents: Vec<(u64, u64)>,
    /// The zones' write generations (none for a conventional namespace).
    generations: Option<Arc<Generations>>,
}

/// Everything [`check`] verifies, changing nothing.
fn inspect(
    file: &File,
    path: &str,
    progress: &mut dyn FnMut(u64, u64),
) -> std::io::Result<CheckReport> {
    let mut r = CheckReport {
        path: path.to_string(),
        length: file.metadata()?.len(),
        ..CheckReport::default()
    };
    let s = match read_structure(file) {
        Ok(s) => s,
        Err(e) => {
            r.problem(e.kind, None, e.why);
            return Ok(r);
        }
    };
    r.version = Some(s.superblock.version);
    r.profile = Some(s.profile.name.clone());
    r.data_checksums = s.layouts.iter().any(|l| l.checksum_offset.is_some());
    r.metadata_checksums = s.layouts.iter().any(|l| l.metadata_checksum_offset.is_some());
    let end = image_end(&s.layouts);
    r.expected_length = Some(end);
    if r.length < end {
        r.problem("length", None, truncated(r.length, end, &s.profile));
    }
    let gens = s.superblock.generations();
    let mut plans = Vec::new();
    for (i, (l, ns)) in s.layouts.iter().zip(&s.profile.namespaces).enumerate() {
        let nsid = i as u32 + 1;
        let (report, readable) =
            namespace_state(file, nsid, l, ns, &s.profile, &mut r, s.superblock.version, gens)?;
        r.namespaces.push(report);
        plans.push(readable);
    }
    if r.data_checksums {
        let total: u64 = plans.iter().flat_map(|p| &p.extents).map(|(_, n)| n).sum();
        let mut done = 0;
        for (i, plan) in plans.iter().enumerate() {
            let l = s.layouts[i];
            let ns = &s.profile.namespaces[i];
            let mut v = Verifier {
                file,
                l: &l,
                bs: ns.block_size as usize,
                ms: ns.metadata_size as usize,
                generations: plan.generations.as_deref(),
            };
            for &(lba, n) in &plan.extents {
                v.extent(lba, n, &mut r.namespaces[i], &mut |k| {
                    done += k;
                    progress(done, total)
                })?;
            }
        }
        for ns in r.namespaces.clone() {
            if ns.damaged_total > 0 {
                let msg = damage_message(ns.nsid, "data", ns.damaged_total, &ns.damaged_blocks);
                r.problem("data", Some(ns.nsid), msg);
            }
            if ns.damaged_metadata_total > 0 {
                let (n, listed) = (ns.damaged_metadata_total, &ns.damaged_metadata);
                r.problem(
                    "metadata",
                    Some(ns.nsid),
                    damage_message(ns.nsid, "metadata", n, listed),
                );
            }
        }
    }
    Ok(r)
}

/// "namespace 1: 2 blocks fail their data checksum (...): 5, 9".
fn damage_message(nsid: u32, what: &str, total: u64, listed: &[u64]) -> String {
    let shown: Vec<String> = listed.iter().take(16).map(u64::to_string).collect();
    let more = if total > 16 { ", ..." } else { "" };
    let (subject, them) = match total {
        1 => ("1 block fails its".to_string(), "it"),
        n => (format!("{n} blocks fail their"), "them"),
    };
    let reads = match what {
        "metadata" => format!("reads of {them} with metadata fail"),
        _ => format!("reads of {them} fail"),
    };
    format!(
        "namespace {nsid}: {subject} {what} checksum ({reads} with Unrecovered Read Error): {}{more}",
        shown.join(", ")
    )
}

/// The zone state of one namespace (problems go to `r`), and what of its
/// data can be read back.
#[allow(clippy::too_many_arguments)]
fn namespace_state(
    file: &File,
    nsid: u32,
    l: &NamespaceLayout,
    ns: &NamespaceProfile,
    profile: &Profile,
    r: &mut CheckReport,
    version: u32,
    gens: bool,
) -> std::io::Result<(NamespaceReport, Readable)> {
    let mut report = NamespaceReport { nsid, ..NamespaceReport::default() };
    let nothing = Readable { extents: Vec::new(), generations: None };
    if ns.kind == NamespaceKind::Conventional {
        report.readable_blocks = ns.capacity_blocks();
        let all = Readable { extents: vec![(0, ns.capacity_blocks())], generations: None };
        return Ok((report, all));
    }
    report.zoned = true;
    let a = assess(file, l, ns, version, gens)?;
    report.slots = a
        .slots
        .iter()
        .map(|s| match s {
            Slot::Valid(seq, _) => format!("valid (sequence {seq})"),
            Slot::Blank => "never written".to_string(),
            Slot::Damaged(w, _) => w.clone(),
        })
        .collect();
    let Some((seq, payload)) = a.choice.newest.clone() else {
        for t in &a.trouble {
            r.problem("slot", Some(nsid), format!("namespace {nsid}: {t}"));
        }
        if version == VERSION_LEGACY && a.choice.damaged.is_empty() {
            return Ok((report, nothing));
        }
        r.problem("zone-state", Some(nsid), no_valid_slot(nsid, &a.choice.all));
        return Ok((report, nothing));
    };
    report.sequence = Some(seq);
    let payload = report_trouble(&a, nsid, seq, payload, &mut report, r);
    if payload.is_empty() {
        return Ok((report, nothing));
    }
    let g = crate::zone_geometry(ns);
    let zones = match Zones::decode_durable(g.clone(), &payload) {
        Ok(z) => z,
        Err(e) => {
            let msg = format!(
                "namespace {nsid}: the zone state of sequence {seq} does not decode: {e} ({} \
                 profile)",
                profile.name
            );
            r.problem("zone-state", Some(nsid), msg);
            return Ok((report, nothing));
        }
    };
    let extents: Vec<(u64, u64)> = (0..g.zones)
        .filter_map(|z| zones.zone_info(z))
        .map(|zi| (zi.start, zi.written_extent - zi.start))
        .filter(|&(_, n)| n > 0)
        .collect();
    report.readable_blocks = extents.iter().map(|(_, n)| n).sum();
    let generations = Some(Arc::clone(zones.generations()));
    Ok((report, Readable { extents, generations }))
}

/// Reports why a namespace's slots cannot be trusted and what the data
/// proves; returns the zone state to verify the data against (the rebuilt
/// one when there is one).
fn report_trouble(
    a: &Assessment,
    nsid: u32,
    seq: u64,
    payload: Vec<u8>,
    report: &mut NamespaceReport,
    r: &mut CheckReport,
) -> Vec<u8> {
    let Some(recovery) = &a.recovery else { return payload };
    let read_only = "the image opens read-only";
    match recovery {
        Ok(rec) => {
            let lossless = rec.unaccounted_total == 0;
            let proves = match rec.changes.is_empty() {
                true => format!("the data proves nothing beyond sequence {seq}"),
                false => format!("the data proves a newer zone state than sequence {seq}"),
            };
            for t in &a.trouble {
                let msg = format!(
                    "namespace {nsid}: {t}; {proves}; {read_only}{}",
                    if lossless { "; --repair rewrites the slot" } else { "" }
                );
                match lossless {
                    true => r.repairable("slot", Some(nsid), msg),
                    false => r.problem("slot", Some(nsid), msg),
                }
            }
            if !rec.changes.is_empty() {
                let zones: Vec<String> = rec.changes.iter().map(ZoneChange::describe).collect();
                let msg = format!(
                    "namespace {nsid}: zones that differ from sequence {seq}, as their data \
                     proves: {}; --repair restores them",
                    zones.join(", ")
                );
                r.repairable("zones", Some(nsid), msg);
            }
            if !lossless {
                let listed: Vec<String> =
                    rec.unaccounted.iter().map(|(z, lba)| format!("{lba} (zone {z})")).collect();
                let more = if rec.unaccounted_total > listed.len() as u64 { ", ..." } else { "" };
                let msg = format!(
                    "namespace {nsid}: {} blocks beyond the write pointers the data proves hold \
                     data no checksum accounts for; whatever they held is lost: {}{more}",
                    rec.unaccounted_total,
                    listed.join(", ")
                );
                r.problem("lost", Some(nsid), msg);
            }
            report.changed_zones = rec.changes.clone();
            report.unaccounted_blocks = rec.unaccounted_total;
            rec.payload.clone()
        }
        Err(why) => {
            // A damaged slot that claims no newer record loses nothing.
            let stale_only = a.only_older_damaged();
            for t in &a.trouble {
                let msg = match stale_only {
                    true => format!(
                        "namespace {nsid}: {t}; it held an older record than sequence {seq}; \
                         {read_only}; --repair rewrites it"
                    ),
                    false => format!(
                        "namespace {nsid}: {t}; {why}: the zone state newer than sequence {seq} \
                         is lost; {read_only}"
                    ),
                };
                match stale_only {
                    true => r.repairable("slot", Some(nsid), msg),
                    false => r.problem("slot", Some(nsid), msg),
                }
            }
            payload
        }
    }
}

/// Blocks read at a time.
const CHUNK_BLOCKS: u64 = 256;

/// Reads blocks, their metadata and their checksums.
struct Verifier<'a> {
    file: &'a File,
    l: &'a NamespaceLayout,
    bs: usize,
    ms: usize,
    generations: Option<&'a Generations>,
}

impl Verifier<'_> {
    fn generation(&self, lba: u64) -> u16 {
        self.generations.map_or(0, |g| g.of_lba(lba))
    }

    /// `n` entries of the checksum table at `table` from block `lba`.
    fn entries(&self, table: u64, lba: u64, n: u64) -> std::io::Result<Vec<u32>> {
        let mut raw = vec![0u8; (n * CHECKSUM_BYTES) as usize];
        let got = read_up_to(self.file, &mut raw, table + lba * CHECKSUM_BYTES)?;
        raw[got..].fill(0);
        Ok(raw.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().expect("4"))).collect())
    }

    /// Verifies blocks `lba..lba + n` (and their metadata) against their
    /// checksums.
    fn extent(
        &mut self,
        lba: u64,
        n: u64,
        ns: &mut NamespaceReport,
        progress: &mut dyn FnMut(u64),
    ) -> std::io::Result<()> {
        let Some(sums_at) = self.l.checksum_offset else { return Ok(()) };
        let mut data = vec![0u8; CHUNK_BLOCKS as usize * self.bs];
        let mut meta = vec![0u8; CHUNK_BLOCKS as usize * self.ms];
        let mut at = lba;
        while at < lba + n {
            let k = CHUNK_BLOCKS.min(lba + n - at);
            let d = &mut data[..k as usize * self.bs];
            let got = read_up_to(self.file, d, self.l.data_offset + at * self.bs as u64)?;
            d[got..].fill(0);
            let sums = self.entries(sums_at, at, k)?;
            for (i, &entry) in sums.iter().enumerate() {
                let b = at + i as u64;
                if entry == PENDING {
                    ns.unverified_blocks += 1;
                    continue;
                }
                ns.checked_blocks += 1;
                let block = &d[i * self.bs..(i + 1) * self.bs];
                if !generation_matches(b, self.generation(b), block, entry) {
                    ns.damaged_total += 1;
                    if ns.damaged_blocks.len() < LISTED_BLOCKS {
                        ns.damaged_blocks.push(b);
                    }
                }
            }
            if let (Some(md_at), true) = (self.l.metadata_checksum_offset, self.ms > 0) {
                let m = &mut meta[..k as usize * self.ms];
                let got = read_up_to(self.file, m, self.l.metadata_offset + at * self.ms as u64)?;
                m[got..].fill(0);
                for (i, &entry) in self.entries(md_at, at, k)?.iter().enumerate() {
                    let b = at + i as u64;
                    let unit = &m[i * self.ms..(i + 1) * self.ms];
                    if !generation_matches(b, self.generation(b), unit, entry) {
                        ns.damaged_metadata_total += 1;
                        if ns.damaged_metadata.len() < LISTED_BLOCKS {
                            ns.damaged_metadata.push(b);
                        }
                    }
                }
            }
            progress(k);
            at += k;
        }
        Ok(())
    }
}

/// Repairs what `report` found that can be repaired; returns what was done
/// and what was lost, in words, and whether anything was lost.
fn fix(file: &File, report: &CheckReport) -> std::io::Result<(Vec<String>, bool)> {
    let mut done = Vec::new();
    let mut lost = report.problems.iter().any(|p| !p.repairable);
    let s = match read_structure(file) {
        Ok(s) => s,
        Err(e) => {
            done.push(format!("cannot repair: {} (nothing else can be read)", e.why));
            return Ok((done, true));
        }
    };
    let gens = s.superblock.generations();
    let version = s.superblock.version;
    let end = image_end(&s.layouts);
    if report.length < end {
        extend(file, report.length, end, &s, &mut done)?;
    }
    let mut rebuilt = Vec::new();
    for (i, (l, ns)) in s.layouts.iter().zip(&s.profile.namespaces).enumerate() {
        let nsid = i as u32 + 1;
        if ns.kind != NamespaceKind::Zoned {
            continue;
        }
        let a = assess(file, l, ns, version, gens)?;
        lost |= fix_slots(file, nsid, l, &a, version, &mut done)?;
        let no_state =
            report.problems.iter().any(|p| p.kind == "zone-state" && p.nsid == Some(nsid));
        if no_state && rebuild(file, nsid, l, ns, gens, &mut done)? {
            rebuilt.push(nsid);
        }
    }
    for (i, (l, ns)) in s.layouts.iter().zip(&s.profile.namespaces).enumerate() {
        let pending = report.namespaces.get(i).map_or(0, |n| n.unverified_blocks);
        if pending > 0 {
            let generations = match ns.kind {
                NamespaceKind::Zoned => current_generations(file, l, ns, version, gens)?,
                NamespaceKind::Conventional => None,
            };
            settle_pending(file, i as u32 + 1, l, ns, generations.as_deref(), &mut done)?;
        }
    }
    for p in &report.problems {
        match p.kind {
            "data" | "metadata" => done.push(format!(
                "not repaired: {} (it cannot be brought back; rewriting the blocks, or \
                 resetting their zones, clears the errors)",
                p.message
            )),
            "zone-state" if !p.nsid.is_some_and(|n| rebuilt.contains(&n)) => {
                done.push(format!("not repaired: {}", p.message))
            }
            _ => {}
        }
    }
    Ok((done, lost))
}

/// The write generations of a zoned namespace's zones per the state it
/// opens with (none when it has none).
fn current_generations(
    file: &File,
    l: &NamespaceLayout,
    ns: &NamespaceProfile,
    version: u32,
    gens: bool,
) -> std::io::Result<Option<Arc<Generations>>> {
    let a = assess(file, l, ns, version, gens)?;
    let payload = match (&a.recovery, &a.choice.newest) {
        (Some(Ok(rec)), _) => rec.payload.clone(),
        (_, Some((_, p))) => p.clone(),
        _ => return Ok(None),
    };
    let g = crate::zone_geometry(ns);
    Ok(Zones::decode_durable(g, &payload).ok().map(|z| Arc::clone(z.generations())))
}

/// Checksums the blocks (and metadata) of a namespace whose last write was
/// interrupted (entry [`PENDING`]) as they read now.
fn settle_pending(
    file: &File,
    nsid: u32,
    l: &NamespaceLayout,
    ns: &NamespaceProfile,
    generations: Option<&Generations>,
    done: &mut Vec<String>,
) -> std::io::Result<()> {
    let Some(sums_at) = l.checksum_offset else { return Ok(()) };
    let bs = ns.block_size as usize;
    let ms = ns.metadata_size as usize;
    let tables = [(sums_at, l.data_offset, bs)]
        .into_iter()
        .chain(l.metadata_checksum_offset.filter(|_| ms > 0).map(|m| (m, l.metadata_offset, ms)));
    let mut settled = 0u64;
    let blocks = ns.capacity_blocks();
    for (table, region, unit) in tables {
        let mut entries = vec![0u8; (CHUNK_BLOCKS * CHECKSUM_BYTES) as usize];
        let mut block = vec![0u8; unit];
        let mut at = 0;
        while at < blocks {
            let k = CHUNK_BLOCKS.min(blocks - at);
            let e = &mut entries[..(k * CHECKSUM_BYTES) as usize];
            let got = read_up_to(file, e, table + at * CHECKSUM_BYTES)?;
            e[got..].fill(0);
            for i in 0..k {
                let j = (i * CHECKSUM_BYTES) as usize;
                if u32::from_le_bytes(e[j..j + 4].try_into().expect("4 bytes")) == PENDING {
                    let lba = at + i;
                    let got = read_up_to(file, &mut block, region + lba * unit as u64)?;
                    block[got..].fill(0);
                    let g = generations.map_or(0, |g| g.of_lba(lba));
                    let sum = generation_checksum(lba, g, &block).to_le_bytes();
                    file.write_all_at(&sum, table + lba * CHECKSUM_BYTES)?;
                    if region == l.data_offset {
                        settled += 1;
                    }
                }
            }
            at += k;
        }
    }
    done.push(format!(
        "namespace {nsid}: {settled} blocks whose last write was interrupted are checksummed as \
         they read now (their old or their new data)"
    ));
    Ok(())
}

/// Rebuilds the zone state of a namespace with no valid slot from its data
/// checksums: each zone's write pointer goes after its last block with a
/// checksum, in the generation its first block was written in. Returns
/// whether it did (it needs data checksums, and no more partly written
/// zones than Max Active Resources).
fn rebuild(
    file: &File,
    nsid: u32,
    l: &NamespaceLayout,
    ns: &NamespaceProfile,
    gens: bool,
    done: &mut Vec<String>,
) -> std::io::Result<bool> {
    let Some(sums_at) = l.checksum_offset else {
        done.push(format!(
            "not repaired: namespace {nsid} has no valid zone-state slot and the image keeps no \
             data checksums to rebuild it from"
        ));
        return Ok(false);
    };
    let g = crate::zone_geometry(ns);
    let mut written = Vec::with_capacity(g.zones as usize);
    let mut generations = Vec::with_capacity(g.zones as usize);
    let mut entries = vec![0u8; (g.zone_capacity * CHECKSUM_BYTES) as usize];
    let mut block = vec![0u8; ns.block_size as usize];
    for z in 0..g.zones as u64 {
        let start = z * g.zone_size;
        let got = read_up_to(file, &mut entries, sums_at + start * CHECKSUM_BYTES)?;
        entries[got..].fill(0);
        let last = entries.chunks_exact(4).rposition(|e| e != [0; 4]);
        written.push(last.map_or(0, |i| i as u64 + 1));
        // The generation the zone's first block was written in.
        let first = u32::from_le_bytes(entries[0..4].try_into().expect("4 bytes"));
        let mut generation = 0;
        if gens && last.is_some() {
            let at = l.data_offset + start * block.len() as u64;
            let got = read_up_to(file, &mut block, at)?;
            block[got..].fill(0);
            generation = generation_of(start, &block, first).unwrap_or(0);
        }
        generations.push(generation);
    }
    let zones = match Zones::rebuilt_in(g, &written, &generations) {
        Ok(z) => z,
        Err(e) => {
            done.push(format!(
                "not repaired: namespace {nsid} has no valid zone-state slot, and its data \
                 checksums do not make a zone state: {e}"
            ));
            return Ok(false);
        }
    };
    let payload = zones.encode_durable();
    // Both slots, sequence 2 in A and 3 in B (slots go by parity).
    for (slot, seq) in [(0u64, 2u64), (1, 3)] {
        let record = slot_record(seq, &payload, l.slot_bytes);
        file.write_all_at(&record, l.zone_state_offset + slot * l.slot_bytes)?;
    }
    let used = written.iter().filter(|&&w| w > 0).count();
    let blocks: u64 = written.iter().sum();
    done.push(format!(
        "namespace {nsid}: no valid zone state was left; rebuilt from the data checksums: {used} \
         zones hold {blocks} blocks, each zone's write pointer after its last block with a \
         checksum (Closed, or Full at capacity); lost: zone attributes and descriptor \
         extensions, read-only, finished and offline states, Write Zeroes at the end of a zone; writes that \
         were not yet durable count as written"
    ));
    Ok(true)
}

/// Extends a file cut short at `length` back to `end`; written blocks whose
/// data was cut off and whose checksum entry is gone are marked lost.
fn extend(
    file: &File,
    length: u64,
    end: u64,
    s: &super::Structure,
    done: &mut Vec<String>,
) -> std::io::Result<()> {
    file.set_len(end)?;
    done.push(format!(
        "extended the file from {length} to {end} bytes: whatever lay beyond {length} is lost"
    ));
    for (i, (l, ns)) in s.layouts.iter().zip(&s.profile.namespaces).enumerate() {
        let nsid = i as u32 + 1;
        let bs = ns.block_size as u64;
        let first_cut = if length <= l.data_offset { 0 } else { (length - l.data_offset) / bs };
        if l.data_end <= length || first_cut >= ns.capacity_blocks() {
            continue;
        }
        let cut = (first_cut, ns.capacity_blocks());
        let readable: Vec<(u64, u64)> = match ns.kind {
            NamespaceKind::Conventional => vec![cut],
            NamespaceKind::Zoned => written_extents(file, l, ns, s.superblock.version)?,
        };
        let mut marked = 0u64;
        let mut lost = 0u64;
        for (lba, n) in readable {
            let (a, b) = (lba.max(cut.0), (lba + n).min(cut.1));
            for block in a..b {
                lost += 1;
                let Some(sums) = l.checksum_offset else { continue };
                let at = sums + block * CHECKSUM_BYTES;
                let mut e = [0u8; 4];
                let got = read_up_to(file, &mut e, at)?;
                if got < 4 || u32::from_le_bytes(e) == NO_CHECKSUM {
                    // Zoned: a written block; it must not read as zeros.
                    if ns.kind == NamespaceKind::Zoned {
                        file.write_all_at(&LOST.to_le_bytes(), at)?;
                        marked += 1;
                    }
                }
            }
        }
        if lost > 0 {
            let what = match ns.kind {
                NamespaceKind::Zoned => format!(
                    "namespace {nsid}: the data of {lost} written blocks from LBA {} on was cut \
                     off and is lost; reads of them fail with Unrecovered Read Error ({marked} \
                     had lost their checksum too and are marked lost)",
                    cut.0
                ),
                NamespaceKind::Conventional => format!(
                    "namespace {nsid}: blocks {}..{} were cut off: those that held data are \
                     lost; those whose checksum survived fail with Unrecovered Read Error, the \
                     others now read as zeros",
                    cut.0, cut.1
                ),
            };
            done.push(what);
        }
    }
    Ok(())
}

/// The written extents of a zoned namespace per the zone state it opens
/// with (none when it has none).
fn written_extents(
    file: &File,
    l: &NamespaceLayout,
    ns: &NamespaceProfile,
    version: u32,
) -> std::io::Result<Vec<(u64, u64)>> {
    let gens = read_structure(file).is_ok_and(|s| s.superblock.generations());
    let a = assess(file, l, ns, version, gens)?;
    let payload = match (&a.recovery, &a.choice.newest) {
        (Some(Ok(rec)), _) => rec.payload.clone(),
        (_, Some((_, p))) => p.clone(),
        _ => return Ok(Vec::new()),
    };
    let g = crate::zone_geometry(ns);
    let Ok(zones) = Zones::decode_durable(g.clone(), &payload) else { return Ok(Vec::new()) };
    Ok((0..g.zones)
        .filter_map(|z| zones.zone_info(z))
        .map(|zi| (zi.start, zi.written_extent - zi.start))
        .filter(|&(_, n)| n > 0)
        .collect())
}

/// Writes the zone state a namespace in trouble should have as its next
/// record: the state rebuilt from the data when there is one, else the
/// newest valid record. It goes to the slot after the newest valid one
/// (slots alternate by sequence number), which is never touched. Returns
/// whether zone state was lost.
fn fix_slots(
    file: &File,
    nsid: u32,
    l: &NamespaceLayout,
    a: &Assessment,
    version: u32,
    done: &mut Vec<String>,
) -> std::io::Result<bool> {
    let Some((seq, payload)) = a.choice.newest.clone() else { return Ok(false) };
    if a.trouble.is_empty() || version == VERSION_LEGACY && a.choice.damaged.is_empty() {
        return Ok(false);
    }
    // The other slot than the newest valid record's, whatever its parity
    // (a slot copied into the wrong place must not lead to overwriting
    // the one record left), with the next sequence number of its parity.
    let newest = a.slots.iter().position(|s| matches!(s, Slot::Valid(q, _) if *q == seq));
    let slot = 1 - newest.unwrap_or(0) as u64;
    let next = if (seq + 1) % 2 == slot { seq + 1 } else { seq + 2 };
    let trouble = a.trouble.join(", ");
    let (record, what, lost) = match &a.recovery {
        Some(Ok(rec)) => {
            let changes: Vec<String> = rec.changes.iter().map(ZoneChange::describe).collect();
            let what = match changes.is_empty() {
                true => format!("the zone state of sequence {seq} (the data proves nothing newer)"),
                false => format!(
                    "the zone state of sequence {seq} with what the data proves: {}",
                    changes.join(", ")
                ),
            };
            let lost = match rec.unaccounted_total {
                0 => String::new(),
                n => format!(
                    "; lost: {n} blocks beyond the rebuilt write pointers that no checksum \
                     accounts for"
                ),
            };
            (rec.payload.clone(), what, lost)
        }
        _ => {
            let lost = match a.choice.lost_newer {
                true => format!(
                    "; the newer zone state the damaged slot held is lost (zones keep what \
                     sequence {seq} recorded: writes made durable after it are beyond their write \
                     pointers)"
                ),
                false => String::new(),
            };
            (payload, format!("the zone state of sequence {seq}"), lost)
        }
    };
    let bytes = slot_record(next, &record, l.slot_bytes);
    file.write_all_at(&bytes, l.zone_state_offset + slot * l.slot_bytes)?;
    if next == seq + 2 {
        // The newest record sat in the other parity's slot: it gets the
        // same state as sequence seq + 1, so the two are neighbours again.
        let bytes = slot_record(seq + 1, &record, l.slot_bytes);
        file.write_all_at(&bytes, l.zone_state_offset + (1 - slot) * l.slot_bytes)?;
    }
    done.push(format!(
        "namespace {nsid}: {trouble}: slot {} rewritten with {what} (now sequence {next}){lost}",
        SLOT_NAMES[slot as usize]
    ));
    Ok(!lost.is_empty())
}

#[cfg(test)]
mod tests {
    use super::super::format::{layout_for, Features, Superblock, SUPERBLOCK};
    use super::super::DeviceImage;
    use super::*;
    use crate::harness::Harness;
    use crate::host::{HostMemory, ProcessMemory};
    use crate::{Emulator, MediaChoice};
    use zns_spec::SubmissionEntry;

    /// A `tiny` image with 16 blocks written to namespace 1 (zoned) and 8
    /// to namespace 2 (conventional, at LBA 100), flushed.
    fn written() -> (tempfile::TempDir, std::path::PathBuf, Vec<NamespaceLayout>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dev.img");
        let img = DeviceImage::create(&path, &Profile::by_name("tiny").unwrap()).unwrap();
        let layouts = img.layouts.clone();
        drop(img);
        let memory = ProcessMemory::new();
        let ctrl = Emulator::open_image(&path)
            .unwrap()
            .media(MediaChoice::Image(path.clone()))
            .build(memory.clone())
            .unwrap();
        let mut h = Harness::start(ctrl, memory, 8).unwrap();
        let buf = h.buffer(4096);
        for (nsid, lbas) in [(1u32, 0..16u64), (2, 100..108)] {
            for lba in lbas {
                h.memory.write(buf.addr(), &[lba as u8 + 1; 4096]).unwrap();
                let mut w = SubmissionEntry::new(0x01, nsid);
                w.set_cdw10_11(lba);
                w.prp1 = buf.addr();
                assert!(h.io(w).status().is_success());
            }
        }
        assert!(h.io(SubmissionEntry::new(0x00, 0xFFFF_FFFF)).status().is_success());
        (dir, path, layouts)
    }

    fn run(path: &Path, repair: bool) -> CheckReport {
        check(path, repair, &mut |_, _| {}).unwrap()
    }

    fn poke(path: &Path, at: u64, f: impl FnOnce(u8) -> u8) {
        let file = OpenOptions::new().read(true).write(true).open(path).unwrap();
        let mut b = [0u8; 1];
        file.read_exact_at(&mut b, at).unwrap();
        file.write_all_at(&[f(b[0])], at).unwrap();
    }

    fn kinds(r: &CheckReport) -> Vec<&'static str> {
        r.problems.iter().map(|p| p.kind).collect()
    }

    #[test]
    fn a_clean_image_is_clean_and_every_readable_block_is_verified() {
        let (_d, path, _) = written();
        let r = run(&path, false);
        assert!(r.is_ok(), "{:?}", r.problems);
        assert_eq!((r.version, r.data_checksums), (Some(3), true));
        assert_eq!(r.length, r.expected_length.unwrap());
        let ns1 = &r.namespaces[0];
        assert_eq!((ns1.readable_blocks, ns1.checked_blocks), (16, 16));
        assert!(ns1.sequence.is_some_and(|s| s > 1));
        assert_eq!(r.namespaces[1].checked_blocks, 1024);
        // A repair of a clean image does nothing.
        let again = run(&path, true);
        assert!(again.is_ok() && again.repairs.is_empty());
    }

    #[test]
    fn interrupted_writes_are_unverified_not_damage_and_a_repair_settles_them() {
        let (_d, path, l) = written();
        let sums = l[0].checksum_offset.unwrap();
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        f.write_all_at(&PENDING.to_le_bytes(), sums + 4 * 3).unwrap();
        drop(f);
        let r = run(&path, false);
        assert!(r.is_ok(), "{:?}", r.problems);
        assert_eq!(r.namespaces[0].unverified_blocks, 1);
        let r = run(&path, true);
        assert!(r.is_ok() && r.namespaces[0].unverified_blocks == 0, "{r:?}");
        assert!(
            r.repairs[0].contains("1 blocks whose last write was interrupted"),
            "{:?}",
            r.repairs
        );
    }

    #[test]
    fn flipped_data_bits_are_damaged_blocks_and_stay_reported_after_a_repair() {
        let (_d, path, l) = written();
        poke(&path, l[0].data_offset + 5 * 4096 + 1, |b| b ^ 1);
        poke(&path, l[1].data_offset + 103 * 4096, |b| b ^ 0x80);
        // Data where none was written is damage too.
        poke(&path, l[1].data_offset + 900 * 4096, |_| 9);
        let r = run(&path, false);
        assert_eq!(kinds(&r), ["data", "data"]);
        assert_eq!(r.namespaces[0].damaged_blocks, [5]);
        assert_eq!(r.namespaces[1].damaged_blocks, [103, 900]);
        assert!(r.problems[0].message.contains("namespace 1: 1 block fails"), "{:?}", r.problems);
        let r = run(&path, true);
        assert!(!r.is_ok());
        assert!(r.repairs.iter().any(|x| x.starts_with("not repaired")), "{:?}", r.repairs);
    }

    #[test]
    fn a_damaged_slot_is_reported_and_repaired_from_the_other() {
        let (_d, path, l) = written();
        let seq = run(&path, false).namespaces[0].sequence.unwrap();
        let before = DeviceImage::open(&path).unwrap().load_zone_state(1).unwrap().payload;
        // Damage the newest slot: the older one is the base, and the data
        // proves the 16 blocks written after it.
        let newest = l[0].zone_state_offset + (seq % 2) * l[0].slot_bytes;
        poke(&path, newest + 40, |b| b ^ 4);
        let r = run(&path, false);
        assert_eq!(kinds(&r), ["slot", "zones"], "{:?}", r.problems);
        assert_eq!(r.verdict(), Verdict::Repairable);
        assert!(r.problems[0].message.contains("opens read-only"), "{}", r.problems[0].message);
        let want = "zone 0: 16 blocks written (it recorded 0); --repair restores them";
        assert!(r.problems[1].message.contains(want), "{}", r.problems[1].message);
        assert_eq!(r.namespaces[0].sequence, Some(seq - 1));
        assert_eq!((r.namespaces[0].readable_blocks, r.namespaces[0].checked_blocks), (16, 16));
        // Opening changes nothing: the damaged slot is still there.
        let s = DeviceImage::open(&path).unwrap().load_zone_state(1).unwrap();
        assert!(s.read_only.is_some() && s.payload == before, "{s:?}");
        assert_eq!(kinds(&run(&path, false)), ["slot", "zones"]);
        let r = run(&path, true);
        assert!(r.is_ok(), "{:?}", r.problems);
        assert_eq!(r.verdict(), Verdict::Clean);
        assert!(
            r.repairs[0].contains("rewritten with the zone state of sequence"),
            "{:?}",
            r.repairs
        );
        assert_eq!(r.namespaces[0].sequence, Some(seq));
        assert!(
            r.namespaces[0].slots.iter().all(|s| s.starts_with("valid")),
            "{:?}",
            r.namespaces[0].slots
        );
        let s = DeviceImage::open(&path).unwrap().load_zone_state(1).unwrap();
        assert!(s.read_only.is_none() && s.payload == before, "{s:?}");
    }

    #[test]
    fn no_valid_slot_is_reported_and_rebuilt_from_the_data_checksums() {
        let (_d, path, l) = written();
        let before = DeviceImage::open(&path).unwrap().load_zone_state(1).unwrap().payload.unwrap();
        poke(&path, l[0].zone_state_offset + 100, |b| b ^ 1);
        poke(&path, l[0].zone_state_offset + l[0].slot_bytes + 100, |b| b ^ 1);
        assert_eq!(kinds(&run(&path, false)), ["slot", "slot", "zone-state"]);
        let r = run(&path, true);
        assert!(r.is_ok(), "{:?}", r.problems);
        let want = "rebuilt from the data checksums: 1 zones hold 16 blocks";
        assert!(r.repairs.iter().any(|x| x.contains(want)), "{:?}", r.repairs);
        assert_eq!(r.namespaces[0].checked_blocks, 16);
        // The rebuilt state is the one that was lost (zone 0 Closed at 16).
        let after = DeviceImage::open(&path).unwrap().load_zone_state(1).unwrap().payload.unwrap();
        assert_eq!(after, before);
    }

    #[test]
    fn without_data_checksums_no_valid_slot_is_not_repaired() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v2.img");
        let l = super::super::tests::old_image(&path, &Profile::by_name("tiny").unwrap(), 2);
        poke(&path, l[0].zone_state_offset + l[0].slot_bytes + 100, |b| b ^ 1);
        let r = run(&path, true);
        assert_eq!(kinds(&r), ["slot", "zone-state"]);
        assert!(r.repairs.iter().any(|x| x.contains("keeps no data checksums")), "{:?}", r.repairs);
    }

    #[test]
    fn truncation_is_repaired_by_extending_and_what_was_cut_reads_as_lost() {
        // Cut inside namespace 1's data: its blocks 8.. are gone, their
        // checksums (before the data) remain; namespace 2 is gone entirely.
        let (_d, path, l) = written();
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(l[0].data_offset + 8 * 4096).unwrap();
        drop(f);
        let r = run(&path, false);
        assert_eq!(kinds(&r)[0], "length");
        assert!(r.problems[0].message.contains("truncated"), "{}", r.problems[0].message);
        let r = run(&path, true);
        assert_eq!(r.length, r.expected_length.unwrap());
        assert_eq!(r.namespaces[0].damaged_blocks, (8..16).collect::<Vec<_>>());
        assert!(r.repairs[0].starts_with("extended the file"), "{:?}", r.repairs);
        assert!(r.repairs.iter().any(|x| x.contains("namespace 2: blocks 0..1024 were cut off")));
        // Cut before namespace 1's checksum region: its written blocks are
        // marked lost, never zeros that pass.
        let (_d, path, l) = written();
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(l[0].checksum_offset.unwrap()).unwrap();
        drop(f);
        let r = run(&path, true);
        assert_eq!(r.namespaces[0].damaged_total, 16);
        assert!(
            r.repairs.iter().any(|x| x.contains("16 had lost their checksum")),
            "{:?}",
            r.repairs
        );
    }

    #[test]
    fn damaged_structures_are_reported_and_not_repaired() {
        let (_d, path, _) = written();
        poke(&path, 30, |b| b ^ 1);
        let r = run(&path, true);
        assert_eq!(kinds(&r), ["superblock"]);
        assert!(r.repairs[0].starts_with("cannot repair"), "{:?}", r.repairs);
        let (_d, path, _) = written();
        poke(&path, SUPERBLOCK + 10, |b| b ^ 1);
        assert_eq!(kinds(&run(&path, false)), ["profile"]);
        // A layout table that disagrees with the profile, checksum valid.
        let (_d, path, _) = written();
        let profile = Profile::by_name("tiny").unwrap();
        let mut other = profile.clone();
        other.namespaces[0].zones = 8;
        let sb = Superblock::encode_new(
            &profile.to_toml(),
            &layout_for(&other, Features::new_image(true)),
        );
        OpenOptions::new().write(true).open(&path).unwrap().write_all_at(&sb, 0).unwrap();
        let r = run(&path, false);
        assert_eq!(kinds(&r), ["layout"]);
        assert!(
            r.problems[0].message.contains("layout table does not match"),
            "{}",
            r.problems[0].message
        );
    }
}
