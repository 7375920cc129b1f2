//! Raw commands through the kernel's NVMe generic namespace device
//! (`/dev/ngXnY`): I/O commands with io_uring (`IORING_OP_URING_CMD`,
//! 128-byte entries, 32-byte completions carrying DW0), admin commands
//! with the admin passthrough ioctl. The kernel copies every command
//! dword the host sets, so a write's DTYPE and DSPEC reach the controller
//! as written.
//!
//! zns-device's `ng:` backend opens zoned namespaces only and sends the
//! device API's commands; an FDP namespace is an NVM command set
//! namespace, and the comparison needs I/O Management, Get Log Page and
//! Get Features too, so this module keeps its own small passthrough. Its
//! `unsafe` is the three system calls the kernel interface takes: the
//! namespace ID ioctl, the admin passthrough ioctl and the io_uring push.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use io_uring::{cqueue, opcode, squeue, types, IoUring};
use zns_device::IoBuffer;
use zns_spec::{StatusField, SubmissionEntry};

use super::target::{Queue, Reply, Target, TargetError, Transfer};
use crate::compare::Outcome;

/// `_IOWR(type, nr, size)` of Linux's ioctl encoding.
const fn iowr(nr: u64, size: u64) -> u64 {
    (3 << 30) | (size << 16) | ((b'N' as u64) << 8) | nr
}

/// `NVME_IOCTL_ID`: the namespace ID of the device file.
const NVME_IOCTL_ID: u64 = ((b'N' as u64) << 8) | 0x40;
/// `NVME_IOCTL_ADMIN_CMD` with a 72-byte `struct nvme_passthru_cmd`.
const NVME_IOCTL_ADMIN_CMD: u64 = iowr(0x41, 72);
/// `NVME_URING_CMD_IO` with a 72-byte `struct nvme_uring_cmd`.
const NVME_URING_CMD_IO: u32 = iowr(0x80, 72) as u32;

/// The transfer limit when sysfs shows none: the kernel's default request
/// size (255 sectors), in whole pages.
const FALLBACK_TRANSFER: usize = 124 << 10;

/// `struct nvme_passthru_cmd` (the admin ioctl's argument).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct PassthruCmd {
    opcode: u8,
    flags: u8,
    rsvd1: u16,
    nsid: u32,
    cdw2: u32,
    cdw3: u32,
    metadata: u64,
    addr: u64,
    metadata_len: u32,
    data_len: u32,
    cdw10: u32,
    cdw11: u32,
    cdw12: u32,
    cdw13: u32,
    cdw14: u32,
    cdw15: u32,
    timeout_ms: u32,
    result: u32,
}

/// The 80-byte command area of a `struct nvme_uring_cmd` for `sqe` moving
/// `len` bytes at `addr`: opcode, NSID, CDW2-3, data pointer and length,
/// CDW10-15 at their offsets (metadata, flags and timeout zero).
fn uring_cmd_area(sqe: &SubmissionEntry, addr: u64, len: u32) -> [u8; 80] {
    let mut b = [0u8; 80];
    b[0] = sqe.opcode();
    let dwords = [
        (4, sqe.nsid),
        (8, sqe.cdw2),
        (12, sqe.cdw3),
        (36, len),
        (40, sqe.cdw10),
        (44, sqe.cdw11),
        (48, sqe.cdw12),
        (52, sqe.cdw13),
        (56, sqe.cdw14),
        (60, sqe.cdw15),
    ];
    for (o, v) in dwords {
        b[o..o + 4].copy_from_slice(&v.to_le_bytes());
    }
    b[24..32].copy_from_slice(&addr.to_le_bytes());
    b
}

/// The outcome of a passthrough completion: `res` is a negative errno,
/// the NVMe status field, or 0 with the command's result.
fn outcome(res: i32, result: u64) -> Outcome {
    match res {
        0 => Outcome::Done(result),
        r if r < 0 => Outcome::Other(std::io::Error::from_raw_os_error(-r).to_string()),
        r => Outcome::Failed(StatusField(r as u16).status()),
    }
}

/// An NVMe generic namespace device.
pub struct NgTarget {
    name: String,
    file: File,
    ring: IoUring<squeue::Entry128, cqueue::Entry32>,
    nsid: u32,
    max_transfer: usize,
    /// io_uring failed with a command in flight: its completion may still
    /// come, so no later one can be trusted.
    broken: bool,
}

impl NgTarget {
    /// Opens `path` (`/dev/ng1n1`); `name` is the URI for the output.
    pub fn open(path: &Path, name: &str) -> Result<NgTarget, TargetError> {
        let os = |what, source| TargetError::Os { path: path.display().to_string(), what, source };
        let meta = std::fs::metadata(path).map_err(|e| os("cannot find it", e))?;
        if !meta.file_type().is_char_device() {
            return Err(TargetError::Unsupported(format!(
                "{}: not a character device (ng: takes an NVMe generic namespace device such \
                 as /dev/ng1n1)",
                path.display()
            )));
        }
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_CLOEXEC)
            .open(path)
            .map_err(|e| os("open (passthrough needs root)", e))?;
        // SAFETY: NVME_IOCTL_ID takes no argument; the kernel returns the
        // namespace ID or -1 with errno set.
        let r = unsafe { libc::ioctl(file.as_raw_fd(), NVME_IOCTL_ID as _) };
        if r <= 0 {
            return Err(os("NVME_IOCTL_ID (not an NVMe namespace device?)", last_error()));
        }
        let ring = IoUring::<squeue::Entry128, cqueue::Entry32>::builder()
            .build(4)
            .map_err(|e| os("an io_uring with 128-byte entries (Linux 5.19 or later)", e))?;
        Ok(NgTarget {
            name: name.to_string(),
            file,
            ring,
            nsid: r as u32,
            max_transfer: transfer_limit(path),
            broken: false,
        })
    }

    fn admin(&mut self, sqe: &SubmissionEntry, buf: Option<&mut IoBuffer>) -> Outcome {
        let (addr, len) = match buf {
            Some(b) => (b.as_mut_ptr() as u64, b.len() as u32),
            None => (0, 0),
        };
        let mut cmd = PassthruCmd {
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
        // SAFETY: `cmd` is a valid `struct nvme_passthru_cmd` living across
        // the call; its data pointer and length describe the buffer, which
        // is exclusively borrowed for the call, so the kernel may read or
        // write it.
        let r = unsafe {
            libc::ioctl(self.file.as_raw_fd(), NVME_IOCTL_ADMIN_CMD as _, &mut cmd as *mut _)
        };
        if r < 0 {
            return Outcome::Other(last_error().to_string());
        }
        outcome(r, cmd.result as u64)
    }

    /// Runs an I/O command; `Err` when io_uring failed with the command
    /// possibly still in the kernel's hands (its buffer must not be freed).
    fn io(
        &mut self,
        sqe: &SubmissionEntry,
        buf: Option<&mut IoBuffer>,
    ) -> Result<Outcome, std::io::Error> {
        if self.broken {
            return Ok(Outcome::Other("the io_uring failed earlier".into()));
        }
        let (addr, len) = match buf {
            Some(b) => (b.as_mut_ptr() as u64, b.len() as u32),
            None => (0, 0),
        };
        let fd = types::Fd(self.file.as_raw_fd());
        let e = opcode::UringCmd80::new(fd, NVME_URING_CMD_IO)
            .cmd(uring_cmd_area(sqe, addr, len))
            .build()
            .user_data(1);
        // SAFETY: the entry's only address is the buffer's, which stays
        // borrowed until this function has reaped the command's completion
        // below (or returns having found the ring refused it).
        if unsafe { self.ring.submission().push(&e) }.is_err() {
            return Ok(Outcome::Other("the io_uring has no room".into()));
        }
        loop {
            match self.ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR | libc::EAGAIN)) => {}
                Err(e) => {
                    self.broken = true;
                    return Err(e);
                }
            }
            if let Some(c) = self.ring.completion().next() {
                return Ok(outcome(c.result(), c.big_cqe()[0]));
            }
        }
    }
}

fn last_error() -> std::io::Error {
    std::io::Error::last_os_error()
}

/// The kernel's transfer limit of the namespace behind the generic device
/// `ngXnY`: `max_hw_sectors_kb` of its block device `nvmeXnY`, else the
/// kernel's default request size.
fn transfer_limit(path: &Path) -> usize {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let Some(rest) = name.strip_prefix("ng") else { return FALLBACK_TRANSFER };
    let file: PathBuf =
        ["/sys/block", &format!("nvme{rest}"), "queue", "max_hw_sectors_kb"].iter().collect();
    std::fs::read_to_string(file)
        .ok()
        .and_then(|s| s.trim().parse::<usize>().ok())
        .map_or(FALLBACK_TRANSFER, |kb| (kb << 10) & !4095)
        .max(4096)
}

impl Target for NgTarget {
    fn name(&self) -> &str {
        &self.name
    }

    fn nsid(&self) -> u32 {
        self.nsid
    }

    fn max_transfer(&self) -> usize {
        self.max_transfer
    }

    fn run(&mut self, queue: Queue, sqe: &SubmissionEntry, data: &Transfer) -> Reply {
        let mut buf = match data.len() {
            0 => None,
            n => match IoBuffer::aligned(n) {
                Ok(b) => Some(b),
                Err(e) => return Reply::bare(Outcome::Other(e.to_string())),
            },
        };
        if let (Some(b), Transfer::ToDevice(v)) = (buf.as_mut(), data) {
            b[..v.len()].copy_from_slice(v);
        }
        let outcome = match queue {
            Queue::Admin => self.admin(sqe, buf.as_mut()),
            Queue::Io => match self.io(sqe, buf.as_mut()) {
                Ok(o) => o,
                Err(e) => {
                    // The kernel may still write the buffer: never free it.
                    std::mem::forget(buf);
                    return Reply::bare(Outcome::Other(format!("io_uring_enter: {e}")));
                }
            },
        };
        let data = match (&outcome, data, buf) {
            (Outcome::Done(_), Transfer::FromDevice(n), Some(b)) => Some(b[..*n].to_vec()),
            _ => None,
        };
        Reply { outcome, data }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ioctl_numbers_and_the_command_area_match_the_kernel() {
        assert_eq!(NVME_IOCTL_ID, 0x4E40);
        assert_eq!(NVME_IOCTL_ADMIN_CMD, 0xC048_4E41);
        assert_eq!(NVME_URING_CMD_IO, 0xC048_4E80);
        assert_eq!(std::mem::size_of::<PassthruCmd>(), 72);
        let mut sqe = SubmissionEntry::new(0x01, 3);
        (sqe.cdw10, sqe.cdw12, sqe.cdw13) = (0x10, 0x0020_0007, 0x0005_0000);
        let a = uring_cmd_area(&sqe, 0xAB00, 8 << 12);
        assert_eq!(a[0], 0x01);
        assert_eq!(&a[4..8], &3u32.to_le_bytes());
        assert_eq!(&a[24..32], &0xAB00u64.to_le_bytes());
        assert_eq!(&a[36..40], &(8u32 << 12).to_le_bytes());
        assert_eq!(&a[48..52], &0x0020_0007u32.to_le_bytes(), "DTYPE in CDW12");
        assert_eq!(&a[52..56], &0x0005_0000u32.to_le_bytes(), "DSPEC in CDW13");
    }

    #[test]
    fn a_missing_device_is_a_clear_error() {
        let e = NgTarget::open(Path::new("/dev/ng-none"), "ng:/dev/ng-none").err().unwrap();
        assert!(e.to_string().contains("/dev/ng-none"), "{e}");
    }
}
