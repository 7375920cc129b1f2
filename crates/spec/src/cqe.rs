//! The 16-byte completion queue entry.

use crate::status::{Status, StatusField};

/// A completion queue entry: 4 dwords.
#[derive(Clone, Copy, PartialEq, Eq, Default, Debug)]
#[repr(C, align(16))]
pub struct CompletionEntry {
    /// DW0: command specific (low half of a Zone Append's assigned LBA).
    pub dw0: u32,
    /// DW1: command specific (high half of a Zone Append's assigned LBA).
    pub dw1: u32,
    /// SQ head pointer at the time this entry was posted.
    pub sq_head: u16,
    /// Submission queue the command came from.
    pub sq_id: u16,
    /// Command identifier.
    pub cid: u16,
    /// Phase tag (bit 0) and status field (bits 15:1).
    pub status: u16,
}

const _: () = assert!(core::mem::size_of::<CompletionEntry>() == 16);

impl CompletionEntry {
    /// Size on the wire.
    pub const SIZE: usize = 16;

    /// Phase tag: flips each time the controller wraps the queue.
    #[inline]
    pub const fn phase(&self) -> bool {
        self.status & 1 != 0
    }

    /// The status field (SCT, SC, CRD, More, DNR) without the phase tag.
    #[inline]
    pub const fn status_field(&self) -> StatusField {
        StatusField(self.status >> 1)
    }

    /// SCT and SC.
    #[inline]
    pub const fn status(&self) -> Status {
        self.status_field().status()
    }

    /// DW0 and DW1 as one value (Zone Append: the assigned LBA).
    #[inline]
    pub const fn result_u64(&self) -> u64 {
        self.dw0 as u64 | ((self.dw1 as u64) << 32)
    }

    /// Builds an entry; `phase` is the controller's current phase tag.
    #[inline]
    pub const fn new(
        result: u64,
        sq_head: u16,
        sq_id: u16,
        cid: u16,
        field: StatusField,
        phase: bool,
    ) -> Self {
        CompletionEntry {
            dw0: result as u32,
            dw1: (result >> 32) as u32,
            sq_head,
            sq_id,
            cid,
            status: (field.0 << 1) | phase as u16,
        }
    }

    /// The entry's wire image.
    #[inline]
    pub fn to_bytes(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[0..4].copy_from_slice(&self.dw0.to_le_bytes());
        b[4..8].copy_from_slice(&self.dw1.to_le_bytes());
        b[8..10].copy_from_slice(&self.sq_head.to_le_bytes());
        b[10..12].copy_from_slice(&self.sq_id.to_le_bytes());
        b[12..14].copy_from_slice(&self.cid.to_le_bytes());
        b[14..16].copy_from_slice(&self.status.to_le_bytes());
        b
    }

    /// Parses a wire image.
    #[inline]
    pub fn from_bytes(b: &[u8; 16]) -> Self {
        CompletionEntry {
            dw0: u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            dw1: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
            sq_head: u16::from_le_bytes([b[8], b[9]]),
            sq_id: u16::from_le_bytes([b[10], b[11]]),
            cid: u16::from_le_bytes([b[12], b[13]]),
            status: u16::from_le_bytes([b[14], b[15]]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::StatusCode;
    use core::mem::offset_of;

    #[test]
    fn layout() {
        assert_eq!(offset_of!(CompletionEntry, dw0), 0);
        assert_eq!(offset_of!(CompletionEntry, dw1), 4);
        assert_eq!(offset_of!(CompletionEntry, sq_head), 8);
        assert_eq!(offset_of!(CompletionEntry, sq_id), 10);
        assert_eq!(offset_of!(CompletionEntry, cid), 12);
        assert_eq!(offset_of!(CompletionEntry, status), 14);
    }

    #[test]
    fn phase_and_status_are_separate_bits() {
        let f = StatusField::new(StatusCode::ZoneIsFull.status(), false, true);
        let e = CompletionEntry::new(0x1_0000_0002, 5, 1, 9, f, true);
        assert!(e.phase());
        assert_eq!(e.status(), StatusCode::ZoneIsFull.status());
        assert!(e.status_field().dnr());
        assert_eq!(e.result_u64(), 0x1_0000_0002);
        let b = e.to_bytes();
        // Status word: DW3 bits 31:16; phase is bit 16 of DW3.
        assert_eq!(u16::from_le_bytes([b[14], b[15]]) & 1, 1);
        assert_eq!(u16::from_le_bytes([b[14], b[15]]) >> 1 & 0xFF, 0xB9);
        assert_eq!(CompletionEntry::from_bytes(&b), e);
    }
}
