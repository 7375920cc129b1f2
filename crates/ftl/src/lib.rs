//! # zns-ftl
//!
//! A host-side flash translation layer: it turns the append-only zones of
//! a zoned (ZNS) device into an ordinary random-write [`BlockDevice`] that
//! survives power cuts.
//!
//! ```
//! use zns_ftl::{BlockDevice, Ftl, FtlConfig};
//! let dev = zns_device::open("emu:tiny").unwrap();
//! let ftl = Ftl::format(dev, FtlConfig::default()).unwrap();
//! let bs = ftl.block_size() as usize;
//! ftl.write(7, &vec![0xA5; 2 * bs]).unwrap();
//! ftl.flush().unwrap();
//! let mut back = vec![0; 2 * bs];
//! ftl.read(7, &mut back).unwrap();
//! assert!(back.iter().all(|&b| b == 0xA5));
//! ```
//!
//! | module | concern |
//! |---|---|
//! | `block` | the FTL as a [`BlockDevice`] (the trait is `zns-block`'s, re-exported with [`MemoryBlockDevice`] and [`BlockError`]) |
//! | [`analytic`] | greedy's analytic write amplification and the two-pool oracle |
//! | [`Ftl`] | reads, writes, discards, flushes; format and recovery |
//! | `check` | [`Ftl::check`]: the FTL's invariants against themselves and the device |
//! | `map` | packed L2P and P2L maps, per-zone valid counts |
//! | `zones` | free / open / full / victim pools, write heads within the open-zone limits |
//! | `gc` | background garbage collection, victim policies, Copy-based relocation |
//! | `journal`, `meta`, `logread`, `recovery` | the checksummed metadata log, checkpoints, crash recovery and repair |
//! | `testkit` | (feature `testkit`, for tests) a device wrapper that stops all I/O at a chosen command, for crash tests |
//!
//! Design notes, measurements and the on-device format are in
//! `docs/ftl.md`.

#![warn(missing_docs)]

pub mod analytic;
mod block;
mod check;
mod config;
mod error;
mod ftl;
mod gc;
mod journal;
mod layout;
mod logread;
mod map;
mod meta;
mod recovery;
mod stats;
mod tag;
#[cfg(feature = "testkit")]
pub mod testkit;
mod zones;

pub use check::{CheckProblem, CheckReport, MAX_PROBLEMS};
pub use config::{FtlConfig, StreamLayout, VictimPolicy, WriteMode, ZrwaUse};
pub use error::{FtlError, Result};
pub use ftl::Ftl;
pub use recovery::{Damage, RepairReport};
pub use stats::{FtlStats, PoolCounts};
pub use zns_block::{BlockDevice, BlockError, MemoryBlockDevice};
pub use zns_ftl_core::UnknownPolicy;
