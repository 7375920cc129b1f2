//! The host side of DMA: how the controller reaches memory the host gave it.
//!
//! A real controller masters the PCIe bus; ours reads and writes through a
//! [`HostMemory`]. For the in-process transport that is [`ProcessMemory`]:
//! buffers allocated from it have bus address = virtual address, and every
//! access is checked against the registered regions, the way an IOMMU would.
//! A command carrying a wild pointer therefore gets Data Transfer Error, not
//! a segmentation fault.

use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::Arc;

use arc_swap::ArcSwap;

/// A DMA access that falls outside every region the host registered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("DMA access outside host memory: {len} bytes at {addr:#x}")]
pub struct DmaError {
    /// Bus address of the access.
    pub addr: u64,
    /// Length of the access.
    pub len: usize,
}

/// Memory the controller can read and write by bus address.
///
/// Implementations must be callable from any thread concurrently.
pub trait HostMemory: Send + Sync {
    /// Copies `buf.len()` bytes at bus address `addr` into `buf`.
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), DmaError>;
    /// Copies `data` to bus address `addr`.
    fn write(&self, addr: u64, data: &[u8]) -> Result<(), DmaError>;
}

#[derive(Debug, Clone, Copy)]
struct Region {
    start: u64,
    len: u64,
}

/// This process's memory, as seen by an in-process controller.
///
/// Regions come from [`ProcessMemory::allocate`]; lookups are lock-free
/// (a snapshot of the sorted region list), so queues on different threads
/// never contend here. Allocation and release take a short writer path.
#[derive(Debug)]
pub struct ProcessMemory {
    regions: ArcSwap<Vec<Region>>,
    update: parking_lot::Mutex<()>,
}

impl Default for ProcessMemory {
    fn default() -> Self {
        ProcessMemory {
            regions: ArcSwap::from_pointee(Vec::new()),
            update: parking_lot::Mutex::new(()),
        }
    }
}

impl ProcessMemory {
    /// An empty host memory.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Allocates `len` zeroed bytes aligned to `align` (a power of two, at
    /// least 4096 is typical) and registers them for DMA. The bus address of
    /// byte `i` is `allocation.addr() + i`.
    pub fn allocate(self: &Arc<Self>, len: usize, align: usize) -> Option<DmaAllocation> {
        if len == 0 {
            return None;
        }
        let layout = Layout::from_size_align(len, align.max(1)).ok()?;
        // SAFETY: the layout has a non-zero size (checked above).
        let ptr = NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) })?;
        let start = ptr.as_ptr() as u64;
        self.modify(|v| {
            let at = v.partition_point(|r| r.start < start);
            v.insert(at, Region { start, len: len as u64 });
        });
        Some(DmaAllocation { ptr, layout, owner: Arc::clone(self) })
    }

    fn modify(&self, f: impl FnOnce(&mut Vec<Region>)) {
        let _guard = self.update.lock();
        let mut v = Vec::clone(&self.regions.load());
        f(&mut v);
        self.regions.store(Arc::new(v));
    }

    /// Translates a bus range into a pointer, or fails if any byte of it lies
    /// outside a registered region.
    fn resolve(&self, addr: u64, len: usize) -> Result<*mut u8, DmaError> {
        let err = DmaError { addr, len };
        let regions = self.regions.load();
        let at = regions.partition_point(|r| r.start <= addr);
        let r = at.checked_sub(1).map(|i| regions[i]).ok_or(err)?;
        let end = addr.checked_add(len as u64).ok_or(err)?;
        if end > r.start + r.len {
            return Err(err);
        }
        Ok(addr as usize as *mut u8)
    }

    /// Number of registered regions.
    pub fn regions(&self) -> usize {
        self.regions.load().len()
    }
}

impl HostMemory for ProcessMemory {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        let src = self.resolve(addr, buf.len())?;
        // SAFETY: `resolve` proved [addr, addr+len) lies inside a live
        // allocation owned by a `DmaAllocation` registered here. The host may
        // be writing it concurrently (as with real DMA); bytes are copied, no
        // reference into that memory is created.
        unsafe { std::ptr::copy_nonoverlapping(src, buf.as_mut_ptr(), buf.len()) };
        Ok(())
    }

    fn write(&self, addr: u64, data: &[u8]) -> Result<(), DmaError> {
        let dst = self.resolve(addr, data.len())?;
        // SAFETY: as in `read`; `data` cannot overlap the destination because
        // it is borrowed from controller-owned memory.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), dst, data.len()) };
        Ok(())
    }
}

/// A block of host memory registered for DMA; unregistered and freed on drop.
///
/// The controller may write it at any time while a command that names it is
/// outstanding, so it is exposed through raw pointers and copying accessors;
/// the driver's buffer types build their borrow discipline on top.
#[derive(Debug)]
pub struct DmaAllocation {
    ptr: NonNull<u8>,
    layout: Layout,
    owner: Arc<ProcessMemory>,
}

// SAFETY: the allocation is plain memory owned by this value; moving it to
// another thread moves that ownership.
unsafe impl Send for DmaAllocation {}
// SAFETY: shared access only hands out raw pointers and copies.
unsafe impl Sync for DmaAllocation {}

impl DmaAllocation {
    /// Bus (and virtual) address of the first byte.
    pub fn addr(&self) -> u64 {
        self.ptr.as_ptr() as u64
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.layout.size()
    }

    /// Always false: empty allocations are refused.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Raw pointer to the first byte.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

impl Drop for DmaAllocation {
    fn drop(&mut self) {
        let start = self.addr();
        self.owner.modify(|v| v.retain(|r| r.start != start));
        // SAFETY: allocated in `ProcessMemory::allocate` with this layout and
        // no longer reachable through the region list.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accesses_are_confined_to_allocations() {
        let mem = ProcessMemory::new();
        let a = mem.allocate(8192, 4096).unwrap();
        mem.write(a.addr() + 100, b"hello").unwrap();
        let mut buf = [0u8; 5];
        mem.read(a.addr() + 100, &mut buf).unwrap();
        assert_eq!(&buf, b"hello");
        assert!(mem.read(a.addr() + 8190, &mut buf).is_err());
        assert!(mem.read(a.addr().wrapping_sub(1), &mut buf).is_err());
        assert!(mem.read(0, &mut buf).is_err());
        assert!(mem.read(u64::MAX - 2, &mut buf).is_err());
        let addr = a.addr();
        drop(a);
        assert!(mem.read(addr, &mut buf).is_err());
        assert_eq!(mem.regions(), 0);
    }
}
