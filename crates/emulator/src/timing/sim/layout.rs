//! Where a zone's data sits: the zone (or segment) holding a block, the
//! stripe layout of a striped zone's program units, and the die each
//! program unit is on.

use super::params::Params;
use super::{NsGeometry, Sim, ZoneKey, CONVENTIONAL};

/// Where a striped zone's data sits. Its data rotates over the zone's
/// `stripe` dies in chunks of `chunk` bytes (chunk `j` on die position
/// `i = j % stripe`, stripe row `j / stripe`), and each die gathers
/// `rows` chunks, from consecutive rows, into a program unit. The dies'
/// units are staggered: die position `i` starts its first unit `i % rows`
/// chunks in (those pages hold no zone data), so in every stripe row a
/// share of the dies complete a unit and the buffer drains evenly, rather
/// than every die at once in the last row of a stripe of units. Program
/// unit `u` is die position `u % stripe`'s `u / stripe`-th; its bytes
/// have "physical" offsets `u` × unit + offset in the unit (chunk by
/// chunk in row order, after the unit's leading pad). A segment of a
/// conventional namespace with an FTL is laid out the same way without
/// the stagger (`staggered` false): it holds whole program units on every
/// die, and pads would cost each die a partial program per segment.
#[derive(Debug, Clone, Copy)]
pub(super) struct Layout {
    pub(super) stripe: u64,
    pub(super) rows: u64,
    pub(super) chunk: u64,
    pub(super) staggered: bool,
}

impl Params {
    /// The layout of a striped zone.
    pub(super) fn layout(&self) -> Layout {
        Layout { stripe: self.stripe as u64, rows: self.rows, chunk: self.chunk, staggered: true }
    }
}

impl Layout {
    /// Chunks the first unit of die position `i` leaves out.
    #[inline]
    fn phase(&self, i: u64) -> u64 {
        if self.staggered {
            i % self.rows
        } else {
            0
        }
    }

    /// Bytes at the start of program unit `u` without zone data.
    #[inline]
    pub(super) fn pad(&self, u: u64) -> u64 {
        let s = self.stripe;
        if u < s {
            self.phase(u) * self.chunk
        } else {
            0
        }
    }

    /// Zone chunk index in slot `r` (of `rows`) of program unit `u`, or
    /// `None` for a slot of the leading pad.
    #[inline]
    fn chunk_of(&self, u: u64, r: u64) -> Option<u64> {
        let s = self.stripe;
        let (m, i) = (u / s, u % s);
        (m * self.rows + r).checked_sub(self.phase(i)).map(|row| row * s + i)
    }

    /// Bytes of program unit `u` below zone offset `x`: they come first
    /// in the unit's physical layout, after its pad.
    pub(super) fn unit_below(&self, u: u64, x: u64) -> u64 {
        (0..self.rows)
            .filter_map(|r| self.chunk_of(u, r))
            .map(|j| x.saturating_sub(j * self.chunk).min(self.chunk))
            .sum()
    }

    /// Whether chunk `j` of the zone is the last of its program unit.
    #[inline]
    pub(super) fn ends_unit(&self, j: u64) -> bool {
        let s = self.stripe;
        (j / s + self.phase(j % s)) % self.rows == self.rows - 1
    }

    /// Program unit holding zone offset `off`, and the offset in the unit.
    #[inline]
    pub(super) fn physical(&self, off: u64) -> (u64, u64) {
        let s = self.stripe;
        let j = off / self.chunk;
        let (row, i) = (j / s, j % s);
        let slot = row + self.phase(i);
        let (m, r) = (slot / self.rows, slot % self.rows);
        (m * s + i, r * self.chunk + off % self.chunk)
    }

    /// The last chunk of die position `i` that starts below zone offset
    /// `x`, if any.
    pub(super) fn last_chunk(&self, i: u64, x: u64) -> Option<u64> {
        let (s, q) = (self.stripe, x.div_ceil(self.chunk));
        (q > i).then(|| i + (q - 1 - i) / s * s)
    }

    /// Program units of die position `i` holding some of the zone's first
    /// `x` bytes.
    pub(super) fn die_units(&self, i: u64, x: u64) -> u64 {
        self.last_chunk(i, x).map_or(0, |j| self.physical(j * self.chunk).0 / self.stripe + 1)
    }
}

impl Sim {
    pub(super) fn geometry(&self, nsid: u32) -> NsGeometry {
        self.ns.get((nsid as usize).wrapping_sub(1)).copied().unwrap_or(NsGeometry {
            block_bytes: 4096,
            zone_blocks: 0,
            cap_blocks: 0,
            segment_blocks: 0,
        })
    }

    /// True for the zone keys of a namespace with an FTL (segments).
    pub(super) fn is_segment(&self, zone: ZoneKey) -> bool {
        zone.1 != CONVENTIONAL && self.geometry(zone.0).segment_blocks > 0
    }

    /// True for a zone whose data rotates over its dies in chunks smaller
    /// than the program unit. A segment of a conventional namespace with
    /// an FTL (an erase block on every die) is laid out the same way when
    /// the profile stripes zones over every die: the twin's firmware
    /// places data on the same NAND as its ZNS twin. A conventional
    /// namespace without an FTL is not striped.
    pub(super) fn is_striped(&self, zone: ZoneKey) -> bool {
        self.p.rows > 1
            && zone.1 != CONVENTIONAL
            && (!self.is_segment(zone) || self.p.stripe == self.p.dies)
    }

    /// Where a striped zone's or segment's data sits.
    pub(super) fn layout(&self, zone: ZoneKey) -> Layout {
        Layout { staggered: !self.is_segment(zone), ..self.p.layout() }
    }

    /// Bytes a zone (or segment) holds at most.
    pub(super) fn capacity_bytes(&self, zone: ZoneKey) -> u64 {
        let g = self.geometry(zone.0);
        match self.is_segment(zone) {
            true => g.segment_blocks * g.block_bytes,
            false => g.cap_blocks * g.block_bytes,
        }
    }

    /// The zone holding `lba` and the byte offset of `lba` in it.
    pub(super) fn locate(&self, nsid: u32, lba: u64) -> (ZoneKey, u64) {
        let g = self.geometry(nsid);
        if g.zone_blocks == 0 {
            return ((nsid, CONVENTIONAL), lba * g.block_bytes);
        }
        let z = lba / g.zone_blocks;
        ((nsid, z as u32), (lba - z * g.zone_blocks) * g.block_bytes)
    }

    /// Stripes of erase blocks (an erase block on each of the zone's dies)
    /// a write of `bytes` at byte `at` of `zone` enters, its first stripe
    /// not counted (the zone's open binds it).
    pub(super) fn stripes_entered(&self, zone: ZoneKey, at: u64, bytes: u64) -> u64 {
        if zone.1 == CONVENTIONAL || self.p.stripe_open == 0 || bytes == 0 {
            return 0;
        }
        let stripe = self.p.unit * self.p.units_per_block * self.p.stripe.max(1) as u64;
        // Stripe starts m · stripe (m ≥ 1) with at ≤ m · stripe < at + bytes.
        let first = at.div_ceil(stripe).max(1);
        let last = (at + bytes - 1) / stripe;
        (last + 1).saturating_sub(first)
    }

    /// Die `i` (of `zone_stripe_dies`) of a zone's die set: a zone's set
    /// is `zone_stripe_dies` consecutive dies (consecutive dies sit on
    /// different channels), sets of neighbouring zones side by side.
    fn set_die(&self, zone: ZoneKey, i: u64) -> u32 {
        let d = self.p.dies as u64;
        let s = self.p.stripe as u64;
        if self.is_segment(zone) {
            // A segment is an erase block on every die, from die 0.
            return (i % d) as u32;
        }
        match zone.1 {
            CONVENTIONAL => (i % d) as u32,
            z => ((z as u64 * s + i % s) % d) as u32,
        }
    }

    /// The die holding program unit `k` of `zone`: a fixed mapping, as
    /// the drive's. A zone's consecutive program units rotate over its die
    /// set starting at a die that depends on the zone, so a zone read or
    /// written alone uses all its dies in turn, and zones written together
    /// start on dies spread over the set (zones written in step do not
    /// queue on the same dies).
    pub(super) fn die_of(&self, zone: ZoneKey, k: u64) -> u32 {
        if self.is_segment(zone) {
            return self.set_die(zone, k);
        }
        match zone.1 {
            CONVENTIONAL => self.set_die(zone, k),
            // The radical inverse of the zone index (its bits reversed, as
            // a fraction) times the set size: any 2^n consecutive zones
            // aligned on 2^n start on evenly spaced dies.
            z => {
                let offset = (z.reverse_bits() as u64 * self.p.stripe as u64) >> 32;
                self.set_die(zone, k + offset)
            }
        }
    }
}
