//! # zns-driver
//!
//! A polled user-space NVMe driver with the Zoned Namespace command set.
//!
//! - [`Controller`] brings a controller up (reset, admin queues, command set
//!   selection, Identify, namespaces), runs admin commands and creates I/O
//!   [`QueuePair`]s, one per thread.
//! - A [`QueuePair`] submits without locks or allocation: SQ entries are
//!   written, one doorbell write publishes a batch ([`QueuePair::ring`]),
//!   and [`QueuePair::poll`] delivers every completion with its own status.
//! - Data moves through [`DmaBuffer`]s from a [`DmaPool`]; PRPs and PRP lists
//!   are built per command, translating page by page.
//! - A [`Transport`] reaches the controller: the in-process emulator
//!   (`EmulatedTransport`, feature `emulator`, on by default), a PCIe
//!   device through sysfs and huge pages ([`PcieTransport`]), or through
//!   VFIO ([`VfioTransport`]). Without the `emulator` feature the driver
//!   links no emulator.
//!
//! Threading: a queue pair belongs to one thread (`Send`, not
//! `Sync`) and its submit and poll paths take no lock, allocate nothing and
//! make no system call; scale by creating more queue pairs. The
//! [`Controller`] handle is `Send + Sync` and serializes admin commands.
//!
//! ```
//! use zns_driver::Controller;
//! use zns_emulator::{host::ProcessMemory, Emulator};
//! use zns_spec::command::ReadWrite;
//!
//! let memory = ProcessMemory::new();
//! let emu = Emulator::builder("tiny")?.build(memory.clone())?;
//! let ctrl = Controller::emulated(emu, memory)?;
//! let ns = ctrl.zoned_namespace().expect("a zoned namespace").clone();
//! let mut q = ctrl.create_queue_pair(64)?;
//!
//! // Blocking helper: Zone Append returns the LBA the data landed at.
//! let mut data = ctrl.alloc_buffer(ns.block_size)?;
//! data.fill(0xAB);
//! let lba = q.append(&ns, ns.zone_lba(0).unwrap(), &data)?;
//!
//! // Asynchronous: queue commands, ring the doorbell once, poll.
//! let read = ReadWrite::new(ns.nsid, lba, 1).read()?;
//! q.submit_owned(read, ctrl.alloc_buffer(ns.block_size)?, 7).map_err(|r| r.error)?;
//! q.ring();
//! let mut done = 0;
//! while done == 0 {
//!     done = q.poll(16, |c| {
//!         assert_eq!(c.tag, 7);
//!         assert!(c.is_success());
//!         assert!(c.buffer.unwrap().as_slice().iter().all(|&b| b == 0xAB));
//!     });
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![warn(missing_docs)]

mod admin;
mod bringup;
mod controller;
pub mod dma;
pub mod error;
mod io;
pub mod namespace;
pub mod prp;
pub mod queue;
mod ring;
mod suballoc;
pub mod tcp;
pub mod transport;
pub mod zone;

pub use controller::{Controller, ControllerOptions};
pub use namespace::{ControllerInfo, Namespace, ZonedInfo};
pub use zone::{ReportRequest, ZoneReport};

pub use dma::{DmaBuffer, DmaMemory, DmaPool, DmaSlice, Translation};
pub use error::{Error, NvmeError, Result, TransportError};
pub use queue::{Cid, Completion, QueueConfig, QueuePair, Rejected};
#[cfg(feature = "emulator")]
pub use transport::EmulatedTransport;
pub use transport::{PciAddress, PcieTransport, Transport, VfioTransport};
