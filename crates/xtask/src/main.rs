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
mod apps_guest;
mod apps_mysql;
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
mod kernel;
mod nvme_cli;
mod nvmet;
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

const USAGE: &str = "usage: cargo xtask <command>

commands:
  vmtest   run the device conformance suite and the differential test in a QEMU
           guest against QEMU's ZNS controller (ng:, zbd: and pcie: backends);
           `cargo xtask vmtest --help`
  clients  real clients in a QEMU guest: the kernel's nvme-tcp, nvme-cli, blkzone,
           fio, fio's t/zbd tests, btrfs and zonefs on `zns serve`; ext4, fio,
           SQLite and fsck on `zns ftl serve` attached as the guest's disk; f2fs
           in a second guest (Debian's generic kernel); ext4 on a conventional twin
           and f2fs on its ZNS twin, one fio job on both, in a third;
           `cargo xtask clients --help`
  crash    crash consistency through ext4: the guest's kernel on `zns ftl serve` (NBD)
           over an image, the server killed with SIGKILL in each cycle, fsck and
           every fsynced file checked after recovery; `cargo xtask crash --help`
  nvmet    znskit's NVMe/TCP initiator against the guest kernel's own target
           (nvmet-tcp on a zoned null_blk): the conformance suite, nvmet's known
           divergences accepted exactly; `cargo xtask nvmet --help`
  ublk     znskit devices as the guest kernel's block devices through ublk: zns ublk
           on an emulated ZNS SSD (host-managed zoned: blkzone, dd), zns ftl ublk
           (mkfs.ext4, fsck), a conventional namespace (ext4, blkdiscard, -z);
           kill -9 and takeover cycles; fio's zbd tests, zonefs,
           f2fs, btrfs, ext4 with SQLite; `cargo xtask ublk --help`
  ublk-perf  4 KiB random reads at QD 1 and 32 through ublk, NBD, nvme-tcp and
           null_blk in that guest (`cargo xtask ublk --parts perf`); writes
           docs/ublk-perf.json
  apps     RocksDB's db_bench and MariaDB with sysbench in a guest on f2fs over a ZNS
           model and on ext4/XFS over its conventional twin (nvme-tcp to zns serve);
           writes apps.json, apps.svg;
           `cargo xtask apps --help` (`--smoke`: one short run per side)
  fidelity path (d) of the real-time fidelity table: zns characterize in a guest
           through the kernel's nvme-tcp to the ZN540 model on `zns serve`, dilated
           by the guest's measured slowdown, beside the host's own paths;
           `cargo xtask fidelity --help`
  crate-graph  the workspace's crate graph from `cargo metadata`, written into
           docs/architecture.md (a test checks it); `--check` only compares
  engines  compare queue-depth-1 latency of znskit's backends and fio's engines
           in that guest; writes docs/engines.json and docs/engines.svg;
           `cargo xtask engines --help`";

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let result = match args.next().as_deref() {
        Some("vmtest") => vmtest::Options::parse(args).and_then(|o| match o {
            Some(o) => vmtest::run(&o),
            None => Ok(()),
        }),
        Some("crate-graph") => crate_graph::run(args),
        Some("clients") => clients::parse(args).and_then(|o| match o {
            Some(o) => clients::run(&o),
            None => Ok(()),
        }),
        Some("crash") => crash::parse(args).and_then(|o| match o {
            Some(o) => crash::run(&o),
            None => Ok(()),
        }),
        Some("nvmet") => nvmet::parse(args).and_then(|o| match o {
            Some(o) => nvmet::run(&o),
            None => Ok(()),
        }),
        Some("ublk") => ublk::parse(args).and_then(|o| match o {
            Some(o) => ublk::run(&o),
            None => Ok(()),
        }),
        Some("ublk-perf") => {
            ublk::parse(["--parts".to_string(), "perf".to_string()].into_iter().chain(args))
                .and_then(|o| match o {
                    Some(o) => ublk::run(&o),
                    None => Ok(()),
                })
        }
        Some("apps") => apps::parse(args).and_then(|o| match o {
            Some(o) => apps::run(&o),
            None => Ok(()),
        }),
        Some("fidelity") => fidelity::parse(args).and_then(|o| match o {
            Some(o) => fidelity::run(&o),
            None => Ok(()),
        }),
        Some("engines") => engines::Options::parse(args).and_then(|o| match o {
            Some(o) => engines::run(&o),
            None => Ok(()),
        }),
        Some("-h" | "--help") | None => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Some(other) => Err(Error::new(format!("unknown command {other:?}\n{USAGE}"))),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}
