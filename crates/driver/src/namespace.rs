//! What bring-up learns about the controller and its namespaces.

use zns_spec::identify::{IdentifyController, IdentifyNamespace, ZnsNamespace};
use zns_spec::regs::{Cap, Version};
use zns_spec::CommandSetId;

/// The controller as identified at bring-up.
///
/// Thread safety: plain data, `Send + Sync`.
#[derive(Debug, Clone)]
pub struct ControllerInfo {
    /// Identify Controller data.
    pub identify: IdentifyController,
    /// CAP register.
    pub cap: Cap,
    /// VS register.
    pub version: Version,
    /// Memory page size in use (CC.MPS), bytes.
    pub page_size: usize,
    /// Largest transfer of one command in bytes: MDTS, capped by the
    /// driver's [`crate::ControllerOptions::max_transfer`].
    pub max_transfer: usize,
    /// MDTS in bytes; `None` = no limit reported.
    pub mdts_bytes: Option<u64>,
    /// Zone Append size limit in bytes (ZASL, or MDTS when ZASL is 0);
    /// `None` when the controller reported no ZNS data.
    pub zone_append_limit: Option<usize>,
    /// CC.CSS = 110b: I/O command sets were enabled.
    pub io_command_sets: bool,
    /// Selected I/O Command Set Profile (index into the vector, and the
    /// combination's CSI bits), when command sets were enabled.
    pub command_set_profile: Option<(u16, u64)>,
    /// I/O queue pairs the controller granted (Number of Queues).
    pub io_queue_pairs: u16,
}

/// Zone geometry and limits of a zoned namespace.
///
/// Thread safety: plain data, `Send + Sync`.
#[derive(Debug, Clone, Default)]
pub struct ZonedInfo {
    /// ZNS Identify Namespace data (CNS 05h).
    pub identify: ZnsNamespace,
    /// Zone size in logical blocks (ZSZE of the current format).
    pub zone_size: u64,
    /// Number of zones (NSZE / ZSZE).
    pub zone_count: u64,
    /// Zone descriptor extension size in bytes (ZDES × 64).
    pub extension_bytes: usize,
    /// Max Open Resources; `None` = no limit.
    pub max_open: Option<u32>,
    /// Max Active Resources; `None` = no limit.
    pub max_active: Option<u32>,
    /// Largest Zone Append transfer in bytes.
    pub append_limit: usize,
}

/// An active namespace.
///
/// Thread safety: plain data, `Send + Sync`.
#[derive(Debug, Clone)]
pub struct Namespace {
    /// Namespace identifier.
    pub nsid: u32,
    /// Its I/O command set.
    pub command_set: CommandSetId,
    /// Logical block size in bytes.
    pub block_size: usize,
    /// Metadata bytes per block.
    pub metadata_size: u16,
    /// Size in logical blocks (NSZE).
    pub blocks: u64,
    /// Capacity in logical blocks (NCAP).
    pub capacity: u64,
    /// Largest data transfer of one command in bytes.
    pub max_transfer: usize,
    /// Identify Namespace data (CNS 00h).
    pub identify: IdentifyNamespace,
    /// Zone geometry, for zoned namespaces.
    pub zoned: Option<ZonedInfo>,
}

impl Namespace {
    /// True for a Zoned Namespace.
    pub fn is_zoned(&self) -> bool {
        self.zoned.is_some()
    }

    /// Size in bytes.
    pub fn size_bytes(&self) -> u64 {
        self.blocks * self.block_size as u64
    }

    /// Blocks in a transfer of `bytes`, which must be whole blocks.
    pub fn blocks_in(&self, bytes: usize) -> Option<u32> {
        if bytes == 0 || !bytes.is_multiple_of(self.block_size) {
            return None;
        }
        u32::try_from(bytes / self.block_size).ok()
    }

    /// Start LBA of the zone holding `lba` (zoned namespaces).
    pub fn zone_start(&self, lba: u64) -> Option<u64> {
        let z = self.zoned.as_ref()?;
        Some(lba / z.zone_size * z.zone_size)
    }

    /// Start LBA of zone number `index` (zoned namespaces).
    pub fn zone_lba(&self, index: u64) -> Option<u64> {
        let z = self.zoned.as_ref()?;
        (index < z.zone_count).then(|| index * z.zone_size)
    }

    /// Largest Zone Append transfer in bytes (zoned namespaces).
    pub fn append_limit(&self) -> Option<usize> {
        self.zoned.as_ref().map(|z| z.append_limit)
    }
}
