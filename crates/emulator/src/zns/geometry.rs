//! Zone geometry: how a zoned namespace is cut into zones and what limits
//! apply to them.

use serde::{Deserialize, Serialize};

/// Largest zone descriptor extension the Identify field ZDES can express
/// (255 units of 64 bytes).
pub const MAX_DESCRIPTOR_EXTENSION_BYTES: usize = 255 * 64;

/// The shape of a zoned namespace.
///
/// Zones are laid out back to back: zone `i` starts at LBA `i * zone_size`.
/// Only the first `zone_capacity` blocks of a zone are writable; blocks
/// between the capacity and the zone size exist (they are addressable and
/// read as zeros) but can never be written.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ZoneGeometry {
    /// Zone size in logical blocks (ZSZE). Need not be a power of two.
    pub zone_size: u64,
    /// Writable blocks per zone (ZCAP), `1..=zone_size`.
    pub zone_capacity: u64,
    /// Number of zones in the namespace.
    pub zones: u32,
    /// Max Open Resources: how many zones may be open (implicitly or
    /// explicitly) at once; `None` for no limit.
    pub max_open: Option<u32>,
    /// Max Active Resources: how many zones may be open or closed at once;
    /// `None` for no limit.
    pub max_active: Option<u32>,
    /// Zone descriptor extension size in bytes (ZDES × 64); 0 when zone
    /// descriptor extensions are not supported.
    pub descriptor_extension_bytes: usize,
    /// Read Across Zone Boundaries (OZCS.RAZB): a read may span zones.
    pub read_across_boundaries: bool,
    /// Zone Random Write Areas (OZCS.ZRWASUP); `None` when not supported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zrwa: Option<ZrwaGeometry>,
}

/// The Zone Random Write Areas of a zoned namespace (ZNS Identify
/// Namespace ZRWASZ, ZRWAFG, NUMZRWA and ZRWACAP).
///
/// A zone opened with ZRWA Allocate accepts writes anywhere in
/// `[WP, WP + size)`, overwrites included; the write pointer moves only
/// when blocks are committed, in whole `flush_granularity` units.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ZrwaGeometry {
    /// ZRWASZ: blocks in one zone random write area, a multiple of the
    /// flush granularity, at most 65535.
    pub size: u64,
    /// ZRWAFG: the commit unit in blocks, at least 1.
    pub flush_granularity: u64,
    /// NUMZRWA as a count: how many zones may hold a ZRWA at once, at
    /// least 1.
    pub resources: u32,
    /// ZRWACAP bit 0: the host may commit with Flush Explicit ZRWA Range.
    #[serde(default = "default_true")]
    pub explicit_flush: bool,
}

fn default_true() -> bool {
    true
}

impl ZrwaGeometry {
    /// Checks the shape: a non-zero granularity dividing a size the
    /// Identify fields can express, and at least one resource.
    pub fn validate(&self) -> Result<(), GeometryError> {
        let bad = self.flush_granularity == 0
            || self.size == 0
            || self.size > u64::from(u16::MAX)
            || !self.size.is_multiple_of(self.flush_granularity)
            || self.resources == 0;
        if bad {
            return Err(GeometryError::Zrwa {
                size: self.size,
                flush_granularity: self.flush_granularity,
                resources: self.resources,
            });
        }
        Ok(())
    }
}

/// A geometry that cannot describe a zoned namespace.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GeometryError {
    /// The zone size is zero.
    #[error("zone size must be at least one block")]
    ZeroZoneSize,
    /// The zone capacity is zero or larger than the zone size.
    #[error("zone capacity {capacity} must be in 1..={size}")]
    Capacity {
        /// The zone capacity given.
        capacity: u64,
        /// The zone size given.
        size: u64,
    },
    /// The namespace has no zones.
    #[error("a zoned namespace needs at least one zone")]
    NoZones,
    /// `zones × zone_size` does not fit in 64 bits.
    #[error("{zones} zones of {size} blocks overflow the LBA space")]
    TooLarge {
        /// Number of zones.
        zones: u32,
        /// Zone size.
        size: u64,
    },
    /// A resource limit of zero (use `None` for "no limit").
    #[error("max open / max active must be at least 1 (None means no limit)")]
    ZeroLimit,
    /// More open zones allowed than active zones.
    #[error("max open ({open}) exceeds max active ({active})")]
    OpenExceedsActive {
        /// Max Open Resources.
        open: u32,
        /// Max Active Resources.
        active: u32,
    },
    /// The descriptor extension size is not a multiple of 64 or too large.
    #[error("descriptor extension size {0} must be a multiple of 64, at most 16320")]
    ExtensionSize(usize),
    /// A zone random write area shape Identify cannot describe.
    #[error(
        "ZRWA of {size} blocks, flush granularity {flush_granularity}, {resources} resources: \
         the size must be a multiple of the granularity in 1..=65535, and resources at least 1"
    )]
    Zrwa {
        /// ZRWASZ given.
        size: u64,
        /// ZRWAFG given.
        flush_granularity: u64,
        /// Resources given.
        resources: u32,
    },
}

impl ZoneGeometry {
    /// Checks that the geometry describes a namespace.
    ///
    /// Resource limits larger than the number of zones are accepted: they
    /// simply never bind.
    pub fn validate(&self) -> Result<(), GeometryError> {
        if self.zone_size == 0 {
            return Err(GeometryError::ZeroZoneSize);
        }
        if self.zone_capacity == 0 || self.zone_capacity > self.zone_size {
            return Err(GeometryError::Capacity {
                capacity: self.zone_capacity,
                size: self.zone_size,
            });
        }
        if self.zones == 0 {
            return Err(GeometryError::NoZones);
        }
        if self.zone_size.checked_mul(u64::from(self.zones)).is_none() {
            return Err(GeometryError::TooLarge { zones: self.zones, size: self.zone_size });
        }
        if self.max_open == Some(0) || self.max_active == Some(0) {
            return Err(GeometryError::ZeroLimit);
        }
        if let (Some(open), Some(active)) = (self.max_open, self.max_active) {
            if open > active {
                return Err(GeometryError::OpenExceedsActive { open, active });
            }
        }
        if self.descriptor_extension_bytes & 63 != 0
            || self.descriptor_extension_bytes > MAX_DESCRIPTOR_EXTENSION_BYTES
        {
            return Err(GeometryError::ExtensionSize(self.descriptor_extension_bytes));
        }
        if let Some(z) = &self.zrwa {
            z.validate()?;
        }
        Ok(())
    }

    /// Namespace size in logical blocks (NSZE): `zones × zone_size`.
    pub fn namespace_blocks(&self) -> u64 {
        self.zone_size * u64::from(self.zones)
    }

    /// The ZDES value of Identify Namespace: extension size in 64-byte units.
    pub fn zdes(&self) -> u8 {
        (self.descriptor_extension_bytes / 64) as u8
    }

    /// First LBA of zone `zone` (ZSLBA).
    pub fn zone_start(&self, zone: u32) -> u64 {
        u64::from(zone) * self.zone_size
    }

    /// The zone holding `lba`, or `None` past the end of the namespace.
    pub fn zone_of(&self, lba: u64) -> Option<u32> {
        let z = lba / self.zone_size;
        (z < u64::from(self.zones)).then_some(z as u32)
    }

    /// MOR as Identify Namespace reports it: 0's based, FFFFFFFFh for no limit.
    pub fn mor_field(&self) -> u32 {
        self.max_open.map_or(u32::MAX, |m| m - 1)
    }

    /// MAR as Identify Namespace reports it: 0's based, FFFFFFFFh for no limit.
    pub fn mar_field(&self) -> u32 {
        self.max_active.map_or(u32::MAX, |m| m - 1)
    }
}
