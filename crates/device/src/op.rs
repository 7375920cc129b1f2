//! Commands as the device layer submits them, their completions, and
//! refused submissions.

use zns_spec::ReportFilter;

use crate::buffer::IoBuffer;
use crate::error::{DeviceError, OpKind};
use crate::zone::{Target, ZoneAction};

/// One source range of a Copy command.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CopyRange {
    /// First LBA of the range.
    pub slba: u64,
    /// Blocks in the range (1..=65536).
    pub blocks: u32,
}

impl From<(u64, u32)> for CopyRange {
    fn from((slba, blocks): (u64, u32)) -> Self {
        CopyRange { slba, blocks }
    }
}

/// Every command a [`crate::ZoneQueue`] runs.
///
/// Commands that move data take the length of the buffer submitted with
/// them, which must be a whole number of blocks; the others take none.
///
/// | command | buffer |
/// |---|---|
/// | `Read` | filled from the device |
/// | `Write`, `Append` | written to the device |
/// | `SetZoneExtension` | the extension data, at most the namespace's extension size |
/// | `ReportZones` | filled with the report (decode with [`crate::parse_report`]) |
/// | `RuhStatus` | filled with the Reclaim Unit Handle Status (whole dwords; decode with [`zns_spec::fdp::RuhStatus::from_bytes`]) |
/// | `WriteZeroes`, `Flush`, `Zone`, `Copy`, `OpenZrwa`, `CommitZrwa`, `RuhUpdate` | none |
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ZoneOp {
    /// Read the buffer's length from `lba`.
    Read {
        /// First LBA.
        lba: u64,
    },
    /// Write the buffer at `lba` (in a zone: at its write pointer).
    Write {
        /// First LBA.
        lba: u64,
        /// Force Unit Access: durable when it completes.
        fua: bool,
        /// Flexible Data Placement: the Placement Identifier (DSPEC with
        /// DTYPE 2h, built by [`zns_spec::fdp::PlacementId::encode`]) of the
        /// reclaim unit handle the data goes to; `None` for the device's
        /// default placement. Only a device with FDP enabled accepts it
        /// (see [`crate::DeviceInfo`]); backends that cannot carry it
        /// refuse it with `Unsupported`.
        placement: Option<u16>,
    },
    /// Zone Append the buffer to the zone starting at `zslba`; the
    /// completion carries the LBA the data landed at.
    Append {
        /// Zone start LBA.
        zslba: u64,
        /// Force Unit Access.
        fua: bool,
    },
    /// Write Zeroes.
    WriteZeroes {
        /// First LBA.
        lba: u64,
        /// Blocks (1..=65536).
        blocks: u32,
    },
    /// Flush the volatile write cache.
    Flush,
    /// A zone management action on one zone or all.
    Zone {
        /// The action.
        action: ZoneAction,
        /// Which zones.
        target: Target,
    },
    /// Set the descriptor extension of the (Empty) zone at `zslba`, which
    /// then becomes Closed.
    SetZoneExtension {
        /// Zone start LBA.
        zslba: u64,
    },
    /// Zone Management Receive into the buffer.
    ReportZones {
        /// Report zones from the one holding this LBA on.
        slba: u64,
        /// Which zones.
        filter: ReportFilter,
        /// Partial Report: the header counts only the descriptors returned.
        partial: bool,
        /// Extended report: descriptors followed by their extensions.
        extended: bool,
    },
    /// Copy source ranges to `dest` (format 0 descriptors).
    Copy {
        /// Source ranges (1..=256; the device's MSRC may allow fewer).
        ranges: Vec<CopyRange>,
        /// Destination LBA (a zone's write pointer).
        dest: u64,
    },
    /// Open Zone with ZRWA Allocate: explicitly opens the zone at `zslba`
    /// and gives it a zone random write area (see
    /// [`crate::ZrwaInfo`]): writes may then land anywhere in the window
    /// at its write pointer, overwrites included, until committed.
    OpenZrwa {
        /// Zone start LBA.
        zslba: u64,
    },
    /// Flush Explicit ZRWA Range: commits the zone random write area of
    /// the zone holding `lba` from its write pointer up to and including
    /// `lba`, which must end a whole number of flush granules.
    CommitZrwa {
        /// Last LBA to commit.
        lba: u64,
    },
    /// Flexible Data Placement: I/O Management Receive, Reclaim Unit
    /// Handle Status (MO 01h), into the buffer (whole dwords): one
    /// descriptor per placement handle of the namespace, each with the
    /// blocks its current reclaim unit still takes. Only a device with FDP
    /// enabled ([`crate::DeviceInfo::fdp`]) takes it.
    RuhStatus,
    /// Flexible Data Placement: I/O Management Send, Reclaim Unit Handle
    /// Update (MO 01h): each placement identifier's reclaim unit handle
    /// leaves its current reclaim unit and writes a fresh one next. The
    /// identifiers travel as the command's data, which the queue builds.
    RuhUpdate {
        /// Placement identifiers (1..=65536), as in
        /// [`ZoneOp::Write::placement`](ZoneOp::Write).
        pids: Vec<u16>,
    },
}

impl ZoneOp {
    /// The kind of command.
    pub fn kind(&self) -> OpKind {
        match self {
            ZoneOp::Read { .. } => OpKind::Read,
            ZoneOp::Write { .. } => OpKind::Write,
            ZoneOp::Append { .. } => OpKind::Append,
            ZoneOp::WriteZeroes { .. } => OpKind::WriteZeroes,
            ZoneOp::Flush => OpKind::Flush,
            ZoneOp::Zone { action, .. } => action.kind(),
            ZoneOp::SetZoneExtension { .. } => OpKind::SetZoneExtension,
            ZoneOp::ReportZones { .. } => OpKind::ReportZones,
            ZoneOp::Copy { .. } => OpKind::Copy,
            ZoneOp::OpenZrwa { .. } => OpKind::OpenZrwa,
            ZoneOp::CommitZrwa { .. } => OpKind::CommitZrwa,
            ZoneOp::RuhStatus => OpKind::RuhStatus,
            ZoneOp::RuhUpdate { .. } => OpKind::RuhUpdate,
        }
    }

    /// The LBA the command addresses (zone start for zone commands,
    /// destination for Copy); `None` for Flush, Select All and the
    /// reclaim unit handle commands.
    pub fn lba(&self) -> Option<u64> {
        match self {
            ZoneOp::Read { lba } | ZoneOp::Write { lba, .. } | ZoneOp::WriteZeroes { lba, .. } => {
                Some(*lba)
            }
            ZoneOp::Append { zslba, .. } | ZoneOp::SetZoneExtension { zslba } => Some(*zslba),
            ZoneOp::Flush => None,
            ZoneOp::Zone { target, .. } => target.lba(),
            ZoneOp::ReportZones { slba, .. } => Some(*slba),
            ZoneOp::Copy { dest, .. } => Some(*dest),
            ZoneOp::OpenZrwa { zslba } => Some(*zslba),
            ZoneOp::CommitZrwa { lba } => Some(*lba),
            ZoneOp::RuhStatus | ZoneOp::RuhUpdate { .. } => None,
        }
    }

    /// Which way the command's buffer moves: `Some(true)` to the device,
    /// `Some(false)` from it, `None` for commands without a buffer.
    pub fn data_to_device(&self) -> Option<bool> {
        match self {
            ZoneOp::Write { .. } | ZoneOp::Append { .. } | ZoneOp::SetZoneExtension { .. } => {
                Some(true)
            }
            ZoneOp::Read { .. } | ZoneOp::ReportZones { .. } | ZoneOp::RuhStatus => Some(false),
            ZoneOp::WriteZeroes { .. }
            | ZoneOp::RuhUpdate { .. }
            | ZoneOp::Flush
            | ZoneOp::Zone { .. }
            | ZoneOp::Copy { .. }
            | ZoneOp::OpenZrwa { .. }
            | ZoneOp::CommitZrwa { .. } => None,
        }
    }

    /// An error naming this command and its LBA for `status`.
    pub fn error(&self, status: zns_spec::Status) -> DeviceError {
        DeviceError::Nvme { status, op: self.kind(), lba: self.lba() }
    }
}

/// The completion of an asynchronous command.
///
/// Thread safety: `Send + Sync`.
#[derive(Debug)]
pub struct Completion {
    /// The tag given at submission.
    pub tag: u64,
    /// The kind of command.
    pub op: OpKind,
    /// Success: the LBA a Zone Append landed at, 0 for other commands.
    /// Failure: the status as [`DeviceError::Nvme`].
    pub result: Result<u64, DeviceError>,
    /// The buffer submitted with the command, handed back.
    pub buffer: Option<IoBuffer>,
}

/// A submission the queue refused; the buffer comes back.
///
/// Thread safety: `Send + Sync`.
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct Rejected {
    /// Why: [`DeviceError::QueueFull`] (poll, then submit again) or a bad
    /// command.
    pub error: DeviceError,
    /// The buffer that was submitted.
    pub buffer: Option<IoBuffer>,
}

impl Rejected {
    /// True when the queue was full: poll and submit again.
    pub fn is_queue_full(&self) -> bool {
        matches!(self.error, DeviceError::QueueFull)
    }
}

impl From<Rejected> for DeviceError {
    fn from(r: Rejected) -> Self {
        r.error
    }
}
