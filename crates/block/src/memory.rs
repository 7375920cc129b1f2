//! A block device in memory: the reference model of tests.

use parking_lot::RwLock;

use crate::{check_range, check_request, BlockDevice, Result};

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
        assert!(matches!(d.write(7, &[0u8; 1024]), Err(crate::BlockError::OutOfRange { .. })));
        assert!(matches!(d.read(0, &mut [0u8; 100]), Err(crate::BlockError::Misaligned { .. })));
        assert!(matches!(d.discard(u64::MAX, 2), Err(crate::BlockError::OutOfRange { .. })));
        d.flush().unwrap();
    }
}
