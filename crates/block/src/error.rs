//! Why a block request failed.

/// Result of a block device call.
pub type Result<T> = std::result::Result<T, BlockError>;

/// Why a [`BlockDevice`](crate::BlockDevice) request failed, in the classes
/// an export tells its client apart (NVMe statuses, NBD and ublk errnos).
/// The error of the implementation is kept as the source where there is
/// one, so an export that knows its type can look closer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BlockError {
    /// The request reaches past the end of the device.
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
    /// The device has no room left for the write.
    #[error("no space left on the device")]
    NoSpace,
    /// A block's data cannot be returned (it fails its checksum, or is
    /// lost): a drive's Unrecovered Read Error.
    #[error("block {lba} cannot be read: {source}")]
    Unreadable {
        /// The block that failed.
        lba: u64,
        /// What the device found.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The device under the block device failed the request.
    #[error("{source}")]
    Device {
        /// The device's own error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Any other failure (the device is broken, closed, misconfigured).
    #[error("{source}")]
    Failed {
        /// The implementation's error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl BlockError {
    /// A [`BlockError::Failed`] with a message.
    pub fn failed(message: impl Into<String>) -> BlockError {
        BlockError::Failed { source: message.into().into() }
    }

    /// The implementation's error of a [`BlockError::Device`],
    /// [`BlockError::Unreadable`] or [`BlockError::Failed`], if it is an
    /// `E`.
    pub fn source_as<E: std::error::Error + 'static>(&self) -> Option<&E> {
        match self {
            BlockError::Unreadable { source, .. }
            | BlockError::Device { source }
            | BlockError::Failed { source } => source.downcast_ref::<E>(),
            _ => None,
        }
    }
}
