//! The NVM subsystem a target exports: its NQN and its namespaces (zoned
//! devices, and block devices such as the FTL as conventional NVM
//! namespaces), and the Identify data the target's controllers report for
//! them.
//!
//! The target is a controller of its own (as Linux's nvmet is): its
//! Identify Controller describes the target, its namespaces describe the
//! backends' geometry. Where a backend read the device's own Identify
//! data (the driver and the emulator), the zoned namespace's ZNS fields
//! (limits, reset and finish recommendations) are taken from it.

use std::sync::Arc;

use zns_block::BlockDevice;
use zns_device::{DeviceInfo, ZonedDevice};
use zns_spec::identify::{
    IdentifyController, IdentifyNamespace, LbaFormat, NamespaceIdDescriptor,
    NamespaceIdDescriptorList, Oncs, ZnsController, ZnsNamespace, ZoneFormatExtension,
    IDENTIFY_SIZE,
};
use zns_spec::regs::Version;
use zns_spec::CommandSetId;

use crate::error::{NvmfError, Result};

/// The NVMe version the target's controllers report (2.0: I/O command
/// sets, the command-set-independent namespace data).
pub const VERSION: Version = Version::new(2, 0, 0);

/// In-capsule data the target accepts on I/O queues (IOCCSZ is this plus
/// the 64-byte command, in 16-byte units): writes up to this size need no
/// R2T round trip.
pub const IN_CAPSULE_DATA: usize = 8192;

/// Commands outstanding per queue (MAXCMD, and CAP.MQES + 1).
pub const QUEUE_ENTRIES: u16 = 128;

/// Largest transfer of a block namespace's commands.
pub const BLOCK_MDTS: usize = 1 << 20;

/// What a namespace stands for.
///
/// Thread safety: `Send + Sync`.
#[derive(Clone)]
pub enum Backend {
    /// A zoned device: a Zoned Namespace (CSI 02h).
    Zoned(Arc<dyn ZonedDevice>),
    /// A device's conventional namespace: an NVM namespace (CSI 00h) whose
    /// Read, Write, Write Zeroes, Flush and Copy run on the device's own
    /// queues to it, with the device's statuses. For a zoned device that
    /// is its second namespace ([`ZonedDevice::conventional`], reached by
    /// [`ZonedDevice::conventional_queue`]); a device that is not zoned
    /// ([`DeviceInfo::zoned`] false, such as the emulator's conventional
    /// twins) is that namespace itself, reached by its ordinary queues.
    Conventional {
        /// The device.
        device: Arc<dyn ZonedDevice>,
        /// What it is, for logs (e.g. "emu:tiny, namespace 2", or the URI
        /// of a device that is not zoned).
        name: String,
    },
    /// A random-write block device (the FTL): an NVM namespace (CSI 00h)
    /// with Read, Write, Flush, Write Zeroes and Dataset Management.
    Block {
        /// The device.
        device: Arc<dyn BlockDevice>,
        /// What it is, for logs (e.g. "FTL on emu:small").
        name: String,
        /// The zoned device holding its blocks, if there is one (an FTL's,
        /// [`zns_ftl::Ftl::device`]): its controller's media counters are
        /// part of what the target's log pages report.
        media: Option<Arc<dyn ZonedDevice>>,
    },
}

impl Backend {
    /// The namespaces of a device: its zoned namespace, then its
    /// conventional one where it has one the backend reaches; a device
    /// that is not zoned is one conventional namespace.
    pub fn of_device(device: Arc<dyn ZonedDevice>) -> Vec<Backend> {
        if !device.info().zoned {
            return vec![Backend::Conventional { name: device.info().uri.clone(), device }];
        }
        let conventional = device.conventional().map(|c| Backend::Conventional {
            name: format!("{}, namespace {}", device.info().uri, c.nsid),
            device: Arc::clone(&device),
        });
        std::iter::once(Backend::Zoned(device)).chain(conventional).collect()
    }
}

/// The NVM namespace a [`Backend::Conventional`] serves: the device itself
/// when it is not zoned, else its conventional namespace, if any.
pub(crate) fn nvm_namespace(device: &Arc<dyn ZonedDevice>) -> Option<&DeviceInfo> {
    let info = device.info();
    if info.zoned {
        device.conventional()
    } else {
        Some(info)
    }
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Backend::Zoned(d) => f.debug_tuple("Zoned").field(&d.info().uri).finish(),
            Backend::Conventional { name, .. } => {
                f.debug_tuple("Conventional").field(name).finish()
            }
            Backend::Block { name, .. } => f.debug_tuple("Block").field(name).finish(),
        }
    }
}

/// One namespace: a backend under an NSID.
///
/// Thread safety: `Send + Sync`.
#[derive(Debug, Clone)]
pub struct Namespace {
    /// Namespace ID (1-based, dense).
    pub nsid: u32,
    /// The backend.
    pub backend: Backend,
}

impl Namespace {
    /// The zoned device, for a zoned namespace.
    pub fn zoned(&self) -> Option<&Arc<dyn ZonedDevice>> {
        match &self.backend {
            Backend::Zoned(d) => Some(d),
            _ => None,
        }
    }

    /// The zoned device's description, for a zoned namespace.
    pub fn info(&self) -> Option<&DeviceInfo> {
        self.zoned().map(|d| d.info())
    }

    /// The device behind the namespace (zoned or conventional); `None`
    /// for a block device.
    pub fn device(&self) -> Option<&Arc<dyn ZonedDevice>> {
        match &self.backend {
            Backend::Zoned(d) | Backend::Conventional { device: d, .. } => Some(d),
            Backend::Block { .. } => None,
        }
    }

    /// The device whose conventional namespace this is.
    pub fn conventional(&self) -> Option<&Arc<dyn ZonedDevice>> {
        match &self.backend {
            Backend::Conventional { device, .. } => Some(device),
            _ => None,
        }
    }

    /// The description of the device namespace behind this one (zoned or
    /// conventional); `None` for a block device.
    pub fn device_info(&self) -> Option<&DeviceInfo> {
        match &self.backend {
            Backend::Zoned(d) => Some(d.info()),
            Backend::Conventional { device, .. } => nvm_namespace(device),
            Backend::Block { .. } => None,
        }
    }

    /// The block device, for an NVM namespace.
    pub fn block(&self) -> Option<&Arc<dyn BlockDevice>> {
        match &self.backend {
            Backend::Block { device, .. } => Some(device),
            _ => None,
        }
    }

    /// The command set the namespace belongs to.
    pub fn csi(&self) -> CommandSetId {
        match self.backend {
            Backend::Zoned(_) => CommandSetId::Zoned,
            Backend::Conventional { .. } | Backend::Block { .. } => CommandSetId::Nvm,
        }
    }

    /// Logical block size in bytes.
    pub fn block_size(&self) -> u32 {
        match &self.backend {
            Backend::Block { device, .. } => device.block_size(),
            _ => self.device_info().map_or(0, |i| i.block_size),
        }
    }

    /// Size in logical blocks.
    pub fn blocks(&self) -> u64 {
        match &self.backend {
            Backend::Zoned(d) => d.info().blocks(),
            Backend::Conventional { device, .. } if !device.info().zoned => device.info().blocks(),
            Backend::Conventional { device, .. } => {
                device.conventional().and_then(|i| i.conventional).map_or(0, |c| c.blocks)
            }
            Backend::Block { device, .. } => device.capacity_blocks(),
        }
    }

    /// Largest transfer of one command.
    pub fn mdts_bytes(&self) -> usize {
        match &self.backend {
            Backend::Block { .. } => BLOCK_MDTS,
            _ => self.device_info().map_or(4096, |i| i.mdts_bytes),
        }
    }

    /// What the namespace is, for logs.
    pub fn name(&self) -> &str {
        match &self.backend {
            Backend::Zoned(d) => &d.info().uri,
            Backend::Conventional { name, .. } | Backend::Block { name, .. } => name,
        }
    }
}

/// An NVM subsystem: an NQN and its namespaces.
///
/// Thread safety: `Send + Sync`; immutable once built.
#[derive(Debug)]
pub struct Subsystem {
    nqn: String,
    serial: String,
    namespaces: Vec<Namespace>,
    /// Host NQNs allowed to connect; empty: any host.
    allowed_hosts: Vec<String>,
    /// DH-HMAC-CHAP secrets by host NQN: those hosts must authenticate.
    secrets: Vec<(String, HostSecrets)>,
}

/// The DH-HMAC-CHAP secrets of one host: its own (it proves itself with
/// it), and optionally the controller's (the host may then ask the
/// controller to prove itself: bidirectional authentication).
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostSecrets {
    /// The host's secret (`nvme connect --dhchap-secret`).
    pub host: zns_spec::auth::Secret,
    /// The controller's secret (`nvme connect --dhchap-ctrl-secret`).
    pub controller: Option<zns_spec::auth::Secret>,
}

impl Subsystem {
    /// A subsystem named `nqn` exporting `devices` as namespaces 1, 2, ...:
    /// each device's zoned namespace, then its conventional namespace where
    /// it has one ([`Backend::of_device`]).
    pub fn new(nqn: impl Into<String>, devices: Vec<Arc<dyn ZonedDevice>>) -> Result<Subsystem> {
        Subsystem::with_backends(nqn, devices.into_iter().flat_map(Backend::of_device).collect())
    }

    /// A subsystem named `nqn` exporting `backends` as namespaces 1, 2, ...
    /// (zoned devices as Zoned Namespaces, block devices as NVM ones).
    pub fn with_backends(nqn: impl Into<String>, backends: Vec<Backend>) -> Result<Subsystem> {
        let nqn = nqn.into();
        if nqn.is_empty() || nqn.len() > zns_spec::fabrics::NQN_MAX || !nqn.starts_with("nqn.") {
            return Err(NvmfError::Subsystem(format!(
                "{nqn:?}: an NQN starts with \"nqn.\" and has at most {} bytes",
                zns_spec::fabrics::NQN_MAX
            )));
        }
        if nqn == zns_spec::fabrics::DISCOVERY_NQN {
            return Err(NvmfError::Subsystem(format!("{nqn} is the discovery subsystem's NQN")));
        }
        if backends.is_empty() {
            return Err(NvmfError::Subsystem("a subsystem needs at least one device".into()));
        }
        let namespaces: Vec<Namespace> = backends
            .into_iter()
            .enumerate()
            .map(|(i, backend)| Namespace { nsid: i as u32 + 1, backend })
            .collect();
        for ns in &namespaces {
            if let Backend::Conventional { device, .. } = &ns.backend {
                if nvm_namespace(device).is_none() {
                    return Err(NvmfError::Subsystem(format!(
                        "{}: the device has no conventional namespace this backend reaches",
                        ns.name()
                    )));
                }
            }
            let bs = ns.block_size();
            if !bs.is_power_of_two() || bs < 512 {
                return Err(NvmfError::Subsystem(format!(
                    "{}: block size {bs} is not a power of two of at least 512",
                    ns.name()
                )));
            }
        }
        let serial = format!("{:016x}", fnv(nqn.as_bytes()));
        Ok(Subsystem { nqn, serial, namespaces, allowed_hosts: Vec::new(), secrets: Vec::new() })
    }

    /// Restricts the subsystem to hosts with these NQNs (an empty list
    /// allows any host). Others' Connects fail with Connect Invalid Host,
    /// and the discovery log page they read is empty.
    pub fn with_allowed_hosts(mut self, hosts: Vec<String>) -> Subsystem {
        self.allowed_hosts = hosts;
        self
    }

    /// The allowed host NQNs (empty: any host).
    pub fn allowed_hosts(&self) -> &[String] {
        &self.allowed_hosts
    }

    /// Requires host `hostnqn` to authenticate with DH-HMAC-CHAP and
    /// `secrets` on every queue (replacing secrets given before).
    pub fn with_host_secrets(
        mut self,
        hostnqn: impl Into<String>,
        secrets: HostSecrets,
    ) -> Subsystem {
        let hostnqn = hostnqn.into();
        self.secrets.retain(|(h, _)| *h != hostnqn);
        self.secrets.push((hostnqn, secrets));
        self
    }

    /// The secrets of host `hostnqn`, if it must authenticate.
    pub fn host_secrets(&self, hostnqn: &str) -> Option<&HostSecrets> {
        self.secrets.iter().find(|(h, _)| h == hostnqn).map(|(_, s)| s)
    }

    /// Hosts that must authenticate.
    pub fn authenticated_hosts(&self) -> impl Iterator<Item = &str> {
        self.secrets.iter().map(|(h, _)| h.as_str())
    }

    /// Whether host `hostnqn` may connect.
    pub fn allows(&self, hostnqn: &str) -> bool {
        self.allowed_hosts.is_empty() || self.allowed_hosts.iter().any(|h| h == hostnqn)
    }

    /// The subsystem NQN.
    pub fn nqn(&self) -> &str {
        &self.nqn
    }

    /// The namespaces, by NSID order.
    pub fn namespaces(&self) -> &[Namespace] {
        &self.namespaces
    }

    /// The devices whose media hold the namespaces' blocks, each once, in
    /// NSID order: the zoned and conventional namespaces' devices, and the
    /// device under each block namespace that has one (an FTL's); a device
    /// that stands on another's media ([`ZonedDevice::media_device`], an
    /// eZNS tenant) gives that one, so tenants of one base count it once.
    pub fn media_devices(&self) -> Vec<Arc<dyn ZonedDevice>> {
        let mut out: Vec<Arc<dyn ZonedDevice>> = Vec::new();
        for ns in &self.namespaces {
            let d = match &ns.backend {
                Backend::Zoned(d) | Backend::Conventional { device: d, .. } => Some(d),
                Backend::Block { media, .. } => media.as_ref(),
            };
            if let Some(d) = d.map(media_of) {
                // A device with two namespaces is one device.
                if !out.iter().any(|o| Arc::ptr_eq(o, &d)) {
                    out.push(d);
                }
            }
        }
        out
    }

    /// Namespace `nsid`, if it exists.
    pub fn namespace(&self, nsid: u32) -> Option<&Namespace> {
        self.namespaces.get((nsid as usize).checked_sub(1)?)
    }

    /// Largest transfer of one command: the smallest device limit.
    pub fn mdts_bytes(&self) -> usize {
        self.namespaces.iter().map(Namespace::mdts_bytes).min().unwrap_or(4096).max(4096)
    }

    /// Identify Controller of an I/O controller with ID `cntlid`.
    pub fn identify_controller(&self, cntlid: u16) -> Box<[u8; IDENTIFY_SIZE]> {
        let infos: Vec<&DeviceInfo> =
            self.namespaces.iter().filter_map(|n| n.device_info()).collect();
        // Block namespaces write zeroes, copy, deallocate and cache writes
        // until a flush; conventional ones take deallocation too.
        let blocks = self.namespaces.iter().any(|n| n.block().is_some());
        let dsm = self.namespaces.iter().any(|n| n.csi() == CommandSetId::Nvm);
        let copy = infos.iter().all(|i| i.capabilities.copy.is_some());
        let wz = infos.iter().all(|i| i.capabilities.write_zeroes);
        // Compare and Verify are the target's own (reads of the backend).
        let oncs = Oncs(
            Oncs::COMPARE
                | Oncs::VERIFY
                | if wz { Oncs::WRITE_ZEROES } else { 0 }
                | if copy { Oncs::COPY } else { 0 }
                | if dsm { Oncs::DATASET_MANAGEMENT } else { 0 },
        );
        let vwc = blocks || infos.iter().any(|i| i.capabilities.volatile_write_cache);
        let id = IdentifyController {
            vid: 0x1b36,
            ssvid: 0x1af4,
            serial_number: self.serial.clone(),
            model_number: "znskit NVMe/TCP target".into(),
            firmware_revision: env!("CARGO_PKG_VERSION").into(),
            mdts: mdts_field(self.mdts_bytes()),
            cntlid,
            ver: VERSION,
            // Zone Descriptor Changed notices (bit 27).
            oaes: 1 << 27,
            cntrltype: IdentifyController::CNTRLTYPE_IO,
            acl: 3,
            aerl: 3,
            // Commands Supported and Effects log (bit 1), extended Get Log
            // Page (bit 2).
            lpa: (1 << 1) | (1 << 2),
            sqes: 0x66,
            cqes: 0x44,
            maxcmd: QUEUE_ENTRIES,
            nn: self.namespaces.len() as u32,
            oncs,
            vwc: if vwc { IdentifyController::VWC_PRESENT } else { 0 },
            ocfs: if copy { IdentifyController::OCFS_FORMAT0 } else { 0 },
            sgls: sgls(),
            mnan: self.namespaces.len() as u32,
            subnqn: self.nqn.clone(),
            // Flexible Data Placement of namespaces whose devices have it.
            ctratt: fabrics_controller().ctratt | crate::fdp::ctratt(self),
            endgidmax: crate::fdp::endgidmax(self),
            ..fabrics_controller()
        };
        with_kas(id.to_bytes())
    }

    /// Identify Namespace (NVM, CNS 00h) of `ns`.
    pub fn identify_namespace(&self, ns: &Namespace) -> Box<[u8; IDENTIFY_SIZE]> {
        let blocks = ns.blocks();
        let mut id = IdentifyNamespace {
            nsze: blocks,
            ncap: blocks,
            nuse: blocks,
            nlbaf: 0,
            flbas: 0,
            nguid: nguid(&self.nqn, ns.nsid),
            endgid: crate::fdp::endgid(self, ns),
            ..IdentifyNamespace::default()
        };
        id.lbaf[0] = LbaFormat {
            metadata_size: 0,
            lba_data_size_log2: ns.block_size().trailing_zeros() as u8,
            relative_performance: 0,
        };
        if let Some(c) = ns.device_info().and_then(|i| i.capabilities.copy) {
            id.mssrl = c.max_range_blocks.min(u16::MAX as u32) as u16;
            id.mcl = c.max_blocks;
            id.msrc = c.max_ranges.saturating_sub(1).min(255) as u8;
        }
        if ns.block().is_some() {
            let (range, total, ranges) = crate::block::COPY_LIMITS;
            id.mssrl = range as u16;
            id.mcl = total;
            id.msrc = (ranges - 1) as u8;
        }
        let mut b = id.to_bytes();
        if ns.block().is_some() {
            // DLFEAT: deallocated blocks read as zeroes (001b), and Write
            // Zeroes may deallocate (bit 3).
            b[33] = 0b1001;
        }
        b
    }

    /// ZNS Identify Namespace (CNS 05h, CSI 02h) of `ns`; `None` for a
    /// namespace of another command set.
    pub fn identify_zns_namespace(&self, ns: &Namespace) -> Option<Box<[u8; IDENTIFY_SIZE]>> {
        let info = ns.info()?;
        let mut z = match &info.identify {
            Some(id) => id.zns_namespace.clone(),
            None => ZnsNamespace::default(),
        };
        z.max_active = info.max_active;
        z.max_open = info.max_open;
        z.zoc = if info.capabilities.variable_zone_capacity {
            ZnsNamespace::ZOC_VARIABLE_CAPACITY
        } else {
            0
        };
        z.ozcs = if info.capabilities.read_across_zone_boundaries {
            ZnsNamespace::OZCS_READ_ACROSS_BOUNDARIES
        } else {
            0
        };
        // Zone random write areas pass through: the backend's, or none.
        (z.numzrwa, z.zrwafg, z.zrwasz, z.zrwacap) = (0, 0, 0, 0);
        if let Some(w) = &info.capabilities.zrwa {
            z.ozcs |= ZnsNamespace::OZCS_ZRWA;
            z.numzrwa = u32::try_from(w.resources.saturating_sub(1)).unwrap_or(u32::MAX);
            z.zrwafg = u16::try_from(w.flush_granularity).unwrap_or(0);
            z.zrwasz = u16::try_from(w.size).unwrap_or(0);
            if w.explicit_flush {
                z.zrwacap = ZnsNamespace::ZRWACAP_EXPLICIT_FLUSH;
            }
        }
        let zdes = (info.capabilities.extension_bytes / 64) as u8;
        z.lbafe = [ZoneFormatExtension::default(); 64];
        z.lbafe[0] = ZoneFormatExtension { zone_size: info.zone_size, zdes };
        Some(z.to_bytes())
    }

    /// ZNS Identify Controller (CNS 06h, CSI 02h).
    pub fn identify_zns_controller(&self) -> Box<[u8; IDENTIFY_SIZE]> {
        let zasl = self
            .namespaces
            .iter()
            .filter_map(|n| n.info())
            .map(|i| i.zasl_bytes)
            .min()
            .unwrap_or(4096);
        ZnsController { zasl: mdts_field(zasl) }.to_bytes()
    }

    /// Namespace Identification Descriptor list (CNS 03h) of `ns`.
    pub fn ns_descriptors(&self, ns: &Namespace) -> Box<[u8; IDENTIFY_SIZE]> {
        let g = nguid(&self.nqn, ns.nsid);
        let mut uuid = g;
        uuid[6] = (uuid[6] & 0x0f) | 0x40; // version 4 layout
        uuid[8] = (uuid[8] & 0x3f) | 0x80;
        NamespaceIdDescriptorList {
            descriptors: vec![
                NamespaceIdDescriptor::Nguid(g),
                NamespaceIdDescriptor::Uuid(uuid),
                NamespaceIdDescriptor::Csi(ns.csi() as u8),
            ],
        }
        .to_bytes()
    }

    /// I/O Command Set Independent Identify Namespace (CNS 08h): the
    /// namespace is ready (NSTAT bit 0).
    pub fn identify_independent_namespace(&self, _ns: &Namespace) -> Box<[u8; IDENTIFY_SIZE]> {
        let mut b = Box::new([0u8; IDENTIFY_SIZE]);
        b[14] = 1; // NSTAT: namespace ready
        b
    }
}

/// Identify Controller of a discovery controller with ID `cntlid`.
pub fn identify_discovery_controller(cntlid: u16) -> Box<[u8; IDENTIFY_SIZE]> {
    let id = IdentifyController {
        serial_number: "znskit-discovery".into(),
        model_number: "znskit NVMe/TCP discovery".into(),
        firmware_revision: env!("CARGO_PKG_VERSION").into(),
        cntlid,
        ver: VERSION,
        cntrltype: IdentifyController::CNTRLTYPE_DISCOVERY,
        aerl: 3,
        lpa: 1 << 2,
        maxcmd: QUEUE_ENTRIES,
        sgls: sgls(),
        subnqn: zns_spec::fabrics::DISCOVERY_NQN.into(),
        ..fabrics_controller()
    };
    with_kas(id.to_bytes())
}

/// The fabrics fields every controller of this target shares.
fn fabrics_controller() -> IdentifyController {
    IdentifyController {
        ioccsz: ((64 + IN_CAPSULE_DATA) / 16) as u32,
        // Traffic-based keep alive: any command restarts the timer.
        ctratt: 1 << 6,
        iorcsz: 1,
        icdoff: 0,
        fcatt: 0,
        msdbd: 1,
        // Disconnect is supported.
        ofcs: 1,
        ..IdentifyController::default()
    }
}

/// The device whose media hold `d`'s blocks: `d`'s, or, for a device on
/// another's media, that device's (followed to the end: a tenant of a
/// tenant is on the first base).
fn media_of(d: &Arc<dyn ZonedDevice>) -> Arc<dyn ZonedDevice> {
    let mut at = Arc::clone(d);
    while let Some(under) = at.media_device() {
        at = under;
    }
    at
}

/// SGLS: SGLs supported (bit 0, no alignment requirement), the offset of
/// in-capsule data descriptors (bit 20).
fn sgls() -> u32 {
    1 | (1 << 20)
}

/// KAS (bytes 321:320): keep-alive granularity of 100 ms units, which the
/// spec structure leaves out. Hosts use it to space their Keep Alives.
fn with_kas(mut b: Box<[u8; IDENTIFY_SIZE]>) -> Box<[u8; IDENTIFY_SIZE]> {
    b[320..322].copy_from_slice(&10u16.to_le_bytes());
    b
}

/// MDTS / ZASL: a power of two of 4 KiB pages, rounded down.
fn mdts_field(bytes: usize) -> u8 {
    let pages = (bytes / 4096).max(1);
    (usize::BITS - 1 - pages.leading_zeros()) as u8
}

/// A 16-byte namespace GUID stable for a subsystem NQN and NSID.
fn nguid(nqn: &str, nsid: u32) -> [u8; 16] {
    let a = fnv(nqn.as_bytes());
    let b = fnv(&[nqn.as_bytes(), &nsid.to_le_bytes()].concat()).rotate_left(17);
    let mut g = [0u8; 16];
    g[..8].copy_from_slice(&a.to_be_bytes());
    g[8..].copy_from_slice(&b.to_be_bytes());
    g
}

/// FNV-1a, 64-bit: a stable hash for identifiers derived from names.
fn fnv(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mdts_rounds_down_to_a_power_of_two_of_pages() {
        assert_eq!(mdts_field(4096), 0);
        assert_eq!(mdts_field(128 * 1024), 5);
        assert_eq!(mdts_field(96 * 1024), 4);
        assert_eq!(mdts_field(1), 0);
    }

    #[test]
    fn nguids_differ_by_namespace_and_subsystem() {
        assert_ne!(nguid("nqn.a", 1), nguid("nqn.a", 2));
        assert_ne!(nguid("nqn.a", 1), nguid("nqn.b", 1));
        assert_eq!(nguid("nqn.a", 1), nguid("nqn.a", 1));
    }
}
