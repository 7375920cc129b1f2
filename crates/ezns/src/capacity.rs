//! Capacity: the physical zones the logical zones still need.
//!
//! A column serves one logical zone: what its group leaves unwritten when
//! the logical zone fills (or is finished) is lost until the logical zone
//! is reset. A group wider than the zone scale therefore spends more
//! physical zones than the logical zone's capacity holds. Every logical
//! zone that is not full still needs enough free physical zones to reach
//! its capacity at width one; a group may take columns beyond that only
//! out of the surplus, the free zones no logical zone needs. Without this
//! check wide groups could spend the free pool, and a tenant would find
//! its advertised capacity gone (Capacity Exceeded) in a zone it had not
//! written yet.

use zns_device::ZoneState;

use crate::arbiter::Arbiter;
use crate::layout::{capacity, Column};
use crate::runtime::{Ezns, LZone};

impl Ezns {
    /// Physical zones logical zone `lz` still needs, at width one, to hold
    /// its capacity past the end of its last group: none once it is full
    /// (or read only, or offline).
    pub(crate) fn zones_needed(&self, lz: &LZone) -> u64 {
        match lz.state() {
            ZoneState::Full | ZoneState::ReadOnly | ZoneState::Offline => 0,
            _ => {
                let end = lz.map.load().last().map_or(0, |g| g.layout.end());
                self.zones_for(self.geo.lcap.saturating_sub(end))
            }
        }
    }

    /// Physical zones holding `blocks` blocks.
    fn zones_for(&self, blocks: u64) -> u64 {
        blocks.div_ceil(self.geo.phys_cap)
    }

    /// Physical zones all logical zones of all tenants still need
    /// ([`Ezns::zones_needed`]).
    pub(crate) fn reserved_zones(&self) -> u64 {
        let zones = self.tenants.iter().flat_map(|t| t.zones.iter());
        zones.map(|lz| self.zones_needed(lz)).sum()
    }

    /// How many of `want` new columns a group of `lz` from logical block
    /// `start` over the columns `keep` may take with `free` physical zones
    /// free: the most that leave every logical zone (this one after the
    /// group included) the zones it needs, and of those no more than the
    /// logical zone needs to reach its end beside `keep` and its parked
    /// columns, which have `parked` blocks of room ([`Ezns::fewest_to_end`]).
    /// One at least when `keep` is empty (the zone must go on; what is
    /// free is the allocator's to say).
    ///
    /// Thread safety: the caller holds the arbiter's lock, so no other
    /// group is made meanwhile.
    pub(crate) fn affordable_columns(
        &self,
        lz: &LZone,
        free: u64,
        start: u64,
        keep: &[Column],
        parked: u64,
        want: usize,
    ) -> usize {
        let least = usize::from(keep.is_empty()).min(want);
        if want == least {
            return want;
        }
        let others = self.reserved_zones() - self.zones_needed(lz);
        for add in (least..=want).rev() {
            let after = self.zones_for(self.geo.lcap - self.group_end(start, keep, add));
            if others + after + add as u64 <= free {
                return self.fewest_to_end(start, keep, parked, least, add);
            }
        }
        tracing::debug!(zone = lz.index, free, others, "no surplus: the zone goes on narrow");
        least
    }

    /// Of `add` new columns (at least `least`) beside `keep`, for a group
    /// from logical block `start` of a logical zone whose parked columns
    /// have `parked` blocks of room: no more than the logical zone needs to
    /// reach its end, if the group is no wider than the zone scale; else
    /// all of them.
    ///
    /// A column serves one logical zone, so what the zone's columns hold
    /// beyond its capacity when it fills is padded by a Finish (on the
    /// ZN540, at its write bandwidth, for every tenant). Every column but
    /// those of the last group and the parked ones is full, so the room of
    /// `keep` and of the parked columns plus `n` new zones' is what the zone
    /// will hold: taking only the new zones the blocks left need keeps the
    /// zone within `zone_scale` physical zones, each written full. A group
    /// cut short by a column that fills first (widened beside part-written
    /// columns) ends before the zone does, and without this bound would
    /// have taken columns the next groups find no blocks for. With zones of
    /// 768 blocks and a zone scale of 8, a group of width 7 after one of 7
    /// would write 110 blocks of each column and pad 4,608; it takes one
    /// column, which the 768 blocks fill. A group wider than the zone scale
    /// leaves its columns part empty whatever it does: the configuration
    /// chose to buy bandwidth with capacity there ([`crate::capacity`]),
    /// and it keeps its width.
    pub(crate) fn fewest_to_end(
        &self,
        start: u64,
        keep: &[Column],
        parked: u64,
        least: usize,
        add: usize,
    ) -> usize {
        if keep.len() + add > self.config.zone_scale as usize {
            return add;
        }
        let room = parked + keep.iter().map(|c| self.geo.phys_cap - c.base).sum::<u64>();
        let needed = self.zones_for((self.geo.lcap - start).saturating_sub(room)) as usize;
        add.min(needed.max(least))
    }

    /// Blocks of room in the parked columns of tenant `t`'s logical zone
    /// `lz` (none with a finish queued) and in `parking`, columns of it
    /// about to be parked: room the zone's later groups take back before
    /// any new physical zone.
    pub(crate) fn parked_room(
        &self,
        arb: &Arbiter,
        t: usize,
        lz: &LZone,
        parking: &[Column],
    ) -> u64 {
        let mine = arb
            .parked
            .iter()
            .filter(|p| !p.finishing && p.tenant as usize == t && p.lzone == lz.index);
        let cols = mine.map(|p| &p.col).chain(parking);
        cols.map(|c| self.geo.phys_cap - c.base).sum()
    }

    /// Where a group from logical block `start` over `keep` and `add` new
    /// (empty) columns ends: as far as its columns' room takes it, at most
    /// the logical zone's end.
    fn group_end(&self, start: u64, keep: &[Column], add: usize) -> u64 {
        let mut room: Vec<u64> = keep.iter().map(|c| self.geo.phys_cap - c.base).collect();
        room.resize(keep.len() + add, self.geo.phys_cap);
        (start + capacity(self.geo.unit, &room)).min(self.geo.lcap)
    }
}
