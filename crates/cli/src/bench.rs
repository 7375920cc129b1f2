//! `zns bench`: the benchmarks of zns-bench, run from the command line.
//!
//! `zns bench overhead` measures the host CPU time per I/O spent in the
//! driver, separated from the time spent in the emulated controller (see
//! `zns_bench::overhead`). It builds its own data-less emulator, so it
//! ignores `--device`.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use zns_bench::overhead::{self, OverheadOptions, OverheadReport};

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Driver and emulator CPU time per 4 KiB I/O at queue depth 1 and 32
    /// (one thread, data-less emulator; ignores --device).
    Overhead(OverheadArgs),
}

/// Arguments of `zns bench overhead`.
#[derive(Debug, Args)]
pub struct OverheadArgs {
    /// Print one JSON object (the full report) instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Measuring time per configuration, in seconds (four configurations,
    /// each with a warm-up of a tenth of this).
    #[arg(long, default_value = "2", value_parser = parse_seconds, value_name = "S")]
    pub seconds: Duration,
}

/// Configurations `zns_bench::overhead::run` measures, each for the
/// measuring time plus a tenth of it as warm-up.
const CONFIGURATIONS: u32 = 4;

fn parse_seconds(s: &str) -> Result<Duration, String> {
    let v: f64 = s.trim().parse().map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if !v.is_finite() || v <= 0.0 || v > 3600.0 {
        return Err(format!("{s:?}: seconds must be more than 0 and at most 3600"));
    }
    Ok(Duration::from_secs_f64(v))
}

pub fn run(cmd: BenchCommand, out: &mut dyn Write) -> Result<()> {
    match cmd {
        BenchCommand::Overhead(args) => overhead_cmd(&args, out),
    }
}

fn overhead_cmd(args: &OverheadArgs, out: &mut dyn Write) -> Result<()> {
    let opts = OverheadOptions { duration: args.seconds, ..Default::default() };
    let expected = (args.seconds + args.seconds / 10) * CONFIGURATIONS;
    // Progress on stderr for runs long enough to wonder about, and only for
    // a person watching: never into a pipe or a log file.
    let progress = (expected >= Duration::from_secs(1) && std::io::stderr().is_terminal())
        .then(|| Progress::start(expected));
    let result = overhead::run(&opts);
    if let Some(p) = progress {
        p.finish();
    }
    let report = result.context("overhead benchmark")?;
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?;
    } else {
        table(&report, opts.block_size, out)?;
    }
    Ok(())
}

fn table(r: &OverheadReport, block_size: u32, out: &mut dyn Write) -> Result<()> {
    writeln!(
        out,
        "{:<6} {:>3} {:>12} {:>10} {:>10} {:>10}",
        "op", "QD", "IOPS", "total ns", "driver ns", "emu ns"
    )?;
    for s in &r.samples {
        writeln!(
            out,
            "{:<6} {:>3} {:>12.0} {:>10.1} {:>10.1} {:>10.1}",
            s.op,
            s.queue_depth,
            s.ios_per_sec,
            s.total_ns_per_io,
            s.driver_ns_per_io,
            s.emulator_ns_per_io
        )?;
    }
    writeln!(
        out,
        "{} KiB I/Os, ns per I/O; one thread, one queue pair, data-less emulator",
        block_size / 1024
    )?;
    Ok(())
}

/// A progress bar on stderr that follows the expected running time; the
/// benchmark itself reports nothing until it is done.
struct Progress {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl Progress {
    fn start(expected: Duration) -> Progress {
        let total = expected.as_millis().max(1) as u64;
        let bar = indicatif::ProgressBar::with_draw_target(
            Some(total),
            indicatif::ProgressDrawTarget::stderr(),
        );
        let style = indicatif::ProgressStyle::with_template(
            "{spinner} measuring [{bar:30}] {elapsed} of about {msg}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
        .progress_chars("=> ");
        bar.set_style(style);
        bar.set_message(format!("{:.1}s", expected.as_secs_f64()));
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let start = Instant::now();
            while !flag.load(Ordering::Relaxed) {
                bar.set_position((start.elapsed().as_millis() as u64).min(total));
                bar.tick();
                std::thread::sleep(Duration::from_millis(100));
            }
            bar.finish_and_clear();
        });
        Progress { stop, thread }
    }

    fn finish(self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_are_positive_and_bounded() {
        assert_eq!(parse_seconds("0.5"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_seconds("2"), Ok(Duration::from_secs(2)));
        assert!(parse_seconds("0").is_err());
        assert!(parse_seconds("-1").is_err());
        assert!(parse_seconds("nan").is_err());
        assert!(parse_seconds("inf").is_err());
        assert!(parse_seconds("forever").is_err());
    }
}
