//! `zns characterize`: measures a ZNS device's performance model and draws
//! it.
//!
//! One call of [`run`] measures, on any [`ZonedDevice`], what a ZNS
//! application needs to know to plan its I/O:
//!
//! | experiment | what |
//! |---|---|
//! | `qd1` | latency and throughput of write, append and read at queue depth 1, 4 KiB to 128 KiB |
//! | `intra_zone` | appends into one zone by queue depth |
//! | `inter_zone` | writes (one per zone in flight) and appends to 1 .. max-open zones |
//! | `open` | explicit against implicit open, and the first I/O after each |
//! | `zone_mgmt` | open, close, finish and reset latency against zone occupancy; reset after finish against without |
//! | `reads` | random and sequential reads by queue depth and by zone count |
//! | `read_under_write` | reads while writes run at a rate from 0 to the write bandwidth |
//! | `reset_interference` | I/O latency and throughput while zones are reset, and reset latency under I/O |
//!
//! Latency is device time ([`clock`]) from just before a command's
//! submission to the poll that delivers its completion, into HdrHistograms
//! ([`stats`]); throughput is completed commands over device time elapsed.
//! The outcome is a [`Results`] (`results.json`, schema in
//! docs/results-json.md), an HTML report with SVG plots ([`report`]), and,
//! for emulated devices whose profile has reference figures, a table of
//! measured against reference ([`reference`]), or against another run
//! ([`RunReference`]), drawn over the plots too. [`compare`] sets two runs
//! side by side. [`versus`] is a suite of its own: the same random-write
//! workloads on a ZNS device (through `zns-ftl`) and on a conventional
//! one, side by side (`--suite compare`). The three pages share their
//! scaffolding (module `html`).

pub mod activity;
pub mod clock;
pub mod compare;
mod engine;
mod experiments;
pub mod fidelity;
pub mod heatmap;
mod html;
pub mod overhead;
mod plan;
pub mod plot;
pub mod progress;
pub mod reference;
pub mod report;
pub mod results;
pub mod stats;
pub mod versus;

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use zns_device::{DeviceError, ZonedDevice};

pub use overhead::{describe_overhead, OVERHEAD_URI};
pub use plan::{Grid, EXPERIMENTS, GRID_MAX_QD};
pub use progress::{NoProgress, Observer, TerminalProgress};
pub use reference::RunReference;
pub use results::{Overhead, Point, Results, SCHEMA_VERSION};

/// Which suite to run: how many points and samples.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Suite {
    /// A handful of commands per point: checks the machinery in tests
    /// (seconds on `emu:tiny`).
    Smoke,
    /// Every experiment with few points and samples.
    #[default]
    Quick,
    /// Every experiment with more points and samples.
    Full,
}

impl Suite {
    /// Its name (`smoke`, `quick`, `full`).
    pub const fn name(self) -> &'static str {
        match self {
            Suite::Smoke => "smoke",
            Suite::Quick => "quick",
            Suite::Full => "full",
        }
    }
}

impl fmt::Display for Suite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Suite {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "smoke" => Ok(Suite::Smoke),
            "quick" => Ok(Suite::Quick),
            "full" => Ok(Suite::Full),
            _ => Err(format!("unknown suite {s:?} (smoke, quick, full)")),
        }
    }
}

/// Options of a run.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Points and samples.
    pub suite: Suite,
    /// Seed of every random choice.
    pub seed: u64,
    /// Run only these experiments (names of [`EXPERIMENTS`]); empty: all.
    pub only: Vec<String>,
    /// Reset every zone first when some are not Empty (their data is
    /// lost); without it such a device is refused.
    pub force: bool,
    /// Points set instead of the suite's own.
    pub grid: Option<Grid>,
    /// Another run to measure against instead of the profile's built-in
    /// reference figures; its block size must be the device's.
    pub reference: Option<RunReference>,
    /// The device's time dilation factor: every device time measured is
    /// divided by it, so the figures are the modelled drive's. `None`: the
    /// emulator's own (1 for devices that are not emulated in process);
    /// give it for a dilated emulator reached through a target
    /// (`tcp:` to `zns serve --device emu:...,dilation=F`).
    pub dilation: Option<f64>,
    /// The emulated controller whose late completions the run counts
    /// (see [`zns_emulator::clock::Lateness`]) when it is not the device's
    /// own: the one behind a target served from this process.
    pub late_source: Option<std::sync::Arc<zns_emulator::Controller>>,
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum CharacterizeError {
    /// The device refused or failed a command.
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// A command the suite needed failed.
    #[error("{what}: {source}")]
    Command {
        /// The command.
        what: String,
        /// Its failure.
        source: DeviceError,
    },
    /// The device or its queue stopped making progress.
    #[error("no progress: {0}")]
    Stalled(String),
    /// Zones hold data; the suite writes and resets zones.
    #[error(
        "{0} zones are not empty; characterize writes and resets zones: \
         reset them first or pass --force to reset every zone"
    )]
    NotEmpty(u64),
    /// The suite ran out of usable zones.
    #[error("no empty zone left for the suite")]
    NoZones,
    /// A bad option.
    #[error("{0}")]
    Invalid(String),
    /// A reference run that cannot serve as one.
    #[error("reference {file}: {reason}")]
    Reference {
        /// The reference file's name.
        file: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Files could not be written or read.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The host FTL of the comparison failed.
    #[error("host FTL: {0}")]
    Ftl(#[from] zns_ftl::FtlError),
    /// A dilation factor that is not one.
    #[error("dilation: {0}")]
    Dilation(String),
    /// A bug in the suite.
    #[error("internal error: {0}")]
    Internal(String),
}

/// Runs the suite on `dev`, reporting progress to `obs`.
///
/// The device must have its zones Empty (or `opts.force`): every zone the
/// suite writes is reset after the experiment that wrote it, and a final
/// sweep resets anything left, so the device ends all-empty where the
/// device allows.
pub fn run(
    dev: &dyn ZonedDevice,
    opts: &Options,
    obs: &dyn Observer,
) -> Result<Results, CharacterizeError> {
    experiments::run(dev, opts, obs)
}

/// Writes `results.json` and `report.html` into `dir` (created if needed);
/// returns their paths.
pub fn write_outputs(
    results: &Results,
    dir: &Path,
) -> Result<(PathBuf, PathBuf), CharacterizeError> {
    let io = |what: String| move |source| CharacterizeError::Io { what, source };
    std::fs::create_dir_all(dir).map_err(io(format!("create {}", dir.display())))?;
    let json = dir.join("results.json");
    let text = serde_json::to_string_pretty(results)
        .map_err(|e| CharacterizeError::Internal(e.to_string()))?;
    std::fs::write(&json, text + "\n").map_err(io(format!("write {}", json.display())))?;
    let html = dir.join("report.html");
    std::fs::write(&html, report::html(results))
        .map_err(io(format!("write {}", html.display())))?;
    Ok((json, html))
}

/// Reads a `results.json`.
pub fn read_results(path: &Path) -> Result<Results, CharacterizeError> {
    let text = std::fs::read_to_string(path).map_err(|source| CharacterizeError::Io {
        what: format!("read {}", path.display()),
        source,
    })?;
    Results::from_json(&text)
        .map_err(|e| CharacterizeError::Invalid(format!("{}: {e}", path.display())))
}

/// "4KiB", "128KiB", "1MiB", "512B".
pub fn size_label(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{}MiB", bytes >> 20)
    } else if bytes >= 1024 && bytes.is_multiple_of(1024) {
        format!("{}KiB", bytes >> 10)
    } else {
        format!("{bytes}B")
    }
}
