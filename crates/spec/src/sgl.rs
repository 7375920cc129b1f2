//! Scatter Gather List descriptors (16 bytes), as NVMe over Fabrics
//! commands carry them in the submission entry's DPTR (bytes 39:24).
//!
//! A command uses SGLs when PSDT (byte 1, bits 7:6) is not 00b; fabrics
//! transports always do. NVMe/TCP uses two descriptors: an SGL Data Block
//! with the Offset subtype for data inside the command capsule, and a
//! Transport SGL Data Block (transport-specific subtype Ah) for data moved
//! by R2T / H2CData (to the controller) or C2HData (to the host) PDUs.

/// PSDT 01b (CDW0 bits 15:14, [`crate::SubmissionEntry::psdt`]): SGLs,
/// with MPTR naming a contiguous metadata buffer. What fabrics hosts set.
pub const PSDT_SGL_MPTR_CONTIGUOUS: u8 = 0b01;
/// PSDT 10b: SGLs, with MPTR naming an SGL segment.
pub const PSDT_SGL_MPTR_SGL: u8 = 0b10;

/// Descriptor type 0h: SGL Data Block.
pub const TYPE_DATA_BLOCK: u8 = 0x0;
/// Descriptor type 5h: Transport SGL Data Block.
pub const TYPE_TRANSPORT_DATA_BLOCK: u8 = 0x5;
/// Subtype 0h: Address (the address field is a memory address).
pub const SUBTYPE_ADDRESS: u8 = 0x0;
/// Subtype 1h: Offset (the address field is an offset into the capsule's data).
pub const SUBTYPE_OFFSET: u8 = 0x1;
/// Subtype Ah: transport specific (NVMe/TCP: data moved by data PDUs).
pub const SUBTYPE_TRANSPORT_A: u8 = 0xA;

/// What an SGL descriptor says about a command's data.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SglKind {
    /// Data Block / Offset: `len` bytes at `offset` within the command
    /// capsule's in-capsule data.
    InCapsule {
        /// Offset into the in-capsule data.
        offset: u64,
    },
    /// Transport Data Block / subtype Ah: `len` bytes moved by the
    /// transport's data PDUs (NVMe/TCP R2T + H2CData, or C2HData).
    Transport,
    /// Data Block / Address: host memory (PCIe-style; not used by TCP).
    Address {
        /// Memory address.
        addr: u64,
    },
    /// Any other type or subtype (segments, bit buckets, keyed blocks).
    Other {
        /// The raw identifier byte (type in 7:4, subtype in 3:0).
        id: u8,
        /// The raw address field.
        addr: u64,
    },
}

/// One 16-byte SGL descriptor: address (7:0), length (11:8), reserved
/// (14:12), SGL identifier (15: type in bits 7:4, subtype in 3:0).
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SglDescriptor {
    /// What the descriptor points at.
    pub kind: SglKind,
    /// Length in bytes.
    pub len: u32,
}

impl SglDescriptor {
    /// Size on the wire.
    pub const SIZE: usize = 16;

    /// `len` bytes of in-capsule data at `offset`.
    pub const fn in_capsule(offset: u64, len: u32) -> Self {
        SglDescriptor { kind: SglKind::InCapsule { offset }, len }
    }

    /// `len` bytes moved by the transport's data PDUs; `len` 0 for a
    /// command without data.
    pub const fn transport(len: u32) -> Self {
        SglDescriptor { kind: SglKind::Transport, len }
    }

    /// The SGL identifier byte (type << 4 | subtype).
    pub const fn id(&self) -> u8 {
        match self.kind {
            SglKind::InCapsule { .. } => TYPE_DATA_BLOCK << 4 | SUBTYPE_OFFSET,
            SglKind::Transport => TYPE_TRANSPORT_DATA_BLOCK << 4 | SUBTYPE_TRANSPORT_A,
            SglKind::Address { .. } => TYPE_DATA_BLOCK << 4 | SUBTYPE_ADDRESS,
            SglKind::Other { id, .. } => id,
        }
    }

    /// The wire image.
    pub fn to_bytes(&self) -> [u8; 16] {
        let addr = match self.kind {
            SglKind::InCapsule { offset } => offset,
            SglKind::Transport => 0,
            SglKind::Address { addr } | SglKind::Other { addr, .. } => addr,
        };
        let mut b = [0u8; 16];
        b[0..8].copy_from_slice(&addr.to_le_bytes());
        b[8..12].copy_from_slice(&self.len.to_le_bytes());
        b[15] = self.id();
        b
    }

    /// Parses a wire image; unknown identifiers come back as
    /// [`SglKind::Other`] for the caller to refuse.
    pub fn from_bytes(b: &[u8; 16]) -> Self {
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[0..8]);
        let addr = u64::from_le_bytes(a);
        let len = u32::from_le_bytes([b[8], b[9], b[10], b[11]]);
        let id = b[15];
        let kind = match (id >> 4, id & 0xF) {
            (TYPE_DATA_BLOCK, SUBTYPE_OFFSET) => SglKind::InCapsule { offset: addr },
            (TYPE_TRANSPORT_DATA_BLOCK, SUBTYPE_TRANSPORT_A) => SglKind::Transport,
            (TYPE_DATA_BLOCK, SUBTYPE_ADDRESS) => SglKind::Address { addr },
            _ => SglKind::Other { id, addr },
        };
        SglDescriptor { kind, len }
    }

    /// The descriptor in a submission entry's DPTR (bytes 39:24, which the
    /// entry holds as PRP1 and PRP2).
    pub fn from_sqe(sqe: &crate::SubmissionEntry) -> Self {
        let mut b = [0u8; 16];
        b[0..8].copy_from_slice(&sqe.prp1.to_le_bytes());
        b[8..16].copy_from_slice(&sqe.prp2.to_le_bytes());
        Self::from_bytes(&b)
    }

    /// Puts the descriptor in `sqe`'s DPTR and marks the entry as using
    /// SGLs (PSDT 01b).
    pub fn store_in(&self, sqe: &mut crate::SubmissionEntry) {
        let b = self.to_bytes();
        let mut lo = [0u8; 8];
        let mut hi = [0u8; 8];
        lo.copy_from_slice(&b[0..8]);
        hi.copy_from_slice(&b[8..16]);
        sqe.prp1 = u64::from_le_bytes(lo);
        sqe.prp2 = u64::from_le_bytes(hi);
        sqe.cdw0 = (sqe.cdw0 & !(0b11 << 14)) | ((PSDT_SGL_MPTR_CONTIGUOUS as u32) << 14);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SubmissionEntry;

    #[test]
    fn descriptors_sit_at_their_offsets() {
        let d = SglDescriptor::in_capsule(0x10, 4096);
        let b = d.to_bytes();
        assert_eq!(&b[0..8], &0x10u64.to_le_bytes());
        assert_eq!(&b[8..12], &4096u32.to_le_bytes());
        assert_eq!(b[15], 0x01);
        assert_eq!(SglDescriptor::transport(8192).to_bytes()[15], 0x5A);
        for d in [
            d,
            SglDescriptor::transport(0),
            SglDescriptor { kind: SglKind::Address { addr: 0xdead_beef }, len: 9 },
            SglDescriptor { kind: SglKind::Other { id: 0x20, addr: 7 }, len: 1 },
        ] {
            assert_eq!(SglDescriptor::from_bytes(&d.to_bytes()), d);
        }
    }

    #[test]
    fn a_descriptor_rides_in_dptr_with_psdt_set() {
        let mut sqe = SubmissionEntry::new(0x02, 1);
        let d = SglDescriptor::transport(4096);
        d.store_in(&mut sqe);
        let wire = sqe.to_bytes();
        assert_eq!(wire[1] >> 6, PSDT_SGL_MPTR_CONTIGUOUS);
        assert_eq!(sqe.psdt(), PSDT_SGL_MPTR_CONTIGUOUS);
        assert_eq!(&wire[24..40], &d.to_bytes());
        assert_eq!(SglDescriptor::from_sqe(&sqe), d);
    }
}
