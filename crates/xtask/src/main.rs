//! znskit developer automation, run as `cargo xtask COMMAND`.
//!
//! - `cargo xtask vmtest`: boots a QEMU guest with QEMU's emulated ZNS
//!   controller and runs the device conformance suite against it through
//!   every backend that reaches a real controller: io_uring passthrough
//!   (`ng:`), the kernel's zoned block device (`zbd:`), and the user-space
//!   driver over PCIe (`pcie:`) after unbinding the kernel's driver. See
//!   `cargo xtask vmtest --help`. The same guest runs the differential
//!   test (`zns-differential`) on `ng:` and `pcie:`.
//! - `cargo xtask clients`: real clients on znskit's exports in a guest:
//!   the kernel's nvme-tcp, nvme-cli, blkzone, fio, fio's own zoned block
//!   device tests, btrfs and zonefs on `zns serve`; ext4, fio, SQLite and
//!   fsck on `zns ftl serve` as the guest's disk; then f2fs on `zns serve`
//!   in a second guest on Debian's generic kernel, and in a third ext4 on
//!   a conventional twin beside f2fs on its ZNS twin, one fio job on both.
//! - `cargo xtask nvmet`: znskit's `tcp:` initiator and the conformance
//!   suite against the guest kernel's own NVMe/TCP target (nvmet-tcp on a
//!   zoned null_blk).
//! - `cargo xtask ublk`: znskit devices as the guest kernel's block
//!   devices through ublk: `zns ublk` on an emulated ZNS SSD (a
//!   host-managed zoned device: blkzone, dd with direct I/O), then `zns
//!   ftl ublk` (ext4, fsck); kill -9 and takeover cycles (user recovery);
//!   fio's zbd tests, zonefs, f2fs, btrfs on the zoned device, ext4 with
//!   SQLite on the FTL's.
//! - `cargo xtask engines`: in the same guest, queue-depth-1 latency of
//!   4 KiB random reads, sequential writes and zone appends through
//!   `pcie:`, `ng:`, `zbd:` and fio's psync, libaio and io_uring engines;
//!   writes `docs/engines.json` and `docs/engines.svg`. See
//!   `cargo xtask engines --help`.

mod apps;
mod apps_dilation;
mod apps_guest;
mod apps_host_term;
mod apps_mysql;
mod apps_tenants;
mod apps_tenants_plot;
mod args;
mod clients;
mod cpio;
mod crash;
mod crate_graph;
mod dhchap;
mod elf;
mod engines;
mod f2fs;
mod fidelity;
mod fio_zbd;
mod guest;
mod guest_clock;
mod kernel;
mod nvme_cli;
mod nvmet;
mod probe;
mod server;
mod source;
mod twins;
mod ublk;
mod ublk_clients;
mod ublk_crash;
mod ublk_perf;
mod vmtest;
mod zonefs;

use std::fmt;
use std::path::Path;
use std::process::{Command, ExitCode};

use clap::{CommandFactory, Parser, Subcommand};

/// An error with a message for the person running the task.
#[derive(Debug)]
pub struct Error(String);

impl Error {
    /// An error saying `msg`.
    pub fn new(msg: impl Into<String>) -> Self {
        Error(msg.into())
    }

    /// A file-system error about `path`.
    pub fn io(path: &Path, e: std::io::Error) -> Self {
        Error(format!("{}: {e}", path.display()))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Result of the tasks.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Runs `cmd`, failing with `what` when it cannot start or exits non-zero.
pub fn run_checked(cmd: &mut Command, what: &str) -> Result<()> {
    let status = cmd.status().map_err(|e| Error::new(format!("{what}: {e}")))?;
    if !status.success() {
        return Err(Error::new(format!("{what} failed ({status})")));
    }
    Ok(())
}

/// znskit developer automation: QEMU guests that run znskit's devices and
/// exports against real kernels and clients, and the workspace's checks.
#[derive(Debug, Parser)]
#[command(
    name = "cargo xtask",
    bin_name = "cargo xtask",
    disable_help_subcommand = true,
    after_help = "Each command's options: cargo xtask COMMAND --help"
)]
struct Cli {
    #[command(subcommand)]
    task: Option<Task>,
}

/// The commands.
#[derive(Debug, Subcommand)]
enum Task {
    Vmtest(vmtest::Args),
    Clients(clients::Args),
    Crash(crash::Args),
    Nvmet(nvmet::Args),
    Ublk(ublk::Args),
    /// 4 KiB random reads through ublk, NBD, nvme-tcp and null_blk (ublk --parts perf)
    ///
    /// 4 KiB random reads at QD 1 and 32 through ublk, NBD, nvme-tcp and
    /// null_blk in the guest of `cargo xtask ublk`, which this is with
    /// `--parts perf`; writes docs/ublk-perf.json.
    #[command(verbatim_doc_comment, mut_arg("parts", |a| a.default_value(ublk_perf::PART)))]
    UblkPerf(ublk::Args),
    Apps(Box<apps::Args>),
    /// Path (d) of the fidelity table: zns characterize in a guest over nvme-tcp
    #[command(disable_help_flag = true)]
    Fidelity(Raw),
    CrateGraph(crate_graph::Args),
    Engines(engines::Args),
}

/// The arguments of a command that parses its own (`--help` included).
#[derive(Debug, clap::Args)]
struct Raw {
    #[arg(value_name = "OPTIONS", trailing_var_arg = true, allow_hyphen_values = true)]
    args: Vec<String>,
}

/// Runs a command whose own parser gives its options, or `None` after
/// printing its help.
fn with<O>(parsed: Result<Option<O>>, run: impl FnOnce(&O) -> Result<()>) -> Result<()> {
    match parsed? {
        Some(o) => run(&o),
        None => Ok(()),
    }
}

/// Runs the command.
fn run(task: Option<Task>) -> Result<()> {
    match task {
        None => Cli::command()
            .print_long_help()
            .map_err(|e| Error::new(format!("cannot print the help: {e}"))),
        Some(Task::Vmtest(a)) => vmtest::run(&a.options()),
        Some(Task::Apps(a)) => apps::run(&a.options()),
        Some(Task::Fidelity(raw)) => with(fidelity::parse(raw.args.into_iter()), fidelity::run),
        Some(Task::Clients(a)) => clients::run(&a),
        Some(Task::Crash(a)) => crash::run(&a),
        Some(Task::Nvmet(a)) => nvmet::run(&a),
        Some(Task::Ublk(a) | Task::UblkPerf(a)) => ublk::run(&a),
        Some(Task::CrateGraph(a)) => crate_graph::run(&a),
        Some(Task::Engines(a)) => engines::run(&a),
    }
}

fn main() -> ExitCode {
    let result = args::parse_from::<Cli>(std::env::args()).and_then(|cli| match cli {
        Some(cli) => run(cli.task),
        None => Ok(()),
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses `args` (no program name); a help asked for is checked for its
    /// usage line rather than printed.
    fn parse(args: &[&str]) -> Result<Option<Cli>> {
        let argv = std::iter::once("cargo xtask").chain(args.iter().copied());
        args::settle(Cli::try_parse_from(argv), |e| {
            let help = e.to_string();
            assert!(help.contains("Usage: cargo xtask"), "{help}");
        })
    }

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    /// Every `cargo xtask` command line of `scripts/test-all` parses.
    #[test]
    fn the_command_lines_of_test_all_parse() {
        let script = include_str!("../../../scripts/test-all");
        let lines: Vec<&str> =
            script.lines().map(str::trim).filter(|l| l.starts_with("cargo xtask ")).collect();
        assert!(lines.len() >= 6, "{lines:?}");
        for l in lines {
            let args: Vec<&str> = l.split_whitespace().skip(2).collect();
            match parse(&args) {
                Ok(Some(_)) => {}
                other => panic!("{l}: {:?}", other.err()),
            }
        }
    }

    /// The name each command had before clap parsed the command line.
    fn name(task: &Task) -> &'static str {
        match task {
            Task::Vmtest(_) => "vmtest",
            Task::Clients(_) => "clients",
            Task::Crash(_) => "crash",
            Task::Nvmet(_) => "nvmet",
            Task::Ublk(_) => "ublk",
            Task::UblkPerf(_) => "ublk-perf",
            Task::Apps(_) => "apps",
            Task::Fidelity(_) => "fidelity",
            Task::CrateGraph(_) => "crate-graph",
            Task::Engines(_) => "engines",
        }
    }

    #[test]
    fn each_command_keeps_its_name() {
        let names =
            Cli::command().get_subcommands().map(|c| c.get_name().to_string()).collect::<Vec<_>>();
        assert_eq!(names.len(), 10, "{names:?}");
        for n in &names {
            let task = parse(&[n]).unwrap().unwrap().task.unwrap();
            assert_eq!(name(&task), n);
        }
        assert!(matches!(parse(&[]), Ok(Some(Cli { task: None }))));
        assert!(parse(&["--help"]).unwrap().is_none());
        assert!(parse(&["clients", "--help"]).unwrap().is_none());
        let e = parse(&["vmtset"]).unwrap_err().to_string();
        assert!(e.contains("vmtset"), "{e}");
        assert!(parse(&["crash", "--cycles", "0"]).is_err());
        assert!(parse(&["vmtest", "--help"]).unwrap().is_none());
        assert!(parse(&["apps", "--help"]).unwrap().is_none());
        assert!(parse(&["vmtest", "--runs", "floppy"]).is_err());
        assert!(parse(&["apps", "--fs", "btrfs"]).is_err());
    }

    #[test]
    fn commands_with_their_own_parser_get_every_argument() {
        let args = ["fidelity", "--help", "--runs", "ng-pow2", "-x"];
        let raw = match parse(&args).unwrap().unwrap().task.unwrap() {
            Task::Fidelity(r) => r.args,
            other => panic!("{other:?}"),
        };
        assert_eq!(raw, &args[1..]);
        let task = parse(&["fidelity"]).unwrap().unwrap().task;
        assert!(
            matches!(task, Some(Task::Fidelity(Raw { ref args })) if args.is_empty()),
            "{task:?}"
        );
    }
}
