//! Chunk memory for [`RamMedia`](super::RamMedia): fixed-size chunks carved
//! out of 2 MiB-aligned slabs that the kernel may back with huge pages.
//!
//! Why not one heap allocation per chunk: a random 4 KiB read of a sparse
//! medium is one copy, bound by the cache and TLB misses of its source.
//! Chunks packed densely into huge-page slabs need one TLB entry per 2 MiB
//! instead of one per 4 KiB page; on the reference machine random 4 KiB
//! copies over 64 MiB ran about 1.3× faster from such slabs than from
//! separately allocated 64 KiB buffers.
//!
//! Allocation and release take the arena's mutex: they happen once per
//! chunk (64 KiB of data) on first write and on deallocation, never on the
//! read or overwrite path.
//!
//! All `unsafe` of the media lives in this module: the mapping of slabs and
//! the slices handed out for chunks.

use std::ptr::NonNull;

use parking_lot::Mutex;

/// Slab alignment and minimum size: the x86-64 and arm64 (4 KiB granule)
/// huge page size.
const SLAB_ALIGN: usize = 2 << 20;

/// An anonymous, zero-filled, `SLAB_ALIGN`-aligned mapping.
struct Mapping {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: a `Mapping` is plain memory owned by whoever holds it; the raw
// pointer is not tied to a thread.
unsafe impl Send for Mapping {}

impl Mapping {
    /// Maps `len` bytes (a multiple of `SLAB_ALIGN`), or `None` when the
    /// system refuses.
    fn new(len: usize) -> Option<Mapping> {
        let span = len.checked_add(SLAB_ALIGN)?;
        // SAFETY: an anonymous private mapping at an address of the
        // kernel's choosing touches no existing memory.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                span,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            return None;
        }
        let start = raw as usize;
        let aligned = start.next_multiple_of(SLAB_ALIGN);
        let head = aligned - start;
        let tail = span - head - len;
        // SAFETY: both ranges lie inside the mapping just made and outside
        // the aligned `len` bytes kept; unmapping them frees address space
        // only.
        unsafe {
            if head > 0 {
                libc::munmap(raw, head);
            }
            if tail > 0 {
                libc::munmap((aligned + len) as *mut libc::c_void, tail);
            }
            // Only advice: without huge pages the slab still works.
            libc::madvise(aligned as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
        }
        Some(Mapping { base: NonNull::new(aligned as *mut u8)?, len })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the range is exactly the one `new` kept mapped, and no
        // chunk into it is alive (the arena drops a slab only when all its
        // chunks are free, or when the arena itself goes).
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.len);
        }
    }
}

/// One slab: `per_slab` chunk places, handed out in address order first
/// (`bump`), then from `free`.
struct Slab {
    mapping: Mapping,
    /// Chunks handed out and not yet freed.
    used: u32,
    /// Places below this index have been handed out at least once (and so
    /// may hold old bytes); those above are still zero-filled.
    bump: u32,
    /// Freed places; their bytes are stale and zeroed when reused.
    free: Vec<u32>,
}

/// Arena state behind the mutex.
#[derive(Default)]
struct State {
    slabs: Vec<Option<Slab>>,
    /// Indices of `slabs` that are `None`, for reuse.
    vacant: Vec<u32>,
    /// Slabs with a place to hand out, most recently added last.
    with_space: Vec<u32>,
    /// A slab whose chunks are all free, kept mapped so that a medium
    /// that frees and refills a zone does not map and unmap slabs.
    spare: Option<u32>,
}

/// Fixed-size chunk allocator over huge-page slabs.
///
/// # Thread safety
///
/// `Send + Sync`; `allocate` and `free` serialize on one mutex.
pub(crate) struct Arena {
    chunk_bytes: usize,
    per_slab: u32,
    slab_bytes: usize,
    state: Mutex<State>,
}

/// One chunk of an [`Arena`]: `chunk_bytes` bytes owned exclusively, like a
/// `Box<[u8]>`, until handed back with [`Arena::free`].
///
/// A chunk must not outlive its arena; `RamMedia` guarantees it by
/// declaring its chunk tables before the arena, so they drop first.
///
/// Kept to 16 bytes (a chunk slot is 24 with its lock) because the media
/// tables hold one slot per 64 KiB of address space.
pub(crate) struct Chunk {
    ptr: NonNull<u8>,
    len: u32,
    slab: u32,
}

// SAFETY: a chunk owns its bytes exclusively, like a `Box<[u8]>`; shared
// access gives `&[u8]` and mutation needs `&mut Chunk`.
unsafe impl Send for Chunk {}
// SAFETY: as above; `&Chunk` only ever yields `&[u8]`.
unsafe impl Sync for Chunk {}

impl Chunk {
    /// Address of the chunk's first byte, for [`prefetch`] hints.
    #[inline]
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The chunk's bytes.
    #[inline]
    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: `ptr..ptr + len` lies in a live slab (the arena outlives
        // its chunks and unmaps a slab only when all its chunks are free)
        // and belongs to this chunk alone.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len as usize) }
    }

    /// The chunk's bytes, mutably.
    #[inline]
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len as usize) }
    }
}

/// Asks the CPU to start loading the cache lines of `len` bytes at `ptr`
/// into its caches. Any address is allowed: a prefetch never faults, so a
/// stale pointer to a chunk freed (or a slab unmapped) meanwhile is harmless.
#[inline]
pub(crate) fn prefetch(ptr: *const u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    for line in (0..len).step_by(64) {
        // SAFETY: PREFETCHT0 only hints the cache; it reads no memory
        // architecturally and cannot fault, whatever the address. SSE is
        // part of the x86-64 baseline.
        unsafe {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            _mm_prefetch::<_MM_HINT_T0>(ptr.wrapping_add(line).cast());
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (ptr, len);
}

impl Arena {
    /// An arena of chunks of `chunk_bytes` bytes (rounded up to 4 KiB so
    /// every chunk starts page-aligned; at most 1 GiB). Maps nothing yet.
    pub(crate) fn new(chunk_bytes: usize) -> Arena {
        assert!(chunk_bytes <= 1 << 30, "chunks of {chunk_bytes} bytes");
        let chunk_bytes = chunk_bytes.max(1).next_multiple_of(4096);
        let slab_bytes = chunk_bytes.next_multiple_of(SLAB_ALIGN);
        Arena {
            chunk_bytes,
            per_slab: (slab_bytes / chunk_bytes) as u32,
            slab_bytes,
            state: Mutex::new(State::default()),
        }
    }

    /// Bytes of one slab.
    pub(crate) fn slab_bytes(&self) -> usize {
        self.slab_bytes
    }

    /// Bytes currently mapped for slabs.
    pub(crate) fn mapped_bytes(&self) -> usize {
        let state = self.state.lock();
        state.slabs.iter().flatten().count() * self.slab_bytes
    }

    /// A zero-filled chunk, or `None` when no memory can be mapped.
    pub(crate) fn allocate(&self) -> Option<Chunk> {
        let mut state = self.state.lock();
        let id = match state.with_space.last() {
            Some(&id) => id,
            None => self.add_slab(&mut state)?,
        };
        if state.spare == Some(id) {
            state.spare = None;
        }
        let slab = state.slabs[id as usize].as_mut().expect("listed slabs exist");
        let (place, stale) = match slab.free.pop() {
            Some(place) => (place, true),
            None => {
                slab.bump += 1;
                (slab.bump - 1, false)
            }
        };
        slab.used += 1;
        let full = slab.free.is_empty() && slab.bump == self.per_slab;
        let offset = place as usize * self.chunk_bytes;
        // SAFETY: `place < per_slab`, so the offset lies inside the slab.
        let ptr = unsafe { NonNull::new_unchecked(slab.mapping.base.as_ptr().add(offset)) };
        if full {
            state.with_space.pop();
        }
        drop(state);
        let mut chunk = Chunk { ptr, len: self.chunk_bytes as u32, slab: id };
        if stale {
            chunk.bytes_mut().fill(0);
        }
        Some(chunk)
    }

    /// Hands a chunk back. A slab left with no chunk in use is kept as the
    /// spare if there is none, else unmapped.
    pub(crate) fn free(&self, chunk: Chunk) {
        let mut state = self.state.lock();
        let id = chunk.slab;
        let slab = state.slabs[id as usize].as_mut().expect("a chunk's slab is mapped");
        let offset = chunk.ptr.as_ptr() as usize - slab.mapping.base.as_ptr() as usize;
        let was_full = slab.free.is_empty() && slab.bump == self.per_slab;
        slab.free.push((offset / self.chunk_bytes) as u32);
        slab.used -= 1;
        let empty = slab.used == 0;
        if was_full {
            state.with_space.push(id);
        }
        if !empty {
            return;
        }
        match state.spare {
            None => state.spare = Some(id),
            Some(_) => {
                state.with_space.retain(|&s| s != id);
                state.slabs[id as usize] = None;
                state.vacant.push(id);
            }
        }
    }

    /// Maps a new slab and lists it as having space.
    fn add_slab(&self, state: &mut State) -> Option<u32> {
        let mapping = Mapping::new(self.slab_bytes)?;
        let slab = Slab { mapping, used: 0, bump: 0, free: Vec::new() };
        let id = match state.vacant.pop() {
            Some(id) => {
                state.slabs[id as usize] = Some(slab);
                id
            }
            None => {
                state.slabs.push(Some(slab));
                (state.slabs.len() - 1) as u32
            }
        };
        state.with_space.push(id);
        Some(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arena_chunks_are_zeroed_distinct_and_page_aligned() {
        let arena = Arena::new(65536 + 1024);
        assert_eq!(arena.chunk_bytes, 69632);
        let mut chunks: Vec<Chunk> = (0..100).map(|_| arena.allocate().unwrap()).collect();
        for (i, c) in chunks.iter_mut().enumerate() {
            assert_eq!(c.ptr.as_ptr() as usize % 4096, 0);
            assert!(c.bytes().iter().all(|&b| b == 0));
            c.bytes_mut().fill(i as u8 + 1);
        }
        for (i, c) in chunks.iter().enumerate() {
            assert!(c.bytes().iter().all(|&b| b == i as u8 + 1), "chunk {i} overwritten");
        }
        let slabs = 100usize.div_ceil(arena.per_slab as usize);
        assert_eq!(arena.mapped_bytes(), slabs * arena.slab_bytes());
    }

    #[test]
    fn arena_reuses_freed_chunks_zeroed_and_unmaps_empty_slabs() {
        let arena = Arena::new(65536);
        assert_eq!(arena.per_slab, 32);
        let mut chunks: Vec<Chunk> = (0..96).map(|_| arena.allocate().unwrap()).collect();
        for c in &mut chunks {
            c.bytes_mut().fill(0xAB);
        }
        assert_eq!(arena.mapped_bytes(), 3 * arena.slab_bytes());
        // Free everything: one slab stays as the spare, two are unmapped.
        for c in chunks.drain(..) {
            arena.free(c);
        }
        assert_eq!(arena.mapped_bytes(), arena.slab_bytes());
        // Reused places come back zeroed.
        let again: Vec<Chunk> = (0..40).map(|_| arena.allocate().unwrap()).collect();
        assert!(again.iter().all(|c| c.bytes().iter().all(|&b| b == 0)));
        assert_eq!(arena.mapped_bytes(), 2 * arena.slab_bytes());
        for c in again {
            arena.free(c);
        }
        assert_eq!(arena.mapped_bytes(), arena.slab_bytes());
    }

    #[test]
    fn arena_chunk_larger_than_a_slab() {
        let arena = Arena::new(3 << 20);
        assert_eq!(arena.per_slab, 1);
        let a = arena.allocate().unwrap();
        let b = arena.allocate().unwrap();
        assert_ne!(a.ptr, b.ptr);
        assert_eq!(a.bytes().len(), 3 << 20);
        arena.free(a);
        arena.free(b);
        assert_eq!(arena.mapped_bytes(), arena.slab_bytes());
    }
}
