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

/// Which user-space path reaches a PCI controller.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PciBinding {
    /// VFIO when the device is bound to `vfio-pci`, sysfs `resource0`
    /// otherwise.
    #[default]
    Auto,
    /// VFIO only: an error unless the device is bound to `vfio-pci`.
    Vfio,
    /// sysfs `resource0` and huge pages only: an error when the device is
    /// bound to `vfio-pci` or a kernel driver.
    Sysfs,
}

impl PciBinding {
    /// Every option value, in the order of the variants.
    pub const VALUES: &'static [&'static str] = &["auto", "vfio", "sysfs"];

    /// The option value naming this binding (`auto`, `vfio`, `sysfs`).
    pub fn name(self) -> &'static str {
        match self {
            PciBinding::Auto => "auto",
            PciBinding::Vfio => "vfio",
            PciBinding::Sysfs => "sysfs",
        }
    }
}

impl std::str::FromStr for PciBinding {
    type Err = crate::error::TransportError;

    /// Parses `auto`, `vfio` or `sysfs`.
    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        match s {
            "auto" => Ok(PciBinding::Auto),
            "vfio" => Ok(PciBinding::Vfio),
            "sysfs" => Ok(PciBinding::Sysfs),
            other => Err(crate::error::TransportError::UnknownBinding(other.to_string())),
        }
    }
}

/// Opens the PCI device at `bdf` with the right transport: VFIO when it is
/// bound to `vfio-pci`, sysfs `resource0` with huge pages when it is
/// unbound; an error naming the driver when a kernel driver owns it.
pub fn open_pci(bdf: &str) -> Result<std::sync::Arc<dyn Transport>> {
    open_pci_with(bdf, PciBinding::Auto)
}

/// Opens the PCI device at `bdf` through the transport `binding` asks for
/// (see [`PciBinding`]); an error explains how to bind the device when it
/// is bound otherwise.
pub fn open_pci_with(bdf: &str, binding: PciBinding) -> Result<std::sync::Arc<dyn Transport>> {
    let addr: PciAddress = bdf.parse()?;
    let vfio = sysfs::bound_driver(&addr)?.as_deref() == Some("vfio-pci");
    match (binding, vfio) {
        (PciBinding::Auto | PciBinding::Vfio, true) | (PciBinding::Vfio, false) => {
            Ok(std::sync::Arc::new(VfioTransport::open(&addr)?))
        }
        (PciBinding::Auto | PciBinding::Sysfs, false) | (PciBinding::Sysfs, true) => {
            Ok(std::sync::Arc::new(PcieTransport::open_address(&addr)?))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bindings_parse_and_print() {
        for b in [PciBinding::Auto, PciBinding::Vfio, PciBinding::Sysfs] {
            assert_eq!(b.name().parse::<PciBinding>().unwrap(), b);
        }
        let e = "uio".parse::<PciBinding>().unwrap_err();
        assert!(e.to_string().contains("auto, vfio or sysfs"), "{e}");
    }

    #[test]
    fn every_binding_fails_cleanly_on_a_missing_device() {
        for b in [PciBinding::Auto, PciBinding::Vfio, PciBinding::Sysfs] {
            let e = open_pci_with("ffff:ff:1f.7", b).unwrap_err();
            assert!(e.to_string().contains("ffff:ff:1f.7"), "{b:?}: {e}");
        }
        assert!(open_pci_with("nonsense", PciBinding::Vfio).is_err());
    }
}
