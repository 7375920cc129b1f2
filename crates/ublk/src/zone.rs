//! Zones as the kernel's zone report wants them: `struct blk_zone` of
//! `<linux/blkzoned.h>`, 64 bytes each, in 512-byte sectors.
//!
//! | bytes | field |
//! |---|---|
//! | 0..8 | `start`: the zone's first sector |
//! | 8..16 | `len`: sectors from this zone to the next |
//! | 16..24 | `wp`: the write pointer (a Full zone's is its end) |
//! | 24 | `type`: 2, sequential write required |
//! | 25 | `cond`: the zone state (the NVMe values: 1 Empty ... 15 Offline) |
//! | 26 | `non_seq` (0) |
//! | 27 | `reset`: the device recommends a reset |
//! | 28..32 | reserved |
//! | 32..40 | `capacity`: writable sectors |
//! | 40..64 | reserved |
//!
//! The fields are little-endian: ublk runs on the host, and the layout is
//! the host's (unit tests pin it to the kernel header as bindgen reads
//! it).

use libublk::sys;
use zns_device::{Zone, ZoneState};

use crate::request::Geometry;

/// Bytes in one `struct blk_zone`.
pub const BLK_ZONE_BYTES: usize = 64;

/// The kernel's zone condition for a ZNS zone state: the values are the
/// same (`BLK_ZONE_COND_EMPTY` = 1 = ZSE, ..., `BLK_ZONE_COND_OFFLINE` =
/// 15 = ZSO).
pub fn condition(state: ZoneState) -> u8 {
    let cond = match state {
        ZoneState::Empty => sys::BLK_ZONE_COND_EMPTY,
        ZoneState::ImplicitlyOpen => sys::BLK_ZONE_COND_IMP_OPEN,
        ZoneState::ExplicitlyOpen => sys::BLK_ZONE_COND_EXP_OPEN,
        ZoneState::Closed => sys::BLK_ZONE_COND_CLOSED,
        ZoneState::ReadOnly => sys::BLK_ZONE_COND_READONLY,
        ZoneState::Full => sys::BLK_ZONE_COND_FULL,
        ZoneState::Offline => sys::BLK_ZONE_COND_OFFLINE,
    };
    cond as u8
}

/// `zone` as a `struct blk_zone`. A zone without a write pointer (Full,
/// Read Only, Offline) reports its end as the kernel's NVMe driver does
/// for Full zones.
pub fn blk_zone(zone: &Zone, geometry: &Geometry) -> [u8; BLK_ZONE_BYTES] {
    let start = geometry.sector(zone.start);
    let len = geometry.sectors(zone.size);
    let wp = match (zone.state, zone.write_pointer) {
        (ZoneState::Full, _) | (_, None) => start + len,
        (_, Some(wp)) => geometry.sector(wp),
    };
    let mut out = [0u8; BLK_ZONE_BYTES];
    out[0..8].copy_from_slice(&start.to_le_bytes());
    out[8..16].copy_from_slice(&len.to_le_bytes());
    out[16..24].copy_from_slice(&wp.to_le_bytes());
    out[24] = sys::BLK_ZONE_TYPE_SEQWRITE_REQ as u8;
    out[25] = condition(zone.state);
    out[27] = u8::from(zone.reset_recommended());
    out[32..40].copy_from_slice(&geometry.sectors(zone.capacity).to_le_bytes());
    out
}

/// `zones` as the array of `struct blk_zone` a zone report returns.
pub fn report(zones: &[Zone], geometry: &Geometry) -> Vec<u8> {
    zones.iter().flat_map(|z| blk_zone(z, geometry)).collect()
}

#[cfg(test)]
mod tests {
    use std::mem::{offset_of, size_of};

    use zns_device::{ZoneAttributes, ZoneType};

    use super::*;

    fn zone(state: ZoneState, wp: Option<u64>, attributes: u8) -> Zone {
        Zone {
            index: 2,
            start: 2048,
            size: 1024,
            capacity: 960,
            write_pointer: wp,
            state,
            zone_type: ZoneType::SequentialWriteRequired,
            attributes: ZoneAttributes(attributes),
        }
    }

    fn u64_at(b: &[u8], at: usize) -> u64 {
        u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
    }

    #[test]
    fn the_layout_is_the_kernel_headers() {
        assert_eq!(size_of::<sys::blk_zone>(), BLK_ZONE_BYTES);
        assert_eq!(offset_of!(sys::blk_zone, start), 0);
        assert_eq!(offset_of!(sys::blk_zone, len), 8);
        assert_eq!(offset_of!(sys::blk_zone, wp), 16);
        assert_eq!(offset_of!(sys::blk_zone, type_), 24);
        assert_eq!(offset_of!(sys::blk_zone, cond), 25);
        assert_eq!(offset_of!(sys::blk_zone, non_seq), 26);
        assert_eq!(offset_of!(sys::blk_zone, reset), 27);
        assert_eq!(offset_of!(sys::blk_zone, capacity), 32);
        // The ZNS zone states are the kernel's conditions.
        for s in ZoneState::ALL {
            assert_eq!(condition(s), s as u8, "{s:?}");
        }
    }

    #[test]
    fn zones_convert_to_blk_zone_in_sectors() {
        let g = Geometry::new(4096).unwrap();
        let b = blk_zone(&zone(ZoneState::ImplicitlyOpen, Some(2048 + 10), 0), &g);
        assert_eq!(u64_at(&b, 0), 2048 * 8);
        assert_eq!(u64_at(&b, 8), 1024 * 8);
        assert_eq!(u64_at(&b, 16), (2048 + 10) * 8);
        assert_eq!((b[24], b[25], b[26], b[27]), (2, 2, 0, 0));
        assert_eq!(u64_at(&b, 32), 960 * 8);
        assert!(b[28..32].iter().chain(&b[40..]).all(|&x| x == 0));

        // Full: the write pointer is the zone's end, as the NVMe driver
        // reports it.
        let b = blk_zone(&zone(ZoneState::Full, None, 0), &g);
        assert_eq!((u64_at(&b, 16), b[25]), ((2048 + 1024) * 8, 14));
        let b =
            blk_zone(&zone(ZoneState::Empty, Some(2048), ZoneAttributes::RESET_RECOMMENDED), &g);
        assert_eq!((u64_at(&b, 16), b[25], b[27]), (2048 * 8, 1, 1));
        let b = blk_zone(&zone(ZoneState::Offline, None, 0), &g);
        assert_eq!(b[25], 15);

        let g512 = Geometry::new(512).unwrap();
        let b = blk_zone(&zone(ZoneState::Closed, Some(2050), 0), &g512);
        assert_eq!((u64_at(&b, 0), u64_at(&b, 16), b[25]), (2048, 2050, 4));

        let zones = [zone(ZoneState::Empty, Some(2048), 0), zone(ZoneState::Full, None, 0)];
        let r = report(&zones, &g);
        assert_eq!(r.len(), 2 * BLK_ZONE_BYTES);
        assert_eq!(r[25], 1);
        assert_eq!(r[BLK_ZONE_BYTES + 25], 14);
    }
}
