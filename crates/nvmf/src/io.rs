//! I/O commands: each capsule's submission entry decoded into a
//! [`ZoneOp`] on the namespace's device, run on this connection's own
//! queue to it, and its status passed back unchanged.
//!
//! Each connection keeps one queue and one transfer buffer per namespace,
//! made at first use; a command reuses them (the buffer is only resized
//! within its capacity), so steady-state I/O allocates nothing here.
//! Reads and small writes may instead run in flight (`crate::inflight`),
//! on the same queue with buffers of their own.

use std::sync::atomic::Ordering;

use zns_device::{CopyRange, Data, DeviceError, IoBuffer, Target, ZoneAction, ZoneOp, ZoneQueue};
use zns_spec::command::{
    CopyCmd, DatasetManagement, DsmRange, ReadWrite, WriteZeroes, ZoneAppend, ZoneReceive, ZoneSend,
};
use zns_spec::copy::SourceRangeFormat0;
use zns_spec::{IoOpcode, Status, StatusCode, SubmissionEntry, ZoneSendAction};

use crate::controller::Controller;
use crate::subsystem::{Backend, Namespace, Subsystem};

/// Queue depth of the per-connection device queues: the commands in
/// flight, and one more run alone beside them.
const DEPTH: usize = crate::inflight::DEPTH + 1;

/// How an I/O command ended: its status, result (the LBA of a Zone
/// Append), and the bytes of output data for the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IoDone {
    pub status: Status,
    pub result: u64,
    pub data: usize,
}

impl IoDone {
    pub(crate) fn ok(result: u64, data: usize) -> IoDone {
        IoDone { status: Status::SUCCESS, result, data }
    }

    pub(crate) fn err(code: StatusCode) -> IoDone {
        IoDone { status: code.status(), result: 0, data: 0 }
    }
}

/// One namespace's queue on a connection, its buffer for commands run
/// alone, and the buffers of commands in flight.
pub(crate) struct LaneState {
    pub(crate) queue: Box<dyn ZoneQueue>,
    buf: IoBuffer,
    /// Free buffers of [`crate::inflight::BUFFER_BYTES`] (or the
    /// namespace's transfer limit, if smaller).
    pub(crate) spare: Vec<IoBuffer>,
    /// Buffers made for commands in flight so far (at most
    /// [`crate::inflight::DEPTH`]).
    pub(crate) made: usize,
    /// Commands submitted since the last doorbell.
    pub(crate) unrung: bool,
}

/// One connection's queues and buffers, by namespace.
#[derive(Default)]
pub(crate) struct IoContext {
    pub(crate) lanes: Vec<Option<LaneState>>,
    /// Zeroes for Write Zeroes on block namespaces (made at first use).
    pub(crate) zeros: Vec<u8>,
    /// Commands in flight on the lanes' queues.
    pub(crate) inflight: crate::inflight::Inflight,
}

impl std::fmt::Debug for IoContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IoContext")
            .field("lanes", &self.lanes.len())
            .field("inflight", &self.inflight.len())
            .finish()
    }
}

/// A command's view of its namespace: the queue and the reusable buffer.
pub(crate) struct Lane<'a> {
    pub(crate) queue: &'a mut dyn ZoneQueue,
    pub(crate) buf: &'a mut IoBuffer,
    pub(crate) ns: &'a Namespace,
}

impl IoContext {
    fn lane<'a>(&'a mut self, ns: &'a Namespace) -> Result<Lane<'a>, DeviceError> {
        let l = self.lane_state(ns)?;
        Ok(Lane { queue: l.queue.as_mut(), buf: &mut l.buf, ns })
    }

    /// The namespace's lane, made at first use.
    pub(crate) fn lane_state(&mut self, ns: &Namespace) -> Result<&mut LaneState, DeviceError> {
        let i = ns.nsid as usize - 1;
        if self.lanes.len() <= i {
            self.lanes.resize_with(i + 1, || None);
        }
        if self.lanes[i].is_none() {
            let (dev, q) = match &ns.backend {
                Backend::Zoned(d) => (d, d.queue(DEPTH)?),
                // A device that is not zoned is its conventional namespace.
                Backend::Conventional { device, .. } if !device.info().zoned => {
                    (device, device.queue(DEPTH)?)
                }
                Backend::Conventional { device, .. } => (device, device.conventional_queue(DEPTH)?),
                Backend::Block { .. } => {
                    return Err(DeviceError::Unsupported(format!(
                        "{} is a block device, not a device namespace",
                        ns.name()
                    )))
                }
            };
            let buf = dev.alloc(ns.mdts_bytes().max(ns.block_size() as usize))?;
            self.lanes[i] =
                Some(LaneState { queue: q, buf, spare: Vec::new(), made: 0, unrung: false });
        }
        Ok(self.lanes[i].as_mut().expect("made above"))
    }
}

/// Runs I/O command `sqe`. `host` is the data the host sent (commands that
/// write), `host_room` the bytes its data descriptor offers for data to it
/// (commands that read); output goes to `out`.
pub(crate) fn execute(
    ctx: &mut IoContext,
    sub: &Subsystem,
    ctrl: &Controller,
    sqe: &SubmissionEntry,
    host: &[u8],
    host_room: usize,
    out: &mut Vec<u8>,
) -> IoDone {
    let Some(op) = IoOpcode::from_raw(sqe.opcode()) else {
        return IoDone::err(StatusCode::InvalidOpcode);
    };
    if op == IoOpcode::Flush && sqe.nsid == 0xFFFF_FFFF {
        return flush_all(ctx, sub);
    }
    let Some(ns) = sub.namespace(sqe.nsid) else {
        return IoDone::err(StatusCode::InvalidNamespaceOrFormat);
    };
    if crate::fdp::is_io_management(op) {
        return io_management(ctx, sub, ns, op, sqe, host, host_room, out);
    }
    if let Some(dev) = ns.block() {
        let done =
            crate::block::execute(dev.as_ref(), &mut ctx.zeros, op, sqe, host, host_room, out);
        count(ctrl, op, &done, host.len());
        return done;
    }
    let conventional = ns.conventional().is_some();
    if conventional && !CONVENTIONAL_OPCODES.contains(&op) {
        return IoDone::err(StatusCode::InvalidOpcode);
    }
    let mut lane = match ctx.lane(ns) {
        Ok(l) => l,
        Err(e) => return device_error(&e),
    };
    let done = match op {
        IoOpcode::DatasetManagement if conventional => deallocate(&mut lane, sqe, host),
        IoOpcode::Read => read(&mut lane, sqe, host_room, out),
        IoOpcode::Write => write(&mut lane, sqe, host),
        IoOpcode::ZoneAppend => append(&mut lane, sqe, host),
        IoOpcode::WriteZeroes => {
            let c = WriteZeroes::decode(sqe);
            run(&mut lane, ZoneOp::WriteZeroes { lba: c.slba, blocks: c.blocks }, None)
        }
        IoOpcode::Flush => run(&mut lane, ZoneOp::Flush, None),
        IoOpcode::ZoneMgmtSend => zone_send(&mut lane, sqe, host),
        IoOpcode::ZoneMgmtRecv => zone_receive(&mut lane, sqe, host_room, out),
        IoOpcode::Copy => copy(&mut lane, sqe, host),
        IoOpcode::Compare => compare(&mut lane, sqe, host),
        IoOpcode::Verify => verify(&mut lane, sqe),
        _ => IoDone::err(StatusCode::InvalidOpcode),
    };
    count(ctrl, op, &done, host.len());
    done
}

/// I/O Management Receive or Send on namespace `ns` (see
/// [`crate::fdp::io_target`] for where they run).
#[allow(clippy::too_many_arguments)]
fn io_management(
    ctx: &mut IoContext,
    sub: &Subsystem,
    ns: &Namespace,
    op: IoOpcode,
    sqe: &SubmissionEntry,
    host: &[u8],
    host_room: usize,
    out: &mut Vec<u8>,
) -> IoDone {
    if let Err(d) = crate::fdp::io_target(sub, ns) {
        return d;
    }
    let mut lane = match ctx.lane(ns) {
        Ok(l) => l,
        Err(e) => return device_error(&e),
    };
    match op {
        IoOpcode::IoManagementReceive => crate::fdp::receive(&mut lane, sqe, host_room, out),
        _ => crate::fdp::send(&mut lane, sqe, host),
    }
}

/// Compare: the blocks read and set against the host's data; Compare
/// Failure where they differ.
fn compare(lane: &mut Lane<'_>, sqe: &SubmissionEntry, host: &[u8]) -> IoDone {
    let c = ReadWrite::decode(sqe);
    let len = match transfer(lane, c.blocks, host.len()).and_then(|l| sized(lane, l).map(|_| l)) {
        Ok(l) => l,
        Err(d) => return d,
    };
    let done = run(lane, ZoneOp::Read { lba: c.slba }, Some(false));
    if !done.status.is_success() {
        return done;
    }
    if lane.buf.as_slice()[..len] != host[..len] {
        return IoDone::err(StatusCode::CompareFailure);
    }
    IoDone::ok(0, 0)
}

/// Verify: the blocks read (their checks included) without a transfer, a
/// transfer buffer at a time; the first failure's status.
fn verify(lane: &mut Lane<'_>, sqe: &SubmissionEntry) -> IoDone {
    let c = ReadWrite::decode(sqe);
    let bs = lane.ns.block_size() as u64;
    let per = (lane.buf.capacity() as u64 / bs).max(1);
    let mut at = 0u64;
    while at < c.blocks as u64 {
        let n = per.min(c.blocks as u64 - at);
        if let Err(d) = sized(lane, (n * bs) as usize) {
            return d;
        }
        let done = run(lane, ZoneOp::Read { lba: c.slba + at }, Some(false));
        if !done.status.is_success() {
            return done;
        }
        at += n;
    }
    IoDone::ok(0, 0)
}

/// The NVM command set's commands a device's conventional namespace
/// takes; zone commands and Zone Append are not among them.
const CONVENTIONAL_OPCODES: [IoOpcode; 8] = [
    IoOpcode::Read,
    IoOpcode::Write,
    IoOpcode::WriteZeroes,
    IoOpcode::Flush,
    IoOpcode::Copy,
    IoOpcode::DatasetManagement,
    IoOpcode::Compare,
    IoOpcode::Verify,
];

/// Counts a successful read or write, or a media error, in the
/// controller's statistics.
pub(crate) fn count(ctrl: &Controller, op: IoOpcode, done: &IoDone, written: usize) {
    let s = &ctrl.stats;
    if !done.status.is_success() {
        if done.status.sct == zns_spec::StatusCodeType::MediaError {
            s.media_errors.fetch_add(1, Ordering::Relaxed);
        }
        return;
    }
    match op {
        IoOpcode::Read => {
            s.read_commands.fetch_add(1, Ordering::Relaxed);
            s.bytes_read.fetch_add(done.data as u64, Ordering::Relaxed);
        }
        IoOpcode::Write | IoOpcode::ZoneAppend => {
            s.write_commands.fetch_add(1, Ordering::Relaxed);
            s.bytes_written.fetch_add(written as u64, Ordering::Relaxed);
        }
        _ => {}
    }
}

/// The status of a device error: NVMe statuses pass through; a command
/// the backend refused before it reached the device is an invalid field.
pub(crate) fn device_error(e: &DeviceError) -> IoDone {
    match e {
        DeviceError::Nvme { status, .. } => IoDone { status: *status, result: 0, data: 0 },
        DeviceError::InvalidArgument(why) => {
            tracing::debug!(%why, "command refused by the backend");
            IoDone::err(StatusCode::InvalidField)
        }
        DeviceError::Unsupported(why) => {
            tracing::debug!(%why, "command unsupported by the backend");
            IoDone::err(StatusCode::InvalidOpcode)
        }
        other => {
            tracing::warn!(error = %other, "device failure");
            IoDone::err(StatusCode::InternalError)
        }
    }
}

/// Runs `op` with `lane.buf` as its buffer when `dir` says which way.
pub(crate) fn run(lane: &mut Lane<'_>, op: ZoneOp, dir: Option<bool>) -> IoDone {
    let data = match dir {
        None => Data::None,
        Some(true) => Data::ToDevice(lane.buf),
        Some(false) => Data::FromDevice(lane.buf),
    };
    match lane.queue.execute(&op, data) {
        Ok(result) => IoDone::ok(result, 0),
        Err(e) => device_error(&e),
    }
}

/// Sizes the lane's buffer to `len` bytes, `Err` when it exceeds MDTS.
pub(crate) fn sized(lane: &mut Lane<'_>, len: usize) -> Result<(), IoDone> {
    if len > lane.buf.capacity() {
        return Err(IoDone::err(StatusCode::InvalidField));
    }
    lane.buf.set_len(len).map_err(|_| IoDone::err(StatusCode::InvalidField))
}

/// Bytes of `blocks` blocks, checked against what the data descriptor
/// offers.
fn transfer(lane: &Lane<'_>, blocks: u32, offered: usize) -> Result<usize, IoDone> {
    let len = blocks as usize * lane.ns.block_size() as usize;
    if len > offered {
        return Err(IoDone::err(StatusCode::SglLengthInvalid));
    }
    Ok(len)
}

fn read(lane: &mut Lane<'_>, sqe: &SubmissionEntry, room: usize, out: &mut Vec<u8>) -> IoDone {
    let c = ReadWrite::decode(sqe);
    let len = match transfer(lane, c.blocks, room).and_then(|l| sized(lane, l).map(|_| l)) {
        Ok(l) => l,
        Err(d) => return d,
    };
    let done = run(lane, ZoneOp::Read { lba: c.slba }, Some(false));
    if !done.status.is_success() {
        return done;
    }
    out.clear();
    out.extend_from_slice(&lane.buf.as_slice()[..len]);
    IoDone::ok(0, len)
}

/// Loads `len` bytes of host data into the lane's buffer.
fn load(lane: &mut Lane<'_>, host: &[u8], blocks: u32) -> Result<(), IoDone> {
    let len = transfer(lane, blocks, host.len())?;
    sized(lane, len)?;
    lane.buf.as_mut_slice()[..len].copy_from_slice(&host[..len]);
    Ok(())
}

fn write(lane: &mut Lane<'_>, sqe: &SubmissionEntry, host: &[u8]) -> IoDone {
    let c = ReadWrite::decode(sqe);
    if let Err(d) = load(lane, host, c.blocks) {
        return d;
    }
    run(lane, ZoneOp::Write { lba: c.slba, fua: c.fua, placement: c.placement() }, Some(true))
}

fn append(lane: &mut Lane<'_>, sqe: &SubmissionEntry, host: &[u8]) -> IoDone {
    let c = ZoneAppend::decode(sqe);
    if let Err(d) = load(lane, host, c.blocks) {
        return d;
    }
    run(lane, ZoneOp::Append { zslba: c.zslba, fua: c.fua }, Some(true))
}

fn zone_send(lane: &mut Lane<'_>, sqe: &SubmissionEntry, host: &[u8]) -> IoDone {
    let c = match ZoneSend::decode(sqe) {
        Ok(c) => c,
        Err(e) => return IoDone { status: e.status_code().status(), result: 0, data: 0 },
    };
    let target = if c.select_all { Target::All } else { Target::Zone(c.slba) };
    let zrwa = lane.ns.info().is_some_and(|i| i.capabilities.zrwa.is_some());
    let action = match c.action {
        // Zone random write areas pass through to a backend that has them,
        // with the statuses the specification gives otherwise.
        ZoneSendAction::Open if c.zrwa_allocate && !zrwa => {
            return IoDone::err(StatusCode::InvalidZoneOperationRequest)
        }
        ZoneSendAction::Open if c.zrwa_allocate && c.select_all => {
            return IoDone::err(StatusCode::InvalidField)
        }
        ZoneSendAction::Open if c.zrwa_allocate => {
            return run(lane, ZoneOp::OpenZrwa { zslba: c.slba }, None)
        }
        ZoneSendAction::Open => ZoneAction::Open,
        ZoneSendAction::Close => ZoneAction::Close,
        ZoneSendAction::Finish => ZoneAction::Finish,
        ZoneSendAction::Reset => ZoneAction::Reset,
        ZoneSendAction::Offline => ZoneAction::Offline,
        ZoneSendAction::SetDescriptorExtension => {
            let n = lane.ns.info().map_or(0, |i| i.capabilities.extension_bytes);
            if n == 0 || c.select_all {
                return IoDone::err(StatusCode::InvalidField);
            }
            if host.len() < n {
                return IoDone::err(StatusCode::SglLengthInvalid);
            }
            if let Err(d) = sized(lane, n) {
                return d;
            }
            lane.buf.as_mut_slice()[..n].copy_from_slice(&host[..n]);
            return run(lane, ZoneOp::SetZoneExtension { zslba: c.slba }, Some(true));
        }
        ZoneSendAction::FlushZrwa if c.select_all => return IoDone::err(StatusCode::InvalidField),
        ZoneSendAction::FlushZrwa if !zrwa => {
            return IoDone::err(StatusCode::InvalidZoneOperationRequest)
        }
        ZoneSendAction::FlushZrwa => return run(lane, ZoneOp::CommitZrwa { lba: c.slba }, None),
    };
    run(lane, ZoneOp::Zone { action, target }, None)
}

fn zone_receive(
    lane: &mut Lane<'_>,
    sqe: &SubmissionEntry,
    room: usize,
    out: &mut Vec<u8>,
) -> IoDone {
    let c = match ZoneReceive::decode(sqe) {
        Ok(c) => c,
        Err(e) => return IoDone { status: e.status_code().status(), result: 0, data: 0 },
    };
    // NUMD comes from the wire (up to 16 GiB): checked against MDTS
    // before anything is allocated.
    let len = c.bytes();
    if len > lane.ns.mdts_bytes() {
        return IoDone::err(StatusCode::InvalidField);
    }
    if len > room {
        return IoDone::err(StatusCode::SglLengthInvalid);
    }
    let op = ZoneOp::ReportZones {
        slba: c.slba,
        filter: c.filter,
        partial: c.partial,
        extended: c.extended(),
    };
    // Within MDTS, so within the lane's buffer.
    if let Err(d) = sized(lane, len) {
        return d;
    }
    let done = run(lane, op, Some(false));
    if done.status.is_success() {
        out.clear();
        out.extend_from_slice(&lane.buf.as_slice()[..len]);
    }
    if !done.status.is_success() {
        return done;
    }
    IoDone::ok(0, len)
}

fn copy(lane: &mut Lane<'_>, sqe: &SubmissionEntry, host: &[u8]) -> IoDone {
    let c = CopyCmd::decode(sqe);
    if c.format != 0 {
        return IoDone::err(StatusCode::InvalidField);
    }
    let need = c.ranges as usize * SourceRangeFormat0::SIZE;
    if host.len() < need {
        return IoDone::err(StatusCode::SglLengthInvalid);
    }
    let ranges = match SourceRangeFormat0::decode_ranges(&host[..need], c.ranges as usize) {
        Ok(r) => r,
        Err(_) => return IoDone::err(StatusCode::InvalidField),
    };
    let ranges = ranges.iter().map(|r| CopyRange { slba: r.slba, blocks: r.blocks }).collect();
    run(lane, ZoneOp::Copy { ranges, dest: c.sdlba }, None)
}

/// Dataset Management on a device's conventional namespace: every range is
/// checked first; deallocation (a hint the specification lets a controller
/// act on or not) becomes Write Zeroes of the ranges where the device
/// writes zeroes, which frees an emulator's media. Without the deallocate
/// attribute, or on a device without Write Zeroes, nothing changes.
fn deallocate(lane: &mut Lane<'_>, sqe: &SubmissionEntry, host: &[u8]) -> IoDone {
    let c = DatasetManagement::decode(sqe);
    let Some(ranges) = DsmRange::decode_ranges(host, c.ranges as usize) else {
        return IoDone::err(StatusCode::SglLengthInvalid);
    };
    let cap = lane.ns.blocks();
    if ranges.iter().any(|r| r.slba.checked_add(r.blocks as u64).is_none_or(|end| end > cap)) {
        return IoDone::err(StatusCode::LbaOutOfRange);
    }
    let zeroes = lane.ns.device_info().is_some_and(|i| i.capabilities.write_zeroes);
    if !c.deallocate || !zeroes {
        return IoDone::ok(0, 0);
    }
    for r in &ranges {
        let mut at = 0u64;
        while at < r.blocks as u64 {
            let n = (r.blocks as u64 - at).min(1 << 16) as u32;
            let d = run(lane, ZoneOp::WriteZeroes { lba: r.slba + at, blocks: n }, None);
            if !d.status.is_success() {
                return d;
            }
            at += n as u64;
        }
    }
    IoDone::ok(0, 0)
}

/// Flush of every namespace (NSID FFFFFFFFh).
fn flush_all(ctx: &mut IoContext, sub: &Subsystem) -> IoDone {
    for ns in sub.namespaces() {
        if let Some(dev) = ns.block() {
            if let Err(e) = dev.flush() {
                return crate::block::block_error(&e);
            }
            continue;
        }
        let mut lane = match ctx.lane(ns) {
            Ok(l) => l,
            Err(e) => return device_error(&e),
        };
        let d = run(&mut lane, ZoneOp::Flush, None);
        if !d.status.is_success() {
            return d;
        }
    }
    IoDone::ok(0, 0)
}
