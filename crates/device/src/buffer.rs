//! I/O buffers: owned, page-aligned memory that commands transfer from and
//! to.
//!
//! An [`IoBuffer`] is either a DMA buffer of the user-space driver (the
//! controller reaches it directly) or plain page-aligned process memory
//! (what a kernel interface such as io_uring needs). Every backend accepts
//! both; one that cannot transfer from the kind it is given copies through a
//! buffer of its own. [`crate::ZonedDevice::alloc`] returns the kind its
//! backend transfers from without a copy.

use std::alloc::{self, Layout};
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

use zns_driver::DmaBuffer;

use crate::error::{DeviceError, Result};

/// Alignment (and allocation granule) of every I/O buffer.
pub const BUFFER_ALIGN: usize = 4096;

/// Page-aligned process memory owned by one buffer.
struct AlignedMemory {
    ptr: NonNull<u8>,
    len: usize,
    capacity: usize,
}

// SAFETY: the allocation is owned exclusively by this value; the pointer is
// never shared except through `&self`/`&mut self` borrows.
unsafe impl Send for AlignedMemory {}
// SAFETY: shared access only reads through `&self`, mutation needs `&mut self`.
unsafe impl Sync for AlignedMemory {}

impl AlignedMemory {
    fn new(len: usize) -> Result<Self> {
        let capacity = len.max(1).div_ceil(BUFFER_ALIGN) * BUFFER_ALIGN;
        let layout = Layout::from_size_align(capacity, BUFFER_ALIGN)
            .map_err(|e| DeviceError::InvalidArgument(format!("buffer of {len} bytes: {e}")))?;
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).ok_or_else(|| DeviceError::Io {
            context: format!("allocate a buffer of {len} bytes"),
            source: std::io::Error::from(std::io::ErrorKind::OutOfMemory),
        })?;
        Ok(AlignedMemory { ptr, len, capacity })
    }

    fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` points to `capacity >= len` initialized (zeroed at
        // allocation) bytes owned by `self`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`; `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedMemory {
    fn drop(&mut self) {
        let layout = Layout::from_size_align(self.capacity, BUFFER_ALIGN)
            .expect("layout was valid at allocation");
        // SAFETY: allocated in `new` with exactly this layout.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), layout) };
    }
}

enum Inner {
    Dma(DmaBuffer),
    Aligned(AlignedMemory),
}

/// An owned, page-aligned I/O buffer.
///
/// It dereferences to its bytes (`&[u8]`, `&mut [u8]`) for its current
/// length, which [`IoBuffer::set_len`] changes within its capacity; a
/// command transfers exactly the current length. Submitting a buffer
/// asynchronously moves it into the queue, which hands it back in the
/// completion, so the device never touches memory the caller can see.
///
/// Thread safety: `Send + Sync` (it owns its memory); move it to the thread
/// whose queue uses it.
pub struct IoBuffer {
    inner: Inner,
    /// Per-LBA metadata travelling with the data (NVMe separate metadata,
    /// MPTR): `blocks × metadata size` bytes.
    metadata: Option<Box<IoBuffer>>,
}

impl fmt::Debug for IoBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IoBuffer")
            .field("kind", &if self.is_dma() { "dma" } else { "aligned" })
            .field("len", &self.len())
            .field("capacity", &self.capacity())
            .field("metadata", &self.metadata.as_ref().map(|m| m.len()))
            .finish()
    }
}

impl IoBuffer {
    /// A zero-filled buffer of plain page-aligned process memory.
    pub fn aligned(len: usize) -> Result<Self> {
        Ok(IoBuffer { inner: Inner::Aligned(AlignedMemory::new(len)?), metadata: None })
    }

    /// Wraps a DMA buffer of the user-space driver.
    pub fn from_dma(buffer: DmaBuffer) -> Self {
        IoBuffer { inner: Inner::Dma(buffer), metadata: None }
    }

    /// The DMA buffer behind this buffer, if it is one.
    pub fn as_dma(&self) -> Option<&DmaBuffer> {
        match &self.inner {
            Inner::Dma(b) => Some(b),
            Inner::Aligned(_) => None,
        }
    }

    /// The DMA buffer behind this buffer, writable, if it is one.
    pub fn as_dma_mut(&mut self) -> Option<&mut DmaBuffer> {
        match &mut self.inner {
            Inner::Dma(b) => Some(b),
            Inner::Aligned(_) => None,
        }
    }

    /// Unwraps the DMA buffer; gives the buffer back when it is not one,
    /// or when metadata is attached (detach it first).
    pub fn into_dma(self) -> std::result::Result<DmaBuffer, IoBuffer> {
        match (self.inner, self.metadata) {
            (Inner::Dma(b), None) => Ok(b),
            (inner, metadata) => Err(IoBuffer { inner, metadata }),
        }
    }

    /// Attaches per-LBA metadata to the data: a Read, Write or Zone
    /// Append of this buffer then moves `blocks × metadata size` bytes of
    /// metadata too (NVMe separate metadata), which `meta`'s length must
    /// be. Only devices whose format has metadata accept it
    /// ([`crate::DeviceInfo::metadata_size`],
    /// [`crate::Capabilities::metadata`]). Replaces metadata attached
    /// before. Allocate `meta` like the data, with the device's or queue's
    /// `alloc`, so it needs no copy.
    pub fn attach_metadata(&mut self, meta: IoBuffer) {
        self.metadata = Some(Box::new(meta));
    }

    /// The attached metadata.
    pub fn metadata(&self) -> Option<&IoBuffer> {
        self.metadata.as_deref()
    }

    /// The attached metadata, writable.
    pub fn metadata_mut(&mut self) -> Option<&mut IoBuffer> {
        self.metadata.as_deref_mut()
    }

    /// Removes and returns the attached metadata.
    pub fn detach_metadata(&mut self) -> Option<IoBuffer> {
        self.metadata.take().map(|b| *b)
    }

    /// True for a driver DMA buffer, false for plain aligned memory.
    pub fn is_dma(&self) -> bool {
        matches!(self.inner, Inner::Dma(_))
    }

    /// Current length in bytes (what a command transfers).
    pub fn len(&self) -> usize {
        match &self.inner {
            Inner::Dma(b) => b.len(),
            Inner::Aligned(m) => m.len,
        }
    }

    /// True when the current length is zero.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes available to [`IoBuffer::set_len`] (whole pages).
    pub fn capacity(&self) -> usize {
        match &self.inner {
            Inner::Dma(b) => b.capacity(),
            Inner::Aligned(m) => m.capacity,
        }
    }

    /// Changes the current length within the capacity. Bytes that become
    /// visible keep whatever they held.
    pub fn set_len(&mut self, len: usize) -> Result<()> {
        if len > self.capacity() {
            return Err(DeviceError::InvalidArgument(format!(
                "buffer length {len} exceeds its capacity of {} bytes",
                self.capacity()
            )));
        }
        match &mut self.inner {
            Inner::Dma(b) => b.set_len(len).map_err(DeviceError::from),
            Inner::Aligned(m) => {
                m.len = len;
                Ok(())
            }
        }
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        match &self.inner {
            Inner::Dma(b) => b.as_slice(),
            Inner::Aligned(m) => m.as_slice(),
        }
    }

    /// The bytes, writable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        match &mut self.inner {
            Inner::Dma(b) => b.as_mut_slice(),
            Inner::Aligned(m) => m.as_mut_slice(),
        }
    }
}

impl Deref for IoBuffer {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl DerefMut for IoBuffer {
    fn deref_mut(&mut self) -> &mut [u8] {
        self.as_mut_slice()
    }
}

impl From<DmaBuffer> for IoBuffer {
    fn from(b: DmaBuffer) -> Self {
        IoBuffer::from_dma(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_buffers_are_page_aligned_zeroed_and_resizable() {
        let mut b = IoBuffer::aligned(5000).unwrap();
        assert_eq!(b.len(), 5000);
        assert_eq!(b.capacity(), 8192);
        assert_eq!(b.as_ptr() as usize % BUFFER_ALIGN, 0);
        assert!(b.iter().all(|&x| x == 0));
        b[4999] = 7;
        b.set_len(8192).unwrap();
        assert_eq!(b[4999], 7);
        assert!(b.set_len(8193).is_err());
        assert!(!b.is_dma());
        assert!(b.into_dma().is_err());
        let mut m = IoBuffer::aligned(64).unwrap();
        m.attach_metadata(IoBuffer::aligned(16).unwrap());
        assert_eq!(m.metadata().map(|x| x.len()), Some(16));
        m.metadata_mut().unwrap()[0] = 9;
        assert_eq!(m.detach_metadata().unwrap()[0], 9);
        assert!(m.metadata().is_none());
        let e = IoBuffer::aligned(0).unwrap();
        assert!(e.is_empty());
        assert_eq!(e.capacity(), 4096);
    }
}
