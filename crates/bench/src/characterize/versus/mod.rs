//! The ZNS-versus-conventional comparison (`zns characterize --suite
//! compare`): the same random-write workloads on a ZNS device, through the
//! host FTL (`zns-ftl`), and on a conventional device whose firmware
//! collects garbage itself.
//!
//! Each side runs, in order, on its own device:
//!
//! 1. **fill**: every block written once, sequentially, in requests of
//!    `request_bytes`;
//! 2. **precondition**: random aligned writes of the same size until
//!    `precondition` capacities were written (garbage collection reaches
//!    its steady state);
//! 3. **sustained**: the same random writes for `sustained_s` of device
//!    time, throughput binned by device time (`bin_s`), and the write
//!    amplification of whoever collects garbage: the host FTL's count of
//!    data blocks written per user block, or the firmware's count of
//!    blocks programmed per host block;
//! 4. **reads**: 4 KiB random reads at queue depth 1, first alone (once
//!    the host FTL's garbage collection is done, after `settle_s` of idle
//!    device time), then for `read_s` interleaved with
//!    the writes of 3 on the same host thread, `reads_per_write` after
//!    each write request: the device programs what it buffered and
//!    collects garbage while they run.
//!
//! Every phase runs on one host thread (the host FTL adds its garbage
//! collection thread): on the emulator's virtual clock, threads of the
//! host that race each other lose device time whenever the operating
//! system deschedules one of them, so a reader and a writer on separate
//! threads would measure the host's scheduler more than the device.
//!
//! Capacity: usable blocks (the FTL's exposed capacity; the conventional
//! namespace) over raw blocks (the zones' capacities; the flash the
//! firmware manages).
//!
//! All times are device time ([`super::clock`]); on the emulator's
//! virtual clock a run of many device minutes takes far fewer wall
//! minutes. The two devices must run on the same kind of clock.

mod report;
mod results;
mod side;
mod workload;

use std::sync::Arc;
use std::time::Instant;

use zns_device::{ReportFilter, Target, ZoneAction, ZoneState, ZonedDevice};
use zns_ftl::FtlConfig;

pub use report::{charts, html, to_text, write_outputs, Charts, ZOOM_BINS};
pub use results::{
    Capacity, CompareConfig, CompareResults, Counters, Phase, ReadTails, RunTime, SideResults,
    Sustained, COMPARE_KIND, COMPARE_SCHEMA_VERSION,
};

use super::progress::Observer;
use super::results::{DeviceDescription, Tool};
use super::CharacterizeError;
use side::{ConventionalSide, HostFtlSide, Side};
use workload::Plan;

/// The host FTL's over-provisioning when the conventional device does not
/// tell its own: a client drive's 7 %.
pub const DEFAULT_FTL_OP: f64 = 0.07;

/// Options of a comparison.
///
/// Thread safety: plain data.
#[derive(Debug, Clone)]
pub struct CompareOptions {
    /// Bytes per write request.
    pub request_bytes: u64,
    /// Random writes before the measured run, in capacities.
    pub precondition: f64,
    /// Device seconds of the measured run of random writes.
    pub sustained_s: f64,
    /// Width of a throughput bin, device seconds.
    pub bin_s: f64,
    /// Device seconds left idle before the reads alone.
    pub settle_s: f64,
    /// 4 KiB reads alone.
    pub idle_reads: u64,
    /// Device seconds of 4 KiB reads interleaved with writes.
    pub read_s: f64,
    /// Reads after each write request in that phase.
    pub reads_per_write: u32,
    /// Over-provisioning of the host FTL (spare / exposed); `None`: the
    /// conventional firmware's own (an emulated twin's), else
    /// [`DEFAULT_FTL_OP`].
    pub ftl_op: Option<f64>,
    /// Seed of every random offset.
    pub seed: u64,
    /// Reset every zone of the ZNS device first when some hold data.
    pub force: bool,
}

impl Default for CompareOptions {
    /// Twenty device minutes of 1 MiB random writes after one capacity of
    /// preconditioning, one-second bins, a minute of reads beside them.
    fn default() -> Self {
        CompareOptions {
            request_bytes: 1 << 20,
            precondition: 1.0,
            sustained_s: 1200.0,
            bin_s: 1.0,
            settle_s: 1.0,
            idle_reads: 20_000,
            read_s: 60.0,
            reads_per_write: 16,
            ftl_op: None,
            seed: 1,
            force: false,
        }
    }
}

impl CompareOptions {
    fn check(&self, block_size: u32) -> Result<(), CharacterizeError> {
        let bad = |s: String| Err(CharacterizeError::Invalid(s));
        let bs = block_size as u64;
        if self.request_bytes == 0 || !self.request_bytes.is_multiple_of(bs) {
            return bad(format!(
                "request size {} B is not a whole number of {bs} B blocks",
                self.request_bytes
            ));
        }
        let positive =
            [("sustained run", self.sustained_s), ("bin", self.bin_s), ("read run", self.read_s)];
        if self.reads_per_write == 0 {
            return bad("0 reads per write (at least 1)".into());
        }
        for (what, v) in positive {
            if !(v.is_finite() && v > 0.0) {
                return bad(format!("{what} of {v} s (must be > 0)"));
            }
        }
        if self.bin_s > self.sustained_s {
            return bad(format!(
                "bins of {} s exceed the run of {} s",
                self.bin_s, self.sustained_s
            ));
        }
        if !(self.precondition.is_finite() && self.precondition >= 0.0) {
            return bad(format!("precondition {} (capacities, at least 0)", self.precondition));
        }
        if !(self.settle_s.is_finite() && self.settle_s >= 0.0) {
            return bad(format!("settle time {} s (at least 0)", self.settle_s));
        }
        if let Some(op) = self.ftl_op.filter(|op| !(op.is_finite() && *op > 0.0)) {
            return bad(format!("FTL over-provisioning {op} (must be > 0)"));
        }
        Ok(())
    }

    fn plan(&self, block_size: u32) -> Plan {
        let ns = |s: f64| (s * 1e9) as u64;
        Plan {
            request_blocks: self.request_bytes / block_size as u64,
            precondition: self.precondition,
            sustained_ns: ns(self.sustained_s),
            bin_ns: ns(self.bin_s).max(1),
            settle_ns: ns(self.settle_s),
            idle_reads: self.idle_reads,
            read_ns: ns(self.read_s),
            reads_per_write: self.reads_per_write,
            seed: self.seed,
        }
    }
}

/// The two devices of a comparison, sorted.
///
/// Thread safety: `Send + Sync` (the devices are).
#[derive(Debug, Clone)]
pub struct Pair {
    /// The zoned device (the host FTL is formatted on it).
    pub zns: Arc<dyn ZonedDevice>,
    /// The conventional device.
    pub conventional: Arc<dyn ZonedDevice>,
}

/// Sorts two devices into the ZNS one and the conventional one.
///
/// Errors with [`CharacterizeError::Invalid`] unless exactly one is zoned,
/// and when their clocks differ (their device times would not compare).
pub fn assign(devices: Vec<Arc<dyn ZonedDevice>>) -> Result<Pair, CharacterizeError> {
    let uris = || devices.iter().map(|d| d.info().uri.clone()).collect::<Vec<_>>().join(", ");
    if devices.len() != 2 {
        return Err(CharacterizeError::Invalid(format!(
            "the compare suite takes two devices, a ZNS one and a conventional one \
             (--device twice), not {} ({})",
            devices.len(),
            uris()
        )));
    }
    let zoned = devices.iter().filter(|d| d.info().zoned).count();
    if zoned != 1 {
        let what = if zoned == 2 { "both are zoned" } else { "neither is zoned" };
        return Err(CharacterizeError::Invalid(format!(
            "the compare suite needs one ZNS device and one conventional device; {what} ({}); \
             an emulated pair: emu:zn540,zones=64,media=null and emu:zn540-conv,zones=64,media=null",
            uris()
        )));
    }
    let mut it = devices.into_iter();
    let (a, b) = (it.next(), it.next());
    let (Some(a), Some(b)) = (a, b) else {
        return Err(CharacterizeError::Internal("two devices counted, fewer found".into()));
    };
    let (zns, conv) = if a.info().zoned { (a, b) } else { (b, a) };
    if zns.clock_name() != conv.clock_name() {
        return Err(CharacterizeError::Invalid(format!(
            "{} runs on a {} clock and {} on a {} one: their device times do not compare",
            zns.info().uri,
            zns.clock_name(),
            conv.info().uri,
            conv.clock_name()
        )));
    }
    Ok(Pair { zns, conventional: conv })
}

/// Runs the comparison on `devices` (one ZNS, one conventional, in any
/// order; see [`assign`]), reporting progress to `obs`. The ZNS device is
/// formatted with the host FTL and both devices are overwritten.
pub fn run(
    devices: Vec<Arc<dyn ZonedDevice>>,
    opts: &CompareOptions,
    obs: &dyn Observer,
) -> Result<CompareResults, CharacterizeError> {
    let Pair { zns, conventional: conv } = assign(devices)?;
    for d in [&zns, &conv] {
        opts.check(d.info().block_size)?;
    }
    let started_unix_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let wall0 = Instant::now();
    let conv_side = ConventionalSide::new(Arc::clone(&conv));
    let ftl_op = opts
        .ftl_op
        .unwrap_or_else(|| conv_side.firmware().map_or(DEFAULT_FTL_OP, |f| f.over_provisioning()));
    let capacity_bytes = |d: &Arc<dyn ZonedDevice>| d.info().bytes(d.info().blocks());
    let experiments = experiment_list(opts, [capacity_bytes(&zns), capacity_bytes(&conv)]);
    obs.suite_started(&experiments);
    let zns_results = run_zns(zns, opts, ftl_op, obs)?;
    let conv_results = run_side("conventional", "device firmware", &conv_side, opts, 4, obs)?;
    obs.suite_finished();
    Ok(CompareResults {
        schema_version: COMPARE_SCHEMA_VERSION,
        kind: COMPARE_KIND.into(),
        tool: Tool { name: "zns-bench".into(), version: env!("CARGO_PKG_VERSION").into() },
        started_unix_s,
        config: CompareConfig {
            request_bytes: opts.request_bytes,
            precondition_capacities: opts.precondition,
            sustained_s: opts.sustained_s,
            bin_s: opts.bin_s,
            settle_s: opts.settle_s,
            idle_reads: opts.idle_reads,
            read_s: opts.read_s,
            reads_per_write: opts.reads_per_write,
            ftl_op,
            seed: opts.seed,
        },
        duration: RunTime {
            device_ns: [&zns_results, &conv_results].iter().map(|s| side_device_ns(s)).sum(),
            wall_ns: wall0.elapsed().as_nanos() as u64,
        },
        zns: zns_results,
        conventional: conv_results,
    })
}

fn side_device_ns(s: &SideResults) -> u64 {
    s.fill.device_ns
        + s.precondition.device_ns
        + s.sustained.phase.device_ns
        + s.reads.writes.device_ns
}

/// `(name, title, weight)` of the eight phases; weights are rough device
/// seconds (writes at about 1 GB/s fresh, a third of that while garbage
/// collection runs).
fn experiment_list(opts: &CompareOptions, capacity: [u64; 2]) -> Vec<(String, String, f64)> {
    let mut v = Vec::new();
    for (role, bytes) in ["zns", "conventional"].into_iter().zip(capacity) {
        let gb = bytes as f64 / 1e9;
        v.push((format!("{role}: fill"), "sequential fill".into(), gb));
        v.push((
            format!("{role}: precondition"),
            "random writes".into(),
            3.0 * gb * opts.precondition,
        ));
        v.push((format!("{role}: sustained"), "measured random writes".into(), opts.sustained_s));
        let reads = opts.read_s + 1e-4 * opts.idle_reads as f64;
        v.push((format!("{role}: reads"), "4 KiB reads".into(), reads));
    }
    v
}

/// Formats the host FTL on the ZNS device and runs the workloads on it.
fn run_zns(
    dev: Arc<dyn ZonedDevice>,
    opts: &CompareOptions,
    ftl_op: f64,
    obs: &dyn Observer,
) -> Result<SideResults, CharacterizeError> {
    let raw = prepare_zones(dev.as_ref(), opts.force)?;
    let config = FtlConfig { op: ftl_op, ..FtlConfig::default() };
    let side = HostFtlSide::format(dev, config)?;
    let mut r = run_side("zns", "host FTL (zns-ftl)", &side, opts, 0, obs)?;
    r.capacity.raw_blocks = Some(raw);
    r.capacity.namespace_blocks = raw;
    r.capacity.usable_per_raw = Some(r.capacity.usable_blocks as f64 / raw.max(1) as f64);
    side.close()?;
    Ok(r)
}

/// Checks that every zone is empty (resetting them all with `force`) and
/// returns the sum of the zones' capacities.
fn prepare_zones(dev: &dyn ZonedDevice, force: bool) -> Result<u64, CharacterizeError> {
    let mut q = dev.queue(4)?;
    let zones = q.report_zones(0, ReportFilter::All, usize::MAX)?;
    let busy = zones.iter().filter(|z| z.state != ZoneState::Empty).count() as u64;
    if busy > 0 {
        if !force {
            return Err(CharacterizeError::NotEmpty(busy));
        }
        q.zone_action(ZoneAction::Reset, Target::All)
            .map_err(|e| CharacterizeError::command("reset all zones", e))?;
    }
    Ok(zones.iter().map(|z| z.capacity).sum())
}

/// The four phases on one side; `first` is the index of its first phase
/// in the progress list.
fn run_side(
    role: &str,
    gc: &str,
    side: &dyn Side,
    opts: &CompareOptions,
    first: usize,
    obs: &dyn Observer,
) -> Result<SideResults, CharacterizeError> {
    let plan = opts.plan(side.block_size());
    let dev = side.device();
    let steps = plan.steps(side.blocks() * side.block_size() as u64);
    let phase = |i: usize| {
        obs.experiment_started(first + i, steps[i]);
        tracing::info!(role, phase = i, "phase starts");
    };
    phase(0);
    let fill = workload::fill(side, &plan, obs)?;
    obs.experiment_finished(first);
    phase(1);
    let measure = || {
        obs.experiment_finished(first + 1);
        phase(2);
    };
    let (precondition, sustained) = workload::random_writes(side, &plan, obs, &measure)?;
    obs.experiment_finished(first + 2);
    phase(3);
    let reads = workload::reads(side, &plan, obs)?;
    obs.experiment_finished(first + 3);
    let info = dev.info();
    let raw = (role == "conventional").then(|| conv_raw_blocks(dev.as_ref())).flatten();
    Ok(SideResults {
        role: role.into(),
        device: DeviceDescription {
            uri: info.uri.clone(),
            clock: dev.clock_name().into(),
            profile: dev.emulator().map(|c| c.profile().name.clone()),
            dilation: dev.emulator().map_or(1.0, |c| c.clock().dilation().factor()),
            info: serde_json::to_value(info).unwrap_or(serde_json::Value::Null),
        },
        gc: gc.into(),
        capacity: Capacity {
            block_size: side.block_size(),
            raw_blocks: raw,
            namespace_blocks: info.blocks(),
            usable_blocks: side.blocks(),
            usable_per_raw: raw.map(|r| side.blocks() as f64 / r.max(1) as f64),
        },
        fill,
        precondition,
        sustained,
        reads,
    })
}

/// The flash an emulated conventional twin's firmware manages, in blocks.
fn conv_raw_blocks(dev: &dyn ZonedDevice) -> Option<u64> {
    let ctrl = dev.emulator()?;
    let f = ctrl.namespaces().iter().find_map(|n| n.firmware())?;
    Some(f.stats().physical_blocks)
}

#[cfg(test)]
mod tests;
