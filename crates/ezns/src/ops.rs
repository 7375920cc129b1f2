//! The cold path of logical zones: opening, the first write of a stripe
//! group, restripes (widening with spares, returning borrowed ones), zone
//! management, Select All, and the arbiter's tick.

use std::sync::atomic::Ordering::*;
use std::sync::Arc;

use parking_lot::MutexGuard;
use zns_device::{StatusCode, ZoneAction, ZoneState};

use crate::alloc::Activity;
use crate::arbiter::{Arbiter, Holding, Refusal};
use crate::config::Mode;
use crate::control::{no_gate, Deferred};
use crate::journal::Entry;
use crate::layout::{Column, Layout};
use crate::runtime::{Ezns, Gate, Group, LZone, ZoneInner, ZoneMap, FAST};

/// Why a write did not get its blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slow {
    /// It fails with this status.
    Status(zns_device::Status),
    /// No active physical zone is free on the device now: try again.
    Wait,
}

fn st(code: StatusCode) -> Slow {
    Slow::Status(code.status())
}

fn refusal(r: Refusal) -> Slow {
    st(match r {
        Refusal::TooManyActive => StatusCode::TooManyActiveZones,
        Refusal::TooManyOpen => StatusCode::TooManyOpenZones,
    })
}

impl Ezns {
    /// Reserves `n` blocks of logical zone `z` of tenant `t` at its write
    /// pointer (which must be `at` for a Write); returns the zone offset
    /// they start at.
    #[inline]
    pub(crate) fn reserve(&self, t: usize, z: usize, at: Option<u64>, n: u64) -> Result<u64, Slow> {
        let tenant = &self.tenants[t];
        let lz = &tenant.zones[z];
        if !tenant.inactive.load(Relaxed) && !lz.restripe.load(Relaxed) {
            if let Some(wp) = lz.try_reserve(at, n) {
                return Ok(wp);
            }
        }
        self.reserve_slow(t, z, at, n)
    }

    fn reserve_slow(&self, t: usize, z: usize, at: Option<u64>, n: u64) -> Result<u64, Slow> {
        let lz = &self.tenants[t].zones[z];
        let mut inner = lz.inner.lock();
        let wp = lz.clear_fast();
        let r = self.reserve_locked(t, lz, &mut inner, wp, at, n);
        let wp_now = lz.wp();
        self.refast(lz, &inner, wp_now);
        r
    }

    fn reserve_locked(
        &self,
        t: usize,
        lz: &LZone,
        inner: &mut MutexGuard<'_, ZoneInner>,
        wp: u64,
        at: Option<u64>,
        n: u64,
    ) -> Result<u64, Slow> {
        if let Some(s) = inner.broken {
            return Err(Slow::Status(s));
        }
        match inner.state {
            ZoneState::Full => return Err(st(StatusCode::ZoneIsFull)),
            ZoneState::ReadOnly => return Err(st(StatusCode::ZoneIsReadOnly)),
            ZoneState::Offline => return Err(st(StatusCode::ZoneIsOffline)),
            _ => {}
        }
        if at.is_some_and(|a| a != wp) {
            return Err(st(StatusCode::ZoneInvalidWrite));
        }
        if wp + n > self.geo.lcap {
            return Err(st(StatusCode::ZoneBoundaryError));
        }
        let mut arb = self.lock_arb();
        match inner.state {
            ZoneState::Empty | ZoneState::Closed => {
                arb.open(t, inner.state == ZoneState::Empty).map_err(refusal)?;
                lz.set_state(inner, ZoneState::ImplicitlyOpen);
            }
            _ => {}
        }
        if self.tenants[t].inactive.load(Relaxed) && arb.wake(t) {
            self.tenants[t].inactive.store(false, Release);
            self.reclaim(&mut arb, t);
        }
        if lz.restripe.swap(false, AcqRel) {
            self.restripe(t, lz, &mut arb, wp);
        }
        loop {
            let end = lz.map.load().last().map_or(0, |g| g.layout.end());
            if end >= wp + n {
                break;
            }
            self.next_group(t, lz, &mut arb, end)?;
        }
        lz.word.store(wp + n, Release);
        if wp + n == self.geo.lcap {
            self.fill(t, lz, inner, &mut arb);
        }
        Ok(wp)
    }

    /// Sets the fast bit again where writes may take it.
    pub(crate) fn refast(&self, lz: &LZone, inner: &ZoneInner, wp: u64) {
        let end = lz.map.load().last().map_or(0, |g| g.layout.end());
        lz.seg_end.store(end, Release);
        if inner.state.is_open() && inner.broken.is_none() && wp < end {
            lz.word.fetch_or(FAST, AcqRel);
        }
    }

    /// The zone reached its capacity: Full; the last group's columns that
    /// are not full, and its parked ones, are finished once their writes
    /// are done.
    fn fill(&self, t: usize, lz: &LZone, inner: &mut ZoneInner, arb: &mut Arbiter) {
        arb.unopen(t);
        arb.deactivate(t);
        lz.set_state(inner, ZoneState::Full);
        let parked = arb.drop_parked(t, lz.index);
        self.drop_columns(lz, self.geo.lcap, no_gate(), &parked);
    }

    /// Finishes every column of the zone's last group at logical offset
    /// `e`, and its `parked` columns where they stopped, once `gate` is
    /// durable.
    fn drop_columns(&self, lz: &LZone, e: u64, gate: Gate, parked: &[Column]) {
        let map = lz.map.load();
        let Some(g) = map.last() else { return };
        let rel = e.saturating_sub(g.layout.start).min(g.layout.len);
        let mut ctl = self.ctl.lock();
        let ends = g
            .layout
            .cols
            .iter()
            .enumerate()
            .map(|(c, col)| (col.zone, col.base + g.layout.ext(c, rel)));
        for (zone, at) in ends.chain(parked.iter().map(|c| (c.zone, c.base))) {
            ctl.defer(Deferred::Finish { zone, at, gate: gate.clone(), group: g.clone() });
        }
        self.ctl_work.store(ctl.work(), Release);
    }

    /// Queues finishes of parked columns where the device's free active
    /// zones fell below the headroom (the only time a returned spare is
    /// finished before its logical zone is).
    fn relieve(&self, arb: &mut Arbiter) {
        let out = arb.relieve();
        if out.is_empty() {
            return;
        }
        let mut ctl = self.ctl.lock();
        for p in out {
            let lz = &self.tenants[p.tenant as usize].zones[p.lzone as usize];
            // An empty map: the zone is being reset, which resets the column.
            if let Some(g) = lz.map.load().last() {
                tracing::debug!(zone = p.col.zone, "finishing a parked column to make room");
                ctl.defer(Deferred::Finish {
                    zone: p.col.zone,
                    at: p.col.base,
                    gate: no_gate(),
                    group: g.clone(),
                });
            }
        }
        self.ctl_work.store(ctl.work(), Release);
    }

    /// Starts the group after the last one, at `start` (its end): the old
    /// columns with room go on, the full ones are released, new ones make
    /// up the width.
    fn next_group(&self, t: usize, lz: &LZone, arb: &mut Arbiter, start: u64) -> Result<(), Slow> {
        let map = lz.map.load_full();
        let split = match map.last() {
            Some(g) => self.split_columns(t, g, start - g.layout.start, arb, false),
            None => Split::default(),
        };
        let target = arb.target_width(t) as usize;
        self.new_group(t, lz, &map, arb, start, split, target.max(1))
    }

    /// How the columns of `g` fare after its first `rel` blocks: those
    /// that go on (with their new bases), those that end there (with the
    /// block they end at) and, when `revoke`, borrowed columns whose
    /// lender is active again: parked where they stop if they hold data
    /// and have room, else ended.
    fn split_columns(
        &self,
        t: usize,
        g: &Arc<Group>,
        rel: u64,
        arb: &Arbiter,
        revoke: bool,
    ) -> Split {
        let mut out = Split::default();
        for (c, col) in g.layout.cols.iter().enumerate() {
            let at = col.base + g.layout.ext(c, rel);
            let lent_back = revoke
                && col.budget as usize != t
                && !arb.tenants.get(col.budget as usize).is_some_and(|b| b.inactive);
            // A column short of a unit of room goes on too: the group
            // gives it a partial last unit. Ended there, the Finish would
            // pad its rest, and the blocks it could have held would take
            // a new physical zone, padded in turn when the zone fills.
            let room = at < self.geo.phys_cap;
            if lent_back && room && at > 0 {
                out.park.push(Column { base: at, ..*col });
            } else if lent_back || !room {
                // Full, or never written (no command is needed to end it).
                out.drop.push((*col, at));
            } else {
                out.keep.push(Column { base: at, ..*col });
            }
        }
        out
    }

    /// Makes a group at `start` of the kept columns, then the zone's
    /// parked ones, then new ones up to `width`, journals it and publishes
    /// it; the dropped columns are finished once the group's record is
    /// durable, the columns to park are parked (charged to `t`, no finish).
    #[allow(clippy::too_many_arguments)]
    fn new_group(
        &self,
        t: usize,
        lz: &LZone,
        map: &Arc<ZoneMap>,
        arb: &mut Arbiter,
        start: u64,
        split: Split,
        width: usize,
    ) -> Result<(), Slow> {
        let Split { mut keep, drop, park } = split;
        // A parked column of this zone costs no new active zone and fills
        // with data instead of padding. (Those this group parks come after:
        // they are on a lender's die.)
        keep.extend(arb.unpark(t, lz.index, width.saturating_sub(keep.len())));
        self.relieve(arb);
        let want = width.saturating_sub(keep.len());
        let parked = self.parked_room(arb, t, lz, &park);
        let free = arb.alloc.free_count();
        let add = self.affordable_columns(lz, free, start, &keep, parked, want) as u32;
        let budgets = arb.budgets(t, keep.len() as u32, add);
        let keep_zones: Vec<u32> = keep.iter().map(|c| c.zone).collect();
        if !budgets.is_empty() {
            self.refresh_activity(arb, self.now());
        }
        for (zone, budget) in arb.place(t, &budgets, &keep_zones) {
            let h = Holding { tenant: t as u16, budget };
            arb.grant(h);
            self.phys[zone as usize].set_holder(h);
            keep.push(Column { zone, base: 0, budget });
        }
        if keep.is_empty() {
            return Err(if arb.alloc.free_count() == 0 {
                st(StatusCode::CapacityExceeded)
            } else {
                Slow::Wait
            });
        }
        let room: Vec<u64> = keep.iter().map(|c| self.geo.phys_cap - c.base).collect();
        let layout = Layout::new(start, self.geo.unit, keep, &room, self.geo.lcap - start);
        let mut ctl = self.ctl.lock();
        let gate = ctl.record(Entry::Group {
            tenant: t as u16,
            zone: lz.index,
            start,
            len: layout.len,
            unit: layout.unit as u32,
            cols: layout.cols.clone(),
        });
        let old = map.last().cloned();
        for (col, at) in drop {
            let group = old.clone().expect("dropped columns come from a group");
            ctl.defer(Deferred::Finish { zone: col.zone, at, gate: gate.clone(), group });
        }
        self.ctl_work.store(ctl.work(), Release);
        drop_guard(ctl);
        // Parked only now that the new group, without them, is made: the
        // zone's writes place nothing more on them.
        for col in park {
            let mine = arb.park(t, lz.index, col);
            let h = Holding { tenant: t as u16, budget: mine.budget };
            self.phys[col.zone as usize].set_holder(h);
        }
        // The loans this group made or ended, then the group.
        self.trace.arbiter(arb);
        self.trace.stripe(t, lz.index, &layout);
        let group = Group::new(layout, gate);
        // A group replaced at its start stays, empty (it ends where the
        // new one starts), so a reset still finds its columns.
        let mut next: ZoneMap = map.iter().cloned().collect();
        next.push(group);
        lz.map.store(Arc::new(next));
        Ok(())
    }

    /// Restripes the zone at its write pointer `e`: borrowed columns whose
    /// lender is active again end, and the width goes to what the tenant
    /// may have now (never narrower than what it keeps).
    fn restripe(&self, t: usize, lz: &LZone, arb: &mut Arbiter, e: u64) {
        let map = lz.map.load_full();
        let Some(g) = map.last() else { return };
        if e >= g.layout.end() {
            return;
        }
        let split = self.split_columns(t, g, e - g.layout.start, arb, true);
        let target = arb.target_width(t) as usize;
        let ends = !split.drop.is_empty() || !split.park.is_empty();
        if !ends && split.keep.len() >= target {
            return;
        }
        let width = target.max(split.keep.len());
        let more = arb.parked.iter().any(|p| p.tenant as usize == t && p.lzone == lz.index);
        if !ends && !more {
            // A widening that would place no new column (borrowed spares
            // with no quiet die for them, or no surplus of physical zones)
            // would only cut the group.
            let free = arb.alloc.free_count();
            let want = width - split.keep.len();
            let parked = self.parked_room(arb, t, lz, &split.park);
            if self.affordable_columns(lz, free, e, &split.keep, parked, want) == 0 {
                return;
            }
            let budgets = arb.budgets(t, split.keep.len() as u32, want as u32);
            let keep: Vec<u32> = split.keep.iter().map(|c| c.zone).collect();
            self.refresh_activity(arb, self.now());
            if arb.placeable(t, &budgets, &keep) == 0 {
                return;
            }
        }
        if let Err(e) = self.new_group(t, lz, &map, arb, e, split, width) {
            tracing::debug!(?e, "restripe deferred");
            lz.restripe.store(true, Release);
        }
    }

    /// `lender` writes again: every group holding one of its spares is
    /// restriped without it, now where the zone's lock is free, else at
    /// the zone's next write or the next tick.
    pub(crate) fn reclaim(&self, arb: &mut Arbiter, lender: usize) {
        let mut striping = std::collections::HashSet::new();
        for (t, tenant) in self.tenants.iter().enumerate() {
            if t == lender {
                continue;
            }
            for lz in tenant.zones.iter() {
                let map = lz.map.load();
                let Some(g) = map.last().filter(|_| lz.state().is_active()) else { continue };
                striping.extend(g.layout.cols.iter().map(|c| c.zone));
                if g.layout.cols.iter().any(|c| c.budget as usize == lender) {
                    lz.restripe.store(true, Release);
                    self.try_restripe(t, lz, arb);
                }
            }
        }
        // The lender's other columns take no more writes: their logical
        // zone is full or they were dropped, a finish pending. They are
        // charged to their holder now, as a parked column is, so the
        // lender has its budget back at once rather than when a finish
        // that pads the rest of the zone ends.
        for (z, p) in self.phys.iter().enumerate() {
            let Some(h) = p.holder() else { continue };
            if h.budget as usize == lender
                && h.tenant != h.budget
                && !striping.contains(&(z as u32))
            {
                p.set_holder(arb.recharge(h));
            }
        }
    }

    /// Restripes a zone flagged for it if its lock is free.
    fn try_restripe(&self, t: usize, lz: &LZone, arb: &mut Arbiter) {
        let Some(inner) = lz.inner.try_lock() else { return };
        if !lz.restripe.swap(false, AcqRel) {
            return;
        }
        let wp = lz.clear_fast();
        if inner.state.is_active() {
            self.restripe(t, lz, arb, wp);
        }
        self.refast(lz, &inner, wp);
    }

    /// Whether tenant `t` wrote within `idle_ns` before `now`.
    fn wrote(&self, t: usize, now: u64, idle_ns: u64) -> bool {
        now.saturating_sub(self.tenants[t].last_write.load(Relaxed)) <= idle_ns
    }

    /// Whether tenant `t` read within `idle_ns` before `now`.
    fn reads(&self, t: usize, now: u64, idle_ns: u64) -> bool {
        let read = self.tenants[t].last_read.load(Relaxed);
        read > 0 && now.saturating_sub(read) <= idle_ns
    }

    /// Tells the allocator what every tenant does now. Reads are checked
    /// at every allocation, not only at ticks: a tenant that starts
    /// reading must keep writers off its dies from the first stripe they
    /// place beside it. A tenant the arbiter marked inactive that does not
    /// read leaves its dies to others (nothing of its own runs there).
    fn refresh_activity(&self, arb: &mut Arbiter, now: u64) {
        let idle_ns = self.config.idle_ms * 1_000_000;
        for t in 0..self.tenants.len() {
            let activity = if self.reads(t, now, idle_ns) {
                Activity::Reading
            } else if arb.tenants[t].inactive {
                Activity::Idle
            } else {
                Activity::Writing
            };
            arb.alloc.set_activity(t, activity);
        }
    }

    /// Runs the arbiter's tick when it is due: idle tenants become
    /// inactive (their spares go to the others), open zones that could be
    /// wider are widened, zones flagged for a restripe are restriped.
    pub(crate) fn maybe_tick(&self) {
        let now = self.now();
        let next = self.next_tick.load(Relaxed);
        if now < next {
            return;
        }
        let period = self.config.tick_ms * 1_000_000;
        if self.next_tick.compare_exchange(next, now + period, AcqRel, Relaxed).is_err() {
            return;
        }
        let idle_ns = self.config.idle_ms * 1_000_000;
        let quiet: Vec<bool> = (0..self.tenants.len())
            .map(|t| !self.wrote(t, now, idle_ns) && !self.reads(t, now, idle_ns))
            .collect();
        let Some(mut arb) = self.try_lock_arb() else { return };
        for t in arb.tick(&quiet) {
            self.tenants[t].inactive.store(true, Release);
            tracing::debug!(tenant = %self.tenants[t].name, "inactive: spares lent");
        }
        // A tenant that reads is not idle: its spares are not lent (the
        // writers would need more dies, and take the reader's), and those
        // lent before it read come back. Spares are only lent by tenants
        // doing no I/O at all.
        for (t, &q) in quiet.iter().enumerate() {
            if !q && self.tenants[t].inactive.load(Relaxed) && arb.wake(t) {
                self.tenants[t].inactive.store(false, Release);
                tracing::debug!(tenant = %self.tenants[t].name, "reads: spares back");
                self.reclaim(&mut arb, t);
            }
        }
        self.refresh_activity(&mut arb, now);
        for (t, tenant) in self.tenants.iter().enumerate() {
            if arb.tenants[t].inactive {
                continue;
            }
            let target = arb.target_width(t) as usize;
            for lz in tenant.zones.iter() {
                if !lz.state().is_open() && !lz.restripe.load(Relaxed) {
                    continue;
                }
                let width = lz.map.load().last().map_or(0, |g| g.layout.width());
                let widen = self.config.mode == Mode::Elastic
                    && lz.state().is_open()
                    && width > 0
                    && target >= width + (width / 4).max(2);
                if widen {
                    lz.restripe.store(true, Release);
                }
                if lz.restripe.load(Relaxed) {
                    self.try_restripe(t, lz, &mut arb);
                }
            }
        }
    }

    /// A zone management action on one logical zone; the gates its
    /// completion waits for.
    pub(crate) fn zone_action(
        &self,
        t: usize,
        z: usize,
        action: ZoneAction,
    ) -> Result<Vec<Gate>, StatusCode> {
        let lz = &self.tenants[t].zones[z];
        let mut inner = lz.inner.lock();
        let wp = lz.clear_fast();
        let r = self.action_locked(t, lz, &mut inner, action, wp);
        self.refast(lz, &inner, lz.wp());
        r
    }

    fn action_locked(
        &self,
        t: usize,
        lz: &LZone,
        inner: &mut ZoneInner,
        action: ZoneAction,
        wp: u64,
    ) -> Result<Vec<Gate>, StatusCode> {
        use ZoneState::*;
        let bad = StatusCode::InvalidZoneStateTransition;
        let state = inner.state;
        match action {
            ZoneAction::Open => {
                let mut arb = self.lock_arb();
                match state {
                    Empty | Closed => {
                        arb.open(t, state == Empty).map_err(|r| match r {
                            Refusal::TooManyActive => StatusCode::TooManyActiveZones,
                            Refusal::TooManyOpen => StatusCode::TooManyOpenZones,
                        })?;
                    }
                    ImplicitlyOpen | ExplicitlyOpen => {}
                    _ => return Err(bad),
                }
                lz.set_state(inner, ExplicitlyOpen);
                Ok(Vec::new())
            }
            ZoneAction::Close => match state {
                ImplicitlyOpen | ExplicitlyOpen => {
                    self.lock_arb().unopen(t);
                    lz.set_state(inner, Closed);
                    Ok(Vec::new())
                }
                Closed => Ok(Vec::new()),
                _ => Err(bad),
            },
            ZoneAction::Finish => match state {
                Full => Ok(Vec::new()),
                Empty | ImplicitlyOpen | ExplicitlyOpen | Closed => {
                    let gate = {
                        let mut ctl = self.ctl.lock();
                        let g =
                            ctl.record(Entry::Finish { tenant: t as u16, zone: lz.index, at: wp });
                        self.ctl_work.store(ctl.work(), Release);
                        g
                    };
                    let parked = {
                        let mut arb = self.lock_arb();
                        if state.is_open() {
                            arb.unopen(t);
                        }
                        if state != Empty {
                            arb.deactivate(t);
                        }
                        arb.drop_parked(t, lz.index)
                    };
                    self.drop_columns(lz, wp, gate.clone(), &parked);
                    lz.set_state(inner, Full);
                    Ok(vec![gate])
                }
                _ => Err(bad),
            },
            ZoneAction::Reset => match state {
                Empty => Ok(Vec::new()),
                ImplicitlyOpen | ExplicitlyOpen | Closed | Full => {
                    {
                        let mut arb = self.lock_arb();
                        if state.is_open() {
                            arb.unopen(t);
                        }
                        if state.is_active() {
                            arb.deactivate(t);
                        }
                        // The reset resets them with the zone's others.
                        arb.drop_parked(t, lz.index);
                    }
                    Ok(vec![self.reset_locked(t, lz, inner)])
                }
                _ => Err(bad),
            },
            ZoneAction::Offline => Err(bad),
        }
    }

    /// Empties a logical zone: journals the reset, kills its groups and
    /// resets their physical zones once the record is durable and nothing
    /// is in flight on them.
    fn reset_locked(&self, t: usize, lz: &LZone, inner: &mut ZoneInner) -> Gate {
        let map = lz.map.swap(Arc::new(Vec::new()));
        let mut zones: Vec<u32> = Vec::new();
        for g in map.iter() {
            g.dead.store(true, Release);
            zones.extend(g.layout.cols.iter().map(|c| c.zone));
        }
        zones.sort_unstable();
        zones.dedup();
        let mut ctl = self.ctl.lock();
        let gate = ctl.record(Entry::Reset { tenant: t as u16, zone: lz.index });
        for zone in zones {
            ctl.defer(Deferred::Reset { zone, gate: gate.clone() });
        }
        self.ctl_work.store(ctl.work(), Release);
        drop_guard(ctl);
        lz.word.store(0, Release);
        lz.seg_end.store(0, Release);
        lz.restripe.store(false, Release);
        lz.failed.store(false, Release);
        inner.broken = None;
        lz.set_state(inner, ZoneState::Empty);
        gate
    }

    /// Select All: the action on every zone of the tenant in its scope.
    pub(crate) fn zone_action_all(
        &self,
        t: usize,
        action: ZoneAction,
    ) -> Result<Vec<Gate>, StatusCode> {
        let zones = &self.tenants[t].zones;
        let in_scope = |s: ZoneState| match action {
            ZoneAction::Open => s == ZoneState::Closed,
            ZoneAction::Close => s.is_open(),
            ZoneAction::Finish => s.is_active(),
            ZoneAction::Reset => s.is_active() || s == ZoneState::Full,
            ZoneAction::Offline => s == ZoneState::ReadOnly,
        };
        if action == ZoneAction::Open {
            let closed = zones.iter().filter(|z| z.state() == ZoneState::Closed).count() as u32;
            let arb = self.lock_arb();
            let b = &arb.tenants[t];
            if b.open + closed > b.active_zones {
                return Err(StatusCode::TooManyOpenZones);
            }
        }
        let mut gates = Vec::new();
        for (z, lz) in zones.iter().enumerate() {
            if in_scope(lz.state()) {
                gates.extend(self.zone_action(t, z, action)?);
            }
        }
        Ok(gates)
    }

    /// A write to the zone failed: it takes no more writes until reset.
    pub(crate) fn break_zone(&self, t: usize, z: usize, status: zns_device::Status) {
        let lz = &self.tenants[t].zones[z];
        let mut inner = lz.inner.lock();
        lz.clear_fast();
        lz.failed.store(true, Release);
        if inner.broken.is_none() {
            tracing::warn!(tenant = %self.tenants[t].name, zone = z, %status, "logical zone broken by a failed write");
            inner.broken = Some(status);
        }
    }
}

/// What becomes of a stripe group's columns at a new group.
#[derive(Debug, Default)]
pub(crate) struct Split {
    /// Columns that go on, with their new bases.
    keep: Vec<Column>,
    /// Columns that end, with the block they end at: finished.
    drop: Vec<(Column, u64)>,
    /// Returned spares, with the block they stop at: parked.
    park: Vec<Column>,
}

fn drop_guard<T>(g: T) {
    drop(g)
}
