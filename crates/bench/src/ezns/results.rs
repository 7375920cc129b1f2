//! `ezns.json`: what the eZNS experiments measured.
//!
//! Every figure is measured; the summary only sets eZNS's figures beside
//! static striping's. Times are device time.

use serde::{Deserialize, Serialize};

/// Version of this layout.
pub const SCHEMA_VERSION: u32 = 1;

/// The outcome of `zns ezns bench`.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EznsResults {
    /// [`SCHEMA_VERSION`].
    pub schema: u32,
    /// `smoke` or `full`.
    pub scale: String,
    /// Seed of every random choice.
    pub seed: u64,
    /// The base device.
    pub device: DeviceSummary,
    /// How the runs are scaled down from the eZNS testbed.
    pub scaling: String,
    /// The elastic configuration (the static one differs only in `mode`
    /// and its default headroom).
    pub config: String,
    /// Device time of the whole run, s.
    pub device_s: f64,
    /// Wall time of the whole run, s.
    pub wall_s: f64,
    /// Experiment 1.
    pub balloon: Balloon,
    /// Experiment 2.
    pub isolation: Vec<IsolationPoint>,
    /// Experiment 3.
    pub utilization: Vec<UtilizationPoint>,
    /// Experiment 4.
    pub kv: Vec<KvPoint>,
    /// eZNS against static striping, figure by figure.
    pub summary: Vec<Comparison>,
    /// Experiment 4's changes averaged over the mixes, as eZNS reports
    /// its YCSB figures (absent when a mix is missing).
    pub kv_mean: Option<KvMean>,
}

/// Experiment 4's improvements of eZNS over static striping, averaged
/// over the mixes.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct KvMean {
    /// Mean p99.9 latency improvement, % (positive: eZNS lower).
    pub p99_9_improvement_pct: f64,
    /// Mean throughput gain, % (positive: eZNS higher).
    pub throughput_gain_pct: f64,
}

/// The base device.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeviceSummary {
    /// Its URI.
    pub uri: String,
    /// `virtual` or `real`.
    pub clock: String,
    /// Zones.
    pub zones: u64,
    /// Zone capacity, MiB.
    pub zone_capacity_mib: f64,
    /// Max Active Resources.
    pub max_active: Option<u32>,
    /// Dies (from the emulator's timing model; 0 when unknown).
    pub dies: u32,
}

/// Experiment 1: zone ballooning over time.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Balloon {
    /// Length of each phase, ms: all write; only the writer; all again
    /// (sampling goes on after the third while spares are still lent, for
    /// at most two phases more).
    pub phase_ms: f64,
    /// Sampling interval, ms.
    pub sample_ms: f64,
    /// One run per mode.
    pub runs: Vec<BalloonRun>,
}

/// Experiment 1 in one mode.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BalloonRun {
    /// `static` or `elastic`.
    pub mode: String,
    /// Most spares lent at once.
    pub lent_most: u32,
    /// Device time from the others' return until no spare was lent any
    /// more (the first sample with none), ms; absent when none was lent or
    /// they were still lent two phases after the third ended.
    pub returned_after_ms: Option<f64>,
    /// The time series.
    pub samples: Vec<BalloonSample>,
    /// Means over the second half of each phase.
    pub phases: Vec<PhaseFigure>,
}

/// One sample of experiment 1.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BalloonSample {
    /// Device time since the start, ms (end of the interval).
    pub t_ms: f64,
    /// The writer's bandwidth over the interval, MiB/s.
    pub writer_mib_s: f64,
    /// The three other tenants' bandwidth together, MiB/s.
    pub others_mib_s: f64,
    /// Spares the other tenants lend (all to the writer: they are the
    /// only ones lent), at the end of the interval.
    pub lent_spares: u32,
    /// Mean width of the writer's open logical zones' current groups.
    pub writer_width: f64,
    /// Distinct dies under those groups' columns.
    pub writer_dies: u32,
    /// Internal commands (journal blocks, finishes and resets of physical
    /// zones) queued or in flight.
    pub internal_pending: u64,
    /// The write admission window, KiB (elastic mode).
    pub write_window_kib: u64,
}

/// Means over one phase of experiment 1.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PhaseFigure {
    /// `all`, `alone`, `back`.
    pub phase: String,
    /// Writer's bandwidth, MiB/s.
    pub writer_mib_s: f64,
    /// The others' bandwidth, MiB/s.
    pub others_mib_s: f64,
    /// Spares lent.
    pub lent_spares: f64,
    /// Writer's stripe width.
    pub writer_width: f64,
}

/// Experiment 2: one mode, one number of writers.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IsolationPoint {
    /// `static` or `elastic`.
    pub mode: String,
    /// Heavy writer tenants beside the reader.
    pub writers: u32,
    /// Reads measured.
    pub reads: u64,
    /// Read latency, µs.
    pub p50_us: f64,
    /// p99, µs.
    pub p99_us: f64,
    /// p99.9, µs.
    pub p99_9_us: f64,
    /// The reader's throughput, MiB/s.
    pub read_mib_s: f64,
    /// The writers' bandwidth together, MiB/s.
    pub write_mib_s: f64,
    /// At the end of the window: the write admission window, KiB.
    pub end_write_window_kib: u64,
    /// At the end of the window: internal commands queued or in flight.
    pub end_internal_pending: u64,
    /// At the end of the window: spares lent.
    pub end_lent_spares: u32,
}

/// Experiment 3: one mode, one number of writing tenants.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UtilizationPoint {
    /// `static` or `elastic`.
    pub mode: String,
    /// Tenants writing.
    pub tenants: u32,
    /// Device write bandwidth, MiB/s.
    pub device_mib_s: f64,
}

/// Experiment 4: one mode, one mix, all four tenants together.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct KvPoint {
    /// `static` or `elastic`.
    pub mode: String,
    /// `A`, `B`, `C` or `F`.
    pub mix: String,
    /// Operations per second (device time), all tenants.
    pub kops_s: f64,
    /// Operation latency over all tenants, µs.
    pub p99_us: f64,
    /// p99.9, µs.
    pub p99_9_us: f64,
    /// Reads' p99.9, µs.
    pub read_p99_9_us: f64,
    /// Updates' (and read-modify-writes') p99.9, µs (0: none).
    pub update_p99_9_us: f64,
    /// Flushed MiB/s.
    pub write_mib_s: f64,
}

/// One figure in both modes.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Comparison {
    /// What (`kv/A/p99_9_us`, ...).
    pub figure: String,
    /// Static striping.
    pub static_value: f64,
    /// eZNS.
    pub ezns_value: f64,
    /// Change from static to eZNS, %: positive is better (less latency,
    /// more bandwidth or throughput).
    pub improvement_pct: f64,
}

impl EznsResults {
    /// The comparison of `figure`, if measured.
    pub fn comparison(&self, figure: &str) -> Option<&Comparison> {
        self.summary.iter().find(|c| c.figure == figure)
    }
}

/// The change from `s` to `e` in %, positive when `e` is better.
fn improvement(s: f64, e: f64, lower_better: bool) -> f64 {
    match (s > 0.0, lower_better) {
        (false, _) => 0.0,
        (true, true) => (s - e) / s * 100.0,
        (true, false) => (e - s) / s * 100.0,
    }
}

/// Builds the summary from the measured points.
pub(crate) fn summarize(r: &EznsResults) -> (Vec<Comparison>, Option<KvMean>) {
    let mut out = Vec::new();
    let mut push = |figure: String, s: f64, e: f64, lower_better: bool| {
        let improvement_pct = improvement(s, e, lower_better);
        out.push(Comparison { figure, static_value: s, ezns_value: e, improvement_pct });
    };
    let phase = |mode: &str, p: &str| {
        r.balloon
            .runs
            .iter()
            .find(|x| x.mode == mode)
            .and_then(|x| x.phases.iter().find(|f| f.phase == p))
            .map_or(0.0, |f| f.writer_mib_s)
    };
    for p in ["all", "alone", "back"] {
        push(format!("balloon/{p}/writer_mib_s"), phase("static", p), phase("elastic", p), false);
    }
    for w in 0..=2 {
        let f = |m: &str| r.isolation.iter().find(|x| x.mode == m && x.writers == w);
        if let (Some(s), Some(e)) = (f("static"), f("elastic")) {
            push(format!("isolation/{w}w/p99_us"), s.p99_us, e.p99_us, true);
            push(format!("isolation/{w}w/p99_9_us"), s.p99_9_us, e.p99_9_us, true);
        }
    }
    for n in 1..=4 {
        let f = |m: &str| r.utilization.iter().find(|x| x.mode == m && x.tenants == n);
        if let (Some(s), Some(e)) = (f("static"), f("elastic")) {
            push(format!("utilization/{n}t/device_mib_s"), s.device_mib_s, e.device_mib_s, false);
        }
    }
    let (mut tail, mut tput) = (Vec::new(), Vec::new());
    for mix in ["A", "B", "C", "F"] {
        let f = |m: &str| r.kv.iter().find(|x| x.mode == m && x.mix == mix);
        if let (Some(s), Some(e)) = (f("static"), f("elastic")) {
            push(format!("kv/{mix}/p99_9_us"), s.p99_9_us, e.p99_9_us, true);
            push(format!("kv/{mix}/kops_s"), s.kops_s, e.kops_s, false);
            tail.push(improvement(s.p99_9_us, e.p99_9_us, true));
            tput.push(improvement(s.kops_s, e.kops_s, false));
        }
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let kv_mean = (tail.len() == 4)
        .then(|| KvMean { p99_9_improvement_pct: mean(&tail), throughput_gain_pct: mean(&tput) });
    (out, kv_mean)
}
