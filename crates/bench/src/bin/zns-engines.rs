//! `zns-engines`: queue-depth-1 latency of 4 KiB random reads, sequential
//! writes and Zone Append through a znskit backend, and the same figures
//! from fio's latency logs, in one format: one `ENGINE-RESULT {json}`
//! line per engine and operation.
//!
//! ```text
//! zns-engines measure [--ops N] [--warmup N] [--engine NAME] URI
//! zns-engines fio --engine NAME --op OP [--warmup N] LATENCY_LOG
//! zns-engines reset URI
//! ```
//!
//! `measure` resets every zone of `URI`, then times, one command at a
//! time: `write` (sequential writes from LBA 0), `randread` (reads at
//! random LBAs of what was written) and `append` (appends to the zones
//! after the written ones). `fio` reads a latency log fio wrote with
//! `--write_lat_log` and `--log_avg_msec=0` (one line per I/O: completion
//! time in ms, latency in ns, ...). The first `--warmup` operations of each
//! kind are left out. Each result has the mean, median, p95, p99, p99.9 and
//! maximum latency in microseconds, the operations per second over the
//! measured operations' wall-clock time, and the latency CCDF at
//! logarithmically spaced probabilities down to 1/N.

use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, ValueEnum};
use hdrhistogram::Histogram;
use serde_json::json;

use zns_device::{Data, Target, ZoneAction, ZoneOp, ZoneQueue};

/// Latencies of one engine and operation.
struct Measured {
    engine: String,
    op: &'static str,
    /// Nanoseconds, one per operation.
    latencies: Vec<u64>,
    /// Wall-clock nanoseconds of the measured operations.
    elapsed_ns: u64,
}

/// The latencies in an HDR histogram (three significant digits, as
/// every latency figure of znskit).
fn histogram(latencies: &[u64]) -> Histogram<u64> {
    let mut h = Histogram::<u64>::new(3).expect("three significant digits is valid");
    for &ns in latencies {
        h.record(ns).expect("the histogram resizes itself");
    }
    h
}

/// The result line: statistics in microseconds, and the CCDF as
/// `[latency_us, P(latency > that)]` pairs.
fn result_line(m: &Measured) -> String {
    let h = histogram(&m.latencies);
    let n = h.len();
    let us = |ns: u64| ns as f64 / 1000.0;
    let iops = if m.elapsed_ns == 0 { 0.0 } else { n as f64 * 1e9 / m.elapsed_ns as f64 };
    // CCDF at P = 10^(-k/10), k = 0, 1, ... while P >= 1/n, then the maximum.
    let mut ccdf = Vec::new();
    for k in 0.. {
        let p = 10f64.powf(-(k as f64) / 10.0);
        if n == 0 || p * (n as f64) < 1.0 {
            break;
        }
        ccdf.push(json!([round3(us(h.value_at_quantile(1.0 - p))), round6(p)]));
    }
    if n > 0 {
        ccdf.push(json!([round3(us(h.max())), round6(1.0 / n as f64)]));
    }
    let q = |x: f64| if n == 0 { 0.0 } else { round3(us(h.value_at_quantile(x))) };
    let line = json!({
        "engine": m.engine,
        "op": m.op,
        "ops": n,
        "mean_us": round3(h.mean() / 1000.0),
        "p50_us": q(0.50),
        "p95_us": q(0.95),
        "p99_us": q(0.99),
        "p99_9_us": q(0.999),
        "max_us": if n == 0 { 0.0 } else { round3(us(h.max())) },
        "iops": (iops * 10.0).round() / 10.0,
        "ccdf": ccdf,
    });
    format!("ENGINE-RESULT {line}")
}

fn round3(x: f64) -> f64 {
    (x * 1e3).round() / 1e3
}

fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

/// A small generator for the read addresses (SplitMix64).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (((z ^ (z >> 31)) as u128 * n as u128) >> 64) as u64
    }
}

/// Runs `count` operations, timing each one after the first `warmup`.
fn timed(
    count: u64,
    warmup: u64,
    mut op: impl FnMut(u64) -> zns_device::Result<()>,
) -> Result<(Vec<u64>, u64), String> {
    let mut lat = Vec::with_capacity(count as usize);
    let mut phase = Instant::now();
    for i in 0..warmup + count {
        if i == warmup {
            phase = Instant::now();
        }
        let t = Instant::now();
        op(i).map_err(|e| e.to_string())?;
        if i >= warmup {
            lat.push(t.elapsed().as_nanos() as u64);
        }
    }
    Ok((lat, phase.elapsed().as_nanos() as u64))
}

fn measure(uri: &str, engine: &str, ops: u64, warmup: u64) -> Result<Vec<Measured>, String> {
    let dev = zns_device::open(uri).map_err(|e| e.to_string())?;
    let info = dev.info().clone();
    let mut q: Box<dyn ZoneQueue> = dev.queue(1).map_err(|e| e.to_string())?;
    let bs = info.block_size as u64;
    if bs > 4096 || 4096 % bs != 0 {
        return Err(format!("{bs}-byte blocks: 4 KiB operations need blocks of at most 4 KiB"));
    }
    let per = 4096 / bs;
    let total = (ops + warmup) * per;
    // Writes fill zones from LBA 0; appends go to the zones after them.
    let cap = info.zone_capacity;
    let zones_written = total.div_ceil(cap);
    if (zones_written + total.div_ceil(cap)) > info.zone_count {
        return Err(format!("{} operations do not fit in {} zones", ops + warmup, info.zone_count));
    }
    q.zone_action(ZoneAction::Reset, Target::All).map_err(|e| e.to_string())?;
    let mut buf = dev.alloc(4096).map_err(|e| e.to_string())?;
    buf.fill(0xA5);
    // The n-th write's LBA: zones filled up to their capacity, in order.
    let lba_of = |n: u64| {
        let b = n * per;
        (b / cap) * info.zone_size + b % cap
    };
    let mut out = Vec::new();
    let (lat, ns) = timed(ops, warmup, |i| {
        q.execute(
            &ZoneOp::Write { lba: lba_of(i), fua: false, placement: None },
            Data::ToDevice(&buf),
        )
        .map(drop)
    })?;
    out.push(Measured { engine: engine.into(), op: "write", latencies: lat, elapsed_ns: ns });
    let mut rng = Rng(0x5EED);
    let written = ops + warmup;
    let mut rbuf = dev.alloc(4096).map_err(|e| e.to_string())?;
    let (lat, ns) = timed(ops, warmup, |_| {
        let lba = lba_of(rng.below(written));
        q.execute(&ZoneOp::Read { lba }, Data::FromDevice(&mut rbuf)).map(drop)
    })?;
    out.push(Measured { engine: engine.into(), op: "randread", latencies: lat, elapsed_ns: ns });
    let first = zones_written;
    let (lat, ns) = timed(ops, warmup, |i| {
        let zslba = (first + i * per / cap) * info.zone_size;
        q.execute(&ZoneOp::Append { zslba, fua: false }, Data::ToDevice(&buf)).map(drop)
    })?;
    out.push(Measured { engine: engine.into(), op: "append", latencies: lat, elapsed_ns: ns });
    q.zone_action(ZoneAction::Reset, Target::All).map_err(|e| e.to_string())?;
    Ok(out)
}

/// Reads a fio latency log: `time_ms, latency_ns, direction, size, offset[, ...]`.
fn fio_log(path: &str, engine: &str, op: &'static str, warmup: u64) -> Result<Measured, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let mut entries = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let mut f = line.split(',').map(str::trim);
        let (Some(t), Some(v)) = (f.next(), f.next()) else {
            return Err(format!("{path}:{}: not a latency log line: {line:?}", i + 1));
        };
        let bad = || format!("{path}:{}: not a latency log line: {line:?}", i + 1);
        entries.push((t.parse::<u64>().map_err(|_| bad())?, v.parse::<u64>().map_err(|_| bad())?));
    }
    let skip = (warmup as usize).min(entries.len());
    let measured = &entries[skip..];
    // Completion times are in whole milliseconds: the measured operations
    // ran from the completion of the last warm-up one (or the first
    // measured one's start) to the last completion.
    let start_ms = match skip {
        0 => measured.first().map_or(0, |e| e.0.saturating_sub(e.1 / 1_000_000)),
        s => entries[s - 1].0,
    };
    let end_ms = measured.last().map_or(start_ms, |e| e.0);
    Ok(Measured {
        engine: engine.into(),
        op,
        latencies: measured.iter().map(|e| e.1).collect(),
        elapsed_ns: end_ms.saturating_sub(start_ms).max(1) * 1_000_000,
    })
}

/// The operation a fio latency log holds.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum Op {
    Write,
    Randread,
    Append,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Write => "write",
            Op::Randread => "randread",
            Op::Append => "append",
        }
    }
}

/// Queue-depth-1 latency of a znskit backend, or of fio from its latency
/// log, as `ENGINE-RESULT {json}` lines.
#[derive(Debug, Parser)]
#[command(name = "zns-engines")]
enum Cli {
    /// Reset every zone of URI, then time 4 KiB sequential writes, random
    /// reads of them and appends, one command at a time.
    Measure {
        /// Measured operations of each kind.
        #[arg(long, default_value_t = 5000)]
        ops: u64,
        /// Operations of each kind run first and left out.
        #[arg(long, default_value_t = 50)]
        warmup: u64,
        /// The engine's name in the results (default: the URI's scheme).
        #[arg(long)]
        engine: Option<String>,
        /// The device.
        uri: String,
    },
    /// Read a fio latency log (`--write_lat_log`, `--log_avg_msec=0`).
    Fio {
        /// The engine's name in the results.
        #[arg(long)]
        engine: String,
        /// The operation the log holds.
        #[arg(long, value_enum)]
        op: Op,
        /// Entries at the start left out.
        #[arg(long, default_value_t = 50)]
        warmup: u64,
        /// The log.
        latency_log: String,
    },
    /// Reset every zone of URI.
    Reset {
        /// The device.
        uri: String,
    },
}

fn run(cli: Cli) -> Result<(), String> {
    match cli {
        Cli::Measure { ops, warmup, engine, uri } => {
            let name = engine.unwrap_or_else(|| uri.split(':').next().unwrap_or("").into());
            for m in measure(&uri, &name, ops, warmup)? {
                println!("{}", result_line(&m));
            }
        }
        Cli::Fio { engine, op, warmup, latency_log } => {
            println!("{}", result_line(&fio_log(&latency_log, &engine, op.name(), warmup)?));
        }
        Cli::Reset { uri } => {
            let dev = zns_device::open(&uri).map_err(|e| e.to_string())?;
            let mut q = dev.queue(1).map_err(|e| e.to_string())?;
            q.zone_action(ZoneAction::Reset, Target::All).map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("zns-engines: {e}");
            println!("ENGINE-FAIL {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_and_ccdf_of_known_latencies() {
        let m = Measured {
            engine: "x".into(),
            op: "write",
            latencies: (1..=1000).map(|i| i * 1000).collect(),
            elapsed_ns: 1_000_000_000,
        };
        let line = result_line(&m);
        let v: serde_json::Value =
            serde_json::from_str(line.strip_prefix("ENGINE-RESULT ").unwrap()).unwrap();
        assert_eq!(
            (v["engine"].as_str(), v["op"].as_str(), v["ops"].as_u64()),
            (Some("x"), Some("write"), Some(1000))
        );
        // Three significant digits: within 0.1 % of the exact figures.
        let near = |key: &str, want: f64| {
            let got = v[key].as_f64().unwrap();
            assert!((got - want).abs() <= want * 1e-3, "{key}: {got} against {want}");
        };
        near("p50_us", 500.0);
        near("p99_9_us", 999.0);
        near("max_us", 1000.0);
        near("mean_us", 500.5);
        assert_eq!(v["iops"].as_f64(), Some(1000.0));
        let ccdf = v["ccdf"].as_array().unwrap();
        assert_eq!(ccdf[0][1].as_f64(), Some(1.0));
        assert_eq!(ccdf.last().unwrap()[1].as_f64(), Some(0.001));
        assert!((ccdf.last().unwrap()[0].as_f64().unwrap() - 1000.0).abs() <= 1.0);
    }

    #[test]
    fn fio_logs_parse_and_skip_the_warm_up() {
        let dir = std::env::temp_dir().join(format!("zns-engines-{}", std::process::id()));
        std::fs::write(
            &dir,
            "10, 2000, 1, 4096, 0, 0\n11, 3000, 1, 4096, 4096, 0\n15, 5000, 1, 4096, 8192, 0\n",
        )
        .unwrap();
        let m = fio_log(dir.to_str().unwrap(), "fio-psync", "write", 1).unwrap();
        std::fs::remove_file(&dir).unwrap();
        assert_eq!(m.latencies, [3000, 5000]);
        assert_eq!(m.elapsed_ns, 5_000_000);
    }

    #[test]
    fn the_emulator_is_measured_through_the_driver() {
        let r = measure("emu:tiny", "emu", 20, 2).unwrap();
        let names: Vec<&str> = r.iter().map(|m| m.op).collect();
        assert_eq!(names, ["write", "randread", "append"]);
        assert!(r.iter().all(|m| m.latencies.len() == 20));
    }
}
