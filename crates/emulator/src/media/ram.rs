//! Sparse in-memory media.
//!
//! The address space is cut into chunks of 64 KiB of data (16 blocks of
//! 4 KiB, 128 blocks of 512 B, one block of 64 KiB), each followed in the
//! same allocation by the metadata of its blocks. Chunks are found through a
//! two-level table:
//!
//! * the top level is allocated up front: one lazily initialised pointer per
//!   4096 chunks (256 MiB of data address space), about 24 bytes each;
//! * a second-level table holds 4096 chunk slots and is allocated on the
//!   first write into its range;
//! * a chunk slot is its own `RwLock<Option<Chunk>>` and gets its buffer on
//!   the first write into the chunk, from an arena of 2 MiB-aligned slabs
//!   the kernel may back with huge pages (see `arena`), so random reads
//!   over a large working set miss the TLB far less often than they would
//!   with one heap allocation per chunk.
//!
//! A lookup is two indexed loads and one uncontended lock of the slot: no
//! global lock, no hashing, and no allocation except when a chunk or table
//! is first touched. Threads working in different chunks (in particular in
//! different zones) share nothing but the two atomic counters updated when
//! chunks come and go.

use std::fmt;
use std::mem::size_of;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;

use parking_lot::RwLock;

use super::arena::{self, Arena, Chunk};
use super::{Media, MediaError, MediaGeometry};

/// Data bytes per chunk (log2): 64 KiB.
const CHUNK_DATA_SHIFT: u32 = 16;
/// Bytes [`RamMedia`] asks the CPU to prefetch for an upcoming read.
const PREFETCH_BYTES: usize = 512;
/// Chunk slots per second-level table (log2): 4096.
const TABLE_SHIFT: u32 = 12;
const TABLE_SLOTS: u64 = 1 << TABLE_SHIFT;
/// Most second-level tables, bounding the up-front top-level table to
/// about 100 MB and the data address space to 1 PiB.
const MAX_TABLES: u64 = 1 << 22;

/// One chunk's place in a table.
struct Slot {
    /// `None` until first written and after being deallocated as a whole.
    /// Holds the chunk's data followed by its metadata.
    chunk: RwLock<Option<Chunk>>,
    /// The chunk's address while it has one, else null. Read without the
    /// lock and only for prefetch hints, where a stale value is harmless.
    hint: AtomicPtr<u8>,
}

impl Slot {
    fn new() -> Slot {
        Slot { chunk: RwLock::new(None), hint: AtomicPtr::new(std::ptr::null_mut()) }
    }
}
/// A second-level table of chunk slots.
type Table = Box<[Slot]>;

/// Sparse memory-backed media; the default backend.
///
/// Memory is spent only on chunks (64 KiB of data plus their metadata) that
/// have been written and not deallocated since, plus 128 KiB of table per
/// 256 MiB-range of address space that has seen a write and about 24 bytes
/// per such range up front. A 1.9 TB namespace therefore costs under
/// 200 KiB when created. Chunks are packed into 2 MiB slabs, so what the
/// process maps ([`RamMedia::mapped_bytes`]) is the chunks rounded up to
/// whole slabs, plus at most one empty slab kept for reuse; freed chunks
/// are reused (zeroed) before new slabs are mapped.
///
/// # Thread safety
///
/// `RamMedia` is `Send + Sync`. Each chunk has its own reader-writer lock,
/// so requests on different chunks run in parallel without contention, and
/// readers of the same chunk do not block each other. A request that spans
/// several chunks is atomic per chunk only: a reader racing a writer on the
/// same range may see some chunks before and some after the write, but
/// never a torn block.
pub struct RamMedia {
    geometry: MediaGeometry,
    /// log2 of the block size.
    block_shift: u32,
    /// log2 of the blocks per chunk.
    chunk_shift: u32,
    /// Metadata bytes per block, as `usize`.
    metadata_size: usize,
    /// Data bytes per chunk; the metadata follows at this offset.
    chunk_data_bytes: usize,
    /// Total bytes of one chunk allocation (data plus metadata).
    chunk_bytes: usize,
    /// Total number of chunks, the last one possibly partly past the end.
    chunks: u64,
    /// Top-level table; entry `i` covers chunks `i << TABLE_SHIFT ..`.
    /// Declared before `arena`: the chunks it holds must drop (they free
    /// nothing on drop) before the arena unmaps their memory.
    tables: Box<[OnceLock<Table>]>,
    /// Where chunk buffers come from.
    arena: Arena,
    /// Bytes held by chunk buffers.
    resident: AtomicU64,
    /// Number of second-level tables allocated.
    tables_allocated: AtomicUsize,
}

impl RamMedia {
    /// Creates an empty medium of the given geometry. Only the top-level
    /// table is allocated. Fails with [`MediaError::InvalidGeometry`] if the
    /// geometry is invalid or holds more than 1 PiB of data.
    pub fn new(geometry: MediaGeometry) -> Result<Self, MediaError> {
        geometry.validate()?;
        let block_shift = geometry.block_size.trailing_zeros();
        let chunk_shift = CHUNK_DATA_SHIFT - block_shift;
        let chunk_blocks = 1usize << chunk_shift;
        let metadata_size = geometry.metadata_size as usize;
        let chunk_data_bytes = 1usize << CHUNK_DATA_SHIFT;
        let chunk_bytes = chunk_data_bytes + chunk_blocks * metadata_size;
        let chunks = geometry.blocks.div_ceil(1 << chunk_shift);
        let table_count = chunks.div_ceil(TABLE_SLOTS);
        if table_count > MAX_TABLES {
            return Err(MediaError::InvalidGeometry(format!(
                "{} bytes of data exceed the {} bytes a RamMedia can address",
                geometry.data_bytes(),
                MAX_TABLES << (TABLE_SHIFT + CHUNK_DATA_SHIFT)
            )));
        }
        let table_count = table_count as usize;
        let tables = (0..table_count).map(|_| OnceLock::new()).collect();
        Ok(Self {
            geometry,
            block_shift,
            chunk_shift,
            metadata_size,
            chunk_data_bytes,
            chunk_bytes,
            chunks,
            tables,
            arena: Arena::new(chunk_bytes),
            resident: AtomicU64::new(0),
            tables_allocated: AtomicUsize::new(0),
        })
    }

    /// Bytes of bookkeeping (top-level table and allocated second-level
    /// tables, each counted at full size), excluding the chunk buffers
    /// counted by [`Media::resident_bytes`].
    pub fn table_bytes(&self) -> u64 {
        let top = self.tables.len() * size_of::<OnceLock<Table>>();
        let second = self.tables_allocated.load(Ordering::Relaxed) * TABLE_SLOTS as usize;
        (top + second * size_of::<Slot>()) as u64
    }

    /// Blocks per chunk.
    pub fn chunk_blocks(&self) -> u64 {
        1 << self.chunk_shift
    }

    /// The slot of `chunk`, if its table exists. Never allocates.
    #[inline]
    fn slot(&self, chunk: u64) -> Option<&Slot> {
        let table = self.tables[(chunk >> TABLE_SHIFT) as usize].get()?;
        Some(&table[(chunk & (TABLE_SLOTS - 1)) as usize])
    }

    /// The slot of `chunk`, allocating its table on first use.
    #[inline]
    fn slot_or_create(&self, chunk: u64) -> &Slot {
        let index = chunk >> TABLE_SHIFT;
        let table = self.tables[index as usize].get_or_init(|| {
            // Only the last table may be short.
            let len = (self.chunks - (index << TABLE_SHIFT)).min(TABLE_SLOTS);
            self.tables_allocated.fetch_add(1, Ordering::Relaxed);
            (0..len).map(|_| Slot::new()).collect()
        });
        &table[(chunk & (TABLE_SLOTS - 1)) as usize]
    }

    /// A zeroed chunk buffer, accounted in `resident`.
    fn new_chunk(&self) -> Result<Chunk, MediaError> {
        let chunk = self
            .arena
            .allocate()
            .ok_or(MediaError::OutOfMemory { bytes: self.arena.slab_bytes() })?;
        self.resident.fetch_add(self.chunk_bytes as u64, Ordering::Relaxed);
        Ok(chunk)
    }

    /// Bytes mapped for chunk buffers: whole slabs, including the free
    /// places in them and one spare slab kept for reuse.
    pub fn mapped_bytes(&self) -> u64 {
        self.arena.mapped_bytes() as u64
    }

    /// Splits blocks `lba..lba + count` into per-chunk pieces
    /// `(chunk, first block within the chunk, blocks)`.
    #[inline]
    fn pieces(&self, lba: u64, count: u64) -> impl Iterator<Item = (u64, usize, usize)> {
        let shift = self.chunk_shift;
        let mask = (1u64 << shift) - 1;
        let end = lba + count;
        let mut next = lba;
        std::iter::from_fn(move || {
            if next >= end {
                return None;
            }
            let chunk = next >> shift;
            let first = next & mask;
            let blocks = (mask + 1 - first).min(end - next);
            next += blocks;
            Some((chunk, first as usize, blocks as usize))
        })
    }

    /// Copies out of the chunks; `unit` is bytes per block in `buf`, `base`
    /// the offset of the region (data or metadata) within a chunk.
    #[inline]
    fn copy_out(&self, lba: u64, count: u64, buf: &mut [u8], unit: usize, base: usize) {
        let mut off = 0;
        for (chunk, first, blocks) in self.pieces(lba, count) {
            let len = blocks * unit;
            let dst = &mut buf[off..off + len];
            off += len;
            let Some(slot) = self.slot(chunk) else {
                dst.fill(0);
                continue;
            };
            let guard = slot.chunk.read();
            match guard.as_ref() {
                Some(chunk) => {
                    let start = base + first * unit;
                    dst.copy_from_slice(&chunk.bytes()[start..start + len]);
                }
                None => dst.fill(0),
            }
        }
    }

    /// Copies into the chunks, allocating them on first touch. Fails only
    /// when a chunk cannot be allocated; the pieces before it are written.
    #[inline]
    fn copy_in(
        &self,
        lba: u64,
        count: u64,
        data: &[u8],
        unit: usize,
        base: usize,
    ) -> Result<(), MediaError> {
        let mut off = 0;
        for (chunk, first, blocks) in self.pieces(lba, count) {
            let len = blocks * unit;
            let src = &data[off..off + len];
            off += len;
            let slot = self.slot_or_create(chunk);
            let mut guard = slot.chunk.write();
            let chunk = match &mut *guard {
                Some(chunk) => chunk,
                empty => {
                    let chunk = empty.insert(self.new_chunk()?);
                    slot.hint.store(chunk.as_ptr(), Ordering::Relaxed);
                    chunk
                }
            };
            let start = base + first * unit;
            chunk.bytes_mut()[start..start + len].copy_from_slice(src);
        }
        Ok(())
    }

    /// Zeroes blocks `first..first + blocks` of the chunk in `slot`, if it
    /// is allocated; frees it instead when `whole` (the range covers every
    /// block of the chunk that lies within the medium).
    fn clear(&self, slot: &Slot, first: usize, blocks: usize, whole: bool) {
        if whole {
            let freed = {
                let mut guard = slot.chunk.write();
                slot.hint.store(std::ptr::null_mut(), Ordering::Relaxed);
                guard.take()
            };
            if let Some(chunk) = freed {
                self.resident.fetch_sub(self.chunk_bytes as u64, Ordering::Relaxed);
                // Handed back after the slot's lock is released.
                self.arena.free(chunk);
            }
            return;
        }
        let mut guard = slot.chunk.write();
        if let Some(chunk) = guard.as_mut() {
            let bytes = chunk.bytes_mut();
            let bs = 1usize << self.block_shift;
            bytes[first * bs..(first + blocks) * bs].fill(0);
            let ms = self.metadata_size;
            let meta = self.chunk_data_bytes + first * ms;
            bytes[meta..meta + blocks * ms].fill(0);
        }
    }
}

impl Media for RamMedia {
    fn geometry(&self) -> MediaGeometry {
        self.geometry
    }

    fn read(&self, lba: u64, buf: &mut [u8]) -> Result<(), MediaError> {
        let count = self.geometry.check_data(lba, buf.len())?;
        self.copy_out(lba, count, buf, 1 << self.block_shift, 0);
        Ok(())
    }

    fn write(&self, lba: u64, data: &[u8]) -> Result<(), MediaError> {
        let count = self.geometry.check_data(lba, data.len())?;
        self.copy_in(lba, count, data, 1 << self.block_shift, 0)
    }

    fn read_metadata(&self, lba: u64, buf: &mut [u8]) -> Result<(), MediaError> {
        let count = self.geometry.check_metadata(lba, buf.len())?;
        self.copy_out(lba, count, buf, self.metadata_size, self.chunk_data_bytes);
        Ok(())
    }

    fn write_metadata(&self, lba: u64, data: &[u8]) -> Result<(), MediaError> {
        let count = self.geometry.check_metadata(lba, data.len())?;
        self.copy_in(lba, count, data, self.metadata_size, self.chunk_data_bytes)
    }

    /// Frees every chunk the range covers entirely and zero-fills the
    /// covered blocks of partly covered chunks. Ranges whose second-level
    /// table was never allocated are skipped without looking at each chunk,
    /// so deallocating the whole medium is cheap.
    fn deallocate(&self, lba: u64, blocks: u64) -> Result<(), MediaError> {
        self.geometry.check_range(lba, blocks)?;
        let end = lba + blocks;
        let table_blocks_shift = self.chunk_shift + TABLE_SHIFT;
        let mut start = lba;
        while start < end {
            // Handle at most one second-level table per iteration.
            let index = start >> table_blocks_shift;
            let table_end = ((index + 1) << table_blocks_shift).min(end);
            if let Some(table) = self.tables[index as usize].get() {
                for (chunk, first, count) in self.pieces(start, table_end - start) {
                    // The last chunk may extend past the end of the medium.
                    let whole = first == 0
                        && (count == 1 << self.chunk_shift
                            || (chunk << self.chunk_shift) + count as u64 == self.geometry.blocks);
                    let slot = &table[(chunk & (TABLE_SLOTS - 1)) as usize];
                    self.clear(slot, first, count, whole);
                }
            }
            start = table_end;
        }
        Ok(())
    }

    /// Prefetches the first [`PREFETCH_BYTES`] of the range's data, if its
    /// first chunk exists: enough for the CPU's own prefetchers to carry
    /// the copy on, without flooding the caches when the read is large.
    #[inline]
    fn prefetch(&self, lba: u64, blocks: u64) {
        if blocks == 0 || lba >= self.geometry.blocks {
            return;
        }
        let Some(slot) = self.slot(lba >> self.chunk_shift) else { return };
        let base = slot.hint.load(Ordering::Relaxed);
        if base.is_null() {
            return;
        }
        let first = (lba & ((1 << self.chunk_shift) - 1)) as usize;
        let offset = first << self.block_shift;
        let len = ((blocks as usize) << self.block_shift).min(PREFETCH_BYTES);
        arena::prefetch(base.wrapping_add(offset), len.min(self.chunk_data_bytes - offset));
    }

    fn sync(&self) -> Result<(), MediaError> {
        Ok(())
    }

    fn stores_data(&self) -> bool {
        true
    }

    /// Bytes held by chunk buffers (data and metadata of every allocated
    /// chunk); see [`RamMedia::table_bytes`] for the bookkeeping.
    fn resident_bytes(&self) -> u64 {
        self.resident.load(Ordering::Relaxed)
    }
}

impl fmt::Debug for RamMedia {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RamMedia")
            .field("geometry", &self.geometry)
            .field("chunk_blocks", &self.chunk_blocks())
            .field("resident_bytes", &self.resident_bytes())
            .field("table_bytes", &self.table_bytes())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn media(block_size: u32, metadata_size: u32, blocks: u64) -> RamMedia {
        RamMedia::new(MediaGeometry::new(block_size, metadata_size, blocks).unwrap()).unwrap()
    }

    fn fill(len: usize, tag: u8) -> Vec<u8> {
        (0..len).map(|i| (tag ^ (i as u8)) | 0x80).collect()
    }

    #[test]
    fn ram_unwritten_reads_zero() {
        let m = media(4096, 8, 100);
        let mut buf = vec![0xffu8; 4096 * 100];
        m.read(0, &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 0));
        let mut meta = vec![0xffu8; 8 * 100];
        m.read_metadata(0, &mut meta).unwrap();
        assert!(meta.iter().all(|&b| b == 0));
        assert_eq!(m.resident_bytes(), 0);
        assert!(m.stores_data());
    }

    #[test]
    fn ram_refuses_absurd_sizes_without_allocating() {
        let g = MediaGeometry::new(512, 0, 1 << 50).unwrap();
        assert!(matches!(RamMedia::new(g), Err(MediaError::InvalidGeometry(_))));
    }

    #[test]
    fn ram_round_trip_at_chunk_boundaries() {
        let m = media(4096, 0, 200);
        assert_eq!(m.chunk_blocks(), 16);
        // Last block of a chunk, first of the next, and a run over three.
        for (lba, count) in [(15u64, 1usize), (16, 1), (14, 4), (30, 36), (199, 1)] {
            let data = fill(count * 4096, lba as u8);
            m.write(lba, &data).unwrap();
            let mut back = vec![0; data.len()];
            m.read(lba, &mut back).unwrap();
            assert_eq!(back, data, "lba {lba} count {count}");
        }
        // Neighbours untouched.
        let mut one = vec![0xffu8; 4096];
        m.read(13, &mut one).unwrap();
        assert!(one.iter().all(|&b| b == 0));
    }

    #[test]
    fn ram_chunk_size_follows_block_size() {
        assert_eq!(media(512, 0, 1).chunk_blocks(), 128);
        assert_eq!(media(4096, 0, 1).chunk_blocks(), 16);
        assert_eq!(media(65536, 0, 1).chunk_blocks(), 1);
        let m = media(65536, 16, 3);
        let data = fill(3 * 65536, 7);
        m.write(0, &data).unwrap();
        let mut back = vec![0; data.len()];
        m.read(0, &mut back).unwrap();
        assert_eq!(back, data);
        assert_eq!(m.resident_bytes(), 3 * (65536 + 16));
    }

    #[test]
    fn ram_metadata_round_trip_separate_from_data() {
        let m = media(512, 16, 300);
        let meta = fill(16 * 140, 3);
        m.write_metadata(100, &meta).unwrap();
        let mut back = vec![0; meta.len()];
        m.read_metadata(100, &mut back).unwrap();
        assert_eq!(back, meta);
        // Data of those blocks is still zero.
        let mut data = vec![0xffu8; 512 * 140];
        m.read(100, &mut data).unwrap();
        assert!(data.iter().all(|&b| b == 0));
        // Writing data leaves metadata alone.
        m.write(100, &fill(512 * 140, 9)).unwrap();
        m.read_metadata(100, &mut back).unwrap();
        assert_eq!(back, meta);
        // Media without metadata refuses metadata transfers.
        let plain = media(512, 0, 10);
        assert!(matches!(plain.write_metadata(0, &[0; 8]), Err(MediaError::NoMetadata)));
        assert!(plain.read_metadata(0, &mut []).is_ok());
    }

    #[test]
    fn ram_deallocate_zeroes_and_releases() {
        let m = media(4096, 8, 100);
        m.write(0, &fill(100 * 4096, 1)).unwrap();
        m.write_metadata(0, &fill(100 * 8, 2)).unwrap();
        let chunk = 16 * (4096 + 8);
        assert_eq!(m.resident_bytes(), 7 * chunk);

        // Blocks 10..50: frees chunks 1 and 2, zero-fills parts of 0 and 3.
        m.deallocate(10, 40).unwrap();
        assert_eq!(m.resident_bytes(), 5 * chunk);
        let mut data = vec![0; 100 * 4096];
        m.read(0, &mut data).unwrap();
        let mut meta = vec![0; 100 * 8];
        m.read_metadata(0, &mut meta).unwrap();
        let expected = fill(100 * 4096, 1);
        let expected_meta = fill(100 * 8, 2);
        for block in 0..100usize {
            let d = &data[block * 4096..(block + 1) * 4096];
            let md = &meta[block * 8..(block + 1) * 8];
            if (10..50).contains(&block) {
                assert!(d.iter().all(|&b| b == 0), "block {block}");
                assert!(md.iter().all(|&b| b == 0), "block {block}");
            } else {
                assert_eq!(d, &expected[block * 4096..(block + 1) * 4096], "block {block}");
                assert_eq!(md, &expected_meta[block * 8..(block + 1) * 8], "block {block}");
            }
        }
        m.deallocate(0, 100).unwrap();
        assert_eq!(m.resident_bytes(), 0);
        m.read(0, &mut data).unwrap();
        assert!(data.iter().all(|&b| b == 0));
        // Deallocating what was never written is fine.
        m.deallocate(0, 100).unwrap();
    }

    #[test]
    fn ram_prefetch_is_only_a_hint() {
        let m = media(4096, 16, 1000);
        // Nothing allocated, past the end, huge counts: no effect, no fault.
        m.prefetch(0, 1);
        m.prefetch(999, u64::MAX);
        m.prefetch(5000, 3);
        m.prefetch(u64::MAX, 1);
        m.write(10, &fill(4096 * 20, 3)).unwrap();
        m.prefetch(10, 20);
        m.prefetch(15, 0);
        // A chunk freed (its hint cleared) and one freed under a stale
        // hint read the same as before.
        m.deallocate(0, 16).unwrap();
        m.prefetch(10, 1);
        let mut back = vec![1u8; 4096];
        m.read(10, &mut back).unwrap();
        assert!(back.iter().all(|&b| b == 0), "a freed chunk reads zeros");
        m.read(29, &mut back).unwrap();
        assert!(back == fill(4096 * 20, 3)[19 * 4096..], "the next chunk keeps its data");
    }

    #[test]
    fn ram_rejects_bad_requests() {
        let m = media(4096, 8, 100);
        let mut buf = vec![0; 4096];
        assert!(matches!(m.read(100, &mut buf), Err(MediaError::OutOfRange { .. })));
        assert!(matches!(m.write(u64::MAX, &buf), Err(MediaError::OutOfRange { .. })));
        assert!(matches!(m.write(99, &[0; 8192]), Err(MediaError::OutOfRange { .. })));
        assert!(matches!(m.read(0, &mut buf[..100]), Err(MediaError::Misaligned { .. })));
        assert!(matches!(m.write(0, &buf[..4095]), Err(MediaError::Misaligned { .. })));
        assert!(matches!(m.write_metadata(0, &[0; 7]), Err(MediaError::Misaligned { .. })));
        assert!(matches!(m.read_metadata(96, &mut [0; 40]), Err(MediaError::OutOfRange { .. })));
        assert!(matches!(m.deallocate(50, 51), Err(MediaError::OutOfRange { .. })));
        assert!(matches!(m.deallocate(u64::MAX, 2), Err(MediaError::OutOfRange { .. })));
        // Zero-length requests at the end are accepted.
        assert!(m.read(100, &mut []).is_ok());
        assert!(m.deallocate(100, 0).is_ok());
        // Nothing was allocated by the failures.
        assert_eq!(m.resident_bytes(), 0);
        assert!(m.sync().is_ok());
    }

    #[test]
    fn ram_concurrent_writers_on_different_ranges() {
        let m = Arc::new(media(4096, 16, 4096));
        let threads = 8u64;
        // Interleaved ranges of 10 blocks: neighbours share chunks.
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let m = Arc::clone(&m);
                std::thread::spawn(move || {
                    for round in 0..(4096 / (10 * threads)) {
                        let lba = (round * threads + t) * 10;
                        m.write(lba, &fill(10 * 4096, lba as u8)).unwrap();
                        m.write_metadata(lba, &fill(10 * 16, !(lba as u8))).unwrap();
                        let mut back = vec![0; 10 * 4096];
                        m.read(lba, &mut back).unwrap();
                        assert_eq!(back, fill(10 * 4096, lba as u8));
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let written = (4096 / (10 * threads)) * threads * 10;
        for lba in (0..written).step_by(10) {
            let mut back = vec![0; 10 * 4096];
            m.read(lba, &mut back).unwrap();
            assert_eq!(back, fill(10 * 4096, lba as u8), "lba {lba}");
            let mut meta = vec![0; 10 * 16];
            m.read_metadata(lba, &mut meta).unwrap();
            assert_eq!(meta, fill(10 * 16, !(lba as u8)), "lba {lba}");
        }
        assert_eq!(m.resident_bytes(), written.div_ceil(16) * 16 * (4096 + 16));
    }

    /// The zn540 profile: 904 zones of 524288 blocks of 4 KiB.
    #[test]
    fn ram_zn540_sized_media_is_cheap() {
        let zones = 904u64;
        let zone_blocks = 524_288u64;
        let m = media(4096, 16, zones * zone_blocks);
        assert_eq!(m.resident_bytes(), 0);
        assert!(m.table_bytes() < 256 * 1024, "{}", m.table_bytes());

        // One block at the start and at the end of every 64th zone.
        for zone in (0..zones).step_by(64) {
            let start = zone * zone_blocks;
            m.write(start, &fill(4096, zone as u8)).unwrap();
            m.write(start + zone_blocks - 1, &fill(4096, !(zone as u8))).unwrap();
        }
        let touched = zones.div_ceil(64) * 2;
        assert_eq!(m.resident_bytes(), touched * 16 * (4096 + 16));
        assert!(m.table_bytes() < 256 * 1024 + touched * 130 * 1024);
        let mut buf = vec![0; 4096];
        m.read(64 * zone_blocks + zone_blocks - 1, &mut buf).unwrap();
        assert_eq!(buf, fill(4096, !64u8));
        m.read(zones * zone_blocks - 1, &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 0));

        // Resetting every zone releases everything, quickly.
        m.deallocate(0, zones * zone_blocks).unwrap();
        assert_eq!(m.resident_bytes(), 0);
    }

    /// Rough single-thread figure for 4 KiB random reads over 64 MiB of
    /// written data. Run with
    /// `cargo test --release -p zns-emulator ram_random_read_rate -- --ignored --nocapture`.
    #[test]
    #[ignore = "measurement, not a check"]
    fn ram_random_read_rate() {
        let blocks = 64 * 1024 * 1024 / 4096;
        let m = media(4096, 16, 904 * 524_288);
        let base = 300 * 524_288u64;
        for lba in 0..blocks {
            m.write(base + lba, &fill(4096, lba as u8)).unwrap();
        }
        let mut buf = vec![0u8; 4096];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let reads = 4_000_000u32;
        let mut sum = 0u64;
        let start = std::time::Instant::now();
        for _ in 0..reads {
            // xorshift64
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            m.read(base + x % blocks, &mut buf).unwrap();
            sum = sum.wrapping_add(u64::from(buf[17]));
        }
        let elapsed = start.elapsed();
        println!(
            "RamMedia: {reads} random 4 KiB reads in {elapsed:?}: {:.2} M reads/s, {:.0} ns/read",
            f64::from(reads) / elapsed.as_secs_f64() / 1e6,
            elapsed.as_nanos() as f64 / f64::from(reads),
        );

        // Reference: the same copies out of one flat 64 MiB vector.
        let flat = vec![1u8; blocks as usize * 4096];
        let start = std::time::Instant::now();
        for _ in 0..reads {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let off = (x % blocks) as usize * 4096;
            buf.copy_from_slice(&flat[off..off + 4096]);
            sum = sum.wrapping_add(u64::from(std::hint::black_box(&buf)[17]));
        }
        let elapsed = start.elapsed();
        println!(
            "flat Vec: {reads} random 4 KiB copies in {elapsed:?}: {:.2} M/s, {:.0} ns/copy \
             (checksum {sum})",
            f64::from(reads) / elapsed.as_secs_f64() / 1e6,
            elapsed.as_nanos() as f64 / f64::from(reads),
        );
    }
}
