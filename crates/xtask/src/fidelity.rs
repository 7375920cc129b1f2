//! `cargo xtask fidelity`: path (d) of the real-time fidelity table
//! (docs/fidelity.md). The ZN540 model is served by `zns serve` on the
//! host (real clock, dilated by the guest's slowdown), and a QEMU guest on
//! Debian's generic kernel runs `zns characterize` against it through the
//! kernel's nvme-tcp and io_uring passthrough (`ng:`). The guest's results
//! come back over its console; the host then runs `zns characterize
//! --fidelity` on the same model with them as path (d), beside the paths
//! it measures itself (a: virtual clock, in process; optionally b and c).
//!
//! The dilation is the same run's: the host times `zns characterize
//! --probe` before the guest boots, the guest times it again and divides
//! (its `--probe-reference`), and the host starts the served model with
//! that factor only when the guest has said it; `--dilation F` fixes it
//! instead.

use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use clap::Parser;

use crate::clients::{connect_lines, end_lines, guest_files, start_lines};
use crate::kernel::{self, Flavour};
use crate::probe::HostProbe;
use crate::server::{build_zns, Server};
use crate::vmtest::{self, Options as VmOptions};
use crate::{Error, Result};

/// The subsystem the guest connects to.
const NQN: &str = "nqn.2026-11.io.znskit:fidelity";
/// Kernel modules of the guest: nvme-tcp and the network.
const MODULES: &[&str] =
    &["nvme-core", "nvme-tcp", "virtio_pci", "virtio_net", "crc32_generic", "crc32c_generic"];
/// Console prefixes the guest reports with.
const PROBE: &str = "FIDELITY-PROBE ";
const DILATION: &str = "FIDELITY-DILATION ";
const JSON_LINE: &str = "FIDELITY-JSON|";
/// The here-document's end marker of the grid in the guest's script.
const GRID_END: &str = "ZNS_GRID_END";

/// Path (d) of the fidelity table: the characterization suite from inside
/// a QEMU guest through the kernel's nvme-tcp to `zns serve`, set beside
/// the host's own paths.
#[derive(Debug, Parser)]
#[command(name = "cargo xtask fidelity")]
pub struct Args {
    /// The suite: smoke (minutes) or quick (the table's own; long under
    /// software emulation).
    #[arg(long, default_value = "smoke", value_parser = ["smoke", "quick"])]
    suite: String,
    /// The emulated drive, as `zns serve` and path (a) open it (no clock=,
    /// no dilation=).
    #[arg(long, default_value = "emu:zn540,media=null")]
    device: String,
    /// The served model's dilation: `auto` (the guest's CPU-bound probe
    /// time over the host's, in this run), `kernel` (the same for the
    /// kernel probe: system calls moving 4 KiB, what an I/O path costs
    /// the guest) or a factor ≥ 1.
    #[arg(long, default_value = "auto", value_parser = dilation)]
    dilation: Dilation,
    /// The host's own paths beside (d), comma separated: a (always), b, c.
    #[arg(long, value_delimiter = ',', default_value = "a")]
    paths: Vec<String>,
    /// `zns serve --poll-us`: how long the target spins on a device with
    /// commands in flight.
    #[arg(long, default_value_t = 50)]
    poll_us: u64,
    /// Where the runs and fidelity.json go (default target/fidelity).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Give the guest this long, seconds.
    #[arg(long, default_value_t = 1800)]
    timeout: u64,
    /// Kernel package (default: the newest linux-image-*-amd64-unsigned).
    #[arg(long)]
    kernel: Option<String>,
    /// Do not install missing packages; fail instead.
    #[arg(long)]
    no_install: bool,
    /// The guest's CPUs.
    #[arg(long, default_value_t = 2)]
    smp: u32,
    /// Run only these experiments, on every path (`zns characterize
    /// --only`; comma separated).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// A custom grid over the suite's points, on every path (`zns
    /// characterize --grid`): TOML text, e.g. $'read_ops = 2000\nsamples = 4'.
    /// Under software emulation the quick suite's own counts take hours.
    #[arg(long)]
    grid: Option<String>,
}

/// `--dilation`: a fixed factor, or one of the run's probes.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Dilation {
    /// The guest's CPU-bound slowdown against the host.
    Cpu,
    /// The guest's kernel slowdown against the host.
    Kernel,
    /// This factor.
    Fixed(f64),
}

impl Dilation {
    /// The fixed factor, if one was given.
    fn fixed(self) -> Option<f64> {
        match self {
            Dilation::Fixed(f) => Some(f),
            _ => None,
        }
    }
}

/// `auto`, `kernel` or a factor of at least 1.
fn dilation(s: &str) -> Result<Dilation, String> {
    match s {
        "auto" => return Ok(Dilation::Cpu),
        "kernel" => return Ok(Dilation::Kernel),
        _ => {}
    }
    match s.parse::<f64>() {
        Ok(f) if f >= 1.0 && f.is_finite() => Ok(Dilation::Fixed(f)),
        _ => Err(format!("{s:?}: auto, kernel or a factor ≥ 1")),
    }
}

impl Args {
    fn vm(&self) -> VmOptions {
        let mut o = VmOptions::default();
        o.timeout = Duration::from_secs(self.timeout.max(60));
        o.kernel = self.kernel.clone();
        o.install = !self.no_install;
        o.smp = self.smp.max(1);
        o
    }

    fn check(&self) -> Result<()> {
        if let Some(p) = self.paths.iter().find(|p| !matches!(p.as_str(), "a" | "b" | "c")) {
            return Err(Error::new(format!("--paths: unknown path {p:?} (a, b, c)")));
        }
        if let Some(o) =
            self.only.iter().find(|o| !o.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        {
            return Err(Error::new(format!("--only: {o:?} is no experiment name")));
        }
        if self.grid.as_deref().is_some_and(|g| g.lines().any(|l| l.trim() == GRID_END)) {
            return Err(Error::new(format!(
                "--grid: a line {GRID_END:?} would end the guest's copy"
            )));
        }
        if !self.device.starts_with("emu:")
            || self.device.contains("clock=")
            || self.device.contains("dilation=")
        {
            return Err(Error::new(format!(
                "--device {:?}: an emulated drive (emu:PROFILE,...) without clock= or dilation=",
                self.device
            )));
        }
        Ok(())
    }
}

/// Parses the arguments after `fidelity`; `None` after printing help.
pub fn parse(args: impl Iterator<Item = String>) -> Result<Option<Args>> {
    let argv = std::iter::once("cargo xtask fidelity".to_string()).chain(args);
    match Args::try_parse_from(argv) {
        Ok(a) => {
            a.check()?;
            Ok(Some(a))
        }
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            Ok(None)
        }
        Err(e) => Err(Error::new(e.to_string())),
    }
}

/// What the guest said while it ran, and the server it asked for.
#[derive(Default)]
struct Watch {
    probe: Option<String>,
    dilation: Option<f64>,
    json: String,
    server: Option<Server>,
    error: Option<Error>,
}

/// Runs the task.
pub fn run(a: &Args) -> Result<()> {
    let start = Instant::now();
    let vm = a.vm();
    let root = vmtest::workspace_root();
    let target = vmtest::target_dir(&root);
    let cache = target.join("vmtest");
    let dir = cache.join("fidelity");
    let out = a.out.clone().unwrap_or_else(|| target.join("fidelity"));
    for d in [&dir, &out] {
        fs::create_dir_all(d).map_err(|e| Error::io(d, e))?;
    }
    vmtest::ensure_host_tools(vm.install, false, &cache)?;
    let zns = build_zns(&root, &target, vm.install)?;
    let programs = vmtest::build_guest_binaries(&root, &target, vm.install, &["zns"])?;
    let files = guest_files(&[("nvme", "nvme-cli")], vm.install)?;
    let kernel =
        kernel::prepare(&cache.join("kernel"), Flavour::Generic, vm.kernel.as_deref(), vm.install)?;
    let modules = kernel::modules_for(&kernel, MODULES, &[])?;
    let host = HostProbe::measure(&zns)?;
    println!("fidelity: the host's probe: {} ns, kernel probe {:?} ns", host.ns, host.kernel_ns);
    let port = free_port()?;
    let names: Vec<String> = modules.iter().map(|m| m.name.clone()).collect();
    let script = init_script(&names, port, &host, a);
    let initramfs = vmtest::pack_initramfs(&dir, &programs, &modules, &script, &files)?;
    let devices: Vec<String> = ["-netdev", "user,id=net0", "-device", "virtio-net-pci,netdev=net0"]
        .map(String::from)
        .to_vec();
    let log = dir.join("guest.log");
    let mut w = Watch { dilation: a.dilation.fixed(), ..Default::default() };
    if let Some(f) = a.dilation.fixed() {
        w.server = Some(serve(&zns, &a.device, f, port, a.poll_us)?);
    }
    let guest_start = Instant::now();
    let outcome = vmtest::boot_watched(&kernel, &initramfs, &devices, &vm, &log, &mut |l| {
        watch(l, &mut w, &zns, a, port)
    });
    let guest_secs = guest_start.elapsed().as_secs_f64();
    let served = w.server.take().map(Server::stop).transpose();
    let outcome = outcome?;
    if let Some(e) = w.error.take() {
        return Err(e);
    }
    let served = served?.unwrap_or_default();
    let mut failures = outcome.failures.clone();
    if outcome.result != Some(true) {
        failures.push("the guest did not report PASS".into());
    }
    let f = w.dilation.ok_or_else(|| Error::new("the guest never gave its dilation"))?;
    let guest_json = out.join("guest-results.json");
    if let Err(e) = serde_json::from_str::<serde_json::Value>(&w.json) {
        failures.push(format!("the guest's results.json did not come back whole: {e}"));
    } else {
        fs::write(&guest_json, &w.json).map_err(|e| Error::io(&guest_json, e))?;
    }
    if !failures.is_empty() {
        for l in &failures {
            println!("fidelity: {l}");
        }
        return Err(Error::new(format!("the guest's run failed (log {})", log.display())));
    }
    let late: Vec<&str> = served.lines().filter(|l| l.contains("late completions")).collect();
    host_table(&zns, a, &guest_json, &out)?;
    let summary = serde_json::json!({
        "suite": a.suite,
        "device": a.device,
        "dilation": f,
        "host_probe_ns": host.ns,
        "host_kernel_probe_ns": host.kernel_ns,
        "guest_probe": w.probe,
        "served_late_completions": late,
        "guest_seconds": guest_secs,
    });
    let path = out.join("path-d.json");
    let text = serde_json::to_string_pretty(&summary).unwrap_or_default() + "\n";
    fs::write(&path, text).map_err(|e| Error::io(&path, e))?;
    for l in &late {
        println!("fidelity: (d) served model: {l}");
    }
    println!(
        "fidelity: PASS in {:.1} s (guest {guest_secs:.1} s at dilation {f:.2}; results in {})",
        start.elapsed().as_secs_f64(),
        out.display()
    );
    Ok(())
}

/// Acts on a console line: the probe, the dilation (starting the served
/// model when it was not fixed), the results' lines.
fn watch(line: &str, w: &mut Watch, zns: &Path, a: &Args, port: u16) {
    if let Some(rest) = line.strip_prefix(JSON_LINE) {
        w.json.push_str(rest);
        w.json.push('\n');
    } else if let Some(rest) = line.strip_prefix(PROBE) {
        w.probe = Some(rest.trim().to_string());
    } else if let Some(rest) = line.strip_prefix(DILATION) {
        if w.server.is_some() || w.error.is_some() {
            return;
        }
        match rest.trim().parse::<f64>() {
            Ok(f) if f >= 1.0 => match serve(zns, &a.device, f, port, a.poll_us) {
                Ok(s) => {
                    w.dilation = Some(f);
                    w.server = Some(s);
                }
                Err(e) => w.error = Some(e),
            },
            _ => w.error = Some(Error::new(format!("the guest's dilation {rest:?} is no factor"))),
        }
    }
}

/// `zns serve` of `device` dilated by `f` on `port`.
fn serve(zns: &Path, device: &str, f: f64, port: u16, poll_us: u64) -> Result<Server> {
    let uri = format!("{device},dilation={f:.3}");
    let listen = format!("127.0.0.1:{port}");
    let poll = poll_us.to_string();
    println!("fidelity: serving {uri} on {listen}");
    Server::start(
        "zns serve",
        zns,
        &["serve", "--device", &uri, "--listen", &listen, "--nqn", NQN, "--poll-us", &poll],
    )
}

/// A loopback port nothing listens on now (the server binds it later).
fn free_port() -> Result<u16> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| Error::new(format!("bind: {e}")))?;
    l.local_addr().map(|a| a.port()).map_err(|e| Error::new(format!("local_addr: {e}")))
}

/// The host's `zns characterize --fidelity` with the guest's run as (d).
fn host_table(zns: &Path, a: &Args, guest: &Path, out: &Path) -> Result<()> {
    let mut paths = a.paths.clone();
    if !paths.iter().any(|p| p == "a") {
        paths.insert(0, "a".into());
    }
    let mut cmd = Command::new(zns);
    cmd.args(["characterize", "--device", &a.device, "--suite", &a.suite, "--fidelity"])
        .args(["--paths", &paths.join(","), "--target-poll-us", &a.poll_us.to_string()])
        .arg("--guest")
        .arg(guest)
        .arg("--out")
        .arg(out);
    if !a.only.is_empty() {
        cmd.args(["--only", &a.only.join(",")]);
    }
    if let Some(g) = &a.grid {
        let path = out.join("grid.toml");
        fs::write(&path, g).map_err(|e| Error::io(&path, e))?;
        cmd.arg("--grid").arg(&path);
    }
    crate::run_checked(&mut cmd, "zns characterize --fidelity")
}

/// The guest's `/init`: the network, the probe and the dilation, the
/// connection, the suite through `ng:`, the results on the console.
fn init_script(modules: &[String], port: u16, host: &HostProbe, a: &Args) -> String {
    let mut s = start_lines(
        "path (d) of the fidelity table: zns characterize through the kernel's nvme-tcp",
        modules,
        false,
    );
    s.push_str(&format!(
        r#"/bin/zns characterize --probe {} > /tmp/probe.json
echo "{PROBE}$(tr -d ' \n' < /tmp/probe.json)"
"#,
        host.guest_args()
    ));
    let field = match a.dilation {
        Dilation::Fixed(f) => {
            s.push_str(&format!("F={f}\n"));
            None
        }
        Dilation::Cpu => Some("suggested_dilation"),
        Dilation::Kernel => Some("kernel_slowdown"),
    };
    if let Some(field) = field {
        s.push_str(&format!(
            r#"F=$(tr -d ' \n' < /tmp/probe.json | sed -n 's/.*"{field}":\([0-9.eE+-]*\).*/\1/p' | awk '{{ if ($1 + 0 < 1) print 1; else printf "%.3f", $1 }}')
"#
        ));
    }
    s.push_str(&format!(
        r#"[ -n "$F" ] || {{ say "FAILED: no dilation from the probe"; fail=1; F=1; }}
echo "{DILATION}$F"
i=0
while [ $i -lt 120 ] && ! nvme discover -t tcp -a 10.0.2.2 -s {port} >/dev/null 2>&1; do sleep 1; i=$((i + 1)); done
"#
    ));
    s.push_str(&connect_lines(port, NQN, 1));
    let mut extra = String::new();
    if !a.only.is_empty() {
        extra.push_str(&format!(" --only {}", a.only.join(",")));
    }
    if let Some(g) = &a.grid {
        s.push_str(&format!("cat > /tmp/grid.toml <<'{GRID_END}'\n{g}\n{GRID_END}\n"));
        extra.push_str(" --grid /tmp/grid.toml");
    }
    s.push_str(&format!(
        r#"G=/dev/ng$(suffix_of 1)
run characterize /bin/zns characterize --device "ng:$G" --suite {suite} --dilation $F --force --out /tmp/d{extra}
[ -s /tmp/d/results.json ] || {{ say "no results.json"; fail=1; }}
sed 's/^/{JSON_LINE}/' /tmp/d/results.json
run disconnect nvme disconnect -n {NQN}
"#,
        suite = a.suite
    ));
    s.push_str(&end_lines());
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<Option<Args>> {
        parse(args.iter().map(|s| s.to_string()))
    }

    #[test]
    fn options_parse_and_check() {
        let a = p(&[]).unwrap().unwrap();
        assert_eq!(a.suite, "smoke");
        assert_eq!(a.dilation, Dilation::Cpu);
        assert_eq!(a.paths, ["a"]);
        let a = p(&["--dilation", "4", "--paths", "a,b,c", "--suite", "quick"]).unwrap().unwrap();
        assert_eq!(a.dilation, Dilation::Fixed(4.0));
        assert_eq!(a.paths, ["a", "b", "c"]);
        assert_eq!(p(&["--dilation", "kernel"]).unwrap().unwrap().dilation, Dilation::Kernel);
        assert!(p(&["--dilation", "0.5"]).is_err());
        assert!(p(&["--paths", "d"]).is_err());
        assert!(p(&["--suite", "full"]).is_err());
        assert!(p(&["--device", "emu:zn540,clock=real"]).is_err());
        assert!(p(&["--device", "ng:/dev/ng0n1"]).is_err());
        assert!(p(&["--help"]).unwrap().is_none());
    }

    const HOST: HostProbe = HostProbe { ns: 8_000_000, kernel_ns: Some(3_000_000) };

    #[test]
    fn the_script_probes_connects_and_sends_the_results_back() {
        let a = p(&[]).unwrap().unwrap();
        let s = init_script(&["nvme-tcp.ko".into()], 4420, &HOST, &a);
        let at = |x: &str| s.find(x).unwrap_or_else(|| panic!("{x:?} not in the script"));
        assert!(at("--probe-reference 8000000 --probe-kernel-reference 3000000") < at(DILATION));
        assert!(at(r#"sed -n 's/.*"suggested_dilation":"#) < at(DILATION));
        let k = p(&["--dilation", "kernel"]).unwrap().unwrap();
        let ks = init_script(&[], 4420, &HOST, &k);
        assert!(ks.contains(r#"sed -n 's/.*"kernel_slowdown":"#) && !ks.contains("F=1\n"), "{ks}");
        assert!(at(DILATION) < at("nvme discover -t tcp -a 10.0.2.2 -s 4420"));
        assert!(at("--suite smoke --dilation $F") < at(JSON_LINE));
        let fixed = p(&["--dilation", "3"]).unwrap().unwrap();
        assert!(init_script(&[], 4420, &HOST, &fixed).contains("F=3\n"));
        let g =
            p(&["--only", "qd1,reads", "--grid", "read_ops = 20\nsamples = 2"]).unwrap().unwrap();
        let gs = init_script(&[], 4420, &HOST, &g);
        let at = |x: &str| gs.find(x).unwrap_or_else(|| panic!("{x:?} not in the script"));
        assert!(
            at("read_ops = 20\nsamples = 2\nZNS_GRID_END")
                < at("--only qd1,reads --grid /tmp/grid.toml")
        );
        assert!(p(&["--only", "qd1;reboot"]).is_err());
        assert!(p(&["--grid", "a = 1\nZNS_GRID_END\nreboot"]).is_err());
    }

    #[test]
    fn the_watch_collects_the_results_and_refuses_a_bad_factor() {
        let a = p(&[]).unwrap().unwrap();
        let mut w = Watch::default();
        let zns = Path::new("/nonexistent/zns");
        watch(&format!("{JSON_LINE}{{"), &mut w, zns, &a, 1);
        watch(&format!("{JSON_LINE}}}"), &mut w, zns, &a, 1);
        watch("unrelated", &mut w, zns, &a, 1);
        assert_eq!(w.json, "{\n}\n");
        watch(&format!("{DILATION}x"), &mut w, zns, &a, 1);
        assert!(w.error.is_some());
    }
}
