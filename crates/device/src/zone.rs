//! Zones as the host sees them: typed descriptors, zone management actions
//! and their targets, and report decoding.

use serde::Serialize;
use zns_spec::{ZoneAttributes, ZoneDescriptor, ZoneSendAction, ZoneState, ZoneType};

use crate::error::{DeviceError, OpKind, Result};

/// One zone, decoded from a zone descriptor.
///
/// Thread safety: plain data, `Send + Sync`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Zone {
    /// Zone number: `start / zone size`.
    pub index: u64,
    /// Zone start LBA (ZSLBA).
    pub start: u64,
    /// Zone size in blocks (the LBA distance to the next zone).
    pub size: u64,
    /// Zone capacity in blocks (writable blocks from `start`).
    pub capacity: u64,
    /// Write pointer; `None` where the zone has none (Full, Read Only,
    /// Offline).
    pub write_pointer: Option<u64>,
    /// Zone state.
    pub state: ZoneState,
    /// Zone type (Sequential Write Required for every ZNS zone).
    pub zone_type: ZoneType,
    /// Zone attributes (ZFC, FZR, RZR, ZRWAV, ZDEV).
    pub attributes: ZoneAttributes,
}

impl Zone {
    /// Decodes a descriptor of a namespace whose zones are `zone_size`
    /// blocks apart.
    pub fn from_descriptor(d: &ZoneDescriptor, zone_size: u64) -> Zone {
        let write_pointer = (d.state.has_write_pointer()
            && d.write_pointer != ZoneDescriptor::INVALID_WRITE_POINTER)
            .then_some(d.write_pointer);
        Zone {
            index: d.start.checked_div(zone_size).unwrap_or(0),
            start: d.start,
            size: zone_size,
            capacity: d.capacity,
            write_pointer,
            state: d.state,
            zone_type: d.zone_type,
            attributes: d.attrs,
        }
    }

    /// True when the zone holds a zone random write area (attribute
    /// ZRWAV).
    pub fn has_zrwa(&self) -> bool {
        self.attributes.has(ZoneAttributes::ZRWA_VALID)
    }

    /// One past the last writable LBA (`start + capacity`).
    pub fn end(&self) -> u64 {
        self.start + self.capacity
    }

    /// Blocks written: up to the write pointer, the whole capacity for a
    /// Full zone, 0 where nothing is known (Read Only, Offline).
    pub fn written(&self) -> u64 {
        match (self.write_pointer, self.state) {
            (Some(wp), _) => wp.saturating_sub(self.start),
            (None, ZoneState::Full) => self.capacity,
            (None, _) => 0,
        }
    }

    /// Blocks that can still be written before the zone is full.
    pub fn remaining(&self) -> u64 {
        match self.write_pointer {
            Some(wp) if self.is_writable() => self.end().saturating_sub(wp),
            _ => 0,
        }
    }

    /// True when a write at the write pointer can succeed as far as the
    /// zone's state goes: Empty, Implicitly or Explicitly Opened, or Closed,
    /// with capacity left. (Open and active resource limits still apply.)
    pub fn is_writable(&self) -> bool {
        matches!(
            self.state,
            ZoneState::Empty
                | ZoneState::ImplicitlyOpen
                | ZoneState::ExplicitlyOpen
                | ZoneState::Closed
        ) && self.write_pointer.is_some_and(|wp| wp < self.end())
    }

    /// True when the zone can be read (every state but Offline).
    pub fn is_readable(&self) -> bool {
        self.state != ZoneState::Offline
    }

    /// True when the descriptor extension is valid (ZDEV).
    pub fn has_extension(&self) -> bool {
        self.attributes.has(ZoneAttributes::EXTENSION_VALID)
    }

    /// True when the device recommends resetting the zone (RZR).
    pub fn reset_recommended(&self) -> bool {
        self.attributes.has(ZoneAttributes::RESET_RECOMMENDED)
    }

    /// True when the device recommends finishing the zone (FZR).
    pub fn finish_recommended(&self) -> bool {
        self.attributes.has(ZoneAttributes::FINISH_RECOMMENDED)
    }
}

/// A zone management action (Zone Management Send).
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ZoneAction {
    /// Open Zone: Empty or Closed → Explicitly Opened.
    Open,
    /// Close Zone: opened → Closed.
    Close,
    /// Finish Zone: → Full.
    Finish,
    /// Reset Zone: → Empty, write pointer back to the zone start.
    Reset,
    /// Offline Zone: Read Only → Offline.
    Offline,
}

impl ZoneAction {
    /// Every action.
    pub const ALL: [ZoneAction; 5] = [
        ZoneAction::Open,
        ZoneAction::Close,
        ZoneAction::Finish,
        ZoneAction::Reset,
        ZoneAction::Offline,
    ];

    /// The Zone Send Action code.
    pub const fn send_action(self) -> ZoneSendAction {
        match self {
            ZoneAction::Open => ZoneSendAction::Open,
            ZoneAction::Close => ZoneSendAction::Close,
            ZoneAction::Finish => ZoneSendAction::Finish,
            ZoneAction::Reset => ZoneSendAction::Reset,
            ZoneAction::Offline => ZoneSendAction::Offline,
        }
    }

    /// The kind of command, for errors.
    pub const fn kind(self) -> OpKind {
        match self {
            ZoneAction::Open => OpKind::Open,
            ZoneAction::Close => OpKind::Close,
            ZoneAction::Finish => OpKind::Finish,
            ZoneAction::Reset => OpKind::Reset,
            ZoneAction::Offline => OpKind::Offline,
        }
    }

    /// Lower-case name ("open", ...).
    pub const fn name(self) -> &'static str {
        match self {
            ZoneAction::Open => "open",
            ZoneAction::Close => "close",
            ZoneAction::Finish => "finish",
            ZoneAction::Reset => "reset",
            ZoneAction::Offline => "offline",
        }
    }
}

/// Which zones a zone management action applies to.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target {
    /// The zone starting at this LBA.
    Zone(u64),
    /// Select All: every zone the action applies to in its current state.
    All,
}

impl Target {
    /// The zone start LBA, or `None` for all zones.
    pub const fn lba(self) -> Option<u64> {
        match self {
            Target::Zone(l) => Some(l),
            Target::All => None,
        }
    }
}

/// A decoded zone report: what one Zone Management Receive returned.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ZoneReport {
    /// The header's zone count (with partial reporting, the descriptors
    /// returned; without, every matching zone from the start LBA on).
    pub zones: u64,
    /// The zones whose descriptors fit in the buffer.
    pub descriptors: Vec<Zone>,
    /// Extended reports: each zone's descriptor extension.
    pub extensions: Vec<Vec<u8>>,
}

/// Decodes the data of a Zone Management Receive (as returned by an
/// asynchronous [`crate::ZoneOp::ReportZones`]): `extension_bytes` is the
/// namespace's extension size for extended reports, `None` for plain ones.
///
/// Thread safety: a pure function.
pub fn parse_report(
    bytes: &[u8],
    zone_size: u64,
    extension_bytes: Option<usize>,
) -> Result<ZoneReport> {
    let r = zns_driver::zone::parse_report(bytes, extension_bytes)
        .map_err(|e| DeviceError::from_driver(e, OpKind::ReportZones, None))?;
    Ok(ZoneReport {
        zones: r.zones,
        descriptors: r.descriptors.iter().map(|d| Zone::from_descriptor(d, zone_size)).collect(),
        extensions: r.extensions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zone(state: ZoneState, wp: u64) -> Zone {
        Zone::from_descriptor(
            &ZoneDescriptor {
                zone_type: ZoneType::SequentialWriteRequired,
                state,
                attrs: ZoneAttributes(0),
                attrs_info: 0,
                capacity: 48,
                start: 128,
                write_pointer: wp,
            },
            64,
        )
    }

    #[test]
    fn helpers_follow_state_and_write_pointer() {
        let z = zone(ZoneState::Empty, 128);
        assert_eq!((z.index, z.end(), z.remaining(), z.written()), (2, 176, 48, 0));
        assert!(z.is_writable());
        let z = zone(ZoneState::ImplicitlyOpen, 170);
        assert_eq!((z.remaining(), z.written()), (6, 42));
        let z = zone(ZoneState::Full, ZoneDescriptor::INVALID_WRITE_POINTER);
        assert_eq!(z.write_pointer, None);
        assert_eq!((z.remaining(), z.written()), (0, 48));
        assert!(!z.is_writable() && z.is_readable());
        let z = zone(ZoneState::Offline, ZoneDescriptor::INVALID_WRITE_POINTER);
        assert!(!z.is_readable());
        assert_eq!(z.written(), 0);
    }
}
