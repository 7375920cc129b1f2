//! Submission and completion queues as the controller sees them: rings in
//! host memory, indices, the phase tag, and completions waiting for room.

use std::collections::VecDeque;
use std::sync::atomic::{fence, Ordering};

use zns_spec::{CompletionEntry, SubmissionEntry};

use crate::host::{DmaError, HostMemory};

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
}

impl SubmissionQueue {
    pub fn new(base: u64, size: u32, cqid: u16, max_transfer: usize) -> Self {
        SubmissionQueue { base, size, head: 0, tail: 0, cqid, bounce: vec![0; max_transfer] }
    }

    /// Fetches the entry at `head` and advances it; `None` when empty.
    pub fn fetch(&mut self, host: &dyn HostMemory) -> Option<Result<SubmissionEntry, DmaError>> {
        if self.head == self.tail {
            return None;
        }
        let mut b = [0u8; 64];
        let r = host.read(self.base + self.head as u64 * 64, &mut b);
        self.head = (self.head + 1) % self.size;
        Some(r.map(|_| SubmissionEntry::from_bytes(&b)))
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

    fn is_full(&self) -> bool {
        (self.tail + 1) % self.size == self.head
    }

    /// Posts `entry` (its phase bit is set here) or keeps it for later.
    pub fn post(&mut self, host: &dyn HostMemory, entry: CompletionEntry) {
        if !self.waiting.is_empty() || self.is_full() {
            self.waiting.push_back(entry);
            return;
        }
        self.write_slot(host, entry);
    }

    /// Moves waiting completions into freed slots after a head doorbell.
    pub fn drain_waiting(&mut self, host: &dyn HostMemory) {
        while !self.is_full() {
            let Some(e) = self.waiting.pop_front() else { break };
            self.write_slot(host, e);
        }
    }

    fn write_slot(&mut self, host: &dyn HostMemory, mut entry: CompletionEntry) {
        entry.status = (entry.status & !1) | self.phase as u16;
        let bytes = entry.to_bytes();
        let addr = self.base + self.tail as u64 * 16;
        // The status word (with the phase tag) goes last, after a release
        // fence, so a host polling the phase never sees a half-written entry.
        // A failing write means the host freed the ring under us; the entry
        // is lost as it would be on a real bus error.
        if host.write(addr, &bytes[..14]).is_ok() {
            fence(Ordering::Release);
            let _ = host.write(addr + 14, &bytes[14..]);
        }
        self.tail += 1;
        if self.tail == self.size {
            self.tail = 0;
            self.phase = !self.phase;
        }
    }
}
