//! Submission and completion queues as the controller sees them: rings in
//! host memory, indices, the phase tag, and completions waiting for room.

use std::collections::VecDeque;
use std::sync::atomic::{fence, AtomicU16, Ordering};

use zns_spec::{CompletionEntry, SubmissionEntry};

use crate::host::{DmaError, HostMemory};

/// Most entries fetched from a submission queue with one host-memory access
/// (and completed with one completion-queue lock).
pub(crate) const FETCH_BATCH: usize = 64;

/// Entries fetched in one go: raw 64-byte images, decoded one at a time.
pub(crate) type FetchBuffer = [[u8; 64]; FETCH_BATCH];

/// Host I/O counted for the SMART / Health log, and media I/O for the OCP
/// extended one, kept per submission queue so the I/O path touches no
/// shared counter.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IoCounters {
    /// Reads completed successfully.
    pub read_commands: u64,
    /// Writes, Zone Appends, Write Zeroes and Copies completed successfully.
    pub write_commands: u64,
    /// Bytes of data read (Read).
    pub bytes_read: u64,
    /// Bytes of data written (Write, Zone Append).
    pub bytes_written: u64,
    /// Bytes commands programmed into the media of namespaces without a
    /// device-side FTL (Write, Zone Append, Copy; Write Zeroes deallocates
    /// instead). A conventional twin's firmware counts its own.
    pub media_bytes_written: u64,
    /// Bytes commands read from the media (Read, Copy sources); a
    /// conventional twin's garbage collection reads are its firmware's.
    pub media_bytes_read: u64,
}

impl IoCounters {
    /// Adds `other` into these counters.
    pub fn add(&mut self, other: &IoCounters) {
        self.read_commands += other.read_commands;
        self.write_commands += other.write_commands;
        self.bytes_read += other.bytes_read;
        self.bytes_written += other.bytes_written;
        self.media_bytes_written += other.media_bytes_written;
        self.media_bytes_read += other.media_bytes_read;
    }
}

/// A submission queue: the controller consumes entries from `head` to the
/// tail the host last wrote to the doorbell.
#[derive(Debug)]
pub(crate) struct SubmissionQueue {
    pub base: u64,
    pub size: u32,
    pub head: u32,
    pub tail: u32,
    pub cqid: u16,
    /// Staging buffer for data moving between host memory and media, sized to
    /// the largest transfer (MDTS); allocated once when the queue is created.
    pub bounce: Vec<u8>,
    /// Entries fetched and not yet run, as their raw images.
    pub fetched: Box<FetchBuffer>,
    /// Host I/O completed through this queue.
    pub counters: IoCounters,
}

impl SubmissionQueue {
    pub fn new(base: u64, size: u32, cqid: u16, max_transfer: usize) -> Self {
        SubmissionQueue {
            base,
            size,
            head: 0,
            tail: 0,
            cqid,
            bounce: vec![0; max_transfer],
            fetched: Box::new([[0; 64]; FETCH_BATCH]),
            counters: IoCounters::default(),
        }
    }

    /// Entries between `head` and `tail`.
    pub fn pending(&self) -> u32 {
        (self.tail + self.size - self.head) % self.size
    }

    /// Copies the entries from `head` on into `fetched` with one host-memory
    /// read: at most [`FETCH_BATCH`], and no further than the end of the
    /// ring (the rest of a wrapped span comes with the next call). Does not
    /// advance `head`; the caller does, entry by entry, as each completes.
    /// Returns how many entries were fetched (0 when the queue is empty).
    ///
    /// Should the span be unreadable, only the entry at `head` is tried, so
    /// entries before a bad spot are still fetched one by one; the error is
    /// returned when that entry itself cannot be read.
    pub fn fetch(&mut self, host: &dyn HostMemory) -> Result<usize, DmaError> {
        let n = (self.pending().min(self.size - self.head) as usize).min(FETCH_BATCH);
        if n == 0 {
            return Ok(0);
        }
        let addr = self.base + self.head as u64 * 64;
        if host.read(addr, self.fetched[..n].as_flattened_mut()).is_ok() {
            return Ok(n);
        }
        host.read(addr, &mut self.fetched[0]).map(|_| 1)
    }

    /// Moves `head` past one consumed entry.
    pub fn advance(&mut self) {
        self.head = (self.head + 1) % self.size;
    }

    /// Decodes fetched entry `i`.
    pub fn entry(&self, i: usize) -> SubmissionEntry {
        SubmissionEntry::from_bytes(&self.fetched[i])
    }
}

/// A completion queue: the controller posts at `tail`; the host consumes and
/// reports its `head` through the doorbell.
#[derive(Debug)]
pub(crate) struct CompletionQueue {
    pub base: u64,
    pub size: u32,
    pub head: u32,
    pub tail: u32,
    pub phase: bool,
    /// Completions produced while the ring was full, posted in order as the
    /// host frees slots. A real controller would stop fetching instead; the
    /// effect seen by the host (no entry lost, order kept) is the same.
    pub waiting: VecDeque<CompletionEntry>,
    /// Submission queues bound to this completion queue.
    pub bound_sqs: u32,
}

impl CompletionQueue {
    pub fn new(base: u64, size: u32) -> Self {
        CompletionQueue {
            base,
            size,
            head: 0,
            tail: 0,
            phase: true,
            waiting: VecDeque::with_capacity(size as usize),
            bound_sqs: 0,
        }
    }

    /// Free slots: one is always left empty, so a full ring is told apart
    /// from an empty one.
    fn room(&self) -> usize {
        ((self.head + self.size - self.tail - 1) % self.size) as usize
    }

    /// Posts `entry` (its phase bit is set here) or keeps it for later.
    #[cfg(test)]
    pub fn post(&mut self, host: &dyn HostMemory, entry: CompletionEntry) {
        self.post_all(host, &[entry]);
    }

    /// Posts `entries` in order (phase bits are set here); those that find
    /// no room, or arrive while older ones wait, wait for the host to free
    /// slots.
    pub fn post_all(&mut self, host: &dyn HostMemory, entries: &[CompletionEntry]) {
        let now = if self.waiting.is_empty() { entries.len().min(self.room()) } else { 0 };
        self.write_slots(host, entries[..now].iter().copied());
        if now < entries.len() {
            self.waiting.extend(&entries[now..]);
        }
    }

    /// True when the host has consumed every completion posted (its head
    /// doorbell caught up with the tail) and none waits for room.
    pub fn all_consumed(&self) -> bool {
        self.head == self.tail && self.waiting.is_empty()
    }

    /// Moves waiting completions into freed slots after a head doorbell.
    pub fn drain_waiting(&mut self, host: &dyn HostMemory) {
        let n = self.waiting.len().min(self.room());
        if n == 0 {
            return;
        }
        let mut ready = std::mem::take(&mut self.waiting);
        self.write_slots(host, ready.drain(..n));
        self.waiting = ready;
    }

    /// Writes entries at `tail` on, advancing `tail` and the phase. There
    /// must be room for all of them.
    fn write_slots(
        &mut self,
        host: &dyn HostMemory,
        entries: impl ExactSizeIterator<Item = CompletionEntry>,
    ) {
        if entries.len() == 0 {
            return;
        }
        let ring_bytes = self.size as usize * 16;
        let mut entries = Some(entries);
        // One look-up for the whole ring, then plain stores into it.
        // SAFETY: the closure writes only through the window it is given.
        let lent = unsafe {
            host.with_mut(self.base, ring_bytes, &mut |ring| {
                for entry in entries.take().into_iter().flatten() {
                    let slot = self.tail as usize * 16;
                    store_entry(&mut ring[slot..slot + 16], self.stamp(entry));
                    self.advance();
                }
            })
        };
        if lent.is_err() {
            // The ring is not wholly inside host memory (the host freed or
            // shrank it under us): write slot by slot; an entry whose slot
            // cannot be written is lost, as on a real bus error.
            for entry in entries.take().into_iter().flatten() {
                let bytes = self.stamp(entry);
                let addr = self.base + self.tail as u64 * 16;
                if host.write(addr, &bytes[..14]).is_ok() {
                    fence(Ordering::Release);
                    let _ = host.write(addr + 14, &bytes[14..]);
                }
                self.advance();
            }
        }
    }

    /// The wire image of `entry` with the current phase tag.
    fn stamp(&self, mut entry: CompletionEntry) -> [u8; 16] {
        entry.status = (entry.status & !1) | self.phase as u16;
        entry.to_bytes()
    }

    fn advance(&mut self) {
        self.tail += 1;
        if self.tail == self.size {
            self.tail = 0;
            self.phase = !self.phase;
        }
    }
}

/// Writes one completion entry into its slot. The status word (with the
/// phase tag) goes last, after a release fence, so a host polling the phase
/// never sees a half-written entry.
#[inline]
fn store_entry(slot: &mut [u8], bytes: [u8; 16]) {
    slot[..14].copy_from_slice(&bytes[..14]);
    fence(Ordering::Release);
    let status = &mut slot[14..16];
    if (status.as_ptr() as usize).is_multiple_of(std::mem::align_of::<AtomicU16>()) {
        // SAFETY: the pointer is valid for two bytes (a slice of the window)
        // and aligned for `AtomicU16`; on this thread nothing else accesses
        // those bytes while the reference lives.
        let word = unsafe { AtomicU16::from_ptr(status.as_mut_ptr().cast()) };
        word.store(u16::from_ne_bytes([bytes[14], bytes[15]]), Ordering::Relaxed);
    } else {
        status.copy_from_slice(&bytes[14..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::ProcessMemory;

    fn read_slot(mem: &ProcessMemory, base: u64, i: u64) -> CompletionEntry {
        let mut b = [0u8; 16];
        mem.read(base + i * 16, &mut b).unwrap();
        CompletionEntry::from_bytes(&b)
    }

    #[test]
    fn completions_wait_for_room_and_keep_order() {
        let mem = ProcessMemory::new();
        let ring = mem.allocate(4 * 16, 4096).unwrap();
        let mut cq = CompletionQueue::new(ring.addr(), 4);
        let e = |cid| CompletionEntry { cid, ..Default::default() };
        cq.post_all(&*mem, &[e(1), e(2), e(3), e(4), e(5)]);
        // Three slots (one stays empty), two waiting.
        assert_eq!((cq.tail, cq.waiting.len()), (3, 2));
        for i in 0..3 {
            let c = read_slot(&mem, ring.addr(), i);
            assert_eq!((c.cid, c.status & 1), (i as u16 + 1, 1));
        }
        cq.post(&*mem, e(6));
        assert_eq!(cq.waiting.len(), 3, "a newer entry never overtakes waiting ones");
        cq.head = 2;
        cq.drain_waiting(&*mem);
        assert_eq!((cq.tail, cq.phase, cq.waiting.len()), (1, false, 1));
        let c = read_slot(&mem, ring.addr(), 3);
        assert_eq!((c.cid, c.status & 1), (4, 1));
        let c = read_slot(&mem, ring.addr(), 0);
        assert_eq!((c.cid, c.status & 1), (5, 0), "phase flips at the wrap");
        cq.head = 1;
        cq.drain_waiting(&*mem);
        assert_eq!((cq.tail, cq.waiting.len()), (2, 0));
        assert_eq!(read_slot(&mem, ring.addr(), 1).cid, 6);
    }

    #[test]
    fn ring_outside_host_memory_loses_entries_quietly() {
        let mem = ProcessMemory::new();
        let ring = mem.allocate(4096, 4096).unwrap();
        // A 512-entry ring whose second half lies past the allocation.
        let mut cq = CompletionQueue::new(ring.addr() + 2048, 512);
        let e = |cid| CompletionEntry { cid, ..Default::default() };
        cq.post_all(&*mem, &[e(1), e(2)]);
        assert_eq!(cq.tail, 2);
        assert_eq!(read_slot(&mem, ring.addr() + 2048, 1).cid, 2);
        cq.tail = 200;
        cq.post_all(&*mem, &[e(3)]);
        assert_eq!(cq.tail, 201);
    }

    #[test]
    fn fetch_stops_at_the_ring_end_and_at_bad_memory() {
        let mem = ProcessMemory::new();
        let ring = mem.allocate(8 * 64, 4096).unwrap();
        for i in 0..8u8 {
            mem.write(ring.addr() + i as u64 * 64, &[i; 64]).unwrap();
        }
        let mut sq = SubmissionQueue::new(ring.addr(), 8, 1, 4096);
        sq.head = 5;
        sq.tail = 2;
        assert_eq!(sq.pending(), 5);
        assert_eq!(sq.fetch(&*mem).unwrap(), 3);
        assert_eq!((sq.fetched[0][0], sq.fetched[2][0]), (5, 7));
        for _ in 0..3 {
            sq.advance();
        }
        assert_eq!(sq.fetch(&*mem).unwrap(), 2);
        assert_eq!(sq.fetched[1][0], 1);
        // A ring reaching past host memory: entries inside still come, one
        // at a time; the first outside one is an error.
        let mut sq = SubmissionQueue::new(ring.addr() + 6 * 64, 4, 1, 4096);
        sq.tail = 3;
        assert_eq!(sq.fetch(&*mem).unwrap(), 1);
        sq.advance();
        assert_eq!(sq.fetch(&*mem).unwrap(), 1);
        sq.advance();
        assert!(sq.fetch(&*mem).is_err());
    }
}
