//! The metadata log's contents: mapping-change records, and the pages
//! (one block each, checksummed) that carry them, the checkpoints and the
//! header of every metadata zone.
//!
//! Page layout (little-endian):
//!
//! | bytes | field |
//! |---|---|
//! | 0..4 | magic `ZFTL` |
//! | 4 | kind: 1 zone header, 2 log records, 3 checkpoint chunk, 4 checkpoint end |
//! | 5 | format version (2) |
//! | 6..8 | payload length |
//! | 8..16 | sequence number: +1 for every page of the log, across zones |
//! | 16..20 | mount generation: +1 every time the FTL is opened |
//! | 20..24 | CRC-32C of the whole page with this field zero |
//! | 24..32 | write watermark: the data-block sequence counter read after the page's contents were taken (every block write the page describes has a lower sequence number) |
//! | 32.. | payload |
//!
//! A log record is 9 bytes: a tag and two 32-bit fields (a logical and a
//! physical block number, a range, or a checkpoint id).

/// Page magic.
pub(crate) const MAGIC: [u8; 4] = *b"ZFTL";
/// Page format version.
pub(crate) const VERSION: u8 = 2;
/// Bytes before the payload.
pub(crate) const HEADER: usize = 32;
/// Bytes of one record.
pub(crate) const RECORD: usize = 9;

/// One change to the mapping, as logged.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Record {
    /// Logical block `l` now lives at PBA `p`.
    Map { l: u32, p: u32 },
    /// `blocks` logical blocks from `l` are unmapped.
    Unmap { l: u32, blocks: u32 },
    /// Checkpoint `id` starts here: replay after a checkpoint begins at
    /// this record.
    CheckpointBegin { id: u64 },
}

impl Record {
    fn encode(&self, out: &mut [u8]) {
        let (tag, a, b) = match *self {
            Record::Map { l, p } => (1u8, l, p),
            Record::Unmap { l, blocks } => (2, l, blocks),
            Record::CheckpointBegin { id } => (3, id as u32, (id >> 32) as u32),
        };
        out[0] = tag;
        out[1..5].copy_from_slice(&a.to_le_bytes());
        out[5..9].copy_from_slice(&b.to_le_bytes());
    }

    fn decode(b: &[u8]) -> Option<Record> {
        let x = u32::from_le_bytes(b[1..5].try_into().ok()?);
        let y = u32::from_le_bytes(b[5..9].try_into().ok()?);
        match b[0] {
            1 => Some(Record::Map { l: x, p: y }),
            2 => Some(Record::Unmap { l: x, blocks: y }),
            3 => Some(Record::CheckpointBegin { id: x as u64 | (y as u64) << 32 }),
            _ => None,
        }
    }
}

/// Records not yet written to the log, in the order the map changed.
///
/// Thread safety: plain data; the FTL keeps it behind the journal lock,
/// and map changes require `&mut Journal` (see [`crate::map`]).
#[derive(Debug, Default)]
pub(crate) struct Journal {
    pending: Vec<Record>,
}

impl Journal {
    /// Appends a record.
    #[inline]
    pub fn push(&mut self, r: Record) {
        self.pending.push(r);
    }

    /// The records waiting.
    pub fn pending(&self) -> &[Record] {
        &self.pending
    }

    /// Takes every record waiting.
    pub fn take(&mut self) -> Vec<Record> {
        std::mem::take(&mut self.pending)
    }
}

/// What identifies an FTL instance and its geometry; in the header page
/// of every metadata zone.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Superblock {
    /// Random identity chosen at format.
    pub instance: u64,
    /// Logical blocks exposed.
    pub logical: u64,
    /// Block size.
    pub block_size: u32,
    /// Device zone size.
    pub zone_size: u64,
    /// Device zones.
    pub zones: u32,
    /// Metadata zones.
    pub meta_zones: u32,
    /// PBA stride (largest zone capacity).
    pub stride: u32,
    /// Over-provisioning at format, in parts per million (informational).
    pub op_ppm: u32,
    /// Format features ([`FEATURE_DATA_CRC`], [`FEATURE_BACKUP_HEADER`]); 0
    /// in headers written before
    /// the field existed.
    pub features: u32,
}

/// Feature: block tags carry a CRC32C of the block's data (see
/// [`crate::tag`]).
pub(crate) const FEATURE_DATA_CRC: u32 = 1;

/// Feature: every metadata zone starts with two header pages, the
/// superblock and its copy, so one damaged copy is recovered from the
/// other (as file systems keep backup superblocks). FTLs formatted
/// before it have one header page per zone and are still read.
pub(crate) const FEATURE_BACKUP_HEADER: u32 = 2;

/// Features this version understands; a header with others is refused.
pub(crate) const KNOWN_FEATURES: u32 = FEATURE_DATA_CRC | FEATURE_BACKUP_HEADER;

impl Superblock {
    /// Header pages at the start of every metadata zone: two with
    /// [`FEATURE_BACKUP_HEADER`], else one.
    pub fn header_pages(&self) -> u32 {
        match self.features & FEATURE_BACKUP_HEADER {
            0 => 1,
            _ => 2,
        }
    }
}

/// Header payload before `features` existed (still read).
const SUPERBLOCK_V1: usize = 8 + 8 + 4 + 8 + 4 + 4 + 4 + 4;
const SUPERBLOCK: usize = SUPERBLOCK_V1 + 4;

/// A page's contents.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Body {
    /// First page of every metadata zone.
    Header(Superblock),
    /// Mapping changes.
    Log(Vec<Record>),
    /// Part of checkpoint `ckpt`: L2P entries `first..first + entries.len()`
    /// (`u32::MAX` = unmapped). Chunks of only unmapped entries are left out.
    Chunk { ckpt: u64, first: u64, entries: Vec<u32> },
    /// Checkpoint `ckpt` is complete with `chunks` chunk pages.
    End { ckpt: u64, chunks: u64 },
}

/// One page of the metadata log.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Page {
    /// Position in the log.
    pub seq: u64,
    /// Mount generation that wrote it.
    pub generation: u32,
    /// The data-block write sequence counter when the contents were taken:
    /// every write the page's records or entries describe was numbered
    /// below it, and a block numbered at or above it was written later
    /// than everything the page says (see [`crate::recovery`]).
    pub watermark: u64,
    /// Contents.
    pub body: Body,
}

/// Why a block that is not the FTL's at all (no page magic) does not
/// decode: other data, unlike a damaged page of the FTL's own.
pub(crate) const NO_MAGIC: &str = "no page magic";

/// Why a block is not a valid page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PageError {
    /// Every byte is zero: never written.
    Blank,
    /// Damaged or not a page.
    Bad(String),
}

/// Records that fit one page of `block_size` bytes.
pub(crate) fn records_per_page(block_size: usize) -> usize {
    (block_size - HEADER) / RECORD
}

/// Checkpoint entries that fit one page of `block_size` bytes.
pub(crate) fn entries_per_chunk(block_size: usize) -> usize {
    (block_size - HEADER - 20) / 4
}

impl Page {
    /// Writes the page into `out` (one block).
    pub fn encode(&self, out: &mut [u8]) {
        out.fill(0);
        let (kind, len) = {
            let p = &mut out[HEADER..];
            match &self.body {
                Body::Header(s) => {
                    p[0..8].copy_from_slice(&s.instance.to_le_bytes());
                    p[8..16].copy_from_slice(&s.logical.to_le_bytes());
                    p[16..20].copy_from_slice(&s.block_size.to_le_bytes());
                    p[20..28].copy_from_slice(&s.zone_size.to_le_bytes());
                    p[28..32].copy_from_slice(&s.zones.to_le_bytes());
                    p[32..36].copy_from_slice(&s.meta_zones.to_le_bytes());
                    p[36..40].copy_from_slice(&s.stride.to_le_bytes());
                    p[40..44].copy_from_slice(&s.op_ppm.to_le_bytes());
                    p[44..48].copy_from_slice(&s.features.to_le_bytes());
                    (1u8, SUPERBLOCK)
                }
                Body::Log(records) => {
                    for (i, r) in records.iter().enumerate() {
                        r.encode(&mut p[i * RECORD..(i + 1) * RECORD]);
                    }
                    (2, records.len() * RECORD)
                }
                Body::Chunk { ckpt, first, entries } => {
                    p[0..8].copy_from_slice(&ckpt.to_le_bytes());
                    p[8..16].copy_from_slice(&first.to_le_bytes());
                    p[16..20].copy_from_slice(&(entries.len() as u32).to_le_bytes());
                    for (i, e) in entries.iter().enumerate() {
                        p[20 + i * 4..24 + i * 4].copy_from_slice(&e.to_le_bytes());
                    }
                    (3, 20 + entries.len() * 4)
                }
                Body::End { ckpt, chunks } => {
                    p[0..8].copy_from_slice(&ckpt.to_le_bytes());
                    p[8..16].copy_from_slice(&chunks.to_le_bytes());
                    (4, 16)
                }
            }
        };
        out[0..4].copy_from_slice(&MAGIC);
        out[4] = kind;
        out[5] = VERSION;
        out[6..8].copy_from_slice(&(len as u16).to_le_bytes());
        out[8..16].copy_from_slice(&self.seq.to_le_bytes());
        out[16..20].copy_from_slice(&self.generation.to_le_bytes());
        out[24..32].copy_from_slice(&self.watermark.to_le_bytes());
        let crc = zns_spec::crc::crc32c(out);
        out[20..24].copy_from_slice(&crc.to_le_bytes());
    }

    /// Reads a page from `b` (one block), checking magic, version, length
    /// and checksum.
    pub fn decode(b: &[u8]) -> Result<Page, PageError> {
        if b.iter().all(|&x| x == 0) {
            return Err(PageError::Blank);
        }
        let bad = |s: &str| Err(PageError::Bad(s.to_string()));
        if b.len() < HEADER + SUPERBLOCK || b[0..4] != MAGIC {
            return bad(NO_MAGIC);
        }
        let stored = u32::from_le_bytes(b[20..24].try_into().expect("4 bytes"));
        // The checksum covers the page with its own field zero.
        let crc = zns_spec::crc::crc32c_append(zns_spec::crc::crc32c(&b[..20]), &[0u8; 4]);
        if zns_spec::crc::crc32c_append(crc, &b[24..]) != stored {
            return bad("checksum mismatch");
        }
        if b[5] != VERSION {
            return Err(PageError::Bad(format!(
                "page format version {} (expected {VERSION})",
                b[5]
            )));
        }
        let len = u16::from_le_bytes([b[6], b[7]]) as usize;
        if HEADER + len > b.len() {
            return bad("payload longer than the page");
        }
        let seq = u64::from_le_bytes(b[8..16].try_into().expect("8 bytes"));
        let generation = u32::from_le_bytes(b[16..20].try_into().expect("4 bytes"));
        let watermark = u64::from_le_bytes(b[24..32].try_into().expect("8 bytes"));
        let p = &b[HEADER..HEADER + len];
        let u64_at = |i: usize| u64::from_le_bytes(p[i..i + 8].try_into().expect("8 bytes"));
        let u32_at = |i: usize| u32::from_le_bytes(p[i..i + 4].try_into().expect("4 bytes"));
        let body = match b[4] {
            1 if len == SUPERBLOCK || len == SUPERBLOCK_V1 => Body::Header(Superblock {
                instance: u64_at(0),
                logical: u64_at(8),
                block_size: u32_at(16),
                zone_size: u64_at(20),
                zones: u32_at(28),
                meta_zones: u32_at(32),
                stride: u32_at(36),
                op_ppm: u32_at(40),
                features: if len == SUPERBLOCK { u32_at(44) } else { 0 },
            }),
            2 if len.is_multiple_of(RECORD) => {
                let mut records = Vec::with_capacity(len / RECORD);
                for c in p.chunks_exact(RECORD) {
                    match Record::decode(c) {
                        Some(r) => records.push(r),
                        None => return bad("unknown record type"),
                    }
                }
                Body::Log(records)
            }
            3 if len >= 20
                && (len - 20).is_multiple_of(4)
                && u32_at(16) as usize == (len - 20) / 4 =>
            {
                Body::Chunk {
                    ckpt: u64_at(0),
                    first: u64_at(8),
                    entries: (0..(len - 20) / 4).map(|i| u32_at(20 + i * 4)).collect(),
                }
            }
            4 if len == 16 => Body::End { ckpt: u64_at(0), chunks: u64_at(8) },
            k => return Err(PageError::Bad(format!("page kind {k} with {len} payload bytes"))),
        };
        Ok(Page { seq, generation, watermark, body })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(body: Body) {
        let p = Page { seq: 77, generation: 3, watermark: 5 << 40 | 123, body };
        let mut b = vec![0u8; 4096];
        p.encode(&mut b);
        assert_eq!(Page::decode(&b), Ok(p));
    }

    #[test]
    fn pages_round_trip() {
        round_trip(Body::Header(Superblock {
            instance: 0xDEAD_BEEF_1234,
            logical: 1 << 33,
            block_size: 4096,
            zone_size: 1024,
            zones: 256,
            meta_zones: 4,
            stride: 960,
            features: FEATURE_DATA_CRC,
            op_ppm: 70_000,
        }));
        let n = records_per_page(4096);
        assert_eq!(n, 451);
        let records: Vec<Record> = (0..n as u32)
            .map(|i| match i % 3 {
                0 => Record::Map { l: i, p: u32::MAX - i },
                1 => Record::Unmap { l: i, blocks: 7 },
                _ => Record::CheckpointBegin { id: (i as u64) << 33 | 5 },
            })
            .collect();
        round_trip(Body::Log(records));
        round_trip(Body::Log(Vec::new()));
        let m = entries_per_chunk(4096);
        round_trip(Body::Chunk { ckpt: 9, first: 1 << 20, entries: (0..m as u32).collect() });
        round_trip(Body::End { ckpt: 9, chunks: 12 });
    }

    #[test]
    fn damage_is_detected() {
        let mut b = vec![0u8; 4096];
        assert_eq!(Page::decode(&b), Err(PageError::Blank));
        Page { seq: 1, generation: 1, watermark: 9, body: Body::End { ckpt: 1, chunks: 0 } }
            .encode(&mut b);
        for i in [0, 4, 9, 17, 22, 26, 30, 40, 4095] {
            let mut c = b.clone();
            c[i] ^= 0x10;
            assert!(matches!(Page::decode(&c), Err(PageError::Bad(_))), "byte {i}");
        }
        let mut j = Journal::default();
        j.push(Record::Map { l: 1, p: 2 });
        assert_eq!(j.take(), vec![Record::Map { l: 1, p: 2 }]);
        assert!(j.pending().is_empty());
    }

    #[test]
    fn headers_written_before_features_existed_read_as_no_features() {
        let sb = Superblock {
            instance: 9,
            logical: 1000,
            block_size: 4096,
            zone_size: 1024,
            zones: 16,
            meta_zones: 2,
            stride: 960,
            op_ppm: 200_000,
            features: 0,
        };
        let mut b = vec![0u8; 4096];
        Page { seq: 1, generation: 1, watermark: 0, body: Body::Header(sb) }.encode(&mut b);
        // The older, 4-byte shorter payload, checksummed again.
        b[6..8].copy_from_slice(&(SUPERBLOCK_V1 as u16).to_le_bytes());
        b[20..24].fill(0);
        let crc = zns_spec::crc::crc32c(&b);
        b[20..24].copy_from_slice(&crc.to_le_bytes());
        match Page::decode(&b) {
            Ok(Page { body: Body::Header(got), .. }) => assert_eq!(got, sb),
            other => panic!("{other:?}"),
        }
    }
}
