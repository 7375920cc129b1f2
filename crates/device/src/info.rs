//! What a device is: geometry, limits, capabilities and identification.

use serde::Serialize;
use zns_spec::identify::{
    IdentifyController, IdentifyNamespace, Oncs, ZnsController, ZnsNamespace,
};
use zns_spec::regs::Version;

/// Copy command limits (Identify Namespace MSSRL, MCL, MSRC).
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CopyLimits {
    /// Most blocks in one source range (MSSRL).
    pub max_range_blocks: u32,
    /// Most blocks in one command (MCL).
    pub max_blocks: u32,
    /// Most source ranges in one command (MSRC + 1).
    pub max_ranges: u32,
}

impl CopyLimits {
    /// The Copy limits of namespace `id` on controller `ic`: `None` when
    /// the controller does not support Copy (ONCS).
    pub fn from_identify(ic: &IdentifyController, id: &IdentifyNamespace) -> Option<CopyLimits> {
        ic.oncs.has(zns_spec::identify::Oncs::COPY).then(|| CopyLimits {
            max_range_blocks: id.mssrl as u32,
            max_blocks: id.mcl,
            max_ranges: id.msrc as u32 + 1,
        })
    }
}

/// What the device supports beyond reads, writes and zone management.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Capabilities {
    /// Zone Append.
    pub append: bool,
    /// Copy, with its limits; `None` when unsupported.
    pub copy: Option<CopyLimits>,
    /// Write Zeroes.
    pub write_zeroes: bool,
    /// Extended zone reports (descriptor extensions exist).
    pub extended_report: bool,
    /// Zone descriptor extension size in bytes (0 = none).
    pub extension_bytes: usize,
    /// Reads may cross zone boundaries (OZCS.RAZB).
    pub read_across_zone_boundaries: bool,
    /// Zone capacities may differ between zones (ZOC.VZCAP).
    pub variable_zone_capacity: bool,
    /// The device has a volatile write cache: writes are durable only after
    /// Flush or with FUA.
    pub volatile_write_cache: bool,
    /// Select All for Open, Close, Finish and Offline (Reset of all zones
    /// works on every backend).
    pub select_all: bool,
    /// The Offline Zone action.
    pub offline: bool,
    /// Per-LBA metadata in a separate buffer
    /// ([`crate::IoBuffer::attach_metadata`]) on Read, Write and Zone
    /// Append: the LBA format has metadata, not interleaved with the data,
    /// and the backend passes it.
    pub metadata: bool,
    /// Reads return what was written. False only for an emulated device
    /// that keeps no data (`media=null`): host software must not verify
    /// data or metadata read back (it reads as zeros).
    pub stores_data: bool,
    /// Zone random write areas ([`crate::ZoneOp::OpenZrwa`],
    /// [`crate::ZoneOp::CommitZrwa`]); `None` when the device or the
    /// backend has none.
    pub zrwa: Option<ZrwaInfo>,
}

/// The zone random write areas of a zoned namespace (ZNS Identify
/// Namespace OZCS.ZRWASUP, ZRWASZ, ZRWAFG, NUMZRWA, ZRWACAP).
///
/// A zone opened with a ZRWA takes writes anywhere from its write pointer
/// to `size` blocks past it, overwrites included; writes may reach one
/// more window further, which commits whole `flush_granularity` units
/// implicitly; the host commits explicitly with
/// [`crate::ZoneOp::CommitZrwa`] when `explicit_flush`. Committed blocks
/// are written for good; uncommitted ones are lost at a power loss. Zone
/// Append is refused in such a zone; Finish and Reset free the ZRWA.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ZrwaInfo {
    /// ZRWASZ: blocks in the window.
    pub size: u64,
    /// ZRWAFG: the commit unit in blocks.
    pub flush_granularity: u64,
    /// NUMZRWA as a count: zones that may hold a ZRWA at once.
    pub resources: u64,
    /// ZRWACAP bit 0: Flush Explicit ZRWA Range is supported.
    pub explicit_flush: bool,
}

impl ZrwaInfo {
    /// The ZRWA fields of Identify Namespace (ZNS); `None` without
    /// ZRWASUP or with a zero size or granularity.
    pub fn from_identify(id: &ZnsNamespace) -> Option<ZrwaInfo> {
        if !id.zrwa_supported() || id.zrwasz == 0 || id.zrwafg == 0 {
            return None;
        }
        Some(ZrwaInfo {
            size: u64::from(id.zrwasz),
            flush_granularity: u64::from(id.zrwafg),
            resources: id.zrwa_resources(),
            explicit_flush: id.zrwa_explicit_flush(),
        })
    }
}

/// A conventional (random-write) namespace beside the zoned one.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ConventionalNamespace {
    /// Namespace identifier.
    pub nsid: u32,
    /// Logical block size in bytes.
    pub block_size: u32,
    /// Size in blocks.
    pub blocks: u64,
}

/// Identify data as read from the controller, for tools that print it.
///
/// Thread safety: plain data.
#[derive(Debug, Clone)]
pub struct IdentifyData {
    /// NVMe version (VS register).
    pub version: Version,
    /// Identify Controller (CNS 01h).
    pub controller: IdentifyController,
    /// ZNS Identify Controller (CNS 06h, CSI 02h).
    pub zns_controller: ZnsController,
    /// Identify Namespace (CNS 00h) of the zoned namespace.
    pub namespace: IdentifyNamespace,
    /// ZNS Identify Namespace (CNS 05h, CSI 02h) of the zoned namespace.
    pub zns_namespace: ZnsNamespace,
}

/// Everything upper layers need to know about a zoned device.
///
/// Thread safety: plain data, `Send + Sync`; fixed for the device's life.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceInfo {
    /// Backend name (`driver`, `ng`, `zbd`).
    pub backend: &'static str,
    /// How the backend reaches the device ("emulator (tiny)", "pcie 0000:00:04.0").
    pub transport: String,
    /// The URI the device was opened with.
    pub uri: String,
    /// Model number.
    pub model: String,
    /// Serial number.
    pub serial: String,
    /// Firmware revision.
    pub firmware: String,
    /// Namespace identifier of the zoned namespace (of the conventional
    /// one, when the device has no zoned namespace: see `zoned`).
    pub nsid: u32,
    /// True for a zoned namespace. False for a conventional (NVM command
    /// set) namespace, such as an emulated conventional twin's: it has no
    /// zones (`zone_count`, `zone_size` and `zone_capacity` are 0), takes
    /// reads, writes, Write Zeroes and Flush anywhere below
    /// `namespace_blocks`, and refuses zone commands (Invalid Command
    /// Opcode from the device; [`DeviceInfo::require_zoned`] before asking).
    pub zoned: bool,
    /// Size of the namespace in blocks (NSZE; `zone_count × zone_size` for
    /// a zoned one).
    pub namespace_blocks: u64,
    /// Logical block size in bytes.
    pub block_size: u32,
    /// Metadata bytes per block (kept separately; not transferred here).
    pub metadata_size: u16,
    /// Number of zones (0 where the description is of a conventional
    /// namespace, [`crate::ZonedDevice::conventional`]).
    pub zone_count: u64,
    /// Zone size in blocks.
    pub zone_size: u64,
    /// Zone capacity in blocks (of zone 0; see
    /// [`Capabilities::variable_zone_capacity`]).
    pub zone_capacity: u64,
    /// Max Open Resources; `None` = no limit.
    pub max_open: Option<u32>,
    /// Max Active Resources; `None` = no limit.
    pub max_active: Option<u32>,
    /// Largest Zone Append in bytes (ZASL).
    pub zasl_bytes: usize,
    /// Largest transfer of one command in bytes (MDTS, as capped by the
    /// backend).
    pub mdts_bytes: usize,
    /// Optional features.
    pub capabilities: Capabilities,
    /// A conventional namespace of the same device, if it has one.
    pub conventional: Option<ConventionalNamespace>,
    /// Flexible Data Placement of the namespace's endurance group, as read
    /// when the device opened; `None` when the controller has none, the
    /// namespace is in no endurance group, or the backend cannot ask (only
    /// the driver backend, `emu:` and `pcie:`, and `tcp:` ask). Placed
    /// writes and the reclaim unit handle commands need it enabled.
    pub fdp: Option<crate::fdp::FdpInfo>,
    /// Identify data, when the backend can read it.
    #[serde(skip)]
    pub identify: Option<IdentifyData>,
}

/// What Identify says of an NVM command set namespace, for
/// [`DeviceInfo::nvm_namespace`].
pub(crate) struct NvmIdentity<'a> {
    /// Identify Controller.
    pub ic: &'a IdentifyController,
    /// Identify Namespace.
    pub id: &'a IdentifyNamespace,
    /// The ZNS Identify Controller data, if the controller has any.
    pub zns_controller: ZnsController,
    /// The namespace's ID.
    pub nsid: u32,
    /// Bytes of data per block.
    pub block_size: u32,
}

impl DeviceInfo {
    /// The description of an NVM command set namespace, as a backend that
    /// reaches it with NVMe commands (`tcp:`, `ng:`) opens it: no zones,
    /// no Zone Append, Copy and Write Zeroes as the controller offers
    /// them, `mdts` bytes per command, metadata not carried, no FDP (the
    /// caller adds what it discovers).
    pub(crate) fn nvm_namespace(
        backend: &'static str,
        transport: String,
        uri: &str,
        n: NvmIdentity<'_>,
        mdts: usize,
    ) -> DeviceInfo {
        let (ic, id) = (n.ic, n.id);
        DeviceInfo {
            backend,
            transport,
            uri: uri.to_string(),
            model: ic.model_number.trim().to_string(),
            serial: ic.serial_number.trim().to_string(),
            firmware: ic.firmware_revision.trim().to_string(),
            nsid: n.nsid,
            block_size: n.block_size,
            metadata_size: id.current_lba_format().metadata_size,
            zoned: false,
            namespace_blocks: id.nsze,
            zone_count: 0,
            zone_size: 0,
            zone_capacity: 0,
            max_open: None,
            max_active: None,
            zasl_bytes: 0,
            mdts_bytes: mdts,
            capabilities: Capabilities {
                append: false,
                copy: CopyLimits::from_identify(ic, id),
                write_zeroes: ic.oncs.has(Oncs::WRITE_ZEROES),
                extended_report: false,
                extension_bytes: 0,
                read_across_zone_boundaries: true,
                variable_zone_capacity: false,
                volatile_write_cache: ic.vwc & IdentifyController::VWC_PRESENT != 0,
                select_all: false,
                offline: false,
                // Not carried by these backends yet: refused with Unsupported.
                metadata: false,
                stores_data: true,
                zrwa: None,
            },
            conventional: None,
            fdp: None,
            identify: Some(IdentifyData {
                version: ic.ver,
                controller: ic.clone(),
                zns_controller: n.zns_controller,
                namespace: id.clone(),
                zns_namespace: ZnsNamespace::default(),
            }),
        }
    }

    /// Size of the namespace in blocks (for a zoned one `zone_count ×
    /// zone_size`).
    pub fn blocks(&self) -> u64 {
        self.namespace_blocks
    }

    /// Start LBA of zone `index`, if it exists.
    pub fn zone_start(&self, index: u64) -> Option<u64> {
        (index < self.zone_count).then(|| index * self.zone_size)
    }

    /// Number of the zone holding `lba`, if it is inside the namespace
    /// (never for a conventional namespace).
    pub fn zone_index(&self, lba: u64) -> Option<u64> {
        (self.zoned && lba < self.blocks()).then(|| lba / self.zone_size)
    }

    /// Fails with [`crate::DeviceError::Unsupported`], naming the device,
    /// unless its namespace is zoned: what zone reports and every
    /// zone-oriented tool check first.
    pub fn require_zoned(&self) -> crate::Result<()> {
        if self.zoned {
            return Ok(());
        }
        Err(crate::DeviceError::Unsupported(format!(
            "{}: namespace {} is a conventional namespace (NVM command set): it has no zones",
            self.uri, self.nsid
        )))
    }

    /// Bytes in `blocks` blocks.
    pub fn bytes(&self, blocks: u64) -> u64 {
        blocks * self.block_size as u64
    }

    /// Most blocks one read or write command moves.
    pub fn max_transfer_blocks(&self) -> u64 {
        (self.mdts_bytes / self.block_size as usize).max(1) as u64
    }

    /// Most blocks one Zone Append moves.
    pub fn max_append_blocks(&self) -> u64 {
        (self.zasl_bytes / self.block_size as usize).max(1) as u64
    }
}
