//! The block device interface the FTL offers, and an in-memory reference
//! implementation of it.

use parking_lot::RwLock;

use crate::error::{FtlError, Result};

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
}

/// Checks a request against a device's size and block size; returns its
/// length in blocks.
pub(crate) fn check_request(lba: u64, len: usize, block_size: u32, capacity: u64) -> Result<u64> {
    if !len.is_multiple_of(block_size as usize) {
        return Err(FtlError::Misaligned { len, block_size });
    }
    let blocks = (len / block_size as usize) as u64;
    check_range(lba, blocks, capacity)?;
    Ok(blocks)
}

/// Checks a block range against a device's size.
pub(crate) fn check_range(lba: u64, blocks: u64, capacity: u64) -> Result<()> {
    if lba.checked_add(blocks).is_none_or(|end| end > capacity) {
        return Err(FtlError::OutOfRange { lba, blocks, capacity });
    }
    Ok(())
}

/// A block device in memory: the reference the FTL is tested against.
///
/// Writes are durable at once; [`BlockDevice::flush`] does nothing.
///
/// Thread safety: `Send + Sync`; one lock over all the data, so each call
/// is atomic with respect to the others.
#[derive(Debug)]
pub struct MemoryBlockDevice {
    block_size: u32,
    blocks: u64,
    data: RwLock<Vec<u8>>,
}

impl MemoryBlockDevice {
    /// A zero-filled device of `blocks` blocks of `block_size` bytes.
    pub fn new(block_size: u32, blocks: u64) -> Self {
        MemoryBlockDevice {
            block_size,
            blocks,
            data: RwLock::new(vec![0; (blocks * block_size as u64) as usize]),
        }
    }

    fn span(&self, lba: u64, len: usize) -> Result<std::ops::Range<usize>> {
        check_request(lba, len, self.block_size, self.blocks)?;
        let start = (lba * self.block_size as u64) as usize;
        Ok(start..start + len)
    }
}

impl BlockDevice for MemoryBlockDevice {
    fn block_size(&self) -> u32 {
        self.block_size
    }

    fn capacity_blocks(&self) -> u64 {
        self.blocks
    }

    fn read(&self, lba: u64, buf: &mut [u8]) -> Result<()> {
        let r = self.span(lba, buf.len())?;
        buf.copy_from_slice(&self.data.read()[r]);
        Ok(())
    }

    fn write(&self, lba: u64, buf: &[u8]) -> Result<()> {
        let r = self.span(lba, buf.len())?;
        self.data.write()[r].copy_from_slice(buf);
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        Ok(())
    }

    fn discard(&self, lba: u64, blocks: u64) -> Result<()> {
        check_range(lba, blocks, self.blocks)?;
        let bs = self.block_size as u64;
        self.data.write()[(lba * bs) as usize..((lba + blocks) * bs) as usize].fill(0);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_device_round_trips_and_checks_requests() {
        let d = MemoryBlockDevice::new(512, 8);
        assert_eq!(d.capacity_bytes(), 4096);
        d.write(2, &[7u8; 1024]).unwrap();
        let mut b = [0u8; 2048];
        d.read(1, &mut b).unwrap();
        assert!(b[..512].iter().all(|&x| x == 0));
        assert!(b[512..1536].iter().all(|&x| x == 7));
        d.discard(3, 1).unwrap();
        d.read(3, &mut b[..512]).unwrap();
        assert!(b[..512].iter().all(|&x| x == 0));
        assert!(matches!(d.write(7, &[0u8; 1024]), Err(FtlError::OutOfRange { .. })));
        assert!(matches!(d.read(0, &mut [0u8; 100]), Err(FtlError::Misaligned { .. })));
        assert!(matches!(d.discard(u64::MAX, 2), Err(FtlError::OutOfRange { .. })));
        d.flush().unwrap();
    }
}
