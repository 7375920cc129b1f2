//! The driver backend: [`DriverDevice`] over a [`zns_driver::Controller`],
//! whose transport is either the in-process emulator (`emu:` URIs, the
//! `emulator` feature; `emulated.rs`) or a PCIe controller (`pcie:` URIs).

#[cfg(feature = "emulator")]
mod emulated;
mod queue;

use std::any::Any;
use std::sync::Arc;

use zns_driver::transport::PciBinding;
use zns_driver::{Controller, ControllerOptions, Namespace, PciAddress};
use zns_spec::identify::{IdentifyController, Oncs, ZnsController};
use zns_spec::log::GetLogPage;
use zns_spec::{AdminOpcode, ReportFilter, ReportHeader, SubmissionEntry, ZoneDescriptor};

pub use queue::DriverQueue;

use crate::buffer::IoBuffer;
#[cfg(feature = "emulator")]
use crate::changes::{EmulatedChanges, ZoneChanges};
use crate::device::{ZoneQueue, ZonedDevice};
use crate::error::{DeviceError, OpKind, Result};
use crate::info::{
    Capabilities, ConventionalNamespace, CopyLimits, DeviceInfo, IdentifyData, ZrwaInfo,
};

/// What the device and its queues share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) ctrl: Controller,
    pub(crate) ns: Namespace,
    pub(crate) info: DeviceInfo,
}

impl Shared {
    pub(crate) fn alloc(&self, len: usize) -> Result<IoBuffer> {
        let b = self.ctrl.pool().alloc_zeroed(len)?;
        Ok(IoBuffer::from_dma(b))
    }
}

/// A zoned device driven by the user-space driver.
///
/// Thread safety: `Send + Sync`; share it as `Arc<dyn ZonedDevice>` (or
/// `Arc<DriverDevice>`). Queues are created per thread with
/// [`ZonedDevice::queue`]; admin commands (queue creation) are serialized
/// inside the driver. The controller shuts down when the device and every
/// queue are gone.
#[derive(Debug)]
pub struct DriverDevice {
    shared: Arc<Shared>,
    #[cfg(feature = "emulator")]
    emulator: Option<Arc<zns_emulator::Controller>>,
    #[cfg(feature = "emulator")]
    memory: Option<Arc<zns_emulator::host::ProcessMemory>>,
    #[cfg(feature = "emulator")]
    changes: Option<EmulatedChanges>,
    /// The conventional namespace, for its queues.
    conventional: Option<Arc<Shared>>,
}

impl DriverDevice {
    /// Opens the PCIe controller at `addr` with the user-space driver. It
    /// must be an NVMe controller (class 0108h), unbound from the kernel's
    /// `nvme` driver (unbound, `vfio-pci` or `uio_pci_generic`); without
    /// VFIO the process must run as root. `binding` picks VFIO or sysfs `resource0`
    /// (or the one the bound driver calls for).
    pub fn open_pcie(addr: &PciAddress, binding: PciBinding, uri: &str) -> Result<Self> {
        let fail = |reason: String| DeviceError::Unavailable { uri: uri.to_string(), reason };
        let dir = addr.sysfs_dir();
        if !dir.exists() {
            return Err(fail(format!(
                "no PCI device {addr} on this machine (`zns list` shows the NVMe controllers)"
            )));
        }
        let class = std::fs::read_to_string(addr.sysfs_file("class"))
            .map_err(|e| fail(format!("cannot read the class of PCI device {addr}: {e}")))?;
        let class = u32::from_str_radix(class.trim().trim_start_matches("0x"), 16)
            .map_err(|_| fail(format!("PCI device {addr} has an unreadable class {class:?}")))?;
        if class >> 8 != crate::discovery::NVME_CLASS {
            return Err(fail(format!(
                "PCI device {addr} is not an NVMe controller (class {class:#08x}, expected 0x0108xx)"
            )));
        }
        // VFIO needs only access to /dev/vfio/N; sysfs resource0 and pagemap
        // physical addresses need root.
        let vfio = std::fs::read_link(addr.sysfs_file("driver"))
            .is_ok_and(|d| d.file_name().is_some_and(|n| n == "vfio-pci"));
        // SAFETY: geteuid has no preconditions.
        if !vfio && binding != PciBinding::Vfio && unsafe { libc::geteuid() } != 0 {
            return Err(fail(
                "the user-space driver needs root without VFIO (it maps BAR0 through sysfs and \
                 pins DMA memory at physical addresses)"
                    .into(),
            ));
        }
        let transport = zns_driver::transport::open_pci_with(&addr.to_string(), binding)
            .map_err(|e| fail(e.to_string()))?;
        let ctrl = Controller::new(transport, ControllerOptions::default())
            .map_err(|e| fail(format!("bring-up failed: {e}")))?;
        Self::from_controller(ctrl, uri)
    }

    /// Wraps a brought-up controller: its first zoned namespace becomes
    /// the device, a conventional namespace is described beside it. A
    /// controller without a zoned namespace (a conventional SSD, such as
    /// an emulated conventional twin) gives a device of its first
    /// conventional namespace, which has no zones ([`DeviceInfo::zoned`]).
    pub fn from_controller(ctrl: Controller, uri: &str) -> Result<Self> {
        let ns = ctrl.zoned_namespace().or_else(|| ctrl.namespaces().first()).cloned().ok_or_else(
            || {
                DeviceError::Unsupported(format!(
                    "{} has no active namespace",
                    ctrl.transport().describe()
                ))
            },
        )?;
        let zns_controller = match ctrl.identify_zns_controller() {
            Ok(z) => z,
            Err(e) => {
                tracing::debug!(error = %e, "no ZNS Identify Controller data");
                ZnsController::default()
            }
        };
        let zone_capacity = match ns.is_zoned() {
            true => first_zone_capacity(&ctrl, &ns)?,
            false => 0,
        };
        let mut info = describe(&ctrl, &ns, zns_controller, zone_capacity, uri);
        info.fdp = discover_fdp(&ctrl, &ns, uri);
        tracing::info!(
            uri,
            transport = %info.transport,
            zoned = info.zoned,
            zones = info.zone_count,
            zone_size = info.zone_size,
            blocks = info.namespace_blocks,
            "device open"
        );
        let conventional = ctrl.namespaces().iter().find(|n| !n.is_zoned()).map(|cns| {
            let mut info = describe_conventional(&ctrl, cns, &info);
            info.fdp = discover_fdp(&ctrl, cns, uri);
            Arc::new(Shared { ctrl: ctrl.clone(), ns: cns.clone(), info })
        });
        Ok(DriverDevice {
            shared: Arc::new(Shared { ctrl, ns, info }),
            #[cfg(feature = "emulator")]
            emulator: None,
            #[cfg(feature = "emulator")]
            memory: None,
            #[cfg(feature = "emulator")]
            changes: None,
            conventional,
        })
    }

    /// The driver's controller handle (admin commands, raw queue pairs).
    pub fn controller(&self) -> &Controller {
        &self.shared.ctrl
    }

    /// The zoned namespace the device stands for.
    pub fn namespace(&self) -> &Namespace {
        &self.shared.ns
    }

    /// A queue of the concrete type, with room for `depth` outstanding
    /// commands.
    pub fn driver_queue(&self, depth: usize) -> Result<DriverQueue> {
        DriverQueue::new(Arc::clone(&self.shared), depth)
    }
}

impl ZonedDevice for DriverDevice {
    fn info(&self) -> &DeviceInfo {
        &self.shared.info
    }

    fn queue(&self, depth: usize) -> Result<Box<dyn ZoneQueue>> {
        Ok(Box::new(self.driver_queue(depth)?))
    }

    fn alloc(&self, len: usize) -> Result<IoBuffer> {
        self.shared.alloc(len)
    }

    #[cfg(feature = "emulator")]
    fn emulator(&self) -> Option<&Arc<zns_emulator::Controller>> {
        self.emulator.as_ref()
    }

    #[cfg(feature = "emulator")]
    fn zone_changes(&self) -> Option<&dyn ZoneChanges> {
        self.changes.as_ref().map(|c| c as &dyn ZoneChanges)
    }

    fn conventional(&self) -> Option<&DeviceInfo> {
        self.conventional.as_ref().map(|s| &s.info)
    }

    fn conventional_queue(&self, depth: usize) -> Result<Box<dyn ZoneQueue>> {
        match &self.conventional {
            Some(s) => Ok(Box::new(DriverQueue::new(Arc::clone(s), depth)?)),
            None => Err(DeviceError::Unsupported(format!(
                "{} has no conventional namespace",
                self.shared.info.uri
            ))),
        }
    }

    fn log_page(&self, page: GetLogPage) -> Result<Vec<u8>> {
        self.shared
            .ctrl
            .get_log_page(page)
            .map_err(|e| DeviceError::from_driver(e, OpKind::GetLogPage, None))
    }

    fn get_features(&self, entry: &SubmissionEntry, data: Option<&mut [u8]>) -> Result<u32> {
        crate::device::check_features_entry(entry, AdminOpcode::GetFeatures)?;
        let ctrl = &self.shared.ctrl;
        let Some(data) = data.filter(|d| !d.is_empty()) else {
            return run_features(ctrl, *entry, None, OpKind::GetFeatures);
        };
        let driver = |e| DeviceError::from_driver(e, OpKind::GetFeatures, None);
        let mut dma = ctrl.pool().alloc_zeroed(data.len()).map_err(driver)?;
        let dw0 = run_features(ctrl, *entry, Some(&mut dma), OpKind::GetFeatures)?;
        data.copy_from_slice(dma.as_slice());
        Ok(dw0)
    }

    fn set_features(&self, entry: &SubmissionEntry, data: Option<&[u8]>) -> Result<u32> {
        crate::device::check_features_entry(entry, AdminOpcode::SetFeatures)?;
        let ctrl = &self.shared.ctrl;
        let Some(data) = data.filter(|d| !d.is_empty()) else {
            return run_features(ctrl, *entry, None, OpKind::SetFeatures);
        };
        let driver = |e| DeviceError::from_driver(e, OpKind::SetFeatures, None);
        let mut dma = ctrl.pool().alloc(data.len()).map_err(driver)?;
        dma.as_mut_slice().copy_from_slice(data);
        run_features(ctrl, *entry, Some(&mut dma), OpKind::SetFeatures)
    }

    fn now_ns(&self) -> u64 {
        #[cfg(feature = "emulator")]
        if let Some(e) = &self.emulator {
            return e.clock().now_ns();
        }
        crate::device::wall_clock_ns()
    }

    fn clock_name(&self) -> &'static str {
        #[cfg(feature = "emulator")]
        if let Some(e) = &self.emulator {
            return e.clock().name();
        }
        "real"
    }

    fn wait_ns(&self, ns: u64) {
        #[cfg(feature = "emulator")]
        if let Some(e) = &self.emulator {
            return e.clock().wait_ns(ns);
        }
        let until = crate::device::wall_clock_ns().saturating_add(ns);
        while crate::device::wall_clock_ns() < until {
            std::hint::spin_loop();
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Runs a Get or Set Features entry (`op`) on the admin queue with `dma`
/// as its data; returns completion DW0, or the controller's status.
fn run_features(
    ctrl: &Controller,
    entry: SubmissionEntry,
    dma: Option<&mut zns_driver::DmaBuffer>,
    op: OpKind,
) -> Result<u32> {
    let c = ctrl.admin_command(entry, dma).map_err(|e| DeviceError::from_driver(e, op, None))?;
    match c.error() {
        Some(e) => Err(DeviceError::Nvme { status: e.status, op, lba: None }),
        None => Ok(c.result as u32),
    }
}

/// The Flexible Data Placement of namespace `ns`, read with the admin
/// commands of [`crate::fdp::discover`].
fn discover_fdp(ctrl: &Controller, ns: &Namespace, uri: &str) -> Option<crate::fdp::FdpInfo> {
    crate::fdp::discover(
        uri,
        ctrl.info().identify.ctratt,
        ns.identify.endgid,
        |e| run_features(ctrl, e, None, OpKind::GetFeatures),
        |page| {
            ctrl.get_log_page(page)
                .map_err(|e| DeviceError::from_driver(e, OpKind::GetLogPage, None))
        },
    )
}

/// Capacity of zone 0, from a one-zone report on a short-lived queue.
fn first_zone_capacity(ctrl: &Controller, ns: &Namespace) -> Result<u64> {
    let mut qp = ctrl.create_queue_pair(2)?;
    let mut buf = ctrl.alloc_buffer(ReportHeader::SIZE + ZoneDescriptor::SIZE)?;
    let req = zns_driver::ReportRequest {
        slba: 0,
        filter: ReportFilter::All,
        partial: true,
        extended: false,
    };
    let report = qp
        .zone_receive(ns, req, &mut buf)
        .map_err(|e| DeviceError::from_driver(e, OpKind::ReportZones, Some(0)))?;
    report
        .descriptors
        .first()
        .map(|d| d.capacity)
        .ok_or_else(|| DeviceError::Unsupported("the device reported no zones".into()))
}

fn describe(
    ctrl: &Controller,
    ns: &Namespace,
    zns_controller: ZnsController,
    zone_capacity: u64,
    uri: &str,
) -> DeviceInfo {
    let ci = ctrl.info();
    let ic: &IdentifyController = &ci.identify;
    let z = ns.zoned.clone().unwrap_or_default();
    let copy = CopyLimits::from_identify(ic, &ns.identify);
    // A conventional namespace beside the device's own.
    let conventional =
        ctrl.namespaces().iter().find(|n| !n.is_zoned() && n.nsid != ns.nsid).map(|n| {
            ConventionalNamespace {
                nsid: n.nsid,
                block_size: n.block_size as u32,
                blocks: n.blocks,
            }
        });
    let namespace_blocks = match ns.is_zoned() {
        true => z.zone_count * z.zone_size,
        false => ns.blocks,
    };
    DeviceInfo {
        backend: "driver",
        transport: ctrl.transport().describe(),
        uri: uri.to_string(),
        model: ic.model_number.trim().to_string(),
        serial: ic.serial_number.trim().to_string(),
        firmware: ic.firmware_revision.trim().to_string(),
        nsid: ns.nsid,
        zoned: ns.is_zoned(),
        namespace_blocks,
        block_size: ns.block_size as u32,
        metadata_size: ns.metadata_size,
        zone_count: z.zone_count,
        zone_size: z.zone_size,
        zone_capacity,
        max_open: z.max_open,
        max_active: z.max_active,
        zasl_bytes: z.append_limit,
        mdts_bytes: ns.max_transfer,
        capabilities: Capabilities {
            append: ns.is_zoned(),
            copy,
            write_zeroes: ic.oncs.has(Oncs::WRITE_ZEROES),
            extended_report: z.extension_bytes > 0,
            extension_bytes: z.extension_bytes,
            read_across_zone_boundaries: z.identify.read_across_boundaries(),
            variable_zone_capacity: z.identify.variable_capacity(),
            volatile_write_cache: ic.vwc & IdentifyController::VWC_PRESENT != 0,
            select_all: ns.is_zoned(),
            offline: ns.is_zoned(),
            metadata: ns.metadata_size > 0 && !ns.identify.metadata_extended(),
            stores_data: true,
            zrwa: ZrwaInfo::from_identify(&z.identify),
        },
        conventional,
        fdp: None,
        identify: Some(IdentifyData {
            version: ci.version,
            controller: ic.clone(),
            zns_controller,
            namespace: ns.identify.clone(),
            zns_namespace: z.identify.clone(),
        }),
    }
}

/// The description of conventional namespace `ns` beside the zoned one
/// `zoned` describes: no zones, its own block size, limits and Copy
/// limits.
fn describe_conventional(ctrl: &Controller, ns: &Namespace, zoned: &DeviceInfo) -> DeviceInfo {
    let ic = &ctrl.info().identify;
    let copy = CopyLimits::from_identify(ic, &ns.identify);
    DeviceInfo {
        nsid: ns.nsid,
        block_size: ns.block_size as u32,
        metadata_size: ns.metadata_size,
        zone_count: 0,
        zone_size: 0,
        zone_capacity: 0,
        max_open: None,
        max_active: None,
        zasl_bytes: 0,
        mdts_bytes: ns.max_transfer,
        capabilities: Capabilities {
            append: false,
            copy,
            extended_report: false,
            extension_bytes: 0,
            read_across_zone_boundaries: true,
            variable_zone_capacity: false,
            select_all: false,
            offline: false,
            metadata: ns.metadata_size > 0 && !ns.identify.metadata_extended(),
            zrwa: None,
            ..zoned.capabilities.clone()
        },
        identify: None,
        ..zoned.clone()
    }
}
