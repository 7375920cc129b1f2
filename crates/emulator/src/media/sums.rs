//! A table of one 32-bit word per block, mapped into memory: a region of
//! the device image (shared, so stores reach the file through the page
//! cache, exactly as `pwrite` does) or anonymous memory. Entries are read
//! and written as atomics, so lookups on the read path cost a load, not a
//! system call, and take no lock.
//!
//! The image file must keep at least the mapped length for as long as the
//! table lives: the image's lock keeps znskit's own processes away, and
//! an image must not be truncated from outside while it is open.

use std::fs::File;
use std::io;
use std::os::unix::io::AsRawFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

/// Bytes of one entry.
const ENTRY: usize = std::mem::size_of::<AtomicU32>();

/// Where the table lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backing {
    /// A shared mapping of a file region.
    File,
    /// Anonymous private memory.
    Memory,
}

/// One 32-bit entry per block, in a memory mapping.
#[derive(Debug)]
pub(crate) struct SumTable {
    base: NonNull<AtomicU32>,
    entries: usize,
    map_len: usize,
    backing: Backing,
}

// SAFETY: the mapping is owned by the table and lives until drop; every
// access goes through `AtomicU32`, which is safe to share between threads.
unsafe impl Send for SumTable {}
// SAFETY: as above: shared references only ever perform atomic operations.
unsafe impl Sync for SumTable {}

fn page_size() -> usize {
    // SAFETY: sysconf takes an integer and touches no memory of ours.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

impl SumTable {
    /// Maps `entries` entries of `file` at byte `offset` (a multiple of the
    /// page size), shared: stores go to the file. The file must already be
    /// at least `offset + 4 * entries` bytes long.
    pub fn in_file(file: &File, offset: u64, entries: u64) -> io::Result<SumTable> {
        if !offset.is_multiple_of(page_size() as u64) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("checksum region offset {offset} is not page aligned"),
            ));
        }
        let len = Self::bytes(entries)?;
        let need = offset.checked_add(len as u64).ok_or(io::ErrorKind::InvalidInput)?;
        let have = file.metadata()?.len();
        if have < need {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("the file is {have} bytes, its checksum region ends at {need}"),
            ));
        }
        let off = libc::off_t::try_from(offset).map_err(|_| io::ErrorKind::InvalidInput)?;
        // SAFETY: a fresh mapping at an address the kernel chooses; it
        // aliases no Rust object. The descriptor is open for the call
        // (borrowed), and a mapping stays valid after it is closed.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                off,
            )
        };
        Self::wrap(p, entries as usize, len, Backing::File)
    }

    /// An anonymous table of `entries` zero entries; memory is taken only
    /// for the pages that are written.
    pub fn in_memory(entries: u64) -> io::Result<SumTable> {
        let len = Self::bytes(entries)?;
        // SAFETY: a fresh anonymous mapping; it aliases nothing.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        Self::wrap(p, entries as usize, len, Backing::Memory)
    }

    fn bytes(entries: u64) -> io::Result<usize> {
        entries
            .checked_mul(ENTRY as u64)
            .and_then(|b| usize::try_from(b).ok())
            .filter(|&b| b > 0 && b <= isize::MAX as usize)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "checksum table size"))
    }

    fn wrap(p: *mut libc::c_void, entries: usize, len: usize, b: Backing) -> io::Result<SumTable> {
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = NonNull::new(p.cast::<AtomicU32>()).ok_or(io::ErrorKind::Other)?;
        Ok(SumTable { base, entries, map_len: len, backing: b })
    }

    fn all(&self) -> &[AtomicU32] {
        // SAFETY: the mapping holds `entries` u32 slots (page aligned, so
        // aligned for AtomicU32), is readable and writable, and lives as
        // long as `self`; it is only ever accessed atomically.
        unsafe { std::slice::from_raw_parts(self.base.as_ptr(), self.entries) }
    }

    /// Entry `i`. Panics past the end: callers check ranges first.
    #[inline]
    pub fn get(&self, i: u64) -> u32 {
        self.all()[i as usize].load(Ordering::Relaxed)
    }

    /// Sets entry `i`. Panics past the end: callers check ranges first.
    #[inline]
    pub fn set(&self, i: u64, v: u32) {
        self.all()[i as usize].store(v, Ordering::Relaxed)
    }

    /// Zeroes entries `first..first + count`; whole pages among them are
    /// given back (a hole punched in the file, or memory released).
    pub fn clear(&self, first: u64, count: u64) {
        let all = &self.all()[first as usize..(first + count) as usize];
        let page = page_size();
        let start = all.as_ptr() as usize;
        let end = start + all.len() * ENTRY;
        let (lo, hi) = (start.next_multiple_of(page), end / page * page);
        let advice = match self.backing {
            Backing::File => libc::MADV_REMOVE,
            Backing::Memory => libc::MADV_DONTNEED,
        };
        let released = hi > lo && {
            // SAFETY: `lo..hi` lies within our own mapping (whole pages of
            // the entries being cleared); afterwards those pages read as
            // zeros, which is what this function promises, and no Rust
            // reference into them outlives the call (entries are accessed
            // atomically, one at a time).
            unsafe { libc::madvise(lo as *mut libc::c_void, hi - lo, advice) == 0 }
        };
        for (i, e) in all.iter().enumerate() {
            let at = start + i * ENTRY;
            if !released || at < lo || at >= hi {
                e.store(0, Ordering::Relaxed);
            }
        }
    }
}

impl Drop for SumTable {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in the constructor; no
        // reference into it outlives `self`.
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.map_len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    #[test]
    fn file_tables_write_through_to_the_file() {
        let f = tempfile::tempfile().unwrap();
        let page = page_size() as u64;
        f.set_len(page + 8192 * 4).unwrap();
        let t = SumTable::in_file(&f, page, 8192).unwrap();
        t.set(0, 0xDEAD_BEEF);
        t.set(8191, 7);
        let mut b = [0u8; 4];
        f.read_exact_at(&mut b, page).unwrap();
        assert_eq!(u32::from_le_bytes(b), 0xDEAD_BEEF);
        f.read_exact_at(&mut b, page + 8191 * 4).unwrap();
        assert_eq!(u32::from_le_bytes(b), 7);
        // Bytes written to the file show in the table.
        f.write_all_at(&9u32.to_le_bytes(), page + 4 * 100).unwrap();
        assert_eq!(t.get(100), 9);
        // Clearing a range spanning whole pages and partial ones.
        for i in 0..8192 {
            t.set(i, i as u32 + 1);
        }
        t.clear(3, 8000);
        assert_eq!((t.get(2), t.get(3), t.get(8002), t.get(8003)), (3, 0, 0, 8004));
        assert!((3..8003).all(|i| t.get(i) == 0));
        f.read_exact_at(&mut b, page + 4 * 5000).unwrap();
        assert_eq!(b, [0; 4]);
    }

    #[test]
    fn memory_tables_and_bad_arguments() {
        let t = SumTable::in_memory(100_000).unwrap();
        assert_eq!(t.get(99_999), 0);
        for i in 0..100_000 {
            t.set(i, 5);
        }
        t.clear(0, 100_000);
        assert!((0..100_000).all(|i| t.get(i) == 0));
        let f = tempfile::tempfile().unwrap();
        f.set_len(4096).unwrap();
        assert!(SumTable::in_file(&f, 0, 2048).is_err(), "past the end of the file");
        assert!(SumTable::in_file(&f, 100, 8).is_err(), "unaligned");
        assert!(SumTable::in_memory(0).is_err());
    }
}
