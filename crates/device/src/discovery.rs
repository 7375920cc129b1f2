//! Finding NVMe devices on this machine, for tools that list what URIs a
//! user can open: controllers the kernel drives (`/sys/class/nvme`) and
//! PCI functions of class 0108h (NVM Express) with their driver binding.
//!
//! Every function reads sysfs only and returns an empty list where the
//! directories do not exist.
//!
//! Thread safety: the functions share no state; call them from any thread.

use std::fs;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// PCI base class 01h (mass storage), subclass 08h (non-volatile memory).
pub const NVME_CLASS: u32 = 0x0108;

/// Kernel drivers under which the user-space driver can take a PCI function.
pub const USER_SPACE_DRIVERS: &[&str] = &["vfio-pci", "uio_pci_generic"];

/// A namespace the kernel exposes.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KernelNamespace {
    /// Block device name (`nvme0n1`).
    pub block_device: String,
    /// Generic character device name (`ng0n1`), when the kernel made one.
    pub generic_device: Option<String>,
    /// Zoned model from `queue/zoned` (`host-managed` for ZNS, `none`).
    pub zoned: Option<String>,
    /// Size in 512-byte sectors.
    pub sectors: Option<u64>,
    /// Logical block size in bytes.
    pub logical_block_size: Option<u32>,
}

impl KernelNamespace {
    /// True for a zoned (host-managed) namespace.
    pub fn is_zoned(&self) -> bool {
        self.zoned.as_deref() == Some("host-managed")
    }
}

/// An NVMe controller the kernel drives.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KernelController {
    /// Controller name (`nvme0`).
    pub name: String,
    /// Model number.
    pub model: String,
    /// Serial number.
    pub serial: String,
    /// Firmware revision.
    pub firmware: String,
    /// Transport (`pcie`, `tcp`, `loop`, ...).
    pub transport: String,
    /// Transport address (the PCI address for `pcie`).
    pub address: String,
    /// Its namespaces.
    pub namespaces: Vec<KernelNamespace>,
}

/// A PCI function of class 0108h.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PciFunction {
    /// Address, `DDDD:BB:DD.F`.
    pub address: String,
    /// Vendor ID.
    pub vendor: u16,
    /// Device ID.
    pub device: u16,
    /// Full class code (0108xxh).
    pub class: u32,
    /// Bound kernel driver, if any.
    pub driver: Option<String>,
}

impl PciFunction {
    /// True when the user-space driver can take it as it is bound (unbound,
    /// `vfio-pci` or `uio_pci_generic`); root is still needed without VFIO.
    pub fn usable_by_user_space_driver(&self) -> bool {
        self.driver.as_deref().is_none_or(|d| USER_SPACE_DRIVERS.contains(&d))
    }

    /// The URI that opens it with the user-space driver (through VFIO,
    /// `transport=vfio`, when it is bound to `vfio-pci`).
    pub fn uri(&self) -> String {
        match self.driver.as_deref() {
            Some("vfio-pci") => format!("pcie:{},transport=vfio", self.address),
            _ => format!("pcie:{}", self.address),
        }
    }
}

fn read_trimmed(path: &Path) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

fn read_hex(path: &Path) -> Option<u64> {
    let s = read_trimmed(path)?;
    u64::from_str_radix(s.trim_start_matches("0x"), 16).ok()
}

fn sorted_entries(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut v: Vec<(String, PathBuf)> = match fs::read_dir(dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok())
            .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
            .collect(),
        Err(_) => Vec::new(),
    };
    v.sort_by_key(|a| natural_key(&a.0));
    v
}

/// Sorts `nvme10` after `nvme2`.
fn natural_key(s: &str) -> (String, u64, String) {
    let prefix: String = s.chars().take_while(|c| !c.is_ascii_digit()).collect();
    let digits: String = s[prefix.len()..].chars().take_while(|c| c.is_ascii_digit()).collect();
    let rest = s[prefix.len() + digits.len()..].to_string();
    (prefix, digits.parse().unwrap_or(0), rest)
}

/// NVMe controllers under `/sys/class/nvme`.
///
/// Thread safety: reads sysfs only; callable from any thread.
pub fn kernel_controllers() -> Vec<KernelController> {
    kernel_controllers_in(Path::new("/sys"))
}

/// NVMe controllers under `SYSFS/class/nvme` (`sysfs` is normally `/sys`).
///
/// Thread safety: reads files only; callable from any thread.
pub fn kernel_controllers_in(sysfs: &Path) -> Vec<KernelController> {
    sorted_entries(&sysfs.join("class/nvme"))
        .into_iter()
        .filter(|(name, _)| name.starts_with("nvme"))
        .map(|(name, dir)| {
            let field = |f: &str| read_trimmed(&dir.join(f)).unwrap_or_default();
            let mut namespaces: Vec<KernelNamespace> = sorted_entries(&dir)
                .into_iter()
                .filter(|(n, _)| n.starts_with(&format!("{name}n")) || is_multipath_ns(n, &name))
                .map(|(n, p)| namespace(&n, &p, sysfs))
                .collect();
            namespaces.dedup_by(|a, b| a.block_device == b.block_device);
            KernelController {
                model: field("model"),
                serial: field("serial"),
                firmware: field("firmware_rev"),
                transport: field("transport"),
                address: field("address"),
                namespaces,
                name,
            }
        })
        .collect()
}

/// `nvme0c0n1` style entries (multipath) belong to controller `nvme0`.
fn is_multipath_ns(entry: &str, ctrl: &str) -> bool {
    entry.starts_with(&format!("{ctrl}c")) && entry.contains('n')
}

fn namespace(name: &str, dir: &Path, sysfs: &Path) -> KernelNamespace {
    let block = sysfs.join("block").join(name);
    let info = if block.exists() { block } else { dir.to_path_buf() };
    let generic_device = name
        .strip_prefix("nvme")
        .map(|rest| format!("ng{rest}"))
        .filter(|g| sysfs.join("class/nvme-generic").join(g).exists());
    KernelNamespace {
        block_device: name.to_string(),
        generic_device,
        zoned: read_trimmed(&info.join("queue/zoned")),
        sectors: read_trimmed(&info.join("size")).and_then(|s| s.parse().ok()),
        logical_block_size: read_trimmed(&info.join("queue/logical_block_size"))
            .and_then(|s| s.parse().ok()),
    }
}

/// PCI functions of class 0108h under `/sys/bus/pci/devices`.
///
/// Thread safety: reads sysfs only; callable from any thread.
pub fn pci_functions() -> Vec<PciFunction> {
    pci_functions_in(Path::new("/sys"))
}

/// PCI functions of class 0108h under `SYSFS/bus/pci/devices`.
///
/// Thread safety: reads files only; callable from any thread.
pub fn pci_functions_in(sysfs: &Path) -> Vec<PciFunction> {
    sorted_entries(&sysfs.join("bus/pci/devices"))
        .into_iter()
        .filter_map(|(address, dir)| {
            let class = read_hex(&dir.join("class"))? as u32;
            if class >> 8 != NVME_CLASS {
                return None;
            }
            let driver = fs::read_link(dir.join("driver"))
                .ok()
                .and_then(|t| t.file_name().map(|n| n.to_string_lossy().into_owned()));
            Some(PciFunction {
                vendor: read_hex(&dir.join("vendor")).unwrap_or(0) as u16,
                device: read_hex(&dir.join("device")).unwrap_or(0) as u16,
                class,
                driver,
                address,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(p: &Path, s: &str) {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, s).unwrap();
    }

    #[test]
    fn finds_controllers_namespaces_and_pci_functions() {
        let root = tempfile::tempdir().unwrap();
        let sys = root.path();
        let c = sys.join("class/nvme/nvme0");
        write(&c.join("model"), "ZNS SSD   \n");
        write(&c.join("serial"), "S123\n");
        write(&c.join("firmware_rev"), "1.0\n");
        write(&c.join("transport"), "pcie\n");
        write(&c.join("address"), "0000:00:04.0\n");
        write(&c.join("nvme0n1/size"), "1048576\n");
        write(&sys.join("block/nvme0n1/queue/zoned"), "host-managed\n");
        write(&sys.join("block/nvme0n1/size"), "1048576\n");
        write(&sys.join("block/nvme0n1/queue/logical_block_size"), "4096\n");
        write(&sys.join("class/nvme-generic/ng0n1/dev"), "240:0\n");
        let d = sys.join("bus/pci/devices/0000:00:04.0");
        write(&d.join("class"), "0x010802\n");
        write(&d.join("vendor"), "0x1b36\n");
        write(&d.join("device"), "0x0010\n");
        write(&sys.join("bus/pci/devices/0000:00:03.0/class"), "0x020000\n");
        let ctrls = kernel_controllers_in(sys);
        assert_eq!(ctrls.len(), 1);
        assert_eq!(ctrls[0].model, "ZNS SSD");
        assert_eq!(ctrls[0].address, "0000:00:04.0");
        assert_eq!(ctrls[0].namespaces.len(), 1);
        let ns = &ctrls[0].namespaces[0];
        assert!(ns.is_zoned());
        assert_eq!((ns.sectors, ns.logical_block_size), (Some(1048576), Some(4096)));
        assert_eq!(ns.generic_device.as_deref(), Some("ng0n1"));
        let f = pci_functions_in(sys);
        assert_eq!(f.len(), 1);
        assert_eq!((f[0].vendor, f[0].device, f[0].class), (0x1b36, 0x0010, 0x010802));
        assert!(f[0].usable_by_user_space_driver());
        assert_eq!(f[0].uri(), "pcie:0000:00:04.0");
        let vfio = PciFunction { driver: Some("vfio-pci".into()), ..f[0].clone() };
        assert!(vfio.usable_by_user_space_driver());
        assert_eq!(vfio.uri(), "pcie:0000:00:04.0,transport=vfio");
        assert!(kernel_controllers_in(&sys.join("missing")).is_empty());
        assert!(natural_key("nvme10") > natural_key("nvme2"));
    }
}
