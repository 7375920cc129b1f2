//! `results.json`: everything a characterization run measured, in a
//! versioned schema (documented field by field in docs/results-json.md).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::stats::{LatencyHistogram, LatencyStats};

/// Version of the `results.json` schema this build writes. Version 2 moved
/// everything that depends on the host (start time, wall times, the
/// engine's overhead) into [`Host`]; version 1 files are read by moving
/// those fields there ([`Results::from_json`]).
pub const SCHEMA_VERSION: u32 = 2;

/// One characterization run.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Results {
    /// [`SCHEMA_VERSION`] of the writer.
    pub schema_version: u32,
    /// The program that wrote the file.
    pub tool: Tool,
    /// Suite run: `smoke`, `quick` or `full`.
    pub suite: String,
    /// Seed of every random choice (read offsets).
    pub seed: u64,
    /// Experiments asked for with `--only` (empty: all).
    #[serde(default)]
    pub only: Vec<String>,
    /// The custom grid the run used over its suite's points, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grid: Option<super::plan::Grid>,
    /// The device measured.
    pub device: DeviceDescription,
    /// Device time the whole run took.
    pub duration: Duration,
    /// Each experiment run, in order.
    pub experiments: Vec<ExperimentRecord>,
    /// Each measured configuration.
    pub points: Vec<Point>,
    /// Derived figures (ceilings) keyed by figure name.
    pub summary: BTreeMap<String, f64>,
    /// Measured against reference figures, when the device's profile has
    /// them.
    pub reference: Option<ReferenceTable>,
    /// What depends on the host rather than the device: on a device with a
    /// virtual clock, two runs of the same suite and seed give files equal
    /// in everything but this.
    pub host: Host,
    /// Die utilization and zone states over the run, from the trace events
    /// of an emulator with a timing model in this process (absent
    /// otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activity: Option<super::activity::Activity>,
}

/// The part of a run that depends on the host: when it ran, how long it
/// took on the wall clock, and the engine's own cost per I/O.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Host {
    /// Start of the run, seconds since the Unix epoch (wall clock).
    pub started_unix_s: u64,
    /// Wall-clock time of the whole run, ns.
    pub wall_ns: u64,
    /// Wall-clock time of each experiment, ns, by experiment name.
    #[serde(default)]
    pub experiments_wall_ns: BTreeMap<String, u64>,
    /// The characterization engine's own host time per I/O (null when it
    /// could not be measured).
    #[serde(default)]
    pub overhead: Option<Overhead>,
    /// Completions the emulator posted after their due time during the
    /// run (absent when the device is not an emulator this process can
    /// read): on a real clock, how far the host kept up with the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub late_completions: Option<LateCompletions>,
}

/// Completions posted after their due time (see
/// `zns_emulator::clock::Lateness`), in undilated device time.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LateCompletions {
    /// Completions posted by the timing model.
    pub completions: u64,
    /// Of those, posted more than `late_after_us` after their due time.
    pub late: u64,
    /// The threshold, µs.
    pub late_after_us: f64,
    /// 99th percentile of the delay past the due time, µs (within a
    /// factor of 2: a histogram bucket's upper edge).
    pub p99_us: f64,
    /// Longest delay, µs.
    pub max_us: f64,
    /// Mean delay over every completion, µs.
    pub mean_us: f64,
}

impl LateCompletions {
    /// The summary of a reading.
    pub fn of(s: &zns_emulator::clock::LatenessStats) -> LateCompletions {
        LateCompletions {
            completions: s.delivered,
            late: s.late,
            late_after_us: zns_emulator::clock::LATE_AFTER_NS as f64 / 1e3,
            p99_us: s.quantile_ns(0.99) as f64 / 1e3,
            max_us: s.max_ns as f64 / 1e3,
            mean_us: s.mean_ns() / 1e3,
        }
    }

    /// Late completions as a fraction of all (0 with none).
    pub fn late_fraction(&self) -> f64 {
        if self.completions == 0 {
            0.0
        } else {
            self.late as f64 / self.completions as f64
        }
    }
}

/// The characterization engine's own cost per I/O, in host (wall) time,
/// and what it amounts to against this run's QD 1 write latency (see
/// docs/characterize.md, "The tool's own overhead").
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Overhead {
    /// How it was measured: `differential` (the engine against a bare
    /// submit / ring / poll loop on the same device).
    pub method: String,
    /// The device both loops ran on (an emulator whose commands cost no
    /// device time).
    pub device: String,
    /// QD 1 4 KiB writes per pass.
    pub ios: u64,
    /// Passes of each loop; the fastest of each counts.
    pub passes: u32,
    /// Wall ns per write through the engine.
    pub engine_ns_per_io: f64,
    /// Wall ns per write of the bare loop.
    pub bare_ns_per_io: f64,
    /// The engine's own cost: `engine_ns_per_io - bare_ns_per_io` (at
    /// least 0).
    pub ns_per_io: f64,
    /// This run's `qd1/write/4KiB:mean_us`, if it ran that point.
    pub qd1_write_mean_us: Option<f64>,
    /// `ns_per_io` over that latency.
    pub fraction_of_qd1_write: Option<f64>,
    /// Device time per QD 1 4 KiB write of this run that no latency
    /// covers (from one completion's time stamp to the next submission),
    /// ns.
    pub qd1_write_gap_ns: Option<f64>,
    /// `yes` when device time is a real clock, so the engine's cost falls
    /// into measured time; `no` on a virtual clock (host time costs no
    /// device time).
    pub applies: String,
}

/// Name and version of the writer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Tool {
    /// `zns-bench`.
    pub name: String,
    /// Its version.
    pub version: String,
}

/// What was measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeviceDescription {
    /// The URI the device was opened with.
    pub uri: String,
    /// Device time: `virtual` or `real`.
    pub clock: String,
    /// The emulator profile, for emulated devices.
    pub profile: Option<String>,
    /// The time dilation factor the device ran with: every device time
    /// was divided by it, so the figures are the modelled drive's (1: not
    /// dilated).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub dilation: f64,
    /// Geometry, limits and capabilities (the device layer's `DeviceInfo`).
    pub info: serde_json::Value,
}

/// Device time a run or an experiment took (its wall-clock time is in
/// [`Host`]).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Duration {
    /// Device time, ns.
    pub device_ns: u64,
}

/// One experiment of the run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExperimentRecord {
    /// Identifier (`qd1`, `intra_zone`, ...).
    pub name: String,
    /// One line for humans.
    pub title: String,
    /// Time it took (preparation and clean-up included).
    pub duration: Duration,
    /// Points it produced.
    pub points: usize,
    /// Parts left out, and why (a device without Zone Append, limits too
    /// small, ...).
    #[serde(default)]
    pub skipped: Vec<String>,
    /// Why it stopped early, if it did; its points up to then are kept.
    pub error: Option<String>,
}

/// One measured configuration: a stream of commands of one kind, or one
/// kind of command sampled one at a time.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Point {
    /// Unique name, e.g. `intra_zone/append/4KiB/qd=8`.
    pub id: String,
    /// The experiment that measured it.
    pub experiment: String,
    /// Command measured: `read`, `write`, `append`, `open`, `close`,
    /// `finish`, `reset`.
    pub op: String,
    /// Access pattern or variant (`random`, `sequential`, `implicit`,
    /// `explicit`, `after_finish`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// Condition the point ran under (`baseline`, `under_resets`, `idle`,
    /// `under_read`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition: Option<String>,
    /// Bytes per command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_bytes: Option<u64>,
    /// Commands kept in flight (total over all zones).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_depth: Option<u32>,
    /// Zones the commands went to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zones: Option<u32>,
    /// Zone occupancy before a zone management command: written blocks
    /// over zone capacity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub occupancy: Option<f64>,
    /// The occupancy's name (`empty`, `1LBA`, `6.25%`, ..., `full`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub occupancy_label: Option<String>,
    /// Background write rate asked for, as a fraction of the device's
    /// write bandwidth (1 = unthrottled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_fraction: Option<f64>,
    /// Background write rate asked for, MiB/s (absent when unthrottled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_mib_s: Option<f64>,
    /// Commands completed and measured.
    pub ops: u64,
    /// Bytes those commands moved.
    pub bytes: u64,
    /// Device time from the first submission to the last completion, ns;
    /// for commands sampled one at a time, the sum of their latencies.
    pub elapsed_ns: u64,
    /// Commands per second of device time.
    pub iops: f64,
    /// MiB per second of device time.
    pub mib_s: f64,
    /// Latency statistics, µs.
    pub latency: LatencyStats,
    /// The latency histogram.
    pub histogram: HistogramData,
    /// Completions the emulator posted late while this point's commands
    /// ran (for points timed one command at a time, those commands' only;
    /// absent when they are not counted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub late: Option<LateCompletions>,
}

fn one() -> f64 {
    1.0
}

fn is_one(x: &f64) -> bool {
    *x == 1.0
}

impl Point {
    /// True for zone management commands, whose throughput means little.
    pub fn is_zone_management(&self) -> bool {
        matches!(self.op.as_str(), "open" | "close" | "finish" | "reset")
    }

    /// The histogram, decoded from its serialized form.
    pub fn decode_histogram(&self) -> Option<LatencyHistogram> {
        LatencyHistogram::from_base64(&self.histogram.hdr)
    }

    /// Every figure of this point: `(stat, value)`; a figure's full name is
    /// `<id>:<stat>`.
    pub fn figures(&self) -> Vec<(&'static str, f64)> {
        let l = &self.latency;
        let mut v = vec![
            ("mean_us", l.mean_us),
            ("p50_us", l.p50_us),
            ("p95_us", l.p95_us),
            ("p99_us", l.p99_us),
            ("p99_9_us", l.p99_9_us),
            ("p99_99_us", l.p99_99_us),
        ];
        if !self.is_zone_management() {
            v.push(("kiops", self.iops / 1000.0));
            if self.bytes > 0 {
                v.push(("mib_s", self.mib_s));
            }
        }
        v
    }
}

/// A histogram in `results.json`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct HistogramData {
    /// `[percentile, ns]` pairs (0, 1, 5, 10, 25, 50, 75, 90, 95, 99, 99.9,
    /// 99.99, 99.999, 100).
    pub percentiles: Vec<[f64; 2]>,
    /// HdrHistogram V2 serialization with deflate, base64 (values in ns).
    pub hdr: String,
}

impl HistogramData {
    /// The JSON form of `h`.
    pub fn of(h: &LatencyHistogram) -> HistogramData {
        HistogramData { percentiles: h.ladder(), hdr: h.to_base64() }
    }
}

/// Measured against reference figures: a real device's built into an
/// emulator profile, or another run's (`zns characterize --reference`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReferenceTable {
    /// Where the figures come from: [`REFERENCE_PROFILE`] or
    /// [`REFERENCE_RUN`] (`profile` in files written before it was
    /// recorded).
    #[serde(default = "reference_profile_kind")]
    pub kind: String,
    /// Profile the reference belongs to; for another run, that run's
    /// emulator profile (empty when its device was not emulated).
    pub profile: String,
    /// The device the reference figures were measured on.
    pub device: String,
    /// Where they come from; for another run, its file name and what ran.
    pub source: String,
    /// For another run, the name of its file without the directory.
    #[serde(default)]
    pub file: Option<String>,
    /// The LBA format (block size in bytes) of the figures: the measured
    /// device's block size (4096 in files written before it was recorded).
    #[serde(default = "super::reference::default_lba_bytes")]
    pub lba_bytes: u64,
    /// One row per reference figure of that LBA format.
    pub rows: Vec<ReferenceRow>,
    /// For another run: its value of every figure of the points both runs
    /// measured, which the report draws over the measured curves; empty
    /// for a profile's figures (the rows are all there is).
    #[serde(default)]
    pub curves: Vec<ReferenceValue>,
}

/// [`ReferenceTable::kind`] of a profile's built-in figures.
pub const REFERENCE_PROFILE: &str = "profile";

/// [`ReferenceTable::kind`] of another run given as the reference.
pub const REFERENCE_RUN: &str = "run";

fn reference_profile_kind() -> String {
    REFERENCE_PROFILE.to_string()
}

impl ReferenceTable {
    /// A short name for legends and summaries: the profile, or the other
    /// run's file and device.
    pub fn short_name(&self) -> String {
        match &self.file {
            Some(file) if self.kind == REFERENCE_RUN => format!("{file} ({})", self.device),
            _ => self.profile.clone(),
        }
    }
}

/// One reference value of a curve.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReferenceValue {
    /// Figure name (`<point id>:<stat>`).
    pub figure: String,
    /// The reference's value.
    pub value: f64,
}

/// One reference figure and what this run measured for it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReferenceRow {
    /// Figure name (`<point id>:<stat>` or a summary name).
    pub figure: String,
    /// What the figure is.
    pub what: String,
    /// The reference value (unit in the figure name).
    pub reference: f64,
    /// This run's value, if it measured the figure.
    pub measured: Option<f64>,
    /// measured / reference.
    pub ratio: Option<f64>,
}

impl Results {
    /// Every figure of the run by name, in the order of the points, then
    /// the summary.
    pub fn figures(&self) -> Vec<(String, f64)> {
        let mut out = Vec::new();
        for p in &self.points {
            for (stat, v) in p.figures() {
                out.push((format!("{}:{stat}", p.id), v));
            }
        }
        for (k, v) in &self.summary {
            out.push((k.clone(), *v));
        }
        out
    }

    /// One figure by name.
    pub fn figure(&self, name: &str) -> Option<f64> {
        if let Some(v) = self.summary.get(name) {
            return Some(*v);
        }
        let (id, stat) = name.rsplit_once(':')?;
        let p = self.points.iter().find(|p| p.id == id)?;
        p.figures().into_iter().find(|(s, _)| *s == stat).map(|(_, v)| v)
    }

    /// The point named `id`.
    pub fn point(&self, id: &str) -> Option<&Point> {
        self.points.iter().find(|p| p.id == id)
    }

    /// Parses a `results.json`, checking its schema version; a version 1
    /// file is read with its host fields moved into [`Host`].
    pub fn from_json(text: &str) -> Result<Results, String> {
        let mut v: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        match v.get("schema_version").and_then(|s| s.as_u64()) {
            Some(n) if n == u64::from(SCHEMA_VERSION) => {}
            Some(1) => upgrade_v1(&mut v)?,
            Some(n) => {
                return Err(format!(
                    "schema_version {n}; this build reads versions 1 and {SCHEMA_VERSION}"
                ))
            }
            None => return Err("no schema_version: not a characterization result".into()),
        }
        serde_json::from_value(v).map_err(|e| e.to_string())
    }
}

/// Moves a version 1 file's host fields (`started_unix_s`, the wall times
/// in `duration` and each experiment's, `overhead`) into `host`.
fn upgrade_v1(v: &mut serde_json::Value) -> Result<(), String> {
    use serde_json::{json, Value};
    let top = v.as_object_mut().ok_or("results.json is not an object")?;
    let take_wall = |d: Option<&mut Value>| {
        d.and_then(|d| d.as_object_mut()).and_then(|d| d.remove("wall_ns")).unwrap_or(json!(0))
    };
    let mut experiments_wall = serde_json::Map::new();
    if let Some(Value::Array(es)) = top.get_mut("experiments") {
        for e in es {
            let name = e.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
            experiments_wall.insert(name, take_wall(e.get_mut("duration")));
        }
    }
    let host = json!({
        "started_unix_s": top.remove("started_unix_s").unwrap_or(json!(0)),
        "wall_ns": take_wall(top.get_mut("duration")),
        "experiments_wall_ns": experiments_wall,
        "overhead": top.remove("overhead").unwrap_or(Value::Null),
    });
    top.insert("host".into(), host);
    top.insert("schema_version".into(), json!(SCHEMA_VERSION));
    Ok(())
}

/// Small runs for the tests of the modules that read results.
#[cfg(test)]
pub(crate) mod test_runs {
    use std::collections::BTreeMap;

    use super::super::stats::LatencyHistogram;
    use super::*;

    /// A point of ten commands that each took `mean_ns`, 4 KiB each, at
    /// `iops`.
    pub(crate) fn point(id: &str, op: &str, mean_ns: u64, iops: f64) -> Point {
        let mut h = LatencyHistogram::new();
        for _ in 0..10 {
            h.record(mean_ns);
        }
        Point {
            id: id.into(),
            experiment: "qd1".into(),
            op: op.into(),
            pattern: None,
            condition: None,
            block_bytes: Some(4096),
            queue_depth: Some(1),
            zones: Some(1),
            occupancy: None,
            occupancy_label: None,
            rate_fraction: None,
            target_mib_s: None,
            ops: 10,
            bytes: 40960,
            elapsed_ns: 10 * mean_ns,
            iops,
            mib_s: iops * 4096.0 / 1048576.0,
            latency: h.stats(),
            histogram: HistogramData::of(&h),
            late: None,
        }
    }

    /// A smoke run on `emu:tiny` of `points`, with a write ceiling.
    pub(crate) fn run(points: Vec<Point>) -> Results {
        let summary: BTreeMap<String, f64> =
            [("ceiling/write_mib_s".to_string(), 100.0)].into_iter().collect();
        Results {
            schema_version: SCHEMA_VERSION,
            tool: Tool { name: "zns-bench".into(), version: "0".into() },
            suite: "smoke".into(),
            seed: 1,
            only: vec![],
            grid: None,
            device: DeviceDescription {
                uri: "emu:tiny".into(),
                clock: "virtual".into(),
                profile: Some("tiny".into()),
                dilation: 1.0,
                info: serde_json::json!({ "block_size": 4096 }),
            },
            duration: Duration::default(),
            experiments: vec![],
            points,
            summary,
            reference: None,
            host: Default::default(),
            activity: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_1_files_read_with_their_host_fields_in_host() {
        let v1 = serde_json::json!({
            "schema_version": 1,
            "tool": { "name": "zns-bench", "version": "0" },
            "suite": "quick",
            "seed": 1,
            "started_unix_s": 1_700_000_000u64,
            "device": { "uri": "emu:zn540", "clock": "virtual", "profile": "zn540", "info": {} },
            "duration": { "device_ns": 5, "wall_ns": 7 },
            "experiments": [
                { "name": "qd1", "title": "t", "duration": { "device_ns": 2, "wall_ns": 3 },
                  "points": 0, "skipped": [], "error": null }
            ],
            "points": [],
            "summary": {},
            "reference": null,
            "overhead": null
        });
        let r = Results::from_json(&v1.to_string()).unwrap();
        assert_eq!(r.schema_version, SCHEMA_VERSION);
        assert_eq!((r.host.started_unix_s, r.host.wall_ns), (1_700_000_000, 7));
        assert_eq!(r.host.experiments_wall_ns.get("qd1"), Some(&3));
        assert_eq!((r.duration.device_ns, r.experiments[0].duration.device_ns), (5, 2));
        assert!(r.host.overhead.is_none());
        // Written back, it is a version 2 file without the old fields.
        let text = serde_json::to_string(&r).unwrap();
        assert!(!text.contains("started_unix_s\":1700000000,\"device"), "{text}");
        assert!(!text.contains("wall_ns\":3"), "{text}");
        assert!(Results::from_json(&text).is_ok());
    }

    #[test]
    fn other_versions_are_refused_by_name() {
        let e = Results::from_json(r#"{"schema_version": 3}"#).unwrap_err();
        assert!(e.contains("schema_version 3") && e.contains("1 and 2"), "{e}");
    }
}
