//! Typed errors of the device layer.
//!
//! A command that the device completes with an error status becomes
//! [`DeviceError::Nvme`], which names the command, the LBA it addressed and
//! the status by its specification name:
//! `write at LBA 1234: Zone Invalid Write (SCT 1h, SC BCh)`.

use std::fmt;
use std::time::Duration;

use zns_spec::{Status, StatusCode};

/// Result alias of the device layer.
pub type Result<T, E = DeviceError> = std::result::Result<T, E>;

/// The kind of a command, for error messages and statistics.
///
/// Thread safety: plain data, `Send + Sync`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// Read.
    Read,
    /// Write.
    Write,
    /// Zone Append.
    Append,
    /// Write Zeroes.
    WriteZeroes,
    /// Flush.
    Flush,
    /// Zone Management Send: Open Zone.
    Open,
    /// Zone Management Send: Close Zone.
    Close,
    /// Zone Management Send: Finish Zone.
    Finish,
    /// Zone Management Send: Reset Zone.
    Reset,
    /// Zone Management Send: Offline Zone.
    Offline,
    /// Zone Management Send: Set Zone Descriptor Extension.
    SetZoneExtension,
    /// Zone Management Send: Open Zone with ZRWA Allocate.
    OpenZrwa,
    /// Zone Management Send: Flush Explicit ZRWA Range (a ZRWA commit).
    CommitZrwa,
    /// Zone Management Receive (plain or extended report).
    ReportZones,
    /// Copy.
    Copy,
    /// Get Log Page (an admin command).
    GetLogPage,
    /// Get Features (an admin command).
    GetFeatures,
    /// Set Features (an admin command).
    SetFeatures,
    /// I/O Management Receive: Reclaim Unit Handle Status (Flexible Data
    /// Placement).
    RuhStatus,
    /// I/O Management Send: Reclaim Unit Handle Update (Flexible Data
    /// Placement).
    RuhUpdate,
}

impl OpKind {
    /// A short lower-case name ("write", "zone append", ...).
    pub const fn name(self) -> &'static str {
        match self {
            OpKind::Read => "read",
            OpKind::Write => "write",
            OpKind::Append => "zone append",
            OpKind::WriteZeroes => "write zeroes",
            OpKind::Flush => "flush",
            OpKind::Open => "zone open",
            OpKind::Close => "zone close",
            OpKind::Finish => "zone finish",
            OpKind::Reset => "zone reset",
            OpKind::Offline => "zone offline",
            OpKind::SetZoneExtension => "set zone descriptor extension",
            OpKind::OpenZrwa => "zone open with ZRWA",
            OpKind::CommitZrwa => "ZRWA commit",
            OpKind::ReportZones => "zone report",
            OpKind::Copy => "copy",
            OpKind::GetLogPage => "get log page",
            OpKind::GetFeatures => "get features",
            OpKind::SetFeatures => "set features",
            OpKind::RuhStatus => "reclaim unit handle status",
            OpKind::RuhUpdate => "reclaim unit handle update",
        }
    }

    /// The command and where it was aimed, e.g. "write at LBA 1234",
    /// "zone append to zone at LBA 1024", "reset zone at LBA 0", "reset all
    /// zones". `hex` prints the LBA in hexadecimal (`0x4d2`).
    pub fn describe(self, lba: Option<u64>, hex: bool) -> String {
        let at = |l: u64| if hex { format!("{l:#x}") } else { l.to_string() };
        let action = match self {
            OpKind::Open => Some("open"),
            OpKind::Close => Some("close"),
            OpKind::Finish => Some("finish"),
            OpKind::Reset => Some("reset"),
            OpKind::Offline => Some("offline"),
            _ => None,
        };
        match (self, action, lba) {
            (OpKind::Flush, _, _) => "flush".to_string(),
            (_, Some(a), Some(l)) => format!("{a} zone at LBA {}", at(l)),
            (_, Some(a), None) => format!("{a} all zones"),
            (OpKind::Append, _, Some(l)) => format!("zone append to zone at LBA {}", at(l)),
            (OpKind::SetZoneExtension, _, Some(l)) => {
                format!("set zone descriptor extension of zone at LBA {}", at(l))
            }
            (OpKind::Copy, _, Some(l)) => format!("copy to LBA {}", at(l)),
            (OpKind::OpenZrwa, _, Some(l)) => format!("open zone at LBA {} with a ZRWA", at(l)),
            (OpKind::CommitZrwa, _, Some(l)) => format!("ZRWA commit up to LBA {}", at(l)),
            (OpKind::ReportZones, _, Some(l)) => format!("zone report from LBA {}", at(l)),
            (k, _, Some(l)) => format!("{} at LBA {}", k.name(), at(l)),
            (k, _, None) => k.name().to_string(),
        }
    }
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Every failure of the device layer.
///
/// Thread safety: `Send + Sync`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeviceError {
    /// The device completed a command with an error status.
    #[error("{}: {status}", .op.describe(*.lba, false))]
    Nvme {
        /// Status Code Type and Status Code.
        status: Status,
        /// The command.
        op: OpKind,
        /// The LBA the command addressed (zone start for zone commands);
        /// `None` for commands on all zones and for Flush.
        lba: Option<u64>,
    },
    /// A device URI that does not parse or names a bad option.
    #[error("invalid device URI {uri:?}: {reason}")]
    InvalidUri {
        /// The URI as given.
        uri: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The device exists (or may) but cannot be opened: not found, not an
    /// NVMe controller, bound to a kernel driver, no permission.
    #[error("cannot open {uri}: {reason}")]
    Unavailable {
        /// The URI as given.
        uri: String,
        /// Why, and what to do about it.
        reason: String,
    },
    /// The device or backend lacks what the request needs.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// The queue has no free slot: poll for completions, then submit again.
    #[error("the queue is full")]
    QueueFull,
    /// A bad argument (buffer length, block count, range) from the caller.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// Commands did not complete in time.
    #[error("timed out after {after:?} waiting for {what}")]
    Timeout {
        /// What was awaited.
        what: &'static str,
        /// How long.
        after: Duration,
    },
    /// An operating-system call or file access failed.
    #[error("{context}: {source}")]
    Io {
        /// What was attempted.
        context: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The user-space driver failed for a reason other than a command status.
    #[error(transparent)]
    Driver(zns_driver::Error),
    /// The emulated device could not be built.
    #[cfg(feature = "emulator")]
    #[error("emulator: {0}")]
    Emulator(Box<zns_emulator::EmulatorError>),
    /// A device image could not be created or opened.
    #[cfg(feature = "emulator")]
    #[error("device image: {0}")]
    Image(Box<zns_emulator::image::ImageError>),
}

impl DeviceError {
    /// The NVMe status, when the error is a command failure.
    pub fn status(&self) -> Option<Status> {
        match self {
            DeviceError::Nvme { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// True when the error is a command failure with the named code.
    pub fn is_status(&self, code: StatusCode) -> bool {
        self.status().is_some_and(|s| s.is(code))
    }

    /// Maps a driver error, giving a command failure its context.
    pub(crate) fn from_driver(e: zns_driver::Error, op: OpKind, lba: Option<u64>) -> Self {
        match e {
            zns_driver::Error::Nvme(n) => DeviceError::Nvme { status: n.status, op, lba },
            zns_driver::Error::QueueFull { .. } => DeviceError::QueueFull,
            zns_driver::Error::InvalidArgument(m) => DeviceError::InvalidArgument(m),
            other => DeviceError::Driver(other),
        }
    }

    /// An [`DeviceError::InvalidUri`].
    pub(crate) fn uri(uri: &str, reason: impl Into<String>) -> Self {
        DeviceError::InvalidUri { uri: uri.to_string(), reason: reason.into() }
    }
}

#[cfg(feature = "emulator")]
impl From<zns_emulator::EmulatorError> for DeviceError {
    fn from(e: zns_emulator::EmulatorError) -> Self {
        DeviceError::Emulator(Box::new(e))
    }
}

#[cfg(feature = "emulator")]
impl From<zns_emulator::image::ImageError> for DeviceError {
    fn from(e: zns_emulator::image::ImageError) -> Self {
        DeviceError::Image(Box::new(e))
    }
}

impl From<zns_driver::Error> for DeviceError {
    /// A driver error without command context (bring-up, queue creation).
    fn from(e: zns_driver::Error) -> Self {
        match e {
            zns_driver::Error::QueueFull { .. } => DeviceError::QueueFull,
            other => DeviceError::Driver(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvme_errors_name_command_lba_and_status() {
        let e = DeviceError::Nvme {
            status: StatusCode::ZoneInvalidWrite.status(),
            op: OpKind::Write,
            lba: Some(1234),
        };
        assert_eq!(e.to_string(), "write at LBA 1234: Zone Invalid Write (SCT 1h, SC BCh)");
        assert!(e.is_status(StatusCode::ZoneInvalidWrite));
        let e = DeviceError::Nvme {
            status: StatusCode::ZoneIsFull.status(),
            op: OpKind::Append,
            lba: Some(64),
        };
        assert_eq!(e.to_string(), "zone append to zone at LBA 64: Zone Is Full (SCT 1h, SC B9h)");
        assert_eq!(OpKind::Reset.describe(None, false), "reset all zones");
        assert_eq!(OpKind::Open.describe(Some(64), false), "open zone at LBA 64");
        assert_eq!(OpKind::Read.describe(Some(0x1000), true), "read at LBA 0x1000");
        assert_eq!(OpKind::Flush.describe(Some(3), false), "flush");
    }
}
