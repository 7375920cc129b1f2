//! The Linux interfaces of the kernel-path backends, and all of their
//! unsafe code: the NVMe passthrough structures and ioctls
//! (`<linux/nvme_ioctl.h>`), the zoned block device ioctls
//! (`<linux/blkzoned.h>`), and [`Ring`], an io_uring that owns the memory
//! of every command in flight.
//!
//! Structures are `#[repr(C)]` with their layout pinned by tests; ioctl
//! numbers are computed the way `<asm-generic/ioctl.h>` does and pinned to
//! the kernel's values by tests.

use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::time::{Duration, Instant};

use io_uring::{cqueue, opcode, squeue, types, IoUring};
use zns_spec::SubmissionEntry;

use crate::buffer::IoBuffer;

// ---------------------------------------------------------------------------
// ioctl numbers
// ---------------------------------------------------------------------------

const IOC_NONE: u64 = 0;
const IOC_WRITE: u64 = 1;
const IOC_READ: u64 = 2;

const fn ioc(dir: u64, kind: u8, nr: u8, size: usize) -> u64 {
    (dir << 30) | ((size as u64) << 16) | ((kind as u64) << 8) | nr as u64
}

/// `NVME_IOCTL_ID`: the namespace ID of a namespace device.
pub(crate) const NVME_IOCTL_ID: u64 = ioc(IOC_NONE, b'N', 0x40, 0);
/// `NVME_IOCTL_ADMIN_CMD`: one admin command, synchronously.
pub(crate) const NVME_IOCTL_ADMIN_CMD: u64 =
    ioc(IOC_READ | IOC_WRITE, b'N', 0x41, size_of::<NvmePassthruCmd>());
/// `NVME_IOCTL_IO_CMD`: one I/O command, synchronously.
pub(crate) const NVME_IOCTL_IO_CMD: u64 =
    ioc(IOC_READ | IOC_WRITE, b'N', 0x43, size_of::<NvmePassthruCmd>());
/// `NVME_URING_CMD_IO`: the `cmd_op` of an I/O command through io_uring.
pub(crate) const NVME_URING_CMD_IO: u32 =
    ioc(IOC_READ | IOC_WRITE, b'N', 0x80, size_of::<NvmeUringCmd>()) as u32;
/// `NVME_URING_CMD_ADMIN`: the `cmd_op` of an admin command through io_uring
/// (unused: admin commands go through `NVME_IOCTL_ADMIN_CMD`, only at open).
#[allow(dead_code)]
pub(crate) const NVME_URING_CMD_ADMIN: u32 =
    ioc(IOC_READ | IOC_WRITE, b'N', 0x82, size_of::<NvmeUringCmd>()) as u32;

/// `BLKREPORTZONE`: zone descriptors from a sector on.
pub(crate) const BLKREPORTZONE: u64 =
    ioc(IOC_READ | IOC_WRITE, 0x12, 130, size_of::<BlkZoneReportHeader>());
/// `BLKRESETZONE`: reset the zones of a sector range.
pub(crate) const BLKRESETZONE: u64 = ioc(IOC_WRITE, 0x12, 131, size_of::<BlkZoneRange>());
/// `BLKOPENZONE`: explicitly open the zones of a sector range.
pub(crate) const BLKOPENZONE: u64 = ioc(IOC_WRITE, 0x12, 134, size_of::<BlkZoneRange>());
/// `BLKCLOSEZONE`: close the zones of a sector range.
pub(crate) const BLKCLOSEZONE: u64 = ioc(IOC_WRITE, 0x12, 135, size_of::<BlkZoneRange>());
/// `BLKFINISHZONE`: finish the zones of a sector range.
pub(crate) const BLKFINISHZONE: u64 = ioc(IOC_WRITE, 0x12, 136, size_of::<BlkZoneRange>());
/// `BLKZEROOUT`: write zeroes to a byte range (`u64[2]`: start, length).
pub(crate) const BLKZEROOUT: u64 = ioc(IOC_NONE, 0x12, 127, 0);

// ---------------------------------------------------------------------------
// NVMe passthrough structures
// ---------------------------------------------------------------------------

/// `struct nvme_passthru_cmd` (`struct nvme_admin_cmd`): the argument of
/// `NVME_IOCTL_ADMIN_CMD` and `NVME_IOCTL_IO_CMD`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct NvmePassthruCmd {
    pub opcode: u8,
    pub flags: u8,
    pub rsvd1: u16,
    pub nsid: u32,
    pub cdw2: u32,
    pub cdw3: u32,
    pub metadata: u64,
    pub addr: u64,
    pub metadata_len: u32,
    pub data_len: u32,
    pub cdw10: u32,
    pub cdw11: u32,
    pub cdw12: u32,
    pub cdw13: u32,
    pub cdw14: u32,
    pub cdw15: u32,
    pub timeout_ms: u32,
    /// Command specific result (completion DW0), written by the kernel.
    pub result: u32,
}

/// `struct nvme_uring_cmd`: the command area of an `IORING_OP_URING_CMD`
/// submission entry (the 80 bytes from offset 48 of a 128-byte SQE).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NvmeUringCmd {
    pub opcode: u8,
    pub flags: u8,
    pub rsvd1: u16,
    pub nsid: u32,
    pub cdw2: u32,
    pub cdw3: u32,
    pub metadata: u64,
    pub addr: u64,
    pub metadata_len: u32,
    pub data_len: u32,
    pub cdw10: u32,
    pub cdw11: u32,
    pub cdw12: u32,
    pub cdw13: u32,
    pub cdw14: u32,
    pub cdw15: u32,
    pub timeout_ms: u32,
    pub rsvd2: u32,
}

impl NvmeUringCmd {
    /// The command of `sqe` with `len` bytes of data at `addr` (the data
    /// pointer and metadata fields of the entry are not used: the kernel
    /// builds its own PRPs).
    pub(crate) fn from_entry(sqe: &SubmissionEntry, addr: u64, len: u32) -> Self {
        NvmeUringCmd {
            opcode: sqe.opcode(),
            flags: 0,
            rsvd1: 0,
            nsid: sqe.nsid,
            cdw2: sqe.cdw2,
            cdw3: sqe.cdw3,
            metadata: 0,
            addr,
            metadata_len: 0,
            data_len: len,
            cdw10: sqe.cdw10,
            cdw11: sqe.cdw11,
            cdw12: sqe.cdw12,
            cdw13: sqe.cdw13,
            cdw14: sqe.cdw14,
            cdw15: sqe.cdw15,
            timeout_ms: 0,
            rsvd2: 0,
        }
    }

    /// The 80-byte command area holding this command (zero-padded).
    pub(crate) fn to_cmd_area(self) -> [u8; 80] {
        let mut b = [0u8; 80];
        b[0] = self.opcode;
        b[1] = self.flags;
        b[2..4].copy_from_slice(&self.rsvd1.to_le_bytes());
        let dwords = [(4, self.nsid), (8, self.cdw2), (12, self.cdw3)];
        for (o, v) in dwords {
            b[o..o + 4].copy_from_slice(&v.to_le_bytes());
        }
        b[16..24].copy_from_slice(&self.metadata.to_le_bytes());
        b[24..32].copy_from_slice(&self.addr.to_le_bytes());
        let dwords = [
            (32, self.metadata_len),
            (36, self.data_len),
            (40, self.cdw10),
            (44, self.cdw11),
            (48, self.cdw12),
            (52, self.cdw13),
            (56, self.cdw14),
            (60, self.cdw15),
            (64, self.timeout_ms),
            (68, self.rsvd2),
        ];
        for (o, v) in dwords {
            b[o..o + 4].copy_from_slice(&v.to_le_bytes());
        }
        b
    }
}

/// The namespace ID of the NVMe namespace device `fd` (`NVME_IOCTL_ID`).
pub(crate) fn nvme_namespace_id(fd: BorrowedFd<'_>) -> io::Result<u32> {
    // SAFETY: NVME_IOCTL_ID takes no argument; the kernel returns the
    // namespace ID or -1 with errno set.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), NVME_IOCTL_ID as _) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(r as u32)
}

/// The outcome of a synchronous passthrough command: the 15-bit status
/// field (0 on success) and completion DW0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PassthruResult {
    pub status: u16,
    pub result: u32,
}

/// Runs `sqe` synchronously through `request` (`NVME_IOCTL_ADMIN_CMD` or
/// `NVME_IOCTL_IO_CMD`) with `data` as its buffer, in the direction the
/// opcode implies. An OS error is `Err`; an NVMe error status is `Ok` with
/// a non-zero status.
pub(crate) fn nvme_passthru(
    fd: BorrowedFd<'_>,
    admin: bool,
    sqe: &SubmissionEntry,
    data: Option<&mut [u8]>,
) -> io::Result<PassthruResult> {
    let (addr, len) = match data {
        Some(d) => (d.as_mut_ptr() as u64, u32::try_from(d.len()).map_err(io::Error::other)?),
        None => (0, 0),
    };
    let mut cmd = NvmePassthruCmd {
        opcode: sqe.opcode(),
        nsid: sqe.nsid,
        cdw2: sqe.cdw2,
        cdw3: sqe.cdw3,
        addr,
        data_len: len,
        cdw10: sqe.cdw10,
        cdw11: sqe.cdw11,
        cdw12: sqe.cdw12,
        cdw13: sqe.cdw13,
        cdw14: sqe.cdw14,
        cdw15: sqe.cdw15,
        ..Default::default()
    };
    let request = if admin { NVME_IOCTL_ADMIN_CMD } else { NVME_IOCTL_IO_CMD };
    // SAFETY: `cmd` is a valid `struct nvme_passthru_cmd` that lives across
    // the call; its data pointer and length describe `data`, which is
    // exclusively borrowed for the call, so the kernel may read or write it.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), request as _, &mut cmd as *mut NvmePassthruCmd) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(PassthruResult { status: r as u16, result: cmd.result })
}

// ---------------------------------------------------------------------------
// Zoned block device structures
// ---------------------------------------------------------------------------

/// `struct blk_zone_report` without its flexible array of zones.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct BlkZoneReportHeader {
    pub sector: u64,
    pub nr_zones: u32,
    pub flags: u32,
}

/// `BLK_ZONE_REP_CAPACITY`: the zones' `capacity` field is valid.
pub(crate) const BLK_ZONE_REP_CAPACITY: u32 = 1 << 0;

/// `struct blk_zone`: one zone as the kernel reports it, in 512-byte
/// sectors.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BlkZone {
    pub start: u64,
    pub len: u64,
    pub wp: u64,
    pub zone_type: u8,
    pub cond: u8,
    pub non_seq: u8,
    pub reset: u8,
    pub resv: [u8; 4],
    pub capacity: u64,
    pub reserved: [u8; 24],
}

impl BlkZone {
    /// Size of the structure.
    pub(crate) const SIZE: usize = 64;

    /// Decodes one structure from its bytes.
    pub(crate) fn from_bytes(b: &[u8; 64]) -> Self {
        let q = |o: usize| u64::from_ne_bytes(b[o..o + 8].try_into().expect("8 bytes"));
        BlkZone {
            start: q(0),
            len: q(8),
            wp: q(16),
            zone_type: b[24],
            cond: b[25],
            non_seq: b[26],
            reset: b[27],
            resv: [b[28], b[29], b[30], b[31]],
            capacity: q(32),
            reserved: [0; 24],
        }
    }
}

/// `struct blk_zone_range`: a sector range for the zone management ioctls.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct BlkZoneRange {
    pub sector: u64,
    pub nr_sectors: u64,
}

/// Up to `max` zones from the one holding `sector` on (`BLKREPORTZONE`),
/// and whether their `capacity` fields are valid.
pub(crate) fn report_zones(
    fd: BorrowedFd<'_>,
    sector: u64,
    max: u32,
) -> io::Result<(Vec<BlkZone>, bool)> {
    let header = size_of::<BlkZoneReportHeader>();
    // u64 elements keep the buffer 8-byte aligned for the header.
    let mut buf = vec![0u64; (header + max as usize * BlkZone::SIZE) / 8];
    let h = BlkZoneReportHeader { sector, nr_zones: max, flags: 0 };
    buf[0] = h.sector;
    buf[1] = h.nr_zones as u64 | ((h.flags as u64) << 32);
    // SAFETY: `buf` holds a `struct blk_zone_report` header followed by room
    // for `max` `struct blk_zone`, as BLKREPORTZONE expects; it is
    // exclusively borrowed for the call.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), BLKREPORTZONE as _, buf.as_mut_ptr()) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    let nr = (buf[1] as u32).min(max) as usize;
    let flags = (buf[1] >> 32) as u32;
    let bytes: Vec<u8> = buf.iter().flat_map(|w| w.to_ne_bytes()).collect();
    let zones = (0..nr)
        .map(|i| {
            let o = header + i * BlkZone::SIZE;
            BlkZone::from_bytes(bytes[o..o + BlkZone::SIZE].try_into().expect("64 bytes"))
        })
        .collect();
    Ok((zones, flags & BLK_ZONE_REP_CAPACITY != 0))
}

/// Runs one zone management ioctl (`BLKRESETZONE`, `BLKOPENZONE`,
/// `BLKCLOSEZONE`, `BLKFINISHZONE`) on a sector range.
pub(crate) fn zone_management(
    fd: BorrowedFd<'_>,
    request: u64,
    sector: u64,
    nr_sectors: u64,
) -> io::Result<()> {
    debug_assert!(
        [BLKRESETZONE, BLKOPENZONE, BLKCLOSEZONE, BLKFINISHZONE].contains(&request),
        "not a zone management ioctl"
    );
    let range = BlkZoneRange { sector, nr_sectors };
    // SAFETY: the request is one of the four zone management ioctls, which
    // read one `struct blk_zone_range` from the pointer; `range` lives
    // across the call.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), request as _, &range as *const BlkZoneRange) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Writes zeroes to `len` bytes from byte `start` (`BLKZEROOUT`).
pub(crate) fn zero_out(fd: BorrowedFd<'_>, start: u64, len: u64) -> io::Result<()> {
    let range: [u64; 2] = [start, len];
    // SAFETY: BLKZEROOUT reads two u64 (start, length) from the pointer;
    // `range` lives across the call.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), BLKZEROOUT as _, range.as_ptr()) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// io_uring that owns the memory of its commands
// ---------------------------------------------------------------------------

/// `IORING_ENTER_GETEVENTS`.
const IORING_ENTER_GETEVENTS: u32 = 1 << 0;

/// Memory a command in flight uses, kept by the ring until its completion.
#[derive(Debug, Default)]
pub(crate) enum Held {
    /// No memory.
    #[default]
    None,
    /// A caller's buffer (handed back at completion).
    Buffer(IoBuffer),
    /// The backend's own bytes (Copy source ranges).
    Bytes(Vec<u8>),
    /// Memory borrowed by [`Ring::run_borrowed`], which waits for the
    /// completion before it returns.
    Borrowed,
}

/// Memory a blocking command borrows from its caller.
#[derive(Debug)]
pub(crate) enum Borrowed<'a> {
    /// No data.
    None,
    /// The device fills it.
    FromDevice(&'a mut [u8]),
    /// The device reads it.
    ToDevice(&'a [u8]),
}

impl Borrowed<'_> {
    fn addr_len(&mut self) -> (u64, usize) {
        match self {
            Borrowed::None => (0, 0),
            Borrowed::FromDevice(d) => (d.as_mut_ptr() as u64, d.len()),
            Borrowed::ToDevice(d) => (d.as_ptr() as u64, d.len()),
        }
    }
}

/// How a write goes through the ring.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct WriteHow {
    /// Durable on completion (`RWF_DSYNC`; FUA on a block device).
    pub dsync: bool,
    /// Issued from a kernel worker (`IOSQE_ASYNC`), where it may block,
    /// instead of first trying without blocking.
    pub from_worker: bool,
}

impl WriteHow {
    fn apply(self, w: opcode::Write) -> squeue::Entry {
        let flags = if self.dsync { libc::RWF_DSYNC } else { 0 };
        let e = w.rw_flags(flags).build();
        if self.from_worker {
            e.flags(squeue::Flags::ASYNC)
        } else {
            e
        }
    }
}

/// A completion taken off the ring.
#[derive(Debug)]
pub(crate) struct Cqe {
    /// The slot the command was pushed with.
    pub slot: u32,
    /// `res`: bytes moved, a negative errno, or (passthrough) the NVMe
    /// status field.
    pub res: i32,
    /// Passthrough: the command's 64-bit result (completion DW0 and DW1).
    pub result: u64,
    /// The memory the command held.
    pub held: Held,
}

/// Submission and completion entry types a [`Ring`] can use.
pub(crate) trait RingEntries {
    /// Submission entry type.
    type S: squeue::EntryMarker;
    /// Completion entry type.
    type C: cqueue::EntryMarker;
    /// The passthrough result of a completion (0 without big CQEs).
    fn big_result(c: &Self::C) -> u64;
    /// The completion's `res`.
    fn res(c: &Self::C) -> i32;
}

/// 64-byte SQEs and 16-byte CQEs: reads, writes, fsync.
#[derive(Debug)]
pub(crate) struct Plain;

impl RingEntries for Plain {
    type S = squeue::Entry;
    type C = cqueue::Entry;
    fn big_result(_: &cqueue::Entry) -> u64 {
        0
    }
    fn res(c: &cqueue::Entry) -> i32 {
        c.result()
    }
}

/// 128-byte SQEs and 32-byte CQEs: NVMe passthrough commands.
#[derive(Debug)]
pub(crate) struct Big;

impl RingEntries for Big {
    type S = squeue::Entry128;
    type C = cqueue::Entry32;
    fn big_result(c: &cqueue::Entry32) -> u64 {
        c.big_cqe()[0]
    }
    fn res(c: &cqueue::Entry32) -> i32 {
        c.result()
    }
}

/// An io_uring whose commands each occupy a slot (their user data) and
/// keep their memory in it until their completion is reaped. Entries are
/// built here from that memory, so no command can point anywhere else.
///
/// Thread safety: `Send`, not `Sync`: one thread submits and reaps.
pub(crate) struct Ring<E: RingEntries> {
    ring: IoUring<E::S, E::C>,
    held: Vec<Option<Held>>,
    in_flight: usize,
}

impl<E: RingEntries> std::fmt::Debug for Ring<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ring")
            .field("slots", &self.held.len())
            .field("in_flight", &self.in_flight)
            .finish()
    }
}

/// The ring refused a command: its submission queue was full, or the slot
/// is taken. The memory comes back.
#[derive(Debug)]
pub(crate) struct PushRefused(pub Held);

impl<E: RingEntries> Ring<E> {
    /// A ring for `slots` commands in flight at once.
    pub(crate) fn new(slots: usize) -> io::Result<Self> {
        let entries = u32::try_from(slots.max(1)).map_err(io::Error::other)?;
        let ring = IoUring::<E::S, E::C>::builder().build(entries)?;
        Ok(Ring { ring, held: (0..slots.max(1)).map(|_| None).collect(), in_flight: 0 })
    }

    /// True when the running kernel supports `opcode` on this ring.
    pub(crate) fn supports(&self, opcode: u8) -> bool {
        let mut probe = io_uring::Probe::new();
        self.ring.submitter().register_probe(&mut probe).is_ok() && probe.is_supported(opcode)
    }

    /// Commands pushed whose completions have not been reaped.
    #[cfg(test)]
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Hands every pushed command to the kernel. Errors other than "busy"
    /// are returned; busy rings are submitted again later.
    pub(crate) fn submit(&mut self) -> io::Result<()> {
        match self.ring.submit() {
            Ok(_) => Ok(()),
            Err(e)
                if matches!(e.raw_os_error(), Some(libc::EBUSY | libc::EAGAIN | libc::EINTR)) =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Takes up to `max` completions off the ring, giving each to `f`.
    /// When none is there and commands are in flight, enters the kernel
    /// once (without waiting) so that completions it has pending are
    /// posted.
    pub(crate) fn reap(&mut self, max: usize, f: &mut dyn FnMut(Cqe)) -> usize {
        let mut n = self.drain_cq(max, f);
        if n == 0 && self.in_flight > 0 {
            // Submits anything pending and runs the kernel's task work,
            // which posts passthrough completions.
            let _ = self.enter(0, None);
            n = self.drain_cq(max, f);
        }
        n
    }

    /// Waits up to `timeout` for at least one completion, then reaps.
    pub(crate) fn wait(&mut self, timeout: Duration, f: &mut dyn FnMut(Cqe)) -> usize {
        let n = self.drain_cq(usize::MAX, f);
        if n > 0 || self.in_flight == 0 {
            return n;
        }
        let _ = self.enter(1, Some(timeout));
        self.drain_cq(usize::MAX, f)
    }

    fn enter(&mut self, want: usize, timeout: Option<Duration>) -> io::Result<usize> {
        let ts = types::Timespec::from(timeout.unwrap_or(Duration::ZERO));
        let args = types::SubmitArgs::new().timespec(&ts);
        if timeout.is_some() {
            return self.ring.submitter().submit_with_args(want, &args);
        }
        // GETEVENTS without waiting: flushes task work, posts completions.
        let pending = self.ring.submission().len() as u32;
        // SAFETY: no argument pointer is passed (size 0, null).
        unsafe {
            self.ring.submitter().enter::<libc::sigset_t>(pending, 0, IORING_ENTER_GETEVENTS, None)
        }
    }

    fn drain_cq(&mut self, max: usize, f: &mut dyn FnMut(Cqe)) -> usize {
        let mut n = 0;
        while n < max {
            let Some(c) = self.ring.completion().next() else { break };
            let slot = cqueue::EntryMarker::user_data(&c) as usize;
            let Some(held) = self.held.get_mut(slot).and_then(Option::take) else {
                tracing::warn!(slot, "completion for a slot with nothing in flight");
                continue;
            };
            self.in_flight -= 1;
            f(Cqe { slot: slot as u32, res: E::res(&c), result: E::big_result(&c), held });
            n += 1;
        }
        n
    }

    /// Pushes `sqe`, which points into `held` only, in `slot`.
    ///
    /// # Safety
    ///
    /// Every address in `sqe` must lie in the memory of `held` (or be
    /// borrowed memory whose owner waits for the completion, see
    /// [`Ring::run_borrowed`]).
    unsafe fn push_entry(&mut self, slot: u32, sqe: E::S, held: Held) -> Result<(), PushRefused> {
        let i = slot as usize;
        if self.held.get(i).is_none_or(|h| h.is_some()) {
            return Err(PushRefused(held));
        }
        let sqe = {
            let mut s = sqe;
            squeue::EntryMarker::set_user_data(&mut s, slot as u64);
            s
        };
        // SAFETY: per this function's contract the entry's memory is owned
        // by `held`, which stays in `self.held[slot]` until the completion
        // with this user data is reaped (or the ring is leaked in `Drop`).
        if unsafe { self.ring.submission().push(&sqe) }.is_err() {
            return Err(PushRefused(held));
        }
        self.held[i] = Some(held);
        self.in_flight += 1;
        Ok(())
    }
}

impl Ring<Big> {
    /// Pushes an NVMe I/O command (`NVME_URING_CMD_IO`) on `fd` moving the
    /// whole of `held`'s memory.
    pub(crate) fn push_nvme(
        &mut self,
        slot: u32,
        fd: BorrowedFd<'_>,
        sqe: &SubmissionEntry,
        mut held: Held,
    ) -> Result<(), PushRefused> {
        let (addr, len) = match &mut held {
            Held::Buffer(b) => (b.as_mut_ptr() as u64, b.len()),
            Held::Bytes(v) => (v.as_mut_ptr() as u64, v.len()),
            Held::None | Held::Borrowed => (0, 0),
        };
        let Ok(len) = u32::try_from(len) else { return Err(PushRefused(held)) };
        let cmd = NvmeUringCmd::from_entry(sqe, addr, len).to_cmd_area();
        let e =
            opcode::UringCmd80::new(types::Fd(fd.as_raw_fd()), NVME_URING_CMD_IO).cmd(cmd).build();
        // SAFETY: the entry's only address is that of `held`'s memory.
        unsafe { self.push_entry(slot, e, held) }
    }

    /// Runs an NVMe I/O command on `fd` moving `data` (borrowed), and
    /// waits for it; completions of other commands go to `other`.
    pub(crate) fn run_borrowed(
        &mut self,
        slot: u32,
        fd: BorrowedFd<'_>,
        sqe: &SubmissionEntry,
        mut data: Borrowed<'_>,
        other: &mut dyn FnMut(Cqe),
    ) -> io::Result<Cqe> {
        let (addr, len) = data.addr_len();
        let len = u32::try_from(len).map_err(io::Error::other)?;
        let cmd = NvmeUringCmd::from_entry(sqe, addr, len).to_cmd_area();
        let e =
            opcode::UringCmd80::new(types::Fd(fd.as_raw_fd()), NVME_URING_CMD_IO).cmd(cmd).build();
        // SAFETY: the entry points into `data`, which stays borrowed until
        // `wait_for` has reaped this command's completion.
        unsafe { self.push_entry(slot, e, Held::Borrowed) }
            .map_err(|_| io::Error::new(io::ErrorKind::WouldBlock, "no room in the ring"))?;
        Ok(self.wait_for(slot, other))
    }
}

impl Ring<Plain> {
    /// Pushes a read of `held`'s buffer from byte `offset` of `fd`.
    pub(crate) fn push_read(
        &mut self,
        slot: u32,
        fd: BorrowedFd<'_>,
        offset: u64,
        mut held: Held,
    ) -> Result<(), PushRefused> {
        let Held::Buffer(b) = &mut held else { return Err(PushRefused(held)) };
        let Ok(len) = u32::try_from(b.len()) else { return Err(PushRefused(held)) };
        let e = opcode::Read::new(types::Fd(fd.as_raw_fd()), b.as_mut_ptr(), len)
            .offset(offset)
            .build();
        // SAFETY: the entry's only address is that of `held`'s buffer.
        unsafe { self.push_entry(slot, e, held) }
    }

    /// Pushes a write of `held`'s buffer at byte `offset` of `fd`.
    pub(crate) fn push_write(
        &mut self,
        slot: u32,
        fd: BorrowedFd<'_>,
        offset: u64,
        how: WriteHow,
        held: Held,
    ) -> Result<(), PushRefused> {
        let Held::Buffer(b) = &held else { return Err(PushRefused(held)) };
        let Ok(len) = u32::try_from(b.len()) else { return Err(PushRefused(held)) };
        let e = how
            .apply(opcode::Write::new(types::Fd(fd.as_raw_fd()), b.as_ptr(), len).offset(offset));
        // SAFETY: the entry's only address is that of `held`'s buffer.
        unsafe { self.push_entry(slot, e, held) }
    }

    /// Pushes an fsync of `fd` (a cache flush on a block device).
    pub(crate) fn push_fsync(&mut self, slot: u32, fd: BorrowedFd<'_>) -> Result<(), PushRefused> {
        let e = opcode::Fsync::new(types::Fd(fd.as_raw_fd())).build();
        // SAFETY: the entry holds no address.
        unsafe { self.push_entry(slot, e, Held::None) }
    }

    /// Runs a read into or a write from `data` (borrowed) at byte `offset`
    /// of `fd` (writes as `how` says), and waits for it; completions of
    /// other commands go to `other`.
    pub(crate) fn run_borrowed_rw(
        &mut self,
        slot: u32,
        fd: BorrowedFd<'_>,
        offset: u64,
        data: Borrowed<'_>,
        how: WriteHow,
        other: &mut dyn FnMut(Cqe),
    ) -> io::Result<Cqe> {
        let fd = types::Fd(fd.as_raw_fd());
        let e = match data {
            Borrowed::None => return Err(io::Error::other("a read or write needs data")),
            Borrowed::ToDevice(d) => {
                let len = u32::try_from(d.len()).map_err(io::Error::other)?;
                how.apply(opcode::Write::new(fd, d.as_ptr(), len).offset(offset))
            }
            Borrowed::FromDevice(d) => {
                let len = u32::try_from(d.len()).map_err(io::Error::other)?;
                opcode::Read::new(fd, d.as_mut_ptr(), len).offset(offset).build()
            }
        };
        // SAFETY: the entry points into `data`, which stays borrowed until
        // `wait_for` has reaped this command's completion.
        unsafe { self.push_entry(slot, e, Held::Borrowed) }
            .map_err(|_| io::Error::new(io::ErrorKind::WouldBlock, "no room in the ring"))?;
        Ok(self.wait_for(slot, other))
    }
}

impl<E: RingEntries> Ring<E> {
    /// Submits, then waits until the command in `slot` completes, handing
    /// other completions to `other`. Never returns before that completion
    /// (borrowed memory depends on it): if the ring fails for good, the
    /// process aborts rather than let the kernel write into freed memory.
    fn wait_for(&mut self, slot: u32, other: &mut dyn FnMut(Cqe)) -> Cqe {
        let start = Instant::now();
        let mut warned = false;
        let mut failures = 0u32;
        let mut mine = None;
        loop {
            let r = self.enter(1, Some(Duration::from_millis(100)));
            match r {
                Ok(_) => failures = 0,
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::ETIME | libc::EINTR | libc::EBUSY | libc::EAGAIN)
                    ) => {}
                Err(e) => {
                    failures += 1;
                    if failures > 1000 {
                        tracing::error!(error = %e, "io_uring failed with a borrowed buffer in flight");
                        std::process::abort();
                    }
                }
            }
            self.drain_cq(usize::MAX, &mut |c| {
                if c.slot == slot {
                    mine = Some(c);
                } else {
                    other(c);
                }
            });
            if let Some(c) = mine {
                return c;
            }
            if !warned && start.elapsed() > Duration::from_secs(30) {
                tracing::warn!(slot, "a command has been in flight for 30 s; still waiting");
                warned = true;
            }
        }
    }
}

impl<E: RingEntries> Drop for Ring<E> {
    fn drop(&mut self) {
        // The kernel may still access the memory of commands in flight:
        // wait for them, and leak their memory if they never complete.
        let start = Instant::now();
        while self.in_flight > 0 && start.elapsed() < Duration::from_secs(60) {
            let _ = self.enter(1, Some(Duration::from_millis(100)));
            self.drain_cq(usize::MAX, &mut drop);
        }
        if self.in_flight > 0 {
            tracing::error!(
                in_flight = self.in_flight,
                "commands never completed; leaking their memory"
            );
            for h in self.held.drain(..).flatten() {
                std::mem::forget(h);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::offset_of;

    #[test]
    fn ioctl_numbers_match_the_kernel_headers() {
        assert_eq!(NVME_IOCTL_ID, 0x4E40);
        assert_eq!(NVME_IOCTL_ADMIN_CMD, 0xC048_4E41);
        assert_eq!(NVME_IOCTL_IO_CMD, 0xC048_4E43);
        assert_eq!(NVME_URING_CMD_IO, 0xC048_4E80);
        assert_eq!(NVME_URING_CMD_ADMIN, 0xC048_4E82);
        assert_eq!(BLKREPORTZONE, 0xC010_1282);
        assert_eq!(BLKRESETZONE, 0x4010_1283);
        assert_eq!(BLKOPENZONE, 0x4010_1286);
        assert_eq!(BLKCLOSEZONE, 0x4010_1287);
        assert_eq!(BLKFINISHZONE, 0x4010_1288);
        assert_eq!(BLKZEROOUT, 0x127F);
    }

    #[test]
    fn passthrough_structures_have_the_kernel_layout() {
        assert_eq!(size_of::<NvmePassthruCmd>(), 72);
        assert_eq!(size_of::<NvmeUringCmd>(), 72);
        for (a, b) in [
            (offset_of!(NvmeUringCmd, opcode), 0),
            (offset_of!(NvmeUringCmd, flags), 1),
            (offset_of!(NvmeUringCmd, nsid), 4),
            (offset_of!(NvmeUringCmd, cdw2), 8),
            (offset_of!(NvmeUringCmd, cdw3), 12),
            (offset_of!(NvmeUringCmd, metadata), 16),
            (offset_of!(NvmeUringCmd, addr), 24),
            (offset_of!(NvmeUringCmd, metadata_len), 32),
            (offset_of!(NvmeUringCmd, data_len), 36),
            (offset_of!(NvmeUringCmd, cdw10), 40),
            (offset_of!(NvmeUringCmd, cdw15), 60),
            (offset_of!(NvmeUringCmd, timeout_ms), 64),
            (offset_of!(NvmeUringCmd, rsvd2), 68),
            (offset_of!(NvmePassthruCmd, addr), 24),
            (offset_of!(NvmePassthruCmd, data_len), 36),
            (offset_of!(NvmePassthruCmd, timeout_ms), 64),
            (offset_of!(NvmePassthruCmd, result), 68),
        ] {
            assert_eq!(a, b);
        }
    }

    #[test]
    fn uring_command_area_carries_the_entry() {
        let mut sqe = zns_spec::command::ZoneAppend::new(3, 0x1_0000_0040, 8).to_entry().unwrap();
        sqe.cdw2 = 0x22;
        sqe.cdw3 = 0x33;
        let c = NvmeUringCmd::from_entry(&sqe, 0x7FAB_CDEF_1000, 8 * 4096);
        let b = c.to_cmd_area();
        assert_eq!(b[0], 0x7D);
        assert_eq!(u32::from_le_bytes(b[4..8].try_into().unwrap()), 3);
        assert_eq!(u32::from_le_bytes(b[8..12].try_into().unwrap()), 0x22);
        assert_eq!(u32::from_le_bytes(b[12..16].try_into().unwrap()), 0x33);
        assert_eq!(u64::from_le_bytes(b[24..32].try_into().unwrap()), 0x7FAB_CDEF_1000);
        assert_eq!(u32::from_le_bytes(b[36..40].try_into().unwrap()), 8 * 4096);
        // SLBA in CDW10/11, NLB (0's based) in CDW12.
        assert_eq!(u32::from_le_bytes(b[40..44].try_into().unwrap()), 0x40);
        assert_eq!(u32::from_le_bytes(b[44..48].try_into().unwrap()), 1);
        assert_eq!(u32::from_le_bytes(b[48..52].try_into().unwrap()) & 0xFFFF, 7);
        assert!(b[72..].iter().all(|&x| x == 0));
        // A placed write's DTYPE (CDW12 23:20) and DSPEC (CDW13 31:16).
        let rw = zns_spec::command::ReadWrite::new(3, 0x10, 8).with_placement(5);
        let w = NvmeUringCmd::from_entry(&rw.write().unwrap(), 0x1000, 8 * 4096).to_cmd_area();
        assert_eq!(u32::from_le_bytes(w[48..52].try_into().unwrap()), 2 << 20 | 7);
        assert_eq!(u32::from_le_bytes(w[52..56].try_into().unwrap()), 5 << 16);
        // The same bytes as the structure's memory image.
        let mut image = [0u8; 72];
        for (i, chunk) in image.chunks_mut(4).enumerate() {
            let v: u32 = match i {
                0 => c.opcode as u32 | (c.flags as u32) << 8 | (c.rsvd1 as u32) << 16,
                1 => c.nsid,
                2 => c.cdw2,
                3 => c.cdw3,
                4 => c.metadata as u32,
                5 => (c.metadata >> 32) as u32,
                6 => c.addr as u32,
                7 => (c.addr >> 32) as u32,
                8 => c.metadata_len,
                9 => c.data_len,
                10..=15 => [c.cdw10, c.cdw11, c.cdw12, c.cdw13, c.cdw14, c.cdw15][i - 10],
                16 => c.timeout_ms,
                _ => c.rsvd2,
            };
            chunk.copy_from_slice(&v.to_le_bytes());
        }
        assert_eq!(&b[..72], &image[..]);
    }

    #[test]
    fn zone_structures_have_the_kernel_layout() {
        assert_eq!(size_of::<BlkZone>(), 64);
        assert_eq!(size_of::<BlkZoneReportHeader>(), 16);
        assert_eq!(size_of::<BlkZoneRange>(), 16);
        assert_eq!(offset_of!(BlkZone, wp), 16);
        assert_eq!(offset_of!(BlkZone, zone_type), 24);
        assert_eq!(offset_of!(BlkZone, cond), 25);
        assert_eq!(offset_of!(BlkZone, capacity), 32);
        let mut b = [0u8; 64];
        b[0..8].copy_from_slice(&1024u64.to_ne_bytes());
        b[8..16].copy_from_slice(&512u64.to_ne_bytes());
        b[16..24].copy_from_slice(&1030u64.to_ne_bytes());
        b[24] = 2;
        b[25] = 2;
        b[27] = 1;
        b[32..40].copy_from_slice(&480u64.to_ne_bytes());
        let z = BlkZone::from_bytes(&b);
        assert_eq!((z.start, z.len, z.wp, z.capacity), (1024, 512, 1030, 480));
        assert_eq!((z.zone_type, z.cond, z.reset), (2, 2, 1));
    }

    /// The plain ring on a regular file: data in, data out, fsync, with
    /// owned and borrowed buffers. Skips, saying so, where io_uring is
    /// unavailable (a container's seccomp filter, `io_uring_disabled`),
    /// except under `CI=true`, where it fails.
    #[test]
    fn plain_ring_moves_data_through_a_file() {
        let mut ring = match Ring::<Plain>::new(4) {
            Ok(r) => r,
            Err(e) => {
                let why = format!("{e}; needs Linux 5.6+ with io_uring allowed");
                assert!(
                    std::env::var("CI").as_deref() != Ok("true"),
                    "CI=true and io_uring is missing: {why}"
                );
                eprintln!("skipped: io_uring ({why})");
                return;
            }
        };
        let file = tempfile::tempfile().unwrap();
        use std::os::fd::AsFd;
        let fd = file.as_fd();
        let mut b = IoBuffer::aligned(8192).unwrap();
        b.fill(0x5A);
        let how = WriteHow { dsync: false, from_worker: true };
        ring.push_write(0, fd, 4096, how, Held::Buffer(b)).unwrap();
        ring.push_fsync(1, fd).unwrap();
        assert!(ring.push_fsync(1, fd).is_err(), "slot 1 is taken");
        ring.submit().unwrap();
        let mut done = Vec::new();
        let start = Instant::now();
        while done.len() < 2 {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "the write's and fsync's completions: not within 60 s"
            );
            ring.wait(Duration::from_secs(1), &mut |c| done.push(c));
        }
        done.sort_by_key(|c| c.slot);
        assert_eq!(done[0].res, 8192);
        assert!(matches!(done[0].held, Held::Buffer(_)));
        assert_eq!(done[1].res, 0);
        let mut back = vec![0u8; 4096];
        let c = ring
            .run_borrowed_rw(2, fd, 8192, Borrowed::FromDevice(&mut back), how, &mut |_| ())
            .unwrap();
        assert_eq!(c.res, 4096);
        assert!(back.iter().all(|&x| x == 0x5A));
        assert_eq!(ring.in_flight(), 0);
    }
}
