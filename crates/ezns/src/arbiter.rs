//! The zone arbiter: logical zone resources of every tenant, physical
//! active-zone budgets (essentials and spares), stripe widths, lending,
//! and the allocator.
//!
//! Each tenant owns a share of the base device's active zones: its
//! *essentials*, never lent, enough for every one of its active logical
//! zones to have the essential width (`essential / active_zones`), and its
//! *spares*. A new stripe group's width is the essential width plus the
//! spares the tenant can spread over the logical zones it writes at once
//! (the average number of open logical zones, measured every tick): *local
//! overdrive*. The arbiter marks a tenant that has neither written nor read
//! for `idle_ms` inactive; the spares an inactive tenant does not use go to
//! the active ones, split evenly (*global overdrive*), and come back the
//! moment it writes or reads again: every group holding one of them is
//! restriped without it.
//!
//! A returned column is *parked*, not finished: on a device whose erase
//! blocks are large, a finish pads the rest of the block at one die's
//! program bandwidth through the shared write buffer, which stalls every
//! tenant. The parked column keeps the borrower's data, takes no new
//! stripes, and moves from the lender's budget to the borrower's at once
//! (the lender has its budget back; the borrower is overdrawn, so it gets
//! no new columns of its own until it is not). The borrower's logical zone
//! takes it back as a column of its next stripe group (so it fills with
//! data, not padding); it is finished with the logical zone, reset with it,
//! or, only when the device's free active zones fall below the headroom,
//! finished to make room.
//!
//! In static mode every group has the tenant's static width (its share
//! divided by its active logical zones), nothing is lent.
//!
//! Everything here runs under one lock (the cold path: opens, closes,
//! group allocation, ticks); the I/O path never takes it.

use crate::alloc::{Activity, Allocator};
use crate::config::Mode;
use crate::layout::Column;

/// One tenant's resources.
///
/// Thread safety: plain data, behind the arbiter's lock.
#[derive(Debug, Clone, PartialEq)]
pub struct Budget {
    /// Essential physical active zones.
    pub essential: u32,
    /// Spare physical active zones.
    pub spare: u32,
    /// Max Active (and Max Open) logical zones.
    pub active_zones: u32,
    /// Logical zones open (implicitly or explicitly).
    pub open: u32,
    /// Logical zones active (open or closed).
    pub active: u32,
    /// Physical active zones held by the tenant on its own budget.
    pub held: u32,
    /// Physical active zones on its budget held by other tenants.
    pub lent: u32,
    /// Physical active zones it holds on other tenants' budgets.
    pub borrowed: u32,
    /// Marked inactive by the arbiter: its free spares are lent.
    pub inactive: bool,
    /// Average number of open logical zones (exponentially weighted).
    pub avg_open: f64,
    /// Times its spares were taken back.
    pub reclaims: u64,
}

/// How far above a whole number the average of open logical zones may be
/// and still count as that many writers ([`Budget::avg_writers`]): after
/// a drop, the average is within it in 12 ticks (0.7^12 of a drop of 3).
pub const WRITERS_SLACK: f64 = 0.05;

impl Budget {
    /// The average of open logical zones as a count of writers: rounded
    /// up, but an average within [`WRITERS_SLACK`] above a whole number
    /// counts as that number. The average approaches the open count
    /// geometrically and, from above, reaches it only when rounding
    /// catches up (about 100 ticks after 4 open zones became 1): without
    /// the slack a tenant that went back to one zone would count as two
    /// writers, at half its width, for that long.
    pub fn avg_writers(&self) -> u32 {
        (self.avg_open - WRITERS_SLACK).ceil().max(0.0) as u32
    }

    /// The width every active logical zone is guaranteed.
    pub fn essential_width(&self) -> u32 {
        (self.essential / self.active_zones.max(1)).max(1)
    }

    /// The static width: the whole share over the active logical zones.
    pub fn static_width(&self) -> u32 {
        ((self.essential + self.spare) / self.active_zones.max(1)).max(1)
    }

    /// Spares of an inactive tenant nobody uses: what it can lend now.
    pub fn lendable(&self) -> u32 {
        let own_spares_used = self.held.saturating_sub(self.essential);
        self.spare.saturating_sub(own_spares_used + self.lent)
    }
}

/// A physical zone's place in the budgets: which tenant holds it and on
/// whose budget.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Holding {
    /// The tenant whose group uses it.
    pub tenant: u16,
    /// The tenant whose budget it counts against.
    pub budget: u16,
}

/// A column a stripe group gave back to its lender, still active on the
/// device and charged to the borrower.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parked {
    /// The tenant whose logical zone holds its data.
    pub tenant: u16,
    /// That logical zone.
    pub lzone: u32,
    /// The column, `base` where a later group of the zone goes on.
    pub col: Column,
    /// A finish is queued for it (to make room on the device).
    pub finishing: bool,
}

/// What the arbiter did that a trace shows: zone ballooning and tenants'
/// activity, in order ([`Arbiter::log`]).
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArbiterEvent {
    /// A column of `borrower`'s started counting against `lender`'s budget
    /// (lent), or stopped (`returned`: the lender has it back).
    Moved {
        /// Whose spare it is.
        lender: u16,
        /// Whose stripe group holds it.
        borrower: u16,
        /// Given back rather than lent.
        returned: bool,
    },
    /// A tenant was marked inactive (with the spares it could lend then)
    /// or active again (`lendable` 0).
    Activity {
        /// The tenant.
        tenant: u16,
        /// Marked inactive.
        inactive: bool,
        /// Spares it could lend.
        lendable: u32,
    },
}

/// A logical-zone resource problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Max Active Resources reached.
    TooManyActive,
    /// Max Open Resources reached.
    TooManyOpen,
}

/// The arbiter's state.
///
/// Thread safety: plain data; the runtime keeps it behind a mutex.
#[derive(Debug, Clone)]
pub struct Arbiter {
    /// Elastic or static.
    pub mode: Mode,
    /// Per tenant.
    pub tenants: Vec<Budget>,
    /// Physical active zones the tenants may hold together (the base
    /// device's limit less the journal's zone).
    pub device_limit: u32,
    /// Physical active zones held now.
    pub device_active: u32,
    /// Widest group.
    pub max_width: u32,
    /// The physical zone allocator.
    pub alloc: Allocator,
    /// Spare columns lent so far (a column each time).
    pub loans: u64,
    /// Active zones kept out of every tenant's share (restripes in flight,
    /// parked columns).
    pub headroom: u32,
    /// Parked columns, oldest first.
    pub parked: Vec<Parked>,
    /// What it did since the runtime last took the log (for traces; the
    /// runtime empties it whenever it lets go of the arbiter's lock).
    pub log: Vec<ArbiterEvent>,
}

impl Arbiter {
    /// Number of tenants not marked inactive.
    pub fn active_tenants(&self) -> u32 {
        self.tenants.iter().filter(|b| !b.inactive).count().max(1) as u32
    }

    /// Opens a logical zone of `t` (from Empty or Closed: `activate` when
    /// it was Empty), or says why not.
    pub fn open(&mut self, t: usize, activate: bool) -> Result<(), Refusal> {
        let b = &mut self.tenants[t];
        if activate && b.active >= b.active_zones {
            return Err(Refusal::TooManyActive);
        }
        if b.open >= b.active_zones {
            return Err(if activate { Refusal::TooManyActive } else { Refusal::TooManyOpen });
        }
        b.open += 1;
        if activate {
            b.active += 1;
        }
        Ok(())
    }

    /// A logical zone of `t` stops being open (closed, finished or reset
    /// from an open state).
    pub fn unopen(&mut self, t: usize) {
        let b = &mut self.tenants[t];
        b.open = b.open.saturating_sub(1);
    }

    /// A logical zone of `t` stops being active (finished or reset).
    pub fn deactivate(&mut self, t: usize) {
        let b = &mut self.tenants[t];
        b.active = b.active.saturating_sub(1);
    }

    /// The width a new group of a logical zone of `t` aims at.
    pub fn target_width(&self, t: usize) -> u32 {
        let b = &self.tenants[t];
        match self.mode {
            Mode::Static => b.static_width(),
            Mode::Elastic => {
                let writers = b.avg_writers().max(b.open).max(1);
                let pool: u32 = self
                    .tenants
                    .iter()
                    .enumerate()
                    .filter(|(l, o)| *l != t && o.inactive)
                    .map(|(_, o)| o.spare.saturating_sub(o.held.saturating_sub(o.essential)))
                    .sum();
                let share = if b.inactive { 0 } else { pool / self.active_tenants() };
                ((b.essential + b.spare + share) / writers)
                    .max(b.essential_width())
                    .min(self.max_width)
            }
        }
    }

    /// Budgets for up to `add` new columns of a group of `t` that keeps
    /// `keep` columns: own first (keeping the essential width of its other
    /// logical zones in reserve, but always up to the essential width),
    /// then spares borrowed from inactive tenants; never past the device's
    /// limit. Empty when nothing can be had now.
    pub fn budgets(&self, t: usize, keep: u32, add: u32) -> Vec<u16> {
        let b = &self.tenants[t];
        let mut out = Vec::new();
        let device_room = self.device_limit.saturating_sub(self.device_active);
        let want = add.min(device_room);
        if want == 0 {
            return out;
        }
        let ess = match self.mode {
            Mode::Static => b.static_width(),
            Mode::Elastic => b.essential_width(),
        };
        let own_total = b.essential + b.spare;
        let reserve = ess * b.active_zones.saturating_sub(b.active);
        let own_room = own_total.saturating_sub(b.held + b.lent + reserve);
        let essential_gap = ess.saturating_sub(keep);
        let own = want.min(own_room.max(essential_gap));
        out.extend(std::iter::repeat_n(t as u16, own as usize));
        if self.mode == Mode::Static || b.inactive {
            return out;
        }
        let mut left = want - own;
        let mut lenders: Vec<(u32, usize)> = self
            .tenants
            .iter()
            .enumerate()
            .filter(|(l, o)| *l != t && o.inactive)
            .map(|(l, o)| (o.lendable(), l))
            .filter(|&(n, _)| n > 0)
            .collect();
        // Borrow no more than this tenant's even share of the pool.
        let pool: u32 = lenders.iter().map(|x| x.0).sum();
        let cap = (pool / self.active_tenants()).max(1);
        left = left.min(cap);
        lenders.sort_by(|a, b| b.cmp(a));
        for (n, l) in lenders {
            let take = left.min(n);
            out.extend(std::iter::repeat_n(l as u16, take as usize));
            left -= take;
            if left == 0 {
                break;
            }
        }
        out
    }

    /// Physical zones for new columns of a group of `t` whose other
    /// columns are `keep`, on `budgets` (from [`Arbiter::budgets`]: its
    /// own first, then borrowed): its own wherever the allocator ranks
    /// best, borrowed ones only on dies no busy tenant uses (see
    /// [`Allocator::take_quiet`]). Each zone with the budget it counts
    /// against; fewer than asked when the dies are not there.
    pub fn place(&mut self, t: usize, budgets: &[u16], keep: &[u32]) -> Vec<(u32, u16)> {
        let own = budgets.iter().take_while(|&&b| b as usize == t).count();
        let mut zones = self.alloc.take(t, own, keep);
        if zones.len() == own && own < budgets.len() {
            let mut all = keep.to_vec();
            all.extend(&zones);
            zones.extend(self.alloc.take_quiet(t, budgets.len() - own, &all));
        }
        zones.into_iter().zip(budgets.iter().copied()).collect()
    }

    /// How many of `budgets` [`Arbiter::place`] could place now for a
    /// group of `t` with columns `keep`.
    pub fn placeable(&self, t: usize, budgets: &[u16], keep: &[u32]) -> usize {
        let own = budgets.iter().take_while(|&&b| b as usize == t).count();
        let borrowed = budgets.len() - own;
        if borrowed == 0 {
            return own;
        }
        own + borrowed.min(self.alloc.quiet_slots(t, keep).saturating_sub(own))
    }

    /// Counts a column taken by `tenant` on `budget`.
    pub fn grant(&mut self, h: Holding) {
        self.device_active += 1;
        if h.tenant == h.budget {
            self.tenants[h.tenant as usize].held += 1;
        } else {
            self.tenants[h.tenant as usize].borrowed += 1;
            self.tenants[h.budget as usize].lent += 1;
            self.loans += 1;
            let (lender, borrower) = (h.budget, h.tenant);
            self.log.push(ArbiterEvent::Moved { lender, borrower, returned: false });
        }
    }

    /// A column stops being active (Full, finished or reset).
    pub fn release(&mut self, h: Holding) {
        self.device_active = self.device_active.saturating_sub(1);
        if h.tenant == h.budget {
            let b = &mut self.tenants[h.tenant as usize];
            b.held = b.held.saturating_sub(1);
        } else {
            let b = &mut self.tenants[h.tenant as usize];
            b.borrowed = b.borrowed.saturating_sub(1);
            let l = &mut self.tenants[h.budget as usize];
            l.lent = l.lent.saturating_sub(1);
            let (lender, borrower) = (h.budget, h.tenant);
            self.log.push(ArbiterEvent::Moved { lender, borrower, returned: true });
        }
    }

    /// Parks column `col` of logical zone `lzone` of `t`, borrowed from
    /// `col.budget`: the lender gets it back on its budget now, the
    /// borrower is charged instead. Returns the column as charged now.
    pub fn park(&mut self, t: usize, lzone: u32, col: Column) -> Column {
        let mine = Column { budget: t as u16, ..col };
        if col.budget as usize != t {
            self.recharge(Holding { tenant: t as u16, budget: col.budget });
        }
        self.parked.push(Parked { tenant: t as u16, lzone, col: mine, finishing: false });
        mine
    }

    /// Moves a borrowed column's charge from its lender's budget to its
    /// holder's (the device holds as many active zones); returns the new
    /// holding.
    pub fn recharge(&mut self, h: Holding) -> Holding {
        let mine = Holding { tenant: h.tenant, budget: h.tenant };
        if h.budget != h.tenant {
            self.release(h);
            self.device_active += 1;
            self.tenants[h.tenant as usize].held += 1;
        }
        mine
    }

    /// Takes up to `n` parked columns of logical zone `lzone` of `t` back
    /// for a new group (their charge does not change).
    pub fn unpark(&mut self, t: usize, lzone: u32, n: usize) -> Vec<Column> {
        let mut out = Vec::new();
        self.parked.retain(|p| {
            let take = out.len() < n && !p.finishing && p.tenant as usize == t && p.lzone == lzone;
            if take {
                out.push(p.col);
            }
            !take
        });
        out
    }

    /// Forgets every parked column of logical zone `lzone` of `t` (it is
    /// reset or finished); returns those with no finish queued yet.
    pub fn drop_parked(&mut self, t: usize, lzone: u32) -> Vec<Column> {
        let mut out = Vec::new();
        self.parked.retain(|p| {
            let mine = p.tenant as usize == t && p.lzone == lzone;
            if mine && !p.finishing {
                out.push(p.col);
            }
            !mine
        });
        out
    }

    /// Physical zone `zone` is no longer active: not parked any more.
    pub fn unparked(&mut self, zone: u32) {
        if !self.parked.is_empty() {
            self.parked.retain(|p| p.col.zone != zone);
        }
    }

    /// Parked columns to finish now so the device keeps `headroom` free
    /// active zones (counting finishes already queued); they are marked
    /// finishing, oldest first.
    pub fn relieve(&mut self) -> Vec<Parked> {
        let room = self.device_limit.saturating_sub(self.device_active);
        let queued = self.parked.iter().filter(|p| p.finishing).count() as u32;
        let mut need = self.headroom.saturating_sub(room + queued);
        let mut out = Vec::new();
        for p in self.parked.iter_mut() {
            if need == 0 {
                break;
            }
            if !p.finishing {
                p.finishing = true;
                out.push(*p);
                need -= 1;
            }
        }
        out
    }

    /// Parked columns of `t`.
    pub fn parked_of(&self, t: usize) -> u32 {
        self.parked.iter().filter(|p| p.tenant as usize == t).count() as u32
    }

    /// One tick: averages the open logical zones and marks tenants that
    /// did no I/O (neither wrote nor read) for the idle time inactive
    /// (`idle[t]`). Returns the tenants newly marked inactive.
    pub fn tick(&mut self, idle: &[bool]) -> Vec<usize> {
        let mut marked = Vec::new();
        for (t, b) in self.tenants.iter_mut().enumerate() {
            b.avg_open = 0.7 * b.avg_open + 0.3 * b.open as f64;
            if self.mode == Mode::Elastic && idle[t] && !b.inactive {
                b.inactive = true;
                marked.push(t);
                let (tenant, lendable) = (t as u16, b.lendable());
                self.log.push(ArbiterEvent::Activity { tenant, inactive: true, lendable });
            }
        }
        marked
    }

    /// `t` does I/O again. True when it had been inactive: its lent spares
    /// must come back now.
    pub fn wake(&mut self, t: usize) -> bool {
        let b = &mut self.tenants[t];
        if !b.inactive {
            return false;
        }
        b.inactive = false;
        self.log.push(ArbiterEvent::Activity { tenant: t as u16, inactive: false, lendable: 0 });
        if self.alloc.activity(t) == Activity::Idle {
            self.alloc.set_activity(t, Activity::Writing);
        }
        if b.lent > 0 {
            b.reclaims += 1;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alloc::DieMap;

    fn arbiter(mode: Mode, tenants: usize) -> Arbiter {
        let b = Budget {
            essential: 32,
            spare: 32,
            active_zones: 16,
            open: 0,
            active: 0,
            held: 0,
            lent: 0,
            borrowed: 0,
            inactive: false,
            avg_open: 16.0,
            reclaims: 0,
        };
        Arbiter {
            mode,
            tenants: vec![b; tenants],
            device_limit: 64 * tenants as u32,
            device_active: 0,
            max_width: 16,
            alloc: Allocator::new(mode, DieMap { dies: 128, zone_dies: 1 }, tenants),
            loans: 0,
            headroom: 16,
            parked: Vec::new(),
            log: Vec::new(),
        }
    }

    fn take(a: &mut Arbiter, t: usize, n: u32) -> Vec<Holding> {
        let got: Vec<Holding> = a
            .budgets(t, 0, n)
            .into_iter()
            .map(|budget| Holding { tenant: t as u16, budget })
            .collect();
        for &h in &got {
            a.grant(h);
        }
        got
    }

    #[test]
    fn logical_resources_follow_the_limits() {
        let mut a = arbiter(Mode::Elastic, 1);
        a.tenants[0].active_zones = 2;
        a.open(0, true).unwrap();
        a.open(0, true).unwrap();
        assert_eq!(a.open(0, true), Err(Refusal::TooManyActive));
        a.unopen(0);
        assert_eq!(a.open(0, true), Err(Refusal::TooManyActive));
        a.open(0, false).unwrap();
        a.unopen(0);
        a.deactivate(0);
        a.open(0, true).unwrap();
    }

    #[test]
    fn writers_follow_the_open_zones_down_within_a_few_ticks() {
        let mut a = arbiter(Mode::Elastic, 1);
        a.tenants[0].avg_open = 4.0;
        a.tenants[0].open = 1;
        let idle = [false];
        for _ in 0..12 {
            a.tick(&idle);
        }
        // 1 + 3 * 0.7^12: above one by 0.04, which ceil alone counted as 2.
        assert!(a.tenants[0].avg_open > 1.0);
        assert_eq!(a.tenants[0].avg_writers(), 1);
        assert_eq!(a.target_width(0), 16, "one writer gets the widest group");
        a.tenants[0].avg_open = 1.2;
        assert_eq!(a.tenants[0].avg_writers(), 2, "1.2 open zones on average are two writers");
    }

    #[test]
    fn static_width_is_the_share_over_active_zones() {
        let mut a = arbiter(Mode::Static, 4);
        a.tenants[0].avg_open = 1.0;
        assert_eq!(a.target_width(0), 4);
        a.tenants[0].active = 1;
        assert_eq!(take(&mut a, 0, 4).len(), 4);
    }

    #[test]
    fn local_overdrive_spreads_spares_over_the_open_zones() {
        let mut a = arbiter(Mode::Elastic, 4);
        assert_eq!(a.target_width(0), 4, "all 16 zones expected open");
        a.tenants[0].avg_open = 4.0;
        a.tenants[0].open = 4;
        assert_eq!(a.target_width(0), 16);
        a.tenants[0].active = 4;
        // Own room: 64 minus the essentials of 12 zones not active (24).
        let got = take(&mut a, 0, 16);
        assert_eq!(got.len(), 16);
        assert!(got.iter().all(|h| h.budget == 0));
        assert_eq!(a.budgets(0, 0, 40).len(), 24);
    }

    #[test]
    fn global_overdrive_borrows_idle_spares_and_wake_reclaims() {
        let mut a = arbiter(Mode::Elastic, 4);
        a.tenants[0].avg_open = 8.0;
        a.tenants[0].open = 8;
        a.tenants[0].active = 8;
        assert_eq!(a.target_width(0), 8);
        let marked = a.tick(&[false, true, true, true]);
        assert_eq!(marked, [1, 2, 3]);
        // 64 own + 96 idle spares (one active tenant) over ~8 writers.
        assert!(a.target_width(0) >= 16, "{}", a.target_width(0));
        a.tenants[0].held = 48; // own budget used up but for the reserve
        let got = take(&mut a, 0, 16);
        assert!(got.iter().any(|h| h.budget != 0), "{got:?}");
        let lent: u32 = a.tenants[1..].iter().map(|b| b.lent).sum();
        assert_eq!(lent, a.tenants[0].borrowed);
        assert!(a.wake(1));
        assert!(!a.wake(1));
        // A woken lender lends no more.
        assert!(a.budgets(0, 0, 100).iter().all(|&b| b != 1));
        for h in got {
            a.release(h);
        }
        assert_eq!((a.tenants[0].borrowed, a.tenants[1].lent), (0, 0));
    }

    #[test]
    fn parking_returns_the_lenders_budget_at_once_and_charges_the_borrower() {
        let mut a = arbiter(Mode::Elastic, 2);
        a.tenants[0].active = 1;
        a.tenants[0].avg_open = 1.0;
        a.tenants[0].open = 1;
        a.tick(&[false, true]);
        a.tenants[0].held = 64;
        // A group that has its essential width already borrows the rest.
        let got = a.budgets(0, 2, 4);
        assert_eq!(got, [1, 1, 1, 1]);
        for budget in got {
            a.grant(Holding { tenant: 0, budget });
        }
        let active = a.device_active;
        assert!(a.wake(1));
        let col = Column { zone: 7, base: 40, budget: 1 };
        let mine = a.park(0, 3, col);
        assert_eq!(mine, Column { budget: 0, ..col });
        // The lender has one column back, the device holds as many.
        assert_eq!((a.tenants[1].lent, a.tenants[0].borrowed), (3, 3));
        assert_eq!((a.device_active, a.tenants[0].held), (active, 65));
        // The borrower is overdrawn: nothing new of its own but the
        // essential width.
        assert_eq!(a.budgets(0, 0, 8).len(), 2);
        // Its zone takes the column back; another zone does not.
        assert!(a.unpark(0, 2, 4).is_empty());
        assert_eq!(a.unpark(0, 3, 4), [mine]);
        assert!(a.unpark(0, 3, 4).is_empty());
        a.park(0, 3, mine);
        assert_eq!(a.drop_parked(0, 3), [mine]);
        assert_eq!(a.parked_of(0), 0);
    }

    #[test]
    fn parked_columns_are_finished_only_to_keep_the_headroom() {
        let mut a = arbiter(Mode::Elastic, 2);
        for z in 0..5 {
            a.grant(Holding { tenant: 0, budget: 0 });
            a.park(0, z, Column { zone: z, base: 8, budget: 0 });
        }
        a.device_active = a.device_limit - 20;
        assert!(a.relieve().is_empty(), "room above the headroom");
        a.device_active = a.device_limit - 13;
        let first = a.relieve();
        assert_eq!(first.iter().map(|p| p.lzone).collect::<Vec<_>>(), [0, 1, 2]);
        assert!(a.relieve().is_empty(), "finishes queued count as room");
        // A queued finish is not taken back for a group.
        assert!(a.unpark(0, 0, 1).is_empty());
        a.unparked(0);
        a.device_active -= 1;
        assert!(a.relieve().is_empty());
        assert_eq!(a.parked_of(0), 4);
    }

    #[test]
    fn borrowed_spares_go_only_to_quiet_dies() {
        let mut a = arbiter(Mode::Elastic, 3);
        for z in 0..512 {
            a.alloc.free(z);
        }
        // Tenant 0 writes on dies 0 to 119; idle tenant 2 holds zones on
        // 120 to 123 (quiet: it does no I/O there); 124 to 127 are empty.
        a.alloc.set_activity(1, Activity::Idle);
        a.alloc.set_activity(2, Activity::Idle);
        a.alloc.take(0, 120, &[]);
        let idle: Vec<u32> = a.alloc.take(2, 4, &[]).iter().map(|z| z % 128).collect();
        assert_eq!(idle, [120, 121, 122, 123]);
        // 2 columns of its own, 10 borrowed: its own go to empty dies,
        // the borrowed ones only to the 6 quiet dies left, not on top of
        // its own columns.
        let budgets = [0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1];
        assert_eq!(a.placeable(0, &budgets, &[]), 8);
        let got = a.place(0, &budgets, &[]);
        assert_eq!(got.len(), 8, "{got:?}");
        assert!(got.iter().all(|&(z, _)| z % 128 >= 120), "{got:?}");
        assert_eq!(got.iter().filter(|&&(_, b)| b == 1).count(), 6, "{got:?}");
        // No quiet die left: only own columns can be placed.
        assert_eq!(a.placeable(0, &budgets, &[]), 2);
        assert_eq!(a.placeable(0, &budgets[2..], &[]), 0);
    }

    #[test]
    fn essentials_are_always_available_within_the_device_limit() {
        let mut a = arbiter(Mode::Elastic, 2);
        a.tenants[0].held = 64;
        a.tenants[0].active = 16;
        assert_eq!(a.budgets(0, 0, 8).len(), 2, "the essential width");
        a.device_active = a.device_limit;
        assert!(a.budgets(0, 0, 8).is_empty());
    }
}
