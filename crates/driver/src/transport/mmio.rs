//! A mapped BAR: volatile, bounds-checked 32-bit register accesses.
//!
//! 64-bit registers are accessed as two 32-bit halves, low first, which
//! every NVMe controller accepts and which works on hosts without atomic
//! 64-bit MMIO.

use std::os::fd::RawFd;
use std::ptr::NonNull;

use crate::error::TransportError;

/// A memory-mapped register window, unmapped on drop.
///
/// Thread safety: `Send + Sync`; each access is a single volatile load or
/// store, which the hardware serializes.
#[derive(Debug)]
pub(crate) struct Mmio {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is device memory owned by this value; accesses are
// individual volatile loads and stores, valid from any thread.
unsafe impl Send for Mmio {}
// SAFETY: as above; no access creates a reference into the mapping.
unsafe impl Sync for Mmio {}

impl Mmio {
    /// Maps `len` bytes of `fd` at `offset` (a sysfs `resource0` file or a
    /// VFIO device region), readable and writable, shared.
    pub(crate) fn map(
        fd: RawFd,
        offset: u64,
        len: usize,
        what: &str,
    ) -> Result<Self, TransportError> {
        let off = libc::off_t::try_from(offset)
            .map_err(|_| TransportError::Vfio(format!("{what}: offset {offset:#x} too large")))?;
        // SAFETY: a fresh shared mapping of a device file; the kernel picks
        // the address, so no existing memory is affected. The result is
        // checked below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                off,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(TransportError::last_os(format!("mmap {what}")));
        }
        let base = NonNull::new(p.cast::<u8>()).ok_or_else(|| TransportError::last_os(what))?;
        Ok(Mmio { base, len })
    }

    fn in_bounds(&self, offset: u32) -> bool {
        offset.is_multiple_of(4) && (offset as usize).checked_add(4).is_some_and(|e| e <= self.len)
    }

    /// Reads the register at `offset`; all ones when out of the window (what
    /// a PCIe read of an absent register returns).
    #[inline]
    pub(crate) fn read32(&self, offset: u32) -> u32 {
        if !self.in_bounds(offset) {
            return u32::MAX;
        }
        // SAFETY: offset is 4-byte aligned and within the mapping (checked);
        // the mapping lives as long as `self`.
        unsafe { self.base.as_ptr().add(offset as usize).cast::<u32>().read_volatile() }
    }

    /// Writes the register at `offset`; ignored when out of the window.
    #[inline]
    pub(crate) fn write32(&self, offset: u32, value: u32) {
        if !self.in_bounds(offset) {
            tracing::warn!(offset, "MMIO write outside BAR0 ignored");
            return;
        }
        // SAFETY: as in `read32`.
        unsafe { self.base.as_ptr().add(offset as usize).cast::<u32>().write_volatile(value) }
    }

    /// Reads a 64-bit register as two halves, low first.
    pub(crate) fn read64(&self, offset: u32) -> u64 {
        let lo = self.read32(offset) as u64;
        let hi = self.read32(offset.wrapping_add(4)) as u64;
        lo | (hi << 32)
    }

    /// Writes a 64-bit register as two halves, low first.
    pub(crate) fn write64(&self, offset: u32, value: u64) {
        self.write32(offset, value as u32);
        self.write32(offset.wrapping_add(4), (value >> 32) as u32);
    }

    /// Length of the window in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Mmio {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping created in `map`; nothing
        // refers into it once `self` is gone.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}
