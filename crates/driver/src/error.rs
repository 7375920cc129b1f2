//! Typed errors of the driver.
//!
//! A command that completes with a non-success status becomes
//! [`Error::Nvme`], which carries the raw [`Status`] and prints its
//! specification name, e.g. "Zone Is Full (SCT 1h, SC B9h)".

use std::time::Duration;

use zns_spec::{Status, StatusCode, StatusField};

/// Result alias of the driver.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A command completed with a non-success status.
///
/// Thread safety: plain data, `Send + Sync`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{status}")]
pub struct NvmeError {
    /// Status Code Type and Status Code.
    pub status: Status,
    /// The complete status field (More, Do Not Retry, Command Retry Delay).
    pub field: StatusField,
    /// Opcode of the failed command.
    pub opcode: u8,
    /// Queue the command was submitted to (0 = admin).
    pub qid: u16,
}

impl NvmeError {
    /// True when the status is the named code.
    pub fn is(&self, code: StatusCode) -> bool {
        self.status.is(code)
    }

    /// Do Not Retry: the same command will fail again.
    pub fn do_not_retry(&self) -> bool {
        self.field.dnr()
    }
}

/// Every failure the driver reports.
///
/// Thread safety: `Send + Sync`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The controller completed the command with an error status.
    #[error(transparent)]
    Nvme(#[from] NvmeError),
    /// No free submission slot or command identifier: poll for completions
    /// and submit again.
    #[error("queue {qid} is full")]
    QueueFull {
        /// The queue.
        qid: u16,
    },
    /// A wait ran out of time.
    #[error("timed out after {after:?} waiting for {what}")]
    Timeout {
        /// What was awaited.
        what: &'static str,
        /// How long the driver waited.
        after: Duration,
    },
    /// CSTS.CFS is set: the controller hit a fatal error and needs a reset.
    #[error("controller fatal status (CSTS.CFS) is set")]
    ControllerFatal,
    /// The controller was reset or shut down after a failure; its queues are
    /// unusable.
    #[error("the controller has failed or was shut down; queues are unusable")]
    ControllerFailed,
    /// The controller was reset ([`crate::Controller::reset`]) after this
    /// queue pair or handle was made: the controller forgot its queues.
    #[error(
        "the controller was reset; this queue pair or handle is gone: use the controller \
         handle the reset returned and create new queue pairs"
    )]
    ControllerReset,
    /// The controller lacks something the driver needs.
    #[error("unsupported controller: {0}")]
    Unsupported(String),
    /// A data transfer is longer than the queue or the controller accepts.
    #[error("transfer of {len} bytes exceeds the limit of {max} bytes")]
    TransferTooLarge {
        /// Requested length.
        len: usize,
        /// The limit (MDTS, ZASL or the queue's PRP list capacity).
        max: usize,
    },
    /// A data buffer does not meet the PRP rules (dword-aligned start).
    #[error("buffer address {addr:#x} is not dword aligned")]
    Misaligned {
        /// Bus address of the first byte.
        addr: u64,
    },
    /// A byte range lies outside its buffer.
    #[error("range {start}..{end} is outside a buffer of {len} bytes")]
    OutOfRange {
        /// Range start.
        start: usize,
        /// Range end.
        end: usize,
        /// Buffer length.
        len: usize,
    },
    /// The DMA allocator could not provide memory.
    #[error("cannot allocate {len} bytes of DMA memory: {reason}")]
    DmaAllocation {
        /// Requested length.
        len: usize,
        /// Why not.
        reason: String,
    },
    /// Bad argument to a driver function.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A command builder of `zns-spec` refused its input.
    #[error("invalid command: {0}")]
    Command(String),
    /// The controller returned data the driver could not parse.
    #[error("malformed data from the controller: {0}")]
    Malformed(String),
    /// No queue identifiers are left (Number of Queues limit).
    #[error("no I/O queue identifiers left (the controller granted {granted})")]
    NoQueueIds {
        /// I/O queue pairs the controller granted.
        granted: u16,
    },
    /// A transport failed (PCIe, VFIO, sysfs, hugepages).
    #[error(transparent)]
    Transport(#[from] TransportError),
}

impl Error {
    /// The NVMe status, when the error is a command failure.
    pub fn status(&self) -> Option<Status> {
        match self {
            Error::Nvme(e) => Some(e.status),
            _ => None,
        }
    }

    /// True when the error is a command failure with the named code.
    pub fn is_status(&self, code: StatusCode) -> bool {
        self.status().is_some_and(|s| s.is(code))
    }
}

/// Failures of the PCIe, VFIO and hugepage machinery.
///
/// Thread safety: `Send + Sync`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// A PCI address that is not `DDDD:BB:DD.F` or `BB:DD.F`.
    #[error("invalid PCI address {0:?} (expected DDDD:BB:DD.F, e.g. 0000:00:04.0)")]
    InvalidBdf(String),
    /// The device is bound to a kernel driver that owns it.
    #[error(
        "PCI device {bdf} is bound to the kernel driver {driver:?}; unbind it first, e.g. \
         `echo {bdf} > /sys/bus/pci/devices/{bdf}/driver/unbind` (as root), then bind it to \
         vfio-pci or leave it unbound"
    )]
    BoundToKernel {
        /// The device.
        bdf: String,
        /// The driver's name.
        driver: String,
    },
    /// A system call or file access failed.
    #[error("{what}: {source}")]
    Io {
        /// What was attempted.
        what: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Physical addresses are not visible (not root, or pagemap hides PFNs).
    #[error(
        "cannot translate virtual to physical addresses: /proc/self/pagemap shows no page frame \
         numbers (run as root with CAP_SYS_ADMIN, or bind the device to vfio-pci)"
    )]
    NoPhysicalAddresses,
    /// No huge pages could be mapped.
    #[error(
        "cannot map {len} bytes of 2 MiB huge pages ({source}); reserve some, e.g. \
         `echo 64 > /proc/sys/vm/nr_hugepages`"
    )]
    NoHugepages {
        /// Requested length.
        len: usize,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A PCI transport name other than `auto`, `vfio` or `sysfs`.
    #[error("unknown PCI transport {0:?} (expected auto, vfio or sysfs)")]
    UnknownBinding(String),
    /// The VFIO setup failed a precondition.
    #[error("VFIO: {0}")]
    Vfio(String),
    /// BAR0 is missing or too small.
    #[error("BAR0 of {bdf} is unusable: {reason}")]
    Bar {
        /// The device.
        bdf: String,
        /// Why.
        reason: String,
    },
}

impl TransportError {
    /// Wraps the last OS error with a description of the attempt.
    pub(crate) fn last_os(what: impl Into<String>) -> Self {
        TransportError::Io { what: what.into(), source: std::io::Error::last_os_error() }
    }

    /// Wraps an I/O error with a description of the attempt.
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        TransportError::Io { what: what.into(), source }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvme_error_prints_the_spec_name() {
        let e = Error::from(NvmeError {
            status: StatusCode::ZoneIsFull.status(),
            field: StatusField::new(StatusCode::ZoneIsFull.status(), false, true),
            opcode: 0x7D,
            qid: 1,
        });
        assert_eq!(e.to_string(), "Zone Is Full (SCT 1h, SC B9h)");
        assert!(e.is_status(StatusCode::ZoneIsFull));
        assert!(!e.is_status(StatusCode::ZoneInvalidWrite));
    }

    #[test]
    fn bound_device_error_says_how_to_unbind() {
        let e = TransportError::BoundToKernel { bdf: "0000:00:04.0".into(), driver: "nvme".into() };
        let s = e.to_string();
        assert!(s.contains("/sys/bus/pci/devices/0000:00:04.0/driver/unbind"), "{s}");
        assert!(s.contains("\"nvme\""), "{s}");
    }
}
