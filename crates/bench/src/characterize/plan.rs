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
    /// Reads in flight: each depth is a series of its own (QD 1 shows
    /// what one read waits for behind the writes, higher depths how much
    /// of the dies and channels the writes leave to reads).
    pub rw_read_qds: Vec<usize>,
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
                rw_read_qds: vec![4],
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
                rw_read_qds: vec![1, 32, 256],
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
                rw_read_qds: vec![1, 32, 256],
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

/// A custom grid: the points of a suite that a user sets instead of the
/// suite's own (`zns characterize --grid FILE.toml`, or the same TOML on
/// the command line). Every field is optional; one left out keeps the
/// base suite's value. Sizes are in KiB, times in milliseconds of device
/// time.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Grid {
    /// `qd1`: request sizes (KiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qd1_sizes_kib: Option<Vec<usize>>,
    /// `qd1`: writes, appends and reads per size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qd1_ops: Option<u64>,
    /// `intra_zone`: append sizes (KiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intra_sizes_kib: Option<Vec<usize>>,
    /// `intra_zone`: queue depths.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intra_qds: Option<Vec<usize>>,
    /// `intra_zone`: appends per point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intra_ops: Option<u64>,
    /// `inter_zone`: request sizes (KiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inter_sizes_kib: Option<Vec<usize>>,
    /// `inter_zone`: commands per point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inter_ops: Option<u64>,
    /// `reads`: random read sizes (KiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_sizes_kib: Option<Vec<usize>>,
    /// `reads`: queue depths of random reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_qds: Option<Vec<usize>>,
    /// `reads`: random reads per point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_ops: Option<u64>,
    /// `reads`: sequential read size (KiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq_read_kib: Option<usize>,
    /// `reads`: queue depths of sequential reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq_read_qds: Option<Vec<usize>>,
    /// `read_under_write`: background write rates as fractions of the
    /// write bandwidth (0 to 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_rates: Option<Vec<f64>>,
    /// `read_under_write`: device time each rate runs (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_rate_ms: Option<u64>,
    /// `read_under_write`: reads in flight (one depth).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_under_write_qd: Option<usize>,
    /// `read_under_write`: reads in flight, a series per depth.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_under_write_qds: Option<Vec<usize>>,
    /// `open` and `zone_mgmt`: samples of each variant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples: Option<u32>,
    /// Most device time one point may take (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub point_cap_ms: Option<u64>,
}

/// The deepest queue a grid may ask for.
pub const GRID_MAX_QD: usize = 1024;

impl Grid {
    /// Parses and checks a grid written in TOML; the error names the
    /// field and what is wrong with it.
    pub fn from_toml(text: &str) -> Result<Grid, String> {
        let g: Grid = toml::from_str(text).map_err(|e| e.message().to_string())?;
        g.check()?;
        Ok(g)
    }

    fn check(&self) -> Result<(), String> {
        let sizes = [
            ("qd1_sizes_kib", &self.qd1_sizes_kib),
            ("intra_sizes_kib", &self.intra_sizes_kib),
            ("inter_sizes_kib", &self.inter_sizes_kib),
            ("read_sizes_kib", &self.read_sizes_kib),
        ];
        for (name, v) in sizes {
            if let Some(v) = v {
                list(name, v, |&s| (1..=65536).contains(&s), "sizes from 1 to 65536 KiB")?;
            }
        }
        if self.seq_read_kib.is_some_and(|s| !(1..=65536).contains(&s)) {
            return Err("seq_read_kib: a size from 1 to 65536 KiB".into());
        }
        let qds = [
            ("intra_qds", &self.intra_qds),
            ("read_qds", &self.read_qds),
            ("seq_read_qds", &self.seq_read_qds),
            ("read_under_write_qds", &self.read_under_write_qds),
        ];
        for (name, v) in qds {
            if let Some(v) = v {
                list(name, v, |&d| (1..=GRID_MAX_QD).contains(&d), "queue depths from 1 to 1024")?;
            }
        }
        if self.read_under_write_qd.is_some_and(|d| !(1..=GRID_MAX_QD).contains(&d)) {
            return Err("read_under_write_qd: a queue depth from 1 to 1024".into());
        }
        if let Some(v) = &self.write_rates {
            list("write_rates", v, |r| (0.0..=1.0).contains(r), "fractions from 0 to 1")?;
        }
        let counts = [
            ("qd1_ops", self.qd1_ops),
            ("intra_ops", self.intra_ops),
            ("inter_ops", self.inter_ops),
            ("read_ops", self.read_ops),
            ("write_rate_ms", self.write_rate_ms),
            ("samples", self.samples.map(u64::from)),
            ("point_cap_ms", self.point_cap_ms),
        ];
        for (name, v) in counts {
            if v == Some(0) {
                return Err(format!("{name}: must be at least 1"));
            }
        }
        Ok(())
    }
}

/// Checks a non-empty list whose every value passes `ok`.
fn list<T: std::fmt::Debug>(
    name: &str,
    v: &[T],
    ok: impl Fn(&T) -> bool,
    what: &str,
) -> Result<(), String> {
    if v.is_empty() {
        return Err(format!("{name}: an empty list (leave the field out to keep the suite's)"));
    }
    match v.iter().find(|x| !ok(x)) {
        Some(bad) => Err(format!("{name}: {bad:?} is out of range ({what})")),
        None => Ok(()),
    }
}

impl Plan {
    /// The plan of `suite` with the points `grid` sets.
    pub fn with_grid(suite: Suite, grid: Option<&Grid>) -> Plan {
        let mut p = Plan::of(suite);
        let Some(g) = grid else { return p };
        let kib = |v: &Vec<usize>| v.iter().map(|s| s * KIB).collect::<Vec<_>>();
        if let Some(v) = &g.qd1_sizes_kib {
            p.qd1_sizes = kib(v);
        }
        if let Some(n) = g.qd1_ops {
            (p.qd1_ops, p.qd1_read_ops) = (n, n);
        }
        if let Some(v) = &g.intra_sizes_kib {
            p.intra_sizes = kib(v);
        }
        if let Some(v) = &g.intra_qds {
            p.intra_qds = v.clone();
        }
        if let Some(n) = g.intra_ops {
            p.intra_ops = n;
        }
        if let Some(v) = &g.inter_sizes_kib {
            p.inter_sizes = kib(v);
        }
        if let Some(n) = g.inter_ops {
            p.inter_ops = n;
        }
        if let Some(v) = &g.read_sizes_kib {
            p.rand_read_sizes = kib(v);
        }
        if let Some(v) = &g.read_qds {
            p.read_qds = v.clone();
        }
        if let Some(n) = g.read_ops {
            (p.read_ops, p.seq_read_ops) = (n, n);
        }
        if let Some(s) = g.seq_read_kib {
            p.seq_read_size = s * KIB;
        }
        if let Some(v) = &g.seq_read_qds {
            p.seq_read_qds = v.clone();
        }
        if let Some(v) = &g.write_rates {
            p.rw_fractions = v.clone();
        }
        if let Some(ms) = g.write_rate_ms {
            p.rw_window_ns = ms * MS;
        }
        if let Some(d) = g.read_under_write_qd {
            p.rw_read_qds = vec![d];
        }
        if let Some(v) = &g.read_under_write_qds {
            p.rw_read_qds = v.clone();
        }
        if let Some(n) = g.samples {
            (p.open_samples, p.mgmt_samples, p.mgmt_samples_cheap) = (n, n, n);
            p.mgmt_samples_full = n;
        }
        if let Some(ms) = g.point_cap_ms {
            p.point_cap_ns = ms * MS;
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grid_sets_only_what_it_names() {
        let g = Grid::from_toml("read_qds = [1, 32, 1024]\nqd1_sizes_kib = [4, 12]\nsamples = 3")
            .unwrap();
        let p = Plan::with_grid(Suite::Quick, Some(&g));
        let q = Plan::of(Suite::Quick);
        assert_eq!(p.read_qds, [1, 32, 1024]);
        assert_eq!(p.qd1_sizes, [4096, 12288]);
        assert_eq!((p.open_samples, p.mgmt_samples_full), (3, 3));
        assert_eq!((p.intra_qds.clone(), p.read_ops), (q.intra_qds, q.read_ops));
    }

    #[test]
    fn bad_grids_are_refused_naming_the_field() {
        for (text, want) in [
            ("read_qds = [0]", "read_qds: 0 is out of range"),
            ("read_qds = [2048]", "read_qds: 2048"),
            ("qd1_sizes_kib = []", "qd1_sizes_kib: an empty list"),
            ("write_rates = [1.5]", "write_rates: 1.5"),
            ("read_ops = 0", "read_ops: must be at least 1"),
            ("seq_read_kib = 0", "seq_read_kib"),
            ("depth = 4", "unknown field `depth`"),
        ] {
            let e = Grid::from_toml(text).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
    }
}
