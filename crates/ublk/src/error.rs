//! Typed errors of the ublk server.

use std::path::PathBuf;

use zns_device::DeviceError;

/// Result alias of the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Every failure of serving a device through ublk.
///
/// Thread safety: `Send + Sync`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The kernel has no ublk driver loaded (or none at all).
    #[error(
        "{} is missing: the kernel's ublk driver is not loaded; load it as root with \
         `modprobe ublk_drv` (it needs Linux 6.5 or later, 6.6 or later for zoned devices, \
         built with CONFIG_BLK_DEV_UBLK; this kernel is {running})",
        .control.display()
    )]
    KernelLacksUblk {
        /// The control device looked for (`/dev/ublk-control`).
        control: PathBuf,
        /// The running kernel's release (`uname -r`).
        running: String,
    },
    /// The ublk driver is there but lacks a feature the device needs.
    #[error("the kernel's ublk driver lacks {feature}: {needs} (this kernel is {running})")]
    KernelLacksFeature {
        /// The feature (`UBLK_F_ZONED`, `UBLK_F_USER_COPY`).
        feature: &'static str,
        /// What provides it.
        needs: &'static str,
        /// The running kernel's release (`uname -r`).
        running: String,
    },
    /// The caller may not create ublk devices.
    #[error(
        "{}: permission denied: creating a ublk device needs root (CAP_SYS_ADMIN)",
        .path.display()
    )]
    PermissionDenied {
        /// What could not be opened.
        path: PathBuf,
    },
    /// The device has something Linux's block layer cannot take.
    #[error("{uri} cannot be served through ublk: {reason}")]
    Unsupported {
        /// The device.
        uri: String,
        /// Why.
        reason: String,
    },
    /// An existing ublk device that this server may not take over.
    #[error("cannot take over ublk device {id}: {reason}")]
    Takeover {
        /// The device number.
        id: u32,
        /// Why not.
        reason: String,
    },
    /// A configuration value out of range.
    #[error("invalid ublk configuration: {0}")]
    Config(String),
    /// The device failed while the server was being set up.
    #[error("{what}: {source}")]
    Device {
        /// What was being done.
        what: &'static str,
        /// The device's error.
        #[source]
        source: DeviceError,
    },
    /// The ublk driver refused a command.
    #[error("{what}: {}", std::io::Error::from_raw_os_error(*.errno))]
    Kernel {
        /// The command.
        what: &'static str,
        /// The errno it returned (positive).
        errno: i32,
    },
    /// The ublk library failed for a reason other than an errno.
    #[error("{what}: {message}")]
    Library {
        /// What was being done.
        what: &'static str,
        /// libublk's error.
        message: String,
    },
    /// The server's thread ended without starting the device, or
    /// panicked.
    #[error("the ublk server thread {0}")]
    Server(String),
}

impl Error {
    /// Maps an error of libublk for `what`: errnos become
    /// [`Error::Kernel`], a missing control device
    /// [`Error::KernelLacksUblk`], a refused one
    /// [`Error::PermissionDenied`].
    pub(crate) fn from_libublk(what: &'static str, e: libublk::UblkError) -> Error {
        use libublk::UblkError as U;
        let errno = match &e {
            U::OtherError(r) | U::UringIOError(r) => Some(r.abs()),
            U::IOError(io) => io.raw_os_error(),
            _ => None,
        };
        let control = || PathBuf::from(crate::CONTROL_PATH);
        match errno {
            Some(libc::ENOENT) if what == CREATE => {
                Error::KernelLacksUblk { control: control(), running: running_kernel() }
            }
            Some(libc::EPERM | libc::EACCES) => Error::PermissionDenied { path: control() },
            Some(errno) => Error::Kernel { what, errno },
            None => Error::Library { what, message: e.to_string() },
        }
    }
}

/// The running kernel's release (`uname -r`), for messages that say
/// which kernel lacks what; "unknown" when uname fails.
pub(crate) fn running_kernel() -> String {
    let mut u = std::mem::MaybeUninit::<libc::utsname>::zeroed();
    // SAFETY: uname fills the structure it is given; on failure it is
    // left zeroed, which reads as an empty string below.
    let ok = unsafe { libc::uname(u.as_mut_ptr()) } == 0;
    // SAFETY: zero-initialised, then filled by uname: every field is a
    // NUL-terminated array of C chars.
    let u = unsafe { u.assume_init() };
    // SAFETY: `release` is NUL-terminated (above).
    let release = unsafe { std::ffi::CStr::from_ptr(u.release.as_ptr()) };
    match release.to_str() {
        Ok(r) if ok && !r.is_empty() => r.to_string(),
        _ => "unknown".to_string(),
    }
}

/// What [`Error::from_libublk`] is told when the control device is
/// opened and the device added.
pub(crate) const CREATE: &str = "add the ublk device";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_say_what_to_do() {
        let e = Error::KernelLacksUblk {
            control: "/dev/ublk-control".into(),
            running: "6.1.0-18-amd64".into(),
        };
        assert_eq!(
            e.to_string(),
            "/dev/ublk-control is missing: the kernel's ublk driver is not loaded; load it as \
             root with `modprobe ublk_drv` (it needs Linux 6.5 or later, 6.6 or later for zoned \
             devices, built with CONFIG_BLK_DEV_UBLK; this kernel is 6.1.0-18-amd64)"
        );
        let e = Error::KernelLacksFeature {
            feature: "UBLK_F_ZONED",
            needs: "Linux 6.6 or later",
            running: "6.5.0".into(),
        };
        assert_eq!(
            e.to_string(),
            "the kernel's ublk driver lacks UBLK_F_ZONED: Linux 6.6 or later (this kernel is \
             6.5.0)"
        );
        let e = Error::from_libublk(CREATE, libublk::UblkError::OtherError(-libc::ENOENT));
        assert!(matches!(e, Error::KernelLacksUblk { .. }));
        let e = Error::from_libublk(CREATE, libublk::UblkError::OtherError(-libc::EPERM));
        assert!(e.to_string().contains("needs root"), "{e}");
        let e = Error::from_libublk("start the ublk device", libublk::UblkError::OtherError(-22));
        assert!(matches!(e, Error::Kernel { errno: 22, .. }));
        assert!(e.to_string().starts_with("start the ublk device: Invalid argument"), "{e}");
        let io = std::io::Error::from_raw_os_error(libc::EBUSY);
        let e = Error::from_libublk("x", libublk::UblkError::IOError(io));
        assert!(matches!(e, Error::Kernel { errno: libc::EBUSY, .. }));
        let e = Error::from_libublk("x", libublk::UblkError::InvalidVal);
        assert!(matches!(e, Error::Library { .. }));
    }

    #[test]
    fn the_running_kernel_is_named() {
        let r = running_kernel();
        assert!(r.chars().next().is_some_and(|c| c.is_ascii_digit()), "{r}");
    }
}
