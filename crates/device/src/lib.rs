//! # zns-device
//!
//! The API every upper znskit layer (FTL, benchmarks, command line) uses to
//! reach a zoned device, whatever is behind it.
//!
//! - [`ZonedDevice`]: one per device, shared by all threads: geometry,
//!   limits and capabilities ([`DeviceInfo`]), buffer allocation
//!   ([`ZonedDevice::alloc`]) and per-thread queues ([`ZonedDevice::queue`]).
//! - [`ZoneQueue`]: one per thread. Asynchronous [`ZoneQueue::submit`] /
//!   [`ZoneQueue::ring`] / [`ZoneQueue::poll`] of any [`ZoneOp`], with the
//!   buffer handed back in each [`Completion`]; blocking helpers for read,
//!   write, append, zone management, reports, copy and flush.
//! - [`IoBuffer`]: owned page-aligned memory, DMA-capable where the backend
//!   needs it.
//! - [`FdpInfo`]: a namespace's Flexible Data Placement, for placed writes
//!   ([`ZoneQueue::write_placed`]) and the reclaim unit handle commands
//!   ([`ZoneQueue::ruh_status`], [`ZoneQueue::ruh_update`]).
//! - [`ZoneChanges`]: the zones a device changed on its own (its Changed
//!   Zone List), for layers that report them upward.
//! - [`DeviceError`]: typed errors; a command failure names the command,
//!   its LBA and the NVMe status by its specification name.
//! - [`open`]: a device from a URI (`emu:tiny`, `emu:file=dev.img`,
//!   `pcie:0000:00:04.0`, `ng:/dev/ng0n1`, `zbd:/dev/nvme0n1`; see [`uri`]),
//!   including schemes layered crates register ([`uri::register_scheme`]).
//!
//! Backends: [`DriverDevice`] (the user-space driver, on the emulator or a
//! PCIe controller), [`PassthroughDevice`] (io_uring NVMe passthrough) and
//! [`ZonedBlockDevice`] (the kernel's zoned block device); see [`backend`].
//!
//! ```
//! use zns_device::{open, Target, ZoneAction};
//! let dev = open("emu:tiny").unwrap();
//! let info = dev.info();
//! let mut q = dev.queue(8).unwrap();
//! let mut buf = dev.alloc(info.block_size as usize).unwrap();
//! buf.fill(0xAB);
//! let lba = q.append(0, &buf).unwrap();
//! assert_eq!(lba, 0);
//! let zone = q.zone(0).unwrap();
//! assert_eq!(zone.write_pointer, Some(1));
//! q.zone_action(ZoneAction::Reset, Target::All).unwrap();
//! ```

#![warn(missing_docs)]

pub mod backend;
pub mod buffer;
pub mod changes;
mod command;
pub mod device;
pub mod discovery;
pub mod driver;
pub mod error;
pub mod fdp;
pub mod info;
pub mod op;
#[cfg(feature = "emulator")]
pub mod trace;
pub mod uri;
pub mod zone;

use std::sync::Arc;

pub use backend::{
    PassthroughDevice, PassthroughQueue, RawNamespace, RawOutcome, TcpDevice, TcpQueue,
    ZonedBlockDevice, ZonedBlockQueue,
};
pub use buffer::IoBuffer;
pub use changes::ZoneChanges;
pub use device::{Data, ZoneQueue, ZonedDevice, DEFAULT_TIMEOUT, REPORT_BATCH};
pub use driver::{DriverDevice, DriverQueue};
pub use error::{DeviceError, OpKind, Result};
pub use fdp::{FdpInfo, RuhKind};
pub use info::{
    Capabilities, ConventionalNamespace, CopyLimits, DeviceInfo, IdentifyData, ZrwaInfo,
};
pub use op::{Completion, CopyRange, Rejected, ZoneOp};
pub use uri::{DeviceUri, PcieUri, DEFAULT_URI};
pub use zns_spec::fdp::{RuhStatus, RuhStatusDescriptor};
pub use zns_spec::{ReportFilter, Status, StatusCode, ZoneAttributes, ZoneState, ZoneType};
pub use zone::{parse_report, Target, Zone, ZoneAction, ZoneReport};

/// Opens the device `uri` names.
///
/// Thread safety: callable from any thread; each call opens a new device
/// (for `emu:` URIs without `file=`, a new empty emulated device).
pub fn open(uri: &str) -> Result<Arc<dyn ZonedDevice>> {
    Ok(match uri.parse::<DeviceUri>()? {
        #[cfg(feature = "emulator")]
        DeviceUri::Emulator(e) => Arc::new(DriverDevice::open_emulator(&e, uri)?),
        DeviceUri::Pcie(p) => Arc::new(DriverDevice::open_pcie(&p.addr, p.binding, uri)?),
        DeviceUri::Passthrough(path) => Arc::new(PassthroughDevice::open(&path, uri)?),
        DeviceUri::ZonedBlock(z) => Arc::new(ZonedBlockDevice::open(&z.path, z.io, uri)?),
        DeviceUri::Tcp(t) => Arc::new(TcpDevice::open(&t, uri)?),
        DeviceUri::Layered { scheme, uri } => match uri::layered_opener(&scheme) {
            Some(open) => open(&uri)?,
            None => {
                return Err(DeviceError::uri(&uri, format!("scheme {scheme:?} is not registered")))
            }
        },
    })
}
