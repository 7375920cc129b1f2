//! DMA memory for real controllers: 2 MiB huge pages, their physical
//! addresses from `/proc/self/pagemap`, and an arena that sub-allocates
//! small regions (queues, pool chunks) out of huge pages so a 4 KiB admin
//! queue does not cost 2 MiB.
//!
//! A huge page is physically contiguous, so a region that stays inside one
//! huge page is contiguous on the bus; larger regions get one bus address
//! per huge page.

use std::any::Any;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::ptr::NonNull;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::dma::{DmaMemory, Translation, DMA_PAGE};
use crate::error::{Error, Result, TransportError};
use crate::suballoc::RunAllocator;

/// Huge page size.
pub(crate) const HUGE_PAGE: usize = 2 << 20;
/// log2 of [`HUGE_PAGE`].
pub(crate) const HUGE_SHIFT: u32 = 21;
/// Base pages per huge page.
const PAGES_PER_HUGE: usize = HUGE_PAGE / DMA_PAGE;

/// Pagemap entry bit 63: page present.
const PAGEMAP_PRESENT: u64 = 1 << 63;
/// Pagemap entry bits 54:0: page frame number.
const PAGEMAP_PFN_MASK: u64 = (1 << 55) - 1;
/// The kernel's base page size, which pagemap entries describe.
const KERNEL_PAGE: u64 = 4096;

/// Decodes one `/proc/self/pagemap` entry: the page frame number, or `None`
/// when the page is not present or the PFN is hidden (reads as zero without
/// CAP_SYS_ADMIN).
pub(crate) fn decode_pagemap_entry(entry: u64) -> Option<u64> {
    if entry & PAGEMAP_PRESENT == 0 {
        return None;
    }
    let pfn = entry & PAGEMAP_PFN_MASK;
    (pfn != 0).then_some(pfn)
}

/// Byte offset of the pagemap entry of virtual address `vaddr`.
pub(crate) fn pagemap_offset(vaddr: u64) -> u64 {
    vaddr / KERNEL_PAGE * 8
}

/// Physical address of `vaddr` from its pagemap entry.
pub(crate) fn physical_address(entry: u64, vaddr: u64) -> Option<u64> {
    decode_pagemap_entry(entry).map(|pfn| pfn * KERNEL_PAGE + vaddr % KERNEL_PAGE)
}

/// A mapped, pinned region made of huge-page-sized granules, with the bus
/// address of each granule.
pub(crate) struct MappedRegion {
    /// Virtual address of the first byte.
    pub(crate) addr: usize,
    /// Length in bytes, a multiple of [`HUGE_PAGE`].
    pub(crate) len: usize,
    /// Bus address of each [`HUGE_PAGE`] granule.
    pub(crate) bus: Vec<u64>,
    /// Releases the mapping (and any IOMMU mapping) when dropped; held for
    /// that alone.
    pub(crate) _owner: Box<dyn Any + Send + Sync>,
}

/// Maps regions of whole huge pages for DMA.
///
/// Thread safety: implementations are `Send + Sync`.
pub(crate) trait RegionMapper: Send + Sync {
    /// Maps `len` bytes (a multiple of [`HUGE_PAGE`]), zeroed and pinned.
    fn map(&self, len: usize) -> Result<MappedRegion>;
}

struct Slab {
    addr: usize,
    bus: u64,
    runs: RunAllocator,
    _region: MappedRegion,
}

/// Sub-allocates DMA regions from huge pages: requests of at most one huge
/// page come from a shared huge page (never straddling two), larger ones get
/// their own mapping.
///
/// Thread safety: `Send + Sync`; allocation takes a short lock.
pub(crate) struct HugepageArena<M> {
    mapper: M,
    slabs: Mutex<Vec<Slab>>,
}

/// Returns a sub-allocation to its slab when the [`DmaMemory`] drops.
struct Lease<M: RegionMapper + 'static> {
    arena: Arc<HugepageArena<M>>,
    slab: usize,
    first: usize,
    pages: usize,
}

impl<M: RegionMapper + 'static> Drop for Lease<M> {
    fn drop(&mut self) {
        self.arena.slabs.lock()[self.slab].runs.free(self.first, self.pages);
    }
}

impl<M: RegionMapper + 'static> HugepageArena<M> {
    /// An empty arena over `mapper`.
    pub(crate) fn new(mapper: M) -> Arc<Self> {
        Arc::new(HugepageArena { mapper, slabs: Mutex::new(Vec::new()) })
    }

    /// Allocates `len` bytes of zeroed DMA memory.
    pub(crate) fn allocate(self: &Arc<Self>, len: usize) -> Result<DmaMemory> {
        let len = len.max(1).next_multiple_of(DMA_PAGE);
        if len > HUGE_PAGE {
            return self.allocate_dedicated(len);
        }
        let pages = len / DMA_PAGE;
        let mut slabs = self.slabs.lock();
        let found = slabs
            .iter_mut()
            .enumerate()
            .find_map(|(i, s)| s.runs.alloc(pages, 0).map(|first| (i, first)));
        let (slab, first) = match found {
            Some(f) => f,
            None => {
                let region = self.mapper.map(HUGE_PAGE)?;
                let mut runs = RunAllocator::new(PAGES_PER_HUGE);
                let first = runs.alloc(pages, 0).ok_or_else(|| Error::DmaAllocation {
                    len,
                    reason: "huge page smaller than the request".into(),
                })?;
                slabs.push(Slab { addr: region.addr, bus: region.bus[0], runs, _region: region });
                (slabs.len() - 1, first)
            }
        };
        let s = &slabs[slab];
        let offset = first * DMA_PAGE;
        let addr = s.addr + offset;
        let base = s.bus + offset as u64;
        drop(slabs);
        let ptr = NonNull::new(addr as *mut u8)
            .ok_or_else(|| Error::DmaAllocation { len, reason: "null mapping".into() })?;
        // Reused pages are zeroed before they are handed out again.
        // SAFETY: `addr..addr + len` lies inside the slab's mapping, which
        // the arena keeps until it drops (the lease holds the arena).
        unsafe { std::ptr::write_bytes(ptr.as_ptr(), 0, len) };
        let lease = Lease { arena: Arc::clone(self), slab, first, pages };
        // SAFETY: the pages are mapped, pinned, page aligned and reserved
        // for this region by the lease until it drops; the whole region lies
        // in one huge page, so it is contiguous on the bus from `base`.
        Ok(unsafe { DmaMemory::new(ptr, len, Translation::Contiguous { base }, Box::new(lease)) })
    }

    fn allocate_dedicated(&self, len: usize) -> Result<DmaMemory> {
        let region = self.mapper.map(len.next_multiple_of(HUGE_PAGE))?;
        if region.len < len || region.bus.len() < len.div_ceil(HUGE_PAGE) {
            return Err(Error::DmaAllocation { len, reason: "mapping shorter than asked".into() });
        }
        let ptr = NonNull::new(region.addr as *mut u8)
            .ok_or_else(|| Error::DmaAllocation { len, reason: "null mapping".into() })?;
        let translation = Translation::Pages { shift: HUGE_SHIFT, bus: region.bus.clone().into() };
        // SAFETY: the mapping covers `len` bytes, is pinned and zeroed, is
        // owned by `region` (moved into the owner box) and has one bus
        // address per huge page.
        Ok(unsafe { DmaMemory::new(ptr, len, translation, Box::new(region)) })
    }

    /// Huge pages mapped for sub-allocation.
    #[cfg(test)]
    pub(crate) fn slabs(&self) -> usize {
        self.slabs.lock().len()
    }
}

/// An anonymous mapping, unmapped on drop.
struct AnonMapping {
    addr: usize,
    len: usize,
}

impl Drop for AnonMapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping created by `map_anonymous`.
        unsafe { libc::munmap(self.addr as *mut libc::c_void, self.len) };
    }
}

/// Maps `len` bytes of anonymous shared memory, from huge pages when `huge`,
/// populated and locked in memory.
fn map_anonymous(len: usize, huge: bool) -> std::result::Result<AnonMapping, std::io::Error> {
    let mut flags = libc::MAP_SHARED | libc::MAP_ANONYMOUS | libc::MAP_POPULATE;
    if huge {
        flags |= libc::MAP_HUGETLB;
    }
    // SAFETY: a fresh anonymous mapping at a kernel-chosen address; the
    // result is checked before use.
    let p = unsafe {
        libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, flags, -1, 0)
    };
    if p == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    let m = AnonMapping { addr: p as usize, len };
    // SAFETY: locks the mapping just created; failure is reported.
    if unsafe { libc::mlock(p, len) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(m)
}

/// Maps huge pages and reads their physical addresses from
/// `/proc/self/pagemap` (needs root).
///
/// Thread safety: `Send + Sync`.
pub(crate) struct PagemapMapper {
    pagemap: File,
}

impl PagemapMapper {
    /// Opens `/proc/self/pagemap`.
    pub(crate) fn open() -> Result<Self> {
        let pagemap = File::open("/proc/self/pagemap")
            .map_err(|e| TransportError::io("open /proc/self/pagemap", e))?;
        Ok(PagemapMapper { pagemap })
    }

    fn physical(&self, vaddr: u64) -> Result<u64> {
        let mut b = [0u8; 8];
        self.pagemap
            .read_exact_at(&mut b, pagemap_offset(vaddr))
            .map_err(|e| TransportError::io("read /proc/self/pagemap", e))?;
        physical_address(u64::from_le_bytes(b), vaddr)
            .ok_or(Error::Transport(TransportError::NoPhysicalAddresses))
    }
}

impl RegionMapper for PagemapMapper {
    fn map(&self, len: usize) -> Result<MappedRegion> {
        let m = map_anonymous(len, true)
            .map_err(|source| TransportError::NoHugepages { len, source })?;
        let mut bus = Vec::with_capacity(len / HUGE_PAGE);
        for i in 0..len / HUGE_PAGE {
            let phys = self.physical((m.addr + i * HUGE_PAGE) as u64)?;
            if phys % HUGE_PAGE as u64 != 0 {
                return Err(Error::DmaAllocation {
                    len,
                    reason: format!("huge page at physical {phys:#x} is not 2 MiB aligned"),
                });
            }
            bus.push(phys);
        }
        tracing::debug!(len, first = format_args!("{:#x}", bus[0]), "huge pages mapped");
        Ok(MappedRegion { addr: m.addr, len, bus, _owner: Box::new(m) })
    }
}

/// Maps anonymous memory for an IOMMU: huge pages when available (fewer
/// IOMMU entries), ordinary pages otherwise.
pub(crate) fn map_for_iommu(len: usize) -> Result<(usize, Box<dyn Any + Send + Sync>)> {
    let m = match map_anonymous(len, true) {
        Ok(m) => m,
        Err(e) => {
            tracing::debug!(error = %e, "no huge pages; using ordinary pages for VFIO DMA");
            map_anonymous(len, false)
                .map_err(|source| TransportError::io("mmap DMA memory", source))?
        }
    };
    Ok((m.addr, Box::new(m)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dma::DmaBuffer;
    use std::sync::atomic::{AtomicU64, Ordering};
    use zns_emulator::host::ProcessMemory;

    #[test]
    fn pagemap_entries() {
        assert_eq!(decode_pagemap_entry(0), None);
        assert_eq!(decode_pagemap_entry(PAGEMAP_PRESENT), None, "hidden PFN");
        assert_eq!(decode_pagemap_entry(PAGEMAP_PRESENT | 0x1234), Some(0x1234));
        // Bits 55..62 (soft-dirty, exclusive, swapped, file) are not the PFN.
        let flags = (1 << 55) | (1 << 56) | (1 << 61);
        assert_eq!(decode_pagemap_entry(PAGEMAP_PRESENT | flags | 0x42), Some(0x42));
        assert_eq!(decode_pagemap_entry(flags | 0x42), None, "not present");
        assert_eq!(decode_pagemap_entry(PAGEMAP_PRESENT | PAGEMAP_PFN_MASK), Some((1 << 55) - 1));
        assert_eq!(pagemap_offset(0x7fff_0000_3000), 0x7fff_0000_3000 / 4096 * 8);
        assert_eq!(physical_address(PAGEMAP_PRESENT | 0x200, 0x1234_5678), Some(0x20_0678));
    }

    /// Maps host memory and pretends each huge page sits at a made-up
    /// physical address.
    struct FakeMapper {
        mem: Arc<ProcessMemory>,
        next: AtomicU64,
    }

    impl RegionMapper for FakeMapper {
        fn map(&self, len: usize) -> Result<MappedRegion> {
            let a = self.mem.allocate(len, DMA_PAGE).expect("host memory");
            let bus = (0..len / HUGE_PAGE)
                .map(|_| self.next.fetch_add(3 * HUGE_PAGE as u64, Ordering::Relaxed))
                .collect();
            Ok(MappedRegion { addr: a.as_ptr() as usize, len, bus, _owner: Box::new(a) })
        }
    }

    fn arena() -> Arc<HugepageArena<FakeMapper>> {
        HugepageArena::new(FakeMapper {
            mem: ProcessMemory::new(),
            next: AtomicU64::new(0x4000_0000),
        })
    }

    #[test]
    fn small_regions_share_a_huge_page_and_are_contiguous() {
        let a = arena();
        let q = a.allocate(4096).unwrap();
        let r = a.allocate(64 * 1024).unwrap();
        assert_eq!(a.slabs(), 1);
        assert_eq!(q.bus_addr(0), 0x4000_0000);
        assert_eq!(r.bus_addr(0), 0x4000_1000);
        assert_eq!(r.contiguous_len(0), 64 * 1024);
        assert_eq!(r.as_ptr() as usize - q.as_ptr() as usize, 4096);
        // A region that does not fit in the rest of the huge page opens another.
        let big = a.allocate(HUGE_PAGE - 4096).unwrap();
        assert_eq!(a.slabs(), 2);
        assert_eq!(big.bus_addr(0), 0x4000_0000 + 3 * HUGE_PAGE as u64);
        assert_eq!(big.contiguous_len(0), HUGE_PAGE - 4096);
        // Freed pages are reused, and zeroed.
        let addr = q.as_ptr();
        let mut q = DmaBuffer::from_memory(q);
        q.fill(0xAA);
        drop(q);
        let q2 = DmaBuffer::from_memory(a.allocate(4096).unwrap());
        assert_eq!(q2.as_ptr(), addr as *const u8);
        assert!(q2.as_slice().iter().all(|&b| b == 0));
    }

    #[test]
    fn large_regions_translate_per_huge_page() {
        let a = arena();
        let m = a.allocate(2 * HUGE_PAGE + 4096).unwrap();
        assert_eq!(a.slabs(), 0);
        assert_eq!(m.len(), 2 * HUGE_PAGE + 4096);
        let b0 = m.bus_addr(0);
        assert_eq!(m.bus_addr(HUGE_PAGE - 8), b0 + HUGE_PAGE as u64 - 8);
        assert_eq!(m.bus_addr(HUGE_PAGE), b0 + 3 * HUGE_PAGE as u64);
        assert_eq!(m.bus_addr(2 * HUGE_PAGE + 16), b0 + 6 * HUGE_PAGE as u64 + 16);
        assert_eq!(m.contiguous_len(0), HUGE_PAGE);
    }
}
