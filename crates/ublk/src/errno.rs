//! Device and block device (FTL) failures as the errnos a ublk server completes requests
//! with.
//!
//! The ublk driver turns a negative result back into a block-layer status
//! (`errno_to_blk_status`), so each errno is chosen for the status the
//! kernel's own NVMe driver gives the same NVMe status
//! (`nvme_error_status`): a filesystem on the ublk device then sees what
//! it would see on the drive itself. Every errno here is positive; the
//! server negates it.

use zns_block::BlockError;
use zns_device::{DeviceError, Status, StatusCode};

/// Generic I/O error (`BLK_STS_IOERR`).
pub const EIO: i32 = libc::EIO;
/// Invalid argument (`BLK_STS_INVAL`... the driver maps it to an I/O error).
pub const EINVAL: i32 = libc::EINVAL;
/// Operation not supported (`BLK_STS_NOTSUPP`).
pub const EOPNOTSUPP: i32 = libc::EOPNOTSUPP;
/// No space (`BLK_STS_NOSPC`).
pub const ENOSPC: i32 = libc::ENOSPC;
/// Medium error (`BLK_STS_MEDIUM`).
pub const ENODATA: i32 = libc::ENODATA;
/// Too many active zones (`BLK_STS_ZONE_ACTIVE_RESOURCE`).
pub const EOVERFLOW: i32 = libc::EOVERFLOW;
/// Too many open zones (`BLK_STS_ZONE_OPEN_RESOURCE`).
pub const ETOOMANYREFS: i32 = libc::ETOOMANYREFS;
/// Timed out (`BLK_STS_TIMEOUT`).
pub const ETIMEDOUT: i32 = libc::ETIMEDOUT;
/// Resource busy (`BLK_STS_AGAIN`'s cousin; the driver maps it to an I/O
/// error).
pub const EAGAIN: i32 = libc::EAGAIN;

/// The errno for an NVMe completion status.
pub fn status_errno(status: Status) -> i32 {
    let is = |c: StatusCode| status.is(c);
    if is(StatusCode::TooManyActiveZones) {
        EOVERFLOW
    } else if is(StatusCode::TooManyOpenZones) {
        ETOOMANYREFS
    } else if is(StatusCode::LbaOutOfRange) || is(StatusCode::CapacityExceeded) {
        ENOSPC
    } else if is(StatusCode::InvalidOpcode)
        || is(StatusCode::InvalidField)
        || is(StatusCode::InvalidNamespaceOrFormat)
        || is(StatusCode::ConflictingAttributes)
    {
        EOPNOTSUPP
    } else if is(StatusCode::UnrecoveredReadError) || is(StatusCode::WriteToReadOnlyRange) {
        ENODATA
    } else {
        // Zone Is Full, Zone Invalid Write, Zone Boundary Error, Zone Is
        // Read Only / Offline, Invalid Zone State Transition, Write
        // Fault, ...: the NVMe driver's BLK_STS_IOERR.
        EIO
    }
}

/// The errno for a device-layer failure.
pub fn device_errno(e: &DeviceError) -> i32 {
    match e {
        DeviceError::Nvme { status, .. } => status_errno(*status),
        DeviceError::Unsupported(_) => EOPNOTSUPP,
        DeviceError::InvalidArgument(_) => EINVAL,
        DeviceError::Timeout { .. } => ETIMEDOUT,
        DeviceError::QueueFull => EAGAIN,
        DeviceError::Io { source, .. } => source.raw_os_error().unwrap_or(EIO),
        _ => EIO,
    }
}

/// The errno for a failure of a [`zns_block::BlockDevice`] (the FTL): a
/// device error under it (found in its chain of sources) maps as
/// [`device_errno`] maps it.
pub fn block_errno(e: &BlockError) -> i32 {
    match e {
        BlockError::OutOfRange { .. } | BlockError::NoSpace => ENOSPC,
        BlockError::Misaligned { .. } => EINVAL,
        // A damaged block reads like a drive's Unrecovered Read Error.
        BlockError::Unreadable { .. } => ENODATA,
        other => device_under(other).map_or(EIO, device_errno),
    }
}

/// The device error in `e`'s chain of sources, if there is one.
fn device_under(e: &BlockError) -> Option<&DeviceError> {
    let mut at: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = at {
        if let Some(d) = err.downcast_ref::<DeviceError>() {
            return Some(d);
        }
        at = err.source();
    }
    None
}

/// The errno of an I/O error moving data between the kernel and the
/// server.
pub fn io_errno(e: &std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or(EIO)
}

#[cfg(test)]
mod tests {
    use super::*;
    use zns_device::OpKind;
    use zns_ftl::FtlError;

    fn nvme(code: StatusCode) -> DeviceError {
        DeviceError::Nvme { status: code.status(), op: OpKind::Write, lba: Some(0) }
    }

    #[test]
    fn nvme_statuses_map_as_the_kernels_nvme_driver_maps_them() {
        let cases = [
            (StatusCode::TooManyActiveZones, libc::EOVERFLOW),
            (StatusCode::TooManyOpenZones, libc::ETOOMANYREFS),
            (StatusCode::LbaOutOfRange, libc::ENOSPC),
            (StatusCode::CapacityExceeded, libc::ENOSPC),
            (StatusCode::InvalidOpcode, libc::EOPNOTSUPP),
            (StatusCode::InvalidField, libc::EOPNOTSUPP),
            (StatusCode::UnrecoveredReadError, libc::ENODATA),
            (StatusCode::ZoneIsFull, libc::EIO),
            (StatusCode::ZoneInvalidWrite, libc::EIO),
            (StatusCode::ZoneBoundaryError, libc::EIO),
            (StatusCode::ZoneIsReadOnly, libc::EIO),
            (StatusCode::ZoneIsOffline, libc::EIO),
            (StatusCode::InvalidZoneStateTransition, libc::EIO),
            (StatusCode::WriteFault, libc::EIO),
            (StatusCode::InternalError, libc::EIO),
        ];
        for (code, errno) in cases {
            assert_eq!(device_errno(&nvme(code)), errno, "{code:?}");
        }
    }

    #[test]
    fn other_failures_map_to_errnos() {
        assert_eq!(device_errno(&DeviceError::Unsupported("x".into())), libc::EOPNOTSUPP);
        assert_eq!(device_errno(&DeviceError::InvalidArgument("x".into())), libc::EINVAL);
        assert_eq!(device_errno(&DeviceError::QueueFull), libc::EAGAIN);
        let timeout = DeviceError::Timeout { what: "x", after: std::time::Duration::ZERO };
        assert_eq!(device_errno(&timeout), libc::ETIMEDOUT);
        let io = DeviceError::Io {
            context: "x".into(),
            source: std::io::Error::from_raw_os_error(libc::ENXIO),
        };
        assert_eq!(device_errno(&io), libc::ENXIO);
        let no_os = std::io::Error::other("no errno");
        assert_eq!(io_errno(&no_os), libc::EIO);
        assert_eq!(io_errno(&std::io::Error::from_raw_os_error(libc::EFAULT)), libc::EFAULT);

        assert_eq!(block_errno(&BlockError::NoSpace), libc::ENOSPC);
        assert_eq!(
            block_errno(&BlockError::OutOfRange { lba: 1, blocks: 2, capacity: 2 }),
            libc::ENOSPC
        );
        assert_eq!(block_errno(&BlockError::Misaligned { len: 3, block_size: 4096 }), libc::EINVAL);
        let damaged = FtlError::DamagedData { logical: 1, zone: 2, offset: 3, why: "x" };
        assert_eq!(block_errno(&damaged.into()), libc::ENODATA);
        // The device's status under the FTL's error under the block error.
        let dev = FtlError::Device { context: "x", source: nvme(StatusCode::TooManyOpenZones) };
        assert_eq!(block_errno(&dev.into()), libc::ETOOMANYREFS);
        assert_eq!(block_errno(&FtlError::Failed("x".into()).into()), libc::EIO);
        assert_eq!(block_errno(&BlockError::failed("x")), libc::EIO);
    }
}
