//! Storage media behind the emulated namespace.
//!
//! A medium stores logical blocks and, optionally, a fixed number of
//! metadata bytes per block, and nothing else. Which blocks are visible to
//! the host (write pointers, zone resets, zone capacity) is decided by the
//! zone state machine above this layer; a medium accepts any in-range
//! request in any order.
//!
//! Rules shared by every backend:
//!
//! * A block that was never written, or was deallocated since, reads as
//!   zeros; so does its metadata.
//! * Metadata is addressed like data (by LBA) but travels in its own buffer
//!   ("metadata in a separate buffer"): [`Media::read_metadata`] and
//!   [`Media::write_metadata`] move `n * metadata_size` bytes for `n`
//!   blocks. A host FTL keeps its reverse mappings there.
//! * Requests are checked, never trusted: a buffer whose length is not a
//!   whole number of blocks (or metadata units) yields
//!   [`MediaError::Misaligned`], a range past the end yields
//!   [`MediaError::OutOfRange`]. Nothing panics on bad input.
//! * A zero-length request is valid when `lba <= blocks` and does nothing.
//!
//! Backends:
//!
//! * [`RamMedia`]: sparse memory, the default. Only touched chunks use
//!   memory, so a device the size of a real ZNS SSD costs almost nothing
//!   until written.
//! * [`FileMedia`]: data and metadata regions of a regular (sparse) file,
//!   for images that survive the process.
//! * [`NullMedia`]: stores nothing and reads zeros, to measure the software
//!   stack alone or run long simulations.
//!
//! [`Checksummed`] wraps a backend with a CRC32C per block, verified on
//! every read (device images have it by default).
//!
//! Every backend is `Send + Sync`; all methods take `&self` and may be
//! called from any number of threads at once. Requests that touch disjoint
//! block ranges never interfere. Requests that overlap are not ordered with
//! respect to each other: each backend documents what a reader can observe
//! while a writer is busy on the same blocks.

#![warn(missing_docs)]

mod arena;
mod checked;
mod crc;
mod file;
mod null;
mod ram;
mod sums;

pub use checked::{
    block_checksum, block_matches, generation_checksum, generation_matches, generation_of,
    Checksummed, Generations, LOST, NO_CHECKSUM, PENDING,
};
pub use file::FileMedia;
pub use null::NullMedia;
pub use ram::RamMedia;

use std::fmt;

/// Smallest supported logical block size in bytes.
pub const MIN_BLOCK_SIZE: u32 = 512;
/// Largest supported logical block size in bytes.
pub const MAX_BLOCK_SIZE: u32 = 65536;
/// Largest supported metadata size in bytes per block (the NVMe LBA format
/// field is 16 bits wide).
pub const MAX_METADATA_SIZE: u32 = u16::MAX as u32;

/// Size and shape of a medium: block size, metadata bytes per block and
/// number of blocks.
///
/// A plain value; [`MediaGeometry::new`] (and every backend constructor)
/// validates it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MediaGeometry {
    /// Logical block size in bytes: a power of two in
    /// [`MIN_BLOCK_SIZE`]`..=`[`MAX_BLOCK_SIZE`].
    pub block_size: u32,
    /// Metadata bytes stored per block, separately from the data; 0 when
    /// the LBA format has no metadata.
    pub metadata_size: u32,
    /// Number of logical blocks; at least 1.
    pub blocks: u64,
}

impl MediaGeometry {
    /// Builds and validates a geometry.
    pub fn new(block_size: u32, metadata_size: u32, blocks: u64) -> Result<Self, MediaError> {
        let geometry = Self { block_size, metadata_size, blocks };
        geometry.validate()?;
        Ok(geometry)
    }

    /// Checks the invariants documented on the fields, and that the data and
    /// metadata regions can be addressed in bytes with a signed 64-bit
    /// offset.
    pub fn validate(&self) -> Result<(), MediaError> {
        if !self.block_size.is_power_of_two()
            || !(MIN_BLOCK_SIZE..=MAX_BLOCK_SIZE).contains(&self.block_size)
        {
            return Err(MediaError::InvalidGeometry(format!(
                "block size {} is not a power of two in {MIN_BLOCK_SIZE}..={MAX_BLOCK_SIZE}",
                self.block_size
            )));
        }
        if self.metadata_size > MAX_METADATA_SIZE {
            return Err(MediaError::InvalidGeometry(format!(
                "metadata size {} exceeds {MAX_METADATA_SIZE}",
                self.metadata_size
            )));
        }
        if self.blocks == 0 {
            return Err(MediaError::InvalidGeometry("media has no blocks".into()));
        }
        let per_block = u64::from(self.block_size) + u64::from(self.metadata_size);
        match self.blocks.checked_mul(per_block) {
            Some(total) if total <= i64::MAX as u64 => Ok(()),
            _ => Err(MediaError::InvalidGeometry(format!(
                "{} blocks of {} bytes plus {} metadata bytes do not fit a 63-bit byte offset",
                self.blocks, self.block_size, self.metadata_size
            ))),
        }
    }

    /// Size of the data region in bytes (`blocks * block_size`).
    pub fn data_bytes(&self) -> u64 {
        self.blocks.saturating_mul(u64::from(self.block_size))
    }

    /// Size of the metadata region in bytes (`blocks * metadata_size`).
    pub fn metadata_bytes(&self) -> u64 {
        self.blocks.saturating_mul(u64::from(self.metadata_size))
    }

    /// Returns `Ok(())` when blocks `lba..lba + count` all exist.
    pub fn check_range(&self, lba: u64, count: u64) -> Result<(), MediaError> {
        match lba.checked_add(count) {
            Some(end) if end <= self.blocks => Ok(()),
            _ => Err(MediaError::OutOfRange { lba, count, capacity: self.blocks }),
        }
    }

    /// Number of blocks a data buffer of `len` bytes covers, or
    /// [`MediaError::Misaligned`].
    pub fn data_blocks(&self, len: usize) -> Result<u64, MediaError> {
        blocks_of(len, self.block_size)
    }

    /// Number of blocks a metadata buffer of `len` bytes covers, or
    /// [`MediaError::NoMetadata`] / [`MediaError::Misaligned`].
    pub fn metadata_blocks(&self, len: usize) -> Result<u64, MediaError> {
        if self.metadata_size == 0 {
            return if len == 0 { Ok(0) } else { Err(MediaError::NoMetadata) };
        }
        blocks_of(len, self.metadata_size)
    }

    /// Validates a data request: buffer length and block range. Returns the
    /// number of blocks.
    fn check_data(&self, lba: u64, len: usize) -> Result<u64, MediaError> {
        let count = self.data_blocks(len)?;
        self.check_range(lba, count)?;
        Ok(count)
    }

    /// Validates a metadata request: buffer length and block range. Returns
    /// the number of blocks.
    fn check_metadata(&self, lba: u64, len: usize) -> Result<u64, MediaError> {
        let count = self.metadata_blocks(len)?;
        self.check_range(lba, count)?;
        Ok(count)
    }
}

fn blocks_of(len: usize, unit: u32) -> Result<u64, MediaError> {
    let unit_len = unit as usize;
    let count = len / unit_len;
    if count * unit_len != len {
        return Err(MediaError::Misaligned { len, unit });
    }
    Ok(count as u64)
}

impl fmt::Display for MediaGeometry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} blocks of {} B", self.blocks, self.block_size)?;
        if self.metadata_size != 0 {
            write!(f, " + {} B metadata", self.metadata_size)?;
        }
        Ok(())
    }
}

/// Why a media request failed.
#[derive(Debug, thiserror::Error)]
pub enum MediaError {
    /// Blocks `lba..lba + count` are not all below `capacity`.
    #[error("blocks {lba}+{count} out of range: media has {capacity} blocks")]
    OutOfRange {
        /// First block of the request.
        lba: u64,
        /// Number of blocks requested.
        count: u64,
        /// Number of blocks in the medium.
        capacity: u64,
    },
    /// The buffer length is not a multiple of the block (or metadata) size.
    #[error("buffer of {len} bytes is not a multiple of {unit} bytes")]
    Misaligned {
        /// Length of the buffer passed in.
        len: usize,
        /// Block size or metadata size it must be a multiple of.
        unit: u32,
    },
    /// A metadata transfer was requested from a medium whose format has no
    /// metadata.
    #[error("the media format has no per-block metadata")]
    NoMetadata,
    /// The geometry violates a rule of [`MediaGeometry::validate`].
    #[error("invalid media geometry: {0}")]
    InvalidGeometry(String),
    /// The data and metadata regions of a [`FileMedia`] overlap or do not
    /// fit a file offset.
    #[error("invalid media file layout: {0}")]
    InvalidLayout(String),
    /// The process could not map memory for a chunk of a [`RamMedia`].
    #[error("out of memory: could not map {bytes} bytes for media data")]
    OutOfMemory {
        /// Bytes of the mapping that failed.
        bytes: usize,
    },
    /// The backing file failed.
    #[error("media I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// Block `lba` does not match its data checksum ([`Checksummed`]): its
    /// contents cannot be returned as written.
    #[error("block {lba} fails its data checksum")]
    Checksum {
        /// The first block of the request that failed.
        lba: u64,
    },
}

/// A store of logical blocks and their per-block metadata.
///
/// Implementations are thread-safe (`Send + Sync`, all methods take
/// `&self`); see the module documentation for the rules every backend
/// follows.
pub trait Media: Send + Sync + fmt::Debug {
    /// Block size, metadata size and number of blocks. Constant for the life
    /// of the medium.
    fn geometry(&self) -> MediaGeometry;

    /// Reads `buf.len() / block_size` blocks starting at `lba` into `buf`.
    /// Blocks never written, or deallocated, read as zeros.
    fn read(&self, lba: u64, buf: &mut [u8]) -> Result<(), MediaError>;

    /// Writes `data.len() / block_size` blocks starting at `lba`.
    fn write(&self, lba: u64, data: &[u8]) -> Result<(), MediaError>;

    /// Reads the metadata of `buf.len() / metadata_size` blocks starting at
    /// `lba`. Metadata of unwritten blocks reads as zeros. Fails with
    /// [`MediaError::NoMetadata`] if the format has none (unless `buf` is
    /// empty).
    fn read_metadata(&self, lba: u64, buf: &mut [u8]) -> Result<(), MediaError>;

    /// Writes the metadata of `data.len() / metadata_size` blocks starting at
    /// `lba`, independently of their data.
    fn write_metadata(&self, lba: u64, data: &[u8]) -> Result<(), MediaError>;

    /// Forgets blocks `lba..lba + blocks`: their data and metadata read as
    /// zeros afterwards, and the memory or disk space holding them is
    /// released where the backend can.
    fn deallocate(&self, lba: u64, blocks: u64) -> Result<(), MediaError>;

    /// A hint that blocks `lba..lba + blocks` are about to be read: a
    /// backend may start pulling them into the CPU caches. Does nothing by
    /// default; never fails and never changes what a read returns, so
    /// callers pass unchecked ranges.
    fn prefetch(&self, lba: u64, blocks: u64) {
        let _ = (lba, blocks);
    }

    /// Makes everything written so far durable (for a file, `fdatasync`).
    /// A no-op for memory and null media.
    fn sync(&self) -> Result<(), MediaError>;

    /// Whether written data can be read back; `false` for [`NullMedia`].
    fn stores_data(&self) -> bool;

    /// Bytes of memory or disk currently holding data and metadata, for
    /// tests and statistics. Each backend documents exactly what it counts.
    fn resident_bytes(&self) -> u64;
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn geometry_validation() {
        assert!(MediaGeometry::new(4096, 0, 1).is_ok());
        assert!(MediaGeometry::new(512, 16, 10).is_ok());
        assert!(MediaGeometry::new(65536, 8, 10).is_ok());
        for bad in [0, 256, 1000, 131072] {
            assert!(matches!(MediaGeometry::new(bad, 0, 10), Err(MediaError::InvalidGeometry(_))));
        }
        assert!(matches!(MediaGeometry::new(4096, 0, 0), Err(MediaError::InvalidGeometry(_))));
        assert!(matches!(MediaGeometry::new(4096, 70000, 1), Err(MediaError::InvalidGeometry(_))));
        assert!(matches!(
            MediaGeometry::new(4096, 0, u64::MAX / 1024),
            Err(MediaError::InvalidGeometry(_))
        ));
    }

    #[test]
    fn geometry_checks() {
        let g = MediaGeometry::new(4096, 8, 100).unwrap();
        assert_eq!(g.data_bytes(), 409_600);
        assert_eq!(g.metadata_bytes(), 800);
        assert!(g.check_range(0, 100).is_ok());
        assert!(g.check_range(100, 0).is_ok());
        assert!(matches!(
            g.check_range(99, 2),
            Err(MediaError::OutOfRange { lba: 99, count: 2, capacity: 100 })
        ));
        assert!(matches!(g.check_range(u64::MAX, 2), Err(MediaError::OutOfRange { .. })));
        assert_eq!(g.data_blocks(8192).unwrap(), 2);
        assert!(matches!(g.data_blocks(100), Err(MediaError::Misaligned { len: 100, unit: 4096 })));
        assert_eq!(g.metadata_blocks(24).unwrap(), 3);
        assert!(matches!(g.metadata_blocks(5), Err(MediaError::Misaligned { .. })));
        let plain = MediaGeometry::new(4096, 0, 100).unwrap();
        assert_eq!(plain.metadata_blocks(0).unwrap(), 0);
        assert!(matches!(plain.metadata_blocks(8), Err(MediaError::NoMetadata)));
    }

    #[test]
    fn backends_are_object_safe_and_thread_safe() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<RamMedia>();
        assert_send_sync::<FileMedia>();
        assert_send_sync::<NullMedia>();
        let g = MediaGeometry::new(512, 0, 8).unwrap();
        let all: Vec<Box<dyn Media>> =
            vec![Box::new(RamMedia::new(g).unwrap()), Box::new(NullMedia::new(g).unwrap())];
        for m in &all {
            assert_eq!(m.geometry(), g);
        }
    }

    /// One step of the model-based test.
    #[derive(Clone, Debug)]
    enum Op {
        Write { lba: u64, count: u64, seed: u8 },
        WriteMeta { lba: u64, count: u64, seed: u8 },
        Read { lba: u64, count: u64 },
        ReadMeta { lba: u64, count: u64 },
        Deallocate { lba: u64, count: u64 },
    }

    /// The obvious implementation: two flat vectors.
    struct Model {
        geometry: MediaGeometry,
        data: Vec<u8>,
        meta: Vec<u8>,
    }

    impl Model {
        fn new(geometry: MediaGeometry) -> Self {
            Self {
                geometry,
                data: vec![0; geometry.data_bytes() as usize],
                meta: vec![0; geometry.metadata_bytes() as usize],
            }
        }

        fn in_range(&self, lba: u64, count: u64) -> bool {
            lba + count <= self.geometry.blocks
        }

        fn data_span(&self, lba: u64, count: u64) -> std::ops::Range<usize> {
            let bs = self.geometry.block_size as usize;
            lba as usize * bs..(lba + count) as usize * bs
        }

        fn meta_span(&self, lba: u64, count: u64) -> std::ops::Range<usize> {
            let ms = self.geometry.metadata_size as usize;
            lba as usize * ms..(lba + count) as usize * ms
        }
    }

    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) | 1).collect()
    }

    /// Applies `ops` to `media` and to the model, comparing every result.
    fn check_against_model(media: &dyn Media, ops: &[Op]) -> Result<(), TestCaseError> {
        let g = media.geometry();
        let bs = g.block_size as usize;
        let ms = g.metadata_size as usize;
        let mut model = Model::new(g);
        for op in ops {
            match *op {
                Op::Write { lba, count, seed } => {
                    let data = pattern(count as usize * bs, seed);
                    let result = media.write(lba, &data);
                    if model.in_range(lba, count) {
                        prop_assert!(result.is_ok(), "{op:?}: {result:?}");
                        let span = model.data_span(lba, count);
                        model.data[span].copy_from_slice(&data);
                    } else {
                        prop_assert!(
                            matches!(result, Err(MediaError::OutOfRange { .. })),
                            "{op:?}: {result:?}"
                        );
                    }
                }
                Op::WriteMeta { lba, count, seed } => {
                    let data = pattern(count as usize * ms, seed);
                    let result = media.write_metadata(lba, &data);
                    if model.in_range(lba, count) {
                        prop_assert!(result.is_ok(), "{op:?}: {result:?}");
                        let span = model.meta_span(lba, count);
                        model.meta[span].copy_from_slice(&data);
                    } else {
                        prop_assert!(
                            matches!(result, Err(MediaError::OutOfRange { .. })),
                            "{op:?}: {result:?}"
                        );
                    }
                }
                Op::Read { lba, count } => {
                    let mut buf = vec![0xa5; count as usize * bs];
                    let result = media.read(lba, &mut buf);
                    if model.in_range(lba, count) {
                        prop_assert!(result.is_ok(), "{op:?}: {result:?}");
                        prop_assert!(buf[..] == model.data[model.data_span(lba, count)], "{op:?}");
                    } else {
                        prop_assert!(
                            matches!(result, Err(MediaError::OutOfRange { .. })),
                            "{op:?}: {result:?}"
                        );
                    }
                }
                Op::ReadMeta { lba, count } => {
                    let mut buf = vec![0xa5; count as usize * ms];
                    let result = media.read_metadata(lba, &mut buf);
                    if model.in_range(lba, count) {
                        prop_assert!(result.is_ok(), "{op:?}: {result:?}");
                        prop_assert!(buf[..] == model.meta[model.meta_span(lba, count)], "{op:?}");
                    } else {
                        prop_assert!(
                            matches!(result, Err(MediaError::OutOfRange { .. })),
                            "{op:?}: {result:?}"
                        );
                    }
                }
                Op::Deallocate { lba, count } => {
                    let result = media.deallocate(lba, count);
                    if model.in_range(lba, count) {
                        prop_assert!(result.is_ok(), "{op:?}: {result:?}");
                        let span = model.data_span(lba, count);
                        model.data[span].fill(0);
                        let span = model.meta_span(lba, count);
                        model.meta[span].fill(0);
                    } else {
                        prop_assert!(
                            matches!(result, Err(MediaError::OutOfRange { .. })),
                            "{op:?}: {result:?}"
                        );
                    }
                }
            }
        }
        // Final full comparison.
        let mut all = vec![0xa5; model.data.len()];
        media.read(0, &mut all).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert!(all == model.data);
        let mut all = vec![0xa5; model.meta.len()];
        media.read_metadata(0, &mut all).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert!(all == model.meta);
        Ok(())
    }

    /// 4 KiB blocks with 16 B metadata: 16 blocks per RAM chunk, so 70
    /// blocks span five chunks with a partial last one.
    const MODEL_BLOCKS: u64 = 70;

    fn op_strategy() -> impl Strategy<Value = Op> {
        // Ranges reach a little past the end so out-of-range requests occur.
        let lba = 0..MODEL_BLOCKS + 4;
        let count = prop_oneof![0..4u64, 0..40u64];
        prop_oneof![
            3 => (lba.clone(), count.clone(), any::<u8>())
                .prop_map(|(lba, count, seed)| Op::Write { lba, count, seed }),
            2 => (lba.clone(), count.clone(), any::<u8>())
                .prop_map(|(lba, count, seed)| Op::WriteMeta { lba, count, seed }),
            2 => (lba.clone(), count.clone()).prop_map(|(lba, count)| Op::Read { lba, count }),
            1 => (lba.clone(), count.clone()).prop_map(|(lba, count)| Op::ReadMeta { lba, count }),
            2 => (lba, count).prop_map(|(lba, count)| Op::Deallocate { lba, count }),
        ]
    }

    fn model_geometry(block_size: u32) -> MediaGeometry {
        MediaGeometry::new(block_size, 16, MODEL_BLOCKS).unwrap()
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        #[test]
        fn ram_media_matches_model(
            block_size in prop_oneof![Just(512u32), Just(4096u32)],
            ops in prop::collection::vec(op_strategy(), 1..60),
        ) {
            let media = RamMedia::new(model_geometry(block_size)).unwrap();
            check_against_model(&media, &ops)?;
        }

        #[test]
        fn file_media_matches_model(
            block_size in prop_oneof![Just(512u32), Just(4096u32)],
            ops in prop::collection::vec(op_strategy(), 1..60),
        ) {
            let g = model_geometry(block_size);
            let file = tempfile::tempfile().unwrap();
            // Leave room for a caller-owned header, then data, a gap, metadata.
            let data_offset = 4096;
            let metadata_offset = data_offset + g.data_bytes() + 512;
            let media = FileMedia::new(file, g, data_offset, metadata_offset).unwrap();
            check_against_model(&media, &ops)?;
        }
    }
}
