//! The kernel-path backends: NVMe passthrough through io_uring on the
//! kernel's generic namespace device (`ng:` URIs, [`PassthroughDevice`]),
//! and the kernel's zoned block device (`zbd:` URIs, [`ZonedBlockDevice`]).
//!
//! Both reach a device the kernel's `nvme` driver owns, so they need no
//! unbinding; what each can and cannot do is listed in `docs/backends.md`.
//! Their unsafe code (structure layouts, ioctls, the io_uring ring) lives in
//! `sys`.

mod ng_admin;
pub mod raw_namespace;
mod sys;
pub(crate) mod sysfs;
pub mod tcp;
pub mod uring_passthrough;
pub mod zoned_block;

pub use raw_namespace::{RawNamespace, RawOutcome};
pub use tcp::{TcpDevice, TcpQueue};
pub use uring_passthrough::{PassthroughDevice, PassthroughQueue};
pub use zoned_block::{ZonedBlockDevice, ZonedBlockQueue};

use std::path::Path;

use zns_spec::StatusField;

use crate::error::{DeviceError, OpKind};

/// Most commands one kernel-path queue keeps in flight.
pub const MAX_QUEUE_DEPTH: usize = 4096;

/// A command that failed with an OS error.
pub(crate) fn os_error(op: OpKind, lba: Option<u64>, errno: i32) -> DeviceError {
    DeviceError::Io {
        context: op.describe(lba, false),
        source: std::io::Error::from_raw_os_error(errno),
    }
}

/// A command that failed with an NVMe status (the 15-bit status field).
pub(crate) fn status_error(op: OpKind, lba: Option<u64>, field: u16) -> DeviceError {
    DeviceError::Nvme { status: StatusField(field).status(), op, lba }
}

/// Checks that `path` exists and is the kind of device file wanted
/// (character or block), with an error telling what to do otherwise.
pub(crate) fn check_device_file(path: &Path, uri: &str, block: bool) -> Result<(), DeviceError> {
    use std::os::unix::fs::FileTypeExt;
    let fail = |reason: String| DeviceError::Unavailable { uri: uri.to_string(), reason };
    let meta = std::fs::metadata(path).map_err(|e| {
        fail(format!(
            "{}: {e} (`zns list` shows the NVMe namespaces the kernel exposes)",
            path.display()
        ))
    })?;
    let ft = meta.file_type();
    match (block, ft.is_block_device(), ft.is_char_device()) {
        (true, true, _) | (false, _, true) => Ok(()),
        (true, _, _) => Err(fail(format!(
            "{} is not a block device (zbd: takes a zoned namespace such as /dev/nvme0n1)",
            path.display()
        ))),
        (false, _, _) => Err(fail(format!(
            "{} is not a character device (ng: takes an NVMe generic namespace device such \
             as /dev/ng0n1)",
            path.display()
        ))),
    }
}

/// Opens `path` for reading and writing (with `extra` open flags).
pub(crate) fn open_rw(path: &Path, uri: &str, extra: i32) -> Result<std::fs::File, DeviceError> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_CLOEXEC | extra)
        .open(path)
        .map_err(|e| {
            let hint = if e.kind() == std::io::ErrorKind::PermissionDenied {
                " (NVMe passthrough and zone management need root)"
            } else {
                ""
            };
            DeviceError::Unavailable {
                uri: uri.to_string(),
                reason: format!("open {}: {e}{hint}", path.display()),
            }
        })
}
