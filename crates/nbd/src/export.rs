//! What a server exports: a named [`BlockDevice`] and how it is offered.

use std::sync::Arc;

use parking_lot::Mutex;
use zns_block::BlockDevice;

use crate::wire::tx;

/// The largest request payload the server accepts (and advertises as the
/// maximum block size): the limit QEMU and the Linux client also use.
pub const MAX_PAYLOAD: u32 = 32 << 20;

/// The most bytes of a request a connection holds at once: reads and
/// writes of up to [`MAX_PAYLOAD`] are streamed between the socket and the
/// device in pieces of at most this size, so that a client (64 connections
/// of one, say) cannot make the server hold 32 MiB per connection. 1 MiB
/// keeps each device call large enough to run at the device's bandwidth.
pub const CHUNK: u32 = 1 << 20;

/// One export: a block device under a name.
///
/// Thread safety: `Send + Sync`; shared by every connection that selects it.
pub struct Export {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) device: Arc<dyn BlockDevice>,
    pub(crate) read_only: bool,
    /// Serializes read-modify-write of partial blocks, for clients that did
    /// not agree to the block size (see [`crate::server`]).
    pub(crate) partial: Mutex<()>,
}

impl std::fmt::Debug for Export {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Export")
            .field("name", &self.name)
            .field("size", &self.size())
            .field("block_size", &self.device.block_size())
            .field("read_only", &self.read_only)
            .finish_non_exhaustive()
    }
}

impl Export {
    /// Exports `device` as `name`, writable, with no description.
    pub fn new(name: impl Into<String>, device: Arc<dyn BlockDevice>) -> Export {
        Export {
            name: name.into(),
            description: String::new(),
            device,
            read_only: false,
            partial: Mutex::new(()),
        }
    }

    /// Sets the description clients see with `NBD_INFO_DESCRIPTION`.
    pub fn with_description(mut self, description: impl Into<String>) -> Export {
        self.description = description.into();
        self
    }

    /// Offers the export read-only: writes, trims and zeroing fail with
    /// `EPERM`.
    pub fn read_only(mut self, read_only: bool) -> Export {
        self.read_only = read_only;
        self
    }

    /// The export's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Size in bytes.
    pub fn size(&self) -> u64 {
        self.device.capacity_bytes()
    }

    /// The exported device.
    pub fn device(&self) -> &Arc<dyn BlockDevice> {
        &self.device
    }

    /// Transmission flags. `CAN_MULTI_CONN` holds because
    /// [`BlockDevice::flush`] makes every write acknowledged before it
    /// durable, whichever connection (thread) wrote it.
    pub fn transmission_flags(&self) -> u16 {
        let mut f = tx::HAS_FLAGS | tx::SEND_FLUSH | tx::SEND_FUA | tx::CAN_MULTI_CONN;
        if self.read_only {
            f |= tx::READ_ONLY;
        } else {
            f |= tx::SEND_TRIM | tx::SEND_WRITE_ZEROES;
        }
        f
    }

    /// Minimum, preferred and maximum block sizes (`NBD_INFO_BLOCK_SIZE`).
    pub fn block_sizes(&self) -> (u32, u32, u32) {
        let bs = self.device.block_size();
        (bs, bs.max(4096), MAX_PAYLOAD)
    }
}
