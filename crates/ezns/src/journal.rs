//! The metadata journal: what the stripe groups of every logical zone are,
//! kept on the base device so tenants survive restarts and power cuts.
//!
//! The journal lives in the base device's first two physical zones, used
//! in turn. A journal zone starts with a checkpoint (a super entry, the
//! groups and finish marks of every logical zone, an end entry) and goes
//! on with delta entries: a group started, a logical zone finished at a
//! write pointer, a logical zone reset. Entries are packed into blocks;
//! each block carries a magic, the generation of its journal zone, its
//! sequence number and a CRC32C of the whole block. One block is in flight
//! at a time, written with FUA at the journal zone's write pointer (group
//! commit: entries waiting meanwhile share the next block), so the journal
//! is a prefix of what was asked, in order.
//!
//! When a journal zone fills, the next generation's checkpoint goes to the
//! other zone, and the full one is reset. Recovery reads both, takes the
//! newest generation with a complete checkpoint and applies its entries in
//! order. Every block below a journal zone's write pointer must decode: one
//! that does not is damage, reported and never skipped.

use crate::layout::Column;

/// Widest group an entry records.
pub const MAX_COLUMNS: usize = 256;

const MAGIC: &[u8; 8] = b"EZNSJRNL";
const VERSION: u16 = 1;
/// Block header bytes.
pub const HEADER: usize = 32;

const SUPER: u8 = 1;
const GROUP: u8 = 2;
const FINISH: u8 = 3;
const RESET: u8 = 4;
const END: u8 = 5;

/// One journal entry.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// The first entry of a journal zone: the tenant layout it serves.
    Super {
        /// Digest of the tenant layout ([`layout_digest`]).
        digest: u64,
        /// The tenant layout in words, for error messages.
        layout: String,
    },
    /// A stripe group of a logical zone, from `start` on (replacing any
    /// group of the zone from `start` on).
    Group {
        /// Tenant index.
        tenant: u16,
        /// Logical zone index.
        zone: u32,
        /// First logical block (zone offset).
        start: u64,
        /// Most blocks of the group.
        len: u64,
        /// Stripe unit in blocks.
        unit: u32,
        /// Columns.
        cols: Vec<Column>,
    },
    /// A logical zone was finished with its write pointer at `at`.
    Finish {
        /// Tenant index.
        tenant: u16,
        /// Logical zone index.
        zone: u32,
        /// Write pointer (zone offset) when finished.
        at: u64,
    },
    /// A logical zone was reset.
    Reset {
        /// Tenant index.
        tenant: u16,
        /// Logical zone index.
        zone: u32,
    },
    /// The checkpoint at the start of the journal zone is complete.
    End,
}

impl Entry {
    /// Bytes the entry takes in a block.
    pub fn size(&self) -> usize {
        4 + match self {
            Entry::Super { layout, .. } => 8 + 2 + layout.len().min(1024),
            Entry::Group { cols, .. } => 2 + 4 + 8 + 8 + 4 + 2 + 14 * cols.len(),
            Entry::Finish { .. } => 2 + 4 + 8,
            Entry::Reset { .. } => 2 + 4,
            Entry::End => 0,
        }
    }

    fn encode(&self, out: &mut Vec<u8>) {
        let kind = match self {
            Entry::Super { .. } => SUPER,
            Entry::Group { .. } => GROUP,
            Entry::Finish { .. } => FINISH,
            Entry::Reset { .. } => RESET,
            Entry::End => END,
        };
        out.push(kind);
        out.push(0);
        out.extend_from_slice(&(self.size() as u16).to_le_bytes());
        match self {
            Entry::Super { digest, layout } => {
                let text = &layout.as_bytes()[..layout.len().min(1024)];
                out.extend_from_slice(&digest.to_le_bytes());
                out.extend_from_slice(&(text.len() as u16).to_le_bytes());
                out.extend_from_slice(text);
            }
            Entry::Group { tenant, zone, start, len, unit, cols } => {
                out.extend_from_slice(&tenant.to_le_bytes());
                out.extend_from_slice(&zone.to_le_bytes());
                out.extend_from_slice(&start.to_le_bytes());
                out.extend_from_slice(&len.to_le_bytes());
                out.extend_from_slice(&unit.to_le_bytes());
                out.extend_from_slice(&(cols.len() as u16).to_le_bytes());
                for c in cols {
                    out.extend_from_slice(&c.zone.to_le_bytes());
                    out.extend_from_slice(&c.base.to_le_bytes());
                    out.extend_from_slice(&c.budget.to_le_bytes());
                }
            }
            Entry::Finish { tenant, zone, at } => {
                out.extend_from_slice(&tenant.to_le_bytes());
                out.extend_from_slice(&zone.to_le_bytes());
                out.extend_from_slice(&at.to_le_bytes());
            }
            Entry::Reset { tenant, zone } => {
                out.extend_from_slice(&tenant.to_le_bytes());
                out.extend_from_slice(&zone.to_le_bytes());
            }
            Entry::End => {}
        }
    }

    fn decode(b: &[u8]) -> Result<(Entry, usize), String> {
        if b.len() < 4 {
            return Err("truncated entry".into());
        }
        let kind = b[0];
        let size = u16::from_le_bytes([b[2], b[3]]) as usize;
        if size < 4 || size > b.len() {
            return Err(format!("entry of {size} bytes in {} left", b.len()));
        }
        let mut r = Reader { b: &b[4..size] };
        let e = match kind {
            SUPER => {
                let digest = r.u64()?;
                let n = r.u16()? as usize;
                let text = r.bytes(n)?;
                Entry::Super { digest, layout: String::from_utf8_lossy(text).into_owned() }
            }
            GROUP => {
                let tenant = r.u16()?;
                let zone = r.u32()?;
                let start = r.u64()?;
                let len = r.u64()?;
                let unit = r.u32()?;
                let n = r.u16()? as usize;
                if n == 0 || n > MAX_COLUMNS || unit == 0 {
                    return Err(format!("group with {n} columns, unit {unit}"));
                }
                let mut cols = Vec::with_capacity(n);
                for _ in 0..n {
                    cols.push(Column { zone: r.u32()?, base: r.u64()?, budget: r.u16()? });
                }
                Entry::Group { tenant, zone, start, len, unit, cols }
            }
            FINISH => Entry::Finish { tenant: r.u16()?, zone: r.u32()?, at: r.u64()? },
            RESET => Entry::Reset { tenant: r.u16()?, zone: r.u32()? },
            END => Entry::End,
            k => return Err(format!("unknown entry kind {k}")),
        };
        if !r.b.is_empty() {
            return Err(format!("entry kind {kind} with {} bytes to spare", r.b.len()));
        }
        Ok((e, size))
    }
}

struct Reader<'a> {
    b: &'a [u8],
}

impl<'a> Reader<'a> {
    fn bytes(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.b.len() < n {
            return Err("truncated entry".into());
        }
        let (h, t) = self.b.split_at(n);
        self.b = t;
        Ok(h)
    }
    fn u16(&mut self) -> Result<u16, String> {
        Ok(u16::from_le_bytes(self.bytes(2)?.try_into().expect("2")))
    }
    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.bytes(4)?.try_into().expect("4")))
    }
    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.bytes(8)?.try_into().expect("8")))
    }
}

/// Encodes `entries` into one block of `block` bytes; the caller checks
/// that they fit ([`fits`]).
pub fn encode_block(block: usize, generation: u64, seq: u64, entries: &[Entry]) -> Vec<u8> {
    let mut out = Vec::with_capacity(block);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&generation.to_le_bytes());
    out.extend_from_slice(&seq.to_le_bytes());
    for e in entries {
        e.encode(&mut out);
    }
    assert!(out.len() <= block, "journal entries overflow a block");
    out.resize(block, 0);
    let crc = zns_spec::crc::crc32c(&out);
    out[12..16].copy_from_slice(&crc.to_le_bytes());
    out
}

/// True when `entries` fit in one block of `block` bytes.
pub fn fits(block: usize, entries: &[Entry]) -> bool {
    HEADER + entries.iter().map(Entry::size).sum::<usize>() <= block
}

/// A decoded block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// Generation of the journal zone.
    pub generation: u64,
    /// Sequence number in the journal zone (0 for the first block).
    pub seq: u64,
    /// The entries.
    pub entries: Vec<Entry>,
}

/// Decodes a block; `None` for a block that was never written (all
/// zeros), an error for anything else that is not a valid block.
pub fn decode_block(b: &[u8]) -> Result<Option<Block>, String> {
    if b.iter().all(|&x| x == 0) {
        return Ok(None);
    }
    if b.len() < HEADER || &b[..8] != MAGIC {
        return Err("not a journal block (bad magic)".into());
    }
    let version = u16::from_le_bytes([b[8], b[9]]);
    if version != VERSION {
        return Err(format!("journal block version {version} (this build reads {VERSION})"));
    }
    let stored = u32::from_le_bytes(b[12..16].try_into().expect("4"));
    let mut copy = b.to_vec();
    copy[12..16].fill(0);
    if zns_spec::crc::crc32c(&copy) != stored {
        return Err("journal block checksum mismatch".into());
    }
    let count = u16::from_le_bytes([b[10], b[11]]) as usize;
    let generation = u64::from_le_bytes(b[16..24].try_into().expect("8"));
    let seq = u64::from_le_bytes(b[24..32].try_into().expect("8"));
    let mut entries = Vec::with_capacity(count);
    let mut at = HEADER;
    for _ in 0..count {
        let (e, n) = Entry::decode(&b[at..])?;
        entries.push(e);
        at += n;
    }
    Ok(Some(Block { generation, seq, entries }))
}

/// A stable digest of a tenant layout description.
pub fn layout_digest(text: &str) -> u64 {
    // FNV-1a: stable across builds and platforms.
    text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3))
}

/// A group as the journal records it.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupRecord {
    /// First logical block.
    pub start: u64,
    /// Most blocks.
    pub len: u64,
    /// Stripe unit.
    pub unit: u32,
    /// Columns.
    pub cols: Vec<Column>,
}

/// What the journal says about one logical zone.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ZoneRecord {
    /// Its groups, by start.
    pub groups: Vec<GroupRecord>,
    /// Finished with the write pointer here.
    pub finished: Option<u64>,
}

/// The mapping the journal describes: per tenant, per logical zone.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// `zones[tenant][zone]`.
    pub zones: Vec<Vec<ZoneRecord>>,
}

impl Mapping {
    /// An empty mapping for tenants with these numbers of logical zones.
    pub fn new(zones: &[u32]) -> Mapping {
        Mapping { zones: zones.iter().map(|&n| vec![ZoneRecord::default(); n as usize]).collect() }
    }

    /// Applies one entry. An entry naming a tenant or zone that does not
    /// exist is an error.
    pub fn apply(&mut self, e: &Entry) -> Result<(), String> {
        fn zone(m: &mut Mapping, t: u16, z: u32) -> Result<&mut ZoneRecord, String> {
            m.zones
                .get_mut(t as usize)
                .and_then(|v| v.get_mut(z as usize))
                .ok_or_else(|| format!("entry for tenant {t}, zone {z}, which does not exist"))
        }
        match e {
            Entry::Group { tenant, zone: z, start, len, unit, cols } => {
                let r = zone(self, *tenant, *z)?;
                r.groups.retain(|g| g.start < *start);
                r.groups.push(GroupRecord {
                    start: *start,
                    len: *len,
                    unit: *unit,
                    cols: cols.clone(),
                });
            }
            Entry::Finish { tenant, zone: z, at } => zone(self, *tenant, *z)?.finished = Some(*at),
            Entry::Reset { tenant, zone: z } => *zone(self, *tenant, *z)? = ZoneRecord::default(),
            Entry::Super { .. } | Entry::End => {}
        }
        Ok(())
    }

    /// The checkpoint entries that rebuild this mapping.
    pub fn checkpoint(&self) -> Vec<Entry> {
        let mut out = Vec::new();
        for (t, zones) in self.zones.iter().enumerate() {
            for (z, r) in zones.iter().enumerate() {
                for g in &r.groups {
                    out.push(Entry::Group {
                        tenant: t as u16,
                        zone: z as u32,
                        start: g.start,
                        len: g.len,
                        unit: g.unit,
                        cols: g.cols.clone(),
                    });
                }
                if let Some(at) = r.finished {
                    out.push(Entry::Finish { tenant: t as u16, zone: z as u32, at });
                }
            }
        }
        out
    }
}

/// Packs entries into blocks, in order, each as full as it can be.
pub fn pack(block: usize, entries: Vec<Entry>) -> Vec<Vec<Entry>> {
    let mut out: Vec<Vec<Entry>> = Vec::new();
    let mut cur: Vec<Entry> = Vec::new();
    let mut used = HEADER;
    for e in entries {
        if used + e.size() > block && !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
            used = HEADER;
        }
        used += e.size();
        cur.push(e);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// A journal zone as read back: its generation and entries, in order, and
/// whether its checkpoint is complete.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneLog {
    /// Generation.
    pub generation: u64,
    /// Digest and layout of its super entry.
    pub digest: u64,
    /// Layout text of its super entry.
    pub layout: String,
    /// Every entry after the super entry.
    pub entries: Vec<Entry>,
    /// The checkpoint's end entry was found.
    pub complete: bool,
    /// Blocks read.
    pub blocks: u64,
}

/// Reads a journal zone from its blocks (those below its write pointer):
/// `Ok(None)` when it holds none; an error when a block does not decode,
/// belongs to another generation or is out of sequence.
pub fn read_zone<'a>(blocks: impl Iterator<Item = &'a [u8]>) -> Result<Option<ZoneLog>, String> {
    let mut log: Option<ZoneLog> = None;
    for (i, raw) in blocks.enumerate() {
        let b = decode_block(raw)
            .map_err(|e| format!("block {i}: {e}"))?
            .ok_or_else(|| format!("block {i}: blank below the write pointer"))?;
        if b.seq != i as u64 {
            return Err(format!("block {i}: sequence number {}", b.seq));
        }
        let mut entries = b.entries.into_iter();
        let l = match &mut log {
            None => match entries.next() {
                Some(Entry::Super { digest, layout }) => log.insert(ZoneLog {
                    generation: b.generation,
                    digest,
                    layout,
                    entries: Vec::new(),
                    complete: false,
                    blocks: 0,
                }),
                _ => return Err("block 0: no super entry".into()),
            },
            Some(l) => {
                if b.generation != l.generation {
                    return Err(format!(
                        "block {i}: generation {} in a zone of generation {}",
                        b.generation, l.generation
                    ));
                }
                l
            }
        };
        for e in entries {
            if e == Entry::End {
                l.complete = true;
            }
            l.entries.push(e);
        }
        l.blocks += 1;
    }
    Ok(log)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(tenant: u16, zone: u32, start: u64, n: usize) -> Entry {
        Entry::Group {
            tenant,
            zone,
            start,
            len: 100,
            unit: 16,
            cols: (0..n)
                .map(|i| Column { zone: 10 + i as u32, base: i as u64, budget: 1 })
                .collect(),
        }
    }

    #[test]
    fn blocks_round_trip_and_detect_damage() {
        let entries = vec![
            Entry::Super { digest: 7, layout: "a:8".into() },
            group(0, 3, 0, 4),
            Entry::Finish { tenant: 1, zone: 2, at: 55 },
            Entry::Reset { tenant: 0, zone: 1 },
            Entry::End,
        ];
        assert!(fits(4096, &entries));
        let b = encode_block(4096, 3, 9, &entries);
        let d = decode_block(&b).unwrap().unwrap();
        assert_eq!((d.generation, d.seq, &d.entries), (3, 9, &entries));
        assert_eq!(decode_block(&vec![0; 4096]).unwrap(), None);
        let mut bad = b.clone();
        bad[100] ^= 1;
        assert!(decode_block(&bad).unwrap_err().contains("checksum"));
        let mut bad = b;
        bad[0] = b'X';
        assert!(decode_block(&bad).unwrap_err().contains("magic"));
    }

    #[test]
    fn packing_fills_blocks_in_order() {
        let entries: Vec<Entry> = (0..40).map(|i| group(0, i, 0, 16)).collect();
        let blocks = pack(4096, entries.clone());
        assert!(blocks.len() > 1);
        assert!(blocks.iter().all(|b| fits(4096, b)));
        assert_eq!(blocks.concat(), entries);
    }

    #[test]
    fn mapping_applies_entries_and_checkpoints() {
        let mut m = Mapping::new(&[4, 2]);
        m.apply(&group(0, 1, 0, 2)).unwrap();
        m.apply(&group(0, 1, 50, 3)).unwrap();
        m.apply(&group(0, 1, 50, 1)).unwrap(); // replaces the group at 50
        m.apply(&Entry::Finish { tenant: 0, zone: 1, at: 70 }).unwrap();
        m.apply(&group(1, 0, 0, 2)).unwrap();
        m.apply(&Entry::Reset { tenant: 1, zone: 0 }).unwrap();
        let z = &m.zones[0][1];
        assert_eq!(
            z.groups.iter().map(|g| (g.start, g.cols.len())).collect::<Vec<_>>(),
            [(0, 2), (50, 1)]
        );
        assert_eq!(z.finished, Some(70));
        assert_eq!(m.zones[1][0], ZoneRecord::default());
        assert!(m.apply(&group(2, 0, 0, 1)).is_err());
        let mut again = Mapping::new(&[4, 2]);
        for e in m.checkpoint() {
            again.apply(&e).unwrap();
        }
        assert_eq!(again, m);
    }

    #[test]
    fn zones_read_back_in_sequence() {
        let b0 =
            encode_block(512, 4, 0, &[Entry::Super { digest: 1, layout: "x".into() }, Entry::End]);
        let b1 = encode_block(512, 4, 1, &[Entry::Reset { tenant: 0, zone: 0 }]);
        let log = read_zone([&b0[..], &b1[..]].into_iter()).unwrap().unwrap();
        assert_eq!((log.generation, log.complete, log.blocks, log.entries.len()), (4, true, 2, 2));
        assert_eq!(read_zone(std::iter::empty()).unwrap(), None);
        let stray = encode_block(512, 5, 1, &[Entry::End]);
        assert!(read_zone([&b0[..], &stray[..]].into_iter()).unwrap_err().contains("generation"));
        let skipped = encode_block(512, 4, 2, &[Entry::End]);
        assert!(read_zone([&b0[..], &skipped[..]].into_iter()).unwrap_err().contains("sequence"));
        let headless = encode_block(512, 4, 0, &[Entry::End]);
        assert!(read_zone([&headless[..]].into_iter()).unwrap_err().contains("super"));
    }
}
