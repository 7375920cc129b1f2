//! Zone changes across the fabric: each controller's Changed Zone List
//! (log page BFh) and its Zone Descriptor Changed notices.
//!
//! A device records the zones it changes on its own (a zone gone Read
//! Only or Offline, finished by the controller, Reset or Finish Zone
//! Recommended set) in one list with one reader
//! ([`zns_device::ZoneChanges`]). [`ZoneWatch`] is that reader for the
//! subsystem: it takes a device's new changes and copies them into the
//! list of every I/O controller (each host sees every change once, as on
//! a drive with several controllers). It looks at the devices only when
//! a host asks (Get Log Page, Set Features, Connect) and while an admin
//! queue holds an Asynchronous Event Request with the notices enabled;
//! a look is one atomic load per device, and the I/O path never takes
//! part.
//!
//! Per controller and namespace ([`ZoneEvents`]): the changed zones
//! (each once, in order, at most 511 before the list overflows), whether
//! an event waits for an Asynchronous Event Request, and whether one was
//! reported and the log page not yet read with Retain Asynchronous Event
//! cleared (further changes are listed but raise no event until then).
//! Reading the page with RAE cleared empties the list and re-arms the
//! event; with RAE set it leaves both.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use zns_device::ZonedDevice;
use zns_spec::event::AsyncEvent;
use zns_spec::log::ChangedZoneList;

use crate::controller::Registry;
use crate::subsystem::Subsystem;

/// Zone events of one namespace for one controller.
#[derive(Debug, Default, Clone)]
struct NamespaceEvents {
    /// Changed zones (start LBAs), each once, oldest first.
    zones: Vec<u64>,
    /// More than 511 zones changed: the page says so instead of listing.
    overflow: bool,
    /// An event waits for an Asynchronous Event Request.
    queued: bool,
    /// An event was reported and the log page not yet read with RAE
    /// cleared: no further event until it is.
    masked: bool,
}

/// One controller's Changed Zone Lists and Zone Descriptor Changed
/// events, by NSID.
#[derive(Debug, Default)]
pub(crate) struct ZoneEvents {
    by_nsid: Vec<NamespaceEvents>,
}

impl ZoneEvents {
    fn entry(&mut self, nsid: u32) -> &mut NamespaceEvents {
        let i = nsid as usize - 1;
        if self.by_nsid.len() <= i {
            self.by_nsid.resize_with(i + 1, Default::default);
        }
        &mut self.by_nsid[i]
    }

    /// Adds changed `zones` of namespace `nsid`; with `notify` (the host
    /// enabled Zone Descriptor Changed notices) an event is queued unless
    /// one is masked.
    pub(crate) fn record(&mut self, nsid: u32, zones: &[u64], notify: bool) {
        if zones.is_empty() {
            return;
        }
        let e = self.entry(nsid);
        for &z in zones {
            if e.overflow || e.zones.contains(&z) {
                continue;
            }
            if e.zones.len() == ChangedZoneList::MAX_ZONES {
                e.overflow = true;
                e.zones = Vec::new();
            } else {
                e.zones.push(z);
            }
        }
        if notify && !e.masked {
            e.queued = true;
        }
    }

    /// The next event to report, lowest NSID first; it is masked until the
    /// host reads its log page with RAE cleared. Without `notify` (notices
    /// disabled) queued events are dropped and none is reported.
    pub(crate) fn next_event(&mut self, notify: bool) -> Option<AsyncEvent> {
        if !notify {
            self.by_nsid.iter_mut().for_each(|e| e.queued = false);
            return None;
        }
        let i = self.by_nsid.iter().position(|e| e.queued)?;
        let e = &mut self.by_nsid[i];
        e.queued = false;
        e.masked = true;
        Some(AsyncEvent::zone_descriptor_changed(i as u32 + 1))
    }

    /// The Changed Zone List page of namespace `nsid`; unless `retain`
    /// (RAE), the list is emptied and the event cleared.
    pub(crate) fn read_log(&mut self, nsid: u32, retain: bool) -> Box<[u8; ChangedZoneList::SIZE]> {
        let e = self.entry(nsid);
        let page = ChangedZoneList { zones: e.zones.clone(), overflow: e.overflow }.to_bytes();
        if !retain {
            *e = NamespaceEvents::default();
        }
        page
    }
}

/// A zoned namespace whose device reports its zone changes.
struct Watched {
    nsid: u32,
    device: Arc<dyn ZonedDevice>,
    /// The device's change count when its changes were last taken.
    seen: AtomicU64,
}

/// The subsystem's reader of its devices' zone changes.
///
/// Thread safety: `Send + Sync`; [`ZoneWatch::refresh`] from any
/// connection (one at a time takes the changes).
pub(crate) struct ZoneWatch {
    watched: Vec<Watched>,
    taking: Mutex<()>,
}

impl std::fmt::Debug for ZoneWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let nsids: Vec<u32> = self.watched.iter().map(|w| w.nsid).collect();
        f.debug_struct("ZoneWatch").field("namespaces", &nsids).finish()
    }
}

impl ZoneWatch {
    /// Watches every zoned namespace of `sub` whose device reports zone
    /// changes. Changes recorded before are no controller's: they are
    /// dropped.
    pub(crate) fn new(sub: &Subsystem) -> ZoneWatch {
        let watched = sub
            .namespaces()
            .iter()
            .filter_map(|ns| {
                let device = Arc::clone(ns.zoned()?);
                let changes = device.zone_changes()?;
                let seen = AtomicU64::new(changes.generation());
                let old = changes.take();
                if !old.is_empty() {
                    tracing::debug!(
                        nsid = ns.nsid,
                        zones = old.len(),
                        "zone changes before serving"
                    );
                }
                Some(Watched { nsid: ns.nsid, device, seen })
            })
            .collect();
        ZoneWatch { watched, taking: Mutex::new(()) }
    }

    /// True when no namespace reports zone changes.
    pub(crate) fn is_empty(&self) -> bool {
        self.watched.is_empty()
    }

    /// Copies every zone change the devices recorded since the last call
    /// into the list of each I/O controller of `registry`.
    pub(crate) fn refresh(&self, registry: &Registry) {
        for w in &self.watched {
            let Some(changes) = w.device.zone_changes() else { continue };
            if changes.generation() == w.seen.load(Ordering::Acquire) {
                continue;
            }
            let _one = self.taking.lock();
            let now = changes.generation();
            if now == w.seen.load(Ordering::Acquire) {
                continue;
            }
            // Taken after the count was read: a change recorded in between
            // is taken now and moves the count again, so the next look
            // takes an empty list at worst.
            let zones = changes.take();
            w.seen.store(now, Ordering::Release);
            tracing::debug!(nsid = w.nsid, zones = zones.len(), "zone descriptors changed");
            registry.each_io(|c| c.record_zone_changes(w.nsid, &zones));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(e: &mut ZoneEvents, nsid: u32, retain: bool) -> ChangedZoneList {
        ChangedZoneList::from_bytes(&e.read_log(nsid, retain))
    }

    #[test]
    fn one_event_per_namespace_until_the_log_is_read_without_rae() {
        let mut e = ZoneEvents::default();
        e.record(1, &[64, 128, 64], true);
        e.record(3, &[0], true);
        let first = e.next_event(true).unwrap();
        assert_eq!((first.nsid, first.is_zone_descriptor_changed()), (1, true));
        assert_eq!(e.next_event(true).unwrap().nsid, 3);
        assert_eq!(e.next_event(true), None);
        // Masked: more changes are listed, no event.
        e.record(1, &[192], true);
        assert_eq!(e.next_event(true), None);
        // RAE set: the list stays and so does the mask.
        assert_eq!(listed(&mut e, 1, true).zones, [64, 128, 192]);
        e.record(1, &[256], true);
        assert_eq!(e.next_event(true), None);
        // RAE cleared: emptied and re-armed.
        assert_eq!(listed(&mut e, 1, false).zones, [64, 128, 192, 256]);
        assert_eq!(listed(&mut e, 1, false).zones, Vec::<u64>::new());
        e.record(1, &[64], true);
        assert_eq!(e.next_event(true).unwrap().nsid, 1);
        // A namespace never changed reads as an empty list.
        assert_eq!(listed(&mut e, 2, false), ChangedZoneList::default());
    }

    #[test]
    fn disabled_notices_list_zones_but_raise_nothing() {
        let mut e = ZoneEvents::default();
        e.record(1, &[64], false);
        assert_eq!(e.next_event(true), None);
        e.record(1, &[128], true);
        // Disabled after the change: the queued event is dropped.
        assert_eq!(e.next_event(false), None);
        assert_eq!(e.next_event(true), None);
        assert_eq!(listed(&mut e, 1, false).zones, [64, 128]);
    }

    #[test]
    fn more_than_511_zones_overflow_the_list() {
        let mut e = ZoneEvents::default();
        let many: Vec<u64> = (0..511).map(|z| z * 64).collect();
        e.record(1, &many, false);
        assert_eq!(listed(&mut e, 1, true).zones.len(), 511);
        e.record(1, &[511 * 64], false);
        let page = listed(&mut e, 1, false);
        assert!(page.overflow && page.zones.is_empty());
        assert_eq!(listed(&mut e, 1, false), ChangedZoneList::default());
    }
}
