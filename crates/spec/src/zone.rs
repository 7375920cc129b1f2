//! Zone types, states, actions, the 64-byte zone descriptor and the zone
//! report header (NVMe Zoned Namespace Command Set).

/// Zone state (upper nibble of descriptor byte 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[repr(u8)]
pub enum ZoneState {
    /// ZSE: Empty.
    Empty = 0x1,
    /// ZSIO: Implicitly Opened.
    ImplicitlyOpen = 0x2,
    /// ZSEO: Explicitly Opened.
    ExplicitlyOpen = 0x3,
    /// ZSC: Closed.
    Closed = 0x4,
    /// ZSRO: Read Only.
    ReadOnly = 0xD,
    /// ZSF: Full.
    Full = 0xE,
    /// ZSO: Offline.
    Offline = 0xF,
}

impl ZoneState {
    /// Every state.
    pub const ALL: [ZoneState; 7] = [
        Self::Empty,
        Self::ImplicitlyOpen,
        Self::ExplicitlyOpen,
        Self::Closed,
        Self::ReadOnly,
        Self::Full,
        Self::Offline,
    ];

    /// Decodes the 4-bit state value; `None` for reserved values.
    pub const fn from_raw(v: u8) -> Option<Self> {
        Some(match v {
            0x1 => Self::Empty,
            0x2 => Self::ImplicitlyOpen,
            0x3 => Self::ExplicitlyOpen,
            0x4 => Self::Closed,
            0xD => Self::ReadOnly,
            0xE => Self::Full,
            0xF => Self::Offline,
            _ => return None,
        })
    }

    /// Opened zones (ZSIO, ZSEO) count against the Max Open Resources.
    pub const fn is_open(self) -> bool {
        matches!(self, Self::ImplicitlyOpen | Self::ExplicitlyOpen)
    }

    /// Active zones (ZSIO, ZSEO, ZSC) count against the Max Active Resources.
    pub const fn is_active(self) -> bool {
        matches!(self, Self::ImplicitlyOpen | Self::ExplicitlyOpen | Self::Closed)
    }

    /// The write pointer is valid only outside ZSF, ZSRO and ZSO.
    pub const fn has_write_pointer(self) -> bool {
        !matches!(self, Self::Full | Self::ReadOnly | Self::Offline)
    }

    /// The specification's abbreviation (ZSE, ZSIO, ...).
    pub const fn abbreviation(self) -> &'static str {
        match self {
            Self::Empty => "ZSE",
            Self::ImplicitlyOpen => "ZSIO",
            Self::ExplicitlyOpen => "ZSEO",
            Self::Closed => "ZSC",
            Self::ReadOnly => "ZSRO",
            Self::Full => "ZSF",
            Self::Offline => "ZSO",
        }
    }

    /// The name nvme-cli and blkzone print (e.g. `IMP_OPENED`, `imp_open`).
    pub const fn nvme_cli_name(self) -> &'static str {
        match self {
            Self::Empty => "EMPTY",
            Self::ImplicitlyOpen => "IMP_OPENED",
            Self::ExplicitlyOpen => "EXP_OPENED",
            Self::Closed => "CLOSED",
            Self::ReadOnly => "READONLY",
            Self::Full => "FULL",
            Self::Offline => "OFFLINE",
        }
    }
}

impl core::fmt::Display for ZoneState {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Self::Empty => "Empty",
            Self::ImplicitlyOpen => "Implicitly Opened",
            Self::ExplicitlyOpen => "Explicitly Opened",
            Self::Closed => "Closed",
            Self::ReadOnly => "Read Only",
            Self::Full => "Full",
            Self::Offline => "Offline",
        })
    }
}

/// Zone type (descriptor byte 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[repr(u8)]
pub enum ZoneType {
    /// 2h: Sequential Write Required, the only type the ZNS command set defines.
    SequentialWriteRequired = 0x2,
}

/// Zone Send Action (Zone Management Send CDW13 bits 7:0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ZoneSendAction {
    /// 01h Close Zone.
    Close = 0x01,
    /// 02h Finish Zone.
    Finish = 0x02,
    /// 03h Open Zone.
    Open = 0x03,
    /// 04h Reset Zone.
    Reset = 0x04,
    /// 05h Offline Zone.
    Offline = 0x05,
    /// 10h Set Zone Descriptor Extension.
    SetDescriptorExtension = 0x10,
    /// 11h Zone Random Write Area Flush.
    FlushZrwa = 0x11,
}

impl ZoneSendAction {
    /// Decodes a ZSA; `None` for reserved values.
    pub const fn from_raw(v: u8) -> Option<Self> {
        Some(match v {
            0x01 => Self::Close,
            0x02 => Self::Finish,
            0x03 => Self::Open,
            0x04 => Self::Reset,
            0x05 => Self::Offline,
            0x10 => Self::SetDescriptorExtension,
            0x11 => Self::FlushZrwa,
            _ => return None,
        })
    }
}

/// Zone Receive Action (Zone Management Receive CDW13 bits 7:0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ZoneReceiveAction {
    /// 00h Report Zones.
    Report = 0x00,
    /// 01h Extended Report Zones (descriptors followed by their extensions).
    ExtendedReport = 0x01,
}

impl ZoneReceiveAction {
    /// Decodes a ZRA; `None` for reserved values.
    pub const fn from_raw(v: u8) -> Option<Self> {
        match v {
            0 => Some(Self::Report),
            1 => Some(Self::ExtendedReport),
            _ => None,
        }
    }
}

/// Reporting options (Zone Management Receive CDW13 bits 15:8): which zones
/// a report lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[repr(u8)]
pub enum ReportFilter {
    /// 0h: all zones.
    All = 0,
    /// 1h: ZSE.
    Empty = 1,
    /// 2h: ZSIO.
    ImplicitlyOpen = 2,
    /// 3h: ZSEO.
    ExplicitlyOpen = 3,
    /// 4h: ZSC.
    Closed = 4,
    /// 5h: ZSF.
    Full = 5,
    /// 6h: ZSRO.
    ReadOnly = 6,
    /// 7h: ZSO.
    Offline = 7,
    /// 9h: zones with Reset Zone Recommended set.
    ResetRecommended = 9,
}

impl ReportFilter {
    /// Decodes ZRASF; `None` for reserved values.
    pub const fn from_raw(v: u8) -> Option<Self> {
        Some(match v {
            0 => Self::All,
            1 => Self::Empty,
            2 => Self::ImplicitlyOpen,
            3 => Self::ExplicitlyOpen,
            4 => Self::Closed,
            5 => Self::Full,
            6 => Self::ReadOnly,
            7 => Self::Offline,
            9 => Self::ResetRecommended,
            _ => return None,
        })
    }

    /// Whether a zone in `state` with attributes `attrs` is listed.
    pub const fn matches(self, state: ZoneState, attrs: ZoneAttributes) -> bool {
        match self {
            Self::All => true,
            Self::Empty => matches!(state, ZoneState::Empty),
            Self::ImplicitlyOpen => matches!(state, ZoneState::ImplicitlyOpen),
            Self::ExplicitlyOpen => matches!(state, ZoneState::ExplicitlyOpen),
            Self::Closed => matches!(state, ZoneState::Closed),
            Self::Full => matches!(state, ZoneState::Full),
            Self::ReadOnly => matches!(state, ZoneState::ReadOnly),
            Self::Offline => matches!(state, ZoneState::Offline),
            Self::ResetRecommended => attrs.0 & ZoneAttributes::RESET_RECOMMENDED != 0,
        }
    }
}

/// Zone attributes (descriptor byte 2).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
pub struct ZoneAttributes(pub u8);

impl ZoneAttributes {
    /// Bit 0 ZFC: Zone Finished by Controller.
    pub const FINISHED_BY_CONTROLLER: u8 = 1 << 0;
    /// Bit 1 FZR: Finish Zone Recommended.
    pub const FINISH_RECOMMENDED: u8 = 1 << 1;
    /// Bit 2 RZR: Reset Zone Recommended.
    pub const RESET_RECOMMENDED: u8 = 1 << 2;
    /// Bit 3 ZRWAV: Zone Random Write Area Valid.
    pub const ZRWA_VALID: u8 = 1 << 3;
    /// Bit 7 ZDEV: Zone Descriptor Extension Valid.
    pub const EXTENSION_VALID: u8 = 1 << 7;

    /// True when every bit of `mask` is set.
    pub const fn has(self, mask: u8) -> bool {
        self.0 & mask == mask
    }
}

/// The 64-byte zone descriptor of a zone report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct ZoneDescriptor {
    /// Zone type.
    pub zone_type: ZoneType,
    /// Zone state.
    pub state: ZoneState,
    /// Zone attributes.
    pub attrs: ZoneAttributes,
    /// Zone Attributes Information (byte 3).
    pub attrs_info: u8,
    /// Zone capacity in logical blocks.
    pub capacity: u64,
    /// Zone start LBA.
    pub start: u64,
    /// Write pointer; all ones where invalid (ZSF, ZSRO, ZSO).
    pub write_pointer: u64,
}

/// A descriptor field the decoder could not accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DescriptorError {
    /// Byte 0 holds a zone type the ZNS command set does not define.
    #[error("unknown zone type {0:#x}")]
    ZoneType(u8),
    /// Byte 1 holds a reserved zone state.
    #[error("reserved zone state {0:#x}")]
    ZoneState(u8),
}

impl ZoneDescriptor {
    /// Size on the wire.
    pub const SIZE: usize = 64;
    /// Write pointer value reported where it is not valid.
    pub const INVALID_WRITE_POINTER: u64 = u64::MAX;

    /// The wire image.
    pub fn to_bytes(&self) -> [u8; 64] {
        let mut b = [0u8; 64];
        b[0] = self.zone_type as u8;
        b[1] = (self.state as u8) << 4;
        b[2] = self.attrs.0;
        b[3] = self.attrs_info;
        b[8..16].copy_from_slice(&self.capacity.to_le_bytes());
        b[16..24].copy_from_slice(&self.start.to_le_bytes());
        b[24..32].copy_from_slice(&self.write_pointer.to_le_bytes());
        b
    }

    /// Parses a wire image.
    pub fn from_bytes(b: &[u8; 64]) -> Result<Self, DescriptorError> {
        let q = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes"));
        let zone_type = match b[0] & 0xF {
            0x2 => ZoneType::SequentialWriteRequired,
            t => return Err(DescriptorError::ZoneType(t)),
        };
        let state = ZoneState::from_raw(b[1] >> 4).ok_or(DescriptorError::ZoneState(b[1] >> 4))?;
        Ok(ZoneDescriptor {
            zone_type,
            state,
            attrs: ZoneAttributes(b[2]),
            attrs_info: b[3],
            capacity: q(8),
            start: q(16),
            write_pointer: q(24),
        })
    }
}

/// The 64-byte header of a zone report: the number of zones (bytes 7:0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ReportHeader {
    /// Number of zones: with Partial Report clear, every matching zone from
    /// the starting LBA on; with it set, the descriptors actually returned.
    pub zones: u64,
}

impl ReportHeader {
    /// Size on the wire.
    pub const SIZE: usize = 64;

    /// The wire image.
    pub fn to_bytes(&self) -> [u8; 64] {
        let mut b = [0u8; 64];
        b[0..8].copy_from_slice(&self.zones.to_le_bytes());
        b
    }

    /// Parses a wire image.
    pub fn from_bytes(b: &[u8; 64]) -> Self {
        ReportHeader { zones: u64::from_le_bytes(b[0..8].try_into().expect("8 bytes")) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptor_fields_sit_at_their_offsets() {
        let d = ZoneDescriptor {
            zone_type: ZoneType::SequentialWriteRequired,
            state: ZoneState::Closed,
            attrs: ZoneAttributes(
                ZoneAttributes::EXTENSION_VALID | ZoneAttributes::FINISHED_BY_CONTROLLER,
            ),
            attrs_info: 0x5A,
            capacity: 0x0102_0304_0506_0708,
            start: 0x1112_1314_1516_1718,
            write_pointer: 0x2122_2324_2526_2728,
        };
        let b = d.to_bytes();
        assert_eq!(b[0], 0x02);
        assert_eq!(b[1], 0x40);
        assert_eq!(b[2], 0x81);
        assert_eq!(b[3], 0x5A);
        assert_eq!(&b[4..8], &[0; 4]);
        assert_eq!(&b[8..16], &0x0102_0304_0506_0708u64.to_le_bytes());
        assert_eq!(&b[16..24], &0x1112_1314_1516_1718u64.to_le_bytes());
        assert_eq!(&b[24..32], &0x2122_2324_2526_2728u64.to_le_bytes());
        assert!(b[32..].iter().all(|&x| x == 0));
        assert_eq!(ZoneDescriptor::from_bytes(&b), Ok(d));
    }

    #[test]
    fn reserved_state_is_rejected() {
        let mut b = [0u8; 64];
        b[0] = 2;
        b[1] = 0x50;
        assert_eq!(ZoneDescriptor::from_bytes(&b), Err(DescriptorError::ZoneState(5)));
    }

    #[test]
    fn state_values_and_classes() {
        for s in ZoneState::ALL {
            assert_eq!(ZoneState::from_raw(s as u8), Some(s));
        }
        assert_eq!(ZoneState::ReadOnly as u8, 0xD);
        assert!(ZoneState::Closed.is_active() && !ZoneState::Closed.is_open());
        assert!(!ZoneState::Full.has_write_pointer());
    }

    #[test]
    fn report_header_is_zone_count_then_reserved() {
        let b = ReportHeader { zones: 904 }.to_bytes();
        assert_eq!(&b[0..8], &904u64.to_le_bytes());
        assert!(b[8..].iter().all(|&x| x == 0));
    }
}
