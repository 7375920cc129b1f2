//! # zns-bench
//!
//! Benchmarks that print figures (JSON), never timed tests.
//!
//! - [`overhead`]: host CPU time per I/O spent in the driver, separated from
//!   the emulated controller's, at queue depth 1 and 32.

pub mod clock;
pub mod overhead;
