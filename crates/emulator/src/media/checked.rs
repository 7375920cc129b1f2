//! Data checksums: a medium whose every written block carries a CRC32C,
//! verified on every read, bound to the block's LBA and to the write
//! generation of its zone; optionally its metadata too.

use std::fs::File;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;

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

/// Multiplier that spreads a generation over the 32 bits of an entry (odd,
/// so the map is a bijection and [`generation_of`] can invert it).
const MIX: u32 = 0x9E37_79B1;
/// The inverse of [`MIX`] modulo 2^32 (Newton's iteration doubles the
/// correct low bits each step: 5 steps give 32).
const UNMIX: u32 = {
    let mut inv = MIX;
    let mut i = 0;
    while i < 5 {
        inv = inv.wrapping_mul(2u32.wrapping_sub(MIX.wrapping_mul(inv)));
        i += 1;
    }
    inv
};

/// The checksum entry of block `lba` holding `data` in write generation 0:
/// CRC32C of the LBA (little-endian) followed by the data, so a block found
/// at another LBA fails too. Never [`NO_CHECKSUM`], [`LOST`] or [`PENDING`]
/// (those map to 1).
#[inline]
pub fn block_checksum(lba: u64, data: &[u8]) -> u32 {
    generation_checksum(lba, 0, data)
}

/// The checksum entry of block `lba` holding `data` written in zone write
/// generation `generation`: [`block_checksum`]'s CRC32C with the
/// generation, spread over 32 bits, folded in by XOR. Generation 0 gives
/// exactly the entries of images made before generations existed; a block
/// left over from before a zone reset (an older generation) never passes
/// for the zone's current data, whatever its contents.
#[inline]
pub fn generation_checksum(lba: u64, generation: u16, data: &[u8]) -> u32 {
    match super::crc::block_crc(lba, data) ^ u32::from(generation).wrapping_mul(MIX) {
        NO_CHECKSUM | LOST | PENDING => 1,
        c => c,
    }
}

/// The write generation in which `data` at `lba` was given checksum entry
/// `entry`, when there is one (the entry is a valid checksum of this data
/// in some generation); what a rebuild of lost zone state uses to tell
/// current blocks from stale ones.
pub fn generation_of(lba: u64, data: &[u8], entry: u32) -> Option<u16> {
    if matches!(entry, NO_CHECKSUM | LOST | PENDING) {
        return None;
    }
    let g = (super::crc::block_crc(lba, data) ^ entry).wrapping_mul(UNMIX);
    let g = u16::try_from(g).ok()?;
    (generation_checksum(lba, g, data) == entry).then_some(g)
}

/// Whether `data` is what a block at `lba` with checksum entry `entry`
/// may hold (generation 0).
#[inline]
pub fn block_matches(lba: u64, data: &[u8], entry: u32) -> bool {
    generation_matches(lba, 0, data, entry)
}

/// Whether `data` is what a block at `lba` of write generation
/// `generation` with checksum entry `entry` may hold.
#[inline]
pub fn generation_matches(lba: u64, generation: u16, data: &[u8], entry: u32) -> bool {
    match entry {
        NO_CHECKSUM => is_zero(data),
        PENDING => true,
        e => e == generation_checksum(lba, generation, data),
    }
}

fn is_zero(data: &[u8]) -> bool {
    // Eight bytes at a time when the length allows (blocks are multiples
    // of 512 bytes; metadata units may be any size).
    let mut words = data.chunks_exact(8);
    words.all(|w| u64::from_ne_bytes(w.try_into().expect("8 bytes")) == 0)
        && words.remainder().iter().all(|&b| b == 0)
}

/// The write generation of every zone of a namespace: a counter per zone
/// that a reset (or Offline) advances, so checksums of the zone's blocks
/// written before and after it differ. Kept in the zone state (saved in
/// every zone-state slot of an image) and read by [`Checksummed`] on every
/// block; shared, lock-free.
///
/// A table made `fixed` never advances: images made before generations
/// existed keep generation 0 everywhere, exactly as they were written.
#[derive(Debug)]
pub struct Generations {
    zone_size: u64,
    zones: Box<[AtomicU16]>,
    fixed: bool,
}

impl Generations {
    /// `zones` zones of `zone_size` blocks, every one in generation 0; a
    /// `fixed` table never advances.
    pub fn new(zone_size: u64, zones: u32, fixed: bool) -> Self {
        Generations {
            zone_size: zone_size.max(1),
            zones: (0..zones).map(|_| AtomicU16::new(0)).collect(),
            fixed,
        }
    }

    /// Whether resets advance generations (false for older images).
    pub fn advancing(&self) -> bool {
        !self.fixed
    }

    /// The generation of the zone holding `lba` (0 past the last zone).
    #[inline]
    pub fn of_lba(&self, lba: u64) -> u16 {
        self.zones.get((lba / self.zone_size) as usize).map_or(0, |g| g.load(Ordering::Acquire))
    }

    /// The generation of zone `zone` (0 past the last zone).
    pub fn get(&self, zone: u32) -> u16 {
        self.zones.get(zone as usize).map_or(0, |g| g.load(Ordering::Acquire))
    }

    /// Sets zone `zone`'s generation (as a zone state read back says);
    /// ignored on a fixed table or past the last zone.
    pub fn set(&self, zone: u32, generation: u16) {
        if let (false, Some(g)) = (self.fixed, self.zones.get(zone as usize)) {
            g.store(generation, Ordering::Release);
        }
    }

    /// Moves zone `zone` to its next generation (wrapping after 65535: a
    /// block would have to survive 65536 resets of its zone undeallocated
    /// to pass again).
    pub fn advance(&self, zone: u32) {
        if let (false, Some(g)) = (self.fixed, self.zones.get(zone as usize)) {
            g.fetch_add(1, Ordering::AcqRel);
        }
    }
}

/// A medium that keeps a CRC32C of every written block (see
/// [`generation_checksum`]) in a table beside it, in the device image or in
/// memory, and verifies it on every read; optionally one of every block's
/// metadata too, in a second table.
///
/// - Writes store the data, then each block's checksum; metadata the same
///   way in its own table.
/// - Reads fail with [`MediaError::Checksum`], naming the first block
///   whose data (or metadata) does not match its checksum. A block never
///   written (or deallocated) has no checksum and must read as zeros. A
///   mismatch is read again once before it counts, so a read racing a
///   write of the same block is not taken for damage.
/// - Deallocation forgets the checksums with the data and metadata.
/// - With [`Checksummed::with_generations`], each checksum is bound to the
///   write generation of the block's zone, so data from before a reset
///   never passes for current data.
///
/// Takes no locks and allocates nothing per request.
#[derive(Debug)]
pub struct Checksummed<M> {
    inner: M,
    sums: SumTable,
    meta_sums: Option<SumTable>,
    generations: Option<Arc<Generations>>,
}

impl<M: Media> Checksummed<M> {
    /// Checksums kept in memory, for the life of the medium (metadata's
    /// too, when the geometry has metadata).
    pub fn in_memory(inner: M) -> Result<Self, MediaError> {
        let g = inner.geometry();
        let sums = SumTable::in_memory(g.blocks)?;
        let meta_sums = match g.metadata_size {
            0 => None,
            _ => Some(SumTable::in_memory(g.blocks)?),
        };
        Ok(Checksummed { inner, sums, meta_sums, generations: None })
    }

    /// Checksums kept in `file` from byte `offset` (page aligned), four
    /// bytes per block: the checksum region of a device image. Metadata is
    /// not covered unless [`Checksummed::metadata_in_file`] says where.
    pub fn in_file(inner: M, file: &File, offset: u64) -> Result<Self, MediaError> {
        let sums = SumTable::in_file(file, offset, inner.geometry().blocks)
            .map_err(|e| MediaError::InvalidLayout(format!("checksum region: {e}")))?;
        Ok(Checksummed { inner, sums, meta_sums: None, generations: None })
    }

    /// Keeps metadata checksums in `file` from byte `offset` (page
    /// aligned), four bytes per block: the metadata checksum region of a
    /// device image.
    pub fn metadata_in_file(mut self, file: &File, offset: u64) -> Result<Self, MediaError> {
        let t = SumTable::in_file(file, offset, self.inner.geometry().blocks)
            .map_err(|e| MediaError::InvalidLayout(format!("metadata checksum region: {e}")))?;
        self.meta_sums = Some(t);
        Ok(self)
    }

    /// Binds every checksum to the write generation of its block's zone.
    pub fn with_generations(mut self, generations: Arc<Generations>) -> Self {
        self.generations = Some(generations);
        self
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

    #[inline]
    fn generation(&self, lba: u64) -> u16 {
        self.generations.as_ref().map_or(0, |g| g.of_lba(lba))
    }

    /// Verifies block `lba` of `buf` (already read), reading it again once
    /// on a mismatch.
    fn verify(&self, lba: u64, block: &mut [u8]) -> Result<(), MediaError> {
        let g = self.generation(lba);
        if generation_matches(lba, g, block, self.sums.get(lba)) {
            return Ok(());
        }
        self.inner.read(lba, block)?;
        match generation_matches(lba, g, block, self.sums.get(lba)) {
            true => Ok(()),
            false => Err(MediaError::Checksum { lba }),
        }
    }

    /// Verifies the metadata of block `lba` (already read into `unit`),
    /// reading it again once on a mismatch.
    fn verify_metadata(&self, t: &SumTable, lba: u64, unit: &mut [u8]) -> Result<(), MediaError> {
        let g = self.generation(lba);
        if generation_matches(lba, g, unit, t.get(lba)) {
            return Ok(());
        }
        self.inner.read_metadata(lba, unit)?;
        match generation_matches(lba, g, unit, t.get(lba)) {
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
            self.sums.set(at, generation_checksum(at, self.generation(at), block));
        }
        Ok(())
    }

    fn read_metadata(&self, lba: u64, buf: &mut [u8]) -> Result<(), MediaError> {
        self.inner.read_metadata(lba, buf)?;
        let (Some(t), ms) = (&self.meta_sums, self.geometry().metadata_size as usize) else {
            return Ok(());
        };
        for (i, unit) in buf.chunks_exact_mut(ms.max(1)).enumerate() {
            self.verify_metadata(t, lba + i as u64, unit)?;
        }
        Ok(())
    }

    fn write_metadata(&self, lba: u64, data: &[u8]) -> Result<(), MediaError> {
        let Some(t) = &self.meta_sums else { return self.inner.write_metadata(lba, data) };
        self.geometry().check_metadata(lba, data.len())?;
        // Pending first, as for data: a killed process leaves the old or
        // the new metadata readable, never a mismatch.
        let ms = (self.geometry().metadata_size as usize).max(1);
        for i in 0..(data.len() / ms) as u64 {
            t.set(lba + i, PENDING);
        }
        self.inner.write_metadata(lba, data)?;
        for (i, unit) in data.chunks_exact(ms).enumerate() {
            let at = lba + i as u64;
            t.set(at, generation_checksum(at, self.generation(at), unit));
        }
        Ok(())
    }

    fn deallocate(&self, lba: u64, blocks: u64) -> Result<(), MediaError> {
        self.geometry().check_range(lba, blocks)?;
        for i in 0..blocks {
            self.sums.set(lba + i, PENDING);
            if let Some(t) = &self.meta_sums {
                t.set(lba + i, PENDING);
            }
        }
        self.inner.deallocate(lba, blocks)?;
        self.sums.clear(lba, blocks);
        if let Some(t) = &self.meta_sums {
            t.clear(lba, blocks);
        }
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
        // Metadata is checked too: damage to its checksum fails the read.
        m.write_metadata(3, &[7; 8]).unwrap();
        let mut md = [0u8; 8];
        m.read_metadata(3, &mut md).unwrap();
        assert_eq!(md, [7; 8]);
        let t = m.meta_sums.as_ref().unwrap();
        t.set(3, t.get(3) ^ 1);
        assert!(matches!(m.read_metadata(3, &mut md), Err(MediaError::Checksum { lba: 3 })));
        m.deallocate(3, 1).unwrap();
        m.read_metadata(3, &mut md).unwrap();
        assert_eq!(md, [0; 8]);
    }

    #[test]
    fn generations_bind_checksums_and_can_be_read_back() {
        let data = fill(4096, 3);
        // Generation 0 is the checksum images had before generations.
        assert_eq!(generation_checksum(9, 0, &data), block_checksum(9, &data));
        for g in [0u16, 1, 2, 77, u16::MAX] {
            let e = generation_checksum(9, g, &data);
            assert_eq!(generation_of(9, &data, e), Some(g));
            assert!(generation_matches(9, g, &data, e));
            // Stale data (another generation) never passes, nor another LBA.
            assert!(!generation_matches(9, g.wrapping_add(1), &data, e));
            assert!(!generation_matches(10, g, &data, e));
        }
        assert_eq!(generation_of(9, &fill(4096, 4), generation_checksum(9, 5, &data)), None);
        assert_eq!(generation_of(9, &data, NO_CHECKSUM), None);
        // A medium bound to generations checks each block in its zone's.
        let g = MediaGeometry::new(4096, 0, 16).unwrap();
        let gens = Arc::new(Generations::new(8, 2, false));
        let m = Checksummed::in_memory(RamMedia::new(g).unwrap())
            .unwrap()
            .with_generations(Arc::clone(&gens));
        m.write(8, &data).unwrap();
        assert_eq!(m.checksum(8).unwrap(), generation_checksum(8, 0, &data));
        gens.advance(1);
        assert!(matches!(m.read(8, &mut vec![0; 4096]), Err(MediaError::Checksum { lba: 8 })));
        m.write(8, &data).unwrap();
        assert_eq!(m.checksum(8).unwrap(), generation_checksum(8, 1, &data));
        m.read(8, &mut vec![0; 4096]).unwrap();
        // A fixed table (an image from before generations) never advances.
        let fixed = Generations::new(8, 2, true);
        fixed.advance(0);
        fixed.set(1, 4);
        assert_eq!((fixed.get(0), fixed.get(1), fixed.advancing()), (0, 0, false));
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
