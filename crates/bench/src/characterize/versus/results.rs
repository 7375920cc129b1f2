//! The comparison's `results.json` (schema in docs/compare.md, "The
//! comparison").

use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::super::results::{DeviceDescription, Tool};
use super::super::stats::{LatencyHistogram, LatencyStats};
use super::side::WriteCounters;

/// Version of the comparison's schema this build writes.
pub const COMPARE_SCHEMA_VERSION: u32 = 2;

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
/// host FTL), on a conventional one and, where one was given, on one with
/// Flexible Data Placement.
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
    /// What every side ran.
    pub config: CompareConfig,
    /// Device time of every side's writing phases (fills,
    /// preconditioning, measured runs, reads among writes), added; wall
    /// time of the whole run.
    pub duration: RunTime,
    /// The ZNS device, written through `zns-ftl`.
    pub zns: SideResults,
    /// The conventional device, written directly.
    pub conventional: SideResults,
    /// The device with Flexible Data Placement, written directly with
    /// placement identifiers; absent when the run had none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fdp: Option<SideResults>,
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
    /// Hot/cold random writes before its measured run, in capacities: at
    /// least one turn of the cold range.
    pub hot_cold_precondition_capacities: f64,
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
    /// The hot/cold workload: fraction of each side's capacity (from its
    /// first block) that is hot.
    pub hot_fraction: f64,
    /// The hot/cold workload: fraction of the random writes that go to the
    /// hot range.
    pub hot_share: f64,
    /// The hot/cold workload: the cold range written in order, round and
    /// round (a log), else at random.
    pub cold_in_order: bool,
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
    /// `zns`, `conventional` or `fdp`.
    pub role: String,
    /// The device.
    pub device: DeviceDescription,
    /// Who collects garbage: `host FTL (zns-ftl)`, `device firmware` or
    /// `device firmware, placed by the host (FDP)`.
    pub gc: String,
    /// Usable against raw capacity.
    pub capacity: Capacity,
    /// What the side did with what the host knows about the data, in the
    /// uniform workload.
    pub separation: String,
    /// The sequential fill of every block, once.
    pub fill: Phase,
    /// The uniform random writes before the measured run.
    pub precondition: Phase,
    /// The measured run of uniform random writes (its throughput series
    /// begins with the preconditioning).
    pub sustained: Sustained,
    /// 4 KiB random reads, alone and interleaved with writes.
    pub reads: ReadTails,
    /// The hot/cold workload, after every block was unmapped.
    pub hot_cold: Workload,
}

/// A workload of random writes from a freshly filled device: fill,
/// preconditioning, measured run.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Workload {
    /// What the side did with what the host knows about the data.
    pub separation: String,
    /// The sequential fill of every block, once.
    pub fill: Phase,
    /// The random writes before the measured run.
    pub precondition: Phase,
    /// The measured run (its throughput series begins with the
    /// preconditioning).
    pub sustained: Sustained,
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
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Counters {
    /// Where the counts come from: the host FTL's counters, the
    /// firmware's, or the device's FDP Statistics log page.
    pub source: String,
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
    /// The same run counted a second way (the emulated firmware's
    /// counters beside the FDP log page), when there is one.
    pub check: Option<CounterCheck>,
}

/// A second count of a run's writes.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CounterCheck {
    /// Where the counts come from.
    pub source: String,
    /// Blocks the host wrote.
    pub host_blocks: u64,
    /// Data blocks programmed.
    pub data_blocks: u64,
    /// `data_blocks / host_blocks`.
    pub waf: f64,
    /// Both counts equal those of [`Counters`].
    pub agrees: bool,
}

/// The counters of a measured run as the workload hands them over.
pub(crate) struct Counted {
    /// The counts over the run.
    pub totals: Option<WriteCounters>,
    /// Where they come from.
    pub source: &'static str,
    /// A second count and its source.
    pub check: Option<(WriteCounters, &'static str)>,
}

impl Sustained {
    pub(crate) fn new(
        phase: Phase,
        bin_ns: u64,
        first_measured_bin: usize,
        (mib_s, waf, waf_running): (Vec<f64>, Vec<Option<f64>>, Vec<Option<f64>>),
        counted: Counted,
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
        let counters = counted.totals.filter(|c| c.host > 0).map(|c| Counters {
            source: counted.source.into(),
            host_blocks: c.host,
            data_blocks: c.data,
            meta_blocks: c.meta,
            waf: c.data as f64 / c.host as f64,
            waf_total: (c.data + c.meta) as f64 / c.host as f64,
            check: counted.check.filter(|(k, _)| k.host > 0).map(|(k, source)| {
                let agrees = (k.host, k.data) == (c.host, c.data);
                if !agrees {
                    tracing::warn!(?c, ?k, source, "the two counts of the run disagree");
                }
                CounterCheck {
                    source: source.into(),
                    host_blocks: k.host,
                    data_blocks: k.data,
                    waf: k.data as f64 / k.host as f64,
                    agrees,
                }
            }),
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
