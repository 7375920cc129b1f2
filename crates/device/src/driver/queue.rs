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
use zns_spec::command::{
    CopyCmd, Flush, ReadWrite, WriteZeroes, ZoneAppend, ZoneReceive, ZoneSend,
};
use zns_spec::copy::{SourceRangeFormat0, MAX_RANGES};
use zns_spec::{SubmissionEntry, ZoneReceiveAction, ZoneSendAction};

use super::Shared;
use crate::buffer::IoBuffer;
use crate::device::{Data, ZoneQueue};
use crate::error::{DeviceError, OpKind, Result};
use crate::info::DeviceInfo;
use crate::op::{Completion, CopyRange, Rejected, ZoneOp};
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

    fn blocks(&self, op: &ZoneOp, len: usize) -> Result<u32> {
        let bs = self.shared.info.block_size as usize;
        if len == 0 || len % bs != 0 {
            return Err(DeviceError::InvalidArgument(format!(
                "{}: {len} bytes is not a whole, non-zero number of {bs}-byte blocks",
                op.kind()
            )));
        }
        u32::try_from(len / bs)
            .map_err(|_| DeviceError::InvalidArgument(format!("{}: {len} bytes", op.kind())))
    }

    /// The submission entry of `op` moving `len` bytes.
    fn entry(&self, op: &ZoneOp, len: usize) -> Result<SubmissionEntry> {
        let nsid = self.shared.ns.nsid;
        let built = |r: std::result::Result<SubmissionEntry, zns_spec::command::CommandError>| {
            r.map_err(|e| DeviceError::InvalidArgument(format!("{}: {e}", op.kind())))
        };
        match op {
            ZoneOp::Read { lba } => built(ReadWrite::new(nsid, *lba, self.blocks(op, len)?).read()),
            ZoneOp::Write { lba, fua } => {
                built(ReadWrite::new(nsid, *lba, self.blocks(op, len)?).with_fua(*fua).write())
            }
            ZoneOp::Append { zslba, fua } => {
                let zasl = self.shared.info.zasl_bytes;
                if len > zasl {
                    return Err(DeviceError::InvalidArgument(format!(
                        "zone append of {len} bytes exceeds the device's limit (ZASL) of {zasl} bytes"
                    )));
                }
                let mut a = ZoneAppend::new(nsid, *zslba, self.blocks(op, len)?);
                a.fua = *fua;
                built(a.to_entry())
            }
            ZoneOp::WriteZeroes { lba, blocks } => {
                built(WriteZeroes::new(nsid, *lba, *blocks).to_entry())
            }
            ZoneOp::Flush => Ok(Flush { nsid }.to_entry()),
            ZoneOp::Zone { action, target: Target::Zone(slba) } => {
                Ok(ZoneSend::new(nsid, *slba, action.send_action()).to_entry())
            }
            ZoneOp::Zone { action, target: Target::All } => {
                Ok(ZoneSend::all(nsid, action.send_action()).to_entry())
            }
            ZoneOp::SetZoneExtension { zslba } => {
                Ok(ZoneSend::new(nsid, *zslba, ZoneSendAction::SetDescriptorExtension).to_entry())
            }
            ZoneOp::ReportZones { slba, filter, partial, extended } => {
                if len < 64 || len % 4 != 0 {
                    return Err(DeviceError::InvalidArgument(format!(
                        "zone report buffer of {len} bytes (whole dwords, at least 64)"
                    )));
                }
                let mut r = ZoneReceive::report(nsid, *slba, len as u64, *filter);
                r.partial = *partial;
                if *extended {
                    r.action = ZoneReceiveAction::ExtendedReport;
                }
                built(r.to_entry())
            }
            ZoneOp::Copy { ranges, dest } => {
                check_ranges(ranges)?;
                built(CopyCmd::new(nsid, *dest, ranges.len() as u16).to_entry())
            }
        }
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
            Slot { tag, op: Some(op.kind()), lba: op.lba(), origin, internal };
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
        let buffer = match (slot.origin, c.buffer) {
            (Some((mut origin, back)), Some(dma)) => {
                if back {
                    let n = origin.len().min(dma.len());
                    origin[..n].copy_from_slice(&dma.as_slice()[..n]);
                }
                Some(origin)
            }
            (Some((origin, _)), None) => Some(origin),
            (None, _) if slot.internal => None,
            (None, dma) => dma.map(IoBuffer::from_dma),
        };
        Some(Completion { tag: slot.tag, op, result, buffer })
    }

    /// Polls the driver until the queue has room for one more command,
    /// keeping the completions for [`ZoneQueue::poll`].
    fn make_room(&mut self) -> Result<()> {
        let start = Instant::now();
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
            if idle % 64 == 0 {
                if start.elapsed() > self.qp.timeout() {
                    return Err(DeviceError::Timeout {
                        what: "room in a full queue",
                        after: start.elapsed(),
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

/// A blocking command's failure before it is given its context.
enum Failure {
    Driver(zns_driver::Error),
    Device(DeviceError),
}

fn check_ranges(ranges: &[CopyRange]) -> Result<()> {
    if ranges.is_empty() || ranges.len() > MAX_RANGES {
        return Err(DeviceError::InvalidArgument(format!(
            "{} copy source ranges (1..={MAX_RANGES})",
            ranges.len()
        )));
    }
    if let Some(r) =
        ranges.iter().find(|r| r.blocks == 0 || r.blocks > SourceRangeFormat0::MAX_BLOCKS)
    {
        return Err(DeviceError::InvalidArgument(format!(
            "copy source range of {} blocks at LBA {} (1..=65536)",
            r.blocks, r.slba
        )));
    }
    Ok(())
}

fn format0(ranges: &[CopyRange]) -> Vec<SourceRangeFormat0> {
    ranges.iter().map(|r| SourceRangeFormat0::new(r.slba, r.blocks)).collect()
}

fn no_buffer(op: &ZoneOp) -> DeviceError {
    DeviceError::InvalidArgument(format!("{} needs a buffer", op.kind()))
}

fn stray_buffer(op: &ZoneOp) -> DeviceError {
    DeviceError::InvalidArgument(format!("{} takes no buffer", op.kind()))
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
                let r = match &op {
                    ZoneOp::Copy { ranges, .. } => {
                        let list = SourceRangeFormat0::encode_list(&format0(ranges))
                            .map_err(|e| DeviceError::InvalidArgument(e.to_string()))
                            .and_then(|bytes| {
                                let mut d = self.shared.ctrl.pool().alloc(bytes.len())?;
                                d.as_mut_slice().copy_from_slice(&bytes);
                                Ok(d)
                            })
                            .map_err(|error| Rejected { error, buffer: None })?;
                        self.qp.submit_owned(cmd, list, slot as u64).map(drop).map_err(|r| r.error)
                    }
                    _ => self.qp.submit_without_data(cmd, slot as u64).map(drop),
                };
                r.map_err(|e| Rejected { error: driver_error(e, &op), buffer: None })?;
                let internal = matches!(op, ZoneOp::Copy { .. });
                self.take_slot(slot, &op, tag, None, internal);
                Ok(())
            }
            (Some(to_device), Some(mut buf)) => {
                if let ZoneOp::SetZoneExtension { .. } = op {
                    // The device takes exactly the extension size.
                    let ext = self.shared.info.capabilities.extension_bytes;
                    let len = buf.len();
                    if ext == 0 || len > ext || buf.capacity() < ext {
                        let error = DeviceError::InvalidArgument(format!(
                            "{len} bytes of zone extension data; the device takes {ext}"
                        ));
                        return Err(Rejected { error, buffer: Some(buf) });
                    }
                    if let Err(error) = buf.set_len(ext) {
                        return Err(Rejected { error, buffer: Some(buf) });
                    }
                    buf[len..].fill(0);
                }
                let cmd = match self.entry(&op, buf.len()) {
                    Ok(c) => c,
                    Err(error) => return Err(Rejected { error, buffer: Some(buf) }),
                };
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
        self.make_room()?;
        let r = match (op, data) {
            (ZoneOp::Read { lba }, Data::FromDevice(buf)) => {
                self.with_dma_in(buf, |q, s, d| q.read(&s.ns, *lba, d).map(|()| 0))
            }
            (ZoneOp::Write { lba, fua }, Data::ToDevice(buf)) => {
                self.with_dma_out(buf, |q, s, d| q.write_with(&s.ns, *lba, d, *fua).map(|()| 0))
            }
            (ZoneOp::Append { zslba, fua }, Data::ToDevice(buf)) => {
                let zasl = self.shared.info.zasl_bytes;
                if buf.len() > zasl {
                    return Err(DeviceError::InvalidArgument(format!(
                        "zone append of {} bytes exceeds the device's limit (ZASL) of {zasl} bytes",
                        buf.len()
                    )));
                }
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
            (op, Data::None) => Err(Failure::Device(no_buffer(op))),
            (op, _) if op.data_to_device().is_none() => Err(Failure::Device(stray_buffer(op))),
            (op, _) => Err(Failure::Device(DeviceError::InvalidArgument(format!(
                "{}: the buffer moves the wrong way",
                op.kind()
            )))),
        };
        r.map_err(|f| match f {
            Failure::Driver(e) => DeviceError::from_driver(e, op.kind(), op.lba()),
            Failure::Device(e) => e,
        })
    }
}
