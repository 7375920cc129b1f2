//! [`DriverQueue`]: a [`ZoneQueue`] over one driver queue pair.
//!
//! Asynchronous submissions take a slot of a preallocated table; the slot
//! index is the driver's tag, and the slot keeps the caller's tag, the
//! command's kind and LBA (for error messages), and the caller's buffer
//! when it had to be copied through a DMA buffer. Blocking commands use the
//! driver's blocking calls, which keep other completions for the next poll.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use zns_driver::{DmaBuffer, QueuePair, ReportRequest};
use zns_spec::SubmissionEntry;

use super::Shared;
use crate::buffer::IoBuffer;
use crate::command::{self, check_ranges, format0, no_buffer, stray_buffer};
use crate::device::{Data, ZoneQueue};
use crate::error::{DeviceError, OpKind, Result};
use crate::info::DeviceInfo;
use crate::op::{Completion, Rejected, ZoneOp};
use crate::zone::Target;

/// What an outstanding asynchronous command needs at completion.
#[derive(Debug, Default)]
struct Slot {
    tag: u64,
    op: Option<OpKind>,
    lba: Option<u64>,
    /// The caller's buffer when a DMA buffer stood in for it; `true` when
    /// the data comes back from the device into it.
    origin: Option<(IoBuffer, bool)>,
    /// The DMA buffer was the queue's own (Copy ranges): hand back none.
    internal: bool,
    /// Like `origin`, for the metadata buffer of a command with metadata.
    meta_origin: Option<(IoBuffer, bool)>,
}

/// A caller's buffer replaced by a DMA stand-in, and whether the stand-in's
/// bytes are copied back into it at completion.
type Origin = Option<(IoBuffer, bool)>;

/// A caller's buffer as the controller reaches it: the DMA buffer itself,
/// or a stand-in (with the original, and whether the bytes come back).
fn dma_for(
    shared: &Shared,
    buf: IoBuffer,
    to_device: bool,
) -> std::result::Result<(DmaBuffer, Origin), (DeviceError, IoBuffer)> {
    let plain = match buf.into_dma() {
        Ok(dma) => return Ok((dma, None)),
        Err(plain) => plain,
    };
    let pool = shared.ctrl.pool();
    let stand_in = if to_device {
        pool.alloc(plain.len()).map(|mut d| {
            d.as_mut_slice().copy_from_slice(&plain);
            d
        })
    } else {
        pool.alloc_zeroed(plain.len())
    };
    match stand_in {
        Ok(d) => Ok((d, Some((plain, !to_device)))),
        Err(e) => Err((e.into(), plain)),
    }
}

/// The caller's buffer back from what the controller used: the DMA buffer
/// itself, or the original with the stand-in's bytes copied in if they
/// came from the device.
fn give_back(origin: Option<(IoBuffer, bool)>, dma: Option<DmaBuffer>) -> Option<IoBuffer> {
    match (origin, dma) {
        (Some((mut origin, back)), Some(dma)) => {
            if back {
                let n = origin.len().min(dma.len());
                origin[..n].copy_from_slice(&dma.as_slice()[..n]);
            }
            Some(origin)
        }
        (Some((origin, _)), None) => Some(origin),
        (None, dma) => dma.map(IoBuffer::from_dma),
    }
}

/// A queue of the driver backend.
///
/// Thread safety: `Send` but not `Sync`, like the driver's queue pair it
/// owns: one thread submits, rings and polls.
pub struct DriverQueue {
    qp: QueuePair,
    shared: Arc<Shared>,
    slots: Box<[Slot]>,
    free: Vec<u32>,
    deferred: VecDeque<Completion>,
}

impl std::fmt::Debug for DriverQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DriverQueue")
            .field("qp", &self.qp)
            .field("outstanding", &self.outstanding())
            .finish_non_exhaustive()
    }
}

impl DriverQueue {
    pub(crate) fn new(shared: Arc<Shared>, depth: usize) -> Result<Self> {
        if depth == 0 {
            return Err(DeviceError::InvalidArgument("queue depth 0 (at least 1)".into()));
        }
        let mqes = shared.ctrl.info().cap.max_queue_entries() as usize;
        let entries = (depth + 1).min(mqes).min(u16::MAX as usize);
        let qp = shared.ctrl.create_queue_pair(entries as u16)?;
        let n = qp.capacity();
        Ok(DriverQueue {
            qp,
            shared,
            slots: (0..n).map(|_| Slot::default()).collect(),
            free: (0..n as u32).rev().collect(),
            deferred: VecDeque::with_capacity(n),
        })
    }

    /// The driver's queue pair, for raw commands.
    pub fn queue_pair(&mut self) -> &mut QueuePair {
        &mut self.qp
    }

    /// The submission entry of `op` moving `len` bytes.
    fn entry(&self, op: &ZoneOp, len: usize) -> Result<SubmissionEntry> {
        command::entry(&self.shared.info, op, len)
    }

    /// Records a submitted command in slot `slot`.
    fn take_slot(
        &mut self,
        slot: u32,
        op: &ZoneOp,
        tag: u64,
        origin: Option<(IoBuffer, bool)>,
        internal: bool,
    ) {
        let popped = self.free.pop();
        debug_assert_eq!(popped, Some(slot));
        self.slots[slot as usize] =
            Slot { tag, op: Some(op.kind()), lba: op.lba(), origin, internal, meta_origin: None };
    }

    /// Submits `cmd` moving `buf` and its metadata `meta` (both checked).
    #[allow(clippy::too_many_arguments, clippy::result_large_err)]
    fn submit_with_metadata(
        &mut self,
        slot: u32,
        op: &ZoneOp,
        cmd: SubmissionEntry,
        buf: IoBuffer,
        meta: IoBuffer,
        to_device: bool,
        tag: u64,
    ) -> Result<(), Rejected> {
        let rejoin = |mut data: IoBuffer, meta: IoBuffer| {
            data.attach_metadata(meta);
            Some(data)
        };
        let (data, origin) = match dma_for(&self.shared, buf, to_device) {
            Ok(d) => d,
            Err((error, buf)) => return Err(Rejected { error, buffer: rejoin(buf, meta) }),
        };
        let (mdata, meta_origin) = match dma_for(&self.shared, meta, to_device) {
            Ok(d) => d,
            Err((error, meta)) => {
                let buf = give_back(origin, Some(data)).expect("a buffer");
                return Err(Rejected { error, buffer: rejoin(buf, meta) });
            }
        };
        if let Err(r) = self.qp.submit_owned_with_metadata(cmd, data, mdata, slot as u64) {
            let error = DeviceError::from_driver(r.error, op.kind(), op.lba());
            let buf = give_back(origin, Some(r.buffer)).expect("a buffer");
            let meta = give_back(meta_origin, r.metadata.map(|m| *m)).expect("a metadata buffer");
            return Err(Rejected { error, buffer: rejoin(buf, meta) });
        }
        self.take_slot(slot, op, tag, origin, false);
        self.slots[slot as usize].meta_origin = meta_origin;
        Ok(())
    }

    /// Turns a driver completion into the caller's, freeing its slot.
    fn finish(
        slots: &mut [Slot],
        free: &mut Vec<u32>,
        c: zns_driver::Completion,
    ) -> Option<Completion> {
        let i = usize::try_from(c.tag).ok().filter(|&i| i < slots.len())?;
        let slot = std::mem::take(&mut slots[i]);
        let op = slot.op?;
        free.push(i as u32);
        let result = match c.error() {
            None if op == OpKind::Append => Ok(c.result),
            None => Ok(0),
            Some(e) => Err(DeviceError::Nvme { status: e.status, op, lba: slot.lba }),
        };
        let mut buffer = match (slot.origin, c.buffer) {
            (None, _) if slot.internal => None,
            (origin, dma) => give_back(origin, dma),
        };
        if let (Some(b), Some(meta)) = (&mut buffer, give_back(slot.meta_origin, c.metadata)) {
            b.attach_metadata(meta);
        }
        Some(Completion { tag: slot.tag, op, result, buffer })
    }

    /// Polls the driver until the queue has room for one more command,
    /// keeping the completions for [`ZoneQueue::poll`].
    fn make_room(&mut self) -> Result<()> {
        // The clock is read only when the queue has stayed full a while.
        let mut start: Option<Instant> = None;
        let mut idle: u32 = 0;
        while self.qp.is_full() {
            let (slots, free, deferred) = (&mut self.slots, &mut self.free, &mut self.deferred);
            let got = self.qp.poll(usize::MAX, |c| {
                if let Some(c) = Self::finish(slots, free, c) {
                    deferred.push_back(c);
                }
            });
            if got > 0 {
                idle = 0;
                continue;
            }
            if self.shared.ctrl.is_failed() {
                return Err(DeviceError::Driver(zns_driver::Error::ControllerFailed));
            }
            idle = idle.saturating_add(1);
            if idle.is_multiple_of(64) {
                let waited = start.get_or_insert_with(Instant::now).elapsed();
                if waited > self.qp.timeout() {
                    return Err(DeviceError::Timeout {
                        what: "room in a full queue",
                        after: waited,
                    });
                }
                std::thread::yield_now();
            }
        }
        Ok(())
    }

    /// Runs `f` on a DMA buffer the device fills: `buf` itself, or a
    /// stand-in whose bytes are copied back.
    fn with_dma_in(
        &mut self,
        buf: &mut IoBuffer,
        f: impl FnOnce(&mut QueuePair, &Shared, &mut DmaBuffer) -> zns_driver::Result<u64>,
    ) -> std::result::Result<u64, Failure> {
        if let Some(d) = buf.as_dma_mut() {
            return f(&mut self.qp, &self.shared, d).map_err(Failure::Driver);
        }
        let mut d = self.shared.ctrl.pool().alloc_zeroed(buf.len()).map_err(Failure::Driver)?;
        let r = f(&mut self.qp, &self.shared, &mut d).map_err(Failure::Driver)?;
        buf.copy_from_slice(d.as_slice());
        Ok(r)
    }

    /// Runs `f` on a DMA buffer holding the bytes of `buf`.
    fn with_dma_out(
        &mut self,
        buf: &IoBuffer,
        f: impl FnOnce(&mut QueuePair, &Shared, &DmaBuffer) -> zns_driver::Result<u64>,
    ) -> std::result::Result<u64, Failure> {
        if let Some(d) = buf.as_dma() {
            return f(&mut self.qp, &self.shared, d).map_err(Failure::Driver);
        }
        let mut d = self.shared.ctrl.pool().alloc(buf.len()).map_err(Failure::Driver)?;
        d.as_mut_slice().copy_from_slice(buf);
        f(&mut self.qp, &self.shared, &d).map_err(Failure::Driver)
    }
}

impl DriverQueue {
    /// [`ZoneQueue::execute`] of a Read, Write or Zone Append whose buffer
    /// carries metadata.
    fn execute_metadata(&mut self, op: &ZoneOp, data: Data<'_>) -> Result<u64> {
        let info = &self.shared.info;
        let driver = |e| DeviceError::from_driver(e, op.kind(), op.lba());
        let pool = self.shared.ctrl.pool();
        let done = match data {
            Data::FromDevice(buf) => {
                command::check_metadata(info, op, buf)?;
                let cmd = command::entry(info, op, buf.len())?;
                if op.data_to_device() != Some(false) {
                    return Err(command::wrong_way(op));
                }
                let mut meta = buf.detach_metadata().expect("checked above");
                let (mut d, mut m) = match (buf.as_dma(), meta.as_dma()) {
                    (Some(_), Some(_)) => (None, None),
                    _ => (
                        Some(pool.alloc_zeroed(buf.len()).map_err(driver)?),
                        Some(pool.alloc_zeroed(meta.len()).map_err(driver)?),
                    ),
                };
                let r = match (&mut d, &mut m) {
                    (Some(d), Some(m)) => self.qp.execute_with_metadata_in(cmd, d, m),
                    _ => {
                        let (b, mm) = (buf.as_dma_mut(), meta.as_dma_mut());
                        let (b, mm) = (b.expect("DMA data"), mm.expect("DMA metadata"));
                        self.qp.execute_with_metadata_in(cmd, b, mm)
                    }
                };
                if let (Ok(_), Some(d), Some(m)) = (&r, &d, &m) {
                    buf.copy_from_slice(d.as_slice());
                    meta.copy_from_slice(m.as_slice());
                }
                buf.attach_metadata(meta);
                r
            }
            Data::ToDevice(buf) => {
                command::check_metadata(info, op, buf)?;
                if let ZoneOp::Append { .. } = op {
                    command::check_append_len(info, buf.len())?;
                }
                let cmd = command::entry(info, op, buf.len())?;
                if op.data_to_device() != Some(true) {
                    return Err(command::wrong_way(op));
                }
                let meta = buf.metadata().expect("checked above");
                match (buf.as_dma(), meta.as_dma()) {
                    (Some(d), Some(m)) => self.qp.execute_with_metadata_out(cmd, d, m),
                    _ => {
                        let mut d = pool.alloc(buf.len()).map_err(driver)?;
                        d.as_mut_slice().copy_from_slice(buf);
                        let mut m = pool.alloc(meta.len()).map_err(driver)?;
                        m.as_mut_slice().copy_from_slice(meta);
                        self.qp.execute_with_metadata_out(cmd, &d, &m)
                    }
                }
            }
            Data::None => return Err(no_buffer(op)),
        };
        let c = done.map_err(driver)?;
        match c.error() {
            Some(e) => Err(DeviceError::Nvme { status: e.status, op: op.kind(), lba: op.lba() }),
            None if op.kind() == OpKind::Append => Ok(c.result),
            None => Ok(0),
        }
    }
}

impl DriverQueue {
    /// [`ZoneQueue::execute`] of a command whose data the queue builds
    /// (a Reclaim Unit Handle Update's placement identifiers).
    fn execute_own_data(&mut self, op: &ZoneOp) -> std::result::Result<u64, Failure> {
        let bytes = match command::own_data(op) {
            Some(b) => b.map_err(Failure::Device)?,
            None => return Err(Failure::Device(no_buffer(op))),
        };
        let cmd = self.entry(op, 0).map_err(Failure::Device)?;
        let mut d = self.shared.ctrl.pool().alloc(bytes.len()).map_err(Failure::Driver)?;
        d.as_mut_slice().copy_from_slice(&bytes);
        self.qp.execute(cmd, Some(&mut d)).map(|_| 0).map_err(Failure::Driver)
    }
}

/// A blocking command's failure before it is given its context.
enum Failure {
    Driver(zns_driver::Error),
    Device(DeviceError),
}

impl ZoneQueue for DriverQueue {
    fn info(&self) -> &DeviceInfo {
        &self.shared.info
    }

    fn alloc(&self, len: usize) -> Result<IoBuffer> {
        self.shared.alloc(len)
    }

    fn capacity(&self) -> usize {
        self.slots.len()
    }

    fn outstanding(&self) -> usize {
        self.slots.len() - self.free.len() + self.deferred.len()
    }

    fn submit(&mut self, op: ZoneOp, buffer: Option<IoBuffer>, tag: u64) -> Result<(), Rejected> {
        let Some(&slot) = self.free.last() else {
            return Err(Rejected { error: DeviceError::QueueFull, buffer });
        };
        if self.qp.is_full() {
            return Err(Rejected { error: DeviceError::QueueFull, buffer });
        }
        let driver_error =
            |e: zns_driver::Error, op: &ZoneOp| DeviceError::from_driver(e, op.kind(), op.lba());
        match (op.data_to_device(), buffer) {
            (None, Some(b)) => Err(Rejected { error: stray_buffer(&op), buffer: Some(b) }),
            (Some(_), None) => Err(Rejected { error: no_buffer(&op), buffer: None }),
            (None, None) => {
                let cmd = self.entry(&op, 0).map_err(|error| Rejected { error, buffer: None })?;
                let own = command::own_data(&op);
                let internal = own.is_some();
                let r = match own {
                    Some(bytes) => {
                        let list = bytes
                            .and_then(|bytes| {
                                let mut d = self.shared.ctrl.pool().alloc(bytes.len())?;
                                d.as_mut_slice().copy_from_slice(&bytes);
                                Ok(d)
                            })
                            .map_err(|error| Rejected { error, buffer: None })?;
                        self.qp.submit_owned(cmd, list, slot as u64).map(drop).map_err(|r| r.error)
                    }
                    None => self.qp.submit_without_data(cmd, slot as u64).map(drop),
                };
                r.map_err(|e| Rejected { error: driver_error(e, &op), buffer: None })?;
                self.take_slot(slot, &op, tag, None, internal);
                Ok(())
            }
            (Some(to_device), Some(mut buf)) => {
                if let ZoneOp::SetZoneExtension { .. } = op {
                    // The device takes exactly the extension size.
                    if let Err(error) = command::pad_extension(&self.shared.info, &mut buf) {
                        return Err(Rejected { error, buffer: Some(buf) });
                    }
                }
                let cmd = match self.entry(&op, buf.len()) {
                    Ok(c) => c,
                    Err(error) => return Err(Rejected { error, buffer: Some(buf) }),
                };
                if let Err(error) = command::check_metadata(&self.shared.info, &op, &buf) {
                    return Err(Rejected { error, buffer: Some(buf) });
                }
                if let Some(meta) = buf.detach_metadata() {
                    return self.submit_with_metadata(slot, &op, cmd, buf, meta, to_device, tag);
                }
                match buf.into_dma() {
                    Ok(dma) => {
                        if let Err(r) = self.qp.submit_owned(cmd, dma, slot as u64) {
                            let error = driver_error(r.error, &op);
                            return Err(Rejected {
                                error,
                                buffer: Some(IoBuffer::from_dma(r.buffer)),
                            });
                        }
                        self.take_slot(slot, &op, tag, None, false);
                    }
                    Err(plain) => {
                        let stand_in = if to_device {
                            self.shared.ctrl.pool().alloc(plain.len()).map(|mut d| {
                                d.as_mut_slice().copy_from_slice(&plain);
                                d
                            })
                        } else {
                            self.shared.ctrl.pool().alloc_zeroed(plain.len())
                        };
                        let dma = match stand_in {
                            Ok(d) => d,
                            Err(e) => {
                                return Err(Rejected { error: e.into(), buffer: Some(plain) })
                            }
                        };
                        if let Err(r) = self.qp.submit_owned(cmd, dma, slot as u64) {
                            return Err(Rejected {
                                error: driver_error(r.error, &op),
                                buffer: Some(plain),
                            });
                        }
                        self.take_slot(slot, &op, tag, Some((plain, !to_device)), false);
                    }
                }
                Ok(())
            }
        }
    }

    fn ring(&mut self) {
        self.qp.ring();
    }

    fn poll(&mut self, max: usize, f: &mut dyn FnMut(Completion)) -> usize {
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
            let (slots, free) = (&mut self.slots, &mut self.free);
            self.qp.poll(max - n, |c| {
                if let Some(c) = Self::finish(slots, free, c) {
                    f(c);
                    n += 1;
                }
            });
        }
        n
    }

    fn execute(&mut self, op: &ZoneOp, data: Data<'_>) -> Result<u64> {
        // The driver's own calls below build some entries themselves.
        crate::fdp::check(&self.shared.info, op)?;
        self.make_room()?;
        let with_metadata = match &data {
            Data::ToDevice(b) => b.metadata().is_some(),
            Data::FromDevice(b) => b.metadata().is_some(),
            Data::None => false,
        };
        if with_metadata {
            return self.execute_metadata(op, data);
        }
        let r = match (op, data) {
            (ZoneOp::Read { lba }, Data::FromDevice(buf)) => {
                self.with_dma_in(buf, |q, s, d| q.read(&s.ns, *lba, d).map(|()| 0))
            }
            (ZoneOp::Write { lba, fua, placement }, Data::ToDevice(buf)) => {
                let (lba, fua, placement) = (*lba, *fua, *placement);
                self.with_dma_out(buf, |q, s, d| {
                    q.write_placed(&s.ns, lba, d, fua, placement).map(|()| 0)
                })
            }
            (ZoneOp::Append { zslba, fua }, Data::ToDevice(buf)) => {
                command::check_append_len(&self.shared.info, buf.len())?;
                self.with_dma_out(buf, |q, s, d| q.append_with(&s.ns, *zslba, d, *fua))
            }
            (ZoneOp::WriteZeroes { lba, blocks }, Data::None) => self
                .qp
                .write_zeroes(&self.shared.ns, *lba, *blocks)
                .map(|()| 0)
                .map_err(Failure::Driver),
            (ZoneOp::Flush, Data::None) => {
                self.qp.flush(&self.shared.ns).map(|()| 0).map_err(Failure::Driver)
            }
            (ZoneOp::Zone { action, target }, Data::None) => {
                let ns = &self.shared.ns;
                let a = action.send_action();
                match target {
                    Target::Zone(slba) => self.qp.zone_send(ns, *slba, a),
                    Target::All => self.qp.zone_send_all(ns, a),
                }
                .map(|()| 0)
                .map_err(Failure::Driver)
            }
            (ZoneOp::SetZoneExtension { zslba }, Data::ToDevice(buf)) => self
                .qp
                .set_zone_extension(&self.shared.ns, *zslba, buf)
                .map(|()| 0)
                .map_err(Failure::Driver),
            (ZoneOp::ReportZones { slba, filter, partial, extended }, Data::FromDevice(buf)) => {
                let req = ReportRequest {
                    slba: *slba,
                    filter: *filter,
                    partial: *partial,
                    extended: *extended,
                };
                self.with_dma_in(buf, |q, s, d| q.zone_receive(&s.ns, req, d).map(|_| 0))
            }
            (ZoneOp::Copy { ranges, dest }, Data::None) => match check_ranges(ranges) {
                Ok(()) => self
                    .qp
                    .copy(&self.shared.ns, *dest, &format0(ranges))
                    .map(|()| 0)
                    .map_err(Failure::Driver),
                Err(e) => Err(Failure::Device(e)),
            },
            (ZoneOp::OpenZrwa { zslba }, Data::None) => {
                self.qp.open_zone_zrwa(&self.shared.ns, *zslba).map(|()| 0).map_err(Failure::Driver)
            }
            (ZoneOp::CommitZrwa { lba }, Data::None) => {
                self.qp.flush_zrwa(&self.shared.ns, *lba).map(|()| 0).map_err(Failure::Driver)
            }
            (ZoneOp::RuhStatus, Data::FromDevice(buf)) => match self.entry(op, buf.len()) {
                Ok(cmd) => self.with_dma_in(buf, |q, _, d| q.execute(cmd, Some(d)).map(|_| 0)),
                Err(e) => Err(Failure::Device(e)),
            },
            (ZoneOp::RuhUpdate { .. }, Data::None) => self.execute_own_data(op),
            (op, Data::None) => Err(Failure::Device(no_buffer(op))),
            (op, _) if op.data_to_device().is_none() => Err(Failure::Device(stray_buffer(op))),
            (op, _) => Err(Failure::Device(command::wrong_way(op))),
        };
        r.map_err(|f| match f {
            Failure::Driver(e) => DeviceError::from_driver(e, op.kind(), op.lba()),
            Failure::Device(e) => e,
        })
    }
}
