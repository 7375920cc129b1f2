//! How the driver reaches a controller: register (BAR0) accesses, a poll
//! hook, and DMA memory the controller can address.
//!
//! Implementations: [`EmulatedTransport`] (the in-process emulator),
//! [`PcieTransport`] (a real controller through sysfs `resource0` and huge
//! pages) and [`VfioTransport`] (a real controller bound to `vfio-pci`, DMA
//! through the IOMMU). [`open_pci`] picks between the last two.

#[cfg(feature = "emulator")]
mod emulated;
pub(crate) mod hugepage;
mod mmio;
mod pcie;
pub(crate) mod sysfs;
mod vfio;

use std::fmt;

#[cfg(feature = "emulator")]
pub use emulated::EmulatedTransport;
pub use pcie::PcieTransport;
pub use sysfs::PciAddress;
pub use vfio::VfioTransport;

use crate::dma::DmaMemory;
use crate::error::Result;

/// Register access, completion polling and DMA allocation for one controller.
///
/// Offsets are byte offsets into BAR0. Register accesses are uncached and
/// ordered with respect to each other and to earlier writes of DMA memory
/// by the same thread (a doorbell write publishes the entries written
/// before it).
///
/// Thread safety: implementations are `Send + Sync`; any thread may access
/// registers; each doorbell is written by the one thread owning its queue.
pub trait Transport: Send + Sync + fmt::Debug {
    /// Reads a 32-bit register.
    fn read32(&self, offset: u32) -> u32;
    /// Reads a 64-bit register.
    fn read64(&self, offset: u32) -> u64;
    /// Writes a 32-bit register (doorbells included).
    fn write32(&self, offset: u32, value: u32);
    /// Writes a 64-bit register.
    fn write64(&self, offset: u32, value: u64);

    /// Called before the driver looks at completion queue `cqid`. The
    /// emulator posts the completions that are due; a real controller
    /// writes them on its own, so the default does nothing.
    #[inline]
    fn poll(&self, cqid: u16) {
        let _ = cqid;
    }

    /// Allocates `len` bytes (a multiple of [`crate::dma::DMA_PAGE`]) of
    /// zeroed, page-aligned DMA memory. May map memory: not for the I/O path.
    fn allocate_dma(&self, len: usize) -> Result<DmaMemory>;

    /// A short description for logs ("emulator", "pcie 0000:00:04.0", ...).
    fn describe(&self) -> String;
}

/// Opens the PCI device at `bdf` with the right transport: VFIO when it is
/// bound to `vfio-pci`, sysfs `resource0` with huge pages when it is
/// unbound; an error naming the driver when a kernel driver owns it.
pub fn open_pci(bdf: &str) -> Result<std::sync::Arc<dyn Transport>> {
    let addr: PciAddress = bdf.parse()?;
    match sysfs::bound_driver(&addr)? {
        Some(d) if d == "vfio-pci" => Ok(std::sync::Arc::new(VfioTransport::open(&addr)?)),
        _ => Ok(std::sync::Arc::new(PcieTransport::open_address(&addr)?)),
    }
}
