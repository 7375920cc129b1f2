//! Block tags: the reverse map kept with the data.
//!
//! Where the device stores separate per-LBA metadata, every data block the
//! FTL writes carries a tag in it (little-endian):
//!
//! | bytes | field |
//! |---|---|
//! | 0..4 | logical block + 1 (0: untagged) |
//! | 4..8 | check: a hash of the logical block, the sequence number and the FTL instance |
//! | 8..16 | write sequence number (with at least 16 bytes of metadata) |
//! | 16.. | zero |
//!
//! The check makes a tag self-validating: metadata the FTL did not write
//! (another format's, a mount's with tags off, damage) is not taken for a
//! tag.
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

/// The check of a tag for `logical`, `seq` under instance `key`.
fn check(logical: u64, seq: u64, key: u64) -> u32 {
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

/// Writes `tag` of FTL instance `key` into one block's metadata `out`
/// (at least 8 bytes; the sequence number only where there are 16).
/// Logical blocks are below 2^32 - 1 (device blocks are numbered in 32
/// bits).
pub(crate) fn encode(tag: Tag, key: u64, out: &mut [u8]) {
    let seq = if out.len() >= SEQUENCED { tag.seq } else { 0 };
    out[..4].copy_from_slice(&(tag.logical as u32 + 1).to_le_bytes());
    out[4..8].copy_from_slice(&check(tag.logical, seq, key).to_le_bytes());
    out[8..].fill(0);
    if out.len() >= SEQUENCED {
        out[8..16].copy_from_slice(&seq.to_le_bytes());
    }
}

/// The tag of FTL instance `key` in one block's metadata; `None` for a
/// block without one (never written by the FTL, padding, or metadata that
/// fails the check).
pub(crate) fn decode(meta: &[u8], key: u64) -> Option<Tag> {
    let word = |i: usize| u32::from_le_bytes(meta[i..i + 4].try_into().expect("4 bytes"));
    let logical = (word(0) as u64).checked_sub(1)?;
    let seq = match meta.get(8..16) {
        Some(s) => u64::from_le_bytes(s.try_into().expect("8 bytes")),
        None => 0,
    };
    (word(4) == check(logical, seq, key)).then_some(Tag { logical, seq })
}

/// Fills `meta` (blocks × `ms` bytes) with the tags `tag(first..)` of
/// instance `key`.
pub(crate) fn fill(meta: &mut [u8], ms: usize, key: u64, tag: &impl Fn(u32) -> Tag, first: u32) {
    for (i, out) in meta.chunks_exact_mut(ms).enumerate() {
        encode(tag(first + i as u32), key, out);
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

    #[test]
    fn tags_round_trip_with_and_without_sequence_numbers() {
        let key = 0x1234_5678_9ABC;
        let t = Tag { logical: 41, seq: first_seq(3) + 7 };
        let mut m16 = [0xAAu8; 16];
        encode(t, key, &mut m16);
        assert_eq!(decode(&m16, key), Some(t));
        let mut m64 = [0xAAu8; 64];
        encode(t, key, &mut m64);
        assert_eq!(decode(&m64, key), Some(t));
        assert!(m64[16..].iter().all(|&b| b == 0));
        let mut m8 = [0xAAu8; 8];
        encode(t, key, &mut m8);
        assert_eq!(decode(&m8, key), Some(Tag { logical: 41, seq: 0 }));
        assert_eq!(decode(&[0u8; 16], key), None);
        let top = Tag { logical: u32::MAX as u64 - 1, seq: u64::MAX };
        encode(top, key, &mut m16);
        assert_eq!(decode(&m16, key), Some(top));
    }

    #[test]
    fn foreign_or_damaged_metadata_is_no_tag() {
        let key = 77;
        let mut m = [0u8; 16];
        encode(Tag { logical: 5, seq: 9 }, key, &mut m);
        assert_eq!(decode(&m, key + 1), None, "another instance's tag");
        for byte in 0..16 {
            let mut d = m;
            d[byte] ^= 0x04;
            assert_ne!(decode(&d, key), Some(Tag { logical: 5, seq: 9 }), "byte {byte}");
        }
        assert_eq!(decode(&[0xFFu8; 16], key), None);
    }

    #[test]
    fn generations_order_sequence_numbers() {
        assert!(first_seq(2) > first_seq(1) + (1 << 39));
        assert_eq!(first_seq(0), 0);
    }
}
