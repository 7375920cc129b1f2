//! Copy (I/O opcode 19h): source range descriptors and their list encoding.
//!
//! The command dwords are built and decoded by [`crate::command::CopyCmd`]:
//! CDW10-11 SDLBA; CDW12 NR (7:0, 0's based), DESFMT (11:8), PRINFOR
//! (15:12), DTYPE (23:20), PRINFOW (29:26), FUA (30), LR (31); CDW13 DSPEC
//! (31:16). The data buffer holds NR + 1 source range descriptors.

/// Most source ranges one Copy command carries (NR is 8 bits, 0's based).
pub const MAX_RANGES: usize = 256;

/// DESFMT 0h: 32-byte source range descriptors without storage tags.
pub const DESCRIPTOR_FORMAT_0: u8 = 0;

/// A source range list the encoder or decoder could not accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CopyError {
    /// A range of zero blocks (NLB is 0's based, so one block is the minimum).
    #[error("source range of zero blocks")]
    ZeroBlocks,
    /// A range longer than the 16-bit NLB field holds.
    #[error("source range of {0} blocks exceeds 65536")]
    TooManyBlocks(u32),
    /// An empty list (NR is 0's based, so one range is the minimum).
    #[error("copy with no source ranges")]
    NoRanges,
    /// More ranges than the 8-bit NR field holds.
    #[error("{0} source ranges exceed 256")]
    TooManyRanges(usize),
    /// The buffer is shorter than the descriptors it should hold.
    #[error("source range list needs {needed} bytes, got {got}")]
    Short {
        /// Bytes required.
        needed: usize,
        /// Bytes available.
        got: usize,
    },
}

/// Source Range Entries Copy Descriptor Format 0h (32 bytes).
///
/// Bytes 7:0 reserved, SLBA 15:8, NLB 17:16 (0's based), 23:18 reserved,
/// expected initial logical block reference tag 27:24, expected logical block
/// application tag 29:28, application tag mask 31:30.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SourceRangeFormat0 {
    /// Starting LBA of the source range.
    pub slba: u64,
    /// Number of logical blocks (1..=65536).
    pub blocks: u32,
    /// Expected initial logical block reference tag.
    pub reference_tag: u32,
    /// Expected logical block application tag.
    pub app_tag: u16,
    /// Logical block application tag mask.
    pub app_tag_mask: u16,
}

impl SourceRangeFormat0 {
    /// Size on the wire.
    pub const SIZE: usize = 32;
    /// Longest range (NLB is 16 bits, 0's based).
    pub const MAX_BLOCKS: u32 = 65536;

    /// A range of `blocks` blocks from `slba`, without protection tags.
    pub const fn new(slba: u64, blocks: u32) -> Self {
        SourceRangeFormat0 { slba, blocks, reference_tag: 0, app_tag: 0, app_tag_mask: 0 }
    }

    /// The wire image; fails when `blocks` is 0 or above 65536.
    pub fn to_bytes(&self) -> Result<[u8; 32], CopyError> {
        if self.blocks == 0 {
            return Err(CopyError::ZeroBlocks);
        }
        if self.blocks > Self::MAX_BLOCKS {
            return Err(CopyError::TooManyBlocks(self.blocks));
        }
        let mut b = [0u8; 32];
        b[8..16].copy_from_slice(&self.slba.to_le_bytes());
        b[16..18].copy_from_slice(&((self.blocks - 1) as u16).to_le_bytes());
        b[24..28].copy_from_slice(&self.reference_tag.to_le_bytes());
        b[28..30].copy_from_slice(&self.app_tag.to_le_bytes());
        b[30..32].copy_from_slice(&self.app_tag_mask.to_le_bytes());
        Ok(b)
    }

    /// Parses a wire image. Every bit pattern is a valid descriptor.
    pub fn from_bytes(b: &[u8; 32]) -> Self {
        let mut slba = [0u8; 8];
        slba.copy_from_slice(&b[8..16]);
        SourceRangeFormat0 {
            slba: u64::from_le_bytes(slba),
            blocks: u16::from_le_bytes([b[16], b[17]]) as u32 + 1,
            reference_tag: u32::from_le_bytes([b[24], b[25], b[26], b[27]]),
            app_tag: u16::from_le_bytes([b[28], b[29]]),
            app_tag_mask: u16::from_le_bytes([b[30], b[31]]),
        }
    }

    /// The data buffer of a Copy command: the descriptors back to back.
    pub fn encode_list(ranges: &[SourceRangeFormat0]) -> Result<Vec<u8>, CopyError> {
        if ranges.is_empty() {
            return Err(CopyError::NoRanges);
        }
        if ranges.len() > MAX_RANGES {
            return Err(CopyError::TooManyRanges(ranges.len()));
        }
        let mut out = Vec::with_capacity(ranges.len() * Self::SIZE);
        for r in ranges {
            out.extend_from_slice(&r.to_bytes()?);
        }
        Ok(out)
    }

    /// Decodes the first `count` descriptors of `bytes` (extra bytes are
    /// ignored); fails when `bytes` is too short or `count` is 0 or above 256.
    pub fn decode_ranges(bytes: &[u8], count: usize) -> Result<Vec<SourceRangeFormat0>, CopyError> {
        if count == 0 {
            return Err(CopyError::NoRanges);
        }
        if count > MAX_RANGES {
            return Err(CopyError::TooManyRanges(count));
        }
        let needed = count * Self::SIZE;
        if bytes.len() < needed {
            return Err(CopyError::Short { needed, got: bytes.len() });
        }
        let mut out = Vec::with_capacity(count);
        for chunk in bytes[..needed].chunks_exact(Self::SIZE) {
            let mut d = [0u8; 32];
            d.copy_from_slice(chunk);
            out.push(Self::from_bytes(&d));
        }
        Ok(out)
    }

    /// Decodes a buffer holding whole descriptors only; fails on a trailing
    /// partial descriptor, an empty buffer, or more than 256 descriptors.
    pub fn decode_list(bytes: &[u8]) -> Result<Vec<SourceRangeFormat0>, CopyError> {
        let count = bytes.len().div_ceil(Self::SIZE);
        Self::decode_ranges(bytes, count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptor_fields_sit_at_their_offsets() {
        let r = SourceRangeFormat0 {
            slba: 0x0102_0304_0506_0708,
            blocks: 0x1112,
            reference_tag: 0x2122_2324,
            app_tag: 0x3132,
            app_tag_mask: 0x4142,
        };
        let b = r.to_bytes().unwrap();
        assert!(b[0..8].iter().all(|&x| x == 0));
        assert_eq!(&b[8..16], &0x0102_0304_0506_0708u64.to_le_bytes());
        assert_eq!(&b[16..18], &0x1111u16.to_le_bytes());
        assert!(b[18..24].iter().all(|&x| x == 0));
        assert_eq!(&b[24..28], &0x2122_2324u32.to_le_bytes());
        assert_eq!(&b[28..30], &0x3132u16.to_le_bytes());
        assert_eq!(&b[30..32], &0x4142u16.to_le_bytes());
        assert_eq!(SourceRangeFormat0::from_bytes(&b), r);
    }

    #[test]
    fn block_counts_are_zeros_based() {
        let one = SourceRangeFormat0::new(5, 1).to_bytes().unwrap();
        assert_eq!(&one[16..18], &[0, 0]);
        let max = SourceRangeFormat0::new(5, 65536).to_bytes().unwrap();
        assert_eq!(&max[16..18], &[0xFF, 0xFF]);
        assert_eq!(SourceRangeFormat0::from_bytes(&max).blocks, 65536);
        assert_eq!(SourceRangeFormat0::new(0, 0).to_bytes(), Err(CopyError::ZeroBlocks));
        assert_eq!(
            SourceRangeFormat0::new(0, 65537).to_bytes(),
            Err(CopyError::TooManyBlocks(65537))
        );
    }

    #[test]
    fn list_round_trip_and_errors() {
        let ranges = [
            SourceRangeFormat0::new(0, 8),
            SourceRangeFormat0::new(0x1000, 1),
            SourceRangeFormat0 { app_tag: 7, ..SourceRangeFormat0::new(0x2000, 300) },
        ];
        let buf = SourceRangeFormat0::encode_list(&ranges).unwrap();
        assert_eq!(buf.len(), 96);
        assert_eq!(&buf[40..48], &0x1000u64.to_le_bytes());
        assert_eq!(SourceRangeFormat0::decode_list(&buf).unwrap(), ranges);
        assert_eq!(SourceRangeFormat0::decode_ranges(&buf, 2).unwrap(), ranges[..2]);
        assert_eq!(
            SourceRangeFormat0::decode_ranges(&buf, 4),
            Err(CopyError::Short { needed: 128, got: 96 })
        );
        assert_eq!(
            SourceRangeFormat0::decode_list(&buf[..95]),
            Err(CopyError::Short { needed: 96, got: 95 })
        );
        assert_eq!(SourceRangeFormat0::decode_list(&[]), Err(CopyError::NoRanges));
        assert_eq!(SourceRangeFormat0::encode_list(&[]), Err(CopyError::NoRanges));
        let many = vec![SourceRangeFormat0::new(0, 1); 257];
        assert_eq!(SourceRangeFormat0::encode_list(&many), Err(CopyError::TooManyRanges(257)));
        assert_eq!(
            SourceRangeFormat0::decode_list(&vec![0u8; 257 * 32]),
            Err(CopyError::TooManyRanges(257))
        );
        assert_eq!(SourceRangeFormat0::decode_list(&vec![0u8; 256 * 32]).unwrap().len(), 256);
        assert_eq!(
            SourceRangeFormat0::encode_list(&[SourceRangeFormat0::new(0, 0)]),
            Err(CopyError::ZeroBlocks)
        );
    }
}
