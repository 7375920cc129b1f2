//! Physical Region Page entries for one command's data.
//!
//! PRP1 names the first byte (any dword-aligned offset into its page).
//! When the transfer ends in the next page, PRP2 names that page; beyond
//! that, PRP2 points to a PRP list of page addresses, whose last slot chains
//! to the next list page when more entries follow. Every page is translated
//! on its own: nothing assumes two pages are adjacent on the bus.

use crate::dma::DmaSlice;
use crate::error::{Error, Result};

/// The two data pointer fields of a submission entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PrpPair {
    /// PRP entry 1.
    pub prp1: u64,
    /// PRP entry 2 or PRP list pointer.
    pub prp2: u64,
}

/// Preallocated PRP list pages for one command: their bytes and the bus
/// address of each page.
///
/// Thread safety: a borrow of memory owned by one queue's thread.
#[derive(Debug)]
pub struct ListArea<'a> {
    bytes: &'a mut [u8],
    bus: &'a [u64],
}

impl<'a> ListArea<'a> {
    /// `bytes` holds `bus.len()` list pages of `page_size` bytes;
    /// `bus[i]` is the (page-aligned) bus address of page `i`.
    pub fn new(bytes: &'a mut [u8], bus: &'a [u64]) -> Self {
        ListArea { bytes, bus }
    }

    fn pages(&self) -> usize {
        self.bus.len()
    }

    #[inline]
    fn put(&mut self, page: usize, slot: usize, ps: usize, value: u64) {
        let at = page * ps + slot * 8;
        self.bytes[at..at + 8].copy_from_slice(&value.to_le_bytes());
    }
}

/// Entries one list page holds.
const fn per_page(page_size: usize) -> usize {
    page_size / 8
}

/// Most list entries `pages` chained list pages hold.
pub fn list_capacity(pages: usize, page_size: usize) -> usize {
    if pages == 0 {
        return 1; // PRP2 itself
    }
    pages * (per_page(page_size) - 1) + 1
}

/// List pages needed for any transfer of up to `max_len` bytes starting at
/// any dword-aligned address.
pub fn list_pages_needed(max_len: usize, page_size: usize) -> usize {
    // Entries after PRP1, worst case over start offsets.
    let entries = max_len.div_ceil(page_size);
    if entries <= 1 {
        return 0;
    }
    (entries - 1).div_ceil(per_page(page_size) - 1)
}

/// Largest transfer `pages` list pages can describe at any start offset.
pub fn max_transfer(pages: usize, page_size: usize) -> usize {
    list_capacity(pages, page_size) * page_size
}

/// Builds the PRP entries for `data` with controller page size `page_size`,
/// writing a PRP list into `list` when one is needed.
pub fn build(data: &DmaSlice<'_>, page_size: usize, list: Option<ListArea<'_>>) -> Result<PrpPair> {
    let len = data.len();
    if len == 0 {
        return Ok(PrpPair::default());
    }
    let prp1 = data.bus_addr(0);
    if prp1 & 3 != 0 {
        return Err(Error::Misaligned { addr: prp1 });
    }
    let ps = page_size as u64;
    let first = ((ps - prp1 % ps) as usize).min(len);
    let rest = len - first;
    if rest == 0 {
        return Ok(PrpPair { prp1, prp2: 0 });
    }
    if rest <= page_size {
        return Ok(PrpPair { prp1, prp2: data.bus_addr(first) });
    }
    let entries = rest.div_ceil(page_size);
    let Some(mut list) = list else {
        return Err(Error::TransferTooLarge { len, max: 2 * page_size });
    };
    if entries > list_capacity(list.pages(), page_size) {
        return Err(Error::TransferTooLarge { len, max: max_transfer(list.pages(), page_size) });
    }
    write_list(data, page_size, first, entries, &mut list);
    Ok(PrpPair { prp1, prp2: list.bus[0] })
}

/// Fills list pages with the bus addresses of the data pages after the first.
fn write_list(
    data: &DmaSlice<'_>,
    ps: usize,
    first: usize,
    entries: usize,
    list: &mut ListArea<'_>,
) {
    let last_slot = per_page(ps) - 1;
    let (mut page, mut slot) = (0, 0);
    for i in 0..entries {
        if slot == last_slot && entries - i > 1 {
            list.put(page, slot, ps, list.bus[page + 1]);
            page += 1;
            slot = 0;
        }
        list.put(page, slot, ps, data.bus_addr(first + i * ps));
        slot += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dma::tests::region;
    use crate::dma::{DmaBuffer, DMA_PAGE};
    use std::sync::Arc;
    use zns_emulator::host::ProcessMemory;
    use zns_emulator::prp::{walk, Segment};

    const PS: usize = 4096;

    /// List pages in host memory, with their bus addresses.
    struct Lists {
        buf: DmaBuffer,
        bus: Vec<u64>,
    }

    impl Lists {
        fn new(host: &Arc<ProcessMemory>, pages: usize) -> Self {
            let buf = DmaBuffer::from_memory(region(host, pages.max(1) * PS, None));
            let bus = (0..pages).map(|i| buf.bus_addr(i * PS)).collect();
            Lists { buf, bus }
        }

        fn area(&mut self) -> Option<ListArea<'_>> {
            if self.bus.is_empty() {
                return None;
            }
            Some(ListArea::new(self.buf.as_mut_slice(), &self.bus))
        }
    }

    /// The pages the transfer covers, per the buffer's own translation.
    fn expected(data: &DmaSlice<'_>) -> Vec<Segment> {
        let mut v = Vec::new();
        let mut off = 0;
        while off < data.len() {
            let addr = data.bus_addr(off);
            let take = (PS - (addr as usize % PS)).min(data.len() - off);
            v.push(Segment { addr, len: take });
            off += take;
        }
        v
    }

    fn walked(host: &ProcessMemory, prp: PrpPair, len: usize) -> Vec<Segment> {
        let mut v = Vec::new();
        walk(host, PS, prp.prp1, prp.prp2, len, |s| {
            v.push(s);
            Ok(())
        })
        .expect("controller accepts the PRPs");
        v
    }

    fn check(host: &Arc<ProcessMemory>, data: &DmaSlice<'_>, list_pages: usize) {
        let mut lists = Lists::new(host, list_pages);
        let prp = build(data, PS, lists.area()).expect("build");
        assert_eq!(walked(host, prp, data.len()), expected(data), "len {}", data.len());
    }

    #[test]
    fn sizes_and_offsets_contiguous_buffer() {
        let host = ProcessMemory::new();
        let buf = region(&host, 1100 * PS, None);
        let pages = list_pages_needed(1024 * PS, PS);
        assert_eq!(pages, 3);
        for off in [0, 4, 512, 4092, PS, 3 * PS + 100] {
            for len in
                [1, 4, 511, 4096, 4097, 8192, 8193, 12288, 65536, 2 << 20, 1024 * PS - off % PS]
            {
                let data = DmaSlice::new(&buf, off, len).unwrap();
                check(&host, &data, pages);
            }
        }
    }

    #[test]
    fn scattered_pages_are_translated_one_by_one() {
        let host = ProcessMemory::new();
        // 700 pages whose bus addresses run backwards in steps of 3 pages.
        let n = 700;
        let bus: Vec<u64> = (0..n).map(|i| 0x4000_0000 + ((n - i) * 3 * PS) as u64).collect();
        let buf = region(&host, n * PS, Some(bus));
        let pages = list_pages_needed(n * PS, PS);
        for (off, len) in [(0, n * PS), (8, (n - 1) * PS), (100, 3 * PS), (PS - 4, 2 * PS + 8)] {
            let data = DmaSlice::new(&buf, off, len).unwrap();
            check(&host, &data, pages);
        }
    }

    #[test]
    fn chain_boundaries() {
        let host = ProcessMemory::new();
        let buf = region(&host, 1600 * PS, None);
        // Exactly 512 entries fit one list page; 513 need a chain.
        for entries in [2, 511, 512, 513, 1022, 1023, 1024, 1534] {
            // Exactly as many list pages as these entries need, no slack.
            let len = (entries + 1) * PS;
            let pages = (entries - 1usize).div_ceil(511);
            let data = DmaSlice::new(&buf, 0, len).unwrap();
            check(&host, &data, pages);
            assert!(list_pages_needed(len, PS) >= pages);
            let short = DmaSlice::new(&buf, 0, len + PS).unwrap();
            let mut lists = Lists::new(&host, pages);
            if entries + 1 > list_capacity(pages, PS) {
                assert!(build(&short, PS, lists.area()).is_err());
            }
        }
    }

    #[test]
    fn limits_and_alignment() {
        let host = ProcessMemory::new();
        let buf = region(&host, 8 * PS, None);
        let mut lists = Lists::new(&host, 0);
        let data = DmaSlice::new(&buf, 0, 3 * PS).unwrap();
        assert!(matches!(build(&data, PS, lists.area()), Err(Error::TransferTooLarge { .. })));
        let data = DmaSlice::new(&buf, 2, 16).unwrap();
        assert!(matches!(build(&data, PS, None), Err(Error::Misaligned { .. })));
        let data = DmaSlice::new(&buf, 0, 0).unwrap();
        assert_eq!(build(&data, PS, None).unwrap(), PrpPair::default());
        assert_eq!(max_transfer(1, PS), 512 * PS);
        assert_eq!(list_pages_needed(PS, PS), 0);
        assert_eq!(list_pages_needed(2 * PS, PS), 1);
        assert_eq!(list_pages_needed(2 << 20, PS), 1);
        assert_eq!(list_pages_needed((2 << 20) + PS, PS), 2);
        assert_eq!(DMA_PAGE, PS);
    }
}
