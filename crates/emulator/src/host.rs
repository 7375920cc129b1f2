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
use std::sync::atomic::{AtomicUsize, Ordering};
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
/// Implementations must be callable from any thread concurrently. The host
/// may access the same memory while the controller does (as with real DMA);
/// what the controller reads or writes then is whatever the race gives.
pub trait HostMemory: Send + Sync {
    /// Copies `buf.len()` bytes at bus address `addr` into `buf`.
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), DmaError>;

    /// Copies `data` to bus address `addr`.
    fn write(&self, addr: u64, data: &[u8]) -> Result<(), DmaError>;

    /// Calls `f` once with a view of this memory in which every access sees
    /// the same set of regions, so a batch of accesses pays for one lookup
    /// of the region list instead of one each. Memory a view has found
    /// stays valid until `f` returns, even if the host releases it meanwhile.
    fn with_pinned(&self, f: &mut dyn FnMut(&dyn HostMemory));

    /// Lends `len` bytes at `addr` to `f` as a mutable slice, or fails
    /// without calling `f` if any byte lies outside host memory. What `f`
    /// writes is in host memory when this returns. The default stages the
    /// bytes through a temporary buffer; [`ProcessMemory`] lends the memory
    /// itself, so nothing is copied twice.
    ///
    /// # Safety
    ///
    /// While `f` runs, the calling thread must not access this host memory
    /// by any other path (no `read`, `write` or other window of `self` or of
    /// a view of it, no host pointer), since the window may be the memory
    /// itself.
    unsafe fn with_mut(
        &self,
        addr: u64,
        len: usize,
        f: &mut dyn FnMut(&mut [u8]),
    ) -> Result<(), DmaError> {
        let mut staged = vec![0u8; len];
        self.read(addr, &mut staged)?;
        f(&mut staged);
        self.write(addr, &staged)
    }

    /// Lends `len` bytes at `addr` to `f` for reading, or fails without
    /// calling `f` if any byte lies outside host memory. The default copies
    /// them first; [`ProcessMemory`] lends the memory itself.
    ///
    /// # Safety
    ///
    /// As for [`HostMemory::with_mut`]: no other access to this host memory
    /// from the calling thread while `f` runs.
    unsafe fn with_ref(
        &self,
        addr: u64,
        len: usize,
        f: &mut dyn FnMut(&[u8]),
    ) -> Result<(), DmaError> {
        let mut staged = vec![0u8; len];
        self.read(addr, &mut staged)?;
        f(&staged);
        Ok(())
    }
}

/// The memory of one allocation. It is freed when the last `Arc` to it
/// goes: the [`DmaAllocation`] holds one, and so does every snapshot of the
/// region list that contains it.
#[derive(Debug)]
struct RawAllocation {
    ptr: NonNull<u8>,
    layout: Layout,
}

// SAFETY: plain heap memory with no thread affinity; this type only frees it
// (on drop, once) and hands out its address. Who may access the bytes when
// is governed by `ProcessMemory` and `DmaAllocation`.
unsafe impl Send for RawAllocation {}
// SAFETY: as above; `&RawAllocation` gives access to nothing but the address.
unsafe impl Sync for RawAllocation {}

impl Drop for RawAllocation {
    fn drop(&mut self) {
        // SAFETY: allocated in `ProcessMemory::allocate` with this layout;
        // this is the last owner (no `DmaAllocation`, no region-list
        // snapshot refers to it any more), so no access can follow.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) };
    }
}

#[derive(Debug, Clone)]
struct Region {
    start: u64,
    end: u64,
    mem: Arc<RawAllocation>,
}

impl Region {
    #[inline]
    fn contains(&self, addr: u64, end: u64) -> bool {
        addr >= self.start && end <= self.end
    }
}

/// This process's memory, as seen by an in-process controller.
///
/// Regions come from [`ProcessMemory::allocate`]; lookups are lock-free
/// (a snapshot of the sorted region list), so queues on different threads
/// never contend here. Allocation and release take a short writer path.
///
/// Lifetime rule: every region-list snapshot holds an `Arc` of each
/// allocation in it, and every access happens while the accessing thread
/// holds its snapshot. Dropping a [`DmaAllocation`] removes it from the
/// current list, but its memory is freed only when the last snapshot that
/// still lists it is released, so an access that passed the region check
/// can never touch freed memory.
#[derive(Debug)]
pub struct ProcessMemory {
    regions: ArcSwap<Vec<Region>>,
    update: parking_lot::Mutex<()>,
    /// Region index last found for each 4 KiB page, by page number modulo
    /// [`PAGE_HINTS`]: a queue's data buffers are used in turn, and a
    /// lookup that hits here skips the binary search. Only hints: any
    /// value is safe, because a hit is checked against the snapshot.
    page_hints: [AtomicUsize; PAGE_HINTS],
}

/// Entries of [`ProcessMemory::page_hints`].
const PAGE_HINTS: usize = 256;

impl Default for ProcessMemory {
    fn default() -> Self {
        ProcessMemory {
            regions: ArcSwap::from_pointee(Vec::new()),
            update: parking_lot::Mutex::new(()),
            page_hints: std::array::from_fn(|_| AtomicUsize::new(0)),
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
        let raw = Arc::new(RawAllocation { ptr, layout });
        let start = ptr.as_ptr() as u64;
        let region = Region { start, end: start + len as u64, mem: Arc::clone(&raw) };
        self.modify(|v| {
            let at = v.partition_point(|r| r.start < start);
            v.insert(at, region);
        });
        Some(DmaAllocation { raw, owner: Arc::clone(self) })
    }

    fn modify(&self, f: impl FnOnce(&mut Vec<Region>)) {
        let _guard = self.update.lock();
        let mut v = Vec::clone(&self.regions.load());
        f(&mut v);
        self.regions.store(Arc::new(v));
    }

    /// Number of registered regions.
    pub fn regions(&self) -> usize {
        self.regions.load().len()
    }
}

impl HostMemory for ProcessMemory {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        let snapshot = self.regions.load();
        View::new(&snapshot, &self.page_hints).read(addr, buf)
    }

    fn write(&self, addr: u64, data: &[u8]) -> Result<(), DmaError> {
        let snapshot = self.regions.load();
        View::new(&snapshot, &self.page_hints).write(addr, data)
    }

    fn with_pinned(&self, f: &mut dyn FnMut(&dyn HostMemory)) {
        let snapshot = self.regions.load();
        f(&View::new(&snapshot, &self.page_hints));
    }

    unsafe fn with_mut(
        &self,
        addr: u64,
        len: usize,
        f: &mut dyn FnMut(&mut [u8]),
    ) -> Result<(), DmaError> {
        let snapshot = self.regions.load();
        // SAFETY: the caller's contract, passed on unchanged.
        unsafe { View::new(&snapshot, &self.page_hints).with_mut(addr, len, f) }
    }

    unsafe fn with_ref(
        &self,
        addr: u64,
        len: usize,
        f: &mut dyn FnMut(&[u8]),
    ) -> Result<(), DmaError> {
        let snapshot = self.regions.load();
        // SAFETY: the caller's contract, passed on unchanged.
        unsafe { View::new(&snapshot, &self.page_hints).with_ref(addr, len, f) }
    }
}

/// Host memory through one region-list snapshot, which the caller keeps
/// alive for as long as the view exists (the borrow says so).
struct View<'a> {
    regions: &'a [Region],
    /// Index of the region the last lookup found: accesses come in runs
    /// to the same ring or buffer. Only a hint; any value is safe.
    hint: AtomicUsize,
    /// The memory's per-page hints (see [`ProcessMemory::page_hints`]).
    page_hints: &'a [AtomicUsize; PAGE_HINTS],
}

impl<'a> View<'a> {
    fn new(regions: &'a [Region], page_hints: &'a [AtomicUsize; PAGE_HINTS]) -> Self {
        View { regions, hint: AtomicUsize::new(0), page_hints }
    }

    /// Translates a bus range into a pointer, or fails if any byte of it lies
    /// outside a registered region. The pointer is valid for `len` bytes for
    /// as long as the snapshot behind `self.regions` is alive, because the
    /// snapshot holds an `Arc` of the allocation it points into.
    #[inline]
    fn resolve(&self, addr: u64, len: usize) -> Result<*mut u8, DmaError> {
        let err = DmaError { addr, len };
        let end = addr.checked_add(len as u64).ok_or(err)?;
        let hint = self.hint.load(Ordering::Relaxed);
        let page = &self.page_hints[(addr >> 12) as usize % PAGE_HINTS];
        let r = match self.regions.get(hint) {
            Some(r) if r.contains(addr, end) => r,
            _ => match self.regions.get(page.load(Ordering::Relaxed)) {
                Some(r) if r.contains(addr, end) => r,
                _ => {
                    let at = self.regions.partition_point(|r| r.start <= addr).checked_sub(1);
                    let at = at.ok_or(err)?;
                    let r = &self.regions[at];
                    if !r.contains(addr, end) {
                        return Err(err);
                    }
                    self.hint.store(at, Ordering::Relaxed);
                    page.store(at, Ordering::Relaxed);
                    r
                }
            },
        };
        // In bounds: `addr - start + len <= end - start`, the allocation's size.
        let offset = (addr - r.start) as usize;
        // SAFETY: `offset` lies within the allocation (checked above), so the
        // result stays inside the same allocated object.
        Ok(unsafe { r.mem.ptr.as_ptr().add(offset) })
    }
}

impl HostMemory for View<'_> {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        let src = self.resolve(addr, buf.len())?;
        // SAFETY: `resolve` proved [addr, addr+len) lies inside an allocation
        // that the snapshot borrowed by `self` keeps alive until after this
        // copy (see the lifetime rule on `ProcessMemory`). The host may be
        // writing it concurrently (as with real DMA); bytes are copied, no
        // reference into that memory outlives the call. `buf` is a distinct
        // Rust borrow, so it cannot overlap memory reachable only through
        // raw pointers of the allocation while the copy runs.
        unsafe { std::ptr::copy_nonoverlapping(src, buf.as_mut_ptr(), buf.len()) };
        Ok(())
    }

    fn write(&self, addr: u64, data: &[u8]) -> Result<(), DmaError> {
        let dst = self.resolve(addr, data.len())?;
        // SAFETY: as in `read`; `data` does not overlap the destination
        // because it is borrowed from controller-owned memory.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), dst, data.len()) };
        Ok(())
    }

    fn with_pinned(&self, f: &mut dyn FnMut(&dyn HostMemory)) {
        f(self);
    }

    unsafe fn with_mut(
        &self,
        addr: u64,
        len: usize,
        f: &mut dyn FnMut(&mut [u8]),
    ) -> Result<(), DmaError> {
        let p = self.resolve(addr, len)?;
        // SAFETY: the range is inside an allocation that the snapshot keeps
        // alive for the whole call (as in `read`), and the slice lives only
        // while `f` runs. By this function's contract the calling thread
        // makes no other access to host memory meanwhile, so on this thread
        // the window is the only path to those bytes. The host owns the
        // memory and could still touch it from another thread; it has handed
        // the range to the device for a transfer, and touching it during the
        // transfer is the contract breach it would be with a real device
        // (the data is then undefined) -- the same footing as the copying
        // accessors, which race with such a host in the same way.
        let window = unsafe { std::slice::from_raw_parts_mut(p, len) };
        f(window);
        Ok(())
    }

    unsafe fn with_ref(
        &self,
        addr: u64,
        len: usize,
        f: &mut dyn FnMut(&[u8]),
    ) -> Result<(), DmaError> {
        let p = self.resolve(addr, len)?;
        // SAFETY: as in `with_mut`, for a shared slice.
        let window = unsafe { std::slice::from_raw_parts(p, len) };
        f(window);
        Ok(())
    }
}

/// A block of host memory registered for DMA; unregistered on drop, and
/// freed once no in-flight controller access can still reach it.
///
/// The controller may write it at any time while a command that names it is
/// outstanding, so it is exposed through raw pointers and copying accessors;
/// the driver's buffer types build their borrow discipline on top.
#[derive(Debug)]
pub struct DmaAllocation {
    raw: Arc<RawAllocation>,
    owner: Arc<ProcessMemory>,
}

impl DmaAllocation {
    /// Bus (and virtual) address of the first byte.
    pub fn addr(&self) -> u64 {
        self.raw.ptr.as_ptr() as u64
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.raw.layout.size()
    }

    /// Always false: empty allocations are refused.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Raw pointer to the first byte.
    pub fn as_ptr(&self) -> *mut u8 {
        self.raw.ptr.as_ptr()
    }
}

impl Drop for DmaAllocation {
    fn drop(&mut self) {
        // Unregister; the memory goes with the last `Arc` of `raw`, which may
        // be a snapshot a controller thread is still reading through.
        self.owner.modify(|v| v.retain(|r| !Arc::ptr_eq(&r.mem, &self.raw)));
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

    #[test]
    fn windows_and_views() {
        let mem = ProcessMemory::new();
        let a = mem.allocate(8192, 4096).unwrap();
        let b = mem.allocate(4096, 4096).unwrap();
        // SAFETY: the closures touch only their window.
        unsafe {
            mem.with_mut(a.addr() + 10, 6, &mut |w| w.copy_from_slice(b"window")).unwrap();
            let mut seen = Vec::new();
            mem.with_ref(a.addr() + 10, 6, &mut |w| seen.extend_from_slice(w)).unwrap();
            assert_eq!(seen, b"window");
            let mut called = false;
            assert!(mem.with_mut(a.addr() + 8190, 4, &mut |_| called = true).is_err());
            assert!(mem.with_ref(b.addr() + 4096, 1, &mut |_| called = true).is_err());
            assert!(!called, "a refused window never reaches the closure");
        }
        mem.with_pinned(&mut |v| {
            // Alternate between regions so the lookup hint is both hit and missed.
            for i in 0..4u8 {
                let at = if i % 2 == 0 { a.addr() + 100 } else { b.addr() + 100 };
                v.write(at, &[i; 3]).unwrap();
                let mut back = [0u8; 3];
                v.read(at, &mut back).unwrap();
                assert_eq!(back, [i; 3]);
            }
            assert!(v.read(b.addr() + 4095, &mut [0u8; 2]).is_err());
            assert!(v.read(u64::MAX, &mut [0u8; 2]).is_err());
        });
    }

    /// One thread allocates and drops buffers as fast as it can while another
    /// reads and writes whatever buffer was allocated last, through every
    /// kind of access. An access either fails (the buffer was already gone
    /// from the region list) or completes on live memory; with the memory
    /// freed between the region check and the copy, large buffers (returned
    /// to the system at once) would fault here.
    #[test]
    fn release_races_with_access() {
        use std::sync::atomic::{AtomicBool, AtomicU64};

        const ROUNDS: usize = 20_000;
        let mem = ProcessMemory::new();
        let last = AtomicU64::new(0);
        let done = AtomicBool::new(false);
        let (mut ok, mut failed) = (0u64, 0u64);
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut live = std::collections::VecDeque::new();
                for i in 0..ROUNDS {
                    // 4 KiB up to 1 MiB: the larger ones are mapped and
                    // unmapped by the system allocator on every round.
                    let len = 4096 << (i % 9);
                    let a = mem.allocate(len, 4096).expect("host memory");
                    last.store(a.addr(), Ordering::Release);
                    live.push_back(a);
                    if live.len() > 2 {
                        live.pop_front();
                    }
                }
                done.store(true, Ordering::Release);
            });
            let mut buf = [0u8; 4096];
            let mut round = 0u8;
            while !done.load(Ordering::Acquire) {
                let addr = last.load(Ordering::Acquire);
                if addr == 0 {
                    continue;
                }
                round = round.wrapping_add(1);
                let mut count = |r: Result<(), DmaError>| match r {
                    Ok(()) => ok += 1,
                    Err(_) => failed += 1,
                };
                count(mem.write(addr, &[round; 4096]));
                count(mem.read(addr, &mut buf));
                // SAFETY: the closures touch only their window.
                count(unsafe { mem.with_mut(addr, 4096, &mut |w| w.fill(round)) });
                count(unsafe { mem.with_ref(addr, 4096, &mut |w| buf.copy_from_slice(w)) });
                mem.with_pinned(&mut |v| {
                    // Within one view, memory found once stays the same
                    // memory: what was written reads back, even if the
                    // buffer is dropped (and its address reused) meanwhile.
                    if v.write(addr, &[round; 4096]).is_ok() {
                        std::thread::yield_now();
                        v.read(addr, &mut buf).expect("still in this view");
                        assert!(buf.iter().all(|&b| b == round));
                    }
                });
            }
        });
        assert!(ok > 0, "the race was never exercised ({failed} refused)");
        assert_eq!(mem.regions(), 0);
    }
}
