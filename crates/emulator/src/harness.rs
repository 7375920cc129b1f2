//! A minimal synchronous host for the emulator: admin and I/O queues in
//! [`ProcessMemory`], raw submission entries in, completion entries out.
//!
//! It exists for the emulator's own conformance tests, its fuzz target, its
//! randomized soak test and its throughput benchmark, which must exercise the
//! controller through real queues without depending on the driver crate. It
//! is not a driver: no PRP lists beyond what a test builds, no recovery.
//!
//! On a timed controller a completion comes when the controller's clock
//! reaches it: [`Harness::io`] polls until then (at once on the virtual
//! clock, whose polls move time), and [`RawQueue::reap`] may return
//! nothing while commands are outstanding.

use std::sync::Arc;

use zns_spec::regs::{self, Aqa, Cc};
use zns_spec::{CompletionEntry, SubmissionEntry};

use crate::controller::{Controller, PAGE_SIZE};
use crate::host::{DmaAllocation, HostMemory, ProcessMemory};

/// Errors bringing the controller up.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// The controller did not become ready (CSTS.CFS set or RDY clear).
    #[error("controller did not become ready (CSTS = {0:#x})")]
    NotReady(u32),
    /// A setup command failed.
    #[error("setup command failed: {0}")]
    Command(zns_spec::Status),
    /// Host memory could not be allocated.
    #[error("out of host memory")]
    NoMemory,
}

/// One queue pair of the harness.
#[derive(Debug)]
pub struct RawQueue {
    qid: u16,
    sq: DmaAllocation,
    cq: DmaAllocation,
    entries: u32,
    tail: u32,
    head: u32,
    phase: bool,
    next_cid: u16,
}

impl RawQueue {
    fn new(memory: &Arc<ProcessMemory>, qid: u16, entries: u32) -> Result<Self, HarnessError> {
        let sq = memory.allocate(entries as usize * 64, PAGE_SIZE).ok_or(HarnessError::NoMemory)?;
        let cq = memory.allocate(entries as usize * 16, PAGE_SIZE).ok_or(HarnessError::NoMemory)?;
        Ok(RawQueue { qid, sq, cq, entries, tail: 0, head: 0, phase: true, next_cid: 0 })
    }

    /// Queue identifier.
    pub fn qid(&self) -> u16 {
        self.qid
    }

    /// Writes `sqe` (with a fresh CID) at the tail without ringing; returns the CID.
    pub fn push(&mut self, memory: &ProcessMemory, mut sqe: SubmissionEntry) -> u16 {
        let cid = self.next_cid;
        self.next_cid = self.next_cid.wrapping_add(1);
        sqe.set_cid(cid);
        memory
            .write(self.sq.addr() + self.tail as u64 * 64, &sqe.to_bytes())
            .expect("SQ slot lies in the SQ allocation");
        self.tail = (self.tail + 1) % self.entries;
        cid
    }

    /// Rings the SQ tail doorbell.
    pub fn ring(&self, ctrl: &Controller) {
        ctrl.mmio_write32(regs::sq_tail_doorbell(self.qid, 0), self.tail);
    }

    /// Takes the next completion if one is posted, and rings the CQ head doorbell.
    pub fn reap(&mut self, ctrl: &Controller, memory: &ProcessMemory) -> Option<CompletionEntry> {
        ctrl.poll(self.qid);
        let mut b = [0u8; 16];
        memory.read(self.cq.addr() + self.head as u64 * 16, &mut b).expect("CQ slot");
        let e = CompletionEntry::from_bytes(&b);
        if e.phase() != self.phase {
            return None;
        }
        self.head += 1;
        if self.head == self.entries {
            self.head = 0;
            self.phase = !self.phase;
        }
        ctrl.mmio_write32(regs::cq_head_doorbell(self.qid, 0), self.head);
        Some(e)
    }
}

/// A synchronous host attached to one controller.
#[derive(Debug)]
pub struct Harness {
    /// The controller.
    pub ctrl: Arc<Controller>,
    /// Host memory shared with the controller.
    pub memory: Arc<ProcessMemory>,
    /// Admin queue pair.
    pub admin: RawQueue,
    /// I/O queue pair 1.
    pub io: RawQueue,
    /// Identifier the next [`Harness::add_queue`] takes.
    next_qid: u16,
}

impl Harness {
    /// Enables the controller with all I/O command sets and creates one I/O
    /// queue pair of `entries` entries.
    pub fn start(
        ctrl: Arc<Controller>,
        memory: Arc<ProcessMemory>,
        entries: u32,
    ) -> Result<Harness, HarnessError> {
        let admin = RawQueue::new(&memory, 0, 32)?;
        ctrl.mmio_write32(regs::offset::CC, 0);
        ctrl.mmio_write32(regs::offset::AQA, Aqa(0).with_asqs(31).with_acqs(31).0);
        ctrl.mmio_write64(regs::offset::ASQ, admin.sq.addr());
        ctrl.mmio_write64(regs::offset::ACQ, admin.cq.addr());
        let cc = Cc(0).with_en(true).with_css(Cc::CSS_ALL_IO_SETS).with_iosqes(6).with_iocqes(4);
        ctrl.mmio_write32(regs::offset::CC, cc.0);
        let csts = ctrl.mmio_read32(regs::offset::CSTS);
        if csts & 1 == 0 {
            return Err(HarnessError::NotReady(csts));
        }
        let io = RawQueue::new(&memory, 1, entries)?;
        let mut h = Harness { ctrl, memory, admin, io, next_qid: 1 };
        let (cq, sq) = (h.io.cq.addr(), h.io.sq.addr());
        h.create_pair(1, cq, sq, entries)?;
        h.next_qid = 2;
        Ok(h)
    }

    fn create_pair(
        &mut self,
        qid: u16,
        cq: u64,
        sq: u64,
        entries: u32,
    ) -> Result<(), HarnessError> {
        let mut c = SubmissionEntry::new(0x05, 0);
        c.prp1 = cq;
        c.cdw10 = qid as u32 | ((entries - 1) << 16);
        c.cdw11 = 1;
        self.admin_command(c)?;
        let mut s = SubmissionEntry::new(0x01, 0);
        s.prp1 = sq;
        s.cdw10 = qid as u32 | ((entries - 1) << 16);
        s.cdw11 = 1 | ((qid as u32) << 16);
        self.admin_command(s)?;
        Ok(())
    }

    /// Creates one more I/O queue pair of `entries` entries (queue 2, 3,
    /// ...), driven like [`Harness::io`] through [`RawQueue`]'s methods.
    pub fn add_queue(&mut self, entries: u32) -> Result<RawQueue, HarnessError> {
        let qid = self.next_qid;
        let q = RawQueue::new(&self.memory, qid, entries)?;
        self.create_pair(qid, q.cq.addr(), q.sq.addr(), entries)?;
        self.next_qid += 1;
        Ok(q)
    }

    fn admin_command(&mut self, sqe: SubmissionEntry) -> Result<CompletionEntry, HarnessError> {
        let e = self.admin(sqe);
        if e.status().is_success() {
            Ok(e)
        } else {
            Err(HarnessError::Command(e.status()))
        }
    }

    /// Runs one admin command to completion.
    pub fn admin(&mut self, sqe: SubmissionEntry) -> CompletionEntry {
        self.admin.push(&self.memory, sqe);
        self.admin.ring(&self.ctrl);
        self.admin.reap(&self.ctrl, &self.memory).expect("the emulator completes synchronously")
    }

    /// Runs one I/O command to completion, polling until its time comes
    /// on a timed controller.
    pub fn io(&mut self, sqe: SubmissionEntry) -> CompletionEntry {
        self.io.push(&self.memory, sqe);
        self.io.ring(&self.ctrl);
        loop {
            if let Some(e) = self.io.reap(&self.ctrl, &self.memory) {
                return e;
            }
            std::hint::spin_loop();
        }
    }

    /// Allocates host memory for data.
    pub fn buffer(&self, len: usize) -> DmaAllocation {
        self.memory.allocate(len, PAGE_SIZE).expect("host memory")
    }
}
