//! How many points and samples each suite measures.

use super::Suite;

/// Every experiment, in the order a run does them: `(name, title)`.
pub const EXPERIMENTS: &[(&str, &str)] = &[
    ("qd1", "Queue depth 1: write and append latency by request size"),
    ("intra_zone", "Intra-zone scaling: appends to one zone by queue depth"),
    ("inter_zone", "Inter-zone scaling: writes and appends to 1 .. max-open zones"),
    ("open", "Explicit against implicit open, and the first I/O after each"),
    ("zone_mgmt", "Open, close, finish and reset against zone occupancy"),
    ("reads", "Reads: random and sequential, by queue depth and by zone count"),
    ("read_under_write", "Reads under rate-limited writes"),
    ("reset_interference", "I/O while zones are reset, and resets under I/O"),
];

const KIB: usize = 1024;

/// The parameters of one suite.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// Request sizes at queue depth 1 (bytes).
    pub qd1_sizes: Vec<usize>,
    /// Writes and appends per size.
    pub qd1_ops: u64,
    /// Data written, not measured, into the zone of each write and append
    /// point before it is measured (bytes; at most half the zone): the
    /// device reaches the steady state first (its write buffer full and
    /// draining), as the reference's runs did after their ramp time.
    pub qd1_ramp_bytes: u64,
    /// Reads per size.
    pub qd1_read_ops: u64,
    /// Append sizes of the intra-zone experiment.
    pub intra_sizes: Vec<usize>,
    /// Queue depths of the intra-zone experiment.
    pub intra_qds: Vec<usize>,
    /// Appends per point.
    pub intra_ops: u64,
    /// Request sizes of the inter-zone experiment.
    pub inter_sizes: Vec<usize>,
    /// Commands per point (over all zones).
    pub inter_ops: u64,
    /// Data written into each zone the read experiments read (bytes).
    pub dataset_bytes: u64,
    /// Random read sizes by queue depth.
    pub rand_read_sizes: Vec<usize>,
    /// Queue depths of the read experiments.
    pub read_qds: Vec<usize>,
    /// Random reads per point.
    pub read_ops: u64,
    /// Sequential read size.
    pub seq_read_size: usize,
    /// Queue depths of sequential reads.
    pub seq_read_qds: Vec<usize>,
    /// Sequential reads per point.
    pub seq_read_ops: u64,
    /// Total queue depth spread over the zones, random reads by zone count.
    pub zone_read_qd: usize,
    /// Total queue depth spread over the zones, sequential reads by zone
    /// count.
    pub zone_seq_read_qd: usize,
    /// Samples of each open variant.
    pub open_samples: u32,
    /// Samples of each occupancy and variant whose preparation costs a
    /// zone fill or a finish.
    pub mgmt_samples: u32,
    /// Samples of the cheap ones (empty; one LBA without finish).
    pub mgmt_samples_cheap: u32,
    /// Samples of the reset of a full zone (not finished): its spread (p95)
    /// is a figure of its own, and a p95 needs more than a few samples.
    pub mgmt_samples_full: u32,
    /// Device time the zone management experiment leaves the device idle
    /// after writing a zone (and its close right after the last write)
    /// and after a finish, before it measures the next command (ns): the
    /// write buffer drains and the dies finish their programs and
    /// background erases, as in the reference benchmark, which sleeps
    /// before it measures.
    pub mgmt_settle_ns: u64,
    /// Background write rates, as fractions of the write bandwidth
    /// (1 = unthrottled).
    pub rw_fractions: Vec<f64>,
    /// Device time each rate runs (ns).
    pub rw_window_ns: u64,
    /// Reads in flight.
    pub rw_read_qd: usize,
    /// Read size.
    pub rw_read_size: usize,
    /// Background write size.
    pub rw_write_size: usize,
    /// Rounds of the reset interference experiment.
    pub ri_rounds: u32,
    /// Occupancy of the zones it resets.
    pub ri_occupancy: f64,
    /// Device time of the baseline window (ns).
    pub ri_baseline_ns: u64,
    /// Reads in flight under resets.
    pub ri_read_qd: usize,
    /// Appends in flight under resets.
    pub ri_append_qd: usize,
    /// Most device time one point may take (ns): slow devices stop there.
    pub point_cap_ns: u64,
    /// Device time given to the device after data is written for the read
    /// experiments and before reads are measured (ns): the writes' data
    /// reaches the media meanwhile.
    pub settle_ns: u64,
    /// Writes per pass of the engine overhead measurement.
    pub overhead_ios: u64,
    /// Passes of each loop of the engine overhead measurement.
    pub overhead_passes: u32,
}

const MS: u64 = 1_000_000;

impl Plan {
    pub fn of(suite: Suite) -> Plan {
        match suite {
            Suite::Smoke => Plan {
                qd1_sizes: vec![4 * KIB, 16 * KIB],
                qd1_ops: 16,
                qd1_ramp_bytes: 0,
                qd1_read_ops: 16,
                intra_sizes: vec![4 * KIB],
                intra_qds: vec![1, 4],
                intra_ops: 32,
                inter_sizes: vec![4 * KIB],
                inter_ops: 32,
                dataset_bytes: 64 * 1024,
                rand_read_sizes: vec![4 * KIB],
                read_qds: vec![1, 8],
                read_ops: 32,
                seq_read_size: 16 * KIB,
                seq_read_qds: vec![1, 4],
                seq_read_ops: 16,
                zone_read_qd: 4,
                zone_seq_read_qd: 2,
                open_samples: 2,
                mgmt_samples: 1,
                mgmt_samples_cheap: 1,
                mgmt_samples_full: 1,
                mgmt_settle_ns: MS,
                rw_fractions: vec![0.0, 1.0],
                rw_window_ns: 2 * MS,
                rw_read_qd: 4,
                rw_read_size: 4 * KIB,
                rw_write_size: 16 * KIB,
                ri_rounds: 1,
                ri_occupancy: 0.25,
                ri_baseline_ns: MS,
                ri_read_qd: 4,
                ri_append_qd: 2,
                point_cap_ns: 2_000 * MS,
                settle_ns: MS,
                overhead_ios: 1_000,
                overhead_passes: 5,
            },
            Suite::Quick => Plan {
                qd1_sizes: vec![4 * KIB, 8 * KIB, 16 * KIB, 32 * KIB, 64 * KIB, 128 * KIB],
                qd1_ops: 2_000,
                qd1_ramp_bytes: 128 << 20,
                qd1_read_ops: 2_000,
                intra_sizes: vec![4 * KIB],
                intra_qds: vec![1, 2, 4, 8, 16, 32, 64],
                intra_ops: 10_000,
                inter_sizes: vec![4 * KIB],
                inter_ops: 10_000,
                dataset_bytes: 16 << 20,
                rand_read_sizes: vec![4 * KIB],
                read_qds: vec![1, 2, 4, 8, 16, 32, 64, 128, 256],
                read_ops: 10_000,
                seq_read_size: 128 * KIB,
                seq_read_qds: vec![1, 2, 4, 8, 16, 32, 64],
                seq_read_ops: 2_000,
                zone_read_qd: 16,
                zone_seq_read_qd: 8,
                open_samples: 100,
                mgmt_samples: 2,
                mgmt_samples_cheap: 10,
                mgmt_samples_full: 8,
                mgmt_settle_ns: 50 * MS,
                rw_fractions: vec![0.0, 0.25, 0.5, 0.75, 1.0],
                rw_window_ns: 100 * MS,
                rw_read_qd: 16,
                rw_read_size: 4 * KIB,
                rw_write_size: 128 * KIB,
                ri_rounds: 1,
                ri_occupancy: 0.125,
                ri_baseline_ns: 30 * MS,
                ri_read_qd: 8,
                ri_append_qd: 4,
                point_cap_ns: 10_000 * MS,
                settle_ns: 50 * MS,
                overhead_ios: 4_000,
                overhead_passes: 25,
            },
            Suite::Full => Plan {
                qd1_sizes: vec![4 * KIB, 8 * KIB, 16 * KIB, 32 * KIB, 64 * KIB, 128 * KIB],
                qd1_ops: 10_000,
                qd1_ramp_bytes: 128 << 20,
                qd1_read_ops: 10_000,
                intra_sizes: vec![4 * KIB, 8 * KIB, 16 * KIB],
                intra_qds: vec![1, 2, 4, 8, 16, 32, 64, 128],
                intra_ops: 50_000,
                inter_sizes: vec![4 * KIB, 16 * KIB],
                inter_ops: 50_000,
                dataset_bytes: 64 << 20,
                rand_read_sizes: vec![4 * KIB, 16 * KIB],
                read_qds: vec![1, 2, 4, 8, 16, 32, 64, 128, 256],
                read_ops: 50_000,
                seq_read_size: 128 * KIB,
                seq_read_qds: vec![1, 2, 4, 8, 16, 32, 64, 128],
                seq_read_ops: 10_000,
                zone_read_qd: 16,
                zone_seq_read_qd: 8,
                open_samples: 500,
                mgmt_samples: 8,
                mgmt_samples_cheap: 50,
                mgmt_samples_full: 20,
                mgmt_settle_ns: 50 * MS,
                rw_fractions: vec![0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0],
                rw_window_ns: 500 * MS,
                rw_read_qd: 16,
                rw_read_size: 4 * KIB,
                rw_write_size: 128 * KIB,
                ri_rounds: 4,
                ri_occupancy: 0.125,
                ri_baseline_ns: 30 * MS,
                ri_read_qd: 8,
                ri_append_qd: 4,
                point_cap_ns: 30_000 * MS,
                settle_ns: 100 * MS,
                overhead_ios: 5_000,
                overhead_passes: 40,
            },
        }
    }
}
