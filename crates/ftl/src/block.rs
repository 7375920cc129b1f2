//! The FTL as a [`BlockDevice`]: the request checks, and its errors in
//! the classes of [`BlockError`].

use zns_block::{BlockDevice, BlockError};

use crate::error::{FtlError, Result};
use crate::Ftl;

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

impl From<FtlError> for BlockError {
    fn from(e: FtlError) -> BlockError {
        match e {
            FtlError::OutOfRange { lba, blocks, capacity } => {
                BlockError::OutOfRange { lba, blocks, capacity }
            }
            FtlError::Misaligned { len, block_size } => BlockError::Misaligned { len, block_size },
            FtlError::NoSpace => BlockError::NoSpace,
            e @ FtlError::DamagedData { logical, .. } => {
                BlockError::Unreadable { lba: logical, source: Box::new(e) }
            }
            e @ FtlError::Device { .. } => BlockError::Device { source: Box::new(e) },
            e => BlockError::Failed { source: Box::new(e) },
        }
    }
}

impl BlockDevice for Ftl {
    fn block_size(&self) -> u32 {
        Ftl::block_size(self)
    }

    fn capacity_blocks(&self) -> u64 {
        Ftl::capacity_blocks(self)
    }

    fn read(&self, lba: u64, buf: &mut [u8]) -> zns_block::Result<()> {
        Ok(Ftl::read(self, lba, buf)?)
    }

    fn write(&self, lba: u64, buf: &[u8]) -> zns_block::Result<()> {
        Ok(Ftl::write(self, lba, buf)?)
    }

    fn flush(&self) -> zns_block::Result<()> {
        Ok(Ftl::flush(self)?)
    }

    fn discard(&self, lba: u64, blocks: u64) -> zns_block::Result<()> {
        Ok(Ftl::discard(self, lba, blocks)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ftl_errors_keep_their_class_and_their_source() {
        let e: BlockError = FtlError::OutOfRange { lba: 1, blocks: 2, capacity: 2 }.into();
        assert!(matches!(e, BlockError::OutOfRange { lba: 1, blocks: 2, capacity: 2 }));
        let e: BlockError = FtlError::Misaligned { len: 3, block_size: 512 }.into();
        assert!(matches!(e, BlockError::Misaligned { len: 3, block_size: 512 }));
        assert!(matches!(BlockError::from(FtlError::NoSpace), BlockError::NoSpace));
        let damaged = FtlError::DamagedData { logical: 7, zone: 2, offset: 3, why: "fails" };
        let e = BlockError::from(damaged);
        assert!(matches!(e, BlockError::Unreadable { lba: 7, .. }), "{e}");
        assert!(matches!(e.source_as::<FtlError>(), Some(FtlError::DamagedData { .. })));
        let e = BlockError::from(FtlError::NotFormatted);
        assert!(matches!(e, BlockError::Failed { .. }), "{e}");
        assert_eq!(e.to_string(), FtlError::NotFormatted.to_string());
    }
}
