//! CRC32C (Castagnoli, CRC-32/ISCSI): NVMe/TCP's header and data digest,
//! and the checksum znskit's on-device formats (emulator images, FTL
//! metadata and block tags, eZNS journals) use. One implementation for all
//! of them: `crc-fast`'s carry-less multiply folding (VPCLMULQDQ,
//! PCLMULQDQ or NEON; tables elsewhere), faster than the CRC32
//! instruction on whole blocks.

use crc_fast::{CrcAlgorithm, Digest};

/// CRC32C of `bytes`.
#[inline]
pub fn crc32c(bytes: &[u8]) -> u32 {
    // CRC-32/ISCSI is CRC32C; the 32-bit value comes in a u64.
    crc_fast::checksum(CrcAlgorithm::Crc32Iscsi, bytes) as u32
}

/// CRC32C continued over more bytes: `crc32c_append(crc32c(a), b)` is
/// `crc32c(a ++ b)`.
#[inline]
pub fn crc32c_append(crc: u32, bytes: &[u8]) -> u32 {
    // The register of a finished CRC32C is its value complemented (the
    // final XOR), so the computation goes on from there.
    let mut d = Digest::new_with_init_state(CrcAlgorithm::Crc32Iscsi, u64::from(!crc));
    d.update(bytes);
    d.finalize() as u32
}

/// CRC32C over several pieces in order, as if they were one buffer.
#[inline]
pub fn crc32c_of(pieces: &[&[u8]]) -> u32 {
    let mut d = Digest::new(CrcAlgorithm::Crc32Iscsi);
    for p in pieces {
        d.update(p);
    }
    d.finalize() as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_answers_and_appending_equals_the_whole() {
        // The check value of CRC-32/ISCSI, and RFC 3720's test vectors.
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(&[0u8; 32]), 0x8A91_36AA);
        assert_eq!(crc32c(&[0xFFu8; 32]), 0x62A8_AB43);
        let inc: Vec<u8> = (0..32).collect();
        assert_eq!(crc32c(&inc), 0x46DD_794E);
        assert_eq!(crc32c(&[]), 0);
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7 + i / 13) as u8).collect();
        for split in [0, 1, 7, 4096, 9_999, 10_000] {
            let (a, b) = data.split_at(split);
            assert_eq!(crc32c_append(crc32c(a), b), crc32c(&data), "split {split}");
            assert_eq!(crc32c_of(&[a, b]), crc32c(&data), "split {split}");
        }
    }
}
