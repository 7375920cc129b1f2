//! The measuring engine: streams of commands on one queue, timed in device
//! time, and the zones they use.
//!
//! Everything runs on the calling thread and one [`ZoneQueue`]: a stream is
//! a source of commands of one kind with its own depth (commands in flight),
//! an optional limit on how many it submits, an optional device-time window
//! and an optional rate. The runner keeps every stream at its depth, rings
//! once per round and polls; each completion's latency is device time at
//! the poll that delivered it minus device time just before its submission.
//!
//! Zones come from a [`ZonePool`] of zones that were Empty at the start;
//! every zone handed out is reset when the experiment gives the pool back,
//! so each experiment leaves the device as it found it.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::Rng;
use zns_device::{
    Completion, DeviceError, DeviceInfo, IoBuffer, ReportFilter, Target, ZoneAction, ZoneOp,
    ZoneQueue, ZoneState, ZonedDevice,
};
use zns_emulator::clock::{Dilation, LatenessStats};

use super::clock;
use super::stats::LatencyHistogram;
use super::CharacterizeError;

/// How long the runner waits in wall time for any completion before it
/// declares the device stalled.
const STALL: Duration = Duration::from_secs(120);

/// Most zone resets issued at once when zones are given back.
const RESET_DEPTH: usize = 8;

/// Where the suite's commands go: the device, one queue, the zones.
pub(crate) struct Ctx<'a> {
    pub dev: &'a dyn ZonedDevice,
    pub q: Box<dyn ZoneQueue>,
    pub info: DeviceInfo,
    pub pool: ZonePool,
    pub rng: SmallRng,
    /// Byte written into every data buffer (varies per run with the seed).
    pub fill_byte: u8,
    /// The device's time dilation: device time is divided by it.
    pub dilation: Dilation,
    /// The emulated controller whose late completions are counted.
    pub late_source: Option<std::sync::Arc<zns_emulator::Controller>>,
    /// Late completions of measured commands since the last point taken
    /// ([`Ctx::take_late`]).
    pub late: LatenessStats,
}

impl Ctx<'_> {
    /// Device time now, undilated (model time of a dilated emulator).
    pub fn now(&self) -> u64 {
        self.dilation.to_model(clock::now_ns(self.dev))
    }

    /// Lets `ns` of (undilated) device time pass.
    pub fn wait_ns(&self, ns: u64) {
        self.dev.wait_ns(self.dilation.to_clock(ns));
    }

    /// The late-completion counts now, when they are counted.
    pub fn late_reading(&self) -> Option<LatenessStats> {
        self.late_source.as_ref().and_then(|c| c.lateness())
    }

    /// Adds what happened since `before` to the current point's counts.
    fn late_since(&mut self, before: Option<LatenessStats>) {
        if let (Some(b), Some(now)) = (before, self.late_reading()) {
            self.late.add(&now.since(&b));
        }
    }

    /// The late completions counted for the point just measured (`None`
    /// when the device's are not counted); starts the next point's.
    pub fn take_late(&mut self) -> Option<LatenessStats> {
        self.late_source.as_ref()?;
        Some(std::mem::take(&mut self.late))
    }

    /// Largest write or read the device takes in one command, in bytes,
    /// capped at 512 KiB.
    pub fn max_transfer(&self) -> usize {
        let bs = self.info.block_size as usize;
        (self.info.mdts_bytes.min(512 * 1024) / bs).max(1) * bs
    }

    /// Runs one command alone and returns its latency (device time) and its
    /// buffer.
    pub fn single(
        &mut self,
        op: ZoneOp,
        buffer: Option<IoBuffer>,
    ) -> Result<(u64, Option<IoBuffer>), CharacterizeError> {
        if self.q.outstanding() > 0 {
            return Err(CharacterizeError::Internal("single command on a busy queue".into()));
        }
        let what = describe(&op);
        let late0 = self.late_reading();
        let t0 = self.now();
        self.q.submit(op, buffer, 0).map_err(|r| CharacterizeError::command(&what, r.error))?;
        self.q.ring();
        let mut done: Option<Completion> = None;
        let wall = Instant::now();
        while done.is_none() {
            if self.q.poll(1, &mut |c| done = Some(c)) == 0 {
                if wall.elapsed() > STALL {
                    return Err(CharacterizeError::Stalled(format!(
                        "{what}: no completion for two minutes"
                    )));
                }
                std::hint::spin_loop();
            }
        }
        let t1 = self.now();
        self.late_since(late0);
        let c = done.expect("loop ends with a completion");
        c.result.map_err(|e| CharacterizeError::command(&what, e))?;
        Ok((t1.saturating_sub(t0), c.buffer))
    }

    /// A zone management action on one zone, timed.
    pub fn action(&mut self, action: ZoneAction, zslba: u64) -> Result<u64, CharacterizeError> {
        self.single(ZoneOp::Zone { action, target: Target::Zone(zslba) }, None).map(|(t, _)| t)
    }

    /// A data buffer of `len` bytes holding the run's fill pattern.
    pub fn data_buffer(&self, len: usize) -> Result<IoBuffer, CharacterizeError> {
        let mut b = self.dev.alloc(len)?;
        let byte = self.fill_byte;
        for (i, x) in b.iter_mut().enumerate() {
            *x = byte ^ (i as u8);
        }
        Ok(b)
    }

    /// Writes `blocks` blocks at the write pointers of each zone (given as
    /// `(zone start, write pointer)`), one command in flight per zone,
    /// commands as large as the device takes. Not measured.
    pub fn fill(&mut self, zones: &[(u64, u64)], blocks: u64) -> Result<(), CharacterizeError> {
        if blocks == 0 || zones.is_empty() {
            return Ok(());
        }
        let chunk = self.max_transfer();
        let mut streams: Vec<Stream> = zones
            .iter()
            .map(|&(_, wp)| {
                Stream::new(Work::Fill { next: wp, end: wp + blocks }, 1, chunk).unrecorded()
            })
            .collect();
        run(self, &mut streams)?;
        Ok(())
    }

    /// Resets the zones starting at `starts`, several at a time. Not
    /// measured.
    pub fn reset_zones(&mut self, starts: &[u64]) -> Result<(), CharacterizeError> {
        if starts.is_empty() {
            return Ok(());
        }
        let ops = starts
            .iter()
            .map(|&s| ZoneOp::Zone { action: ZoneAction::Reset, target: Target::Zone(s) })
            .collect();
        let mut s = [Stream::new(Work::Actions { ops }, RESET_DEPTH, 0).unrecorded()];
        run(self, &mut s)?;
        Ok(())
    }

    /// A zone from the pool (Empty): `(start, capacity)`.
    pub fn take_zone(&mut self) -> Result<(u64, u64), CharacterizeError> {
        self.pool.take(self.q.as_mut())
    }

    /// Resets every zone handed out since the last call and returns them
    /// to the pool.
    pub fn release_zones(&mut self) -> Result<(), CharacterizeError> {
        let starts = self.pool.handed_out();
        let r = self.reset_zones(&starts);
        // The pool takes them back even after a failure: the final sweep
        // resets whatever is left non-empty.
        self.pool.take_back(&starts);
        r
    }
}

/// One line naming a command, for errors.
pub(crate) fn describe(op: &ZoneOp) -> String {
    op.kind().describe(op.lba(), true)
}

/// The zones the suite may use: those Empty when it started.
///
/// Thread safety: owned by the suite's thread.
pub(crate) struct ZonePool {
    /// Capacity of each zone, by zone number.
    capacity: Vec<u64>,
    zone_size: u64,
    /// Empty zones not handed out, lowest first.
    free: VecDeque<u64>,
    /// Handed out and possibly written.
    out: Vec<u64>,
    /// Handed out, then given up Full by a stream: may be reset and reused.
    retired: VecDeque<u64>,
    /// Handed out but kept across experiments (the read data set).
    pinned: Vec<u64>,
    /// Zones holding data at the start (open, closed or full).
    pub occupied: u64,
}

impl ZonePool {
    /// Reads the zone report: every Empty zone is usable.
    pub fn scan(q: &mut dyn ZoneQueue, info: &DeviceInfo) -> Result<ZonePool, CharacterizeError> {
        let zones = q.report_zones(0, ReportFilter::All, usize::MAX)?;
        let mut capacity = vec![0; info.zone_count as usize];
        let mut free = VecDeque::new();
        let mut occupied = 0;
        for z in &zones {
            if let Some(c) = capacity.get_mut(z.index as usize) {
                *c = z.capacity;
            }
            match z.state {
                ZoneState::Empty if z.capacity > 0 => free.push_back(z.start),
                ZoneState::ImplicitlyOpen
                | ZoneState::ExplicitlyOpen
                | ZoneState::Closed
                | ZoneState::Full => occupied += 1,
                // Read Only and Offline zones are left alone.
                _ => {}
            }
        }
        Ok(ZonePool {
            capacity,
            zone_size: info.zone_size,
            free,
            out: Vec::new(),
            retired: VecDeque::new(),
            pinned: Vec::new(),
            occupied,
        })
    }

    /// Zones the suite may use that are not Empty now (a report).
    pub fn not_empty_now(&self, q: &mut dyn ZoneQueue) -> Result<Vec<u64>, CharacterizeError> {
        let zones = q.report_zones(0, ReportFilter::All, usize::MAX)?;
        Ok(zones
            .iter()
            .filter(|z| {
                matches!(
                    z.state,
                    ZoneState::ImplicitlyOpen
                        | ZoneState::ExplicitlyOpen
                        | ZoneState::Closed
                        | ZoneState::Full
                ) && (self.free.contains(&z.start)
                    || self.out.contains(&z.start)
                    || self.retired.contains(&z.start))
            })
            .map(|z| z.start)
            .collect())
    }

    /// Keeps the handed-out zone at `start` out of [`ZonePool::handed_out`]
    /// until [`ZonePool::unpin`].
    pub fn pin(&mut self, start: u64) {
        self.pinned.push(start);
    }

    /// Undoes [`ZonePool::pin`].
    pub fn unpin(&mut self, starts: &[u64]) {
        self.pinned.retain(|z| !starts.contains(z));
    }

    /// Zones available.
    pub fn available(&self) -> usize {
        self.free.len() + self.retired.len()
    }

    /// Capacity of the zone at `start`.
    pub fn capacity_of(&self, start: u64) -> u64 {
        self.capacity.get((start / self.zone_size) as usize).copied().unwrap_or(0)
    }

    /// An Empty zone; when none is left, a retired one is reset (blocking)
    /// and reused.
    pub fn take(&mut self, q: &mut dyn ZoneQueue) -> Result<(u64, u64), CharacterizeError> {
        let start = match self.free.pop_front() {
            Some(s) => s,
            None => {
                let Some(s) = self.retired.pop_front() else {
                    return Err(CharacterizeError::NoZones);
                };
                tracing::debug!(zone_start = s, "reusing a retired zone");
                q.zone_action(ZoneAction::Reset, Target::Zone(s))
                    .map_err(|e| CharacterizeError::command("reset a retired zone", e))?;
                self.out.retain(|&z| z != s);
                s
            }
        };
        self.out.push(start);
        Ok((start, self.capacity_of(start)))
    }

    /// A stream is done with the (Full) zone at `start`.
    pub fn retire(&mut self, start: u64) {
        self.retired.push_back(start);
    }

    /// Every zone handed out and not given back.
    pub fn handed_out(&self) -> Vec<u64> {
        self.out.iter().copied().filter(|z| !self.pinned.contains(z)).collect()
    }

    /// Zones reset by the caller come back (Empty).
    pub fn take_back(&mut self, starts: &[u64]) {
        self.out.retain(|z| !starts.contains(z));
        self.retired.retain(|z| !starts.contains(z));
        for &s in starts {
            if !self.free.contains(&s) {
                self.free.push_back(s);
            }
        }
        self.free.make_contiguous().sort_unstable();
    }
}

/// A zone a write or append stream fills.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WriteZone {
    pub start: u64,
    /// One past the last writable block.
    pub end: u64,
    /// Next block to write (writes) or blocks reserved so far (appends).
    pub next: u64,
}

/// What a stream submits.
pub(crate) enum Work {
    /// Writes at the write pointer, zone after zone (depth 1 per stream:
    /// a zone takes one write at a time).
    Write { zone: Option<WriteZone> },
    /// Zone Appends, zone after zone; any depth.
    Append { zone: Option<WriteZone> },
    /// Writes from `next` to `end` in one zone, not measured.
    Fill { next: u64, end: u64 },
    /// Reads at random block-aligned offsets in the extents
    /// `(first LBA, blocks)`.
    RandomRead { extents: Vec<(u64, u64)> },
    /// Consecutive reads through the extents, wrapping around.
    SeqRead { extents: Vec<(u64, u64)>, index: usize, offset: u64 },
    /// These commands, in order.
    Actions { ops: VecDeque<ZoneOp> },
}

/// What a stream does next.
enum Next {
    /// Submit this command with a buffer of this many bytes (0: none);
    /// record its latency or not.
    Op(ZoneOp, usize, bool),
    /// Nothing to submit now (rate, or a zone must drain first).
    Wait,
    /// Nothing more, ever.
    Done,
}

/// A source of commands of one kind, and what was measured of them.
pub(crate) struct Stream {
    work: Work,
    depth: usize,
    /// Bytes per command.
    bs: usize,
    /// Recorded commands to submit at most.
    limit: Option<u64>,
    /// No submissions at or after this device time.
    until: Option<u64>,
    /// Bytes per ns.
    rate: Option<f64>,
    /// Stops when every non-background stream is done.
    background: bool,
    record: bool,
    next_at: u64,
    in_flight: usize,
    submitted: u64,
    /// Commands submitted, measured or not.
    issued: u64,
    exhausted: bool,
    /// A command the queue refused for lack of room, submitted again first.
    pending: Option<(ZoneOp, usize, bool)>,
    buffers: Vec<IoBuffer>,
    /// Latencies of recorded commands.
    pub hist: LatencyHistogram,
    /// Recorded commands completed.
    pub ops: u64,
    /// Bytes they moved.
    pub bytes: u64,
    /// Device time of the first recorded submission.
    pub first_submit: Option<u64>,
    /// Device time of the last recorded completion.
    pub last_complete: u64,
}

impl Stream {
    pub fn new(work: Work, depth: usize, bs: usize) -> Stream {
        Stream {
            work,
            depth: depth.max(1),
            bs,
            limit: None,
            until: None,
            rate: None,
            background: false,
            record: true,
            next_at: 0,
            in_flight: 0,
            submitted: 0,
            issued: 0,
            exhausted: false,
            pending: None,
            buffers: Vec::new(),
            hist: LatencyHistogram::new(),
            ops: 0,
            bytes: 0,
            first_submit: None,
            last_complete: 0,
        }
    }

    /// Submit at most `n` recorded commands.
    pub fn limit(mut self, n: u64) -> Stream {
        self.limit = Some(n);
        self
    }

    /// Submit nothing at or after device time `t`.
    pub fn until(mut self, t: u64) -> Stream {
        self.until = Some(t);
        self
    }

    /// At most `mib_s` MiB per second of device time.
    pub fn rate_mib_s(mut self, mib_s: f64) -> Stream {
        self.rate = Some(mib_s * 1024.0 * 1024.0 / 1e9);
        self
    }

    /// Runs only as long as some non-background stream does.
    pub fn background(mut self) -> Stream {
        self.background = true;
        self
    }

    /// Measures nothing.
    pub fn unrecorded(mut self) -> Stream {
        self.record = false;
        self
    }

    /// Device time from the first recorded submission to the last
    /// recorded completion.
    pub fn elapsed(&self) -> u64 {
        self.first_submit.map_or(0, |f| self.last_complete.saturating_sub(f))
    }

    /// A window ends a stream only once it has submitted something, so
    /// every measured point has at least one command, however late the
    /// host gets to it.
    fn stopped_submitting(&self, now: u64) -> bool {
        self.exhausted
            || self.limit.is_some_and(|l| self.submitted >= l)
            || (self.until.is_some_and(|u| now >= u) && self.issued > 0)
    }

    fn finished(&self, now: u64) -> bool {
        self.pending.is_none() && self.stopped_submitting(now) && self.in_flight == 0
    }

    /// The next command, given the zones and the random generator.
    fn next(
        &mut self,
        ctx: &mut Ctx<'_>,
        now: u64,
        force: bool,
    ) -> Result<Next, CharacterizeError> {
        if let Some((op, len, record)) = self.pending.take() {
            return Ok(Next::Op(op, len, record));
        }
        if !force && self.rate.is_some() && now < self.next_at {
            return Ok(Next::Wait);
        }
        let bsz = ctx.info.block_size as u64;
        let n = self.bs as u64 / bsz;
        let record = self.record;
        let append = matches!(self.work, Work::Append { .. });
        Ok(match &mut self.work {
            Work::Write { zone } | Work::Append { zone } => {
                if zone.is_none() {
                    let (start, cap) = ctx.take_zone()?;
                    *zone = Some(WriteZone { start, end: start + cap, next: start });
                }
                let z = zone.as_mut().expect("set above");
                if z.next >= z.end {
                    if self.in_flight > 0 {
                        return Ok(Next::Wait);
                    }
                    ctx.pool.retire(z.start);
                    let (start, cap) = ctx.take_zone()?;
                    *z = WriteZone { start, end: start + cap, next: start };
                }
                let left = z.end - z.next;
                let (blocks, rec) = if left >= n { (n, record) } else { (left, false) };
                let op = if append {
                    ZoneOp::Append { zslba: z.start, fua: false }
                } else {
                    ZoneOp::Write { lba: z.next, fua: false, placement: None }
                };
                z.next += blocks;
                Next::Op(op, (blocks * bsz) as usize, rec)
            }
            Work::Fill { next, end } => {
                if *next >= *end {
                    return Ok(Next::Done);
                }
                let blocks = n.min(*end - *next);
                let op = ZoneOp::Write { lba: *next, fua: false, placement: None };
                *next += blocks;
                Next::Op(op, (blocks * bsz) as usize, false)
            }
            Work::RandomRead { extents } => {
                if extents.is_empty() {
                    return Ok(Next::Done);
                }
                let (first, blocks) = extents[ctx.rng.gen_range(0..extents.len())];
                let slots = (blocks / n.max(1)).max(1);
                let lba = first + ctx.rng.gen_range(0..slots) * n;
                Next::Op(ZoneOp::Read { lba }, self.bs, record)
            }
            Work::SeqRead { extents, index, offset } => {
                if extents.is_empty() {
                    return Ok(Next::Done);
                }
                let (first, blocks) = extents[*index];
                if *offset + n > blocks {
                    *index = (*index + 1) % extents.len();
                    *offset = 0;
                    let (first, _) = extents[*index];
                    *offset = n;
                    return Ok(Next::Op(ZoneOp::Read { lba: first }, self.bs, record));
                }
                let lba = first + *offset;
                *offset += n;
                Next::Op(ZoneOp::Read { lba }, self.bs, record)
            }
            Work::Actions { ops } => match ops.pop_front() {
                Some(op) => Next::Op(op, 0, record),
                None => Next::Done,
            },
        })
    }

    fn buffer(&mut self, ctx: &Ctx<'_>, len: usize) -> Result<Option<IoBuffer>, CharacterizeError> {
        if len == 0 {
            return Ok(None);
        }
        let mut b = match self.buffers.pop() {
            Some(b) => b,
            None => ctx.data_buffer(self.bs.max(len))?,
        };
        b.set_len(len)?;
        Ok(Some(b))
    }
}

/// One command in flight.
#[derive(Clone, Copy)]
struct InFlight {
    stream: usize,
    submitted_at: u64,
    bytes: usize,
    record: bool,
}

/// Runs the streams until every non-background stream is done (background
/// streams then stop submitting), then waits for everything in flight.
pub(crate) fn run(ctx: &mut Ctx<'_>, streams: &mut [Stream]) -> Result<(), CharacterizeError> {
    // Only measured streams' late completions matter to a point; a fill's
    // do not change any figure.
    let late0 = if streams.iter().any(|s| s.record) { ctx.late_reading() } else { None };
    let r = run_streams(ctx, streams);
    ctx.late_since(late0);
    r
}

fn run_streams(ctx: &mut Ctx<'_>, streams: &mut [Stream]) -> Result<(), CharacterizeError> {
    let virtual_clock = clock::is_virtual(ctx.dev);
    let capacity = ctx.q.capacity();
    let wanted: usize = streams.iter().map(|s| s.depth).sum();
    if wanted > capacity {
        return Err(CharacterizeError::Internal(format!(
            "{wanted} commands in flight on a queue of {capacity}"
        )));
    }
    let mut slots: Vec<Option<InFlight>> = vec![None; capacity];
    let mut free_slots: Vec<usize> = (0..capacity).rev().collect();
    let mut done: Vec<Completion> = Vec::with_capacity(capacity);
    let mut last_progress = Instant::now();
    let mut force = false;
    let mut queue_full = 0u64;
    let mut report_at = Instant::now() + Duration::from_secs(10);
    loop {
        if Instant::now() > report_at {
            report_at = Instant::now() + Duration::from_secs(10);
            tracing::debug!(
                device_ns = ctx.now(),
                outstanding = ctx.q.outstanding(),
                completed = streams.iter().map(|s| s.ops).sum::<u64>(),
                queue_full,
                "still running"
            );
        }
        let now = ctx.now();
        let foreground_done =
            streams.iter().filter(|s| !s.background).all(|s| s.stopped_submitting(now));
        if foreground_done {
            for s in streams.iter_mut().filter(|s| s.background) {
                s.exhausted = true;
            }
        }
        let mut submitted = false;
        'streams: for (i, s) in streams.iter_mut().enumerate() {
            while s.in_flight < s.depth && (s.pending.is_some() || !s.stopped_submitting(now)) {
                let next = s.next(ctx, now, force)?;
                let (op, len, record) = match next {
                    Next::Op(op, len, record) => (op, len, record),
                    Next::Wait => break,
                    Next::Done => {
                        s.exhausted = true;
                        break;
                    }
                };
                force = false;
                let buffer = s.buffer(ctx, len)?;
                let slot = free_slots.pop().ok_or_else(|| {
                    CharacterizeError::Internal("no free slot for a command".into())
                })?;
                let t = ctx.now();
                if let Err(r) = ctx.q.submit(op.clone(), buffer, slot as u64) {
                    if !r.is_queue_full() {
                        return Err(CharacterizeError::command(&describe(&op), r.error));
                    }
                    // No room in the queue now (its submission ring waits
                    // for the device): poll, then submit the same again.
                    free_slots.push(slot);
                    if let Some(b) = r.buffer {
                        s.buffers.push(b);
                    }
                    s.pending = Some((op, len, record));
                    queue_full += 1;
                    break 'streams;
                }
                slots[slot] = Some(InFlight { stream: i, submitted_at: t, bytes: len, record });
                s.in_flight += 1;
                s.issued += 1;
                if record {
                    s.submitted += 1;
                    s.first_submit.get_or_insert(t);
                }
                if let Some(rate) = s.rate {
                    s.next_at = s.next_at.max(t) + (len as f64 / rate) as u64;
                }
                submitted = true;
            }
        }
        if submitted {
            ctx.q.ring();
        }
        done.clear();
        let n = ctx.q.poll(usize::MAX, &mut |c| done.push(c));
        if n > 0 {
            let t = ctx.now();
            last_progress = Instant::now();
            for c in done.drain(..) {
                let slot = c.tag as usize;
                let f = slots.get_mut(slot).and_then(Option::take).ok_or_else(|| {
                    CharacterizeError::Internal(format!("completion with unknown tag {}", c.tag))
                })?;
                free_slots.push(slot);
                let s = &mut streams[f.stream];
                s.in_flight -= 1;
                if let Err(e) = c.result {
                    return Err(CharacterizeError::Device(e));
                }
                if let Some(b) = c.buffer {
                    s.buffers.push(b);
                }
                if f.record {
                    s.hist.record(t.saturating_sub(f.submitted_at));
                    s.ops += 1;
                    s.bytes += f.bytes as u64;
                    s.last_complete = t;
                }
            }
            continue;
        }
        if ctx.q.outstanding() == 0 {
            let now = ctx.now();
            if streams.iter().any(|s| s.pending.is_some()) {
                // Refused for lack of room with nothing in flight: no
                // completion will ever make room.
                return Err(CharacterizeError::Stalled(
                    "the queue refuses new commands with none in flight (the submission \
                     queue head the device last reported lags behind)"
                        .into(),
                ));
            }
            if streams.iter().all(|s| s.finished(now)) {
                if queue_full > 0 {
                    tracing::debug!(
                        times = queue_full,
                        "the queue refused submissions for lack of room"
                    );
                }
                return Ok(());
            }
            // Something waits for its rate with nothing in flight. Device
            // time only moves on a virtual clock when commands complete, so
            // there the waiting stream goes now; a real clock is waited on.
            if virtual_clock {
                force = true;
            } else {
                std::hint::spin_loop();
            }
        } else if last_progress.elapsed() > STALL {
            return Err(CharacterizeError::Stalled(format!(
                "no completion for two minutes with {} commands outstanding",
                ctx.q.outstanding()
            )));
        } else {
            std::hint::spin_loop();
        }
    }
}

impl CharacterizeError {
    pub(crate) fn command(what: &str, e: DeviceError) -> CharacterizeError {
        CharacterizeError::Command { what: what.to_string(), source: e }
    }
}
