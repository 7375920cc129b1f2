//! The comparison's charts (SVG), its HTML report and its output files.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::super::html::{esc, Page, Section, Table};
use super::super::plot::{self, Axis, Bars, Chart, Scale, Series};
use super::super::stats::{LatencyHistogram, LatencyStats};
use super::super::CharacterizeError;
use super::results::{CompareResults, SideResults};

/// Legend names of the two sides.
const NAMES: [&str; 2] = ["ZNS + zns-ftl", "conventional"];

/// Points of a CCDF curve.
const CCDF_POINTS: usize = 200;

/// Bins of the measured run the zoomed throughput chart shows.
pub const ZOOM_BINS: usize = 120;

/// The comparison's charts, each an SVG document.
///
/// Thread safety: plain data.
#[derive(Debug, Clone)]
pub struct Charts {
    /// MiB/s per bin of device time from the first random write on.
    pub throughput: String,
    /// The same over the first [`ZOOM_BINS`] bins of the measured run.
    pub throughput_zoom: String,
    /// Write amplification from the first random write to each bin's end.
    pub waf_over_time: String,
    /// Write amplification of the whole run, data and with metadata.
    pub waf: String,
    /// CCDF of 4 KiB read latency, alone and beside the writer.
    pub read_latency: String,
    /// Namespace and usable capacity per raw capacity.
    pub capacity: String,
}

impl Charts {
    /// `(file name, SVG)` of each chart.
    pub fn files(&self) -> [(&'static str, &str); 6] {
        [
            ("throughput.svg", &self.throughput),
            ("throughput-zoom.svg", &self.throughput_zoom),
            ("waf-over-time.svg", &self.waf_over_time),
            ("waf.svg", &self.waf),
            ("read-latency.svg", &self.read_latency),
            ("capacity.svg", &self.capacity),
        ]
    }
}

fn sides(r: &CompareResults) -> [&SideResults; 2] {
    [&r.zns, &r.conventional]
}

/// Draws every chart of `r`.
pub fn charts(r: &CompareResults) -> Charts {
    let time = |s: &SideResults, v: &[Option<f64>]| -> Vec<(f64, f64)> {
        let bin = s.sustained.bin_ns as f64 / 1e9;
        v.iter().enumerate().filter_map(|(i, y)| Some(((i as f64 + 1.0) * bin, (*y)?))).collect()
    };
    let line = |title: &str, y: &str, f: &dyn Fn(&SideResults) -> Vec<Option<f64>>| {
        let mut series: Vec<Series> = Vec::new();
        let mut top = 0.0f64;
        for (i, s) in sides(r).iter().enumerate() {
            let pts = time(s, &f(s));
            top = pts.iter().fold(top, |m, p| m.max(p.1));
            series.push(Series::new(NAMES[i], pts, i));
        }
        // Where each side's measured run begins.
        for (i, s) in sides(r).iter().enumerate() {
            let x = s.sustained.first_measured_bin as f64 * s.sustained.bin_ns as f64 / 1e9;
            let name = format!("{}: measured from here", NAMES[i]);
            series.push(Series::new(name, vec![(x, 0.0), (x, top)], i).dashed());
        }
        plot::line_chart(&Chart {
            title: title.into(),
            x: Axis::new("device time (s)", Scale::Linear),
            y: Axis::new(y, Scale::Linear),
            series,
            y_from_zero: true,
            legend_lower: false,
        })
    };
    let throughput = line("Sustained random writes", "MiB/s", &|s| {
        s.sustained.mib_s.iter().map(|&x| Some(x)).collect()
    });
    let waf_over_time = line("Write amplification since the first random write", "WAF", &|s| {
        s.sustained.waf_running.clone()
    });
    Charts {
        throughput,
        throughput_zoom: zoom(r),
        waf_over_time,
        waf: waf_bars(r),
        read_latency: read_ccdf(r),
        capacity: capacity_bars(r),
    }
}

/// Throughput of the first [`ZOOM_BINS`] bins of each side's measured
/// run, against seconds into it.
fn zoom(r: &CompareResults) -> String {
    let series = sides(r)
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let bin = s.sustained.bin_ns as f64 / 1e9;
            let first = s.sustained.first_measured_bin;
            let bins = s.sustained.mib_s.iter().skip(first).take(ZOOM_BINS);
            let pts = bins.enumerate().map(|(k, &y)| ((k as f64 + 1.0) * bin, y)).collect();
            Series::new(NAMES[i], pts, i)
        })
        .collect();
    plot::line_chart(&Chart {
        title: "Sustained random writes, start of the measured run".into(),
        x: Axis::new("device time into the measured run (s)", Scale::Linear),
        y: Axis::new("MiB/s", Scale::Linear),
        series,
        y_from_zero: true,
        legend_lower: false,
    })
}

fn waf_bars(r: &CompareResults) -> String {
    let series = sides(r)
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let c = s.sustained.counters;
            (format!("{} ({})", NAMES[i], s.gc), vec![c.map(|c| c.waf), c.map(|c| c.waf_total)])
        })
        .collect();
    plot::bar_chart(&Bars {
        title: "Write amplification, sustained run".into(),
        y_label: "blocks written per host block".into(),
        categories: vec!["data".into(), "data + metadata".into()],
        series,
    })
}

fn read_ccdf(r: &CompareResults) -> String {
    let mut series = Vec::new();
    for (i, s) in sides(r).iter().enumerate() {
        let curves = [
            (&s.reads.under_writes_histogram, "among writes", false),
            (&s.reads.idle_histogram, "alone", true),
        ];
        for (text, what, dashed) in curves {
            let Some(h) = LatencyHistogram::from_base64(text) else { continue };
            let pts = h.ccdf(CCDF_POINTS).into_iter().map(|(ns, p)| (ns / 1000.0, p)).collect();
            let line = Series::new(format!("{}, {what}", NAMES[i]), pts, i);
            series.push(if dashed { line.dashed() } else { line });
        }
    }
    plot::line_chart(&Chart {
        title: "4 KiB random reads, QD 1".into(),
        x: Axis::new("latency (us)", Scale::Log10),
        y: Axis::new("fraction slower", Scale::Log10),
        series,
        y_from_zero: false,
        legend_lower: true,
    })
}

fn capacity_bars(r: &CompareResults) -> String {
    let series = sides(r)
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let c = &s.capacity;
            let per = |b: u64| c.raw_blocks.map(|raw| b as f64 / raw.max(1) as f64);
            (NAMES[i].to_string(), vec![per(c.namespace_blocks), c.usable_per_raw])
        })
        .collect();
    plot::bar_chart(&Bars {
        title: "Capacity per raw capacity".into(),
        y_label: "fraction of raw".into(),
        categories: vec!["namespace".into(), "usable by random writes".into()],
        series,
    })
}

/// The report page: what ran, the figures and every chart.
pub fn html(r: &CompareResults) -> String {
    page(r, &charts(r))
}

fn page(r: &CompareResults, c: &Charts) -> String {
    let mut page = Page::new("ZNS against conventional", "ZNS against conventional");
    setup_part(&mut page, r);
    page.push(&figures_table(r));
    let cfg = &r.config;
    let sections = [
        Section {
            title: "Sustained random writes".into(),
            text: format!(
                "{} KiB random writes at aligned offsets over each side's whole capacity after a \
                 sequential fill: {} capacities of preconditioning, then {} s measured (from the \
                 dashed line on); MiB/s per {} s bin of device time from the first random write \
                 and over the start of the measured run, and the write amplification of whoever \
                 collects garbage since the first random write.",
                cfg.request_bytes / 1024,
                cfg.precondition_capacities,
                cfg.sustained_s,
                cfg.bin_s
            ),
            charts: vec![
                c.throughput.clone(),
                c.throughput_zoom.clone(),
                c.waf_over_time.clone(),
                c.waf.clone(),
            ],
        },
        Section {
            title: "Reads among writes".into(),
            text: format!(
                "4 KiB random reads at queue depth 1: {} alone on the settled device (dashed), \
                 then for {} s of device time {} after each random write as above, on the same \
                 host thread (solid): the device programs what it buffered and collects garbage \
                 meanwhile.",
                cfg.idle_reads, cfg.read_s, cfg.reads_per_write
            ),
            charts: vec![c.read_latency.clone()],
        },
        Section {
            title: "Capacity".into(),
            text: "Raw: the zones' capacities (ZNS), the flash the firmware manages \
                   (conventional). Usable: the host FTL's exposed capacity, the conventional \
                   namespace."
                .into(),
            charts: vec![c.capacity.clone()],
        },
    ];
    for s in &sections {
        page.section(s);
    }
    page.finish()
}

/// What ran on each side, and the run's settings.
fn setup_part(page: &mut Page, r: &CompareResults) {
    let mut t = Table::new(
        "",
        &["", "device", "profile", "clock", "garbage collection", "device s", "wall s"],
    );
    for (i, s) in sides(r).iter().enumerate() {
        let dev_s = (s.fill.device_ns
            + s.precondition.device_ns
            + s.sustained.phase.device_ns
            + s.reads.writes.device_ns) as f64
            / 1e9;
        let wall_s = (s.fill.wall_ns
            + s.precondition.wall_ns
            + s.sustained.phase.wall_ns
            + s.reads.writes.wall_ns) as f64
            / 1e9;
        t.row(&format!(
            "<th>{}</th><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{dev_s:.1}</td><td>{wall_s:.1}</td>",
            NAMES[i],
            esc(&s.device.uri),
            esc(s.device.profile.as_deref().unwrap_or("-")),
            esc(&s.device.clock),
            esc(&s.gc)
        ));
    }
    page.push(&t.finish());
    page.note(&format!(
        "Host FTL over-provisioning {:.1} %, seed {}. Every throughput and latency is in device \
         time ({} clock); wall time is the host's.",
        r.config.ftl_op * 100.0,
        r.config.seed,
        esc(&r.zns.device.clock)
    ));
}

/// Rows of the figures table: `(figure, value per side)`.
fn figure_rows(r: &CompareResults) -> Vec<(&'static str, [Option<f64>; 2])> {
    let f = |g: &dyn Fn(&SideResults) -> Option<f64>| [g(&r.zns), g(&r.conventional)];
    let lat = |g: fn(&LatencyStats) -> f64, busy: bool| {
        f(&move |s: &SideResults| {
            let l = if busy { &s.reads.under_writes } else { &s.reads.idle };
            (l.count > 0).then(|| g(l))
        })
    };
    vec![
        ("fill MiB/s", f(&|s| Some(s.fill.mib_s))),
        ("sustained MiB/s, mean of bins", f(&|s| Some(s.sustained.mean_mib_s))),
        ("sustained MiB/s, median bin", f(&|s| Some(s.sustained.median_mib_s))),
        ("sustained MiB/s, 5th-percentile bin", f(&|s| Some(s.sustained.p5_mib_s))),
        ("sustained MiB/s, slowest bin", f(&|s| Some(s.sustained.min_mib_s))),
        ("bins below half the mean", f(&|s| Some(s.sustained.dip_bins as f64))),
        ("WAF (data)", f(&|s| s.sustained.counters.map(|c| c.waf))),
        ("WAF (data + metadata)", f(&|s| s.sustained.counters.map(|c| c.waf_total))),
        ("read p50 us, alone", lat(|l| l.p50_us, false)),
        ("read p99 us, alone", lat(|l| l.p99_us, false)),
        ("read p99.9 us, alone", lat(|l| l.p99_9_us, false)),
        ("read p50 us, among writes", lat(|l| l.p50_us, true)),
        ("read p99 us, among writes", lat(|l| l.p99_us, true)),
        ("read p99.9 us, among writes", lat(|l| l.p99_9_us, true)),
        ("write MiB/s among the reads", f(&|s| Some(s.reads.writes.mib_s))),
        ("usable / raw", f(&|s| s.capacity.usable_per_raw)),
    ]
}

/// The figures of both sides.
fn figures_table(r: &CompareResults) -> String {
    let mut t = Table::new("", &["figure", NAMES[0], NAMES[1]]);
    for (name, v) in figure_rows(r) {
        let cell = |x: Option<f64>| x.map_or_else(|| "-".to_string(), |x| format!("{x:.3}"));
        t.row(&format!("<td>{name}</td><td>{}</td><td>{}</td>", cell(v[0]), cell(v[1])));
    }
    t.finish()
}

/// The figures as text: one line per figure, both sides.
pub fn to_text(r: &CompareResults) -> String {
    let mut t = format!("{:<40} {:>16} {:>16}\n", "figure", NAMES[0], NAMES[1]);
    for (name, v) in figure_rows(r) {
        let cell = |x: Option<f64>| x.map_or_else(|| "-".to_string(), |x| format!("{x:.3}"));
        let _ = writeln!(t, "{name:<40} {:>16} {:>16}", cell(v[0]), cell(v[1]));
    }
    t
}

/// Writes `results.json`, `report.html` and each chart's SVG into `dir`
/// (created if needed); returns the paths written.
pub fn write_outputs(r: &CompareResults, dir: &Path) -> Result<Vec<PathBuf>, CharacterizeError> {
    let io = |what: String| move |source| CharacterizeError::Io { what, source };
    std::fs::create_dir_all(dir).map_err(io(format!("create {}", dir.display())))?;
    let json =
        serde_json::to_string_pretty(r).map_err(|e| CharacterizeError::Internal(e.to_string()))?;
    let c = charts(r);
    let mut files =
        vec![("results.json".to_string(), json + "\n"), ("report.html".into(), page(r, &c))];
    files.extend(c.files().iter().map(|(n, svg)| (n.to_string(), svg.to_string())));
    let mut paths = Vec::new();
    for (name, text) in files {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(io(format!("write {}", path.display())))?;
        paths.push(path);
    }
    Ok(paths)
}
