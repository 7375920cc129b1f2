//! The physical zone allocator: which free physical zones a new stripe
//! group gets.
//!
//! Every allocation goes through one allocator (the arbiter holds it under
//! its lock), one group at a time, so concurrent tenants never interleave
//! their picks (a *serial* allocator). It knows where zones live: zone `i`
//! is on die slot `i mod slots` (a slot is the set of dies one zone is
//! striped over; see [`DieMap`]), and it counts, per slot, the active
//! zones every tenant holds there.
//!
//! * [`Mode::Elastic`](crate::config::Mode::Elastic): each column goes to
//!   a slot the group does not use yet, then the one of least *load*: the
//!   tenant's own active zones there plus, for each of another tenant's,
//!   [`SHARED_COST`] if that tenant only writes or [`READ_COST`] if it
//!   reads, then one with no other busy tenant, then the fewest active
//!   zones, then the next one round robin. So a tenant's columns go to
//!   dies no other tenant uses while those carry fewer than
//!   [`SHARED_COST`] more of its own columns than a writer's die would
//!   ([`READ_COST`] more than a reader's): tenants stay apart, a reader's
//!   dies most of all (a program there stalls its reads), but one
//!   tenant's columns never pile up on the few dies it has alone (each
//!   such die would hold a share of every stripe's data in the shared
//!   write buffer and hold up everyone's writes behind its programs). A
//!   tenant that neither writes (the arbiter marked it inactive) nor
//!   reads keeps its active zones but does no I/O to them
//!   ([`Activity::Idle`]): its dies count as free, so the spares it lends
//!   land on dies the writers do not use yet instead of on the writers'
//!   own.
//! * [`Mode::Static`](crate::config::Mode::Static): the lowest-numbered
//!   free zones, wherever they live, as an allocator unaware of dies does.

use std::collections::BTreeSet;

use crate::config::Mode;

/// Where physical zones live: zone `i` is striped over the dies of slot
/// `i mod slots`, `dies / zone_dies` slots of `zone_dies` dies each.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DieMap {
    /// Dies of the device.
    pub dies: u32,
    /// Dies one zone is striped over.
    pub zone_dies: u32,
}

impl DieMap {
    /// Number of die slots (sets of dies a zone can occupy).
    pub fn slots(&self) -> u32 {
        (self.dies / self.zone_dies.max(1)).max(1)
    }

    /// The slot of physical zone `zone`.
    pub fn slot(&self, zone: u32) -> u32 {
        zone % self.slots()
    }

    /// The first die of physical zone `zone`'s slot.
    pub fn first_die(&self, zone: u32) -> u32 {
        self.slot(zone) * self.zone_dies.max(1)
    }
}

/// What another writing tenant's active zone on a die costs a tenant
/// choosing it, in its own columns there: sharing a die with a neighbour is
/// worse than a second column of one's own (two tenants' programs meet),
/// but not worse than piling three or more on one die.
pub const SHARED_COST: u32 = 2;

/// What a reading tenant's active zone on a die costs a tenant choosing
/// it: a program there holds up that tenant's reads for a program's time,
/// which is worse than sharing a die with a writer (twice
/// [`SHARED_COST`]), so writers fill the other dies up to that load first;
/// bounded, so a reader holding most dies does not make writers stack
/// without limit on the rest.
pub const READ_COST: u32 = 2 * SHARED_COST;

/// What a tenant does with its zones, as far as the allocator cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activity {
    /// No I/O: its active zones do not make a die busy.
    Idle,
    /// Writes and does not read: its dies cost [`SHARED_COST`] a zone.
    Writing,
    /// Reads (and may write): its dies cost [`READ_COST`] a zone.
    Reading,
}

impl Activity {
    /// What one of this tenant's active zones on a die costs another
    /// tenant choosing the die.
    pub fn cost(self) -> u32 {
        match self {
            Activity::Idle => 0,
            Activity::Writing => SHARED_COST,
            Activity::Reading => READ_COST,
        }
    }
}

/// How good a slot is for the next column (lower is better): in the group
/// already, load (own active zones plus each other tenant's at its
/// [`Activity::cost`]), another busy tenant active there, all active
/// zones, distance from the cursor.
type SlotRank = (bool, u32, bool, u32, usize);

/// The allocator's state.
///
/// Thread safety: plain data; the arbiter serializes access.
#[derive(Debug, Clone)]
pub struct Allocator {
    mode: Mode,
    map: DieMap,
    /// Free zones per slot, lowest first.
    free: Vec<BTreeSet<u32>>,
    /// Active zones per slot, per tenant.
    held: Vec<Vec<u32>>,
    /// Active zones per slot, all tenants.
    active: Vec<u32>,
    /// What each tenant does (what its active zones cost others).
    activity: Vec<Activity>,
    /// Where the next round-robin search starts.
    cursor: u32,
    free_count: u64,
}

impl Allocator {
    /// An allocator for `tenants` tenants with no zone free yet.
    pub fn new(mode: Mode, map: DieMap, tenants: usize) -> Allocator {
        let slots = map.slots() as usize;
        Allocator {
            mode,
            map,
            free: vec![BTreeSet::new(); slots],
            held: vec![vec![0; tenants]; slots],
            active: vec![0; slots],
            activity: vec![Activity::Writing; tenants],
            cursor: 0,
            free_count: 0,
        }
    }

    /// The die map.
    pub fn map(&self) -> DieMap {
        self.map
    }

    /// Free zones.
    pub fn free_count(&self) -> u64 {
        self.free_count
    }

    /// Returns an Empty zone to the free pool.
    pub fn free(&mut self, zone: u32) {
        if self.free[self.map.slot(zone) as usize].insert(zone) {
            self.free_count += 1;
        }
    }

    /// Counts `zone` (taken outside [`Allocator::take`], e.g. at recovery)
    /// as an active zone of `tenant`.
    pub fn hold(&mut self, zone: u32, tenant: usize) {
        let s = self.map.slot(zone) as usize;
        if self.free[s].remove(&zone) {
            self.free_count -= 1;
        }
        self.held[s][tenant] += 1;
        self.active[s] += 1;
    }

    /// `zone`, active for `tenant`, is no longer active (it is Full).
    pub fn release(&mut self, zone: u32, tenant: usize) {
        let s = self.map.slot(zone) as usize;
        self.held[s][tenant] = self.held[s][tenant].saturating_sub(1);
        self.active[s] = self.active[s].saturating_sub(1);
    }

    /// Active zones of `tenant` on the slot of `zone`.
    pub fn held_on(&self, zone: u32, tenant: usize) -> u32 {
        self.held[self.map.slot(zone) as usize][tenant]
    }

    /// Sets what `tenant` does: what its active zones cost others.
    pub fn set_activity(&mut self, tenant: usize, activity: Activity) {
        self.activity[tenant] = activity;
    }

    /// What `tenant` does, as last set.
    pub fn activity(&self, tenant: usize) -> Activity {
        self.activity[tenant]
    }

    /// Other tenants' active zones on `slot`: their load for `tenant`
    /// (each at its tenant's cost) and how many belong to busy tenants.
    fn others(&self, slot: usize, tenant: usize) -> (u32, u32) {
        let held = &self.held[slot];
        let busy = (0..held.len())
            .filter(|&u| u != tenant && self.activity[u] != Activity::Idle)
            .map(|u| (self.activity[u].cost() * held[u], held[u]));
        busy.fold((0, 0), |(l, n), (dl, dn)| (l + dl, n + dn))
    }

    /// Takes `n` free zones for a stripe group of `tenant` whose other
    /// columns are `keep` (zones it already has); they become active for
    /// `tenant`. Fewer when the pool runs dry.
    pub fn take(&mut self, tenant: usize, n: usize, keep: &[u32]) -> Vec<u32> {
        self.take_where(tenant, n, keep, false)
    }

    /// Like [`Allocator::take`], but only on *quiet* slots: where no
    /// tenant doing I/O, `tenant` included, has an active zone. For
    /// borrowed spares: a spare adds bandwidth only on a die nobody busy
    /// uses; on a busy one it only stacks another column there, and the
    /// borrower's extra columns then push other tenants onto dies they
    /// would rather avoid (a reader's). Fewer when fewer are quiet.
    pub fn take_quiet(&mut self, tenant: usize, n: usize, keep: &[u32]) -> Vec<u32> {
        self.take_where(tenant, n, keep, true)
    }

    /// Quiet slots with free zones a group of `tenant` with columns
    /// `keep` does not use: how many columns [`Allocator::take_quiet`]
    /// could take now.
    pub fn quiet_slots(&self, tenant: usize, keep: &[u32]) -> usize {
        let used = self.used(keep);
        (0..self.free.len())
            .filter(|&s| !used[s] && !self.free[s].is_empty() && self.load(s, tenant).0 == 0)
            .count()
    }

    fn used(&self, keep: &[u32]) -> Vec<bool> {
        let mut used = vec![false; self.free.len()];
        for &z in keep {
            used[self.map.slot(z) as usize] = true;
        }
        used
    }

    fn take_where(&mut self, tenant: usize, n: usize, keep: &[u32], quiet: bool) -> Vec<u32> {
        let mut used = self.used(keep);
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let pick = match self.mode {
                Mode::Elastic => self.pick_slot(tenant, &used, quiet),
                Mode::Static => self.lowest_slot(),
            };
            let Some(s) = pick else { break };
            let zone = self.free[s].pop_first().expect("a slot with free zones");
            self.free_count -= 1;
            used[s] = true;
            self.held[s][tenant] += 1;
            self.active[s] += 1;
            self.cursor = (s as u32 + 1) % self.map.slots();
            out.push(zone);
        }
        out
    }

    /// The load of `slot` for `tenant` (its own active zones there plus
    /// the others' at their cost) and the active zones of other busy
    /// tenants there.
    fn load(&self, slot: usize, tenant: usize) -> (u32, u32) {
        let (load, others) = self.others(slot, tenant);
        (self.held[slot][tenant] + load, others)
    }

    /// The best slot for the next column, among slots with free zones
    /// (quiet ones only when `quiet`): not in the group yet, then least
    /// load, then no other busy tenant active there, then fewest active
    /// zones, then nearest after the cursor.
    fn pick_slot(&self, tenant: usize, used: &[bool], quiet: bool) -> Option<usize> {
        let slots = self.free.len();
        let mut best: Option<(SlotRank, usize)> = None;
        for i in 0..slots {
            let s = (self.cursor as usize + i) % slots;
            if self.free[s].is_empty() {
                continue;
            }
            let (load, others) = self.load(s, tenant);
            if quiet && (used[s] || load > 0) {
                continue;
            }
            let key = (used[s], load, others > 0, self.active[s], i);
            if best.is_none_or(|(k, _)| key < k) {
                best = Some((key, s));
            }
        }
        best.map(|(_, s)| s)
    }

    /// The slot holding the lowest-numbered free zone.
    fn lowest_slot(&self) -> Option<usize> {
        self.free
            .iter()
            .enumerate()
            .filter_map(|(s, f)| f.first().map(|&z| (z, s)))
            .min()
            .map(|(_, s)| s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn alloc(mode: Mode, dies: u32, zones: u32, tenants: usize) -> Allocator {
        let mut a = Allocator::new(mode, DieMap { dies, zone_dies: 1 }, tenants);
        for z in 0..zones {
            a.free(z);
        }
        a
    }

    #[test]
    fn static_takes_the_lowest_zones() {
        let mut a = alloc(Mode::Static, 4, 16, 2);
        assert_eq!(a.take(0, 3, &[]), [0, 1, 2]);
        assert_eq!(a.take(1, 3, &[]), [3, 4, 5]);
        // Zones 3 and 4 share dies 3 and 0 with tenant 0's stripe.
        assert_eq!(a.free_count(), 10);
    }

    #[test]
    fn elastic_spreads_tenants_over_distinct_dies() {
        let mut a = alloc(Mode::Elastic, 8, 64, 2);
        let s0 = a.take(0, 4, &[]);
        let s1 = a.take(1, 4, &[]);
        let dies = |s: &[u32]| s.iter().map(|z| z % 8).collect::<BTreeSet<_>>();
        assert_eq!(dies(&s0).len(), 4);
        assert!(dies(&s0).is_disjoint(&dies(&s1)), "{s0:?} {s1:?}");
        // A third stripe of tenant 0 must share dies: its own first.
        let s2 = a.take(0, 4, &[]);
        assert_eq!(dies(&s2), dies(&s0), "{s2:?}");
        // Released zones free their dies for others.
        for &z in &s0 {
            a.release(z, 0);
        }
        for &z in &s2 {
            a.release(z, 0);
        }
        let s3 = a.take(1, 4, &[]);
        assert!(dies(&s3).is_disjoint(&dies(&s1)), "{s3:?}");
    }

    #[test]
    fn a_group_avoids_its_own_dies_and_pools_run_dry() {
        let mut a = alloc(Mode::Elastic, 4, 8, 1);
        let s = a.take(0, 4, &[]);
        assert_eq!(s.iter().map(|z| z % 4).collect::<BTreeSet<_>>().len(), 4);
        let more = a.take(0, 2, &[s[0], s[1]]);
        assert!(more.iter().all(|z| z % 4 != s[0] % 4 && z % 4 != s[1] % 4), "{more:?}");
        assert_eq!(a.take(0, 5, &[]).len(), 2);
        assert_eq!(a.free_count(), 0);
    }

    #[test]
    fn a_tenant_does_not_pile_up_on_the_only_die_it_has_alone() {
        // 4 dies: tenant 1 on three, die 3 free. Tenant 0's single-column
        // stripes take die 3 until it carries SHARED_COST of them more
        // than a shared die would, then spread.
        let mut a = alloc(Mode::Elastic, 4, 64, 2);
        a.take(1, 3, &[]);
        let dies: Vec<u32> = (0..6).map(|_| a.take(0, 1, &[])[0] % 4).collect();
        assert_eq!(&dies[..3], [3, 3, 3], "{dies:?}");
        assert!(dies[3..].iter().all(|&d| d != 3), "{dies:?}");
    }

    #[test]
    fn an_idle_tenants_dies_go_to_the_writer() {
        // 8 dies: tenant 0 writes on 2, tenants 1 and 2 hold the other 6.
        let mut a = alloc(Mode::Elastic, 8, 64, 3);
        let dies = |s: &[u32]| s.iter().map(|z| z % 8).collect::<BTreeSet<_>>();
        let own = a.take(0, 2, &[]);
        let b = a.take(1, 3, &[]);
        let c = a.take(2, 3, &[]);
        assert_eq!(dies(&own).len() + dies(&b).len() + dies(&c).len(), 8);
        // All writing: a new stripe of tenant 0 stays on its own dies.
        let s = a.take(0, 2, &[]);
        assert_eq!(dies(&s), dies(&own), "{s:?}");
        for &z in &s {
            a.release(z, 0);
            a.free(z);
        }
        // 1 and 2 fall idle: their dies are free for tenant 0's spares,
        // which take every one of them before doubling up its own.
        a.set_activity(1, Activity::Idle);
        a.set_activity(2, Activity::Idle);
        let spares = a.take(0, 6, &own);
        let want: BTreeSet<u32> = dies(&b).union(&dies(&c)).copied().collect();
        assert_eq!(dies(&spares), want, "{spares:?}");
        // Tenant 1 writes again: its dies are another writer's once more.
        a.set_activity(1, Activity::Writing);
        let d = a.take(0, 1, &[]);
        assert!(!dies(&b).contains(&(d[0] % 8)), "{d:?}");
    }

    #[test]
    fn writers_keep_off_a_readers_dies_while_others_have_room() {
        // 16 dies: tenant 0 reads from stripes on 4, tenant 1 writes on 8,
        // 4 are free. Tenant 2's columns take the free dies, then the
        // writer's (up to READ_COST - SHARED_COST of its own more), and
        // only then the reader's.
        let mut a = alloc(Mode::Elastic, 16, 512, 3);
        let dies = |s: &[u32]| s.iter().map(|z| z % 16).collect::<BTreeSet<_>>();
        let reader = dies(&a.take(0, 4, &[]));
        let writer = dies(&a.take(1, 8, &[]));
        a.set_activity(0, Activity::Reading);
        let mut got = Vec::new();
        for _ in 0..5 {
            got.extend(a.take(2, 4, &[]));
        }
        let on = |g: &[u32], d: &BTreeSet<u32>| g.iter().filter(|z| d.contains(&(*z % 16))).count();
        assert_eq!(on(&got, &reader), 0, "{got:?} on the reader's dies {reader:?}");
        // Free dies first (three rounds: a free die at load 2 ties with
        // a writer's and has no other tenant), then the writer's.
        assert_eq!(on(&got, &writer), 8, "{got:?}");
        // All others now carry load 3: the next column still goes there
        // before a reader's die (4)...
        let z = a.take(2, 1, &[])[0];
        assert!(!reader.contains(&(z % 16)), "{z}");
        // ...but once they are loaded to READ_COST, the reader's dies are
        // used rather than stacking deeper.
        for _ in 0..8 {
            got.extend(a.take(2, 4, &[]));
        }
        assert!(on(&got, &reader) > 0, "{got:?}");
        // The same stripes of a tenant that only writes would have shared
        // its dies as soon as the free ones carried two columns.
        let mut b = alloc(Mode::Elastic, 16, 512, 3);
        b.take(0, 4, &[]);
        b.take(1, 8, &[]);
        let mut got = Vec::new();
        for _ in 0..5 {
            got.extend(b.take(2, 4, &[]));
        }
        assert!(got.iter().any(|z| reader.contains(&(z % 16))), "{got:?}");
    }

    proptest! {
        /// Every column goes to a die of least load (own columns plus each
        /// other tenant's at its activity's cost) among those with free
        /// zones the group does not use: so never to a die shared with a
        /// busy tenant while a die of its own carries fewer than that
        /// cost more of its columns, and never deeper than that on its own
        /// dies; and never to a die where another tenant has an active
        /// zone while a die with no active zone at all is there to take.
        #[test]
        fn each_column_takes_a_least_loaded_die(
            ops in proptest::collection::vec((0usize..4, 1usize..6, 0u8..4), 1..60),
            acts in proptest::collection::vec(0u8..3, 4),
        ) {
            let dies = 16u32;
            let mut a = alloc(Mode::Elastic, dies, 256, 4);
            let act = |x: u8| match x {
                0 => Activity::Idle,
                1 => Activity::Writing,
                _ => Activity::Reading,
            };
            let mut activity: Vec<Activity> = acts.iter().map(|&x| act(x)).collect();
            for (t, &x) in activity.iter().enumerate() {
                a.set_activity(t, x);
            }
            let mut live: Vec<(usize, Vec<u32>)> = Vec::new();
            for (tenant, width, op) in ops {
                if op == 0 && !live.is_empty() {
                    let (t, zones) = live.remove(0);
                    for z in zones {
                        a.release(z, t);
                    }
                    continue;
                }
                if op == 1 {
                    // The tenant's activity changes (a tenant allocating
                    // is busy itself, so this only changes others' view).
                    activity[tenant] = act((acts[tenant] + width as u8) % 3);
                    a.set_activity(tenant, activity[tenant]);
                    continue;
                }
                let mut got = Vec::new();
                for _ in 0..width {
                    let on = |zs: &[u32], d: u32| zs.iter().filter(|z| *z % dies == d).count() as u32;
                    let load = |d: u32| -> u32 {
                        live.iter()
                            .map(|(t, zs)| {
                                let n = on(zs, d);
                                if *t == tenant { n } else { activity[*t].cost() * n }
                            })
                            .sum()
                    };
                    let open = |d: u32| !a.free[d as usize].is_empty() && got.iter().all(|z| z % dies != d);
                    let best = (0..dies).filter(|&d| open(d)).map(load).min();
                    let empty = (0..dies).any(|d| open(d) && live.iter().all(|(_, zs)| on(zs, d) == 0));
                    let z = a.take(tenant, 1, &got);
                    prop_assert_eq!(z.len(), 1);
                    let d = z[0] % dies;
                    prop_assert_eq!(Some(load(d)), best, "tenant {} got die {}", tenant, d);
                    let shared = live.iter().any(|(t, zs)| *t != tenant && on(zs, d) > 0);
                    prop_assert!(!(shared && empty), "tenant {} shares die {} while one is free", tenant, d);
                    got.push(z[0]);
                }
                live.push((tenant, got));
            }
        }
    }
}
