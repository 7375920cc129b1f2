//! `zns serve`: the devices of `--device` (one or more) exported as the
//! namespaces of one NVM subsystem over NVMe/TCP, for the Linux kernel's
//! `nvme-tcp` host (`nvme connect`), nvme-cli, fio, and filesystems.
//!
//! Each device gives its zoned namespace and, where it has one (the
//! emulator's `tiny`), its conventional namespace, in that order. A device
//! that is not zoned (the emulator's conventional twins, `emu:small-conv`)
//! gives one conventional namespace: the NVM command set, with the
//! device's own statuses, beside zoned ones in the same subsystem.
//! `--ftl URI` adds the FTL on that device as a conventional (NVM command
//! set) namespace after the device ones: the kernel sees an ordinary NVMe
//! disk (ext4, XFS, or f2fs's metadata device). On SIGINT or SIGTERM each
//! FTL is closed with a checkpoint.
//!
//! A timed emulator (`emu:zn540`) runs on the real clock unless the URI
//! says `clock=`: hosts on the network live in real time, and the
//! modelled drive's latencies then reach them. eZNS tenants
//! (`ezns:config=PATH,tenant=NAME`) of one configuration file are
//! namespaces over one instance and one base device, which is served the
//! same way. The target runs until SIGINT or SIGTERM.

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Args;
use zns_device::uri::Timing;
use zns_device::DeviceUri;
use zns_ftl::{BlockDevice, Ftl};
use zns_nvmf::{Backend, HostSecrets, NvmfTarget, Subsystem, TargetConfig};
use zns_spec::auth::Secret;

use crate::num::human_size;

/// The subsystem NQN `zns serve` uses unless `--nqn` names one.
pub const DEFAULT_NQN: &str = "nqn.2026-11.io.znskit:target";

/// Arguments of `zns serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Trace every command and flash operation of the (one) emu: device
    /// into FILE, written when the server stops (JSON trace-event format
    /// for ui.perfetto.dev; the last events, see docs/observability.md).
    /// Serving eZNS tenants (of one configuration), their base device is
    /// traced, with eZNS's stripe groups and zone ballooning.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<std::path::PathBuf>,
    /// Address to listen on; port 0 picks a free port (the `listening on`
    /// line says which). Anything but loopback exposes the devices to the
    /// network: admit only known hosts with --allow-host and
    /// --dhchap-secret.
    #[arg(long, default_value = "127.0.0.1:4420", value_name = "ADDR:PORT")]
    pub listen: String,
    /// NVM subsystem NQN hosts connect to.
    #[arg(long, default_value = DEFAULT_NQN, value_name = "NQN")]
    pub nqn: String,
    /// Only hosts with this NQN may connect (repeat for several); default:
    /// any host.
    #[arg(long = "allow-host", value_name = "NQN")]
    pub allow_host: Vec<String>,
    /// Host HOSTNQN must authenticate with DH-HMAC-CHAP and this secret on
    /// every queue (repeat for several hosts; `zns gen-dhchap-key` makes
    /// one). The host gives the same secret (`nvme connect
    /// --dhchap-secret`); a wrong or missing one is refused.
    #[arg(long = "dhchap-secret", value_name = "HOSTNQN=DHHC-1:..")]
    pub dhchap_secret: Vec<String>,
    /// The controller's secret for host HOSTNQN: a host that asks (`nvme
    /// connect --dhchap-ctrl-secret`) gets the controller proven too.
    #[arg(long = "dhchap-ctrl-secret", value_name = "HOSTNQN=DHHC-1:..")]
    pub dhchap_ctrl_secret: Vec<String>,
    /// Connections (queues) open at once; more are closed at accept. An
    /// idle connection costs a few KiB and one descriptor, no thread.
    #[arg(long, default_value_t = 1024, value_name = "N",
          value_parser = clap::value_parser!(u64).range(2..=1_000_000))]
    pub max_connections: u64,
    /// Worker threads: how many connections run commands at the same
    /// moment (the others wait in the poller, for their host or a worker).
    #[arg(long, default_value_t = 8, value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub workers: u64,
    /// Also export the FTL on this device as a conventional NVM namespace
    /// (repeat for several), after the `--device` namespaces. A device that
    /// lives only in this process is formatted; any other must hold an FTL
    /// (`zns ftl format`). Without `--device`, only these are served.
    #[arg(long = "ftl", value_name = "URI")]
    pub ftl: Vec<String>,
    /// Each queue polls its socket this many microseconds for the next
    /// command before it gives its worker back: lower latency for a busy
    /// core per active queue (0: never poll).
    #[arg(long, default_value_t = 0, value_name = "US",
          value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub poll_us: u64,
    /// A host must send a PDU whole within this many seconds of its first
    /// byte (and its ICReq and Connect within it of connecting), and take
    /// each response within it; past it the connection is closed.
    #[arg(long, default_value_t = zns_nvmf::DEFAULT_STALL_TIMEOUT.as_secs_f64(), value_name = "SECONDS")]
    pub stall_timeout: f64,
    #[command(flatten)]
    pub metrics: crate::metrics::MetricsArgs,
}

/// `zns gen-dhchap-key`.
#[derive(Debug, Args)]
pub struct GenKeyArgs {
    /// Key length in bytes: 32, 48 or 64.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u16).range(32..=64))]
    pub key_length: u16,
    /// Transform the key before use with this hash and the NQN of its
    /// owner: 0 none, 1 SHA-256, 2 SHA-384, 3 SHA-512.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(0..=3))]
    pub hmac: u8,
}

/// Prints a new random secret.
pub fn gen_key(args: &GenKeyArgs, out: &mut dyn Write) -> Result<()> {
    use rand::RngCore;
    let mut key = vec![0u8; args.key_length as usize];
    rand::rngs::OsRng.fill_bytes(&mut key);
    let transform = zns_spec::auth::Hash::from_raw(args.hmac);
    let secret = Secret::new(key, transform).map_err(|e| anyhow::anyhow!("--key-length: {e}"))?;
    writeln!(out, "{secret}")?;
    Ok(())
}

/// The `HOSTNQN=SECRET` pairs of `--dhchap-secret` and
/// `--dhchap-ctrl-secret`, by host.
fn host_secrets(host: &[String], ctrl: &[String]) -> Result<Vec<(String, HostSecrets)>> {
    let pair = |flag: &str, v: &str| -> Result<(String, Secret)> {
        let (nqn, secret) = v
            .split_once('=')
            .filter(|(n, _)| n.starts_with("nqn."))
            .ok_or_else(|| anyhow::anyhow!("--{flag}: give HOSTNQN=DHHC-1:XX:BASE64:"))?;
        let secret = Secret::parse(secret).map_err(|e| anyhow::anyhow!("--{flag} {nqn}: {e}"))?;
        Ok((nqn.to_string(), secret))
    };
    let mut out: Vec<(String, HostSecrets)> = Vec::new();
    for v in host {
        let (nqn, s) = pair("dhchap-secret", v)?;
        if out.iter().any(|(n, _)| *n == nqn) {
            anyhow::bail!("--dhchap-secret: {nqn} is given twice");
        }
        out.push((nqn, HostSecrets { host: s, controller: None }));
    }
    for v in ctrl {
        let (nqn, s) = pair("dhchap-ctrl-secret", v)?;
        let Some((_, h)) = out.iter_mut().find(|(n, _)| *n == nqn) else {
            anyhow::bail!("--dhchap-ctrl-secret {nqn}: the host needs a --dhchap-secret too");
        };
        h.controller = Some(s);
    }
    Ok(out)
}

/// A stall timeout given in seconds: positive and finite.
pub(crate) fn stall_timeout(seconds: f64) -> Result<Duration> {
    if !(seconds.is_finite() && seconds > 0.0 && seconds <= 86_400.0) {
        anyhow::bail!("--stall-timeout {seconds}: give a number of seconds above 0, at most a day");
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// `uri` as served: a timed emulator on the real clock unless the URI
/// chose a clock (hosts and the kernel live in real time).
pub(crate) fn serving_uri(uri: &str) -> String {
    let Ok(DeviceUri::Emulator(e)) = uri.parse::<DeviceUri>() else { return uri.to_string() };
    if e.clock.is_some() || e.timing == Some(Timing::Off) || e.file.is_some() {
        return uri.to_string();
    }
    match e.load_profile() {
        Ok(p) if p.timing.is_some() => format!("{uri},clock=real"),
        _ => uri.to_string(),
    }
}

/// Brings up the eZNS instance of every `ezns:` URI in `uris` with its
/// base device as served (a timed emulator on the real clock unless the
/// configuration's URI chose a clock; traced into `trace` when it is the
/// configuration `--trace` goes to), before any tenant is opened: the
/// tenants opened next share it, one base device per configuration file.
fn ezns_instances(
    uris: &[String],
    trace: Option<(&Path, &Path)>,
) -> Result<Vec<zns_ezns::Instance>> {
    let mut out = Vec::new();
    for uri in uris.iter().filter(|u| u.starts_with("ezns:")) {
        let u: zns_ezns::config::EznsUri = uri.parse().with_context(|| format!("open {uri}"))?;
        let traced = match trace {
            Some((config, file)) if crate::trace::same_config(config, &u.config) => {
                let c = zns_ezns::Config::load(&u.config).with_context(|| format!("open {uri}"))?;
                Some(crate::trace::ezns_base_uri(&serving_uri(&c.device), file)?)
            }
            _ => None,
        };
        let map = |base: &str| traced.clone().unwrap_or_else(|| serving_uri(base));
        let i = zns_ezns::Instance::open_config_mapped(&u.config, &map)
            .with_context(|| format!("open {uri}"))?;
        out.push(i);
    }
    Ok(out)
}

/// Sets a flag on SIGINT and SIGTERM (every server command stops on it).
pub(crate) fn stop_flag() -> Result<Arc<AtomicBool>> {
    let flag = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&flag)).context("install a signal handler")?;
    }
    Ok(flag)
}

pub fn run(
    traced: &crate::trace::ServeTrace,
    device_given: bool,
    args: &ServeArgs,
    out: &mut dyn Write,
) -> Result<()> {
    let uris = &traced.uris[..];
    let stop = stop_flag()?;
    let mut backends = Vec::new();
    // Timed emulators served, to report their late completions at the end.
    let mut timed: Vec<(String, Arc<zns_emulator::Controller>)> = Vec::new();
    // Without --device, `--ftl` alone chooses what is served.
    let zoned = if device_given || args.ftl.is_empty() { uris } else { &[] };
    let ezns_trace = traced.ezns_config.as_deref().zip(args.trace.as_deref());
    let instances = ezns_instances(zoned, ezns_trace)?;
    let mut metrics = crate::metrics::Plan::new(&args.metrics);
    for uri in zoned {
        let served = serving_uri(uri);
        let dev = zns_device::open(&served).with_context(|| format!("open {served}"))?;
        // Tenants of one eZNS instance share its base emulator: report it once.
        if let Some(e) = dev.emulator().filter(|e| e.is_timed()) {
            if !timed.iter().any(|(_, t)| Arc::ptr_eq(t, e)) {
                timed.push((served.clone(), Arc::clone(e)));
            }
        }
        // Its zoned namespace and its conventional one where it has one; a
        // device that is not zoned is one conventional namespace.
        backends.extend(Backend::of_device(metrics.device(dev)));
    }
    let mut ftls: Vec<Arc<Ftl>> = Vec::new();
    for uri in &args.ftl {
        let (ftl, formatted) =
            crate::ftl_serve::open_for_serving(uri, zns_ftl::FtlConfig::default())?;
        if formatted {
            writeln!(out, "formatted a new FTL on {uri} (it lives as long as this server)")?;
        }
        let ftl = Arc::new(ftl);
        metrics.ftl(&ftl);
        backends.push(Backend::Block {
            device: Arc::clone(&ftl) as Arc<dyn BlockDevice>,
            name: format!("FTL on {uri}"),
            media: Some(Arc::clone(ftl.device())),
        });
        ftls.push(ftl);
    }
    let mut sub = Subsystem::with_backends(args.nqn.clone(), backends)?
        .with_allowed_hosts(args.allow_host.clone());
    for (host, secrets) in host_secrets(&args.dhchap_secret, &args.dhchap_ctrl_secret)? {
        sub = sub.with_host_secrets(host, secrets);
    }
    let config = TargetConfig {
        max_connections: args.max_connections as usize,
        workers: args.workers as usize,
        poll: std::time::Duration::from_micros(args.poll_us),
        stall_timeout: stall_timeout(args.stall_timeout)?,
    };
    let target = NvmfTarget::bind(args.listen.as_str(), sub, config)
        .with_context(|| format!("serve over NVMe/TCP on {}", args.listen))?;
    let addr = target.local_addr();
    writeln!(out, "listening on {addr} subsystem {}", args.nqn)?;
    if !args.allow_host.is_empty() {
        writeln!(out, "  hosts allowed: {}", args.allow_host.join(", "))?;
    }
    let authenticated: Vec<&str> = target.subsystem().authenticated_hosts().collect();
    if !authenticated.is_empty() {
        writeln!(out, "  DH-HMAC-CHAP required of: {}", authenticated.join(", "))?;
    }
    for ns in target.subsystem().namespaces() {
        describe(ns, out)?;
    }
    let metrics = metrics.start(out)?;
    writeln!(
        out,
        "  nvme connect -t tcp -a {} -s {} -n {}    (SIGINT or SIGTERM stops)",
        addr.ip(),
        addr.port(),
        args.nqn
    )?;
    out.flush()?;
    let started = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let stats = target.stop();
    // The endpoint holds the FTLs: it stops before they close.
    drop(metrics);
    let mut closed = 0;
    for ftl in ftls {
        let ftl = Arc::try_unwrap(ftl)
            .map_err(|_| anyhow::anyhow!("an FTL is still in use after the target stopped"))?;
        ftl.close().context("close an FTL (write its checkpoint)")?;
        closed += 1;
    }
    writeln!(
        out,
        "stopped after {:.1} s: {} connections ({} refused, {} ended by transport errors, {} by \
         stalls, {} controllers by keep alive timeouts){}",
        started.elapsed().as_secs_f64(),
        stats.connections,
        stats.refused,
        stats.transport_errors,
        stats.timeouts,
        stats.keep_alive_expirations,
        if closed > 0 { format!("; {closed} FTL checkpoint(s) written") } else { String::new() }
    )?;
    for (uri, e) in &timed {
        if let Some(l) = e.lateness() {
            let l = zns_bench::characterize::results::LateCompletions::of(&l);
            writeln!(out, "  {uri}: late completions: {}", crate::characterize::late_line(&l))?;
        }
    }
    ezns_closing(&instances, out)
}

/// One line per eZNS instance served: what it wrote to its base device
/// beyond the tenants' data (the blocks its finishes left the device to
/// pad, its journal) and the spares it lent. Tenants of one instance share
/// it: reported once.
fn ezns_closing(instances: &[zns_ezns::Instance], out: &mut dyn Write) -> Result<()> {
    let mut seen: Vec<String> = Vec::new();
    for s in instances.iter().map(|i| i.status()) {
        if seen.contains(&s.device) {
            continue;
        }
        writeln!(
            out,
            "  eZNS ({}) on {}: {} finishes sent ({} blocks padded), {} journal blocks written, \
             {} spare columns lent",
            s.mode,
            s.device,
            s.internal_finishes,
            s.internal_padded_blocks,
            s.journal_blocks_written,
            s.loans
        )?;
        seen.push(s.device);
    }
    Ok(())
}

/// One line per namespace: what it is and its geometry.
fn describe(ns: &zns_nvmf::Namespace, out: &mut dyn Write) -> Result<()> {
    match (&ns.backend, ns.info()) {
        (Backend::Zoned(dev), Some(i)) => writeln!(
            out,
            "  namespace {}: {} ({} zones of {}, {}-byte blocks, {}{})",
            ns.nsid,
            i.uri,
            i.zone_count,
            human_size(i.zone_size * i.block_size as u64),
            i.block_size,
            dev.clock_name(),
            match dev.emulator().map(|e| e.clock().dilation()) {
                Some(d) if !d.is_none() => format!(", dilation {d}"),
                _ => String::new(),
            },
        )?,
        _ => writeln!(
            out,
            "  namespace {}: {} (conventional, {}, {}-byte blocks)",
            ns.nsid,
            ns.name(),
            human_size(ns.blocks() * ns.block_size() as u64),
            ns.block_size()
        )?,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timed_emulators_serve_on_the_real_clock() {
        assert_eq!(serving_uri("emu:zn540"), "emu:zn540,clock=real");
        assert_eq!(serving_uri("emu:zn540,clock=virtual"), "emu:zn540,clock=virtual");
        assert_eq!(serving_uri("emu:zn540,timing=off"), "emu:zn540,timing=off");
        assert_eq!(serving_uri("emu:small"), "emu:small");
        assert_eq!(serving_uri("pcie:0000:00:04.0"), "pcie:0000:00:04.0");
    }
}
