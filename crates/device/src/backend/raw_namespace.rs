//! Raw NVMe commands on a kernel NVMe generic namespace device
//! (`/dev/ngXnY`), of any command set: admin commands through the admin
//! passthrough ioctl, I/O commands through io_uring's `URING_CMD` (the
//! kernel's passthrough path, the one `ng:` queues use). For tools that
//! must send a controller exactly the entry they built, malformed ones
//! included, and see its status as it answered: the differential test's
//! FDP mode, for one. The device API ([`super::PassthroughDevice`]) is
//! the way to run well-formed commands.
//!
//! Thread safety: `Send`, not `Sync`; one thread owns it.

use std::fs::File;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use zns_spec::SubmissionEntry;

use super::sys::{self, Big, Borrowed, Ring};
use super::sysfs;
use crate::error::{DeviceError, Result};

/// The request size the kernel allows when sysfs does not say (its
/// default `max_hw_sectors_kb` of 128 KiB).
const FALLBACK_TRANSFER: usize = 128 << 10;

/// What a raw command returned.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RawOutcome {
    /// Success, with the completion's result (DW0, and DW1 for I/O
    /// commands).
    Done(u64),
    /// The controller's status field (15 bits: SC, SCT, CRD, More, DNR),
    /// not 0.
    Status(u16),
}

/// A kernel NVMe generic namespace device opened for raw commands.
///
/// Thread safety: `Send`, not `Sync`: one thread owns it.
#[derive(Debug)]
pub struct RawNamespace {
    file: File,
    path: PathBuf,
    nsid: u32,
    ring: Ring<Big>,
    max_transfer: usize,
}

impl RawNamespace {
    /// Opens `path` (e.g. `/dev/ng1n1`; needs root). Fails with
    /// `Unavailable` when it is no NVMe namespace device or the kernel's
    /// io_uring lacks 128-byte entries (Linux 5.19 or later).
    pub fn open(path: &Path) -> Result<RawNamespace> {
        let uri = format!("ng:{}", path.display());
        let fail = |reason: String| DeviceError::Unavailable { uri: uri.clone(), reason };
        let file = super::open_rw(path, &uri, 0)?;
        let nsid = sys::nvme_namespace_id(file.as_fd()).map_err(|e| {
            fail(format!("not an NVMe generic namespace device (NVME_IOCTL_ID: {e})"))
        })?;
        let ring = Ring::<Big>::new(1)
            .map_err(|e| fail(format!("io_uring with 128-byte entries (Linux 5.19+): {e}")))?;
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let max_transfer = sysfs::parse_nvme_name(&name)
            .and_then(|(c, n)| sysfs::namespace_transfer_limit(Path::new("/sys"), c, n))
            .unwrap_or(FALLBACK_TRANSFER);
        Ok(RawNamespace { file, path: path.to_path_buf(), nsid, ring, max_transfer })
    }

    /// The device's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The namespace's ID.
    pub fn nsid(&self) -> u32 {
        self.nsid
    }

    /// The most bytes one command moves: the kernel's limit for the
    /// namespace (sysfs `max_hw_sectors_kb`), else 128 KiB.
    pub fn max_transfer(&self) -> usize {
        self.max_transfer
    }

    /// Runs admin command `sqe` with `data` as its buffer (either
    /// direction, as the opcode says), waiting for it. An OS error (the
    /// kernel refused the command, e.g. a buffer over its limit) is `Err`.
    pub fn admin(&self, sqe: &SubmissionEntry, data: Option<&mut [u8]>) -> Result<RawOutcome> {
        let r =
            sys::nvme_passthru(self.file.as_fd(), true, sqe, data).map_err(|e| self.io_err(e))?;
        Ok(match r.status {
            0 => RawOutcome::Done(r.result as u64),
            s => RawOutcome::Status(s),
        })
    }

    /// Runs I/O command `sqe` through io_uring's NVMe passthrough with
    /// `data` as its buffer (read by the device when the opcode's data
    /// transfer bits say host to controller, filled otherwise), waiting
    /// for it.
    pub fn io(&mut self, sqe: &SubmissionEntry, data: Option<&mut [u8]>) -> Result<RawOutcome> {
        let borrowed = match data {
            None => Borrowed::None,
            // Opcode bits 1:0: 01b host to controller, 10b controller to
            // host (11b, bidirectional, is lent as the device's to fill).
            Some(d) if sqe.opcode() & 3 == 1 => Borrowed::ToDevice(d),
            Some(d) => Borrowed::FromDevice(d),
        };
        let fd = self.file.as_fd();
        let c = self
            .ring
            .run_borrowed(0, fd, sqe, borrowed, &mut |_| {})
            .map_err(|e| self.io_err(e))?;
        Ok(match c.res {
            0 => RawOutcome::Done(c.result),
            r if r < 0 => return Err(self.io_err(std::io::Error::from_raw_os_error(-r))),
            r => RawOutcome::Status(r as u16),
        })
    }

    fn io_err(&self, source: std::io::Error) -> DeviceError {
        DeviceError::Io { context: format!("passthrough on {}", self.path.display()), source }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_device_is_a_clear_error() {
        let e = RawNamespace::open(Path::new("/dev/ng-none")).unwrap_err();
        assert!(e.to_string().contains("/dev/ng-none"), "{e}");
    }
}
