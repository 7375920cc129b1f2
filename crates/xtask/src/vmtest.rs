//! `cargo xtask vmtest`: the device conformance suite inside a QEMU guest,
//! against QEMU's own NVMe ZNS controller, through the io_uring
//! passthrough, zoned block device and user-space PCIe driver backends.
//!
//! Steps: install what is missing (Debian packages), fetch and unpack a
//! Debian cloud kernel, build a statically linked `zns-conformance`, pack
//! a busybox initramfs whose `/init` runs it, boot QEMU with three
//! namespaces, stream the serial console, and fail on a failed check, a
//! missing result marker or a timeout.

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::guest::{self, Plan, RESULT_MARKER};
use crate::{cpio, elf, kernel, run_checked, Error, Result};

const USAGE: &str = "usage: cargo xtask vmtest [OPTIONS]

Boots a QEMU guest (Debian cloud kernel, busybox initramfs) with QEMU's NVMe
ZNS controller and runs the device conformance suite against ng:/dev/ng0n1,
ng:/dev/ng0n2, zbd:/dev/nvme0n1 (io_uring and pread/pwrite), and pcie:<bdf>
after unbinding the controller from the kernel. Exits non-zero on any failure.

options:
  --timeout SECS     give the guest this long (default 480)
  --kernel PACKAGE   kernel package (default: newest linux-image-*-cloud-amd64-unsigned)
  --only CHECK,...   run only these conformance checks
  --repeat N         run the conformance checks N times on each device
  --runs LABEL,...   only these runs (ng-pow2, ng-npow2, zbd-uring, zbd-psync, pcie)
  --no-install       do not install missing packages or targets; fail instead
  --no-peers         leave nvme-cli and fio out of the guest
  --kvm              use KVM (software emulation otherwise: KVM inside some
                     virtual machines fails to run the guest kernel)
  --smp N            guest CPUs (default 2)
  --memory SIZE      guest memory (default 1G)";

/// Options of the task.
#[derive(Debug, Clone)]
pub struct Options {
    timeout: Duration,
    kernel: Option<String>,
    only: Option<String>,
    repeat: u32,
    runs: Option<Vec<String>>,
    install: bool,
    peers: bool,
    kvm: bool,
    smp: u32,
    memory: String,
}

impl Options {
    /// Parses the arguments after `vmtest`; `None` after printing help.
    pub fn parse(mut args: impl Iterator<Item = String>) -> Result<Option<Options>> {
        let mut o = Options {
            timeout: Duration::from_secs(480),
            kernel: None,
            only: None,
            repeat: 1,
            runs: None,
            install: true,
            peers: true,
            kvm: false,
            smp: 2,
            memory: "1G".into(),
        };
        let labels: Vec<String> = guest::default_runs().into_iter().map(|r| r.label).collect();
        while let Some(a) = args.next() {
            let mut value = |name: &str| {
                args.next().ok_or_else(|| Error::new(format!("{name} needs a value\n{USAGE}")))
            };
            match a.as_str() {
                "-h" | "--help" => {
                    println!("{USAGE}");
                    return Ok(None);
                }
                "--timeout" => {
                    let v = value("--timeout")?;
                    let s: u64 = v
                        .parse()
                        .map_err(|_| Error::new(format!("--timeout {v:?}: not a number")))?;
                    o.timeout = Duration::from_secs(s.max(1));
                }
                "--kernel" => o.kernel = Some(value("--kernel")?),
                "--only" => o.only = Some(value("--only")?),
                "--repeat" => {
                    let v = value("--repeat")?;
                    o.repeat = v.parse().map_err(|_| Error::new(format!("--repeat {v:?}")))?;
                }
                "--runs" => {
                    let v: Vec<String> = value("--runs")?.split(',').map(str::to_string).collect();
                    if let Some(bad) = v.iter().find(|l| !labels.contains(l)) {
                        return Err(Error::new(format!(
                            "unknown run {bad:?} (runs: {})",
                            labels.join(", ")
                        )));
                    }
                    o.runs = Some(v);
                }
                "--no-install" => o.install = false,
                "--no-peers" => o.peers = false,
                "--kvm" => o.kvm = true,
                "--smp" => {
                    let v = value("--smp")?;
                    o.smp = v.parse().map_err(|_| Error::new(format!("--smp {v:?}")))?;
                }
                "--memory" => o.memory = value("--memory")?,
                other => return Err(Error::new(format!("unknown option {other:?}\n{USAGE}"))),
            }
        }
        Ok(Some(o))
    }
}

fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.ancestors().nth(2).unwrap_or(manifest).to_path_buf()
}

fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("target"))
}

fn which(cmd: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(cmd)).find(|p| p.is_file())
}

fn is_root() -> bool {
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
fn ensure_host_tools(install: bool, peers: bool) -> Result<()> {
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
    let apt = |update: bool| {
        let mut c = Command::new("apt-get");
        if update {
            c.arg("update");
        } else {
            c.args(["install", "-y", "--no-install-recommends"]).args(&missing);
        }
        c.env("DEBIAN_FRONTEND", "noninteractive");
        c
    };
    if run_checked(&mut apt(false), "apt-get install").is_err() {
        run_checked(&mut apt(true), "apt-get update")?;
        run_checked(&mut apt(false), "apt-get install")?;
    }
    Ok(())
}

const MUSL: &str = "x86_64-unknown-linux-musl";
const GNU: &str = "x86_64-unknown-linux-gnu";

/// The target to build static binaries for: musl when rustup has (or can
/// add) it, else glibc with a static C runtime.
fn static_target(install: bool) -> (&'static str, bool) {
    let installed = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).lines().any(|l| l.trim() == MUSL))
        .unwrap_or(false);
    if installed {
        return (MUSL, false);
    }
    if install {
        let added = Command::new("rustup")
            .args(["target", "add", MUSL])
            .status()
            .is_ok_and(|s| s.success());
        if added {
            return (MUSL, false);
        }
        println!("vmtest: the musl target is not installable here; linking glibc statically");
    }
    (GNU, true)
}

/// Builds `zns-conformance` statically for the guest.
fn build_guest_binary(root: &Path, target: &Path, install: bool) -> Result<PathBuf> {
    let (triple, crt_static) = static_target(install);
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(root).args([
        "build",
        "--release",
        "--package",
        "zns-device",
        "--bin",
        "zns-conformance",
        "--target",
        triple,
    ]);
    if crt_static {
        let mut flags = std::env::var("RUSTFLAGS").unwrap_or_default();
        flags.push_str(" -C target-feature=+crt-static");
        cmd.env("RUSTFLAGS", flags.trim());
    }
    println!("vmtest: building zns-conformance for {triple}");
    run_checked(&mut cmd, "cargo build (guest binary)")?;
    let bin = target.join(triple).join("release/zns-conformance");
    let bytes = fs::read(&bin).map_err(|e| Error::io(&bin, e))?;
    match elf::is_static_executable(&bytes) {
        Ok(true) => Ok(bin),
        Ok(false) => Err(Error::new(format!("{} is dynamically linked", bin.display()))),
        Err(e) => Err(Error::new(format!("{}: {e}", bin.display()))),
    }
}

/// A dynamically linked program with the shared objects it needs
/// (from `ldd`), as (path in the guest = path on the host) files.
fn with_libraries(program: &Path) -> Option<Vec<PathBuf>> {
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

fn add_host_file(a: &mut cpio::Archive, dirs: &mut Vec<String>, path: &Path) -> Result<()> {
    // Resolve symlinks for the content; keep the requested path.
    let bytes = fs::read(path).map_err(|e| Error::io(path, e))?;
    let name = path.to_string_lossy().trim_start_matches('/').to_string();
    let mut parent = String::new();
    for comp in name.split('/').rev().skip(1).collect::<Vec<_>>().into_iter().rev() {
        parent = if parent.is_empty() { comp.to_string() } else { format!("{parent}/{comp}") };
        if !dirs.contains(&parent) {
            a.dir(&parent);
            dirs.push(parent.clone());
        }
    }
    a.file(&name, 0o755, &bytes);
    Ok(())
}

/// Packs the initramfs; returns its path.
fn pack_initramfs(
    out: &Path,
    conformance: &Path,
    modules: &[kernel::Module],
    plan: &Plan,
    peer_files: &[PathBuf],
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
    let bin = fs::read(conformance).map_err(|e| Error::io(conformance, e))?;
    a.file("bin/zns-conformance", 0o755, &bin);
    for m in modules {
        a.file(&format!("lib/modules/{}", m.name), 0o644, &m.bytes);
    }
    for f in peer_files {
        add_host_file(&mut a, &mut dirs, f)?;
    }
    a.file("init", 0o755, guest::init_script(plan).as_bytes());
    let path = out.join("initramfs.cpio");
    let mut f = fs::File::create(&path).map_err(|e| Error::io(&path, e))?;
    a.write_to(&mut f).map_err(|e| Error::io(&path, e))?;
    Ok(path)
}

/// Fresh, sparse backing files for the namespaces.
fn make_images(dir: &Path) -> Result<()> {
    fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    for ns in guest::NAMESPACES {
        let p = dir.join(ns.image);
        let f = fs::File::create(&p).map_err(|e| Error::io(&p, e))?;
        f.set_len(ns.mib << 20).map_err(|e| Error::io(&p, e))?;
    }
    Ok(())
}

/// What the guest reported.
#[derive(Debug, Default)]
struct Outcome {
    result: Option<bool>,
    summaries: Vec<String>,
    failures: Vec<String>,
}

fn observe(line: &str, o: &mut Outcome) {
    if let Some(rest) = line.split(RESULT_MARKER).nth(1) {
        o.result = Some(rest.trim() == "PASS");
    } else if line.starts_with("FAIL ") || line.contains("vmtest: FAILED") {
        o.failures.push(line.to_string());
    } else if line.starts_with("conformance: ") || line.contains("vmtest: END ") {
        o.summaries.push(line.to_string());
    }
}

/// Boots the guest and follows its console until it powers off.
fn boot(
    kernel: &kernel::Kernel,
    initramfs: &Path,
    images: &Path,
    o: &Options,
    log: &Path,
) -> Result<Outcome> {
    let mut cmd = Command::new("qemu-system-x86_64");
    cmd.args(["-nographic", "-no-reboot", "-m", &o.memory, "-smp", &o.smp.to_string()]);
    let kvm = o.kvm;
    if kvm {
        cmd.args(["-enable-kvm", "-cpu", "host"]);
    } else {
        cmd.args(["-accel", "tcg,thread=multi"]);
    }
    cmd.arg("-kernel").arg(&kernel.vmlinuz).arg("-initrd").arg(initramfs);
    cmd.args(["-append", "console=ttyS0 panic=-1 loglevel=4 rdinit=/init"]);
    cmd.args(guest::qemu_device_args(images));
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    println!(
        "vmtest: booting {} ({}), timeout {} s",
        kernel.package,
        if kvm { "KVM" } else { "TCG software emulation" },
        o.timeout.as_secs()
    );
    let mut child = cmd.spawn().map_err(|e| Error::new(format!("qemu-system-x86_64: {e}")))?;
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
    let deadline = Instant::now() + o.timeout;
    let mut outcome = Outcome::default();
    let mut timed_out = false;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                println!("guest| {line}");
                let _ = writeln!(logf, "{line}");
                observe(&line, &mut outcome);
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                timed_out = true;
                break;
            }
        }
    }
    if timed_out {
        let _ = child.kill();
    }
    let status = child.wait().map_err(|e| Error::new(format!("qemu: {e}")))?;
    for r in readers {
        let _ = r.join();
    }
    if timed_out {
        return Err(Error::new(format!(
            "the guest did not finish within {} s (log: {})",
            o.timeout.as_secs(),
            log.display()
        )));
    }
    if !status.success() {
        println!("vmtest: qemu exited with {status}");
    }
    Ok(outcome)
}

/// Runs the whole task.
pub fn run(o: &Options) -> Result<()> {
    let start = Instant::now();
    let root = workspace_root();
    let target = target_dir(&root);
    let cache = target.join("vmtest");
    fs::create_dir_all(&cache).map_err(|e| Error::io(&cache, e))?;
    ensure_host_tools(o.install, o.peers)?;
    let kernel = kernel::prepare(&cache.join("kernel"), o.kernel.as_deref(), o.install)?;
    let modules = kernel::modules_to_load(&kernel)?;
    let conformance = build_guest_binary(&root, &target, o.install)?;
    let mut peer_files = Vec::new();
    let (mut nvme_cli, mut fio) = (false, false);
    if o.peers {
        for (prog, flag) in [("nvme", &mut nvme_cli), ("fio", &mut fio)] {
            match which(prog).and_then(|p| with_libraries(&p)) {
                Some(files) => {
                    peer_files.extend(files);
                    *flag = true;
                }
                None => println!("vmtest: {prog} not packed into the guest (no ldd listing)"),
            }
        }
        peer_files.sort();
        peer_files.dedup();
    }
    let mut runs = guest::default_runs();
    if let Some(keep) = &o.runs {
        runs.retain(|r| keep.contains(&r.label));
    }
    let plan = Plan {
        modules: modules.iter().map(|m| m.name.clone()).collect(),
        runs,
        conformance_args: o
            .only
            .iter()
            .flat_map(|c| ["--only".to_string(), c.clone()])
            .chain(
                (o.repeat > 1)
                    .then(|| ["--repeat".to_string(), o.repeat.to_string()])
                    .into_iter()
                    .flatten(),
            )
            .collect(),
        hugepages: 64,
        nvme_cli,
        fio,
    };
    let initramfs = pack_initramfs(&cache, &conformance, &modules, &plan, &peer_files)?;
    let images = cache.join("images");
    make_images(&images)?;
    let prepared = start.elapsed();
    let guest_start = Instant::now();
    let outcome = boot(&kernel, &initramfs, &images, o, &cache.join("guest.log"))?;
    let guest_time = guest_start.elapsed();
    println!();
    for s in &outcome.summaries {
        println!("vmtest: {}", s.trim_start_matches("vmtest: "));
    }
    for f in &outcome.failures {
        println!("vmtest: {}", f.trim_start_matches("vmtest: "));
    }
    let verdict = match outcome.result {
        Some(true) if outcome.failures.is_empty() => "PASS",
        Some(_) => "FAIL",
        None => "FAIL (no result marker: the guest stopped early)",
    };
    println!(
        "vmtest: {verdict} in {:.1} s (preparation {:.1} s, guest {:.1} s; log {})",
        start.elapsed().as_secs_f64(),
        prepared.as_secs_f64(),
        guest_time.as_secs_f64(),
        cache.join("guest.log").display()
    );
    if verdict == "PASS" {
        Ok(())
    } else {
        Err(Error::new("the guest tests failed"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parse_and_refuse_what_they_do_not_know() {
        let p = |a: &[&str]| Options::parse(a.iter().map(|s| s.to_string()));
        let o = p(&["--timeout", "60", "--runs", "ng-pow2,pcie", "--no-install"]).unwrap().unwrap();
        assert_eq!(o.timeout, Duration::from_secs(60));
        assert_eq!(o.runs.as_deref(), Some(&["ng-pow2".to_string(), "pcie".to_string()][..]));
        assert!(!o.install && o.peers);
        assert!(p(&["--runs", "floppy"]).unwrap_err().to_string().contains("unknown run"));
        assert!(p(&["--timeout"]).is_err());
        assert!(p(&["--frobnicate"]).is_err());
        assert!(p(&["--help"]).unwrap().is_none());
    }

    #[test]
    fn the_console_is_read_for_results() {
        let mut o = Outcome::default();
        for l in [
            "PASS ng:/dev/ng0n1 copy (0.10 s)",
            "FAIL zbd:/dev/nvme0n1 copy (0.10 s): boom",
            "conformance: 16 passed, 1 failed",
            "vmtest: END ng-pow2 rc=0 (12 s)",
            "VMTEST-RESULT: FAIL",
        ] {
            observe(l, &mut o);
        }
        assert_eq!(o.result, Some(false));
        assert_eq!(o.failures.len(), 1);
        assert_eq!(o.summaries.len(), 2);
        let mut o = Outcome::default();
        observe("VMTEST-RESULT: PASS", &mut o);
        assert_eq!(o.result, Some(true));
    }

    #[test]
    fn the_workspace_root_holds_the_workspace_manifest() {
        let root = workspace_root();
        let manifest = fs::read_to_string(root.join("Cargo.toml")).unwrap();
        assert!(manifest.contains("[workspace]"));
    }
}
