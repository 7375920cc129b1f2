//! What the kernel is told about a served device: its size, blocks,
//! request limits, cache, zones, discard and Write Zeroes, checked
//! against what Linux's block layer takes, and as ublk parameters.

use libublk::sys;
use zns_block::BlockDevice;
use zns_device::DeviceInfo;

use crate::error::{Error, Result};
use crate::request::{Geometry, MAX_WRITE_ZEROES_BLOCKS, SECTOR_BYTES};

/// The page size ublk's buffers are counted in.
const PAGE: u32 = 4096;

/// Most sectors one discard (of the FTL) takes: 1 GiB.
const MAX_DISCARD_SECTORS: u32 = 1 << 21;

/// Zones as the kernel sees them.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZonedLayout {
    /// Sectors from one zone to the next (a power of two).
    pub zone_sectors: u32,
    /// Zones.
    pub zones: u64,
    /// Most open zones (0: no limit).
    pub max_open: u32,
    /// Most active zones (0: no limit).
    pub max_active: u32,
    /// Largest Zone Append in sectors.
    pub append_sectors: u32,
}

/// A served device as the kernel sees it.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// The device's blocks.
    pub geometry: Geometry,
    /// Size in sectors.
    pub sectors: u64,
    /// The largest request in bytes (whole blocks): the kernel's
    /// `max_sectors`, at most one device command.
    pub max_request_bytes: u32,
    /// The device has a volatile write cache: the kernel sends flushes
    /// and FUA writes.
    pub volatile_cache: bool,
    /// Zones, for a zoned device.
    pub zoned: Option<ZonedLayout>,
    /// Most sectors in one discard (0: no discard). A
    /// [`zns_device::ZonedDevice`]'s conventional namespace carries a
    /// discard out as one Write Zeroes (the device may deallocate the
    /// blocks; the emulator's conventional namespaces unmap them), so
    /// it has discard where it has Write Zeroes.
    pub discard_sectors: u32,
    /// Most sectors in one Write Zeroes (0: none).
    pub write_zeroes_sectors: u32,
}

impl Layout {
    /// The layout of a [`zns_device::ZonedDevice`] described by `info`,
    /// with requests of at most `max_request_bytes`: zoned when it is
    /// (Linux needs a power-of-two zone size and Zone Append), a plain
    /// disk when it is a conventional namespace (with discard and Write
    /// Zeroes where the device has Write Zeroes).
    pub fn zoned_device(info: &DeviceInfo, max_request_bytes: u32) -> Result<Layout> {
        let unsupported = |reason: String| Error::Unsupported { uri: info.uri.clone(), reason };
        let geometry = block_geometry(info.block_size)
            .ok_or_else(|| unsupported(block_size_reason(info.block_size)))?;
        let bs = u64::from(info.block_size);
        let mdts = u32::try_from(info.mdts_bytes).unwrap_or(u32::MAX);
        let max_request_bytes = request_bytes(max_request_bytes.min(mdts), info.block_size)?;
        let write_zeroes_sectors = if info.capabilities.write_zeroes {
            geometry.sectors(MAX_WRITE_ZEROES_BLOCKS) as u32
        } else {
            0
        };
        // A conventional namespace discards through Write Zeroes (see
        // `Layout::discard_sectors`); a zoned one frees blocks by zone
        // resets, and Linux sends no discard to sequential zones.
        let discard_sectors = if info.zoned { 0 } else { write_zeroes_sectors };
        let zoned = if info.zoned {
            let zone_sectors = info.zone_size * bs / SECTOR_BYTES;
            if !zone_sectors.is_power_of_two() || zone_sectors > u64::from(u32::MAX) {
                return Err(unsupported(format!(
                    "its zones are {} blocks of {bs} bytes apart; Linux needs a power-of-two \
                     zone size",
                    info.zone_size
                )));
            }
            if !info.capabilities.append || info.zasl_bytes < info.block_size as usize {
                return Err(unsupported(
                    "it has no Zone Append, which Linux's zoned block devices need".into(),
                ));
            }
            let zasl = u32::try_from(info.zasl_bytes).unwrap_or(u32::MAX);
            let append_bytes = zasl.min(max_request_bytes) / info.block_size * info.block_size;
            let limit = |l: Option<u32>| {
                l.map_or(0, |n| n.min(u32::try_from(info.zone_count).unwrap_or(u32::MAX)))
            };
            Some(ZonedLayout {
                zone_sectors: zone_sectors as u32,
                zones: info.zone_count,
                max_open: limit(info.max_open),
                max_active: limit(info.max_active),
                append_sectors: append_bytes / SECTOR_BYTES as u32,
            })
        } else {
            None
        };
        Ok(Layout {
            geometry,
            sectors: info.namespace_blocks * bs / SECTOR_BYTES,
            max_request_bytes,
            volatile_cache: info.capabilities.volatile_write_cache,
            zoned,
            discard_sectors,
            write_zeroes_sectors,
        })
    }

    /// The layout of a [`BlockDevice`] (the FTL) named `name`, with
    /// requests of at most `max_request_bytes`: a disk with a volatile
    /// cache (writes are durable after a flush), discard, and Write
    /// Zeroes carried out as discards.
    pub fn block_device(
        name: &str,
        device: &dyn BlockDevice,
        max_request_bytes: u32,
    ) -> Result<Layout> {
        let bs = device.block_size();
        let geometry = block_geometry(bs).ok_or_else(|| Error::Unsupported {
            uri: name.to_string(),
            reason: block_size_reason(bs),
        })?;
        let discard = MAX_DISCARD_SECTORS / geometry.sectors_per_block() as u32
            * geometry.sectors_per_block() as u32;
        Ok(Layout {
            geometry,
            sectors: device.capacity_blocks() * u64::from(bs) / SECTOR_BYTES,
            max_request_bytes: request_bytes(max_request_bytes, bs)?,
            volatile_cache: true,
            zoned: None,
            discard_sectors: discard,
            write_zeroes_sectors: discard,
        })
    }

    /// The buffer size ublk is told (`max_io_buf_bytes`): the largest
    /// request, in whole pages.
    pub fn io_buf_bytes(&self) -> u32 {
        self.max_request_bytes.div_ceil(PAGE) * PAGE
    }

    /// The ublk parameters (`UBLK_CMD_SET_PARAMS`) of this layout.
    pub fn params(&self) -> sys::ublk_params {
        let shift = self.geometry.shift() as u8;
        let mut attrs = 0;
        if self.volatile_cache {
            attrs |= sys::UBLK_ATTR_VOLATILE_CACHE | sys::UBLK_ATTR_FUA;
        }
        let mut p = sys::ublk_params {
            types: sys::UBLK_PARAM_TYPE_BASIC,
            basic: sys::ublk_param_basic {
                attrs,
                logical_bs_shift: shift,
                physical_bs_shift: shift,
                io_opt_shift: shift,
                io_min_shift: shift,
                max_sectors: self.max_request_bytes / SECTOR_BYTES as u32,
                dev_sectors: self.sectors,
                ..Default::default()
            },
            ..Default::default()
        };
        if let Some(z) = &self.zoned {
            p.types |= sys::UBLK_PARAM_TYPE_ZONED;
            p.basic.chunk_sectors = z.zone_sectors;
            p.zoned = sys::ublk_param_zoned {
                max_open_zones: z.max_open,
                max_active_zones: z.max_active,
                max_zone_append_sectors: z.append_sectors,
                ..Default::default()
            };
        }
        if self.discard_sectors > 0 || self.write_zeroes_sectors > 0 {
            p.types |= sys::UBLK_PARAM_TYPE_DISCARD;
            p.discard = sys::ublk_param_discard {
                discard_granularity: self.geometry.block_size(),
                max_discard_sectors: self.discard_sectors,
                max_write_zeroes_sectors: self.write_zeroes_sectors,
                max_discard_segments: u16::from(self.discard_sectors > 0),
                ..Default::default()
            };
        }
        p
    }
}

/// Block sizes Linux takes: 512 bytes to a page.
fn block_geometry(block_size: u32) -> Option<Geometry> {
    Geometry::new(block_size).filter(|_| block_size <= PAGE)
}

fn block_size_reason(block_size: u32) -> String {
    format!("its blocks are {block_size} bytes; Linux takes powers of two from 512 to 4096")
}

/// `max` rounded down to whole blocks: at least one block.
fn request_bytes(max: u32, block_size: u32) -> Result<u32> {
    let bytes = max / block_size * block_size;
    if bytes == 0 {
        return Err(Error::Config(format!(
            "requests of at most {max} bytes hold no {block_size}-byte block"
        )));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use zns_block::MemoryBlockDevice;

    use super::*;

    #[test]
    fn a_zoned_device_is_a_host_managed_disk_with_its_limits() {
        // small: 256 zones of 1024 4-KiB blocks, MDTS 256 KiB, ZASL 128
        // KiB, max open = max active = 14.
        let dev = zns_device::open("emu:small").unwrap();
        let l = Layout::zoned_device(dev.info(), 512 << 10).unwrap();
        assert_eq!(l.max_request_bytes, 256 << 10, "capped at one command");
        assert_eq!(l.sectors, 256 * 1024 * 8);
        let z = l.zoned.unwrap();
        assert_eq!((z.zone_sectors, z.zones, z.max_open, z.max_active), (8192, 256, 14, 14));
        assert_eq!(z.append_sectors, 256);
        let p = l.params();
        assert_eq!(
            p.types,
            sys::UBLK_PARAM_TYPE_BASIC | sys::UBLK_PARAM_TYPE_ZONED | sys::UBLK_PARAM_TYPE_DISCARD
        );
        assert_eq!((p.basic.logical_bs_shift, p.basic.physical_bs_shift), (12, 12));
        assert_eq!((p.basic.max_sectors, p.basic.chunk_sectors), (512, 8192));
        assert_eq!(p.basic.dev_sectors, 256 * 8192);
        assert_eq!(p.zoned.max_zone_append_sectors, 256);
        // Write Zeroes, no discard.
        assert_eq!((p.discard.max_discard_sectors, p.discard.max_discard_segments), (0, 0));
        assert_eq!(p.discard.max_write_zeroes_sectors, 65536 * 8);
        assert_eq!(p.discard.discard_granularity, 4096);
        assert_eq!(l.io_buf_bytes(), 256 << 10);
        let l = Layout::zoned_device(dev.info(), 64 << 10).unwrap();
        assert_eq!((l.max_request_bytes, l.zoned.unwrap().append_sectors), (64 << 10, 128));
        assert!(matches!(Layout::zoned_device(dev.info(), 100), Err(Error::Config(_))));
    }

    #[test]
    fn what_linux_cannot_take_is_refused_with_a_reason() {
        let dev = zns_device::open("emu:tiny").unwrap();
        let mut info = dev.info().clone();
        info.zone_size = 48;
        let e = Layout::zoned_device(&info, 512 << 10).unwrap_err();
        assert!(e.to_string().contains("power-of-two zone size"), "{e}");
        let mut info = dev.info().clone();
        info.capabilities.append = false;
        let e = Layout::zoned_device(&info, 512 << 10).unwrap_err();
        assert!(e.to_string().contains("Zone Append"), "{e}");
        let mut info = dev.info().clone();
        info.block_size = 8192;
        let e = Layout::zoned_device(&info, 512 << 10).unwrap_err();
        assert!(e.to_string().contains("8192 bytes"), "{e}");
    }

    #[test]
    fn a_conventional_namespace_is_a_plain_disk_with_discard() {
        let dev = zns_device::open("emu:small-conv").unwrap();
        let l = Layout::zoned_device(dev.info(), 512 << 10).unwrap();
        assert_eq!(l.zoned, None);
        assert_eq!(l.sectors, dev.info().namespace_blocks * 8);
        let p = l.params();
        assert_eq!(p.types, sys::UBLK_PARAM_TYPE_BASIC | sys::UBLK_PARAM_TYPE_DISCARD);
        assert_eq!(p.basic.chunk_sectors, 0);
        // One discard or Write Zeroes is one Write Zeroes command.
        assert_eq!((p.discard.max_discard_sectors, p.discard.max_discard_segments), (65536 * 8, 1));
        assert_eq!(p.discard.max_write_zeroes_sectors, 65536 * 8);
        assert_eq!(p.discard.discard_granularity, 4096);
        // Without Write Zeroes, neither.
        let mut info = dev.info().clone();
        info.capabilities.write_zeroes = false;
        let p = Layout::zoned_device(&info, 512 << 10).unwrap().params();
        assert_eq!(p.types, sys::UBLK_PARAM_TYPE_BASIC);
    }

    #[test]
    fn a_block_device_has_discard_and_a_volatile_cache() {
        let dev = MemoryBlockDevice::new(4096, 1000);
        let l = Layout::block_device("mem", &dev, 512 << 10).unwrap();
        assert_eq!((l.sectors, l.max_request_bytes, l.zoned), (8000, 512 << 10, None));
        let p = l.params();
        assert_eq!(p.types, sys::UBLK_PARAM_TYPE_BASIC | sys::UBLK_PARAM_TYPE_DISCARD);
        assert_eq!(
            p.basic.attrs,
            sys::UBLK_ATTR_VOLATILE_CACHE | sys::UBLK_ATTR_FUA,
            "flushes and FUA reach the FTL"
        );
        assert_eq!((p.discard.max_discard_segments, p.discard.discard_granularity), (1, 4096));
        assert_eq!(p.discard.max_discard_sectors, 1 << 21);
        assert_eq!(p.discard.max_write_zeroes_sectors, 1 << 21);
        let odd = MemoryBlockDevice::new(1000, 10);
        assert!(Layout::block_device("odd", &odd, 512 << 10).is_err());
    }
}
