//! The I/O path: Write, Write Zeroes, Copy destination, Zone Append, and the
//! visibility map reads use.

use zns_spec::{StatusCode, ZoneAttributes, ZoneState};

use super::zone::Zone;
use super::{ZoneError, Zones};

/// What a successful write-type command did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteOutcome {
    /// First LBA written; for Zone Append the assigned LBA the completion
    /// returns.
    pub lba: u64,
    /// Blocks written.
    pub blocks: u64,
    /// The command implicitly opened the zone (it was Empty or Closed).
    pub opened: bool,
    /// ZSLBA of the implicitly opened zone the controller closed to free an
    /// open resource for this command.
    pub closed_by_controller: Option<u64>,
    /// The zone reached its capacity and is now Full.
    pub filled: bool,
    /// `Some((lba, blocks))` when the write went into a zone random write
    /// area: the blocks it committed implicitly (it reached past the
    /// window), from `lba` (the old write pointer); `blocks` is 0 when it
    /// stayed inside the window. `None` outside a ZRWA, where the write
    /// pointer moves past the blocks written.
    pub zrwa_commit: Option<(u64, u64)>,
}

/// Where a write-type command puts its data.
#[derive(Clone, Copy)]
enum Target {
    /// At an LBA given by the host (Write, Write Zeroes, Copy).
    At(u64),
    /// At the write pointer of the zone starting here (Zone Append).
    Append(u64),
}

impl Zones {
    /// A Write command of `blocks` blocks at `slba`.
    ///
    /// Checks, in order: LBA Out of Range (range past the namespace); Zone
    /// Boundary Error (range crosses the zone size); Zone Is Full / Zone Is
    /// Read Only / Zone Is Offline; Zone Invalid Write (`slba` is not the
    /// write pointer); Zone Boundary Error (range past the zone capacity);
    /// then resources: an Empty zone needs an active resource (Too Many
    /// Active Zones) and an Empty or Closed zone an open one, for which the
    /// controller closes the oldest implicitly opened zone if it must (Too
    /// Many Open Zones when every open zone was opened explicitly).
    ///
    /// `data` is called once, with `slba`, while the zone is locked; it
    /// copies the blocks into the media. If it fails nothing changes.
    /// Afterwards the write pointer advances, the zone becomes Full at its
    /// capacity (releasing its resources), and with `fua` everything written
    /// to the zone so far is durable.
    ///
    /// `blocks` is the real count (NLB + 1); zero is Invalid Field in Command.
    ///
    /// QEMU has no separate zone-size check: a range crossing into the next
    /// zone is caught by its capacity check, after the state and write
    /// pointer checks. A crossing write to a Full zone thus completes with
    /// Zone Is Full there and Zone Boundary Error here; the status is the
    /// same whenever only one rule is broken.
    ///
    /// In a zone with a random write area (ZRWAV) the write may start
    /// anywhere from the write pointer and end at most two windows past it
    /// (`WP + 2 × ZRWASZ`, as QEMU allows), else Zone Invalid Write. Blocks
    /// in the window may be written again. A write ending past the window
    /// `[WP, WP + ZRWASZ)` commits implicitly: the write pointer moves by
    /// the whole flush granularity units that bring the write's end back
    /// into the window ([`WriteOutcome::committed`]). Committed blocks are
    /// durable; uncommitted ones are readable and lost at a power cut.
    pub fn write<E>(
        &self,
        slba: u64,
        blocks: u64,
        fua: bool,
        data: impl FnOnce(u64) -> Result<(), E>,
    ) -> Result<WriteOutcome, ZoneError<E>> {
        self.do_write(Target::At(slba), blocks, u64::MAX, fua, data)
    }

    /// A Write Zeroes command: a write whose data are zeros. Same rules as
    /// [`Zones::write`]; `data` writes (or deallocates) the blocks.
    pub fn write_zeroes<E>(
        &self,
        slba: u64,
        blocks: u64,
        fua: bool,
        data: impl FnOnce(u64) -> Result<(), E>,
    ) -> Result<WriteOutcome, ZoneError<E>> {
        self.do_write(Target::At(slba), blocks, u64::MAX, fua, data)
    }

    /// The destination of a Copy command (SDLBA and the total of the source
    /// ranges): a write, with the same rules as [`Zones::write`].
    pub fn copy_destination<E>(
        &self,
        sdlba: u64,
        blocks: u64,
        fua: bool,
        data: impl FnOnce(u64) -> Result<(), E>,
    ) -> Result<WriteOutcome, ZoneError<E>> {
        self.do_write(Target::At(sdlba), blocks, u64::MAX, fua, data)
    }

    /// A Zone Append command to the zone starting at `zslba`.
    ///
    /// LBA Out of Range first; then Invalid Field in Command when `zslba` is
    /// not the start of a zone or `blocks` exceeds `max_blocks` (the Zone
    /// Append Size Limit in blocks, already resolved from ZASL or MDTS by
    /// the caller; `u64::MAX` for none); then the write checks of
    /// [`Zones::write`] at the zone's write pointer. `data` receives the
    /// assigned LBA, which [`WriteOutcome::lba`] also returns. A zone with a
    /// random write area refuses appends with Invalid Zone Operation
    /// Request, checked first once the zone is locked.
    pub fn append<E>(
        &self,
        zslba: u64,
        blocks: u64,
        max_blocks: u64,
        fua: bool,
        data: impl FnOnce(u64) -> Result<(), E>,
    ) -> Result<WriteOutcome, ZoneError<E>> {
        self.do_write(Target::Append(zslba), blocks, max_blocks, fua, data)
    }

    fn do_write<E>(
        &self,
        target: Target,
        blocks: u64,
        max_blocks: u64,
        fua: bool,
        data: impl FnOnce(u64) -> Result<(), E>,
    ) -> Result<WriteOutcome, ZoneError<E>> {
        let g = &self.geometry;
        if blocks == 0 {
            return Err(StatusCode::InvalidField.into());
        }
        let cmd_slba = match target {
            Target::At(s) | Target::Append(s) => s,
        };
        self.check_range(cmd_slba, blocks)?;
        let index = cmd_slba / g.zone_size;
        let zslba = g.zone_start(index as u32);
        let index = index as u32;
        if let Target::Append(_) = target {
            if cmd_slba != zslba || blocks > max_blocks {
                return Err(StatusCode::InvalidField.into());
            }
        }
        if cmd_slba + blocks > zslba + g.zone_size {
            return Err(StatusCode::ZoneBoundaryError.into());
        }
        let cap_end = zslba + g.zone_capacity;

        // Fast path: the zone is open and stays open; only its lock is needed.
        // (A ZRWA commit never reaches the end of the write, so a write
        // ending short of the capacity leaves a ZRWA zone open too.)
        {
            let mut z = self.lock(index);
            let slba = resolve(target, &z);
            self.check_zone_write(&z, target, slba, blocks, cap_end)?;
            if z.state.is_open() && slba + blocks < cap_end {
                data(slba).map_err(ZoneError::Data)?;
                let zrwa_commit = self.advance(&mut z, slba, blocks, cap_end);
                if fua {
                    z.durable_wp = z.wp;
                }
                return Ok(WriteOutcome {
                    lba: slba,
                    blocks,
                    opened: false,
                    closed_by_controller: None,
                    filled: false,
                    zrwa_commit,
                });
            }
        }

        // Slow path: a transition (implicit open, Full, or both). Resources
        // first, then the zone again; everything may have changed meanwhile.
        let mut res = self.resources.lock();
        let mut z = self.lock(index);
        let slba = resolve(target, &z);
        self.check_zone_write(&z, target, slba, blocks, cap_end)?;
        let victim = match z.state {
            ZoneState::Empty => res.plan_open(g, true)?,
            ZoneState::Closed => res.plan_open(g, false)?,
            _ => None,
        };
        data(slba).map_err(ZoneError::Data)?;

        let mut outcome = WriteOutcome {
            lba: slba,
            blocks,
            opened: !z.state.is_open(),
            closed_by_controller: None,
            filled: false,
            zrwa_commit: None,
        };
        if let Some(v) = victim {
            // We hold the resources lock: taking a second zone lock is allowed.
            let mut vz = self.lock(v);
            debug_assert_eq!(vz.state, ZoneState::ImplicitlyOpen);
            res.transition(v, &mut vz, ZoneState::Closed);
            outcome.closed_by_controller = Some(vz.start);
            tracing::debug!(zone = v, "controller closed implicitly opened zone");
        }
        if outcome.opened {
            res.transition(index, &mut z, ZoneState::ImplicitlyOpen);
        }
        outcome.zrwa_commit = self.advance(&mut z, slba, blocks, cap_end);
        if fua {
            z.durable_wp = z.wp;
        }
        if z.wp == cap_end {
            enter_full(&mut res, index, &mut z);
            outcome.filled = true;
        }
        Ok(outcome)
    }

    /// Splits a read of `blocks` blocks at `slba` into runs of visible
    /// (`written = true`, read them from the media) and unwritten blocks
    /// (return zeros), calling `f(lba, count, written)` for each run in LBA
    /// order. Reads never change zone state.
    ///
    /// Errors, in order: Invalid Field in Command for zero blocks; LBA Out
    /// of Range; Zone Is Offline when the first zone is offline; Zone
    /// Boundary Error when the range crosses a zone boundary and Read Across
    /// Zone Boundaries is off; with it on, Zone Is Offline when any zone
    /// read is offline. `f` is not called when the read fails.
    pub fn read_extent(
        &self,
        slba: u64,
        blocks: u64,
        mut f: impl FnMut(u64, u64, bool),
    ) -> Result<(), StatusCode> {
        let g = &self.geometry;
        if blocks == 0 {
            return Err(StatusCode::InvalidField);
        }
        self.check_range(slba, blocks)?;
        let end = slba + blocks;
        let first = (slba / g.zone_size) as u32;
        let last = ((end - 1) / g.zone_size) as u32;

        // Learn each zone's written extent from its published view, without
        // its lock. Reads rarely span more than a few zones: keep those
        // extents on the stack.
        let mut extents = Extents::new((last - first + 1) as usize);
        for index in first..=last {
            let wp = self.zones[index as usize].read_view().ok_or(StatusCode::ZoneIsOffline)?;
            if index == first && last != first && !g.read_across_boundaries {
                return Err(StatusCode::ZoneBoundaryError);
            }
            extents.push(wp);
        }

        // Emit runs, merging neighbours of the same kind.
        let mut run: Option<(u64, u64, bool)> = None;
        let mut push = |lba: u64, count: u64, written: bool| {
            if count == 0 {
                return;
            }
            match &mut run {
                Some((_, n, w)) if *w == written => *n += count,
                _ => {
                    if let Some((l, n, w)) = run.take() {
                        f(l, n, w);
                    }
                    run = Some((lba, count, written));
                }
            }
        };
        for (k, index) in (first..=last).enumerate() {
            let zs = g.zone_start(index);
            let lo = slba.max(zs);
            let hi = end.min(zs + g.zone_size);
            let wp = extents.get(k).clamp(lo, hi); // the visible end
            push(lo, wp - lo, true);
            push(wp, hi - wp, false);
        }
        if let Some((l, n, w)) = run {
            f(l, n, w);
        }
        Ok(())
    }
}

/// The LBA a write-type command writes at.
fn resolve(target: Target, zone: &Zone) -> u64 {
    match target {
        Target::At(s) => s,
        Target::Append(_) => zone.wp,
    }
}

impl Zones {
    /// The per-zone write checks, in QEMU's order (Zone Append to a ZRWA
    /// zone, state, write pointer or window, zone capacity). The caller
    /// checked the namespace range and the zone size.
    fn check_zone_write(
        &self,
        zone: &Zone,
        target: Target,
        slba: u64,
        blocks: u64,
        cap_end: u64,
    ) -> Result<(), StatusCode> {
        if matches!(target, Target::Append(_)) && zone.has_zrwa() {
            return Err(StatusCode::InvalidZoneOperationRequest);
        }
        match zone.state {
            ZoneState::Full => return Err(StatusCode::ZoneIsFull),
            ZoneState::ReadOnly => return Err(StatusCode::ZoneIsReadOnly),
            ZoneState::Offline => return Err(StatusCode::ZoneIsOffline),
            _ => {}
        }
        let in_place = match self.geometry.zrwa {
            Some(w) if zone.has_zrwa() => slba >= zone.wp && slba + blocks <= zone.wp + 2 * w.size,
            _ => slba == zone.wp,
        };
        if !in_place {
            return Err(StatusCode::ZoneInvalidWrite);
        }
        if slba + blocks > cap_end {
            return Err(StatusCode::ZoneBoundaryError);
        }
        Ok(())
    }

    /// Moves the write pointer after `blocks` blocks were stored at `slba`:
    /// past them, or in a ZRWA zone by the implicit commit the write causes.
    /// Returns what a ZRWA zone committed implicitly (see
    /// [`WriteOutcome::zrwa_commit`]). A ZRWA commit stops short of
    /// `slba + blocks` (the granularity divides the window), so it never
    /// passes what was written.
    fn advance(&self, z: &mut Zone, slba: u64, blocks: u64, cap_end: u64) -> Option<(u64, u64)> {
        let end = slba + blocks;
        let Some(w) = self.geometry.zrwa.filter(|_| z.has_zrwa()) else {
            z.wp = end;
            return None;
        };
        z.window_end = z.window_end.max(end);
        let (from, window) = (z.wp, z.wp + w.size);
        if end <= window {
            return Some((from, 0));
        }
        let units = (end - window).div_ceil(w.flush_granularity);
        let committed = (units * w.flush_granularity).min(cap_end - z.wp);
        z.wp += committed;
        z.durable_wp = z.wp;
        Some((from, committed))
    }
}

/// Makes a zone Full (by filling or by Finish): releases its resources and
/// makes it durable. A zone that is Full no longer needs finishing, so the
/// Finish Zone Recommended attribute is cleared.
pub(crate) fn enter_full(res: &mut super::Resources, index: u32, zone: &mut Zone) {
    res.transition(index, zone, ZoneState::Full);
    zone.durable_wp = zone.wp;
    zone.attrs.0 &= !ZoneAttributes::FINISH_RECOMMENDED;
}

/// Written extents of the zones a read spans: inline for up to four zones,
/// on the heap beyond (reads across many zones are rare and large).
enum Extents {
    Inline([u64; 4], usize),
    Heap(Vec<u64>),
}

impl Extents {
    fn new(zones: usize) -> Self {
        if zones <= 4 {
            Extents::Inline([0; 4], 0)
        } else {
            Extents::Heap(Vec::with_capacity(zones))
        }
    }

    fn push(&mut self, v: u64) {
        match self {
            Extents::Inline(a, n) => {
                a[*n] = v;
                *n += 1;
            }
            Extents::Heap(h) => h.push(v),
        }
    }

    fn get(&self, k: usize) -> u64 {
        match self {
            Extents::Inline(a, _) => a[k],
            Extents::Heap(h) => h[k],
        }
    }
}
