//! Open and active zone accounting (Max Open / Max Active Resources) and the
//! age order of implicitly opened zones.

use std::collections::VecDeque;

use zns_spec::{StatusCode, ZoneAttributes, ZoneState};

use super::geometry::ZoneGeometry;
use super::zone::Zone;

/// Counts of open and active zones, guarded by the resources lock.
///
/// Invariant (checked by [`super::Zones::check_invariants`]): `open` is the
/// number of zones in ZSIO or ZSEO, `active` the number in ZSIO, ZSEO or
/// ZSC, and `implicit` lists exactly the ZSIO zones, oldest first. Every
/// change of a zone's state goes through [`Resources::transition`] while
/// the caller holds both this lock and the zone's lock, so the invariant
/// holds whenever the resources lock is free.
#[derive(Debug, Default)]
pub(crate) struct Resources {
    /// Zones in ZSIO or ZSEO.
    pub open: u32,
    /// Zones in ZSIO, ZSEO or ZSC.
    pub active: u32,
    /// Zones holding a zone random write area (attribute ZRWAV).
    pub zrwa: u32,
    /// Implicitly opened zones in the order they were opened; the front is
    /// the one the controller closes first when it needs an open resource.
    pub implicit: VecDeque<u32>,
    /// Where transitions are traced, when a trace sink is installed.
    pub trace: Option<std::sync::Arc<crate::trace::ZoneTracer>>,
}

impl Resources {
    /// Moves zone `index` to state `to`, keeping the counts and the queue of
    /// implicitly opened zones in step. Limits are the caller's business.
    pub fn transition(&mut self, index: u32, zone: &mut Zone, to: ZoneState) {
        let from = zone.state;
        if from == to {
            return;
        }
        if from.is_open() {
            self.open -= 1;
        }
        if from.is_active() {
            self.active -= 1;
        }
        if from == ZoneState::ImplicitlyOpen {
            if let Some(pos) = self.implicit.iter().position(|&z| z == index) {
                self.implicit.remove(pos);
            }
        }
        if to.is_open() {
            self.open += 1;
        }
        if to.is_active() {
            self.active += 1;
        }
        if to == ZoneState::ImplicitlyOpen {
            self.implicit.push_back(index);
        }
        if !to.is_active() {
            self.release_zrwa(zone);
        }
        zone.state = to;
        if let Some(t) = &self.trace {
            t.transition(index, from, to);
        }
    }

    /// Gives up the zone's random write area, if it has one: the blocks it
    /// holds become part of the written extent (Finish, Read Only, and the
    /// callers of Reset and Offline then clear the zone).
    fn release_zrwa(&mut self, zone: &mut Zone) {
        if zone.has_zrwa() {
            zone.attrs.0 &= !ZoneAttributes::ZRWA_VALID;
            zone.wp = zone.visible_end();
            self.zrwa -= 1;
        }
    }

    /// Allocates a zone random write area to an open zone (Open Zone with
    /// ZRWA Allocate). A zone that has one keeps it. Errors: ZRWA Resources
    /// Unavailable when all `limit` are in use.
    pub fn allocate_zrwa(&mut self, zone: &mut Zone, limit: u32) -> Result<(), StatusCode> {
        if zone.has_zrwa() {
            return Ok(());
        }
        if self.zrwa >= limit {
            return Err(StatusCode::ZrwaResourcesUnavailable);
        }
        self.zrwa += 1;
        zone.attrs.0 |= ZoneAttributes::ZRWA_VALID;
        zone.window_end = zone.wp;
        Ok(())
    }

    /// Decides whether a zone may be opened now.
    ///
    /// `needs_active` is true when the zone is Empty (opening it also makes
    /// it active). Returns the implicitly opened zone the controller has to
    /// close first, if any. Errors: Too Many Active Zones when an active
    /// resource is needed and none is free (checked first, as closing a zone
    /// never frees one); Too Many Open Zones when no open resource is free
    /// and no implicitly opened zone can be closed.
    pub fn plan_open(
        &self,
        geometry: &ZoneGeometry,
        needs_active: bool,
    ) -> Result<Option<u32>, StatusCode> {
        if needs_active && geometry.max_active.is_some_and(|max| self.active >= max) {
            return Err(StatusCode::TooManyActiveZones);
        }
        if geometry.max_open.is_some_and(|max| self.open >= max) {
            return match self.implicit.front() {
                Some(&victim) => Ok(Some(victim)),
                None => Err(StatusCode::TooManyOpenZones),
            };
        }
        Ok(None)
    }

    /// Checks that an Empty zone may become active without being opened
    /// (Set Zone Descriptor Extension: ZSE → ZSC).
    pub fn plan_activate(&self, geometry: &ZoneGeometry) -> Result<(), StatusCode> {
        if geometry.max_active.is_some_and(|max| self.active >= max) {
            return Err(StatusCode::TooManyActiveZones);
        }
        Ok(())
    }
}
