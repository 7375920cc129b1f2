//! A first-fit allocator of page runs inside one fixed region.
//!
//! Used by the DMA buffer pool (pages of a pool chunk) and by the hugepage
//! arena of the PCIe transport (pages of a 2 MiB huge page). It only does
//! bookkeeping: indices in, indices out; no memory is touched.

/// Bitmap of `pages` pages; a set bit is an allocated page.
///
/// Thread safety: plain data (`Send + Sync`); callers serialize mutation.
#[derive(Debug, Clone)]
pub(crate) struct RunAllocator {
    pages: usize,
    used: Vec<u64>,
    free: usize,
}

impl RunAllocator {
    /// A region of `pages` free pages.
    pub(crate) fn new(pages: usize) -> Self {
        RunAllocator { pages, used: vec![0; pages.div_ceil(64)], free: pages }
    }

    /// Pages in the region.
    #[cfg(test)]
    pub(crate) fn pages(&self) -> usize {
        self.pages
    }

    /// Free pages left.
    pub(crate) fn free_pages(&self) -> usize {
        self.free
    }

    /// True when nothing is allocated.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.free == self.pages
    }

    fn is_used(&self, page: usize) -> bool {
        self.used[page / 64] & (1 << (page % 64)) != 0
    }

    fn set(&mut self, start: usize, n: usize, used: bool) {
        for p in start..start + n {
            let (w, b) = (p / 64, 1u64 << (p % 64));
            if used {
                self.used[w] |= b;
            } else {
                self.used[w] &= !b;
            }
        }
    }

    /// Allocates `n` consecutive pages that do not cross a multiple of
    /// `boundary` pages (0 = no boundary); returns the first page.
    pub(crate) fn alloc(&mut self, n: usize, boundary: usize) -> Option<usize> {
        if n == 0 || n > self.free || (boundary != 0 && n > boundary) {
            return None;
        }
        let mut run_start = 0;
        let mut run = 0;
        for p in 0..self.pages {
            if boundary != 0 && p % boundary == 0 {
                run = 0;
            }
            if self.is_used(p) {
                run = 0;
                continue;
            }
            if run == 0 {
                run_start = p;
            }
            run += 1;
            if run == n {
                self.set(run_start, n, true);
                self.free -= n;
                return Some(run_start);
            }
        }
        None
    }

    /// Releases pages `start..start + n`, which must have been allocated.
    pub(crate) fn free(&mut self, start: usize, n: usize) {
        debug_assert!(start + n <= self.pages);
        debug_assert!((start..start + n).all(|p| self.is_used(p)), "double free");
        self.set(start, n, false);
        self.free += n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_fit_and_reuse() {
        let mut a = RunAllocator::new(10);
        assert_eq!(a.alloc(3, 0), Some(0));
        assert_eq!(a.alloc(3, 0), Some(3));
        assert_eq!(a.alloc(5, 0), None);
        assert_eq!(a.alloc(4, 0), Some(6));
        assert_eq!(a.free_pages(), 0);
        a.free(3, 3);
        assert_eq!(a.alloc(2, 0), Some(3));
        assert_eq!(a.alloc(2, 0), None);
        assert_eq!(a.alloc(1, 0), Some(5));
        a.free(0, 3);
        a.free(3, 2);
        a.free(5, 1);
        a.free(6, 4);
        assert!(a.is_empty());
        assert_eq!(a.alloc(10, 0), Some(0));
        assert_eq!(a.alloc(0, 0), None);
    }

    #[test]
    fn runs_respect_the_boundary() {
        let mut a = RunAllocator::new(16);
        assert_eq!(a.alloc(3, 4), Some(0));
        // 3 more would straddle page 4; the run starts at the boundary.
        assert_eq!(a.alloc(3, 4), Some(4));
        assert_eq!(a.alloc(1, 4), Some(3));
        assert_eq!(a.alloc(5, 4), None);
        assert_eq!(a.alloc(4, 4), Some(8));
        assert_eq!(a.pages(), 16);
    }

    #[test]
    fn many_words() {
        let mut a = RunAllocator::new(512);
        let mut got = Vec::new();
        while let Some(p) = a.alloc(7, 0) {
            got.push(p);
        }
        assert_eq!(got.len(), 512 / 7);
        for (i, p) in got.iter().enumerate() {
            assert_eq!(*p, i * 7);
        }
        for p in got {
            a.free(p, 7);
        }
        assert!(a.is_empty());
    }
}
