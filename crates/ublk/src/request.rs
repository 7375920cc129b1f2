//! Requests as the kernel's ublk driver hands them to the server, decoded
//! from their I/O descriptors, and translated into device commands.
//!
//! Everything here is pure: no kernel, no device. The ublk driver counts
//! in 512-byte sectors whatever the logical block size; [`Geometry`]
//! converts to the device's blocks and refuses what does not fall on
//! them.

use libublk::sys;
use zns_device::{Target, ZoneAction, ZoneOp};

use crate::errno::{EINVAL, EOPNOTSUPP};

/// Bytes in the kernel's sector, the unit of every ublk I/O descriptor.
pub const SECTOR_BYTES: u64 = 512;

/// Most blocks one Write Zeroes command takes (NVMe: a 16-bit count of
/// blocks minus one).
pub const MAX_WRITE_ZEROES_BLOCKS: u64 = 65536;

/// One request of the ublk driver.
///
/// Sectors are 512-byte units, as in the I/O descriptor.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// Read `sectors` from `sector`.
    Read {
        /// First sector.
        sector: u64,
        /// Sectors to read.
        sectors: u32,
    },
    /// Write `sectors` at `sector` (in a zone: its write pointer).
    Write {
        /// First sector.
        sector: u64,
        /// Sectors to write.
        sectors: u32,
        /// Force Unit Access: durable when it completes.
        fua: bool,
    },
    /// Zone Append to the zone starting at `sector`; the completion
    /// carries the sector the data landed at.
    Append {
        /// The zone's start sector.
        sector: u64,
        /// Sectors to append.
        sectors: u32,
        /// Force Unit Access.
        fua: bool,
    },
    /// Flush the volatile write cache.
    Flush,
    /// Discard (trim) `sectors` from `sector`.
    Discard {
        /// First sector.
        sector: u64,
        /// Sectors to discard.
        sectors: u32,
    },
    /// Write zeroes to `sectors` from `sector`.
    WriteZeroes {
        /// First sector.
        sector: u64,
        /// Sectors to zero.
        sectors: u32,
    },
    /// Open, close, finish or reset the zone starting at `sector`.
    Zone {
        /// The action.
        action: ZoneAction,
        /// The zone's start sector.
        sector: u64,
    },
    /// Reset every zone.
    ResetAll,
    /// Report up to `zones` zones from the one holding `sector` on, as an
    /// array of `struct blk_zone` ([`crate::zone`]).
    ReportZones {
        /// A sector of the first zone to report.
        sector: u64,
        /// Most zones to report.
        zones: u32,
    },
}

impl Request {
    /// Decodes an I/O descriptor's fields: `op_flags` (operation in bits
    /// 7:0, `UBLK_IO_F_*` flags above), `start_sector` and `nr_sectors`
    /// (the zone count of a zone report). An operation this server does
    /// not know is `EOPNOTSUPP` (a positive errno).
    pub fn decode(op_flags: u32, start_sector: u64, nr_sectors: u32) -> Result<Request, i32> {
        let fua = op_flags & sys::UBLK_IO_F_FUA != 0;
        let (sector, sectors) = (start_sector, nr_sectors);
        let zone = |action| Ok(Request::Zone { action, sector });
        match op_flags & 0xff {
            sys::UBLK_IO_OP_READ => Ok(Request::Read { sector, sectors }),
            sys::UBLK_IO_OP_WRITE => Ok(Request::Write { sector, sectors, fua }),
            sys::UBLK_IO_OP_ZONE_APPEND => Ok(Request::Append { sector, sectors, fua }),
            sys::UBLK_IO_OP_FLUSH => Ok(Request::Flush),
            sys::UBLK_IO_OP_DISCARD => Ok(Request::Discard { sector, sectors }),
            sys::UBLK_IO_OP_WRITE_ZEROES => Ok(Request::WriteZeroes { sector, sectors }),
            sys::UBLK_IO_OP_ZONE_OPEN => zone(ZoneAction::Open),
            sys::UBLK_IO_OP_ZONE_CLOSE => zone(ZoneAction::Close),
            sys::UBLK_IO_OP_ZONE_FINISH => zone(ZoneAction::Finish),
            sys::UBLK_IO_OP_ZONE_RESET => zone(ZoneAction::Reset),
            sys::UBLK_IO_OP_ZONE_RESET_ALL => Ok(Request::ResetAll),
            sys::UBLK_IO_OP_REPORT_ZONES => Ok(Request::ReportZones { sector, zones: sectors }),
            _ => Err(EOPNOTSUPP),
        }
    }

    /// Bytes of data the request moves between the kernel and the server
    /// (0 for requests without data; a zone report's size depends on
    /// the zones found).
    pub fn data_bytes(&self) -> usize {
        match *self {
            Request::Read { sectors, .. }
            | Request::Write { sectors, .. }
            | Request::Append { sectors, .. } => sectors as usize * SECTOR_BYTES as usize,
            _ => 0,
        }
    }

    /// A short name for logs ("read", "zone append", ...).
    pub fn name(&self) -> &'static str {
        match self {
            Request::Read { .. } => "read",
            Request::Write { .. } => "write",
            Request::Append { .. } => "zone append",
            Request::Flush => "flush",
            Request::Discard { .. } => "discard",
            Request::WriteZeroes { .. } => "write zeroes",
            Request::Zone { action, .. } => action.kind().name(),
            Request::ResetAll => "zone reset all",
            Request::ReportZones { .. } => "zone report",
        }
    }
}

/// The device's logical blocks as the kernel's sectors see them.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    /// log2 of the block size (9 for 512 bytes, 12 for 4 KiB).
    shift: u32,
}

impl Geometry {
    /// The geometry of `block_size`-byte blocks: a power of two from 512
    /// bytes on; `None` otherwise.
    pub fn new(block_size: u32) -> Option<Geometry> {
        (block_size >= SECTOR_BYTES as u32 && block_size.is_power_of_two())
            .then(|| Geometry { shift: block_size.trailing_zeros() })
    }

    /// Bytes in one block.
    pub fn block_size(&self) -> u32 {
        1 << self.shift
    }

    /// log2 of the block size.
    pub fn shift(&self) -> u32 {
        self.shift
    }

    /// Sectors in one block.
    pub fn sectors_per_block(&self) -> u64 {
        1 << (self.shift - 9)
    }

    /// The block at `sector`: `EINVAL` unless it starts a block.
    pub fn lba(&self, sector: u64) -> Result<u64, i32> {
        if !sector.is_multiple_of(self.sectors_per_block()) {
            return Err(EINVAL);
        }
        Ok(sector >> (self.shift - 9))
    }

    /// Whole blocks in `sectors`: `EINVAL` for none or a part of one.
    pub fn blocks(&self, sectors: u32) -> Result<u64, i32> {
        let sectors = u64::from(sectors);
        if sectors == 0 || !sectors.is_multiple_of(self.sectors_per_block()) {
            return Err(EINVAL);
        }
        Ok(sectors >> (self.shift - 9))
    }

    /// The first sector of block `lba`.
    pub fn sector(&self, lba: u64) -> u64 {
        lba << (self.shift - 9)
    }

    /// Sectors in `blocks` blocks.
    pub fn sectors(&self, blocks: u64) -> u64 {
        blocks << (self.shift - 9)
    }
}

/// The one device command that carries out `request` on a
/// [`zns_device::ZoneQueue`]: reads, writes, Zone Append, Flush, Write
/// Zeroes (at most [`MAX_WRITE_ZEROES_BLOCKS`]) and zone management.
/// Zone reports are not one command (the server uses the queue's report,
/// which pages through the device's); they and discards, which a zoned
/// device does not have (the server carries a conventional namespace's
/// out as Write Zeroes), are `EOPNOTSUPP`. A request off the device's
/// blocks is `EINVAL` (positive errnos).
pub fn zone_op(request: &Request, geometry: &Geometry) -> Result<ZoneOp, i32> {
    let g = geometry;
    Ok(match *request {
        Request::Read { sector, sectors } => {
            g.blocks(sectors)?;
            ZoneOp::Read { lba: g.lba(sector)? }
        }
        Request::Write { sector, sectors, fua } => {
            g.blocks(sectors)?;
            ZoneOp::Write { lba: g.lba(sector)?, fua, placement: None }
        }
        Request::Append { sector, sectors, fua } => {
            g.blocks(sectors)?;
            ZoneOp::Append { zslba: g.lba(sector)?, fua }
        }
        Request::Flush => ZoneOp::Flush,
        Request::WriteZeroes { sector, sectors } => {
            let blocks = g.blocks(sectors)?;
            if blocks > MAX_WRITE_ZEROES_BLOCKS {
                return Err(EINVAL);
            }
            ZoneOp::WriteZeroes { lba: g.lba(sector)?, blocks: blocks as u32 }
        }
        Request::Zone { action, sector } => {
            ZoneOp::Zone { action, target: Target::Zone(g.lba(sector)?) }
        }
        Request::ResetAll => ZoneOp::Zone { action: ZoneAction::Reset, target: Target::All },
        Request::Discard { .. } | Request::ReportZones { .. } => return Err(EOPNOTSUPP),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(op: u32, sector: u64, n: u32) -> Request {
        Request::decode(op, sector, n).unwrap()
    }

    #[test]
    fn descriptors_decode_into_requests() {
        assert_eq!(decode(sys::UBLK_IO_OP_READ, 8, 16), Request::Read { sector: 8, sectors: 16 });
        assert_eq!(
            decode(sys::UBLK_IO_OP_WRITE | sys::UBLK_IO_F_FUA, 0, 8),
            Request::Write { sector: 0, sectors: 8, fua: true }
        );
        assert_eq!(
            decode(sys::UBLK_IO_OP_WRITE | sys::UBLK_IO_F_META, 0, 8),
            Request::Write { sector: 0, sectors: 8, fua: false }
        );
        assert_eq!(
            decode(sys::UBLK_IO_OP_ZONE_APPEND, 512, 8),
            Request::Append { sector: 512, sectors: 8, fua: false }
        );
        assert_eq!(decode(sys::UBLK_IO_OP_FLUSH, 0, 0), Request::Flush);
        assert_eq!(
            decode(sys::UBLK_IO_OP_DISCARD, 64, 8),
            Request::Discard { sector: 64, sectors: 8 }
        );
        assert_eq!(
            decode(sys::UBLK_IO_OP_WRITE_ZEROES, 64, 8),
            Request::WriteZeroes { sector: 64, sectors: 8 }
        );
        for (op, action) in [
            (sys::UBLK_IO_OP_ZONE_OPEN, ZoneAction::Open),
            (sys::UBLK_IO_OP_ZONE_CLOSE, ZoneAction::Close),
            (sys::UBLK_IO_OP_ZONE_FINISH, ZoneAction::Finish),
            (sys::UBLK_IO_OP_ZONE_RESET, ZoneAction::Reset),
        ] {
            assert_eq!(decode(op, 1024, 0), Request::Zone { action, sector: 1024 });
        }
        assert_eq!(decode(sys::UBLK_IO_OP_ZONE_RESET_ALL, 0, 0), Request::ResetAll);
        // A report's descriptor carries a zone count where others have
        // sectors.
        assert_eq!(
            decode(sys::UBLK_IO_OP_REPORT_ZONES, 2048, 3),
            Request::ReportZones { sector: 2048, zones: 3 }
        );
        assert_eq!(Request::decode(sys::UBLK_IO_OP_WRITE_SAME, 0, 8), Err(EOPNOTSUPP));
        assert_eq!(Request::decode(0x7f, 0, 8), Err(EOPNOTSUPP));
        assert_eq!(decode(sys::UBLK_IO_OP_READ, 8, 16).data_bytes(), 8192);
        assert_eq!(Request::Flush.data_bytes(), 0);
        assert_eq!(Request::ResetAll.name(), "zone reset all");
        assert_eq!(decode(sys::UBLK_IO_OP_ZONE_FINISH, 0, 0).name(), "zone finish");
    }

    #[test]
    fn geometry_converts_sectors_to_blocks_and_refuses_parts_of_blocks() {
        assert_eq!(Geometry::new(4096 + 512), None);
        assert_eq!(Geometry::new(256), None);
        let g = Geometry::new(4096).unwrap();
        assert_eq!((g.block_size(), g.shift(), g.sectors_per_block()), (4096, 12, 8));
        assert_eq!(g.lba(16), Ok(2));
        assert_eq!(g.lba(12), Err(EINVAL));
        assert_eq!(g.blocks(24), Ok(3));
        assert_eq!(g.blocks(4), Err(EINVAL));
        assert_eq!(g.blocks(0), Err(EINVAL));
        assert_eq!((g.sector(3), g.sectors(5)), (24, 40));
        let g = Geometry::new(512).unwrap();
        assert_eq!((g.lba(7), g.blocks(3), g.sector(7)), (Ok(7), Ok(3), 7));
    }

    #[test]
    fn requests_translate_into_zone_ops() {
        let g = Geometry::new(4096).unwrap();
        let op = |r: Request| zone_op(&r, &g);
        assert_eq!(op(Request::Read { sector: 16, sectors: 8 }), Ok(ZoneOp::Read { lba: 2 }));
        assert_eq!(
            op(Request::Write { sector: 8, sectors: 64, fua: true }),
            Ok(ZoneOp::Write { lba: 1, fua: true, placement: None })
        );
        assert_eq!(
            op(Request::Append { sector: 512, sectors: 8, fua: false }),
            Ok(ZoneOp::Append { zslba: 64, fua: false })
        );
        assert_eq!(op(Request::Flush), Ok(ZoneOp::Flush));
        assert_eq!(
            op(Request::WriteZeroes { sector: 8, sectors: 16 }),
            Ok(ZoneOp::WriteZeroes { lba: 1, blocks: 2 })
        );
        let too_many = (MAX_WRITE_ZEROES_BLOCKS + 1) as u32 * 8;
        assert_eq!(op(Request::WriteZeroes { sector: 0, sectors: too_many }), Err(EINVAL));
        assert_eq!(
            op(Request::Zone { action: ZoneAction::Finish, sector: 1024 }),
            Ok(ZoneOp::Zone { action: ZoneAction::Finish, target: Target::Zone(128) })
        );
        assert_eq!(
            op(Request::ResetAll),
            Ok(ZoneOp::Zone { action: ZoneAction::Reset, target: Target::All })
        );
        assert_eq!(op(Request::Discard { sector: 0, sectors: 8 }), Err(EOPNOTSUPP));
        assert_eq!(op(Request::ReportZones { sector: 0, zones: 4 }), Err(EOPNOTSUPP));
        // Off the device's blocks.
        assert_eq!(op(Request::Read { sector: 4, sectors: 8 }), Err(EINVAL));
        assert_eq!(op(Request::Write { sector: 0, sectors: 4, fua: false }), Err(EINVAL));
    }
}
