//! The ZNS-versus-conventional-versus-FDP comparison (`zns characterize
//! --suite compare`): the same random-write workloads on a ZNS device,
//! through the host FTL (`zns-ftl`); on a conventional device whose
//! firmware collects garbage itself; and, where one is given, on a device
//! with Flexible Data Placement (FDP), whose firmware collects garbage too
//! but keeps the data of each placement handle apart as the host tags it.
//!
//! Each side runs, in order, on its own device:
//!
//! 1. **fill**: every block written once, sequentially, in requests of
//!    `request_bytes`;
//! 2. **precondition**: uniform random aligned writes of the same size
//!    until `precondition` capacities were written (garbage collection
//!    reaches its steady state);
//! 3. **sustained**: the same random writes for `sustained_s` of device
//!    time, throughput binned by device time (`bin_s`), and the write
//!    amplification of whoever collects garbage: the host FTL's count of
//!    data blocks written per user block, the firmware's count of blocks
//!    programmed per host block, or the FDP Statistics log page's media
//!    bytes per host byte;
//! 4. **reads**: 4 KiB random reads at queue depth 1, first alone (once
//!    the host FTL's garbage collection is done, after `settle_s` of idle
//!    device time), then for `read_s` interleaved with
//!    the writes of 3 on the same host thread, `reads_per_write` after
//!    each write request: the device programs what it buffered and
//!    collects garbage while they run;
//! 5. **hot/cold**: every block unmapped (the FTL's discard, Write Zeroes
//!    on the others), then 1 to 3 again with a skewed workload: the first
//!    `hot_fraction` of the capacity takes `hot_share` of the random
//!    writes, at random; the rest is written in order, round and round, as
//!    a log (`cold_in_order`; else at random too). Its preconditioning
//!    lasts one turn of the cold range at least
//!    ([`CompareOptions::hot_cold_precondition`]). The host knows which
//!    range is hot: on the FDP side hot and cold writes go to placement
//!    handles of their own (handle 1 and 0), while uniform random writes
//!    all go to handle 0, there being nothing to separate. The conventional side has no way to say it; the host
//!    FTL is told nothing either and separates by the age of the data a
//!    write replaces, as it always does.
//!
//! Every phase runs on one host thread (the host FTL adds its garbage
//! collection thread): on the emulator's virtual clock, threads of the
//! host that race each other lose device time whenever the operating
//! system deschedules one of them, so a reader and a writer on separate
//! threads would measure the host's scheduler more than the device.
//!
//! Capacity: usable blocks (the FTL's exposed capacity; the conventional
//! and FDP namespaces) over raw blocks (the zones' capacities; the flash
//! the firmware manages).
//!
//! All times are device time ([`super::clock`]); on the emulator's
//! virtual clock a run of many device minutes takes far fewer wall
//! minutes. The devices must run on the same kind of clock.

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
    Capacity, CompareConfig, CompareResults, CounterCheck, Counters, Phase, ReadTails, RunTime,
    SideResults, Sustained, Workload, COMPARE_KIND, COMPARE_SCHEMA_VERSION,
};

use super::progress::Observer;
use super::results::{DeviceDescription, Tool};
use super::CharacterizeError;
use side::{fdp_endurance_group, ConventionalSide, FdpSide, HostFtlSide, Side};
use workload::{Mix, Plan};

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
    /// The hot/cold workload: fraction of the capacity that is hot (the
    /// first blocks).
    pub hot_fraction: f64,
    /// The hot/cold workload: fraction of the random writes that go to the
    /// hot range.
    pub hot_share: f64,
    /// The hot/cold workload: the cold range written in order, round and
    /// round (a log), else at random like the hot one.
    pub cold_in_order: bool,
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
    /// preconditioning, one-second bins, a minute of reads beside them;
    /// the hot/cold workload with a fifth of the capacity taking four
    /// fifths of the writes.
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
            hot_fraction: 0.2,
            hot_share: 0.8,
            cold_in_order: true,
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
        let fractions = [("hot fraction", self.hot_fraction), ("hot share", self.hot_share)];
        for (what, v) in fractions {
            if !(v.is_finite() && v > 0.0 && v < 1.0) {
                return bad(format!("{what} {v} (must be between 0 and 1, both excluded)"));
            }
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

    /// Capacities of hot/cold random writes before its measured run: the
    /// uniform workload's, and at least one turn of the cold range (the
    /// writes in which every cold block is written once on average, in
    /// order or not), so that nothing of the fill's layout is left.
    pub fn hot_cold_precondition(&self) -> f64 {
        let turn = (1.0 - self.hot_fraction) / (1.0 - self.hot_share);
        // Rounded to a millionth: 0.8 / 0.2 is 4, not 4.000000000000001.
        self.precondition.max((turn * 1e6).round() / 1e6)
    }

    fn hot_cold(&self) -> Mix {
        Mix::HotCold {
            hot_fraction: self.hot_fraction,
            hot_share: self.hot_share,
            cold_in_order: self.cold_in_order,
        }
    }
}

/// The devices of a comparison, sorted.
///
/// Thread safety: `Send + Sync` (the devices are).
#[derive(Debug, Clone)]
pub struct Devices {
    /// The zoned device (the host FTL is formatted on it).
    pub zns: Arc<dyn ZonedDevice>,
    /// The conventional device (no Flexible Data Placement).
    pub conventional: Arc<dyn ZonedDevice>,
    /// The conventional device with Flexible Data Placement, if one was
    /// given.
    pub fdp: Option<Arc<dyn ZonedDevice>>,
}

/// An emulated trio for the messages.
const EXAMPLE: &str = "emu:zn540,zones=64,media=null, emu:zn540-conv,zones=64,media=null and \
                       emu:zn540-fdp,zones=64,media=null";

/// Sorts two or three devices into the ZNS one, the conventional one and
/// the one with Flexible Data Placement (Identify: CTRATT.FDPS and an
/// endurance group; see [`FdpSide`]).
///
/// Errors with [`CharacterizeError::Invalid`] unless there is exactly one
/// zoned device, one conventional device without FDP and at most one with
/// it, and when their clocks differ (their device times would not
/// compare).
pub fn assign(devices: Vec<Arc<dyn ZonedDevice>>) -> Result<Devices, CharacterizeError> {
    let uris = devices.iter().map(|d| d.info().uri.clone()).collect::<Vec<_>>().join(", ");
    if !(2..=3).contains(&devices.len()) {
        return Err(CharacterizeError::Invalid(format!(
            "the compare suite takes a ZNS device, a conventional one and optionally one with \
             FDP (--device two or three times), not {} ({uris})",
            devices.len(),
        )));
    }
    let (mut zns, mut conv, mut fdp) = (Vec::new(), Vec::new(), Vec::new());
    for d in devices {
        if d.info().zoned {
            zns.push(d);
        } else if fdp_endurance_group(d.as_ref()).is_some() {
            fdp.push(d);
        } else {
            conv.push(d);
        }
    }
    let count = |what: &str, n: usize| match n {
        0 => format!("no {what} device"),
        n => format!("{n} {what} devices"),
    };
    if zns.len() != 1 || conv.len() != 1 || fdp.len() > 1 {
        return Err(CharacterizeError::Invalid(format!(
            "the compare suite needs one ZNS device, one conventional device without FDP and at \
             most one with FDP; {}, {}, {} ({uris}); an emulated trio: {EXAMPLE}",
            count("zoned", zns.len()),
            count("conventional", conv.len()),
            count("FDP", fdp.len())
        )));
    }
    let (Some(zns), Some(conv)) = (zns.pop(), conv.pop()) else {
        return Err(CharacterizeError::Internal("devices counted, fewer found".into()));
    };
    let fdp = fdp.pop();
    for other in std::iter::once(&conv).chain(fdp.as_ref()) {
        if zns.clock_name() != other.clock_name() {
            return Err(CharacterizeError::Invalid(format!(
                "{} runs on a {} clock and {} on a {} one: their device times do not compare",
                zns.info().uri,
                zns.clock_name(),
                other.info().uri,
                other.clock_name()
            )));
        }
    }
    Ok(Devices { zns, conventional: conv, fdp })
}

/// Who collects garbage on each side, for the results.
const GC_FTL: &str = "host FTL (zns-ftl)";
const GC_FIRMWARE: &str = "device firmware";
const GC_FDP: &str = "device firmware, placed by the host (FDP)";

/// Runs the comparison on `devices` (one ZNS, one conventional and
/// optionally one FDP device, in any order; see [`assign`]), reporting
/// progress to `obs`. The ZNS device is formatted with the host FTL and
/// every device is overwritten.
pub fn run(
    devices: Vec<Arc<dyn ZonedDevice>>,
    opts: &CompareOptions,
    obs: &dyn Observer,
) -> Result<CompareResults, CharacterizeError> {
    let Devices { zns, conventional: conv, fdp } = assign(devices)?;
    for d in std::iter::once(&zns).chain([&conv]).chain(fdp.as_ref()) {
        opts.check(d.info().block_size)?;
    }
    let fdp_side = fdp.map(FdpSide::new).transpose()?;
    let started_unix_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let wall0 = Instant::now();
    let conv_side = ConventionalSide::new(Arc::clone(&conv));
    let ftl_op = opts
        .ftl_op
        .unwrap_or_else(|| conv_side.firmware().map_or(DEFAULT_FTL_OP, |f| f.over_provisioning()));
    let capacity_bytes = |d: &Arc<dyn ZonedDevice>| d.info().bytes(d.info().blocks());
    let mut roles = vec![("zns", capacity_bytes(&zns)), ("conventional", capacity_bytes(&conv))];
    if let Some(f) = &fdp_side {
        roles.push(("fdp", capacity_bytes(f.device())));
    }
    obs.suite_started(&experiment_list(opts, &roles));
    let zns_results = run_zns(zns, opts, ftl_op, obs)?;
    let conv_results = run_side("conventional", GC_FIRMWARE, &conv_side, opts, PHASES, obs)?;
    let fdp_results =
        fdp_side.map(|f| run_side("fdp", GC_FDP, &f, opts, 2 * PHASES, obs)).transpose()?;
    obs.suite_finished();
    let device_ns = std::iter::once(&zns_results)
        .chain([&conv_results])
        .chain(fdp_results.as_ref())
        .map(side_device_ns)
        .sum();
    Ok(CompareResults {
        schema_version: COMPARE_SCHEMA_VERSION,
        kind: COMPARE_KIND.into(),
        tool: Tool { name: "zns-bench".into(), version: env!("CARGO_PKG_VERSION").into() },
        started_unix_s,
        config: CompareConfig {
            request_bytes: opts.request_bytes,
            precondition_capacities: opts.precondition,
            hot_cold_precondition_capacities: opts.hot_cold_precondition(),
            sustained_s: opts.sustained_s,
            bin_s: opts.bin_s,
            settle_s: opts.settle_s,
            idle_reads: opts.idle_reads,
            read_s: opts.read_s,
            reads_per_write: opts.reads_per_write,
            hot_fraction: opts.hot_fraction,
            hot_share: opts.hot_share,
            cold_in_order: opts.cold_in_order,
            ftl_op,
            seed: opts.seed,
        },
        duration: RunTime { device_ns, wall_ns: wall0.elapsed().as_nanos() as u64 },
        zns: zns_results,
        conventional: conv_results,
        fdp: fdp_results,
    })
}

/// A side's writing phases.
fn writing_phases(s: &SideResults) -> [&Phase; 7] {
    let h = &s.hot_cold;
    [
        &s.fill,
        &s.precondition,
        &s.sustained.phase,
        &s.reads.writes,
        &h.fill,
        &h.precondition,
        &h.sustained.phase,
    ]
}

/// Device time of a side's writing phases.
pub(crate) fn side_device_ns(s: &SideResults) -> u64 {
    writing_phases(s).iter().map(|p| p.device_ns).sum()
}

/// Wall time of a side's writing phases.
pub(crate) fn side_wall_ns(s: &SideResults) -> u64 {
    writing_phases(s).iter().map(|p| p.wall_ns).sum()
}

/// Phases of one side in the progress list.
const PHASES: usize = 7;

/// `(name, title, weight)` of every side's phases; weights are rough
/// device seconds (writes at about 1 GB/s fresh, a third of that while
/// garbage collection runs).
fn experiment_list(opts: &CompareOptions, roles: &[(&str, u64)]) -> Vec<(String, String, f64)> {
    let mut v = Vec::new();
    for &(role, bytes) in roles {
        let gb = bytes as f64 / 1e9;
        let reads = opts.read_s + 1e-4 * opts.idle_reads as f64;
        // Hot/cold random writes collect less garbage: about the fill's
        // rate over two.
        let hot_pre = 2.0 * gb * opts.hot_cold_precondition();
        let phases = [
            ("fill", "sequential fill", gb),
            ("precondition", "uniform random writes", 3.0 * gb * opts.precondition),
            ("sustained", "measured uniform random writes", opts.sustained_s),
            ("reads", "4 KiB reads", reads),
            ("hot/cold fill", "unmap, sequential fill", gb),
            ("hot/cold precondition", "hot/cold random writes", hot_pre),
            ("hot/cold sustained", "measured hot/cold random writes", opts.sustained_s),
        ];
        for (name, title, weight) in phases {
            v.push((format!("{role}: {name}"), title.into(), weight));
        }
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
    let mut r = run_side("zns", GC_FTL, &side, opts, 0, obs)?;
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

/// The phases on one side; `first` is the index of its first phase in
/// the progress list.
fn run_side(
    role: &str,
    gc: &str,
    side: &dyn Side,
    opts: &CompareOptions,
    first: usize,
    obs: &dyn Observer,
) -> Result<SideResults, CharacterizeError> {
    let plan = opts.plan(side.block_size());
    let hot_plan = Plan { precondition: opts.hot_cold_precondition(), ..plan };
    let dev = side.device();
    let capacity = side.blocks() * side.block_size() as u64;
    let ([a, b, c, d], [e, f, g, _]) = (plan.steps(capacity), hot_plan.steps(capacity));
    let steps = [a, b, c, d, e, f, g];
    // Ends the phase before `i` (if any) and starts phase `i`.
    let phase = |i: usize| {
        if i > 0 {
            obs.experiment_finished(first + i - 1);
        }
        obs.experiment_started(first + i, steps[i]);
        tracing::info!(role, phase = i, "phase starts");
    };
    phase(0);
    let fill = workload::fill(side, &plan, Mix::Uniform, obs)?;
    phase(1);
    let (precondition, sustained) =
        workload::random_writes(side, &plan, Mix::Uniform, obs, &|| phase(2))?;
    phase(3);
    let reads = workload::reads(side, &plan, obs)?;
    phase(4);
    side.trim()?;
    let mix = opts.hot_cold();
    let hot_fill = workload::fill(side, &hot_plan, mix, obs)?;
    phase(5);
    let (hot_pre, hot_sustained) =
        workload::random_writes(side, &hot_plan, mix, obs, &|| phase(6))?;
    obs.experiment_finished(first + PHASES - 1);
    let hot_cold = Workload {
        separation: side.separation(true),
        fill: hot_fill,
        precondition: hot_pre,
        sustained: hot_sustained,
    };
    let info = dev.info();
    let raw = (role != "zns").then(|| conv_raw_blocks(dev.as_ref())).flatten();
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
        separation: side.separation(false),
        fill,
        precondition,
        sustained,
        reads,
        hot_cold,
    })
}

/// The flash an emulated conventional or FDP twin's firmware manages, in
/// blocks.
fn conv_raw_blocks(dev: &dyn ZonedDevice) -> Option<u64> {
    let ctrl = dev.emulator()?;
    let f = ctrl.namespaces().iter().find_map(|n| n.firmware())?;
    Some(f.stats().physical_blocks)
}

#[cfg(test)]
mod tests;
