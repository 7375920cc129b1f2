//! # zns-block
//!
//! The random-access block device interface of znskit: what its exports
//! (NBD, the NVMe/TCP target's block namespaces, ublk) serve and what its
//! host-side FTL (`zns-ftl`) offers. It sits below both, so an export
//! depends on the interface, not on the FTL, and anything implementing
//! [`BlockDevice`] can be exported.
//!
//! | item | what it is |
//! |---|---|
//! | [`BlockDevice`] | the trait: whole blocks read, written, flushed, discarded |
//! | [`BlockError`] | why a request failed, in the classes every export maps to its protocol |
//! | [`MemoryBlockDevice`] | a device in memory: the reference model of tests |
//! | [`write_zeroes`] | zeros written a chunk at a time (an export's Write Zeroes) |
//! | [`check_request`], [`check_range`] | the range and alignment checks of a request |
//!
//! ```
//! use zns_block::{BlockDevice, BlockError, MemoryBlockDevice};
//! let d = MemoryBlockDevice::new(512, 8);
//! d.write_fua(2, &[7u8; 1024], true).unwrap();
//! let mut b = [0u8; 512];
//! d.read(3, &mut b).unwrap();
//! assert_eq!(b, [7u8; 512]);
//! assert!(matches!(d.read(8, &mut b), Err(BlockError::OutOfRange { .. })));
//! ```

mod error;
mod memory;

pub use error::{BlockError, Result};
pub use memory::MemoryBlockDevice;

/// A random-access block device: any number of whole blocks read or
/// written at any block address.
///
/// Reads and writes take buffers whose length is a whole number of
/// [`BlockDevice::block_size`] blocks; a write is acknowledged when it
/// returns, and durable (it survives a power cut) once a later
/// [`BlockDevice::flush`] returns. A block never written, or discarded,
/// reads as zeros.
///
/// Thread safety: implementations are `Send + Sync` and every method may be
/// called from many threads at once. Concurrent writes to the same block
/// land in an unspecified order; a read concurrent with a write of the
/// same block returns the old or the new data, never a mix within a block.
pub trait BlockDevice: Send + Sync {
    /// Bytes in one block.
    fn block_size(&self) -> u32;

    /// Number of blocks.
    fn capacity_blocks(&self) -> u64;

    /// Reads `buf.len()` bytes (whole blocks) from block `lba`.
    fn read(&self, lba: u64, buf: &mut [u8]) -> Result<()>;

    /// Writes `buf` (whole blocks) at block `lba`.
    fn write(&self, lba: u64, buf: &[u8]) -> Result<()>;

    /// Makes every write acknowledged before this call durable.
    fn flush(&self) -> Result<()>;

    /// Discards (trims) `blocks` blocks from `lba`: they read as zeros and
    /// their space can be reclaimed.
    fn discard(&self, lba: u64, blocks: u64) -> Result<()>;

    /// Capacity in bytes.
    fn capacity_bytes(&self) -> u64 {
        self.capacity_blocks() * self.block_size() as u64
    }

    /// Writes `buf` at `lba`, durable before it returns when `fua` (Force
    /// Unit Access) is asked for: the write, then a flush. A device with a
    /// cheaper way to make one write durable overrides it.
    fn write_fua(&self, lba: u64, buf: &[u8], fua: bool) -> Result<()> {
        self.write(lba, buf)?;
        if fua {
            self.flush()?;
        }
        Ok(())
    }
}

/// Writes zeros over `blocks` blocks from `lba`, at most `chunk_bytes` (at
/// least one block) per write, from `zeros`, a buffer of zeros the caller
/// keeps between calls (grown here as needed, never filled with anything
/// else). The range is checked whole first: nothing is written when it
/// reaches past the end.
pub fn write_zeroes(
    dev: &dyn BlockDevice,
    lba: u64,
    blocks: u64,
    zeros: &mut Vec<u8>,
    chunk_bytes: usize,
) -> Result<()> {
    check_range(lba, blocks, dev.capacity_blocks())?;
    let bs = dev.block_size() as u64;
    let chunk = (chunk_bytes as u64 / bs).max(1);
    let most = (chunk.min(blocks) * bs) as usize;
    if zeros.len() < most {
        zeros.resize(most, 0);
    }
    let mut at = 0u64;
    while at < blocks {
        let k = chunk.min(blocks - at);
        dev.write(lba + at, &zeros[..(k * bs) as usize])?;
        at += k;
    }
    Ok(())
}

/// Checks a request of `len` bytes at block `lba` against a device of
/// `capacity` blocks of `block_size` bytes; returns its length in blocks.
pub fn check_request(lba: u64, len: usize, block_size: u32, capacity: u64) -> Result<u64> {
    if !len.is_multiple_of(block_size as usize) {
        return Err(BlockError::Misaligned { len, block_size });
    }
    let blocks = (len / block_size as usize) as u64;
    check_range(lba, blocks, capacity)?;
    Ok(blocks)
}

/// Checks a range of `blocks` blocks from `lba` against a device of
/// `capacity` blocks.
pub fn check_range(lba: u64, blocks: u64, capacity: u64) -> Result<()> {
    if lba.checked_add(blocks).is_none_or(|end| end > capacity) {
        return Err(BlockError::OutOfRange { lba, blocks, capacity });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_zeroes_writes_chunks_and_refuses_a_range_past_the_end_whole() {
        let d = MemoryBlockDevice::new(512, 16);
        d.write(0, &[9u8; 16 * 512]).unwrap();
        let mut zeros = Vec::new();
        write_zeroes(&d, 3, 7, &mut zeros, 1024).unwrap();
        assert_eq!(zeros.len(), 1024, "one chunk of zeros kept");
        let mut b = vec![0u8; 16 * 512];
        d.read(0, &mut b).unwrap();
        for (i, block) in b.chunks(512).enumerate() {
            let want = if (3..10).contains(&i) { 0 } else { 9 };
            assert!(block.iter().all(|&x| x == want), "block {i}");
        }
        let e = write_zeroes(&d, 12, 5, &mut zeros, 1024).unwrap_err();
        assert!(matches!(e, BlockError::OutOfRange { lba: 12, blocks: 5, capacity: 16 }));
        d.read(12, &mut b[..512]).unwrap();
        assert!(b[..512].iter().all(|&x| x == 9), "nothing written");
    }

    #[test]
    fn requests_are_checked_for_whole_blocks_and_range() {
        assert_eq!(check_request(2, 1024, 512, 4).unwrap(), 2);
        assert!(matches!(check_request(0, 100, 512, 4), Err(BlockError::Misaligned { .. })));
        assert!(matches!(check_request(3, 1024, 512, 4), Err(BlockError::OutOfRange { .. })));
        assert!(matches!(check_range(u64::MAX, 2, 4), Err(BlockError::OutOfRange { .. })));
    }
}
