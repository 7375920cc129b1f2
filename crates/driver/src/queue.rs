//! Queue pairs: one submission queue and its completion queue, owned by one
//! thread.
//!
//! Submitting writes an entry into the SQ ring and nothing else; [`QueuePair::ring`]
//! publishes every entry written since the last ring with one doorbell write.
//! Polling consumes completion entries by phase tag, delivers each one to
//! its own request (CID → tracker), learns the SQ head from the entries and
//! writes the CQ head doorbell once per batch. Command identifiers index a
//! preallocated tracker table; each tracker owns PRP list pages, so the
//! submit and poll paths take no lock, allocate nothing and make no system
//! call.

use std::cell::Cell;
use std::collections::VecDeque;
use std::marker::PhantomData;
use std::sync::atomic::{fence, AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zns_spec::regs::{self, Cc, Csts};
use zns_spec::{CompletionEntry, Status, StatusField, SubmissionEntry};

use crate::dma::{DmaBuffer, DmaSlice};
use crate::error::{Error, NvmeError, Result};
use crate::prp::{self, ListArea, PrpPair};
use crate::ring::{CqRing, SqRing};
use crate::transport::Transport;

/// Bytes of the per-queue scratch buffer: 256 Copy source ranges, or the
/// largest zone descriptor extension (255 × 64 bytes).
const SCRATCH_BYTES: usize = 16 << 10;

/// The MPTR of a separate metadata buffer: its bus address, after checking
/// that the controller can reach it as one contiguous, dword-aligned run.
fn metadata_pointer(meta: &DmaSlice<'_>) -> Result<u64> {
    let addr = meta.bus_addr(0);
    if addr & 3 != 0 {
        return Err(Error::Misaligned { addr });
    }
    if meta.memory().contiguous_len(meta.offset()) < meta.len() {
        return Err(Error::InvalidArgument(format!(
            "a metadata buffer of {} bytes is not physically contiguous",
            meta.len()
        )));
    }
    Ok(addr)
}

/// A command identifier, unique among a queue's outstanding commands.
pub type Cid = u16;

/// The completion of one command, delivered by [`QueuePair::poll`].
///
/// Thread safety: `Send + Sync` (plain data and an owned buffer).
#[derive(Debug)]
pub struct Completion {
    /// The tag given at submission.
    pub tag: u64,
    /// The command identifier the command ran under.
    pub cid: Cid,
    /// Queue the command ran on.
    pub qid: u16,
    /// Opcode of the command.
    pub opcode: u8,
    /// Status Code Type and Status Code.
    pub status: Status,
    /// The whole status field (More, Do Not Retry, ...).
    pub field: StatusField,
    /// DW0 and DW1 (Zone Append: the LBA the data landed at).
    pub result: u64,
    /// The buffer of an owned submission, handed back.
    pub buffer: Option<DmaBuffer>,
    /// The metadata buffer of an owned submission with metadata
    /// ([`QueuePair::submit_owned_with_metadata`]), handed back.
    pub metadata: Option<DmaBuffer>,
}

impl Completion {
    /// True for Successful Completion.
    pub fn is_success(&self) -> bool {
        self.status.is_success()
    }

    /// The error this completion reports, if any.
    pub fn error(&self) -> Option<NvmeError> {
        (!self.status.is_success()).then_some(NvmeError {
            status: self.status,
            field: self.field,
            opcode: self.opcode,
            qid: self.qid,
        })
    }

    /// The result dwords (DW1:DW0), or the error status as [`Error::Nvme`].
    pub fn check(&self) -> Result<u64> {
        match self.error() {
            None => Ok(self.result),
            Some(e) => Err(e.into()),
        }
    }
}

/// An owned submission that was refused; the buffer comes back.
///
/// Thread safety: `Send + Sync`.
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct Rejected {
    /// Why (often [`Error::QueueFull`]).
    pub error: Error,
    /// The buffer that was to be transferred.
    pub buffer: DmaBuffer,
    /// The metadata buffer that was to be transferred, if any (boxed:
    /// the error travels by value on every refused submission).
    pub metadata: Option<Box<DmaBuffer>>,
}

/// Shape of a queue pair.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueConfig {
    /// Entries in each ring; at most `depth - 1` commands are outstanding.
    pub depth: u16,
    /// Largest data transfer in bytes (capped at the controller's MDTS);
    /// sizes the per-command PRP list pages.
    pub max_transfer: usize,
    /// How long the blocking helpers wait for a completion.
    pub timeout: Duration,
}

impl QueueConfig {
    /// `depth` entries, the controller's largest transfer, 30 s timeout.
    pub fn new(depth: u16) -> Self {
        QueueConfig { depth, max_transfer: usize::MAX, timeout: Duration::from_secs(30) }
    }
}

/// The controller works.
const HEALTHY: u8 = 0;
/// The controller is being stopped (reset or shutdown): no new commands.
const STOPPING: u8 = 1;
/// The controller is stopped: it no longer accesses host memory (or did
/// not acknowledge the stop, and nothing more can be done).
const STOPPED: u8 = 2;

/// Controller-wide state every queue consults: whether the controller may
/// take commands, and how to stop it when a command never completes.
///
/// Thread safety: `Send + Sync` (an atomic state and the transport).
#[derive(Debug)]
pub(crate) struct Health {
    state: AtomicU8,
    /// Set before a stop that is a deliberate reset, so queues report it.
    reset: AtomicBool,
    transport: Arc<dyn Transport>,
    ready_timeout: Duration,
}

impl Health {
    pub(crate) fn new(transport: Arc<dyn Transport>, ready_timeout: Duration) -> Arc<Self> {
        Arc::new(Health {
            state: AtomicU8::new(HEALTHY),
            reset: AtomicBool::new(false),
            transport,
            ready_timeout,
        })
    }

    /// True once a stop began: new commands are refused.
    #[inline]
    pub(crate) fn failed(&self) -> bool {
        self.state.load(Ordering::Acquire) != HEALTHY
    }

    /// The error for a command refused after a stop: a reset, or a failure
    /// or shutdown.
    pub(crate) fn error(&self) -> Error {
        if self.reset.load(Ordering::Acquire) {
            Error::ControllerReset
        } else {
            Error::ControllerFailed
        }
    }

    /// Marks the coming stop as a deliberate reset (see [`Health::error`]).
    pub(crate) fn mark_reset(&self) {
        self.reset.store(true, Ordering::Release);
    }

    /// True once the controller is stopped: waiting for completions is over.
    #[inline]
    pub(crate) fn stopped(&self) -> bool {
        self.state.load(Ordering::Acquire) == STOPPED
    }

    /// Runs `stop` (which must leave the controller doing no more DMA) if no
    /// stop began yet; otherwise waits until the other stop finished. Either
    /// way the controller is stopped on return.
    pub(crate) fn stop_with(&self, stop: impl FnOnce()) {
        if self
            .state
            .compare_exchange(HEALTHY, STOPPING, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            stop();
            self.state.store(STOPPED, Ordering::Release);
            return;
        }
        while !self.stopped() {
            std::thread::yield_now();
        }
    }

    /// A command did not complete in time: reset the controller (CC.EN = 0)
    /// so it stops all DMA into buffers the timed-out commands still name,
    /// and make every queue unusable.
    pub(crate) fn fail_and_reset(&self) {
        self.stop_with(|| {
            tracing::error!("command timeout: resetting the controller to stop its DMA");
            let t = &self.transport;
            let cc = Cc(t.read32(regs::offset::CC));
            t.write32(regs::offset::CC, cc.with_en(false).0);
            let start = Instant::now();
            while Csts(t.read32(regs::offset::CSTS)).rdy() {
                if start.elapsed() > self.ready_timeout {
                    tracing::error!("controller did not acknowledge the reset");
                    return;
                }
                std::thread::yield_now();
            }
        });
    }
}

/// Deletes a queue pair at the controller when the pair drops.
pub(crate) trait QueueOwner: Send + Sync {
    /// Deletes SQ and CQ `qid`; false when the controller may still use
    /// their memory.
    fn delete_queue_pair(&self, qid: u16) -> bool;
}

/// Everything a queue pair needs to know about its controller.
#[derive(Clone)]
pub(crate) struct QueueSetup {
    pub(crate) transport: Arc<dyn Transport>,
    pub(crate) qid: u16,
    pub(crate) config: QueueConfig,
    pub(crate) page_size: usize,
    pub(crate) dstrd: u8,
    pub(crate) health: Arc<Health>,
}

#[derive(Debug, Default)]
struct Tracker {
    busy: bool,
    opcode: u8,
    tag: u64,
    buffer: Option<DmaBuffer>,
    metadata: Option<DmaBuffer>,
}

/// A submission queue and its completion queue.
///
/// Thread safety: `Send` but not `Sync`: one thread owns it and submits,
/// rings and polls; move it to hand it to another thread.
pub struct QueuePair {
    qid: u16,
    transport: Arc<dyn Transport>,
    health: Arc<Health>,
    sq: SqRing,
    cq: CqRing,
    depth: u16,
    sq_tail: u16,
    sq_rung: u16,
    sq_head: u16,
    cq_head: u16,
    phase: bool,
    sq_doorbell: u32,
    cq_doorbell: u32,
    trackers: Box<[Tracker]>,
    free: Vec<Cid>,
    lists: Option<DmaBuffer>,
    list_bus: Box<[u64]>,
    list_pages: usize,
    page_size: usize,
    max_transfer: usize,
    timeout: Duration,
    deferred: VecDeque<Completion>,
    scratch: Option<DmaBuffer>,
    owner: Option<Arc<dyn QueueOwner>>,
    _not_sync: PhantomData<Cell<()>>,
}

impl std::fmt::Debug for QueuePair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueuePair")
            .field("qid", &self.qid)
            .field("depth", &self.depth)
            .field("outstanding", &self.outstanding())
            .field("sq_tail", &self.sq_tail)
            .field("sq_head", &self.sq_head)
            .field("cq_head", &self.cq_head)
            .finish_non_exhaustive()
    }
}

fn contiguous(mem: &crate::dma::DmaMemory, need: usize, what: &str) -> Result<()> {
    if mem.contiguous_len(0) < need {
        return Err(Error::Unsupported(format!(
            "{what} of {need} bytes is not contiguous on the bus; use a smaller queue depth"
        )));
    }
    Ok(())
}

impl QueuePair {
    /// Allocates the rings, trackers and PRP list pages of a queue pair. The
    /// controller learns about it separately (admin registers or Create I/O
    /// queue commands).
    pub(crate) fn allocate(setup: &QueueSetup) -> Result<Self> {
        let QueueSetup { transport, qid, config, page_size, dstrd, health } = setup.clone();
        let depth = config.depth;
        if depth < 2 {
            return Err(Error::InvalidArgument(format!("queue depth {depth} (minimum 2)")));
        }
        let sq_bytes = depth as usize * SubmissionEntry::SIZE;
        let cq_bytes = depth as usize * CompletionEntry::SIZE;
        let sq_mem = transport.allocate_dma(sq_bytes.next_multiple_of(page_size))?;
        contiguous(&sq_mem, sq_bytes, "submission queue")?;
        let cq_mem = transport.allocate_dma(cq_bytes.next_multiple_of(page_size))?;
        contiguous(&cq_mem, cq_bytes, "completion queue")?;
        let trackers = depth as usize - 1;
        let list_pages = prp::list_pages_needed(config.max_transfer, page_size);
        let (lists, list_bus) = if list_pages == 0 {
            (None, Box::default())
        } else {
            let b = DmaBuffer::allocate(transport.as_ref(), trackers * list_pages * page_size)?;
            let bus = (0..trackers * list_pages).map(|i| b.bus_addr(i * page_size)).collect();
            (Some(b), bus)
        };
        let scratch = Some(DmaBuffer::allocate(transport.as_ref(), SCRATCH_BYTES)?);
        Ok(QueuePair {
            qid,
            sq_doorbell: regs::sq_tail_doorbell(qid, dstrd),
            cq_doorbell: regs::cq_head_doorbell(qid, dstrd),
            transport,
            health,
            sq: SqRing::new(sq_mem, depth)?,
            cq: CqRing::new(cq_mem, depth)?,
            depth,
            sq_tail: 0,
            sq_rung: 0,
            sq_head: 0,
            cq_head: 0,
            phase: true,
            trackers: (0..trackers).map(|_| Tracker::default()).collect(),
            free: (0..trackers as Cid).rev().collect(),
            lists,
            list_bus,
            list_pages,
            page_size,
            max_transfer: config.max_transfer.min(prp::max_transfer(list_pages, page_size)),
            timeout: config.timeout,
            deferred: VecDeque::with_capacity(trackers),
            scratch,
            owner: None,
            _not_sync: PhantomData,
        })
    }

    /// Sets who deletes the queues at the controller on drop.
    pub(crate) fn set_owner(&mut self, owner: Arc<dyn QueueOwner>) {
        self.owner = Some(owner);
    }

    /// Bus address of the SQ ring.
    pub(crate) fn sq_bus_addr(&self) -> u64 {
        self.sq.memory().bus_addr(0)
    }

    /// Bus address of the CQ ring.
    pub(crate) fn cq_bus_addr(&self) -> u64 {
        self.cq.memory().bus_addr(0)
    }

    /// Queue identifier (0 = admin).
    pub fn qid(&self) -> u16 {
        self.qid
    }

    /// Entries per ring.
    pub fn depth(&self) -> u16 {
        self.depth
    }

    /// Most commands outstanding at once (`depth - 1`).
    pub fn capacity(&self) -> usize {
        self.trackers.len()
    }

    /// Commands submitted and not yet delivered by [`QueuePair::poll`].
    pub fn outstanding(&self) -> usize {
        self.trackers.len() - self.free.len() + self.deferred.len()
    }

    /// Largest data transfer one command may carry, in bytes.
    pub fn max_transfer(&self) -> usize {
        self.max_transfer
    }

    /// Controller memory page size the PRPs are built for.
    pub fn page_size(&self) -> usize {
        self.page_size
    }

    /// Timeout of the blocking helpers.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Changes the timeout of the blocking helpers.
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    #[inline]
    fn next(&self, i: u16) -> u16 {
        if i + 1 == self.depth {
            0
        } else {
            i + 1
        }
    }

    /// SQ slots free for new entries, as of the last SQ head the controller
    /// reported.
    #[inline]
    pub fn free_sq_slots(&self) -> usize {
        let used = (self.sq_tail as usize + self.depth as usize - self.sq_head as usize)
            % self.depth as usize;
        self.depth as usize - 1 - used
    }

    /// True when a submission now would be refused with [`Error::QueueFull`].
    #[inline]
    pub fn is_full(&self) -> bool {
        self.free.is_empty() || self.free_sq_slots() == 0
    }

    /// Builds the PRPs of `data` in tracker `cid`'s list pages.
    #[inline]
    fn build_prps(&mut self, cid: Cid, data: &DmaSlice<'_>) -> Result<PrpPair> {
        if data.len() > self.max_transfer {
            return Err(Error::TransferTooLarge { len: data.len(), max: self.max_transfer });
        }
        let area = match &mut self.lists {
            None => None,
            Some(lists) => {
                let k = self.list_pages;
                let first = cid as usize * k;
                let bytes =
                    &mut lists.as_mut_slice()[first * self.page_size..(first + k) * self.page_size];
                Some(ListArea::new(bytes, &self.list_bus[first..first + k]))
            }
        };
        prp::build(data, self.page_size, area)
    }

    /// Picks the CID for the next submission without taking it.
    #[inline]
    fn reserve(&self) -> Result<Cid> {
        if self.health.failed() {
            return Err(self.health.error());
        }
        match self.free.last() {
            Some(&cid) if self.free_sq_slots() > 0 => Ok(cid),
            _ => Err(Error::QueueFull { qid: self.qid }),
        }
    }

    /// Writes the SQ entry of a reserved CID and arms its tracker.
    #[inline]
    fn commit(
        &mut self,
        cid: Cid,
        mut cmd: SubmissionEntry,
        prp: Option<PrpPair>,
        tag: u64,
        buffer: Option<DmaBuffer>,
    ) {
        let taken = self.free.pop();
        debug_assert_eq!(taken, Some(cid));
        cmd.set_cid(cid);
        cmd.cdw0 &= !(3 << 14); // PSDT = 00b: PRPs
        if let Some(prp) = prp {
            cmd.prp1 = prp.prp1;
            cmd.prp2 = prp.prp2;
        }
        self.sq.write(self.sq_tail, &cmd);
        self.sq_tail = self.next(self.sq_tail);
        let t = &mut self.trackers[cid as usize];
        t.busy = true;
        t.opcode = cmd.opcode();
        t.tag = tag;
        t.buffer = buffer;
    }

    /// The submission path of borrowed data.
    #[inline]
    fn push(&mut self, cmd: SubmissionEntry, data: Option<&DmaSlice<'_>>, tag: u64) -> Result<Cid> {
        let cid = self.reserve()?;
        let prp = match data {
            Some(d) => self.build_prps(cid, d)?,
            None => PrpPair::default(),
        };
        self.commit(cid, cmd, Some(prp), tag, None);
        Ok(cid)
    }

    /// Queues `cmd` with `data` as its transfer; the caller's `tag` comes
    /// back in the completion. Writes the SQ entry only: call
    /// [`QueuePair::ring`] to hand the batch to the controller. The CID and
    /// PRP fields of `cmd` are filled in here.
    ///
    /// Fails with [`Error::QueueFull`] when no SQ slot or CID is free (poll
    /// and retry), [`Error::TransferTooLarge`] or [`Error::Misaligned`].
    ///
    /// # Safety
    /// The memory behind `data` must stay allocated, and the host must not
    /// read or write it, until this command's completion has been delivered
    /// by [`QueuePair::poll`] or the queue pair has been dropped: the
    /// controller accesses it in between. [`QueuePair::submit_owned`] is the
    /// safe alternative.
    #[inline]
    pub unsafe fn submit(
        &mut self,
        cmd: SubmissionEntry,
        data: Option<DmaSlice<'_>>,
        tag: u64,
    ) -> Result<Cid> {
        self.push(cmd, data.as_ref(), tag)
    }

    /// Queues a command that transfers no data (PRP fields are cleared).
    #[inline]
    pub fn submit_without_data(&mut self, cmd: SubmissionEntry, tag: u64) -> Result<Cid> {
        self.push(cmd, None, tag)
    }

    /// Queues `cmd` transferring the whole of `buffer` (its current
    /// length), which the queue keeps until the completion hands it back in
    /// [`Completion::buffer`]. On refusal the buffer comes back in the error.
    #[inline]
    pub fn submit_owned(
        &mut self,
        cmd: SubmissionEntry,
        buffer: DmaBuffer,
        tag: u64,
    ) -> std::result::Result<Cid, Rejected> {
        let cid = match self.reserve() {
            Ok(cid) => cid,
            Err(error) => return Err(Rejected { error, buffer, metadata: None }),
        };
        let prp = match self.build_prps(cid, &buffer.dma()) {
            Ok(prp) => prp,
            Err(error) => return Err(Rejected { error, buffer, metadata: None }),
        };
        // The buffer moves into the tracker; its memory does not move, so
        // the PRPs stay valid until the completion hands it back.
        self.commit(cid, cmd, Some(prp), tag, Some(buffer));
        Ok(cid)
    }

    /// Like [`QueuePair::submit_owned`], with `metadata` as the command's
    /// separate per-LBA metadata (MPTR; `blocks × metadata size` bytes,
    /// physically contiguous and dword-aligned, which a DMA buffer of at
    /// most one page always is). Both buffers come back in the completion,
    /// or in the error on refusal.
    pub fn submit_owned_with_metadata(
        &mut self,
        mut cmd: SubmissionEntry,
        buffer: DmaBuffer,
        metadata: DmaBuffer,
        tag: u64,
    ) -> std::result::Result<Cid, Rejected> {
        let refuse = |error, buffer, metadata| Rejected {
            error,
            buffer,
            metadata: Some(Box::new(metadata)),
        };
        let cid = match self.reserve() {
            Ok(cid) => cid,
            Err(error) => return Err(refuse(error, buffer, metadata)),
        };
        if let Err(error) = metadata_pointer(&metadata.dma()).map(|mptr| cmd.mptr = mptr) {
            return Err(refuse(error, buffer, metadata));
        }
        let prp = match self.build_prps(cid, &buffer.dma()) {
            Ok(prp) => prp,
            Err(error) => return Err(refuse(error, buffer, metadata)),
        };
        self.commit(cid, cmd, Some(prp), tag, Some(buffer));
        self.trackers[cid as usize].metadata = Some(metadata);
        Ok(cid)
    }

    /// Like [`QueuePair::execute_raw`] for a command that fills `data` and
    /// `metadata` (a Read), with `metadata` as its separate per-LBA
    /// metadata (see [`QueuePair::submit_owned_with_metadata`]).
    pub fn execute_with_metadata_in(
        &mut self,
        mut cmd: SubmissionEntry,
        data: &mut DmaBuffer,
        metadata: &mut DmaBuffer,
    ) -> Result<Completion> {
        cmd.mptr = metadata_pointer(&metadata.dma())?;
        // Both buffers stay borrowed until the completion arrives or the
        // controller has been reset, so their memory outlives the transfer.
        self.execute_slice(cmd, Some(data.dma()))
    }

    /// Like [`QueuePair::execute_with_metadata_in`] for a command that
    /// only reads its buffers (Write, Zone Append).
    pub fn execute_with_metadata_out(
        &mut self,
        mut cmd: SubmissionEntry,
        data: &DmaBuffer,
        metadata: &DmaBuffer,
    ) -> Result<Completion> {
        cmd.mptr = metadata_pointer(&metadata.dma())?;
        self.execute_slice(cmd, Some(data.dma()))
    }

    /// Rings the SQ tail doorbell if entries were queued since the last
    /// ring: one register write per batch.
    #[inline]
    pub fn ring(&mut self) {
        if self.sq_tail != self.sq_rung {
            // Entries and PRP lists are in memory before the doorbell.
            fence(Ordering::Release);
            self.transport.write32(self.sq_doorbell, self.sq_tail as u32);
            self.sq_rung = self.sq_tail;
        }
    }

    /// Delivers up to `max` completions to `f`, each with its own status,
    /// and returns how many. Writes the CQ head doorbell once if entries
    /// were consumed. Never blocks.
    #[inline]
    pub fn poll(&mut self, max: usize, mut f: impl FnMut(Completion)) -> usize {
        let mut n = 0;
        while n < max {
            match self.deferred.pop_front() {
                Some(c) => {
                    f(c);
                    n += 1;
                }
                None => break,
            }
        }
        if n < max {
            n += self.reap(max - n, &mut f);
        }
        n
    }

    /// Consumes new completion entries.
    #[inline]
    fn reap(&mut self, max: usize, f: &mut impl FnMut(Completion)) -> usize {
        self.transport.poll(self.qid);
        let mut delivered = 0;
        let mut consumed = false;
        // At most one pass over the ring per call.
        for _ in 0..self.depth {
            if delivered == max {
                break;
            }
            let status = self.cq.status(self.cq_head);
            if (status & 1 != 0) != self.phase {
                break;
            }
            let cqe = self.cq.read(self.cq_head);
            self.cq_head = self.next(self.cq_head);
            if self.cq_head == 0 {
                self.phase = !self.phase;
            }
            consumed = true;
            if let Some(c) = self.complete(&cqe) {
                f(c);
                delivered += 1;
            }
        }
        if consumed {
            self.transport.write32(self.cq_doorbell, self.cq_head as u32);
        }
        delivered
    }

    /// Retires the tracker a completion entry names.
    #[inline]
    fn complete(&mut self, cqe: &CompletionEntry) -> Option<Completion> {
        if cqe.sq_head < self.depth {
            self.sq_head = cqe.sq_head;
        } else {
            tracing::warn!(qid = self.qid, sq_head = cqe.sq_head, "completion with bad SQ head");
        }
        let cid = cqe.cid;
        let Some(t) = self.trackers.get_mut(cid as usize).filter(|t| t.busy) else {
            tracing::warn!(qid = self.qid, cid, "completion for a command not outstanding");
            return None;
        };
        t.busy = false;
        let c = Completion {
            tag: t.tag,
            cid,
            qid: self.qid,
            opcode: t.opcode,
            status: cqe.status(),
            field: cqe.status_field(),
            result: cqe.result_u64(),
            buffer: t.buffer.take(),
            metadata: t.metadata.take(),
        };
        self.free.push(cid);
        Some(c)
    }

    /// Waits for the completion of `cid`, setting other completions aside
    /// for the next [`QueuePair::poll`]. On timeout the controller is reset
    /// (its DMA stops) and every queue becomes unusable.
    fn wait_for(&mut self, cid: Cid) -> Result<Completion> {
        // Read the clock only once the wait is long: most commands complete
        // within a few polls, and a clock read costs as much as a poll.
        let mut start: Option<Instant> = None;
        let mut spins: u32 = 0;
        loop {
            let mut found = None;
            let mut aside = std::mem::take(&mut self.deferred);
            self.reap(usize::MAX, &mut |c: Completion| {
                if c.cid == cid && found.is_none() {
                    found = Some(c);
                } else {
                    aside.push_back(c);
                }
            });
            self.deferred = aside;
            if let Some(c) = found {
                return Ok(c);
            }
            if self.health.stopped() {
                return Err(self.health.error());
            }
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(256) {
                let waited = start.get_or_insert_with(Instant::now).elapsed();
                if waited > self.timeout {
                    self.health.fail_and_reset();
                    return Err(Error::Timeout { what: "a command completion", after: waited });
                }
                if waited > Duration::from_millis(1) {
                    std::thread::yield_now();
                }
            }
            std::hint::spin_loop();
        }
    }

    /// Submits `cmd` with `data`, rings, and waits for its completion,
    /// which is returned whatever its status. Other completions arriving
    /// meanwhile are kept for [`QueuePair::poll`].
    ///
    /// Callers pass a slice the controller may access as the command
    /// implies: one it writes must not be readable elsewhere meanwhile
    /// (the public wrappers take `&mut DmaBuffer` for that).
    pub(crate) fn execute_slice(
        &mut self,
        cmd: SubmissionEntry,
        data: Option<DmaSlice<'_>>,
    ) -> Result<Completion> {
        let cid = self.push(cmd, data.as_ref(), 0)?;
        self.ring();
        // `data` stays borrowed until the completion arrives or the
        // controller has been reset, so its memory outlives the transfer.
        self.wait_for(cid)
    }

    /// Runs `cmd` with its PRP fields as built (queue creation names the
    /// queue memory in PRP1); returns the result dwords.
    pub(crate) fn execute_preset(&mut self, cmd: SubmissionEntry) -> Result<u64> {
        let cid = self.reserve()?;
        self.commit(cid, cmd, None, 0, None);
        self.ring();
        self.wait_for(cid)?.check()
    }

    /// Submits `cmd` transferring `data` (its current length, either
    /// direction), rings, and waits for the completion, which is returned
    /// whatever its status. Completions of other commands arriving
    /// meanwhile are kept for [`QueuePair::poll`]. On timeout the
    /// controller is reset so it stops using the buffer.
    pub fn execute_raw(
        &mut self,
        cmd: SubmissionEntry,
        data: Option<&mut DmaBuffer>,
    ) -> Result<Completion> {
        self.execute_slice(cmd, data.map(|b| b.dma()))
    }

    /// Like [`QueuePair::execute_raw`], turning an error status into
    /// [`Error::Nvme`]; returns the result dwords (DW1:DW0).
    pub fn execute(&mut self, cmd: SubmissionEntry, data: Option<&mut DmaBuffer>) -> Result<u64> {
        self.execute_raw(cmd, data)?.check()
    }

    /// Polls until every outstanding command has completed, delivering each
    /// completion to `f`; gives up after the queue's timeout.
    pub fn drain(&mut self, mut f: impl FnMut(Completion)) -> Result<()> {
        self.ring();
        let start = Instant::now();
        while self.outstanding() > 0 {
            if self.poll(usize::MAX, &mut f) == 0 {
                if self.health.stopped() {
                    return Err(self.health.error());
                }
                if start.elapsed() > self.timeout {
                    self.health.fail_and_reset();
                    return Err(Error::Timeout {
                        what: "outstanding commands",
                        after: start.elapsed(),
                    });
                }
                std::hint::spin_loop();
            }
        }
        Ok(())
    }

    /// Borrows the scratch buffer (Copy source ranges, zone extensions).
    pub(crate) fn take_scratch(&mut self) -> Result<DmaBuffer> {
        let mut b =
            self.scratch.take().ok_or_else(|| Error::InvalidArgument("scratch in use".into()))?;
        b.set_len(SCRATCH_BYTES)?;
        Ok(b)
    }

    /// Returns the scratch buffer.
    pub(crate) fn put_scratch(&mut self, b: DmaBuffer) {
        self.scratch = Some(b);
    }

    /// Releases the rings' memory without freeing it: after a failed
    /// deletion the controller might still access it.
    fn leak_memory(&mut self) {
        if let Some(l) = self.lists.take() {
            std::mem::forget(l);
        }
        if let Some(s) = self.scratch.take() {
            std::mem::forget(s);
        }
        for t in self.trackers.iter_mut() {
            if let Some(b) = t.buffer.take() {
                std::mem::forget(b);
            }
        }
        self.sq.leak();
        self.cq.leak();
    }
}

impl Drop for QueuePair {
    fn drop(&mut self) {
        if let Some(owner) = self.owner.take() {
            if !owner.delete_queue_pair(self.qid) {
                // The controller may still reach this queue's memory and
                // the buffers of its outstanding commands: stop it.
                self.health.fail_and_reset();
                self.leak_memory();
            }
        }
    }
}
