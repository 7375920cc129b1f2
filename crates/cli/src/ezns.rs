//! `zns ezns`: elastic logical zones (`zns-ezns`): the status of an
//! instance, and the experiments that set eZNS against static striping.
//!
//! A tenant itself is a device URI, `ezns:config=PATH,tenant=NAME`, that
//! every other command takes (`main` registers the scheme).

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Subcommand, ValueEnum};
use zns_bench::characterize::TerminalProgress;
use zns_bench::ezns::{self as bench, EznsResults, Scale};
use zns_ezns::Instance;

/// The base device of `zns ezns bench` when `--device` is not given: the
/// small-zone profile without data, its zone count scaled down.
pub const BENCH_DEVICE: &str = "emu:small-zone,media=null,zones=2048";

/// How long the experiments run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ScaleArg {
    /// Milliseconds of device time per run: checks that everything runs.
    Smoke,
    /// Hundreds of milliseconds per run: the documented figures.
    Full,
}

#[derive(Debug, Subcommand)]
pub enum EznsCommand {
    /// Bring up the instance of a configuration (formatting an empty base
    /// device, recovering one that holds its namespaces) and show its
    /// tenants, budgets, lent spares, stripes and scheduler windows.
    Status {
        /// The configuration file (TOML: the base device and the tenants).
        #[arg(long, short = 'c', value_name = "PATH")]
        config: PathBuf,
        /// One JSON object instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Run the eZNS experiments on the base device (`--device`, default
    /// emu:small-zone,media=null,zones=2048), static striping against
    /// eZNS: zone ballooning over time, a reader's tail latency beside
    /// writers, device bandwidth by tenants writing, and a YCSB-like
    /// key-value workload; writes ezns.json and SVG plots.
    Bench {
        /// Directory for ezns.json and the plots.
        #[arg(long, default_value = "ezns-out", value_name = "DIR")]
        out: PathBuf,
        /// How long the runs are.
        #[arg(long, value_enum, default_value = "full")]
        scale: ScaleArg,
        /// Seed of every random choice.
        #[arg(long, default_value_t = 1, value_name = "N")]
        seed: u64,
        /// Reset every zone of the device first if some hold data (the
        /// data is lost).
        #[arg(long)]
        force: bool,
        /// Draw the plots of an ezns.json again into --out instead of
        /// measuring (the figures are the file's; ezns.json is not
        /// rewritten).
        #[arg(long, value_name = "FILE", conflicts_with_all = ["scale", "seed", "force"])]
        replot: Option<PathBuf>,
    },
}

pub fn run(cmd: EznsCommand, device: &str, device_given: bool, out: &mut dyn Write) -> Result<()> {
    match cmd {
        EznsCommand::Bench { out: dir, scale, seed, force, replot } => {
            if let Some(file) = replot {
                let r = bench::read_results(&file)?;
                std::fs::create_dir_all(&dir)
                    .with_context(|| format!("create {}", dir.display()))?;
                for p in bench::write_plots(&r, &dir)? {
                    writeln!(out, "wrote {}", p.display())?;
                }
                return Ok(());
            }
            let uri = if device_given { device } else { BENCH_DEVICE };
            let scale = match scale {
                ScaleArg::Smoke => Scale::Smoke,
                ScaleArg::Full => Scale::Full,
            };
            bench_run(uri, &dir, &bench::Options { scale, seed, force }, out)
        }
        EznsCommand::Status { config, json } => {
            let inst = Instance::open_config(&config)
                .with_context(|| format!("bring up {}", config.display()))?;
            let status = inst.status();
            if json {
                let v = serde_json::json!({ "recovery": inst.recovery(), "status": status });
                writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
            } else {
                let r = inst.recovery();
                if r.formatted {
                    writeln!(
                        out,
                        "formatted: the base device was empty; a fresh journal was written"
                    )?;
                } else {
                    writeln!(
                        out,
                        "recovered: {} zones closed ({} restriped after a torn stripe), {} full, {} emptied; {} physical zones finished, {} unreferenced reset",
                        r.closed, r.restriped, r.full, r.emptied, r.finished, r.orphans
                    )?;
                }
                write!(out, "{status}")?;
            }
            Ok(())
        }
    }
}

fn bench_run(
    uri: &str,
    dir: &std::path::Path,
    opts: &bench::Options,
    out: &mut dyn Write,
) -> Result<()> {
    let base = zns_device::open(uri)?;
    let progress = TerminalProgress::stderr();
    let r = bench::run(base, opts, &progress).context("eZNS experiments")?;
    let paths = bench::write_outputs(&r, dir)?;
    summary(&r, out)?;
    for p in paths {
        writeln!(out, "wrote {}", p.display())?;
    }
    Ok(())
}

/// The figures of a run, static beside eZNS.
fn summary(r: &EznsResults, out: &mut dyn Write) -> Result<()> {
    writeln!(
        out,
        "eZNS experiments ({}) on {} (clock {}): {:.2} s device time, {:.1} s wall time",
        r.scale, r.device.uri, r.device.clock, r.device_s, r.wall_s
    )?;
    writeln!(out, "scaling: {}", r.scaling)?;
    writeln!(out, "{:<34} {:>12} {:>12} {:>9}", "figure", "static", "eZNS", "better")?;
    for c in &r.summary {
        writeln!(
            out,
            "{:<34} {:>12.1} {:>12.1} {:>8.1}%",
            c.figure, c.static_value, c.ezns_value, c.improvement_pct
        )?;
    }
    if let Some(m) = &r.kv_mean {
        writeln!(
            out,
            "key-value, mean over A, B, C, F: p99.9 {:+.1}% better, throughput {:+.1}% \
             (eZNS paper: 76% better p99.9, +9.5% throughput)",
            m.p99_9_improvement_pct, m.throughput_gain_pct
        )?;
    }
    Ok(())
}
