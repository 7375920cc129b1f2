//! `zns trace view`: a trace file (`--trace FILE`, `emu:...,trace=FILE`)
//! drawn as an SVG timeline, for a machine without a browser to open it
//! in Perfetto's UI; `zns trace summary`: its figures (commands' latencies
//! by kind, the dies' work, the write buffer's waits, the slowest
//! commands).

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use zns_bench::timeline::{render_svg, Timeline, TimelineOptions, TraceSummary};

/// Trace files.
#[derive(Debug, Subcommand)]
pub enum TraceCommand {
    /// Draw a JSON trace file as an SVG timeline: a row per die, channel,
    /// command lane, zone and counter, slices coloured by operation.
    View(ViewArgs),
    /// A trace file's figures: commands' latencies by kind in the trace's
    /// time (an emulator's: the drive's own), the dies' work by operation,
    /// waits for write buffer room, the slowest commands.
    Summary(SummaryArgs),
}

/// Arguments of `zns trace summary`.
#[derive(Debug, Args)]
pub struct SummaryArgs {
    /// The trace file (JSON trace-event format).
    pub file: PathBuf,
    /// How many of the slowest commands to list.
    #[arg(long, default_value_t = 10)]
    pub slowest: usize,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `zns trace view`.
#[derive(Debug, Args)]
pub struct ViewArgs {
    /// The trace file (JSON trace-event format).
    pub file: PathBuf,
    /// The SVG file to write.
    #[arg(short, long, default_value = "trace.svg")]
    pub output: PathBuf,
    /// Window start, µs of the trace's time (default: its first event).
    #[arg(long)]
    pub from_us: Option<f64>,
    /// Window end, µs (default: the last event's end).
    #[arg(long)]
    pub to_us: Option<f64>,
    /// Only tracks whose process or track name contains this
    /// (case-insensitive; repeatable), e.g. --only die --only channel.
    #[arg(long)]
    pub only: Vec<String>,
    /// Most tracks drawn; the rest are counted in a last line.
    #[arg(long, default_value_t = 80)]
    pub max_tracks: usize,
    /// Picture width, pixels.
    #[arg(long, default_value_t = 1600)]
    pub width: u32,
}

/// Runs a `zns trace` command.
pub fn run(command: &TraceCommand, out: &mut dyn std::io::Write) -> Result<()> {
    match command {
        TraceCommand::View(args) => view(args, out),
        TraceCommand::Summary(args) => summary(args, out),
    }
}

/// Reads a trace file into its tracks.
fn read(file: &std::path::Path) -> Result<Timeline> {
    let text = std::fs::read_to_string(file).with_context(|| format!("read {}", file.display()))?;
    Timeline::parse(&text).with_context(|| format!("read {}", file.display()))
}

/// `zns trace summary`.
fn summary(args: &SummaryArgs, out: &mut dyn std::io::Write) -> Result<()> {
    let s = TraceSummary::of(&read(&args.file)?, args.slowest);
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&s)?)?;
    } else {
        write!(out, "{}", s.to_text())?;
    }
    Ok(())
}

/// `zns trace view`.
fn view(args: &ViewArgs, out: &mut dyn std::io::Write) -> Result<()> {
    let timeline = read(&args.file)?;
    let opts = TimelineOptions {
        from_us: args.from_us,
        to_us: args.to_us,
        only: args.only.clone(),
        max_tracks: args.max_tracks,
        width: args.width,
    };
    let svg = render_svg(&timeline, &opts)?;
    std::fs::write(&args.output, svg)
        .with_context(|| format!("write {}", args.output.display()))?;
    writeln!(
        out,
        "{}: {} tracks ({} events of other kinds left out) drawn to {}",
        args.file.display(),
        timeline.tracks.len(),
        timeline.skipped,
        args.output.display()
    )?;
    Ok(())
}
