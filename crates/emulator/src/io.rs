//! I/O commands of the NVM and Zoned Namespace command sets.
//!
//! Every path validates the command completely before touching state. Data
//! of a read or write whose PRPs describe one contiguous piece of host memory
//! moves between media and host memory directly (the host memory is lent as
//! a slice for the media copy); other transfers go through the submission
//! queue's preallocated bounce buffer. Either way the common path allocates
//! nothing. Zone rules live in [`crate::zns`].

use zns_spec::command::{
    CopyCmd, DatasetManagement, DsmRange, ReadWrite, WriteZeroes, ZoneAppend, ZoneReceive, ZoneSend,
};
use zns_spec::copy::SourceRangeFormat0;
use zns_spec::{IoOpcode, Status, StatusCode, SubmissionEntry};

use crate::controller::{Controller, Outcome, PAGE_SIZE};
use crate::conv::Placement;
use crate::host::HostMemory;
use crate::media::MediaError;
use crate::namespace::Namespace;
use crate::prp;
use crate::queue::IoCounters;
use crate::timing::{Op, Runs, ZoneBefore};
use crate::zns::ZoneError;

/// NSID meaning "every namespace" (Flush).
const BROADCAST_NSID: u32 = 0xFFFF_FFFF;

/// Executes one I/O command, reaching host memory through `host` (the
/// controller's host memory, or a pinned view of it), and counts it in its
/// queue's `counters` when it succeeds. With `info` (the controller has a
/// timing model), a successful command describes what it did there; it
/// stays [`Op::Other`] otherwise.
pub(crate) fn execute(
    ctrl: &Controller,
    host: &dyn HostMemory,
    sqe: &SubmissionEntry,
    bounce: &mut [u8],
    info: Option<&mut Op>,
    counters: &mut IoCounters,
) -> Outcome {
    if sqe.fuse() != 0 {
        return Err(StatusCode::InvalidField.into());
    }
    if sqe.psdt() != 0 {
        // Only PRPs are supported (Identify Controller SGLS = 0).
        return Err(StatusCode::InvalidField.into());
    }
    let Some(op) = IoOpcode::from_raw(sqe.opcode()) else {
        return Err(StatusCode::InvalidOpcode.into());
    };
    if op == IoOpcode::Flush && sqe.nsid == BROADCAST_NSID {
        if let Some(i) = info {
            *i = Op::Flush;
        }
        return flush_all(ctrl);
    }
    let ns = ctrl.namespace(sqe.nsid).ok_or(StatusCode::InvalidNamespaceOrFormat)?;
    if ns.write_protected && changes_media(op, sqe) {
        return Err(StatusCode::NamespaceWriteProtected.into());
    }
    let (mut copied, mut padded) = (0, 0);
    let r = match op {
        IoOpcode::Flush => flush(ns).inspect(|_| note(info, || Op::Flush)),
        IoOpcode::Read => read(ctrl, host, ns, sqe, bounce, info),
        IoOpcode::Write => write(ctrl, host, ns, sqe, bounce, info),
        IoOpcode::WriteZeroes => write_zeroes(ctrl, ns, sqe, info),
        IoOpcode::DatasetManagement => dataset_management(ctrl, host, ns, sqe),
        IoOpcode::ZoneAppend => append(ctrl, host, ns, sqe, bounce, info),
        IoOpcode::ZoneMgmtSend => zone_send(ctrl, host, ns, sqe, info, &mut padded),
        IoOpcode::ZoneMgmtRecv => zone_receive(ctrl, host, ns, sqe, bounce, info),
        IoOpcode::Copy => copy(ctrl, host, ns, sqe, info).map(|blocks| {
            copied = blocks;
            0
        }),
        IoOpcode::IoManagementReceive => crate::fdp::io_management_receive(ctrl, host, ns, sqe),
        IoOpcode::IoManagementSend => crate::fdp::io_management_send(ctrl, host, ns, sqe),
        _ => Err(StatusCode::InvalidOpcode),
    };
    if r.is_ok() {
        count(counters, ns, op, sqe, copied, padded);
    }
    r.map_err(Status::from)
}

/// Counts a successful command: host commands and data for the SMART log,
/// and what it moved to and from the media for the OCP extended one.
/// `copied` is the block count of a Copy, `padded` the blocks a Finish
/// programmed past the zones' data (the timing model's padding).
#[inline]
fn count(
    c: &mut IoCounters,
    ns: &Namespace,
    op: IoOpcode,
    sqe: &SubmissionEntry,
    copied: u64,
    padded: u64,
) {
    let bs = ns.block_size() as u64;
    let bytes = ((sqe.cdw12 & 0xFFFF) as u64 + 1) * bs;
    // A conventional twin's firmware counts what it programs (the host's
    // blocks and those it moves); reads are the host's either way.
    let media = ns.ftl.is_none();
    match op {
        IoOpcode::Read => {
            c.read_commands += 1;
            c.bytes_read += bytes;
            c.media_bytes_read += bytes;
        }
        IoOpcode::Write | IoOpcode::ZoneAppend => {
            c.write_commands += 1;
            c.bytes_written += bytes;
            if media {
                c.media_bytes_written += bytes;
            }
        }
        IoOpcode::WriteZeroes => c.write_commands += 1,
        IoOpcode::ZoneMgmtSend => c.media_bytes_written += padded * bs,
        IoOpcode::Copy => {
            c.write_commands += 1;
            c.media_bytes_read += copied * bs;
            if media {
                c.media_bytes_written += copied * bs;
            }
        }
        _ => {}
    }
}

/// Whether command `op` would change data or zone state (refused on a
/// write-protected namespace). Dataset Management changes something only
/// when it deallocates.
fn changes_media(op: IoOpcode, sqe: &SubmissionEntry) -> bool {
    match op {
        IoOpcode::Write
        | IoOpcode::WriteZeroes
        | IoOpcode::WriteUncorrectable
        | IoOpcode::ZoneAppend
        | IoOpcode::ZoneMgmtSend
        | IoOpcode::Copy => true,
        IoOpcode::DatasetManagement => sqe.cdw11 & 0x4 != 0,
        _ => false,
    }
}

/// Hints the media that `sqe`, if a well-formed Read, is about to run, so
/// its data starts moving into the CPU caches while the command before it
/// executes. Checks nothing it does not need: a hint changes no outcome.
#[inline]
pub(crate) fn prefetch(ctrl: &Controller, sqe: &SubmissionEntry) {
    if sqe.opcode() != IoOpcode::Read as u8 || !ctrl.transfers_data() {
        return;
    }
    if let Some(ns) = ctrl.namespace(sqe.nsid) {
        let rw = ReadWrite::decode(sqe);
        ns.media.prefetch(rw.slba, rw.blocks as u64);
    }
}

/// Zeros for metadata the host did not supply.
static ZEROS: [u8; 4096] = [0; 4096];

/// Records what a command did for the timing model, if it wants to know.
#[inline]
fn note(info: Option<&mut Op>, op: impl FnOnce() -> Op) {
    if let Some(i) = info {
        *i = op();
    }
}

/// The written runs of a read, for the timing model.
fn written_runs(ns: &Namespace, slba: u64, blocks: u64) -> Runs {
    let mut runs = Runs::default();
    if let Some(f) = &ns.ftl {
        // Where the blocks are on the flash.
        f.physical_runs(slba, blocks, |p, n| runs.push(p, n));
        return runs;
    }
    match ns.zones() {
        None => runs.push(slba, blocks),
        Some(z) => {
            let _ = z.read_extent(slba, blocks, |lba, count, written| {
                if written {
                    runs.push(lba, count);
                }
            });
        }
    }
    runs
}

type IoResult = Result<u64, StatusCode>;

fn media_status(e: MediaError) -> StatusCode {
    match e {
        MediaError::Io(_) => StatusCode::WriteFault,
        // Stored data that cannot be returned as written: what a drive
        // reports when ECC cannot recover a block.
        MediaError::Checksum { .. } => StatusCode::UnrecoveredReadError,
        _ => StatusCode::InternalError,
    }
}

fn zone_status(e: ZoneError<StatusCode>) -> StatusCode {
    match e {
        ZoneError::Status(s) => s,
        ZoneError::Data(s) => s,
    }
}

/// Host memory → `buf` through the command's PRPs.
pub(crate) fn dma_from_host(
    ctrl: &Controller,
    host: &dyn HostMemory,
    sqe: &SubmissionEntry,
    buf: &mut [u8],
) -> Result<(), StatusCode> {
    if !ctrl.transfers_data() {
        return Ok(());
    }
    let mut at = 0;
    prp::walk(host, PAGE_SIZE, sqe.prp1, sqe.prp2, buf.len(), |s| {
        host.read(s.addr, &mut buf[at..at + s.len]).map_err(|_| StatusCode::DataTransferError)?;
        at += s.len;
        Ok(())
    })
}

/// `data` → host memory through the command's PRPs.
pub(crate) fn dma_to_host(
    ctrl: &Controller,
    host: &dyn HostMemory,
    sqe: &SubmissionEntry,
    data: &[u8],
) -> Result<(), StatusCode> {
    if !ctrl.transfers_data() {
        return Ok(());
    }
    let mut at = 0;
    prp::walk(host, PAGE_SIZE, sqe.prp1, sqe.prp2, data.len(), |s| {
        host.write(s.addr, &data[at..at + s.len]).map_err(|_| StatusCode::DataTransferError)?;
        at += s.len;
        Ok(())
    })
}

/// Checks an LBA range against the namespace and the transfer limit and
/// returns its length in bytes.
fn check_range(
    ctrl: &Controller,
    ns: &Namespace,
    slba: u64,
    blocks: u64,
) -> Result<usize, StatusCode> {
    let end = slba.checked_add(blocks).ok_or(StatusCode::LbaOutOfRange)?;
    if end > ns.capacity() {
        return Err(StatusCode::LbaOutOfRange);
    }
    let bytes = blocks as usize * ns.block_size();
    if bytes > ctrl.max_transfer_bytes() {
        return Err(StatusCode::InvalidField);
    }
    Ok(bytes)
}

fn flush(ns: &Namespace) -> IoResult {
    ns.flush().map(|_| 0).map_err(|_| StatusCode::WriteFault)
}

fn flush_all(ctrl: &Controller) -> Outcome {
    for ns in ctrl.namespaces.iter().filter(|ns| ctrl.namespace_active(ns)) {
        flush(ns)?;
    }
    Ok(0)
}

/// Reads blocks into `buf` as the zone layer sees them: written runs from
/// media, the rest zeros.
fn read_blocks(ns: &Namespace, slba: u64, blocks: u64, buf: &mut [u8]) -> Result<(), StatusCode> {
    let r =
        read_visible(ns, slba, blocks, ns.block_size(), buf, |lba, part| ns.media.read(lba, part));
    if r == Err(StatusCode::UnrecoveredReadError) {
        // None of the command's blocks is returned as good, not even in a
        // buffer the host should not look at.
        buf.fill(0);
    }
    r
}

/// Reads the metadata of blocks into `buf` the same way.
fn read_metadata(ns: &Namespace, slba: u64, blocks: u64, buf: &mut [u8]) -> Result<(), StatusCode> {
    read_visible(ns, slba, blocks, ns.metadata_size(), buf, |lba, part| {
        ns.media.read_metadata(lba, part)
    })
}

/// Fills `buf` (`unit` bytes per block) with `read` for the runs the zone
/// layer reports written, and zeros for the rest; conventional namespaces
/// read everything, through the firmware's map when they have one (media
/// addressed by physical block, unmapped blocks zeros).
fn read_visible(
    ns: &Namespace,
    slba: u64,
    blocks: u64,
    unit: usize,
    buf: &mut [u8],
    read: impl Fn(u64, &mut [u8]) -> Result<(), MediaError>,
) -> Result<(), StatusCode> {
    if let Some(f) = &ns.ftl {
        let mut failed = None;
        f.read_extent(slba, blocks, |lba, count, physical| {
            let off = (lba - slba) as usize * unit;
            let part = &mut buf[off..off + count as usize * unit];
            match physical {
                Some(p) => {
                    if let Err(e) = read(p, part) {
                        failed.get_or_insert(media_status(e));
                    }
                }
                None => part.fill(0),
            }
        });
        return failed.map_or(Ok(()), Err);
    }
    match ns.zones() {
        None => read(slba, buf).map_err(media_status),
        Some(z) => {
            let mut failed = None;
            z.read_extent(slba, blocks, |lba, count, written| {
                let off = (lba - slba) as usize * unit;
                let part = &mut buf[off..off + count as usize * unit];
                if written {
                    if let Err(e) = read(lba, part) {
                        failed.get_or_insert(media_status(e));
                    }
                } else {
                    part.fill(0);
                }
            })?;
            failed.map_or(Ok(()), Err)
        }
    }
}

fn read(
    ctrl: &Controller,
    host: &dyn HostMemory,
    ns: &Namespace,
    sqe: &SubmissionEntry,
    bounce: &mut [u8],
    info: Option<&mut Op>,
) -> IoResult {
    let rw = ReadWrite::decode(sqe);
    let blocks = rw.blocks as u64;
    let bytes = check_range(ctrl, ns, rw.slba, blocks)?;
    if ns.read_error_in(rw.slba, blocks) {
        return Err(StatusCode::UnrecoveredReadError);
    }
    if !ctrl.transfers_data() {
        if let Some(z) = ns.zones() {
            z.read_extent(rw.slba, blocks, |_, _, _| {})?;
        }
    } else {
        if !read_direct(host, ns, sqe, rw.slba, blocks, bytes)? {
            let buf = &mut bounce[..bytes];
            read_blocks(ns, rw.slba, blocks, buf)?;
            dma_to_host(ctrl, host, sqe, buf)?;
        }
        transfer_metadata_out(ctrl, host, ns, sqe, rw.slba, blocks)?;
    }
    note(info, || Op::Read {
        nsid: ns.nsid,
        lba: rw.slba,
        blocks,
        runs: written_runs(ns, rw.slba, blocks),
    });
    Ok(0)
}

/// Reads the blocks straight into host memory when the PRPs describe one
/// contiguous piece of it. Returns false, having done nothing, when they do
/// not or that memory is not wholly host memory: the caller then goes
/// through the bounce buffer and the PRP walk, which also report errors in
/// the order a bounced transfer meets them (media and zone errors first,
/// then Data Transfer Error).
fn read_direct(
    host: &dyn HostMemory,
    ns: &Namespace,
    sqe: &SubmissionEntry,
    slba: u64,
    blocks: u64,
    bytes: usize,
) -> Result<bool, StatusCode> {
    let Some(seg) = prp::contiguous(PAGE_SIZE, sqe.prp1, sqe.prp2, bytes) else {
        return Ok(false);
    };
    let mut result = Ok(());
    // SAFETY: the closure hands the window to the zone layer and the media
    // only; neither reaches host memory.
    let lent = unsafe {
        host.with_mut(seg.addr, seg.len, &mut |window| {
            result = read_blocks(ns, slba, blocks, window);
        })
    };
    match lent {
        Ok(()) => result.map(|_| true),
        Err(_) => Ok(false),
    }
}

/// Stores the command's data (and metadata) for logical blocks `[lba, lba
/// + blocks)` at the media runs `dest` ((media block, blocks), in order:
/// the logical blocks themselves, or where a conventional namespace's
/// firmware put them), taken from host memory through its PRPs; with data
/// transfer off, stores nothing. Data in one contiguous piece of host
/// memory goes to the media without a copy in between; otherwise it is
/// gathered into `buf` first.
#[allow(clippy::too_many_arguments)]
fn store_from_host(
    ctrl: &Controller,
    host: &dyn HostMemory,
    ns: &Namespace,
    sqe: &SubmissionEntry,
    lba: u64,
    dest: &[(u64, u64)],
    blocks: u64,
    buf: &mut [u8],
) -> Result<(), StatusCode> {
    if !ctrl.transfers_data() {
        return Ok(());
    }
    // Metadata from the host must be fetched after the data (so a data
    // transfer error wins) and before the store, so only commands without
    // it take the direct path.
    if ns.metadata_size() == 0 || sqe.mptr == 0 {
        if let Some(seg) = prp::contiguous(PAGE_SIZE, sqe.prp1, sqe.prp2, buf.len()) {
            let mut result = Ok(());
            // SAFETY: the closure hands the window to the media only, which
            // does not reach host memory.
            let lent = unsafe {
                host.with_ref(seg.addr, seg.len, &mut |data| {
                    result = store(ns, lba, dest, data, None, blocks);
                })
            };
            if lent.is_ok() {
                return result;
            }
        }
    }
    dma_from_host(ctrl, host, sqe, buf)?;
    // Metadata of a command up to a few KiB (16 bytes × 128 blocks) is
    // staged on the stack: the write path allocates nothing.
    let mut small = [0u8; METADATA_STAGE];
    let mut large = Vec::new();
    let meta = metadata_in(ctrl, host, ns, sqe, blocks, &mut small, &mut large)?;
    store(ns, lba, dest, buf, meta, blocks)
}

/// Bytes of metadata a command stages on the stack.
const METADATA_STAGE: usize = 2048;

fn transfer_metadata_out(
    ctrl: &Controller,
    host: &dyn HostMemory,
    ns: &Namespace,
    sqe: &SubmissionEntry,
    slba: u64,
    blocks: u64,
) -> Result<(), StatusCode> {
    let ms = ns.metadata_size();
    if ms == 0 || sqe.mptr == 0 || !ctrl.transfers_data() {
        return Ok(());
    }
    if ms > 4096 {
        let mut meta = vec![0u8; ms * blocks as usize];
        read_metadata(ns, slba, blocks, &mut meta)?;
        return host.write(sqe.mptr, &meta).map_err(|_| StatusCode::DataTransferError);
    }
    // Through a stack buffer, a bounded run of blocks at a time.
    let mut chunk = [0u8; 4096];
    let per = (chunk.len() / ms) as u64;
    let mut at = 0;
    while at < blocks {
        let n = per.min(blocks - at);
        let part = &mut chunk[..n as usize * ms];
        read_metadata(ns, slba + at, n, part)?;
        let addr = sqe.mptr + at * ms as u64;
        host.write(addr, part).map_err(|_| StatusCode::DataTransferError)?;
        at += n;
    }
    Ok(())
}

/// Fetches a command's metadata from MPTR into `small` when it fits, else
/// into `large`; `None` when the command carries none.
fn metadata_in<'a>(
    ctrl: &Controller,
    host: &dyn HostMemory,
    ns: &Namespace,
    sqe: &SubmissionEntry,
    blocks: u64,
    small: &'a mut [u8],
    large: &'a mut Vec<u8>,
) -> Result<Option<&'a [u8]>, StatusCode> {
    let ms = ns.metadata_size();
    if ms == 0 || sqe.mptr == 0 || !ctrl.transfers_data() {
        return Ok(None);
    }
    let len = ms * blocks as usize;
    let meta = match small.get_mut(..len) {
        Some(m) => m,
        None => {
            large.resize(len, 0);
            &mut large[..]
        }
    };
    host.read(sqe.mptr, meta).map_err(|_| StatusCode::DataTransferError)?;
    Ok(Some(meta))
}

/// Stores the data (and metadata) of logical blocks `[lba, lba + blocks)`
/// at the media runs `dest`; metadata defaults to zeros so a rewritten
/// block never shows the previous occupant's metadata.
fn store(
    ns: &Namespace,
    lba: u64,
    dest: &[(u64, u64)],
    data: &[u8],
    meta: Option<&[u8]>,
    blocks: u64,
) -> Result<(), StatusCode> {
    let (bs, ms) = (ns.block_size(), ns.metadata_size());
    let mut at = 0usize;
    for &(m, n) in dest {
        let part = &data[at * bs..(at + n as usize) * bs];
        let meta = meta.map(|mm| &mm[at * ms..(at + n as usize) * ms]);
        store_run(ns, m, part, meta, n)?;
        at += n as usize;
    }
    ns.clear_read_errors(lba, blocks);
    Ok(())
}

/// Stores `blocks` blocks of data (and metadata, zeros by default) at
/// media block `at`.
fn store_run(
    ns: &Namespace,
    at: u64,
    data: &[u8],
    meta: Option<&[u8]>,
    blocks: u64,
) -> Result<(), StatusCode> {
    ns.media.write(at, data).map_err(media_status)?;
    let ms = ns.metadata_size();
    if ms > 0 {
        match meta {
            Some(m) => ns.media.write_metadata(at, m).map_err(media_status)?,
            None if ms > ZEROS.len() => {
                let zeros = vec![0u8; ms * blocks as usize];
                ns.media.write_metadata(at, &zeros).map_err(media_status)?;
            }
            None => {
                // Zeros, a bounded run of blocks at a time: no allocation.
                let per = (ZEROS.len() / ms) as u64;
                let mut done = 0;
                while done < blocks {
                    let n = per.min(blocks - done);
                    let zeros = &ZEROS[..n as usize * ms];
                    ns.media.write_metadata(at + done, zeros).map_err(media_status)?;
                    done += n;
                }
            }
        }
    }
    Ok(())
}

fn write(
    ctrl: &Controller,
    host: &dyn HostMemory,
    ns: &Namespace,
    sqe: &SubmissionEntry,
    bounce: &mut [u8],
    info: Option<&mut Op>,
) -> IoResult {
    let rw = ReadWrite::decode(sqe);
    let fua = rw.fua || !ctrl.write_cache_enabled();
    let blocks = rw.blocks as u64;
    let bytes = check_range(ctrl, ns, rw.slba, blocks)?;
    let buf = &mut bounce[..bytes];
    let data = |dest: &[(u64, u64)]| -> Result<(), StatusCode> {
        store_from_host(ctrl, host, ns, sqe, rw.slba, dest, blocks, buf)
    };
    let Placed { opened, filled, placed, zrwa_commit } =
        place(ctrl, ns, rw.slba, blocks, fua, rw.placement(), data)?;
    note(info, || Op::Write {
        nsid: ns.nsid,
        lba: rw.slba,
        blocks,
        opened,
        filled,
        dma: true,
        append: false,
        placed,
        zrwa_commit,
    });
    Ok(0)
}

fn durable(ns: &Namespace) -> Result<(), StatusCode> {
    if let Some(f) = &ns.ftl {
        f.commit();
    }
    ns.media.sync().map_err(media_status)?;
    ns.persist().map_err(|_| StatusCode::WriteFault)
}

/// Where a write-type command put its blocks, for the timing model.
#[derive(Default)]
struct Placed {
    /// The command implicitly opened its zone.
    opened: bool,
    /// The command filled its zone.
    filled: bool,
    /// Where a conventional namespace's firmware put the blocks.
    placed: Vec<Placement>,
    /// What a write into a zone random write area committed.
    zrwa_commit: Option<(u64, u64)>,
}

/// Places `blocks` blocks at `slba` through the zone rules (when zoned) or
/// the firmware's map (conventional with an FTL; `pid`, the placement
/// identifier of a write with DTYPE 2h, picks an FDP namespace's reclaim
/// unit handle), with `data` storing them at the media runs given, then
/// makes them durable for FUA.
fn place(
    ctrl: &Controller,
    ns: &Namespace,
    slba: u64,
    blocks: u64,
    fua: bool,
    pid: Option<u16>,
    data: impl FnOnce(&[(u64, u64)]) -> Result<(), StatusCode>,
) -> Result<Placed, StatusCode> {
    let placed = match (&ns.ftl, ns.zones()) {
        (Some(f), _) => {
            let placed = f.write(slba, blocks, ctrl.transfers_data(), pid, data)?;
            Placed { placed, ..Placed::default() }
        }
        (None, Some(z)) => {
            let o =
                z.write(slba, blocks, fua, |lba| data(&[(lba, blocks)])).map_err(zone_status)?;
            Placed {
                opened: o.opened,
                filled: o.filled,
                placed: Vec::new(),
                zrwa_commit: o.zrwa_commit,
            }
        }
        (None, None) => {
            data(&[(slba, blocks)])?;
            Placed::default()
        }
    };
    if fua {
        durable(ns)?;
    }
    Ok(placed)
}

fn append(
    ctrl: &Controller,
    host: &dyn HostMemory,
    ns: &Namespace,
    sqe: &SubmissionEntry,
    bounce: &mut [u8],
    info: Option<&mut Op>,
) -> IoResult {
    let Some(z) = ns.zones() else { return Err(StatusCode::InvalidOpcode) };
    let a = ZoneAppend::decode(sqe);
    let blocks = a.blocks as u64;
    let bytes = check_range(ctrl, ns, a.zslba, blocks)?;
    let buf = &mut bounce[..bytes];
    let zasl_blocks = ctrl.zasl_bytes() as u64 / ns.block_size() as u64;
    let o = z
        .append(a.zslba, blocks, zasl_blocks, a.fua, |lba| -> Result<(), StatusCode> {
            store_from_host(ctrl, host, ns, sqe, lba, &[(lba, blocks)], blocks, buf)
        })
        .map_err(zone_status)?;
    if a.fua {
        durable(ns)?;
    }
    note(info, || Op::Write {
        nsid: ns.nsid,
        lba: o.lba,
        blocks,
        opened: o.opened,
        filled: o.filled,
        dma: true,
        append: true,
        placed: Vec::new(),
        zrwa_commit: o.zrwa_commit,
    });
    Ok(o.lba)
}

fn write_zeroes(
    ctrl: &Controller,
    ns: &Namespace,
    sqe: &SubmissionEntry,
    info: Option<&mut Op>,
) -> IoResult {
    let w = WriteZeroes::decode(sqe);
    let blocks = w.blocks as u64;
    let end = w.slba.checked_add(blocks).ok_or(StatusCode::LbaOutOfRange)?;
    if end > ns.capacity() {
        return Err(StatusCode::LbaOutOfRange);
    }
    if let Some(f) = &ns.ftl {
        // The firmware unmaps the blocks (they read as zeros): processing
        // only, nothing is programmed.
        f.deallocate(w.slba, blocks);
        ns.clear_read_errors(w.slba, blocks);
        if w.fua {
            durable(ns)?;
        }
        return Ok(0);
    }
    let zero = |_: &[(u64, u64)]| -> Result<(), StatusCode> {
        ns.media.deallocate(w.slba, blocks).map_err(media_status)?;
        ns.clear_read_errors(w.slba, blocks);
        Ok(())
    };
    // Deallocated, not programmed: no reclaim unit takes the blocks.
    let Placed { opened, filled, placed, zrwa_commit } =
        place(ctrl, ns, w.slba, blocks, w.fua, None, zero)?;
    note(info, || Op::Write {
        nsid: ns.nsid,
        lba: w.slba,
        blocks,
        opened,
        filled,
        dma: false,
        append: false,
        placed,
        zrwa_commit,
    });
    Ok(0)
}

/// Dataset Management: checks every range, then (with the Deallocate
/// attribute) deallocates them; deallocated blocks read as zeros. The
/// other attributes are hints and change nothing. Conventional namespaces
/// only: a zoned namespace's blocks are freed by resetting zones.
fn dataset_management(
    ctrl: &Controller,
    host: &dyn HostMemory,
    ns: &Namespace,
    sqe: &SubmissionEntry,
) -> IoResult {
    if ns.is_zoned() {
        return Err(StatusCode::InvalidOpcode);
    }
    let cmd = DatasetManagement::decode(sqe);
    let n = cmd.ranges as usize;
    let mut raw = [0u8; 256 * DsmRange::SIZE];
    let raw = &mut raw[..n * DsmRange::SIZE];
    dma_from_host(ctrl, host, sqe, raw)?;
    let ranges = DsmRange::decode_ranges(raw, n).ok_or(StatusCode::InvalidField)?;
    for r in &ranges {
        let end = r.slba.checked_add(r.blocks as u64).ok_or(StatusCode::LbaOutOfRange)?;
        if end > ns.capacity() {
            return Err(StatusCode::LbaOutOfRange);
        }
    }
    if !cmd.deallocate {
        return Ok(0);
    }
    for r in ranges.iter().filter(|r| r.blocks > 0) {
        let blocks = r.blocks as u64;
        match &ns.ftl {
            Some(f) => f.deallocate(r.slba, blocks),
            // Space goes back; the blocks read as zeros either way.
            None => ns.media.deallocate(r.slba, blocks).map_err(media_status)?,
        }
        ns.clear_read_errors(r.slba, blocks);
    }
    Ok(0)
}

/// Zone Management Send. With `info` (a timed controller), `padded` gets
/// the blocks its Finish pads: the model programs the rest of each zone
/// with data that was not full, and the media counts them.
fn zone_send(
    ctrl: &Controller,
    host: &dyn HostMemory,
    ns: &Namespace,
    sqe: &SubmissionEntry,
    info: Option<&mut Op>,
    padded: &mut u64,
) -> IoResult {
    let Some(z) = ns.zones() else { return Err(StatusCode::InvalidOpcode) };
    let cmd = ZoneSend::decode(sqe).map_err(|_| StatusCode::InvalidField)?;
    let ext_len = z.geometry().descriptor_extension_bytes;
    let mut ext = Vec::new();
    if cmd.action == zns_spec::ZoneSendAction::SetDescriptorExtension
        && ext_len > 0
        && !cmd.select_all
    {
        ext.resize(ext_len, 0);
        dma_from_host(ctrl, host, sqe, &mut ext)?;
    }
    let ext = (!ext.is_empty()).then_some(&ext[..]);
    // For the timing model: the zones as they were (one, or all of them).
    let before: Vec<ZoneBefore> = match &info {
        None => Vec::new(),
        Some(_) => {
            let range = if cmd.select_all {
                0..z.geometry().zones
            } else {
                let i = z.zone_of(cmd.slba).unwrap_or(0);
                i..i + 1
            };
            range
                .filter_map(|i| z.zone_info(i))
                .map(|zi| ZoneBefore {
                    index: zi.index,
                    state: zi.state,
                    written: zi.written_extent - zi.start,
                })
                .collect()
        }
    };
    let outcome = z.send_raw(cmd.slba, cmd.action as u8, cmd.select_all, cmd.zrwa_allocate, ext)?;
    // The new zone states are durable before the media of reset zones is
    // released: a crash in between must not leave a zone that still looks
    // written over data that is gone (a device image would come back with
    // the old write pointer over zeros).
    let persisted = ns.persist().map_err(|_| StatusCode::WriteFault);
    for (lba, blocks) in outcome.released.iter().copied() {
        // Space of reset zones goes back; a failure here only costs memory.
        let _ = ns.media.deallocate(lba, blocks);
    }
    persisted?;
    let zones: Vec<ZoneBefore> = if cmd.select_all {
        before.into_iter().filter(|b| outcome.transitioned.contains(&b.index)).collect()
    } else {
        before
    };
    if cmd.action == zns_spec::ZoneSendAction::Finish {
        let cap = z.geometry().zone_capacity;
        *padded = zones.iter().map(|b| b.finish_padding(cap)).sum();
    }
    note(info, || Op::ZoneSend {
        nsid: ns.nsid,
        action: cmd.action,
        zones,
        committed: outcome.committed,
    });
    Ok(0)
}

fn zone_receive(
    ctrl: &Controller,
    host: &dyn HostMemory,
    ns: &Namespace,
    sqe: &SubmissionEntry,
    bounce: &mut [u8],
    info: Option<&mut Op>,
) -> IoResult {
    let Some(z) = ns.zones() else { return Err(StatusCode::InvalidOpcode) };
    let cmd = ZoneReceive::decode(sqe).map_err(|_| StatusCode::InvalidField)?;
    let bytes = cmd.bytes();
    if bytes > ctrl.max_transfer_bytes() {
        return Err(StatusCode::InvalidField);
    }
    let buf = &mut bounce[..bytes];
    z.report(cmd.slba, cmd.filter, cmd.partial, cmd.extended(), buf)?;
    dma_to_host(ctrl, host, sqe, buf)?;
    note(info, || Op::Report { bytes: bytes as u64 });
    Ok(0)
}

/// Copy; returns the blocks copied.
fn copy(
    ctrl: &Controller,
    host: &dyn HostMemory,
    ns: &Namespace,
    sqe: &SubmissionEntry,
    info: Option<&mut Op>,
) -> IoResult {
    let cmd = CopyCmd::decode(sqe);
    if cmd.format != 0 {
        return Err(StatusCode::InvalidField);
    }
    let p = &ns.profile;
    let ranges_n = cmd.ranges as usize;
    if ranges_n > p.copy_max_ranges as usize {
        return Err(StatusCode::CommandSizeLimitExceeded);
    }
    let mut desc = vec![0u8; ranges_n * SourceRangeFormat0::SIZE];
    dma_from_host(ctrl, host, sqe, &mut desc)?;
    let ranges = SourceRangeFormat0::decode_list(&desc).map_err(|_| StatusCode::InvalidField)?;
    let mut total = 0u64;
    for r in &ranges {
        if r.blocks > p.copy_max_range_blocks as u32 {
            return Err(StatusCode::CommandSizeLimitExceeded);
        }
        total += r.blocks as u64;
        let end = r.slba.checked_add(r.blocks as u64).ok_or(StatusCode::LbaOutOfRange)?;
        if end > ns.capacity() {
            return Err(StatusCode::LbaOutOfRange);
        }
    }
    if total > p.copy_max_blocks as u64 {
        return Err(StatusCode::CommandSizeLimitExceeded);
    }
    let end = cmd.sdlba.checked_add(total).ok_or(StatusCode::LbaOutOfRange)?;
    if end > ns.capacity() {
        return Err(StatusCode::LbaOutOfRange);
    }
    // Gather the sources first: a source may sit in the destination zone.
    let bs = ns.block_size();
    let ms = ns.metadata_size();
    let mut data = vec![0u8; total as usize * bs];
    let mut meta = vec![0u8; total as usize * ms];
    let mut at = 0usize;
    for r in &ranges {
        let n = r.blocks as usize;
        if ns.read_error_in(r.slba, n as u64) {
            return Err(StatusCode::UnrecoveredReadError);
        }
        read_blocks(ns, r.slba, n as u64, &mut data[at * bs..(at + n) * bs])?;
        if ms > 0 {
            // As a read would return it: zeros for unwritten blocks.
            read_metadata(ns, r.slba, n as u64, &mut meta[at * ms..(at + n) * ms])?;
        }
        at += n;
    }
    // For the timing model: where the sources are (on the flash, for a
    // namespace with an FTL), taken before the copy rewrites them.
    let sources: Vec<(u64, u64)> = match (&info, &ns.ftl) {
        (None, _) => Vec::new(),
        (Some(_), None) => ranges.iter().map(|r| (r.slba, r.blocks as u64)).collect(),
        (Some(_), Some(f)) => {
            let mut v = Vec::new();
            for r in &ranges {
                f.physical_runs(r.slba, r.blocks as u64, |p, n| v.push((p, n)));
            }
            v
        }
    };
    let copy_in = |dest: &[(u64, u64)]| -> Result<(), StatusCode> {
        store(ns, cmd.sdlba, dest, &data, (ms > 0).then_some(&meta[..]), total)
    };
    let pid = (cmd.dtype == zns_spec::fdp::DTYPE_DATA_PLACEMENT).then_some(cmd.dspec);
    let Placed { opened, filled, placed, zrwa_commit } =
        place(ctrl, ns, cmd.sdlba, total, cmd.fua, pid, copy_in)?;
    note(info, || Op::Copy {
        nsid: ns.nsid,
        sources,
        dest: cmd.sdlba,
        blocks: total,
        opened,
        filled,
        placed,
        zrwa_commit,
    });
    Ok(total)
}
