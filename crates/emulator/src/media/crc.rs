//! CRC32C of a block and its LBA, at the speed of the CPU's CRC32
//! instruction.
//!
//! The value is `CRC32C(lba as 8 little-endian bytes ++ data)`, exactly
//! what `crc32c::crc32c_append(crc32c::crc32c(&lba.to_le_bytes()), data)`
//! gives. With SSE 4.2, a block (a power of two from 512 to 65536 bytes)
//! is cut into three equal runs of 8-byte words whose CRCs are computed
//! side by side (the instruction's latency is three times its throughput),
//! then joined: the CRC register after a run is carried over the next run
//! by a linear map, "append this many zero bytes", kept as four 256-entry
//! tables per block size. One join per block, instead of one per 768
//! bytes, is what makes this faster than the general-purpose crate for
//! whole blocks. Anything else goes to the crate.

/// CRC32C of `lba` (little-endian) followed by `data`.
#[inline]
pub(crate) fn block_crc(lba: u64, data: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        if let Some(t) = fast::tables(data.len()) {
            // SAFETY: `tables` returns `Some` only when the CPU has SSE 4.2,
            // the feature `crc_block` is compiled for.
            return unsafe { fast::crc_block(lba, data, t) };
        }
    }
    crc32c::crc32c_append(crc32c::crc32c(&lba.to_le_bytes()), data)
}

#[cfg(target_arch = "x86_64")]
mod fast {
    use std::arch::x86_64::_mm_crc32_u64;
    use std::sync::OnceLock;

    /// "Append `n` zero bytes" to a CRC register, as four byte tables.
    pub struct Shift([[u32; 256]; 4]);

    impl Shift {
        fn apply(&self, x: u32) -> u32 {
            let t = &self.0;
            t[0][(x & 0xFF) as usize]
                ^ t[1][((x >> 8) & 0xFF) as usize]
                ^ t[2][((x >> 16) & 0xFF) as usize]
                ^ t[3][(x >> 24) as usize]
        }
    }

    /// Block sizes with tables: 512 << i for i in 0..8.
    static TABLES: [OnceLock<Shift>; 8] = [const { OnceLock::new() }; 8];

    /// The tables for blocks of `len` bytes, when this path handles them.
    pub fn tables(len: usize) -> Option<&'static Shift> {
        if !len.is_power_of_two() || !(512..=65536).contains(&len) {
            return None;
        }
        if !std::arch::is_x86_feature_detected!("sse4.2") {
            return None;
        }
        let i = (len.trailing_zeros() - 9) as usize;
        Some(TABLES[i].get_or_init(|| {
            // SAFETY: SSE 4.2 is present (checked above).
            unsafe { build(run_words(len)) }
        }))
    }

    /// Words in each of the three runs of a `len`-byte block.
    fn run_words(len: usize) -> usize {
        len / 8 / 3
    }

    /// The register after `words` zero words from `state`.
    #[target_feature(enable = "sse4.2")]
    fn zeros(mut state: u64, words: usize) -> u64 {
        for _ in 0..words {
            state = _mm_crc32_u64(state, 0);
        }
        state
    }

    /// The tables of "append `words` zero words": the map is linear, so
    /// each entry is the sum of the images of its bits.
    #[target_feature(enable = "sse4.2")]
    fn build(words: usize) -> Shift {
        let basis: Vec<u32> = (0..32).map(|j| zeros(1u64 << j, words) as u32).collect();
        let mut t = [[0u32; 256]; 4];
        for (k, table) in t.iter_mut().enumerate() {
            for (b, entry) in table.iter_mut().enumerate() {
                *entry =
                    (0..8).filter(|bit| b >> bit & 1 == 1).fold(0, |v, bit| v ^ basis[8 * k + bit]);
            }
        }
        Shift(t)
    }

    fn word(c: &[u8]) -> u64 {
        u64::from_le_bytes(c.try_into().expect("8 bytes"))
    }

    /// The block's CRC: three runs side by side, joined, then the 0 to 2
    /// words left over.
    #[target_feature(enable = "sse4.2")]
    pub fn crc_block(lba: u64, data: &[u8], shift: &Shift) -> u32 {
        let run = run_words(data.len()) * 8;
        let (a, rest) = data.split_at(run);
        let (b, rest) = rest.split_at(run);
        let (c, tail) = rest.split_at(run);
        let mut sa = _mm_crc32_u64(u64::from(u32::MAX), lba);
        let (mut sb, mut sc) = (0u64, 0u64);
        for ((x, y), z) in a.chunks_exact(8).zip(b.chunks_exact(8)).zip(c.chunks_exact(8)) {
            sa = _mm_crc32_u64(sa, word(x));
            sb = _mm_crc32_u64(sb, word(y));
            sc = _mm_crc32_u64(sc, word(z));
        }
        let joined = shift.apply(shift.apply(sa as u32) ^ sb as u32) ^ sc as u32;
        let mut s = u64::from(joined);
        for x in tail.chunks_exact(8) {
            s = _mm_crc32_u64(s, word(x));
        }
        !(s as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equals_the_crate_for_every_block_size_and_other_lengths() {
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
