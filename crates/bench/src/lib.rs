//! # zns-bench
//!
//! Benchmarks that print figures (JSON), never timed tests.
//!
//! - [`overhead`]: host CPU time per I/O spent in the driver, separated from
//!   the emulated controller's, at queue depth 1 and 32.
//! - [`characterize`]: a ZNS device's performance model (latency and
//!   throughput of every command kind, scaling, zone management by
//!   occupancy, interference), as `results.json` and an HTML report.
//! - [`fit`]: an emulator profile fitted to a characterization's figures
//!   (`zns emu fit`), with its residuals and cross-validation.
//! - [`probe`]: a CPU-bound probe timing fixed work, for how slow a host
//!   (a guest under emulation) is against a reference: the time dilation
//!   factor to run the emulator with.
//! - [`ftl_bench`]: the host FTL's benchmark behind `zns ftl bench`:
//!   workload generators (uniform, Zipfian, hot/cold) and the runner
//!   measuring IOPS and write amplification from fill to steady state.
//! - [`ezns`]: the eZNS experiments, static striping against elastic
//!   logical zones on one device, as `ezns.json` and SVG plots.
//! - [`timeline`]: a JSON trace file (`emu:...,trace=FILE`) drawn as an
//!   SVG timeline, behind `zns trace view`.

pub mod characterize;
pub mod clock;
pub mod ezns;
pub mod fit;
pub mod ftl_bench;
pub mod overhead;
pub mod probe;
pub mod timeline;
