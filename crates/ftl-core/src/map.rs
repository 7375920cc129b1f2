//! The two-way page map of a flash translation layer: logical block →
//! physical block (L2P), the reverse map physical → logical (P2L) that
//! garbage collection walks, and the number of valid blocks of every erase
//! unit (a zone of the host FTL, a segment of a device FTL).
//!
//! Both directions are [`PackedArray`]s: an entry takes just enough bits
//! for the largest block number. A physical block is valid exactly when its
//! P2L entry names a logical block whose L2P entry points back at it, so no
//! separate validity bitmap is kept: the P2L entry of a block is cleared
//! when the block becomes invalid.
//!
//! Physical blocks are numbered densely, `stride` to an erase unit: block
//! `p` belongs to unit `p / stride`.

use std::sync::atomic::{AtomicU32, Ordering};

use crate::packed::PackedArray;

/// The two-way map and per-unit valid counts.
///
/// Thread safety: `Send + Sync`. Lookups are lock-free. Each change is a
/// few atomic stores that are not atomic together: callers serialize the
/// changing methods (the host FTL under its journal lock, the emulator's
/// firmware under its namespace lock).
#[derive(Debug)]
pub struct PageMap {
    l2p: PackedArray,
    p2l: PackedArray,
    valid: Box<[AtomicU32]>,
    stride: u64,
}

impl PageMap {
    /// An empty map of `logical` logical blocks onto `physical` physical
    /// blocks, `stride` physical blocks to an erase unit.
    ///
    /// Panics when any of them is 0 (a programming error: callers size
    /// the map from a validated geometry).
    pub fn new(logical: u64, physical: u64, stride: u64) -> Self {
        assert!(logical > 0 && physical > 0 && stride > 0, "empty page map");
        PageMap {
            l2p: PackedArray::new(logical as usize, physical - 1),
            p2l: PackedArray::new(physical as usize, logical - 1),
            valid: (0..physical.div_ceil(stride)).map(|_| AtomicU32::new(0)).collect(),
            stride,
        }
    }

    /// Logical blocks.
    pub fn logical(&self) -> u64 {
        self.l2p.len() as u64
    }

    /// Physical blocks.
    pub fn physical(&self) -> u64 {
        self.p2l.len() as u64
    }

    /// Erase units.
    pub fn units(&self) -> u32 {
        self.valid.len() as u32
    }

    /// Physical blocks per erase unit.
    pub fn stride(&self) -> u64 {
        self.stride
    }

    /// The erase unit holding physical block `p`.
    #[inline]
    pub fn unit_of(&self, p: u64) -> u32 {
        (p / self.stride) as u32
    }

    /// Where logical block `l` is, if it is mapped.
    #[inline]
    pub fn lookup(&self, l: u64) -> Option<u64> {
        self.l2p.get(l as usize)
    }

    /// The logical block whose data physical block `p` holds, if valid.
    #[inline]
    pub fn owner(&self, p: u64) -> Option<u64> {
        self.p2l.get(p as usize)
    }

    /// Valid blocks in erase unit `unit`.
    #[inline]
    pub fn valid(&self, unit: u32) -> u32 {
        self.valid[unit as usize].load(Ordering::Acquire)
    }

    /// Heap bytes of the map (both directions and the valid counts).
    pub fn bytes(&self) -> usize {
        self.l2p.bytes() + self.p2l.bytes() + self.valid.len() * 4
    }

    fn invalidate(&self, p: u64) {
        self.p2l.set(p as usize, None);
        self.valid[self.unit_of(p) as usize].fetch_sub(1, Ordering::AcqRel);
    }

    fn validate(&self, l: u64, p: u64) {
        let before = self.p2l.set(p as usize, Some(l));
        debug_assert!(
            before.is_none(),
            "physical block {p} already holds logical block {before:?}"
        );
        self.valid[self.unit_of(p) as usize].fetch_add(1, Ordering::AcqRel);
    }

    /// Maps `l` to `p` (newly written data); returns the old location,
    /// which becomes invalid.
    pub fn assign(&self, l: u64, p: u64) -> Option<u64> {
        self.remap(l, Some(p))
    }

    /// Points `l` at `to` (`None`: unmapped), keeping P2L and the valid
    /// counts in step; returns where `l` was. Undoing a change is
    /// `remap(l, old)` as long as the old block was not reused meanwhile.
    pub fn remap(&self, l: u64, to: Option<u64>) -> Option<u64> {
        let old = self.l2p.set(l as usize, to);
        if let Some(o) = old {
            self.invalidate(o);
        }
        if let Some(p) = to {
            self.validate(l, p);
        }
        old
    }

    /// Moves `l` from `from` to `to` (data relocated by garbage collection)
    /// if it still lives at `from`; false when it was overwritten or
    /// discarded meanwhile (the copy at `to` is then garbage).
    pub fn relocate(&self, l: u64, from: u64, to: u64) -> bool {
        if !self.l2p.compare_set(l as usize, Some(from), Some(to)) {
            return false;
        }
        self.invalidate(from);
        self.validate(l, to);
        true
    }

    /// Unmaps `l`; returns where it was.
    pub fn unmap(&self, l: u64) -> Option<u64> {
        self.remap(l, None)
    }

    /// Sets the L2P entry of `l` alone, without touching P2L or the valid
    /// counts (recovery replays entries this way, then rebuilds the reverse
    /// direction with [`PageMap::clear_reverse`] and [`PageMap::link`]).
    pub fn set_forward(&self, l: u64, p: Option<u64>) -> Option<u64> {
        self.l2p.set(l as usize, p)
    }

    /// Clears P2L and every valid count.
    pub fn clear_reverse(&self) {
        self.p2l.clear();
        for v in self.valid.iter() {
            v.store(0, Ordering::Relaxed);
        }
    }

    /// Recovery: records that physical block `p` holds `l` and counts it
    /// valid. Returns the logical block `p` already held, if any (then
    /// nothing changes: two logical blocks claim one physical block).
    pub fn link(&self, l: u64, p: u64) -> Option<u64> {
        if let Some(other) = self.p2l.get(p as usize) {
            return Some(other);
        }
        self.p2l.set(p as usize, Some(l));
        self.valid[self.unit_of(p) as usize].fetch_add(1, Ordering::AcqRel);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assign_relocate_unmap_keep_both_directions_and_counts() {
        let m = PageMap::new(20, 48, 12);
        assert_eq!((m.logical(), m.physical(), m.units(), m.stride()), (20, 48, 4, 12));
        assert_eq!(m.assign(3, 12), None);
        assert_eq!(m.assign(4, 13), None);
        assert_eq!((m.valid(1), m.owner(12), m.lookup(3)), (2, Some(3), Some(12)));
        assert_eq!(m.assign(3, 24), Some(12));
        assert_eq!((m.valid(1), m.valid(2), m.owner(12)), (1, 1, None));
        assert!(m.relocate(4, 13, 25));
        assert!(!m.relocate(4, 13, 26), "stale relocation refused");
        assert_eq!((m.valid(1), m.valid(2), m.lookup(4)), (0, 2, Some(25)));
        assert_eq!(m.unmap(3), Some(24));
        assert_eq!(m.unmap(3), None);
        assert_eq!((m.valid(2), m.lookup(3), m.owner(24)), (1, None, None));
        assert!(m.bytes() > 0);
    }

    #[test]
    fn remap_undoes_a_change() {
        let m = PageMap::new(8, 16, 4);
        m.assign(1, 0);
        let old = m.assign(1, 5);
        assert_eq!(old, Some(0));
        assert_eq!(m.remap(1, old), Some(5));
        assert_eq!((m.lookup(1), m.owner(0), m.owner(5)), (Some(0), Some(1), None));
        assert_eq!((m.valid(0), m.valid(1)), (1, 0));
        assert_eq!(m.remap(2, Some(6)), None);
        assert_eq!(m.remap(2, None), Some(6));
        assert_eq!(m.valid(1), 0);
    }

    #[test]
    fn recovery_rebuilds_the_reverse_direction() {
        let m = PageMap::new(8, 16, 4);
        m.set_forward(0, Some(3));
        m.set_forward(1, Some(4));
        m.clear_reverse();
        assert_eq!(m.link(0, 3), None);
        assert_eq!(m.link(1, 4), None);
        assert_eq!(m.link(2, 4), Some(1), "a second claim is reported");
        assert_eq!((m.valid(0), m.valid(1), m.owner(4)), (1, 1, Some(1)));
        m.clear_reverse();
        assert_eq!((m.valid(0), m.owner(3), m.lookup(0)), (0, None, Some(3)));
    }
}
