//! Walking a command's PRP entries into the host memory segments they name.
//!
//! Rules (NVMe base specification, "Physical Region Page Entry and List"):
//! PRP1 may carry an offset into its page; every later entry must be page
//! aligned. If the transfer ends within PRP1's page plus one more page, PRP2
//! is that second page; otherwise PRP2 points to a PRP list, whose last entry
//! chains to the next list page when more entries follow.

use zns_spec::StatusCode;

use crate::host::HostMemory;

/// At most this many list pages are followed for one command; a loop of
/// chained lists in hostile input ends here instead of spinning.
const MAX_LIST_PAGES: usize = 4096;

/// One contiguous piece of a transfer in host memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// Bus address.
    pub addr: u64,
    /// Length in bytes.
    pub len: usize,
}

/// The transfer as one contiguous piece of host memory, when PRP1 alone
/// describes it, or PRP1 and a PRP2 page that directly follows PRP1's page:
/// the segments [`walk`] would produce, merged. `None` when the transfer
/// needs a PRP list, its pages are not adjacent, or an entry is malformed
/// (then [`walk`] reports the error).
#[inline]
pub fn contiguous(page_size: usize, prp1: u64, prp2: u64, len: usize) -> Option<Segment> {
    let ps = page_size as u64;
    if len == 0 || prp1 & 3 != 0 {
        return None;
    }
    let first = ps - prp1 % ps;
    let len64 = len as u64;
    if len64 <= first || (len64 - first <= ps && Some(prp2) == prp1.checked_add(first)) {
        Some(Segment { addr: prp1, len })
    } else {
        None
    }
}

/// Calls `f` for every segment of a `len`-byte transfer described by PRP1/PRP2,
/// in order. Errors carry the status a controller returns.
pub fn walk(
    host: &dyn HostMemory,
    page_size: usize,
    prp1: u64,
    prp2: u64,
    len: usize,
    mut f: impl FnMut(Segment) -> Result<(), StatusCode>,
) -> Result<(), StatusCode> {
    if len == 0 {
        return Ok(());
    }
    let ps = page_size as u64;
    // PRP1 bits 1:0 must be zero (dword aligned).
    if prp1 & 3 != 0 {
        return Err(StatusCode::InvalidPrpOffset);
    }
    let first = ((ps - (prp1 % ps)) as usize).min(len);
    f(Segment { addr: prp1, len: first })?;
    let mut left = len - first;
    if left == 0 {
        return Ok(());
    }
    if left <= page_size {
        if !prp2.is_multiple_of(ps) {
            return Err(StatusCode::InvalidPrpOffset);
        }
        return f(Segment { addr: prp2, len: left });
    }
    // PRP2 is a list pointer; it may start at an offset inside its page.
    if prp2 & 7 != 0 {
        return Err(StatusCode::InvalidPrpOffset);
    }
    let mut list = prp2;
    let mut pages = 0;
    let mut entries = [0u8; 8 * 64];
    while left > 0 {
        pages += 1;
        if pages > MAX_LIST_PAGES {
            return Err(StatusCode::InvalidField);
        }
        // Entries in this list page, from the list pointer's offset on.
        let in_page = ((ps - list % ps) / 8) as usize;
        let needed = left.div_ceil(page_size);
        // The last slot chains to the next list when more pages follow.
        let (data_slots, chains) =
            if needed > in_page { (in_page - 1, true) } else { (needed, false) };
        let mut done = 0;
        while done < data_slots + chains as usize {
            let n = (data_slots + chains as usize - done).min(64);
            let bytes = &mut entries[..n * 8];
            host.read(list + (done * 8) as u64, bytes)
                .map_err(|_| StatusCode::DataTransferError)?;
            for (i, e) in bytes.chunks_exact(8).enumerate() {
                let entry = u64::from_le_bytes(e.try_into().expect("8-byte chunk"));
                if done + i == data_slots {
                    // Chain pointer: must be aligned like any list pointer.
                    if entry & 7 != 0 {
                        return Err(StatusCode::InvalidPrpOffset);
                    }
                    list = entry;
                    continue;
                }
                if entry % ps != 0 {
                    return Err(StatusCode::InvalidPrpOffset);
                }
                let take = left.min(page_size);
                f(Segment { addr: entry, len: take })?;
                left -= take;
            }
            done += n;
        }
        if !chains {
            break;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::ProcessMemory;

    fn segments(
        mem: &ProcessMemory,
        prp1: u64,
        prp2: u64,
        len: usize,
    ) -> Result<Vec<Segment>, StatusCode> {
        let mut v = Vec::new();
        walk(mem, 4096, prp1, prp2, len, |s| {
            v.push(s);
            Ok(())
        })?;
        Ok(v)
    }

    #[test]
    fn one_and_two_pages() {
        let mem = ProcessMemory::new();
        let s = segments(&mem, 0x10_0000, 0, 4096).unwrap();
        assert_eq!(s, vec![Segment { addr: 0x10_0000, len: 4096 }]);
        let s = segments(&mem, 0x10_0200, 0x20_0000, 4096).unwrap();
        assert_eq!(
            s,
            vec![Segment { addr: 0x10_0200, len: 3584 }, Segment { addr: 0x20_0000, len: 512 }]
        );
        assert_eq!(segments(&mem, 0x10_0000, 0x20_0010, 8192), Err(StatusCode::InvalidPrpOffset));
        assert_eq!(segments(&mem, 0x10_0001, 0, 512), Err(StatusCode::InvalidPrpOffset));
    }

    #[test]
    fn contiguous_transfers() {
        assert_eq!(
            contiguous(4096, 0x10_0000, 0, 4096),
            Some(Segment { addr: 0x10_0000, len: 4096 })
        );
        assert_eq!(
            contiguous(4096, 0x10_0200, 0, 3584),
            Some(Segment { addr: 0x10_0200, len: 3584 })
        );
        assert_eq!(contiguous(4096, 0x10_0200, 0x20_0000, 4096), None, "pages not adjacent");
        assert_eq!(
            contiguous(4096, 0x10_0200, 0x10_1000, 4096),
            Some(Segment { addr: 0x10_0200, len: 4096 })
        );
        assert_eq!(
            contiguous(4096, 0x10_0000, 0x10_1000, 8192),
            Some(Segment { addr: 0x10_0000, len: 8192 })
        );
        assert_eq!(contiguous(4096, 0x10_0000, 0x10_1000, 8196), None, "needs a list");
        assert_eq!(contiguous(4096, 0x10_0001, 0, 512), None);
        assert_eq!(contiguous(4096, 0x10_0000, 0, 0), None);
        assert_eq!(contiguous(4096, u64::MAX - 3, 0, 8), None);
        // Whatever `contiguous` merges is exactly what `walk` yields.
        let mem = ProcessMemory::new();
        for (prp1, prp2, len) in
            [(0x10_0200u64, 0x10_1000u64, 4096usize), (0x10_0000, 0x10_1000, 8192)]
        {
            let s = segments(&mem, prp1, prp2, len).unwrap();
            assert_eq!(s[0].addr, prp1);
            for w in s.windows(2) {
                assert_eq!(w[0].addr + w[0].len as u64, w[1].addr);
            }
            assert_eq!(s.iter().map(|s| s.len).sum::<usize>(), len);
        }
    }

    #[test]
    fn lists_and_chains() {
        let mem = ProcessMemory::new();
        let lists = mem.allocate(2 * 4096, 4096).unwrap();
        // 600 data pages after PRP1: list page 1 holds 511 + chain, page 2 the rest.
        let pages = 600u64;
        let mut l1 = Vec::new();
        for i in 0..511u64 {
            l1.extend_from_slice(&((i + 1) * 0x1000 + 0x100_0000).to_le_bytes());
        }
        l1.extend_from_slice(&(lists.addr() + 4096).to_le_bytes());
        let mut l2 = Vec::new();
        for i in 511..pages {
            l2.extend_from_slice(&((i + 1) * 0x1000 + 0x100_0000).to_le_bytes());
        }
        mem.write(lists.addr(), &l1).unwrap();
        mem.write(lists.addr() + 4096, &l2).unwrap();
        let len = 4096 * (pages as usize + 1);
        let s = segments(&mem, 0x100_0000, lists.addr(), len).unwrap();
        assert_eq!(s.len(), pages as usize + 1);
        for (i, seg) in s.iter().enumerate() {
            assert_eq!(seg.addr, 0x100_0000 + i as u64 * 0x1000);
            assert_eq!(seg.len, 4096);
        }
        // A list pointer outside host memory is a data transfer error.
        assert_eq!(
            segments(&mem, 0x100_0000, 0x7000_0000, 3 * 4096),
            Err(StatusCode::DataTransferError)
        );
    }

    #[test]
    fn self_chaining_list_terminates() {
        let mem = ProcessMemory::new();
        let list = mem.allocate(4096, 4096).unwrap();
        let mut l = vec![0u8; 4096];
        for i in 0..511 {
            l[i * 8..i * 8 + 8].copy_from_slice(&0x100_0000u64.to_le_bytes());
        }
        l[511 * 8..].copy_from_slice(&list.addr().to_le_bytes());
        mem.write(list.addr(), &l).unwrap();
        let r = segments(&mem, 0x100_0000, list.addr(), usize::MAX / 2);
        assert_eq!(r.err(), Some(StatusCode::InvalidField));
    }
}
