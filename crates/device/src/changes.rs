//! Zones a device changed on its own: the controller-initiated changes the
//! ZNS command set reports in the Changed Zone List log page (a zone gone
//! Read Only or Offline, finished by the controller, Reset or Finish Zone
//! Recommended set), as the device layer hands them upward, for instance
//! to an NVMe/TCP target that announces them to its hosts.

#[cfg(feature = "emulator")]
use std::sync::Arc;

/// A device's record of the zones it changed on its own.
///
/// The record has one reader: [`ZoneChanges::take`] empties it. Whoever
/// shares the changes among several consumers (one list per host
/// controller, say) takes them and copies them out.
///
/// Thread safety: `Send + Sync`; [`ZoneChanges::generation`] is one atomic
/// load, so a consumer may poll it often without touching the I/O path.
pub trait ZoneChanges: Send + Sync {
    /// A count that moves whenever the device records a zone change; equal
    /// counts mean nothing new to take.
    fn generation(&self) -> u64;

    /// Removes and returns the start LBAs of the zones changed since the
    /// last call, oldest first, each zone once however often it changed.
    fn take(&self) -> Vec<u64>;
}

/// The Changed Zone List of a zoned namespace of the emulator, read
/// directly from its zone state (the same list its Get Log Page BFh
/// returns).
#[cfg(feature = "emulator")]
pub(crate) struct EmulatedChanges {
    emulator: Arc<zns_emulator::Controller>,
    /// Index of the namespace in the emulator's list.
    index: usize,
}

#[cfg(feature = "emulator")]
impl EmulatedChanges {
    /// The changes of namespace `nsid` of `emulator`; `None` when it is not
    /// a zoned namespace there.
    pub(crate) fn new(emulator: &Arc<zns_emulator::Controller>, nsid: u32) -> Option<Self> {
        let index = emulator.namespaces().iter().position(|n| n.nsid() == nsid)?;
        emulator.namespaces()[index].zones()?;
        Some(EmulatedChanges { emulator: Arc::clone(emulator), index })
    }

    fn zones(&self) -> &zns_emulator::zns::Zones {
        self.emulator.namespaces()[self.index].zones().expect("checked at creation")
    }
}

#[cfg(feature = "emulator")]
impl std::fmt::Debug for EmulatedChanges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmulatedChanges").field("namespace", &self.index).finish()
    }
}

#[cfg(feature = "emulator")]
impl ZoneChanges for EmulatedChanges {
    fn generation(&self) -> u64 {
        self.zones().changed_zones_generation()
    }

    fn take(&self) -> Vec<u64> {
        self.zones().take_changed_zones(usize::MAX)
    }
}
