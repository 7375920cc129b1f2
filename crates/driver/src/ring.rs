//! Submission and completion rings in DMA memory: volatile entry stores and
//! loads, the only place the queue code touches device-shared memory.

use std::sync::atomic::{fence, Ordering};

use zns_spec::{CompletionEntry, SubmissionEntry};

use crate::dma::DmaMemory;
use crate::error::{Error, Result};

/// Checks a ring's memory: large enough, contiguous on the bus.
fn check(mem: &DmaMemory, entries: u16, entry_size: usize) -> Result<()> {
    let need = entries as usize * entry_size;
    if mem.len() < need {
        return Err(Error::InvalidArgument(format!(
            "ring of {entries} entries needs {need} bytes, memory has {}",
            mem.len()
        )));
    }
    Ok(())
}

/// A submission queue ring.
///
/// Thread safety: `Send`, not `Sync` (its owner writes it from one thread).
#[derive(Debug)]
pub(crate) struct SqRing {
    mem: DmaMemory,
    entries: u16,
}

impl SqRing {
    /// A ring of `entries` 64-byte entries in `mem`.
    pub(crate) fn new(mem: DmaMemory, entries: u16) -> Result<Self> {
        check(&mem, entries, SubmissionEntry::SIZE)?;
        Ok(SqRing { mem, entries })
    }

    /// Stores `entry` in slot `index` (`index < entries`).
    #[inline]
    pub(crate) fn write(&mut self, index: u16, entry: &SubmissionEntry) {
        assert!(index < self.entries);
        // SAFETY: slot `index` lies inside the ring memory (checked above and
        // at construction); the memory is 64-byte aligned (page aligned), so
        // the slot is aligned for `SubmissionEntry`; `&mut self` makes this
        // thread the only writer. The controller reads the slot only after
        // the doorbell names it.
        unsafe {
            let slot = self.mem.as_ptr().cast::<SubmissionEntry>().add(index as usize);
            slot.write_volatile(*entry);
        }
    }

    /// The ring memory.
    pub(crate) fn memory(&self) -> &DmaMemory {
        &self.mem
    }

    /// Gives up the memory without releasing it (after a failed queue
    /// deletion the controller may still read it).
    pub(crate) fn leak(&mut self) {
        self.mem.leak();
    }
}

/// A completion queue ring.
///
/// Thread safety: `Send`, not `Sync` (its owner reads it from one thread).
#[derive(Debug)]
pub(crate) struct CqRing {
    mem: DmaMemory,
    entries: u16,
}

impl CqRing {
    /// A ring of `entries` 16-byte entries in `mem`, cleared so that no
    /// entry carries phase 1.
    pub(crate) fn new(mem: DmaMemory, entries: u16) -> Result<Self> {
        check(&mem, entries, CompletionEntry::SIZE)?;
        // SAFETY: the ring memory is ours and the controller does not write
        // it before the queue is created.
        unsafe { std::ptr::write_bytes(mem.as_ptr(), 0, entries as usize * CompletionEntry::SIZE) };
        Ok(CqRing { mem, entries })
    }

    /// The status word (phase tag in bit 0) of slot `index`.
    #[inline]
    pub(crate) fn status(&self, index: u16) -> u16 {
        assert!(index < self.entries);
        // SAFETY: the slot lies inside the ring memory and is 16-byte
        // aligned; the controller may write it concurrently, hence the
        // volatile load of an integer (every bit pattern is valid).
        unsafe {
            let slot = self.mem.as_ptr().add(index as usize * CompletionEntry::SIZE + 14);
            slot.cast::<u16>().read_volatile()
        }
    }

    /// Reads the entry in slot `index`, after its phase tag was seen.
    #[inline]
    pub(crate) fn read(&self, index: u16) -> CompletionEntry {
        assert!(index < self.entries);
        // The phase tag was read first; the rest of the entry must not be
        // read before it.
        fence(Ordering::Acquire);
        // SAFETY: as in `status`; a `CompletionEntry` is plain integers, so
        // any bytes form a valid value.
        unsafe {
            let slot = self.mem.as_ptr().cast::<CompletionEntry>().add(index as usize);
            slot.read_volatile()
        }
    }

    /// The ring memory.
    pub(crate) fn memory(&self) -> &DmaMemory {
        &self.mem
    }

    /// Gives up the memory without releasing it (see [`SqRing::leak`]).
    pub(crate) fn leak(&mut self) {
        self.mem.leak();
    }
}
