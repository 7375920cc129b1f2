//! The comparison's charts (SVG), its HTML report and its output files.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::super::html::{esc, Page, Section, Table};
use super::super::plot::{self, Axis, Bars, Chart, Scale, Series};
use super::super::stats::{LatencyHistogram, LatencyStats};
use super::super::CharacterizeError;
use super::results::{CompareResults, SideResults, Sustained};
use super::{side_device_ns, side_wall_ns};

/// Legend names of the sides, in the order of their colours in the
/// shared palette.
const NAMES: [&str; 3] = ["ZNS + zns-ftl", "conventional", "FDP"];

/// Points of a CCDF curve.
const CCDF_POINTS: usize = 200;

/// Bins of the measured run the zoomed throughput chart shows.
pub const ZOOM_BINS: usize = 120;

/// The comparison's charts, each an SVG document.
///
/// Thread safety: plain data.
#[derive(Debug, Clone)]
pub struct Charts {
    /// MiB/s per bin of device time from the first uniform random write
    /// on.
    pub throughput: String,
    /// The same over the first [`ZOOM_BINS`] bins of the measured run.
    pub throughput_zoom: String,
    /// Write amplification from the first uniform random write to each
    /// bin's end.
    pub waf_over_time: String,
    /// Write amplification of both measured runs, data and with metadata.
    pub waf: String,
    /// CCDF of 4 KiB read latency, alone and beside the writer.
    pub read_latency: String,
    /// Namespace and usable capacity per raw capacity.
    pub capacity: String,
    /// MiB/s per bin of the hot/cold workload.
    pub hot_cold_throughput: String,
    /// Write amplification since the first hot/cold random write.
    pub hot_cold_waf_over_time: String,
}

impl Charts {
    /// `(file name, SVG)` of each chart.
    pub fn files(&self) -> [(&'static str, &str); 8] {
        [
            ("throughput.svg", &self.throughput),
            ("throughput-zoom.svg", &self.throughput_zoom),
            ("waf-over-time.svg", &self.waf_over_time),
            ("waf.svg", &self.waf),
            ("read-latency.svg", &self.read_latency),
            ("capacity.svg", &self.capacity),
            ("hot-cold-throughput.svg", &self.hot_cold_throughput),
            ("hot-cold-waf-over-time.svg", &self.hot_cold_waf_over_time),
        ]
    }
}

/// The sides of `r` with their colour (and name) index.
fn sides(r: &CompareResults) -> Vec<(usize, &SideResults)> {
    let mut v = vec![(0, &r.zns), (1, &r.conventional)];
    if let Some(f) = &r.fdp {
        v.push((2, f));
    }
    v
}

/// Draws every chart of `r`.
pub fn charts(r: &CompareResults) -> Charts {
    let uniform: fn(&SideResults) -> &Sustained = |s| &s.sustained;
    let hot_cold: fn(&SideResults) -> &Sustained = |s| &s.hot_cold.sustained;
    let mib_s = |s: &Sustained| s.mib_s.iter().map(|&x| Some(x)).collect();
    let running = |s: &Sustained| s.waf_running.clone();
    Charts {
        throughput: over_time(r, "Sustained uniform random writes", "MiB/s", uniform, mib_s),
        throughput_zoom: zoom(r),
        waf_over_time: over_time(
            r,
            "Write amplification since the first uniform random write",
            "WAF",
            uniform,
            running,
        ),
        waf: waf_bars(r),
        read_latency: read_ccdf(r),
        capacity: capacity_bars(r),
        hot_cold_throughput: over_time(
            r,
            "Sustained hot/cold random writes",
            "MiB/s",
            hot_cold,
            mib_s,
        ),
        hot_cold_waf_over_time: over_time(
            r,
            "Write amplification since the first hot/cold random write",
            "WAF",
            hot_cold,
            running,
        ),
    }
}

/// A series per side of `f` of each bin of the run `run` picks, against
/// device time from its first random write, with a dashed line where
/// each side's measured run begins.
fn over_time(
    r: &CompareResults,
    title: &str,
    y: &str,
    run: fn(&SideResults) -> &Sustained,
    f: fn(&Sustained) -> Vec<Option<f64>>,
) -> String {
    let mut series: Vec<Series> = Vec::new();
    let mut top = 0.0f64;
    for (i, s) in sides(r) {
        let sus = run(s);
        let bin = sus.bin_ns as f64 / 1e9;
        let pts: Vec<(f64, f64)> = f(sus)
            .iter()
            .enumerate()
            .filter_map(|(k, y)| Some(((k as f64 + 1.0) * bin, (*y)?)))
            .collect();
        top = pts.iter().fold(top, |m, p| m.max(p.1));
        series.push(Series::new(NAMES[i], pts, i));
    }
    for (i, s) in sides(r) {
        let sus = run(s);
        let x = sus.first_measured_bin as f64 * sus.bin_ns as f64 / 1e9;
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
}

/// Throughput of the first [`ZOOM_BINS`] bins of each side's measured
/// uniform run, against seconds into it.
fn zoom(r: &CompareResults) -> String {
    let series = sides(r)
        .into_iter()
        .map(|(i, s)| {
            let bin = s.sustained.bin_ns as f64 / 1e9;
            let first = s.sustained.first_measured_bin;
            let bins = s.sustained.mib_s.iter().skip(first).take(ZOOM_BINS);
            let pts = bins.enumerate().map(|(k, &y)| ((k as f64 + 1.0) * bin, y)).collect();
            Series::new(NAMES[i], pts, i)
        })
        .collect();
    plot::line_chart(&Chart {
        title: "Sustained uniform random writes, start of the measured run".into(),
        x: Axis::new("device time into the measured run (s)", Scale::Linear),
        y: Axis::new("MiB/s", Scale::Linear),
        series,
        y_from_zero: true,
        legend_lower: false,
    })
}

fn waf_bars(r: &CompareResults) -> String {
    let series = sides(r)
        .into_iter()
        .map(|(i, s)| {
            let (u, h) = (s.sustained.counters.as_ref(), s.hot_cold.sustained.counters.as_ref());
            let values = vec![
                u.map(|c| c.waf),
                u.map(|c| c.waf_total),
                h.map(|c| c.waf),
                h.map(|c| c.waf_total),
            ];
            (NAMES[i].to_string(), values)
        })
        .collect();
    plot::bar_chart(&Bars {
        title: "Write amplification, measured runs".into(),
        y_label: "blocks written per host block".into(),
        categories: vec![
            "uniform: data".into(),
            "uniform: + metadata".into(),
            "hot/cold: data".into(),
            "hot/cold: + metadata".into(),
        ],
        series,
    })
}

fn read_ccdf(r: &CompareResults) -> String {
    let mut series = Vec::new();
    for (i, s) in sides(r) {
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
        .into_iter()
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

fn title(r: &CompareResults) -> &'static str {
    match r.fdp {
        Some(_) => "ZNS against conventional against FDP",
        None => "ZNS against conventional",
    }
}

fn page(r: &CompareResults, c: &Charts) -> String {
    let mut page = Page::new(title(r), title(r));
    setup_part(&mut page, r);
    page.push(&figures_table(r));
    let cfg = &r.config;
    let sections = [
        Section {
            title: "Sustained uniform random writes".into(),
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
            title: "Sustained hot/cold random writes".into(),
            text: format!(
                "Every block unmapped, a sequential fill, then the same random writes with the \
                 first {:.0} % of each side's capacity taking {:.0} % of them, the rest {} ({} \
                 capacities of preconditioning, at least one turn of the cold range; {} s \
                 measured). The host knows which range is hot; what each side does with that is \
                 in the table above.",
                cfg.hot_fraction * 100.0,
                cfg.hot_share * 100.0,
                if cfg.cold_in_order { "in order, round and round" } else { "at random" },
                cfg.hot_cold_precondition_capacities,
                cfg.sustained_s
            ),
            charts: vec![c.hot_cold_throughput.clone(), c.hot_cold_waf_over_time.clone()],
        },
        Section {
            title: "Reads among writes".into(),
            text: format!(
                "4 KiB random reads at queue depth 1: {} alone on the settled device (dashed), \
                 then for {} s of device time {} after each uniform random write as above, on \
                 the same host thread (solid): the device programs what it buffered and collects \
                 garbage meanwhile.",
                cfg.idle_reads, cfg.read_s, cfg.reads_per_write
            ),
            charts: vec![c.read_latency.clone()],
        },
        Section {
            title: "Capacity".into(),
            text: "Raw: the zones' capacities (ZNS), the flash the firmware manages \
                   (conventional, FDP). Usable: the host FTL's exposed capacity, the \
                   conventional and FDP namespaces."
                .into(),
            charts: vec![c.capacity.clone()],
        },
    ];
    for s in &sections {
        page.section(s);
    }
    page.finish()
}

/// What ran on each side, what each did with the host's knowledge, where
/// its counts come from, and the run's settings.
fn setup_part(page: &mut Page, r: &CompareResults) {
    let mut t = Table::new(
        "",
        &["", "device", "profile", "clock", "garbage collection", "device s", "wall s"],
    );
    for (i, s) in sides(r) {
        t.row(&format!(
            "<th>{}</th><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{:.1}</td><td>{:.1}</td>",
            NAMES[i],
            esc(&s.device.uri),
            esc(s.device.profile.as_deref().unwrap_or("-")),
            esc(&s.device.clock),
            esc(&s.gc),
            side_device_ns(s) as f64 / 1e9,
            side_wall_ns(s) as f64 / 1e9
        ));
    }
    page.push(&t.finish());
    let mut t = Table::new(
        "",
        &["", "uniform workload", "hot/cold workload", "write amplification counted by"],
    );
    for (i, s) in sides(r) {
        t.row(&format!(
            "<th>{}</th><td>{}</td><td>{}</td><td>{}</td>",
            NAMES[i],
            esc(&s.separation),
            esc(&s.hot_cold.separation),
            esc(&counted_by(s))
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

/// The source of a side's counts, and how the second count of each
/// measured run compares.
fn counted_by(s: &SideResults) -> String {
    let runs = [("uniform", &s.sustained), ("hot/cold", &s.hot_cold.sustained)];
    let Some(c) = runs.iter().find_map(|(_, r)| r.counters.as_ref()) else {
        return "nothing (no counters to read)".into();
    };
    let mut text = c.source.clone();
    for (what, run) in runs {
        let Some(k) = run.counters.as_ref().and_then(|c| c.check.as_ref()) else { continue };
        let verdict = if k.agrees { "agree" } else { "DISAGREE" };
        let _ = write!(text, "; {what}: the {} {verdict} (WAF {:.3})", k.source, k.waf);
    }
    text
}

/// A figure: its name and its value on each side of [`sides`].
type Row = (&'static str, Vec<Option<f64>>);

/// Rows of the figures table.
fn figure_rows(r: &CompareResults) -> Vec<Row> {
    let all = sides(r);
    let f = |g: &dyn Fn(&SideResults) -> Option<f64>| all.iter().map(|(_, s)| g(s)).collect();
    let lat = |g: fn(&LatencyStats) -> f64, busy: bool| {
        f(&move |s: &SideResults| {
            let l = if busy { &s.reads.under_writes } else { &s.reads.idle };
            (l.count > 0).then(|| g(l))
        })
    };
    let hot: fn(&SideResults) -> &Sustained = |s| &s.hot_cold.sustained;
    vec![
        ("fill MiB/s", f(&|s| Some(s.fill.mib_s))),
        ("sustained MiB/s, mean of bins", f(&|s| Some(s.sustained.mean_mib_s))),
        ("sustained MiB/s, median bin", f(&|s| Some(s.sustained.median_mib_s))),
        ("sustained MiB/s, 5th-percentile bin", f(&|s| Some(s.sustained.p5_mib_s))),
        ("sustained MiB/s, slowest bin", f(&|s| Some(s.sustained.min_mib_s))),
        ("bins below half the mean", f(&|s| Some(s.sustained.dip_bins as f64))),
        ("WAF (data)", f(&|s| s.sustained.counters.as_ref().map(|c| c.waf))),
        ("WAF (data + metadata)", f(&|s| s.sustained.counters.as_ref().map(|c| c.waf_total))),
        ("read p50 us, alone", lat(|l| l.p50_us, false)),
        ("read p99 us, alone", lat(|l| l.p99_us, false)),
        ("read p99.9 us, alone", lat(|l| l.p99_9_us, false)),
        ("read p50 us, among writes", lat(|l| l.p50_us, true)),
        ("read p99 us, among writes", lat(|l| l.p99_us, true)),
        ("read p99.9 us, among writes", lat(|l| l.p99_9_us, true)),
        ("write MiB/s among the reads", f(&|s| Some(s.reads.writes.mib_s))),
        ("hot/cold: precondition WAF", f(&|s| s.hot_cold.precondition.waf)),
        ("hot/cold: sustained MiB/s, mean of bins", f(&|s| Some(hot(s).mean_mib_s))),
        ("hot/cold: sustained MiB/s, 5th pct. bin", f(&|s| Some(hot(s).p5_mib_s))),
        ("hot/cold: WAF (data)", f(&|s| hot(s).counters.as_ref().map(|c| c.waf))),
        ("hot/cold: WAF (data + metadata)", f(&|s| hot(s).counters.as_ref().map(|c| c.waf_total))),
        ("usable / raw", f(&|s| s.capacity.usable_per_raw)),
    ]
}

fn cell(x: Option<f64>) -> String {
    x.map_or_else(|| "-".to_string(), |x| format!("{x:.3}"))
}

/// The figures of every side.
fn figures_table(r: &CompareResults) -> String {
    let mut headers = vec!["figure"];
    headers.extend(sides(r).iter().map(|(i, _)| NAMES[*i]));
    let mut t = Table::new("", &headers);
    for (name, v) in figure_rows(r) {
        let cells: String = v.iter().map(|x| format!("<td>{}</td>", cell(*x))).collect();
        t.row(&format!("<td>{name}</td>{cells}"));
    }
    t.finish()
}

/// The figures as text: one line per figure, every side.
pub fn to_text(r: &CompareResults) -> String {
    let mut t = format!("{:<42}", "figure");
    for (i, _) in sides(r) {
        let _ = write!(t, " {:>16}", NAMES[i]);
    }
    t.push('\n');
    for (name, v) in figure_rows(r) {
        let _ = write!(t, "{name:<42}");
        for x in v {
            let _ = write!(t, " {:>16}", cell(x));
        }
        t.push('\n');
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
