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
//!   tenant's own active zones there plus [`SHARED_COST`] for each of
//!   another *writing* tenant's, then one with no other writing tenant,
//!   then the fewest active zones, then the next one round robin. So a
//!   tenant's columns go to dies no other writer uses while those carry
//!   fewer than [`SHARED_COST`] more of its own columns than a shared die
//!   would: tenants stay apart, but one tenant's columns never pile up on
//!   the few dies it has alone (each such die would hold a share of every
//!   stripe's data in the shared write buffer and hold up everyone's
//!   writes behind its programs). A tenant that neither
//!   writes (the arbiter marked it inactive) nor reads keeps its active
//!   zones but does no I/O to them ([`Allocator::set_idle`]): its dies
//!   count as free, so the spares it lends land on dies the writers do not
//!   use yet instead of on the writers' own.
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
/// worse than a second column of one's own (reads and programs of two
/// tenants meet), but not worse than piling three or more on one die.
pub const SHARED_COST: u32 = 2;

/// How good a slot is for the next column (lower is better): in the group
/// already, load (own active zones plus [`SHARED_COST`] per other writing
/// tenant's), another writing tenant active there, all active zones,
/// distance from the cursor.
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
    /// Tenants doing no I/O: their active zones do not make a die busy.
    idle: Vec<bool>,
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
            idle: vec![false; tenants],
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

    /// Marks `tenant` idle (no I/O to its zones: its dies are free for
    /// others) or not.
    pub fn set_idle(&mut self, tenant: usize, idle: bool) {
        self.idle[tenant] = idle;
    }

    /// Active zones on `slot` of writing tenants: every tenant but the
    /// idle ones, and `tenant` itself, which is writing now.
    fn writing(&self, slot: usize, tenant: usize) -> u32 {
        let held = &self.held[slot];
        (0..held.len()).filter(|&u| u == tenant || !self.idle[u]).map(|u| held[u]).sum()
    }

    /// Takes `n` free zones for a stripe group of `tenant` whose other
    /// columns are `keep` (zones it already has); they become active for
    /// `tenant`. Fewer when the pool runs dry.
    pub fn take(&mut self, tenant: usize, n: usize, keep: &[u32]) -> Vec<u32> {
        let mut used: Vec<bool> = vec![false; self.free.len()];
        for &z in keep {
            used[self.map.slot(z) as usize] = true;
        }
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let pick = match self.mode {
                Mode::Elastic => self.pick_slot(tenant, &used),
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

    /// The best slot for the next column, among slots with free zones: not
    /// in the group yet, then least load, then no other writing tenant
    /// active there, then fewest active zones, then nearest after the
    /// cursor.
    fn pick_slot(&self, tenant: usize, used: &[bool]) -> Option<usize> {
        let slots = self.free.len();
        let mut best: Option<(SlotRank, usize)> = None;
        for i in 0..slots {
            let s = (self.cursor as usize + i) % slots;
            if self.free[s].is_empty() {
                continue;
            }
            let own = self.held[s][tenant];
            let others = self.writing(s, tenant) - own;
            let key = (used[s], own + SHARED_COST * others, others > 0, self.active[s], i);
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
        a.set_idle(1, true);
        a.set_idle(2, true);
        let spares = a.take(0, 6, &own);
        let want: BTreeSet<u32> = dies(&b).union(&dies(&c)).copied().collect();
        assert_eq!(dies(&spares), want, "{spares:?}");
        // Tenant 1 writes again: its dies are another writer's once more.
        a.set_idle(1, false);
        let d = a.take(0, 1, &[]);
        assert!(!dies(&b).contains(&(d[0] % 8)), "{d:?}");
    }

    proptest! {
        /// Every column goes to a die of least load (own columns plus
        /// SHARED_COST per other tenant's) among those with free zones the
        /// group does not use: so never to a die shared with another tenant
        /// while a die of its own carries fewer than SHARED_COST more of
        /// its columns, and never deeper than that on its own dies.
        #[test]
        fn each_column_takes_a_least_loaded_die(
            ops in proptest::collection::vec((0usize..4, 1usize..6, any::<bool>()), 1..60),
        ) {
            let dies = 16u32;
            let mut a = alloc(Mode::Elastic, dies, 256, 4);
            let mut live: Vec<(usize, Vec<u32>)> = Vec::new();
            for (tenant, width, release) in ops {
                if release && !live.is_empty() {
                    let (t, zones) = live.remove(0);
                    for z in zones {
                        a.release(z, t);
                    }
                    continue;
                }
                let mut got = Vec::new();
                for _ in 0..width {
                    let load = |d: u32| -> u32 {
                        live.iter()
                            .map(|(t, zs)| {
                                let n = zs.iter().filter(|z| *z % dies == d).count() as u32;
                                if *t == tenant { n } else { SHARED_COST * n }
                            })
                            .sum()
                    };
                    let best = (0..dies)
                        .filter(|&d| !a.free[d as usize].is_empty() && got.iter().all(|z| z % dies != d))
                        .map(load)
                        .min();
                    let z = a.take(tenant, 1, &got);
                    prop_assert_eq!(z.len(), 1);
                    let d = z[0] % dies;
                    prop_assert_eq!(Some(load(d)), best, "tenant {} got die {}", tenant, d);
                    got.push(z[0]);
                }
                live.push((tenant, got));
            }
        }
    }
}
