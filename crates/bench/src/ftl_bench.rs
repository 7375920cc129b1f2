//! Benchmarks of the FTL: workload generators and the runner behind
//! `zns ftl bench` (`zns-ftl` itself ships no benchmark).
//!
//! # Workloads
//!
//! A [`Workload`] names a distribution of logical block addresses; its
//! [`Generator`] draws them for a device of `n` blocks:
//!
//! - `uniform`: every block equally likely.
//! - `zipfian`: block `k` (0-based) is drawn with probability proportional
//!   to `1 / (k + 1)^θ` (`rand_distr::Zipf`); θ defaults to
//!   [`DEFAULT_ZIPF_THETA`] (0.99, YCSB's constant). The hottest blocks are
//!   the lowest addresses.
//! - `hot-cold-W-D` (`hot-cold-80-20`, `hot-cold-90-10`): W % of the
//!   accesses go to the first D % of the blocks, uniformly, the rest
//!   uniformly to the other blocks.
//!
//! # The runner
//!
//! [`run`] measures, in this order, with `threads` threads each using its
//! own FTL calls (each call its own device queue) and 4 KiB requests:
//!
//! 1. **raw-write**, **raw-read** (before): on a fresh device (for a
//!    persistent device: the same one with every zone reset), as many 4 KiB
//!    blocks as the FTL will expose are written directly through
//!    `zns_device`, sequentially at the write pointers, each thread its own
//!    zones (thread `t` of `T` takes zones `t`, `t + T`, ...), same queue
//!    depth; then `reads` random 4 KiB reads of them.
//! 2. **fill**: the FTL is formatted on a fresh device and every logical
//!    block is written once, each thread a contiguous share, in order: the
//!    first pass, before any garbage collection — `write_iops`.
//! 3. **read**: `reads` random 4 KiB reads drawn from the workload (every
//!    block is mapped by then) — `read_iops`.
//! 4. **warmup**: the workload (reads mixed in at `read_pct` %) until
//!    `warmup` × capacity blocks were written: garbage collection reaches
//!    its steady state.
//! 5. **measure**: `measure` × capacity more writes; the write
//!    amplification (`waf` = device data blocks / user blocks written in
//!    this window) and the steady-state IOPS come from this window.
//! 6. **raw-write**, **raw-read** (after): the FTL is closed and step 1
//!    runs again.
//!
//! The raw figures bracket the FTL's: `raw_write_iops` and
//! `raw_read_iops` count both raw runs together (requests over seconds),
//! so a device whose own speed drifts during the run (another process
//! taking the CPU a while, a real clock) is compared at its average; the
//! two runs are reported apart too (`raw_*_iops_before`, `_after`).
//!
//! IOPS are requests per wall-clock second from the start of a phase until
//! its last thread finished.
//!
//! The FTL's software cost per I/O is measured in CPU time, which other
//! processes on a shared machine do not inflate the way they do wall time:
//! each benchmark thread reads its own CPU clock
//! (`CLOCK_THREAD_CPUTIME_ID`) at the start and end of a phase, and
//! `ns_per_io_write` = CPU ns per FTL write in the fill − CPU ns per raw
//! write, `ns_per_io_read` = CPU ns per FTL read − CPU ns per raw read,
//! `ns_per_io` their mean. With the emulator and timing off, the emulated
//! controller runs inside the submitting thread, so the raw figure is the
//! whole cost of a command and the difference is what the FTL adds (its
//! background GC thread is idle in these phases). The wall-clock form,
//! `threads × (1e9 / FTL IOPS − 1e9 / raw IOPS)`, is reported too
//! (`wall_ns_per_io_*`), and `*_vs_raw_cpu` = raw CPU per I/O / FTL CPU per
//! I/O is the IOPS ratio without CPU contention.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Zipf};
use zns_device::{ReportFilter, Target, ZoneAction, ZoneState, ZonedDevice};

use zns_ftl::{Ftl, FtlConfig, FtlError, FtlStats};

/// Result of the benchmark: the FTL's errors.
pub type Result<T> = std::result::Result<T, FtlError>;

/// The Zipf exponent θ of `zipfian` when none is given (YCSB's).
pub const DEFAULT_ZIPF_THETA: f64 = 0.99;

/// A distribution of logical block addresses.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Workload {
    /// Every block equally likely.
    Uniform,
    /// Block `k` (0-based) with probability proportional to
    /// `1 / (k + 1)^theta`.
    Zipfian {
        /// The exponent (≥ 0; 0 is uniform).
        theta: f64,
    },
    /// A fraction `writes` of the accesses go to the first `data` fraction
    /// of the blocks.
    HotCold {
        /// Fraction of accesses to the hot blocks (0 < writes < 1).
        writes: f64,
        /// Fraction of the blocks that are hot (0 < data < 1).
        data: f64,
    },
}

impl Workload {
    /// The workloads `zns ftl bench` names in its help.
    pub const NAMES: [&'static str; 4] = ["uniform", "zipfian", "hot-cold-80-20", "hot-cold-90-10"];

    /// Its name: `uniform`, `zipfian`, `hot-cold-W-D` (percentages).
    pub fn name(self) -> String {
        match self {
            Workload::Uniform => "uniform".into(),
            Workload::Zipfian { .. } => "zipfian".into(),
            Workload::HotCold { writes, data } => {
                format!("hot-cold-{:.0}-{:.0}", writes * 100.0, data * 100.0)
            }
        }
    }

    /// The same workload with Zipf exponent `theta` (only `zipfian`
    /// changes).
    pub fn with_zipf_theta(self, theta: f64) -> Workload {
        match self {
            Workload::Zipfian { .. } => Workload::Zipfian { theta },
            w => w,
        }
    }

    /// A generator of addresses in `0..blocks`.
    pub fn generator(self, blocks: u64) -> Result<Generator> {
        if blocks < 2 {
            return Err(FtlError::Config(format!("a workload over {blocks} blocks (at least 2)")));
        }
        let kind = match self {
            Workload::Uniform => Kind::Uniform,
            Workload::Zipfian { theta } => {
                if !(theta.is_finite() && theta >= 0.0) {
                    return Err(FtlError::Config(format!(
                        "zipf exponent {theta} (must be a number >= 0)"
                    )));
                }
                let zipf = Zipf::new(blocks, theta)
                    .map_err(|e| FtlError::Config(format!("zipf exponent {theta}: {e}")))?;
                Kind::Zipf(zipf)
            }
            Workload::HotCold { writes, data } => {
                let frac = |x: f64| x.is_finite() && x > 0.0 && x < 1.0;
                if !(frac(writes) && frac(data)) {
                    return Err(FtlError::Config(format!(
                        "hot/cold fractions {writes} of accesses to {data} of the blocks (each \
                         must be between 0 and 1)"
                    )));
                }
                let hot = ((blocks as f64 * data) as u64).clamp(1, blocks - 1);
                Kind::HotCold { writes, hot }
            }
        };
        Ok(Generator { blocks, kind })
    }
}

impl std::fmt::Display for Workload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

impl std::str::FromStr for Workload {
    type Err = FtlError;

    /// `uniform`, `zipfian` (θ = [`DEFAULT_ZIPF_THETA`]) or `hot-cold-W-D`
    /// with whole percentages between 1 and 99.
    fn from_str(s: &str) -> Result<Self> {
        let bad = || {
            FtlError::Config(format!(
                "unknown workload {s:?} (uniform, zipfian, hot-cold-80-20, hot-cold-90-10, or \
                 hot-cold-W-D: W % of the accesses to D % of the blocks)"
            ))
        };
        match s {
            "uniform" => return Ok(Workload::Uniform),
            "zipfian" | "zipf" => return Ok(Workload::Zipfian { theta: DEFAULT_ZIPF_THETA }),
            _ => {}
        }
        let rest = s.strip_prefix("hot-cold-").ok_or_else(bad)?;
        let (w, d) = rest.split_once('-').ok_or_else(bad)?;
        let pct = |x: &str| x.parse::<u32>().ok().filter(|v| (1..=99).contains(v));
        match (pct(w), pct(d)) {
            (Some(w), Some(d)) => {
                Ok(Workload::HotCold { writes: w as f64 / 100.0, data: d as f64 / 100.0 })
            }
            _ => Err(bad()),
        }
    }
}

#[derive(Debug, Clone)]
enum Kind {
    Uniform,
    Zipf(Zipf<f64>),
    HotCold { writes: f64, hot: u64 },
}

/// Draws logical block addresses of a [`Workload`].
///
/// Thread safety: `Send + Sync`; it holds no state (clone it per thread
/// with its own random number generator).
#[derive(Debug, Clone)]
pub struct Generator {
    blocks: u64,
    kind: Kind,
}

impl Generator {
    /// Blocks the addresses are drawn from (`0..blocks`).
    pub fn blocks(&self) -> u64 {
        self.blocks
    }

    /// The next address.
    #[inline]
    pub fn next<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        let n = self.blocks;
        match &self.kind {
            Kind::Uniform => rng.gen_range(0..n),
            Kind::Zipf(z) => (z.sample(rng) as u64).clamp(1, n) - 1,
            Kind::HotCold { writes, hot } => {
                if rng.gen_bool(*writes) {
                    rng.gen_range(0..*hot)
                } else {
                    rng.gen_range(*hot..n)
                }
            }
        }
    }
}

/// A phase of [`run`].
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Every logical block written once, in order (first pass).
    Fill,
    /// Random reads of the filled FTL.
    Read,
    /// The workload until garbage collection is at its steady state.
    Warmup,
    /// The workload, measured.
    Measure,
    /// Sequential writes straight to the device.
    RawWrite,
    /// Random reads straight from the device.
    RawRead,
}

impl Phase {
    /// Every phase in the order [`run`] runs them.
    pub const ALL: [Phase; 6] =
        [Phase::Fill, Phase::Read, Phase::Warmup, Phase::Measure, Phase::RawWrite, Phase::RawRead];

    /// Its name: `fill`, `read`, `warmup`, `measure`, `raw-write`,
    /// `raw-read`.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Fill => "fill",
            Phase::Read => "read",
            Phase::Warmup => "warmup",
            Phase::Measure => "measure",
            Phase::RawWrite => "raw-write",
            Phase::RawRead => "raw-read",
        }
    }
}

/// Follows the progress of [`run`] (for progress bars). Called only from
/// the thread that called [`run`].
pub trait Observer {
    /// `phase` starts; it will count `units` (writes in the write phases,
    /// reads in the read phases).
    fn phase_started(&self, _phase: Phase, _units: u64) {}
    /// `done` units of `phase` are done (about ten times a second).
    fn progress(&self, _phase: Phase, _done: u64) {}
    /// `phase` ended after `seconds`.
    fn phase_finished(&self, _phase: Phase, _units: u64, _seconds: f64) {}
}

/// An [`Observer`] that ignores everything.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoObserver;

impl Observer for NoObserver {}

/// What [`run`] does.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchOptions {
    /// Where the workload's requests go.
    pub workload: Workload,
    /// Percentage of reads in the warm-up and measured phases (0 to 99).
    pub read_pct: u32,
    /// Threads issuing requests (each with its own queues).
    pub threads: u32,
    /// FTL configuration; with plain writes, `heads_per_stream` should be
    /// at least `threads` for the writers not to wait for each other.
    pub config: FtlConfig,
    /// Warm-up writes, in device capacities (logical blocks).
    pub warmup: f64,
    /// Measured writes, in device capacities.
    pub measure: f64,
    /// Reads in each of the two read phases.
    pub reads: u64,
    /// Seed of every random choice.
    pub seed: u64,
}

impl Default for BenchOptions {
    fn default() -> Self {
        BenchOptions {
            workload: Workload::Uniform,
            read_pct: 0,
            threads: 1,
            config: FtlConfig::default(),
            warmup: 2.0,
            measure: 1.0,
            reads: 200_000,
            seed: 1,
        }
    }
}

impl BenchOptions {
    fn validate(&self) -> Result<()> {
        let bad = |s: String| Err(FtlError::Config(s));
        if self.read_pct > 99 {
            return bad(format!(
                "read percentage {} (at most 99: the measured phases are counted in writes)",
                self.read_pct
            ));
        }
        if !(1..=256).contains(&self.threads) {
            return bad(format!("{} threads (1 to 256)", self.threads));
        }
        for (name, v) in [("warm-up", self.warmup), ("measured", self.measure)] {
            if !(v.is_finite() && (0.0..=1000.0).contains(&v)) {
                return bad(format!("{name} writes {v} capacities (0 to 1000)"));
            }
        }
        if self.measure <= 0.0 {
            return bad("measured writes must be more than 0 capacities".into());
        }
        if self.reads == 0 {
            return bad("0 reads per read phase (at least 1)".into());
        }
        Ok(())
    }
}

/// Garbage collection and write figures of the measured window.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct WindowStats {
    /// Blocks users wrote.
    pub user_blocks_written: u64,
    /// Data blocks written to the device (user data and GC copies).
    pub data_blocks_written: u64,
    /// Metadata blocks written.
    pub meta_blocks_written: u64,
    /// Blocks garbage collection relocated.
    pub gc_blocks_copied: u64,
    /// Copy commands garbage collection issued.
    pub gc_copy_commands: u64,
    /// Zones garbage collection reclaimed.
    pub gc_victims: u64,
    /// Seconds garbage collection spent.
    pub gc_seconds: f64,
    /// Times a user write waited for garbage collection.
    pub user_waits: u64,
    /// Zone resets.
    pub zone_resets: u64,
}

impl WindowStats {
    fn between(a: &FtlStats, b: &FtlStats) -> WindowStats {
        WindowStats {
            user_blocks_written: b.user_blocks_written - a.user_blocks_written,
            data_blocks_written: b.data_blocks_written - a.data_blocks_written,
            meta_blocks_written: b.meta_blocks_written - a.meta_blocks_written,
            gc_blocks_copied: b.gc_blocks_copied - a.gc_blocks_copied,
            gc_copy_commands: b.gc_copy_commands - a.gc_copy_commands,
            gc_victims: b.gc_victims - a.gc_victims,
            gc_seconds: b.gc_seconds - a.gc_seconds,
            user_waits: b.user_waits - a.user_waits,
            zone_resets: b.zone_resets - a.zone_resets,
        }
    }
}

/// One phase as it ran.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PhaseTime {
    /// The phase.
    pub phase: Phase,
    /// Writes (write phases) or reads (read phases) it counted.
    pub units: u64,
    /// Reads the warm-up and measured phases did besides their writes.
    pub extra_reads: u64,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// CPU seconds the phase's threads used, added up (0 where the
    /// platform cannot tell).
    pub cpu_seconds: f64,
}

impl PhaseTime {
    /// Two runs of a phase counted together.
    fn combined(a: &PhaseTime, b: &PhaseTime) -> PhaseTime {
        PhaseTime {
            phase: a.phase,
            units: a.units + b.units,
            extra_reads: a.extra_reads + b.extra_reads,
            seconds: a.seconds + b.seconds,
            cpu_seconds: a.cpu_seconds + b.cpu_seconds,
        }
    }

    /// CPU nanoseconds per unit.
    pub fn cpu_ns_per_unit(&self) -> f64 {
        self.cpu_seconds * 1e9 / self.units.max(1) as f64
    }
}

/// The figures of a [`run`].
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchReport {
    /// The device's URI.
    pub device: String,
    /// Block size in bytes (the request size).
    pub block_size: u32,
    /// Logical blocks the FTL exposed.
    pub logical_blocks: u64,
    /// Metadata zones of the FTL.
    pub meta_zones: u32,
    /// FTL 4 KiB writes per second in the first pass (fill).
    pub write_iops: f64,
    /// FTL 4 KiB random reads per second after the fill.
    pub read_iops: f64,
    /// Raw device sequential 4 KiB writes per second.
    pub raw_write_iops: f64,
    /// Raw device random 4 KiB reads per second.
    pub raw_read_iops: f64,
    /// Raw writes per second of the run before the FTL's phases.
    pub raw_write_iops_before: f64,
    /// Raw writes per second of the run after the FTL's phases.
    pub raw_write_iops_after: f64,
    /// Raw reads per second of the run before the FTL's phases.
    pub raw_read_iops_before: f64,
    /// Raw reads per second of the run after the FTL's phases.
    pub raw_read_iops_after: f64,
    /// CPU time per FTL write of the fill minus CPU time per raw write,
    /// in nanoseconds.
    pub ns_per_io_write: f64,
    /// CPU time per FTL read minus CPU time per raw read, in nanoseconds.
    pub ns_per_io_read: f64,
    /// The mean of `ns_per_io_write` and `ns_per_io_read`.
    pub ns_per_io: f64,
    /// Wall-clock form of `ns_per_io_write`:
    /// `threads × (1e9 / write_iops − 1e9 / raw_write_iops)`.
    pub wall_ns_per_io_write: f64,
    /// Wall-clock form of `ns_per_io_read`:
    /// `threads × (1e9 / read_iops − 1e9 / raw_read_iops)`.
    pub wall_ns_per_io_read: f64,
    /// Raw CPU time per write / FTL CPU time per write: the write IOPS
    /// ratio FTL / raw without contention for the CPU.
    pub write_vs_raw_cpu: f64,
    /// Raw CPU time per read / FTL CPU time per read.
    pub read_vs_raw_cpu: f64,
    /// Zones garbage collection reclaimed during fill and read (0 when the
    /// first-pass figures are free of GC, as intended).
    pub first_pass_gc_victims: u64,
    /// The spare space the FTL had, nominal and effective, with greedy's
    /// analytic write amplification at each.
    pub spare: Spare,
    /// Write amplification of data in the measured window.
    pub waf: f64,
    /// Write amplification counting metadata, in the measured window.
    pub waf_total: f64,
    /// User writes per second in the measured window (reads mixed in).
    pub steady_write_iops: f64,
    /// User reads per second in the measured window.
    pub steady_read_iops: f64,
    /// The measured window's write and GC figures.
    pub window: WindowStats,
    /// Bytes of RAM the map takes per exposed block.
    pub map_bytes_per_block: f64,
    /// The FTL's statistics at the end of the measured window.
    pub stats: FtlStats,
    /// Each phase as it ran.
    pub phases: Vec<PhaseTime>,
    /// Wall-clock seconds of the whole run (format and close included).
    pub seconds: f64,
}

/// Spare space (over-provisioning) as configured, as the device gives it,
/// and as garbage collection works with it.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Spare {
    /// The over-provisioning asked for at format (spare / logical).
    pub nominal: f64,
    /// Data-zone blocks over logical blocks, less one: what the device
    /// gives, before the FTL holds back heads and the GC reserve.
    pub device: f64,
    /// The time-average of invalid blocks in written zones over logical
    /// blocks in the measured window: the spare garbage collection
    /// actually works with, what the analytic model calls OP.
    pub effective: f64,
    /// Greedy's analytic WAF for uniform random writes at `nominal`.
    pub greedy_waf_nominal: f64,
    /// The same at `effective` (the honest reference).
    pub greedy_waf_effective: f64,
}

impl Spare {
    fn new(nominal: f64, data_zone_blocks: u64, logical: u64, mean_invalid: f64) -> Spare {
        let logical = logical.max(1) as f64;
        let effective = mean_invalid / logical;
        Spare {
            nominal,
            device: data_zone_blocks as f64 / logical - 1.0,
            effective,
            greedy_waf_nominal: zns_ftl::analytic::greedy_waf(nominal),
            greedy_waf_effective: zns_ftl::analytic::greedy_waf(effective.max(1e-6)),
        }
    }
}

/// Runs the benchmark (see the [module documentation](self)). `open`
/// opens the device; it is called twice, for the FTL and for the raw
/// phases, and must give a fresh device or the same persistent one (whose
/// data is destroyed).
pub fn run(
    open: &dyn Fn() -> zns_device::Result<Arc<dyn ZonedDevice>>,
    opts: &BenchOptions,
    observer: &dyn Observer,
) -> Result<BenchReport> {
    opts.validate()?;
    let started = Instant::now();
    let open_dev = || open().map_err(FtlError::device("open the device"));
    let mut phases = Vec::new();
    let threads = opts.threads;

    // The capacity the FTL will expose, for the raw runs.
    let n = Ftl::format(open_dev()?, opts.config.clone())?.capacity_blocks();

    // Raw phases before.
    let raw_before = raw_phases(&open_dev()?, n, opts, observer)?;
    phases.extend(raw_before);

    // FTL phases.
    let dev = open_dev()?;
    let device = dev.info().uri.clone();
    let ftl_device_info = dev.info().clone();
    let ftl = Ftl::format(dev, opts.config.clone())?;
    debug_assert_eq!(ftl.capacity_blocks(), n);
    let bs = ftl.block_size() as usize;
    let gen = opts.workload.generator(n)?;
    tracing::info!(logical = n, workload = %opts.workload, threads, "FTL benchmark: formatted");

    let on = OnFtl { ftl: &ftl, gen: &gen, n, opts, observer };
    let (fill, read) = on.first_pass()?;
    phases.push(fill);
    phases.push(read);
    let first_pass_gc_victims = ftl.stats().gc_victims;
    if first_pass_gc_victims > 0 {
        tracing::warn!(
            victims = first_pass_gc_victims,
            "garbage collection ran during the first pass: its IOPS include GC"
        );
    }

    if opts.warmup > 0.0 {
        phases.push(on.mixed(Phase::Warmup, opts.warmup, 2)?);
    }
    let s0 = ftl.stats();
    let (measured, spare) = on.measure_window();
    let measured = measured?;
    let s1 = ftl.stats();
    phases.push(measured);
    let window = WindowStats::between(&s0, &s1);
    let map_bytes_per_block = ftl.map_bytes_per_block();
    let meta_zones = ftl.meta_zones();
    ftl.close()?;

    // Raw phases after.
    let raw_after = raw_phases(&open_dev()?, n, opts, observer)?;
    phases.extend(raw_after);
    let raw_write = PhaseTime::combined(&raw_before[0], &raw_after[0]);
    let raw_read = PhaseTime::combined(&raw_before[1], &raw_after[1]);

    let iops = |p: &PhaseTime| p.units as f64 / p.seconds.max(1e-9);
    let per_io = |ftl: f64, raw: f64| threads as f64 * (1e9 / ftl - 1e9 / raw);
    let (write_iops, read_iops) = (iops(&fill), iops(&read));
    let (raw_write_iops, raw_read_iops) = (iops(&raw_write), iops(&raw_read));
    let cpu = |ftl: &PhaseTime, raw: &PhaseTime| {
        let (f, r) = (ftl.cpu_ns_per_unit(), raw.cpu_ns_per_unit());
        (f - r, if f > 0.0 { r / f } else { 0.0 })
    };
    let (ns_per_io_write, write_vs_raw_cpu) = cpu(&fill, &raw_write);
    let (ns_per_io_read, read_vs_raw_cpu) = cpu(&read, &raw_read);
    let user = window.user_blocks_written.max(1) as f64;
    let info = ftl_device_info.clone();
    let data_zone_blocks = (info.zone_count - meta_zones as u64) * info.zone_capacity;
    let spare = Spare::new(opts.config.op, data_zone_blocks, n, spare);
    let report = BenchReport {
        device,
        block_size: bs as u32,
        logical_blocks: n,
        meta_zones,
        write_iops,
        read_iops,
        raw_write_iops,
        raw_read_iops,
        raw_write_iops_before: iops(&raw_before[0]),
        raw_write_iops_after: iops(&raw_after[0]),
        raw_read_iops_before: iops(&raw_before[1]),
        raw_read_iops_after: iops(&raw_after[1]),
        ns_per_io_write,
        ns_per_io_read,
        ns_per_io: (ns_per_io_write + ns_per_io_read) / 2.0,
        wall_ns_per_io_write: per_io(write_iops, raw_write_iops),
        wall_ns_per_io_read: per_io(read_iops, raw_read_iops),
        write_vs_raw_cpu,
        read_vs_raw_cpu,
        first_pass_gc_victims,
        spare,
        waf: window.data_blocks_written as f64 / user,
        waf_total: (window.data_blocks_written + window.meta_blocks_written) as f64 / user,
        steady_write_iops: iops(&measured),
        steady_read_iops: measured.extra_reads as f64 / measured.seconds.max(1e-9),
        window,
        map_bytes_per_block,
        stats: s1,
        phases,
        seconds: started.elapsed().as_secs_f64(),
    };
    tracing::info!(
        write_iops = report.write_iops,
        raw_write_iops = report.raw_write_iops,
        waf = report.waf,
        "FTL benchmark done"
    );
    Ok(report)
}

/// A formatted FTL and what the phases on it share.
#[derive(Clone, Copy)]
struct OnFtl<'a> {
    ftl: &'a Ftl,
    gen: &'a Generator,
    /// Logical blocks.
    n: u64,
    opts: &'a BenchOptions,
    observer: &'a dyn Observer,
}

impl OnFtl<'_> {
    /// The first pass: every logical block written once, in order, each
    /// thread a contiguous share (`fill`), then `reads` random reads drawn
    /// from the workload (`read`).
    fn first_pass(&self) -> Result<(PhaseTime, PhaseTime)> {
        let OnFtl { ftl, gen, n, opts, observer } = *self;
        let bs = ftl.block_size() as usize;
        let fill = parallel(opts.threads, n, Phase::Fill, observer, &|_t, range, progress| {
            let block = vec![0x5Au8; bs];
            for l in range {
                ftl.write(l, &block)?;
                if !progress.unit() {
                    break;
                }
            }
            Ok(0)
        })?;
        let read =
            parallel(opts.threads, opts.reads, Phase::Read, observer, &|t, range, progress| {
                let mut rng = SmallRng::seed_from_u64(opts.seed ^ (1 << 40) ^ t as u64);
                let mut buf = vec![0u8; bs];
                for _ in range {
                    ftl.read(gen.next(&mut rng), &mut buf)?;
                    if !progress.unit() {
                        break;
                    }
                }
                Ok(0)
            })?;
        Ok((fill, read))
    }

    /// The workload for `capacities` × `n` writes, reads mixed in at
    /// `read_pct` %, each thread seeded from `salt`.
    fn mixed(&self, phase: Phase, capacities: f64, salt: u64) -> Result<PhaseTime> {
        let OnFtl { ftl, gen, n, opts, observer } = *self;
        let bs = ftl.block_size() as usize;
        let writes = (capacities * n as f64) as u64;
        parallel(opts.threads, writes, phase, observer, &|t, range, progress| {
            let mut rng = SmallRng::seed_from_u64(opts.seed ^ (salt << 40) ^ t as u64);
            let block = vec![0xA5u8; bs];
            let mut buf = vec![0u8; bs];
            let mut reads = 0u64;
            let mut left = range.end - range.start;
            while left > 0 {
                if opts.read_pct > 0 && rng.gen_range(0..100) < opts.read_pct {
                    ftl.read(gen.next(&mut rng), &mut buf)?;
                    reads += 1;
                    continue;
                }
                ftl.write(gen.next(&mut rng), &block)?;
                left -= 1;
                if !progress.unit() {
                    break;
                }
            }
            Ok(reads)
        })
    }

    /// The measured window of the workload, with the spare GC works with
    /// sampled through it: invalid blocks in written zones (free zones,
    /// unwritten head space and the GC reserve hold none).
    fn measure_window(&self) -> (Result<PhaseTime>, f64) {
        let (ftl, opts) = (self.ftl, self.opts);
        let sampling = AtomicBool::new(true);
        std::thread::scope(|sc| {
            let sampler = sc.spawn(|| {
                let (mut sum, mut samples) = (0f64, 0u64);
                while sampling.load(Ordering::Relaxed) {
                    sum += ftl.stats().invalid_blocks as f64;
                    samples += 1;
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                sum / samples.max(1) as f64
            });
            let measured = self.mixed(Phase::Measure, opts.measure, 3);
            sampling.store(false, Ordering::Relaxed);
            (measured, sampler.join().unwrap_or(0.0))
        })
    }
}

/// Requests between two progress updates of a worker.
const TICK: u64 = 1024;

/// The share of `total` units thread `t` of `threads` does.
fn share(total: u64, threads: u32, t: u32) -> Range<u64> {
    let (th, t) = (threads as u64, t as u64);
    let (base, extra) = (total / th, total % th);
    let start = t * base + t.min(extra);
    start..start + base + u64::from(t < extra)
}

/// A worker's progress towards [`parallel`]'s count, published every
/// [`TICK`] units.
struct Progress<'a> {
    since: u64,
    done: &'a AtomicU64,
    stop: &'a AtomicBool,
}

impl Progress<'_> {
    /// Counts one unit done; false when the phase is to stop.
    fn unit(&mut self) -> bool {
        self.since += 1;
        if self.since < TICK {
            return true;
        }
        self.since = 0;
        self.done.fetch_add(TICK, Ordering::Relaxed);
        !self.stop.load(Ordering::Relaxed)
    }
}

/// A worker of [`parallel`]: thread number, its share of the units, and
/// its progress counter. Returns the reads it did besides its units.
type Work<'a> = dyn Fn(u32, Range<u64>, &mut Progress<'_>) -> Result<u64> + Sync + 'a;

/// Runs `work` on `threads` threads over `total` units, reporting progress
/// to `observer` from this thread; the phase's time runs from the start to
/// the end of its last worker.
fn parallel(
    threads: u32,
    total: u64,
    phase: Phase,
    observer: &dyn Observer,
    work: &Work<'_>,
) -> Result<PhaseTime> {
    observer.phase_started(phase, total);
    let done = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let finished = AtomicU64::new(0);
    let start = Instant::now();
    let last_end_ns = AtomicU64::new(0);
    let cpu_ns = AtomicU64::new(0);
    let results: Vec<Result<u64>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (done, stop, finished) = (&done, &stop, &finished);
                let (last_end_ns, cpu_ns) = (&last_end_ns, &cpu_ns);
                s.spawn(move || {
                    let cpu0 = crate::clock::thread_cpu_ns();
                    let mut progress = Progress { since: 0, done, stop };
                    let r = work(t, share(total, threads, t), &mut progress);
                    if r.is_err() {
                        stop.store(true, Ordering::Relaxed);
                    }
                    last_end_ns.fetch_max(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
                    cpu_ns.fetch_add(
                        crate::clock::thread_cpu_ns().saturating_sub(cpu0),
                        Ordering::Relaxed,
                    );
                    finished.fetch_add(1, Ordering::Release);
                    r
                })
            })
            .collect();
        let mut last = Instant::now();
        while finished.load(Ordering::Acquire) < threads as u64 {
            std::thread::sleep(Duration::from_millis(10));
            if last.elapsed() >= Duration::from_millis(100) {
                observer.progress(phase, done.load(Ordering::Relaxed).min(total));
                last = Instant::now();
            }
        }
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(FtlError::Failed("a benchmark thread panicked".into())))
            })
            .collect()
    });
    let seconds = last_end_ns.load(Ordering::Relaxed) as f64 / 1e9;
    let mut extra_reads = 0u64;
    for r in results {
        extra_reads += r?;
    }
    observer.progress(phase, total);
    observer.phase_finished(phase, total, seconds);
    tracing::debug!(phase = phase.name(), total, seconds, "benchmark phase done");
    let cpu_seconds = cpu_ns.load(Ordering::Relaxed) as f64 / 1e9;
    Ok(PhaseTime { phase, units: total, extra_reads, seconds, cpu_seconds })
}

/// Zones written by the raw phase: (start LBA, blocks written).
type Extents = Vec<(u64, u64)>;

/// Resets `dev` and writes `blocks` 4 KiB blocks sequentially, thread `t`
/// into zones `t, t + T, ...` in order.
/// The raw write and read phases on `dev` (every zone reset first), for
/// `blocks` blocks.
fn raw_phases(
    dev: &Arc<dyn ZonedDevice>,
    blocks: u64,
    opts: &BenchOptions,
    observer: &dyn Observer,
) -> Result<[PhaseTime; 2]> {
    let (write, extents) = raw_write(dev.as_ref(), blocks, opts, observer)?;
    let read = raw_read(dev.as_ref(), &extents, opts, observer)?;
    Ok([write, read])
}

fn raw_write(
    dev: &dyn ZonedDevice,
    blocks: u64,
    opts: &BenchOptions,
    observer: &dyn Observer,
) -> Result<(PhaseTime, Extents)> {
    let info = dev.info().clone();
    let depth = opts.config.queue_depth as usize;
    let report = {
        let mut q = dev.queue(depth).map_err(FtlError::device("create a queue"))?;
        q.zone_action(ZoneAction::Reset, Target::All)
            .map_err(FtlError::device("reset all zones"))?;
        q.report_zones(0, ReportFilter::All, info.zone_count as usize)
            .map_err(FtlError::device("report zones"))?
    };
    let zones: Vec<(u64, u64)> = report
        .iter()
        .filter(|z| z.state == ZoneState::Empty && z.capacity > 0)
        .map(|z| (z.start, z.capacity))
        .collect();
    let threads = opts.threads;
    let mut plans: Vec<Extents> = vec![Vec::new(); threads as usize];
    for t in 0..threads {
        let mut left = share(blocks, threads, t).end - share(blocks, threads, t).start;
        for &(start, cap) in zones.iter().skip(t as usize).step_by(threads as usize) {
            if left == 0 {
                break;
            }
            let k = cap.min(left);
            plans[t as usize].push((start, k));
            left -= k;
        }
        if left > 0 {
            return Err(FtlError::Config(format!(
                "the device's {} writable zones cannot hold {blocks} blocks spread over \
                 {threads} threads",
                zones.len()
            )));
        }
    }
    let bs = info.block_size as usize;
    let phase = parallel(threads, blocks, Phase::RawWrite, observer, &|t, _range, progress| {
        let mut q = dev.queue(depth).map_err(FtlError::device("create a queue"))?;
        let mut buf = q.alloc(bs).map_err(FtlError::device("allocate a buffer"))?;
        buf.fill(0x5A);
        for &(start, k) in &plans[t as usize] {
            for i in 0..k {
                q.write(start + i, &buf).map_err(FtlError::device("write"))?;
                if !progress.unit() {
                    return Ok(0);
                }
            }
        }
        Ok(0)
    })?;
    Ok((phase, plans.into_iter().flatten().collect()))
}

/// Random 4 KiB reads of the blocks `extents` hold.
fn raw_read(
    dev: &dyn ZonedDevice,
    extents: &[(u64, u64)],
    opts: &BenchOptions,
    observer: &dyn Observer,
) -> Result<PhaseTime> {
    // Blocks before each extent, for a binary search.
    let mut before = Vec::with_capacity(extents.len());
    let mut total = 0u64;
    for &(_, k) in extents {
        before.push(total);
        total += k;
    }
    if total == 0 {
        return Err(FtlError::Config("no blocks were written to read back".into()));
    }
    let bs = dev.info().block_size as usize;
    let depth = opts.config.queue_depth as usize;
    parallel(opts.threads, opts.reads, Phase::RawRead, observer, &|t, range, progress| {
        let mut q = dev.queue(depth).map_err(FtlError::device("create a queue"))?;
        let mut buf = q.alloc(bs).map_err(FtlError::device("allocate a buffer"))?;
        let mut rng = SmallRng::seed_from_u64(opts.seed ^ (5 << 40) ^ t as u64);
        for _ in range {
            let x = rng.gen_range(0..total);
            let i = before.partition_point(|&b| b <= x) - 1;
            let lba = extents[i].0 + (x - before[i]);
            q.read(lba, &mut buf).map_err(FtlError::device("read"))?;
            if !progress.unit() {
                break;
            }
        }
        Ok(0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workloads_parse_and_name_themselves() {
        for name in Workload::NAMES {
            let w: Workload = name.parse().unwrap();
            assert_eq!(w.name(), name);
        }
        assert_eq!(
            "hot-cold-70-30".parse::<Workload>().unwrap(),
            Workload::HotCold { writes: 0.7, data: 0.3 }
        );
        for bad in ["", "zipfy", "hot-cold-0-10", "hot-cold-90", "hot-cold-90-100", "hot-cold-a-b"]
        {
            assert!(bad.parse::<Workload>().is_err(), "{bad}");
        }
        let z = Workload::Uniform.with_zipf_theta(0.5);
        assert_eq!(z, Workload::Uniform);
        let z = Workload::Zipfian { theta: DEFAULT_ZIPF_THETA }.with_zipf_theta(0.5);
        assert_eq!(z, Workload::Zipfian { theta: 0.5 });
    }

    #[test]
    fn generators_stay_in_range_and_have_their_shape() {
        let mut rng = SmallRng::seed_from_u64(7);
        let n = 1000u64;
        let draws = 50_000;
        let count = |w: Workload, rng: &mut SmallRng, below: u64| {
            let g = w.generator(n).unwrap();
            let mut c = 0;
            for _ in 0..draws {
                let x = g.next(rng);
                assert!(x < n);
                c += u64::from(x < below);
            }
            c as f64 / draws as f64
        };
        let u = count(Workload::Uniform, &mut rng, 100);
        assert!((u - 0.1).abs() < 0.02, "{u}");
        let h = count(Workload::HotCold { writes: 0.9, data: 0.1 }, &mut rng, 100);
        assert!((h - 0.9).abs() < 0.02, "{h}");
        // Zipf(0.99) over 1000 blocks: the first 10 % take about 70 %.
        let z = count(Workload::Zipfian { theta: 0.99 }, &mut rng, 100);
        assert!(z > 0.6 && z < 0.8, "{z}");
        assert!(Workload::Uniform.generator(1).is_err());
        assert!(Workload::Zipfian { theta: -1.0 }.generator(n).is_err());
        assert!(Workload::HotCold { writes: 1.0, data: 0.1 }.generator(n).is_err());
    }

    #[test]
    fn shares_cover_the_total_once() {
        for (total, threads) in [(10u64, 3u32), (2, 4), (0, 1), (7, 7)] {
            let mut next = 0;
            for t in 0..threads {
                let r = share(total, threads, t);
                assert_eq!(r.start, next);
                next = r.end;
            }
            assert_eq!(next, total);
        }
    }

    #[test]
    fn a_short_run_reports_every_figure() {
        let opts = BenchOptions {
            warmup: 0.5,
            measure: 0.5,
            reads: 500,
            read_pct: 20,
            threads: 2,
            config: FtlConfig { heads_per_stream: 1, ..FtlConfig::default() },
            ..BenchOptions::default()
        };
        let r = run(&|| zns_device::open("emu:tiny,media=null"), &opts, &NoObserver).unwrap();
        assert_eq!(r.first_pass_gc_victims, 0);
        for v in [r.write_iops, r.read_iops, r.raw_write_iops, r.raw_read_iops, r.waf] {
            assert!(v.is_finite() && v > 0.0, "{r:?}");
        }
        assert!(r.waf >= 1.0 && r.steady_read_iops > 0.0, "{r:?}");
        // Raw write and read, fill, read, warm-up, measure, raw again.
        let names: Vec<&str> = r.phases.iter().map(|p| p.phase.name()).collect();
        assert_eq!(
            names,
            ["raw-write", "raw-read", "fill", "read", "warmup", "measure", "raw-write", "raw-read"]
        );
        for i in [0, 2, 6] {
            assert_eq!(r.phases[i].units, r.logical_blocks, "{}", names[i]);
        }
        // The raw figures count both raw runs.
        let (a, b) = (r.phases[0], r.phases[6]);
        let both = (a.units + b.units) as f64 / (a.seconds + b.seconds);
        assert!((r.raw_write_iops - both).abs() <= 1e-6 * both, "{r:?}");
        assert!(r.raw_write_iops_before > 0.0 && r.raw_write_iops_after > 0.0);
        let bad = BenchOptions { read_pct: 100, ..opts };
        assert!(run(&|| zns_device::open("emu:tiny"), &bad, &NoObserver).is_err());
    }
}
