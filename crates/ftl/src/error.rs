//! Typed errors of the FTL.

use zns_device::DeviceError;

/// Result alias of the FTL.
pub type Result<T, E = FtlError> = std::result::Result<T, E>;

/// Every failure of the FTL and of [`crate::BlockDevice`] implementations.
///
/// Thread safety: `Send + Sync`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FtlError {
    /// A device command failed.
    #[error("{context}: {source}")]
    Device {
        /// What the FTL was doing.
        context: &'static str,
        /// The device's error.
        #[source]
        source: DeviceError,
    },
    /// A request reaches past the end of the block device.
    #[error("{blocks} blocks at block {lba} reach past the end of the device ({capacity} blocks)")]
    OutOfRange {
        /// First block of the request.
        lba: u64,
        /// Blocks in the request.
        blocks: u64,
        /// Blocks the device has.
        capacity: u64,
    },
    /// A buffer that is not a whole number of blocks.
    #[error("{len} bytes is not a whole number of {block_size}-byte blocks")]
    Misaligned {
        /// Buffer length in bytes.
        len: usize,
        /// Block size in bytes.
        block_size: u32,
    },
    /// Every block of the device holds live data and nothing can be
    /// reclaimed (only possible when the over-provisioning is exhausted).
    #[error("no space left: no zone holds reclaimable blocks")]
    NoSpace,
    /// The configuration does not fit the device.
    #[error("invalid FTL configuration: {0}")]
    Config(String),
    /// The device holds no FTL: no zone holds data (a device with data
    /// but no FTL is [`FtlError::NotEmpty`], one whose FTL header is
    /// damaged [`FtlError::Corrupt`]).
    #[error("the device holds no FTL metadata and no data (format it first)")]
    NotFormatted,
    /// The device holds no FTL metadata, but some of its zones hold data:
    /// other data, or an FTL whose metadata is damaged past recognition.
    /// Formatting would destroy it, so nothing but an explicit
    /// [`crate::Ftl::format`] does.
    #[error(
        "the device holds no FTL metadata, but {written_zones} of its zones hold data (other \
         data, or an FTL damaged past recognition); it is not formatted over unless a format \
         is asked for explicitly"
    )]
    NotEmpty {
        /// Zones that are not Empty.
        written_zones: u64,
    },
    /// The FTL on the device was made for a different geometry or version.
    #[error("incompatible FTL metadata: {0}")]
    Incompatible(String),
    /// Persistent metadata is damaged somewhere other than at the torn end
    /// of the log.
    #[error("corrupt FTL metadata in zone {zone} at block {block}: {reason}")]
    Corrupt {
        /// Zone number.
        zone: u64,
        /// Block offset inside the zone.
        block: u64,
        /// What is wrong.
        reason: String,
    },
    /// A block's data does not match the checksum in its tag (or the tag
    /// names another logical block): it is not returned. Like a drive's
    /// Unrecovered Read Error; the rest of the device is unaffected.
    #[error(
        "logical block {logical} is damaged: the data in zone {zone} at block {offset} {why} \
         (zns ftl check --read-all lists every such block)"
    )]
    DamagedData {
        /// The logical block read.
        logical: u64,
        /// Zone holding it.
        zone: u32,
        /// Block offset inside the zone.
        offset: u32,
        /// What failed.
        why: &'static str,
    },
    /// A repair cannot account for every block (map changes in damaged
    /// log pages are unknown, mappings would be dropped, or blocks fail
    /// their checksum), and the loss was not accepted: nothing was
    /// written. The report says what would be lost.
    #[error(
        "a repair cannot account for every block ({}); nothing was changed. Repair accepting \
         the loss explicitly (`zns ftl check --repair --accept-loss`), or keep the device as it \
         is for a closer look",
        .0.summary()
    )]
    RepairLoses(Box<crate::recovery::RepairReport>),
    /// The FTL stopped after an earlier device failure; reopen it to
    /// recover.
    #[error("the FTL stopped after an earlier failure: {0}")]
    Failed(String),
}

impl FtlError {
    /// A [`FtlError::Device`] with its context: for `map_err` on a device
    /// call made on the FTL's behalf.
    pub fn device(context: &'static str) -> impl FnOnce(DeviceError) -> FtlError {
        move |source| FtlError::Device { context, source }
    }
}
