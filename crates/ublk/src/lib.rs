//! # zns-ublk
//!
//! Any znskit device as a local Linux block device through ublk, the
//! kernel's user-space block driver (`ublk_drv`, driven by io_uring
//! commands): `/dev/ublkbN`, zoned (host-managed) where the device is.
//!
//! - [`UblkDevice::start`] adds and starts a ublk device serving a
//!   [`Target`]: a [`zns_device::ZonedDevice`] (zone size, capacity, open
//!   and active limits and the Zone Append limit from its
//!   [`zns_device::DeviceInfo`]; reads, writes with FUA, Zone Append,
//!   open / close / finish / reset / reset all, zone reports through the
//!   device's own report, flush, Write Zeroes where the device has it;
//!   a conventional namespace is a plain disk: reads, writes, flush,
//!   Write Zeroes, and discard as Write Zeroes where the device has it),
//!   or a [`zns_block::BlockDevice`] such as the FTL (a plain disk: reads,
//!   writes, flush, discard, Write Zeroes as discard).
//!   [`UblkDevice::stop`] (or drop) removes it.
//! - [`Config`]: queue count and depth, largest request.
//! - [`Error`]: typed; a kernel without ublk is
//!   [`Error::KernelLacksUblk`] ("/dev/ublk-control is missing: the
//!   kernel's ublk driver is not loaded; load it as root with `modprobe
//!   ublk_drv` ..., this kernel is ..."), one without zoned ublk
//!   [`Error::KernelLacksFeature`], not a bare errno.
//! - [`request`], [`zone`], [`errno`], [`layout`]: the translations,
//!   pure and unit-tested: ublk requests to device commands, zones to
//!   `struct blk_zone`, failures to errnos, devices to ublk parameters.
//!
//! ```no_run
//! use zns_ublk::{Config, Target, UblkDevice};
//! let dev = zns_device::open("emu:small").unwrap();
//! let ublk = UblkDevice::start(Target::Zoned(dev), &Config::default()).unwrap();
//! println!("{}", ublk.block_path().display()); // /dev/ublkb0
//! ublk.stop().unwrap();
//! ```
//!
//! **Threading.** Each ublk queue has a thread of its own (libublk's
//! `run_target`), which carries out its requests one at a time: a
//! request's device I/O runs to completion on that thread (blocking
//! [`zns_device::ZoneQueue::execute`] on the queue's own
//! [`zns_device::ZoneQueue`], or a call of the shared
//! [`zns_block::BlockDevice`]) before the next request of the queue is
//! looked at. Several queues proceed in parallel. Overlapping a queue's
//! requests (submit / poll on the device queue) is left for later.
//!
//! **Requirements.** Root (CAP_SYS_ADMIN) and the kernel's `ublk_drv`
//! with user copy (`UBLK_F_USER_COPY`, Linux 6.5+) and, for zoned
//! devices, `UBLK_F_ZONED` (Linux 6.6+). The server thread blocks every
//! asynchronous signal: the application's other threads receive them.
//!
//! **Crashes.** Devices are added with user recovery
//! (`UBLK_F_USER_RECOVERY` with reissue): if the serving process is
//! killed, the kernel keeps `/dev/ublkbN` and holds its requests; a new
//! [`UblkDevice::start`] with [`Config::id`] N on the same device takes
//! it over, and the requests the dead server had taken are sent again.
//! It refuses a device of another geometry, one still served, or one
//! added without recovery ([`Error::Takeover`]).

#![warn(missing_docs)]

pub mod errno;
mod error;
mod handler;
pub mod layout;
mod recovery;
pub mod request;
mod server;
pub mod zone;

pub use error::{Error, Result};
pub use handler::Stats;
pub use layout::{Layout, ZonedLayout};
pub use server::{check_control, Config, Target, UblkDevice};

/// The ublk driver's control device.
pub const CONTROL_PATH: &str = "/dev/ublk-control";
