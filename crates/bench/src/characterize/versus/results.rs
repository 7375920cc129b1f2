//! The comparison's `results.json` (schema in docs/compare.md, "The
//! comparison").

use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::super::results::{DeviceDescription, Tool};
use super::super::stats::{LatencyHistogram, LatencyStats};
use super::side::WriteCounters;

/// Version of the comparison's schema this build writes.
pub const COMPARE_SCHEMA_VERSION: u32 = 1;

/// Device time and wall time of a comparison run.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct RunTime {
    /// Device time, ns.
    pub device_ns: u64,
    /// Wall-clock time, ns.
    pub wall_ns: u64,
}

/// What `results.json` of a comparison says it is.
pub const COMPARE_KIND: &str = "zns-vs-conventional";

/// One comparison run: the same workloads on a ZNS device (through the
/// host FTL) and on a conventional one.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CompareResults {
    /// [`COMPARE_SCHEMA_VERSION`] of the writer.
    pub schema_version: u32,
    /// [`COMPARE_KIND`].
    pub kind: String,
    /// The program that wrote the file.
    pub tool: Tool,
    /// Start of the run, seconds since the Unix epoch.
    pub started_unix_s: u64,
    /// What both sides ran.
    pub config: CompareConfig,
    /// Device time of both sides' fill, preconditioning, measured run and
    /// reads among writes, added; wall time of the whole run.
    pub duration: RunTime,
    /// The ZNS device, written through `zns-ftl`.
    pub zns: SideResults,
    /// The conventional device, written directly.
    pub conventional: SideResults,
}

/// The workload parameters.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CompareConfig {
    /// Bytes per write request (random, aligned to its size).
    pub request_bytes: u64,
    /// Random writes before the measured run, in capacities of the side.
    pub precondition_capacities: f64,
    /// Device seconds of the measured run of random writes.
    pub sustained_s: f64,
    /// Width of a throughput bin, device seconds.
    pub bin_s: f64,
    /// Device seconds left idle before the reads alone.
    pub settle_s: f64,
    /// 4 KiB reads alone (queue depth 1).
    pub idle_reads: u64,
    /// Device seconds of 4 KiB reads interleaved with writes.
    pub read_s: f64,
    /// Reads after each write request in that phase.
    pub reads_per_write: u32,
    /// Over-provisioning the host FTL was formatted with (spare /
    /// exposed).
    pub ftl_op: f64,
    /// Seed of every random offset.
    pub seed: u64,
}

/// Everything measured on one side.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SideResults {
    /// `zns` or `conventional`.
    pub role: String,
    /// The device.
    pub device: DeviceDescription,
    /// Who collects garbage: `host FTL (zns-ftl)` or `device firmware`.
    pub gc: String,
    /// Usable against raw capacity.
    pub capacity: Capacity,
    /// The sequential fill of every block, once.
    pub fill: Phase,
    /// The random writes before the measured run.
    pub precondition: Phase,
    /// The measured run of random writes (its throughput series begins
    /// with the preconditioning).
    pub sustained: Sustained,
    /// 4 KiB random reads, alone and interleaved with writes.
    pub reads: ReadTails,
}

/// Capacities in blocks.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Capacity {
    /// Bytes per block.
    pub block_size: u32,
    /// The flash that holds data: the sum of the zones' capacities (ZNS,
    /// from a zone report) or the flash the firmware manages (conventional
    /// twin, from its counters; null elsewhere).
    pub raw_blocks: Option<u64>,
    /// Blocks of the namespace (ZNS: the zones' capacities; conventional:
    /// its size).
    pub namespace_blocks: u64,
    /// Blocks a random-write user gets: the host FTL's exposed capacity
    /// (ZNS) or the namespace (conventional).
    pub usable_blocks: u64,
    /// `usable_blocks / raw_blocks`.
    pub usable_per_raw: Option<f64>,
}

/// A phase of writes.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Phase {
    /// Bytes written.
    pub bytes: u64,
    /// Device time, ns.
    pub device_ns: u64,
    /// Wall time, ns.
    pub wall_ns: u64,
    /// `bytes` over device time, MiB/s.
    pub mib_s: f64,
    /// Write amplification of the phase (data blocks programmed per block
    /// written), when the counters could be read.
    pub waf: Option<f64>,
}

impl Phase {
    pub(crate) fn new(bytes: u64, device_ns: u64, wall0: Instant, waf: Option<f64>) -> Phase {
        let mib_s =
            if device_ns > 0 { bytes as f64 / 1048576.0 / (device_ns as f64 / 1e9) } else { 0.0 };
        Phase { bytes, device_ns, wall_ns: wall0.elapsed().as_nanos() as u64, mib_s, waf }
    }
}

/// The measured run of random writes.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sustained {
    /// Totals of the run.
    pub phase: Phase,
    /// Width of a bin, device ns.
    pub bin_ns: u64,
    /// MiB/s in each whole bin of device time from the first random write
    /// on (preconditioning included), by completion time.
    pub mib_s: Vec<f64>,
    /// Write amplification in each bin (null where nothing was written or
    /// the counters cannot be read).
    pub waf: Vec<Option<f64>>,
    /// Write amplification from the first random write to the end of each
    /// bin.
    pub waf_running: Vec<Option<f64>>,
    /// The first bin wholly in the measured run: the figures below are of
    /// the bins from here on.
    pub first_measured_bin: usize,
    /// Mean of the bins, MiB/s.
    pub mean_mib_s: f64,
    /// Median bin, MiB/s.
    pub median_mib_s: f64,
    /// 5th-percentile bin, MiB/s.
    pub p5_mib_s: f64,
    /// Slowest bin, MiB/s.
    pub min_mib_s: f64,
    /// Fastest bin, MiB/s.
    pub max_mib_s: f64,
    /// Population standard deviation of the bins over their mean.
    pub cv: f64,
    /// Bins below half the mean: the dips.
    pub dip_bins: usize,
    /// Blocks written over the run as counted by whoever collects
    /// garbage.
    pub counters: Option<Counters>,
    /// Latency of a write request, µs of device time.
    pub write_latency: LatencyStats,
}

/// Write counters over the measured run.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Counters {
    /// Blocks the host asked to write (the FTL's users, or the host).
    pub host_blocks: u64,
    /// Data blocks programmed: the host's and garbage collection's copies.
    pub data_blocks: u64,
    /// Metadata blocks written (the host FTL's log and checkpoints; 0 for
    /// the firmware, whose map persistence is not modelled).
    pub meta_blocks: u64,
    /// `data_blocks / host_blocks`.
    pub waf: f64,
    /// `(data_blocks + meta_blocks) / host_blocks`.
    pub waf_total: f64,
}

impl Sustained {
    pub(crate) fn new(
        phase: Phase,
        bin_ns: u64,
        first_measured_bin: usize,
        (mib_s, waf, waf_running): (Vec<f64>, Vec<Option<f64>>, Vec<Option<f64>>),
        totals: Option<WriteCounters>,
        write_latency: LatencyStats,
    ) -> Sustained {
        let measured = mib_s.get(first_measured_bin..).unwrap_or(&[]);
        let mut sorted = measured.to_vec();
        sorted.sort_by(f64::total_cmp);
        let at = |q: f64| {
            if sorted.is_empty() {
                return 0.0;
            }
            sorted[((sorted.len() - 1) as f64 * q).round() as usize]
        };
        let n = measured.len().max(1) as f64;
        let mean = measured.iter().sum::<f64>() / n;
        let var = measured.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
        let median = at(0.5);
        let counters = totals.filter(|c| c.host > 0).map(|c| Counters {
            host_blocks: c.host,
            data_blocks: c.data,
            meta_blocks: c.meta,
            waf: c.data as f64 / c.host as f64,
            waf_total: (c.data + c.meta) as f64 / c.host as f64,
        });
        Sustained {
            phase,
            bin_ns,
            mean_mib_s: mean,
            median_mib_s: median,
            p5_mib_s: at(0.05),
            min_mib_s: at(0.0),
            max_mib_s: at(1.0),
            cv: if mean > 0.0 { var.sqrt() / mean } else { 0.0 },
            dip_bins: measured.iter().filter(|&&x| x < 0.5 * mean).count(),
            first_measured_bin,
            mib_s,
            waf,
            waf_running,
            counters,
            write_latency,
        }
    }
}

/// 4 KiB random reads at queue depth 1.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReadTails {
    /// Alone, on the settled device, µs.
    pub idle: LatencyStats,
    /// Interleaved with the writes, µs.
    pub under_writes: LatencyStats,
    /// Reads after each write request.
    pub reads_per_write: u32,
    /// The writes meanwhile (with the reads' device time in `device_ns`).
    pub writes: Phase,
    /// `idle` as a histogram (HdrHistogram V2, deflate, base64), ns.
    pub idle_histogram: String,
    /// `under_writes` as a histogram, ns.
    pub under_writes_histogram: String,
}

impl ReadTails {
    pub(crate) fn new(
        idle: &LatencyHistogram,
        busy: &LatencyHistogram,
        reads_per_write: u32,
        writes: Phase,
    ) -> Self {
        ReadTails {
            idle: idle.stats(),
            under_writes: busy.stats(),
            reads_per_write,
            writes,
            idle_histogram: idle.to_base64(),
            under_writes_histogram: busy.to_base64(),
        }
    }
}

impl CompareResults {
    /// Parses a comparison's `results.json`, refusing other kinds and
    /// other schema versions.
    pub fn from_json(text: &str) -> Result<CompareResults, String> {
        let r: CompareResults = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if r.kind != COMPARE_KIND || r.schema_version != COMPARE_SCHEMA_VERSION {
            return Err(format!(
                "{} schema {} (this build reads {COMPARE_KIND} schema {COMPARE_SCHEMA_VERSION})",
                r.kind, r.schema_version
            ));
        }
        Ok(r)
    }
}
