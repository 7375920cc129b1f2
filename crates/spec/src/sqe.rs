//! The 64-byte submission queue entry.
//!
//! The layout is the NVMe common command format. Fields are stored in host
//! order; NVMe is little-endian and so is every target this crate builds for
//! (enforced at compile time in `lib.rs`), so the struct is its wire image.

/// A submission queue entry: 16 dwords.
#[derive(Clone, Copy, PartialEq, Eq, Default, Debug)]
#[repr(C, align(64))]
pub struct SubmissionEntry {
    /// CDW0: opcode (7:0), fused (9:8), PSDT (15:14), CID (31:16).
    pub cdw0: u32,
    /// Namespace identifier.
    pub nsid: u32,
    /// CDW2 (command specific).
    pub cdw2: u32,
    /// CDW3 (command specific).
    pub cdw3: u32,
    /// Metadata pointer.
    pub mptr: u64,
    /// Data pointer, PRP entry 1.
    pub prp1: u64,
    /// Data pointer, PRP entry 2 or PRP list pointer.
    pub prp2: u64,
    /// Command dword 10.
    pub cdw10: u32,
    /// Command dword 11.
    pub cdw11: u32,
    /// Command dword 12.
    pub cdw12: u32,
    /// Command dword 13.
    pub cdw13: u32,
    /// Command dword 14.
    pub cdw14: u32,
    /// Command dword 15.
    pub cdw15: u32,
}

const _: () = assert!(core::mem::size_of::<SubmissionEntry>() == 64);

impl SubmissionEntry {
    /// Size on the wire.
    pub const SIZE: usize = 64;

    /// An entry with the opcode and namespace set and every other field zero.
    #[inline]
    pub const fn new(opcode: u8, nsid: u32) -> Self {
        SubmissionEntry {
            cdw0: opcode as u32,
            nsid,
            cdw2: 0,
            cdw3: 0,
            mptr: 0,
            prp1: 0,
            prp2: 0,
            cdw10: 0,
            cdw11: 0,
            cdw12: 0,
            cdw13: 0,
            cdw14: 0,
            cdw15: 0,
        }
    }

    /// Opcode (CDW0 bits 7:0).
    #[inline]
    pub const fn opcode(&self) -> u8 {
        self.cdw0 as u8
    }

    /// Fused operation (CDW0 bits 9:8).
    pub const fn fuse(&self) -> u8 {
        ((self.cdw0 >> 8) & 3) as u8
    }

    /// PRP or SGL for data transfer (CDW0 bits 15:14); 0 = PRPs.
    pub const fn psdt(&self) -> u8 {
        ((self.cdw0 >> 14) & 3) as u8
    }

    /// Command identifier (CDW0 bits 31:16).
    #[inline]
    pub const fn cid(&self) -> u16 {
        (self.cdw0 >> 16) as u16
    }

    /// Sets the command identifier.
    #[inline]
    pub fn set_cid(&mut self, cid: u16) {
        self.cdw0 = (self.cdw0 & 0xFFFF) | ((cid as u32) << 16);
    }

    /// CDW10 and CDW11 as one 64-bit value (starting LBA in most I/O commands).
    #[inline]
    pub const fn cdw10_11(&self) -> u64 {
        self.cdw10 as u64 | ((self.cdw11 as u64) << 32)
    }

    /// Sets CDW10 and CDW11 from one 64-bit value.
    #[inline]
    pub fn set_cdw10_11(&mut self, v: u64) {
        self.cdw10 = v as u32;
        self.cdw11 = (v >> 32) as u32;
    }

    /// The entry's wire image.
    #[inline]
    pub fn to_bytes(&self) -> [u8; 64] {
        let mut b = [0u8; 64];
        let dw = [
            self.cdw0,
            self.nsid,
            self.cdw2,
            self.cdw3,
            self.mptr as u32,
            (self.mptr >> 32) as u32,
            self.prp1 as u32,
            (self.prp1 >> 32) as u32,
            self.prp2 as u32,
            (self.prp2 >> 32) as u32,
            self.cdw10,
            self.cdw11,
            self.cdw12,
            self.cdw13,
            self.cdw14,
            self.cdw15,
        ];
        for (i, d) in dw.iter().enumerate() {
            b[i * 4..i * 4 + 4].copy_from_slice(&d.to_le_bytes());
        }
        b
    }

    /// Parses a wire image. Every bit pattern is a valid entry.
    #[inline]
    pub fn from_bytes(b: &[u8; 64]) -> Self {
        let dw =
            |i: usize| u32::from_le_bytes([b[i * 4], b[i * 4 + 1], b[i * 4 + 2], b[i * 4 + 3]]);
        let qw = |i: usize| dw(i) as u64 | ((dw(i + 1) as u64) << 32);
        SubmissionEntry {
            cdw0: dw(0),
            nsid: dw(1),
            cdw2: dw(2),
            cdw3: dw(3),
            mptr: qw(4),
            prp1: qw(6),
            prp2: qw(8),
            cdw10: dw(10),
            cdw11: dw(11),
            cdw12: dw(12),
            cdw13: dw(13),
            cdw14: dw(14),
            cdw15: dw(15),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::offset_of;

    #[test]
    fn layout_matches_common_command_format() {
        assert_eq!(offset_of!(SubmissionEntry, cdw0), 0);
        assert_eq!(offset_of!(SubmissionEntry, nsid), 4);
        assert_eq!(offset_of!(SubmissionEntry, cdw2), 8);
        assert_eq!(offset_of!(SubmissionEntry, cdw3), 12);
        assert_eq!(offset_of!(SubmissionEntry, mptr), 16);
        assert_eq!(offset_of!(SubmissionEntry, prp1), 24);
        assert_eq!(offset_of!(SubmissionEntry, prp2), 32);
        assert_eq!(offset_of!(SubmissionEntry, cdw10), 40);
        assert_eq!(offset_of!(SubmissionEntry, cdw11), 44);
        assert_eq!(offset_of!(SubmissionEntry, cdw12), 48);
        assert_eq!(offset_of!(SubmissionEntry, cdw13), 52);
        assert_eq!(offset_of!(SubmissionEntry, cdw14), 56);
        assert_eq!(offset_of!(SubmissionEntry, cdw15), 60);
    }

    #[test]
    fn bytes_round_trip_and_cid() {
        let mut e = SubmissionEntry::new(0x7D, 1);
        e.set_cid(0xBEEF);
        e.prp1 = 0x1122_3344_5566_7788;
        e.set_cdw10_11(0xAABB_CCDD_0011_2233);
        e.cdw13 = 0x1_0204;
        let b = e.to_bytes();
        assert_eq!(b[0], 0x7D);
        assert_eq!(&b[2..4], &0xBEEFu16.to_le_bytes());
        assert_eq!(&b[24..32], &0x1122_3344_5566_7788u64.to_le_bytes());
        assert_eq!(&b[40..48], &0xAABB_CCDD_0011_2233u64.to_le_bytes());
        assert_eq!(SubmissionEntry::from_bytes(&b), e);
        assert_eq!(e.cid(), 0xBEEF);
        assert_eq!(e.opcode(), 0x7D);
    }
}
