//! CRC32C of a block and its LBA.
//!
//! The value is `CRC32C(lba as 8 little-endian bytes ++ data)`, exactly
//! what `crc32c::crc32c_append(crc32c::crc32c(&lba.to_le_bytes()), data)`
//! gives. Every read of a checksummed image pays it, so it is computed by
//! `crc-fast`, which folds the data with carry-less multiplication
//! (VPCLMULQDQ on AVX-512 CPUs, PCLMULQDQ otherwise, NEON on ARM) and
//! falls back to tables elsewhere: about three times the speed of the
//! CRC32 instruction for a 4 KiB block (docs/benchmarks.md).

use crc_fast::{CrcAlgorithm, Digest};

/// CRC32C of `lba` (little-endian) followed by `data`.
#[inline]
pub(crate) fn block_crc(lba: u64, data: &[u8]) -> u32 {
    // CRC-32/ISCSI is CRC32C (Castagnoli), the 32-bit result in a u64.
    let mut digest = Digest::new(CrcAlgorithm::Crc32Iscsi);
    digest.update(&lba.to_le_bytes());
    digest.update(data);
    digest.finalize() as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equals_the_crc32c_crate_for_every_block_size_and_other_lengths() {
        let mut seed = 0x1234_5678_u32;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            seed as u8
        };
        for len in [512usize, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 0, 7, 100, 4000] {
            let data: Vec<u8> = (0..len).map(|_| next()).collect();
            for lba in [0u64, 1, 0xDEAD_BEEF_0000_0001, u64::MAX] {
                let want = crc32c::crc32c_append(crc32c::crc32c(&lba.to_le_bytes()), &data);
                assert_eq!(block_crc(lba, &data), want, "len {len} lba {lba}");
            }
        }
    }
}
