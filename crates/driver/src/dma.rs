//! DMA memory: what transports allocate ([`DmaMemory`]), the owned buffers
//! commands transfer from and to ([`DmaBuffer`], [`DmaSlice`]), and a pool
//! that sub-allocates buffers from premapped chunks ([`DmaPool`]) so the I/O
//! path never maps memory.
//!
//! Bus addresses are translated page by page: a region is contiguous in the
//! process's virtual address space, but only within one translation granule
//! (a 4 KiB page, a 2 MiB huge page, or a whole IOMMU mapping) is it known to
//! be contiguous on the bus.

use std::any::Any;
use std::fmt;
use std::ops::{Bound, RangeBounds};
use std::ptr::NonNull;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::suballoc::RunAllocator;
use crate::transport::Transport;

/// Alignment and allocation granule of every DMA buffer.
pub const DMA_PAGE: usize = 4096;

/// How a region's virtual offsets map to bus addresses.
///
/// Thread safety: plain data, `Send + Sync`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Translation {
    /// The whole region is contiguous on the bus: `bus = base + offset`
    /// (in-process emulator, or one IOMMU mapping).
    Contiguous {
        /// Bus address of offset 0.
        base: u64,
    },
    /// One bus address per granule of `1 << shift` bytes (physical pages).
    Pages {
        /// log2 of the granule size; at least 12.
        shift: u32,
        /// Bus address of each granule, in order.
        bus: Box<[u64]>,
    },
}

/// A region of DMA-capable memory from a transport: virtual pointer, length
/// and bus-address translation. Whatever keeps the mapping alive (a host
/// memory registration, a huge page, an IOMMU mapping) is released when it
/// drops.
///
/// Thread safety: `Send + Sync`; the type hands out raw pointers and bus
/// addresses only. [`DmaBuffer`] adds exclusive ownership on top.
pub struct DmaMemory {
    ptr: NonNull<u8>,
    len: usize,
    translation: Translation,
    _owner: Box<dyn Any + Send + Sync>,
}

// SAFETY: the memory is plain bytes owned through `_owner`, which is itself
// `Send + Sync`; the raw pointer is only an address into it.
unsafe impl Send for DmaMemory {}
// SAFETY: shared access exposes the address and translation only; every
// dereference goes through types that establish exclusive access first.
unsafe impl Sync for DmaMemory {}

impl fmt::Debug for DmaMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DmaMemory")
            .field("ptr", &self.ptr)
            .field("len", &self.len)
            .field("bus", &self.bus_addr(0))
            .finish_non_exhaustive()
    }
}

impl DmaMemory {
    /// Wraps a mapped region.
    ///
    /// # Safety
    /// `ptr..ptr + len` must be readable and writable memory that stays valid
    /// until `owner` is dropped and that nothing else accesses; `ptr` must be
    /// [`DMA_PAGE`]-aligned; `translation` must give the address at which the
    /// device reaches each byte (for [`Translation::Pages`], one entry per
    /// granule covering `len`, granule at least [`DMA_PAGE`]).
    pub unsafe fn new(
        ptr: NonNull<u8>,
        len: usize,
        translation: Translation,
        owner: Box<dyn Any + Send + Sync>,
    ) -> Self {
        debug_assert_eq!(ptr.as_ptr() as usize % DMA_PAGE, 0);
        if let Translation::Pages { shift, bus } = &translation {
            debug_assert!(*shift >= 12);
            debug_assert!(bus.len() >= len.div_ceil(1 << shift));
        }
        DmaMemory { ptr, len, translation, _owner: owner }
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for an empty region.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Virtual address of the first byte.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The translation.
    pub fn translation(&self) -> &Translation {
        &self.translation
    }

    /// Bus address of byte `offset` (`offset <= len`).
    #[inline]
    pub fn bus_addr(&self, offset: usize) -> u64 {
        match &self.translation {
            Translation::Contiguous { base } => base + offset as u64,
            Translation::Pages { shift, bus } => {
                let granule = offset >> shift;
                // One past the end translates from the previous granule.
                match bus.get(granule) {
                    Some(b) => b + (offset & ((1 << shift) - 1)) as u64,
                    None => bus[granule - 1] + (1u64 << shift),
                }
            }
        }
    }

    /// Never releases the mapping: for memory a controller that could not be
    /// stopped might still access.
    pub(crate) fn leak(&mut self) {
        let owner = std::mem::replace(&mut self._owner, Box::new(()));
        std::mem::forget(owner);
    }

    /// Bytes from `offset` on that are contiguous on the bus.
    pub fn contiguous_len(&self, offset: usize) -> usize {
        match &self.translation {
            Translation::Contiguous { .. } => self.len.saturating_sub(offset),
            Translation::Pages { shift, bus } => {
                let g = 1usize << shift;
                let mut i = offset >> shift;
                let mut end = (i + 1) * g;
                while end < self.len && bus[i + 1] == bus[i] + g as u64 {
                    i += 1;
                    end += g;
                }
                end.min(self.len).saturating_sub(offset)
            }
        }
    }
}

/// A borrowed byte range of DMA memory, as handed to a command.
///
/// Thread safety: `Copy`, `Send + Sync` (an address range, not access).
#[derive(Debug, Clone, Copy)]
pub struct DmaSlice<'a> {
    mem: &'a DmaMemory,
    offset: usize,
    len: usize,
}

impl<'a> DmaSlice<'a> {
    /// Bytes `offset..offset + len` of `mem`.
    pub fn new(mem: &'a DmaMemory, offset: usize, len: usize) -> Result<Self> {
        let end = offset.checked_add(len).filter(|&e| e <= mem.len());
        match end {
            Some(_) => Ok(DmaSlice { mem, offset, len }),
            None => Err(Error::OutOfRange { start: offset, end: offset + len, len: mem.len() }),
        }
    }

    /// Length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for an empty slice.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bus address of byte `offset` of the slice (`offset <= len`).
    #[inline]
    pub fn bus_addr(&self, offset: usize) -> u64 {
        self.mem.bus_addr(self.offset + offset)
    }

    /// The memory the slice lies in.
    pub fn memory(&self) -> &'a DmaMemory {
        self.mem
    }

    /// Offset of the slice within its memory.
    pub fn offset(&self) -> usize {
        self.offset
    }
}

/// Where a buffer's pages go back to when it drops.
#[derive(Debug)]
enum Home {
    /// The buffer owns its whole memory.
    Own,
    /// Pages `first..first + pages` of chunk `chunk` of a pool.
    Pool { pool: Arc<PoolShared>, chunk: usize, first: usize, pages: usize },
}

/// An owned, page-aligned DMA buffer.
///
/// Reading and writing it through slices is safe because the buffer is the
/// only owner of its bytes. The device writes it only while a command naming
/// it is outstanding; the submission functions state how that is kept apart
/// from host access (owned submission moves the buffer into the queue).
///
/// Thread safety: `Send + Sync`.
#[derive(Debug)]
pub struct DmaBuffer {
    mem: Arc<DmaMemory>,
    offset: usize,
    len: usize,
    home: Home,
}

impl DmaBuffer {
    /// A buffer owning a whole region.
    pub fn from_memory(mem: DmaMemory) -> Self {
        let len = mem.len();
        DmaBuffer { mem: Arc::new(mem), offset: 0, len, home: Home::Own }
    }

    /// Allocates a dedicated buffer of `len` bytes straight from a transport
    /// (maps memory: not for the I/O path; use a [`DmaPool`] there).
    pub fn allocate(transport: &dyn Transport, len: usize) -> Result<Self> {
        let mem = transport.allocate_dma(len.max(1).next_multiple_of(DMA_PAGE))?;
        let mut b = DmaBuffer::from_memory(mem);
        b.len = len;
        Ok(b)
    }

    /// Length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for an empty buffer.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bus address of byte `offset` (`offset <= len`).
    #[inline]
    pub fn bus_addr(&self, offset: usize) -> u64 {
        self.mem.bus_addr(self.offset + offset)
    }

    /// Virtual address of the first byte.
    pub fn as_ptr(&self) -> *const u8 {
        // Within the region by construction.
        self.mem.as_ptr().wrapping_add(self.offset)
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `offset..offset + len` lies inside the region (checked at
        // construction), the region is valid while `mem` lives, and this
        // buffer is the only owner of those bytes (the pool hands out
        // disjoint page runs); `&self` rules out a concurrent `&mut`.
        unsafe { std::slice::from_raw_parts(self.as_ptr(), self.len) }
    }

    /// The bytes, writable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`; `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.as_ptr() as *mut u8, self.len) }
    }

    /// The whole buffer as a command's data range.
    #[inline]
    pub fn dma(&self) -> DmaSlice<'_> {
        DmaSlice { mem: &self.mem, offset: self.offset, len: self.len }
    }

    /// A byte range of the buffer as a command's data range.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<DmaSlice<'_>> {
        let start = match range.start_bound() {
            Bound::Included(&s) => s,
            Bound::Excluded(&s) => s + 1,
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(&e) => e + 1,
            Bound::Excluded(&e) => e,
            Bound::Unbounded => self.len,
        };
        if start > end || end > self.len {
            return Err(Error::OutOfRange { start, end, len: self.len });
        }
        Ok(DmaSlice { mem: &self.mem, offset: self.offset + start, len: end - start })
    }

    /// Shortens or lengthens the buffer's visible length within its pages.
    pub fn set_len(&mut self, len: usize) -> Result<()> {
        let cap = self.capacity();
        if len > cap {
            return Err(Error::OutOfRange { start: 0, end: len, len: cap });
        }
        self.len = len;
        Ok(())
    }

    /// Bytes available to [`DmaBuffer::set_len`] (whole pages).
    pub fn capacity(&self) -> usize {
        match &self.home {
            Home::Own => self.mem.len() - self.offset,
            Home::Pool { pages, .. } => pages * DMA_PAGE,
        }
    }

    /// Fills the buffer with `byte`.
    pub fn fill(&mut self, byte: u8) {
        self.as_mut_slice().fill(byte);
    }
}

impl Drop for DmaBuffer {
    fn drop(&mut self) {
        if let Home::Pool { pool, chunk, first, pages } = &self.home {
            pool.release(*chunk, *first, *pages);
        }
    }
}

#[derive(Debug)]
struct Chunk {
    mem: Arc<DmaMemory>,
    runs: RunAllocator,
}

struct PoolShared {
    transport: Arc<dyn Transport>,
    chunk_pages: usize,
    chunks: Mutex<Vec<Chunk>>,
}

impl fmt::Debug for PoolShared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PoolShared")
            .field("chunk_pages", &self.chunk_pages)
            .field("chunks", &self.chunks.lock().len())
            .finish_non_exhaustive()
    }
}

impl PoolShared {
    fn release(&self, chunk: usize, first: usize, pages: usize) {
        self.chunks.lock()[chunk].runs.free(first, pages);
    }

    fn map_chunk(&self) -> Result<Chunk> {
        let mem = self.transport.allocate_dma(self.chunk_pages * DMA_PAGE)?;
        Ok(Chunk { mem: Arc::new(mem), runs: RunAllocator::new(self.chunk_pages) })
    }
}

/// A pool of DMA buffers sub-allocated in whole pages from chunks the
/// transport mapped beforehand. Requests larger than half a chunk get
/// dedicated memory.
///
/// Thread safety: `Send + Sync` and cheap to clone (shared state); allocation
/// and release take a short lock, never the I/O path's submit or poll.
#[derive(Clone, Debug)]
pub struct DmaPool {
    shared: Arc<PoolShared>,
}

impl DmaPool {
    /// Default chunk size: one 2 MiB huge page.
    pub const DEFAULT_CHUNK: usize = 2 << 20;

    /// An empty pool that maps chunks of `chunk_bytes` (rounded up to whole
    /// pages) from `transport` as it needs them.
    pub fn new(transport: Arc<dyn Transport>, chunk_bytes: usize) -> Self {
        let chunk_pages = chunk_bytes.div_ceil(DMA_PAGE).max(1);
        DmaPool {
            shared: Arc::new(PoolShared { transport, chunk_pages, chunks: Mutex::new(Vec::new()) }),
        }
    }

    /// Maps chunks until at least `bytes` are free, so later allocations do
    /// not map memory.
    pub fn reserve(&self, bytes: usize) -> Result<()> {
        let want = bytes.div_ceil(DMA_PAGE);
        let mut chunks = self.shared.chunks.lock();
        while chunks.iter().map(|c| c.runs.free_pages()).sum::<usize>() < want {
            chunks.push(self.shared.map_chunk()?);
        }
        Ok(())
    }

    /// Bytes of mapped chunk memory not handed out.
    pub fn free_bytes(&self) -> usize {
        self.shared.chunks.lock().iter().map(|c| c.runs.free_pages() * DMA_PAGE).sum()
    }

    /// Allocates a buffer of `len` bytes (page aligned; contents unspecified).
    pub fn alloc(&self, len: usize) -> Result<DmaBuffer> {
        let pages = len.div_ceil(DMA_PAGE).max(1);
        if pages * 2 > self.shared.chunk_pages {
            return DmaBuffer::allocate(self.shared.transport.as_ref(), len);
        }
        let mut chunks = self.shared.chunks.lock();
        let found = chunks.iter_mut().enumerate().find_map(|(i, c)| {
            let first = c.runs.alloc(pages, 0)?;
            Some((i, first, Arc::clone(&c.mem)))
        });
        let (chunk, first, mem) = match found {
            Some(f) => f,
            None => {
                let mut c = self.shared.map_chunk()?;
                let first = c.runs.alloc(pages, 0).ok_or_else(|| Error::DmaAllocation {
                    len,
                    reason: "pool chunk smaller than the request".into(),
                })?;
                let mem = Arc::clone(&c.mem);
                chunks.push(c);
                (chunks.len() - 1, first, mem)
            }
        };
        drop(chunks);
        Ok(DmaBuffer {
            mem,
            offset: first * DMA_PAGE,
            len,
            home: Home::Pool { pool: Arc::clone(&self.shared), chunk, first, pages },
        })
    }

    /// Allocates a zero-filled buffer.
    pub fn alloc_zeroed(&self, len: usize) -> Result<DmaBuffer> {
        let mut b = self.alloc(len)?;
        b.fill(0);
        Ok(b)
    }

    /// The transport the pool maps from.
    pub fn transport(&self) -> &Arc<dyn Transport> {
        &self.shared.transport
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use zns_emulator::host::ProcessMemory;

    /// A region from host memory with the given translation of its pages
    /// (`None`: contiguous, bus = virtual).
    pub(crate) fn region(
        mem: &Arc<ProcessMemory>,
        len: usize,
        pages: Option<Vec<u64>>,
    ) -> DmaMemory {
        let a = mem.allocate(len, DMA_PAGE).expect("host memory");
        let ptr = NonNull::new(a.as_ptr()).expect("non-null");
        let translation = match pages {
            None => Translation::Contiguous { base: a.addr() },
            Some(bus) => Translation::Pages { shift: 12, bus: bus.into() },
        };
        // SAFETY: the allocation is valid, page aligned and owned by the box.
        unsafe { DmaMemory::new(ptr, len, translation, Box::new(a)) }
    }

    #[test]
    fn page_translation_and_contiguity() {
        let mem = ProcessMemory::new();
        let bus = vec![0x10_0000, 0x10_1000, 0x50_0000, 0x50_1000];
        let r = region(&mem, 4 * DMA_PAGE, Some(bus));
        assert_eq!(r.bus_addr(0), 0x10_0000);
        assert_eq!(r.bus_addr(4100), 0x10_1004);
        assert_eq!(r.bus_addr(2 * 4096 + 8), 0x50_0008);
        assert_eq!(r.bus_addr(4 * 4096), 0x50_2000);
        assert_eq!(r.contiguous_len(0), 8192);
        assert_eq!(r.contiguous_len(100), 8092);
        assert_eq!(r.contiguous_len(8192), 8192);
        let c = region(&mem, 3 * DMA_PAGE, None);
        assert_eq!(c.contiguous_len(5), 3 * 4096 - 5);
        assert_eq!(c.bus_addr(7), c.as_ptr() as u64 + 7);
    }

    #[test]
    fn buffer_slices_check_their_range() {
        let mem = ProcessMemory::new();
        let mut b = DmaBuffer::from_memory(region(&mem, 8192, None));
        b.as_mut_slice()[10] = 7;
        assert_eq!(b.as_slice()[10], 7);
        let s = b.slice(4..4100).unwrap();
        assert_eq!(s.len(), 4096);
        assert_eq!(s.bus_addr(0), b.bus_addr(4));
        assert!(b.slice(0..8193).is_err());
        assert!(b.slice(9000..).is_err());
        assert_eq!(b.slice(..=9).unwrap().len(), 10);
        b.set_len(100).unwrap();
        assert_eq!(b.as_slice().len(), 100);
        assert!(b.set_len(8193).is_err());
    }
}
