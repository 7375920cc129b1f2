//! NVMe completion status: Status Code Type (SCT), Status Code (SC) and the
//! names the specifications give them.
//!
//! A [`Status`] is the raw pair as it travels in the completion queue entry;
//! [`StatusCode`] names every code a ZNS device returns. Unknown codes stay
//! representable (a real device may return vendor codes) and print as hex.

use core::fmt;

/// Status Code Type (CQE DW3 bits 27:25).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[repr(u8)]
pub enum StatusCodeType {
    /// 0h: Generic Command Status.
    Generic = 0,
    /// 1h: Command Specific Status.
    CommandSpecific = 1,
    /// 2h: Media and Data Integrity Errors.
    MediaError = 2,
    /// 3h: Path Related Status.
    Path = 3,
    /// 4h-6h: reserved values, kept as read.
    Reserved(u8) = 4,
    /// 7h: Vendor Specific.
    VendorSpecific = 7,
}

impl StatusCodeType {
    /// Decodes the 3-bit SCT field.
    #[inline]
    pub const fn from_raw(v: u8) -> Self {
        match v & 7 {
            0 => Self::Generic,
            1 => Self::CommandSpecific,
            2 => Self::MediaError,
            3 => Self::Path,
            7 => Self::VendorSpecific,
            r => Self::Reserved(r),
        }
    }

    /// The 3-bit SCT field value.
    #[inline]
    pub const fn raw(self) -> u8 {
        match self {
            Self::Generic => 0,
            Self::CommandSpecific => 1,
            Self::MediaError => 2,
            Self::Path => 3,
            Self::Reserved(r) => r,
            Self::VendorSpecific => 7,
        }
    }
}

macro_rules! status_codes {
    ($( $(#[$doc:meta])* $name:ident = ($sct:ident, $sc:literal, $text:literal), )*) => {
        /// Every status code a ZNS controller returns, by its specification name.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum StatusCode {
            $( $(#[$doc])* $name, )*
        }

        impl StatusCode {
            /// All named codes, in declaration order.
            pub const ALL: &'static [StatusCode] = &[$(StatusCode::$name,)*];

            /// The (SCT, SC) pair of this code.
            pub const fn status(self) -> Status {
                match self {
                    $( StatusCode::$name => Status::new(StatusCodeType::$sct, $sc), )*
                }
            }

            /// The specification's name for this code.
            pub const fn name(self) -> &'static str {
                match self {
                    $( StatusCode::$name => $text, )*
                }
            }

            /// Looks a raw (SCT, SC) pair up; `None` for codes without a name here.
            pub const fn from_status(s: Status) -> Option<StatusCode> {
                match (s.sct.raw(), s.sc) {
                    $( (x, $sc) if x == StatusCodeType::$sct.raw() => Some(StatusCode::$name), )*
                    _ => None,
                }
            }
        }
    };
}

status_codes! {
    /// 00h/00h Successful Completion.
    Success = (Generic, 0x00, "Successful Completion"),
    /// 00h/01h Invalid Command Opcode.
    InvalidOpcode = (Generic, 0x01, "Invalid Command Opcode"),
    /// 00h/02h Invalid Field in Command.
    InvalidField = (Generic, 0x02, "Invalid Field in Command"),
    /// 00h/03h Command ID Conflict.
    CommandIdConflict = (Generic, 0x03, "Command ID Conflict"),
    /// 00h/04h Data Transfer Error.
    DataTransferError = (Generic, 0x04, "Data Transfer Error"),
    /// 00h/05h Commands Aborted due to Power Loss Notification.
    AbortedPowerLoss = (Generic, 0x05, "Commands Aborted due to Power Loss Notification"),
    /// 00h/06h Internal Error.
    InternalError = (Generic, 0x06, "Internal Error"),
    /// 00h/07h Command Abort Requested.
    AbortRequested = (Generic, 0x07, "Command Abort Requested"),
    /// 00h/08h Command Aborted due to SQ Deletion.
    AbortedSqDeletion = (Generic, 0x08, "Command Aborted due to SQ Deletion"),
    /// 00h/0Ch Command Sequence Error.
    CommandSequenceError = (Generic, 0x0C, "Command Sequence Error"),
    /// 00h/0Ah Command Aborted due to Missing Fused Command.
    AbortedMissingFused = (Generic, 0x0A, "Command Aborted due to Missing Fused Command"),
    /// 00h/0Bh Invalid Namespace or Format.
    InvalidNamespaceOrFormat = (Generic, 0x0B, "Invalid Namespace or Format"),
    /// 00h/0Dh Invalid SGL Segment Descriptor.
    InvalidSglSegment = (Generic, 0x0D, "Invalid SGL Segment Descriptor"),
    SglLengthInvalid = (Generic, 0x0F, "Data SGL Length Invalid"),
    SglDescriptorTypeInvalid = (Generic, 0x11, "SGL Descriptor Type Invalid"),
    /// 00h/13h PRP Offset Invalid.
    InvalidPrpOffset = (Generic, 0x13, "PRP Offset Invalid"),
    /// 00h/15h Operation Denied.
    OperationDenied = (Generic, 0x15, "Operation Denied"),
    /// 00h/14h Atomic Write Unit Exceeded.
    AtomicWriteUnitExceeded = (Generic, 0x14, "Atomic Write Unit Exceeded"),
    /// 00h/1Eh SGL Data Block Granularity Invalid.
    SglDataBlockGranularity = (Generic, 0x1E, "SGL Data Block Granularity Invalid"),
    /// 00h/20h Namespace is Write Protected.
    NamespaceWriteProtected = (Generic, 0x20, "Namespace is Write Protected"),
    /// 00h/21h Command Interrupted.
    CommandInterrupted = (Generic, 0x21, "Command Interrupted"),
    /// 00h/22h Transient Transport Error (a PDU's data failed its digest).
    TransientTransportError = (Generic, 0x22, "Transient Transport Error"),
    /// 00h/29h FDP Disabled: the command needs Flexible Data Placement
    /// enabled in the endurance group.
    FdpDisabled = (Generic, 0x29, "FDP Disabled"),
    /// 00h/2Ah Invalid Placement Handle List.
    InvalidPlacementHandleList = (Generic, 0x2A, "Invalid Placement Handle List"),
    /// 00h/80h LBA Out of Range.
    LbaOutOfRange = (Generic, 0x80, "LBA Out of Range"),
    /// 00h/81h Capacity Exceeded.
    CapacityExceeded = (Generic, 0x81, "Capacity Exceeded"),
    /// 00h/82h Namespace Not Ready.
    NamespaceNotReady = (Generic, 0x82, "Namespace Not Ready"),
    /// 01h/00h Completion Queue Invalid.
    CompletionQueueInvalid = (CommandSpecific, 0x00, "Completion Queue Invalid"),
    /// 01h/01h Invalid Queue Identifier.
    InvalidQueueIdentifier = (CommandSpecific, 0x01, "Invalid Queue Identifier"),
    /// 01h/02h Invalid Queue Size.
    InvalidQueueSize = (CommandSpecific, 0x02, "Invalid Queue Size"),
    /// 01h/05h Asynchronous Event Request Limit Exceeded.
    AsyncEventLimitExceeded = (CommandSpecific, 0x05, "Asynchronous Event Request Limit Exceeded"),
    /// 01h/08h Invalid Interrupt Vector.
    InvalidInterruptVector = (CommandSpecific, 0x08, "Invalid Interrupt Vector"),
    /// 01h/09h Invalid Log Page.
    InvalidLogPage = (CommandSpecific, 0x09, "Invalid Log Page"),
    /// 01h/0Ch Invalid Queue Deletion.
    InvalidQueueDeletion = (CommandSpecific, 0x0C, "Invalid Queue Deletion"),
    /// 01h/0Dh Feature Identifier Not Saveable.
    FeatureNotSaveable = (CommandSpecific, 0x0D, "Feature Identifier Not Saveable"),
    /// 01h/0Eh Feature Not Changeable.
    FeatureNotChangeable = (CommandSpecific, 0x0E, "Feature Not Changeable"),
    /// 01h/0Fh Feature Not Namespace Specific.
    FeatureNotNamespaceSpecific = (CommandSpecific, 0x0F, "Feature Not Namespace Specific"),
    /// 01h/29h I/O Command Set Not Supported.
    IoCommandSetNotSupported = (CommandSpecific, 0x29, "I/O Command Set Not Supported"),
    /// 01h/2Ah I/O Command Set Not Enabled.
    IoCommandSetNotEnabled = (CommandSpecific, 0x2A, "I/O Command Set Not Enabled"),
    /// 01h/2Bh I/O Command Set Combination Rejected.
    IoCommandSetCombinationRejected =
        (CommandSpecific, 0x2B, "I/O Command Set Combination Rejected"),
    /// 01h/2Ch Invalid I/O Command Set.
    InvalidIoCommandSet = (CommandSpecific, 0x2C, "Invalid I/O Command Set"),
    /// 01h/80h Conflicting Attributes.
    ConflictingAttributes = (CommandSpecific, 0x80, "Conflicting Attributes"),
    /// 01h/81h Invalid Protection Information.
    InvalidProtectionInformation = (CommandSpecific, 0x81, "Invalid Protection Information"),
    /// 01h/82h Attempted Write to Read Only Range.
    WriteToReadOnlyRange = (CommandSpecific, 0x82, "Attempted Write to Read Only Range"),
    /// 01h/83h Command Size Limit Exceeded (Copy: MCL, MSSRL, MSRC).
    CommandSizeLimitExceeded = (CommandSpecific, 0x83, "Command Size Limit Exceeded"),
    /// 01h/B6h Invalid Zone Operation Request.
    InvalidZoneOperationRequest = (CommandSpecific, 0xB6, "Invalid Zone Operation Request"),
    /// 01h/B7h ZRWA Resources Unavailable.
    ZrwaResourcesUnavailable = (CommandSpecific, 0xB7, "ZRWA Resources Unavailable"),
    /// 01h/B8h Zone Boundary Error.
    ZoneBoundaryError = (CommandSpecific, 0xB8, "Zone Boundary Error"),
    /// 01h/B9h Zone Is Full.
    ZoneIsFull = (CommandSpecific, 0xB9, "Zone Is Full"),
    /// 01h/BAh Zone Is Read Only.
    ZoneIsReadOnly = (CommandSpecific, 0xBA, "Zone Is Read Only"),
    /// 01h/BBh Zone Is Offline.
    ZoneIsOffline = (CommandSpecific, 0xBB, "Zone Is Offline"),
    /// 01h/BCh Zone Invalid Write.
    ZoneInvalidWrite = (CommandSpecific, 0xBC, "Zone Invalid Write"),
    /// 01h/BDh Too Many Active Zones.
    TooManyActiveZones = (CommandSpecific, 0xBD, "Too Many Active Zones"),
    /// 01h/BEh Too Many Open Zones.
    TooManyOpenZones = (CommandSpecific, 0xBE, "Too Many Open Zones"),
    /// 01h/BFh Invalid Zone State Transition.
    InvalidZoneStateTransition = (CommandSpecific, 0xBF, "Invalid Zone State Transition"),
    /// 02h/80h Write Fault.
    WriteFault = (MediaError, 0x80, "Write Fault"),
    /// 02h/81h Unrecovered Read Error.
    UnrecoveredReadError = (MediaError, 0x81, "Unrecovered Read Error"),
    /// 02h/82h End-to-end Guard Check Error.
    GuardCheckError = (MediaError, 0x82, "End-to-end Guard Check Error"),
    /// 02h/83h End-to-end Application Tag Check Error.
    ApplicationTagCheckError = (MediaError, 0x83, "End-to-end Application Tag Check Error"),
    /// 02h/84h End-to-end Reference Tag Check Error.
    ReferenceTagCheckError = (MediaError, 0x84, "End-to-end Reference Tag Check Error"),
    /// 02h/85h Compare Failure.
    CompareFailure = (MediaError, 0x85, "Compare Failure"),
    /// 02h/86h Access Denied.
    AccessDenied = (MediaError, 0x86, "Access Denied"),
    /// 02h/87h Deallocated or Unwritten Logical Block.
    DeallocatedOrUnwritten = (MediaError, 0x87, "Deallocated or Unwritten Logical Block"),
}

/// A raw completion status: SCT and SC, as carried in the CQE.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Status {
    /// Status Code Type.
    pub sct: StatusCodeType,
    /// Status Code.
    pub sc: u8,
}

impl Status {
    /// Successful Completion.
    pub const SUCCESS: Status = Status::new(StatusCodeType::Generic, 0);

    /// Builds a status from its parts.
    #[inline]
    pub const fn new(sct: StatusCodeType, sc: u8) -> Self {
        Status { sct, sc }
    }

    /// True for Successful Completion.
    #[inline]
    pub const fn is_success(self) -> bool {
        self.sct.raw() == 0 && self.sc == 0
    }

    /// The named code, if this pair has a name.
    #[inline]
    pub const fn code(self) -> Option<StatusCode> {
        StatusCode::from_status(self)
    }

    /// The specification's name, or `None` for an unnamed pair.
    pub const fn name(self) -> Option<&'static str> {
        match self.code() {
            Some(c) => Some(c.name()),
            None => None,
        }
    }

    /// True when this status is the given named code.
    pub fn is(self, code: StatusCode) -> bool {
        self == code.status()
    }
}

impl From<StatusCode> for Status {
    fn from(c: StatusCode) -> Self {
        c.status()
    }
}

impl fmt::Display for Status {
    /// Prints e.g. `Zone Is Full (SCT 1h, SC B9h)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n} (SCT {:X}h, SC {:02X}h)", self.sct.raw(), self.sc),
            None => write!(f, "Unknown Status (SCT {:X}h, SC {:02X}h)", self.sct.raw(), self.sc),
        }
    }
}

impl fmt::Debug for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for StatusCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.status(), f)
    }
}

/// The 15-bit Status Field of a CQE (DW3 bits 31:17, i.e. the status word
/// without the phase bit): SC, SCT, CRD, More, DNR.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct StatusField(pub u16);

impl StatusField {
    /// Encodes a status with the More and Do Not Retry flags.
    #[inline]
    pub const fn new(status: Status, more: bool, dnr: bool) -> Self {
        StatusField(
            (status.sc as u16)
                | ((status.sct.raw() as u16) << 8)
                | ((more as u16) << 13)
                | ((dnr as u16) << 14),
        )
    }

    /// SCT and SC.
    #[inline]
    pub const fn status(self) -> Status {
        Status::new(StatusCodeType::from_raw(((self.0 >> 8) & 7) as u8), self.0 as u8)
    }

    /// Command Retry Delay index (bits 12:11 of the field).
    #[inline]
    pub const fn crd(self) -> u8 {
        ((self.0 >> 11) & 3) as u8
    }

    /// More: further information in the Error Information log.
    #[inline]
    pub const fn more(self) -> bool {
        self.0 & (1 << 13) != 0
    }

    /// Do Not Retry.
    #[inline]
    pub const fn dnr(self) -> bool {
        self.0 & (1 << 14) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_code_round_trips() {
        for &c in StatusCode::ALL {
            assert_eq!(StatusCode::from_status(c.status()), Some(c), "{c:?}");
        }
    }

    #[test]
    fn codes_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for &c in StatusCode::ALL {
            assert!(seen.insert((c.status().sct.raw(), c.status().sc)), "{c:?} duplicated");
        }
    }

    #[test]
    fn zns_codes_have_spec_values() {
        let zns = [
            (StatusCode::InvalidZoneOperationRequest, 0xB6),
            (StatusCode::ZrwaResourcesUnavailable, 0xB7),
            (StatusCode::ZoneBoundaryError, 0xB8),
            (StatusCode::ZoneIsFull, 0xB9),
            (StatusCode::ZoneIsReadOnly, 0xBA),
            (StatusCode::ZoneIsOffline, 0xBB),
            (StatusCode::ZoneInvalidWrite, 0xBC),
            (StatusCode::TooManyActiveZones, 0xBD),
            (StatusCode::TooManyOpenZones, 0xBE),
            (StatusCode::InvalidZoneStateTransition, 0xBF),
        ];
        for (c, sc) in zns {
            assert_eq!(c.status(), Status::new(StatusCodeType::CommandSpecific, sc));
        }
    }

    #[test]
    fn fdp_and_command_set_codes_have_spec_values() {
        let g = StatusCodeType::Generic;
        let c = StatusCodeType::CommandSpecific;
        assert_eq!(StatusCode::FdpDisabled.status(), Status::new(g, 0x29));
        assert_eq!(StatusCode::InvalidPlacementHandleList.status(), Status::new(g, 0x2A));
        // The I/O command set codes share their values with the two above,
        // in the command specific type.
        assert_eq!(StatusCode::IoCommandSetNotSupported.status(), Status::new(c, 0x29));
        assert_eq!(StatusCode::IoCommandSetNotEnabled.status(), Status::new(c, 0x2A));
        assert_eq!(StatusCode::IoCommandSetCombinationRejected.status(), Status::new(c, 0x2B));
        assert_eq!(StatusCode::InvalidIoCommandSet.status(), Status::new(c, 0x2C));
        assert_eq!(StatusCode::FdpDisabled.to_string(), "FDP Disabled (SCT 0h, SC 29h)");
    }

    #[test]
    fn display_names_the_status() {
        assert_eq!(StatusCode::ZoneIsFull.to_string(), "Zone Is Full (SCT 1h, SC B9h)");
        assert_eq!(
            Status::new(StatusCodeType::VendorSpecific, 0x12).to_string(),
            "Unknown Status (SCT 7h, SC 12h)"
        );
    }

    #[test]
    fn status_field_bits() {
        let f = StatusField::new(StatusCode::ZoneInvalidWrite.status(), true, true);
        assert_eq!(f.0, 0xBC | (1 << 8) | (1 << 13) | (1 << 14));
        assert_eq!(f.status(), StatusCode::ZoneInvalidWrite.status());
        assert!(f.more() && f.dnr());
        assert_eq!(f.crd(), 0);
    }
}
