//! Arrays of small unsigned integers packed into atomic 64-bit words.
//!
//! An entry is `width` bits wide and never straddles two words (a word
//! holds `64 / width` entries, the leftover bits stay unused), so one
//! entry is read with a single atomic load and changed with a single
//! compare-and-swap. The all-ones value of an entry is reserved as "none".

use std::sync::atomic::{AtomicU64, Ordering};

/// A fixed-length array of `width`-bit entries.
///
/// Thread safety: `Send + Sync`. Loads are lock-free; stores are atomic
/// per entry (a compare-and-swap loop on the entry's word), so concurrent
/// stores to different entries of one word never lose each other.
pub struct PackedArray {
    words: Box<[AtomicU64]>,
    len: usize,
    width: u32,
    per_word: usize,
    mask: u64,
}

impl std::fmt::Debug for PackedArray {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackedArray")
            .field("len", &self.len)
            .field("width", &self.width)
            .field("bytes", &self.bytes())
            .finish()
    }
}

impl PackedArray {
    /// An array of `len` entries able to hold every value in `0..=max`
    /// besides "none"; every entry starts as "none".
    pub fn new(len: usize, max: u64) -> Self {
        // The all-ones pattern of `width` bits must exceed `max`.
        let width = (64 - (max.saturating_add(1)).leading_zeros()).clamp(1, 64);
        let per_word = (64 / width) as usize;
        let mask = if width == 64 { u64::MAX } else { (1u64 << width) - 1 };
        let mut all_none = 0u64;
        for i in 0..per_word {
            all_none |= mask << (i as u32 * width);
        }
        let words = (0..len.div_ceil(per_word)).map(|_| AtomicU64::new(all_none)).collect();
        PackedArray { words, len, width, per_word, mask }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the array has no entries.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bits per entry.
    pub fn width(&self) -> u32 {
        self.width
    }

    /// Heap bytes the entries take.
    pub fn bytes(&self) -> usize {
        self.words.len() * std::mem::size_of::<AtomicU64>()
    }

    #[inline]
    fn locate(&self, i: usize) -> (usize, u32) {
        debug_assert!(i < self.len, "index {i} out of {}", self.len);
        (i / self.per_word, (i % self.per_word) as u32 * self.width)
    }

    /// Entry `i`, `None` when it holds "none".
    #[inline]
    pub fn get(&self, i: usize) -> Option<u64> {
        let (w, shift) = self.locate(i);
        let v = (self.words[w].load(Ordering::Acquire) >> shift) & self.mask;
        (v != self.mask).then_some(v)
    }

    /// Sets entry `i` to `v` (`None` for "none"); returns the old value.
    #[inline]
    pub fn set(&self, i: usize, v: Option<u64>) -> Option<u64> {
        let v = v.unwrap_or(self.mask);
        debug_assert!(v <= self.mask);
        let (w, shift) = self.locate(i);
        let clear = !(self.mask << shift);
        let old = self.words[w]
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |x| Some((x & clear) | (v << shift)))
            .unwrap_or_else(|x| x);
        let o = (old >> shift) & self.mask;
        (o != self.mask).then_some(o)
    }

    /// Sets entry `i` to `new` only if it holds `expected`; true on success.
    #[inline]
    pub fn compare_set(&self, i: usize, expected: Option<u64>, new: Option<u64>) -> bool {
        let e = expected.unwrap_or(self.mask);
        let n = new.unwrap_or(self.mask);
        let (w, shift) = self.locate(i);
        let clear = !(self.mask << shift);
        self.words[w]
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |x| {
                ((x >> shift) & self.mask == e).then_some((x & clear) | (n << shift))
            })
            .is_ok()
    }

    /// Sets every entry to "none".
    pub fn clear(&self) {
        let mut all_none = 0u64;
        for i in 0..self.per_word {
            all_none |= self.mask << (i as u32 * self.width);
        }
        for w in self.words.iter() {
            w.store(all_none, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_fit_the_largest_value_and_none() {
        assert_eq!(PackedArray::new(10, 0).width(), 1);
        assert_eq!(PackedArray::new(10, 1).width(), 2);
        assert_eq!(PackedArray::new(10, 245_759).width(), 18);
        assert_eq!(PackedArray::new(10, 262_142).width(), 18);
        assert_eq!(PackedArray::new(10, 262_143).width(), 19);
        assert_eq!(PackedArray::new(10, u32::MAX as u64 - 1).width(), 32);
        // Three 18-bit entries per word: 8/3 bytes an entry.
        assert_eq!(PackedArray::new(300, 245_759).bytes(), 100 * 8);
    }

    #[test]
    fn entries_are_independent() {
        let a = PackedArray::new(1000, 100_000);
        assert!((0..1000).all(|i| a.get(i).is_none()));
        for i in 0..1000 {
            assert_eq!(a.set(i, Some(i as u64 * 97)), None);
        }
        for i in 0..1000 {
            assert_eq!(a.get(i), Some(i as u64 * 97));
        }
        assert_eq!(a.set(5, None), Some(5 * 97));
        assert_eq!(a.get(5), None);
        assert_eq!(a.get(4), Some(4 * 97));
        assert_eq!(a.get(6), Some(6 * 97));
        assert!(!a.compare_set(6, Some(1), Some(2)));
        assert!(a.compare_set(6, Some(6 * 97), Some(2)));
        assert_eq!(a.get(6), Some(2));
        assert!(a.compare_set(5, None, Some(100_000)));
        assert_eq!(a.get(5), Some(100_000));
        a.clear();
        assert!((0..1000).all(|i| a.get(i).is_none()));
    }

    #[test]
    fn concurrent_stores_to_one_word_are_not_lost() {
        let a = std::sync::Arc::new(PackedArray::new(3, 1_000_000));
        let threads: Vec<_> = (0..3)
            .map(|t| {
                let a = a.clone();
                std::thread::spawn(move || {
                    for v in 0..20_000u64 {
                        a.set(t, Some(v));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        for t in 0..3 {
            assert_eq!(a.get(t), Some(19_999));
        }
    }
}
