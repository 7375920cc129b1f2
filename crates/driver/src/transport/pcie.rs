//! A real controller through sysfs: BAR0 mapped from
//! `/sys/bus/pci/devices/<bdf>/resource0`, bus mastering switched on in the
//! `config` file, DMA from 2 MiB huge pages whose physical addresses come
//! from `/proc/self/pagemap`. Needs root and a device no kernel driver owns
//! (unbound, or bound to `uio_pci_generic`). Without an IOMMU in
//! pass-through mode the device reaches physical memory directly, so this
//! is for test machines; [`super::VfioTransport`] is the safe choice.

use std::fs::OpenOptions;
use std::os::fd::AsRawFd;
use std::sync::Arc;

use super::hugepage::{HugepageArena, PagemapMapper};
use super::mmio::Mmio;
use super::sysfs::{self, PciAddress};
use super::Transport;
use crate::dma::DmaMemory;
use crate::error::{Result, TransportError};

/// Drivers that leave BAR0 and DMA to user space.
const USER_SPACE_DRIVERS: &[&str] = &["uio_pci_generic"];

/// Smallest BAR0 that holds the registers and the admin doorbells.
const MIN_BAR0: usize = 0x1008;

/// Whether a device bound to `driver` can be driven through `resource0`;
/// `Err` names the reason for the error message.
pub(crate) fn check_driver(addr: &PciAddress, driver: Option<&str>) -> Result<(), TransportError> {
    match driver {
        None => Ok(()),
        Some(d) if USER_SPACE_DRIVERS.contains(&d) => Ok(()),
        Some("vfio-pci") => Err(TransportError::Vfio(format!(
            "{addr} is bound to vfio-pci; open it with the VFIO transport (open_pci does this)"
        ))),
        Some(d) => Err(TransportError::BoundToKernel { bdf: addr.to_string(), driver: d.into() }),
    }
}

/// A controller reached through sysfs `resource0` and huge-page DMA.
///
/// Thread safety: `Send + Sync`.
pub struct PcieTransport {
    addr: PciAddress,
    bar0: Mmio,
    dma: Arc<HugepageArena<PagemapMapper>>,
}

impl std::fmt::Debug for PcieTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PcieTransport")
            .field("addr", &self.addr.to_string())
            .field("bar0_len", &self.bar0.len())
            .finish_non_exhaustive()
    }
}

impl PcieTransport {
    /// Opens the controller at `bdf` (`0000:00:04.0` or `00:04.0`).
    pub fn open(bdf: &str) -> Result<Self> {
        let addr: PciAddress = bdf.parse()?;
        Self::open_address(&addr)
    }

    /// Opens the controller at `addr`.
    pub fn open_address(addr: &PciAddress) -> Result<Self> {
        let driver = sysfs::bound_driver(addr)?;
        check_driver(addr, driver.as_deref())?;
        let bar0 = map_resource0(addr)?;
        enable_bus_master(addr)?;
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            tracing::warn!(%addr, "not root: physical addresses will be unavailable");
        }
        let dma = HugepageArena::new(PagemapMapper::open()?);
        tracing::info!(%addr, bar0 = bar0.len(), "PCIe transport open");
        Ok(PcieTransport { addr: *addr, bar0, dma })
    }

    /// The device's PCI address.
    pub fn address(&self) -> PciAddress {
        self.addr
    }
}

fn map_resource0(addr: &PciAddress) -> Result<Mmio, TransportError> {
    let path = addr.sysfs_file("resource0");
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .map_err(|e| TransportError::io(format!("open {}", path.display()), e))?;
    let len = file
        .metadata()
        .map_err(|e| TransportError::io(format!("stat {}", path.display()), e))?
        .len() as usize;
    if len < MIN_BAR0 {
        return Err(TransportError::Bar {
            bdf: addr.to_string(),
            reason: format!("resource0 is {len} bytes, need at least {MIN_BAR0:#x}"),
        });
    }
    // The mapping stays valid after the file is closed.
    Mmio::map(file.as_raw_fd(), 0, len, "resource0")
}

fn enable_bus_master(addr: &PciAddress) -> Result<(), TransportError> {
    let path = addr.sysfs_file("config");
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .map_err(|e| TransportError::io(format!("open {}", path.display()), e))?;
    sysfs::enable_bus_master(&file, 0, addr)
}

impl Transport for PcieTransport {
    #[inline]
    fn read32(&self, offset: u32) -> u32 {
        self.bar0.read32(offset)
    }

    #[inline]
    fn read64(&self, offset: u32) -> u64 {
        self.bar0.read64(offset)
    }

    #[inline]
    fn write32(&self, offset: u32, value: u32) {
        self.bar0.write32(offset, value)
    }

    #[inline]
    fn write64(&self, offset: u32, value: u64) {
        self.bar0.write64(offset, value)
    }

    fn allocate_dma(&self, len: usize) -> Result<DmaMemory> {
        self.dma.allocate(len)
    }

    fn describe(&self) -> String {
        format!("pcie {}", self.addr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_unbound_or_user_space_drivers_are_accepted() {
        let a: PciAddress = "0000:00:04.0".parse().unwrap();
        assert!(check_driver(&a, None).is_ok());
        assert!(check_driver(&a, Some("uio_pci_generic")).is_ok());
        let e = check_driver(&a, Some("nvme")).unwrap_err();
        assert!(matches!(e, TransportError::BoundToKernel { ref driver, .. } if driver == "nvme"));
        assert!(e.to_string().contains("unbind"));
        assert!(matches!(check_driver(&a, Some("vfio-pci")), Err(TransportError::Vfio(_))));
    }

    #[test]
    fn opening_a_missing_device_fails_cleanly() {
        let e = PcieTransport::open("ffff:ff:1f.7").unwrap_err();
        assert!(e.to_string().contains("ffff:ff:1f.7"), "{e}");
        assert!(PcieTransport::open("not-a-bdf").is_err());
    }
}
