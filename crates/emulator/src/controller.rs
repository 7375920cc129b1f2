//! The controller: register file, doorbells, queue processing and command
//! dispatch. Commands run on the thread that rings the doorbell.
//!
//! Locking: one lock per submission queue and one per completion queue; a
//! thread processing its SQ holds that SQ's lock and, after each batch of
//! fetched entries has run, briefly the CQ's lock to post the batch's
//! completions. Order is always SQ before CQ, and the admin SQ before any I/O SQ.
//! Zone state is locked per zone below this layer. The register file has its
//! own lock, taken only by register accesses other than doorbells.
//!
//! With a timing model, I/O commands still run when their doorbell is rung
//! (their effects are visible at once, as a write buffer makes them), but
//! their completions go to the model instead of the completion queue; a
//! poll of the queue posts those whose time has come. The model's lock is
//! taken after an SQ's lock and never together with a CQ's.

use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use zns_spec::regs::{self, Aqa, Cap, Cc, Csts, Doorbell, Version};
use zns_spec::{CompletionEntry, Status, StatusCode, StatusField, SubmissionEntry};

use crate::clock::{Clock, LatenessStats};
use crate::host::HostMemory;
use crate::namespace::Namespace;
use crate::profile::Profile;
use crate::queue::{CompletionQueue, IoCounters, SubmissionQueue, FETCH_BATCH};
use crate::timing::{Op, Timing};
use crate::trace::{TraceSink, ZoneTracer};

/// Smallest and only memory page size the controller supports (CAP.MPSMIN = MPSMAX = 0).
pub const PAGE_SIZE: usize = 4096;

/// What a command produced: status and the 64-bit result for DW0/DW1.
pub(crate) type Outcome = Result<u64, Status>;

#[derive(Debug, Default)]
struct Registers {
    cc: Cc,
    csts: Csts,
    aqa: Aqa,
    asq: u64,
    acq: u64,
    intms: u32,
}

/// An emulated NVMe controller with its namespaces.
///
/// Thread safety: `Send + Sync`; share it as `Arc<Controller>`. Register and
/// doorbell accesses may come from any thread; submissions to one queue must
/// come from one thread at a time, as with real hardware.
pub struct Controller {
    pub(crate) profile: Profile,
    pub(crate) host: Arc<dyn HostMemory>,
    cap: Cap,
    regs: Mutex<Registers>,
    enabled: AtomicBool,
    /// CC.CSS latched at enable.
    pub(crate) css: AtomicU8,
    /// Selected I/O Command Set Profile index (feature 19h).
    pub(crate) iocs_index: AtomicU8,
    /// Each SQ's head as last fetched, readable without the SQ lock: a timed
    /// completion posted later reports the head at posting time, so the
    /// host's view of free SQ slots never moves backward.
    sq_heads: Box<[AtomicU16]>,
    sqs: Box<[Mutex<Option<SubmissionQueue>>]>,
    cqs: Box<[Mutex<Option<CompletionQueue>>]>,
    pub(crate) namespaces: Vec<Namespace>,
    pub(crate) admin_state: Mutex<crate::admin::AdminState>,
    /// Commands completed, for statistics.
    completed: AtomicU64,
    /// Host I/O of submission queues deleted since creation.
    retired: Mutex<IoCounters>,
    /// Power cycles, this controller's creation included (SMART log).
    pub(crate) power_cycles: AtomicU64,
    /// Power cuts: power lost without a shutdown (SMART log).
    pub(crate) unsafe_shutdowns: AtomicU64,
    /// When the controller was created, for power-on hours.
    pub(crate) created: std::time::Instant,
    /// When false, commands skip data movement (host memory and media), to
    /// measure command processing alone.
    transfer_data: AtomicBool,
    /// Volatile write cache enabled (mirror of feature 06h for the I/O path).
    pub(crate) write_cache: AtomicBool,
    /// The timing model, when the controller has one.
    timing: Option<Timing>,
    /// The controller's clock (a real one when there is no timing model).
    clock: Arc<Clock>,
    /// Trace sinks added ([`Controller::add_trace_sink`]).
    trace_sinks: Mutex<Vec<Arc<dyn TraceSink>>>,
    /// Those sinks as one, as installed ([`Controller::trace_sink`]).
    trace_combined: Mutex<Option<Arc<dyn TraceSink>>>,
}

impl std::fmt::Debug for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller").field("profile", &self.profile.name).finish_non_exhaustive()
    }
}

impl Controller {
    /// Builds a controller from a profile and its namespaces' storage.
    pub(crate) fn with_namespaces(
        profile: Profile,
        host: Arc<dyn HostMemory>,
        namespaces: Vec<Namespace>,
        timed: bool,
        clock: Clock,
    ) -> Arc<Controller> {
        let c = &profile.controller;
        let queues = c.max_io_queues as usize + 1;
        let clock = Arc::new(clock);
        let timing = match (&profile.timing, timed) {
            (Some(t), true) => {
                Some(Timing::new(t, &profile.namespaces, queues, Arc::clone(&clock)))
            }
            _ => None,
        };
        let cap = Cap(0)
            .with_mqes((c.max_queue_entries - 1) as u16)
            .with_cqr(true)
            .with_to(20)
            .with_dstrd(0)
            .with_nssrs(false)
            .with_css(Cap::CSS_NVM | Cap::CSS_IO_COMMAND_SETS | Cap::CSS_ADMIN_ONLY)
            .with_mpsmin(0)
            .with_mpsmax(0);
        Arc::new(Controller {
            admin_state: Mutex::new(crate::admin::AdminState::new(&profile)),
            profile,
            host,
            cap,
            regs: Mutex::new(Registers::default()),
            enabled: AtomicBool::new(false),
            css: AtomicU8::new(Cc::CSS_NVM),
            iocs_index: AtomicU8::new(0),
            sq_heads: (0..queues).map(|_| AtomicU16::new(0)).collect(),
            sqs: (0..queues).map(|_| Mutex::new(None)).collect(),
            cqs: (0..queues).map(|_| Mutex::new(None)).collect(),
            namespaces,
            completed: AtomicU64::new(0),
            retired: Mutex::new(IoCounters::default()),
            power_cycles: AtomicU64::new(1),
            unsafe_shutdowns: AtomicU64::new(0),
            created: std::time::Instant::now(),
            transfer_data: AtomicBool::new(true),
            write_cache: AtomicBool::new(true),
            timing,
            clock,
            trace_sinks: Mutex::new(Vec::new()),
            trace_combined: Mutex::new(None),
        })
    }

    /// Sends the controller's trace events to `sink` from now on, besides
    /// the sinks added before: every command, flash operation, channel
    /// transfer, write buffer change and garbage collection reclaim of the
    /// timing model (none without one), and every zone state transition
    /// ([`crate::trace`]).
    pub fn add_trace_sink(&self, sink: Arc<dyn TraceSink>) {
        let mut sinks = self.trace_sinks.lock();
        sinks.push(sink);
        self.install_trace(&sinks);
    }

    /// Stops sending trace events to `sink` (added with
    /// [`Controller::add_trace_sink`]); true when it was there.
    pub fn remove_trace_sink(&self, sink: &Arc<dyn TraceSink>) -> bool {
        let mut sinks = self.trace_sinks.lock();
        let before = sinks.len();
        sinks.retain(|s| !Arc::ptr_eq(s, sink));
        self.install_trace(&sinks);
        sinks.len() != before
    }

    /// The trace sinks added, as one (`None` when there are none): for a
    /// layer above the device to add its own events to the controller's
    /// trace, stamped with [`crate::clock::Clock::model_now_ns`] of
    /// [`Controller::clock`]. Takes a lock: for events of a cold path.
    pub fn trace_sink(&self) -> Option<Arc<dyn TraceSink>> {
        self.trace_combined.lock().clone()
    }

    /// Installs `sinks` as one in the timing model and the zone state
    /// machines.
    fn install_trace(&self, sinks: &[Arc<dyn TraceSink>]) {
        let sink = crate::trace::combine(sinks);
        self.trace_combined.lock().clone_from(&sink);
        if let Some(t) = &self.timing {
            t.set_trace(sink.clone());
        }
        for ns in &self.namespaces {
            if let Some(z) = ns.zones() {
                let tracer = sink.clone().map(|sink| {
                    let clock = Arc::clone(&self.clock);
                    Arc::new(ZoneTracer { nsid: ns.nsid(), clock, sink })
                });
                z.set_tracer(tracer);
            }
        }
    }

    /// The controller's clock: the one its timing model runs on (virtual
    /// or real), or a real clock when it has no timing model.
    pub fn clock(&self) -> &Arc<Clock> {
        &self.clock
    }

    /// Completions the timing model posted, by how late they were posted
    /// after their due time ([`crate::clock::Lateness`]); `None` without a
    /// timing model.
    pub fn lateness(&self) -> Option<LatenessStats> {
        self.timing.as_ref().map(|t| t.lateness().snapshot())
    }

    /// Bytes of written data that host reads took from the timing model's
    /// write buffer (data not yet programmed, served without a die read);
    /// 0 without a timing model, where every read is a media read.
    pub fn buffer_read_bytes(&self) -> u64 {
        self.timing.as_ref().map_or(0, |t| t.buffer_read_bytes())
    }

    /// True when commands complete at times the timing model gives them.
    pub fn is_timed(&self) -> bool {
        self.timing.is_some()
    }

    /// I/O commands of completion queue `cqid` submitted and not yet
    /// completed by the timing model (0 without one).
    pub fn timed_outstanding(&self, cqid: u16) -> u32 {
        self.timing.as_ref().map_or(0, |t| t.outstanding(cqid))
    }

    /// The profile this controller was built from.
    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    /// Commands completed since creation.
    pub fn commands_completed(&self) -> u64 {
        self.completed.load(Ordering::Relaxed)
    }

    /// Largest data transfer in bytes (MDTS).
    pub fn max_transfer_bytes(&self) -> usize {
        PAGE_SIZE << self.profile.controller.mdts_log2
    }

    /// Largest Zone Append in bytes (ZASL).
    pub fn zasl_bytes(&self) -> usize {
        PAGE_SIZE << self.profile.controller.zasl_log2
    }

    /// Switches data movement on or off. Off, reads and writes still run
    /// every check and zone transition but copy nothing: the mode for
    /// measuring the software cost of the command path.
    pub fn set_data_transfer(&self, on: bool) {
        self.transfer_data.store(on, Ordering::Relaxed);
    }

    /// Whether commands move data.
    pub fn transfers_data(&self) -> bool {
        self.transfer_data.load(Ordering::Relaxed)
    }

    /// Reads a 32-bit register. Unknown offsets read as zero.
    pub fn mmio_read32(&self, offset: u32) -> u32 {
        match offset {
            regs::offset::CAP => self.cap.0 as u32,
            o if o == regs::offset::CAP + 4 => (self.cap.0 >> 32) as u32,
            regs::offset::VS => Version::V2_0_0.0,
            regs::offset::INTMS | regs::offset::INTMC => self.regs.lock().intms,
            regs::offset::CC => self.regs.lock().cc.0,
            regs::offset::CSTS => self.regs.lock().csts.0,
            regs::offset::AQA => self.regs.lock().aqa.0,
            regs::offset::ASQ => self.regs.lock().asq as u32,
            o if o == regs::offset::ASQ + 4 => (self.regs.lock().asq >> 32) as u32,
            regs::offset::ACQ => self.regs.lock().acq as u32,
            o if o == regs::offset::ACQ + 4 => (self.regs.lock().acq >> 32) as u32,
            _ => 0,
        }
    }

    /// Reads a 64-bit register (CAP, ASQ, ACQ); others as two 32-bit reads.
    pub fn mmio_read64(&self, offset: u32) -> u64 {
        self.mmio_read32(offset) as u64 | ((self.mmio_read32(offset + 4) as u64) << 32)
    }

    /// Writes a 64-bit register (ASQ, ACQ), as two 32-bit writes.
    pub fn mmio_write64(&self, offset: u32, value: u64) {
        self.mmio_write32(offset, value as u32);
        self.mmio_write32(offset + 4, (value >> 32) as u32);
    }

    /// Writes a 32-bit register or doorbell. A submission queue tail doorbell
    /// processes the new commands on the calling thread before returning.
    pub fn mmio_write32(&self, offset: u32, value: u32) {
        if offset >= regs::offset::DOORBELL_BASE {
            match regs::decode_doorbell(offset, self.cap.dstrd()) {
                Some(Doorbell::SqTail(q)) => self.sq_doorbell(q, value),
                Some(Doorbell::CqHead(q)) => self.cq_doorbell(q, value),
                None => {}
            }
            return;
        }
        let mut r = self.regs.lock();
        let disabled = !r.cc.en();
        match offset {
            regs::offset::INTMS => r.intms |= value,
            regs::offset::INTMC => r.intms &= !value,
            regs::offset::CC => {
                drop(r);
                self.write_cc(Cc(value));
            }
            regs::offset::AQA if disabled => r.aqa = Aqa(value & 0x0FFF_0FFF),
            regs::offset::ASQ if disabled => r.asq = (r.asq & !0xFFFF_FFFF) | value as u64,
            o if o == regs::offset::ASQ + 4 && disabled => {
                r.asq = (r.asq & 0xFFFF_FFFF) | ((value as u64) << 32)
            }
            regs::offset::ACQ if disabled => r.acq = (r.acq & !0xFFFF_FFFF) | value as u64,
            o if o == regs::offset::ACQ + 4 && disabled => {
                r.acq = (r.acq & 0xFFFF_FFFF) | ((value as u64) << 32)
            }
            _ => {}
        }
    }

    /// Posts completions whose time has come on completion queue `cqid`.
    /// Without a timing model every completion is posted when its command
    /// runs, so this only makes room for completions that waited for space.
    /// With one on the virtual clock, a poll of a queue with commands
    /// outstanding and none due first moves the clock to the earliest
    /// pending completion (see [`crate::clock`]).
    pub fn poll(&self, cqid: u16) {
        let Some(slot) = self.cqs.get(cqid as usize) else { return };
        if let Some(t) = &self.timing {
            if cqid != 0 {
                let mut guard = slot.lock();
                let Some(cq) = guard.as_mut() else { return };
                cq.drain_waiting(&*self.host);
                // The host is waiting only once it has consumed everything
                // posted; only then may the virtual clock move.
                let mut due = Vec::new();
                t.take_ready(cqid, &mut due, cq.all_consumed());
                for e in due.iter_mut() {
                    if let Some(h) = self.sq_heads.get(e.sq_id as usize) {
                        e.sq_head = h.load(Ordering::Relaxed);
                    }
                }
                if !due.is_empty() {
                    cq.post_all(&*self.host, &due);
                }
                return;
            }
        }
        if let Some(cq) = slot.lock().as_mut() {
            cq.drain_waiting(&*self.host);
        }
    }

    fn write_cc(&self, new: Cc) {
        let mut r = self.regs.lock();
        let old = r.cc;
        if new.shn() != Cc::SHN_NONE && old.shn() == Cc::SHN_NONE {
            // Shutdown: everything completed becomes durable, open zones close.
            for ns in &self.namespaces {
                ns.shutdown();
            }
            r.csts = r.csts.with_shst(Csts::SHST_COMPLETE);
        }
        if new.shn() == Cc::SHN_NONE && old.shn() != Cc::SHN_NONE {
            r.csts = r.csts.with_shst(Csts::SHST_NORMAL);
        }
        r.cc = new;
        if new.en() && !old.en() {
            match self.validate_enable(&r) {
                Ok(()) => {
                    self.css.store(new.css(), Ordering::Relaxed);
                    let asq = SubmissionQueue::new(r.asq, r.aqa.sq_entries() as u32, 0, PAGE_SIZE);
                    let acq = CompletionQueue::new(r.acq, r.aqa.cq_entries() as u32);
                    let mut acq = acq;
                    acq.bound_sqs = 1;
                    *self.cqs[0].lock() = Some(acq);
                    *self.sqs[0].lock() = Some(asq);
                    self.admin_state.lock().reset(&self.profile);
                    for ns in &self.namespaces {
                        if let Some(f) = ns.firmware() {
                            f.reset_features();
                        }
                    }
                    self.write_cache
                        .store(self.profile.controller.volatile_write_cache, Ordering::Relaxed);
                    r.csts = r.csts.with_rdy(true).with_cfs(false);
                    self.enabled.store(true, Ordering::Release);
                    tracing::debug!(css = new.css(), "controller enabled");
                }
                Err(why) => {
                    tracing::warn!(why, "enable refused: controller fatal status");
                    r.csts = r.csts.with_cfs(true);
                }
            }
        } else if !new.en() && old.en() {
            self.enabled.store(false, Ordering::Release);
            self.reset_queues();
            r.csts = r.csts.with_rdy(false).with_cfs(false);
            tracing::debug!("controller disabled");
        }
    }

    fn validate_enable(&self, r: &Registers) -> Result<(), &'static str> {
        let cc = r.cc;
        if cc.mps() < self.cap.mpsmin() || cc.mps() > self.cap.mpsmax() {
            return Err("CC.MPS outside CAP.MPSMIN..=MPSMAX");
        }
        if !matches!(cc.css(), Cc::CSS_NVM | Cc::CSS_ALL_IO_SETS | Cc::CSS_ADMIN_ONLY) {
            return Err("CC.CSS selects an unsupported command set");
        }
        if r.aqa.asqs() == 0 || r.aqa.acqs() == 0 {
            return Err("admin queues need at least 2 entries");
        }
        if r.asq == 0
            || r.acq == 0
            || !r.asq.is_multiple_of(PAGE_SIZE as u64)
            || !r.acq.is_multiple_of(PAGE_SIZE as u64)
        {
            return Err("ASQ/ACQ must be non-zero and page aligned");
        }
        if cc.css() != Cc::CSS_ADMIN_ONLY && (cc.iosqes() != 6 || cc.iocqes() != 4) {
            return Err("IOSQES must be 6 and IOCQES 4");
        }
        Ok(())
    }

    fn reset_queues(&self) {
        if let Some(t) = &self.timing {
            t.cancel(None);
        }
        for q in self.sqs.iter() {
            if let Some(sq) = q.lock().take() {
                self.retired.lock().add(&sq.counters);
            }
        }
        for q in self.cqs.iter() {
            *q.lock() = None;
        }
    }

    /// The namespaces, NSID 1 first (attached whether or not active).
    pub fn namespaces(&self) -> &[Namespace] {
        &self.namespaces
    }

    /// Simulates a power loss: queues and registers are lost (the host must
    /// bring the controller up again), completed writes that were not yet
    /// durable are dropped from the end of each zone (a random amount of each
    /// undurable tail, so multi-block writes tear), open zones come back
    /// closed; a conventional namespace's firmware undoes a random number of
    /// its newest map changes not yet durable. `seed` makes the cut
    /// reproducible.
    pub fn power_cut(&self, seed: u64) {
        use rand::SeedableRng;
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
        self.enabled.store(false, Ordering::Release);
        {
            let mut r = self.regs.lock();
            *r = Registers::default();
        }
        self.reset_queues();
        if let Some(t) = &self.timing {
            t.power_cut();
        }
        for ns in &self.namespaces {
            if let Some(f) = ns.firmware() {
                f.power_cut(&mut rng);
            }
            if let Some(z) = ns.zones() {
                for (lba, blocks) in z.power_cut(&mut rng) {
                    let _ = ns.media.deallocate(lba, blocks);
                }
                if let Err(e) = ns.persist() {
                    tracing::error!(nsid = ns.nsid, error = %e, "zone state not saved at power cut");
                }
            }
        }
        self.admin_state.lock().power_cut(&self.profile);
        self.power_cycles.fetch_add(1, Ordering::Relaxed);
        self.unsafe_shutdowns.fetch_add(1, Ordering::Relaxed);
        self.css.store(Cc::CSS_NVM, Ordering::Relaxed);
        self.iocs_index.store(0, Ordering::Relaxed);
    }

    /// Whether the volatile write cache is on (feature 06h); when off, every
    /// write is durable at completion.
    pub fn write_cache_enabled(&self) -> bool {
        self.write_cache.load(Ordering::Relaxed)
    }

    /// True while CC.EN = 1 and CSTS.RDY = 1.
    pub fn is_ready(&self) -> bool {
        self.enabled.load(Ordering::Acquire)
    }

    fn cq_doorbell(&self, qid: u16, head: u32) {
        let Some(slot) = self.cqs.get(qid as usize) else { return };
        let mut guard = slot.lock();
        let Some(cq) = guard.as_mut() else { return };
        if head >= cq.size {
            tracing::warn!(qid, head, "invalid CQ head doorbell value ignored");
            return;
        }
        cq.head = head;
        cq.drain_waiting(&*self.host);
    }

    fn sq_doorbell(&self, qid: u16, tail: u32) {
        if !self.is_ready() {
            return;
        }
        let Some(slot) = self.sqs.get(qid as usize) else { return };
        let mut guard = slot.lock();
        let Some(sq) = guard.as_mut() else { return };
        if tail >= sq.size {
            tracing::warn!(qid, tail, "invalid SQ tail doorbell value ignored");
            return;
        }
        sq.tail = tail;
        if sq.pending() == 0 {
            return;
        }
        // One region-list snapshot for the whole doorbell: ring fetches,
        // data transfers and completion posts all resolve against it.
        self.host.with_pinned(&mut |host| self.process(qid, sq, host));
    }

    /// Runs the new entries of `sq`: fetched up to [`FETCH_BATCH`] at a time
    /// with one host-memory read, executed in order, and their completions
    /// posted together under one lock of the completion queue.
    fn process(&self, qid: u16, sq: &mut SubmissionQueue, host: &dyn HostMemory) {
        if let Some(t) = self.timing.as_ref().filter(|_| qid != 0) {
            return self.process_timed(t, qid, sq, host);
        }
        let mut done = [CompletionEntry::default(); FETCH_BATCH];
        loop {
            let Some(n) = self.fetch(sq, host) else { return };
            for (i, slot) in done[..n].iter_mut().enumerate() {
                let sqe = sq.entry(i);
                sq.advance();
                let outcome = if qid == 0 {
                    crate::admin::execute(self, &sqe)
                } else {
                    // Overlap the next read's first cache misses with this
                    // command, as a controller pipelines its media reads.
                    if i + 1 < n {
                        crate::io::prefetch(self, &sq.entry(i + 1));
                    }
                    crate::io::execute(self, host, &sqe, &mut sq.bounce, None, &mut sq.counters)
                };
                *slot = self.completion(qid, sq.head as u16, &sqe, outcome);
            }
            if let Some(cq) = self.cqs[sq.cqid as usize].lock().as_mut() {
                cq.post_all(host, &done[..n]);
            }
            self.completed.fetch_add(n as u64, Ordering::Relaxed);
        }
    }

    /// Fetches the next entries of `sq`; `None` when there are none, or
    /// when the SQ ring itself is unreadable: a real controller would then
    /// report a fatal status (CSTS.CFS), and the host can only reset.
    fn fetch(&self, sq: &mut SubmissionQueue, host: &dyn HostMemory) -> Option<usize> {
        match sq.fetch(host) {
            Ok(0) => None,
            Ok(n) => Some(n),
            Err(_) => {
                let mut r = self.regs.lock();
                r.csts = r.csts.with_cfs(true);
                None
            }
        }
    }

    /// [`Controller::process`] for an I/O queue of a timed controller: each
    /// command runs and tells the model what it did; the model completes it.
    fn process_timed(&self, t: &Timing, qid: u16, sq: &mut SubmissionQueue, host: &dyn HostMemory) {
        let mut batch: Vec<(CompletionEntry, Op)> = Vec::with_capacity(FETCH_BATCH);
        loop {
            let Some(n) = self.fetch(sq, host) else { return };
            for i in 0..n {
                let sqe = sq.entry(i);
                sq.advance();
                self.sq_heads[qid as usize].store(sq.head as u16, Ordering::Relaxed);
                let mut op = Op::Other;
                let outcome = crate::io::execute(
                    self,
                    host,
                    &sqe,
                    &mut sq.bounce,
                    Some(&mut op),
                    &mut sq.counters,
                );
                if outcome.is_err() {
                    op = Op::Other;
                }
                batch.push((self.completion(qid, sq.head as u16, &sqe, outcome), op));
            }
            t.submit(qid, sq.cqid, &mut batch, &self.namespaces);
            self.completed.fetch_add(n as u64, Ordering::Relaxed);
        }
    }

    /// Bytes the host wrote (Write, Zone Append) and read (Read) since
    /// creation, exact: the SMART log rounds them up to data units of
    /// 512,000 bytes. Takes each I/O submission queue's lock in turn.
    pub fn host_bytes(&self) -> (u64, u64) {
        let t = self.io_totals();
        (t.bytes_written, t.bytes_read)
    }

    /// Host I/O since creation, every queue's (live and deleted). Takes
    /// each I/O submission queue's lock in turn.
    pub(crate) fn io_totals(&self) -> IoCounters {
        let mut t = *self.retired.lock();
        for q in self.sqs.iter().skip(1) {
            if let Some(sq) = q.lock().as_ref() {
                t.add(&sq.counters);
            }
        }
        t
    }

    /// The completion entry for a command, logging failures.
    fn completion(
        &self,
        sqid: u16,
        sq_head: u16,
        sqe: &SubmissionEntry,
        outcome: Outcome,
    ) -> CompletionEntry {
        let (result, status) = match outcome {
            Ok(r) => (r, Status::SUCCESS),
            Err(s) => {
                self.admin_state.lock().log_error(sqid, sqe, s);
                (0, s)
            }
        };
        let dnr = !status.is_success() && status.code() != Some(StatusCode::NamespaceNotReady);
        let field = StatusField::new(status, false, dnr);
        CompletionEntry::new(result, sq_head, sqid, sqe.cid(), field, false)
    }

    /// Creates an I/O completion queue (Create I/O Completion Queue).
    pub(crate) fn create_cq(&self, qid: u16, base: u64, size: u32) -> Result<(), StatusCode> {
        let slot = self.cqs.get(qid as usize).ok_or(StatusCode::InvalidQueueIdentifier)?;
        let mut g = slot.lock();
        if qid == 0 || g.is_some() || qid as usize > self.granted_queues().1 as usize {
            return Err(StatusCode::InvalidQueueIdentifier);
        }
        *g = Some(CompletionQueue::new(base, size));
        Ok(())
    }

    /// Creates an I/O submission queue bound to `cqid`.
    pub(crate) fn create_sq(
        &self,
        qid: u16,
        base: u64,
        size: u32,
        cqid: u16,
    ) -> Result<(), StatusCode> {
        let slot = self.sqs.get(qid as usize).ok_or(StatusCode::InvalidQueueIdentifier)?;
        let mut g = slot.lock();
        if qid == 0 || g.is_some() || qid as usize > self.granted_queues().0 as usize {
            return Err(StatusCode::InvalidQueueIdentifier);
        }
        if cqid == 0 {
            return Err(StatusCode::CompletionQueueInvalid);
        }
        let mut cqg = self.cqs.get(cqid as usize).ok_or(StatusCode::CompletionQueueInvalid)?.lock();
        let cq = cqg.as_mut().ok_or(StatusCode::CompletionQueueInvalid)?;
        cq.bound_sqs += 1;
        self.sq_heads[qid as usize].store(0, Ordering::Relaxed);
        *g = Some(SubmissionQueue::new(base, size, cqid, self.max_transfer_bytes()));
        Ok(())
    }

    /// Deletes an I/O submission queue.
    pub(crate) fn delete_sq(&self, qid: u16) -> Result<(), StatusCode> {
        if qid == 0 {
            return Err(StatusCode::InvalidQueueIdentifier);
        }
        let slot = self.sqs.get(qid as usize).ok_or(StatusCode::InvalidQueueIdentifier)?;
        let sq = slot.lock().take().ok_or(StatusCode::InvalidQueueIdentifier)?;
        self.retired.lock().add(&sq.counters);
        if let Some(t) = &self.timing {
            t.cancel(Some(qid));
        }
        if let Some(cq) = self.cqs[sq.cqid as usize].lock().as_mut() {
            cq.bound_sqs -= 1;
        }
        Ok(())
    }

    /// Deletes an I/O completion queue; refused while an SQ is bound to it.
    pub(crate) fn delete_cq(&self, qid: u16) -> Result<(), StatusCode> {
        if qid == 0 {
            return Err(StatusCode::InvalidQueueIdentifier);
        }
        let slot = self.cqs.get(qid as usize).ok_or(StatusCode::InvalidQueueIdentifier)?;
        let mut g = slot.lock();
        match g.as_ref() {
            None => Err(StatusCode::InvalidQueueIdentifier),
            Some(cq) if cq.bound_sqs > 0 => Err(StatusCode::InvalidQueueDeletion),
            Some(_) => {
                *g = None;
                Ok(())
            }
        }
    }

    /// I/O queues granted by Set Features Number of Queues: (SQs, CQs).
    pub(crate) fn granted_queues(&self) -> (u16, u16) {
        self.admin_state.lock().granted_queues
    }

    /// Largest queue (CAP.MQES + 1).
    pub(crate) fn max_queue_entries(&self) -> u32 {
        self.cap.max_queue_entries()
    }

    /// The namespace with this NSID, if attached and usable under the
    /// selected command set.
    pub(crate) fn namespace(&self, nsid: u32) -> Option<&Namespace> {
        let ns = self.namespaces.get((nsid as usize).checked_sub(1)?)?;
        self.namespace_active(ns).then_some(ns)
    }

    /// A zoned namespace is usable only when the host enabled all I/O command
    /// sets (CC.CSS = 110b) and the selected profile includes ZNS.
    pub(crate) fn namespace_active(&self, ns: &Namespace) -> bool {
        match self.css.load(Ordering::Relaxed) {
            Cc::CSS_ADMIN_ONLY => false,
            Cc::CSS_NVM => !ns.is_zoned(),
            _ => !ns.is_zoned() || self.iocs_index.load(Ordering::Relaxed) == 0,
        }
    }
}
