//! A real controller bound to `vfio-pci`: a VFIO container with a type-1
//! IOMMU, the device's IOMMU group, BAR0 mapped through the device file
//! descriptor, bus mastering set through the configuration-space region,
//! and DMA memory mapped into the IOMMU at I/O virtual addresses the driver
//! chooses. Needs access to `/dev/vfio/<group>`, not root.

use std::ffi::CString;
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::hugepage::{self, HugepageArena, MappedRegion, RegionMapper, HUGE_PAGE};
use super::mmio::Mmio;
use super::sysfs::{self, PciAddress};
use super::Transport;
use crate::dma::DmaMemory;
use crate::error::{Result, TransportError};

/// `_IO(';', 100 + n)`: VFIO ioctls carry no size or direction bits.
const fn vfio_ioctl(n: u64) -> u64 {
    (b';' as u64) << 8 | (100 + n)
}

const VFIO_GET_API_VERSION: u64 = vfio_ioctl(0);
const VFIO_CHECK_EXTENSION: u64 = vfio_ioctl(1);
const VFIO_SET_IOMMU: u64 = vfio_ioctl(2);
const VFIO_GROUP_GET_STATUS: u64 = vfio_ioctl(3);
const VFIO_GROUP_SET_CONTAINER: u64 = vfio_ioctl(4);
const VFIO_GROUP_GET_DEVICE_FD: u64 = vfio_ioctl(6);
const VFIO_DEVICE_GET_REGION_INFO: u64 = vfio_ioctl(8);
const VFIO_IOMMU_MAP_DMA: u64 = vfio_ioctl(13);
const VFIO_IOMMU_UNMAP_DMA: u64 = vfio_ioctl(14);

const VFIO_API_VERSION: i32 = 0;
const VFIO_TYPE1_IOMMU: u64 = 1;
const VFIO_TYPE1V2_IOMMU: u64 = 3;
const VFIO_GROUP_FLAGS_VIABLE: u32 = 1 << 0;
const VFIO_REGION_INFO_FLAG_MMAP: u32 = 1 << 2;
const VFIO_DMA_MAP_FLAG_READ: u32 = 1 << 0;
const VFIO_DMA_MAP_FLAG_WRITE: u32 = 1 << 1;
const VFIO_PCI_BAR0_REGION_INDEX: u32 = 0;
const VFIO_PCI_CONFIG_REGION_INDEX: u32 = 7;

/// First I/O virtual address handed out: above 4 GiB, clear of the MSI
/// window and of any low reserved ranges.
const IOVA_BASE: u64 = 1 << 32;

#[repr(C)]
#[derive(Default)]
struct GroupStatus {
    argsz: u32,
    flags: u32,
}

#[repr(C)]
#[derive(Default)]
struct RegionInfo {
    argsz: u32,
    flags: u32,
    index: u32,
    cap_offset: u32,
    size: u64,
    offset: u64,
}

#[repr(C)]
struct DmaMap {
    argsz: u32,
    flags: u32,
    vaddr: u64,
    iova: u64,
    size: u64,
}

#[repr(C)]
struct DmaUnmap {
    argsz: u32,
    flags: u32,
    iova: u64,
    size: u64,
}

/// `ioctl` with an integer argument.
fn ioctl_value(fd: RawFd, request: u64, arg: u64, what: &str) -> Result<i32, TransportError> {
    // SAFETY: the requests used with this helper take an integer (or no)
    // argument and do not touch user memory.
    let r = unsafe { libc::ioctl(fd, request as _, arg as libc::c_ulong) };
    if r < 0 {
        return Err(TransportError::last_os(format!("VFIO {what}")));
    }
    Ok(r)
}

/// `ioctl` with a pointer to a `#[repr(C)]` argument structure.
fn ioctl_ptr<T>(fd: RawFd, request: u64, arg: &mut T, what: &str) -> Result<i32, TransportError> {
    // SAFETY: `arg` is a live, exclusively borrowed structure of the layout
    // the request expects (argsz set by the caller), valid for the call.
    let r = unsafe { libc::ioctl(fd, request as _, arg as *mut T) };
    if r < 0 {
        return Err(TransportError::last_os(format!("VFIO {what}")));
    }
    Ok(r)
}

fn open_rw(path: &str) -> Result<OwnedFd, TransportError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| TransportError::io(format!("open {path}"), e))?;
    Ok(OwnedFd::from(file))
}

/// Hands out I/O virtual addresses: a bump allocator in huge-page steps.
///
/// Thread safety: `Send + Sync` (one atomic).
#[derive(Debug)]
pub(crate) struct IovaAllocator {
    next: AtomicU64,
}

impl IovaAllocator {
    pub(crate) fn new(base: u64) -> Self {
        IovaAllocator { next: AtomicU64::new(base) }
    }

    /// Reserves `len` bytes of I/O virtual address space, huge-page aligned.
    pub(crate) fn reserve(&self, len: usize) -> u64 {
        let step = (len as u64).next_multiple_of(HUGE_PAGE as u64);
        self.next.fetch_add(step, Ordering::Relaxed)
    }
}

/// Maps memory into the container's IOMMU.
struct VfioMapper {
    container: Arc<OwnedFd>,
    iova: IovaAllocator,
}

/// An IOMMU mapping and the memory behind it; unmapped from the IOMMU before
/// the memory is released.
struct IommuMapping {
    container: Arc<OwnedFd>,
    iova: u64,
    len: usize,
    memory: Option<Box<dyn std::any::Any + Send + Sync>>,
}

impl Drop for IommuMapping {
    fn drop(&mut self) {
        let mut unmap = DmaUnmap {
            argsz: std::mem::size_of::<DmaUnmap>() as u32,
            flags: 0,
            iova: self.iova,
            size: self.len as u64,
        };
        match ioctl_ptr(self.container.as_raw_fd(), VFIO_IOMMU_UNMAP_DMA, &mut unmap, "unmap DMA") {
            Ok(_) => drop(self.memory.take()),
            Err(e) => {
                // The device might still reach the memory: keep it mapped.
                tracing::error!(error = %e, iova = self.iova, "IOMMU unmap failed; leaking memory");
                std::mem::forget(self.memory.take());
            }
        }
    }
}

impl RegionMapper for VfioMapper {
    fn map(&self, len: usize) -> Result<MappedRegion> {
        let (addr, memory) = hugepage::map_for_iommu(len)?;
        let iova = self.iova.reserve(len);
        let mut map = DmaMap {
            argsz: std::mem::size_of::<DmaMap>() as u32,
            flags: VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE,
            vaddr: addr as u64,
            iova,
            size: len as u64,
        };
        ioctl_ptr(self.container.as_raw_fd(), VFIO_IOMMU_MAP_DMA, &mut map, "map DMA")?;
        let bus = (0..len / HUGE_PAGE).map(|i| iova + (i * HUGE_PAGE) as u64).collect();
        let owner = IommuMapping {
            container: Arc::clone(&self.container),
            iova,
            len,
            memory: Some(memory),
        };
        Ok(MappedRegion { addr, len, bus, _owner: Box::new(owner) })
    }
}

/// A controller bound to `vfio-pci`.
///
/// Thread safety: `Send + Sync`.
pub struct VfioTransport {
    addr: PciAddress,
    bar0: Mmio,
    dma: Arc<HugepageArena<VfioMapper>>,
    _device: OwnedFd,
    _group: OwnedFd,
}

impl std::fmt::Debug for VfioTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VfioTransport")
            .field("addr", &self.addr.to_string())
            .field("bar0_len", &self.bar0.len())
            .finish_non_exhaustive()
    }
}

impl VfioTransport {
    /// Opens the `vfio-pci`-bound controller at `addr`.
    pub fn open(addr: &PciAddress) -> Result<Self> {
        match sysfs::bound_driver(addr)?.as_deref() {
            Some("vfio-pci") => {}
            other => {
                return Err(TransportError::Vfio(format!(
                    "{addr} is bound to {other:?}, not vfio-pci; bind it with \
                     `echo vfio-pci > /sys/bus/pci/devices/{addr}/driver_override` and \
                     `echo {addr} > /sys/bus/pci/drivers_probe`"
                ))
                .into())
            }
        }
        let group_no = sysfs::iommu_group(addr)?;
        let container = Arc::new(open_container()?);
        let group = open_group(group_no, &container)?;
        let device = open_device(&group, addr)?;
        let bar0 = map_bar0(&device, addr)?;
        enable_bus_master(&device, addr)?;
        let mapper = VfioMapper { container, iova: IovaAllocator::new(IOVA_BASE) };
        tracing::info!(%addr, group = group_no, bar0 = bar0.len(), "VFIO transport open");
        Ok(VfioTransport {
            addr: *addr,
            bar0,
            dma: HugepageArena::new(mapper),
            _device: device,
            _group: group,
        })
    }
}

fn open_container() -> Result<OwnedFd, TransportError> {
    let c = open_rw("/dev/vfio/vfio")?;
    let version = ioctl_value(c.as_raw_fd(), VFIO_GET_API_VERSION, 0, "get API version")?;
    if version != VFIO_API_VERSION {
        return Err(TransportError::Vfio(format!("unknown API version {version}")));
    }
    if ioctl_value(c.as_raw_fd(), VFIO_CHECK_EXTENSION, VFIO_TYPE1V2_IOMMU, "check type1v2")? == 0
        && ioctl_value(c.as_raw_fd(), VFIO_CHECK_EXTENSION, VFIO_TYPE1_IOMMU, "check type1")? == 0
    {
        return Err(TransportError::Vfio("no type-1 IOMMU support".into()));
    }
    Ok(c)
}

fn open_group(group_no: u32, container: &OwnedFd) -> Result<OwnedFd, TransportError> {
    let g = open_rw(&format!("/dev/vfio/{group_no}"))?;
    let mut status =
        GroupStatus { argsz: std::mem::size_of::<GroupStatus>() as u32, ..Default::default() };
    ioctl_ptr(g.as_raw_fd(), VFIO_GROUP_GET_STATUS, &mut status, "group status")?;
    if status.flags & VFIO_GROUP_FLAGS_VIABLE == 0 {
        return Err(TransportError::Vfio(format!(
            "IOMMU group {group_no} is not viable: bind every device in it to vfio-pci"
        )));
    }
    let mut cfd: RawFd = container.as_raw_fd();
    ioctl_ptr(g.as_raw_fd(), VFIO_GROUP_SET_CONTAINER, &mut cfd, "set container")?;
    let iommu = if ioctl_value(cfd, VFIO_CHECK_EXTENSION, VFIO_TYPE1V2_IOMMU, "check type1v2")? != 0
    {
        VFIO_TYPE1V2_IOMMU
    } else {
        VFIO_TYPE1_IOMMU
    };
    ioctl_value(cfd, VFIO_SET_IOMMU, iommu, "set IOMMU type")?;
    Ok(g)
}

fn open_device(group: &OwnedFd, addr: &PciAddress) -> Result<OwnedFd, TransportError> {
    let name =
        CString::new(addr.to_string()).map_err(|_| TransportError::InvalidBdf(addr.to_string()))?;
    // SAFETY: the argument is a NUL-terminated string that outlives the call.
    let fd =
        unsafe { libc::ioctl(group.as_raw_fd(), VFIO_GROUP_GET_DEVICE_FD as _, name.as_ptr()) };
    if fd < 0 {
        return Err(TransportError::last_os(format!("VFIO get device fd of {addr}")));
    }
    // SAFETY: the kernel returned a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn region_info(device: &OwnedFd, index: u32) -> Result<RegionInfo, TransportError> {
    let mut info =
        RegionInfo { argsz: std::mem::size_of::<RegionInfo>() as u32, index, ..Default::default() };
    ioctl_ptr(device.as_raw_fd(), VFIO_DEVICE_GET_REGION_INFO, &mut info, "region info")?;
    Ok(info)
}

fn map_bar0(device: &OwnedFd, addr: &PciAddress) -> Result<Mmio, TransportError> {
    let info = region_info(device, VFIO_PCI_BAR0_REGION_INDEX)?;
    let bar_err = |reason: String| TransportError::Bar { bdf: addr.to_string(), reason };
    if info.flags & VFIO_REGION_INFO_FLAG_MMAP == 0 {
        return Err(bar_err("BAR0 cannot be memory-mapped".into()));
    }
    let len = usize::try_from(info.size).map_err(|_| bar_err("BAR0 too large".into()))?;
    if len < 0x1008 {
        return Err(bar_err(format!("BAR0 is only {len} bytes")));
    }
    Mmio::map(device.as_raw_fd(), info.offset, len, "VFIO BAR0")
}

fn enable_bus_master(device: &OwnedFd, addr: &PciAddress) -> Result<(), TransportError> {
    let info = region_info(device, VFIO_PCI_CONFIG_REGION_INDEX)?;
    let dup = device.try_clone().map_err(|e| TransportError::io("dup VFIO device fd", e))?;
    let file = File::from(dup);
    sysfs::enable_bus_master(&file, info.offset, addr)
}

impl Transport for VfioTransport {
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
        format!("vfio {}", self.addr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ioctl_numbers_match_the_kernel_header() {
        assert_eq!(VFIO_GET_API_VERSION, 0x3B64);
        assert_eq!(VFIO_CHECK_EXTENSION, 0x3B65);
        assert_eq!(VFIO_SET_IOMMU, 0x3B66);
        assert_eq!(VFIO_GROUP_GET_STATUS, 0x3B67);
        assert_eq!(VFIO_GROUP_SET_CONTAINER, 0x3B68);
        assert_eq!(VFIO_GROUP_GET_DEVICE_FD, 0x3B6A);
        assert_eq!(VFIO_DEVICE_GET_REGION_INFO, 0x3B6C);
        assert_eq!(VFIO_IOMMU_MAP_DMA, 0x3B71);
        assert_eq!(VFIO_IOMMU_UNMAP_DMA, 0x3B72);
        assert_eq!(std::mem::size_of::<RegionInfo>(), 32);
        assert_eq!(std::mem::size_of::<DmaMap>(), 32);
        assert_eq!(std::mem::size_of::<DmaUnmap>(), 24);
    }

    #[test]
    fn iova_reservations_are_huge_page_aligned_and_disjoint() {
        let a = IovaAllocator::new(IOVA_BASE);
        let x = a.reserve(4096);
        let y = a.reserve(3 * HUGE_PAGE + 1);
        let z = a.reserve(HUGE_PAGE);
        assert_eq!(x, IOVA_BASE);
        assert_eq!(y, IOVA_BASE + HUGE_PAGE as u64);
        assert_eq!(z, IOVA_BASE + 5 * HUGE_PAGE as u64);
    }

    #[test]
    fn unbound_device_is_refused_with_instructions() {
        let a: PciAddress = "ffff:ff:1f.7".parse().unwrap();
        assert!(VfioTransport::open(&a).is_err());
    }
}
