//! # zns-nvmf
//!
//! An NVMe over TCP target: any znskit zoned device (the emulator, a
//! drive through the user-space driver, `ng:` or `zbd:`) served to real
//! NVMe hosts: the Linux kernel's `nvme-tcp` (then nvme-cli, fio, f2fs,
//! btrfs and zonefs on it), SPDK's initiator, or znskit's own.
//!
//! ```no_run
//! use zns_nvmf::{NvmfTarget, Subsystem, TargetConfig};
//! let dev = zns_device::open("emu:zn540").unwrap();
//! let sub = Subsystem::new("nqn.2026-01.io.znskit:zn540", vec![dev]).unwrap();
//! let target = NvmfTarget::bind("127.0.0.1:4420", sub, TargetConfig::default()).unwrap();
//! // nvme connect -t tcp -a 127.0.0.1 -s 4420 -n nqn.2026-01.io.znskit:zn540
//! target.stop();
//! ```
//!
//! What is spoken: NVMe/TCP (ICReq/ICResp, command capsules with
//! in-capsule data, R2T and H2CData, C2HData, header and data digests),
//! Fabrics Connect, Property Get/Set and Disconnect, a discovery
//! controller (`nvme discover`), the admin commands hosts use at
//! initialization (Identify with the ZNS and command-set CNS values, Get
//! Log Page, Get/Set Features, Asynchronous Event Request, Keep Alive),
//! and the I/O commands of the NVM and Zoned Namespace command sets,
//! which reach the device unchanged so their statuses are the device's.
//!
//! PDU framing comes from `zns-nvme-tcp`, which znskit's initiator (the
//! driver's `tcp` transport) uses too; the target needs no driver.
//!
//! | module | concern |
//! |---|---|
//! | `connection` | one queue as a session of the event-driven server: initialization, capsules, R2T, data, responses |
//! | `controller` | controllers, their registers and features |
//! | `events` | Changed Zone Lists and Zone Descriptor Changed events |
//! | `admin` | admin commands and log pages |
//! | `auth` | DH-HMAC-CHAP in-band authentication of each queue |
//! | `io` | I/O commands to [`zns_device::ZoneOp`]s |
//! | `inflight` | reads and writes in flight on the device, answered as they complete |
//! | `block` | I/O commands on block namespaces (the FTL) |
//! | `fdp` | Flexible Data Placement of namespaces whose devices have it: endurance groups, log pages 20h-23h, features 1Dh and 1Eh, I/O Management |
//! | [`subsystem`] | the subsystem, its namespaces and Identify data |
//! | `target` | listening, the worker pool, shutdown |

#![warn(missing_docs)]

mod admin;
mod auth;
mod block;
mod connection;
mod controller;
mod error;
mod events;
mod fdp;
mod inflight;
mod io;
pub mod subsystem;
mod target;

pub use connection::MAX_H2C_DATA;
pub use error::{NvmfError, Result};
pub use subsystem::{Backend, HostSecrets, Namespace, Subsystem};
pub use target::{NvmfTarget, TargetConfig, TargetStats, DEFAULT_STALL_TIMEOUT};
