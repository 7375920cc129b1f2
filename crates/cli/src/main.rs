//! `zns`: the znskit command line.
//!
//! Every command works on the device `--device URI` names (default
//! `emu:zn540`, or `$ZNS_DEVICE`). Output goes to stdout; a failure prints
//! one line on stderr, `zns: <what failed>`, and exits with status 1 (2 for
//! bad command-line usage).

mod bench;
mod characterize;
mod emu;
mod ezns;
mod fdp;
mod fit;
mod ftl;
mod ftl_serve;
mod identify;
mod io;
mod list;
mod log;
mod metrics;
mod nodata;
mod num;
mod range;
mod report;
mod serve;
mod top;
mod trace;
mod trace_view;
mod ublk;
mod zrwa;

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use clap::parser::ValueSource;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use zns_device::uri::SCHEMES;
use zns_device::{DeviceError, Target, ZoneAction, ZonedDevice, DEFAULT_URI};

use range::ZoneTarget;

/// Command line of znskit, a user-space storage stack for NVMe Zoned
/// Namespace SSDs.
#[derive(Debug, Parser)]
#[command(name = "zns", version, about, long_about = None)]
struct Cli {
    /// Device URI (the help text is generated from zns-device's list of
    /// URI forms: see `command`).
    #[arg(long, short = 'd', global = true, env = "ZNS_DEVICE", default_value = DEFAULT_URI,
          action = clap::ArgAction::Append)]
    device: Vec<String>,

    /// Log to stderr at this level (error, warn, info, debug, trace); also
    /// `ZNS_LOG`.
    #[arg(long, global = true, value_name = "LEVEL")]
    log: Option<String>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List the emulator's built-in profiles and the NVMe devices on this machine.
    List,
    /// Print the controller, namespace and ZNS identification of the device.
    Identify {
        /// Machine-readable JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print the controller's health log pages: SMART (02h), and the OCP
    /// extended SMART page (C0h) with the bytes the media took.
    Log {
        #[command(subcommand)]
        command: log::LogCommand,
    },
    /// Flexible Data Placement of the device's namespace: status (its
    /// reclaim unit handles and statistics), update (new reclaim units),
    /// events.
    Fdp {
        #[command(subcommand)]
        command: fdp::FdpCommand,
    },
    /// Report zones.
    ReportZones(report::ReportArgs),
    /// Zone management: open, close, finish, reset or offline a zone
    /// (--zone N by index, --lba SLBA by start LBA) or every zone (--all);
    /// open with a zone random write area (--zrwa) and commit it.
    Zone {
        #[command(subcommand)]
        action: ZoneCommand,
    },
    /// Read blocks to a file or stdout.
    Read(io::ReadArgs),
    /// Write a file or stdin at an LBA (a zone's write pointer), padded to whole blocks.
    Write(io::WriteArgs),
    /// Zone Append a file or stdin to a zone; prints the LBA the data landed at.
    Append(io::AppendArgs),
    /// Write zeroes to blocks at an LBA (a zone's write pointer), without data from the host.
    WriteZeroes(nodata::WriteZeroesArgs),
    /// Copy blocks from source ranges to an LBA (a zone's write pointer) on the device (NVMe Copy).
    Copy(nodata::CopyArgs),
    /// Persistent emulated devices and the emulator's profiles.
    Emu {
        #[command(subcommand)]
        command: emu::EmuCommand,
    },
    /// Measure the device's performance model (latency, scaling, zone
    /// management by occupancy, interference) into results.json and an
    /// HTML report; or compare two runs; or, with `--suite compare`, a ZNS
    /// device against a conventional one and one with FDP.
    Characterize(Box<characterize::CharacterizeArgs>),
    /// Benchmarks: software overhead per I/O.
    Bench {
        #[command(subcommand)]
        command: bench::BenchCommand,
    },
    /// Export the devices (`--device`, one or more) as the namespaces of
    /// an NVMe/TCP subsystem for the kernel's nvme-tcp, nvme-cli and fio,
    /// until SIGINT/SIGTERM.
    Serve(serve::ServeArgs),
    /// Make a DH-HMAC-CHAP secret for `zns serve --dhchap-secret` and
    /// `nvme connect --dhchap-secret` (the form nvme gen-dhchap-key prints).
    GenDhchapKey(serve::GenKeyArgs),
    /// The host-side FTL on the device: format, stats, check, bench, serve, ublk.
    Ftl {
        #[command(subcommand)]
        command: FtlCommands,
    },
    /// A live view of the device in the terminal: its zone map, open and
    /// active zones against their limits, IOPS and latency percentiles,
    /// host and media bytes and write amplification; of --device, or of a
    /// running server's --metrics endpoint. q quits.
    Top(top::TopArgs),
    /// Serve the device as a local block device through ublk (zoned,
    /// host-managed, where the device is) until SIGINT/SIGTERM; prints
    /// its /dev/ublkbN first. Needs root and `modprobe ublk_drv`.
    Ublk(ublk::UblkArgs),
    /// Elastic logical zones (eZNS): an instance's status; experiments
    /// against static striping. Tenants are devices:
    /// ezns:config=PATH,tenant=NAME.
    Ezns {
        #[command(subcommand)]
        command: ezns::EznsCommand,
    },
    /// Trace files of --trace: draw one as an SVG timeline.
    Trace {
        #[command(subcommand)]
        command: trace_view::TraceCommand,
    },
}

/// `zns ftl`'s commands: those of `ftl`, and `ublk`.
#[derive(Debug, Subcommand)]
enum FtlCommands {
    #[command(flatten)]
    Ftl(ftl::FtlCommand),
    /// Serve the FTL as a local block device through ublk until
    /// SIGINT/SIGTERM, which removes it and closes the FTL with a
    /// checkpoint; prints its /dev/ublkbN first. Needs root and
    /// `modprobe ublk_drv`.
    Ublk(ublk::UblkArgs),
}

#[derive(Debug, Subcommand)]
enum ZoneCommand {
    /// Open zones explicitly (Empty or Closed → Explicitly Opened); with
    /// --zrwa, one zone with a zone random write area.
    Open(OpenArgs),
    /// Close open zones (→ Closed).
    Close(ZoneTarget),
    /// Finish zones (→ Full).
    Finish(ZoneTarget),
    /// Reset zones (→ Empty; their data is gone).
    Reset(ZoneTarget),
    /// Take Read Only zones offline (→ Offline).
    Offline(ZoneTarget),
    /// Commit a zone random write area (Flush Explicit ZRWA Range): the
    /// zone's write pointer moves past the last LBA committed.
    Commit(zrwa::CommitArgs),
}

/// Arguments of `zns zone open`.
#[derive(Debug, clap::Args)]
struct OpenArgs {
    #[command(flatten)]
    target: ZoneTarget,
    /// Allocate a zone random write area to the zone (ZRWA Allocate):
    /// writes may then land anywhere in the window at its write pointer
    /// until `zns zone commit` commits them.
    #[arg(long, conflicts_with = "all")]
    zrwa: bool,
}

impl ZoneCommand {
    /// The action and target, or for `commit` its arguments.
    fn parts(&self) -> Result<(ZoneAction, &ZoneTarget), &zrwa::CommitArgs> {
        Ok(match self {
            ZoneCommand::Open(o) => (ZoneAction::Open, &o.target),
            ZoneCommand::Close(t) => (ZoneAction::Close, t),
            ZoneCommand::Finish(t) => (ZoneAction::Finish, t),
            ZoneCommand::Reset(t) => (ZoneAction::Reset, t),
            ZoneCommand::Offline(t) => (ZoneAction::Offline, t),
            ZoneCommand::Commit(args) => return Err(args),
        })
    }
}

/// The command line, with the `--device` help generated from the list of
/// URI forms the parser accepts (`zns_device::uri::URI_FORMS`).
fn command() -> clap::Command {
    let cmd =
        Cli::command().mut_arg("device", |a| a.help(device_help()).long_help(device_long_help()));
    // `zns ftl bench` formats a device of its own unless one is named, so
    // its help states that default instead of the global one. An argument
    // a subcommand already has is not propagated over it.
    let global = cmd.get_arguments().find(|a| a.get_id() == "device").cloned();
    let Some(global) = global else { return cmd };
    let bench = global.default_value(ftl::BENCH_DEFAULT_URI);
    cmd.mut_subcommand("ftl", |f| f.mut_subcommand("bench", |b| b.arg(bench)))
}

/// `-h`: one line naming every scheme.
fn device_help() -> String {
    let schemes: Vec<String> = SCHEMES.iter().map(|s| format!("{s}:...")).collect();
    format!("Device URI: {} (--help lists every form)", schemes.join(", "))
}

/// `--help`: every form and what it opens.
fn device_long_help() -> String {
    format!(
        "Device URI (`zns serve` takes several: one namespace each). The forms:\n{}",
        zns_device::uri::help_text()
    )
}

fn main() -> ExitCode {
    // Tenants of eZNS instances are devices like any other.
    zns_ezns::register();
    let matches = command().get_matches();
    // `zns ftl bench` picks its own device unless one was asked for.
    let device_given =
        matches.value_source("device").is_some_and(|s| s != ValueSource::DefaultValue);
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let serving = matches!(
        cli.command,
        Command::Serve(_)
            | Command::Ublk(_)
            | Command::Ftl {
                command: FtlCommands::Ftl(ftl::FtlCommand::Serve(_)) | FtlCommands::Ublk(_)
            }
    );
    // Servers report dropped connections and failed requests; every
    // command says when a device image opened read-only (its zone state
    // rebuilt from the data because a zone-state slot is damaged).
    init_logging(cli.log.as_deref(), if serving { "warn" } else { "off,zns_emulator::image=warn" });
    let mut out = std::io::stdout().lock();
    match run(cli, device_given, &mut out).and_then(|()| out.flush().map_err(Into::into)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("zns: {}", render(&e));
            ExitCode::FAILURE
        }
    }
}

fn init_logging(level: Option<&str>, default: &str) {
    use tracing_subscriber::EnvFilter;
    let filter = match level {
        Some(l) => EnvFilter::try_new(l),
        None => EnvFilter::try_from_env("ZNS_LOG").or_else(|_| EnvFilter::try_new(default)),
    }
    .unwrap_or_else(|_| EnvFilter::new("warn"));
    // Colour codes only where a terminal shows them, never into a log file.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .try_init();
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// One line for the user: a command failure names the command, its LBA in
/// hex and the status by its specification name.
fn render(e: &anyhow::Error) -> String {
    let mut context: Vec<String> = Vec::new();
    for cause in e.chain() {
        if let Some(DeviceError::Nvme { status, op, lba }) = cause.downcast_ref::<DeviceError>() {
            context.push(format!("{}: {status}", op.describe(*lba, true)));
            return context.join(": ");
        }
        if cause.downcast_ref::<DeviceError>().is_some() {
            context.push(cause.to_string());
            return context.join(": ");
        }
        context.push(cause.to_string());
    }
    format!("{e:#}")
}

/// Opens the device of `--device`.
fn open(uri: &str) -> Result<std::sync::Arc<dyn ZonedDevice>> {
    Ok(zns_device::open(uri)?)
}

fn run(cli: Cli, device_given: bool, out: &mut dyn Write) -> Result<()> {
    let several = match &cli.command {
        Command::Serve(_) => true,
        Command::Characterize(args) => args.suite == characterize::SuiteArg::Compare,
        _ => false,
    };
    if !several && cli.device.len() > 1 {
        anyhow::bail!(
            "--device is given {} times; only `zns serve` and `zns characterize --suite compare` \
             take several devices",
            cli.device.len()
        );
    }
    let device = cli.device.first().cloned().unwrap_or_else(|| DEFAULT_URI.to_string());
    match cli.command {
        Command::Serve(args) => {
            let traced = trace::traced_uris(&cli.device, args.trace.as_deref())?;
            serve::run(&traced, device_given, &args, out)
        }
        Command::GenDhchapKey(args) => serve::gen_key(&args, out),
        Command::Ftl { command: FtlCommands::Ftl(command) } => {
            ftl::run(&device, device_given, command, out)
        }
        Command::Ftl { command: FtlCommands::Ublk(args) } => {
            ublk::run_ftl(&trace::traced_uri(&device, args.trace.as_deref())?, &args, out)
        }
        Command::Ublk(args) => {
            ublk::run(&trace::traced_uri(&device, args.trace.as_deref())?, &args, out)
        }
        Command::Top(args) => top::run(&device, &args, out),
        Command::List => list::run(out),
        Command::Trace { command } => trace_view::run(&command, out),
        Command::Emu { command } => emu::run(command, out),
        Command::Bench { command } => bench::run(command, out),
        Command::Characterize(args) if args.suite == characterize::SuiteArg::Compare => {
            characterize::run_compare(&cli.device, device_given, &args, out)
        }
        Command::Characterize(args) => {
            characterize::run(&trace::traced_uri(&device, args.trace.as_deref())?, &args, out)
        }
        Command::Ezns { command } => ezns::run(command, &device, device_given, out),
        Command::Identify { json } => identify::run(open(&device)?.as_ref(), json, out),
        Command::Log { command } => log::run(open(&device)?.as_ref(), &command, out),
        Command::Fdp { command } => fdp::run(open(&device)?.as_ref(), &command, out),
        Command::ReportZones(args) => report::run(open(&device)?.as_ref(), &args, out),
        Command::Read(args) => io::read(open(&device)?.as_ref(), &args, out),
        Command::Write(args) => io::write(open(&device)?.as_ref(), &args, out),
        Command::Append(args) => io::append(open(&device)?.as_ref(), &args, out),
        Command::WriteZeroes(args) => nodata::write_zeroes(open(&device)?.as_ref(), &args, out),
        Command::Copy(args) => nodata::copy(open(&device)?.as_ref(), &args, out),
        Command::Zone { action } => {
            let dev = open(&device)?;
            zone(dev.as_ref(), &action, out)
        }
    }
}

fn zone(dev: &dyn ZonedDevice, cmd: &ZoneCommand, out: &mut dyn Write) -> Result<()> {
    let (action, target) = match cmd.parts() {
        Ok(parts) => parts,
        Err(commit) => return zrwa::commit(dev, commit, out),
    };
    // "reset", as in the device's own error lines ("reset zone at LBA 0x0").
    let verb = action.kind().name().trim_start_matches("zone ");
    let slba = target.resolve(dev.info(), verb)?;
    if let (ZoneCommand::Open(OpenArgs { zrwa: true, .. }), Some(slba)) = (cmd, slba) {
        return zrwa::open(dev, slba, out);
    }
    let mut q = dev.queue(2)?;
    match slba {
        Some(slba) => {
            q.zone_action(action, Target::Zone(slba))?;
            let z = q.zone(slba)?;
            writeln!(out, "zone {} at LBA {:#x}: {}", z.index, z.start, z.state)?;
        }
        None => {
            q.zone_action(action, Target::All)?;
            writeln!(out, "{}: done", action.kind().describe(None, true))?;
        }
    }
    Ok(())
}
