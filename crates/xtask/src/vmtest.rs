//! `cargo xtask vmtest`: the device conformance suite inside a QEMU guest,
//! against QEMU's own NVMe ZNS controller, through the io_uring
//! passthrough, zoned block device and user-space PCIe driver backends,
//! and the differential test (random command sequences on QEMU's
//! controller and on znskit's emulator, compared command by command)
//! through the passthrough and the user-space driver, and a short run of
//! `zns characterize` (the smoke suite) through the passthrough.
//!
//! Steps: install what is missing (Debian packages), fetch and unpack a
//! Debian cloud kernel, build `zns-conformance`, `zns-differential` and
//! `zns`, pack a busybox initramfs with them and the shared objects they
//! need whose `/init` runs them, boot QEMU with three namespaces, stream
//! the serial console, and fail on a failed check, an unexplained difference, a missing result marker or a
//! timeout.

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use clap::Parser;

use crate::args::{self, GuestArgs, List};
use crate::guest::{self, Plan, RESULT_MARKER};
use crate::guest_clock;
use crate::{cpio, elf, kernel, run_checked, Error, Result};

/// Conformance suite and differential test in a guest on QEMU's ZNS controller
///
/// Boots a QEMU guest (Debian cloud kernel, busybox initramfs) with QEMU's NVMe
/// ZNS controller and runs the device conformance suite against ng:/dev/ng0n1,
/// ng:/dev/ng0n2, zbd:/dev/nvme0n1 (io_uring and pread/pwrite), and pcie:<bdf>
/// after unbinding the controller from the kernel; and the differential test
/// (zns-differential: random command sequences compared with znskit's emulator
/// built with the namespace's geometry) on ng:/dev/ng0n1, ng:/dev/ng0n2 and
/// pcie:<bdf>; and `zns characterize --suite smoke` on ng:/dev/ng0n1, checked
/// for its results.json and report.html. Then a second guest with an emulated
/// Intel IOMMU and two controllers bound to vfio-pci runs the suite and the
/// differential test through pcie:<bdf>,transport=vfio, the suite on the
/// second controller and zns-pcie-check (both controllers at once, a reset
/// with queues open). Exits non-zero on any failure or unexplained difference.
#[derive(Debug, Clone, Parser)]
#[command(verbatim_doc_comment, args_override_self = true, mut_arg("kernel", args::cloud_kernel))]
pub struct Args {
    /// Run only these conformance checks (comma separated).
    #[arg(long, value_name = "CHECKS")]
    only: Option<String>,
    /// Run the conformance checks N times on each device.
    #[arg(long, value_name = "N", allow_negative_numbers = true, default_value_t = 1)]
    repeat: u32,
    /// Only these runs, comma separated: ng-pow2, ng-npow2, zbd-uring,
    /// zbd-psync, diff-ng-pow2, diff-ng-npow2, diff-ng-fdp, characterize-ng,
    /// pcie, diff-pcie; in the VFIO guest: vfio, diff-vfio, vfio-second,
    /// vfio-reset (default: all)
    #[arg(long, value_name = "LIST", verbatim_doc_comment, value_parser = runs)]
    runs: Option<List<String>>,
    /// Seed of the differential runs, decimal or 0x hexadecimal (default: a
    /// new one, printed)
    #[arg(long, value_name = "N", allow_negative_numbers = true, verbatim_doc_comment, value_parser = seed)]
    seed: Option<u64>,
    /// Random command sequences of each differential run (the FDP run
    /// takes at most 50 of 20 to 40 commands).
    #[arg(long, value_name = "N", allow_negative_numbers = true, default_value_t = 1000)]
    sequences: u64,
    /// Leave nvme-cli and fio out of the guest.
    #[arg(long)]
    no_peers: bool,
    /// Trace the guest's block layer and io_uring; print on failure.
    #[arg(long)]
    trace: bool,
    #[command(flatten)]
    guest: GuestArgs,
}

impl Args {
    /// The task's options.
    pub fn options(&self) -> Options {
        Options {
            only: self.only.clone(),
            repeat: self.repeat,
            runs: self.runs.as_ref().map(|r| r.0.clone()),
            seed: self.seed,
            sequences: self.sequences,
            peers: !self.no_peers,
            trace: self.trace,
            ..self.guest.vm()
        }
    }
}

/// `--runs`: labels of [`guest::default_runs`], comma separated.
fn runs(list: &str) -> Result<List<String>, String> {
    let labels: Vec<String> = guest::default_runs().into_iter().map(|r| r.label).collect();
    let named: Vec<String> = list.split(',').map(str::to_string).collect();
    match named.iter().find(|l| !labels.contains(l)) {
        Some(bad) => Err(format!("unknown run {bad:?} (runs: {})", labels.join(", "))),
        None => Ok(List(named)),
    }
}

/// `--seed`: decimal, or hexadecimal after `0x`.
fn seed(s: &str) -> Result<u64, String> {
    let n = match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse(),
    };
    n.map_err(|_| format!("{s:?}: not a seed (decimal, or hexadecimal after 0x)"))
}

/// Options of the task.
#[derive(Debug, Clone)]
pub struct Options {
    pub(crate) timeout: Duration,
    pub(crate) kernel: Option<String>,
    only: Option<String>,
    repeat: u32,
    runs: Option<Vec<String>>,
    seed: Option<u64>,
    sequences: u64,
    pub(crate) install: bool,
    peers: bool,
    pub(crate) kvm: bool,
    trace: bool,
    pub(crate) smp: u32,
    pub(crate) memory: String,
    /// The guest's clock dilated this many times ([`guest_clock`]): QEMU
    /// runs under libfaketime, every clock it reads running F times slower.
    pub(crate) guest_clock: Option<f64>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            timeout: Duration::from_secs(900),
            kernel: None,
            only: None,
            repeat: 1,
            runs: None,
            seed: None,
            sequences: 1000,
            install: true,
            peers: true,
            kvm: false,
            trace: false,
            smp: 2,
            memory: "1G".into(),
            guest_clock: None,
        }
    }
}

pub(crate) fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.ancestors().nth(2).unwrap_or(manifest).to_path_buf()
}

pub(crate) fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("target"))
}

pub(crate) fn which(cmd: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(cmd)).find(|p| p.is_file())
}

pub(crate) fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// The static busybox, if installed.
fn static_busybox() -> Option<PathBuf> {
    ["/bin/busybox", "/usr/bin/busybox"]
        .iter()
        .map(PathBuf::from)
        .find(|p| fs::read(p).ok().is_some_and(|b| elf::is_static_executable(&b) == Ok(true)))
}

/// Installs the Debian packages whose programs are missing.
pub(crate) fn ensure_host_tools(install: bool, peers: bool, cache: &Path) -> Result<()> {
    let mut missing: Vec<&str> = Vec::new();
    if which("qemu-system-x86_64").is_none() {
        missing.push("qemu-system-x86");
    }
    if static_busybox().is_none() {
        missing.push("busybox-static");
    }
    if which("xz").is_none() {
        missing.push("xz-utils");
    }
    if peers {
        if which("fio").is_none() {
            missing.push("fio");
        }
        if which("nvme").is_none() {
            missing.push("nvme-cli");
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    if !install || !is_root() {
        return Err(Error::new(format!(
            "missing packages: {} (install them as root: apt-get install -y {})",
            missing.join(", "),
            missing.join(" ")
        )));
    }
    println!("vmtest: installing {}", missing.join(" "));
    let others: Vec<String> =
        missing.iter().filter(|p| **p != "qemu-system-x86").map(|p| p.to_string()).collect();
    if !others.is_empty() {
        apt_install(&others, None)?;
    }
    if missing.contains(&"qemu-system-x86") {
        // QEMU's system emulator must match an installed qemu-utils, or apt
        // removes qemu-img and qemu-nbd to install it; when that qemu-utils
        // came from backports, so does the emulator.
        match installed_version("qemu-utils") {
            Some(v) if v.contains("~bpo") => {
                let pinned = [format!("qemu-system-x86={v}"), format!("qemu-utils={v}")];
                apt_install(&pinned, Some(backports_sources(cache)?))?;
            }
            Some(v) => apt_install(&["qemu-system-x86".into(), format!("qemu-utils={v}")], None)?,
            None => apt_install(&["qemu-system-x86".into()], None)?,
        }
    }
    Ok(())
}

/// Installs `packages` (without recommends); with `backports` (a sources
/// list and a lists directory from [`backports_sources`]), from the
/// release's backports, without touching the machine's apt sources.
pub(crate) fn apt_install(
    packages: &[String],
    backports: Option<(PathBuf, PathBuf, String)>,
) -> Result<()> {
    let apt = |args: &[&str]| {
        let mut c = match &backports {
            Some((list, lists_dir, _)) => apt_with(list, lists_dir),
            None => Command::new("apt-get"),
        };
        c.args(args).env("DEBIAN_FRONTEND", "noninteractive");
        c
    };
    let install = || {
        let mut args = vec!["install", "-y", "--no-install-recommends"];
        if let Some((_, _, suite)) = &backports {
            args.extend(["-t", suite.as_str()]);
        }
        args.extend(packages.iter().map(String::as_str));
        run_checked(&mut apt(&args), "apt-get install")
    };
    if backports.is_some() || install().is_err() {
        run_checked(&mut apt(&["update"]), "apt-get update")?;
        install()?;
    }
    Ok(())
}

/// The installed version of Debian package `name`.
pub(crate) fn installed_version(name: &str) -> Option<String> {
    let out =
        Command::new("dpkg-query").args(["-W", "-f=${Status} ${Version}", name]).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.strip_prefix("install ok installed ").map(|v| v.trim().to_string())
}

/// The machine's Debian release codename (`bookworm`).
pub(crate) fn codename() -> Result<String> {
    let release = fs::read_to_string("/etc/os-release").unwrap_or_default();
    release
        .lines()
        .find_map(|l| l.strip_prefix("VERSION_CODENAME="))
        .map(|c| c.trim_matches('"').to_string())
        .ok_or_else(|| Error::new("no VERSION_CODENAME in /etc/os-release"))
}

/// The text of the machine's apt sources (`sources.list` and the
/// `.list` and `.sources` files of `sources.list.d`).
pub(crate) fn configured_sources() -> String {
    let mut configured = fs::read_to_string("/etc/apt/sources.list").unwrap_or_default();
    if let Ok(rd) = fs::read_dir("/etc/apt/sources.list.d") {
        for e in rd.flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "sources" || x == "list") {
                configured.push('\n');
                configured.push_str(&fs::read_to_string(&p).unwrap_or_default());
            }
        }
    }
    configured
}

/// A sources list of its own (`name`.list and a lists directory under
/// `cache`) holding `text`, for apt's `-o Dir::...` options: the machine's
/// own apt configuration is left as it is.
pub(crate) fn private_sources(cache: &Path, name: &str, text: &str) -> Result<(PathBuf, PathBuf)> {
    let dir = cache.join("apt");
    let lists = dir.join(format!("{name}-lists"));
    fs::create_dir_all(lists.join("partial")).map_err(|e| Error::io(&lists, e))?;
    let list = dir.join(format!("{name}.list"));
    fs::write(&list, text).map_err(|e| Error::io(&list, e))?;
    Ok((list, lists))
}

/// `apt-get` with the sources list and lists directory of
/// [`private_sources`].
pub(crate) fn apt_with(list: &Path, lists: &Path) -> Command {
    let mut c = Command::new("apt-get");
    c.arg("-o").arg(format!("Dir::Etc::sourcelist={}", list.display()));
    c.args(["-o", "Dir::Etc::sourceparts=-"]);
    c.arg("-o").arg(format!("Dir::State::lists={}", lists.display()));
    c.env("DEBIAN_FRONTEND", "noninteractive");
    c
}

/// A sources list (and a lists directory of its own, under `cache`) with
/// the release's backports beside the machine's Debian sources, for apt's
/// `-o Dir::...` options (the machine's own apt configuration is left as
/// it is), and the backports suite's name.
pub(crate) fn backports_sources(cache: &Path) -> Result<(PathBuf, PathBuf, String)> {
    let codename = codename()?;
    let text = with_backports(&configured_sources(), &codename).ok_or_else(|| {
        Error::new(format!("no apt source of Debian {codename} to add backports to"))
    })?;
    let (list, lists) = private_sources(cache, "backports", &text)?;
    Ok((list, lists, format!("{codename}-backports")))
}

/// The `deb` sources (one-line or deb822 format) in `configured`: (URI,
/// suites, components) each.
fn deb_entries(configured: &str) -> Vec<(String, Vec<String>, String)> {
    let mut entries: Vec<(String, Vec<String>, String)> = Vec::new();
    for stanza in configured.split("\n\n") {
        let field = |name: &str| {
            stanza.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim().eq_ignore_ascii_case(name)).then(|| v.trim().to_string())
            })
        };
        if let (Some(types), Some(uris), Some(suites)) =
            (field("Types"), field("URIs"), field("Suites"))
        {
            if types.split_whitespace().any(|t| t == "deb") {
                let comps = field("Components").unwrap_or_else(|| "main".into());
                for uri in uris.split_whitespace() {
                    let suites = suites.split_whitespace().map(str::to_string).collect();
                    entries.push((uri.to_string(), suites, comps.clone()));
                }
            }
            continue;
        }
        for line in stanza.lines() {
            let mut w = line.split_whitespace();
            if w.next() != Some("deb") {
                continue;
            }
            let mut rest: Vec<&str> = w.collect();
            if rest.first().is_some_and(|x| x.starts_with('[')) {
                rest.retain(|x| !x.starts_with('[') && !x.ends_with(']'));
            }
            if rest.len() >= 2 {
                entries.push((rest[0].into(), vec![rest[1].into()], rest[2..].join(" ")));
            }
        }
    }
    entries
}

/// One-line entries of type `kind` (`deb` or `deb-src`) for the configured
/// sources of release `codename` and its updates (and security), and the
/// archive that serves `codename` itself (its URI and components).
fn release_entries(
    configured: &str,
    codename: &str,
    kind: &str,
) -> (String, Option<(String, String)>) {
    let mut out = String::new();
    let mut main_archive = None;
    for (uri, suites, comps) in &deb_entries(configured) {
        for suite in suites {
            if suite == codename || suite.starts_with(&format!("{codename}-")) {
                out.push_str(&format!("{kind} {uri} {suite} {comps}\n"));
                if suite == codename {
                    main_archive.get_or_insert_with(|| (uri.clone(), comps.clone()));
                }
            }
        }
    }
    (out, main_archive)
}

/// One-line `deb` entries for the configured sources (one-line or deb822
/// format) of release `codename` and its updates, plus
/// `codename-backports` from the archive that serves `codename` itself.
/// `None` when no configured source serves `codename`.
pub fn with_backports(configured: &str, codename: &str) -> Option<String> {
    let (mut out, main_archive) = release_entries(configured, codename, "deb");
    let (uri, comps) = main_archive?;
    if !out.contains(&format!(" {codename}-backports ")) {
        out.push_str(&format!("deb {uri} {codename}-backports {comps}\n"));
    }
    Some(out)
}

/// `deb-src` entries matching the configured `deb` sources of release
/// `codename` and its updates (source packages come from the archives the
/// machine's binaries come from). `None` when no configured source serves
/// `codename`.
pub fn source_entries(configured: &str, codename: &str) -> Option<String> {
    let (out, main_archive) = release_entries(configured, codename, "deb-src");
    main_archive.map(|_| out)
}

/// The programs the guest tasks run: binaries of `zns-tools`, and `zns`,
/// the command line of `zns-cli` (also the host's servers).
pub const GUEST_PROGRAMS: &[&str] =
    &["zns-conformance", "zns-differential", "zns", "zns-pcie-check"];

/// Features of the one build: `zns ublk` and `zns ftl ublk` (the guest's
/// ublk task; bindgen makes their bindings, with libclang).
const FEATURES: &[&str] = &["zns-cli/ublk"];

/// The package a guest program comes from.
fn package_of(program: &str) -> &'static str {
    match program {
        "zns" => "zns-cli",
        "zns-engines" => "zns-bench",
        _ => "zns-tools",
    }
}

/// Builds `programs` (binaries of `zns-tools`, `zns` of `zns-cli`, or
/// `zns-engines` of `zns-bench`) and returns their paths, in order.
///
/// Every guest task and the host's `zns` servers share one release build
/// for this machine: the same packages, binaries and features whatever is
/// asked ([`GUEST_PROGRAMS`] with [`FEATURES`], and any program outside
/// them), so the first task of a run builds and the next ones find it
/// done. The programs are linked dynamically, as the guest's nvme-cli
/// and fio are: [`pack_initramfs`] puts the shared objects each needs (the
/// host's, from `ldd`) in the guest beside it.
pub fn build_guest_binaries(
    root: &Path,
    target: &Path,
    install: bool,
    programs: &[&str],
) -> Result<Vec<PathBuf>> {
    ensure_libclang(install);
    let mut bins: Vec<&str> = GUEST_PROGRAMS.to_vec();
    bins.extend(programs.iter().filter(|p| !GUEST_PROGRAMS.contains(p)));
    let mut packages: Vec<&str> = bins.iter().map(|p| package_of(p)).collect();
    packages.sort_unstable();
    packages.dedup();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(root).args(["build", "--release"]);
    for p in packages {
        cmd.args(["--package", p]);
    }
    for b in &bins {
        cmd.args(["--bin", b]);
    }
    cmd.args(["--features", &FEATURES.join(",")]);
    println!("vmtest: building {} (release)", bins.join(", "));
    run_checked(&mut cmd, "cargo build (zns and the guest's programs)")?;
    Ok(programs.iter().map(|p| target.join("release").join(p)).collect())
}

/// Installs libclang (Debian's libclang-dev) when `install` and Debian's
/// copy is missing: bindgen needs it for `zns-ublk`'s bindings. Elsewhere
/// bindgen looks for it itself, and says so when it cannot find it.
fn ensure_libclang(install: bool) {
    let debian_has = || {
        fs::read_dir("/usr/lib").into_iter().flatten().flatten().any(|d| {
            d.file_name().to_string_lossy().starts_with("llvm-")
                && d.path().join("lib/libclang.so").exists()
        })
    };
    if install && which("apt-get").is_some() && !debian_has() {
        if let Err(e) = apt_install(&["libclang-dev".into()], None) {
            println!("vmtest: libclang-dev could not be installed ({e}); bindgen looks for libclang itself");
        }
    }
}

/// `program`'s bytes without its debug information (tens of MiB the
/// guest would hold in RAM), stripped into `dir` where `strip` is there;
/// a stripped copy newer than the program is used as it is (a task packs
/// the same programs for each of its guests).
pub(crate) fn without_debug_info(program: &Path, dir: &Path) -> Result<Vec<u8>> {
    let name = program.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let stripped = dir.join(format!("{name}.stripped"));
    let modified = |p: &Path| fs::metadata(p).and_then(|m| m.modified()).ok();
    if modified(&stripped).is_some_and(|s| modified(program).is_some_and(|p| s >= p)) {
        return fs::read(&stripped).map_err(|e| Error::io(&stripped, e));
    }
    let strip = Command::new("strip")
        .arg("--strip-debug")
        .arg("-o")
        .arg(&stripped)
        .arg(program)
        .stderr(Stdio::null())
        .status();
    let packed = if strip.is_ok_and(|s| s.success()) {
        &stripped
    } else {
        // Nothing half-written is taken for a stripped copy next time.
        let _ = fs::remove_file(&stripped);
        program
    };
    fs::read(packed).map_err(|e| Error::io(packed, e))
}

/// The shared objects the dynamically linked `programs` need, less those
/// in `have`, sorted.
fn libraries_of(programs: &[PathBuf], have: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut libs = Vec::new();
    for p in programs {
        let bytes = fs::read(p).map_err(|e| Error::io(p, e))?;
        if elf::is_static_executable(&bytes)
            .map_err(|e| Error::new(format!("{}: {e}", p.display())))?
        {
            continue;
        }
        let files = with_libraries(p).ok_or_else(|| {
            Error::new(format!("cannot list the shared objects {} needs (ldd)", p.display()))
        })?;
        libs.extend(files.into_iter().filter(|f| f != p && !have.contains(f)));
    }
    libs.sort();
    libs.dedup();
    Ok(libs)
}

/// A dynamically linked program with the shared objects it needs
/// (from `ldd`), as (path in the guest = path on the host) files.
pub(crate) fn with_libraries(program: &Path) -> Option<Vec<PathBuf>> {
    let out = Command::new("ldd").arg(program).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let mut files = vec![program.to_path_buf()];
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        // "libz.so.1 => /lib/x86_64-linux-gnu/libz.so.1 (0x...)" or
        // "/lib64/ld-linux-x86-64.so.2 (0x...)"
        let path = match line.split_once("=>") {
            Some((_, rhs)) => rhs.split_whitespace().next(),
            None => line.split_whitespace().next(),
        };
        if let Some(p) = path.filter(|p| p.starts_with('/')) {
            files.push(PathBuf::from(p));
        }
    }
    Some(files)
}

/// Adds the directories above `name` (a path without the leading `/`)
/// that the archive does not have yet.
fn add_parents(a: &mut cpio::Archive, dirs: &mut Vec<String>, name: &str) {
    let mut parent = String::new();
    for comp in name.split('/').rev().skip(1).collect::<Vec<_>>().into_iter().rev() {
        parent = if parent.is_empty() { comp.to_string() } else { format!("{parent}/{comp}") };
        if !dirs.contains(&parent) {
            a.dir(&parent);
            dirs.push(parent.clone());
        }
    }
}

fn add_host_file(a: &mut cpio::Archive, dirs: &mut Vec<String>, path: &Path) -> Result<()> {
    // Resolve symlinks for the content; keep the requested path.
    let bytes = fs::read(path).map_err(|e| Error::io(path, e))?;
    let name = path.to_string_lossy().trim_start_matches('/').to_string();
    add_parents(a, dirs, &name);
    a.file(&name, 0o755, &bytes);
    Ok(())
}

/// A file or link put in the guest at a path of its own (not a host
/// file at the same path).
#[derive(Debug, Clone)]
pub(crate) enum GuestEntry {
    /// A regular file.
    File {
        /// Absolute path in the guest.
        path: String,
        /// Permission bits.
        mode: u32,
        /// Contents.
        bytes: Vec<u8>,
    },
    /// A symbolic link.
    Symlink {
        /// Absolute path in the guest.
        path: String,
        /// What it points to.
        target: String,
    },
}

/// Packs the initramfs; returns its path.
pub(crate) fn pack_initramfs(
    out: &Path,
    programs: &[PathBuf],
    modules: &[kernel::Module],
    init: &str,
    peer_files: &[PathBuf],
) -> Result<PathBuf> {
    pack_initramfs_with(out, programs, modules, init, peer_files, &[])
}

/// [`pack_initramfs`] with `entries` placed at their own paths.
pub(crate) fn pack_initramfs_with(
    out: &Path,
    programs: &[PathBuf],
    modules: &[kernel::Module],
    init: &str,
    peer_files: &[PathBuf],
    entries: &[GuestEntry],
) -> Result<PathBuf> {
    let mut a = cpio::Archive::new();
    let mut dirs: Vec<String> = Vec::new();
    for d in ["bin", "sbin", "dev", "proc", "sys", "tmp", "lib", "lib/modules", "usr", "usr/bin"] {
        a.dir(d);
        dirs.push(d.to_string());
    }
    a.char_device("dev/console", 0o600, 5, 1);
    a.char_device("dev/null", 0o666, 1, 3);
    let busybox = static_busybox().ok_or_else(|| Error::new("no static busybox"))?;
    let bb = fs::read(&busybox).map_err(|e| Error::io(&busybox, e))?;
    a.file("bin/busybox", 0o755, &bb);
    a.symlink("bin/sh", "busybox");
    for p in programs {
        let bin = without_debug_info(p, out)?;
        let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        a.file(&format!("bin/{name}"), 0o755, &bin);
    }
    for lib in libraries_of(programs, peer_files)? {
        add_host_file(&mut a, &mut dirs, &lib)?;
    }
    for m in modules {
        a.file(&format!("lib/modules/{}", m.name), 0o644, &m.bytes);
    }
    for f in peer_files {
        add_host_file(&mut a, &mut dirs, f)?;
    }
    for e in entries {
        match e {
            GuestEntry::File { path, mode, bytes } => {
                let name = path.trim_start_matches('/');
                add_parents(&mut a, &mut dirs, name);
                a.file(name, *mode, bytes);
            }
            GuestEntry::Symlink { path, target } => {
                let name = path.trim_start_matches('/');
                add_parents(&mut a, &mut dirs, name);
                a.symlink(name, target);
            }
        }
    }
    a.file("init", 0o755, init.as_bytes());
    let path = out.join("initramfs.cpio");
    let mut f = fs::File::create(&path).map_err(|e| Error::io(&path, e))?;
    a.write_to(&mut f).map_err(|e| Error::io(&path, e))?;
    Ok(path)
}

/// Fresh, sparse backing files for the namespaces.
pub(crate) fn make_images(dir: &Path) -> Result<()> {
    fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let all = guest::NAMESPACES.iter().chain(guest::SECOND_NAMESPACES).chain(guest::FDP_NAMESPACES);
    for ns in all {
        let p = dir.join(ns.image);
        let f = fs::File::create(&p).map_err(|e| Error::io(&p, e))?;
        f.set_len(ns.mib << 20).map_err(|e| Error::io(&p, e))?;
    }
    Ok(())
}

/// What the guest reported.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    /// The result marker's verdict, if the guest printed it.
    pub(crate) result: Option<bool>,
    /// Summary lines of the runs.
    pub(crate) summaries: Vec<String>,
    /// Lines reporting failures.
    pub(crate) failures: Vec<String>,
    /// `zns-engines` results (the JSON after the marker).
    pub(crate) engine_results: Vec<String>,
}

pub(crate) fn observe(line: &str, o: &mut Outcome) {
    if let Some(rest) = line.split(RESULT_MARKER).nth(1) {
        o.result = Some(rest.trim() == "PASS");
    } else if let Some(json) = line.strip_prefix(guest::ENGINE_RESULT) {
        o.engine_results.push(json.to_string());
    } else if line.starts_with("FAIL ")
        || line.starts_with("ENGINE-FAIL ")
        || line.starts_with("DIFF ")
        || line.starts_with("differential: FAIL")
        || line.contains("vmtest: FAILED")
    {
        o.failures.push(line.to_string());
    } else if line.starts_with("conformance: ")
        || line.starts_with(guest::CHARACTERIZE_SUMMARY)
        || line.contains("vmtest: END ")
        || (line.starts_with("differential: ")
            && (line.contains(" vs ") || line.contains("unexplained differences")))
    {
        o.summaries.push(line.to_string());
    }
}

/// Boots the guest and follows its console until it powers off.
pub(crate) fn boot(
    kernel: &kernel::Kernel,
    initramfs: &Path,
    devices: &[String],
    o: &Options,
    log: &Path,
) -> Result<Outcome> {
    boot_watched(kernel, initramfs, devices, o, log, &mut |_| {})
}

/// [`boot`], handing each console line to `watch` as it arrives (for
/// tasks that act on the host while the guest runs).
pub(crate) fn boot_watched(
    kernel: &kernel::Kernel,
    initramfs: &Path,
    devices: &[String],
    o: &Options,
    log: &Path,
    watch: &mut dyn FnMut(&str),
) -> Result<Outcome> {
    boot_with(kernel, initramfs, devices, "", o, log, watch)
}

/// The first line every guest's `/init` prints (see
/// [`guest::shell_start`]): the kernel booted and user space runs.
pub(crate) const GUEST_UP: &str = "vmtest: guest up:";

/// How long a guest may take to reach [`GUEST_UP`]. A boot under TCG takes
/// well under a minute; one that has not got there after this long has
/// hung in the kernel (a vCPU that stops taking timer interrupts under
/// multi-threaded TCG does this now and then).
const BOOT_DEADLINE: Duration = Duration::from_secs(300);

/// [`BOOT_DEADLINE`] for a guest of options `o`: on a clock dilated F
/// times ([`guest_clock`]) the firmware's and the kernel's timed waits
/// before user space (about a quarter of a second of the guest's time)
/// take F times longer, half a second per unit of F allowed.
fn boot_deadline(o: &Options) -> Duration {
    let dilated = o.guest_clock.map_or(Duration::ZERO, |f| Duration::from_secs_f64(0.5 * f));
    BOOT_DEADLINE + dilated
}

/// Boots a guest that hung before [`GUEST_UP`] this many times in all. The
/// guest has run nothing yet then, so its images are as they were.
const BOOT_ATTEMPTS: u32 = 3;

/// Console lines that say a vCPU stopped making progress: before
/// [`GUEST_UP`], the boot will not finish.
fn is_boot_stall(line: &str) -> bool {
    line.contains("rcu_preempt detected stalls") || line.contains("rcu_sched detected stalls")
}

/// How one boot ended.
enum Ended {
    /// QEMU exited (the guest powered off, or QEMU failed).
    Exited(std::process::ExitStatus),
    /// The guest ran past the task's timeout.
    TimedOut,
    /// The guest hung before user space started; the reason.
    Hung(String),
}

/// [`boot_watched`] with `extra` appended to the kernel command line
/// (`intel_iommu=on`, say). A boot that hangs before the guest's `/init`
/// starts is retried (at most [`BOOT_ATTEMPTS`] boots).
pub(crate) fn boot_with(
    kernel: &kernel::Kernel,
    initramfs: &Path,
    devices: &[String],
    extra: &str,
    o: &Options,
    log: &Path,
    watch: &mut dyn FnMut(&str),
) -> Result<Outcome> {
    for attempt in 1..=BOOT_ATTEMPTS {
        let mut cmd = qemu_command(kernel, initramfs, devices, extra, o);
        println!(
            "vmtest: booting {} ({}), timeout {} s",
            kernel.package,
            if o.kvm { "KVM" } else { "TCG software emulation" },
            o.timeout.as_secs()
        );
        let child = cmd.spawn().map_err(|e| Error::new(format!("qemu-system-x86_64: {e}")))?;
        let (ended, outcome) = follow(child, o.timeout, boot_deadline(o), log, watch)?;
        match ended {
            Ended::Exited(status) => {
                if !status.success() {
                    println!("vmtest: qemu exited with {status}");
                }
                return Ok(outcome);
            }
            Ended::TimedOut => {
                return Err(Error::new(format!(
                    "the guest did not finish within {} s (log: {})",
                    o.timeout.as_secs(),
                    log.display()
                )))
            }
            Ended::Hung(why) if attempt < BOOT_ATTEMPTS => {
                println!("vmtest: the guest hung while booting ({why}); booting it again");
            }
            Ended::Hung(why) => {
                return Err(Error::new(format!(
                "the guest hung while booting in each of {BOOT_ATTEMPTS} boots ({why}; log: {})",
                log.display()
            )))
            }
        }
    }
    unreachable!("the last attempt returns")
}

/// The QEMU command line of a guest: `-smp`, memory, the accelerator, the
/// kernel and initramfs, `devices`, the console on stdio.
fn qemu_command(
    kernel: &kernel::Kernel,
    initramfs: &Path,
    devices: &[String],
    extra: &str,
    o: &Options,
) -> Command {
    let mut cmd = Command::new("qemu-system-x86_64");
    cmd.args(["-nographic", "-no-reboot", "-m", &o.memory, "-smp", &o.smp.to_string()]);
    if o.kvm {
        cmd.args(["-enable-kvm", "-cpu", "host"]);
    } else {
        cmd.args(["-accel", "tcg,thread=multi"]);
        if o.guest_clock.is_some() {
            cmd.args(["-cpu", guest_clock::CPU]);
        }
    }
    cmd.arg("-kernel").arg(&kernel.vmlinuz).arg("-initrd").arg(initramfs);
    let mut extra = extra.to_string();
    if let Some(f) = o.guest_clock {
        guest_clock::apply(&mut cmd, f);
        extra = format!("{} {extra}", guest_clock::KERNEL_ARGS);
    }
    // Without native multipath the namespace block devices are the
    // namespaces themselves, whichever QEMU (newer ones put every
    // controller in a subsystem, which makes Linux put a multipath head in
    // front of each namespace).
    let append =
        format!("console=ttyS0 panic=-1 loglevel=4 rdinit=/init nvme_core.multipath=N {extra}");
    cmd.args(["-append", append.trim_end()]);
    cmd.args(devices);
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd
}

/// Streams `child`'s console to stdout, `log` and `watch` until QEMU exits,
/// `timeout` passes, or the boot hangs before [`GUEST_UP`] (then QEMU is
/// killed).
fn follow(
    mut child: std::process::Child,
    timeout: Duration,
    boot: Duration,
    log: &Path,
    watch: &mut dyn FnMut(&str),
) -> Result<(Ended, Outcome)> {
    let (tx, rx) = mpsc::channel::<String>();
    let mut readers = Vec::new();
    if let Some(out) = child.stdout.take() {
        let tx = tx.clone();
        readers.push(std::thread::spawn(move || {
            for line in BufReader::new(out).split(b'\n').map_while(|l| l.ok()) {
                let s = String::from_utf8_lossy(&line).trim_end_matches('\r').to_string();
                if tx.send(s).is_err() {
                    break;
                }
            }
        }));
    }
    if let Some(err) = child.stderr.take() {
        let tx = tx.clone();
        readers.push(std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(|l| l.ok()) {
                if tx.send(format!("qemu: {line}")).is_err() {
                    break;
                }
            }
        }));
    }
    drop(tx);
    let mut logf = fs::File::create(log).map_err(|e| Error::io(log, e))?;
    let start = Instant::now();
    let deadline = start + timeout;
    let boot_deadline = start + boot.min(timeout);
    let mut outcome = Outcome::default();
    let mut up = false;
    let mut stop = None;
    while stop.is_none() {
        let until = if up { deadline } else { boot_deadline };
        match rx.recv_timeout(until.saturating_duration_since(Instant::now())) {
            Ok(line) => {
                println!("guest| {line}");
                let _ = writeln!(logf, "{line}");
                up |= line.contains(GUEST_UP);
                if !up && is_boot_stall(&line) {
                    stop = Some(Ended::Hung(format!("the kernel reported: {}", line.trim())));
                }
                observe(&line, &mut outcome);
                watch(&line);
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) if up || boot_deadline >= deadline => {
                stop = Some(Ended::TimedOut)
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                stop = Some(Ended::Hung(format!("no user space after {} s", boot.as_secs())))
            }
        }
    }
    if stop.is_some() {
        let _ = child.kill();
    }
    let status = child.wait().map_err(|e| Error::new(format!("qemu: {e}")))?;
    for r in readers {
        let _ = r.join();
    }
    Ok((stop.unwrap_or(Ended::Exited(status)), outcome))
}

/// A seed from the clock, for runs that do not name one.
pub(crate) fn new_seed() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    // SplitMix64's finalizer: nearby times give unrelated seeds.
    let mut z = t ^ ((std::process::id() as u64) << 32);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Runs the whole task: the guest with the kernel paths and the
/// user-space driver over sysfs, then (when any of its runs is selected)
/// the VFIO guest.
pub fn run(o: &Options) -> Result<()> {
    let start = Instant::now();
    let root = workspace_root();
    let target = target_dir(&root);
    let cache = target.join("vmtest");
    fs::create_dir_all(&cache).map_err(|e| Error::io(&cache, e))?;
    ensure_host_tools(o.install, o.peers, &cache)?;
    let kernel = kernel::prepare(
        &cache.join("kernel"),
        kernel::Flavour::Cloud,
        o.kernel.as_deref(),
        o.install,
    )?;
    let programs = build_guest_binaries(&root, &target, o.install, GUEST_PROGRAMS)?;
    let mut runs = guest::default_runs();
    if let Some(keep) = &o.runs {
        runs.retain(|r| keep.contains(&r.label));
    }
    let (vfio_runs, mut plain_runs): (Vec<_>, Vec<_>) =
        runs.into_iter().partition(guest::Run::in_vfio_guest);
    let fdp = plain_runs.iter().any(|r| r.tool == guest::Tool::DifferentialFdp);
    if fdp && !qemu_supports_fdp()? {
        plain_runs.retain(|r| r.tool != guest::Tool::DifferentialFdp);
    }
    let seed = o.seed.unwrap_or_else(new_seed);
    let differential = |r: &[guest::Run]| {
        let seeded = [guest::Tool::Differential, guest::Tool::DifferentialFdp];
        r.iter().filter(|r| seeded.contains(&r.tool)).count() as u64
    };
    if differential(&plain_runs) + differential(&vfio_runs) > 0 {
        println!(
            "vmtest: differential runs with seeds from {seed:#x} (one more each run), {} \
             sequences each",
            o.sequences
        );
    }
    let prepared = start.elapsed();
    let mut outcomes = Vec::new();
    if !plain_runs.is_empty() {
        let modules = kernel::modules_to_load(&kernel)?;
        let (peers, nvme_cli, fio) = peer_files(o);
        let mut plan = plan(o, &modules, plain_runs.clone(), seed);
        (plan.nvme_cli, plan.fio) = (nvme_cli, fio);
        let init = guest::init_script(&plan);
        let fdp = plain_runs.iter().any(|r| r.tool == guest::Tool::DifferentialFdp);
        let g = Guest { name: "guest", init, modules, peers, iommu: false, fdp };
        outcomes.push(boot_guest(&cache, &kernel, &programs, &g, o)?);
    }
    if !vfio_runs.is_empty() {
        let modules = kernel::vfio_modules_to_load(&kernel)?;
        let plan = plan(o, &modules, vfio_runs, seed.wrapping_add(differential(&plain_runs)));
        let init = guest::vfio_script(&plan);
        let g =
            Guest { name: "vfio-guest", init, modules, peers: Vec::new(), iommu: true, fdp: false };
        outcomes.push(boot_guest(&cache, &kernel, &programs, &g, o)?);
    }
    println!();
    let mut pass = true;
    for (name, outcome, secs) in &outcomes {
        for s in &outcome.summaries {
            println!("vmtest: {name}: {}", s.trim_start_matches("vmtest: "));
        }
        for f in &outcome.failures {
            println!("vmtest: {name}: {}", f.trim_start_matches("vmtest: "));
        }
        let verdict = match outcome.result {
            Some(true) if outcome.failures.is_empty() => "PASS",
            Some(_) => "FAIL",
            None => "FAIL (no result marker: the guest stopped early)",
        };
        pass &= verdict == "PASS";
        println!(
            "vmtest: {name}: {verdict} in {secs:.1} s (log {})",
            cache.join(format!("{name}.log")).display()
        );
    }
    println!(
        "vmtest: {} in {:.1} s (preparation {:.1} s)",
        if pass { "PASS" } else { "FAIL" },
        start.elapsed().as_secs_f64(),
        prepared.as_secs_f64()
    );
    if pass {
        Ok(())
    } else {
        Err(Error::new("the guest tests failed"))
    }
}

/// Sequences of the FDP differential run at most: 1500 commands or so,
/// each followed by two more on each side reading its state back; about
/// 10 s in the guest under software emulation.
const FDP_SEQUENCES: u64 = 50;

/// Whether this QEMU's NVMe subsystem has Flexible Data Placement. Without
/// it the FDP run is left out, saying so, or under `CI=true` the task
/// fails: CI must run it.
fn qemu_supports_fdp() -> Result<bool> {
    let out = Command::new("qemu-system-x86_64")
        .args(["-device", "nvme-subsys,help"])
        .output()
        .map_err(|e| Error::new(format!("qemu-system-x86_64 -device nvme-subsys,help: {e}")))?;
    let help =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    if guest::qemu_has_fdp(&help) {
        return Ok(true);
    }
    let why = "this QEMU's nvme-subsys has no fdp properties (QEMU 8.0 or later has them)";
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        return Err(Error::new(format!("CI=true and the FDP run cannot run: {why}")));
    }
    println!("vmtest: diff-ng-fdp skipped: {why}");
    Ok(false)
}

/// The plan of a guest running `runs`, with `modules` loaded.
fn plan(o: &Options, modules: &[kernel::Module], runs: Vec<guest::Run>, seed: u64) -> Plan {
    let mut conformance_args = Vec::new();
    if let Some(only) = &o.only {
        conformance_args.extend(["--only".to_string(), only.clone()]);
    }
    if o.repeat > 1 {
        conformance_args.extend(["--repeat".to_string(), o.repeat.to_string()]);
    }
    if o.trace {
        conformance_args.push("--fail-fast".into());
    }
    Plan {
        modules: modules.iter().map(|m| m.name.clone()).collect(),
        runs,
        conformance_args,
        differential_args: vec!["--count".into(), o.sequences.to_string()],
        fdp_args: vec![
            "--count".into(),
            o.sequences.min(FDP_SEQUENCES).to_string(),
            "--length".into(),
            "20..40".into(),
        ],
        differential_seed: seed,
        hugepages: 64,
        nvme_cli: false,
        fio: false,
        trace: o.trace,
    }
}

/// nvme-cli and fio with their shared objects, when `--no-peers` is not
/// given and `ldd` lists them; whether each is there.
fn peer_files(o: &Options) -> (Vec<PathBuf>, bool, bool) {
    let mut files = Vec::new();
    let (mut nvme_cli, mut fio) = (false, false);
    if o.peers {
        for (prog, flag) in [("nvme", &mut nvme_cli), ("fio", &mut fio)] {
            match which(prog).and_then(|p| with_libraries(&p)) {
                Some(f) => {
                    files.extend(f);
                    *flag = true;
                }
                None => println!("vmtest: {prog} not packed into the guest (no ldd listing)"),
            }
        }
        files.sort();
        files.dedup();
    }
    (files, nvme_cli, fio)
}

/// One guest boot of the task.
struct Guest {
    /// Its name in the summary and its log's name.
    name: &'static str,
    /// The `/init` script.
    init: String,
    /// The modules it loads.
    modules: Vec<kernel::Module>,
    /// Host programs packed with their libraries.
    peers: Vec<PathBuf>,
    /// The VFIO guest: emulated IOMMU, two controllers.
    iommu: bool,
    /// The FDP controller beside the ZNS one.
    fdp: bool,
}

/// Packs and boots `g` on fresh namespace images; its name, what it
/// reported and its time in seconds.
fn boot_guest(
    cache: &Path,
    kernel: &kernel::Kernel,
    programs: &[PathBuf],
    g: &Guest,
    o: &Options,
) -> Result<(&'static str, Outcome, f64)> {
    let initramfs = pack_initramfs(cache, programs, &g.modules, &g.init, &g.peers)?;
    let images = cache.join("images");
    make_images(&images)?;
    let (mut devices, append) = if g.iommu {
        (guest::qemu_iommu_args(&images), guest::IOMMU_APPEND)
    } else {
        (guest::qemu_device_args(&images), "")
    };
    if g.fdp {
        devices.extend(guest::qemu_fdp_args(&images));
    }
    let log = cache.join(format!("{}.log", g.name));
    let t = Instant::now();
    let outcome = boot_with(kernel, &initramfs, &devices, append, o, &log, &mut |_| {})?;
    let secs = t.elapsed().as_secs_f64();
    println!("vmtest: {} took {secs:.1} s", g.name);
    Ok((g.name, outcome, secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dynamic_program_brings_its_shared_objects_and_no_twice() {
        // This test binary is linked dynamically against the C library.
        let me = std::env::current_exe().unwrap();
        let libs = libraries_of(std::slice::from_ref(&me), &[]).unwrap();
        let libc = libs.iter().find(|l| l.to_string_lossy().contains("libc.so")).cloned();
        let libc = libc.expect("the C library among the shared objects");
        assert!(!libs.contains(&me), "the program is not its own library");
        let twice = libraries_of(&[me.clone(), me.clone()], &[]).unwrap();
        assert_eq!(twice, libs, "each shared object once");
        let without = libraries_of(&[me], std::slice::from_ref(&libc)).unwrap();
        assert!(!without.contains(&libc) && without.len() == libs.len() - 1);
    }

    #[test]
    fn a_shell_script_is_not_a_program_to_pack() {
        let dir = std::env::temp_dir().join(format!("znskit-libs-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let script = dir.join("run.sh");
        fs::write(&script, "#!/bin/sh\n").unwrap();
        let err = libraries_of(&[script], &[]).unwrap_err().to_string();
        fs::remove_dir_all(&dir).unwrap();
        assert!(err.contains("run.sh"), "{err}");
    }

    #[test]
    fn options_parse_and_refuse_what_they_do_not_know() {
        let p = |a: &[&str]| crate::args::tests::parse::<Args>(a);
        let o = p(&["--timeout", "60", "--runs", "ng-pow2,pcie", "--no-install"]).unwrap().unwrap();
        let o = o.options();
        assert_eq!(o.timeout, Duration::from_secs(60));
        assert_eq!(o.runs.as_deref(), Some(&["ng-pow2".to_string(), "pcie".to_string()][..]));
        assert!(!o.install && o.peers);
        let d = p(&[]).unwrap().unwrap().options();
        assert_eq!(
            (d.timeout, d.repeat, d.sequences, d.runs, d.seed),
            (Duration::from_secs(900), 1, 1000, None, None)
        );
        assert!(d.peers && !d.trace && !d.kvm && d.only.is_none());
        let o = p(&[
            "--seed",
            "0x1f",
            "--no-peers",
            "--trace",
            "--only",
            "copy",
            "--repeat",
            "3",
            "--sequences",
            "5",
        ])
        .unwrap()
        .unwrap()
        .options();
        assert_eq!(
            (o.seed, o.only.as_deref(), o.repeat, o.sequences),
            (Some(31), Some("copy"), 3, 5)
        );
        assert!(!o.peers && o.trace);
        assert_eq!(p(&["--seed", "12"]).unwrap().unwrap().options().seed, Some(12));
        assert!(p(&["--runs", "floppy"]).unwrap_err().to_string().contains("unknown run"));
        assert!(p(&["--timeout"]).is_err());
        assert!(p(&["--frobnicate"]).is_err());
        assert!(p(&["--help"]).unwrap().is_none());
    }

    #[test]
    fn bad_values_are_errors_that_name_the_option() {
        for (args, name) in [
            (&["--runs", "ng-pow2,floppy"][..], "--runs"),
            (&["--runs", ""], "--runs"),
            (&["--seed", "0xzz"], "--seed"),
            (&["--seed", "-1"], "--seed"),
            (&["--repeat", "twice"], "--repeat"),
            (&["--repeat", "-2"], "--repeat"),
            (&["--sequences", "many"], "--sequences"),
            (&["--smp", "0"], "--smp"),
            (&["--only"], "--only"),
        ] {
            let e = crate::args::tests::parse::<Args>(args).unwrap_err().to_string();
            assert!(e.contains(name), "{args:?}: {e}");
        }
    }

    #[test]
    fn a_dilated_guest_clock_runs_qemu_under_libfaketime() {
        let k = kernel::Kernel {
            package: "linux-image-test".into(),
            vmlinuz: "vmlinuz".into(),
            modules_dir: "modules".into(),
        };
        let args = |cmd: &Command| -> Vec<String> {
            cmd.get_args().map(|a| a.to_string_lossy().into_owned()).collect()
        };
        let faketime = |cmd: &Command| cmd.get_envs().any(|(k, _)| k == "FAKETIME");
        let plain = qemu_command(&k, Path::new("init"), &[], "x=1", &Options::default());
        assert!(!faketime(&plain));
        assert!(!args(&plain).iter().any(|a| a.contains(guest_clock::KERNEL_ARGS)));
        let o = Options { guest_clock: Some(16.0), ..Options::default() };
        let dilated = qemu_command(&k, Path::new("init"), &[], "x=1", &o);
        assert!(faketime(&dilated));
        let append = args(&dilated).into_iter().find(|a| a.contains("rdinit=/init")).unwrap();
        assert!(append.ends_with("no_timer_check random.trust_cpu=on x=1"), "{append}");
        // A CPU with RDRAND seeds the kernel's generator at boot.
        let cpu = |cmd: &Command| args(cmd).windows(2).any(|w| w == ["-cpu", guest_clock::CPU]);
        assert!(cpu(&dilated) && !cpu(&plain));
        assert_eq!(boot_deadline(&Options::default()), BOOT_DEADLINE);
        assert_eq!(boot_deadline(&o), BOOT_DEADLINE + Duration::from_secs(8));
    }

    #[test]
    fn the_console_is_read_for_results() {
        let mut o = Outcome::default();
        for l in [
            "PASS ng:/dev/ng0n1 copy (0.10 s)",
            "FAIL zbd:/dev/nvme0n1 copy (0.10 s): boom",
            "conformance: 16 passed, 1 failed",
            "vmtest: END ng-pow2 rc=0 (12 s)",
            "differential: ng:/dev/ng0n1 vs emu, seed 0x1: 1000 sequences, 9 commands",
            "differential: commands: write 5",
            "DIFF sequence 3 command 4 (replay: ...): write 1 blocks at LBA 0",
            "differential: 1 unexplained differences",
            "characterize: characterize-ng: results.json 90000 bytes, report.html 80000 bytes",
            "ENGINE-RESULT {\"engine\":\"ng\"}",
            "VMTEST-RESULT: FAIL",
        ] {
            observe(l, &mut o);
        }
        assert_eq!(o.result, Some(false));
        assert_eq!(o.failures.len(), 2);
        assert_eq!(o.summaries.len(), 5);
        assert_eq!(o.engine_results, ["{\"engine\":\"ng\"}"]);
        let mut o = Outcome::default();
        observe("VMTEST-RESULT: PASS", &mut o);
        assert_eq!(o.result, Some(true));
    }

    fn console(script: &str) -> std::process::Child {
        Command::new("sh")
            .args(["-c", script])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    #[test]
    fn every_guest_announces_user_space_with_the_line_the_boot_waits_for() {
        let init = guest::shell_start("test");
        assert!(init.contains("say() { echo \"vmtest: $*\"; }"), "{init}");
        assert!(GUEST_UP.starts_with("vmtest: "));
        let said = GUEST_UP.trim_start_matches("vmtest: ");
        assert!(init.contains(&format!("say \"{said}")), "{init}");
    }

    #[test]
    fn a_stall_before_user_space_is_a_hung_boot_and_after_it_is_not() {
        let dir = std::env::temp_dir().join(format!("znskit-vmtest-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let log = dir.join("console.log");
        let stall = "rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:";
        let t = Instant::now();
        let child = console(&format!("echo '{stall}'; exec sleep 60"));
        let (ended, _) =
            follow(child, Duration::from_secs(120), BOOT_DEADLINE, &log, &mut |_| {}).unwrap();
        assert!(matches!(ended, Ended::Hung(ref why) if why.contains("rcu_preempt")));
        assert!(t.elapsed() < Duration::from_secs(30), "the hung boot was not stopped at once");
        let child = console(&format!(
            "echo '{GUEST_UP} Linux'; echo '{stall}'; echo 'VMTEST-RESULT: PASS'"
        ));
        let mut seen = 0;
        let (ended, outcome) =
            follow(child, Duration::from_secs(120), BOOT_DEADLINE, &log, &mut |_| seen += 1)
                .unwrap();
        assert!(matches!(ended, Ended::Exited(s) if s.success()));
        assert_eq!((outcome.result, seen), (Some(true), 3));
        let child = console(&format!("echo '{GUEST_UP} Linux'; exec sleep 60"));
        let (ended, _) =
            follow(child, Duration::from_secs(1), BOOT_DEADLINE, &log, &mut |_| {}).unwrap();
        assert!(matches!(ended, Ended::TimedOut));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn backports_come_from_the_configured_archive() {
        let deb822 = "Types: deb\nURIs: http://mirror.example/debian\n\
                      Suites: bookworm bookworm-updates\nComponents: main\n\n\
                      Types: deb\nURIs: http://mirror.example/debian-security\n\
                      Suites: bookworm-security\nComponents: main\n";
        let one_line = "deb [arch=amd64] https://other.example/apt stable main\n";
        let text = with_backports(&format!("{deb822}\n{one_line}"), "bookworm").unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "deb http://mirror.example/debian bookworm main",
                "deb http://mirror.example/debian bookworm-updates main",
                "deb http://mirror.example/debian-security bookworm-security main",
                "deb http://mirror.example/debian bookworm-backports main",
            ]
        );
        let legacy = "deb http://mirror.example/debian bookworm main contrib\n";
        assert!(with_backports(legacy, "bookworm")
            .unwrap()
            .ends_with("deb http://mirror.example/debian bookworm-backports main contrib\n"));
        assert!(with_backports(one_line, "bookworm").is_none());
        let src = source_entries(&format!("{deb822}\n{one_line}"), "bookworm").unwrap();
        assert_eq!(
            src.lines().collect::<Vec<_>>(),
            [
                "deb-src http://mirror.example/debian bookworm main",
                "deb-src http://mirror.example/debian bookworm-updates main",
                "deb-src http://mirror.example/debian-security bookworm-security main",
            ]
        );
        assert!(source_entries(one_line, "bookworm").is_none());
    }

    #[test]
    fn the_workspace_root_holds_the_workspace_manifest() {
        let root = workspace_root();
        let manifest = fs::read_to_string(root.join("Cargo.toml")).unwrap();
        assert!(manifest.contains("[workspace]"));
    }
}
