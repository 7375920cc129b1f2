//! `zns characterize`: measures the device's performance model (see
//! `zns_bench::characterize`) and writes `results.json` and `report.html`;
//! `zns characterize --compare A.json B.json` sets two runs side by side.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use zns_bench::characterize::{
    self, compare, reference, Options, Results, Suite, TerminalProgress, EXPERIMENTS,
};

/// Suites.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SuiteArg {
    /// A handful of commands per point: checks that everything runs.
    Smoke,
    /// Every experiment with few points and samples.
    Quick,
    /// Every experiment with more points and samples.
    Full,
}

impl From<SuiteArg> for Suite {
    fn from(s: SuiteArg) -> Suite {
        match s {
            SuiteArg::Smoke => Suite::Smoke,
            SuiteArg::Quick => Suite::Quick,
            SuiteArg::Full => Suite::Full,
        }
    }
}

/// Arguments of `zns characterize`.
#[derive(Debug, Args)]
pub struct CharacterizeArgs {
    /// How many points and samples.
    #[arg(long, value_enum, default_value = "quick")]
    pub suite: SuiteArg,
    /// Directory for results.json and report.html.
    #[arg(long, default_value = "characterize-out", value_name = "DIR")]
    pub out: PathBuf,
    /// Seed of every random choice.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub seed: u64,
    /// Run only these experiments (comma separated): qd1, intra_zone,
    /// inter_zone, open, zone_mgmt, reads, read_under_write,
    /// reset_interference.
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub only: Vec<String>,
    /// Reset every zone first if some hold data (the data is lost).
    #[arg(long)]
    pub force: bool,
    /// Compare two results.json files instead of measuring: prints figure,
    /// A, B and B/A.
    #[arg(long, num_args = 2, value_names = ["A.json", "B.json"],
          conflicts_with_all = ["suite", "out", "seed", "only", "force"])]
    pub compare: Option<Vec<PathBuf>>,
    /// With --compare: also write an HTML comparison (both runs' plots on
    /// the same axes and every figure) to this file.
    #[arg(long, requires = "compare", value_name = "FILE")]
    pub html: Option<PathBuf>,
}

pub fn run(uri: &str, args: &CharacterizeArgs, out: &mut dyn Write) -> Result<()> {
    if let Some(files) = &args.compare {
        return compare_files(&files[0], &files[1], args.html.as_deref(), out);
    }
    for name in &args.only {
        if !EXPERIMENTS.iter().any(|(n, _)| n == name) {
            let known: Vec<&str> = EXPERIMENTS.iter().map(|e| e.0).collect();
            bail!("--only: unknown experiment {name:?} (known: {})", known.join(", "));
        }
    }
    let dev = zns_device::open(uri)?;
    let opts = Options {
        suite: args.suite.into(),
        seed: args.seed,
        only: args.only.clone(),
        force: args.force,
    };
    let progress = TerminalProgress::stderr();
    let results = characterize::run(dev.as_ref(), &opts, &progress).context("characterize")?;
    drop(dev);
    let (json, html) = characterize::write_outputs(&results, &args.out)?;
    summary(&results, out)?;
    writeln!(out, "wrote {} and {}", json.display(), html.display())?;
    let stopped: Vec<&str> =
        results.experiments.iter().filter(|e| e.error.is_some()).map(|e| e.name.as_str()).collect();
    if !stopped.is_empty() {
        bail!("experiments stopped early: {} (see {})", stopped.join(", "), json.display());
    }
    Ok(())
}

fn summary(r: &Results, out: &mut dyn Write) -> Result<()> {
    writeln!(
        out,
        "{} on {} (clock {}): {} points, {:.2} s device time, {:.2} s wall time",
        r.suite,
        r.device.uri,
        r.device.clock,
        r.points.len(),
        r.duration.device_ns as f64 / 1e9,
        r.host.wall_ns as f64 / 1e9
    )?;
    writeln!(
        out,
        "{:<20} {:>6} {:>10} {:>10}  status",
        "experiment", "points", "device s", "wall s"
    )?;
    for e in &r.experiments {
        let status = match &e.error {
            Some(err) => format!("stopped: {err}"),
            None if !e.skipped.is_empty() => format!("ok ({} parts skipped)", e.skipped.len()),
            None => "ok".to_string(),
        };
        writeln!(
            out,
            "{:<20} {:>6} {:>10.3} {:>10.3}  {status}",
            e.name,
            e.points,
            e.duration.device_ns as f64 / 1e9,
            r.host.experiments_wall_ns.get(&e.name).copied().unwrap_or(0) as f64 / 1e9
        )?;
    }
    match &r.host.overhead {
        Some(o) => writeln!(out, "engine overhead: {}", characterize::describe_overhead(o))?,
        None => writeln!(out, "engine overhead: not measured")?,
    }
    let key = [
        "qd1/write/4KiB:mean_us",
        "qd1/append/4KiB:mean_us",
        "qd1/read/4KiB:mean_us",
        "open/first_write/implicit:mean_us",
        "zone_mgmt/reset/full:p50_us",
        "zone_mgmt/finish/50%:p50_us",
    ];
    let mut figures: Vec<(String, f64)> =
        key.iter().filter_map(|k| r.figure(k).map(|v| (k.to_string(), v))).collect();
    figures.extend(r.summary.iter().map(|(k, v)| (k.clone(), *v)));
    if !figures.is_empty() {
        writeln!(out, "key figures:")?;
        for (k, v) in figures {
            writeln!(out, "  {k:<46} {v:>12.2}")?;
        }
    }
    if let Some(t) = &r.reference {
        let measured: Vec<f64> = t.rows.iter().filter_map(|row| row.ratio).collect();
        writeln!(
            out,
            "measured against the {} reference ({}, {} B LBA format): {} of {} figures measured",
            t.profile,
            t.device,
            t.lba_bytes,
            measured.len(),
            t.rows.len()
        )?;
        writeln!(out, "  {:<46} {:>12} {:>12} {:>8}", "figure", "reference", "measured", "ratio")?;
        for row in &t.rows {
            if let (Some(m), Some(q)) = (row.measured, row.ratio) {
                writeln!(
                    out,
                    "  {:<46} {:>12.2} {:>12.2} {:>8.3}",
                    row.figure, row.reference, m, q
                )?;
            }
        }
    } else if let Some(p) = &r.device.profile {
        if !reference::profiles().contains(&p.as_str()) {
            writeln!(out, "no reference figures for the {p} profile")?;
        } else {
            writeln!(
                out,
                "no reference figures for the {p} profile with {} B blocks",
                reference::lba_bytes(r)
            )?;
        }
    }
    Ok(())
}

fn compare_files(a: &Path, b: &Path, html: Option<&Path>, out: &mut dyn Write) -> Result<()> {
    let ra = characterize::read_results(a)?;
    let rb = characterize::read_results(b)?;
    writeln!(
        out,
        "A: {} ({}, clock {}, suite {})",
        a.display(),
        ra.device.uri,
        ra.device.clock,
        ra.suite
    )?;
    writeln!(
        out,
        "B: {} ({}, clock {}, suite {})",
        b.display(),
        rb.device.uri,
        rb.device.clock,
        rb.suite
    )?;
    let rows = compare::compare(&ra, &rb);
    write!(out, "{}", compare::to_text(&rows))?;
    if let Some(path) = html {
        let page = compare::html(&ra, &a.display().to_string(), &rb, &b.display().to_string());
        std::fs::write(path, page).with_context(|| format!("write {}", path.display()))?;
        writeln!(out, "wrote {}", path.display())?;
    }
    Ok(())
}
