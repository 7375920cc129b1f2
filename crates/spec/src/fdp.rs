//! Flexible Data Placement (NVMe TP4146): the host tags writes with a
//! placement identifier, and the controller keeps the data of each
//! reclaim unit handle in reclaim units of its own.
//!
//! Wire formats only: the directive fields of a write, the four endurance
//! group scoped log pages (20h FDP Configurations, 21h Reclaim Unit Handle
//! Usage, 22h FDP Statistics, 23h FDP Events), the features 1Dh (Flexible
//! Data Placement) and 1Eh (FDP Events), and the I/O Management Receive
//! (12h) and Send (1Dh) commands.
//!
//! Counts are real counts here; the fields that are 0's based on the wire
//! (NUMFDPC, MAXPIDS, the number of placement identifiers of a Reclaim Unit
//! Handle Update, NUMD) are converted at the wire.

use crate::command::CommandError;
use crate::features::FeatureId;
use crate::log::{GetLogPage, LogPageId};
use crate::opcode::IoOpcode;
use crate::sqe::SubmissionEntry;

/// Directive type 2h, Data Placement: a write's DTYPE (CDW12 23:20) when
/// its DSPEC (CDW13 31:16) is a placement identifier.
pub const DTYPE_DATA_PLACEMENT: u8 = 2;

/// A log page, or its layout, that does not decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FdpDecodeError {
    /// The data ends before the structure does.
    #[error("{what}: {need} bytes needed, {have} given")]
    Truncated {
        /// The structure.
        what: &'static str,
        /// Bytes the structure needs.
        need: usize,
        /// Bytes given.
        have: usize,
    },
    /// A configuration descriptor's size (DSZE) is smaller than its fields.
    #[error(
        "FDP configuration descriptor {index}: size {size} is below its {min} bytes of fields"
    )]
    DescriptorSize {
        /// The descriptor's index.
        index: usize,
        /// Its DSZE.
        size: usize,
        /// What its fields take.
        min: usize,
    },
}

fn need(what: &'static str, b: &[u8], n: usize) -> Result<(), FdpDecodeError> {
    if b.len() < n {
        Err(FdpDecodeError::Truncated { what, need: n, have: b.len() })
    } else {
        Ok(())
    }
}

fn get16(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}

fn get32(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().expect("4 bytes"))
}

fn get64(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes"))
}

fn get128(b: &[u8], o: usize) -> u128 {
    u128::from_le_bytes(b[o..o + 16].try_into().expect("16 bytes"))
}

fn put(b: &mut [u8], o: usize, v: &[u8]) {
    b[o..o + v.len()].copy_from_slice(v);
}

// ---------------------------------------------------------------------------
// Placement identifiers
// ---------------------------------------------------------------------------

/// A placement identifier (a placed write's DSPEC): the reclaim group in
/// its upper RGIF bits, the placement handle in the rest. With RGIF 0 (one
/// reclaim group) all 16 bits are the placement handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PlacementId {
    /// Reclaim group identifier.
    pub reclaim_group: u16,
    /// Placement handle: an index into the namespace's list of reclaim
    /// unit handles.
    pub handle: u16,
}

impl PlacementId {
    /// The 16-bit identifier with `rgif` bits of reclaim group (0..=15);
    /// `None` when a part does not fit its bits.
    pub const fn encode(self, rgif: u8) -> Option<u16> {
        if rgif > 15 {
            return None;
        }
        let handle_bits = 16 - rgif as u32;
        let fits_group = (self.reclaim_group as u32) < (1u32 << rgif);
        let fits_handle = (self.handle as u32) < (1u32 << handle_bits);
        if !fits_group || !fits_handle {
            return None;
        }
        if rgif == 0 {
            return Some(self.handle);
        }
        Some((self.reclaim_group << handle_bits) | self.handle)
    }

    /// Splits a 16-bit identifier with `rgif` bits of reclaim group
    /// (values above 15 read as 15).
    pub const fn decode(pid: u16, rgif: u8) -> Self {
        let rgif = if rgif > 15 { 15 } else { rgif };
        if rgif == 0 {
            return PlacementId { reclaim_group: 0, handle: pid };
        }
        let handle_bits = 16 - rgif as u32;
        PlacementId {
            reclaim_group: pid >> handle_bits,
            handle: pid & ((1u32 << handle_bits) - 1) as u16,
        }
    }
}

// ---------------------------------------------------------------------------
// Log page 20h: FDP Configurations
// ---------------------------------------------------------------------------

/// A Get Log Page of an endurance group scoped FDP page: LSI (CDW11 31:16)
/// names the endurance group.
pub const fn get_log_page(lid: LogPageId, endgid: u16, dwords: u64) -> GetLogPage {
    let mut g = GetLogPage::new(lid, 0, dwords);
    g.lsi = endgid;
    g
}

/// FDPA, a configuration's attributes: RGIF (3:0), the volatile write
/// cache bit (4), the configuration is valid (7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FdpAttributes {
    /// RGIF: bits of a placement identifier that name the reclaim group.
    pub rgif: u8,
    /// FDPVWC: the configuration has a volatile write cache.
    pub volatile_write_cache: bool,
    /// The configuration is valid.
    pub valid: bool,
}

impl FdpAttributes {
    /// The wire byte.
    pub const fn to_byte(self) -> u8 {
        (self.rgif & 0xF) | (self.volatile_write_cache as u8) << 4 | (self.valid as u8) << 7
    }

    /// Parses the wire byte.
    pub const fn from_byte(b: u8) -> Self {
        FdpAttributes {
            rgif: b & 0xF,
            volatile_write_cache: b & (1 << 4) != 0,
            valid: b & (1 << 7) != 0,
        }
    }
}

/// Reclaim unit handle type (RUHT, byte 0 of a handle's descriptor).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum RuhType {
    /// 1h Initially Isolated: data written through the handle is kept
    /// apart from other handles' data when written, but garbage collection
    /// may mix it with other initially isolated handles' data.
    InitiallyIsolated = 1,
    /// 2h Persistently Isolated: the handle's data stays apart from every
    /// other handle's, through garbage collection too.
    PersistentlyIsolated = 2,
}

impl RuhType {
    /// Decodes RUHT; `None` for reserved values.
    pub const fn from_raw(v: u8) -> Option<Self> {
        match v {
            1 => Some(Self::InitiallyIsolated),
            2 => Some(Self::PersistentlyIsolated),
            _ => None,
        }
    }
}

/// One FDP configuration descriptor of the FDP Configurations log page.
///
/// Wire layout: DSZE (1:0, the descriptor's size in bytes), FDPA (2), VSS
/// (3, vendor specific bytes), NRG (7:4), NRUH (9:8), MAXPIDS (11:10, 0's
/// based), NNSS (15:12), RUNS (23:16, bytes), ERUTL (27:24, seconds),
/// reserved to byte 63, then NRUH 4-byte reclaim unit handle descriptors
/// (RUHT in byte 0), then VSS bytes. This crate writes DSZE rounded up to
/// 8 bytes; readers step by DSZE.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct FdpConfigDescriptor {
    /// FDPA.
    pub attributes: FdpAttributes,
    /// NRG: reclaim groups.
    pub reclaim_groups: u32,
    /// MAXPIDS + 1: most placement identifiers a namespace may have
    /// (1..=65536).
    pub max_placement_ids: u32,
    /// NNSS: namespaces the configuration supports.
    pub namespaces: u32,
    /// RUNS: reclaim unit nominal size in bytes.
    pub reclaim_unit_bytes: u64,
    /// ERUTL: estimated reclaim unit time limit in seconds (0: none).
    pub time_limit_secs: u32,
    /// RUHT of each reclaim unit handle, raw ([`RuhType::from_raw`]); NRUH
    /// is their number.
    pub handle_types: Vec<u8>,
    /// Vendor specific bytes (VSS of them).
    pub vendor: Vec<u8>,
}

impl FdpConfigDescriptor {
    /// Bytes before the reclaim unit handle descriptors.
    pub const FIXED: usize = 64;

    /// DSZE: the descriptor's size as written, rounded up to 8 bytes.
    pub fn size(&self) -> usize {
        (Self::FIXED + 4 * self.handle_types.len() + self.vendor.len()).next_multiple_of(8)
    }

    fn write(&self, b: &mut Vec<u8>) {
        let at = b.len();
        b.resize(at + self.size(), 0);
        let d = &mut b[at..];
        put(d, 0, &(self.size() as u16).to_le_bytes());
        d[2] = self.attributes.to_byte();
        d[3] = self.vendor.len() as u8;
        put(d, 4, &self.reclaim_groups.to_le_bytes());
        put(d, 8, &(self.handle_types.len() as u16).to_le_bytes());
        put(d, 10, &(self.max_placement_ids.saturating_sub(1) as u16).to_le_bytes());
        put(d, 12, &self.namespaces.to_le_bytes());
        put(d, 16, &self.reclaim_unit_bytes.to_le_bytes());
        put(d, 24, &self.time_limit_secs.to_le_bytes());
        for (i, t) in self.handle_types.iter().enumerate() {
            d[Self::FIXED + 4 * i] = *t;
        }
        let v = Self::FIXED + 4 * self.handle_types.len();
        put(d, v, &self.vendor);
    }

    fn read(b: &[u8], index: usize) -> Result<(Self, usize), FdpDecodeError> {
        need("FDP configuration descriptor", b, Self::FIXED)?;
        let size = get16(b, 0) as usize;
        let handles = get16(b, 8) as usize;
        let vss = b[3] as usize;
        let min = Self::FIXED + 4 * handles + vss;
        if size < min {
            return Err(FdpDecodeError::DescriptorSize { index, size, min });
        }
        need("FDP configuration descriptor", b, size)?;
        let d = FdpConfigDescriptor {
            attributes: FdpAttributes::from_byte(b[2]),
            reclaim_groups: get32(b, 4),
            max_placement_ids: get16(b, 10) as u32 + 1,
            namespaces: get32(b, 12),
            reclaim_unit_bytes: get64(b, 16),
            time_limit_secs: get32(b, 24),
            handle_types: (0..handles).map(|i| b[Self::FIXED + 4 * i]).collect(),
            vendor: b[Self::FIXED + 4 * handles..min].to_vec(),
        };
        Ok((d, size))
    }
}

/// The FDP Configurations log page (LID 20h): a 16-byte header (NUMFDPC
/// (1:0, 0's based), version (2), size of the whole page in bytes (7:4))
/// and the configuration descriptors.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct FdpConfigLog {
    /// Log page version.
    pub version: u8,
    /// The configurations (at least one on the wire: NUMFDPC is 0's
    /// based).
    pub configs: Vec<FdpConfigDescriptor>,
}

impl FdpConfigLog {
    /// Header bytes.
    pub const HEADER: usize = 16;

    /// The page.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = vec![0u8; Self::HEADER];
        for c in &self.configs {
            c.write(&mut b);
        }
        let n = self.configs.len().saturating_sub(1) as u16;
        let size = b.len() as u32;
        put(&mut b, 0, &n.to_le_bytes());
        b[2] = self.version;
        put(&mut b, 4, &size.to_le_bytes());
        b
    }

    /// Parses a page (its header's NUMFDPC descriptors).
    pub fn from_bytes(b: &[u8]) -> Result<Self, FdpDecodeError> {
        need("FDP configurations header", b, Self::HEADER)?;
        let n = get16(b, 0) as usize + 1;
        let mut at = Self::HEADER;
        let mut configs = Vec::with_capacity(n);
        for index in 0..n {
            let (d, size) = FdpConfigDescriptor::read(&b[at.min(b.len())..], index)?;
            configs.push(d);
            at += size;
        }
        Ok(FdpConfigLog { version: b[2], configs })
    }

    /// The page size its header gives (bytes 7:4).
    pub fn size_of(b: &[u8]) -> Option<u32> {
        (b.len() >= 8).then(|| get32(b, 4))
    }
}

// ---------------------------------------------------------------------------
// Log page 21h: Reclaim Unit Handle Usage
// ---------------------------------------------------------------------------

/// Reclaim unit handle attributes (RUHA, byte 0 of a usage descriptor):
/// how the handle is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum RuhAttributes {
    /// 0h: no namespace uses the handle.
    Unused = 0,
    /// 1h: a namespace uses it, as the host specified.
    HostSpecified = 1,
    /// 2h: a namespace uses it, as the controller chose.
    ControllerSpecified = 2,
}

impl RuhAttributes {
    /// Decodes RUHA; `None` for reserved values.
    pub const fn from_raw(v: u8) -> Option<Self> {
        match v {
            0 => Some(Self::Unused),
            1 => Some(Self::HostSpecified),
            2 => Some(Self::ControllerSpecified),
            _ => None,
        }
    }
}

/// The Reclaim Unit Handle Usage log page (LID 21h): NRUH (1:0), reserved
/// to byte 7, then one 8-byte descriptor per handle (RUHA in byte 0).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct RuhUsageLog {
    /// RUHA of each handle, raw ([`RuhAttributes::from_raw`]).
    pub attributes: Vec<u8>,
}

impl RuhUsageLog {
    /// Header bytes.
    pub const HEADER: usize = 8;
    /// Bytes per descriptor.
    pub const DESCRIPTOR: usize = 8;

    /// The page.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = vec![0u8; Self::HEADER + Self::DESCRIPTOR * self.attributes.len()];
        put(&mut b, 0, &(self.attributes.len() as u16).to_le_bytes());
        for (i, a) in self.attributes.iter().enumerate() {
            b[Self::HEADER + Self::DESCRIPTOR * i] = *a;
        }
        b
    }

    /// Parses a page.
    pub fn from_bytes(b: &[u8]) -> Result<Self, FdpDecodeError> {
        need("reclaim unit handle usage header", b, Self::HEADER)?;
        let n = get16(b, 0) as usize;
        need("reclaim unit handle usage", b, Self::HEADER + Self::DESCRIPTOR * n)?;
        let attributes = (0..n).map(|i| b[Self::HEADER + Self::DESCRIPTOR * i]).collect();
        Ok(RuhUsageLog { attributes })
    }
}

// ---------------------------------------------------------------------------
// Log page 22h: FDP Statistics
// ---------------------------------------------------------------------------

/// The FDP Statistics log page (LID 22h, 64 bytes): three 16-byte
/// little-endian counters of the endurance group, the rest reserved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FdpStatsLog {
    /// HBMW (15:0): host bytes with metadata written.
    pub host_bytes_written: u128,
    /// MBMW (31:16): media bytes with metadata written (the host's and
    /// those the controller wrote on its own, such as garbage collection's).
    pub media_bytes_written: u128,
    /// MBE (47:32): media bytes erased.
    pub media_bytes_erased: u128,
}

impl FdpStatsLog {
    /// Size on the wire.
    pub const SIZE: usize = 64;

    /// The page.
    pub fn to_bytes(&self) -> [u8; 64] {
        let mut b = [0u8; 64];
        put(&mut b, 0, &self.host_bytes_written.to_le_bytes());
        put(&mut b, 16, &self.media_bytes_written.to_le_bytes());
        put(&mut b, 32, &self.media_bytes_erased.to_le_bytes());
        b
    }

    /// Parses the page.
    pub fn from_bytes(b: &[u8; 64]) -> Self {
        FdpStatsLog {
            host_bytes_written: get128(b, 0),
            media_bytes_written: get128(b, 16),
            media_bytes_erased: get128(b, 32),
        }
    }
}

// ---------------------------------------------------------------------------
// Log page 23h: FDP Events
// ---------------------------------------------------------------------------

/// LSP of the FDP Events page (CDW10 14:8): bit 0 set asks for host
/// events, clear for controller events.
pub const FDP_EVENTS_LSP_HOST: u8 = 1;

/// FDP event types. Types below 80h are host events (caused by what the
/// host did), from 80h controller events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum FdpEventType {
    /// 00h Reclaim Unit Not Fully Written: a reclaim unit handle moved to
    /// a new reclaim unit before the old one was full (Reclaim Unit Handle
    /// Update).
    RuNotFullyWritten = 0x00,
    /// 01h Reclaim Unit Time Limit Exceeded.
    RuTimeLimitExceeded = 0x01,
    /// 02h Controller Level Reset Modified Reclaim Unit Handles.
    ControllerResetModifiedRuhs = 0x02,
    /// 03h Invalid Placement Identifier: a write named a placement
    /// identifier the namespace does not have.
    InvalidPlacementId = 0x03,
    /// 80h Media Reallocated: the controller moved data (garbage
    /// collection).
    MediaReallocated = 0x80,
    /// 81h Implicitly Modified Reclaim Unit Handle.
    ImplicitlyModifiedRuh = 0x81,
}

impl FdpEventType {
    /// Every event type.
    pub const ALL: [FdpEventType; 6] = [
        Self::RuNotFullyWritten,
        Self::RuTimeLimitExceeded,
        Self::ControllerResetModifiedRuhs,
        Self::InvalidPlacementId,
        Self::MediaReallocated,
        Self::ImplicitlyModifiedRuh,
    ];

    /// Decodes an event type; `None` for values not defined.
    pub const fn from_raw(v: u8) -> Option<Self> {
        Some(match v {
            0x00 => Self::RuNotFullyWritten,
            0x01 => Self::RuTimeLimitExceeded,
            0x02 => Self::ControllerResetModifiedRuhs,
            0x03 => Self::InvalidPlacementId,
            0x80 => Self::MediaReallocated,
            0x81 => Self::ImplicitlyModifiedRuh,
            _ => return None,
        })
    }

    /// True for host events (types below 80h).
    pub const fn is_host_event(self) -> bool {
        (self as u8) < 0x80
    }
}

/// The Media Reallocated event's type specific information (16 bytes):
/// flags (0; bit 0 LBAV: the LBA is valid), NLBAM (3:2, logical blocks
/// moved), LBA (11:4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MediaReallocated {
    /// NLBAM: logical blocks moved.
    pub blocks_moved: u16,
    /// The first logical block moved, if given (LBAV).
    pub lba: Option<u64>,
}

impl MediaReallocated {
    /// The 16 type specific bytes.
    pub fn to_bytes(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[0] = self.lba.is_some() as u8;
        put(&mut b, 2, &self.blocks_moved.to_le_bytes());
        put(&mut b, 4, &self.lba.unwrap_or(0).to_le_bytes());
        b
    }

    /// Parses the 16 type specific bytes.
    pub fn from_bytes(b: &[u8; 16]) -> Self {
        MediaReallocated { blocks_moved: get16(b, 2), lba: (b[0] & 1 != 0).then(|| get64(b, 4)) }
    }
}

/// One 64-byte FDP event: type (0), flags (1), PID (3:2), timestamp
/// (11:4, the Timestamp feature's format), NSID (15:12), type specific
/// information (31:16), RGID (33:32), RUHID (34), reserved, vendor
/// specific (63:40).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FdpEvent {
    /// Event type, raw ([`FdpEventType::from_raw`]).
    pub event_type: u8,
    /// Flags: [`FdpEvent::PIV`], [`FdpEvent::NSIDV`], [`FdpEvent::LV`].
    pub flags: u8,
    /// Placement identifier (valid with PIV).
    pub pid: u16,
    /// Timestamp: milliseconds in bits 47:0, attributes in 55:48.
    pub timestamp: u64,
    /// Namespace (valid with NSIDV).
    pub nsid: u32,
    /// Event type specific information ([`MediaReallocated`] for 80h).
    pub type_specific: [u8; 16],
    /// Reclaim group (valid with LV).
    pub reclaim_group: u16,
    /// Reclaim unit handle (valid with LV).
    pub ruh: u8,
}

impl FdpEvent {
    /// Size on the wire.
    pub const SIZE: usize = 64;
    /// Flags bit 0 (PIV): the placement identifier is valid.
    pub const PIV: u8 = 1 << 0;
    /// Flags bit 1 (NSIDV): the namespace identifier is valid.
    pub const NSIDV: u8 = 1 << 1;
    /// Flags bit 2 (LV): the location (reclaim group, handle) is valid.
    pub const LV: u8 = 1 << 2;

    /// The named event type.
    pub const fn kind(&self) -> Option<FdpEventType> {
        FdpEventType::from_raw(self.event_type)
    }

    /// The wire image.
    pub fn to_bytes(&self) -> [u8; 64] {
        let mut b = [0u8; 64];
        b[0] = self.event_type;
        b[1] = self.flags;
        put(&mut b, 2, &self.pid.to_le_bytes());
        put(&mut b, 4, &self.timestamp.to_le_bytes());
        put(&mut b, 12, &self.nsid.to_le_bytes());
        put(&mut b, 16, &self.type_specific);
        put(&mut b, 32, &self.reclaim_group.to_le_bytes());
        b[34] = self.ruh;
        b
    }

    /// Parses a wire image.
    pub fn from_bytes(b: &[u8; 64]) -> Self {
        FdpEvent {
            event_type: b[0],
            flags: b[1],
            pid: get16(b, 2),
            timestamp: get64(b, 4),
            nsid: get32(b, 12),
            type_specific: b[16..32].try_into().expect("16 bytes"),
            reclaim_group: get16(b, 32),
            ruh: b[34],
        }
    }
}

/// The FDP Events log page (LID 23h): NEVENTS (3:0), reserved to byte 63,
/// then the events, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct FdpEventsLog {
    /// The events.
    pub events: Vec<FdpEvent>,
}

impl FdpEventsLog {
    /// Header bytes.
    pub const HEADER: usize = 64;

    /// The page.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = vec![0u8; Self::HEADER];
        put(&mut b, 0, &(self.events.len() as u32).to_le_bytes());
        for e in &self.events {
            b.extend_from_slice(&e.to_bytes());
        }
        b
    }

    /// Parses a page.
    pub fn from_bytes(b: &[u8]) -> Result<Self, FdpDecodeError> {
        need("FDP events header", b, Self::HEADER)?;
        let n = get32(b, 0) as usize;
        let end = n.checked_mul(FdpEvent::SIZE).and_then(|x| x.checked_add(Self::HEADER));
        need("FDP events", b, end.unwrap_or(usize::MAX))?;
        let events = (0..n)
            .map(|i| {
                let at = Self::HEADER + FdpEvent::SIZE * i;
                FdpEvent::from_bytes(b[at..at + FdpEvent::SIZE].try_into().expect("64 bytes"))
            })
            .collect();
        Ok(FdpEventsLog { events })
    }
}

// ---------------------------------------------------------------------------
// Features 1Dh and 1Eh
// ---------------------------------------------------------------------------

/// Feature 1Dh, Flexible Data Placement, of endurance group `endgid`
/// (CDW11 15:0). Set Features CDW12 and the Get Features completion's DW0
/// carry the same fields: FDPE (bit 0, FDP enabled) and FDPCIDX (15:8, the
/// configuration's index in the FDP Configurations page).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FdpFeature {
    /// Endurance group identifier.
    pub endgid: u16,
    /// FDPE: Flexible Data Placement is enabled.
    pub enabled: bool,
    /// FDPCIDX: the configuration in use.
    pub config_index: u8,
}

impl FdpFeature {
    /// The value dword (Set Features CDW12, Get Features DW0).
    pub const fn to_dword(self) -> u32 {
        self.enabled as u32 | (self.config_index as u32) << 8
    }

    /// Parses a value dword; `endgid` comes from CDW11.
    pub const fn from_dwords(cdw11: u32, value: u32) -> Self {
        FdpFeature {
            endgid: cdw11 as u16,
            enabled: value & 1 != 0,
            config_index: (value >> 8) as u8,
        }
    }

    /// A Get Features entry for the group.
    pub const fn get_entry(&self) -> SubmissionEntry {
        let mut e = crate::command::Features::get(
            FeatureId::FlexibleDataPlacement,
            crate::features::FeatureSelect::Current,
        )
        .get_entry();
        e.cdw11 = self.endgid as u32;
        e
    }

    /// A Set Features entry.
    pub const fn set_entry(&self) -> SubmissionEntry {
        let mut e = crate::command::Features::set(
            FeatureId::FlexibleDataPlacement,
            self.endgid as u32,
            false,
        )
        .set_entry();
        e.cdw12 = self.to_dword();
        e
    }

    /// Decodes a Get or Set Features entry of this feature (the value from
    /// CDW12, meaningful for Set only).
    pub const fn decode(e: &SubmissionEntry) -> Self {
        Self::from_dwords(e.cdw11, e.cdw12)
    }
}

/// Feature 1Eh, FDP Events, of one placement handle of namespace `nsid`:
/// CDW11 PHNDL (15:0) and NOET (23:16, the number of event types in the
/// data); Set Features CDW12 bit 0 enables (1) or disables (0) the event
/// types its data lists, one byte each. Get Features returns NOET
/// [`SupportedFdpEvent`]s, and in DW0 how many it filled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FdpEventsFeature {
    /// Namespace identifier.
    pub nsid: u32,
    /// PHNDL: placement handle.
    pub placement_handle: u16,
    /// NOET: event types in the data.
    pub event_types: u8,
    /// Set Features: enable (true) or disable the listed types.
    pub enable: bool,
}

impl FdpEventsFeature {
    /// CDW11.
    pub const fn cdw11(&self) -> u32 {
        self.placement_handle as u32 | (self.event_types as u32) << 16
    }

    /// A Get Features entry; its data buffer takes `event_types` 2-byte
    /// descriptors.
    pub const fn get_entry(&self) -> SubmissionEntry {
        let mut f = crate::command::Features::get(
            FeatureId::FdpEvents,
            crate::features::FeatureSelect::Current,
        );
        f.nsid = self.nsid;
        f.value = self.cdw11();
        f.get_entry()
    }

    /// A Set Features entry; its data buffer holds `event_types` bytes.
    pub const fn set_entry(&self) -> SubmissionEntry {
        let mut f = crate::command::Features::set(FeatureId::FdpEvents, self.cdw11(), false);
        f.nsid = self.nsid;
        let mut e = f.set_entry();
        e.cdw12 = self.enable as u32;
        e
    }

    /// Decodes a Get or Set Features entry of this feature.
    pub const fn decode(e: &SubmissionEntry) -> Self {
        FdpEventsFeature {
            nsid: e.nsid,
            placement_handle: e.cdw11 as u16,
            event_types: (e.cdw11 >> 16) as u8,
            enable: e.cdw12 & 1 != 0,
        }
    }
}

/// One supported FDP event descriptor (Get Features 1Eh data): the event
/// type (0) and its attributes (1; bit 0: enabled on the placement
/// handle).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SupportedFdpEvent {
    /// Event type, raw.
    pub event_type: u8,
    /// The type is enabled.
    pub enabled: bool,
}

impl SupportedFdpEvent {
    /// Size on the wire.
    pub const SIZE: usize = 2;

    /// The wire image.
    pub const fn to_bytes(self) -> [u8; 2] {
        [self.event_type, self.enabled as u8]
    }

    /// Parses a wire image.
    pub const fn from_bytes(b: [u8; 2]) -> Self {
        SupportedFdpEvent { event_type: b[0], enabled: b[1] & 1 != 0 }
    }
}

// ---------------------------------------------------------------------------
// I/O Management Receive (12h) and Send (1Dh)
// ---------------------------------------------------------------------------

/// I/O Management Receive management operation 01h: Reclaim Unit Handle
/// Status.
pub const MO_RUH_STATUS: u8 = 0x01;

/// I/O Management Send management operation 01h: Reclaim Unit Handle
/// Update.
pub const MO_RUH_UPDATE: u8 = 0x01;

/// I/O Management Receive (I/O opcode 12h). CDW10: MO (7:0), MOS (31:16);
/// CDW11: NUMD (0's based dwords to return).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IoManagementReceive {
    /// Namespace identifier.
    pub nsid: u32,
    /// MO: management operation.
    pub operation: u8,
    /// MOS: management operation specific.
    pub specific: u16,
    /// Dwords to return (NUMD + 1), 1..=2^32.
    pub dwords: u64,
}

impl IoManagementReceive {
    /// Reclaim Unit Handle Status of namespace `nsid`, `dwords` dwords of it.
    pub const fn ruh_status(nsid: u32, dwords: u64) -> Self {
        IoManagementReceive { nsid, operation: MO_RUH_STATUS, specific: 0, dwords }
    }

    /// Bytes to transfer.
    pub const fn length_bytes(&self) -> u64 {
        self.dwords.saturating_mul(4)
    }

    /// The submission entry; fails when `dwords` is 0 or above 2^32.
    pub const fn to_entry(&self) -> Result<SubmissionEntry, CommandError> {
        if self.dwords == 0 {
            return Err(CommandError::ZeroCount { field: "dwords" });
        }
        if self.dwords > 1 << 32 {
            return Err(CommandError::TooLarge {
                field: "dwords",
                value: self.dwords,
                max: 1 << 32,
            });
        }
        let mut e = SubmissionEntry::new(IoOpcode::IoManagementReceive as u8, self.nsid);
        e.cdw10 = self.operation as u32 | (self.specific as u32) << 16;
        e.cdw11 = (self.dwords - 1) as u32;
        Ok(e)
    }

    /// Decodes an entry.
    pub const fn decode(e: &SubmissionEntry) -> Self {
        IoManagementReceive {
            nsid: e.nsid,
            operation: e.cdw10 as u8,
            specific: (e.cdw10 >> 16) as u16,
            dwords: e.cdw11 as u64 + 1,
        }
    }
}

/// I/O Management Send (I/O opcode 1Dh). CDW10: MO (7:0), MOS (31:16); for
/// Reclaim Unit Handle Update MOS is the number of placement identifiers in
/// the data, 0's based, and the data holds them, 2 bytes each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IoManagementSend {
    /// Namespace identifier.
    pub nsid: u32,
    /// MO: management operation.
    pub operation: u8,
    /// MOS: management operation specific (raw).
    pub specific: u16,
}

impl IoManagementSend {
    /// Reclaim Unit Handle Update of `pids` placement identifiers
    /// (1..=65536).
    pub const fn ruh_update(nsid: u32, pids: u32) -> Result<Self, CommandError> {
        if pids == 0 {
            return Err(CommandError::ZeroCount { field: "placement identifiers" });
        }
        if pids > 65536 {
            return Err(CommandError::TooLarge {
                field: "placement identifiers",
                value: pids as u64,
                max: 65536,
            });
        }
        Ok(IoManagementSend { nsid, operation: MO_RUH_UPDATE, specific: (pids - 1) as u16 })
    }

    /// For Reclaim Unit Handle Update: the number of placement
    /// identifiers (MOS + 1).
    pub const fn placement_ids(&self) -> u32 {
        self.specific as u32 + 1
    }

    /// The submission entry.
    pub const fn to_entry(&self) -> SubmissionEntry {
        let mut e = SubmissionEntry::new(IoOpcode::IoManagementSend as u8, self.nsid);
        e.cdw10 = self.operation as u32 | (self.specific as u32) << 16;
        e
    }

    /// Decodes an entry.
    pub const fn decode(e: &SubmissionEntry) -> Self {
        IoManagementSend {
            nsid: e.nsid,
            operation: e.cdw10 as u8,
            specific: (e.cdw10 >> 16) as u16,
        }
    }
}

/// The placement identifiers of a Reclaim Unit Handle Update's data.
pub fn placement_id_list(pids: &[u16]) -> Vec<u8> {
    pids.iter().flat_map(|p| p.to_le_bytes()).collect()
}

/// Parses `n` placement identifiers from a Reclaim Unit Handle Update's
/// data; `None` when the data is shorter.
pub fn parse_placement_id_list(data: &[u8], n: usize) -> Option<Vec<u16>> {
    let bytes = data.get(..n.checked_mul(2)?)?;
    Some(bytes.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect())
}

/// One Reclaim Unit Handle Status descriptor (32 bytes): PID (1:0), RUHID
/// (3:2), EARUTR (7:4, seconds the reclaim unit may stay active), RUAMW
/// (15:8, logical blocks the current reclaim unit still takes), reserved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RuhStatusDescriptor {
    /// Placement identifier.
    pub pid: u16,
    /// Reclaim unit handle identifier.
    pub ruhid: u16,
    /// EARUTR: estimated active reclaim unit time remaining, seconds (0:
    /// not reported).
    pub time_remaining_secs: u32,
    /// RUAMW: reclaim unit available media writes, in logical blocks.
    pub available_blocks: u64,
}

impl RuhStatusDescriptor {
    /// Size on the wire.
    pub const SIZE: usize = 32;

    /// The wire image.
    pub fn to_bytes(&self) -> [u8; 32] {
        let mut b = [0u8; 32];
        put(&mut b, 0, &self.pid.to_le_bytes());
        put(&mut b, 2, &self.ruhid.to_le_bytes());
        put(&mut b, 4, &self.time_remaining_secs.to_le_bytes());
        put(&mut b, 8, &self.available_blocks.to_le_bytes());
        b
    }

    /// Parses a wire image.
    pub fn from_bytes(b: &[u8; 32]) -> Self {
        RuhStatusDescriptor {
            pid: get16(b, 0),
            ruhid: get16(b, 2),
            time_remaining_secs: get32(b, 4),
            available_blocks: get64(b, 8),
        }
    }
}

/// The Reclaim Unit Handle Status data (I/O Management Receive MO 01h): a
/// 16-byte header with NRUHSD at bytes 15:14, then the descriptors, one
/// per placement handle of the namespace and reclaim group.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct RuhStatus {
    /// The descriptors.
    pub descriptors: Vec<RuhStatusDescriptor>,
}

impl RuhStatus {
    /// Header bytes.
    pub const HEADER: usize = 16;

    /// The data.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = vec![0u8; Self::HEADER];
        put(&mut b, 14, &(self.descriptors.len() as u16).to_le_bytes());
        for d in &self.descriptors {
            b.extend_from_slice(&d.to_bytes());
        }
        b
    }

    /// Parses the data.
    pub fn from_bytes(b: &[u8]) -> Result<Self, FdpDecodeError> {
        need("reclaim unit handle status header", b, Self::HEADER)?;
        let n = get16(b, 14) as usize;
        need("reclaim unit handle status", b, Self::HEADER + RuhStatusDescriptor::SIZE * n)?;
        let descriptors = (0..n)
            .map(|i| {
                let at = Self::HEADER + RuhStatusDescriptor::SIZE * i;
                let d = b[at..at + RuhStatusDescriptor::SIZE].try_into().expect("32 bytes");
                RuhStatusDescriptor::from_bytes(d)
            })
            .collect();
        Ok(RuhStatus { descriptors })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::Features;

    fn at(b: &[u8], off: usize, want: &[u8]) {
        assert_eq!(&b[off..off + want.len()], want, "bytes at offset {off}");
    }

    #[test]
    fn placement_ids_split_reclaim_group_and_handle() {
        let p = PlacementId { reclaim_group: 0, handle: 0xABCD };
        assert_eq!(p.encode(0), Some(0xABCD));
        assert_eq!(PlacementId::decode(0xABCD, 0), p);
        // RGIF 2: bits 15:14 the reclaim group, 13:0 the handle.
        let p = PlacementId { reclaim_group: 3, handle: 5 };
        assert_eq!(p.encode(2), Some(0xC005));
        assert_eq!(PlacementId::decode(0xC005, 2), p);
        assert_eq!(PlacementId { reclaim_group: 4, handle: 0 }.encode(2), None);
        assert_eq!(PlacementId { reclaim_group: 0, handle: 0x4000 }.encode(2), None);
        assert_eq!(PlacementId { reclaim_group: 1, handle: 0 }.encode(0), None);
        assert_eq!(p.encode(16), None);
    }

    #[test]
    fn config_log_fields_sit_at_their_offsets() {
        let d = FdpConfigDescriptor {
            attributes: FdpAttributes { rgif: 0, volatile_write_cache: true, valid: true },
            reclaim_groups: 1,
            max_placement_ids: 8,
            namespaces: 1,
            reclaim_unit_bytes: 12 << 20,
            time_limit_secs: 0x0102_0304,
            handle_types: vec![1, 2, 1],
            vendor: vec![],
        };
        let log = FdpConfigLog { version: 0, configs: vec![d.clone()] };
        let b = log.to_bytes();
        // Header: NUMFDPC 0's based, size of the whole page at 7:4.
        at(&b, 0, &0u16.to_le_bytes());
        // 64 bytes of fields and 3 handles of 4 bytes, rounded up to 8.
        assert_eq!(d.size(), 80);
        assert_eq!(b.len(), 16 + 80);
        at(&b, 4, &96u32.to_le_bytes());
        assert_eq!(FdpConfigLog::size_of(&b), Some(96));
        let c = &b[16..];
        at(c, 0, &80u16.to_le_bytes());
        assert_eq!(c[2], 0x90, "FDPA: valid (7) and volatile write cache (4)");
        at(c, 4, &1u32.to_le_bytes());
        at(c, 8, &3u16.to_le_bytes());
        at(c, 10, &7u16.to_le_bytes());
        at(c, 12, &1u32.to_le_bytes());
        at(c, 16, &(12u64 << 20).to_le_bytes());
        at(c, 24, &0x0102_0304u32.to_le_bytes());
        assert_eq!((c[64], c[68], c[72]), (1, 2, 1));
        assert_eq!(FdpConfigLog::from_bytes(&b).unwrap(), log);
        assert_eq!(RuhType::from_raw(c[68]), Some(RuhType::PersistentlyIsolated));
        assert_eq!(FdpAttributes::from_byte(0x83).rgif, 3);
        // A descriptor smaller than its fields, and a short page.
        let mut bad = b.clone();
        bad[16] = 8;
        assert!(matches!(
            FdpConfigLog::from_bytes(&bad),
            Err(FdpDecodeError::DescriptorSize { index: 0, size: 8, .. })
        ));
        assert!(matches!(
            FdpConfigLog::from_bytes(&b[..50]),
            Err(FdpDecodeError::Truncated { .. })
        ));
    }

    #[test]
    fn usage_stats_and_status_layouts() {
        let u = RuhUsageLog { attributes: vec![1, 2, 0] };
        let b = u.to_bytes();
        assert_eq!(b.len(), 8 + 3 * 8);
        at(&b, 0, &3u16.to_le_bytes());
        assert_eq!((b[8], b[16], b[24]), (1, 2, 0));
        assert_eq!(RuhUsageLog::from_bytes(&b).unwrap(), u);
        assert!(RuhUsageLog::from_bytes(&b[..20]).is_err());
        assert_eq!(RuhAttributes::from_raw(2), Some(RuhAttributes::ControllerSpecified));

        let s = FdpStatsLog {
            host_bytes_written: 0x0102,
            media_bytes_written: 1 << 100,
            media_bytes_erased: 0x0A0B,
        };
        let b = s.to_bytes();
        at(&b, 0, &0x0102u128.to_le_bytes());
        at(&b, 16, &(1u128 << 100).to_le_bytes());
        at(&b, 32, &0x0A0Bu128.to_le_bytes());
        assert!(b[48..].iter().all(|&x| x == 0));
        assert_eq!(FdpStatsLog::from_bytes(&b), s);

        let d = RuhStatusDescriptor {
            pid: 0x0102,
            ruhid: 0x0304,
            time_remaining_secs: 0x0506_0708,
            available_blocks: 0x1122_3344_5566,
        };
        let st = RuhStatus { descriptors: vec![d, RuhStatusDescriptor::default()] };
        let b = st.to_bytes();
        assert_eq!(b.len(), 16 + 64);
        at(&b, 14, &2u16.to_le_bytes());
        at(&b, 16, &0x0102u16.to_le_bytes());
        at(&b, 18, &0x0304u16.to_le_bytes());
        at(&b, 20, &0x0506_0708u32.to_le_bytes());
        at(&b, 24, &0x1122_3344_5566u64.to_le_bytes());
        assert_eq!(RuhStatus::from_bytes(&b).unwrap(), st);
        assert!(RuhStatus::from_bytes(&b[..47]).is_err());
    }

    #[test]
    fn events_sit_at_their_offsets() {
        let realloc = MediaReallocated { blocks_moved: 0x1234, lba: Some(0x0A0B_0C0D) };
        let e = FdpEvent {
            event_type: FdpEventType::MediaReallocated as u8,
            flags: FdpEvent::PIV | FdpEvent::NSIDV | FdpEvent::LV,
            pid: 0x0203,
            timestamp: 0x0011_2233_4455,
            nsid: 0x0607_0809,
            type_specific: realloc.to_bytes(),
            reclaim_group: 0x0A0B,
            ruh: 0x0C,
        };
        let b = e.to_bytes();
        assert_eq!((b[0], b[1]), (0x80, 0x07));
        at(&b, 2, &0x0203u16.to_le_bytes());
        at(&b, 4, &0x0011_2233_4455u64.to_le_bytes());
        at(&b, 12, &0x0607_0809u32.to_le_bytes());
        assert_eq!(b[16], 1, "LBAV");
        at(&b, 18, &0x1234u16.to_le_bytes());
        at(&b, 20, &0x0A0B_0C0Du64.to_le_bytes());
        at(&b, 32, &0x0A0Bu16.to_le_bytes());
        assert_eq!(b[34], 0x0C);
        assert_eq!(FdpEvent::from_bytes(&b), e);
        assert_eq!(MediaReallocated::from_bytes(&e.type_specific), realloc);
        assert_eq!(e.kind(), Some(FdpEventType::MediaReallocated));
        let log = FdpEventsLog { events: vec![e, FdpEvent::default()] };
        let b = log.to_bytes();
        assert_eq!(b.len(), 64 + 128);
        at(&b, 0, &2u32.to_le_bytes());
        assert_eq!(b[64], 0x80);
        assert_eq!(FdpEventsLog::from_bytes(&b).unwrap(), log);
        assert!(FdpEventsLog::from_bytes(&b[..100]).is_err());
    }

    #[test]
    fn event_types_have_spec_values() {
        let want = [0x00, 0x01, 0x02, 0x03, 0x80, 0x81];
        for (t, v) in FdpEventType::ALL.into_iter().zip(want) {
            assert_eq!(t as u8, v);
            assert_eq!(FdpEventType::from_raw(v), Some(t));
            assert_eq!(t.is_host_event(), v < 0x80);
        }
        assert_eq!(FdpEventType::from_raw(0x04), None);
    }

    #[test]
    fn features_carry_their_fields() {
        let f = FdpFeature { endgid: 1, enabled: true, config_index: 3 };
        assert_eq!(f.to_dword(), 1 | 3 << 8);
        let set = f.set_entry();
        assert_eq!((set.opcode(), set.cdw10, set.cdw11, set.cdw12), (0x09, 0x1D, 1, 0x301));
        assert_eq!(FdpFeature::decode(&set), f);
        let get = f.get_entry();
        assert_eq!((get.opcode(), get.cdw10 & 0xFF, get.cdw11), (0x0A, 0x1D, 1));
        assert_eq!(Features::decode(&get).feature_id(), Some(FeatureId::FlexibleDataPlacement));

        let ev = FdpEventsFeature { nsid: 1, placement_handle: 2, event_types: 3, enable: true };
        let set = ev.set_entry();
        assert_eq!(
            (set.opcode(), set.nsid, set.cdw10, set.cdw11, set.cdw12),
            (0x09, 1, 0x1E, 2 | 3 << 16, 1)
        );
        assert_eq!(FdpEventsFeature::decode(&set), ev);
        let get = ev.get_entry();
        assert_eq!((get.opcode(), get.cdw10 & 0xFF, get.cdw11), (0x0A, 0x1E, 2 | 3 << 16));
        let s = SupportedFdpEvent { event_type: 0x80, enabled: true };
        assert_eq!(s.to_bytes(), [0x80, 1]);
        assert_eq!(SupportedFdpEvent::from_bytes([0x80, 1]), s);
    }

    #[test]
    fn io_management_commands() {
        let r = IoManagementReceive::ruh_status(1, 20);
        let e = r.to_entry().unwrap();
        assert_eq!((e.opcode(), e.nsid, e.cdw10, e.cdw11), (0x12, 1, 1, 19));
        assert_eq!(IoManagementReceive::decode(&e), r);
        assert_eq!(r.length_bytes(), 80);
        assert!(IoManagementReceive::ruh_status(1, 0).to_entry().is_err());
        assert!(IoManagementReceive::ruh_status(1, (1 << 32) + 1).to_entry().is_err());

        let s = IoManagementSend::ruh_update(1, 3).unwrap();
        let e = s.to_entry();
        // MO 01h, MOS = the number of identifiers, 0's based, in 31:16.
        assert_eq!((e.opcode(), e.nsid, e.cdw10), (0x1D, 1, 1 | 2 << 16));
        assert_eq!(IoManagementSend::decode(&e), s);
        assert_eq!(s.placement_ids(), 3);
        assert!(IoManagementSend::ruh_update(1, 0).is_err());
        assert!(IoManagementSend::ruh_update(1, 65537).is_err());
        let list = placement_id_list(&[1, 0x0203]);
        assert_eq!(list, [1, 0, 3, 2]);
        assert_eq!(parse_placement_id_list(&list, 2), Some(vec![1, 0x0203]));
        assert_eq!(parse_placement_id_list(&list, 3), None);
    }

    #[test]
    fn log_page_requests_name_the_endurance_group() {
        let g = get_log_page(LogPageId::FdpStatistics, 7, 16);
        let e = g.to_entry().unwrap();
        assert_eq!((e.cdw10 & 0xFF, e.cdw11 >> 16), (0x22, 7));
        let mut ev = get_log_page(LogPageId::FdpEvents, 1, 16);
        ev.lsp = FDP_EVENTS_LSP_HOST;
        let e = ev.to_entry().unwrap();
        assert_eq!((e.cdw10 >> 8) & 0x7F, 1);
    }
}
