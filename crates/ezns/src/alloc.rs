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
//!   a slot the group does not use yet, then one no other *writing* tenant
//!   has an active zone on, then the one with the fewest active zones of
//!   writing tenants, then the fewest active zones, then the next one
//!   round robin. So two writing tenants' active stripes share a die only
//!   when every die with free zones that the group does not use already
//!   has another writing tenant's active zone. A tenant the arbiter marked
//!   inactive ([`Allocator::set_idle`]) keeps its active zones but writes
//!   nothing to them: its dies count as free, so the spares it lends land
//!   on dies the writers do not use yet instead of on the writers' own.
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

/// How good a slot is for the next column (lower is better): in the group
/// already, another writing tenant active there, active zones of writing
/// tenants, all active zones, distance from the cursor.
type SlotRank = (bool, bool, u32, u32, usize);

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
    /// Tenants marked inactive: their active zones do not make a die busy.
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

    /// Marks `tenant` idle (inactive: writing nothing) or writing again.
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
    /// in the group yet, then no other writing tenant active there, then
    /// fewest active zones of writing tenants, then fewest active zones,
    /// then nearest after the cursor.
    fn pick_slot(&self, tenant: usize, used: &[bool]) -> Option<usize> {
        let slots = self.free.len();
        let mut best: Option<(SlotRank, usize)> = None;
        for i in 0..slots {
            let s = (self.cursor as usize + i) % slots;
            if self.free[s].is_empty() {
                continue;
            }
            let writing = self.writing(s, tenant);
            let others = writing - self.held[s][tenant];
            let key = (used[s], others > 0, writing, self.active[s], i);
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
        /// Two tenants' active stripes never share a die while a die with
        /// free zones and no other tenant's active zone exists.
        #[test]
        fn never_collides_while_a_free_die_exists(
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
                    // What a column could have had: a die free of others.
                    let clean = (0..dies).any(|d| {
                        !a.free[d as usize].is_empty()
                            && got.iter().all(|z| z % dies != d)
                            && live.iter().all(|(t, zs)| *t == tenant || zs.iter().all(|z| z % dies != d))
                    });
                    let z = a.take(tenant, 1, &got);
                    prop_assert_eq!(z.len(), 1);
                    let d = z[0] % dies;
                    let shared = live.iter().any(|(t, zs)| *t != tenant && zs.iter().any(|x| x % dies == d));
                    prop_assert!(!(clean && shared), "tenant {} got die {} shared with another tenant", tenant, d);
                    got.push(z[0]);
                }
                live.push((tenant, got));
            }
        }
    }
}
