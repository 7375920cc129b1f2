//! Verifying a device image end to end, and repairing it on request.
//!
//! [`check`] reads everything the image keeps: the superblock, the profile
//! text, the layout table, the file's length, both zone-state slots of
//! every zoned namespace (and that the newest decodes), and the data of
//! every block that can be read back (every written block of a zoned
//! namespace, every block of a conventional one) against its checksum.
//! It changes nothing.
//!
//! With `repair`, it then keeps the newest valid state and says what was
//! lost: a file cut short is extended back to its layout (blocks whose data
//! was cut off and whose checksum is gone too are marked lost, so they read
//! as Unrecovered Read Error rather than zeros); a damaged zone-state slot
//! is rewritten with the newest valid record. What cannot be brought back
//! stays reported: damaged data (reads of those blocks keep failing until
//! they are rewritten), a namespace with no valid zone state, and damage to
//! the superblock, profile or layout table. Opening an image never repairs
//! anything.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::format::{image_end, NamespaceLayout, CHECKSUM_BYTES, VERSION_LEGACY};
use super::slot::{slot_record, Slot, SLOT_NAMES};
use super::{
    choose_slot, lock, no_valid_slot, read_structure, read_up_to, read_zone_slot, truncated,
    ImageError,
};
use crate::media::{block_checksum, block_matches, LOST, NO_CHECKSUM, PENDING};
use crate::profile::{NamespaceKind, NamespaceProfile, Profile};
use crate::zns::Zones;

/// Most damaged block numbers a report lists per namespace (all are counted).
pub const LISTED_BLOCKS: usize = 64;

/// One thing wrong with an image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// What part: `superblock`, `profile`, `layout`, `length`, `slot`,
    /// `zone-state` or `data`.
    pub kind: &'static str,
    /// The namespace it concerns, if one.
    pub nsid: Option<u32>,
    /// In words for the user.
    pub message: String,
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
}

impl CheckReport {
    /// True when nothing is wrong.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }

    fn problem(&mut self, kind: &'static str, nsid: Option<u32>, message: String) {
        self.problems.push(Problem { kind, nsid, message });
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
    let repairs = fix(&file, &report).map_err(io)?;
    file.sync_all().map_err(io)?;
    let mut after = inspect(&file, &p, progress).map_err(io)?;
    after.repairs = repairs;
    Ok(after)
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
    let end = image_end(&s.layouts);
    r.expected_length = Some(end);
    if r.length < end {
        r.problem("length", None, truncated(r.length, end, &s.profile));
    }
    let mut plans = Vec::new();
    for (i, (l, ns)) in s.layouts.iter().zip(&s.profile.namespaces).enumerate() {
        let nsid = i as u32 + 1;
        let (report, extents) =
            namespace_state(file, nsid, l, ns, &s.profile, &mut r, s.superblock.version)?;
        r.namespaces.push(report);
        plans.push(extents);
    }
    if r.data_checksums {
        let total: u64 = plans.iter().flatten().map(|(_, n)| n).sum();
        let mut done = 0;
        for (i, extents) in plans.iter().enumerate() {
            let l = s.layouts[i];
            let bs = s.profile.namespaces[i].block_size as usize;
            for &(lba, n) in extents {
                verify_extent(file, &l, bs, lba, n, &mut r.namespaces[i], &mut |k| {
                    done += k;
                    progress(done, total)
                })?;
            }
        }
        for ns in r.namespaces.clone() {
            if ns.damaged_total > 0 {
                let listed: Vec<String> =
                    ns.damaged_blocks.iter().take(16).map(u64::to_string).collect();
                let more = if ns.damaged_total > 16 { ", ..." } else { "" };
                r.problem(
                    "data",
                    Some(ns.nsid),
                    format!(
                        "namespace {}: {} data checksum (reads of {} fail with Unrecovered \
                         Read Error): {}{more}",
                        ns.nsid,
                        match ns.damaged_total {
                            1 => "1 block fails its".to_string(),
                            n => format!("{n} blocks fail their"),
                        },
                        if ns.damaged_total == 1 { "it" } else { "them" },
                        listed.join(", ")
                    ),
                );
            }
        }
    }
    Ok(r)
}

/// The zone state of one namespace (problems go to `r`), and the block
/// extents whose data can be read back.
fn namespace_state(
    file: &File,
    nsid: u32,
    l: &NamespaceLayout,
    ns: &NamespaceProfile,
    profile: &Profile,
    r: &mut CheckReport,
    version: u32,
) -> std::io::Result<(NamespaceReport, Vec<(u64, u64)>)> {
    let mut report = NamespaceReport { nsid, ..NamespaceReport::default() };
    if ns.kind == NamespaceKind::Conventional {
        report.readable_blocks = ns.capacity_blocks();
        return Ok((report, vec![(0, ns.capacity_blocks())]));
    }
    report.zoned = true;
    let slots = [0u64, 1].map(|k| {
        read_zone_slot(file, l, k, ns, version).unwrap_or_else(|e| {
            let why = match e.kind() {
                std::io::ErrorKind::UnexpectedEof => "is cut off by the truncation".to_string(),
                _ => format!("cannot be read: {e}"),
            };
            Slot::Damaged(why, 0)
        })
    });
    report.slots = slots
        .iter()
        .map(|s| match s {
            Slot::Valid(seq, _) => format!("valid (sequence {seq})"),
            Slot::Blank => "never written".to_string(),
            Slot::Damaged(w, _) => w.clone(),
        })
        .collect();
    let choice = choose_slot(&slots);
    for (i, s) in slots.iter().enumerate() {
        if let Slot::Damaged(w, _) = s {
            let lost = match (&choice.newest, choice.lost_newer) {
                (Some((seq, _)), true) => {
                    format!("; the zone state newer than sequence {seq} in it is lost")
                }
                (Some((seq, _)), false) => format!("; the other slot (sequence {seq}) is used"),
                (None, _) => String::new(),
            };
            let msg = format!("namespace {nsid}: zone-state slot {} {w}{lost}", SLOT_NAMES[i]);
            r.problem("slot", Some(nsid), msg);
        }
    }
    let Some((seq, payload)) = choice.newest else {
        if version == VERSION_LEGACY && choice.damaged.is_empty() {
            return Ok((report, Vec::new()));
        }
        r.problem("zone-state", Some(nsid), no_valid_slot(nsid, &choice.all));
        return Ok((report, Vec::new()));
    };
    report.sequence = Some(seq);
    if payload.is_empty() {
        return Ok((report, Vec::new()));
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
            return Ok((report, Vec::new()));
        }
    };
    let extents: Vec<(u64, u64)> = (0..g.zones)
        .filter_map(|z| zones.zone_info(z))
        .map(|zi| (zi.start, zi.written_extent - zi.start))
        .filter(|&(_, n)| n > 0)
        .collect();
    report.readable_blocks = extents.iter().map(|(_, n)| n).sum();
    Ok((report, extents))
}

/// Blocks read at a time.
const CHUNK_BLOCKS: u64 = 256;

/// Verifies blocks `lba..lba + n` against their checksums.
fn verify_extent(
    file: &File,
    l: &NamespaceLayout,
    bs: usize,
    lba: u64,
    n: u64,
    ns: &mut NamespaceReport,
    progress: &mut dyn FnMut(u64),
) -> std::io::Result<()> {
    let Some(sums_at) = l.checksum_offset else { return Ok(()) };
    let mut data = vec![0u8; CHUNK_BLOCKS as usize * bs];
    let mut sums = vec![0u8; CHUNK_BLOCKS as usize * CHECKSUM_BYTES as usize];
    let mut at = lba;
    while at < lba + n {
        let k = CHUNK_BLOCKS.min(lba + n - at);
        let d = &mut data[..k as usize * bs];
        let got = read_up_to(file, d, l.data_offset + at * bs as u64)?;
        d[got..].fill(0);
        let c = &mut sums[..(k * CHECKSUM_BYTES) as usize];
        let got = read_up_to(file, c, sums_at + at * CHECKSUM_BYTES)?;
        c[got..].fill(0);
        for i in 0..k as usize {
            let entry = u32::from_le_bytes(c[4 * i..4 * i + 4].try_into().expect("4 bytes"));
            if entry == PENDING {
                ns.unverified_blocks += 1;
                continue;
            }
            ns.checked_blocks += 1;
            if !block_matches(at + i as u64, &d[i * bs..(i + 1) * bs], entry) {
                ns.damaged_total += 1;
                if ns.damaged_blocks.len() < LISTED_BLOCKS {
                    ns.damaged_blocks.push(at + i as u64);
                }
            }
        }
        progress(k);
        at += k;
    }
    Ok(())
}

/// Repairs what `report` found that can be repaired; returns what was done
/// and what was lost, in words.
fn fix(file: &File, report: &CheckReport) -> std::io::Result<Vec<String>> {
    let mut done = Vec::new();
    let s = match read_structure(file) {
        Ok(s) => s,
        Err(e) => {
            done.push(format!("cannot repair: {} (nothing else can be read)", e.why));
            return Ok(done);
        }
    };
    let end = image_end(&s.layouts);
    if report.length < end {
        extend(file, report.length, end, &s, &mut done)?;
    }
    for (i, (l, ns)) in s.layouts.iter().zip(&s.profile.namespaces).enumerate() {
        let pending = report.namespaces.get(i).map_or(0, |n| n.unverified_blocks);
        if pending > 0 {
            settle_pending(file, i as u32 + 1, l, ns, &mut done)?;
        }
    }
    let mut rebuilt = Vec::new();
    for (i, (l, ns)) in s.layouts.iter().zip(&s.profile.namespaces).enumerate() {
        let nsid = i as u32 + 1;
        if ns.kind == NamespaceKind::Zoned {
            fix_slots(file, nsid, l, ns, s.superblock.version, &mut done)?;
            let no_state =
                report.problems.iter().any(|p| p.kind == "zone-state" && p.nsid == Some(nsid));
            if no_state && rebuild(file, nsid, l, ns, &mut done)? {
                rebuilt.push(nsid);
            }
        }
    }
    for p in &report.problems {
        match p.kind {
            "data" => done.push(format!(
                "not repaired: {} (their data cannot be brought back; rewriting the blocks, or \
                 resetting their zones, clears the errors)",
                p.message
            )),
            "zone-state" if !p.nsid.is_some_and(|n| rebuilt.contains(&n)) => {
                done.push(format!("not repaired: {}", p.message))
            }
            _ => {}
        }
    }
    Ok(done)
}

/// Checksums the blocks of a namespace whose last write was interrupted
/// (entry [`PENDING`]) as they read now.
fn settle_pending(
    file: &File,
    nsid: u32,
    l: &NamespaceLayout,
    ns: &NamespaceProfile,
    done: &mut Vec<String>,
) -> std::io::Result<()> {
    let Some(sums_at) = l.checksum_offset else { return Ok(()) };
    let bs = ns.block_size as usize;
    let mut entries = vec![0u8; (CHUNK_BLOCKS * CHECKSUM_BYTES) as usize];
    let mut block = vec![0u8; bs];
    let mut settled = 0u64;
    let blocks = ns.capacity_blocks();
    let mut at = 0;
    while at < blocks {
        let k = CHUNK_BLOCKS.min(blocks - at);
        let e = &mut entries[..(k * CHECKSUM_BYTES) as usize];
        let got = read_up_to(file, e, sums_at + at * CHECKSUM_BYTES)?;
        e[got..].fill(0);
        for i in 0..k {
            let j = (i * CHECKSUM_BYTES) as usize;
            if u32::from_le_bytes(e[j..j + 4].try_into().expect("4 bytes")) == PENDING {
                let lba = at + i;
                let got = read_up_to(file, &mut block, l.data_offset + lba * bs as u64)?;
                block[got..].fill(0);
                let sum = block_checksum(lba, &block).to_le_bytes();
                file.write_all_at(&sum, sums_at + lba * CHECKSUM_BYTES)?;
                settled += 1;
            }
        }
        at += k;
    }
    done.push(format!(
        "namespace {nsid}: {settled} blocks whose last write was interrupted are checksummed as \
         they read now (their old or their new data)"
    ));
    Ok(())
}

/// Rebuilds the zone state of a namespace with no valid slot from its data
/// checksums: each zone's write pointer goes after its last block with a
/// checksum. Returns whether it did (it needs data checksums, and no more
/// partly written zones than Max Active Resources).
fn rebuild(
    file: &File,
    nsid: u32,
    l: &NamespaceLayout,
    ns: &NamespaceProfile,
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
    let mut entries = vec![0u8; (g.zone_capacity * CHECKSUM_BYTES) as usize];
    for z in 0..g.zones as u64 {
        let got = read_up_to(file, &mut entries, sums_at + z * g.zone_size * CHECKSUM_BYTES)?;
        entries[got..].fill(0);
        let last = entries.chunks_exact(4).rposition(|e| e != [0; 4]);
        written.push(last.map_or(0, |i| i as u64 + 1));
    }
    let zones = match Zones::rebuilt(g, &written) {
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

/// The written extents of a zoned namespace per its newest valid zone
/// state (none when it has none).
fn written_extents(
    file: &File,
    l: &NamespaceLayout,
    ns: &NamespaceProfile,
    version: u32,
) -> std::io::Result<Vec<(u64, u64)>> {
    let slots = [0u64, 1].map(|k| read_zone_slot(file, l, k, ns, version).unwrap_or(Slot::Blank));
    let Some((_, payload)) = choose_slot(&slots).newest else { return Ok(Vec::new()) };
    let g = crate::zone_geometry(ns);
    let Ok(zones) = Zones::decode_durable(g.clone(), &payload) else { return Ok(Vec::new()) };
    Ok((0..g.zones)
        .filter_map(|z| zones.zone_info(z))
        .map(|zi| (zi.start, zi.written_extent - zi.start))
        .filter(|&(_, n)| n > 0)
        .collect())
}

/// Rewrites a damaged zone-state slot with the newest valid record (as the
/// next sequence number, in the slot that number belongs to).
fn fix_slots(
    file: &File,
    nsid: u32,
    l: &NamespaceLayout,
    ns: &NamespaceProfile,
    version: u32,
    done: &mut Vec<String>,
) -> std::io::Result<()> {
    let slots = [0u64, 1].map(|k| {
        read_zone_slot(file, l, k, ns, version).unwrap_or_else(|e| Slot::Damaged(e.to_string(), 0))
    });
    let choice = choose_slot(&slots);
    let Some((seq, payload)) = choice.newest else { return Ok(()) };
    if choice.damaged.is_empty() || version == VERSION_LEGACY {
        return Ok(());
    }
    // The damaged slot takes the next sequence number of its parity (slots
    // alternate by sequence number), so the valid one is never touched.
    let slot = slots.iter().position(|s| matches!(s, Slot::Damaged(..))).unwrap_or(0) as u64;
    let next = if (seq + 1) % 2 == slot { seq + 1 } else { seq + 2 };
    let record = slot_record(next, &payload, l.slot_bytes);
    file.write_all_at(&record, l.zone_state_offset + slot * l.slot_bytes)?;
    let lost = match choice.lost_newer {
        true => "; the newer zone state the damaged slot held is lost (zones keep what sequence \
                 {seq} recorded: writes made durable after it are beyond their write pointers)"
            .replace("{seq}", &seq.to_string()),
        false => String::new(),
    };
    done.push(format!(
        "namespace {nsid}: {}: slot {} rewritten with the zone state of sequence {seq} (now \
         sequence {next}){lost}",
        choice.damaged.join(", "),
        SLOT_NAMES[slot as usize]
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::format::{layout_for, Superblock, SUPERBLOCK};
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
        // Damage the newest slot: its newer state is lost, the older used.
        let newest = l[0].zone_state_offset + (seq % 2) * l[0].slot_bytes;
        poke(&path, newest + 40, |b| b ^ 4);
        let r = run(&path, false);
        assert_eq!(kinds(&r), ["slot"]);
        assert!(r.problems[0].message.contains("newer than sequence"), "{}", r.problems[0].message);
        assert_eq!(r.namespaces[0].sequence, Some(seq - 1));
        let r = run(&path, true);
        assert!(r.is_ok(), "{:?}", r.problems);
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
        DeviceImage::open(&path).unwrap().load_zone_state(1).unwrap().unwrap();
    }

    #[test]
    fn no_valid_slot_is_reported_and_rebuilt_from_the_data_checksums() {
        let (_d, path, l) = written();
        let before = DeviceImage::open(&path).unwrap().load_zone_state(1).unwrap().unwrap().1;
        poke(&path, l[0].zone_state_offset + 100, |b| b ^ 1);
        poke(&path, l[0].zone_state_offset + l[0].slot_bytes + 100, |b| b ^ 1);
        assert_eq!(kinds(&run(&path, false)), ["slot", "slot", "zone-state"]);
        let r = run(&path, true);
        assert!(r.is_ok(), "{:?}", r.problems);
        let want = "rebuilt from the data checksums: 1 zones hold 16 blocks";
        assert!(r.repairs.iter().any(|x| x.contains(want)), "{:?}", r.repairs);
        assert_eq!(r.namespaces[0].checked_blocks, 16);
        // The rebuilt state is the one that was lost (zone 0 Closed at 16).
        let after = DeviceImage::open(&path).unwrap().load_zone_state(1).unwrap().unwrap().1;
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
        let sb = Superblock::encode_new(&profile.to_toml(), &layout_for(&other, true));
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
