//! Block tags: the reverse map kept with the data.
//!
//! Where the device stores separate per-LBA metadata, every data block the
//! FTL writes carries a tag in it (little-endian):
//!
//! | bytes | field |
//! |---|---|
//! | 0..4 | logical block + 1 (0: untagged) |
//! | 4..8 | check (below) |
//! | 8..16 | write sequence number (with at least 16 bytes of metadata) |
//! | 16.. | zero |
//!
//! The check makes a tag self-validating: metadata the FTL did not write
//! (another format's, a mount's with tags off, damage) is not taken for a
//! tag. In an FTL formatted with data checksums
//! ([`crate::journal::FEATURE_DATA_CRC`], every format since it existed)
//! the check is the CRC32C of the FTL instance, the logical block, the
//! sequence number and the block's data, so the tag also proves the data:
//! a read verifies it and fails on a block that does not match rather than
//! return it. Older formats' checks hash the first three only.
//!
//! The write sequence number orders block versions: a user write takes the
//! next numbers of a counter that starts every mount at
//! `generation << 40` (the mount generation is made durable before the
//! mount writes any data, so numbers never repeat across mounts). Copies
//! made by garbage collection keep the number of the version they copy
//! (the Copy command moves the metadata as it is) or carry
//! [`RELOCATED`] (read and write); either way a copy never outranks the
//! version it copies. Recovery uses the numbers to adopt blocks written
//! after the last durable log page (see [`crate::recovery`]).

use zns_device::{IoBuffer, ZoneQueue};

/// Bit position of the mount generation in a write sequence number: a
/// mount may number 2^40 block writes (4 PiB of 4 KiB blocks).
pub(crate) const GENERATION_SHIFT: u32 = 40;

/// Sequence number of a block written by garbage collection with read and
/// write: never newer than anything, so never adopted by a rescan.
pub(crate) const RELOCATED: u64 = 0;

/// Sequence number of a copy of a block whose data failed its check
/// (relocated by read and write): the copy's tag is written to fail its
/// check too, so the damage is still reported where the block moves.
pub(crate) const POISONED: u64 = u64::MAX;

/// Metadata bytes a tag needs to carry a sequence number.
pub(crate) const SEQUENCED: usize = 16;

/// What a data block's metadata says about it.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tag {
    /// The logical block the data belongs to.
    pub logical: u64,
    /// Write sequence number (0 when the tag has no room for one, or for a
    /// relocated copy).
    pub seq: u64,
}

/// How an FTL instance tags its blocks.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tagging {
    /// The instance's key (its format identity).
    pub key: u64,
    /// Checks cover the block's data.
    pub data_crc: bool,
}

/// The check of a tag for `logical`, `seq` of block `data` (when the
/// checks cover data) under `t`.
fn check(logical: u64, seq: u64, t: &Tagging, data: &[u8]) -> u32 {
    if t.data_crc {
        let mut words = [0u8; 24];
        words[..8].copy_from_slice(&t.key.to_le_bytes());
        words[8..16].copy_from_slice(&logical.to_le_bytes());
        words[16..].copy_from_slice(&seq.to_le_bytes());
        // CRC32C by carry-less multiply folding: every read and every GC
        // move of a block pays it.
        return zns_spec::crc::crc32c_of(&[&words, data]);
    }
    let key = t.key;
    // splitmix64's finalizer over the three words.
    let mut x = key ^ logical.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ seq.rotate_left(29);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (x ^ (x >> 31)) as u32
}

/// The first write sequence number of mount `generation`.
pub(crate) fn first_seq(generation: u32) -> u64 {
    (generation as u64) << GENERATION_SHIFT
}

/// Writes `tag` of block `data` under `t` into the block's metadata `out`
/// (at least 8 bytes; the sequence number only where there are 16).
/// Logical blocks are below 2^32 - 1 (device blocks are numbered in 32
/// bits).
pub(crate) fn encode(tag: Tag, t: &Tagging, data: &[u8], out: &mut [u8]) {
    let poisoned = tag.seq == POISONED;
    let seq = match (out.len() >= SEQUENCED, poisoned) {
        (true, false) => tag.seq,
        _ => RELOCATED,
    };
    let spoil = if poisoned { u32::MAX } else { 0 };
    out[..4].copy_from_slice(&(tag.logical as u32 + 1).to_le_bytes());
    out[4..8].copy_from_slice(&(check(tag.logical, seq, t, data) ^ spoil).to_le_bytes());
    out[8..].fill(0);
    if out.len() >= SEQUENCED {
        out[8..16].copy_from_slice(&seq.to_le_bytes());
    }
}

/// The tag under `t` in the metadata `meta` of block `data`; `None` for
/// a block without one (never written by the FTL, padding, metadata that
/// fails the check, or, with data checksums, data that does).
pub(crate) fn decode(meta: &[u8], t: &Tagging, data: &[u8]) -> Option<Tag> {
    let word = |i: usize| u32::from_le_bytes(meta[i..i + 4].try_into().expect("4 bytes"));
    let logical = (word(0) as u64).checked_sub(1)?;
    let seq = match meta.get(8..16) {
        Some(s) => u64::from_le_bytes(s.try_into().expect("8 bytes")),
        None => 0,
    };
    (word(4) == check(logical, seq, t, data)).then_some(Tag { logical, seq })
}

/// The logical block `meta` names, unverified (to tell a damaged block
/// from another block's: see [`decode`] for a verified tag).
pub(crate) fn claimed(meta: &[u8]) -> Option<u64> {
    (u32::from_le_bytes(meta[..4].try_into().expect("4 bytes")) as u64).checked_sub(1)
}

/// Fills `meta` (blocks × `ms` bytes) with the tags `tag(first..)` under
/// `t` of the blocks of `data`.
pub(crate) fn fill(
    meta: &mut [u8],
    ms: usize,
    t: &Tagging,
    tag: &impl Fn(u32) -> Tag,
    first: u32,
    data: &[u8],
) {
    let bs = data.len() / (meta.len() / ms).max(1);
    for (i, (out, block)) in meta.chunks_exact_mut(ms).zip(data.chunks_exact(bs)).enumerate() {
        encode(tag(first + i as u32), t, block, out);
    }
}

/// Reads `blocks` blocks at `lba` into `data`, their metadata (`ms`
/// bytes a block) into `meta` when there is one: attached for the read
/// and back in `meta` afterwards, whatever the outcome.
pub(crate) fn read_with_metadata(
    q: &mut dyn ZoneQueue,
    data: &mut IoBuffer,
    meta: &mut Option<IoBuffer>,
    lba: u64,
    blocks: usize,
    ms: usize,
) -> zns_device::Result<()> {
    data.set_len(blocks * q.info().block_size as usize)?;
    if let Some(mut m) = meta.take() {
        if let Err(e) = m.set_len(blocks * ms) {
            *meta = Some(m);
            return Err(e);
        }
        data.attach_metadata(m);
    }
    let r = q.read(lba, data);
    if let Some(m) = data.detach_metadata() {
        *meta = Some(m);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOTH: [Tagging; 2] = [
        Tagging { key: 0x1234_5678_9ABC, data_crc: false },
        Tagging { key: 0x1234_5678_9ABC, data_crc: true },
    ];

    #[test]
    fn data_checks_are_crc32c_of_key_logical_seq_and_data() {
        // The on-device format: CRC32C of the three words and the data.
        let t = &BOTH[1];
        let data: Vec<u8> = (0..4096u32).map(|i| (i * 13 + i / 97) as u8).collect();
        let mut words = Vec::new();
        for w in [t.key, 77, 9001] {
            words.extend_from_slice(&w.to_le_bytes());
        }
        let want = zns_spec::crc::crc32c_append(zns_spec::crc::crc32c(&words), &data);
        assert_eq!(check(77, 9001, t, &data), want);
    }

    #[test]
    fn tags_round_trip_with_and_without_sequence_numbers() {
        let data = [0x5Au8; 512];
        for k in &BOTH {
            let t = Tag { logical: 41, seq: first_seq(3) + 7 };
            let mut m16 = [0xAAu8; 16];
            encode(t, k, &data, &mut m16);
            assert_eq!(decode(&m16, k, &data), Some(t));
            let mut m64 = [0xAAu8; 64];
            encode(t, k, &data, &mut m64);
            assert_eq!(decode(&m64, k, &data), Some(t));
            assert!(m64[16..].iter().all(|&b| b == 0));
            let mut m8 = [0xAAu8; 8];
            encode(t, k, &data, &mut m8);
            assert_eq!(decode(&m8, k, &data), Some(Tag { logical: 41, seq: 0 }));
            assert_eq!(decode(&[0u8; 16], k, &data), None);
            let top = Tag { logical: u32::MAX as u64 - 1, seq: POISONED - 1 };
            encode(top, k, &data, &mut m16);
            assert_eq!(decode(&m16, k, &data), Some(top));
        }
    }

    #[test]
    fn foreign_or_damaged_metadata_is_no_tag() {
        let data = [7u8; 256];
        for k in &BOTH {
            let mut m = [0u8; 16];
            encode(Tag { logical: 5, seq: 9 }, k, &data, &mut m);
            let other = Tagging { key: k.key + 1, ..*k };
            assert_eq!(decode(&m, &other, &data), None, "another instance's tag");
            for byte in 0..16 {
                let mut d = m;
                d[byte] ^= 0x04;
                assert_ne!(decode(&d, k, &data), Some(Tag { logical: 5, seq: 9 }), "byte {byte}");
            }
            assert_eq!(decode(&[0xFFu8; 16], k, &data), None);
        }
    }

    #[test]
    fn data_checksums_catch_every_flipped_bit_of_the_data() {
        let (plain, crc) = (&BOTH[0], &BOTH[1]);
        let data: Vec<u8> = (0..4096u32).map(|i| (i * 31 % 251) as u8).collect();
        let (mut m, mut p) = ([0u8; 16], [0u8; 16]);
        let t = Tag { logical: 9, seq: 3 };
        encode(t, crc, &data, &mut m);
        encode(t, plain, &data, &mut p);
        for bit in (0..4096 * 8).step_by(61) {
            let mut d = data.clone();
            d[bit / 8] ^= 1 << (bit % 8);
            assert_eq!(decode(&m, crc, &d), None, "bit {bit}");
            assert_eq!(decode(&p, plain, &d), Some(t), "without data checksums: bit {bit}");
        }
        let mut meta = vec![0u8; 3 * 16];
        let blocks: Vec<u8> = data[..3 * 512].to_vec();
        fill(&mut meta, 16, crc, &|i| Tag { logical: 100 + i as u64, seq: 1 }, 4, &blocks);
        for i in 0..3 {
            let got = decode(&meta[i * 16..(i + 1) * 16], crc, &blocks[i * 512..(i + 1) * 512]);
            assert_eq!(got, Some(Tag { logical: 104 + i as u64, seq: 1 }));
        }
        // A poisoned copy names its block but never verifies.
        for k in &BOTH {
            encode(Tag { logical: 9, seq: POISONED }, k, &data, &mut m);
            assert_eq!((claimed(&m), decode(&m, k, &data)), (Some(9), None));
        }
    }

    #[test]
    fn generations_order_sequence_numbers() {
        assert!(first_seq(2) > first_seq(1) + (1 << 39));
        assert_eq!(first_seq(0), 0);
    }
}
