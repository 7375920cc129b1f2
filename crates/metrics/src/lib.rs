//! Live metrics of znskit's devices and FTLs.
//!
//! A [`MeteredDevice`] wraps any [`zns_device::ZonedDevice`]: every
//! command its queues carry is counted in its queue's own atomics (by
//! opcode: commands, bytes, a latency histogram on the device's clock;
//! completions by status, with the specification's names), with no lock
//! and no allocation on the I/O path. An [`Exporter`] reads those
//! counters, each zoned namespace's zone map, each device's host and media
//! bytes (write amplification), late completions and a conventional
//! twin's garbage collection, and each FTL's figures, when it is scraped;
//! a [`MetricsServer`] serves it over HTTP (`GET /metrics` in the
//! OpenMetrics text format Prometheus scrapes, `GET /zones` as JSON),
//! each peer bounded in threads, bytes and time ([`HttpLimits`]).
//! [`client::get`] and [`parse::parse`] read an endpoint back, for
//! `zns top`. docs/observability.md lists every metric.

pub mod client;
mod collect;
mod error;
mod exporter;
mod family;
mod http;
mod metered;
pub mod parse;
mod record;
mod zones;

pub use error::MetricsError;
pub use exporter::{Exporter, ExporterBuilder};
pub use http::{HttpLimits, MetricsServer, DRAIN_MAX, LINGER, OPENMETRICS, WORKERS};
pub use metered::MeteredDevice;
pub use record::{DeviceMetrics, Opcode, QueueMetrics, BUCKETS, LATENCY_BOUNDS};
pub use zones::{state_label, ZoneEntry, ZoneMap, STATE_LABELS};
