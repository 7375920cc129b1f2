//! Log pages: identifiers, the Get Log Page command fields, and the pages
//! znskit produces (Error Information, SMART / Health Information, Changed
//! Zone List, and the OCP Datacenter NVMe SSD specification's SMART /
//! Health Information Extended page).
//!
//! The Get Log Page submission entry builder and decoder are in
//! [`crate::command`].

use crate::opcode::CommandSetId;
use crate::status::StatusField;

/// Log Page Identifier (Get Log Page CDW10 bits 7:0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum LogPageId {
    /// 01h Error Information.
    ErrorInformation = 0x01,
    /// 02h SMART / Health Information.
    SmartHealth = 0x02,
    /// 03h Firmware Slot Information.
    FirmwareSlot = 0x03,
    /// 04h Changed Namespace List.
    ChangedNamespaceList = 0x04,
    /// 05h Commands Supported and Effects.
    CommandsSupportedAndEffects = 0x05,
    /// 09h Endurance Group Information (endurance group scoped: LSI names
    /// the group; [`EnduranceGroupLog`]).
    EnduranceGroupInformation = 0x09,
    /// 20h FDP Configurations (endurance group scoped: LSI names the
    /// group; [`crate::fdp::FdpConfigLog`]).
    FdpConfigurations = 0x20,
    /// 21h Reclaim Unit Handle Usage (endurance group scoped;
    /// [`crate::fdp::RuhUsageLog`]).
    ReclaimUnitHandleUsage = 0x21,
    /// 22h FDP Statistics (endurance group scoped;
    /// [`crate::fdp::FdpStatsLog`]).
    FdpStatistics = 0x22,
    /// 23h FDP Events (endurance group scoped; LSP bit 0 selects host or
    /// controller events; [`crate::fdp::FdpEventsLog`]).
    FdpEvents = 0x23,
    /// BFh Changed Zone List (Zoned Namespace command set, CSI 02h).
    ChangedZoneList = 0xBF,
    /// C0h SMART / Health Information Extended: a vendor-specific LID that
    /// the OCP Datacenter NVMe SSD specification defines (see
    /// [`OcpSmartLog`]).
    OcpSmartExtended = 0xC0,
}

impl LogPageId {
    /// Decodes a LID; `None` for pages this crate does not name.
    pub const fn from_raw(v: u8) -> Option<Self> {
        Some(match v {
            0x01 => Self::ErrorInformation,
            0x02 => Self::SmartHealth,
            0x03 => Self::FirmwareSlot,
            0x04 => Self::ChangedNamespaceList,
            0x05 => Self::CommandsSupportedAndEffects,
            0x09 => Self::EnduranceGroupInformation,
            0x20 => Self::FdpConfigurations,
            0x21 => Self::ReclaimUnitHandleUsage,
            0x22 => Self::FdpStatistics,
            0x23 => Self::FdpEvents,
            0xBF => Self::ChangedZoneList,
            0xC0 => Self::OcpSmartExtended,
            _ => return None,
        })
    }

    /// The command set a command-set-specific page belongs to; `None` for
    /// pages every controller defines.
    pub const fn command_set(self) -> Option<CommandSetId> {
        match self {
            Self::ChangedZoneList => Some(CommandSetId::Zoned),
            _ => None,
        }
    }
}

/// A decoded Get Log Page command (admin opcode 02h).
///
/// Wire fields: CDW10 LID (7:0), LSP (14:8), RAE (15), NUMDL (31:16); CDW11
/// NUMDU (15:0), LSI (31:16); CDW12/CDW13 LPO, the byte offset; CDW14 UUID
/// index (6:0), OT (23), CSI (31:24).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GetLogPage {
    /// Namespace identifier (0 or FFFFFFFFh for controller-wide pages).
    pub nsid: u32,
    /// LID: log page identifier, raw (see [`GetLogPage::log_page_id`]).
    pub lid: u8,
    /// LSP: log specific parameter (7 bits).
    pub lsp: u8,
    /// RAE: retain asynchronous event.
    pub rae: bool,
    /// Dwords to transfer (NUMDU:NUMDL + 1), 1..=2^32.
    pub dwords: u64,
    /// LSI: log specific identifier.
    pub lsi: u16,
    /// LPO: byte offset into the log page (dword aligned unless OT is set).
    pub offset: u64,
    /// UUID index (7 bits).
    pub uuid_index: u8,
    /// OT: offset type; set, the offset is an entry index, not bytes.
    pub ot: bool,
    /// CSI: command set of a command-set-specific page.
    pub csi: u8,
}

impl GetLogPage {
    /// A request for `dwords` dwords of page `lid` from offset 0; the CSI is
    /// filled in for command-set-specific pages.
    pub const fn new(lid: LogPageId, nsid: u32, dwords: u64) -> Self {
        let csi = match lid.command_set() {
            Some(c) => c as u8,
            None => 0,
        };
        GetLogPage {
            nsid,
            lid: lid as u8,
            lsp: 0,
            rae: false,
            dwords,
            lsi: 0,
            offset: 0,
            uuid_index: 0,
            ot: false,
            csi,
        }
    }

    /// The named page, or `None` (the controller answers Invalid Log Page).
    pub const fn log_page_id(&self) -> Option<LogPageId> {
        LogPageId::from_raw(self.lid)
    }

    /// Bytes to transfer, (NUMD + 1) * 4; saturates at `usize::MAX` where
    /// `usize` is narrower than 35 bits.
    pub const fn length_bytes(&self) -> usize {
        let b = self.dwords.saturating_mul(4);
        if b > usize::MAX as u64 {
            usize::MAX
        } else {
            b as usize
        }
    }
}

fn get16(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}

fn get32(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

fn get64(b: &[u8], o: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[o..o + 8]);
    u64::from_le_bytes(a)
}

fn get128(b: &[u8], o: usize) -> u128 {
    let mut a = [0u8; 16];
    a.copy_from_slice(&b[o..o + 16]);
    u128::from_le_bytes(a)
}

fn put(b: &mut [u8], o: usize, v: &[u8]) {
    b[o..o + v.len()].copy_from_slice(v);
}

/// One 64-byte Error Information log entry (LID 01h).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ErrorLogEntry {
    /// Error count (7:0): unique, incrementing; 0 marks an unused entry.
    pub error_count: u64,
    /// SQID (9:8): submission queue of the failed command.
    pub sqid: u16,
    /// CID (11:10): command identifier of the failed command.
    pub cid: u16,
    /// Phase tag of the completion (bit 0 of bytes 13:12).
    pub phase: bool,
    /// Status field of the completion (bits 15:1 of bytes 13:12).
    pub status: StatusField,
    /// Parameter error location (15:14), raw: byte in the command (7:0) and
    /// bit in that byte (10:8).
    pub parameter_error_location: u16,
    /// LBA (23:16): first LBA that experienced the error.
    pub lba: u64,
    /// Namespace (27:24).
    pub nsid: u32,
    /// Vendor specific information available (28): log page identifier, 0 = none.
    pub vendor_specific: u8,
    /// Transport type (29).
    pub transport_type: u8,
    /// Command set identifier of the failed command (30).
    pub csi: u8,
    /// Opcode of the failed command (31).
    pub opcode: u8,
    /// Command specific information (39:32).
    pub command_specific: u64,
    /// Transport type specific information (41:40).
    pub transport_specific: u16,
    /// Log page version (63).
    pub version: u8,
}

impl ErrorLogEntry {
    /// Size on the wire.
    pub const SIZE: usize = 64;

    /// The wire image.
    pub fn to_bytes(&self) -> [u8; 64] {
        let mut b = [0u8; 64];
        put(&mut b, 0, &self.error_count.to_le_bytes());
        put(&mut b, 8, &self.sqid.to_le_bytes());
        put(&mut b, 10, &self.cid.to_le_bytes());
        put(&mut b, 12, &((self.status.0 << 1) | self.phase as u16).to_le_bytes());
        put(&mut b, 14, &self.parameter_error_location.to_le_bytes());
        put(&mut b, 16, &self.lba.to_le_bytes());
        put(&mut b, 24, &self.nsid.to_le_bytes());
        b[28] = self.vendor_specific;
        b[29] = self.transport_type;
        b[30] = self.csi;
        b[31] = self.opcode;
        put(&mut b, 32, &self.command_specific.to_le_bytes());
        put(&mut b, 40, &self.transport_specific.to_le_bytes());
        b[63] = self.version;
        b
    }

    /// Parses a wire image.
    pub fn from_bytes(b: &[u8; 64]) -> Self {
        let status = get16(b, 12);
        ErrorLogEntry {
            error_count: get64(b, 0),
            sqid: get16(b, 8),
            cid: get16(b, 10),
            phase: status & 1 != 0,
            status: StatusField(status >> 1),
            parameter_error_location: get16(b, 14),
            lba: get64(b, 16),
            nsid: get32(b, 24),
            vendor_specific: b[28],
            transport_type: b[29],
            csi: b[30],
            opcode: b[31],
            command_specific: get64(b, 32),
            transport_specific: get16(b, 40),
            version: b[63],
        }
    }
}

/// Endurance Group Information log page (LID 09h, 512 bytes, LSI the
/// endurance group): its host and media counters. Media units written
/// over data units written is the group's write amplification, the figure
/// an FDP drive is judged by. Counters are 128-bit on the wire; data and
/// media units are thousands of 512-byte units, rounded up
/// ([`SmartLog::data_units`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct EnduranceGroupLog {
    /// EGCW, critical warning (0): bit flags.
    pub critical_warning: u8,
    /// Available spare (3), percent.
    pub available_spare: u8,
    /// Available spare threshold (4), percent.
    pub available_spare_threshold: u8,
    /// Percentage used (5).
    pub percentage_used: u8,
    /// Endurance estimate (47:32), data units the group may still take;
    /// 0 when not reported.
    pub endurance_estimate: u128,
    /// Data units read (63:48).
    pub data_units_read: u128,
    /// Data units written (79:64): what hosts wrote.
    pub data_units_written: u128,
    /// Media units written (95:80): what the media took, garbage
    /// collection's moves included.
    pub media_units_written: u128,
    /// Host read commands (111:96).
    pub host_read_commands: u128,
    /// Host write commands (127:112).
    pub host_write_commands: u128,
    /// Media and data integrity errors (143:128).
    pub media_errors: u128,
    /// Number of error information log entries (159:144).
    pub error_log_entries: u128,
    /// Total endurance group capacity (175:160), bytes.
    pub total_capacity: u128,
    /// Unallocated endurance group capacity (191:176), bytes.
    pub unallocated_capacity: u128,
}

impl EnduranceGroupLog {
    /// Size on the wire.
    pub const SIZE: usize = 512;

    fn counters(&self) -> [u128; 10] {
        [
            self.endurance_estimate,
            self.data_units_read,
            self.data_units_written,
            self.media_units_written,
            self.host_read_commands,
            self.host_write_commands,
            self.media_errors,
            self.error_log_entries,
            self.total_capacity,
            self.unallocated_capacity,
        ]
    }

    /// The wire image.
    pub fn to_bytes(&self) -> [u8; 512] {
        let mut b = [0u8; 512];
        b[0] = self.critical_warning;
        b[3] = self.available_spare;
        b[4] = self.available_spare_threshold;
        b[5] = self.percentage_used;
        for (i, c) in self.counters().iter().enumerate() {
            put(&mut b, 32 + 16 * i, &c.to_le_bytes());
        }
        b
    }

    /// Parses a wire image.
    pub fn from_bytes(b: &[u8; 512]) -> Self {
        let c = |i: usize| get128(b, 32 + 16 * i);
        EnduranceGroupLog {
            critical_warning: b[0],
            available_spare: b[3],
            available_spare_threshold: b[4],
            percentage_used: b[5],
            endurance_estimate: c(0),
            data_units_read: c(1),
            data_units_written: c(2),
            media_units_written: c(3),
            host_read_commands: c(4),
            host_write_commands: c(5),
            media_errors: c(6),
            error_log_entries: c(7),
            total_capacity: c(8),
            unallocated_capacity: c(9),
        }
    }

    /// Media units written over data units written; `None` before any.
    pub fn write_amplification(&self) -> Option<f64> {
        (self.data_units_written > 0)
            .then(|| self.media_units_written as f64 / self.data_units_written as f64)
    }
}

/// SMART / Health Information log page (LID 02h, 512 bytes), the fields
/// znskit reports. Counters are 128-bit on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SmartLog {
    /// Critical warning (0): bit flags.
    pub critical_warning: u8,
    /// Composite temperature (2:1), Kelvin.
    pub composite_temperature: u16,
    /// Available spare (3), percent.
    pub available_spare: u8,
    /// Available spare threshold (4), percent.
    pub available_spare_threshold: u8,
    /// Percentage used (5).
    pub percentage_used: u8,
    /// Data units read (47:32), thousands of 512-byte units.
    pub data_units_read: u128,
    /// Data units written (63:48), thousands of 512-byte units.
    pub data_units_written: u128,
    /// Host read commands (79:64).
    pub host_read_commands: u128,
    /// Host write commands (95:80).
    pub host_write_commands: u128,
    /// Controller busy time (111:96), minutes.
    pub controller_busy_time: u128,
    /// Power cycles (127:112).
    pub power_cycles: u128,
    /// Power on hours (143:128).
    pub power_on_hours: u128,
    /// Unsafe shutdowns (159:144).
    pub unsafe_shutdowns: u128,
    /// Media and data integrity errors (175:160).
    pub media_errors: u128,
    /// Number of error information log entries (191:176).
    pub error_log_entries: u128,
}

impl SmartLog {
    /// Size on the wire.
    pub const SIZE: usize = 512;

    /// Data units for `bytes` bytes: thousands of 512-byte units, rounded up.
    pub const fn data_units(bytes: u128) -> u128 {
        bytes.div_ceil(512 * 1000)
    }

    /// The wire image.
    pub fn to_bytes(&self) -> [u8; 512] {
        let mut b = [0u8; 512];
        b[0] = self.critical_warning;
        put(&mut b, 1, &self.composite_temperature.to_le_bytes());
        b[3] = self.available_spare;
        b[4] = self.available_spare_threshold;
        b[5] = self.percentage_used;
        let counters = [
            self.data_units_read,
            self.data_units_written,
            self.host_read_commands,
            self.host_write_commands,
            self.controller_busy_time,
            self.power_cycles,
            self.power_on_hours,
            self.unsafe_shutdowns,
            self.media_errors,
            self.error_log_entries,
        ];
        for (i, c) in counters.iter().enumerate() {
            put(&mut b, 32 + 16 * i, &c.to_le_bytes());
        }
        b
    }

    /// Parses a wire image.
    pub fn from_bytes(b: &[u8; 512]) -> Self {
        let c = |i: usize| get128(b, 32 + 16 * i);
        SmartLog {
            critical_warning: b[0],
            composite_temperature: get16(b, 1),
            available_spare: b[3],
            available_spare_threshold: b[4],
            percentage_used: b[5],
            data_units_read: c(0),
            data_units_written: c(1),
            host_read_commands: c(2),
            host_write_commands: c(3),
            controller_busy_time: c(4),
            power_cycles: c(5),
            power_on_hours: c(6),
            unsafe_shutdowns: c(7),
            media_errors: c(8),
            error_log_entries: c(9),
        }
    }
}

/// SMART / Health Information Extended log page (LID C0h, 512 bytes) of
/// the OCP Datacenter NVMe SSD specification: the fields znskit reports.
/// Every other field is zero on the wire, as the specification has it for
/// what a device does not support. Counters are little-endian; the two
/// media counters count bytes (not data units) in 128 bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OcpSmartLog {
    /// Physical Media Units Written (15:0): bytes written to the media,
    /// the host's and the device's own (garbage collection, relocation).
    pub media_bytes_written: u128,
    /// Physical Media Units Read (31:16): bytes read from the media.
    pub media_bytes_read: u128,
    /// Maximum User Data Erase Count (91:88): erases of the most erased
    /// user data block.
    pub max_erase_count: u32,
    /// Minimum User Data Erase Count (95:92): erases of the least erased
    /// user data block.
    pub min_erase_count: u32,
    /// DSSD Specification Version the page follows: major (103), minor
    /// (102:101), point (100:99), errata (98).
    pub dssd_version: (u8, u16, u16, u8),
    /// Log Page Version (495:494).
    pub version: u16,
    /// Log Page GUID (511:496), as a little-endian 128-bit value.
    pub guid: u128,
}

impl OcpSmartLog {
    /// Size on the wire.
    pub const SIZE: usize = 512;
    /// The page's GUID (AFD514C97C6F4F9CA4F2BFEA2810AFC5); hosts check it
    /// before they trust the page.
    pub const GUID: u128 = 0xAFD5_14C9_7C6F_4F9C_A4F2_BFEA_2810_AFC5;
    /// The Log Page Version of the specification's version 2.0 layout.
    pub const VERSION: u16 = 3;

    /// A page of the specification's 2.0 layout with every counter zero.
    pub const fn new() -> Self {
        OcpSmartLog {
            media_bytes_written: 0,
            media_bytes_read: 0,
            max_erase_count: 0,
            min_erase_count: 0,
            dssd_version: (2, 0, 0, 0),
            version: Self::VERSION,
            guid: Self::GUID,
        }
    }

    /// Whether the page carries the GUID of this page.
    pub const fn guid_matches(&self) -> bool {
        self.guid == Self::GUID
    }

    /// The wire image.
    pub fn to_bytes(&self) -> [u8; 512] {
        let mut b = [0u8; 512];
        put(&mut b, 0, &self.media_bytes_written.to_le_bytes());
        put(&mut b, 16, &self.media_bytes_read.to_le_bytes());
        put(&mut b, 88, &self.max_erase_count.to_le_bytes());
        put(&mut b, 92, &self.min_erase_count.to_le_bytes());
        let (major, minor, point, errata) = self.dssd_version;
        b[98] = errata;
        put(&mut b, 99, &point.to_le_bytes());
        put(&mut b, 101, &minor.to_le_bytes());
        b[103] = major;
        put(&mut b, 494, &self.version.to_le_bytes());
        put(&mut b, 496, &self.guid.to_le_bytes());
        b
    }

    /// Parses a wire image.
    pub fn from_bytes(b: &[u8; 512]) -> Self {
        OcpSmartLog {
            media_bytes_written: get128(b, 0),
            media_bytes_read: get128(b, 16),
            max_erase_count: get32(b, 88),
            min_erase_count: get32(b, 92),
            dssd_version: (b[103], get16(b, 101), get16(b, 99), b[98]),
            version: get16(b, 494),
            guid: get128(b, 496),
        }
    }
}

impl Default for OcpSmartLog {
    fn default() -> Self {
        Self::new()
    }
}

/// Changed Zone List log page (LID BFh, CSI 02h, 4096 bytes): zones whose
/// Zone Descriptor Extension changed or that a controller finished, by ZSLBA.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ChangedZoneList {
    /// Zone identifiers (start LBAs); empty when `overflow` is set.
    pub zones: Vec<u64>,
    /// More than 511 zones changed (NRZID = FFFFh); the host must scan.
    pub overflow: bool,
}

impl ChangedZoneList {
    /// Size on the wire.
    pub const SIZE: usize = 4096;
    /// Most zone identifiers the page lists.
    pub const MAX_ZONES: usize = 511;
    /// NRZID value meaning more than 511 zones changed.
    pub const OVERFLOW: u16 = 0xFFFF;

    /// A list of `zones`; more than 511 becomes an overflow page.
    pub fn from_zones(zones: &[u64]) -> Self {
        if zones.len() > Self::MAX_ZONES {
            ChangedZoneList { zones: Vec::new(), overflow: true }
        } else {
            ChangedZoneList { zones: zones.to_vec(), overflow: false }
        }
    }

    /// The wire image: NRZID (1:0), then the identifiers from byte 8.
    /// Overflow (or more than 511 zones) writes NRZID FFFFh and no identifiers.
    pub fn to_bytes(&self) -> Box<[u8; 4096]> {
        let mut b = Box::new([0u8; 4096]);
        if self.overflow || self.zones.len() > Self::MAX_ZONES {
            put(&mut b[..], 0, &Self::OVERFLOW.to_le_bytes());
            return b;
        }
        put(&mut b[..], 0, &(self.zones.len() as u16).to_le_bytes());
        for (i, z) in self.zones.iter().enumerate() {
            put(&mut b[..], 8 + 8 * i, &z.to_le_bytes());
        }
        b
    }

    /// Parses a wire image. An NRZID above 511 other than FFFFh is not valid
    /// and reads as overflow too.
    pub fn from_bytes(b: &[u8; 4096]) -> Self {
        let n = get16(b, 0) as usize;
        if n > Self::MAX_ZONES {
            return ChangedZoneList { zones: Vec::new(), overflow: true };
        }
        ChangedZoneList { zones: (0..n).map(|i| get64(b, 8 + 8 * i)).collect(), overflow: false }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::StatusCode;

    fn at(b: &[u8], off: usize, want: &[u8]) {
        assert_eq!(&b[off..off + want.len()], want, "bytes at offset {off}");
    }

    #[test]
    fn log_page_ids() {
        let all = [
            (LogPageId::ErrorInformation, 0x01),
            (LogPageId::SmartHealth, 0x02),
            (LogPageId::FirmwareSlot, 0x03),
            (LogPageId::ChangedNamespaceList, 0x04),
            (LogPageId::CommandsSupportedAndEffects, 0x05),
            (LogPageId::EnduranceGroupInformation, 0x09),
            (LogPageId::FdpConfigurations, 0x20),
            (LogPageId::ReclaimUnitHandleUsage, 0x21),
            (LogPageId::FdpStatistics, 0x22),
            (LogPageId::FdpEvents, 0x23),
            (LogPageId::ChangedZoneList, 0xBF),
            (LogPageId::OcpSmartExtended, 0xC0),
        ];
        for (l, v) in all {
            assert_eq!(l as u8, v);
            assert_eq!(LogPageId::from_raw(v), Some(l));
        }
        assert_eq!(LogPageId::from_raw(0xC0), Some(LogPageId::OcpSmartExtended));
        assert_eq!(LogPageId::from_raw(0xC1), None);
        assert_eq!(LogPageId::OcpSmartExtended.command_set(), None);
        assert_eq!(LogPageId::ChangedZoneList.command_set(), Some(CommandSetId::Zoned));
        let g = GetLogPage::new(LogPageId::ChangedZoneList, 1, 1024);
        assert_eq!((g.csi, g.length_bytes()), (2, 4096));
        assert_eq!(g.log_page_id(), Some(LogPageId::ChangedZoneList));
        assert_eq!(GetLogPage::new(LogPageId::SmartHealth, 0, 128).csi, 0);
    }

    #[test]
    fn error_log_entry_fields_sit_at_their_offsets() {
        let e = ErrorLogEntry {
            error_count: 0x0102_0304_0506_0708,
            sqid: 0x1112,
            cid: 0x1314,
            phase: true,
            status: StatusField::new(StatusCode::ZoneIsFull.status(), true, true),
            parameter_error_location: 0x0234,
            lba: 0x2122_2324_2526_2728,
            nsid: 0x3132_3334,
            vendor_specific: 0x41,
            transport_type: 0x42,
            csi: 0x02,
            opcode: 0x7D,
            command_specific: 0x5152_5354_5556_5758,
            transport_specific: 0x6162,
            version: 1,
        };
        let b = e.to_bytes();
        at(&b, 0, &0x0102_0304_0506_0708u64.to_le_bytes());
        at(&b, 8, &0x1112u16.to_le_bytes());
        at(&b, 10, &0x1314u16.to_le_bytes());
        let sf = 0xB9u16 | 1 << 8 | 1 << 13 | 1 << 14;
        at(&b, 12, &(sf << 1 | 1).to_le_bytes());
        at(&b, 14, &0x0234u16.to_le_bytes());
        at(&b, 16, &0x2122_2324_2526_2728u64.to_le_bytes());
        at(&b, 24, &0x3132_3334u32.to_le_bytes());
        at(&b, 28, &[0x41, 0x42, 0x02, 0x7D]);
        at(&b, 32, &0x5152_5354_5556_5758u64.to_le_bytes());
        at(&b, 40, &0x6162u16.to_le_bytes());
        assert!(b[42..63].iter().all(|&x| x == 0));
        at(&b, 63, &[1]);
        let back = ErrorLogEntry::from_bytes(&b);
        assert_eq!(back, e);
        assert_eq!(back.status.status(), StatusCode::ZoneIsFull.status());
    }

    #[test]
    fn endurance_group_log_fields_sit_at_their_offsets() {
        let e = EnduranceGroupLog {
            critical_warning: 0x01,
            available_spare: 100,
            available_spare_threshold: 10,
            percentage_used: 7,
            endurance_estimate: 0x0101,
            data_units_read: 0x0202,
            data_units_written: 0x0303,
            media_units_written: 0x0404_0000_0000_0000_0000_0000_0000_0004,
            host_read_commands: 0x0505,
            host_write_commands: 0x0606,
            media_errors: 0x0707,
            error_log_entries: 0x0808,
            total_capacity: 0x0909,
            unallocated_capacity: 0x0A0A,
        };
        let b = e.to_bytes();
        at(&b, 0, &[0x01, 0, 0, 100, 10, 7]);
        at(&b, 32, &0x0101u128.to_le_bytes());
        at(&b, 48, &0x0202u128.to_le_bytes());
        at(&b, 64, &0x0303u128.to_le_bytes());
        at(&b, 80, &0x0404_0000_0000_0000_0000_0000_0000_0004u128.to_le_bytes());
        at(&b, 96, &0x0505u128.to_le_bytes());
        at(&b, 112, &0x0606u128.to_le_bytes());
        at(&b, 128, &0x0707u128.to_le_bytes());
        at(&b, 144, &0x0808u128.to_le_bytes());
        at(&b, 160, &0x0909u128.to_le_bytes());
        at(&b, 176, &0x0A0Au128.to_le_bytes());
        assert!(b[6..32].iter().chain(&b[192..]).all(|&x| x == 0));
        assert_eq!(EnduranceGroupLog::from_bytes(&b), e);
        let waf = EnduranceGroupLog { data_units_written: 4, media_units_written: 6, ..e };
        assert_eq!(waf.write_amplification(), Some(1.5));
        let none = EnduranceGroupLog { data_units_written: 0, ..e };
        assert_eq!(none.write_amplification(), None);
    }

    #[test]
    fn smart_log_fields_sit_at_their_offsets() {
        let s = SmartLog {
            critical_warning: 0x04,
            composite_temperature: 0x0136,
            available_spare: 100,
            available_spare_threshold: 10,
            percentage_used: 3,
            data_units_read: 0x0101_0000_0000_0000_0000_0000_0000_0001,
            data_units_written: 0x0202,
            host_read_commands: 0x0303,
            host_write_commands: 0x0404,
            controller_busy_time: 0x0505,
            power_cycles: 0x0606,
            power_on_hours: 0x0707,
            unsafe_shutdowns: 0x0808,
            media_errors: 0x0909,
            error_log_entries: 0x0A0A,
        };
        let b = s.to_bytes();
        at(&b, 0, &[0x04, 0x36, 0x01, 100, 10, 3]);
        at(&b, 32, &0x0101_0000_0000_0000_0000_0000_0000_0001u128.to_le_bytes());
        at(&b, 48, &0x0202u128.to_le_bytes());
        at(&b, 64, &0x0303u128.to_le_bytes());
        at(&b, 80, &0x0404u128.to_le_bytes());
        at(&b, 96, &0x0505u128.to_le_bytes());
        at(&b, 112, &0x0606u128.to_le_bytes());
        at(&b, 128, &0x0707u128.to_le_bytes());
        at(&b, 144, &0x0808u128.to_le_bytes());
        at(&b, 160, &0x0909u128.to_le_bytes());
        at(&b, 176, &0x0A0Au128.to_le_bytes());
        assert!(b[6..32].iter().chain(&b[192..]).all(|&x| x == 0));
        assert_eq!(SmartLog::from_bytes(&b), s);
        assert_eq!(SmartLog::data_units(1), 1);
        assert_eq!(SmartLog::data_units(512_000), 1);
        assert_eq!(SmartLog::data_units(512_001), 2);
    }

    #[test]
    fn ocp_smart_log_fields_sit_at_their_offsets() {
        let s = OcpSmartLog {
            media_bytes_written: 0x0102_0000_0000_0000_0000_0000_0000_0003,
            media_bytes_read: 0x0405,
            max_erase_count: 0x0607_0809,
            min_erase_count: 0x0A0B,
            ..OcpSmartLog::new()
        };
        let b = s.to_bytes();
        at(&b, 0, &0x0102_0000_0000_0000_0000_0000_0000_0003u128.to_le_bytes());
        at(&b, 16, &0x0405u128.to_le_bytes());
        at(&b, 88, &[0x09, 0x08, 0x07, 0x06, 0x0B, 0x0A, 0, 0]);
        // DSSD 2.0: errata, point, minor, major.
        at(&b, 98, &[0, 0, 0, 0, 0, 2]);
        at(&b, 494, &[3, 0]);
        // The GUID's bytes as hosts compare them, lowest first.
        let guid = [
            0xC5, 0xAF, 0x10, 0x28, 0xEA, 0xBF, 0xF2, 0xA4, 0x9C, 0x4F, 0x6F, 0x7C, 0xC9, 0x14,
            0xD5, 0xAF,
        ];
        at(&b, 496, &guid);
        let zero = |r: std::ops::Range<usize>| b[r].iter().all(|&x| x == 0);
        assert!(zero(32..88) && zero(96..98) && zero(104..494));
        let back = OcpSmartLog::from_bytes(&b);
        assert_eq!(back, s);
        assert!(back.guid_matches());
        assert!(!OcpSmartLog::from_bytes(&[0; 512]).guid_matches());
        assert_eq!(OcpSmartLog::default(), OcpSmartLog::new());
    }

    #[test]
    fn changed_zone_list() {
        let l = ChangedZoneList::from_zones(&[0, 0x8000, 0x0102_0304_0506_0708]);
        let b = l.to_bytes();
        at(&b[..], 0, &[3, 0, 0, 0, 0, 0, 0, 0]);
        at(&b[..], 8, &0u64.to_le_bytes());
        at(&b[..], 16, &0x8000u64.to_le_bytes());
        at(&b[..], 24, &0x0102_0304_0506_0708u64.to_le_bytes());
        assert!(b[32..].iter().all(|&x| x == 0));
        assert_eq!(ChangedZoneList::from_bytes(&b), l);

        let full: Vec<u64> = (0..511).map(|i| i * 0x1000).collect();
        let l = ChangedZoneList::from_zones(&full);
        let b = l.to_bytes();
        at(&b[..], 0, &511u16.to_le_bytes());
        at(&b[..], 4088, &(510u64 * 0x1000).to_le_bytes());
        assert_eq!(ChangedZoneList::from_bytes(&b), l);

        let many: Vec<u64> = (0..512).collect();
        let l = ChangedZoneList::from_zones(&many);
        assert!(l.overflow && l.zones.is_empty());
        let b = l.to_bytes();
        at(&b[..], 0, &[0xFF, 0xFF]);
        assert!(b[2..].iter().all(|&x| x == 0));
        assert_eq!(ChangedZoneList::from_bytes(&b), l);
        let mut bad = [0u8; 4096];
        bad[0..2].copy_from_slice(&600u16.to_le_bytes());
        assert!(ChangedZoneList::from_bytes(&bad).overflow);
    }
}
