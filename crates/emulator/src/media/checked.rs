//! Data checksums: a medium whose every written block carries a CRC32C,
//! verified on every read.

use std::fs::File;

use super::sums::SumTable;
use super::{Media, MediaError, MediaGeometry};

/// The checksum entry of a block never written or deallocated: such a
/// block must read as zeros.
pub const NO_CHECKSUM: u32 = 0;
/// An entry no data matches: a block whose contents are known to be lost
/// (set by a repair), so reads of it fail instead of returning zeros.
pub const LOST: u32 = u32::MAX;
/// The entry of a block while a write or deallocation of it is under way:
/// set before the data changes, replaced once it has. A process killed in
/// between leaves it, and the block then holds its old or its new data,
/// whole, as a drive's atomic one-block write would: it reads as it is,
/// unverified, until written again (`zns emu check` counts such blocks
/// and `--repair` checksums them as they are).
pub const PENDING: u32 = u32::MAX - 1;

/// The checksum entry of block `lba` holding `data`: CRC32C of the LBA
/// (little-endian) followed by the data, so a block found at another LBA
/// fails too. Never [`NO_CHECKSUM`], [`LOST`] or [`PENDING`] (those map to 1).
#[inline]
pub fn block_checksum(lba: u64, data: &[u8]) -> u32 {
    match super::crc::block_crc(lba, data) {
        NO_CHECKSUM | LOST | PENDING => 1,
        c => c,
    }
}

/// Whether `data` is what a block at `lba` with checksum entry `entry`
/// may hold.
#[inline]
pub fn block_matches(lba: u64, data: &[u8], entry: u32) -> bool {
    match entry {
        NO_CHECKSUM => is_zero(data),
        PENDING => true,
        e => e == block_checksum(lba, data),
    }
}

fn is_zero(data: &[u8]) -> bool {
    // Eight bytes at a time (blocks are multiples of 512 bytes).
    let mut words = data.chunks_exact(8);
    words.all(|w| u64::from_ne_bytes(w.try_into().expect("8 bytes")) == 0)
        && words.remainder().iter().all(|&b| b == 0)
}

/// A medium that keeps a CRC32C of every written block (see
/// [`block_checksum`]) in a table beside it, in the device image or in
/// memory, and verifies it on every read.
///
/// - Writes store the data, then each block's checksum.
/// - Reads fail with [`MediaError::Checksum`], naming the first block
///   whose data does not match its checksum. A block never written (or
///   deallocated) has no checksum and must read as zeros. A mismatch is
///   read again once before it counts, so a read racing a write of the
///   same block is not taken for damage.
/// - Deallocation forgets the checksums with the data.
/// - Metadata is not covered (it is written independently of the data).
///
/// Takes no locks and allocates nothing per request.
#[derive(Debug)]
pub struct Checksummed<M> {
    inner: M,
    sums: SumTable,
}

impl<M: Media> Checksummed<M> {
    /// Checksums kept in memory, for the life of the medium.
    pub fn in_memory(inner: M) -> Result<Self, MediaError> {
        let sums = SumTable::in_memory(inner.geometry().blocks)?;
        Ok(Checksummed { inner, sums })
    }

    /// Checksums kept in `file` from byte `offset` (page aligned), four
    /// bytes per block: the checksum region of a device image.
    pub fn in_file(inner: M, file: &File, offset: u64) -> Result<Self, MediaError> {
        let sums = SumTable::in_file(file, offset, inner.geometry().blocks)
            .map_err(|e| MediaError::InvalidLayout(format!("checksum region: {e}")))?;
        Ok(Checksummed { inner, sums })
    }

    /// The medium holding the data.
    pub fn inner(&self) -> &M {
        &self.inner
    }

    /// The checksum entry of block `lba` (see [`NO_CHECKSUM`], [`LOST`],
    /// [`PENDING`]).
    pub fn checksum(&self, lba: u64) -> Result<u32, MediaError> {
        self.inner.geometry().check_range(lba, 1)?;
        Ok(self.sums.get(lba))
    }

    /// Verifies block `lba` of `buf` (already read), reading it again once
    /// on a mismatch.
    fn verify(&self, lba: u64, block: &mut [u8]) -> Result<(), MediaError> {
        if block_matches(lba, block, self.sums.get(lba)) {
            return Ok(());
        }
        self.inner.read(lba, block)?;
        match block_matches(lba, block, self.sums.get(lba)) {
            true => Ok(()),
            false => Err(MediaError::Checksum { lba }),
        }
    }
}

impl<M: Media> Media for Checksummed<M> {
    fn geometry(&self) -> MediaGeometry {
        self.inner.geometry()
    }

    fn read(&self, lba: u64, buf: &mut [u8]) -> Result<(), MediaError> {
        self.inner.read(lba, buf)?;
        let bs = self.geometry().block_size as usize;
        for (i, block) in buf.chunks_exact_mut(bs).enumerate() {
            self.verify(lba + i as u64, block)?;
        }
        Ok(())
    }

    fn write(&self, lba: u64, data: &[u8]) -> Result<(), MediaError> {
        self.geometry().check_data(lba, data.len())?;
        // Old data with the old checksum, then either data unverified,
        // then new data with the new checksum: no moment at which a killed
        // process leaves a block that fails (see PENDING).
        let bs = self.geometry().block_size as usize;
        for i in 0..(data.len() / bs) as u64 {
            self.sums.set(lba + i, PENDING);
        }
        self.inner.write(lba, data)?;
        for (i, block) in data.chunks_exact(bs).enumerate() {
            let at = lba + i as u64;
            self.sums.set(at, block_checksum(at, block));
        }
        Ok(())
    }

    fn read_metadata(&self, lba: u64, buf: &mut [u8]) -> Result<(), MediaError> {
        self.inner.read_metadata(lba, buf)
    }

    fn write_metadata(&self, lba: u64, data: &[u8]) -> Result<(), MediaError> {
        self.inner.write_metadata(lba, data)
    }

    fn deallocate(&self, lba: u64, blocks: u64) -> Result<(), MediaError> {
        self.geometry().check_range(lba, blocks)?;
        for i in 0..blocks {
            self.sums.set(lba + i, PENDING);
        }
        self.inner.deallocate(lba, blocks)?;
        self.sums.clear(lba, blocks);
        Ok(())
    }

    fn prefetch(&self, lba: u64, blocks: u64) {
        self.inner.prefetch(lba, blocks)
    }

    /// Syncs the medium; a table in the image file is part of the same
    /// file, whose `fdatasync` writes its mapped pages too.
    fn sync(&self) -> Result<(), MediaError> {
        self.inner.sync()
    }

    fn stores_data(&self) -> bool {
        self.inner.stores_data()
    }

    fn resident_bytes(&self) -> u64 {
        self.inner.resident_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::media::{FileMedia, RamMedia};
    use std::os::unix::fs::FileExt;

    fn fill(len: usize, seed: u8) -> Vec<u8> {
        (0..len).map(|i| (i as u8).wrapping_mul(13) ^ seed).collect()
    }

    fn check_media(m: &dyn Media, corrupt: &dyn Fn(u64)) {
        let bs = m.geometry().block_size as usize;
        let data = fill(8 * bs, 5);
        m.write(10, &data).unwrap();
        let mut back = vec![0u8; 8 * bs];
        m.read(10, &mut back).unwrap();
        assert_eq!(back, data);
        // Never written blocks read as zeros.
        let mut z = vec![1u8; 2 * bs];
        m.read(0, &mut z).unwrap();
        assert!(z.iter().all(|&b| b == 0));
        // A damaged block fails, alone or within a longer read.
        corrupt(13);
        let e = m.read(10, &mut back).unwrap_err();
        assert!(matches!(e, MediaError::Checksum { lba: 13 }), "{e}");
        assert!(matches!(m.read(13, &mut back[..bs]), Err(MediaError::Checksum { lba: 13 })));
        m.read(10, &mut back[..3 * bs]).unwrap();
        // Rewriting it heals it; deallocating forgets data and checksum.
        m.write(13, &data[3 * bs..4 * bs]).unwrap();
        m.read(10, &mut back).unwrap();
        assert_eq!(back, data);
        corrupt(14);
        m.deallocate(14, 1).unwrap();
        m.read(14, &mut back[..bs]).unwrap();
        assert!(back[..bs].iter().all(|&b| b == 0));
    }

    #[test]
    fn file_checksums_catch_flipped_bits() {
        let g = MediaGeometry::new(4096, 0, 64).unwrap();
        let file = tempfile::tempfile().unwrap();
        let (sums_at, data_at) = (1 << 20, 2 << 20);
        file.set_len(data_at + g.data_bytes()).unwrap();
        let raw = file.try_clone().unwrap();
        let media = FileMedia::new(file.try_clone().unwrap(), g, data_at, 0).unwrap();
        let m = Checksummed::in_file(media, &file, sums_at).unwrap();
        let flip = |lba: u64| {
            let at = data_at + lba * 4096 + 77;
            let mut b = [0u8; 1];
            raw.read_exact_at(&mut b, at).unwrap();
            raw.write_all_at(&[b[0] ^ 0x04], at).unwrap();
        };
        check_media(&m, &flip);
        // The checksum entry itself damaged, and data where none was written.
        m.write(20, &fill(4096, 9)).unwrap();
        raw.write_all_at(&[0xAA], sums_at + 20 * 4).unwrap();
        assert!(matches!(m.read(20, &mut [0; 4096]), Err(MediaError::Checksum { lba: 20 })));
        raw.write_all_at(&[1], data_at + 30 * 4096).unwrap();
        assert!(matches!(m.read(30, &mut [0; 4096]), Err(MediaError::Checksum { lba: 30 })));
        // A block copied to another LBA does not pass for it.
        let mut b = vec![0u8; 4096];
        raw.read_exact_at(&mut b, data_at + 10 * 4096).unwrap();
        raw.write_all_at(&b, data_at + 11 * 4096).unwrap();
        raw.write_all_at(&m.checksum(10).unwrap().to_le_bytes(), sums_at + 11 * 4).unwrap();
        assert!(matches!(m.read(11, &mut b), Err(MediaError::Checksum { lba: 11 })));
        // A lost block fails even as zeros.
        m.deallocate(40, 1).unwrap();
        raw.write_all_at(&LOST.to_le_bytes(), sums_at + 40 * 4).unwrap();
        assert!(matches!(m.read(40, &mut b), Err(MediaError::Checksum { lba: 40 })));
    }

    #[test]
    fn an_interrupted_write_leaves_old_or_new_data_readable() {
        let g = MediaGeometry::new(4096, 0, 8).unwrap();
        let m = Checksummed::in_memory(RamMedia::new(g).unwrap()).unwrap();
        m.write(2, &fill(4096, 1)).unwrap();
        // Killed after the entry went pending, before or after the data.
        m.sums.set(2, PENDING);
        let mut b = vec![0u8; 4096];
        m.read(2, &mut b).unwrap();
        assert_eq!(b, fill(4096, 1));
        m.inner.write(2, &fill(4096, 2)).unwrap();
        m.read(2, &mut b).unwrap();
        assert_eq!(b, fill(4096, 2));
        // The next write checks it again.
        m.write(2, &fill(4096, 3)).unwrap();
        assert_eq!(m.checksum(2).unwrap(), block_checksum(2, &fill(4096, 3)));
    }

    #[test]
    fn memory_checksums_work_on_ram_media() {
        let g = MediaGeometry::new(512, 8, 256).unwrap();
        let m = Checksummed::in_memory(RamMedia::new(g).unwrap()).unwrap();
        // RAM cannot be damaged from outside; damage its checksum instead.
        let corrupt = |lba: u64| m.sums.set(lba, m.sums.get(lba) ^ 1);
        check_media(&m, &corrupt);
        // Metadata passes through unchecked.
        m.write_metadata(3, &[7; 16]).unwrap();
        let mut md = [0u8; 16];
        m.read_metadata(3, &mut md).unwrap();
        assert_eq!(md, [7; 16]);
    }

    #[test]
    fn checksums_never_take_the_reserved_values() {
        assert_ne!(block_checksum(0, &[0; 512]), NO_CHECKSUM);
        assert!(block_matches(5, &[0; 512], NO_CHECKSUM));
        assert!(!block_matches(5, &[0; 512], LOST));
        assert!(!block_matches(5, &[1; 512], NO_CHECKSUM));
        assert!(block_matches(5, &[1; 512], PENDING));
        assert_ne!(block_checksum(1, &[9; 512]), block_checksum(2, &[9; 512]));
    }
}
