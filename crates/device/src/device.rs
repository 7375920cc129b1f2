//! The two traits every backend implements: [`ZonedDevice`] (one per
//! device, shared by all threads) and [`ZoneQueue`] (one per thread).

use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use zns_spec::fdp::RuhStatus;
use zns_spec::log::GetLogPage;
use zns_spec::{AdminOpcode, ReportFilter, ReportHeader, SubmissionEntry, ZoneDescriptor};

use crate::buffer::IoBuffer;
use crate::changes::ZoneChanges;
use crate::error::{DeviceError, Result};
use crate::info::DeviceInfo;
use crate::op::{Completion, CopyRange, Rejected, ZoneOp};
use crate::zone::{parse_report, Target, Zone, ZoneAction, ZoneReport};

/// Descriptors one Zone Management Receive of [`ZoneQueue::report_zones`]
/// asks for: a header and 127 descriptors fill two pages.
pub const REPORT_BATCH: usize = 127;

/// How long [`ZoneQueue::drain`] waits by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// A zoned storage device.
///
/// Thread safety: `Send + Sync`; share it as `Arc<dyn ZonedDevice>`. Each
/// thread creates its own [`ZoneQueue`] with [`ZonedDevice::queue`];
/// queues proceed in parallel without sharing locks on the I/O path.
pub trait ZonedDevice: Send + Sync + fmt::Debug {
    /// Geometry, limits, capabilities and identification.
    fn info(&self) -> &DeviceInfo;

    /// A new queue with room for `depth` outstanding commands (at least 1;
    /// capped by what the device offers), for the calling thread.
    fn queue(&self, depth: usize) -> Result<Box<dyn ZoneQueue>>;

    /// A zero-filled buffer of `len` bytes that this device transfers
    /// without copying.
    fn alloc(&self, len: usize) -> Result<IoBuffer>;

    /// The emulated controller behind the device, for fault injection and
    /// power cuts in tests, and for the model's own counters and clock;
    /// `None` for real devices. A hook for tests and tools, present only
    /// with the `emulator` feature.
    #[cfg(feature = "emulator")]
    fn emulator(&self) -> Option<&Arc<zns_emulator::Controller>> {
        None
    }

    /// The zones the device changes on its own (Read Only, Offline,
    /// finished by the controller, Reset or Finish Zone Recommended): its
    /// Changed Zone List. `None` when the backend cannot see them (today
    /// only emulated devices can).
    fn zone_changes(&self) -> Option<&dyn ZoneChanges> {
        None
    }

    /// The device's conventional namespace ([`DeviceInfo::conventional`])
    /// as [`ZonedDevice::conventional_queue`] reaches it: its NSID, block
    /// size, transfer limit and capabilities, with no zones (`zone_count`
    /// 0; its size is `conventional.blocks`). `None` when the device has
    /// none or the backend cannot run commands there (today only the
    /// driver backend, `emu:` and `pcie:`, can).
    fn conventional(&self) -> Option<&DeviceInfo> {
        None
    }

    /// A queue whose commands go to the device's conventional namespace:
    /// Read, Write, Write Zeroes, Flush and Copy, with the device's own
    /// statuses; its [`ZoneQueue::info`] is [`ZonedDevice::conventional`].
    /// Zone commands get whatever the device answers there (Invalid
    /// Command Opcode on the emulator). Errors with `Unsupported` when
    /// [`ZonedDevice::conventional`] is `None`.
    fn conventional_queue(&self, depth: usize) -> Result<Box<dyn ZoneQueue>> {
        let _ = depth;
        Err(DeviceError::Unsupported(format!(
            "{}: no conventional namespace this backend reaches",
            self.info().uri
        )))
    }

    /// The device whose media hold this device's blocks, when that is
    /// another device: a tenant namespace's base device, shared with the
    /// other tenants. A drive-wide count (the OCP extended SMART log's
    /// media bytes) is that device's, and counts once however many
    /// devices stand on it. `None` for a device that is its own media.
    fn media_device(&self) -> Option<Arc<dyn ZonedDevice>> {
        None
    }

    /// Get Log Page on the device's controller: `page.length_bytes()`
    /// bytes of the page `page` names, from its offset. A status the
    /// controller answers is [`DeviceError::Nvme`] (Invalid Log Page for
    /// one it lacks); backends that cannot send admin commands (today only
    /// the driver backend, `emu:` and `pcie:`, and `tcp:` can) answer
    /// `Unsupported`.
    fn log_page(&self, page: GetLogPage) -> Result<Vec<u8>> {
        Err(DeviceError::Unsupported(format!(
            "{}: log page {:#04x}: this backend sends no admin commands",
            self.info().uri,
            page.lid
        )))
    }

    /// Get Features on the device's controller: `entry` is a Get Features
    /// submission entry (such as [`zns_spec::fdp::FdpFeature::get_entry`]);
    /// `data`, for a feature that returns data (FDP Events, 1Eh), is
    /// filled. Returns completion dword 0. A status the controller answers
    /// is [`DeviceError::Nvme`]; backends that send no admin commands
    /// (all but the driver backend and `tcp:`) answer `Unsupported`.
    fn get_features(&self, entry: &SubmissionEntry, data: Option<&mut [u8]>) -> Result<u32> {
        let _ = data;
        check_features_entry(entry, AdminOpcode::GetFeatures)?;
        Err(DeviceError::Unsupported(format!(
            "{}: get features {:#04x}: this backend sends no admin commands",
            self.info().uri,
            entry.cdw10 & 0xFF
        )))
    }

    /// Set Features on the device's controller: `entry` is a Set Features
    /// submission entry (such as
    /// [`zns_spec::fdp::FdpEventsFeature::set_entry`]) with `data` as the
    /// feature's data where it takes any. Returns completion dword 0;
    /// errors as [`ZonedDevice::get_features`].
    fn set_features(&self, entry: &SubmissionEntry, data: Option<&[u8]>) -> Result<u32> {
        let _ = data;
        check_features_entry(entry, AdminOpcode::SetFeatures)?;
        Err(DeviceError::Unsupported(format!(
            "{}: set features {:#04x}: this backend sends no admin commands",
            self.info().uri,
            entry.cdw10 & 0xFF
        )))
    }

    /// Now, in nanoseconds since an arbitrary origin, on the clock the
    /// device's completions follow: the wall clock (monotonic) for real
    /// devices; for a timed emulator its own clock, virtual by default
    /// (see [`zns_emulator::clock`]). Measure latencies with this, not
    /// `Instant`, so they mean the same on either clock.
    fn now_ns(&self) -> u64 {
        wall_clock_ns()
    }

    /// `"real"` or `"virtual"`: which clock [`ZonedDevice::now_ns`] reads.
    fn clock_name(&self) -> &'static str {
        "real"
    }

    /// Lets `ns` nanoseconds pass on the device's clock, for think time
    /// and rate limits: on a virtual clock time moves forward at once
    /// (polling alone moves it only while commands are outstanding); on a
    /// real one the calling thread waits.
    fn wait_ns(&self, ns: u64) {
        let until = wall_clock_ns().saturating_add(ns);
        if ns > 200_000 {
            std::thread::sleep(Duration::from_nanos(ns - 100_000));
        }
        while wall_clock_ns() < until {
            std::hint::spin_loop();
        }
    }

    /// The backend's own type, for downcasting.
    fn as_any(&self) -> &dyn Any;
}

/// Refuses an entry of another opcode than `want` (Get or Set Features):
/// the features methods run nothing else.
pub(crate) fn check_features_entry(entry: &SubmissionEntry, want: AdminOpcode) -> Result<()> {
    if entry.opcode() != want as u8 {
        return Err(DeviceError::InvalidArgument(format!(
            "opcode {:#04x} is not {:?} ({:#04x})",
            entry.opcode(),
            want,
            want as u8
        )));
    }
    Ok(())
}

/// Monotonic wall-clock nanoseconds since the first call in this process.
pub fn wall_clock_ns() -> u64 {
    static ORIGIN: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    ORIGIN.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// A command's data for [`ZoneQueue::execute`]: the whole buffer moves.
///
/// Thread safety: borrows, `Send`.
#[derive(Debug)]
pub enum Data<'a> {
    /// The command moves no data.
    None,
    /// The device reads the buffer (writes, appends, extensions).
    ToDevice(&'a IoBuffer),
    /// The device fills the buffer (reads, reports).
    FromDevice(&'a mut IoBuffer),
}

/// A queue of commands to one device, owned by one thread.
///
/// The asynchronous path: [`ZoneQueue::submit`] a batch, [`ZoneQueue::ring`]
/// once, then [`ZoneQueue::poll`] for completions, each with its own
/// status and its buffer handed back. The blocking helpers ([`read`],
/// [`write`], [`append`], [`zone_action`], [`report_zones`], ...) run one
/// command at a time on the same queue; completions of asynchronous
/// commands that arrive meanwhile are kept for the next poll.
///
/// [`read`]: ZoneQueue::read
/// [`write`]: ZoneQueue::write
/// [`append`]: ZoneQueue::append
/// [`zone_action`]: ZoneQueue::zone_action
/// [`report_zones`]: ZoneQueue::report_zones
///
/// Thread safety: `Send` but not `Sync`: one thread owns it; move it to
/// hand it to another thread.
pub trait ZoneQueue: Send {
    /// The device's description.
    fn info(&self) -> &DeviceInfo;

    /// A zero-filled buffer the device transfers without copying.
    fn alloc(&self, len: usize) -> Result<IoBuffer>;

    /// Most commands outstanding at once.
    fn capacity(&self) -> usize;

    /// Commands submitted whose completions have not been polled yet.
    fn outstanding(&self) -> usize;

    /// Queues `op` with `buffer` (see [`ZoneOp`] for which commands take
    /// one) and the caller's `tag`, which comes back in the completion.
    /// Nothing reaches the device before [`ZoneQueue::ring`]. Never blocks:
    /// a full queue refuses with [`DeviceError::QueueFull`], and every
    /// refusal hands the buffer back.
    // The refusal hands the caller's buffer back by value: boxing it would
    // allocate on every refusal, and a full queue is a routine one.
    #[allow(clippy::result_large_err)]
    fn submit(&mut self, op: ZoneOp, buffer: Option<IoBuffer>, tag: u64) -> Result<(), Rejected>;

    /// Hands every command submitted since the last ring to the device
    /// (one doorbell write).
    fn ring(&mut self);

    /// Delivers up to `max` completions to `f` and returns how many. Never
    /// blocks.
    fn poll(&mut self, max: usize, f: &mut dyn FnMut(Completion)) -> usize;

    /// Runs one command and waits for it; returns the result dwords (the
    /// LBA of a Zone Append). The buffer must not exceed the device's
    /// transfer limit. Completions of other commands arriving meanwhile are
    /// kept for [`ZoneQueue::poll`]; a full queue is polled for room first.
    fn execute(&mut self, op: &ZoneOp, data: Data<'_>) -> Result<u64>;

    /// Rings, then polls until nothing is outstanding, delivering every
    /// completion to `f`; fails after `timeout`.
    fn drain(&mut self, timeout: Duration, f: &mut dyn FnMut(Completion)) -> Result<()> {
        self.ring();
        let start = Instant::now();
        let mut idle: u32 = 0;
        while self.outstanding() > 0 {
            if self.poll(usize::MAX, f) > 0 {
                idle = 0;
                continue;
            }
            idle = idle.saturating_add(1);
            if idle.is_multiple_of(64) {
                if start.elapsed() > timeout {
                    return Err(DeviceError::Timeout {
                        what: "outstanding commands",
                        after: start.elapsed(),
                    });
                }
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        Ok(())
    }

    /// Reads `buf.len()` bytes (whole blocks) from `lba`, in as many
    /// commands as the transfer limit requires.
    fn read(&mut self, lba: u64, buf: &mut IoBuffer) -> Result<()> {
        let (bs, max) = transfer_shape(self.info(), buf.len())?;
        if buf.len() <= max {
            return self.execute(&ZoneOp::Read { lba }, Data::FromDevice(buf)).map(drop);
        }
        let mut chunk = self.alloc(max)?;
        for offset in (0..buf.len()).step_by(max) {
            let n = max.min(buf.len() - offset);
            chunk.set_len(n)?;
            let op = ZoneOp::Read { lba: lba + (offset / bs) as u64 };
            self.execute(&op, Data::FromDevice(&mut chunk))?;
            buf[offset..offset + n].copy_from_slice(&chunk);
        }
        Ok(())
    }

    /// Writes `buf` (whole blocks) at `lba`, in as many commands as the
    /// transfer limit requires.
    fn write(&mut self, lba: u64, buf: &IoBuffer) -> Result<()> {
        write_chunks(self, lba, buf, false, None)
    }

    /// [`ZoneQueue::write`] placed by Flexible Data Placement: every
    /// command carries the Placement Identifier `placement` (see
    /// [`ZoneOp::Write`]), so the device keeps the data in that reclaim
    /// unit handle's reclaim units.
    fn write_placed(&mut self, lba: u64, buf: &IoBuffer, placement: u16) -> Result<()> {
        write_chunks(self, lba, buf, false, Some(placement))
    }

    /// [`ZoneQueue::write`] with Force Unit Access: the data is durable
    /// when the call returns.
    fn write_fua(&mut self, lba: u64, buf: &IoBuffer) -> Result<()> {
        write_chunks(self, lba, buf, true, None)
    }

    /// Appends `buf` (whole blocks, at most ZASL bytes) to the zone
    /// starting at `zslba`; returns the LBA the data landed at.
    fn append(&mut self, zslba: u64, buf: &IoBuffer) -> Result<u64> {
        let info = self.info();
        transfer_shape(info, buf.len())?;
        if buf.len() > info.zasl_bytes {
            return Err(DeviceError::InvalidArgument(format!(
                "zone append of {} bytes exceeds the device's limit (ZASL) of {} bytes",
                buf.len(),
                info.zasl_bytes
            )));
        }
        self.execute(&ZoneOp::Append { zslba, fua: false }, Data::ToDevice(buf))
    }

    /// Writes zeroes to `blocks` blocks at `lba` (in commands of at most
    /// 65536 blocks).
    fn write_zeroes(&mut self, lba: u64, blocks: u64) -> Result<()> {
        if blocks == 0 {
            return Err(DeviceError::InvalidArgument("write zeroes of 0 blocks".into()));
        }
        let mut done = 0;
        while done < blocks {
            let n = (blocks - done).min(65536) as u32;
            self.execute(&ZoneOp::WriteZeroes { lba: lba + done, blocks: n }, Data::None)?;
            done += n as u64;
        }
        Ok(())
    }

    /// Flushes the volatile write cache: every completed write is durable.
    fn flush(&mut self) -> Result<()> {
        self.execute(&ZoneOp::Flush, Data::None).map(drop)
    }

    /// Runs a zone management action on one zone or all.
    fn zone_action(&mut self, action: ZoneAction, target: Target) -> Result<()> {
        self.execute(&ZoneOp::Zone { action, target }, Data::None).map(drop)
    }

    /// Opens the zone at `zslba` with a zone random write area (Open Zone
    /// with ZRWA Allocate). The command goes to the device even when
    /// [`crate::Capabilities::zrwa`] is `None`, which then refuses it (NVMe:
    /// Invalid Zone Operation Request).
    fn open_zrwa(&mut self, zslba: u64) -> Result<()> {
        self.execute(&ZoneOp::OpenZrwa { zslba }, Data::None).map(drop)
    }

    /// Commits the zone random write area of the zone holding `lba` up to
    /// and including `lba` (Flush Explicit ZRWA Range): the write pointer
    /// moves past `lba`.
    fn commit_zrwa(&mut self, lba: u64) -> Result<()> {
        self.execute(&ZoneOp::CommitZrwa { lba }, Data::None).map(drop)
    }

    /// Flexible Data Placement: the Reclaim Unit Handle Status of the
    /// namespace (I/O Management Receive), one descriptor per placement
    /// handle with the blocks its current reclaim unit still takes. Needs
    /// FDP enabled ([`DeviceInfo::fdp`]); `Unsupported` otherwise, and on
    /// backends that cannot send the command.
    fn ruh_status(&mut self) -> Result<RuhStatus> {
        let max = self.info().mdts_bytes;
        // The header first, then exactly the descriptors it counts: a
        // controller may refuse a buffer longer than the data it returns
        // (QEMU does, when the kernel describes the buffer with an SGL).
        let mut head = self.alloc(RuhStatus::HEADER)?;
        self.execute(&ZoneOp::RuhStatus, Data::FromDevice(&mut head))?;
        let n = u16::from_le_bytes([head[14], head[15]]) as usize;
        let len =
            (RuhStatus::HEADER + n * zns_spec::fdp::RuhStatusDescriptor::SIZE).min(max) / 4 * 4;
        let buf = if n == 0 || len <= RuhStatus::HEADER {
            head
        } else {
            let mut buf = self.alloc(len)?;
            self.execute(&ZoneOp::RuhStatus, Data::FromDevice(&mut buf))?;
            buf
        };
        RuhStatus::from_bytes(&buf).map_err(|e| {
            DeviceError::Unsupported(format!(
                "{}: the reclaim unit handle status does not decode: {e}",
                self.info().uri
            ))
        })
    }

    /// Flexible Data Placement: Reclaim Unit Handle Update (I/O
    /// Management Send) of the placement identifiers `pids`: each one's
    /// reclaim unit handle moves to a fresh reclaim unit. Needs FDP
    /// enabled, as [`ZoneQueue::ruh_status`].
    fn ruh_update(&mut self, pids: &[u16]) -> Result<()> {
        self.execute(&ZoneOp::RuhUpdate { pids: pids.to_vec() }, Data::None).map(drop)
    }

    /// Sets the descriptor extension of the Empty zone at `zslba` to `data`
    /// (zero-padded to the extension size); the zone becomes Closed.
    fn set_zone_extension(&mut self, zslba: u64, data: &[u8]) -> Result<()> {
        let ext = self.info().capabilities.extension_bytes;
        if ext == 0 {
            return Err(DeviceError::Unsupported(
                "the device has no zone descriptor extensions".into(),
            ));
        }
        if data.is_empty() || data.len() > ext {
            return Err(DeviceError::InvalidArgument(format!(
                "{} bytes of zone extension data (1..={ext})",
                data.len()
            )));
        }
        let mut buf = self.alloc(data.len())?;
        buf.copy_from_slice(data);
        self.execute(&ZoneOp::SetZoneExtension { zslba }, Data::ToDevice(&buf)).map(drop)
    }

    /// The descriptor extension of the zone at `zslba` (all zeroes unless
    /// it is valid; see [`Zone::has_extension`]).
    fn zone_extension(&mut self, zslba: u64) -> Result<Vec<u8>> {
        let ext = self.info().capabilities.extension_bytes;
        if ext == 0 {
            return Err(DeviceError::Unsupported(
                "the device has no zone descriptor extensions".into(),
            ));
        }
        let zone_size = self.info().zone_size;
        let mut buf = self.alloc(ReportHeader::SIZE + ZoneDescriptor::SIZE + ext)?;
        let op = ZoneOp::ReportZones {
            slba: zslba,
            filter: ReportFilter::All,
            partial: true,
            extended: true,
        };
        self.execute(&op, Data::FromDevice(&mut buf))?;
        let mut r = parse_report(&buf, zone_size, Some(ext))?;
        match (r.descriptors.first(), r.extensions.pop()) {
            (Some(z), Some(e)) if z.start == zslba => Ok(e),
            _ => Err(DeviceError::InvalidArgument(format!("LBA {zslba} is not a zone start"))),
        }
    }

    /// One Zone Management Receive: up to `max` zones (at least 1) matching
    /// `filter` from the zone holding `slba` on, with Partial Report set.
    fn report_page(&mut self, slba: u64, filter: ReportFilter, max: usize) -> Result<ZoneReport> {
        let info = self.info();
        info.require_zoned()?;
        let zone_size = info.zone_size;
        let fit = (info.mdts_bytes / ZoneDescriptor::SIZE).saturating_sub(1).max(1);
        let n = max.clamp(1, fit);
        let mut buf = self.alloc(ReportHeader::SIZE + n * ZoneDescriptor::SIZE)?;
        let op = ZoneOp::ReportZones { slba, filter, partial: true, extended: false };
        self.execute(&op, Data::FromDevice(&mut buf))?;
        parse_report(&buf, zone_size, None)
    }

    /// Up to `max` zones matching `filter` from the zone holding
    /// `start_lba` on, in as many Zone Management Receive commands as it
    /// takes ([`REPORT_BATCH`] zones each).
    fn report_zones(
        &mut self,
        start_lba: u64,
        filter: ReportFilter,
        max: usize,
    ) -> Result<Vec<Zone>> {
        let (zone_size, blocks, count) = {
            let i = self.info();
            i.require_zoned()?;
            (i.zone_size, i.blocks(), i.zone_count)
        };
        let want = max.min(usize::try_from(count).unwrap_or(usize::MAX));
        let mut out = Vec::with_capacity(want.min(4096));
        let mut slba = start_lba;
        loop {
            if out.len() >= want {
                break;
            }
            let page = self.report_page(slba, filter, (want - out.len()).min(REPORT_BATCH))?;
            let Some(last) = page.descriptors.last() else { break };
            let next = last.start.saturating_add(zone_size);
            if last.start < slba.saturating_sub(slba % zone_size) || next <= slba {
                return Err(DeviceError::Unsupported(format!(
                    "the device's zone report from LBA {slba} went back to LBA {}",
                    last.start
                )));
            }
            out.extend(page.descriptors.into_iter().take(want - out.len()));
            if next >= blocks {
                break;
            }
            slba = next;
        }
        Ok(out)
    }

    /// The zone starting at (or holding) `lba`.
    fn zone(&mut self, lba: u64) -> Result<Zone> {
        let zone_size = self.info().zone_size;
        let page = self.report_page(lba, ReportFilter::All, 1)?;
        match page.descriptors.first() {
            Some(z) if z.start == lba - lba % zone_size => Ok(*z),
            _ => Err(DeviceError::InvalidArgument(format!("no zone holds LBA {lba}"))),
        }
    }

    /// Copies the source `ranges` (start LBA, blocks) to `dest` in one
    /// Copy command.
    fn copy(&mut self, ranges: &[(u64, u32)], dest: u64) -> Result<()> {
        if self.info().capabilities.copy.is_none() {
            return Err(DeviceError::Unsupported("the device does not support Copy".into()));
        }
        if ranges.is_empty() || ranges.len() > zns_spec::copy::MAX_RANGES {
            return Err(DeviceError::InvalidArgument(format!(
                "{} copy source ranges (1..={})",
                ranges.len(),
                zns_spec::copy::MAX_RANGES
            )));
        }
        let ranges = ranges.iter().copied().map(CopyRange::from).collect();
        self.execute(&ZoneOp::Copy { ranges, dest }, Data::None).map(drop)
    }
}

/// Block size and the largest single transfer, after checking that `len`
/// is a non-zero whole number of blocks.
fn transfer_shape(info: &DeviceInfo, len: usize) -> Result<(usize, usize)> {
    let bs = info.block_size as usize;
    if len == 0 || !len.is_multiple_of(bs) {
        return Err(DeviceError::InvalidArgument(format!(
            "{len} bytes is not a whole, non-zero number of {bs}-byte blocks"
        )));
    }
    let max = (info.mdts_bytes / bs).max(1) * bs;
    Ok((bs, max))
}

fn write_chunks<Q: ZoneQueue + ?Sized>(
    q: &mut Q,
    lba: u64,
    buf: &IoBuffer,
    fua: bool,
    placement: Option<u16>,
) -> Result<()> {
    let (bs, max) = transfer_shape(q.info(), buf.len())?;
    if buf.len() <= max {
        return q.execute(&ZoneOp::Write { lba, fua, placement }, Data::ToDevice(buf)).map(drop);
    }
    let mut chunk = q.alloc(max)?;
    for offset in (0..buf.len()).step_by(max) {
        let n = max.min(buf.len() - offset);
        chunk.set_len(n)?;
        chunk.copy_from_slice(&buf[offset..offset + n]);
        let op = ZoneOp::Write { lba: lba + (offset / bs) as u64, fua, placement };
        q.execute(&op, Data::ToDevice(&chunk))?;
    }
    Ok(())
}
