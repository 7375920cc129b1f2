//! Controller-initiated zone changes (fault injection) and the Changed Zone
//! List they feed.

use zns_spec::{StatusCode, ZoneAttributes, ZoneState};

use super::io::enter_full;
use super::Zones;

impl Zones {
    /// The controller makes zone `zone` Read Only (a media failure). Its
    /// resources are released; written blocks stay readable and durable.
    /// Recorded in the Changed Zone List.
    ///
    /// Errors: LBA Out of Range for a bad index; Invalid Zone State
    /// Transition for an Offline zone. A Read Only zone stays as it is.
    pub fn set_read_only(&self, zone: u32) -> Result<(), StatusCode> {
        self.controller_change(zone, |z| match z {
            ZoneState::Offline => Err(StatusCode::InvalidZoneStateTransition),
            ZoneState::ReadOnly => Ok(None),
            _ => Ok(Some(ZoneState::ReadOnly)),
        })
    }

    /// The controller takes zone `zone` offline (a media failure). Its
    /// resources are released, its contents, attributes and extension
    /// forgotten; the caller may deallocate its media. Recorded in the
    /// Changed Zone List.
    ///
    /// Errors: LBA Out of Range for a bad index. An Offline zone stays as it
    /// is.
    pub fn set_offline(&self, zone: u32) -> Result<(), StatusCode> {
        self.controller_change(zone, |z| match z {
            ZoneState::Offline => Ok(None),
            _ => Ok(Some(ZoneState::Offline)),
        })
    }

    /// Zone Active Excursion: the controller finishes active zone `zone`
    /// (ZSIO, ZSEO or ZSC → ZSF) and sets Zone Finished by Controller.
    /// Recorded in the Changed Zone List.
    ///
    /// Errors: LBA Out of Range for a bad index; Invalid Zone State
    /// Transition for a zone that is not active.
    pub fn finish_by_controller(&self, zone: u32) -> Result<(), StatusCode> {
        self.controller_change(zone, |z| {
            if z.is_active() {
                Ok(Some(ZoneState::Full))
            } else {
                Err(StatusCode::InvalidZoneStateTransition)
            }
        })
    }

    /// Sets Reset Zone Recommended on zone `zone` (Closed, open or Full) and
    /// records it in the Changed Zone List. Reset clears it.
    ///
    /// Errors: LBA Out of Range for a bad index; Invalid Zone State
    /// Transition for any other state.
    pub fn set_reset_recommended(&self, zone: u32) -> Result<(), StatusCode> {
        self.set_recommendation(zone, ZoneAttributes::RESET_RECOMMENDED, |s| {
            s.is_active() || s == ZoneState::Full
        })
    }

    /// Sets Finish Zone Recommended on active zone `zone` and records it in
    /// the Changed Zone List. Finish, Reset and filling clear it.
    ///
    /// Errors: LBA Out of Range for a bad index; Invalid Zone State
    /// Transition for a zone that is not active.
    pub fn set_finish_recommended(&self, zone: u32) -> Result<(), StatusCode> {
        self.set_recommendation(zone, ZoneAttributes::FINISH_RECOMMENDED, |s| s.is_active())
    }

    /// Removes and returns up to `max` entries of the Changed Zone List
    /// (zone start LBAs, the zone identifiers of the log page), oldest
    /// first. A zone is listed once however often it changed.
    pub fn take_changed_zones(&self, max: usize) -> Vec<u64> {
        let mut c = self.changed.lock();
        let n = max.min(c.order.len());
        let taken: Vec<u32> = c.order.drain(..n).collect();
        for &z in &taken {
            c.listed[z as usize] = false;
        }
        drop(c);
        taken.into_iter().map(|z| self.geometry.zone_start(z)).collect()
    }

    /// Zone changes recorded so far (each controller-initiated change
    /// counts, listed zones included). One atomic load and no lock: a
    /// consumer that polls for changes (an NVMe/TCP target waiting to send
    /// a Zone Descriptor Changed event) compares it with the count it saw
    /// and calls [`Zones::take_changed_zones`] only when it moved.
    pub fn changed_zones_generation(&self) -> u64 {
        self.change_count.0.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Number of entries waiting in the Changed Zone List.
    pub fn changed_zones_pending(&self) -> usize {
        self.changed.lock().order.len()
    }

    /// A controller-initiated state change decided by `decide` from the
    /// current state (`Ok(None)`: nothing to do).
    fn controller_change(
        &self,
        zone: u32,
        decide: impl FnOnce(ZoneState) -> Result<Option<ZoneState>, StatusCode>,
    ) -> Result<(), StatusCode> {
        if zone >= self.geometry.zones {
            return Err(StatusCode::LbaOutOfRange);
        }
        let mut res = self.resources.lock();
        let mut z = self.lock(zone);
        let Some(to) = decide(z.state)? else {
            return Ok(());
        };
        match to {
            ZoneState::Full => {
                enter_full(&mut res, zone, &mut z);
                z.attrs.0 |= ZoneAttributes::FINISHED_BY_CONTROLLER;
            }
            ZoneState::ReadOnly => {
                res.transition(zone, &mut z, to);
                z.durable_wp = z.wp;
            }
            ZoneState::Offline => {
                res.transition(zone, &mut z, to);
                z.clear();
            }
            _ => unreachable!("controller changes lead to Full, Read Only or Offline"),
        }
        tracing::debug!(zone, state = ?to, "controller-initiated zone change");
        self.note_changed(zone);
        Ok(())
    }

    fn set_recommendation(
        &self,
        zone: u32,
        bit: u8,
        allowed: impl FnOnce(ZoneState) -> bool,
    ) -> Result<(), StatusCode> {
        if zone >= self.geometry.zones {
            return Err(StatusCode::LbaOutOfRange);
        }
        let _res = self.resources.lock();
        let mut z = self.lock(zone);
        if !allowed(z.state) {
            return Err(StatusCode::InvalidZoneStateTransition);
        }
        z.attrs.0 |= bit;
        self.note_changed(zone);
        Ok(())
    }
}
