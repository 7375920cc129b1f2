//! The zoned block device backend (`zbd:/dev/nvmeXnY`): the kernel's
//! block interface to a zoned namespace. Zones are reported, reset, opened,
//! closed and finished with the `BLK*ZONE` ioctls; data moves with
//! `O_DIRECT` reads and writes through io_uring (or `pread`/`pwrite`);
//! limits come from sysfs.
//!
//! The block interface has no Zone Append for user space, so appends are
//! emulated the way xNVMe's block backend does it: the backend tracks each
//! zone's write pointer (from reports and the writes it completes) and
//! writes an append at it, with at most one append in flight per zone and
//! none while a write to the zone is in flight. The assigned LBA comes back
//! as a Zone Append's would.
//!
//! The kernel turns most NVMe statuses into `EIO`. A failed command is
//! given the status the device would have returned where the backend can
//! tell: ranges and zone starts are checked before a command is sent
//! (LBA Out of Range, Invalid Field), `EOVERFLOW` and `ETOOMANYREFS` are
//! the kernel's codes for Too Many Active / Open Zones, a failed write is
//! classified from the zone's state reported just after it (Zone Is Full,
//! Zone Invalid Write, Zone Boundary Error, ...), and a failed zone action
//! is an Invalid Zone State Transition; a read failing with `ENODATA` (the
//! block layer's medium error) is an Unrecovered Read Error. Anything else
//! is an OS error.
//!
//! What the interface cannot express is refused with
//! [`DeviceError::Unsupported`]: Offline Zone, Select All for Open, Close,
//! Finish (and Offline), extended reports and descriptor extensions, Copy.
//! See `docs/backends.md`.

use std::any::Any;
use std::collections::VecDeque;
use std::fs::File;
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use zns_spec::{
    ReportFilter, ReportHeader, StatusCode, ZoneAttributes, ZoneDescriptor, ZoneState, ZoneType,
};

use super::sys::{self, BlkZone, Borrowed, Cqe, Held, Plain, Ring, WriteHow};
use super::{os_error, sysfs, MAX_QUEUE_DEPTH};
use crate::buffer::IoBuffer;
use crate::command;
use crate::device::{Data, ZoneQueue, ZonedDevice};
use crate::error::{DeviceError, OpKind, Result};
use crate::info::{Capabilities, ConventionalNamespace, DeviceInfo};
use crate::op::{Completion, Rejected, ZoneOp};
use crate::uri::BlockIo;
use crate::zone::{Target, ZoneAction};

/// `BLK_ZONE_TYPE_SEQWRITE_REQ`.
const BLK_ZONE_TYPE_SEQWRITE_REQ: u8 = 2;

/// Zones one `BLKREPORTZONE` asks for.
const REPORT_CHUNK: u32 = 128;

/// Converts a kernel zone (in 512-byte sectors) into a zone descriptor in
/// logical blocks of `sectors_per_block` sectors. `capacity_valid` tells
/// whether the report carried capacities (else the capacity is the length).
pub(crate) fn descriptor(
    z: &BlkZone,
    sectors_per_block: u64,
    capacity_valid: bool,
) -> std::result::Result<ZoneDescriptor, String> {
    let spb = sectors_per_block.max(1);
    if z.zone_type != BLK_ZONE_TYPE_SEQWRITE_REQ {
        return Err(format!(
            "the zone at sector {} is of type {} (only sequential-write-required zones, type 2, \
             are supported)",
            z.start, z.zone_type
        ));
    }
    let state = ZoneState::from_raw(z.cond)
        .ok_or_else(|| format!("the zone at sector {} has condition {:#x}", z.start, z.cond))?;
    let mut attrs = 0;
    if z.reset != 0 {
        attrs |= ZoneAttributes::RESET_RECOMMENDED;
    }
    let capacity = if capacity_valid { z.capacity } else { z.len };
    Ok(ZoneDescriptor {
        zone_type: ZoneType::SequentialWriteRequired,
        state,
        attrs: ZoneAttributes(attrs),
        attrs_info: 0,
        capacity: capacity / spb,
        start: z.start / spb,
        write_pointer: if state.has_write_pointer() {
            z.wp / spb
        } else {
            ZoneDescriptor::INVALID_WRITE_POINTER
        },
    })
}

/// Fills `buf` with a Zone Management Receive report (header, then as
/// many descriptors as fit) of the `zones` that match `filter`: with
/// `partial`, the header counts the descriptors returned, else every match.
pub(crate) fn encode_report(
    zones: &[ZoneDescriptor],
    filter: ReportFilter,
    partial: bool,
    buf: &mut [u8],
) {
    let fit = buf.len().saturating_sub(ReportHeader::SIZE) / ZoneDescriptor::SIZE;
    let matching: Vec<&ZoneDescriptor> =
        zones.iter().filter(|d| filter.matches(d.state, d.attrs)).collect();
    let returned = matching.len().min(fit);
    let count = if partial { returned } else { matching.len() } as u64;
    buf.fill(0);
    buf[..ReportHeader::SIZE].copy_from_slice(&ReportHeader { zones: count }.to_bytes());
    for (i, d) in matching.iter().take(returned).enumerate() {
        let o = ReportHeader::SIZE + i * ZoneDescriptor::SIZE;
        buf[o..o + ZoneDescriptor::SIZE].copy_from_slice(&d.to_bytes());
    }
}

/// The NVMe status a failed write most likely had, from the kernel's errno
/// and the zone's descriptor reported after the failure.
pub(crate) fn classify_write_failure(
    errno: i32,
    zone: Option<&ZoneDescriptor>,
    lba: u64,
    blocks: u64,
) -> Option<StatusCode> {
    match errno {
        libc::EOVERFLOW => return Some(StatusCode::TooManyActiveZones),
        libc::ETOOMANYREFS => return Some(StatusCode::TooManyOpenZones),
        _ => {}
    }
    let z = zone?;
    Some(match z.state {
        ZoneState::Full => StatusCode::ZoneIsFull,
        ZoneState::ReadOnly => StatusCode::ZoneIsReadOnly,
        ZoneState::Offline => StatusCode::ZoneIsOffline,
        _ if z.write_pointer != lba => StatusCode::ZoneInvalidWrite,
        _ if lba + blocks > z.start + z.capacity => StatusCode::ZoneBoundaryError,
        _ => return None,
    })
}

/// The refusal of a write with a placement handle: the kernel's zoned block
/// interface passes no FDP directive to the drive.
fn no_placement() -> DeviceError {
    DeviceError::Unsupported(
        "the Linux zoned block interface carries no Flexible Data Placement handles".into(),
    )
}

/// The refusal of the reclaim unit handle commands: the kernel's zoned
/// block interface has no I/O Management commands.
fn no_ruh_commands(op: &ZoneOp) -> DeviceError {
    DeviceError::Unsupported(format!(
        "{}: the Linux zoned block interface has no Flexible Data Placement (I/O Management) \
         commands",
        op.kind()
    ))
}

/// The error of a failed read (or other non-write data command): the block
/// layer's "critical medium error" (`ENODATA`, which the kernel's nvme
/// driver gives Unrecovered Read Error among others) is the device's media
/// error; anything else an OS error.
fn read_failure(op: &ZoneOp, errno: i32) -> DeviceError {
    match (op, errno) {
        (ZoneOp::Read { .. }, libc::ENODATA) => DeviceError::Nvme {
            status: StatusCode::UnrecoveredReadError.status(),
            op: op.kind(),
            lba: op.lba(),
        },
        _ => os_error(op.kind(), op.lba(), errno),
    }
}

/// The NVMe status of a failed zone action, from the kernel's errno.
pub(crate) fn classify_action_failure(errno: i32) -> Option<StatusCode> {
    Some(match errno {
        libc::EOVERFLOW => StatusCode::TooManyActiveZones,
        libc::ETOOMANYREFS => StatusCode::TooManyOpenZones,
        libc::EIO => StatusCode::InvalidZoneStateTransition,
        libc::EINVAL => StatusCode::InvalidField,
        _ => return None,
    })
}

/// A failed write, looked at.
#[derive(Debug)]
struct WriteFailure {
    errno: i32,
    /// The zone as reported after the failure.
    zone: Option<ZoneDescriptor>,
    /// The status the device most likely returned.
    code: Option<StatusCode>,
    /// The device would take the write: send it once more.
    retry: bool,
}

/// What the backend knows about one zone.
#[derive(Debug, Default)]
struct Track {
    /// The write pointer, when known.
    wp: Option<u64>,
    /// Start + capacity, from the last report of the zone.
    end: u64,
    /// Writes (and the emulated append) in flight to the zone.
    writes: u32,
    /// An emulated append holds the zone.
    appending: bool,
    /// A write to the zone failed and none has succeeded since: the
    /// kernel may still be recovering the zone's write pointer.
    recovering: bool,
}

/// What the device and its queues share.
#[derive(Debug)]
struct Shared {
    file: File,
    info: DeviceInfo,
    /// 512-byte sectors per logical block.
    spb: u64,
    io: BlockIo,
    zones: Vec<Mutex<Track>>,
}

/// The outcome of trying to start an emulated append.
enum Acquire {
    /// Write at this LBA.
    Ready(u64),
    /// Another command holds the zone: try again later.
    Busy,
    /// The append fails without reaching the device.
    Failed(DeviceError),
}

impl Shared {
    fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.file.as_fd()
    }

    fn bs(&self) -> u64 {
        self.info.block_size as u64
    }

    fn track(&self, zone: usize) -> MutexGuard<'_, Track> {
        self.zones[zone].lock().unwrap_or_else(|p| p.into_inner())
    }

    fn zone_of(&self, lba: u64) -> usize {
        (lba / self.info.zone_size) as usize
    }

    /// LBA Out of Range unless `blocks` blocks from `lba` are inside the
    /// namespace.
    fn check_range(&self, op: &ZoneOp, lba: u64, blocks: u64) -> Result<()> {
        let end = self.info.blocks();
        if lba >= end || lba.saturating_add(blocks) > end {
            return Err(op.error(StatusCode::LbaOutOfRange.status()));
        }
        Ok(())
    }

    /// The zone holding `lba`, as the kernel reports it now; refreshes the
    /// zone's track.
    fn query(&self, lba: u64) -> std::io::Result<ZoneDescriptor> {
        let (zones, cap) = sys::report_zones(self.fd(), lba * self.spb, 1)?;
        let z = zones.first().ok_or_else(|| std::io::Error::other("no zone reported"))?;
        let d = descriptor(z, self.spb, cap).map_err(std::io::Error::other)?;
        Ok(d)
    }

    /// Starts an append to the zone at `zslba` if nothing else holds it.
    fn acquire_append(&self, op: &ZoneOp, zslba: u64) -> Acquire {
        let zone = self.zone_of(zslba);
        let mut t = self.track(zone);
        if t.appending || t.writes > 0 {
            return Acquire::Busy;
        }
        let wp = match t.wp {
            Some(wp) => wp,
            None => match self.query(zslba) {
                Ok(d) => {
                    t.end = d.start + d.capacity;
                    match d.state {
                        ZoneState::Full => {
                            return Acquire::Failed(op.error(StatusCode::ZoneIsFull.status()))
                        }
                        ZoneState::ReadOnly => {
                            return Acquire::Failed(op.error(StatusCode::ZoneIsReadOnly.status()))
                        }
                        ZoneState::Offline => {
                            return Acquire::Failed(op.error(StatusCode::ZoneIsOffline.status()))
                        }
                        _ => d.write_pointer,
                    }
                }
                Err(e) => {
                    return Acquire::Failed(DeviceError::Io {
                        context: format!("report the zone at LBA {zslba} for an append"),
                        source: e,
                    })
                }
            },
        };
        if wp >= t.end && t.end > 0 {
            return Acquire::Failed(op.error(StatusCode::ZoneIsFull.status()));
        }
        t.appending = true;
        t.writes += 1;
        t.wp = Some(wp);
        Acquire::Ready(wp)
    }

    /// Counts a write to the zone holding `lba` as in flight.
    fn begin_write(&self, lba: u64) {
        self.track(self.zone_of(lba)).writes += 1;
    }

    /// How a write to the zone holding `lba` goes through io_uring: after
    /// a failed write to the zone, from a kernel worker. The kernel's zone
    /// write plugging recovers the zone's write pointer asynchronously
    /// after a failure, and meanwhile fails writes that do not wait
    /// (io_uring's first, non-blocking attempt) with `EIO`; a worker's
    /// write waits for the recovery, as `pwrite` does.
    fn write_how(&self, lba: u64, fua: bool) -> WriteHow {
        let from_worker = self.track(self.zone_of(lba)).recovering;
        WriteHow { dsync: fua, from_worker }
    }

    /// Ends a write (or append) of `blocks` at `lba`: on success the write
    /// pointer moves past it, on failure it is forgotten.
    fn end_write(&self, lba: u64, blocks: u64, ok: bool, append: bool) {
        let mut t = self.track(self.zone_of(lba));
        t.recovering = !ok;
        t.writes = t.writes.saturating_sub(1);
        if append {
            t.appending = false;
        }
        t.wp = match t.wp {
            Some(wp) if ok && wp == lba && lba + blocks < t.end => Some(lba + blocks),
            _ => None,
        };
    }

    /// Looks at a write-type command of `blocks` at `target` that failed
    /// with `errno`.
    ///
    /// The zone is always reported after a failed write: besides telling
    /// what went wrong, the report is what lets the kernel's zone write
    /// plugging (Linux 6.10 and later) accept writes to the zone again.
    fn assess_write_failure(&self, target: u64, blocks: u64, errno: i32) -> WriteFailure {
        if (target / self.info.zone_size) < self.zones.len() as u64 {
            self.track(self.zone_of(target)).recovering = true;
        }
        let zone = self.query(target).ok();
        let code = classify_write_failure(errno, zone.as_ref(), target, blocks);
        // The device would have taken this write: the kernel refused it
        // because it had lost track of the zone's write pointer (a write
        // issued right after a failed one can meet the stale state).
        let retry = errno == libc::EIO
            && code.is_none()
            && zone.as_ref().is_some_and(|z| {
                matches!(
                    z.state,
                    ZoneState::Empty
                        | ZoneState::ImplicitlyOpen
                        | ZoneState::ExplicitlyOpen
                        | ZoneState::Closed
                ) && z.write_pointer == target
            });
        WriteFailure { errno, zone, code, retry }
    }

    /// The error of a write-type command, from [`Shared::assess_write_failure`].
    fn write_error(&self, op: &ZoneOp, target: u64, blocks: u64, f: &WriteFailure) -> DeviceError {
        match f.code {
            Some(code) => op.error(code.status()),
            None => DeviceError::Io {
                context: match &f.zone {
                    Some(z) => format!(
                        "{} ({} blocks at LBA {target}; the zone is {:?}, write pointer {})",
                        op.kind().describe(op.lba(), false),
                        blocks,
                        z.state,
                        z.write_pointer
                    ),
                    None => op.kind().describe(op.lba(), false),
                },
                source: std::io::Error::from_raw_os_error(f.errno),
            },
        }
    }

    /// The error of a write-type command that failed with `errno`.
    fn write_failure(&self, op: &ZoneOp, target: u64, blocks: u64, errno: i32) -> DeviceError {
        let f = self.assess_write_failure(target, blocks, errno);
        self.write_error(op, target, blocks, &f)
    }

    /// Runs a zone management action.
    fn zone_action(&self, op: &ZoneOp, action: ZoneAction, target: Target) -> Result<()> {
        let request = match action {
            ZoneAction::Open => sys::BLKOPENZONE,
            ZoneAction::Close => sys::BLKCLOSEZONE,
            ZoneAction::Finish => sys::BLKFINISHZONE,
            ZoneAction::Reset => sys::BLKRESETZONE,
            ZoneAction::Offline => {
                return Err(DeviceError::Unsupported(
                    "the Linux zoned block interface has no Offline Zone action".into(),
                ))
            }
        };
        let zone_sectors = self.info.zone_size * self.spb;
        let (sector, sectors) = match target {
            Target::All if action == ZoneAction::Reset => (0, self.info.blocks() * self.spb),
            Target::All => {
                return Err(DeviceError::Unsupported(format!(
                    "the Linux zoned block interface has no Select All for {} (only reset \
                     of all zones)",
                    action.name()
                )))
            }
            Target::Zone(lba) => {
                self.check_range(op, lba, 1)?;
                if lba % self.info.zone_size != 0 {
                    return Err(op.error(StatusCode::InvalidField.status()));
                }
                (lba * self.spb, zone_sectors)
            }
        };
        let r = sys::zone_management(self.fd(), request, sector, sectors);
        // Whatever happened, what is known about the zones may be stale.
        let zones = match target {
            Target::All => 0..self.zones.len(),
            Target::Zone(lba) => self.zone_of(lba)..self.zone_of(lba) + 1,
        };
        for z in zones {
            let mut t = self.track(z);
            t.wp = match (&r, action) {
                (Ok(()), ZoneAction::Reset) => Some(z as u64 * self.info.zone_size),
                (Ok(()), ZoneAction::Open | ZoneAction::Close) => t.wp,
                _ => None,
            };
        }
        r.map_err(|e| {
            let errno = e.raw_os_error().unwrap_or(libc::EIO);
            match classify_action_failure(errno) {
                Some(code) => op.error(code.status()),
                None => os_error(op.kind(), op.lba(), errno),
            }
        })
    }

    /// Writes a zone report from `slba` on into `buf`.
    fn report(
        &self,
        op: &ZoneOp,
        slba: u64,
        filter: ReportFilter,
        partial: bool,
        extended: bool,
        buf: &mut [u8],
    ) -> Result<()> {
        if extended {
            return Err(DeviceError::Unsupported(
                "the Linux zoned block interface has no extended zone reports".into(),
            ));
        }
        command::check_report_len(buf.len())?;
        self.check_range(op, slba, 1)?;
        let fit = (buf.len() - ReportHeader::SIZE) / ZoneDescriptor::SIZE;
        let total = self.info.blocks() * self.spb;
        let mut sector = slba / self.info.zone_size * self.info.zone_size * self.spb;
        let mut zones = Vec::new();
        let mut matched = 0usize;
        while sector < total {
            let (chunk, cap) = sys::report_zones(self.fd(), sector, REPORT_CHUNK).map_err(|e| {
                DeviceError::Io { context: op.kind().describe(op.lba(), false), source: e }
            })?;
            let Some(last) = chunk.last() else { break };
            sector = last.start + last.len;
            for z in &chunk {
                let d = descriptor(z, self.spb, cap).map_err(DeviceError::Unsupported)?;
                if filter.matches(d.state, d.attrs) {
                    matched += 1;
                }
                zones.push(d);
            }
            if partial && matched >= fit {
                break;
            }
        }
        encode_report(&zones, filter, partial, buf);
        Ok(())
    }

    /// Writes zeroes to `blocks` blocks at `lba` (`BLKZEROOUT`).
    fn write_zeroes(&self, op: &ZoneOp, lba: u64, blocks: u64) -> Result<()> {
        if blocks == 0 {
            return Err(DeviceError::InvalidArgument("write zeroes of 0 blocks".into()));
        }
        self.check_range(op, lba, blocks)?;
        self.begin_write(lba);
        let r = sys::zero_out(self.fd(), lba * self.bs(), blocks * self.bs());
        self.end_write(lba, blocks, r.is_ok(), false);
        r.map_err(|e| self.write_failure(op, lba, blocks, e.raw_os_error().unwrap_or(libc::EIO)))
    }

    /// Reads into or writes from `data` at `lba` with `pread`/`pwrite`.
    fn psync(&self, lba: u64, data: Borrowed<'_>, fua: bool) -> std::io::Result<()> {
        let offset = lba * self.bs();
        match data {
            Borrowed::FromDevice(d) => self.file.read_exact_at(d, offset),
            Borrowed::ToDevice(d) => {
                self.file.write_all_at(d, offset)?;
                if fua {
                    self.file.sync_data()?;
                }
                Ok(())
            }
            Borrowed::None => Ok(()),
        }
    }
}

/// A zoned namespace reached through the kernel's zoned block device.
///
/// Thread safety: `Send + Sync`; each thread makes its own queue with
/// [`ZonedDevice::queue`]; the emulated appends of all queues share one
/// table of zone write pointers.
#[derive(Debug)]
pub struct ZonedBlockDevice {
    shared: Arc<Shared>,
    path: PathBuf,
}

impl ZonedBlockDevice {
    /// Opens the zoned block device at `path` (`/dev/nvme0n1`); `io` picks
    /// how data moves (`None`: io_uring where the kernel has it). `uri` is
    /// the URI as given, kept for [`DeviceInfo::uri`].
    pub fn open(path: &Path, io: Option<BlockIo>, uri: &str) -> Result<Self> {
        super::check_device_file(path, uri, true)?;
        let fail = |reason: String| DeviceError::Unavailable { uri: uri.to_string(), reason };
        let real = std::fs::canonicalize(path)
            .map_err(|e| fail(format!("resolve {}: {e}", path.display())))?;
        let name = real.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let dir = sysfs::block_dir(Path::new("/sys"), &name);
        let limits = sysfs::BlockLimits::read(&dir).map_err(fail)?;
        if limits.zoned != "host-managed" {
            return Err(DeviceError::Unsupported(format!(
                "{} is not a host-managed zoned block device (queue/zoned is {:?})",
                path.display(),
                limits.zoned
            )));
        }
        let bs = limits.logical_block_size;
        if bs < 512 || !bs.is_power_of_two() || limits.zone_sectors == 0 || limits.nr_zones == 0 {
            return Err(fail(format!(
                "unusable geometry: {bs}-byte blocks, zones of {} sectors, {} zones",
                limits.zone_sectors, limits.nr_zones
            )));
        }
        let spb = bs as u64 / 512;
        let file = super::open_rw(path, uri, libc::O_DIRECT)?;
        let io = match io {
            Some(BlockIo::Psync) => BlockIo::Psync,
            requested => match Ring::<Plain>::new(1) {
                Ok(_) => BlockIo::Uring,
                Err(e) if requested.is_none() => {
                    tracing::warn!(error = %e, "no io_uring; data moves with pread/pwrite");
                    BlockIo::Psync
                }
                Err(e) => return Err(fail(format!("io_uring: {e}"))),
            },
        };
        // Every zone, once: types, capacities, write pointers.
        let mut all = Vec::with_capacity(limits.nr_zones as usize);
        let total = limits.sectors;
        let mut sector = 0;
        while sector < total {
            let (chunk, cap) = sys::report_zones(file.as_fd(), sector, REPORT_CHUNK)
                .map_err(|e| fail(format!("BLKREPORTZONE: {e}")))?;
            let Some(last) = chunk.last() else { break };
            sector = last.start + last.len;
            for z in &chunk {
                all.push(descriptor(z, spb, cap).map_err(DeviceError::Unsupported)?);
            }
        }
        let first = all.first().ok_or_else(|| fail("the device reported no zones".into()))?;
        let zone_capacity = first.capacity;
        let variable = all.iter().any(|d| d.capacity != zone_capacity);
        let zones = all
            .iter()
            .map(|d| {
                Mutex::new(Track {
                    wp: d.state.has_write_pointer().then_some(d.write_pointer),
                    end: d.start + d.capacity,
                    ..Default::default()
                })
            })
            .collect();
        let identity = sysfs::nvme_identity(&dir, &name);
        let conventional =
            identity.controller_dir.as_deref().and_then(|c| {
                sysfs::conventional_sibling(c).map(|(nsid, block_size, blocks)| {
                    ConventionalNamespace { nsid, block_size, blocks }
                })
            });
        let block = |n: usize| (n / bs as usize).max(1) * bs as usize;
        let mdts = block(limits.max_request_bytes());
        let zasl = match limits.zone_append_max_bytes {
            0 => mdts,
            z => block((z as usize).min(mdts)),
        };
        let info = DeviceInfo {
            backend: "zbd",
            transport: format!("zoned block device {} ({})", path.display(), io.name()),
            uri: uri.to_string(),
            model: identity.model,
            serial: identity.serial,
            firmware: identity.firmware,
            nsid: identity.nsid,
            block_size: bs,
            metadata_size: 0,
            zoned: true,
            namespace_blocks: all.len() as u64 * limits.zone_blocks(),
            zone_count: all.len() as u64,
            zone_size: limits.zone_blocks(),
            zone_capacity,
            max_open: (limits.max_open_zones > 0).then_some(limits.max_open_zones),
            max_active: (limits.max_active_zones > 0).then_some(limits.max_active_zones),
            zasl_bytes: zasl,
            mdts_bytes: mdts,
            capabilities: Capabilities {
                append: true,
                copy: None,
                write_zeroes: true,
                extended_report: false,
                extension_bytes: 0,
                // The block layer splits I/O at zone boundaries.
                read_across_zone_boundaries: true,
                variable_zone_capacity: variable,
                volatile_write_cache: limits.write_back_cache,
                select_all: false,
                offline: false,
                // The block layer has no separate metadata buffer.
                metadata: false,
                stores_data: true,
                zrwa: None,
            },
            conventional,
            fdp: None,
            identify: None,
        };
        tracing::info!(
            uri,
            zones = info.zone_count,
            zone_size = info.zone_size,
            io = io.name(),
            "zoned block device open"
        );
        Ok(ZonedBlockDevice {
            shared: Arc::new(Shared { file, info, spb, io, zones }),
            path: path.to_path_buf(),
        })
    }

    /// The block device's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How data moves.
    pub fn io(&self) -> BlockIo {
        self.shared.io
    }

    /// A queue of the concrete type with room for `depth` commands.
    pub fn block_queue(&self, depth: usize) -> Result<ZonedBlockQueue> {
        ZonedBlockQueue::new(Arc::clone(&self.shared), depth)
    }
}

impl ZonedDevice for ZonedBlockDevice {
    fn info(&self) -> &DeviceInfo {
        &self.shared.info
    }

    fn queue(&self, depth: usize) -> Result<Box<dyn ZoneQueue>> {
        Ok(Box::new(self.block_queue(depth)?))
    }

    fn alloc(&self, len: usize) -> Result<IoBuffer> {
        IoBuffer::aligned(len)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Where a command is.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
enum Stage {
    /// Submitted, waiting for the next ring.
    Staged,
    /// An append waiting for its zone.
    Waiting,
    /// In the io_uring ring.
    InFlight,
}

/// An outstanding command.
#[derive(Debug)]
struct Slot {
    tag: u64,
    op: ZoneOp,
    stage: Stage,
    /// The buffer, while the command is not in the ring.
    buffer: Option<IoBuffer>,
    /// Where a write (or an append) goes, and its blocks.
    target: u64,
    blocks: u64,
    /// The write was sent once more (see [`WriteFailure::retry`]).
    retried: bool,
}

/// A queue of the zoned block backend.
///
/// Thread safety: `Send`, not `Sync`: one thread submits, rings and polls.
#[derive(Debug)]
pub struct ZonedBlockQueue {
    shared: Arc<Shared>,
    ring: Option<Ring<Plain>>,
    slots: Vec<Option<Slot>>,
    free: Vec<u32>,
    staged: VecDeque<u32>,
    waiting: VecDeque<u32>,
    deferred: VecDeque<Completion>,
}

impl ZonedBlockQueue {
    fn new(shared: Arc<Shared>, depth: usize) -> Result<Self> {
        if depth == 0 {
            return Err(DeviceError::InvalidArgument("queue depth 0 (at least 1)".into()));
        }
        let n = depth.min(MAX_QUEUE_DEPTH);
        let ring = match shared.io {
            BlockIo::Uring => Some(Ring::new(n).map_err(|e| DeviceError::Io {
                context: format!("create an io_uring of {n} entries"),
                source: e,
            })?),
            BlockIo::Psync => None,
        };
        Ok(ZonedBlockQueue {
            shared,
            ring,
            slots: (0..n).map(|_| None).collect(),
            free: (0..n as u32).rev().collect(),
            staged: VecDeque::new(),
            waiting: VecDeque::new(),
            deferred: VecDeque::with_capacity(n),
        })
    }

    /// Checks a submission; the buffer comes back with any refusal.
    fn check(&self, op: &ZoneOp, buffer: &Option<IoBuffer>) -> Result<u64> {
        let info = &self.shared.info;
        match (op.data_to_device(), buffer) {
            (None, Some(_)) => return Err(command::stray_buffer(op)),
            (Some(_), None) => return Err(command::no_buffer(op)),
            _ => {}
        }
        if let Some(b) = buffer {
            command::check_metadata(info, op, b)?;
        }
        let len = buffer.as_ref().map_or(0, |b| b.len());
        match op {
            ZoneOp::Write { placement: Some(_), .. } => Err(no_placement()),
            ZoneOp::Read { .. } | ZoneOp::Write { .. } => {
                Ok(command::blocks(info, op, len)? as u64)
            }
            ZoneOp::Append { .. } => {
                command::check_append_len(info, len)?;
                Ok(command::blocks(info, op, len)? as u64)
            }
            ZoneOp::WriteZeroes { blocks, .. } => Ok(*blocks as u64),
            ZoneOp::ReportZones { .. } => command::check_report_len(len).map(|()| 0),
            ZoneOp::SetZoneExtension { .. } => Err(DeviceError::Unsupported(
                "the Linux zoned block interface has no zone descriptor extensions".into(),
            )),
            ZoneOp::OpenZrwa { .. } | ZoneOp::CommitZrwa { .. } => Err(DeviceError::Unsupported(
                "the Linux zoned block interface has no zone random write areas".into(),
            )),
            ZoneOp::Copy { ranges, .. } => {
                command::check_ranges(ranges)?;
                Err(DeviceError::Unsupported(
                    "the Linux zoned block interface has no Copy command".into(),
                ))
            }
            ZoneOp::RuhStatus | ZoneOp::RuhUpdate { .. } => Err(no_ruh_commands(op)),
            ZoneOp::Flush | ZoneOp::Zone { .. } => Ok(0),
        }
    }

    /// Completes slot `i` with `result`, freeing it.
    fn done(&mut self, i: u32, result: Result<u64>, buffer: Option<IoBuffer>) {
        if let Some(s) = self.slots[i as usize].take() {
            self.free.push(i);
            self.deferred.push_back(Completion {
                tag: s.tag,
                op: s.op.kind(),
                result,
                buffer: buffer.or(s.buffer),
            });
        }
    }

    /// Starts a staged (or waiting) command: into the ring, or done at
    /// once. Returns false when an append must wait for its zone.
    fn start(&mut self, i: u32) -> bool {
        let sh = Arc::clone(&self.shared);
        let Some(slot) = self.slots[i as usize].as_mut() else { return true };
        let op = slot.op.clone();
        let blocks = slot.blocks;
        let bs = sh.bs();
        let fd = sh.fd();
        match &op {
            ZoneOp::Read { lba } | ZoneOp::Write { lba, .. } => {
                if let Err(e) = sh.check_range(&op, *lba, blocks) {
                    self.done(i, Err(e), None);
                    return true;
                }
                let write = matches!(op, ZoneOp::Write { .. });
                let fua = matches!(op, ZoneOp::Write { fua: true, .. });
                slot.target = *lba;
                if write {
                    sh.begin_write(*lba);
                }
                self.issue(i, *lba * bs, write, fua);
                true
            }
            ZoneOp::Append { zslba, fua } => {
                if let Err(e) = sh.check_range(&op, *zslba, 1) {
                    self.done(i, Err(e), None);
                    return true;
                }
                if zslba % sh.info.zone_size != 0 {
                    self.done(i, Err(op.error(StatusCode::InvalidField.status())), None);
                    return true;
                }
                match sh.acquire_append(&op, *zslba) {
                    Acquire::Busy => false,
                    Acquire::Failed(e) => {
                        self.done(i, Err(e), None);
                        true
                    }
                    Acquire::Ready(wp) => {
                        slot.target = wp;
                        self.issue(i, wp * bs, true, *fua);
                        true
                    }
                }
            }
            ZoneOp::Flush => {
                match &mut self.ring {
                    Some(ring) => {
                        if ring.push_fsync(i, fd).is_ok() {
                            slot.stage = Stage::InFlight;
                            return true;
                        }
                        let r = self.shared.file.sync_data().map(|()| 0).map_err(|e| {
                            os_error(OpKind::Flush, None, e.raw_os_error().unwrap_or(libc::EIO))
                        });
                        self.done(i, r, None);
                    }
                    None => {
                        let r = self.shared.file.sync_data().map(|()| 0).map_err(|e| {
                            os_error(OpKind::Flush, None, e.raw_os_error().unwrap_or(libc::EIO))
                        });
                        self.done(i, r, None);
                    }
                }
                true
            }
            ZoneOp::WriteZeroes { lba, blocks } => {
                let r = sh.write_zeroes(&op, *lba, *blocks as u64).map(|()| 0);
                self.done(i, r, None);
                true
            }
            ZoneOp::Zone { action, target } => {
                let r = sh.zone_action(&op, *action, *target).map(|()| 0);
                self.done(i, r, None);
                true
            }
            ZoneOp::ReportZones { slba, filter, partial, extended } => {
                let mut buf = slot.buffer.take();
                let r = match buf.as_mut() {
                    Some(b) => sh.report(&op, *slba, *filter, *partial, *extended, b).map(|()| 0),
                    None => Err(command::no_buffer(&op)),
                };
                self.done(i, r, buf);
                true
            }
            ZoneOp::SetZoneExtension { .. }
            | ZoneOp::Copy { .. }
            | ZoneOp::OpenZrwa { .. }
            | ZoneOp::CommitZrwa { .. }
            | ZoneOp::RuhStatus
            | ZoneOp::RuhUpdate { .. } => {
                let r = self.check(&op, &None).map(|_| 0);
                self.done(i, r, None);
                true
            }
        }
    }

    /// Hands a read or write of slot `i` to the ring (or runs it now).
    fn issue(&mut self, i: u32, offset: u64, write: bool, fua: bool) {
        let sh = Arc::clone(&self.shared);
        let Some(slot) = self.slots[i as usize].as_mut() else { return };
        let Some(buf) = slot.buffer.take() else { return };
        if let Some(ring) = &mut self.ring {
            let held = Held::Buffer(buf);
            let r = if write {
                ring.push_write(i, sh.fd(), offset, sh.write_how(offset / sh.bs(), fua), held)
            } else {
                ring.push_read(i, sh.fd(), offset, held)
            };
            match r {
                Ok(()) => slot.stage = Stage::InFlight,
                Err(refused) => {
                    // Cannot happen with one ring entry per slot; run it
                    // synchronously all the same.
                    let Held::Buffer(buf) = refused.0 else { return };
                    slot.buffer = Some(buf);
                    self.run_sync(i, write, fua);
                }
            }
        } else {
            slot.buffer = Some(buf);
            self.run_sync(i, write, fua);
        }
    }

    /// Runs the read or write of slot `i` with pread/pwrite.
    fn run_sync(&mut self, i: u32, write: bool, fua: bool) {
        let sh = Arc::clone(&self.shared);
        let Some(slot) = self.slots[i as usize].as_mut() else { return };
        let Some(mut buf) = slot.buffer.take() else { return };
        let target = slot.target;
        let data =
            if write { Borrowed::ToDevice(&buf[..]) } else { Borrowed::FromDevice(&mut buf[..]) };
        let r = sh.psync(target, data, fua);
        let errno = r.as_ref().err().map(|e| e.raw_os_error().unwrap_or(libc::EIO));
        self.complete(i, errno, Some(buf));
    }

    /// Completes the read, write or append of slot `i`: `errno` is `None`
    /// on success.
    fn complete(&mut self, i: u32, errno: Option<i32>, buffer: Option<IoBuffer>) {
        let sh = Arc::clone(&self.shared);
        let Some(slot) = self.slots[i as usize].as_mut() else { return };
        let (op, target, blocks) = (slot.op.clone(), slot.target, slot.blocks);
        let result = match &op {
            ZoneOp::Write { fua, .. } | ZoneOp::Append { fua, .. } => {
                let append = matches!(op, ZoneOp::Append { .. });
                let failure = errno.map(|e| sh.assess_write_failure(target, blocks, e));
                if failure.as_ref().is_some_and(|f| f.retry) && !slot.retried && buffer.is_some() {
                    // The zone (and, for an append, its token) stays held.
                    slot.retried = true;
                    slot.buffer = buffer;
                    let fua = *fua;
                    self.issue(i, target * sh.bs(), true, fua);
                    self.submit_ring();
                    return;
                }
                sh.end_write(target, blocks, errno.is_none(), append);
                match failure {
                    None if append => Ok(target),
                    None => Ok(0),
                    Some(f) => Err(sh.write_error(&op, target, blocks, &f)),
                }
            }
            _ => match errno {
                None => Ok(0),
                Some(e) => Err(read_failure(&op, e)),
            },
        };
        self.done(i, result, buffer);
    }

    /// Turns a ring completion into the command's.
    fn on_cqe(&mut self, c: Cqe) {
        let i = c.slot;
        let Some(slot) = self.slots[i as usize].as_ref() else { return };
        let buffer = match c.held {
            Held::Buffer(b) => Some(b),
            _ => None,
        };
        let expected = match slot.op {
            ZoneOp::Flush => 0,
            _ => slot.blocks * self.shared.bs(),
        };
        let errno = match c.res {
            r if r < 0 => Some(-r),
            r if r as u64 == expected => None,
            // A short transfer: the kernel stopped at the end of the device.
            _ => Some(libc::EIO),
        };
        self.complete(i, errno, buffer);
    }

    /// Reaps the ring and starts appends that were waiting for their zone.
    fn progress(&mut self, wait: Option<Duration>) {
        let mut got = Vec::new();
        if let Some(ring) = &mut self.ring {
            match wait {
                Some(t) if self.waiting.is_empty() => ring.wait(t, &mut |c| got.push(c)),
                _ => ring.reap(usize::MAX, &mut |c| got.push(c)),
            };
        }
        for c in got {
            self.on_cqe(c);
        }
        self.retry_waiting();
        if !self.waiting.is_empty() && wait.is_some() {
            // Another queue holds the zone: let it run.
            std::thread::yield_now();
        }
    }

    fn retry_waiting(&mut self) {
        let mut started = false;
        for _ in 0..self.waiting.len() {
            let Some(i) = self.waiting.pop_front() else { break };
            if self.start(i) {
                started = true;
            } else {
                self.waiting.push_back(i);
            }
        }
        if started {
            self.submit_ring();
        }
    }

    fn submit_ring(&mut self) {
        if let Some(ring) = &mut self.ring {
            if let Err(e) = ring.submit() {
                tracing::error!(error = %e, "io_uring submission failed");
            }
        }
    }

    /// Rings and progresses until a slot is free, keeping completions.
    fn make_room(&mut self) -> Result<()> {
        let start = Instant::now();
        if self.free.is_empty() && !self.staged.is_empty() {
            self.ring();
        }
        while self.free.is_empty() {
            self.progress(Some(Duration::from_millis(50)));
            if self.free.is_empty() && start.elapsed() > crate::device::DEFAULT_TIMEOUT {
                return Err(DeviceError::Timeout {
                    what: "room in a full queue",
                    after: start.elapsed(),
                });
            }
        }
        Ok(())
    }

    /// Runs a read, write or emulated append on borrowed memory and waits.
    fn run_data(&mut self, op: &ZoneOp, lba: u64, data: Borrowed<'_>, fua: bool) -> Result<u64> {
        let sh = Arc::clone(&self.shared);
        let (write, len) = match &data {
            Borrowed::ToDevice(d) => (true, d.len()),
            Borrowed::FromDevice(d) => (false, d.len()),
            Borrowed::None => return Err(command::no_buffer(op)),
        };
        let blocks = command::blocks(&sh.info, op, len)? as u64;
        let append = matches!(op, ZoneOp::Append { .. });
        let target = if append {
            command::check_append_len(&sh.info, len)?;
            sh.check_range(op, lba, 1)?;
            if !lba.is_multiple_of(sh.info.zone_size) {
                return Err(op.error(StatusCode::InvalidField.status()));
            }
            let start = Instant::now();
            loop {
                match sh.acquire_append(op, lba) {
                    Acquire::Ready(wp) => break wp,
                    Acquire::Failed(e) => return Err(e),
                    Acquire::Busy => {
                        if start.elapsed() > crate::device::DEFAULT_TIMEOUT {
                            return Err(DeviceError::Timeout {
                                what: "the zone held by other commands",
                                after: start.elapsed(),
                            });
                        }
                        self.progress(Some(Duration::from_millis(10)));
                    }
                }
            }
        } else {
            sh.check_range(op, lba, blocks)?;
            if write {
                sh.begin_write(lba);
            }
            lba
        };
        let mut data = data;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let errno = self.transfer(target, &mut data, len, fua);
            let failure = match errno {
                Some(e) if write => Some(sh.assess_write_failure(target, blocks, e)),
                _ => None,
            };
            if failure.as_ref().is_some_and(|f| f.retry) && attempt == 1 {
                continue;
            }
            if write {
                sh.end_write(target, blocks, errno.is_none(), append);
            }
            return match (errno, failure) {
                (None, _) if append => Ok(target),
                (None, _) => Ok(0),
                (Some(_), Some(f)) => Err(sh.write_error(op, target, blocks, &f)),
                (Some(e), None) => Err(os_error(op.kind(), op.lba(), e)),
            };
        }
    }

    /// Moves `data` (borrowed) at `lba` and waits: the errno of a failure.
    fn transfer(
        &mut self,
        lba: u64,
        data: &mut Borrowed<'_>,
        len: usize,
        fua: bool,
    ) -> Option<i32> {
        let sh = Arc::clone(&self.shared);
        let how = sh.write_how(lba, fua);
        let data = match data {
            Borrowed::FromDevice(d) => Borrowed::FromDevice(d),
            Borrowed::ToDevice(d) => Borrowed::ToDevice(d),
            Borrowed::None => Borrowed::None,
        };
        match &mut self.ring {
            Some(ring) => {
                let slot = self.free.pop().expect("make_room left a free slot");
                let mut got = Vec::new();
                let r = ring
                    .run_borrowed_rw(slot, sh.fd(), lba * sh.bs(), data, how, &mut |c| got.push(c));
                self.free.push(slot);
                for c in got {
                    self.on_cqe(c);
                }
                match r {
                    Ok(c) if c.res >= 0 && c.res as usize == len => None,
                    Ok(c) if c.res < 0 => Some(-c.res),
                    Ok(_) => Some(libc::EIO),
                    Err(e) => Some(e.raw_os_error().unwrap_or(libc::EIO)),
                }
            }
            None => sh.psync(lba, data, fua).err().map(|e| e.raw_os_error().unwrap_or(libc::EIO)),
        }
    }
}

impl ZoneQueue for ZonedBlockQueue {
    fn info(&self) -> &DeviceInfo {
        &self.shared.info
    }

    fn alloc(&self, len: usize) -> Result<IoBuffer> {
        IoBuffer::aligned(len)
    }

    fn capacity(&self) -> usize {
        self.slots.len()
    }

    fn outstanding(&self) -> usize {
        self.slots.len() - self.free.len() + self.deferred.len()
    }

    fn submit(&mut self, op: ZoneOp, buffer: Option<IoBuffer>, tag: u64) -> Result<(), Rejected> {
        let Some(i) = self.free.pop() else {
            return Err(Rejected { error: DeviceError::QueueFull, buffer });
        };
        let blocks = match self.check(&op, &buffer) {
            Ok(b) => b,
            Err(error) => {
                self.free.push(i);
                return Err(Rejected { error, buffer });
            }
        };
        self.slots[i as usize] =
            Some(Slot { tag, op, stage: Stage::Staged, buffer, target: 0, blocks, retried: false });
        self.staged.push_back(i);
        Ok(())
    }

    fn ring(&mut self) {
        while let Some(i) = self.staged.pop_front() {
            if !self.start(i) {
                if let Some(s) = self.slots[i as usize].as_mut() {
                    s.stage = Stage::Waiting;
                }
                self.waiting.push_back(i);
            }
        }
        self.submit_ring();
    }

    fn poll(&mut self, max: usize, f: &mut dyn FnMut(Completion)) -> usize {
        if self.deferred.len() < max {
            self.progress(None);
        }
        let mut n = 0;
        while n < max {
            let Some(c) = self.deferred.pop_front() else { break };
            f(c);
            n += 1;
        }
        n
    }

    fn execute(&mut self, op: &ZoneOp, data: Data<'_>) -> Result<u64> {
        command::check_data_metadata(&self.shared.info, op, &data)?;
        self.make_room()?;
        let sh = Arc::clone(&self.shared);
        match (op, data) {
            (ZoneOp::Read { lba }, Data::FromDevice(buf)) => {
                self.run_data(op, *lba, Borrowed::FromDevice(buf), false)
            }
            (ZoneOp::Write { placement: Some(_), .. }, _) => Err(no_placement()),
            (ZoneOp::Write { lba, fua, placement: None }, Data::ToDevice(buf)) => {
                self.run_data(op, *lba, Borrowed::ToDevice(buf), *fua)
            }
            (ZoneOp::Append { zslba, fua }, Data::ToDevice(buf)) => {
                self.run_data(op, *zslba, Borrowed::ToDevice(buf), *fua)
            }
            (ZoneOp::WriteZeroes { lba, blocks }, Data::None) => {
                sh.write_zeroes(op, *lba, *blocks as u64).map(|()| 0)
            }
            (ZoneOp::Flush, Data::None) => {
                sh.file.sync_data().map(|()| 0).map_err(|e| {
                    os_error(OpKind::Flush, None, e.raw_os_error().unwrap_or(libc::EIO))
                })
            }
            (ZoneOp::Zone { action, target }, Data::None) => {
                sh.zone_action(op, *action, *target).map(|()| 0)
            }
            (ZoneOp::ReportZones { slba, filter, partial, extended }, Data::FromDevice(buf)) => {
                sh.report(op, *slba, *filter, *partial, *extended, buf).map(|()| 0)
            }
            (
                ZoneOp::SetZoneExtension { .. }
                | ZoneOp::Copy { .. }
                | ZoneOp::OpenZrwa { .. }
                | ZoneOp::CommitZrwa { .. },
                _,
            ) => self.check(op, &None).map(|_| 0),
            (ZoneOp::RuhStatus | ZoneOp::RuhUpdate { .. }, _) => Err(no_ruh_commands(op)),
            (op, Data::None) => Err(command::no_buffer(op)),
            (op, _) if op.data_to_device().is_none() => Err(command::stray_buffer(op)),
            (op, _) => Err(command::wrong_way(op)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blk(start: u64, len: u64, wp: u64, cond: u8, cap: u64) -> BlkZone {
        BlkZone { start, len, wp, zone_type: 2, cond, capacity: cap, ..Default::default() }
    }

    #[test]
    fn a_medium_error_on_a_read_is_an_unrecovered_read_error() {
        let e = read_failure(&ZoneOp::Read { lba: 9 }, libc::ENODATA);
        assert!(e.is_status(StatusCode::UnrecoveredReadError), "{e}");
        assert!(matches!(e, DeviceError::Nvme { lba: Some(9), .. }));
        let e = read_failure(&ZoneOp::Read { lba: 9 }, libc::EIO);
        assert!(matches!(e, DeviceError::Io { .. }), "{e}");
    }

    #[test]
    fn kernel_zones_become_descriptors_in_blocks() {
        // 4 KiB blocks: 8 sectors each; a 64-block zone is 512 sectors.
        let d = descriptor(&blk(512, 512, 520, 2, 384), 8, true).unwrap();
        assert_eq!(d.zone_type, ZoneType::SequentialWriteRequired);
        assert_eq!((d.start, d.capacity, d.write_pointer), (64, 48, 65));
        assert_eq!(d.state, ZoneState::ImplicitlyOpen);
        // Without capacities the length stands in.
        assert_eq!(descriptor(&blk(0, 512, 0, 1, 0), 8, false).unwrap().capacity, 64);
        // Full zones carry no write pointer; reset recommended is an attribute.
        let mut z = blk(0, 512, 512, 0xE, 384);
        z.reset = 1;
        let d = descriptor(&z, 8, true).unwrap();
        assert_eq!(d.write_pointer, ZoneDescriptor::INVALID_WRITE_POINTER);
        assert!(d.attrs.has(ZoneAttributes::RESET_RECOMMENDED));
        let zone = crate::zone::Zone::from_descriptor(&d, 64);
        assert_eq!((zone.write_pointer, zone.state), (None, ZoneState::Full));
        // Conventional zones and unknown conditions are refused.
        let mut c = blk(0, 512, 0, 0, 512);
        c.zone_type = 1;
        assert!(descriptor(&c, 8, true).unwrap_err().contains("type 1"));
        assert!(descriptor(&blk(0, 512, 0, 0x5, 512), 8, true).is_err());
    }

    fn zones() -> Vec<ZoneDescriptor> {
        let states =
            [ZoneState::Empty, ZoneState::ImplicitlyOpen, ZoneState::Empty, ZoneState::Full];
        states
            .iter()
            .enumerate()
            .map(|(i, &state)| ZoneDescriptor {
                zone_type: ZoneType::SequentialWriteRequired,
                state,
                attrs: ZoneAttributes(0),
                attrs_info: 0,
                capacity: 48,
                start: i as u64 * 64,
                write_pointer: i as u64 * 64,
            })
            .collect()
    }

    #[test]
    fn reports_are_encoded_as_the_device_would() {
        let z = zones();
        let mut buf = vec![0xFFu8; 64 + 2 * 64];
        encode_report(&z, ReportFilter::All, true, &mut buf);
        let r = crate::zone::parse_report(&buf, 64, None).unwrap();
        assert_eq!(r.zones, 2);
        assert_eq!(r.descriptors.iter().map(|d| d.start).collect::<Vec<_>>(), vec![0, 64]);
        // Without Partial Report the header counts every match.
        encode_report(&z, ReportFilter::Empty, false, &mut buf);
        let r = crate::zone::parse_report(&buf, 64, None).unwrap();
        assert_eq!(r.zones, 2);
        assert_eq!(r.descriptors.iter().map(|d| d.start).collect::<Vec<_>>(), vec![0, 128]);
        encode_report(&z, ReportFilter::Closed, false, &mut buf);
        let r = crate::zone::parse_report(&buf, 64, None).unwrap();
        assert_eq!((r.zones, r.descriptors.len()), (0, 0));
        assert!(buf[64..].iter().all(|&b| b == 0));
    }

    #[test]
    fn failures_get_the_status_the_device_gave() {
        let z = zones();
        let open = &z[1];
        use StatusCode::*;
        let c = |errno, zone: Option<&ZoneDescriptor>, lba, blocks| {
            classify_write_failure(errno, zone, lba, blocks)
        };
        assert_eq!(c(libc::EOVERFLOW, None, 0, 1), Some(TooManyActiveZones));
        assert_eq!(c(libc::ETOOMANYREFS, None, 0, 1), Some(TooManyOpenZones));
        assert_eq!(c(libc::EIO, Some(&z[3]), 192, 1), Some(ZoneIsFull));
        assert_eq!(c(libc::EIO, Some(open), 70, 1), Some(ZoneInvalidWrite));
        assert_eq!(c(libc::EIO, Some(open), 64, 49), Some(ZoneBoundaryError));
        assert_eq!(c(libc::EIO, Some(open), 64, 2), None);
        assert_eq!(c(libc::EIO, None, 64, 2), None);
        assert_eq!(classify_action_failure(libc::EIO), Some(InvalidZoneStateTransition));
        assert_eq!(classify_action_failure(libc::EOVERFLOW), Some(TooManyActiveZones));
        assert_eq!(classify_action_failure(libc::ENOMEM), None);
    }
}
