//! `zns-differential`: differential testing of a zoned device against
//! znskit's emulator.
//!
//! ```text
//! zns-differential [--seed N] [--count N] [--sequence K] [--length MIN..MAX]
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
//! Every difference prints a `DIFF` block with the command to replay it;
//! the tally ends the output. Exit code 1 when anything is unexplained.
//! Every zone of the device is reset: use scratch devices only.

mod compare;
mod divergence;
mod generate;
mod reference;
mod rng;
mod run;

use std::io::Write;
use std::process::ExitCode;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use run::{Config, Side};

const USAGE: &str = "usage: zns-differential [--seed N] [--count N] [--sequence K] \
[--length MIN..MAX] [--verbose] [--max-differences N] URI
Runs random command sequences on the device URI and on an emulated device with the
same geometry, and compares every completion and zone report. Resets every zone:
use scratch devices only.

  --seed N             seed (decimal or 0x hex; default: from the clock, printed)
  --count N            sequences (default 1000)
  --sequence K         run only sequence K of the seed (with --verbose: to replay one)
  --length MIN..MAX    random commands per sequence (default 20..50)
  --verbose            print every command and both completions
  --max-differences N  stop after N unexplained differences (default 20)";

fn number(s: &str) -> Result<u64, String> {
    let r = match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse(),
    };
    r.map_err(|_| format!("{s:?} is not a number"))
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Option<(Config, String)>, String> {
    let mut cfg = Config {
        seed: 0,
        first: 0,
        count: 1000,
        min_len: 20,
        max_len: 50,
        verbose: false,
        max_differences: 20,
    };
    let mut seed = None;
    let mut sequence = None;
    let mut uri = None;
    while let Some(a) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match a.as_str() {
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(None);
            }
            "--seed" => seed = Some(number(&value("--seed")?)?),
            "--count" => cfg.count = number(&value("--count")?)?,
            "--sequence" => sequence = Some(number(&value("--sequence")?)?),
            "--max-differences" => cfg.max_differences = number(&value("--max-differences")?)?,
            "--length" => {
                let v = value("--length")?;
                let (lo, hi) = v.split_once("..").ok_or(format!("--length {v:?}: MIN..MAX"))?;
                cfg.min_len = number(lo)?;
                cfg.max_len = number(hi)?;
                if cfg.min_len > cfg.max_len {
                    return Err(format!("--length {v:?}: MIN exceeds MAX"));
                }
            }
            "--verbose" => cfg.verbose = true,
            s if s.starts_with('-') => return Err(format!("unknown option {s}\n{USAGE}")),
            _ if uri.is_some() => return Err(format!("one device URI only\n{USAGE}")),
            _ => uri = Some(a),
        }
    }
    let uri = uri.ok_or(USAGE)?;
    cfg.seed = seed.unwrap_or_else(|| {
        let t = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        rng::mix(t.as_nanos() as u64 ^ std::process::id() as u64)
    });
    if let Some(k) = sequence {
        cfg.first = k;
        cfg.count = 1;
    }
    Ok(Some((cfg, uri)))
}

fn main() -> ExitCode {
    let (cfg, uri) = match parse(std::env::args().skip(1)) {
        Ok(Some(x)) => x,
        Ok(None) => return ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("zns-differential: {e}");
            return ExitCode::from(2);
        }
    };
    match differential(&cfg, &uri) {
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
