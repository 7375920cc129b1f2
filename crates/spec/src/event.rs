//! Asynchronous events: what the completion of an Asynchronous Event
//! Request says, and the bits of the Asynchronous Event Configuration
//! feature (FID 0Bh) and of Identify Controller OAES that name the events
//! znskit reports.
//!
//! A Zone Descriptor Changed notice (ZNS command set) is event type Notice
//! (2h), information EFh, log page Changed Zone List (BFh), with the NSID of
//! the namespace whose zones changed in completion dword 1.

use crate::log::LogPageId;

/// Asynchronous Event Type (completion dword 0 bits 2:0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum AsyncEventType {
    /// 0h Error status.
    Error = 0,
    /// 1h SMART / Health status.
    SmartHealth = 1,
    /// 2h Notice.
    Notice = 2,
    /// 3h Immediate.
    Immediate = 3,
    /// 4h One-Shot.
    OneShot = 4,
    /// 6h I/O Command Specific status.
    IoCommandSpecific = 6,
    /// 7h Vendor specific.
    VendorSpecific = 7,
}

impl AsyncEventType {
    /// Decodes the 3-bit field; `None` for the reserved value 5h.
    pub const fn from_raw(v: u8) -> Option<Self> {
        Some(match v & 0b111 {
            0 => Self::Error,
            1 => Self::SmartHealth,
            2 => Self::Notice,
            3 => Self::Immediate,
            4 => Self::OneShot,
            6 => Self::IoCommandSpecific,
            7 => Self::VendorSpecific,
            _ => return None,
        })
    }
}

/// Asynchronous Event Information of a Notice: Zone Descriptor Changed.
pub const NOTICE_ZONE_DESCRIPTOR_CHANGED: u8 = 0xEF;

/// Asynchronous Event Configuration (and OAES) bit 27: Zone Descriptor
/// Changed Notices. The host sets it with Set Features 0Bh to receive them.
pub const AEC_ZONE_DESCRIPTOR_CHANGED: u32 = 1 << 27;

/// The completion of an Asynchronous Event Request.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AsyncEvent {
    /// Asynchronous Event Type (3 bits, raw).
    pub event_type: u8,
    /// Asynchronous Event Information.
    pub info: u8,
    /// Log page the host reads to learn more (and to clear the event).
    pub log_page: u8,
    /// Completion dword 1: the namespace, for events that name one.
    pub nsid: u32,
}

impl AsyncEvent {
    /// A Zone Descriptor Changed notice for namespace `nsid`.
    pub const fn zone_descriptor_changed(nsid: u32) -> Self {
        AsyncEvent {
            event_type: AsyncEventType::Notice as u8,
            info: NOTICE_ZONE_DESCRIPTOR_CHANGED,
            log_page: LogPageId::ChangedZoneList as u8,
            nsid,
        }
    }

    /// Completion dwords 0 (low half) and 1 (high half).
    pub const fn to_result(&self) -> u64 {
        let dw0 = (self.event_type as u32 & 0b111)
            | (self.info as u32) << 8
            | (self.log_page as u32) << 16;
        dw0 as u64 | (self.nsid as u64) << 32
    }

    /// Decodes completion dwords 0-1.
    pub const fn from_result(r: u64) -> Self {
        AsyncEvent {
            event_type: (r & 0b111) as u8,
            info: (r >> 8) as u8,
            log_page: (r >> 16) as u8,
            nsid: (r >> 32) as u32,
        }
    }

    /// True for a Zone Descriptor Changed notice.
    pub const fn is_zone_descriptor_changed(&self) -> bool {
        self.event_type == AsyncEventType::Notice as u8
            && self.info == NOTICE_ZONE_DESCRIPTOR_CHANGED
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zone_descriptor_changed_notice_packs_type_info_log_and_nsid() {
        let e = AsyncEvent::zone_descriptor_changed(3);
        assert_eq!(e.to_result(), 0x0000_0003_00BF_EF02);
        assert_eq!(AsyncEvent::from_result(e.to_result()), e);
        assert!(e.is_zone_descriptor_changed());
        assert_eq!(AsyncEventType::from_raw(2), Some(AsyncEventType::Notice));
        assert_eq!(AsyncEventType::from_raw(5), None);
        assert_eq!(AEC_ZONE_DESCRIPTOR_CHANGED, 0x0800_0000);
    }
}
