//! Features: identifiers, the Get/Set Features CDW10 fields, and the value
//! encodings of the features znskit uses.
//!
//! The command builders and decoders are in [`crate::command::Features`].

/// Feature Identifier (Get/Set Features CDW10 bits 7:0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum FeatureId {
    /// 01h Arbitration.
    Arbitration = 0x01,
    /// 02h Power Management.
    PowerManagement = 0x02,
    /// 04h Temperature Threshold.
    TemperatureThreshold = 0x04,
    /// 06h Volatile Write Cache.
    VolatileWriteCache = 0x06,
    /// 07h Number of Queues.
    NumberOfQueues = 0x07,
    /// 08h Interrupt Coalescing.
    InterruptCoalescing = 0x08,
    /// 09h Interrupt Vector Configuration.
    InterruptVectorConfiguration = 0x09,
    /// 0Ah Write Atomicity Normal.
    WriteAtomicityNormal = 0x0A,
    /// 0Bh Asynchronous Event Configuration.
    AsyncEventConfiguration = 0x0B,
    /// 19h I/O Command Set Profile.
    IoCommandSetProfile = 0x19,
    /// 1Dh Flexible Data Placement (endurance group scoped; see
    /// [`crate::fdp::FdpFeature`]).
    FlexibleDataPlacement = 0x1D,
    /// 1Eh FDP Events (namespace scoped; see
    /// [`crate::fdp::FdpEventsFeature`]).
    FdpEvents = 0x1E,
}

impl FeatureId {
    /// Every named feature.
    pub const ALL: [FeatureId; 12] = [
        Self::Arbitration,
        Self::PowerManagement,
        Self::TemperatureThreshold,
        Self::VolatileWriteCache,
        Self::NumberOfQueues,
        Self::InterruptCoalescing,
        Self::InterruptVectorConfiguration,
        Self::WriteAtomicityNormal,
        Self::AsyncEventConfiguration,
        Self::IoCommandSetProfile,
        Self::FlexibleDataPlacement,
        Self::FdpEvents,
    ];

    /// Decodes a FID; `None` for features this crate does not name.
    pub const fn from_raw(v: u8) -> Option<Self> {
        Some(match v {
            0x01 => Self::Arbitration,
            0x02 => Self::PowerManagement,
            0x04 => Self::TemperatureThreshold,
            0x06 => Self::VolatileWriteCache,
            0x07 => Self::NumberOfQueues,
            0x08 => Self::InterruptCoalescing,
            0x09 => Self::InterruptVectorConfiguration,
            0x0A => Self::WriteAtomicityNormal,
            0x0B => Self::AsyncEventConfiguration,
            0x19 => Self::IoCommandSetProfile,
            0x1D => Self::FlexibleDataPlacement,
            0x1E => Self::FdpEvents,
            _ => return None,
        })
    }
}

/// Select (Get Features CDW10 bits 10:8): which value to return.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum FeatureSelect {
    /// 000b: the current value.
    #[default]
    Current = 0,
    /// 001b: the default value.
    Default = 1,
    /// 010b: the saved value.
    Saved = 2,
    /// 011b: the supported capabilities ([`FeatureCapabilities`] in DW0).
    SupportedCapabilities = 3,
}

impl FeatureSelect {
    /// Decodes SEL; `None` for the reserved values 100b-111b.
    pub const fn from_raw(v: u8) -> Option<Self> {
        match v {
            0 => Some(Self::Current),
            1 => Some(Self::Default),
            2 => Some(Self::Saved),
            3 => Some(Self::SupportedCapabilities),
            _ => None,
        }
    }
}

/// Get Features CDW10: FID (7:0) and SEL (10:8).
pub const fn get_features_cdw10(fid: u8, select: FeatureSelect) -> u32 {
    fid as u32 | (select as u32) << 8
}

/// Set Features CDW10: FID (7:0) and SV, save across power cycles (31).
pub const fn set_features_cdw10(fid: u8, save: bool) -> u32 {
    fid as u32 | (save as u32) << 31
}

/// FID (CDW10 bits 7:0) of a Get or Set Features command.
pub const fn cdw10_fid(cdw10: u32) -> u8 {
    cdw10 as u8
}

/// Raw SEL (CDW10 bits 10:8) of a Get Features command.
pub const fn cdw10_select(cdw10: u32) -> u8 {
    ((cdw10 >> 8) & 7) as u8
}

/// SV (CDW10 bit 31) of a Set Features command.
pub const fn cdw10_save(cdw10: u32) -> bool {
    cdw10 & (1 << 31) != 0
}

/// Completion DW0 of Get Features with SEL = supported capabilities.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FeatureCapabilities(pub u32);

impl FeatureCapabilities {
    /// Bit 0: the feature is saveable.
    pub const SAVEABLE: u32 = 1 << 0;
    /// Bit 1: the feature is namespace specific.
    pub const NAMESPACE_SPECIFIC: u32 = 1 << 1;
    /// Bit 2: the feature is changeable.
    pub const CHANGEABLE: u32 = 1 << 2;

    /// True when every bit of `mask` is set.
    pub const fn has(self, mask: u32) -> bool {
        self.0 & mask == mask
    }
}

/// Number of Queues (07h): I/O submission and completion queue counts.
///
/// The counts here are real counts (1-based); on the wire both are 0's based:
/// NSQR/NSQA in bits 15:0 and NCQR/NCQA in bits 31:16, in Set Features CDW11
/// (requested) and in the completion DW0 (allocated) alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NumberOfQueues {
    /// I/O submission queues (1..=65535).
    pub submission: u16,
    /// I/O completion queues (1..=65535).
    pub completion: u16,
}

impl NumberOfQueues {
    /// The wire dword; `None` when a count is 0 (not expressible).
    pub const fn to_dword(self) -> Option<u32> {
        if self.submission == 0 || self.completion == 0 {
            return None;
        }
        Some((self.submission - 1) as u32 | ((self.completion - 1) as u32) << 16)
    }

    /// Parses a CDW11 or completion DW0. The raw value FFFFh (65536 queues)
    /// is not valid and reads as a count of 0, which a controller rejects
    /// with Invalid Field in Command.
    pub const fn from_dword(dw: u32) -> Self {
        NumberOfQueues {
            submission: (dw as u16).wrapping_add(1),
            completion: ((dw >> 16) as u16).wrapping_add(1),
        }
    }
}

/// Volatile Write Cache (06h): CDW11 / DW0 bit 0 WCE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct VolatileWriteCache {
    /// WCE: the volatile write cache is enabled.
    pub enabled: bool,
}

impl VolatileWriteCache {
    /// The wire dword.
    pub const fn to_dword(self) -> u32 {
        self.enabled as u32
    }

    /// Parses a CDW11 or completion DW0.
    pub const fn from_dword(dw: u32) -> Self {
        VolatileWriteCache { enabled: dw & 1 != 0 }
    }
}

/// I/O Command Set Profile (19h): CDW11 / DW0 bits 8:0, IOCSCI, the index of
/// the selected combination in the I/O Command Set vector (Identify CNS 1Ch).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct IoCommandSetProfile {
    /// Combination index (0..=511).
    pub index: u16,
}

impl IoCommandSetProfile {
    /// Highest index the 9-bit field holds.
    pub const MAX_INDEX: u16 = 511;

    /// The wire dword; `None` when the index exceeds 511.
    pub const fn to_dword(self) -> Option<u32> {
        if self.index > Self::MAX_INDEX {
            None
        } else {
            Some(self.index as u32)
        }
    }

    /// Parses a CDW11 or completion DW0.
    pub const fn from_dword(dw: u32) -> Self {
        IoCommandSetProfile { index: (dw & 0x1FF) as u16 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feature_ids_have_spec_values() {
        let want = [0x01, 0x02, 0x04, 0x06, 0x07, 0x08, 0x09, 0x0A, 0x0B, 0x19, 0x1D, 0x1E];
        for (f, v) in FeatureId::ALL.into_iter().zip(want) {
            assert_eq!(f as u8, v);
            assert_eq!(FeatureId::from_raw(v), Some(f));
        }
        assert_eq!(FeatureId::from_raw(0x03), None);
        assert_eq!(FeatureId::from_raw(0x00), None);
    }

    #[test]
    fn cdw10_fields() {
        let get = get_features_cdw10(0x19, FeatureSelect::SupportedCapabilities);
        assert_eq!(get, 0x19 | 0b011 << 8);
        assert_eq!(cdw10_fid(get), 0x19);
        assert_eq!(cdw10_select(get), 3);
        assert_eq!(
            FeatureSelect::from_raw(cdw10_select(get)),
            Some(FeatureSelect::SupportedCapabilities)
        );
        assert_eq!(FeatureSelect::from_raw(4), None);
        assert_eq!(get_features_cdw10(0x07, FeatureSelect::Saved), 0x07 | 0b010 << 8);
        assert_eq!(get_features_cdw10(0x07, FeatureSelect::Default), 0x07 | 0b001 << 8);
        let set = set_features_cdw10(0x06, true);
        assert_eq!(set, 0x8000_0006);
        assert!(cdw10_save(set) && !cdw10_save(get));
        assert!(FeatureCapabilities(7).has(FeatureCapabilities::CHANGEABLE));
    }

    #[test]
    fn number_of_queues_is_zeros_based_on_the_wire() {
        let n = NumberOfQueues { submission: 8, completion: 0x1234 };
        assert_eq!(n.to_dword(), Some(7 | 0x1233 << 16));
        assert_eq!(NumberOfQueues::from_dword(7 | 0x1233 << 16), n);
        assert_eq!(NumberOfQueues { submission: 0, completion: 1 }.to_dword(), None);
        assert_eq!(NumberOfQueues { submission: 1, completion: 0 }.to_dword(), None);
        let max = NumberOfQueues { submission: 65535, completion: 65535 };
        assert_eq!(max.to_dword(), Some(0xFFFE_FFFE));
        assert_eq!(NumberOfQueues::from_dword(0xFFFE_FFFE), max);
        let invalid = NumberOfQueues::from_dword(0x0000_FFFF);
        assert_eq!((invalid.submission, invalid.completion), (0, 1));
        assert_eq!(invalid.to_dword(), None);
    }

    #[test]
    fn cache_and_profile_dwords() {
        assert_eq!(VolatileWriteCache { enabled: true }.to_dword(), 1);
        assert!(VolatileWriteCache::from_dword(0xFFFF_FFFF).enabled);
        assert!(!VolatileWriteCache::from_dword(2).enabled);
        assert_eq!(IoCommandSetProfile { index: 511 }.to_dword(), Some(0x1FF));
        assert_eq!(IoCommandSetProfile { index: 512 }.to_dword(), None);
        assert_eq!(IoCommandSetProfile::from_dword(0xFFFF_FE01).index, 0x001);
    }
}
