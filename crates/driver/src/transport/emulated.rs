//! The transport to the in-process emulator: register accesses are method
//! calls, DMA memory comes from the emulator's [`ProcessMemory`] (bus address
//! = virtual address), and polling a queue lets the emulator post the
//! completions whose time has come.

use std::ptr::NonNull;
use std::sync::Arc;

use zns_emulator::host::ProcessMemory;
use zns_emulator::Controller;

use super::Transport;
use crate::dma::{DmaMemory, Translation, DMA_PAGE};
use crate::error::{Error, Result};

/// A transport to an emulated controller in this process.
///
/// Thread safety: `Send + Sync`, like the controller it drives.
#[derive(Debug, Clone)]
pub struct EmulatedTransport {
    controller: Arc<Controller>,
    memory: Arc<ProcessMemory>,
}

impl EmulatedTransport {
    /// Drives `controller`, which reaches host memory through `memory`.
    pub fn new(controller: Arc<Controller>, memory: Arc<ProcessMemory>) -> Self {
        EmulatedTransport { controller, memory }
    }

    /// The emulated controller.
    pub fn controller(&self) -> &Arc<Controller> {
        &self.controller
    }

    /// The host memory the controller reaches.
    pub fn memory(&self) -> &Arc<ProcessMemory> {
        &self.memory
    }
}

impl Transport for EmulatedTransport {
    #[inline]
    fn read32(&self, offset: u32) -> u32 {
        self.controller.mmio_read32(offset)
    }

    #[inline]
    fn read64(&self, offset: u32) -> u64 {
        self.controller.mmio_read64(offset)
    }

    #[inline]
    fn write32(&self, offset: u32, value: u32) {
        self.controller.mmio_write32(offset, value)
    }

    #[inline]
    fn write64(&self, offset: u32, value: u64) {
        self.controller.mmio_write64(offset, value)
    }

    #[inline]
    fn poll(&self, cqid: u16) {
        self.controller.poll(cqid)
    }

    fn allocate_dma(&self, len: usize) -> Result<DmaMemory> {
        let len = len.max(1).next_multiple_of(DMA_PAGE);
        let a = self.memory.allocate(len, DMA_PAGE).ok_or_else(|| Error::DmaAllocation {
            len,
            reason: "host memory allocation failed".into(),
        })?;
        let ptr = NonNull::new(a.as_ptr())
            .ok_or_else(|| Error::DmaAllocation { len, reason: "null allocation".into() })?;
        let base = a.addr();
        // SAFETY: the allocation is `len` zeroed bytes aligned to DMA_PAGE,
        // valid until `a` (moved into the owner box) drops, and registered
        // with the emulator at bus address = virtual address.
        Ok(unsafe { DmaMemory::new(ptr, len, Translation::Contiguous { base }, Box::new(a)) })
    }

    fn describe(&self) -> String {
        format!("emulator ({})", self.controller.profile().name)
    }
}
