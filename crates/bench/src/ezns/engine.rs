//! The multi-tenant engine: every tenant's load on one thread, in device
//! time.
//!
//! Each tenant has a [`Port`] (its queue and a pool of buffers) and a
//! [`Load`] (what it submits, what it does with completions). One round
//! lets every load submit what it wants at the current device time, rings
//! every queue and polls every queue once; a completion is timestamped with
//! device time right after the poll that delivered it. On a virtual clock a
//! poll that finds nothing due moves the clock to the earliest pending
//! completion of any queue, so one thread polling all tenants round robin
//! gets exact figures (see the emulator's clock).

use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::Rng;
use zns_device::{Completion, IoBuffer, ZoneAction, ZoneOp, ZoneQueue, ZonedDevice};

use super::EznsBenchError;
use crate::characterize::stats::LatencyHistogram;

/// Wall time without any completion after which a run is declared stalled.
const STALL: Duration = Duration::from_secs(60);

/// Device time an idle round lets pass when nothing is outstanding.
const IDLE_STEP_NS: u64 = 100_000;

/// Rounds in a row with nothing in flight after which loads that should
/// finish are declared stalled (a load may take a few rounds to move
/// between states without a command).
const IDLE_ROUNDS: u32 = 10_000;

/// A tenant's queue and the buffers of its commands.
///
/// Thread safety: owned by the engine's thread.
pub(crate) struct Port {
    q: Box<dyn ZoneQueue>,
    pool: Vec<IoBuffer>,
    buf_len: usize,
    /// Block size of the tenant.
    pub bs: u64,
    /// Logical zone size and capacity (blocks).
    pub zone_size: u64,
    /// Logical zone capacity (blocks).
    pub zone_cap: u64,
}

impl Port {
    /// A queue of `depth` on `dev` with buffers of up to `buf_len` bytes.
    pub fn new(
        dev: &dyn ZonedDevice,
        depth: usize,
        buf_len: usize,
    ) -> Result<Port, EznsBenchError> {
        let info = dev.info();
        Ok(Port {
            q: dev.queue(depth)?,
            pool: Vec::new(),
            buf_len,
            bs: info.block_size as u64,
            zone_size: info.zone_size,
            zone_cap: info.zone_capacity,
        })
    }

    /// Commands in flight.
    pub fn outstanding(&self) -> usize {
        self.q.outstanding()
    }

    /// Submits `op` with a buffer of `len` bytes (0: none) and `tag`.
    pub fn submit(&mut self, op: ZoneOp, len: usize, tag: u64) -> Result<(), EznsBenchError> {
        let buffer = if len == 0 {
            None
        } else {
            let mut b = match self.pool.pop() {
                Some(b) => b,
                None => IoBuffer::aligned(self.buf_len.max(len))?,
            };
            b.set_len(len)?;
            Some(b)
        };
        let what = op.kind().describe(op.lba(), true);
        self.q.submit(op, buffer, tag).map_err(|r| EznsBenchError::Command {
            what: format!("{what} (queue of {} with {})", self.q.capacity(), self.outstanding()),
            source: r.error,
        })
    }

    fn ring(&mut self) {
        self.q.ring();
    }

    fn poll(&mut self, done: &mut Vec<Completion>) -> usize {
        self.q.poll(usize::MAX, &mut |c| done.push(c))
    }

    fn recycle(&mut self, b: Option<IoBuffer>) {
        if let Some(b) = b {
            self.pool.push(b);
        }
    }
}

/// What a tenant does: submits commands and takes their completions.
///
/// Thread safety: owned by the engine's thread.
pub(crate) trait Load {
    /// Submits what it wants to at device time `now`.
    fn submit(
        &mut self,
        port: &mut Port,
        now: u64,
        rng: &mut SmallRng,
    ) -> Result<(), EznsBenchError>;
    /// One of its commands completed at `now` (its result checked by the
    /// load: a failure ends the run).
    fn complete(&mut self, c: &mut Completion, now: u64) -> Result<(), EznsBenchError>;
    /// True once it will submit nothing more (a bounded load is done).
    fn finished(&self) -> bool {
        false
    }
    /// Bytes written and read so far, counted at completion.
    fn bytes(&self) -> (u64, u64);
    /// Stops submitting (the window ended); in-flight commands complete.
    fn stop(&mut self);
}

/// A tenant in a run: its port and its load.
pub(crate) struct Tenant<L> {
    /// Queue and buffers.
    pub port: Port,
    /// What it does.
    pub load: L,
    /// Submits only while true (its load pauses otherwise).
    pub active: bool,
}

impl<L: Load> Tenant<L> {
    /// An active tenant.
    pub fn new(port: Port, load: L) -> Tenant<L> {
        Tenant { port, load, active: true }
    }
}

/// When a run stops submitting.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Until {
    /// At this device time.
    Time(u64),
    /// When every load is finished.
    Finished,
}

/// Runs `tenants` until `until`, then lets everything in flight complete.
/// `tick(now, tenants)` is called after every round (for samplers and
/// phase changes); it returns true to go on.
pub(crate) fn run<L: Load>(
    dev: &dyn ZonedDevice,
    tenants: &mut [Tenant<L>],
    until: Until,
    rng: &mut SmallRng,
    tick: &mut dyn FnMut(u64, &mut [Tenant<L>]) -> bool,
) -> Result<(), EznsBenchError> {
    let mut done = Vec::new();
    let mut last_progress = Instant::now();
    let mut stopping = false;
    let mut idle_rounds = 0u32;
    loop {
        let now = dev.now_ns();
        let over = match until {
            Until::Time(t) => now >= t,
            Until::Finished => tenants.iter().all(|t| t.load.finished()),
        };
        if over && !stopping {
            stopping = true;
            tenants.iter_mut().for_each(|t| t.load.stop());
        }
        if !stopping {
            for t in tenants.iter_mut().filter(|t| t.active) {
                t.load.submit(&mut t.port, now, rng)?;
            }
        }
        let mut completed = 0;
        for t in tenants.iter_mut() {
            t.port.ring();
            done.clear();
            if t.port.poll(&mut done) == 0 {
                continue;
            }
            let at = dev.now_ns();
            for mut c in done.drain(..) {
                t.load.complete(&mut c, at)?;
                t.port.recycle(c.buffer);
                completed += 1;
            }
        }
        let outstanding: usize = tenants.iter().map(|t| t.port.outstanding()).sum();
        if completed > 0 || outstanding > 0 {
            idle_rounds = 0;
        }
        if completed > 0 {
            last_progress = Instant::now();
        } else if outstanding == 0 {
            if stopping {
                return Ok(());
            }
            idle_rounds += 1;
            if matches!(until, Until::Finished) && idle_rounds > IDLE_ROUNDS {
                // Loads that run to the end keep submitting nothing with
                // nothing in flight: they would wait forever.
                return Err(EznsBenchError::Stalled(format!(
                    "bounded loads submitted nothing for {IDLE_ROUNDS} rounds with nothing in flight"
                )));
            }
            // Nothing in flight and nothing submitted: let device time pass
            // (idle tenants).
            dev.wait_ns(IDLE_STEP_NS);
            last_progress = Instant::now();
        } else if last_progress.elapsed() > STALL {
            return Err(EznsBenchError::Stalled(format!(
                "no completion for {} s with {outstanding} commands outstanding",
                STALL.as_secs()
            )));
        }
        if !tick(dev.now_ns(), tenants) && !stopping {
            stopping = true;
            tenants.iter_mut().for_each(|t| t.load.stop());
        }
    }
}

/// A completion's result (taken out of it), its failure as a command
/// error naming `what`.
pub(crate) fn check(c: &mut Completion, what: &str) -> Result<u64, EznsBenchError> {
    std::mem::replace(&mut c.result, Ok(0))
        .map_err(|source| EznsBenchError::Command { what: what.to_string(), source })
}

/// One logical zone a [`Writer`] fills.
#[derive(Debug, Clone, Copy)]
struct Slot {
    zone: u64,
    /// Blocks reserved (appends submitted) in the zone.
    reserved: u64,
    in_flight: usize,
    /// Blocks to write before the slot is done (bounded writers).
    limit: Option<u64>,
    resetting: bool,
}

/// Appends to `zones` logical zones at once, `depth` appends of `chunk`
/// bytes in flight per zone; a full zone is reset and written again.
/// Bounded: stops each zone after `limit` blocks (prefills).
///
/// Thread safety: owned by the engine's thread.
pub(crate) struct Writer {
    slots: Vec<Slot>,
    depth: usize,
    chunk: u64,
    stopped: bool,
    /// Bytes written.
    pub written: u64,
    /// Append latencies.
    pub hist: LatencyHistogram,
    /// Per append tag: its slot and submission time.
    meta: Vec<(usize, u64)>,
    free: Vec<u64>,
}

impl Writer {
    /// Writes logical zones `first .. first + zones` of the tenant of
    /// `port`.
    pub fn new(first: u64, zones: u64, depth: usize, chunk_bytes: u64, port: &Port) -> Writer {
        let slots = (first..first + zones)
            .map(|zone| Slot { zone, reserved: 0, in_flight: 0, limit: None, resetting: false })
            .collect();
        let tags = zones as usize * depth;
        Writer {
            slots,
            depth,
            chunk: (chunk_bytes / port.bs).max(1),
            stopped: false,
            written: 0,
            hist: LatencyHistogram::new(),
            meta: vec![(0, 0); tags],
            free: (0..tags as u64).rev().collect(),
        }
    }

    /// Writes only `blocks` blocks into each zone, then is finished.
    pub fn bounded(mut self, blocks: u64) -> Writer {
        for s in &mut self.slots {
            s.limit = Some(blocks);
        }
        self
    }

    /// The extents written, `(first LBA, blocks)` per zone.
    pub fn extents(&self, port: &Port) -> Vec<(u64, u64)> {
        self.slots.iter().map(|s| (s.zone * port.zone_size, s.reserved)).collect()
    }

    /// Tag of the reset of slot `i` (after every append tag).
    fn reset_tag(&self, i: usize) -> u64 {
        (self.meta.len() + i) as u64
    }

    fn fill_slot(&mut self, i: usize, port: &mut Port, now: u64) -> Result<(), EznsBenchError> {
        let s = self.slots[i];
        let end = s.limit.unwrap_or(port.zone_cap).min(port.zone_cap);
        if s.resetting {
            return Ok(());
        }
        if s.reserved >= end {
            if s.in_flight == 0 && s.limit.is_none() {
                let zslba = s.zone * port.zone_size;
                let op = ZoneOp::Zone {
                    action: ZoneAction::Reset,
                    target: zns_device::Target::Zone(zslba),
                };
                port.submit(op, 0, self.reset_tag(i))?;
                self.slots[i].resetting = true;
            }
            return Ok(());
        }
        while self.slots[i].in_flight < self.depth && self.slots[i].reserved < end {
            let s = &mut self.slots[i];
            let n = self.chunk.min(end - s.reserved);
            let tag = self.free.pop().ok_or_else(|| {
                EznsBenchError::Internal("a writer ran out of command tags".into())
            })?;
            let op = ZoneOp::Append { zslba: s.zone * port.zone_size, fua: false };
            port.submit(op, (n * port.bs) as usize, tag)?;
            self.meta[tag as usize] = (i, now);
            s.reserved += n;
            s.in_flight += 1;
        }
        Ok(())
    }
}

impl Load for Writer {
    fn submit(
        &mut self,
        port: &mut Port,
        now: u64,
        _rng: &mut SmallRng,
    ) -> Result<(), EznsBenchError> {
        if self.stopped {
            return Ok(());
        }
        for i in 0..self.slots.len() {
            self.fill_slot(i, port, now)?;
        }
        Ok(())
    }

    fn complete(&mut self, c: &mut Completion, now: u64) -> Result<(), EznsBenchError> {
        let tag = c.tag as usize;
        if tag >= self.meta.len() {
            check(c, "reset a written logical zone")?;
            let slot = &mut self.slots[tag - self.meta.len()];
            slot.resetting = false;
            slot.reserved = 0;
            return Ok(());
        }
        check(c, "append to a logical zone")?;
        let (i, at) = self.meta[tag];
        self.free.push(c.tag);
        self.slots[i].in_flight -= 1;
        self.written += c.buffer.as_ref().map_or(0, |b| b.len() as u64);
        self.hist.record(now.saturating_sub(at));
        Ok(())
    }

    fn finished(&self) -> bool {
        self.slots.iter().all(|s| s.limit.is_some_and(|l| s.reserved >= l) && s.in_flight == 0)
    }

    fn bytes(&self) -> (u64, u64) {
        (self.written, 0)
    }

    fn stop(&mut self) {
        self.stopped = true;
    }
}

/// Random reads of `bytes` at queue depth `depth` over extents
/// `(first LBA, blocks)`, each latency recorded.
///
/// Thread safety: owned by the engine's thread.
pub(crate) struct Reader {
    extents: Vec<(u64, u64)>,
    depth: usize,
    blocks: u64,
    in_flight: Vec<Option<u64>>,
    stopped: bool,
    /// Only reads submitted at or after this device time are recorded.
    pub record_from: u64,
    /// Latencies (device time, submission to completion).
    pub hist: LatencyHistogram,
    /// Bytes read.
    pub read: u64,
}

impl Reader {
    /// Reads of `bytes` each, `depth` in flight, anywhere in `extents`.
    pub fn new(extents: Vec<(u64, u64)>, depth: usize, bytes: u64, port: &Port) -> Reader {
        Reader {
            extents: extents.into_iter().filter(|e| e.1 > 0).collect(),
            depth,
            blocks: (bytes / port.bs).max(1),
            in_flight: vec![None; depth],
            stopped: false,
            record_from: 0,
            hist: LatencyHistogram::new(),
            read: 0,
        }
    }
}

impl Load for Reader {
    fn submit(
        &mut self,
        port: &mut Port,
        now: u64,
        rng: &mut SmallRng,
    ) -> Result<(), EznsBenchError> {
        if self.stopped || self.extents.is_empty() {
            return Ok(());
        }
        for tag in 0..self.depth {
            if self.in_flight[tag].is_some() {
                continue;
            }
            let (first, blocks) = self.extents[rng.gen_range(0..self.extents.len())];
            let slots = (blocks / self.blocks).max(1);
            let lba = first + rng.gen_range(0..slots) * self.blocks;
            port.submit(ZoneOp::Read { lba }, (self.blocks * port.bs) as usize, tag as u64)?;
            self.in_flight[tag] = Some(now);
        }
        Ok(())
    }

    fn complete(&mut self, c: &mut Completion, now: u64) -> Result<(), EznsBenchError> {
        check(c, "read from a logical zone")?;
        let at = self.in_flight[c.tag as usize].take().unwrap_or(now);
        if at >= self.record_from {
            self.hist.record(now.saturating_sub(at));
        }
        self.read += c.buffer.as_ref().map_or(0, |b| b.len() as u64);
        Ok(())
    }

    fn bytes(&self) -> (u64, u64) {
        (0, self.read)
    }

    fn stop(&mut self) {
        self.stopped = true;
    }
}

/// A reader or a writer, for runs that mix them.
///
/// Thread safety: owned by the engine's thread.
pub(crate) enum Either {
    /// Reads.
    Reader(Reader),
    /// Writes.
    Writer(Writer),
}

impl Load for Either {
    fn submit(
        &mut self,
        port: &mut Port,
        now: u64,
        rng: &mut SmallRng,
    ) -> Result<(), EznsBenchError> {
        match self {
            Either::Reader(r) => r.submit(port, now, rng),
            Either::Writer(w) => w.submit(port, now, rng),
        }
    }

    fn complete(&mut self, c: &mut Completion, now: u64) -> Result<(), EznsBenchError> {
        match self {
            Either::Reader(r) => r.complete(c, now),
            Either::Writer(w) => w.complete(c, now),
        }
    }

    fn finished(&self) -> bool {
        match self {
            Either::Reader(r) => r.finished(),
            Either::Writer(w) => w.finished(),
        }
    }

    fn bytes(&self) -> (u64, u64) {
        match self {
            Either::Reader(r) => r.bytes(),
            Either::Writer(w) => w.bytes(),
        }
    }

    fn stop(&mut self) {
        match self {
            Either::Reader(r) => r.stop(),
            Either::Writer(w) => w.stop(),
        }
    }
}
