//! `zns-differential`: differential testing of a zoned device against
//! znskit's emulator.
//!
//! ```text
//! zns-differential [--fdp] [--seed N] [--count N] [--sequence K] [--length MIN..MAX]
//!                  [--verbose] [--max-differences N] URI
//! ```
//!
//! Opens the device `URI` (a real controller through `pcie:` or `ng:`,
//! which return the controller's own statuses) and an emulated device built
//! from the first device's Identify data (zone size and capacity, zone
//! count, open and active limits, block size, MDTS, ZASL, descriptor
//! extensions). Then runs `--count` sequences of random commands on both in
//! lockstep, each starting from reset zones: zone management (open, close,
//! finish, reset, offline; on one zone, on all, on LBAs that are not zone
//! starts), writes at, before and after the write pointer and across zone
//! ends, Write Zeroes, Zone Append, reads, zone reports with every filter,
//! and descriptor extensions. After every command the completions (status,
//! Zone Append LBA, data read, report bytes) and a full zone report (state,
//! write pointer, capacity, attributes, extension) of both must agree, or
//! the difference must be one that docs/differential.md explains.
//!
//! With `--fdp` the device is a namespace with Flexible Data Placement
//! (`ng:/dev/ngXnY`, `pcie:`, `emu:small-fdp`): placed writes, reads,
//! Reclaim Unit Handle Status and Update, the FDP log pages and features,
//! compared with an emulated FDP namespace of the same shape (see the
//! `fdp` module), then a check that placed writes reached their handles.
//!
//! Every difference prints a `DIFF` block with the command to replay it;
//! the tally ends the output. Exit code 1 when anything is unexplained.
//! Every zone of the device is reset, and the FDP mode writes anywhere:
//! use scratch devices only.

mod compare;
mod divergence;
mod fdp;
mod generate;
mod reference;
mod rng;
mod run;

use std::io::Write;
use std::process::ExitCode;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use clap::Parser;

use run::{Config, Side};

/// Runs random command sequences on the device URI and on an emulated
/// device with the same geometry, and compares every completion and zone
/// report. Resets every zone: use scratch devices only.
#[derive(Debug, Parser)]
#[command(name = "zns-differential", version)]
struct Args {
    /// Compare a Flexible Data Placement namespace (placed writes, reclaim
    /// unit handle status and update, FDP log pages and features).
    #[arg(long)]
    fdp: bool,
    /// Seed, decimal or 0x hex (default: from the clock, printed).
    #[arg(long, value_parser = number)]
    seed: Option<u64>,
    /// Sequences to run.
    #[arg(long, default_value = "1000", value_parser = number)]
    count: u64,
    /// Run only sequence K of the seed (with --verbose: to replay one).
    #[arg(long, value_name = "K", value_parser = number)]
    sequence: Option<u64>,
    /// Random commands per sequence.
    #[arg(long, value_name = "MIN..MAX", default_value = "20..50", value_parser = length)]
    length: (u64, u64),
    /// Print every command and both completions.
    #[arg(long)]
    verbose: bool,
    /// Stop after N unexplained differences.
    #[arg(long, value_name = "N", default_value = "20", value_parser = number)]
    max_differences: u64,
    /// The device under test.
    #[arg(value_name = "URI")]
    uri: String,
}

/// A count or seed, decimal or `0x` hex.
fn number(s: &str) -> Result<u64, String> {
    let r = match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse(),
    };
    r.map_err(|_| format!("{s:?} is not a number"))
}

/// `MIN..MAX`, MIN not above MAX.
fn length(v: &str) -> Result<(u64, u64), String> {
    let (lo, hi) = v.split_once("..").ok_or(format!("{v:?}: MIN..MAX"))?;
    let (lo, hi) = (number(lo)?, number(hi)?);
    if lo > hi {
        return Err(format!("{v:?}: MIN exceeds MAX"));
    }
    Ok((lo, hi))
}

impl Args {
    /// The run's configuration, the device URI and whether to compare FDP.
    fn config(self) -> (Config, String, bool) {
        let seed = self.seed.unwrap_or_else(|| {
            let t = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
            rng::mix(t.as_nanos() as u64 ^ std::process::id() as u64)
        });
        let (first, count) = match self.sequence {
            Some(k) => (k, 1),
            None => (0, self.count),
        };
        let cfg = Config {
            seed,
            first,
            count,
            min_len: self.length.0,
            max_len: self.length.1,
            verbose: self.verbose,
            max_differences: self.max_differences,
        };
        (cfg, self.uri, self.fdp)
    }
}

fn main() -> ExitCode {
    let (cfg, uri, fdp) = Args::parse().config();
    let r = match fdp {
        true => fdp::open(&uri).and_then(|mut t| fdp::differential(&cfg, t.as_mut())),
        false => differential(&cfg, &uri),
    };
    match r {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            println!("differential: FAIL {uri}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the comparison; `Ok(false)` when a difference is unexplained.
fn differential(cfg: &Config, uri: &str) -> Result<bool, String> {
    let start = Instant::now();
    let dev = zns_device::open(uri).map_err(|e| e.to_string())?;
    let reference = reference::open(dev.info()).map_err(|e| format!("the reference: {e}"))?;
    let mut peer = Side {
        name: uri.to_string(),
        q: dev.queue(4).map_err(|e| e.to_string())?,
        busy: Default::default(),
    };
    let mut ours = Side {
        name: "emu".into(),
        q: reference.queue(4).map_err(|e| e.to_string())?,
        busy: Default::default(),
    };
    let g = run::geometry(peer.q.as_ref(), ours.q.as_ref())?;
    let i = dev.info();
    let (mdts, zasl) = reference::transfer_log2(i);
    println!(
        "differential: {uri}: {} ({}), {} zones of {} blocks (capacity {}), {}-byte blocks, \
         open/active {:?}/{:?}, extensions {} bytes, MDTS 2^{mdts} pages, ZASL 2^{zasl} pages; \
         commands up to {} blocks (appends {}); seed {:#x}, {} sequences of {}..{} commands",
        i.backend,
        i.transport,
        g.zones,
        g.zone_size,
        i.zone_capacity,
        g.block_size,
        g.max_open,
        g.max_active,
        g.ext,
        g.max_blocks,
        g.max_append_blocks,
        cfg.seed,
        cfg.count,
        cfg.min_len,
        cfg.max_len
    );
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let tally = run::run(&mut peer, &mut ours, &g, cfg, &mut out).map_err(|e| e.to_string())?;
    let _ = write!(out, "{}", run::summary(&tally, &peer, &ours, cfg.seed));
    let _ = writeln!(
        out,
        "differential: {} {uri} in {:.1} s",
        if tally.unexplained == 0 { "PASS" } else { "FAIL" },
        start.elapsed().as_secs_f64()
    );
    Ok(tally.unexplained == 0)
}
