//! PCI addresses and the sysfs files of a PCI device: parsing and validating
//! `DDDD:BB:DD.F`, building `/sys/bus/pci/devices/...` paths, finding the
//! bound driver and the IOMMU group, and toggling bus mastering in the
//! configuration space.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use crate::error::TransportError;

/// Root of the PCI device directory in sysfs.
const SYSFS_PCI_DEVICES: &str = "/sys/bus/pci/devices";

/// Offset of the Command register in PCI configuration space.
const PCI_COMMAND: u64 = 0x04;
/// Command register bit 1: Memory Space Enable.
const PCI_COMMAND_MEMORY: u16 = 1 << 1;
/// Command register bit 2: Bus Master Enable.
const PCI_COMMAND_MASTER: u16 = 1 << 2;

/// A PCI function address: domain, bus, device, function.
///
/// Thread safety: plain data, `Send + Sync`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PciAddress {
    /// PCI domain (segment).
    pub domain: u16,
    /// Bus number.
    pub bus: u8,
    /// Device number, 0..=31.
    pub device: u8,
    /// Function number, 0..=7.
    pub function: u8,
}

fn hex_field(s: &str, digits: usize, max: u32, whole: &str) -> Result<u32, TransportError> {
    let bad = || TransportError::InvalidBdf(whole.to_string());
    if s.is_empty() || s.len() > digits || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(bad());
    }
    let v = u32::from_str_radix(s, 16).map_err(|_| bad())?;
    if v > max {
        return Err(bad());
    }
    Ok(v)
}

impl FromStr for PciAddress {
    type Err = TransportError;

    /// Parses `DDDD:BB:DD.F` or `BB:DD.F` (domain 0), hexadecimal.
    fn from_str(s: &str) -> Result<Self, TransportError> {
        let parts: Vec<&str> = s.split(':').collect();
        let (domain, bus, devfn) = match parts.as_slice() {
            [d, b, df] => (hex_field(d, 4, 0xFFFF, s)?, *b, *df),
            [b, df] => (0, *b, *df),
            _ => return Err(TransportError::InvalidBdf(s.to_string())),
        };
        let (dev, func) =
            devfn.split_once('.').ok_or_else(|| TransportError::InvalidBdf(s.to_string()))?;
        Ok(PciAddress {
            domain: domain as u16,
            bus: hex_field(bus, 2, 0xFF, s)? as u8,
            device: hex_field(dev, 2, 0x1F, s)? as u8,
            function: hex_field(func, 1, 7, s)? as u8,
        })
    }
}

impl fmt::Display for PciAddress {
    /// The canonical sysfs form, e.g. `0000:00:04.0`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04x}:{:02x}:{:02x}.{:x}", self.domain, self.bus, self.device, self.function)
    }
}

impl PciAddress {
    /// The device's sysfs directory.
    pub fn sysfs_dir(&self) -> PathBuf {
        PathBuf::from(SYSFS_PCI_DEVICES).join(self.to_string())
    }

    /// A file in the device's sysfs directory (`resource0`, `config`, ...).
    pub fn sysfs_file(&self, name: &str) -> PathBuf {
        self.sysfs_dir().join(name)
    }
}

/// Name of the kernel driver bound to the device, if any.
pub(crate) fn bound_driver(addr: &PciAddress) -> Result<Option<String>, TransportError> {
    let dir = addr.sysfs_dir();
    if !dir.exists() {
        return Err(TransportError::io(
            format!("PCI device {addr}"),
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{} not found", dir.display()),
            ),
        ));
    }
    match std::fs::read_link(addr.sysfs_file("driver")) {
        Ok(target) => Ok(link_basename(&target)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(TransportError::io(format!("read driver link of {addr}"), e)),
    }
}

/// The IOMMU group number of the device.
pub(crate) fn iommu_group(addr: &PciAddress) -> Result<u32, TransportError> {
    let link = std::fs::read_link(addr.sysfs_file("iommu_group"))
        .map_err(|e| TransportError::io(format!("read iommu_group link of {addr}"), e))?;
    link_basename(&link).and_then(|n| n.parse().ok()).ok_or_else(|| {
        TransportError::Vfio(format!("unexpected iommu_group link {}", link.display()))
    })
}

/// The last component of a symlink target (`../../../bus/pci/drivers/nvme` → `nvme`).
pub(crate) fn link_basename(target: &std::path::Path) -> Option<String> {
    target.file_name().map(|n| n.to_string_lossy().into_owned())
}

/// The Command register with Memory Space and Bus Master enabled.
pub(crate) fn command_with_bus_master(command: u16) -> u16 {
    command | PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER
}

/// Sets Bus Master Enable (and Memory Space Enable) in the device's Command
/// register through a configuration-space file descriptor, at `base` (0 for
/// the sysfs `config` file; the config region offset for VFIO).
pub(crate) fn enable_bus_master(
    file: &std::fs::File,
    base: u64,
    addr: &PciAddress,
) -> Result<(), TransportError> {
    use std::os::unix::fs::FileExt;
    let mut b = [0u8; 2];
    file.read_exact_at(&mut b, base + PCI_COMMAND)
        .map_err(|e| TransportError::io(format!("read PCI command register of {addr}"), e))?;
    let old = u16::from_le_bytes(b);
    let new = command_with_bus_master(old);
    if new != old {
        file.write_all_at(&new.to_le_bytes(), base + PCI_COMMAND)
            .map_err(|e| TransportError::io(format!("write PCI command register of {addr}"), e))?;
        tracing::debug!(%addr, old, new, "bus mastering enabled");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_full_and_short_addresses() {
        let a: PciAddress = "0000:00:04.0".parse().unwrap();
        assert_eq!(a, PciAddress { domain: 0, bus: 0, device: 4, function: 0 });
        assert!("10000:3b:1f.7".parse::<PciAddress>().is_err(), "5-digit domain");
        let c: PciAddress = "abcd:3B:1f.7".parse().unwrap();
        assert_eq!(c, PciAddress { domain: 0xABCD, bus: 0x3B, device: 0x1F, function: 7 });
        assert_eq!(c.to_string(), "abcd:3b:1f.7");
        let d: PciAddress = "02:00.1".parse().unwrap();
        assert_eq!(d.to_string(), "0000:02:00.1");
    }

    #[test]
    fn rejects_malformed_addresses() {
        for s in [
            "",
            "0000:00:04",
            "0000:00:20.0",
            "0000:00:04.8",
            "0000:100:04.0",
            "0000:00:04.0.1",
            "g000:00:04.0",
            "0000::04.0",
            "0000:00:.0",
            "1:2:3:4.0",
            " 0000:00:04.0",
            "0000:00:04.+1",
        ] {
            assert!(s.parse::<PciAddress>().is_err(), "{s:?} accepted");
        }
    }

    #[test]
    fn sysfs_paths() {
        let a: PciAddress = "0000:00:04.0".parse().unwrap();
        assert_eq!(a.sysfs_dir(), PathBuf::from("/sys/bus/pci/devices/0000:00:04.0"));
        assert_eq!(
            a.sysfs_file("resource0"),
            PathBuf::from("/sys/bus/pci/devices/0000:00:04.0/resource0")
        );
        assert_eq!(
            link_basename(std::path::Path::new("../../../bus/pci/drivers/vfio-pci")).as_deref(),
            Some("vfio-pci")
        );
    }

    #[test]
    fn bus_master_bit() {
        assert_eq!(command_with_bus_master(0), 0b110);
        assert_eq!(command_with_bus_master(0x0400), 0x0406);
        assert_eq!(command_with_bus_master(0x0007), 0x0007);
    }
}
