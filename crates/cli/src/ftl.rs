//! `zns ftl`: the host-side FTL (`zns-ftl`) on the device: format it,
//! print its statistics, check its invariants, and benchmark it against
//! the raw device.
//!
//! `format`, `stats` and `check` work on `--device`; an FTL outlives the
//! command only on a persistent device (`emu:file=PATH`, `pcie:`, `ng:`,
//! `zbd:`). `bench` formats a device of its own: `emu:small,media=null`
//! unless `--device` (or `$ZNS_DEVICE`) names one, and it refuses to
//! overwrite a persistent device without `--force`.

use std::cell::RefCell;
use std::io::{IsTerminal, Write};

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::{json, Value};
use zns_bench::ftl_bench::{self as bench, BenchOptions, BenchReport, Observer, Phase, Workload};
use zns_device::DeviceUri;
use zns_ftl::{
    CheckReport, Ftl, FtlConfig, FtlError, FtlStats, RepairReport, StreamLayout, VictimPolicy,
    WriteMode,
};

use crate::num::human_size;

/// The device `zns ftl bench` uses when `--device` is not given.
pub const BENCH_DEFAULT_URI: &str = "emu:small,media=null";

#[derive(Debug, Subcommand)]
pub enum FtlCommand {
    /// Format an FTL on the device (every zone is reset: all data is lost).
    Format(FormatArgs),
    /// Open (recover) the FTL on the device, print its statistics, close it.
    Stats {
        /// One JSON object instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Open the FTL and verify its invariants (map, valid counts, zone
    /// states, damaged metadata). Exit status: 0 clean (or repaired with
    /// nothing lost), 3 damage a repair restores completely, 4 damage that
    /// loses blocks (a repair without --accept-loss then changes nothing),
    /// 1 the check could not run.
    Check {
        /// One JSON object instead of text.
        #[arg(long)]
        json: bool,
        /// Also read every mapped block back.
        #[arg(long)]
        read_all: bool,
        /// Where the metadata log is damaged, rebuild the map from every
        /// intact source (any complete checkpoint, the log on both sides
        /// of the damage, the block tags), then check. Never done without
        /// this flag; a repair that cannot account for every block writes
        /// nothing unless --accept-loss.
        #[arg(long)]
        repair: bool,
        /// With --repair: write the repair even though it loses blocks
        /// (they are listed).
        #[arg(long, requires = "repair")]
        accept_loss: bool,
    },
    /// Measure the FTL (first-pass IOPS, steady-state write amplification,
    /// map RAM) against the raw device. Formats the device; default device
    /// emu:small,media=null.
    Bench(BenchArgs),
    /// Export the FTL as a disk over NBD (QEMU, nbd-client, qemu-io) until
    /// SIGINT/SIGTERM, which closes it with a checkpoint.
    Serve(crate::ftl_serve::ServeArgs),
}

/// Stream layouts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StreamsArg {
    /// One log for user and GC writes.
    Single,
    /// User hot/cold and GC streams.
    Separated,
}

/// Write paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum WriteModeArg {
    /// Write commands at the write pointer (one writer per open zone).
    Write,
    /// Zone Append (writers share open zones).
    Append,
}

/// FTL options shared by `format` and `bench`.
#[derive(Debug, Args)]
pub struct FtlOptions {
    /// Over-provisioning: spare space in percent of the exposed capacity.
    #[arg(long, default_value = "10", value_parser = parse_op, value_name = "PCT")]
    pub op: f64,
    /// Garbage collection victim policy: greedy, cost-benefit, lifetime,
    /// cost-age-time.
    #[arg(long, default_value = "lifetime", value_parser = parse_policy, value_name = "POLICY")]
    pub policy: VictimPolicy,
    /// Stream layout (changes the exposed capacity: each open zone is held
    /// out of it).
    #[arg(long, value_enum, default_value = "separated")]
    pub streams: StreamsArg,
    /// Open zones per user stream [default: 1; for bench with plain writes,
    /// the thread count].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub heads: Option<u32>,
    /// How user data reaches its zone.
    #[arg(long, value_enum, default_value = "write")]
    pub write_mode: WriteModeArg,
    /// Relocate by read and write even when the device has NVMe Copy.
    #[arg(long)]
    pub no_copy: bool,
}

impl FtlOptions {
    fn config(&self, default_heads: u32) -> FtlConfig {
        FtlConfig {
            op: self.op,
            policy: self.policy,
            streams: match self.streams {
                StreamsArg::Single => StreamLayout::Single,
                StreamsArg::Separated => StreamLayout::Separated,
            },
            write_mode: match self.write_mode {
                WriteModeArg::Write => WriteMode::Write,
                WriteModeArg::Append => WriteMode::Append,
            },
            heads_per_stream: self.heads.unwrap_or(default_heads),
            use_copy: !self.no_copy,
            ..FtlConfig::default()
        }
    }
}

/// Arguments of `zns ftl format`.
#[derive(Debug, Args)]
pub struct FormatArgs {
    #[command(flatten)]
    pub ftl: FtlOptions,
    /// Metadata zones [default: what a checkpoint of the capacity needs].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub meta_zones: Option<u32>,
    /// Format even though zones hold data (an FTL or anything else): it is
    /// all erased.
    #[arg(long)]
    pub force: bool,
    /// One JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `zns ftl bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Address distribution: uniform, zipfian, hot-cold-80-20,
    /// hot-cold-90-10 (or hot-cold-W-D).
    #[arg(long, default_value = "uniform", value_parser = parse_workload, value_name = "NAME")]
    pub workload: Workload,
    /// Exponent of the zipfian workload.
    #[arg(long, default_value_t = bench::DEFAULT_ZIPF_THETA, value_name = "THETA")]
    pub zipf_theta: f64,
    /// Percentage of reads mixed into the warm-up and measured phases.
    #[arg(long, default_value_t = 0, value_name = "N",
          value_parser = clap::value_parser!(u32).range(0..=99))]
    pub read_pct: u32,
    /// Threads issuing requests, each with its own queues.
    #[arg(long, default_value_t = 1, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=64))]
    pub threads: u32,
    #[command(flatten)]
    pub ftl: FtlOptions,
    /// Warm-up writes before the measured window, in device capacities.
    #[arg(long, default_value_t = 2.0, value_name = "X")]
    pub warmup: f64,
    /// Measured writes, in device capacities.
    #[arg(long, default_value_t = 1.0, value_name = "X")]
    pub measure: f64,
    /// Random reads in each read phase (FTL and raw).
    #[arg(long, default_value_t = 200_000, value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub reads: u64,
    /// Seed of every random choice.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub seed: u64,
    /// Allow a persistent device (its data is destroyed).
    #[arg(long)]
    pub force: bool,
    /// One JSON object instead of a table (and no progress bars).
    #[arg(long)]
    pub json: bool,
}

fn parse_op(s: &str) -> Result<f64, String> {
    let t = s.trim().trim_end_matches('%');
    let v: f64 = t.parse().map_err(|_| format!("{s:?} is not a percentage"))?;
    if !(v.is_finite() && v > 0.0 && v <= 1000.0) {
        return Err(format!("{s:?}: over-provisioning must be more than 0 and at most 1000 %"));
    }
    Ok(v / 100.0)
}

fn parse_policy(s: &str) -> Result<VictimPolicy, String> {
    s.parse().map_err(|e: zns_ftl::UnknownPolicy| e.to_string())
}

fn parse_workload(s: &str) -> Result<Workload, String> {
    s.parse().map_err(|e: FtlError| e.to_string())
}

/// True for devices that keep nothing after the process ends: `emu:`
/// without `file=`.
pub(crate) fn process_private(uri: &str) -> Result<bool> {
    Ok(match uri.parse::<DeviceUri>()? {
        DeviceUri::Emulator(e) => e.file.is_none(),
        _ => false,
    })
}

/// Opens the FTL on `uri` with the default run-time configuration.
fn open_ftl(uri: &str, checking: bool) -> Result<Ftl> {
    let dev = zns_device::open(uri)?;
    Ftl::open(dev, FtlConfig::default()).map_err(|e| open_error(uri, e, !checking))
}

/// An FTL that did not open: the library's error and what the user is
/// told about it (what to do about a device with no FTL, where to look at
/// a damaged one).
#[derive(Debug)]
pub(crate) struct OpenError {
    message: String,
    error: FtlError,
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for OpenError {}

/// Why the FTL on `uri` did not open, for the user; with `point_to_check`,
/// damage is followed by the command that reports it. Nothing here
/// formats or repairs.
pub(crate) fn open_error(uri: &str, error: FtlError, point_to_check: bool) -> anyhow::Error {
    let private = process_private(uri).unwrap_or(false);
    let message = match &error {
        FtlError::NotFormatted if private => format!(
            "open the FTL: {uri} holds no FTL: an emu: device without file= starts empty in \
             every command (format one on emu:file=PATH)"
        ),
        FtlError::NotFormatted => format!(
            "open the FTL on {uri}: the device holds no FTL metadata and no data: format one \
             with `zns --device {uri} ftl format`"
        ),
        FtlError::NotEmpty { .. } => format!(
            "open the FTL on {uri}: {error}; `zns --device {uri} report-zones` shows the zones \
             that hold data, `zns ftl format --force` discards them"
        ),
        FtlError::Corrupt { .. } | FtlError::Incompatible(_) if point_to_check => format!(
            "open the FTL on {uri}: {error}; `zns --device {uri} ftl check` reports it (`--json` \
             for scripts)"
        ),
        _ => format!("open the FTL on {uri}: {error}"),
    };
    anyhow::Error::new(OpenError { message, error })
}

pub fn run(uri: &str, device_given: bool, cmd: FtlCommand, out: &mut dyn Write) -> Result<()> {
    match cmd {
        FtlCommand::Format(args) => format(uri, &args, out),
        FtlCommand::Stats { json } => stats(uri, json, out),
        FtlCommand::Check { json, read_all, repair, accept_loss } => {
            let how = CheckHow { as_json: json, read_all, repair, accept_loss };
            let r = check(uri, how, out);
            if let Some(code) = r.as_ref().err().and_then(exit_code) {
                // The exit status tells repairable damage from lost
                // blocks; the command line's error path has one failure
                // status, so this one ends here, in the same format.
                out.flush()?;
                eprintln!("zns: {:#}", r.expect_err("an error"));
                std::process::exit(code);
            }
            r
        }
        FtlCommand::Serve(args) => crate::ftl_serve::run(uri, &args, out),
        FtlCommand::Bench(args) => {
            let uri = if device_given { uri } else { BENCH_DEFAULT_URI };
            bench_cmd(uri, &args, out)
        }
    }
}

fn streams_name(s: StreamLayout) -> &'static str {
    match s {
        StreamLayout::Single => "single",
        StreamLayout::Separated => "separated",
    }
}

fn mode_name(m: WriteMode) -> &'static str {
    match m {
        WriteMode::Write => "write",
        WriteMode::Append => "append",
    }
}

fn format(uri: &str, args: &FormatArgs, out: &mut dyn Write) -> Result<()> {
    if process_private(uri)? {
        eprintln!(
            "zns: warning: {uri} exists only while this command runs: the FTL formatted on it \
             vanishes when zns exits (use --device emu:file=PATH, made by `zns emu create`)"
        );
    }
    let mut config = args.ftl.config(1);
    config.meta_zones = args.meta_zones;
    let dev = zns_device::open(uri)?;
    let info = dev.info().clone();
    let written = Ftl::written_zones(dev.as_ref()).context("read the zone states")?;
    if written > 0 && !args.force {
        bail!(
            "{uri}: {written} zones hold data (an FTL or anything else); formatting erases \
             it: add --force to do so"
        );
    }
    let ftl = Ftl::format(dev, config).with_context(|| format!("format an FTL on {uri}"))?;
    let st = ftl.stats();
    let c = ftl.config().clone();
    let meta = ftl.meta_zones() as u64;
    let unusable = st.pools.unusable as u64;
    let data = info.zone_count - meta - unusable;
    let bytes = st.logical_blocks * st.block_size as u64;
    let (_, open_max) = ftl.open_zone_limits();
    ftl.close().context("close the FTL")?;
    if args.json {
        let v = json!({
            "device": uri,
            "logical_blocks": st.logical_blocks,
            "block_size": st.block_size,
            "bytes": bytes,
            "op": c.op,
            "zones": info.zone_count,
            "meta_zones": meta,
            "data_zones": data,
            "unusable_zones": unusable,
            "streams": streams_name(c.streams),
            "heads_per_stream": c.heads_per_stream,
            "open_zones_max": open_max,
            "map_bytes_per_block": st.map_bytes_per_block,
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
        return Ok(());
    }
    writeln!(out, "formatted an FTL on {uri}")?;
    writeln!(
        out,
        "  exposed         {} blocks of {} bytes ({})",
        st.logical_blocks,
        st.block_size,
        human_size(bytes)
    )?;
    writeln!(out, "  over-provision  {:.1} %", c.op * 100.0)?;
    writeln!(
        out,
        "  zones           {} data, {meta} metadata, {unusable} unusable (of {})",
        data, info.zone_count
    )?;
    writeln!(
        out,
        "  streams         {}, {} open zone(s) per user stream, at most {open_max} open with the log",
        streams_name(c.streams),
        c.heads_per_stream
    )?;
    writeln!(out, "  map RAM         {:.2} bytes per exposed block", st.map_bytes_per_block)?;
    Ok(())
}

fn stats_json(uri: &str, s: &FtlStats) -> Value {
    let p = &s.pools;
    json!({
        "device": uri,
        "logical_blocks": s.logical_blocks,
        "block_size": s.block_size,
        "user_blocks_written": s.user_blocks_written,
        "user_blocks_read": s.user_blocks_read,
        "user_writes": s.user_writes,
        "user_reads": s.user_reads,
        "user_flushes": s.user_flushes,
        "blocks_discarded": s.blocks_discarded,
        "data_blocks_written": s.data_blocks_written,
        "gc_blocks_copied": s.gc_blocks_copied,
        "gc_blocks_discarded_copies": s.gc_blocks_discarded_copies,
        "gc_copy_commands": s.gc_copy_commands,
        "gc_victims": s.gc_victims,
        "gc_seconds": s.gc_seconds,
        "meta_blocks_written": s.meta_blocks_written,
        "checkpoints": s.checkpoints,
        "device_flushes": s.device_flushes,
        "zone_resets": s.zone_resets,
        "zone_finishes": s.zone_finishes,
        "rescanned_zones": s.rescanned_zones,
        "rescued_blocks": s.rescued_blocks,
        "resumed_zones": s.resumed_zones,
        "damaged_reads": s.damaged_reads,
        "gc_damaged_blocks": s.gc_damaged_blocks,
        "user_waits": s.user_waits,
        "waf": s.waf,
        "waf_total": s.waf_total,
        "pools": {
            "free": p.free,
            "open": p.open,
            "full": p.full,
            "victim": p.victim,
            "meta": p.meta,
            "unusable": p.unusable,
        },
        "valid_blocks": s.valid_blocks,
        "invalid_blocks": s.invalid_blocks,
        "map_bytes": s.map_bytes,
        "map_bytes_per_block": s.map_bytes_per_block,
    })
}

fn stats(uri: &str, as_json: bool, out: &mut dyn Write) -> Result<()> {
    let ftl = open_ftl(uri, false)?;
    let s = ftl.stats();
    ftl.close().context("close the FTL")?;
    if as_json {
        writeln!(out, "{}", serde_json::to_string_pretty(&stats_json(uri, &s))?)?;
        return Ok(());
    }
    let p = &s.pools;
    let rows: Vec<(&str, String)> = vec![
        (
            "logical blocks",
            format!(
                "{} of {} bytes ({})",
                s.logical_blocks,
                s.block_size,
                human_size(s.logical_blocks * s.block_size as u64)
            ),
        ),
        ("valid blocks", s.valid_blocks.to_string()),
        ("invalid blocks", s.invalid_blocks.to_string()),
        (
            "zones",
            format!(
                "{} free, {} open, {} full, {} victim, {} metadata, {} unusable",
                p.free, p.open, p.full, p.victim, p.meta, p.unusable
            ),
        ),
        (
            "map RAM",
            format!(
                "{} ({:.2} bytes per block)",
                human_size(s.map_bytes as u64),
                s.map_bytes_per_block
            ),
        ),
        ("", "counters since this open (recovery included):".into()),
        ("user blocks written", s.user_blocks_written.to_string()),
        ("user blocks read", s.user_blocks_read.to_string()),
        ("data blocks written", s.data_blocks_written.to_string()),
        ("metadata blocks", s.meta_blocks_written.to_string()),
        ("checkpoints", s.checkpoints.to_string()),
        ("device flushes", s.device_flushes.to_string()),
        ("zone resets", s.zone_resets.to_string()),
        ("zone finishes", s.zone_finishes.to_string()),
        ("zones rescanned at mount", s.rescanned_zones.to_string()),
        ("blocks rescued at mount", s.rescued_blocks.to_string()),
        ("zones resumed at mount", s.resumed_zones.to_string()),
        ("reads refused (damaged data)", s.damaged_reads.to_string()),
        ("GC victims", s.gc_victims.to_string()),
        ("GC blocks copied", s.gc_blocks_copied.to_string()),
    ];
    writeln!(out, "FTL on {uri}")?;
    for (k, v) in rows {
        writeln!(out, "  {k:<20} {v}")?;
    }
    Ok(())
}

fn check_json(uri: &str, r: &CheckReport) -> Value {
    json!({
        "device": uri,
        "ok": r.is_ok(),
        "logical_blocks": r.logical_blocks,
        "mapped_blocks": r.mapped_blocks,
        "zones": r.zones,
        "meta_zones": r.meta_zones,
        "full_zones": r.full_zones,
        "open_zones": r.open_zones,
        "free_zones": r.free_zones,
        "unusable_zones": r.unusable_zones,
        "physical_blocks_checked": r.physical_blocks_checked,
        "read_all": r.read_all,
        "blocks_read": r.blocks_read,
        "problems_total": r.problems_total,
        "problems": r.problems.iter().map(|p| json!({
            "kind": p.kind(),
            "zone": p.zone(),
            "message": p.to_string(),
        })).collect::<Vec<_>>(),
    })
}

/// `zns ftl check --json` when the FTL does not open: `ok` false, the
/// error, and where the damage is when it has a place.
fn open_failure_json(uri: &str, e: &anyhow::Error) -> Value {
    let ftl = e.chain().find_map(|c| c.downcast_ref::<OpenError>()).map(|o| &o.error);
    let (kind, damage) = match ftl {
        Some(FtlError::Corrupt { zone, block, reason }) => {
            ("corrupt", json!({"zone": zone, "block": block, "reason": reason}))
        }
        Some(FtlError::NotEmpty { .. }) => ("not-an-ftl", Value::Null),
        Some(FtlError::NotFormatted) => ("not-formatted", Value::Null),
        Some(FtlError::Incompatible(_)) => ("incompatible", Value::Null),
        _ => ("error", Value::Null),
    };
    json!({
        "device": uri,
        "ok": false,
        "opened": false,
        "error_kind": kind,
        "error": format!("{e:#}"),
        "damage": damage,
    })
}

/// Exit status of `zns ftl check`: damage that a repair restores
/// completely.
pub const EXIT_REPAIRABLE: i32 = 3;
/// Exit status of `zns ftl check`: damage that loses blocks.
pub const EXIT_LOST: i32 = 4;

/// What `zns ftl check` was asked for.
#[derive(Debug, Clone, Copy)]
struct CheckHow {
    as_json: bool,
    read_all: bool,
    repair: bool,
    accept_loss: bool,
}

/// A check that found damage: the message for stderr and the exit status
/// that says whether a repair restores everything.
#[derive(Debug)]
struct Damaged {
    message: String,
    code: i32,
}

impl std::fmt::Display for Damaged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Damaged {}

/// The repair report as JSON.
fn repair_json(r: &RepairReport) -> Value {
    json!({
        "damage": r.damage.iter().map(|(z, b, why)| json!({"zone": z, "block": b, "reason": why})).collect::<Vec<_>>(),
        "unknown_pages": r.unknown_pages.iter().map(|(z, b)| json!({"zone": z, "block": b})).collect::<Vec<_>>(),
        "dropped_zones": r.dropped_zones,
        "unmapped": r.unmapped,
        "damaged_blocks": r.damaged_blocks,
        "adopted": r.adopted,
        "partial_checkpoint": r.partial_checkpoint,
        "scanned": r.scanned,
        "loses": r.loses(),
    })
}

/// Up to 16 numbers of `v`, for a line of text.
fn short_list(v: &[u64]) -> String {
    let head: Vec<String> = v.iter().take(16).map(u64::to_string).collect();
    format!("{}{}", head.join(", "), if v.len() > 16 { ", ..." } else { "" })
}

/// The repair report in words, each line starting with `prefix`.
fn write_repair(out: &mut dyn Write, prefix: &str, r: &RepairReport) -> Result<()> {
    for (z, b, why) in &r.damage {
        writeln!(out, "{prefix}: damaged metadata at zone {z} block {b}: {why}")?;
    }
    for z in &r.dropped_zones {
        writeln!(out, "{prefix}: metadata zone {z} could not be placed in the log")?;
    }
    if r.partial_checkpoint {
        writeln!(
            out,
            "{prefix}: no complete checkpoint is left: the map is rebuilt from the newest \
             checkpoint's readable chunks, the log after it and the block tags ({} blocks found \
             by a full scan; discarded blocks may read their old data again)",
            r.scanned
        )?;
    } else if !r.unknown_pages.is_empty() {
        writeln!(
            out,
            "{prefix}: {} damaged log page(s) held unknown map changes: a full scan of the block \
             tags found {} newer versions (a discard in them may be undone)",
            r.unknown_pages.len(),
            r.scanned
        )?;
    }
    writeln!(out, "{prefix}: {} blocks adopted by their tags", r.adopted)?;
    if !r.unmapped.is_empty() {
        writeln!(
            out,
            "{prefix}: lost {} logical blocks (they read as zeros): {}",
            r.unmapped.len(),
            short_list(&r.unmapped)
        )?;
    }
    if !r.damaged_blocks.is_empty() {
        writeln!(
            out,
            "{prefix}: {} logical blocks fail their data checksum (reads of them fail): {}",
            r.damaged_blocks.len(),
            short_list(&r.damaged_blocks)
        )?;
    }
    Ok(())
}

/// Opens the FTL with [`Ftl::repair_with`], printing what the repair
/// found. A repair that would lose blocks without `accept_loss` prints
/// what it would lose and fails with [`EXIT_LOST`], having written nothing.
fn repair_ftl(uri: &str, how: CheckHow, out: &mut dyn Write) -> Result<(Ftl, Value)> {
    let dev = zns_device::open(uri)?;
    let (ftl, report) = match Ftl::repair_with(dev, FtlConfig::default(), how.accept_loss) {
        Ok(o) => o,
        Err(FtlError::RepairLoses(r)) => {
            if how.as_json {
                let v = json!({"device": uri, "ok": false, "opened": false, "repaired": false,
                    "error_kind": "lost", "repair": repair_json(&r)});
                writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
            } else {
                write_repair(out, "repair would", &r)?;
            }
            let message = format!("repair the FTL on {uri}: {}", FtlError::RepairLoses(r));
            return Err(anyhow::Error::new(Damaged { message, code: EXIT_LOST }));
        }
        Err(error) => {
            let message = format!("repair the FTL on {uri}: {error}");
            return Err(anyhow::Error::new(OpenError { message, error }));
        }
    };
    let Some(r) = report else {
        if !how.as_json {
            writeln!(out, "repair: the metadata log is intact; nothing to repair")?;
        }
        return Ok((ftl, Value::Null));
    };
    if !how.as_json {
        write_repair(out, "repair", &r)?;
        if r.loses() {
            writeln!(out, "repair: the loss was accepted (--accept-loss)")?;
        }
        writeln!(out, "repair: a checkpoint of the repaired state is written")?;
    }
    Ok((ftl, repair_json(&r)))
}

/// When the FTL does not open: what a repair would restore, without
/// writing, as the exit status (damage a repair restores completely, or
/// damage that loses blocks).
fn diagnose_failure(uri: &str, e: anyhow::Error, as_json: bool, out: &mut dyn Write) -> Result<()> {
    let damaged = e
        .chain()
        .find_map(|c| c.downcast_ref::<OpenError>())
        .is_some_and(|o| matches!(o.error, FtlError::Corrupt { .. }));
    let diagnosis = match damaged {
        true => {
            zns_device::open(uri).ok().map(|dev| Ftl::diagnose(dev.as_ref(), &FtlConfig::default()))
        }
        false => None,
    };
    if as_json {
        let mut v = open_failure_json(uri, &e);
        if let Some(Ok(Some(r))) = &diagnosis {
            v["repair"] = repair_json(r);
        }
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
    }
    let (code, what) = match &diagnosis {
        Some(Ok(Some(r))) if !r.loses() => {
            (EXIT_REPAIRABLE, "`--repair` restores every block".to_string())
        }
        Some(Ok(Some(r))) => (EXIT_LOST, format!("a repair would lose blocks: {}", r.summary())),
        Some(Err(d)) => (EXIT_LOST, format!("a repair cannot rebuild it: {d}")),
        _ => return Err(e),
    };
    if !as_json {
        out.flush()?;
    }
    let message = format!("{e:#}; {what}");
    Err(anyhow::Error::new(Damaged { message, code }))
}

fn check(uri: &str, how: CheckHow, out: &mut dyn Write) -> Result<()> {
    let opened = match how.repair {
        true => repair_ftl(uri, how, out),
        false => open_ftl(uri, true).map(|f| (f, Value::Null)),
    };
    let (ftl, repaired) = match opened {
        Ok(o) => o,
        Err(e) if e.chain().any(|c| c.downcast_ref::<Damaged>().is_some()) => return Err(e),
        Err(e) if how.repair => {
            if how.as_json {
                writeln!(out, "{}", serde_json::to_string_pretty(&open_failure_json(uri, &e))?)?;
            }
            // Damage a repair cannot rebuild from is lost, not a failure
            // to run.
            let corrupt = e
                .chain()
                .find_map(|c| c.downcast_ref::<OpenError>())
                .is_some_and(|o| matches!(o.error, FtlError::Corrupt { .. }));
            if corrupt {
                out.flush()?;
                let message = format!("{e:#}");
                return Err(anyhow::Error::new(Damaged { message, code: EXIT_LOST }));
            }
            return Err(e);
        }
        Err(e) => return diagnose_failure(uri, e, how.as_json, out),
    };
    let r = ftl.check(how.read_all).context("check the FTL")?;
    if r.is_ok() {
        ftl.close().context("close the FTL")?;
    } else {
        // Keep the device as it is for a closer look: no checkpoint of a
        // map with problems (the log is still flushed).
        drop(ftl);
    }
    if how.as_json {
        let mut v = check_json(uri, &r);
        if how.repair {
            v["repair"] = repaired;
        }
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
    } else {
        writeln!(
            out,
            "checked the FTL on {uri}: {} of {} logical blocks mapped; zones: {} full, {} open, \
             {} free, {} metadata, {} unusable",
            r.mapped_blocks,
            r.logical_blocks,
            r.full_zones,
            r.open_zones,
            r.free_zones,
            r.meta_zones,
            r.unusable_zones
        )?;
        if how.read_all {
            writeln!(out, "read back {} blocks", r.blocks_read)?;
        }
        for p in &r.problems {
            writeln!(out, "problem: {p}")?;
        }
        if r.problems_total > r.problems.len() as u64 {
            writeln!(out, "... and {} more", r.problems_total - r.problems.len() as u64)?;
        }
        if r.is_ok() {
            writeln!(out, "no problems found")?;
        }
    }
    if !r.is_ok() {
        out.flush()?;
        let (code, what) = match r.only_repairable() {
            true => (EXIT_REPAIRABLE, "`--repair` restores every block"),
            false => (EXIT_LOST, "not every block can be restored"),
        };
        let message = format!("the FTL check found {} problem(s); {what}", r.problems_total);
        return Err(anyhow::Error::new(Damaged { message, code }));
    }
    Ok(())
}

/// The exit status `zns ftl check` asks for with `e`: [`EXIT_REPAIRABLE`]
/// or [`EXIT_LOST`] for damage, `None` for any other failure.
pub(crate) fn exit_code(e: &anyhow::Error) -> Option<i32> {
    e.chain().find_map(|c| c.downcast_ref::<Damaged>()).map(|d| d.code)
}

/// Progress bars on stderr, one per phase; hidden when stderr is not a
/// terminal or the output is JSON.
struct Bars {
    multi: MultiProgress,
    bar: RefCell<Option<ProgressBar>>,
}

impl Bars {
    fn new(visible: bool) -> Bars {
        let target =
            if visible { ProgressDrawTarget::stderr() } else { ProgressDrawTarget::hidden() };
        Bars { multi: MultiProgress::with_draw_target(target), bar: RefCell::new(None) }
    }
}

impl Observer for Bars {
    fn phase_started(&self, phase: Phase, units: u64) {
        let unit = match phase {
            Phase::Read | Phase::RawRead => "reads",
            _ => "writes",
        };
        let style = ProgressStyle::with_template(&format!(
            "{{prefix:>9}} [{{bar:30}}] {{percent:>3}}%  {{human_pos}}/{{human_len}} {unit}  \
             {{elapsed}}, about {{eta}} left"
        ))
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
        let bar = self.multi.add(ProgressBar::new(units.max(1)));
        bar.set_style(style);
        bar.set_prefix(phase.name());
        *self.bar.borrow_mut() = Some(bar);
    }

    fn progress(&self, _phase: Phase, done: u64) {
        if let Some(b) = self.bar.borrow().as_ref() {
            b.set_position(done);
        }
    }

    fn phase_finished(&self, phase: Phase, units: u64, seconds: f64) {
        if let Some(b) = self.bar.borrow_mut().take() {
            b.set_style(
                ProgressStyle::with_template("{prefix:>9} {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            b.finish_with_message(format!(
                "{units} in {seconds:.2} s: {:.0} per second",
                units as f64 / seconds.max(1e-9)
            ));
        }
        let _ = phase;
    }
}

fn bench_cmd(uri: &str, args: &BenchArgs, out: &mut dyn Write) -> Result<()> {
    let private = process_private(uri)?;
    if !private && !args.force {
        bail!(
            "ftl bench formats and overwrites {uri}; add --force to destroy its data (or leave \
             out --device and $ZNS_DEVICE to use {BENCH_DEFAULT_URI})"
        );
    }
    if !(args.warmup.is_finite() && args.warmup >= 0.0) {
        bail!("--warmup {}: must be a number of capacities >= 0", args.warmup);
    }
    if !(args.measure.is_finite() && args.measure > 0.0) {
        bail!("--measure {}: must be a number of capacities > 0", args.measure);
    }
    let workload = args.workload.with_zipf_theta(args.zipf_theta);
    let default_heads = match args.ftl.write_mode {
        WriteModeArg::Write => args.threads,
        WriteModeArg::Append => 1,
    };
    let opts = BenchOptions {
        workload,
        read_pct: args.read_pct,
        threads: args.threads,
        config: args.ftl.config(default_heads),
        warmup: args.warmup,
        measure: args.measure,
        reads: args.reads,
        seed: args.seed,
    };
    let bars = Bars::new(!args.json && std::io::stderr().is_terminal());
    let owned = uri.to_string();
    let report = bench::run(&|| zns_device::open(&owned), &opts, &bars)
        .with_context(|| format!("FTL benchmark on {uri}"))?;
    let v = bench_json(uri, &opts, &report);
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
    } else {
        bench_table(&opts, &report, out)?;
    }
    Ok(())
}

fn bench_json(uri: &str, o: &BenchOptions, r: &BenchReport) -> Value {
    let c = &o.config;
    let w = &r.window;
    let theta = match o.workload {
        Workload::Zipfian { theta } => Some(theta),
        _ => None,
    };
    let phases: Vec<Value> = r
        .phases
        .iter()
        .map(|p| {
            json!({
                "phase": p.phase.name(),
                "units": p.units,
                "mixed_reads": p.extra_reads,
                "seconds": p.seconds,
                "cpu_seconds": p.cpu_seconds,
            })
        })
        .collect();
    let gc = json!({
        "victims": w.gc_victims,
        "blocks_copied": w.gc_blocks_copied,
        "copy_commands": w.gc_copy_commands,
        "seconds": w.gc_seconds,
        "user_waits": w.user_waits,
        "zone_resets": w.zone_resets,
    });
    let fields: Vec<(&str, Value)> = vec![
        ("device", json!(uri)),
        ("workload", json!(o.workload.name())),
        ("zipf_theta", json!(theta)),
        ("read_pct", json!(o.read_pct)),
        ("threads", json!(o.threads)),
        ("op", json!(c.op)),
        ("policy", json!(c.policy.name())),
        ("streams", json!(streams_name(c.streams))),
        ("write_mode", json!(mode_name(c.write_mode))),
        ("heads_per_stream", json!(c.heads_per_stream)),
        ("block_size", json!(r.block_size)),
        ("logical_blocks", json!(r.logical_blocks)),
        ("meta_zones", json!(r.meta_zones)),
        ("waf", json!(r.waf)),
        ("waf_total", json!(r.waf_total)),
        (
            "spare",
            json!({
                "nominal": r.spare.nominal,
                "device": r.spare.device,
                "effective": r.spare.effective,
                "greedy_waf_nominal": r.spare.greedy_waf_nominal,
                "greedy_waf_effective": r.spare.greedy_waf_effective,
                "waf_vs_greedy_effective": r.waf / r.spare.greedy_waf_effective,
            }),
        ),
        ("map_bytes_per_block", json!(r.map_bytes_per_block)),
        ("write_iops", json!(r.write_iops)),
        ("read_iops", json!(r.read_iops)),
        ("raw_write_iops", json!(r.raw_write_iops)),
        ("raw_read_iops", json!(r.raw_read_iops)),
        ("raw_write_iops_before", json!(r.raw_write_iops_before)),
        ("raw_write_iops_after", json!(r.raw_write_iops_after)),
        ("raw_read_iops_before", json!(r.raw_read_iops_before)),
        ("raw_read_iops_after", json!(r.raw_read_iops_after)),
        ("write_vs_raw", json!(r.write_iops / r.raw_write_iops)),
        ("read_vs_raw", json!(r.read_iops / r.raw_read_iops)),
        ("ns_per_io", json!(r.ns_per_io)),
        ("ns_per_io_write", json!(r.ns_per_io_write)),
        ("ns_per_io_read", json!(r.ns_per_io_read)),
        ("wall_ns_per_io_write", json!(r.wall_ns_per_io_write)),
        ("wall_ns_per_io_read", json!(r.wall_ns_per_io_read)),
        ("write_vs_raw_cpu", json!(r.write_vs_raw_cpu)),
        ("read_vs_raw_cpu", json!(r.read_vs_raw_cpu)),
        ("first_pass_gc_victims", json!(r.first_pass_gc_victims)),
        ("steady_write_iops", json!(r.steady_write_iops)),
        ("steady_read_iops", json!(r.steady_read_iops)),
        ("gc", gc),
        ("user_blocks_measured", json!(w.user_blocks_written)),
        ("data_blocks_measured", json!(w.data_blocks_written)),
        ("meta_blocks_measured", json!(w.meta_blocks_written)),
        ("warmup", json!(o.warmup)),
        ("measure", json!(o.measure)),
        ("reads", json!(o.reads)),
        ("seed", json!(o.seed)),
        ("phases", Value::Array(phases)),
        ("duration_seconds", json!(r.seconds)),
    ];
    Value::Object(fields.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

fn bench_table(o: &BenchOptions, r: &BenchReport, out: &mut dyn Write) -> Result<()> {
    let c = &o.config;
    writeln!(
        out,
        "{} on {}: {} blocks exposed, OP {:.1} %, {} policy, {} streams, {} mode, {} thread(s)",
        o.workload,
        r.device,
        r.logical_blocks,
        c.op * 100.0,
        c.policy.name(),
        streams_name(c.streams),
        mode_name(c.write_mode),
        o.threads
    )?;
    writeln!(
        out,
        "{:<8} {:>12} {:>12} {:>8} {:>12} {:>12}",
        "4 KiB", "FTL IOPS", "raw IOPS", "FTL/raw", "FTL/raw CPU", "+CPU ns/I/O"
    )?;
    for (name, f, raw, cpu, ns) in [
        ("write", r.write_iops, r.raw_write_iops, r.write_vs_raw_cpu, r.ns_per_io_write),
        ("read", r.read_iops, r.raw_read_iops, r.read_vs_raw_cpu, r.ns_per_io_read),
    ] {
        writeln!(out, "{name:<8} {f:>12.0} {raw:>12.0} {:>8.3} {cpu:>12.3} {ns:>12.1}", f / raw)?;
    }
    writeln!(
        out,
        "raw IOPS: the runs before and after the FTL's together (writes {:.0} and {:.0}, reads \
         {:.0} and {:.0})",
        r.raw_write_iops_before,
        r.raw_write_iops_after,
        r.raw_read_iops_before,
        r.raw_read_iops_after
    )?;
    writeln!(
        out,
        "steady state ({} capacities of warm-up, {} measured): WAF {:.3} ({:.3} with metadata), \
         {:.0} writes/s, {:.0} reads/s, {} zones reclaimed",
        o.warmup,
        o.measure,
        r.waf,
        r.waf_total,
        r.steady_write_iops,
        r.steady_read_iops,
        r.window.gc_victims
    )?;
    let sp = &r.spare;
    writeln!(
        out,
        "spare: {:.1} % asked, {:.1} % in the data zones, {:.1} % effective (invalid blocks GC \
         worked with, time-averaged); greedy's analytic WAF for uniform writes: {:.3} at the \
         effective spare ({:.3} at the nominal), measured/analytic {:.3}",
        sp.nominal * 100.0,
        sp.device * 100.0,
        sp.effective * 100.0,
        sp.greedy_waf_effective,
        sp.greedy_waf_nominal,
        r.waf / sp.greedy_waf_effective
    )?;
    writeln!(out, "map RAM: {:.2} bytes per exposed block", r.map_bytes_per_block)?;
    if r.first_pass_gc_victims > 0 {
        writeln!(
            out,
            "note: garbage collection ran during the first pass ({} zones): its IOPS include it",
            r.first_pass_gc_victims
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parse() {
        assert_eq!(parse_op("10"), Ok(0.10));
        assert_eq!(parse_op("7%"), Ok(0.07));
        assert!(parse_op("0").is_err() && parse_op("x").is_err() && parse_op("inf").is_err());
        assert!(parse_policy("greedy").is_ok() && parse_policy("lru").is_err());
        assert!(parse_workload("hot-cold-90-10").is_ok() && parse_workload("hot").is_err());
        assert!(process_private("emu:tiny").unwrap());
        assert!(!process_private("emu:file=x.img").unwrap());
        assert!(!process_private("zbd:/dev/nvme0n1").unwrap());
        assert!(process_private("bogus").is_err());
    }
}
