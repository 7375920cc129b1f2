//! Flexible Data Placement in the conventional firmware: reclaim unit
//! handles, the open segments (streams) they write to, their counters and
//! the two event logs.
//!
//! A reclaim unit is one segment. Each reclaim unit handle has an open
//! segment for host writes (`Stream::Host` of its index), and every
//! segment remembers the handle whose data it holds (its owner). Garbage
//! collection moves a victim's valid blocks into one shared segment
//! (initially isolated handles: the segment has no owner) or into the
//! victim owner's own GC segment (persistently isolated). A namespace
//! without FDP is the one-handle case: one host stream, one GC stream.
//!
//! Events go to two rings of [`EVENT_LOG_ENTRIES`] (host events and
//! controller events), the oldest dropped first; a type is logged only
//! where the host enabled it for the handle (Set Features 1Eh), and
//! enablement is volatile (a controller reset or power loss clears it).

use std::collections::VecDeque;
use std::time::Instant;

use zns_spec::fdp::{FdpEvent, FdpEventType, MediaReallocated, PlacementId, RuhType};

use crate::profile::{FdpIsolation, FdpProfile};

/// Events each log keeps (the newest): what one FDP Events page of the
/// usual size holds.
pub const EVENT_LOG_ENTRIES: usize = 63;

/// The event types the firmware reports: a Reclaim Unit Handle Update of
/// a partly written reclaim unit, a write naming a placement identifier
/// the namespace lacks, and garbage collection moving data. The others
/// (time limits, resets, implicit handle changes) never happen here.
pub const SUPPORTED_EVENTS: [FdpEventType; 3] = [
    FdpEventType::RuNotFullyWritten,
    FdpEventType::InvalidPlacementId,
    FdpEventType::MediaReallocated,
];

/// An open segment's role: host writes of a handle, or garbage
/// collection's destination `i`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stream {
    /// Host writes through reclaim unit handle `h`.
    Host(u16),
    /// Garbage collection's destination `i` (0 when shared).
    Gc(u16),
}

/// The FDP configuration of a namespace's firmware.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FdpConfig {
    /// Reclaim unit handles (and placement handles: one per handle).
    pub handles: u16,
    /// Their isolation.
    pub isolation: FdpIsolation,
    /// The namespace, for events.
    pub nsid: u32,
}

/// Where a write goes: its handle, and the placement identifier it named
/// when that was not valid (it then goes to handle 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Resolved {
    pub handle: u16,
    pub invalid: Option<u16>,
}

impl FdpConfig {
    /// The configuration a profile table describes, for namespace `nsid`.
    pub fn new(p: &FdpProfile, nsid: u32) -> Self {
        FdpConfig { handles: p.handles, isolation: p.kind, nsid }
    }

    /// RUHT of every handle.
    pub fn ruh_type(&self) -> RuhType {
        match self.isolation {
            FdpIsolation::Initially => RuhType::InitiallyIsolated,
            FdpIsolation::Persistently => RuhType::PersistentlyIsolated,
        }
    }

    /// Garbage collection's open segments.
    pub(super) fn gc_streams(&self) -> u16 {
        match self.isolation {
            FdpIsolation::Initially => 1,
            FdpIsolation::Persistently => self.handles,
        }
    }

    /// Where garbage collection puts the valid blocks of a victim owned by
    /// `owner`.
    pub(super) fn gc_stream(&self, owner: Option<u16>) -> Stream {
        match self.isolation {
            FdpIsolation::Initially => Stream::Gc(0),
            FdpIsolation::Persistently => Stream::Gc(owner.unwrap_or(0)),
        }
    }

    /// The owner of a segment opened for `stream`: the handle, or none
    /// for the shared GC segment of initially isolated handles.
    pub(super) fn owner(&self, stream: Stream) -> Option<u16> {
        match (stream, self.isolation) {
            (Stream::Host(h), _) => Some(h),
            (Stream::Gc(_), FdpIsolation::Initially) => None,
            (Stream::Gc(i), FdpIsolation::Persistently) => Some(i),
        }
    }

    /// The handle of placement identifier `pid` (one reclaim group: all
    /// 16 bits name the placement handle), if the namespace has it.
    pub fn handle_of(&self, pid: u16) -> Option<u16> {
        let p = PlacementId::decode(pid, 0);
        (p.reclaim_group == 0 && p.handle < self.handles).then_some(p.handle)
    }

    /// The placement identifier of handle `h`.
    pub fn pid_of(&self, h: u16) -> u16 {
        PlacementId { reclaim_group: 0, handle: h }.encode(0).unwrap_or(h)
    }

    /// Where a write with placement identifier `pid` (DTYPE 2h) goes: its
    /// handle; handle 0 for a write without one and for an invalid one.
    pub(super) fn resolve(&self, pid: Option<u16>) -> Resolved {
        match pid {
            None => Resolved { handle: 0, invalid: None },
            Some(p) => match self.handle_of(p) {
                Some(h) => Resolved { handle: h, invalid: None },
                None => Resolved { handle: 0, invalid: Some(p) },
            },
        }
    }
}

/// Counters of one reclaim unit handle, in blocks and segments.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HandleStats {
    /// Blocks the host wrote through the handle.
    pub host_blocks: u64,
    /// Blocks garbage collection moved out of the handle's segments.
    pub moved_blocks: u64,
    /// The handle's segments erased (each `segment_blocks` blocks).
    pub erased_segments: u64,
}

impl HandleStats {
    fn add(&mut self, o: &HandleStats) {
        self.host_blocks += o.host_blocks;
        self.moved_blocks += o.moved_blocks;
        self.erased_segments += o.erased_segments;
    }
}

/// A snapshot of an FDP namespace's counters.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FdpStats {
    /// Per reclaim unit handle.
    pub handles: Vec<HandleStats>,
    /// The shared garbage-collection segments (initially isolated
    /// handles): what moved out of them and their erases.
    pub shared: HandleStats,
    /// Blocks per segment (reclaim unit).
    pub segment_blocks: u64,
}

impl FdpStats {
    /// The sum over the handles and the shared segments.
    pub fn total(&self) -> HandleStats {
        let mut t = self.shared;
        for h in &self.handles {
            t.add(h);
        }
        t
    }

    /// Blocks programmed: the host's and those garbage collection moved.
    pub fn media_blocks(&self) -> u64 {
        let t = self.total();
        t.host_blocks + t.moved_blocks
    }

    /// Blocks erased.
    pub fn erased_blocks(&self) -> u64 {
        self.total().erased_segments * self.segment_blocks
    }
}

/// The FDP state that changes, kept under the firmware's state lock.
#[derive(Debug)]
pub(super) struct FdpState {
    pub stats: Vec<HandleStats>,
    pub shared: HandleStats,
    /// Per handle, the enabled event types: bit `i` is
    /// `FdpEventType::ALL[i]`.
    enabled: Vec<u8>,
    host_events: VecDeque<FdpEvent>,
    controller_events: VecDeque<FdpEvent>,
    created: Instant,
}

fn type_bit(t: FdpEventType) -> u8 {
    let i = FdpEventType::ALL.iter().position(|&x| x == t).expect("a listed type");
    1 << i
}

impl FdpState {
    pub fn new(handles: u16) -> Self {
        FdpState {
            stats: vec![HandleStats::default(); handles as usize],
            shared: HandleStats::default(),
            enabled: vec![0; handles as usize],
            host_events: VecDeque::with_capacity(EVENT_LOG_ENTRIES),
            controller_events: VecDeque::with_capacity(EVENT_LOG_ENTRIES),
            created: Instant::now(),
        }
    }

    /// Counters of the handle owning a segment (or the shared ones).
    pub fn stats_of(&mut self, owner: Option<u16>) -> &mut HandleStats {
        match owner {
            Some(h) => &mut self.stats[h as usize],
            None => &mut self.shared,
        }
    }

    /// Whether event type `t` is enabled on handle `h`.
    pub fn enabled(&self, h: u16, t: FdpEventType) -> bool {
        self.enabled.get(h as usize).is_some_and(|m| m & type_bit(t) != 0)
    }

    /// Enables or disables event type `t` on handle `h`.
    pub fn set_enabled(&mut self, h: u16, t: FdpEventType, on: bool) {
        let m = &mut self.enabled[h as usize];
        if on {
            *m |= type_bit(t);
        } else {
            *m &= !type_bit(t);
        }
    }

    /// Every event type disabled again (the feature's default).
    pub fn reset_features(&mut self) {
        self.enabled.iter_mut().for_each(|m| *m = 0);
    }

    /// The events of one log, oldest first.
    pub fn events(&self, host: bool) -> Vec<FdpEvent> {
        let q = if host { &self.host_events } else { &self.controller_events };
        q.iter().copied().collect()
    }

    /// The Timestamp feature's format: milliseconds since the firmware
    /// started in bits 47:0; the attribute byte 0 (timestamp origin: not
    /// set by the host).
    fn timestamp(&self) -> u64 {
        (self.created.elapsed().as_millis() as u64) & ((1 << 48) - 1)
    }

    fn log(&mut self, t: FdpEventType, mut e: FdpEvent) {
        e.event_type = t as u8;
        e.timestamp = self.timestamp();
        let q = if t.is_host_event() { &mut self.host_events } else { &mut self.controller_events };
        if q.len() == EVENT_LOG_ENTRIES {
            q.pop_front();
        }
        q.push_back(e);
    }

    /// Handle `h` left its reclaim unit partly written (Reclaim Unit Handle
    /// Update).
    pub fn ru_not_fully_written(&mut self, cfg: &FdpConfig, h: u16) {
        if !self.enabled(h, FdpEventType::RuNotFullyWritten) {
            return;
        }
        let e = FdpEvent {
            flags: FdpEvent::PIV | FdpEvent::NSIDV | FdpEvent::LV,
            pid: cfg.pid_of(h),
            nsid: cfg.nsid,
            ruh: h as u8,
            ..FdpEvent::default()
        };
        self.log(FdpEventType::RuNotFullyWritten, e);
    }

    /// A write named placement identifier `pid`, which the namespace lacks;
    /// its data went to handle 0, whose enablement counts.
    pub fn invalid_pid(&mut self, cfg: &FdpConfig, pid: u16) {
        if !self.enabled(0, FdpEventType::InvalidPlacementId) {
            return;
        }
        let e = FdpEvent {
            flags: FdpEvent::PIV | FdpEvent::NSIDV,
            pid,
            nsid: cfg.nsid,
            ..FdpEvent::default()
        };
        self.log(FdpEventType::InvalidPlacementId, e);
    }

    /// Garbage collection moved `blocks` valid blocks, the first of them
    /// logical block `lba`, out of a segment of `owner` (none: a shared
    /// segment, whose data may be any handle's: logged where any handle
    /// enabled the type, without a location).
    pub fn media_reallocated(
        &mut self,
        cfg: &FdpConfig,
        owner: Option<u16>,
        lba: u64,
        blocks: u64,
    ) {
        let t = FdpEventType::MediaReallocated;
        let enabled = match owner {
            Some(h) => self.enabled(h, t),
            None => (0..cfg.handles).any(|h| self.enabled(h, t)),
        };
        if !enabled || blocks == 0 {
            return;
        }
        let info =
            MediaReallocated { blocks_moved: blocks.min(u16::MAX as u64) as u16, lba: Some(lba) };
        let mut e = FdpEvent {
            flags: FdpEvent::NSIDV,
            nsid: cfg.nsid,
            type_specific: info.to_bytes(),
            ..FdpEvent::default()
        };
        if let Some(h) = owner {
            e.flags |= FdpEvent::PIV | FdpEvent::LV;
            e.pid = cfg.pid_of(h);
            e.ruh = h as u8;
        }
        self.log(t, e);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(isolation: FdpIsolation) -> FdpConfig {
        FdpConfig { handles: 4, isolation, nsid: 1 }
    }

    #[test]
    fn placement_identifiers_resolve_to_handles() {
        let c = cfg(FdpIsolation::Initially);
        assert_eq!(c.resolve(None), Resolved { handle: 0, invalid: None });
        assert_eq!(c.resolve(Some(3)), Resolved { handle: 3, invalid: None });
        assert_eq!(c.resolve(Some(4)), Resolved { handle: 0, invalid: Some(4) });
        assert_eq!(c.resolve(Some(0x8001)), Resolved { handle: 0, invalid: Some(0x8001) });
        assert_eq!(c.pid_of(2), 2);
    }

    #[test]
    fn garbage_collection_streams_follow_the_isolation() {
        let i = cfg(FdpIsolation::Initially);
        assert_eq!((i.gc_streams(), i.gc_stream(Some(3))), (1, Stream::Gc(0)));
        assert_eq!((i.owner(Stream::Host(2)), i.owner(Stream::Gc(0))), (Some(2), None));
        assert_eq!(i.ruh_type(), RuhType::InitiallyIsolated);
        let p = cfg(FdpIsolation::Persistently);
        assert_eq!((p.gc_streams(), p.gc_stream(Some(3))), (4, Stream::Gc(3)));
        assert_eq!(p.owner(Stream::Gc(3)), Some(3));
        assert_eq!(p.ruh_type(), RuhType::PersistentlyIsolated);
    }

    #[test]
    fn events_are_logged_where_enabled_in_bounded_rings() {
        let c = cfg(FdpIsolation::Initially);
        let mut s = FdpState::new(4);
        s.ru_not_fully_written(&c, 1);
        assert!(s.events(true).is_empty(), "not enabled");
        s.set_enabled(1, FdpEventType::RuNotFullyWritten, true);
        for _ in 0..EVENT_LOG_ENTRIES + 5 {
            s.ru_not_fully_written(&c, 1);
        }
        let host = s.events(true);
        assert_eq!(host.len(), EVENT_LOG_ENTRIES);
        assert_eq!(
            (host[0].kind(), host[0].ruh, host[0].flags),
            (Some(FdpEventType::RuNotFullyWritten), 1, 7)
        );
        assert!(s.events(false).is_empty());
        // A shared segment's moves are logged where any handle asked.
        s.media_reallocated(&c, None, 10, 3);
        assert!(s.events(false).is_empty());
        s.set_enabled(2, FdpEventType::MediaReallocated, true);
        s.media_reallocated(&c, None, 10, 3);
        s.media_reallocated(&c, Some(2), 20, 70_000);
        let ctrl = s.events(false);
        assert_eq!(ctrl.len(), 2);
        assert_eq!(ctrl[0].flags, FdpEvent::NSIDV, "no location for a shared segment");
        let m = MediaReallocated::from_bytes(&ctrl[1].type_specific);
        assert_eq!((m.lba, m.blocks_moved), (Some(20), u16::MAX));
        assert_eq!(ctrl[1].ruh, 2);
        s.reset_features();
        assert!(!s.enabled(1, FdpEventType::RuNotFullyWritten));
        assert_eq!(s.events(true).len(), EVENT_LOG_ENTRIES, "the logs stay");
    }
}
