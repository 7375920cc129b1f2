//! # zns-ezns
//!
//! Elastic logical zones over a ZNS device (after eZNS, OSDI 2023): one
//! base [`ZonedDevice`](zns_device::ZonedDevice) carved into tenant
//! namespaces, each itself a `ZonedDevice` whose zones are *logical zones*
//! striped over physical zones, so the FTL, `zns characterize`, the command
//! line and `zns serve` run on a tenant unchanged.
//!
//! - **Logical zones** ([`layout`]): a logical zone of `zone_scale`
//!   physical zones' capacity is a sequence of stripe groups; a group
//!   stripes its part of the zone over its columns (physical zones) in
//!   stripe units. Zone Append, reports, reset, finish, open, close and
//!   Select All keep their ZNS meaning on logical zones.
//! - **Zone ballooning** ([`arbiter`]): every tenant owns essential active
//!   zones (never lent) and spares. A new group's width is the essential
//!   width plus the spares spread over the zones the tenant writes at once
//!   (local overdrive); the spares of a tenant doing no I/O (neither
//!   writes nor reads) go to busy tenants (global overdrive) and come
//!   back the moment it writes again (a returned column is parked in the
//!   borrower's logical zone, not finished, so no padding stalls the
//!   device).
//! - **Capacity**: every logical zone that is not
//!   full keeps a claim on the free physical zones it needs to fill at
//!   width one; groups wider than that take columns only from the surplus,
//!   so wide stripes never spend a tenant's advertised capacity.
//! - **A die-aware serial allocator** ([`alloc`]): groups are allocated one
//!   at a time, each column on the least loaded die, another tenant's
//!   active zone there costing more if it writes and more still if it
//!   reads (an idle tenant's dies count as free); borrowed spares go only
//!   to dies no busy tenant uses.
//! - **A zoned I/O scheduler** ([`sched`]): per-zone read congestion
//!   control (delay-based) and per-device write admission control (the
//!   average write latency against a multiple of the measured uncongested
//!   latency).
//! - **Durability** ([`journal`]): the groups of every logical zone are
//!   journaled on the device; after a restart or a power cut every logical
//!   zone comes back with a write pointer at the end of what all its
//!   columns hold.
//! - **Traces**: on an emulated base device with a trace sink (an
//!   `emu:...,trace=FILE` base URI), every stripe group, loan, return and
//!   tenant marked inactive or active again goes into the device's trace
//!   beside its commands and flash operations (docs/observability.md).
//! - **URIs**: [`register`] adds `ezns:config=PATH,tenant=NAME` to
//!   `zns_device::open`; the configuration file ([`config`]) names the base
//!   device and the tenants.
//!
//! ```no_run
//! use zns_device::{Target, ZoneAction, ZonedDevice};
//! zns_ezns::register();
//! let dev = zns_device::open("ezns:config=ezns.toml,tenant=a").unwrap();
//! let mut q = dev.queue(8).unwrap();
//! let buf = dev.alloc(dev.info().block_size as usize).unwrap();
//! let lba = q.append(0, &buf).unwrap();
//! q.zone_action(ZoneAction::Reset, Target::All).unwrap();
//! ```

#![warn(missing_docs)]

pub mod alloc;
pub mod arbiter;
mod capacity;

pub mod config;
mod control;
mod device;
pub mod error;
pub mod journal;
pub mod layout;
mod open;
mod ops;
mod pump;
mod queue;
mod runtime;
pub mod sched;
pub mod status;
mod trace;

pub use config::{Config, EznsUri, Mode, SchedulerConfig, TenantConfig};
pub use device::{open, register, Instance, TenantDevice};
pub use error::EznsError;
pub use open::RecoveryReport;
pub use queue::TenantQueue;
pub use status::Status;
