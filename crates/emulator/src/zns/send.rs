//! Zone Management Send: Close, Finish, Open, Reset, Offline and Set Zone
//! Descriptor Extension, on one zone or with Select All.

use zns_spec::{StatusCode, ZoneAttributes, ZoneSendAction, ZoneState};

use super::io::enter_full;
use super::resources::Resources;
use super::zone::Zone;
use super::Zones;

/// What a successful Zone Management Send did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SendOutcome {
    /// Zones that changed state, in zone order.
    pub transitioned: Vec<u32>,
    /// `(lba, blocks)` ranges whose media may be deallocated: whole zones
    /// that were reset or taken offline, and the unwritten rest of a zone
    /// that got a zone random write area (so that blocks of its window it
    /// commits unwritten read as zeros, whatever an earlier life of the
    /// device left there). Nothing reads them any more.
    pub released: Vec<(u64, u64)>,
    /// Blocks a Flush Explicit ZRWA Range committed (0 for other actions).
    pub committed: u64,
}

impl Zones {
    /// Zone Management Send with a decoded action.
    ///
    /// Without `select_all`, `slba` must lie in the namespace (LBA Out of
    /// Range) and be the start of a zone (Invalid Field in Command). With
    /// it, `slba` is ignored and the action applies to every zone in its
    /// scope: Open to Closed zones, Close to open zones, Finish to open and
    /// Closed zones, Reset to open, Closed and Full zones, Offline to Read
    /// Only zones; Set Zone Descriptor Extension with Select All is Invalid
    /// Field in Command.
    ///
    /// `extension` is the data of Set Zone Descriptor Extension (exactly
    /// ZDES × 64 bytes) and ignored otherwise.
    ///
    /// Flush Explicit ZRWA Range takes the last LBA to commit in `slba`
    /// (any LBA of the zone); see [`Zones::send_raw`] for its rules and for
    /// Open Zone with ZRWA Allocate.
    ///
    /// Every change is durable at once.
    pub fn send(
        &self,
        slba: u64,
        action: ZoneSendAction,
        select_all: bool,
        extension: Option<&[u8]>,
    ) -> Result<SendOutcome, StatusCode> {
        if !select_all {
            self.check_range(slba, 1)?;
        }
        self.send_action(slba, action, select_all, false, extension)
    }

    /// Zone Management Send from the raw command fields: `zsa` (CDW13 bits
    /// 7:0), Select All (bit 8) and ZRWA Allocate (bit 9). A reserved action
    /// is Invalid Field in Command; otherwise as [`Zones::send`].
    ///
    /// Open Zone with ZRWA Allocate: Invalid Zone Operation Request when the
    /// namespace has no zone random write areas; Invalid Field in Command
    /// with Select All; ZRWA Resources Unavailable when the write pointer is
    /// not a multiple of the flush granularity from the zone start, then
    /// the checks of an Open (Too Many Active / Open Zones), then ZRWA
    /// Resources Unavailable when every ZRWA is taken. An open zone that
    /// already has one keeps it.
    ///
    /// Flush Explicit ZRWA Range (`slba` = last LBA to commit): Invalid Field
    /// in Command with Select All; Invalid Zone Operation Request without
    /// ZRWA support; Invalid Field in Command when explicit flushes are not
    /// supported or the zone has no ZRWA; Zone Boundary Error when `slba`
    /// lies before the write pointer, at or past the window's end or the
    /// zone capacity; Invalid Field in Command unless the range is whole
    /// flush granularity units. A Closed zone is opened implicitly (open
    /// resources as for a write). The write pointer moves past `slba`; the
    /// committed blocks are durable; at the capacity the zone is Full.
    pub fn send_raw(
        &self,
        slba: u64,
        zsa: u8,
        select_all: bool,
        zrwa_allocate: bool,
        extension: Option<&[u8]>,
    ) -> Result<SendOutcome, StatusCode> {
        if !select_all {
            self.check_range(slba, 1)?;
        }
        let action = ZoneSendAction::from_raw(zsa).ok_or(StatusCode::InvalidField)?;
        self.send_action(slba, action, select_all, zrwa_allocate, extension)
    }

    fn send_action(
        &self,
        slba: u64,
        action: ZoneSendAction,
        select_all: bool,
        zrwa_allocate: bool,
        extension: Option<&[u8]>,
    ) -> Result<SendOutcome, StatusCode> {
        let g = &self.geometry;
        match action {
            ZoneSendAction::FlushZrwa if select_all => return Err(StatusCode::InvalidField),
            ZoneSendAction::FlushZrwa => return self.flush_zrwa(slba),
            ZoneSendAction::Open if zrwa_allocate && g.zrwa.is_none() => {
                return Err(StatusCode::InvalidZoneOperationRequest)
            }
            ZoneSendAction::Open if zrwa_allocate && select_all => {
                return Err(StatusCode::InvalidField)
            }
            ZoneSendAction::SetDescriptorExtension
                if select_all || g.descriptor_extension_bytes == 0 =>
            {
                return Err(StatusCode::InvalidField)
            }
            _ => {}
        }
        let target = if select_all {
            None
        } else {
            let index = (slba / g.zone_size) as u32;
            if slba != g.zone_start(index) {
                return Err(StatusCode::InvalidField);
            }
            Some(index)
        };
        let ext = match action {
            ZoneSendAction::SetDescriptorExtension => match extension {
                Some(e) if e.len() == g.descriptor_extension_bytes => Some(e),
                _ => return Err(StatusCode::InvalidField),
            },
            _ => None,
        };

        let mut out = SendOutcome::default();
        let mut res = self.resources.lock();
        match target {
            Some(index) => {
                let mut z = self.lock(index);
                let before = z.state;
                if zrwa_allocate && action == ZoneSendAction::Open {
                    self.open_zrwa(&mut res, index, &mut z, &mut out)?;
                } else {
                    self.apply(&mut res, index, &mut z, action, ext, &mut out)?;
                }
                if z.state != before {
                    out.transitioned.push(index);
                }
            }
            None => {
                if action == ZoneSendAction::Open {
                    // All or nothing: every Closed zone needs an open resource
                    // of its own, and no implicitly opened zone is closed to
                    // make room (the scope is the zones that are Closed now).
                    let closed =
                        self.zones.iter().filter(|m| m.lock().state == ZoneState::Closed).count()
                            as u64;
                    if g.max_open.is_some_and(|m| u64::from(res.open) + closed > u64::from(m)) {
                        return Err(StatusCode::TooManyOpenZones);
                    }
                }
                for index in 0..g.zones {
                    let mut z = self.lock(index);
                    if !in_select_all_scope(action, z.state) {
                        continue;
                    }
                    self.apply(&mut res, index, &mut z, action, None, &mut out)?;
                    out.transitioned.push(index);
                }
            }
        }
        Ok(out)
    }

    /// Open Zone with ZRWA Allocate on one zone; the caller holds the
    /// resources lock and the zone's lock and checked ZRWA support.
    fn open_zrwa(
        &self,
        res: &mut Resources,
        index: u32,
        z: &mut Zone,
        out: &mut SendOutcome,
    ) -> Result<(), StatusCode> {
        let w = self.geometry.zrwa.expect("checked by the caller");
        // A zone that cannot be opened is refused for its state first: a
        // Full zone's write pointer is not one to align (QEMU's sits at the
        // zone's capacity, which passes its alignment check).
        if !matches!(
            z.state,
            ZoneState::Empty
                | ZoneState::Closed
                | ZoneState::ImplicitlyOpen
                | ZoneState::ExplicitlyOpen
        ) {
            return Err(StatusCode::InvalidZoneStateTransition);
        }
        if !(z.wp - z.start).is_multiple_of(w.flush_granularity) {
            return Err(StatusCode::ZrwaResourcesUnavailable);
        }
        // The checks of an Open, then the ZRWA resource; nothing changes
        // unless all pass.
        if matches!(z.state, ZoneState::Empty | ZoneState::Closed) {
            res.plan_open(&self.geometry, z.state == ZoneState::Empty)?;
        }
        if !z.has_zrwa() && res.zrwa >= w.resources {
            return Err(StatusCode::ZrwaResourcesUnavailable);
        }
        self.apply(res, index, z, ZoneSendAction::Open, None, out)?;
        if !z.has_zrwa() {
            res.allocate_zrwa(z, w.resources)?;
            let end = z.start + self.geometry.zone_size;
            if z.wp < end {
                out.released.push((z.wp, end - z.wp));
            }
        }
        Ok(())
    }

    /// Flush Explicit ZRWA Range: commits the window of the zone holding
    /// `elba` up to and including `elba` (rules at [`Zones::send_raw`]).
    fn flush_zrwa(&self, elba: u64) -> Result<SendOutcome, StatusCode> {
        let g = &self.geometry;
        let Some(w) = g.zrwa else { return Err(StatusCode::InvalidZoneOperationRequest) };
        if !w.explicit_flush {
            return Err(StatusCode::InvalidField);
        }
        let index = (elba / g.zone_size) as u32;
        let mut res = self.resources.lock();
        let mut z = self.lock(index);
        if !z.has_zrwa() {
            return Err(StatusCode::InvalidField);
        }
        let cap_end = z.start + g.zone_capacity;
        if elba < z.wp || elba >= z.wp + w.size || elba >= cap_end {
            return Err(StatusCode::ZoneBoundaryError);
        }
        let blocks = elba + 1 - z.wp;
        if !blocks.is_multiple_of(w.flush_granularity) {
            return Err(StatusCode::InvalidField);
        }
        let mut out = SendOutcome::default();
        let before = z.state;
        if z.state == ZoneState::Closed {
            if let Some(v) = res.plan_open(g, false)? {
                let mut vz = self.lock(v);
                res.transition(v, &mut vz, ZoneState::Closed);
                tracing::debug!(zone = v, "controller closed implicitly opened zone");
            }
            res.transition(index, &mut z, ZoneState::ImplicitlyOpen);
        }
        z.wp = elba + 1;
        z.durable_wp = z.wp;
        out.committed = blocks;
        if z.wp == cap_end {
            enter_full(&mut res, index, &mut z);
        }
        if z.state != before {
            out.transitioned.push(index);
        }
        Ok(out)
    }

    /// One action on one zone; the caller holds the resources lock and the
    /// zone's lock.
    fn apply(
        &self,
        res: &mut Resources,
        index: u32,
        z: &mut Zone,
        action: ZoneSendAction,
        ext: Option<&[u8]>,
        out: &mut SendOutcome,
    ) -> Result<(), StatusCode> {
        use ZoneState::*;
        let g = &self.geometry;
        match (action, z.state) {
            (ZoneSendAction::Open, Empty | Closed) => {
                let victim = res.plan_open(g, z.state == Empty)?;
                if let Some(v) = victim {
                    // Holder of the resources lock: a second zone lock is allowed.
                    let mut vz = self.lock(v);
                    res.transition(v, &mut vz, Closed);
                    tracing::debug!(zone = v, "controller closed implicitly opened zone");
                }
                res.transition(index, z, ExplicitlyOpen);
            }
            (ZoneSendAction::Open, ImplicitlyOpen) => res.transition(index, z, ExplicitlyOpen),
            (ZoneSendAction::Open, ExplicitlyOpen) => {}

            // An open zone with nothing written becomes Closed too and stays
            // active: the ZNS state machine puts no write-pointer condition
            // on Close (ZBC's CLOSE ZONE would empty it; QEMU agrees with
            // ZNS). Only a power cycle returns such a zone to Empty.
            (ZoneSendAction::Close, ImplicitlyOpen | ExplicitlyOpen) => {
                res.transition(index, z, Closed)
            }
            (ZoneSendAction::Close, Closed) => {}

            (ZoneSendAction::Finish, Empty | ImplicitlyOpen | ExplicitlyOpen | Closed) => {
                enter_full(res, index, z)
            }
            (ZoneSendAction::Finish, Full) => {}

            (ZoneSendAction::Reset, ImplicitlyOpen | ExplicitlyOpen | Closed | Full) => {
                res.transition(index, z, Empty);
                z.clear();
                // Blocks written from now on are told from the old ones.
                self.generations.advance(index);
                out.released.push((z.start, g.zone_size));
            }
            (ZoneSendAction::Reset, Empty) => {}

            (ZoneSendAction::Offline, ReadOnly) => {
                res.transition(index, z, Offline);
                z.clear();
                self.generations.advance(index);
                out.released.push((z.start, g.zone_size));
            }
            (ZoneSendAction::Offline, Offline) => {}

            (ZoneSendAction::SetDescriptorExtension, Empty) => {
                res.plan_activate(g)?;
                res.transition(index, z, Closed);
                z.ext.copy_from_slice(ext.expect("checked by the caller"));
                z.attrs.0 |= ZoneAttributes::EXTENSION_VALID;
            }

            _ => return Err(StatusCode::InvalidZoneStateTransition),
        }
        Ok(())
    }
}

/// The zones a Select All action applies to.
fn in_select_all_scope(action: ZoneSendAction, state: ZoneState) -> bool {
    use ZoneState::*;
    match action {
        ZoneSendAction::Open => state == Closed,
        ZoneSendAction::Close => state.is_open(),
        ZoneSendAction::Finish => state.is_active(),
        ZoneSendAction::Reset => state.is_active() || state == Full,
        ZoneSendAction::Offline => state == ReadOnly,
        ZoneSendAction::SetDescriptorExtension | ZoneSendAction::FlushZrwa => false,
    }
}
