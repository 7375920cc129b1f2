//! Stripe groups: how a run of a logical zone maps onto physical zones.
//!
//! A logical zone is a sequence of stripe groups, each covering a
//! contiguous run of the logical zone's blocks. A group stripes its run
//! over its columns (physical zones) in units of `unit` blocks, round
//! robin: unit 0 on column 0, unit 1 on column 1, ..., unit `w` on column
//! 0 again. Each column's share is contiguous in its physical zone from the
//! column's `base` on, so a group can continue a physical zone that an
//! earlier group of the same logical zone wrote part of (a restripe keeps
//! the columns it does not drop). Everything here is arithmetic on block
//! counts; the I/O lives elsewhere.

/// One physical zone of a stripe group.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Column {
    /// Physical zone index on the base device.
    pub zone: u32,
    /// Blocks of the physical zone before this group's share (written by
    /// earlier groups, or skipped).
    pub base: u64,
    /// Tenant whose active-zone budget the column counts against: the
    /// group's owner, or the lender of a borrowed spare.
    pub budget: u16,
}

/// A stripe group: the run `[start, start + len)` of a logical zone striped
/// over `cols` in units of `unit` blocks.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// First logical block (offset in the logical zone).
    pub start: u64,
    /// Most blocks the group holds (it may end earlier, where the next
    /// group starts).
    pub len: u64,
    /// Stripe unit in blocks (at least 1).
    pub unit: u64,
    /// The columns, in striping order.
    pub cols: Vec<Column>,
}

impl Layout {
    /// A group from `start` over `cols`, as long as the columns' room
    /// (`room[c]` blocks left in column `c`'s physical zone after its base)
    /// and `left` (blocks left in the logical zone) allow.
    pub fn new(start: u64, unit: u64, cols: Vec<Column>, room: &[u64], left: u64) -> Layout {
        debug_assert_eq!(cols.len(), room.len());
        let unit = unit.max(1);
        let len = capacity(unit, room).min(left);
        Layout { start, len, unit, cols }
    }

    /// Stripe width: the number of columns.
    pub fn width(&self) -> usize {
        self.cols.len()
    }

    /// One past the last logical block the group can hold.
    pub fn end(&self) -> u64 {
        self.start + self.len
    }

    /// Blocks of column `c` among the group's first `l` blocks.
    pub fn ext(&self, c: usize, l: u64) -> u64 {
        ext(self.unit, self.width() as u64, c as u64, l)
    }

    /// Where the group's block `o` (relative to `start`) lives: column and
    /// block offset in the column's share.
    pub fn locate(&self, o: u64) -> (usize, u64) {
        let (u, w) = (self.unit, self.width() as u64);
        let row = o / (u * w);
        let within = o % (u * w);
        ((within / u) as usize, row * u + within % u)
    }

    /// Calls `f(column, group offset, column offset, blocks)` for each piece
    /// of the group's blocks `[a, b)` (relative to `start`) that lies in
    /// one stripe unit, in logical order.
    pub fn chunks(&self, a: u64, b: u64, mut f: impl FnMut(usize, u64, u64, u64)) {
        let mut o = a;
        while o < b {
            let (c, p) = self.locate(o);
            let n = (b - o).min(self.unit - o % self.unit);
            f(c, o, p, n);
            o += n;
        }
    }

    /// The group's first block that is not written, from what each column
    /// holds of the group (`written[c]` blocks of column `c`'s share): the
    /// end of the longest prefix of the group that is all written.
    pub fn consistent_end(&self, written: &[u64]) -> u64 {
        let (u, w) = (self.unit, self.width() as u64);
        let mut end = self.len;
        for (c, &x) in written.iter().enumerate() {
            if x >= self.ext(c, self.len) {
                continue;
            }
            end = end.min((x / u) * u * w + c as u64 * u + x % u);
        }
        end
    }
}

/// Blocks of column `c` (of `w`, unit `u`) among a group's first `l`.
pub fn ext(u: u64, w: u64, c: u64, l: u64) -> u64 {
    let row = u * w;
    (l / row) * u + (l % row).saturating_sub(c * u).min(u)
}

/// Most blocks a group with unit `u` can hold when column `c` has room for
/// `room[c]` blocks: whole rows up to the smallest room, then the last,
/// partial row for as long as each column in turn has a whole unit of room
/// (a column short of one ends it).
pub fn capacity(u: u64, room: &[u64]) -> u64 {
    let Some(&m) = room.iter().min() else { return 0 };
    let w = room.len() as u64;
    let rows = m / u;
    let mut len = rows * u * w;
    for &r in room {
        let avail = r - rows * u;
        if avail >= u {
            len += u;
        } else {
            len += avail;
            break;
        }
    }
    len
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn layout(unit: u64, room: &[u64]) -> Layout {
        let cols = (0..room.len()).map(|i| Column { zone: i as u32, base: 0, budget: 0 }).collect();
        Layout::new(0, unit, cols, room, u64::MAX)
    }

    #[test]
    fn round_robin_in_units() {
        let l = layout(2, &[8, 8, 8]);
        assert_eq!(l.len, 24);
        let placed: Vec<_> = (0..8).map(|o| l.locate(o)).collect();
        assert_eq!(placed, [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1), (0, 2), (0, 3)]);
        assert_eq!((0..3).map(|c| l.ext(c, 7)).collect::<Vec<_>>(), [3, 2, 2]);
        let mut got = Vec::new();
        l.chunks(1, 7, |c, o, p, n| got.push((c, o, p, n)));
        assert_eq!(got, [(0, 1, 1, 1), (1, 2, 0, 2), (2, 4, 0, 2), (0, 6, 2, 1)]);
    }

    #[test]
    fn ragged_room_ends_the_group_early() {
        // Column 1 has 5 blocks of room: two whole rows, then column 0
        // takes a unit and column 1 its last block.
        assert_eq!(capacity(2, &[8, 5, 8]), 2 * 2 * 3 + 2 + 1);
        assert_eq!(capacity(2, &[]), 0);
        assert_eq!(capacity(4, &[3, 9]), 3);
        let l = Layout::new(10, 4, vec![Column { zone: 7, base: 0, budget: 0 }], &[100], 30);
        assert_eq!((l.len, l.end()), (30, 40));
    }

    #[test]
    fn consistent_end_is_the_first_hole() {
        let l = layout(2, &[8, 8, 8]);
        assert_eq!(l.consistent_end(&[8, 8, 8]), 24);
        assert_eq!(l.consistent_end(&[0, 0, 0]), 0);
        // Column 1 holds one block: logical 2 is written, 3 is not.
        assert_eq!(l.consistent_end(&[2, 1, 2]), 3);
        // Column 0 is ahead by a row: the hole is in column 2.
        assert_eq!(l.consistent_end(&[4, 2, 1]), 5);
    }

    proptest! {
        #[test]
        fn mapping_is_a_bijection(
            unit in 1u64..6,
            room in proptest::collection::vec(0u64..40, 1..6),
        ) {
            let l = layout(unit, &room);
            let mut seen: Vec<Vec<bool>> = room.iter().map(|&r| vec![false; r as usize]).collect();
            for o in 0..l.len {
                let (c, p) = l.locate(o);
                prop_assert!(p < room[c], "block {o} at column {c} offset {p}, room {}", room[c]);
                prop_assert!(!seen[c][p as usize]);
                seen[c][p as usize] = true;
                // The blocks of a column below a logical offset are a prefix.
                prop_assert_eq!(l.ext(c, o), p);
            }
            for (c, col) in seen.iter().enumerate() {
                let used = col.iter().filter(|&&x| x).count() as u64;
                prop_assert_eq!(used, l.ext(c, l.len));
                prop_assert!(col[..used as usize].iter().all(|&x| x));
            }
            // No room for one more block anywhere.
            let more = l.len;
            let (c, p) = l.locate(more);
            prop_assert!(p >= room[c] || room.contains(&0));
        }

        #[test]
        fn chunks_cover_ranges_and_consistent_end_inverts_ext(
            unit in 1u64..6,
            room in proptest::collection::vec(1u64..40, 1..6),
            a in 0u64..200,
            n in 0u64..200,
        ) {
            let l = layout(unit, &room);
            let a = a.min(l.len);
            let b = (a + n).min(l.len);
            let mut next = a;
            l.chunks(a, b, |c, o, p, k| {
                assert_eq!(o, next);
                assert_eq!(l.locate(o), (c, p));
                assert_eq!(l.locate(o + k - 1), (c, p + k - 1));
                next = o + k;
            });
            prop_assert_eq!(next, b);
            let written: Vec<u64> = (0..room.len()).map(|c| l.ext(c, b)).collect();
            prop_assert_eq!(l.consistent_end(&written), b);
        }
    }
}
