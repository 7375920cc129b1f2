//! What the zone-state slots of a namespace say, whether they can be
//! trusted, and what the data region proves when they cannot.
//!
//! The two slots alternate: a record of sequence `n` goes to slot `n % 2`,
//! so two valid slots hold consecutive sequence numbers. A namespace is in
//! trouble when a slot is damaged, when a slot is blank beside a record
//! later than the first, or when the valid records are not consecutive (a
//! slot from another time, such as an older copy of the image). Then the
//! newest valid record is only a base: every later write that reached the
//! data region left blocks whose checksums are valid, bound to their LBA
//! and to their zone's write generation, so the zone state is rebuilt from
//! the base plus what the data proves:
//!
//! - a zone whose blocks below the base's write pointer are gone (no
//!   checksum) or carry the next generation was reset after the base;
//! - its write pointer goes after the last block valid in the zone's
//!   generation (a block valid only in an older generation is stale data
//!   from before a reset and does not count);
//! - a block beyond that pointer that holds data no generation proves is
//!   unaccounted for: it may have been current, and is named as lost.
//!
//! Between two consecutive records a zone is reset at most once (every
//! reset is saved at once), so the base's generation and the next are the
//! only ones to try.

use std::fs::File;

use zns_spec::ZoneState;

use super::format::{NamespaceLayout, CHECKSUM_BYTES};
use super::read_up_to;
use super::slot::{Slot, SLOT_NAMES};
use super::{choose_slot, SlotChoice};
use crate::media::{generation_of, LOST, NO_CHECKSUM, PENDING};
use crate::profile::NamespaceProfile;
use crate::zns::{ProvenZone, Zones};

/// A zone whose state the data proves differs from the base record's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneChange {
    /// Zone index.
    pub zone: u32,
    /// Blocks written per the base record.
    pub before: u64,
    /// Blocks written per the data.
    pub after: u64,
    /// The zone was reset after the base record.
    pub reset: bool,
}

impl ZoneChange {
    /// The change in words.
    pub fn describe(&self) -> String {
        match self.reset {
            true => format!(
                "zone {}: reset after it, then {} blocks written (it recorded {})",
                self.zone, self.after, self.before
            ),
            false => format!(
                "zone {}: {} blocks written (it recorded {})",
                self.zone, self.after, self.before
            ),
        }
    }
}

/// The zone state rebuilt from a base record and the data region.
#[derive(Debug, Clone)]
pub(crate) struct Recovery {
    /// The zones that differ from the base.
    pub changes: Vec<ZoneChange>,
    /// The rebuilt durable zone image.
    pub payload: Vec<u8>,
    /// Blocks beyond a rebuilt write pointer holding data nothing proves:
    /// (zone, LBA), the first few.
    pub unaccounted: Vec<(u32, u64)>,
    /// All of them.
    pub unaccounted_total: u64,
}

/// What the slots of one namespace give.
pub(crate) struct Assessment {
    /// Slot A and B.
    pub slots: [Slot; 2],
    /// The newest valid record and what is wrong with the others.
    pub choice: SlotChoice,
    /// Why the slots cannot be trusted, in words (empty when they can).
    pub trouble: Vec<String>,
    /// With trouble and a valid base: the rebuilt state, or why none.
    pub recovery: Option<Result<Recovery, String>>,
}

impl Assessment {
    /// Every problem is a damaged slot whose header still names a sequence
    /// older than the newest valid record: it held nothing newer, so losing
    /// it loses nothing (what lets an image without data checksums still
    /// open, read-only).
    pub fn only_older_damaged(&self) -> bool {
        let Some((seq, _)) = &self.choice.newest else { return false };
        !self.choice.lost_newer
            && self.trouble.len() == self.choice.damaged.len()
            && self.slots.iter().all(|s| match s {
                Slot::Damaged(_, claimed) => *claimed != 0 && claimed < seq,
                _ => true,
            })
    }
}

/// Most unaccounted blocks listed.
const LISTED: usize = 16;

/// Reads and judges both slots of a zoned namespace; in trouble, rebuilds
/// its zone state from the newest valid record and the data region.
/// `generations`: the image binds checksums to write generations.
pub(crate) fn assess(
    file: &File,
    l: &NamespaceLayout,
    ns: &NamespaceProfile,
    version: u32,
    generations: bool,
) -> std::io::Result<Assessment> {
    let slots = [0u64, 1].map(|k| {
        super::read_zone_slot(file, l, k, ns, version, generations).unwrap_or_else(|e| {
            let why = match e.kind() {
                std::io::ErrorKind::UnexpectedEof => "is cut off by the truncation".to_string(),
                _ => format!("cannot be read: {e}"),
            };
            Slot::Damaged(why, 0)
        })
    });
    let choice = choose_slot(&slots);
    let trouble = troubles(&slots);
    let recovery = match (&choice.newest, trouble.is_empty()) {
        (Some((seq, payload)), false) => Some(rebuild(file, l, ns, *seq, payload, generations)?),
        _ => None,
    };
    Ok(Assessment { slots, choice, trouble, recovery })
}

/// Why a pair of slots cannot be trusted: damage, or records that cannot
/// be each other's neighbours.
fn troubles(slots: &[Slot; 2]) -> Vec<String> {
    let mut t = Vec::new();
    for (i, s) in slots.iter().enumerate() {
        if let Slot::Damaged(w, _) = s {
            t.push(format!("zone-state slot {} {w}", SLOT_NAMES[i]));
        }
    }
    match slots {
        [Slot::Valid(a, _), Slot::Valid(b, _)] if a.abs_diff(*b) != 1 => {
            let (old, new) = if a < b { (0, 1) } else { (1, 0) };
            let seq = |k: usize| match &slots[k] {
                Slot::Valid(s, _) => *s,
                _ => 0,
            };
            t.push(format!(
                "zone-state slot {} holds sequence {}, slot {} sequence {}: slots alternate, so \
                 slot {} should hold sequence {} (a slot from an older copy?)",
                SLOT_NAMES[old],
                seq(old),
                SLOT_NAMES[new],
                seq(new),
                SLOT_NAMES[old],
                seq(new).saturating_sub(1)
            ));
        }
        [Slot::Blank, Slot::Valid(s, _)] | [Slot::Valid(s, _), Slot::Blank] if *s > 1 => {
            let blank = if matches!(slots[0], Slot::Blank) { 0 } else { 1 };
            t.push(format!(
                "zone-state slot {} is blank beside sequence {s}: it held sequence {} or {}",
                SLOT_NAMES[blank],
                s - 1,
                s + 1
            ));
        }
        _ => {}
    }
    t
}

/// How one block of a zone reads against its checksum entry.
enum Block {
    /// No checksum: never written or deallocated.
    Empty,
    /// A write was interrupted: old or new data, unverified.
    Pending,
    /// Valid in this generation.
    Generation(u16),
    /// Marked lost, or no generation proves its data.
    Unproven,
}

/// Reads blocks and their checksum entries of one namespace.
struct Blocks<'a> {
    file: &'a File,
    l: &'a NamespaceLayout,
    sums_at: u64,
    buf: Vec<u8>,
}

impl Blocks<'_> {
    fn entries(&self, lba: u64, n: u64) -> std::io::Result<Vec<u32>> {
        let mut raw = vec![0u8; (n * CHECKSUM_BYTES) as usize];
        let got = read_up_to(self.file, &mut raw, self.sums_at + lba * CHECKSUM_BYTES)?;
        raw[got..].fill(0);
        Ok(raw.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().expect("4"))).collect())
    }

    fn classify(&mut self, lba: u64, entry: u32) -> std::io::Result<Block> {
        Ok(match entry {
            NO_CHECKSUM => Block::Empty,
            PENDING => Block::Pending,
            LOST => Block::Unproven,
            e => {
                let at = self.l.data_offset + lba * self.buf.len() as u64;
                let got = read_up_to(self.file, &mut self.buf, at)?;
                self.buf[got..].fill(0);
                match generation_of(lba, &self.buf, e) {
                    Some(g) => Block::Generation(g),
                    None => Block::Unproven,
                }
            }
        })
    }
}

/// The zone state the base record (`seq`, `payload`) and the data region
/// prove together.
fn rebuild(
    file: &File,
    l: &NamespaceLayout,
    ns: &NamespaceProfile,
    seq: u64,
    payload: &[u8],
    generations: bool,
) -> std::io::Result<Result<Recovery, String>> {
    let Some(sums_at) = l.checksum_offset else {
        return Ok(Err(format!(
            "the image keeps no data checksums, so nothing written after sequence {seq} can be \
             proven"
        )));
    };
    let g = crate::zone_geometry(ns);
    let decoded = match payload.is_empty() {
        true => Zones::new(g.clone()).map_err(|e| e.to_string()),
        false => Zones::decode_durable(g.clone(), payload).map_err(|e| e.to_string()),
    };
    let mut base = match decoded {
        Ok(z) => z,
        Err(e) => return Ok(Err(format!("the record of sequence {seq} does not decode: {e}"))),
    };
    if !generations {
        base.fix_generations();
    }
    let mut blocks = Blocks { file, l, sums_at, buf: vec![0u8; ns.block_size as usize] };
    let mut proven = Vec::new();
    let mut changes = Vec::new();
    let mut unaccounted = Vec::new();
    let mut unaccounted_total = 0u64;
    for zone in 0..g.zones {
        let Some(info) = base.zone_info(zone) else { continue };
        if matches!(info.state, ZoneState::ReadOnly | ZoneState::Offline) {
            continue;
        }
        let gen0 = base.generations().get(zone);
        let written = info.written_extent - info.start;
        let entries = blocks.entries(info.start, g.zone_capacity)?;
        // Reset after the base: the blocks it recorded are gone, or carry
        // the next generation. The first block that tells decides.
        let mut reset = false;
        for (i, &e) in entries.iter().enumerate().take(written as usize) {
            match blocks.classify(info.start + i as u64, e)? {
                Block::Generation(x) if x == gen0 => break,
                Block::Generation(x) if generations && x == gen0.wrapping_add(1) => {
                    reset = true;
                    break;
                }
                Block::Empty => {
                    reset = true;
                    break;
                }
                _ => {}
            }
        }
        let generation = if reset && generations { gen0.wrapping_add(1) } else { gen0 };
        // A Full zone takes no more writes; only a reset changes it.
        let from = if reset { 0 } else { written };
        let extendable = reset || info.state != ZoneState::Full;
        let mut last = None;
        let mut odd = Vec::new();
        for (i, &e) in entries.iter().enumerate().skip(from as usize) {
            if e == NO_CHECKSUM {
                continue;
            }
            let lba = info.start + i as u64;
            match blocks.classify(lba, e)? {
                Block::Generation(x) if x == generation && extendable => last = Some(i as u64),
                Block::Pending if extendable => last = Some(i as u64),
                // Stale: left from before a reset, never current data.
                Block::Generation(_) => {}
                _ => odd.push(i as u64),
            }
        }
        let after = last.map_or(from, |i| (i + 1).max(from));
        for i in odd.into_iter().filter(|&i| i >= after) {
            unaccounted_total += 1;
            if unaccounted.len() < LISTED {
                unaccounted.push((zone, info.start + i));
            }
        }
        if reset || after != written {
            proven.push(ProvenZone { zone, written: after, generation, reset });
            changes.push(ZoneChange { zone, before: written, after, reset });
        }
    }
    let rebuilt = match base.amended(&proven) {
        Ok(z) => z,
        Err(e) => {
            return Ok(Err(format!(
                "the data beyond sequence {seq} does not make a zone state: {e}"
            )))
        }
    };
    let payload = rebuilt.encode_durable();
    Ok(Ok(Recovery { changes, payload, unaccounted, unaccounted_total }))
}
