//! Where things are on the device: zones, their capacities, the metadata
//! zones, and the compact physical block numbers the map stores.
//!
//! A physical block number (PBA) is `zone × stride + offset`, where the
//! stride is the largest zone capacity: the unwritable tail of each zone
//! (zone size − capacity) takes no map entries, so PBAs stay dense.

/// Geometry of one FTL instance.
///
/// Thread safety: plain data, fixed for the FTL's life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Layout {
    /// Bytes per block.
    pub block_size: u32,
    /// Device LBAs from one zone start to the next.
    pub zone_size: u64,
    /// Number of zones.
    pub zones: u32,
    /// Writable blocks of each zone.
    pub caps: Box<[u32]>,
    /// Largest zone capacity: PBAs per zone.
    pub stride: u32,
    /// Zones `0..meta_zones` hold the metadata log.
    pub meta_zones: u32,
    /// Most blocks in one read or write command.
    pub mdts_blocks: u32,
    /// Most blocks in one Zone Append.
    pub zasl_blocks: u32,
    /// Logical blocks the FTL exposes.
    pub logical: u64,
}

impl Layout {
    /// The PBA of block `offset` of `zone`.
    #[inline]
    pub fn pba(&self, zone: u32, offset: u32) -> u32 {
        debug_assert!(offset < self.stride);
        zone * self.stride + offset
    }

    /// The zone holding `pba`.
    #[inline]
    pub fn zone_of(&self, pba: u32) -> u32 {
        pba / self.stride
    }

    /// The block offset of `pba` inside its zone.
    #[inline]
    pub fn offset_of(&self, pba: u32) -> u32 {
        pba % self.stride
    }

    /// The device LBA of `pba`.
    #[inline]
    pub fn lba(&self, pba: u32) -> u64 {
        self.zone_start(self.zone_of(pba)) + self.offset_of(pba) as u64
    }

    /// The device LBA where `zone` starts.
    #[inline]
    pub fn zone_start(&self, zone: u32) -> u64 {
        zone as u64 * self.zone_size
    }

    /// The PBA of device LBA `lba` (which must be inside a zone's capacity).
    pub fn pba_of_lba(&self, lba: u64) -> Option<u32> {
        let zone = u32::try_from(lba / self.zone_size).ok()?;
        let offset = u32::try_from(lba % self.zone_size).ok()?;
        (zone < self.zones && offset < self.caps[zone as usize]).then(|| self.pba(zone, offset))
    }

    /// Number of PBAs (`zones × stride`).
    pub fn physical(&self) -> usize {
        self.zones as usize * self.stride as usize
    }

    /// True for the metadata zones.
    #[inline]
    pub fn is_meta(&self, zone: u32) -> bool {
        zone < self.meta_zones
    }

    /// Capacity of `zone`.
    #[inline]
    pub fn cap(&self, zone: u32) -> u32 {
        self.caps[zone as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pbas_skip_the_unwritable_tail_of_zones() {
        let l = Layout {
            block_size: 4096,
            zone_size: 1024,
            zones: 4,
            caps: vec![960; 4].into(),
            stride: 960,
            meta_zones: 1,
            mdts_blocks: 64,
            zasl_blocks: 32,
            logical: 1000,
        };
        assert_eq!(l.pba(2, 5), 1925);
        assert_eq!((l.zone_of(1925), l.offset_of(1925)), (2, 5));
        assert_eq!(l.lba(1925), 2048 + 5);
        assert_eq!(l.pba_of_lba(2048 + 5), Some(1925));
        assert_eq!(l.pba_of_lba(2048 + 960), None);
        assert_eq!(l.pba_of_lba(4 * 1024), None);
        assert_eq!(l.physical(), 3840);
        assert!(l.is_meta(0) && !l.is_meta(1));
    }
}
