//! Raw commands through the kernel's NVMe generic namespace device
//! (`/dev/ngXnY`), by zns-device's [`RawNamespace`]: I/O commands with
//! io_uring's NVMe passthrough, admin commands with the admin passthrough
//! ioctl. The kernel copies every command dword the host sets, so a
//! write's DTYPE and DSPEC reach the controller as written.
//!
//! The device API's `ng:` queues send only well-formed commands; the
//! comparison sends malformed ones too (reserved management operations,
//! lengths past a page), so it runs the entries it built as they are.

use std::path::Path;

use zns_device::{IoBuffer, RawNamespace, RawOutcome};
use zns_spec::{StatusField, SubmissionEntry};

use super::target::{Queue, Reply, Target, TargetError, Transfer};
use crate::compare::Outcome;

/// An NVMe generic namespace device.
pub struct NgTarget {
    name: String,
    ns: RawNamespace,
}

impl NgTarget {
    /// Opens `path` (`/dev/ng1n1`); `name` is the URI for the output.
    pub fn open(path: &Path, name: &str) -> Result<NgTarget, TargetError> {
        Ok(NgTarget { name: name.to_string(), ns: RawNamespace::open(path)? })
    }
}

/// The comparison's outcome of a raw command.
fn outcome(r: zns_device::Result<RawOutcome>) -> Outcome {
    match r {
        Ok(RawOutcome::Done(result)) => Outcome::Done(result),
        Ok(RawOutcome::Status(s)) => Outcome::Failed(StatusField(s).status()),
        Err(e) => Outcome::Other(e.to_string()),
    }
}

impl Target for NgTarget {
    fn name(&self) -> &str {
        &self.name
    }

    fn nsid(&self) -> u32 {
        self.ns.nsid()
    }

    fn max_transfer(&self) -> usize {
        self.ns.max_transfer()
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
        let bytes = buf.as_mut().map(|b| &mut b[..]);
        let outcome = outcome(match queue {
            Queue::Admin => self.ns.admin(sqe, bytes),
            Queue::Io => self.ns.io(sqe, bytes),
        });
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
    fn a_missing_device_is_a_clear_error() {
        let e = NgTarget::open(Path::new("/dev/ng-none"), "ng:/dev/ng-none").err().unwrap();
        assert!(e.to_string().contains("/dev/ng-none"), "{e}");
    }
}
