//! `zns ezns bench`: the eZNS experiments, static striping against eZNS on
//! the same device, in device time.
//!
//! | experiment | what |
//! |---|---|
//! | `balloon` | four tenants with 16 active logical zones each write; three fall idle, then come back: the busy tenant's bandwidth and the spares lent to it over time |
//! | `isolation` | a reader tenant's p99 and p99.9 read latency beside none, one and two heavy writer tenants |
//! | `utilization` | device write bandwidth with 1 to 4 tenants writing a few logical zones each |
//! | `kv` | a key-value store per tenant, YCSB-like mixes A, B, C and F with Zipfian keys: throughput and p99.9 |
//!
//! Every run brings up a fresh eZNS instance ([`zns_ezns::Instance`]) of
//! four tenants on the base device, in static or elastic mode, runs its
//! loads on one thread ([`engine`]) and resets every zone of the base
//! device afterwards. Latency is device time from a command's (or an
//! operation's) start to the poll that delivers its completion; bandwidth
//! and throughput are bytes or operations completed over device time. On a
//! virtual-clock emulator the figures do not depend on the host.
//!
//! The outcome is an [`EznsResults`] (`ezns.json`) and SVG plots
//! ([`write_outputs`]).

mod charts;
mod engine;
mod experiments;
pub mod kv;
pub mod results;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use zns_device::{DeviceError, ZonedDevice};
use zns_ezns::EznsError;

use crate::characterize::progress::Observer;

pub use results::EznsResults;

/// The experiments, `(name, title)`, in the order they run.
pub const EXPERIMENTS: [(&str, &str); 4] = [
    ("balloon", "a writer's bandwidth as its neighbours fall idle and come back"),
    ("isolation", "a reader's tail latency beside heavy writers"),
    ("utilization", "device write bandwidth with 1 to 4 tenants writing"),
    ("kv", "a key-value store per tenant: YCSB A, B, C, F"),
];

/// How long the experiments run.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Scale {
    /// Milliseconds of device time per run: checks the machinery (seconds
    /// of wall time in a debug build).
    Smoke,
    /// The figures for the documentation: hundreds of milliseconds of
    /// device time per run (minutes of wall time in a release build).
    #[default]
    Full,
}

impl Scale {
    /// `"smoke"` or `"full"`.
    pub fn name(self) -> &'static str {
        match self {
            Scale::Smoke => "smoke",
            Scale::Full => "full",
        }
    }
}

impl std::str::FromStr for Scale {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "smoke" => Ok(Scale::Smoke),
            "full" => Ok(Scale::Full),
            _ => Err(format!("unknown scale {s:?} (smoke, full)")),
        }
    }
}

/// Options of a run.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// How long.
    pub scale: Scale,
    /// Seed of every random choice.
    pub seed: u64,
    /// Reset every zone of the base device first when some hold data;
    /// without it such a device is refused.
    pub force: bool,
}

/// Why the experiments failed.
#[derive(Debug, thiserror::Error)]
pub enum EznsBenchError {
    /// The base device failed.
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// eZNS refused the configuration or failed.
    #[error(transparent)]
    Ezns(#[from] EznsError),
    /// A command failed.
    #[error("{what}: {source}")]
    Command {
        /// The command.
        what: String,
        /// Its failure.
        source: DeviceError,
    },
    /// The device stopped making progress.
    #[error("no progress: {0}")]
    Stalled(String),
    /// The device or an option does not suit the experiments.
    #[error("{0}")]
    Invalid(String),
    /// Output files could not be written.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A bug in the experiments.
    #[error("internal error: {0}")]
    Internal(String),
}

/// Runs the four experiments on `base`, reporting progress to `obs`.
///
/// The base device must be zoned with every zone Empty (or
/// `opts.force`), and large enough for four tenants (the error says how
/// many zones it needs); it is left with every zone Empty.
pub fn run(
    base: Arc<dyn ZonedDevice>,
    opts: &Options,
    obs: &dyn Observer,
) -> Result<EznsResults, EznsBenchError> {
    experiments::run(base, opts, obs)
}

/// Writes `ezns.json` and the SVG plots into `dir` (created if needed);
/// returns the paths written.
pub fn write_outputs(r: &EznsResults, dir: &Path) -> Result<Vec<PathBuf>, EznsBenchError> {
    let io = |what: String| move |source| EznsBenchError::Io { what, source };
    std::fs::create_dir_all(dir).map_err(io(format!("create {}", dir.display())))?;
    let json = dir.join("ezns.json");
    let text =
        serde_json::to_string_pretty(r).map_err(|e| EznsBenchError::Internal(e.to_string()))?;
    std::fs::write(&json, text + "\n").map_err(io(format!("write {}", json.display())))?;
    let mut paths = vec![json];
    paths.extend(write_plots(r, dir)?);
    Ok(paths)
}

/// Writes only the SVG plots of `r` into `dir` (which must exist);
/// returns their paths.
pub fn write_plots(r: &EznsResults, dir: &Path) -> Result<Vec<PathBuf>, EznsBenchError> {
    let mut paths = Vec::new();
    for (name, svg) in charts::all(r) {
        let path = dir.join(name);
        std::fs::write(&path, svg).map_err(|source| EznsBenchError::Io {
            what: format!("write {}", path.display()),
            source,
        })?;
        paths.push(path);
    }
    Ok(paths)
}

/// Reads an `ezns.json`.
pub fn read_results(path: &Path) -> Result<EznsResults, EznsBenchError> {
    let text = std::fs::read_to_string(path).map_err(|source| EznsBenchError::Io {
        what: format!("read {}", path.display()),
        source,
    })?;
    serde_json::from_str(&text)
        .map_err(|e| EznsBenchError::Invalid(format!("{}: {e}", path.display())))
}
