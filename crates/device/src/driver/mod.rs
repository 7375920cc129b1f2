//! The driver backend: [`DriverDevice`] over a [`zns_driver::Controller`],
//! whose transport is either the in-process emulator (`emu:` URIs) or a
//! PCIe controller (`pcie:` URIs).

mod queue;

use std::any::Any;
use std::sync::Arc;

use zns_driver::transport::PciBinding;
use zns_driver::{Controller, ControllerOptions, Namespace, PciAddress};
use zns_emulator::host::{HostMemory, ProcessMemory};
use zns_emulator::profile::{NamespaceKind, Profile};
use zns_emulator::zns::ZrwaGeometry;
use zns_emulator::{Emulator, EmulatorError, MediaChoice};
use zns_spec::identify::{IdentifyController, Oncs, ZnsController};
use zns_spec::log::GetLogPage;
use zns_spec::{ReportFilter, ReportHeader, ZoneDescriptor};

pub use queue::DriverQueue;

use crate::buffer::IoBuffer;
use crate::changes::{EmulatedChanges, ZoneChanges};
use crate::device::{ZoneQueue, ZonedDevice};
use crate::error::{DeviceError, OpKind, Result};
use crate::info::{
    Capabilities, ConventionalNamespace, CopyLimits, DeviceInfo, IdentifyData, ZrwaInfo,
};
use crate::uri::{EmulatorMedia, EmulatorUri, Timing};

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
    emulator: Option<Arc<zns_emulator::Controller>>,
    memory: Option<Arc<ProcessMemory>>,
    changes: Option<EmulatedChanges>,
    /// The conventional namespace, for its queues.
    conventional: Option<Arc<Shared>>,
}

impl DriverDevice {
    /// Builds an emulated controller as `uri` describes and brings it up.
    /// `text` is the URI as given, kept for [`DeviceInfo::uri`].
    pub fn open_emulator(uri: &EmulatorUri, text: &str) -> Result<Self> {
        let memory = ProcessMemory::new();
        let builder = match &uri.file {
            Some(path) => {
                let b = Emulator::open_image(path.clone())?;
                if let Some(spec) = &uri.profile {
                    // A profile file names its profile inside.
                    let want = if crate::uri::is_profile_file(spec) {
                        uri.load_profile().map_err(EmulatorError::from)?.name
                    } else {
                        spec.clone()
                    };
                    let have = &b.profile().name;
                    if *have != want {
                        return Err(DeviceError::uri(
                            text,
                            format!(
                                "the image {} holds a {have:?} device, not {want:?}",
                                path.display()
                            ),
                        ));
                    }
                }
                b
            }
            None => {
                let media = match uri.media.unwrap_or_default() {
                    EmulatorMedia::Ram => MediaChoice::Ram,
                    EmulatorMedia::Null => MediaChoice::Null,
                };
                let mut profile = uri.load_profile().map_err(EmulatorError::from)?;
                if uri.zones.is_some()
                    || uri.metadata.is_some()
                    || uri.lba.is_some()
                    || uri.op.is_some()
                    || uri.zrwa.is_some()
                {
                    apply_geometry(&mut profile, uri, text)?;
                }
                Emulator::with_profile(profile).media(media)
            }
        };
        let mut builder = builder;
        match uri.timing {
            Some(Timing::On) => builder = builder.timing(true),
            Some(Timing::Off) => builder = builder.timing(false),
            None => {}
        }
        if let Some(clock) = uri.clock {
            if !builder.timed() {
                return Err(DeviceError::uri(
                    text,
                    format!(
                        "clock={} needs the timing model, and the {:?} profile has none \
                         (or timing=off was given)",
                        clock.name(),
                        builder.profile().name
                    ),
                ));
            }
            builder = builder.clock(clock);
        }
        if let Some(d) = uri.dilation {
            if !builder.timed() {
                return Err(DeviceError::uri(
                    text,
                    format!(
                        "dilation={d} needs the timing model, and the {:?} profile has none",
                        builder.profile().name
                    ),
                ));
            }
            builder = builder.dilation(d);
        }
        let host: Arc<dyn HostMemory> = memory.clone();
        let emu = builder.build(host)?;
        Self::from_emulator(emu, memory, text)
    }

    /// Builds an emulated controller from `profile` itself (timing on when
    /// the profile has a timing model, on the virtual clock) with `media`,
    /// and brings it up; `text` names the device in [`DeviceInfo::uri`].
    /// For programs that make profiles (a fit trying candidates) without
    /// writing them to files.
    pub fn open_profile(profile: Profile, media: MediaChoice, text: &str) -> Result<Self> {
        let memory = ProcessMemory::new();
        let host: Arc<dyn HostMemory> = memory.clone();
        let emu = Emulator::with_profile(profile).media(media).build(host)?;
        Self::from_emulator(emu, memory, text)
    }

    /// Brings up the driver on an existing emulated controller whose host
    /// memory is `memory` (the one it was built with). After
    /// [`zns_emulator::Controller::power_cut`], drop every handle of the old
    /// device, then call this again to bring the controller back up.
    pub fn from_emulator(
        emulator: Arc<zns_emulator::Controller>,
        memory: Arc<ProcessMemory>,
        uri: &str,
    ) -> Result<Self> {
        let ctrl = Controller::emulated(Arc::clone(&emulator), Arc::clone(&memory))?;
        let mut dev = Self::from_controller(ctrl, uri)?;
        let shared = [Some(&mut dev.shared), dev.conventional.as_mut()];
        for shared in shared.into_iter().flatten().filter_map(Arc::get_mut) {
            let nsid = shared.info.nsid;
            shared.info.capabilities.stores_data = emulator
                .namespaces()
                .iter()
                .find(|n| n.nsid() == nsid)
                .is_none_or(|n| n.media().stores_data());
        }
        dev.changes = EmulatedChanges::new(&emulator, dev.shared.info.nsid);
        dev.emulator = Some(emulator);
        dev.memory = Some(memory);
        Ok(dev)
    }

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
        let info = describe(&ctrl, &ns, zns_controller, zone_capacity, uri);
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
            let info = describe_conventional(&ctrl, cns, &info);
            Arc::new(Shared { ctrl: ctrl.clone(), ns: cns.clone(), info })
        });
        Ok(DriverDevice {
            shared: Arc::new(Shared { ctrl, ns, info }),
            emulator: None,
            memory: None,
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

    /// The emulated controller, for `emu:` devices.
    pub fn emulator(&self) -> Option<&Arc<zns_emulator::Controller>> {
        self.emulator.as_ref()
    }

    /// The host memory the emulated controller reaches, for `emu:` devices
    /// (to bring it up again with [`DriverDevice::from_emulator`]).
    pub fn host_memory(&self) -> Option<&Arc<ProcessMemory>> {
        self.memory.as_ref()
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

    fn emulator(&self) -> Option<&Arc<zns_emulator::Controller>> {
        self.emulator.as_ref()
    }

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

    fn now_ns(&self) -> u64 {
        match &self.emulator {
            Some(e) => e.clock().now_ns(),
            None => crate::device::wall_clock_ns(),
        }
    }

    fn clock_name(&self) -> &'static str {
        self.emulator.as_ref().map_or("real", |e| e.clock().name())
    }

    fn wait_ns(&self, ns: u64) {
        match &self.emulator {
            Some(e) => e.clock().wait_ns(ns),
            None => {
                let until = crate::device::wall_clock_ns().saturating_add(ns);
                while crate::device::wall_clock_ns() < until {
                    std::hint::spin_loop();
                }
            }
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// `zones=`, `metadata=`, `lba=` and `op=` of an `emu:` URI, applied to
/// the profile's zoned namespace, or to its conventional namespace with a
/// device-side FTL when it has no zoned one (a conventional twin:
/// `zones=N` gives it the flash of `N` zones of its ZNS twin).
fn apply_geometry(profile: &mut Profile, uri: &EmulatorUri, text: &str) -> Result<()> {
    let name = profile.name.clone();
    let target = match profile.namespaces.iter().position(|ns| ns.kind == NamespaceKind::Zoned) {
        Some(i) => Some(i),
        None => profile.namespaces.iter().position(|ns| ns.ftl.is_some()),
    };
    let Some(i) = target else {
        return Err(DeviceError::uri(
            text,
            format!(
                "zones=, metadata=, lba= and op= need a zoned namespace or a conventional twin's; \
                 {name:?} has neither"
            ),
        ));
    };
    let ns = &mut profile.namespaces[i];
    if let (Some(_), None) = (uri.op, &ns.ftl) {
        return Err(DeviceError::uri(
            text,
            format!(
                "op= is the over-provisioning of a conventional twin's firmware; {name:?} is a \
                 ZNS profile (its host FTL takes --op)"
            ),
        ));
    }
    if let Some(n) = uri.zones {
        match &mut ns.ftl {
            Some(f) => f.flash_zones = n,
            None => ns.zones = n,
        }
    }
    if let Some(m) = uri.metadata {
        ns.metadata_size = m;
    }
    if let (Some(op), Some(f)) = (uri.op, &mut ns.ftl) {
        f.over_provisioning = op as f64 / 100.0;
    }
    if let Some(b) = uri.lba {
        ns.set_block_size(b).map_err(|e| DeviceError::uri(text, format!("lba={b}: {e}")))?;
    }
    if let Some(z) = uri.zrwa {
        if ns.kind != NamespaceKind::Zoned {
            return Err(DeviceError::uri(
                text,
                format!("zrwa= needs a zoned namespace; {name:?} has none"),
            ));
        }
        // In blocks of the final block size: after lba=.
        ns.zrwa = Some(ZrwaGeometry {
            size: z.size,
            flush_granularity: z.flush_granularity,
            resources: z.resources,
            explicit_flush: true,
        });
    }
    profile.validate().map_err(|e| DeviceError::uri(text, e.to_string()))
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

#[cfg(test)]
mod tests {
    #[test]
    fn emulator_clocks_follow_the_uri() {
        let dev = crate::open("emu:zn540").unwrap();
        assert_eq!(dev.clock_name(), "virtual");
        let mut q = dev.queue(4).unwrap();
        let buf = dev.alloc(4096).unwrap();
        q.write(0, &buf).unwrap();
        let t0 = dev.now_ns();
        q.write(1, &buf).unwrap();
        // The model's QD 1 write of 4 KiB: about 11.4 µs in virtual time
        // (a controller housekeeping task may delay it), the same on every
        // run.
        let took = dev.now_ns() - t0;
        assert!((10_000..16_000).contains(&took), "{took} ns");
        let again = crate::open("emu:zn540").unwrap();
        let mut q2 = again.queue(4).unwrap();
        let buf2 = again.alloc(4096).unwrap();
        q2.write(0, &buf2).unwrap();
        let t2 = again.now_ns();
        q2.write(1, &buf2).unwrap();
        assert_eq!(again.now_ns() - t2, took, "virtual time is deterministic");
        let t1 = dev.now_ns();
        dev.wait_ns(1_000_000);
        assert_eq!(dev.now_ns() - t1, 1_000_000);
        assert_eq!(crate::open("emu:zn540,timing=off").unwrap().clock_name(), "real");
        assert_eq!(crate::open("emu:zn540,clock=real").unwrap().clock_name(), "real");
        let tiny = crate::open("emu:tiny").unwrap();
        assert_eq!(tiny.clock_name(), "real");
        let a = tiny.now_ns();
        assert!(tiny.now_ns() >= a);
        let e = crate::open("emu:tiny,timing=on").unwrap_err().to_string();
        assert!(e.contains("no timing model"), "{e}");
        let e = crate::open("emu:tiny,clock=virtual").unwrap_err().to_string();
        assert!(e.contains("needs the timing model"), "{e}");
    }
}
