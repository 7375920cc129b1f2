//! `cargo xtask clients`: real clients on znskit's exports, inside a QEMU
//! guest (Debian's kernel and binaries, busybox initramfs).
//!
//! On the host the task starts two servers (the `zns` binary, release
//! build), both on loopback:
//! - `zns serve` with an emulated ZN540 cut to 16 zones (its timing model
//!   on the real clock), `emu:small` (4 MiB zones) and fio's test device
//!   ([`fio_zbd::PROFILE`], 1 MiB zones) as zoned namespaces, over
//!   NVMe/TCP. In the guest the kernel's `nvme-tcp` connects to it
//!   through QEMU's user-mode network (the host's loopback is 10.0.2.2
//!   there): `nvme discover`, `nvme connect`, nvme-cli's `list`,
//!   `id-ctrl`, `zns id-ctrl`, `zns id-ns`, `zns report-zones`,
//!   `zns reset-zone` and `zns zone-append`; `blkzone` report, open,
//!   close, finish, reset; fio's zoned workloads with psync, libaio and
//!   io_uring and crc32c verification (mq-deadline selected, as udev
//!   would); znskit's conformance suite through the guest's `ng:` and
//!   `zbd:` views of the target; btrfs in zoned mode (`mkfs.btrfs -O
//!   zoned`, fio with crc32c verification, `btrfs check`) on the
//!   small-zone namespace; ext4 (mkfs, fio with crc32c verification,
//!   fstrim, fsck) on the target's fourth namespace, the FTL on another
//!   emulated device served as a conventional NVMe namespace
//!   (`zns serve --ftl`); fio's own zoned block device tests
//!   (`t/zbd/test-zbd-support` from Debian's fio source package, see
//!   [`crate::fio_zbd`]) on fio's test device, then zonefs on it
//!   ([`crate::zonefs`]); `nvme disconnect`.
//! - a second `zns serve` on a device image (`emu:file=`, `tiny`) with
//!   one block damaged on the host before it starts: in the guest a read
//!   of it fails, the kernel logs a critical medium error (the target
//!   completed it with Unrecovered Read Error) and the target's SMART log
//!   counts the media error.
//! - `zns ftl serve --device emu:small`: the FTL over NBD, attached by
//!   QEMU as the guest's virtio disk. In the guest: mkfs.ext4, mount, fio
//!   writing and verifying files with crc32c, a SQLite workload checked
//!   with `PRAGMA integrity_check`, umount, `fsck.ext4 -f -n`; then XFS
//!   (mkfs, fio with crc32c verification, `xfs_repair -n`).
//!
//! Then a second guest boots Debian's generic kernel (the cloud kernel
//! has no f2fs) for f2fs on another `zns serve`: see [`crate::f2fs`]. A
//! third, on the same kernel, compares ext4 on a conventional twin with
//! f2fs on its ZNS twin under one fio job: see [`crate::twins`].
//!
//! Parts run alone with `--parts` (`base`: the first guest but fio's zbd
//! tests and zonefs; `fio-zbd`, `zonefs`: those only, after the connect;
//! `f2fs`: the second guest; `twins`: the third).
//!
//! The task fails on any failed step, a missing result marker, a fio zbd
//! test result its expectations do not list, or a server that saw a
//! protocol or transport error.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Parser;

use crate::args::{self, GuestArgs, List};
use crate::guest::RESULT_MARKER;
use crate::kernel::Flavour;
use crate::server::{build_zns, Server};
use crate::vmtest::GuestEntry;
use crate::vmtest::{self, Options as VmOptions};
use crate::{f2fs, fio_zbd, kernel, twins, zonefs, Error, Result};

/// The subsystem NQN the guest connects to.
pub const NQN: &str = "nqn.2026-11.io.znskit:clients";

/// The subsystem of the device image with a damaged block.
pub const MEDIA_NQN: &str = "nqn.2026-11.io.znskit:media-error";

/// The host NQN and ID the guest presents.
const HOSTNQN: &str = "nqn.2014-08.org.nvmexpress:uuid:8d3c1e52-5a43-4c39-9b7e-2f1c7a3b9e01";
const HOSTID: &str = "8d3c1e52-5a43-4c39-9b7e-2f1c7a3b9e01";

/// The NVMe/TCP target's namespaces: the ZN540's geometry and timing, cut
/// to 16 zones (32 GiB, sparse in RAM), and a small-zone device (4 MiB
/// zones) for the workloads that fill zones.
const NVMF_DEVICES: [&str; 2] = ["emu:zn540,zones=16", "emu:small"];

/// The device under the FTL that `zns serve --ftl` exports as the
/// target's fourth, conventional namespace (after the two of
/// [`NVMF_DEVICES`] and fio's test device, [`fio_zbd::PROFILE`]).
const NVMF_FTL_DEVICE: &str = "emu:small";

/// The NBD export's device: a 1 GiB emulated ZNS SSD, data in RAM.
const NBD_DEVICE: &str = "emu:small";

/// Kernel modules the guest needs beyond the built-in ones.
/// mq-deadline keeps a zone's writes in order at queue depths above 1
/// (the script selects it: this kernel gives fabrics devices none).
const MODULES: &[&str] = &[
    "mq-deadline",
    "nvme-core",
    "nvme-tcp",
    "nvmet-tcp",
    "null_blk",
    "virtio_pci",
    "virtio_net",
    "virtio_blk",
    "ext4",
    "xfs",
    "btrfs",
    "zonefs",
];
/// Modules loaded when the kernel has them (ext4's metadata checksums).
const OPTIONAL_MODULES: &[&str] = &["crc32c_generic"];

/// Host programs packed into the guest with their libraries.
const GUEST_TOOLS: &[(&str, &str)] = &[
    ("nvme", "nvme-cli"),
    ("fio", "fio"),
    ("blkzone", "util-linux"),
    ("mke2fs", "e2fsprogs"),
    ("e2fsck", "e2fsprogs"),
    ("sqlite3", "sqlite3"),
    ("mkfs.xfs", "xfsprogs"),
    ("xfs_repair", "xfsprogs"),
    ("mkfs.btrfs", "btrfs-progs"),
    ("btrfs", "btrfs-progs"),
];

/// The parts of the task that can run alone.
pub const PARTS: &[&str] = &["base", "fio-zbd", "zonefs", "nvme-cli", "f2fs", "twins"];

/// The parts run when `--parts` is not given.
pub const DEFAULT_PARTS: &[&str] = PARTS;

/// Real clients in QEMU guests on `zns serve` (NVMe/TCP) and `zns ftl serve` (NBD)
///
/// Boots a QEMU guest whose kernel connects over NVMe/TCP to `zns serve` (an
/// emulated ZN540 and a small-zone device) and whose virtio disk is `zns ftl
/// serve` (the FTL over NBD), both running on the host, and runs nvme-cli,
/// blkzone, fio, btrfs, mkfs.ext4, SQLite, XFS and fsck against them, then
/// fio's own zoned block device tests (t/zbd/test-zbd-support from Debian's fio
/// source package); then boots Debian's generic kernel for f2fs on the target's
/// zoned namespace with the FTL namespace as its metadata device; then, on that
/// kernel, ext4 on a conventional twin (emu:small-conv) and f2fs on its ZNS twin
/// (emu:small), one fio job on both, figures side by side.
#[derive(Debug, Clone, Parser)]
#[command(
    verbatim_doc_comment,
    args_override_self = true,
    mut_arg("kernel", args::cloud_kernel),
    mut_arg("timeout", |a| a.default_value("1800").help("Give each guest this long, seconds"))
)]
pub struct Args {
    /// The parts to run, comma separated:
    ///   base     nvme-cli, blkzone, fio, btrfs, conformance, ext4, SQLite, XFS
    ///            (the cloud kernel's guest)
    ///   fio-zbd  fio's t/zbd/test-zbd-support (same guest)
    ///   zonefs   zonefs, formatted by the task (same guest)
    ///   nvme-cli nvme-cli's own test suite (tests/ of its source package) on a
    ///            zns serve controller (same guest)
    ///   f2fs     f2fs (a second guest: the generic kernel)
    ///   twins    ext4 on emu:small-conv, f2fs on emu:small, one fio job on both
    ///            (a third guest, generic kernel)
    #[arg(long, value_name = "LIST", verbatim_doc_comment,
          default_value_t = List::of(DEFAULT_PARTS),
          value_parser = |s: &str| args::parts(s, PARTS))]
    parts: List<String>,
    /// Only these fio zbd tests: numbers and ranges, comma separated
    /// (1-29,33-58; default: all)
    #[arg(long, value_name = "LIST", verbatim_doc_comment, value_parser = args::zbd_tests)]
    zbd_tests: Option<List<u32>>,
    /// The f2fs and twins guests' kernel (default: newest
    /// linux-image-*-amd64-unsigned, Debian's generic kernel)
    #[arg(long, value_name = "PACKAGE", verbatim_doc_comment)]
    f2fs_kernel: Option<String>,
    /// Also run the conformance suite through znskit's tcp: initiator against
    /// the guest kernel's own target (nvmet-tcp on a zoned null_blk), as
    /// `cargo xtask nvmet` does in a guest of its own
    #[arg(long, verbatim_doc_comment, overrides_with = "nvmet_only")]
    nvmet: bool,
    /// The same as --nvmet, with only these conformance checks (comma
    /// separated).
    #[arg(long, value_name = "CHECKS", overrides_with = "nvmet")]
    nvmet_only: Option<String>,
    #[command(flatten)]
    guest: GuestArgs,
}

impl Args {
    fn part(&self, name: &str) -> bool {
        self.parts.iter().any(|p| p == name)
    }

    /// The kernel-target step's conformance checks ("" = all), if it runs.
    fn nvmet(&self) -> Option<String> {
        self.nvmet_only.clone().or_else(|| self.nvmet.then(String::new))
    }

    /// Only these fio zbd tests (all when empty).
    fn zbd_tests(&self) -> &[u32] {
        self.zbd_tests.as_deref().unwrap_or_default()
    }

    fn vm(&self) -> VmOptions {
        self.guest.vm()
    }
}

/// The guest programs `tools` (program, Debian package) with their
/// libraries, and `/etc/mke2fs.conf`; missing packages are installed
/// when `install`.
pub(crate) fn guest_files(tools: &[(&str, &str)], install: bool) -> Result<Vec<PathBuf>> {
    let missing: Vec<String> = tools
        .iter()
        .filter(|(p, _)| vmtest::which(p).is_none())
        .map(|(_, pkg)| pkg.to_string())
        .collect();
    if !missing.is_empty() {
        if !install {
            return Err(Error::new(format!("missing packages: {}", missing.join(" "))));
        }
        vmtest::apt_install(&missing, None)?;
    }
    let mut files = Vec::new();
    for (p, _) in tools {
        let path = vmtest::which(p).ok_or_else(|| Error::new(format!("{p} is not installed")))?;
        files.extend(
            vmtest::with_libraries(&path)
                .ok_or_else(|| Error::new(format!("cannot list the libraries of {p} (ldd)")))?,
        );
    }
    let conf = PathBuf::from("/etc/mke2fs.conf");
    if conf.is_file() {
        files.push(conf);
    }
    files.sort();
    files.dedup();
    Ok(files)
}

/// A UUID for the zonefs superblock: random bits from the clock (version
/// 4 and variant bits set).
fn zonefs_uuid() -> [u8; 16] {
    let a = vmtest::new_seed().to_le_bytes();
    let b = vmtest::new_seed().rotate_left(17).to_le_bytes();
    let mut u = [0u8; 16];
    u[..8].copy_from_slice(&a);
    u[8..].copy_from_slice(&b);
    u[6] = (u[6] & 0x0f) | 0x40;
    u[8] = (u[8] & 0x3f) | 0x80;
    u
}

/// What one guest's run found.
#[derive(Debug, Default)]
struct Report {
    summaries: Vec<String>,
    failures: Vec<String>,
    /// The guest printed its result marker with PASS.
    passed: bool,
    /// How long the guest ran.
    guest_secs: f64,
}

/// Runs the whole task.
pub fn run(opts: &Args) -> Result<()> {
    let o = &opts.vm();
    let start = Instant::now();
    let root = vmtest::workspace_root();
    let target = vmtest::target_dir(&root);
    let cache = target.join("vmtest");
    vmtest::ensure_host_tools(o.install, true, &cache)?;
    let zns = build_zns(&root, &target, o.install)?;
    let mut reports: Vec<(&str, Report)> = Vec::new();
    let cloud = opts.part("base")
        || opts.part("fio-zbd")
        || opts.part("zonefs")
        || opts.part("nvme-cli")
        || opts.nvmet().is_some();
    if cloud {
        reports.push(("cloud kernel guest", run_cloud(opts, &root, &target, &zns)?));
    }
    if opts.part("f2fs") {
        reports.push(("f2fs guest", run_f2fs(opts, &cache, &zns)?));
    }
    if opts.part("twins") {
        reports.push(("twins guest", run_twins(opts, &cache, &zns)?));
    }
    println!();
    let mut pass = true;
    for (what, r) in &reports {
        for s in &r.summaries {
            println!("clients: {}", s.trim_start_matches("vmtest: "));
        }
        for f in &r.failures {
            println!("clients: {}", f.trim_start_matches("vmtest: "));
        }
        let ok = r.passed && r.failures.is_empty();
        println!(
            "clients: {what}: {} (guest {:.1} s)",
            if ok { "PASS" } else { "FAIL" },
            r.guest_secs
        );
        pass &= ok;
    }
    println!(
        "clients: {} in {:.1} s (parts {}; logs in {})",
        if pass { "PASS" } else { "FAIL" },
        start.elapsed().as_secs_f64(),
        opts.parts.join(","),
        cache.display()
    );
    if pass {
        Ok(())
    } else {
        Err(Error::new("the real clients failed"))
    }
}

/// Checks how a server ended: `clean` must be in its closing lines.
fn server_end(what: &str, end: Result<String>, clean: &[&str], failures: &mut Vec<String>) {
    match end {
        Ok(s) if clean.iter().all(|c| s.contains(c)) => {}
        Ok(s) => failures.push(format!("{what} saw errors: {}", s.trim())),
        Err(e) => failures.push(e.to_string()),
    }
}

/// The cloud kernel's guest: the base clients, fio's zbd tests, nvmet.
fn run_cloud(opts: &Args, root: &Path, target: &Path, zns: &Path) -> Result<Report> {
    let o = &opts.vm();
    let cache = target.join("vmtest");
    let dir = cache.join("clients");
    fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    let inputs = CloudInputs::prepare(opts, &cache)?;
    let kernel =
        kernel::prepare(&cache.join("kernel"), Flavour::Cloud, o.kernel.as_deref(), o.install)?;
    let modules = kernel::modules_for(&kernel, MODULES, OPTIONAL_MODULES)?;
    let zbd_device = fio_zbd::make_device(zns, &dir)?;
    let servers = CloudServers::start(opts, zns, &dir, &zbd_device, inputs.suite.is_some())?;
    let initramfs = cloud_initramfs(opts, (root, target), &dir, &modules, &inputs, &servers)?;
    let devices = qemu_args(servers.nbd.as_ref().map(|s| s.port));
    let log = dir.join("guest.log");
    let mut results = CloudResults::default();
    let guest_start = Instant::now();
    let outcome = vmtest::boot_watched(&kernel, &initramfs, &devices, o, &log, &mut |line| {
        results.record(line);
    });
    let guest_secs = guest_start.elapsed().as_secs_f64();
    let ends = servers.stop();
    let outcome = outcome?;
    let mut failures = outcome.failures.clone();
    for (what, end, clean) in ends {
        server_end(what, end, clean, &mut failures);
    }
    let mut summaries = outcome.summaries.clone();
    results.report(&inputs, &mut summaries, &mut failures);
    println!("clients: log {}", log.display());
    Ok(Report { summaries, failures, passed: outcome.result == Some(true), guest_secs })
}

/// What the cloud guest gets besides its kernel and modules, each only
/// when its part runs.
struct CloudInputs {
    /// Host files copied into the guest (its tools and their libraries).
    files: Vec<PathBuf>,
    /// nvme-cli's test suite.
    suite: Option<crate::nvme_cli::Suite>,
    /// fio's zoned block device test script.
    zbd: Option<fio_zbd::Script>,
    /// The zbd tests that must pass: `--zbd-tests`, or all the script has.
    zbd_wanted: Vec<u32>,
}

impl CloudInputs {
    /// Gathers the guest's tools and prepares the test suites the parts of
    /// `opts` run.
    fn prepare(opts: &Args, cache: &Path) -> Result<CloudInputs> {
        let o = &opts.vm();
        let mut tools: Vec<(&str, &str)> = GUEST_TOOLS.to_vec();
        if opts.part("fio-zbd") {
            tools.extend_from_slice(fio_zbd::TOOLS);
        }
        if opts.part("zonefs") {
            tools.extend_from_slice(zonefs::TOOLS);
        }
        // fio installed first: the zbd script is its source package's.
        let mut files = guest_files(&tools, o.install)?;
        let suite = if opts.part("nvme-cli") {
            files.extend(crate::nvme_cli::python_files()?);
            Some(crate::nvme_cli::prepare(cache, o.install)?)
        } else {
            None
        };
        let zbd =
            if opts.part("fio-zbd") { Some(fio_zbd::prepare(cache, o.install)?) } else { None };
        let zbd_wanted: Vec<u32> = match &zbd {
            Some(z) if opts.zbd_tests().is_empty() => z.tests.clone(),
            Some(z) => {
                if let Some(n) = opts.zbd_tests().iter().find(|n| !z.tests.contains(n)) {
                    return Err(Error::new(format!("--zbd-tests: the script has no test {n}")));
                }
                opts.zbd_tests().to_vec()
            }
            None => Vec::new(),
        };
        Ok(CloudInputs { files, suite, zbd, zbd_wanted })
    }
}

/// The servers the cloud guest connects to; those of parts that do not
/// run are `None`.
struct CloudServers {
    /// `zns serve`: the NVMe/TCP target of the base clients and fio.
    nvmf: Server,
    /// `zns ftl serve`: the NBD export.
    nbd: Option<Server>,
    /// `zns serve` of a device with a damaged block.
    media: Option<Server>,
    /// The target nvme-cli's tests run against.
    nvme_cli: Option<Server>,
    /// The target asking for DH-HMAC-CHAP, with its secrets.
    dhchap: Option<(Server, crate::dhchap::Secrets)>,
}

/// How a server ended: what it is, its closing lines (or why it could not
/// be stopped), and what a clean end's closing lines contain.
type ServerEnd = (&'static str, Result<String>, &'static [&'static str]);

impl CloudServers {
    /// Starts the servers the parts of `opts` need; `nvme_cli`: the
    /// nvme-cli suite runs.
    fn start(
        opts: &Args,
        zns: &Path,
        dir: &Path,
        zbd_device: &str,
        nvme_cli: bool,
    ) -> Result<CloudServers> {
        let base = opts.part("base");
        let nvmf = Server::start(
            "zns serve",
            zns,
            &[
                "--device",
                NVMF_DEVICES[0],
                "--device",
                NVMF_DEVICES[1],
                "--device",
                zbd_device,
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--nqn",
                NQN,
                "--ftl",
                NVMF_FTL_DEVICE,
            ],
        )?;
        let nbd = if base {
            Some(Server::start(
                "zns ftl serve",
                zns,
                &[
                    "--device",
                    NBD_DEVICE,
                    "ftl",
                    "serve",
                    "--listen",
                    "127.0.0.1:0",
                    "--export",
                    "ftl",
                ],
            )?)
        } else {
            None
        };
        let media = if base {
            let image = damaged_image(zns, dir)?;
            let image_uri = format!("emu:file={}", image.display());
            Some(Server::start(
                "zns serve (media error)",
                zns,
                &["--device", &image_uri, "serve", "--listen", "127.0.0.1:0", "--nqn", MEDIA_NQN],
            )?)
        } else {
            None
        };
        let nvme_cli = if nvme_cli { Some(crate::nvme_cli::start(zns)?) } else { None };
        let dhchap = if base {
            let secrets = crate::dhchap::Secrets::make(zns)?;
            let server = crate::dhchap::start(zns, HOSTNQN, &secrets)?;
            Some((server, secrets))
        } else {
            None
        };
        Ok(CloudServers { nvmf, nbd, media, nvme_cli, dhchap })
    }

    /// Stops every server, before the guest's outcome is looked at; how
    /// each ended, in the order they are checked.
    fn stop(self) -> Vec<ServerEnd> {
        const TRANSPORT: &[&str] = &[" 0 ended by transport errors"];
        const NBD: &[&str] = &[" 0 closed for protocol errors", "(0 failed)"];
        let nvmf = self.nvmf.stop();
        let nbd = self.nbd.map(Server::stop);
        let media = self.media.map(Server::stop);
        let dhchap = self.dhchap.map(|(s, _)| s.stop());
        let nvme_cli = self.nvme_cli.map(Server::stop);
        let mut ends: Vec<ServerEnd> = vec![("zns serve", nvmf, TRANSPORT)];
        ends.extend(nbd.map(|end| ("zns ftl serve", end, NBD)));
        ends.extend(media.map(|end| ("zns serve (media error)", end, TRANSPORT)));
        ends.extend(nvme_cli.map(|end| ("zns serve (nvme-cli tests)", end, TRANSPORT)));
        ends.extend(dhchap.map(|end| ("zns serve (DH-HMAC-CHAP)", end, TRANSPORT)));
        ends
    }
}

/// The cloud guest's initramfs: its programs, modules, init script (what
/// to run against which server), tools and test suites. `(root, target)`:
/// the workspace and its target directory, where the guest's programs
/// are built.
fn cloud_initramfs(
    opts: &Args,
    (root, target): (&Path, &Path),
    dir: &Path,
    modules: &[kernel::Module],
    inputs: &CloudInputs,
    servers: &CloudServers,
) -> Result<PathBuf> {
    let o = &opts.vm();
    let names: Vec<String> = modules.iter().map(|m| m.name.clone()).collect();
    let mke2fs = vmtest::which("mke2fs").ok_or_else(|| Error::new("mke2fs is not installed"))?;
    let plan =
        GuestPlan {
            dhchap: servers
                .dhchap
                .as_ref()
                .map(|(s, k)| crate::dhchap::guest_lines(s.port, HOSTNQN, HOSTID, k)),
            nvme_cli: servers.nvme_cli.as_ref().zip(inputs.suite.as_ref()).map(|(s, suite)| {
                crate::nvme_cli::guest_lines(s.port, HOSTNQN, HOSTID, &suite.tests)
            }),
            base: opts.part("base"),
            zbd: inputs.zbd.as_ref().map(|_| opts.zbd_tests().to_vec()),
            zonefs: opts.part("zonefs"),
            nvmet: opts.nvmet(),
            media_port: servers.media.as_ref().map(|m| m.port),
        };
    let script = init_script(&names, servers.nvmf.port, &mke2fs, &plan);
    let programs =
        vmtest::build_guest_binaries(root, target, o.install, &["zns-conformance", "zns"])?;
    let mut entries = match &inputs.zbd {
        Some(z) => fio_zbd::guest_entries(z)?,
        None => Vec::new(),
    };
    if let Some(suite) = &inputs.suite {
        entries.extend(crate::nvme_cli::guest_entries(suite)?);
    }
    if opts.part("zonefs") {
        entries.push(GuestEntry::File {
            path: zonefs::GUEST_IMAGE.into(),
            mode: 0o644,
            bytes: zonefs::superblock("znskit", zonefs_uuid()),
        });
    }
    vmtest::pack_initramfs_with(dir, &programs, modules, &script, &inputs.files, &entries)
}

/// What the cloud guest printed of nvme-cli's and fio's zbd tests.
#[derive(Default)]
struct CloudResults {
    /// Status by nvme-cli test.
    nvme_cli: BTreeMap<String, String>,
    /// Status and reason by zbd test.
    zbd: BTreeMap<u32, (fio_zbd::Status, String)>,
    /// Seconds by zbd test.
    zbd_times: BTreeMap<u32, u64>,
}

impl CloudResults {
    /// Takes a test's result or time from a line of the guest's console.
    fn record(&mut self, line: &str) {
        if let Some((t, status)) = crate::nvme_cli::parse_result(line) {
            self.nvme_cli.insert(t, status);
        } else if let Some((n, status, why)) = fio_zbd::parse_result(line) {
            self.zbd.insert(n, (status, why));
        } else if let Some((n, secs)) = fio_zbd::parse_time(line) {
            self.zbd_times.insert(n, secs);
        }
    }

    /// The suites' summaries, and their failures against what `inputs`
    /// ran.
    fn report(
        &self,
        inputs: &CloudInputs,
        summaries: &mut Vec<String>,
        failures: &mut Vec<String>,
    ) {
        if let Some(z) = &inputs.zbd {
            summaries.push(format!("{} ({})", fio_zbd::summary(&self.zbd), z.source));
            summaries.push(fio_zbd::slowest(&self.zbd_times, 8));
            failures.extend(fio_zbd::check(&self.zbd, &inputs.zbd_wanted));
        }
        if let Some(suite) = &inputs.suite {
            summaries.push(crate::nvme_cli::summary(&self.nvme_cli, &suite.source));
            failures.extend(crate::nvme_cli::check(&self.nvme_cli, &suite.tests));
        }
    }
}

/// A `tiny` device image whose zone 0 holds four written blocks (block
/// `i` all bytes `A0h + i`), block 2 then damaged by one flipped bit, as
/// the medium under a drive's block can be: a read of it fails with
/// Unrecovered Read Error.
fn damaged_image(zns: &Path, dir: &Path) -> Result<PathBuf> {
    let image = dir.join("media-error.img");
    let _ = fs::remove_file(&image);
    let arg = image.display().to_string();
    crate::run_checked(
        std::process::Command::new(zns).args(["emu", "create", &arg, "--profile", "tiny"]),
        "zns emu create",
    )?;
    let blocks: Vec<u8> = (0..4u8).flat_map(|i| [0xA0 + i; 4096]).collect();
    let input = dir.join("media-error.bin");
    fs::write(&input, blocks).map_err(|e| Error::io(&input, e))?;
    let device = format!("emu:file={arg}");
    let input_arg = input.display().to_string();
    crate::run_checked(
        std::process::Command::new(zns)
            .args(["--device", &device, "write", "--lba", "0", "--input", &input_arg]),
        "zns write",
    )?;
    let mut bytes = fs::read(&image).map_err(|e| Error::io(&image, e))?;
    let at = bytes
        .chunks_exact(4096)
        .position(|b| b.iter().all(|&x| x == 0xA2))
        .ok_or_else(|| Error::new("the written block is not in the image"))?;
    bytes[at * 4096 + 100] ^= 0x04;
    fs::write(&image, bytes).map_err(|e| Error::io(&image, e))?;
    Ok(image)
}

/// The guest lines for the second target, a device image with a damaged
/// block: the read fails with Unrecovered Read Error, which the kernel
/// logs as a medium error, and the target's SMART log counts it.
fn media_lines(port: u16) -> String {
    format!(
        r#"# A device image with a damaged block on a second target: the read fails
# with Unrecovered Read Error, which the kernel logs as a medium error.
T2="-t tcp -a 10.0.2.2 -s {port}"
run nvme-connect-media nvme connect $T2 -n {MEDIA_NQN} --hostnqn {HOSTNQN} --hostid {HOSTID}
# The controller and namespace by the subsystem's NQN and the namespace's
# ID, not by name: the kernel may not have reused the first target's
# names yet, and it names namespaces in the order its scan finds them (the
# image's conventional namespace 2 may come first). A namespace's device
# is its controller (or, with native multipath, its subsystem), and both
# say the NQN.
media_disk() {{
    for d in /sys/block/nvme*n*; do
        if [ "$(cat $d/device/subsysnqn 2>/dev/null)" = "{MEDIA_NQN}" ] && [ "$(cat $d/nsid 2>/dev/null)" = 1 ]; then
            basename $d; return
        fi
    done
}}
media_ctrl() {{
    for c in /sys/class/nvme/nvme*; do
        if [ "$(cat $c/subsysnqn 2>/dev/null)" = "{MEDIA_NQN}" ]; then basename $c; return; fi
    done
}}
# Namespace 1 with its size known: a read of a disk of size 0 reads
# nothing, and succeeds.
sized() {{
    d=$(media_disk)
    [ -n "$d" ] && [ "$(cat /sys/block/$d/size 2>/dev/null)" != 0 ]
}}
i=0
while [ $i -lt 100 ] && ! sized; do sleep 0.1; i=$((i + 1)); done
M=/dev/$(media_disk)
C=/dev/$(media_ctrl)
say "media-error namespace $M on $C, $(cat /sys/block/$(basename $M)/size 2>/dev/null) sectors (block devices: $(ls /sys/block | tr '\n' ' '))"
if [ "$M" = /dev/ ] || [ "$C" = /dev/ ]; then
    fail=1; say "FAILED media-read: no namespace of {MEDIA_NQN}"
elif dd if=$M of=/dev/null bs=4096 count=4 iflag=direct 2>/tmp/dd.err; then
    fail=1; say "FAILED media-read: the damaged block read back: $(tr '\n' ' ' < /tmp/dd.err)"
    nvme smart-log $C
else
    say "END media-read: failed as it must: $(head -n 1 /tmp/dd.err)"
fi
expect media-read-intact "1+0 records in" dd if=$M of=/dev/null bs=4096 skip=3 count=1 iflag=direct
expect media-error-logged "critical medium error" dmesg
run media-smart sh -c "nvme smart-log $C | tr -d ' \t' | grep -Eq '^media_errors:[1-9]'"
run nvme-disconnect-media nvme disconnect -n {MEDIA_NQN}
"#
    )
}

/// The generic kernel's guest: f2fs on the target's zoned namespace.
fn run_f2fs(opts: &Args, cache: &Path, zns: &Path) -> Result<Report> {
    let o = &opts.vm();
    let dir = cache.join("clients-f2fs");
    fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    let files = guest_files(f2fs::TOOLS, o.install)?;
    let kernel = kernel::prepare(
        &cache.join("kernel"),
        Flavour::Generic,
        opts.f2fs_kernel.as_deref(),
        o.install,
    )?;
    let modules = kernel::modules_for(&kernel, f2fs::MODULES, &[])?;
    let server = Server::start(
        "zns serve (f2fs)",
        zns,
        &[
            "--device",
            f2fs::ZONED_DEVICE,
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--nqn",
            f2fs::NQN,
            "--ftl",
            f2fs::FTL_DEVICE,
        ],
    )?;
    let names: Vec<String> = modules.iter().map(|m| m.name.clone()).collect();
    let script = f2fs::init_script(&names, server.port);
    let initramfs = vmtest::pack_initramfs(&dir, &[], &modules, &script, &files)?;
    let devices = qemu_args(None);
    let log = dir.join("guest.log");
    let guest_start = Instant::now();
    let outcome = vmtest::boot(&kernel, &initramfs, &devices, o, &log);
    let guest_secs = guest_start.elapsed().as_secs_f64();
    let end = server.stop();
    let outcome = outcome?;
    let mut failures = outcome.failures.clone();
    server_end("zns serve (f2fs)", end, &[" 0 ended by transport errors"], &mut failures);
    println!("clients: log {}", log.display());
    Ok(Report {
        summaries: outcome.summaries.clone(),
        failures,
        passed: outcome.result == Some(true),
        guest_secs,
    })
}

/// The generic kernel's guest for the twins: ext4 on the conventional
/// twin, f2fs on the ZNS twin, one fio job on both, the figures side by
/// side.
fn run_twins(opts: &Args, cache: &Path, zns: &Path) -> Result<Report> {
    let o = &opts.vm();
    let dir = cache.join("clients-twins");
    fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    let files = guest_files(twins::TOOLS, o.install)?;
    let kernel = kernel::prepare(
        &cache.join("kernel"),
        Flavour::Generic,
        opts.f2fs_kernel.as_deref(),
        o.install,
    )?;
    let modules = kernel::modules_for(&kernel, twins::MODULES, twins::OPTIONAL_MODULES)?;
    let server = Server::start(
        "zns serve (twins)",
        zns,
        &[
            "--device",
            twins::ZONED_DEVICE,
            "--device",
            twins::CONVENTIONAL_DEVICE,
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--nqn",
            twins::NQN,
            "--ftl",
            f2fs::FTL_DEVICE,
        ],
    )?;
    let names: Vec<String> = modules.iter().map(|m| m.name.clone()).collect();
    let mke2fs = vmtest::which("mke2fs").ok_or_else(|| Error::new("mke2fs is not installed"))?;
    let script = twins::init_script(&names, server.port, &mke2fs.display().to_string());
    let initramfs = vmtest::pack_initramfs(&dir, &[], &modules, &script, &files)?;
    let devices = qemu_args(None);
    let log = dir.join("guest.log");
    let mut json = twins::JsonLines::default();
    let guest_start = Instant::now();
    let outcome =
        vmtest::boot_watched(&kernel, &initramfs, &devices, o, &log, &mut |l| json.watch(l));
    let guest_secs = guest_start.elapsed().as_secs_f64();
    let end = server.stop();
    let outcome = outcome?;
    let mut failures = outcome.failures.clone();
    server_end("zns serve (twins)", end, &[" 0 ended by transport errors"], &mut failures);
    let mut summaries = outcome.summaries.clone();
    match json.figures() {
        [Ok(ext4), Ok(f2fs)] if ext4.len() == f2fs.len() => {
            summaries.push(
                "twins: the same fio job on each (software-emulated guest: only the ratios \
                 mean anything)"
                    .to_string(),
            );
            summaries.extend(twins::table(&ext4, &f2fs).into_iter().map(|r| format!("twins: {r}")));
        }
        [Ok(_), Ok(_)] => failures.push("twins: the two fio runs have different jobs".into()),
        [a, b] => failures.extend(
            [a.err(), b.err()]
                .into_iter()
                .flatten()
                .map(|e| format!("twins: no figures from fio: {e}")),
        ),
    }
    println!("clients: log {}", log.display());
    Ok(Report { summaries, failures, passed: outcome.result == Some(true), guest_secs })
}

/// QEMU arguments: user-mode networking (the host's loopback is 10.0.2.2
/// in the guest) and the NBD export on `nbd_port`, if any, as a virtio disk.
fn qemu_args(nbd_port: Option<u16>) -> Vec<String> {
    let mut a: Vec<String> = vec![
        "-netdev".into(),
        "user,id=net0".into(),
        "-device".into(),
        "virtio-net-pci,netdev=net0".into(),
    ];
    if let Some(port) = nbd_port {
        a.extend([
            "-blockdev".into(),
            format!(
                "driver=nbd,node-name=ftl,server.type=inet,server.host=127.0.0.1,\
                 server.port={port},export=ftl"
            ),
            "-device".into(),
            "virtio-blk-pci,drive=ftl".into(),
        ]);
    }
    a
}

/// The start of a clients guest's `/init`: the shell helpers, `modules`
/// loaded, the network up (and the virtio disk waited for when
/// `nbd_disk`), the host NQN and ID written for nvme-cli.
pub(crate) fn start_lines(purpose: &str, modules: &[String], nbd_disk: bool) -> String {
    let mut s = crate::guest::shell_start(purpose);
    s.push_str("mkdir -p /mnt /etc/nvme /run\n");
    for m in modules {
        s.push_str(&format!(
            "insmod /lib/modules/{m} || {{ say \"insmod {m} failed\"; fail=1; }}\n"
        ));
    }
    let vda = if nbd_disk { " || [ ! -e /sys/block/vda ]" } else { "" };
    s.push_str(&format!(
        r#"i=0
while [ $i -lt 100 ] && {{ [ ! -e /sys/class/net/eth0 ]{vda}; }}; do sleep 0.1; i=$((i + 1)); done
ip link set lo up
ip link set eth0 up
ip addr add 10.0.2.15/24 dev eth0
echo {HOSTNQN} > /etc/nvme/hostnqn
echo {HOSTID} > /etc/nvme/hostid
"#
    ));
    s
}

/// `nvme discover` and `nvme connect` to subsystem `nqn` on the host's
/// port `port`, waiting for its `namespaces` namespaces; defines
/// `suffix_of NSID` (the `0nX` suffix the kernel gave namespace NSID: it
/// numbers them in discovery order) and `$T` (the transport arguments).
pub(crate) fn connect_lines(port: u16, nqn: &str, namespaces: u32) -> String {
    connect_lines_with(port, nqn, namespaces, "")
}

/// [`connect_lines`] with more arguments for `nvme connect` (`extra`).
pub(crate) fn connect_lines_with(port: u16, nqn: &str, namespaces: u32, extra: &str) -> String {
    let waits: Vec<String> =
        (1..=namespaces).map(|n| format!("[ ! -e /sys/block/nvme0n{n}/queue/zoned ]")).collect();
    let waits = waits.join(" || ");
    format!(
        r#"# NVMe/TCP: the kernel's host on znskit's target.
T="-t tcp -a 10.0.2.2 -s {port}"
expect nvme-discover "{nqn}" nvme discover $T
run nvme-connect nvme connect $T -n {nqn} --hostnqn {HOSTNQN} --hostid {HOSTID}{extra}
i=0
while [ $i -lt 100 ] && {{ {waits}; }}; do sleep 0.1; i=$((i + 1)); done
suffix_of() {{
    for d in /sys/block/nvme0n*; do
        if [ "$(cat $d/nsid 2>/dev/null)" = "$1" ]; then basename $d | sed 's/^nvme//'; return; fi
    done
    echo "0n$1"
}}
"#
    )
}

/// The end of a clients guest's `/init`: the kernel log on failure, the
/// result marker, power off.
pub(crate) fn end_lines() -> String {
    format!(
        r#"if [ $fail -ne 0 ]; then say "kernel log (last lines):"; dmesg | tail -n 40; fi
if [ $fail -eq 0 ]; then echo "{RESULT_MARKER} PASS"; else echo "{RESULT_MARKER} FAIL"; fi
poweroff -f
"#
    )
}

/// The NVMe/TCP namespaces as shell variables (`$Z` the ZN540, `$S` the
/// small-zone namespace and `$G` its generic device, `$B` fio's test
/// device, `$F` the FTL), what
/// the kernel made of them, and mq-deadline on the zoned ones: what udev
/// does on a full system (zoned writes above queue depth 1 need its
/// per-zone write lock).
fn namespace_lines() -> String {
    r#"Z=/dev/nvme$(suffix_of 1)
S=/dev/nvme$(suffix_of 2)
G=/dev/ng$(suffix_of 2)
B=/dev/nvme$(suffix_of 3)
F=/dev/nvme$(suffix_of 4)
for b in $Z $S $B; do
    q=/sys/block/$(basename $b)/queue
    say "$b: zoned=$(cat $q/zoned) zones=$(cat $q/nr_zones) zone_sectors=$(cat $q/chunk_sectors) max_open=$(cat $q/max_open_zones) append_max=$(cat $q/zone_append_max_bytes)"
done
expect zoned host-managed cat /sys/block/$(basename $Z)/queue/zoned
for b in $Z $S $B; do echo mq-deadline > /sys/block/$(basename $b)/queue/scheduler; done
expect scheduler "[mq-deadline]" cat /sys/block/$(basename $S)/queue/scheduler
"#
    .to_string()
}

/// The NVMe/TCP clients: nvme-cli, blkzone, fio's zoned workloads, btrfs,
/// znskit's conformance suite through the kernel's devices, ext4 on the
/// FTL namespace.
fn nvme_lines(mke2fs: &str) -> String {
    format!(
        r#"expect nvme-list "znskit" nvme list
expect nvme-id-ctrl "{NQN}" nvme id-ctrl /dev/nvme0
expect nvme-zns-id-ctrl "zasl" nvme zns id-ctrl /dev/nvme0
expect nvme-zns-id-ns "mor" nvme zns id-ns $Z
expect nvme-zns-report "nr_zones: 16" nvme zns report-zones $Z -d 2
expect blkzone "start: 0x000000000" blkzone report -c 2 $Z
run fio-zoned-psync fio --name=zoned --filename=$Z --direct=1 --ioengine=psync --zonemode=zbd --rw=write --bs=128k --size=2z --io_size=48m --max_open_zones=2 --verify=crc32c --do_verify=1 --minimal
run nvme-zone-reset nvme zns reset-zone $Z -s 0
expect nvme-wp-reset "WP: 0 " nvme zns report-zones $Z -d 1
# The small-zone namespace: zone actions through blkzone, fio's
# asynchronous engines filling and verifying zones, nvme-cli's append.
run blkzone-open blkzone open -o 0 -c 1 $S
expect blkzone-opened "(oe)" blkzone report -c 1 $S
run blkzone-close blkzone close -o 0 -c 1 $S
run blkzone-finish blkzone finish -o 0 -c 1 $S
expect blkzone-full "(fu)" blkzone report -c 1 $S
run blkzone-reset blkzone reset $S
run fio-zoned-libaio fio --name=libaio --filename=$S --direct=1 --ioengine=libaio --iodepth=8 --zonemode=zbd --rw=randwrite --bs=16k --size=8z --io_size=24m --max_open_zones=4 --verify=crc32c --do_verify=1 --minimal
run blkzone-reset-2 blkzone reset $S
run fio-zoned-io_uring fio --name=io_uring --filename=$S --direct=1 --ioengine=io_uring --iodepth=16 --zonemode=zbd --rw=write --bs=64k --size=6z --verify=crc32c --do_verify=1 --minimal
run blkzone-reset-3 blkzone reset $S
head -c 8192 /dev/urandom > /tmp/blob
expect nvme-zone-append "Success" nvme zns zone-append $S -s 0 -z 8192 -d /tmp/blob
expect nvme-append-wp "WP: 0x2 " nvme zns report-zones $S -d 1
run blkzone-reset-4 blkzone reset $S
# btrfs in zoned mode on the small-zone namespace (Zone Append for data).
run mkfs-btrfs mkfs.btrfs -f -q -O zoned -d single -m single $S
run mount-btrfs mount -t btrfs $S /mnt
run fio-btrfs fio --name=btrfs --directory=/mnt --ioengine=psync --rw=randwrite --bs=64k --size=48m --numjobs=2 --fsync=8 --verify=crc32c --do_verify=1 --minimal
expect btrfs-zoned "zoned mode enabled" dmesg
run umount-btrfs umount /mnt
run btrfs-check btrfs check --readonly $S
run blkzone-reset-5 blkzone reset $S
# znskit's own kernel-path backends on the kernel's view of the target.
run conformance-ng /bin/zns-conformance "ng:$G"
run conformance-zbd /bin/zns-conformance "zbd:$S"
# The FTL as the target's conventional namespace: an ordinary disk.
expect ftl-ns-not-zoned none cat /sys/block/$(basename $F)/queue/zoned
run mkfs-ext4-nvmf {mke2fs} -t ext4 -F -q $F
run mount-nvmf mount -t ext4 $F /mnt
run fio-ext4-nvmf fio --name=nvmf --directory=/mnt --ioengine=psync --rw=randwrite --bs=64k --size=32m --numjobs=2 --fsync=8 --verify=crc32c --do_verify=1 --minimal
run fstrim-nvmf fstrim -v /mnt
run umount-nvmf umount /mnt
run fsck-ext4-nvmf e2fsck -f -n $F
"#
    )
}

/// The FTL over NBD as the guest's virtio disk: ext4 (fio, SQLite, fsck),
/// then XFS.
fn nbd_lines(mke2fs: &str) -> String {
    format!(
        r#"# NBD: the FTL as the guest's virtio disk.
D=/dev/vda
say "vda: $(cat /sys/block/vda/size 2>/dev/null) sectors"
run mkfs-ext4 {mke2fs} -t ext4 -F -q $D
run mount mount -t ext4 $D /mnt
run fio-ext4 fio --name=ext4 --directory=/mnt --ioengine=psync --rw=randwrite --bs=64k --size=96m --numjobs=2 --fsync=16 --verify=crc32c --do_verify=1 --minimal
expect sqlite "ok" sqlite3 /mnt/test.db "PRAGMA journal_mode=WAL; CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT); WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 20000) INSERT INTO t SELECT x, hex(randomblob(64)) FROM c; DELETE FROM t WHERE k % 3 = 0; VACUUM; PRAGMA integrity_check;"
expect sqlite-count "13334" sqlite3 /mnt/test.db "SELECT count(*) FROM t;"
run umount umount /mnt
run fsck-ext4 e2fsck -f -n $D
# XFS on the same disk.
run mkfs-xfs mkfs.xfs -f -q $D
run mount-xfs mount -t xfs $D /mnt
run fio-xfs fio --name=xfs --directory=/mnt --ioengine=psync --rw=randwrite --bs=64k --size=48m --numjobs=2 --fsync=8 --verify=crc32c --do_verify=1 --minimal
run umount-xfs umount /mnt
run xfs-repair xfs_repair -n $D
sync
"#
    )
}

/// What the cloud kernel's guest runs.
#[derive(Debug, Clone, Default)]
pub struct GuestPlan {
    /// The NVMe/TCP clients of [`nvme_lines`] and the NBD disk's of
    /// [`nbd_lines`].
    pub base: bool,
    /// fio's `t/zbd/test-zbd-support` on the small-zone namespace, with
    /// these tests (all when empty).
    pub zbd: Option<Vec<u32>>,
    /// zonefs on fio's test device ([`zonefs::guest_lines`]).
    pub zonefs: bool,
    /// The kernel-target run of [`crate::nvmet::script_lines`], with the conformance
    /// checks it names (all when empty).
    pub nvmet: Option<String>,
    /// The port of the target serving a device image with a damaged
    /// block ([`media_lines`]), after the first target is gone.
    pub media_port: Option<u16>,
    /// The DH-HMAC-CHAP lines ([`crate::dhchap::guest_lines`]).
    pub dhchap: Option<String>,
    /// nvme-cli's test suite ([`crate::nvme_cli::guest_lines`]).
    pub nvme_cli: Option<String>,
}

/// The cloud kernel guest's `/init`. `mke2fs` is Debian's program's path:
/// busybox's shell runs its own applet of that name before any in `$PATH`.
pub fn init_script(modules: &[String], nvmf_port: u16, mke2fs: &Path, plan: &GuestPlan) -> String {
    let mke2fs = mke2fs.display().to_string();
    let mut s = start_lines(
        "real clients on znskit's NVMe/TCP target and NBD export, a result marker, power off.",
        modules,
        plan.base,
    );
    if plan.base || plan.zbd.is_some() || plan.zonefs {
        // The kernel's host without SQ flow control: the target then ends
        // each successful read with its data (C2HData SUCCESS), and
        // everything below runs over that.
        s.push_str(&connect_lines_with(nvmf_port, NQN, 4, " --disable-sqflow"));
        s.push_str(&namespace_lines());
        if plan.base {
            s.push_str(&nvme_lines(&mke2fs));
        }
        if let Some(only) = &plan.zbd {
            s.push_str(&fio_zbd::guest_lines("$B", only));
        }
        if plan.zonefs {
            s.push_str(&zonefs::guest_lines(
                "$B",
                fio_zbd::DEVICE_ZONES,
                fio_zbd::DEVICE_ZONE_CAPACITY,
            ));
        }
        s.push_str(&format!("run nvme-disconnect nvme disconnect -n {NQN}\n"));
    }
    if let Some(port) = plan.media_port {
        s.push_str(&media_lines(port));
    }
    if let Some(lines) = &plan.dhchap {
        s.push_str(lines);
    }
    if let Some(lines) = &plan.nvme_cli {
        s.push_str(lines);
    }
    if plan.base {
        s.push_str(&nbd_lines(&mke2fs));
    }
    if let Some(only) = &plan.nvmet {
        s.push_str(&crate::nvmet::script_lines(only));
    }
    s.push_str(&end_lines());
    s
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn script(plan: &GuestPlan) -> String {
        init_script(&["nvme-tcp.ko".into()], 4420, Path::new("/usr/sbin/mke2fs"), plan)
    }

    #[test]
    fn the_script_connects_then_uses_the_disk_and_ends_with_a_marker() {
        let all = GuestPlan {
            base: true,
            zbd: Some(Vec::new()),
            zonefs: true,
            nvmet: None,
            media_port: Some(4421),
            dhchap: None,
            nvme_cli: None,
        };
        let s = script(&all);
        assert!(!s.contains("nvmet"));
        let n = script(&GuestPlan {
            base: true,
            zbd: None,
            zonefs: false,
            nvmet: Some("copy".into()),
            media_port: None,
            dhchap: None,
            nvme_cli: None,
        });
        assert!(n.contains("zns-conformance --only copy \"tcp:127.0.0.1:4420/"));
        assert!(s.starts_with("#!/bin/sh\n"));
        assert!(s.contains("insmod /lib/modules/nvme-tcp.ko"));
        assert!(s.contains("T=\"-t tcp -a 10.0.2.2 -s 4420\""));
        let connect = s.find("nvme connect $T").unwrap();
        assert!(connect < s.find("fio-zoned").unwrap());
        assert!(s.contains(&format!("--hostid {HOSTID} --disable-sqflow\n")));
        // ext4 on the target's FTL namespace and fio's zbd tests while
        // connected, then ext4 on the NBD disk after the disconnect.
        let disconnect = s.find("nvme disconnect").unwrap();
        assert!(s.find("/usr/sbin/mke2fs -t ext4 -F -q $F").unwrap() < disconnect);
        let zbd = s.find("test-zbd-support -r -w $B").unwrap();
        assert!(s.find("conformance-zbd").unwrap() < zbd && zbd < disconnect);
        let zonefs = s.find("mount -t zonefs $B /mnt").unwrap();
        assert!(zbd < zonefs && zonefs < disconnect);
        assert!(disconnect < s.find("/usr/sbin/mke2fs -t ext4 -F -q $D").unwrap());
        assert!(s.contains("e2fsck -f -n $D"));
        // The media-error target after the first one is gone.
        let media = s.find("nvme connect $T2 -n nqn.2026-11.io.znskit:media-error").unwrap();
        assert!(disconnect < media && s.contains("T2=\"-t tcp -a 10.0.2.2 -s 4421\""));
        assert!(s.find("critical medium error").unwrap() > media);
        assert!(s.contains("/sys/block/vda"));
        assert!(s.contains("VMTEST-RESULT: PASS") && s.trim_end().ends_with("poweroff -f"));
        let q = qemu_args(Some(10809));
        assert!(q.iter().any(|a| a.contains("server.port=10809,export=ftl")));
        assert!(!qemu_args(None).iter().any(|a| a.contains("nbd")));
    }

    #[test]
    fn each_part_runs_alone() {
        let zbd = script(&GuestPlan {
            base: false,
            zbd: Some(vec![5]),
            zonefs: false,
            nvmet: None,
            media_port: None,
            dhchap: None,
            nvme_cli: None,
        });
        assert!(zbd.contains("nvme connect $T") && zbd.contains("test-zbd-support -r -w -t 5 $B"));
        assert!(!zbd.contains("fio-zoned") && !zbd.contains("mke2fs") && !zbd.contains("vda"));
        let base = script(&GuestPlan {
            base: true,
            zbd: None,
            zonefs: false,
            nvmet: None,
            media_port: None,
            dhchap: None,
            nvme_cli: None,
        });
        assert!(!base.contains("test-zbd-support"));
        let parse = |a: &[&str]| crate::args::tests::parse::<Args>(a).unwrap().unwrap();
        let o = parse(&["--parts", "f2fs", "--zbd-tests", "3,5"]);
        assert_eq!(parse(&["--zbd-tests", "1-3,7"]).zbd_tests(), [1, 2, 3, 7]);
        assert!(o.part("f2fs") && !o.part("base") && !o.part("fio-zbd"));
        assert_eq!(o.zbd_tests(), [3, 5]);
        assert!(DEFAULT_PARTS.iter().all(|p| parse(&[]).part(p)));
        assert!(parse(&[]).zbd_tests().is_empty(), "all of fio's zbd tests by default");
        assert!(parse(&["--parts", "zonefs"]).part("zonefs"));
        let t = parse(&["--parts", "twins"]);
        assert!(t.part("twins") && !t.part("f2fs") && parse(&[]).part("twins"));
        let bad = |a: &[&str]| crate::args::tests::parse::<Args>(a).unwrap_err().to_string();
        assert!(bad(&["--parts", "xfs"]).contains("unknown part \"xfs\""));
        let z = script(&GuestPlan {
            base: false,
            zbd: None,
            zonefs: true,
            nvmet: None,
            media_port: None,
            dhchap: None,
            nvme_cli: None,
        });
        assert!(z.contains("nvme connect $T") && z.contains("mount -t zonefs $B /mnt"));
        assert!(!z.contains("test-zbd-support") && !z.contains("fio-zoned"));
        assert!(bad(&["--zbd-tests", "x"]).contains("--zbd-tests"));
        assert!(bad(&["--zbd-tests", "9-2"]).contains("not test numbers and ranges"));
    }

    #[test]
    fn options_keep_their_defaults_and_the_last_nvmet_option_wins() {
        let parse = |a: &[&str]| crate::args::tests::parse::<Args>(a).unwrap().unwrap();
        let o = parse(&[]);
        let vm = o.vm();
        assert_eq!((vm.timeout, vm.memory.as_str()), (Duration::from_secs(1800), "1G"));
        assert_eq!((o.nvmet(), o.f2fs_kernel.as_deref()), (None, None));
        assert_eq!(parse(&["--nvmet"]).nvmet().as_deref(), Some(""));
        assert_eq!(parse(&["--nvmet-only", "copy"]).nvmet().as_deref(), Some("copy"));
        assert_eq!(parse(&["--nvmet-only", "copy", "--nvmet"]).nvmet().as_deref(), Some(""));
        assert_eq!(parse(&["--nvmet", "--nvmet-only", "copy"]).nvmet().as_deref(), Some("copy"));
        let o = parse(&["--timeout", "60", "--memory", "2G", "--f2fs-kernel", "k", "--kvm"]);
        let vm = o.vm();
        assert_eq!((vm.timeout, vm.memory.as_str(), vm.kvm), (Duration::from_secs(60), "2G", true));
        assert_eq!(o.f2fs_kernel.as_deref(), Some("k"));
        assert!(crate::args::tests::parse::<Args>(&["--timeout", "1h"]).is_err());
    }
}
