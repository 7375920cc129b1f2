//! The mapping: logical block → physical block (L2P), the reverse map
//! physical → logical (P2L) that garbage collection walks, and the number
//! of valid blocks of every zone.
//!
//! Both directions and the counts are a [`PageMap`] (crate
//! `zns-ftl-core`, shared with the emulator's conventional firmware):
//! packed entries of just enough bits for the largest block number (18
//! bits on the `small` profile, three entries to a 64-bit word), a block
//! valid exactly when its P2L entry names a logical block whose L2P entry
//! points back at it. Physical blocks are numbered `stride` to a zone.
//!
//! Beside them, one byte per logical block of update history
//! ([`Map::history`]) that the write path uses to tell hot data from cold;
//! it is a hint, not persisted, and starts empty at every mount.
//!
//! Readers translate without locks. Every change goes through a method
//! that takes the [`Journal`] by `&mut`, which only the holder of the
//! journal lock has: changes are serialized, and each appends its log
//! record in the same order as it changes the map.

use std::sync::atomic::{AtomicU8, Ordering};

use zns_ftl_core::PageMap;

use crate::error::{FtlError, Result};
use crate::journal::{Journal, Record};
use crate::layout::Layout;

/// The two-way map and per-zone valid counts.
///
/// Thread safety: `Send + Sync`; lookups are lock-free, changes need the
/// journal lock (see the module documentation).
#[derive(Debug)]
pub(crate) struct Map {
    pages: PageMap,
    /// Update history of each logical block (0 = none), see
    /// [`Map::history`].
    history: Box<[AtomicU8]>,
}

impl Map {
    /// An empty map for `layout`.
    pub fn new(layout: &Layout) -> Self {
        Map {
            pages: PageMap::new(layout.logical, layout.physical() as u64, layout.stride as u64),
            history: (0..layout.logical).map(|_| AtomicU8::new(0)).collect(),
        }
    }

    /// Logical blocks.
    pub fn logical(&self) -> u64 {
        self.pages.logical()
    }

    /// Where logical block `l` is, if it is mapped.
    #[inline]
    pub fn lookup(&self, l: u64) -> Option<u32> {
        self.pages.lookup(l).map(|p| p as u32)
    }

    /// The logical block whose data physical block `p` holds, if valid.
    #[inline]
    pub fn owner(&self, p: u32) -> Option<u64> {
        self.pages.owner(p as u64)
    }

    /// Valid blocks in `zone`.
    #[inline]
    pub fn valid(&self, zone: u32) -> u32 {
        self.pages.valid(zone)
    }

    /// The update history of logical block `l`: a byte the write path
    /// keeps (its meaning is the writer's; 0 = nothing recorded). Only a
    /// hint: concurrent writers of one block may overwrite each other's.
    #[inline]
    pub fn history(&self, l: u64) -> u8 {
        self.history[l as usize].load(Ordering::Relaxed)
    }

    /// Records the update history of logical block `l`.
    #[inline]
    pub fn set_history(&self, l: u64, h: u8) {
        self.history[l as usize].store(h, Ordering::Relaxed);
    }

    /// Heap bytes of the map (both directions, the valid counts and the
    /// update history).
    pub fn bytes(&self) -> usize {
        self.pages.bytes() + self.history.len()
    }

    /// Maps `l` to `p` (newly written data); returns the old location.
    pub fn assign(&self, journal: &mut Journal, l: u64, p: u32) -> Option<u32> {
        let old = self.pages.assign(l, p as u64).map(|o| o as u32);
        journal.push(Record::Map { l: l as u32, p });
        old
    }

    /// Moves `l` from `from` to `to` (data relocated by garbage collection)
    /// if it still lives at `from`; false when it was overwritten or
    /// discarded meanwhile (the copy at `to` is then garbage).
    pub fn relocate(&self, journal: &mut Journal, l: u64, from: u32, to: u32) -> bool {
        if !self.pages.relocate(l, from as u64, to as u64) {
            return false;
        }
        journal.push(Record::Map { l: l as u32, p: to });
        true
    }

    /// Unmaps `blocks` logical blocks from `l`.
    pub fn unmap(&self, journal: &mut Journal, l: u64, blocks: u64) {
        for i in l..l + blocks {
            self.pages.unmap(i);
        }
        journal.push(Record::Unmap { l: l as u32, blocks: blocks as u32 });
    }

    /// Recovery: sets `l` without bookkeeping ([`Map::rebuild`] follows).
    pub fn replay_set(&self, l: u64, p: Option<u32>) {
        self.pages.set_forward(l, p.map(u64::from));
    }

    /// Recovery: rebuilds P2L and the valid counts from L2P, checking that
    /// every mapped block lies in the written part of a data zone
    /// (`written[zone]` blocks) and that no two logical blocks share one.
    pub fn rebuild(&self, layout: &Layout, written: &[u32]) -> Result<()> {
        self.pages.clear_reverse();
        for l in 0..self.logical() {
            let Some(p) = self.lookup(l) else { continue };
            let zone = layout.zone_of(p);
            let off = layout.offset_of(p);
            let bad =
                |reason: String| FtlError::Corrupt { zone: zone as u64, block: off as u64, reason };
            if zone >= layout.zones || layout.is_meta(zone) {
                return Err(bad(format!("logical block {l} maps into a metadata or missing zone")));
            }
            if off >= written[zone as usize] {
                return Err(bad(format!(
                    "logical block {l} maps past the written part of the zone ({} blocks)",
                    written[zone as usize]
                )));
            }
            if let Some(other) = self.pages.link(l, p as u64) {
                return Err(bad(format!("logical blocks {other} and {l} map to the same block")));
            }
        }
        Ok(())
    }

    /// The raw L2P entry of `l` for checkpoints (`u32::MAX` = unmapped).
    pub fn raw(&self, l: u64) -> u32 {
        self.lookup(l).unwrap_or(u32::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> Layout {
        Layout {
            block_size: 4096,
            zone_size: 16,
            zones: 4,
            caps: vec![12; 4].into(),
            stride: 12,
            meta_zones: 1,
            mdts_blocks: 8,
            zasl_blocks: 4,
            logical: 20,
        }
    }

    #[test]
    fn assign_relocate_unmap_keep_both_directions_and_counts() {
        let l = layout();
        let m = Map::new(&l);
        let mut j = Journal::default();
        assert_eq!(m.assign(&mut j, 3, 12), None);
        assert_eq!(m.assign(&mut j, 4, 13), None);
        assert_eq!((m.valid(1), m.owner(12), m.lookup(3)), (2, Some(3), Some(12)));
        assert_eq!(m.assign(&mut j, 3, 24), Some(12));
        assert_eq!((m.valid(1), m.valid(2), m.owner(12)), (1, 1, None));
        assert!(m.relocate(&mut j, 4, 13, 25));
        assert!(!m.relocate(&mut j, 4, 13, 26), "stale relocation refused");
        assert_eq!((m.valid(1), m.valid(2), m.lookup(4)), (0, 2, Some(25)));
        m.unmap(&mut j, 3, 2);
        assert_eq!((m.valid(2), m.lookup(3), m.lookup(4)), (0, None, None));
        assert_eq!(j.pending().len(), 5);
        assert!(m.bytes() > 0);
    }

    #[test]
    fn rebuild_checks_what_recovery_found() {
        let l = layout();
        let m = Map::new(&l);
        m.replay_set(0, Some(12));
        m.replay_set(1, Some(13));
        m.rebuild(&l, &[0, 2, 0, 0]).unwrap();
        assert_eq!((m.valid(1), m.owner(13)), (2, Some(1)));
        let e = m.rebuild(&l, &[0, 1, 0, 0]).unwrap_err();
        assert!(e.to_string().contains("past the written part"), "{e}");
        m.replay_set(1, Some(12));
        let e = m.rebuild(&l, &[0, 2, 0, 0]).unwrap_err();
        assert!(e.to_string().contains("same block"), "{e}");
        m.replay_set(1, Some(3));
        let e = m.rebuild(&l, &[12, 2, 0, 0]).unwrap_err();
        assert!(e.to_string().contains("metadata"), "{e}");
    }
}
