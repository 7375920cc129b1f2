//! What the kernel tells about a block device in sysfs: its zone geometry
//! and limits (`/sys/class/block/NAME/queue/...`), and the NVMe controller
//! and namespace behind it.
//!
//! Every reader takes the sysfs root as an argument so tests can point it
//! at a directory of their own.

use std::fs;
use std::path::{Path, PathBuf};

/// The queue attributes of a block device that the zoned block backend
/// needs.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct BlockLimits {
    /// Zoned model (`queue/zoned`): `host-managed`, `host-aware` or `none`.
    pub zoned: String,
    /// Logical block size in bytes (`queue/logical_block_size`).
    pub logical_block_size: u32,
    /// Size in 512-byte sectors (`size`).
    pub sectors: u64,
    /// Zone size in 512-byte sectors (`queue/chunk_sectors`).
    pub zone_sectors: u64,
    /// Number of zones (`queue/nr_zones`).
    pub nr_zones: u64,
    /// Max open zones (`queue/max_open_zones`); 0 = no limit.
    pub max_open_zones: u32,
    /// Max active zones (`queue/max_active_zones`); 0 = no limit.
    pub max_active_zones: u32,
    /// Largest zone append in bytes (`queue/zone_append_max_bytes`).
    pub zone_append_max_bytes: u64,
    /// Largest request in KiB (`queue/max_sectors_kb`).
    pub max_sectors_kb: u64,
    /// Volatile write cache (`queue/write_cache` is `write back`).
    pub write_back_cache: bool,
}

fn read_trimmed(path: &Path) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

fn read_number(path: &Path) -> Result<u64, String> {
    let s = read_trimmed(path).ok_or_else(|| format!("cannot read {}", path.display()))?;
    s.parse().map_err(|_| format!("{} holds {s:?}, not a number", path.display()))
}

/// The sysfs directory of block device `name` (`SYSFS/class/block/NAME`).
pub(crate) fn block_dir(sysfs: &Path, name: &str) -> PathBuf {
    sysfs.join("class/block").join(name)
}

impl BlockLimits {
    /// Reads the attributes of the block device whose sysfs directory is
    /// `dir`. Attributes only zoned devices have are required when
    /// `queue/zoned` says the device is zoned.
    pub(crate) fn read(dir: &Path) -> Result<Self, String> {
        let q = dir.join("queue");
        let zoned = read_trimmed(&q.join("zoned"))
            .ok_or_else(|| format!("cannot read {}", q.join("zoned").display()))?;
        let mut l = BlockLimits {
            logical_block_size: read_number(&q.join("logical_block_size"))? as u32,
            sectors: read_number(&dir.join("size"))?,
            max_sectors_kb: read_number(&q.join("max_sectors_kb"))?,
            write_back_cache: read_trimmed(&q.join("write_cache")).as_deref() == Some("write back"),
            ..Default::default()
        };
        if zoned != "none" {
            l.zone_sectors = read_number(&q.join("chunk_sectors"))?;
            l.nr_zones = read_number(&q.join("nr_zones"))?;
            l.max_open_zones = read_number(&q.join("max_open_zones")).unwrap_or(0) as u32;
            l.max_active_zones = read_number(&q.join("max_active_zones")).unwrap_or(0) as u32;
            l.zone_append_max_bytes = read_number(&q.join("zone_append_max_bytes")).unwrap_or(0);
        }
        l.zoned = zoned;
        Ok(l)
    }

    /// Logical blocks per zone.
    pub(crate) fn zone_blocks(&self) -> u64 {
        self.zone_sectors * 512 / self.logical_block_size.max(512) as u64
    }

    /// Largest request in bytes.
    pub(crate) fn max_request_bytes(&self) -> usize {
        (self.max_sectors_kb as usize).saturating_mul(1024)
    }
}

/// The NVMe controller and namespace behind a block device, as far as
/// sysfs tells.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct NvmeIdentity {
    pub model: String,
    pub serial: String,
    pub firmware: String,
    /// Namespace ID (`nsid`, or the number after the last `n` of the name).
    pub nsid: u32,
    /// The controller's sysfs directory, when found.
    pub controller_dir: Option<PathBuf>,
}

/// Identification of block device `name` (`nvme0n1`) from its sysfs
/// directory `dir`: the namespace's `nsid` file and the controller's
/// `model`, `serial`, `firmware_rev` (its `device` link).
pub(crate) fn nvme_identity(dir: &Path, name: &str) -> NvmeIdentity {
    let ctrl = fs::canonicalize(dir.join("device")).ok().filter(|d| d.join("model").exists());
    let field = |f: &str| ctrl.as_ref().and_then(|c| read_trimmed(&c.join(f))).unwrap_or_default();
    let nsid = read_trimmed(&dir.join("nsid"))
        .and_then(|s| s.parse().ok())
        .or_else(|| name.rsplit_once('n').and_then(|(_, n)| n.parse().ok()))
        .unwrap_or(0);
    NvmeIdentity {
        model: field("model"),
        serial: field("serial"),
        firmware: field("firmware_rev"),
        nsid,
        controller_dir: ctrl,
    }
}

/// The controller instance and namespace of an NVMe device name:
/// `ng0n2` and `nvme0n2` → (0, 2); multipath names (`nvme0c1n2`) → (0, 2).
pub(crate) fn parse_nvme_name(name: &str) -> Option<(u32, u32)> {
    let rest = name.strip_prefix("ng").or_else(|| name.strip_prefix("nvme"))?;
    let (ctrl, ns) = rest.split_once('n')?;
    let ctrl = ctrl.split_once('c').map_or(ctrl, |(c, _)| c);
    Some((ctrl.parse().ok()?, ns.parse().ok()?))
}

/// The largest transfer (whole 4 KiB pages) the request queue whose
/// sysfs `queue` directory is `q` takes from user memory:
/// `max_hw_sectors_kb`, capped by `max_segments` pages.
fn queue_transfer_limit(q: &Path) -> Option<usize> {
    let kb = read_number(&q.join("max_hw_sectors_kb")).ok()?;
    let mut limit = (kb as usize).saturating_mul(1024);
    if let Ok(segs) = read_number(&q.join("max_segments")) {
        limit = limit.min((segs as usize).saturating_mul(4096));
    }
    Some(limit / 4096 * 4096).filter(|&l| l > 0)
}

/// The largest transfer the kernel passes through for namespace `ns` of
/// controller `nvmeN`: the limit of the namespace's own request queue
/// (which exists, with the kernel's default limits, even where its block
/// device is hidden), else the smallest limit of the controller's other
/// namespaces. `None` when sysfs shows neither.
pub(crate) fn namespace_transfer_limit(sysfs: &Path, ctrl: u32, ns: u32) -> Option<usize> {
    let own = sysfs.join("class/block").join(format!("nvme{ctrl}n{ns}")).join("queue");
    if let Some(l) = queue_transfer_limit(&own) {
        return Some(l);
    }
    let dir = sysfs.join("class/nvme").join(format!("nvme{ctrl}"));
    let prefix = format!("nvme{ctrl}");
    fs::read_dir(&dir)
        .ok()?
        .flatten()
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.starts_with(&prefix) && parse_nvme_name(&name).is_some()
        })
        .filter_map(|e| queue_transfer_limit(&e.path().join("queue")))
        .min()
}

/// A conventional namespace of the controller whose sysfs directory is
/// `ctrl_dir`: its first namespace block device whose `queue/zoned` is
/// `none`, as (nsid, logical block size, blocks).
pub(crate) fn conventional_sibling(ctrl_dir: &Path) -> Option<(u32, u32, u64)> {
    let mut names: Vec<String> = fs::read_dir(ctrl_dir)
        .ok()?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("nvme") && parse_nvme_name(n).is_some())
        .collect();
    names.sort();
    names.into_iter().find_map(|n| {
        let dir = ctrl_dir.join(&n);
        let limits = BlockLimits::read(&dir).ok()?;
        if limits.zoned != "none" || limits.logical_block_size == 0 {
            return None;
        }
        let nsid = nvme_identity(&dir, &n).nsid;
        let blocks = limits.sectors * 512 / limits.logical_block_size as u64;
        Some((nsid, limits.logical_block_size, blocks))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(p: &Path, s: &str) {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, s).unwrap();
    }

    fn zoned_ns(dir: &Path) {
        write(&dir.join("size"), "2097152\n");
        write(&dir.join("nsid"), "1\n");
        let q = dir.join("queue");
        write(&q.join("zoned"), "host-managed\n");
        write(&q.join("logical_block_size"), "4096\n");
        write(&q.join("chunk_sectors"), "131072\n");
        write(&q.join("nr_zones"), "16\n");
        write(&q.join("max_open_zones"), "14\n");
        write(&q.join("max_active_zones"), "0\n");
        write(&q.join("zone_append_max_bytes"), "524288\n");
        write(&q.join("max_sectors_kb"), "512\n");
        write(&q.join("max_hw_sectors_kb"), "512\n");
        write(&q.join("max_segments"), "127\n");
        write(&q.join("write_cache"), "write back\n");
    }

    #[test]
    fn reads_zoned_limits() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("nvme0n1");
        zoned_ns(&dir);
        let l = BlockLimits::read(&dir).unwrap();
        assert_eq!(l.zoned, "host-managed");
        assert_eq!((l.logical_block_size, l.sectors), (4096, 2097152));
        assert_eq!((l.zone_sectors, l.zone_blocks(), l.nr_zones), (131072, 16384, 16));
        assert_eq!((l.max_open_zones, l.max_active_zones), (14, 0));
        assert_eq!((l.zone_append_max_bytes, l.max_request_bytes()), (524288, 512 << 10));
        assert!(l.write_back_cache);
        fs::remove_file(dir.join("queue/nr_zones")).unwrap();
        let e = BlockLimits::read(&dir).unwrap_err();
        assert!(e.contains("nr_zones"), "{e}");
        write(&dir.join("queue/chunk_sectors"), "lots\n");
        assert!(BlockLimits::read(&dir).unwrap_err().contains("not a number"));
    }

    #[test]
    fn finds_identity_limits_and_conventional_siblings() {
        let root = tempfile::tempdir().unwrap();
        let sys = root.path();
        let ctrl = sys.join("class/nvme/nvme0");
        write(&ctrl.join("model"), "QEMU NVMe Ctrl\n");
        write(&ctrl.join("serial"), "zns0\n");
        write(&ctrl.join("firmware_rev"), "9.0\n");
        zoned_ns(&ctrl.join("nvme0n1"));
        let conv = ctrl.join("nvme0n3");
        write(&conv.join("size"), "131072\n");
        write(&conv.join("nsid"), "3\n");
        write(&conv.join("queue/zoned"), "none\n");
        write(&conv.join("queue/logical_block_size"), "4096\n");
        write(&conv.join("queue/max_sectors_kb"), "512\n");
        write(&conv.join("queue/max_hw_sectors_kb"), "1024\n");
        std::os::unix::fs::symlink(&ctrl, ctrl.join("nvme0n1/device")).unwrap();
        let id = nvme_identity(&ctrl.join("nvme0n1"), "nvme0n1");
        assert_eq!((id.model.as_str(), id.serial.as_str(), id.nsid), ("QEMU NVMe Ctrl", "zns0", 1));
        assert_eq!(id.firmware, "9.0");
        assert_eq!(nvme_identity(&sys.join("nothing"), "nvme2n7").nsid, 7);
        // Namespace 2 has no queue of its own here: the controller's
        // namespaces tell (512 KiB hardware limit, 127 segments of 4 KiB).
        assert_eq!(namespace_transfer_limit(sys, 0, 2), Some(127 * 4096));
        assert_eq!(namespace_transfer_limit(sys, 1, 1), None);
        // A namespace's own queue wins, in whole pages: a hidden block
        // device keeps the kernel's default of 255 sectors.
        let hidden = sys.join("class/block/nvme0n2/queue");
        write(&hidden.join("max_hw_sectors_kb"), "127\n");
        write(&hidden.join("max_segments"), "128\n");
        assert_eq!(namespace_transfer_limit(sys, 0, 2), Some(31 * 4096));
        assert_eq!(conventional_sibling(&ctrl), Some((3, 4096, 16384)));
        assert_eq!(parse_nvme_name("ng0n2"), Some((0, 2)));
        assert_eq!(parse_nvme_name("nvme12n1"), Some((12, 1)));
        assert_eq!(parse_nvme_name("nvme0c1n2"), Some((0, 2)));
        assert_eq!(parse_nvme_name("sda"), None);
        assert_eq!(parse_nvme_name("nvme0"), None);
        assert_eq!(block_dir(sys, "nvme0n1"), sys.join("class/block/nvme0n1"));
    }
}
