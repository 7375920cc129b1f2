//! Controller registers (PCI BAR0): offsets, typed register values and the
//! doorbell address arithmetic.
//!
//! Each register value is a newtype over its raw integer with `const` getters
//! and builder-style `with_*` setters; setters mask their argument to the
//! field's width, so every input yields a well-formed register value.

use core::fmt;

/// Byte offsets of the controller registers within BAR0.
pub mod offset {
    /// Controller Capabilities (64-bit).
    pub const CAP: u32 = 0x00;
    /// Version.
    pub const VS: u32 = 0x08;
    /// Interrupt Mask Set.
    pub const INTMS: u32 = 0x0C;
    /// Interrupt Mask Clear.
    pub const INTMC: u32 = 0x10;
    /// Controller Configuration.
    pub const CC: u32 = 0x14;
    /// Controller Status.
    pub const CSTS: u32 = 0x1C;
    /// NVM Subsystem Reset.
    pub const NSSR: u32 = 0x20;
    /// Admin Queue Attributes.
    pub const AQA: u32 = 0x24;
    /// Admin Submission Queue base address (64-bit).
    pub const ASQ: u32 = 0x28;
    /// Admin Completion Queue base address (64-bit).
    pub const ACQ: u32 = 0x30;
    /// First doorbell register (admin SQ tail).
    pub const DOORBELL_BASE: u32 = 0x1000;
}

/// The controller registers below the doorbells that znskit models.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Register {
    /// CAP: Controller Capabilities.
    Cap,
    /// VS: Version.
    Vs,
    /// INTMS: Interrupt Mask Set.
    Intms,
    /// INTMC: Interrupt Mask Clear.
    Intmc,
    /// CC: Controller Configuration.
    Cc,
    /// CSTS: Controller Status.
    Csts,
    /// NSSR: NVM Subsystem Reset.
    Nssr,
    /// AQA: Admin Queue Attributes.
    Aqa,
    /// ASQ: Admin Submission Queue Base Address.
    Asq,
    /// ACQ: Admin Completion Queue Base Address.
    Acq,
}

impl Register {
    /// Every register, in offset order.
    pub const ALL: [Register; 10] = [
        Self::Cap,
        Self::Vs,
        Self::Intms,
        Self::Intmc,
        Self::Cc,
        Self::Csts,
        Self::Nssr,
        Self::Aqa,
        Self::Asq,
        Self::Acq,
    ];

    /// Byte offset within BAR0.
    pub const fn offset(self) -> u32 {
        match self {
            Self::Cap => offset::CAP,
            Self::Vs => offset::VS,
            Self::Intms => offset::INTMS,
            Self::Intmc => offset::INTMC,
            Self::Cc => offset::CC,
            Self::Csts => offset::CSTS,
            Self::Nssr => offset::NSSR,
            Self::Aqa => offset::AQA,
            Self::Asq => offset::ASQ,
            Self::Acq => offset::ACQ,
        }
    }

    /// Width in bytes (4 or 8).
    pub const fn size(self) -> u32 {
        match self {
            Self::Cap | Self::Asq | Self::Acq => 8,
            _ => 4,
        }
    }

    /// The register covering byte `offset`, with the byte position inside it
    /// (e.g. `0x04` is byte 4 of CAP). `None` for reserved space and doorbells.
    pub const fn at(offset: u32) -> Option<(Register, u32)> {
        let mut i = 0;
        while i < Self::ALL.len() {
            let r = Self::ALL[i];
            if offset >= r.offset() && offset < r.offset() + r.size() {
                return Some((r, offset - r.offset()));
            }
            i += 1;
        }
        None
    }
}

/// Defines a multi-bit field getter and its builder-style setter.
macro_rules! field {
    ($raw:ty, $get:ident, $set:ident, $ty:ty, $shift:expr, $width:expr, $doc:literal) => {
        #[doc = $doc]
        pub const fn $get(self) -> $ty {
            ((self.0 >> $shift) & (((1 as $raw) << $width) - 1)) as $ty
        }

        #[doc = concat!("Sets: ", $doc)]
        pub const fn $set(self, v: $ty) -> Self {
            let mask: $raw = (((1 as $raw) << $width) - 1) << $shift;
            Self((self.0 & !mask) | (((v as $raw) << $shift) & mask))
        }
    };
}

/// Defines a one-bit flag getter and its builder-style setter.
macro_rules! flag {
    ($raw:ty, $get:ident, $set:ident, $bit:expr, $doc:literal) => {
        #[doc = $doc]
        pub const fn $get(self) -> bool {
            self.0 & ((1 as $raw) << $bit) != 0
        }

        #[doc = concat!("Sets: ", $doc)]
        pub const fn $set(self, v: bool) -> Self {
            let mask: $raw = (1 as $raw) << $bit;
            Self(if v { self.0 | mask } else { self.0 & !mask })
        }
    };
}

/// CAP: Controller Capabilities (offset 00h, 64-bit, read-only to the host).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Cap(pub u64);

impl Cap {
    /// CSS bit 0 (CAP bit 37): the NVM Command Set.
    pub const CSS_NVM: u8 = 1 << 0;
    /// CSS bit 6 (CAP bit 43): one or more I/O Command Sets, chosen via
    /// the I/O Command Set Profile feature.
    pub const CSS_IO_COMMAND_SETS: u8 = 1 << 6;
    /// CSS bit 7 (CAP bit 44): no I/O Command Set (admin only).
    pub const CSS_ADMIN_ONLY: u8 = 1 << 7;

    field!(u64, mqes, with_mqes, u16, 0, 16, "MQES (15:0): maximum queue entries, 0's based.");
    flag!(u64, cqr, with_cqr, 16, "CQR (16): contiguous queues required.");
    field!(u64, ams, with_ams, u8, 17, 2, "AMS (18:17): arbitration mechanisms supported.");
    field!(u64, to, with_to, u8, 24, 8, "TO (31:24): ready timeout, in 500 ms units.");
    field!(u64, dstrd, with_dstrd, u8, 32, 4, "DSTRD (35:32): doorbell stride, 4 << DSTRD bytes.");
    flag!(u64, nssrs, with_nssrs, 36, "NSSRS (36): NVM subsystem reset supported.");
    field!(u64, css, with_css, u8, 37, 8, "CSS (44:37): command sets supported.");
    flag!(u64, bps, with_bps, 45, "BPS (45): boot partition support.");
    field!(
        u64,
        mpsmin,
        with_mpsmin,
        u8,
        48,
        4,
        "MPSMIN (51:48): minimum page size, 2^(12+MPSMIN)."
    );
    field!(
        u64,
        mpsmax,
        with_mpsmax,
        u8,
        52,
        4,
        "MPSMAX (55:52): maximum page size, 2^(12+MPSMAX)."
    );

    /// Maximum entries of an I/O queue (MQES + 1).
    pub const fn max_queue_entries(self) -> u32 {
        self.mqes() as u32 + 1
    }

    /// Worst-case time for CSTS.RDY to follow CC.EN, in milliseconds.
    pub const fn timeout_ms(self) -> u32 {
        self.to() as u32 * 500
    }

    /// Distance between consecutive doorbell registers, in bytes.
    pub const fn doorbell_stride(self) -> u32 {
        4 << self.dstrd()
    }

    /// Minimum memory page size in bytes.
    pub const fn min_page_size(self) -> u64 {
        1 << (12 + self.mpsmin() as u32)
    }

    /// Maximum memory page size in bytes.
    pub const fn max_page_size(self) -> u64 {
        1 << (12 + self.mpsmax() as u32)
    }

    /// CSS bit 0: the NVM Command Set is supported.
    pub const fn supports_nvm(self) -> bool {
        self.css() & Self::CSS_NVM != 0
    }

    /// CSS bit 6: I/O Command Sets are selectable (needed for ZNS).
    pub const fn supports_io_command_sets(self) -> bool {
        self.css() & Self::CSS_IO_COMMAND_SETS != 0
    }

    /// CSS bit 7: the controller can run with the admin command set only.
    pub const fn supports_admin_only(self) -> bool {
        self.css() & Self::CSS_ADMIN_ONLY != 0
    }
}

/// CC: Controller Configuration (offset 14h).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Cc(pub u32);

impl Cc {
    /// CSS 000b: NVM Command Set.
    pub const CSS_NVM: u8 = 0b000;
    /// CSS 110b: all supported I/O Command Sets.
    pub const CSS_ALL_IO_SETS: u8 = 0b110;
    /// CSS 111b: admin command set only.
    pub const CSS_ADMIN_ONLY: u8 = 0b111;
    /// SHN 00b: no notification.
    pub const SHN_NONE: u8 = 0b00;
    /// SHN 01b: normal shutdown notification.
    pub const SHN_NORMAL: u8 = 0b01;
    /// SHN 10b: abrupt shutdown notification.
    pub const SHN_ABRUPT: u8 = 0b10;

    flag!(u32, en, with_en, 0, "EN (0): enable.");
    field!(u32, css, with_css, u8, 4, 3, "CSS (6:4): I/O command set selected.");
    field!(u32, mps, with_mps, u8, 7, 4, "MPS (10:7): memory page size, 2^(12+MPS).");
    field!(u32, ams, with_ams, u8, 11, 3, "AMS (13:11): arbitration mechanism selected.");
    field!(u32, shn, with_shn, u8, 14, 2, "SHN (15:14): shutdown notification.");
    field!(u32, iosqes, with_iosqes, u8, 16, 4, "IOSQES (19:16): I/O SQ entry size, 2^n bytes.");
    field!(u32, iocqes, with_iocqes, u8, 20, 4, "IOCQES (23:20): I/O CQ entry size, 2^n bytes.");
    flag!(u32, crime, with_crime, 24, "CRIME (24): controller ready independent of media.");

    /// Memory page size in bytes.
    pub const fn page_size(self) -> u64 {
        1 << (12 + self.mps() as u32)
    }

    /// I/O submission queue entry size in bytes.
    pub const fn io_sq_entry_size(self) -> u32 {
        1 << self.iosqes()
    }

    /// I/O completion queue entry size in bytes.
    pub const fn io_cq_entry_size(self) -> u32 {
        1 << self.iocqes()
    }
}

/// CSTS: Controller Status (offset 1Ch).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Csts(pub u32);

impl Csts {
    /// SHST 00b: normal operation.
    pub const SHST_NORMAL: u8 = 0b00;
    /// SHST 01b: shutdown processing occurring.
    pub const SHST_OCCURRING: u8 = 0b01;
    /// SHST 10b: shutdown processing complete.
    pub const SHST_COMPLETE: u8 = 0b10;

    flag!(u32, rdy, with_rdy, 0, "RDY (0): ready.");
    flag!(u32, cfs, with_cfs, 1, "CFS (1): controller fatal status.");
    field!(u32, shst, with_shst, u8, 2, 2, "SHST (3:2): shutdown status.");
    flag!(u32, nssro, with_nssro, 4, "NSSRO (4): NVM subsystem reset occurred.");
    flag!(u32, pp, with_pp, 5, "PP (5): processing paused.");
}

/// AQA: Admin Queue Attributes (offset 24h).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Aqa(pub u32);

impl Aqa {
    field!(u32, asqs, with_asqs, u16, 0, 12, "ASQS (11:0): admin SQ size, 0's based.");
    field!(u32, acqs, with_acqs, u16, 16, 12, "ACQS (27:16): admin CQ size, 0's based.");

    /// Admin submission queue entries (ASQS + 1).
    pub const fn sq_entries(self) -> u16 {
        self.asqs() + 1
    }

    /// Admin completion queue entries (ACQS + 1).
    pub const fn cq_entries(self) -> u16 {
        self.acqs() + 1
    }
}

/// VS: Version (offset 08h), also the VER field of Identify Controller.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct Version(pub u32);

impl Version {
    /// NVMe 1.4.0.
    pub const V1_4_0: Version = Version::new(1, 4, 0);
    /// NVMe 2.0.0, the first version with the Zoned Namespace command set.
    pub const V2_0_0: Version = Version::new(2, 0, 0);

    /// Builds a version from its parts.
    pub const fn new(major: u16, minor: u8, tertiary: u8) -> Self {
        Version(((major as u32) << 16) | ((minor as u32) << 8) | tertiary as u32)
    }

    /// Major version (31:16).
    pub const fn major(self) -> u16 {
        (self.0 >> 16) as u16
    }

    /// Minor version (15:8).
    pub const fn minor(self) -> u8 {
        (self.0 >> 8) as u8
    }

    /// Tertiary version (7:0).
    pub const fn tertiary(self) -> u8 {
        self.0 as u8
    }
}

impl fmt::Display for Version {
    /// Prints e.g. `2.0.0`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major(), self.minor(), self.tertiary())
    }
}

impl fmt::Debug for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Version({self})")
    }
}

/// Value a host writes to NSSR to request an NVM subsystem reset ("NVMe").
pub const NSSR_RESET_VALUE: u32 = 0x4E56_4D65;

/// A doorbell register, identified by its queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Doorbell {
    /// Submission queue tail doorbell of the queue.
    SqTail(u16),
    /// Completion queue head doorbell of the queue.
    CqHead(u16),
}

/// Offset of doorbell number `index` (0 = SQ 0 tail, 1 = CQ 0 head, ...);
/// saturates at `u32::MAX`, which is never a doorbell.
const fn doorbell_offset(index: u64, dstrd: u8) -> u32 {
    let stride = 4u64 << (dstrd & 0xF);
    let off = offset::DOORBELL_BASE as u64 + index * stride;
    if off > u32::MAX as u64 {
        u32::MAX
    } else {
        off as u32
    }
}

/// BAR0 offset of the submission queue `qid` tail doorbell, for a doorbell
/// stride of `4 << dstrd` bytes (`dstrd` is CAP.DSTRD, masked to 4 bits).
/// Saturates at `u32::MAX` (never a doorbell) when the offset would not fit.
pub const fn sq_tail_doorbell(qid: u16, dstrd: u8) -> u32 {
    doorbell_offset(2 * qid as u64, dstrd)
}

/// BAR0 offset of the completion queue `qid` head doorbell; see
/// [`sq_tail_doorbell`].
pub const fn cq_head_doorbell(qid: u16, dstrd: u8) -> u32 {
    doorbell_offset(2 * qid as u64 + 1, dstrd)
}

/// The doorbell at BAR0 byte `offset`, or `None` when the offset is below the
/// doorbells, not on a stride boundary, or beyond queue 65535.
pub const fn decode_doorbell(offset: u32, dstrd: u8) -> Option<Doorbell> {
    if offset < offset::DOORBELL_BASE {
        return None;
    }
    let rel = (offset - offset::DOORBELL_BASE) as u64;
    let shift = 2 + (dstrd & 0xF) as u32;
    // The stride is a power of two: misaligned offsets have low bits set.
    if rel & ((1 << shift) - 1) != 0 {
        return None;
    }
    let index = rel >> shift;
    let qid = index >> 1;
    if qid > u16::MAX as u64 {
        return None;
    }
    if index & 1 == 0 {
        Some(Doorbell::SqTail(qid as u16))
    } else {
        Some(Doorbell::CqHead(qid as u16))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn register_offsets_and_lookup() {
        let expect = [
            (Register::Cap, 0x00, 8),
            (Register::Vs, 0x08, 4),
            (Register::Intms, 0x0C, 4),
            (Register::Intmc, 0x10, 4),
            (Register::Cc, 0x14, 4),
            (Register::Csts, 0x1C, 4),
            (Register::Nssr, 0x20, 4),
            (Register::Aqa, 0x24, 4),
            (Register::Asq, 0x28, 8),
            (Register::Acq, 0x30, 8),
        ];
        for (r, off, size) in expect {
            assert_eq!(r.offset(), off, "{r:?}");
            assert_eq!(r.size(), size, "{r:?}");
            assert_eq!(Register::at(off), Some((r, 0)));
            assert_eq!(Register::at(off + size - 1), Some((r, size - 1)));
        }
        assert_eq!(Register::at(0x04), Some((Register::Cap, 4)));
        assert_eq!(Register::at(0x2C), Some((Register::Asq, 4)));
        assert_eq!(Register::at(0x18), None);
        assert_eq!(Register::at(0x38), None);
        assert_eq!(Register::at(0x1000), None);
    }

    #[test]
    fn cap_fields_sit_at_their_bits() {
        let c = Cap(0)
            .with_mqes(0x3FF)
            .with_cqr(true)
            .with_ams(0b10)
            .with_to(0x14)
            .with_dstrd(0x3)
            .with_nssrs(true)
            .with_css(Cap::CSS_NVM | Cap::CSS_IO_COMMAND_SETS)
            .with_bps(true)
            .with_mpsmin(0x1)
            .with_mpsmax(0x4);
        let want = 0x3FFu64
            | 1 << 16
            | 0b10 << 17
            | 0x14 << 24
            | 0x3 << 32
            | 1 << 36
            | 1 << 37
            | 1 << 43
            | 1 << 45
            | 0x1 << 48
            | 0x4 << 52;
        assert_eq!(c.0, want);
        assert_eq!(c.mqes(), 0x3FF);
        assert!(c.cqr() && c.nssrs() && c.bps());
        assert_eq!((c.ams(), c.to(), c.dstrd()), (0b10, 0x14, 3));
        assert_eq!((c.mpsmin(), c.mpsmax()), (1, 4));
        assert!(c.supports_nvm() && c.supports_io_command_sets() && !c.supports_admin_only());
        assert_eq!(Cap(0).with_css(Cap::CSS_ADMIN_ONLY).0, 1 << 44);
        assert_eq!(c.max_queue_entries(), 1024);
        assert_eq!(c.timeout_ms(), 10_000);
        assert_eq!(c.doorbell_stride(), 32);
        assert_eq!(c.min_page_size(), 8192);
        assert_eq!(c.max_page_size(), 65536);
        // Setters mask to the field and clear it first.
        assert_eq!(Cap(u64::MAX).with_dstrd(0).dstrd(), 0);
        assert_eq!(Cap(0).with_ams(0xFF).0, 0b11 << 17);
        assert!(!Cap(u64::MAX).with_cqr(false).cqr());
    }

    #[test]
    fn cc_fields_sit_at_their_bits() {
        let c = Cc(0)
            .with_en(true)
            .with_css(Cc::CSS_ALL_IO_SETS)
            .with_mps(0x2)
            .with_ams(0b001)
            .with_shn(Cc::SHN_ABRUPT)
            .with_iosqes(6)
            .with_iocqes(4)
            .with_crime(true);
        assert_eq!(
            c.0,
            1 | 0b110 << 4 | 0x2 << 7 | 0b001 << 11 | 0b10 << 14 | 6 << 16 | 4 << 20 | 1 << 24
        );
        assert!(c.en() && c.crime());
        assert_eq!((c.css(), c.mps(), c.ams(), c.shn()), (0b110, 2, 1, 2));
        assert_eq!((c.io_sq_entry_size(), c.io_cq_entry_size()), (64, 16));
        assert_eq!(c.page_size(), 16384);
        assert_eq!(Cc(0).with_css(Cc::CSS_ADMIN_ONLY).0, 0b111 << 4);
        assert_eq!(Cc(0).with_shn(Cc::SHN_NORMAL).0, 1 << 14);
        assert_eq!(Cc(u32::MAX).with_en(false).0, u32::MAX - 1);
    }

    #[test]
    fn csts_and_aqa_fields_sit_at_their_bits() {
        let s = Csts(0)
            .with_rdy(true)
            .with_cfs(true)
            .with_shst(Csts::SHST_COMPLETE)
            .with_nssro(true)
            .with_pp(true);
        assert_eq!(s.0, 1 | 1 << 1 | 0b10 << 2 | 1 << 4 | 1 << 5);
        assert!(s.rdy() && s.cfs() && s.nssro() && s.pp());
        assert_eq!(s.shst(), Csts::SHST_COMPLETE);
        assert_eq!(Csts(0).with_shst(Csts::SHST_OCCURRING).0, 1 << 2);

        let a = Aqa(0).with_asqs(31).with_acqs(0xABC);
        assert_eq!(a.0, 31 | 0xABC << 16);
        assert_eq!((a.asqs(), a.acqs()), (31, 0xABC));
        assert_eq!((a.sq_entries(), a.cq_entries()), (32, 0xABD));
        assert_eq!(Aqa(0).with_asqs(0xFFFF).0, 0xFFF);
        assert_eq!(Aqa(u32::MAX).cq_entries(), 4096);
    }

    #[test]
    fn version_parts() {
        assert_eq!(Version::V2_0_0.0, 0x0002_0000);
        assert_eq!(Version::V1_4_0.0, 0x0001_0400);
        let v = Version::new(0x1234, 0x56, 0x78);
        assert_eq!(v.0, 0x1234_5678);
        assert_eq!((v.major(), v.minor(), v.tertiary()), (0x1234, 0x56, 0x78));
        assert_eq!(Version::V2_0_0.to_string(), "2.0.0");
        assert!(Version::V2_0_0 > Version::V1_4_0);
    }

    #[test]
    fn doorbell_offsets() {
        assert_eq!(sq_tail_doorbell(0, 0), 0x1000);
        assert_eq!(cq_head_doorbell(0, 0), 0x1004);
        assert_eq!(sq_tail_doorbell(1, 0), 0x1008);
        assert_eq!(cq_head_doorbell(1, 0), 0x100C);
        assert_eq!(sq_tail_doorbell(3, 2), 0x1000 + 6 * 16);
        assert_eq!(cq_head_doorbell(3, 2), 0x1000 + 7 * 16);
        assert_eq!(cq_head_doorbell(u16::MAX, 15), u32::MAX);
        assert_eq!(decode_doorbell(u32::MAX, 15), None);
    }

    #[test]
    fn doorbell_decode_inverts_encode() {
        for dstrd in [0u8, 1, 4, 9] {
            for qid in [0u16, 1, 2, 63, 1000, u16::MAX] {
                let sq = sq_tail_doorbell(qid, dstrd);
                let cq = cq_head_doorbell(qid, dstrd);
                if cq != u32::MAX {
                    assert_eq!(decode_doorbell(sq, dstrd), Some(Doorbell::SqTail(qid)));
                    assert_eq!(decode_doorbell(cq, dstrd), Some(Doorbell::CqHead(qid)));
                }
            }
        }
        assert_eq!(decode_doorbell(0x0FFC, 0), None);
        assert_eq!(decode_doorbell(0x1002, 0), None);
        assert_eq!(decode_doorbell(0x1004, 1), None);
        assert_eq!(decode_doorbell(0x1008, 1), Some(Doorbell::CqHead(0)));
        // Past queue 65535's CQ head doorbell.
        assert_eq!(decode_doorbell(0x1000 + 2 * 65536 * 4, 0), None);
    }
}
