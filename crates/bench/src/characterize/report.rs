//! The HTML report: one self-contained page with inline SVG plots.
//!
//! [`html`] draws one run; [`sections`] draws any number of runs on the
//! same axes (the first solid, the others dashed), which the comparison
//! page uses. Where the first run has a reference ([`Overlay`]), its
//! values are drawn over the measured curves as hollow diamonds, and
//! ceilings of scaling series as dotted lines.

use std::collections::HashMap;

use super::html::{ratio_class, Page, Table};
use super::plot::{self, Axis, BarMarks, Bars, Chart, Scale, Series};
use super::results::{Point, ReferenceTable, Results};

/// Reference values to draw over the plots of a run: every figure of its
/// reference table, by name, and the legend entries that say where they
/// come from.
///
/// Thread safety: plain data.
#[derive(Debug, Clone)]
pub struct Overlay {
    /// Legend entry of the reference points (`reference: zn540`).
    pub label: String,
    /// Legend entry of reference ceilings.
    pub ceiling_label: String,
    figures: HashMap<String, f64>,
}

impl Overlay {
    /// The reference of `t`: its rows' reference values and, for another
    /// run as the reference, that run's curves.
    pub fn of(t: &ReferenceTable) -> Overlay {
        let figures = t
            .rows
            .iter()
            .map(|r| (r.figure.clone(), r.reference))
            .chain(t.curves.iter().map(|c| (c.figure.clone(), c.value)))
            .filter(|(_, v)| v.is_finite())
            .collect();
        let short = t.short_name();
        Overlay {
            label: format!("reference: {short}"),
            ceiling_label: format!("reference ceiling: {short}"),
            figures,
        }
    }

    /// A reference value by figure name.
    pub fn get(&self, figure: &str) -> Option<f64> {
        self.figures.get(figure).copied()
    }

    /// Reference values of the points of `r` in the series `prefix`, at
    /// those points' `x`, sorted by `x`.
    fn points(
        &self,
        r: &Results,
        prefix: &str,
        x: fn(&Point) -> Option<f64>,
        stat: Stat,
    ) -> Vec<(f64, f64)> {
        let mut v: Vec<(f64, f64)> = r
            .points
            .iter()
            .filter(|p| p.id.starts_with(prefix) && p.ops > 0)
            .filter_map(|p| Some((x(p)?, self.get(&format!("{}:{}", p.id, stat.figure()))?)))
            .collect();
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
        v
    }
}

pub use super::html::{esc, Section};

/// The report of one run.
pub fn html(r: &Results) -> String {
    let dev = &r.device;
    let mut page = Page::new(
        &format!("ZNS characterization: {}", dev.uri),
        &format!("ZNS characterization of <code>{}</code>", esc(&dev.uri)),
    );
    page.push(&device_table(r));
    page.note(&format!(
        "Latency: device time from submission to the poll that delivered the completion. \
         Throughput: completed commands over device time. Clock: <b>{}</b>{}.",
        esc(&dev.clock),
        if dev.clock == "virtual" {
            " (simulated device time: independent of how busy the host was)"
        } else {
            ""
        }
    ));
    let overlay = r.reference.as_ref().map(Overlay::of);
    if let Some(o) = &overlay {
        page.note(&format!(
            "Hollow diamonds: the reference's value of the plotted figure ({}), in the colour \
             of the measured series it belongs to; dotted lines: the reference's ceiling of a \
             scaling series.",
            esc(&o.label)
        ));
    }
    for s in sections_with(&[("", r)], overlay.as_ref()) {
        page.section(&s);
    }
    if let Some(a) = &r.activity {
        page.section(&activity_section(a));
    }
    if let Some(t) = &r.reference {
        reference_part(&mut page, t);
    }
    page.heading("Experiments");
    page.push(&experiments_table(r));
    page.heading("Every point");
    page.push("<details><summary>table</summary>\n");
    page.push(&points_table(&r.points));
    page.push("</details>\n");
    page.finish()
}

/// The device, the suite and the run's times.
fn device_table(r: &Results) -> String {
    let i = &r.device.info;
    let get = |k: &str| i.get(k).map(|v| v.to_string().trim_matches('"').to_string());
    let mut rows = vec![
        ("suite", format!("{} (seed {})", r.suite, r.seed)),
        ("clock", r.device.clock.clone()),
        ("profile", r.device.profile.clone().unwrap_or_else(|| "-".into())),
        ("model", get("model").unwrap_or_default()),
        ("transport", get("transport").unwrap_or_default()),
        (
            "zones",
            format!(
                "{} of {} blocks, capacity {}, block {} B",
                get("zone_count").unwrap_or_default(),
                get("zone_size").unwrap_or_default(),
                get("zone_capacity").unwrap_or_default(),
                get("block_size").unwrap_or_default()
            ),
        ),
        (
            "limits",
            format!(
                "max open {}, max active {}, MDTS {} B, ZASL {} B",
                get("max_open").unwrap_or_default(),
                get("max_active").unwrap_or_default(),
                get("mdts_bytes").unwrap_or_default(),
                get("zasl_bytes").unwrap_or_default()
            ),
        ),
        (
            "run time",
            format!(
                "{:.2} s device time, {:.2} s wall time",
                r.duration.device_ns as f64 / 1e9,
                r.host.wall_ns as f64 / 1e9
            ),
        ),
    ];
    if !r.only.is_empty() {
        rows.push(("experiments", r.only.join(", ")));
    }
    if let Some(o) = &r.host.overhead {
        rows.push(("tool overhead", super::overhead::describe_overhead(o)));
    }
    let mut t = Table::plain("");
    for (k, v) in &rows {
        t.row(&format!("<th>{}</th><td style=\"text-align:left\">{}</td>", k, esc(v)));
    }
    t.finish()
}

/// The run's figures against its reference's, each ratio marked good or
/// bad.
fn reference_part(page: &mut Page, t: &ReferenceTable) {
    page.heading_id("reference", "Measured against the reference");
    page.note(&format!(
        "Reference: {}, {} B LBA format ({}). Ratio = measured / reference; cells more than \
         25% off are marked.",
        esc(&t.device),
        t.lba_bytes,
        esc(&t.source)
    ));
    let mut table = Table::new("ref", &["figure", "what", "reference", "measured", "ratio"]);
    for row in &t.rows {
        let (m, ratio, class) = match (row.measured, row.ratio) {
            (Some(m), Some(q)) => (fmt(m), format!("{q:.2}"), ratio_class(q)),
            (Some(m), None) => (fmt(m), "-".into(), ""),
            _ => ("not measured".into(), "-".into(), ""),
        };
        table.row(&format!(
            "<td><code>{}</code></td><td>{}</td><td>{}</td><td>{m}</td>\
             <td class=\"{class}\">{ratio}</td>",
            esc(&row.figure),
            esc(&row.what),
            fmt(row.reference)
        ));
    }
    page.push(&table.finish());
}

/// Each experiment's points and times, and why it stopped or what it
/// skipped.
fn experiments_table(r: &Results) -> String {
    let mut t =
        Table::new("", &["experiment", "points", "device time (s)", "wall time (s)", "notes"]);
    for e in &r.experiments {
        let mut notes: Vec<String> = e.skipped.iter().map(|s| esc(s)).collect();
        if let Some(err) = &e.error {
            notes.insert(0, format!("<b>stopped: {}</b>", esc(err)));
        }
        t.row(&format!(
            "<td>{} <span class=\"note\">{}</span></td><td>{}</td><td>{:.3}</td>\
             <td>{:.3}</td><td style=\"text-align:left\">{}</td>",
            esc(&e.name),
            esc(&e.title),
            e.points,
            e.duration.device_ns as f64 / 1e9,
            r.host.experiments_wall_ns.get(&e.name).copied().unwrap_or(0) as f64 / 1e9,
            notes.join("; ")
        ));
    }
    t.finish()
}

/// A number with as many digits as it deserves.
pub(crate) fn fmt(v: f64) -> String {
    let a = v.abs();
    if a >= 1000.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 0.1 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    }
}

fn points_table(points: &[Point]) -> String {
    let mut t = Table::new(
        "",
        &[
            "point", "ops", "KIOPS", "MiB/s", "mean µs", "p50", "p95", "p99", "p99.9", "p99.99",
            "max",
        ],
    );
    for p in points {
        let l = &p.latency;
        t.row(&format!(
            "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
            esc(&p.id),
            p.ops,
            if p.is_zone_management() { "-".into() } else { fmt(p.iops / 1000.0) },
            if p.bytes > 0 { fmt(p.mib_s) } else { "-".into() },
            fmt(l.mean_us),
            fmt(l.p50_us),
            fmt(l.p95_us),
            fmt(l.p99_us),
            fmt(l.p99_9_us),
            fmt(l.p99_99_us),
            fmt(l.max_us)
        ));
    }
    t.finish()
}

/// Which statistic a chart plots.
#[derive(Clone, Copy)]
enum Stat {
    Kiops,
    MibS,
    Mean,
    P50,
    P99,
}

impl Stat {
    fn of(self, p: &Point) -> f64 {
        match self {
            Stat::Kiops => p.iops / 1000.0,
            Stat::MibS => p.mib_s,
            Stat::Mean => p.latency.mean_us,
            Stat::P50 => p.latency.p50_us,
            Stat::P99 => p.latency.p99_us,
        }
    }

    /// The statistic's part of a figure name (`<point id>:<stat>`).
    fn figure(self) -> &'static str {
        match self {
            Stat::Kiops => "kiops",
            Stat::MibS => "mib_s",
            Stat::Mean => "mean_us",
            Stat::P50 => "p50_us",
            Stat::P99 => "p99_us",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Stat::Kiops => "KIOPS",
            Stat::MibS => "MiB/s",
            Stat::Mean => "mean",
            Stat::P50 => "p50",
            Stat::P99 => "p99",
        }
    }
}

/// Runs to draw: `(label, results)`; one run has an empty label.
type Runs<'a> = [(&'a str, &'a Results)];

/// Points of `r` whose id starts with `prefix`, as `(x, stat)` sorted by x.
fn series_points(
    r: &Results,
    prefix: &str,
    x: fn(&Point) -> Option<f64>,
    y: Stat,
) -> Vec<(f64, f64)> {
    let mut v: Vec<(f64, f64)> = r
        .points
        .iter()
        .filter(|p| p.id.starts_with(prefix) && p.ops > 0)
        .filter_map(|p| Some((x(p)?, y.of(p))))
        .collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v
}

/// Distinct series prefixes of the points whose id starts with `group`:
/// the id without its last part (`intra_zone/append/4KiB`).
fn prefixes(runs: &Runs<'_>, group: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (_, r) in runs {
        for p in &r.points {
            if let Some((pre, _)) = p.id.rsplit_once('/') {
                if p.id.starts_with(group) && !out.iter().any(|o| o == pre) {
                    out.push(pre.to_string());
                }
            }
        }
    }
    out
}

fn run_name(label: &str, name: &str) -> String {
    if label.is_empty() {
        name.to_string()
    } else {
        format!("{name} [{label}]")
    }
}

/// One line per (series, stat, run): runs after the first are dashed, and
/// with one run, tail statistics are dashed. With an overlay, the
/// reference values of the first run's points follow, in the colour of
/// their series; a throughput series without any gets the reference's
/// ceiling of that series (`<series>:max_kiops`, `:max_mib_s`) if it has
/// one.
fn lines(
    runs: &Runs<'_>,
    ov: Option<&Overlay>,
    series: &[(String, String)],
    x: fn(&Point) -> Option<f64>,
    stats: &[Stat],
) -> Vec<Series> {
    let mut out = Vec::new();
    let multi = runs.len() > 1;
    for (ri, (label, r)) in runs.iter().enumerate() {
        for (si, (prefix, name)) in series.iter().enumerate() {
            for (ti, &stat) in stats.iter().enumerate() {
                // With several runs, only the first statistic is drawn.
                if multi && ti > 0 {
                    continue;
                }
                let pts = series_points(r, prefix, x, stat);
                if pts.is_empty() {
                    continue;
                }
                let n = if stats.len() > 1 && !multi {
                    format!("{name} {}", stat.name())
                } else {
                    name.clone()
                };
                let mut s = Series::new(run_name(label, &n), pts, si);
                if ri > 0 || (!multi && ti > 0) {
                    s = s.dashed();
                }
                out.push(s);
            }
        }
    }
    if let (Some(ov), Some((_, r))) = (ov, runs.first()) {
        for (si, (prefix, _)) in series.iter().enumerate() {
            for &stat in stats.iter().take(if multi { 1 } else { stats.len() }) {
                let pts = ov.points(r, prefix, x, stat);
                if !pts.is_empty() {
                    out.push(Series::reference(ov.label.clone(), pts, si));
                    continue;
                }
                let max = match stat {
                    Stat::Kiops => "max_kiops",
                    Stat::MibS => "max_mib_s",
                    _ => continue,
                };
                let drawn = r.points.iter().any(|p| p.id.starts_with(prefix.as_str()));
                if let Some(v) = ov.get(&format!("{}:{max}", prefix.trim_end_matches('/'))) {
                    if drawn {
                        out.push(Series::ceiling(ov.ceiling_label.clone(), v, si));
                    }
                }
            }
        }
    }
    out
}

fn chart(title: &str, x: Axis, y: Axis, series: Vec<Series>) -> String {
    let from_zero = y.scale == Scale::Linear;
    let legend_lower = x.scale == Scale::Log10 && y.scale == Scale::Log10;
    plot::line_chart(&Chart {
        title: title.into(),
        x,
        y,
        series,
        y_from_zero: from_zero,
        legend_lower,
    })
}

fn x_bytes(p: &Point) -> Option<f64> {
    p.block_bytes.map(|b| b as f64)
}

fn x_qd(p: &Point) -> Option<f64> {
    p.queue_depth.map(f64::from)
}

fn x_zones(p: &Point) -> Option<f64> {
    p.zones.map(f64::from)
}

fn x_occupancy(p: &Point) -> Option<f64> {
    p.occupancy.map(|o| o * 100.0)
}

fn ms(v: f64) -> String {
    plot::number(v)
}

/// Reference marks for a bar chart whose first series (those of the
/// first run) plot `figures[j][i]` (series `j`, category `i`), times
/// `scale`; a bar the first run did not measure gets none.
fn bar_marks(
    ov: Option<(&Overlay, &Results)>,
    figures: &[Vec<String>],
    scale: f64,
) -> Option<BarMarks> {
    let (ov, r) = ov?;
    let values = figures
        .iter()
        .map(|series| {
            series
                .iter()
                .map(|f| {
                    let (id, _) = f.rsplit_once(':')?;
                    r.point(id)?;
                    Some(ov.get(f)? * scale)
                })
                .collect()
        })
        .collect();
    Some(BarMarks { name: ov.label.clone(), values })
}

/// Percentile figures and the fraction of commands slower than each.
const CCDF_PERCENTILES: [(&str, f64); 5] =
    [("p50_us", 0.5), ("p95_us", 0.05), ("p99_us", 0.01), ("p99_9_us", 1e-3), ("p99_99_us", 1e-4)];

/// The charts of every experiment, for one run or several.
pub fn sections(runs: &Runs<'_>) -> Vec<Section> {
    sections_with(runs, None)
}

/// The charts of every experiment, for one run or several, with the
/// reference values of `ov` drawn over the first run's curves wherever a
/// reference figure is of the quantity a chart plots for a series.
pub fn sections_with(runs: &Runs<'_>, ov: Option<&Overlay>) -> Vec<Section> {
    let has =
        |prefix: &str| runs.iter().any(|(_, r)| r.points.iter().any(|p| p.id.starts_with(prefix)));
    let mut out = Vec::new();
    if has("qd1/") {
        out.push(qd1_section(runs, ov));
    }
    if has("intra_zone/") {
        out.push(intra_zone_section(runs, ov));
    }
    if has("inter_zone/") {
        out.push(inter_zone_section(runs, ov));
    }
    if has("read_qd/") || has("read_zones/") {
        out.push(reads_section(runs, ov));
    }
    out.extend(latency_section(runs, ov));
    if has("zone_mgmt/") {
        out.push(zone_mgmt_section(runs, ov));
    }
    if has("open/") {
        out.push(open_section(runs, ov));
    }
    if has("read_under_write/") {
        out.push(read_under_write_section(runs, ov));
    }
    if has("reset_interference/") {
        out.push(reset_interference_section(runs, ov));
    }
    out
}

/// The overlay with the run it belongs to, the first; without one,
/// nothing to draw.
fn overlay_first<'a>(
    runs: &Runs<'a>,
    ov: Option<&'a Overlay>,
) -> Option<(&'a Overlay, &'a Results)> {
    ov.zip(runs.first().map(|(_, r)| *r))
}

/// The request size axis.
fn size_axis() -> Axis {
    Axis::new("request size", Scale::Log2).with_format(plot::bytes)
}

/// A latency axis in µs; `what` the latency is of (or empty).
fn us_axis(what: &str) -> Axis {
    Axis::new(&format!("{what} latency (µs)"), Scale::Linear)
}

/// The series of the points whose id starts with `group`: each prefix
/// (with its `/`), named by the rest of it.
fn group_series(runs: &Runs<'_>, group: &str) -> Vec<(String, String)> {
    prefixes(runs, group)
        .into_iter()
        .map(|p| {
            let n = p.trim_start_matches(group).replace('/', " ");
            (p + "/", n)
        })
        .collect()
}

/// The series of `series` whose prefix contains `part`.
fn series_with(series: &[(String, String)], part: &str) -> Vec<(String, String)> {
    series.iter().filter(|s| s.0.contains(part)).cloned().collect()
}

/// `qd1`: latency and throughput at queue depth 1 by request size.
fn qd1_section(runs: &Runs<'_>, ov: Option<&Overlay>) -> Section {
    let ops: Vec<(String, String)> =
        ["write", "append", "read"].iter().map(|o| (format!("qd1/{o}/"), o.to_string())).collect();
    Section {
        title: "Queue depth 1: latency and throughput by request size".into(),
        text: "One command in flight. Writes go to the write pointer of one zone, appends to \
               one zone, reads to random offsets of written data. Solid: mean; dashed: p99."
            .into(),
        charts: vec![
            chart(
                "QD 1 latency by request size",
                size_axis(),
                us_axis(""),
                lines(runs, ov, &ops, x_bytes, &[Stat::Mean, Stat::P99]),
            ),
            chart(
                "QD 1 throughput by request size",
                size_axis(),
                Axis::new("MiB/s", Scale::Linear),
                lines(runs, ov, &ops, x_bytes, &[Stat::MibS]),
            ),
            chart(
                "QD 1 IOPS by request size",
                size_axis(),
                Axis::new("KIOPS", Scale::Linear),
                lines(runs, ov, &ops, x_bytes, &[Stat::Kiops]),
            ),
        ],
    }
}

/// `intra_zone`: appends to one zone by queue depth.
fn intra_zone_section(runs: &Runs<'_>, ov: Option<&Overlay>) -> Section {
    let s = group_series(runs, "intra_zone/");
    Section {
        title: "Intra-zone scaling: appends to one zone by queue depth".into(),
        text: "Zone Appends into a single zone with more and more in flight.".into(),
        charts: vec![
            chart(
                "Appends to one zone: IOPS by queue depth",
                Axis::new("queue depth", Scale::Log2),
                Axis::new("KIOPS", Scale::Linear),
                lines(runs, ov, &s, x_qd, &[Stat::Kiops]),
            ),
            chart(
                "Appends to one zone: latency by queue depth",
                Axis::new("queue depth", Scale::Log2),
                us_axis(""),
                lines(runs, ov, &s, x_qd, &[Stat::Mean, Stat::P99]),
            ),
        ],
    }
}

/// `inter_zone`: writes and appends to 1 .. max-open zones.
fn inter_zone_section(runs: &Runs<'_>, ov: Option<&Overlay>) -> Section {
    let s = group_series(runs, "inter_zone/");
    Section {
        title: "Inter-zone scaling: writes and appends to several zones".into(),
        text: "One command in flight per zone, 1 to max-open zones at once.".into(),
        charts: vec![
            chart(
                "Writes and appends over zones: IOPS",
                Axis::new("zones", Scale::Log2),
                Axis::new("KIOPS", Scale::Linear),
                lines(runs, ov, &s, x_zones, &[Stat::Kiops]),
            ),
            chart(
                "Writes and appends over zones: latency",
                Axis::new("zones", Scale::Log2),
                us_axis(""),
                lines(runs, ov, &s, x_zones, &[Stat::Mean, Stat::P99]),
            ),
        ],
    }
}

/// `reads`: random and sequential reads by queue depth and by zone count.
fn reads_section(runs: &Runs<'_>, ov: Option<&Overlay>) -> Section {
    let by_qd = group_series(runs, "read_qd/");
    let random = series_with(&by_qd, "/random/");
    let sequential = series_with(&by_qd, "/sequential/");
    let by_zone = group_series(runs, "read_zones/");
    let zr = series_with(&by_zone, "/random/");
    let zs = series_with(&by_zone, "/sequential/");
    Section {
        title: "Reads by queue depth and by zone count".into(),
        text: "Random reads at block-aligned offsets of written data, and sequential reads \
               through it. By zone count, the same total queue depth is spread over 1 .. n \
               zones."
            .into(),
        charts: vec![
            chart(
                "Random reads: IOPS by queue depth",
                Axis::new("queue depth", Scale::Log2),
                Axis::new("KIOPS", Scale::Linear),
                lines(runs, ov, &random, x_qd, &[Stat::Kiops]),
            ),
            chart(
                "Random reads: latency by queue depth",
                Axis::new("queue depth", Scale::Log2),
                us_axis(""),
                lines(runs, ov, &random, x_qd, &[Stat::P50, Stat::P99]),
            ),
            chart(
                "Sequential reads: throughput by queue depth",
                Axis::new("queue depth", Scale::Log2),
                Axis::new("MiB/s", Scale::Linear),
                lines(runs, ov, &sequential, x_qd, &[Stat::MibS]),
            ),
            chart(
                "Random reads by zone count",
                Axis::new("zones", Scale::Log2),
                Axis::new("KIOPS", Scale::Linear),
                lines(runs, ov, &zr, x_zones, &[Stat::Kiops]),
            ),
            chart(
                "Sequential reads by zone count",
                Axis::new("zones", Scale::Log2),
                Axis::new("MiB/s", Scale::Linear),
                lines(runs, ov, &zs, x_zones, &[Stat::MibS]),
            ),
        ],
    }
}

/// Latency distributions of a few points, if any run has them.
fn latency_section(runs: &Runs<'_>, ov: Option<&Overlay>) -> Option<Section> {
    let ccdfs: Vec<String> = ccdf_sets(runs)
        .iter()
        .filter_map(|(title, ids)| ccdf_chart(runs, ov, title, ids))
        .collect();
    (!ccdfs.is_empty()).then(|| Section {
        title: "Latency distributions".into(),
        text: "Complementary CDFs: the fraction of commands slower than a latency, on \
               logarithmic axes; tails show at the bottom right."
            .into(),
        charts: ccdfs,
    })
}

/// The latency distributions drawn: a title and the points of each (at
/// scale: the first run's deepest queue of appends to one zone and of
/// writes over zones).
fn ccdf_sets<'a>(runs: &Runs<'a>) -> [(&'static str, Vec<&'a str>); 3] {
    [
        ("QD 1, 4 KiB", vec!["qd1/write/4KiB", "qd1/append/4KiB", "qd1/read/4KiB"]),
        (
            "Zone resets",
            vec![
                "zone_mgmt/reset/empty",
                "zone_mgmt/reset/50%",
                "zone_mgmt/reset/full",
                "zone_mgmt/reset_after_finish/50%",
                "reset_interference/reset/idle",
                "reset_interference/reset/under_read",
            ],
        ),
        ("Writes and appends at scale", {
            let mut v = Vec::new();
            for (_, r) in runs.iter().take(1) {
                for pre in ["intra_zone/append/4KiB/qd=", "inter_zone/write/4KiB/zones="] {
                    if let Some(p) = r
                        .points
                        .iter()
                        .filter(|p| p.id.starts_with(pre))
                        .max_by_key(|p| p.queue_depth.unwrap_or(0))
                    {
                        v.push(p.id.as_str());
                    }
                }
            }
            v
        }),
    ]
}

/// The CCDF chart of the points `ids` of every run (later runs dashed),
/// with the reference's percentiles of the first run's; `None` when no
/// run has any of them.
fn ccdf_chart(runs: &Runs<'_>, ov: Option<&Overlay>, title: &str, ids: &[&str]) -> Option<String> {
    let mut series = Vec::new();
    for (ri, (label, r)) in runs.iter().enumerate() {
        for (i, id) in ids.iter().enumerate() {
            let Some(h) = r.point(id).and_then(Point::decode_histogram) else { continue };
            let pts: Vec<(f64, f64)> =
                h.ccdf(300).into_iter().map(|(ns, f)| (ns / 1000.0, f)).collect();
            let mut s = Series::new(run_name(label, id), pts, i);
            if ri > 0 {
                s = s.dashed();
            }
            series.push(s);
        }
    }
    // A reference percentile is a point of the CCDF: at the p-th
    // percentile's latency, 1 - p of the commands are slower.
    if let Some((ov, r)) = overlay_first(runs, ov) {
        for (i, id) in ids.iter().enumerate() {
            if r.point(id).is_none() {
                continue;
            }
            let pts: Vec<(f64, f64)> = CCDF_PERCENTILES
                .iter()
                .filter_map(|(stat, slower)| Some((ov.get(&format!("{id}:{stat}"))?, *slower)))
                .collect();
            if !pts.is_empty() {
                series.push(Series::reference(ov.label.clone(), pts, i));
            }
        }
    }
    if series.is_empty() {
        return None;
    }
    Some(chart(
        &format!("Latency CCDF: {title}"),
        Axis::new("latency (µs)", Scale::Log10),
        Axis::new("fraction of commands slower", Scale::Log10),
        series,
    ))
}

/// `zone_mgmt`: open, close, finish and reset latency by zone occupancy.
fn zone_mgmt_section(runs: &Runs<'_>, ov: Option<&Overlay>) -> Section {
    let ms_axis =
        |what: &str| Axis::new(&format!("{what} latency (ms)"), Scale::Log10).with_format(ms);
    let reset_kinds = [
        ("zone_mgmt/reset/", "reset"),
        ("zone_mgmt/reset_after_finish/", "reset after finish"),
        ("zone_mgmt/finish/", "finish"),
    ];
    let oc_kinds = [("zone_mgmt/open/", "open"), ("zone_mgmt/close/", "close")];
    Section {
        title: "Zone management by occupancy".into(),
        text: "Each command on one zone written to the occupancy shown (0% = empty, 100% = \
               full), nothing else running. Reset: of a zone left open; reset after finish: \
               of a zone finished first. Medians; open and close means."
            .into(),
        charts: vec![
            chart(
                "Reset and finish by occupancy (median)",
                Axis::new("occupancy (%)", Scale::Linear),
                ms_axis(""),
                occupancy_lines(runs, ov, &reset_kinds, Stat::P50, 1000.0),
            ),
            chart(
                "Open and close by occupancy (mean)",
                Axis::new("occupancy (%)", Scale::Linear),
                us_axis(""),
                occupancy_lines(runs, ov, &oc_kinds, Stat::Mean, 1.0),
            ),
        ],
    }
}

/// A line per run and kind `(prefix, name)` of zone management command:
/// `stat` by zone occupancy, divided by `unit`; then the reference's of
/// the first run's points.
fn occupancy_lines(
    runs: &Runs<'_>,
    ov: Option<&Overlay>,
    kinds: &[(&str, &str)],
    stat: Stat,
    unit: f64,
) -> Vec<Series> {
    let mut out = Vec::new();
    for (ri, (label, r)) in runs.iter().enumerate() {
        for (i, (prefix, name)) in kinds.iter().enumerate() {
            let pts: Vec<(f64, f64)> = series_points(r, prefix, x_occupancy, stat)
                .into_iter()
                .map(|(x, y)| (x, y / unit))
                .collect();
            if pts.is_empty() {
                continue;
            }
            let mut s = Series::new(run_name(label, name), pts, i);
            if ri > 0 {
                s = s.dashed();
            }
            out.push(s);
        }
    }
    if let Some((ov, r)) = overlay_first(runs, ov) {
        for (i, (prefix, _)) in kinds.iter().enumerate() {
            let pts: Vec<(f64, f64)> = ov
                .points(r, prefix, x_occupancy, stat)
                .into_iter()
                .map(|(x, y)| (x, y / unit))
                .collect();
            if !pts.is_empty() {
                out.push(Series::reference(ov.label.clone(), pts, i));
            }
        }
    }
    out
}

/// `open`: explicit against implicit open, and the first I/O after each.
fn open_section(runs: &Runs<'_>, ov: Option<&Overlay>) -> Section {
    let ids = [
        ("open/explicit_open", "explicit open"),
        ("open/first_write/implicit", "write 1, implicit"),
        ("open/first_write/explicit", "write 1, explicit"),
        ("open/next_write/implicit", "write 2, implicit"),
        ("open/next_write/explicit", "write 2, explicit"),
        ("open/first_append/implicit", "append 1, implicit"),
        ("open/first_append/explicit", "append 1, explicit"),
        ("open/next_append/implicit", "append 2, implicit"),
        ("open/next_append/explicit", "append 2, explicit"),
    ];
    let cats: Vec<String> = ids.iter().map(|i| i.1.to_string()).collect();
    let mut series = Vec::new();
    for (label, r) in runs {
        let vals: Vec<Option<f64>> =
            ids.iter().map(|(id, _)| r.point(id).map(|p| p.latency.mean_us)).collect();
        series.push((run_name(label, "mean"), vals));
    }
    Section {
        title: "Explicit and implicit open".into(),
        text: "Latency of an explicit open, and of the first and second I/O to a zone that \
               was opened explicitly or implicitly (by the I/O itself)."
            .into(),
        charts: vec![plot::bar_chart_marked(
            &Bars {
                title: "Open and first I/O (mean)".into(),
                y_label: "latency (µs)".into(),
                categories: cats,
                series,
            },
            bar_marks(
                overlay_first(runs, ov),
                &[ids.iter().map(|(id, _)| format!("{id}:mean_us")).collect()],
                1.0,
            )
            .as_ref(),
        )],
    }
}

/// `read_under_write`: reads while writes run at a rate.
fn read_under_write_section(runs: &Runs<'_>, ov: Option<&Overlay>) -> Section {
    let (lat, thr) = read_under_write_lines(runs, ov);
    Section {
        title: "Reads under rate-limited writes".into(),
        text: "Random reads at each queue depth while writes run at 0 .. 100% of the \
               write bandwidth (x: the write rate achieved)."
            .into(),
        charts: vec![
            chart(
                "Read latency under writes",
                Axis::new("write MiB/s", Scale::Linear),
                us_axis("read"),
                lat,
            ),
            chart(
                "Read IOPS under writes",
                Axis::new("write MiB/s", Scale::Linear),
                Axis::new("read KIOPS", Scale::Linear),
                thr,
            ),
        ],
    }
}

/// A read point under writes: the write rate achieved beside it, the
/// write point it was measured with (if any), and the read point.
type ReadUnderWrite<'a> = (f64, Option<&'a Point>, &'a Point);

/// Read latency and throughput lines against the write rate: one per read
/// queue depth of each run (p99 too with one run), then the reference's
/// of the first run's.
fn read_under_write_lines(runs: &Runs<'_>, ov: Option<&Overlay>) -> (Vec<Series>, Vec<Series>) {
    let mut lat = Vec::new();
    let mut thr = Vec::new();
    let (mut ref_lat, mut ref_thr) = (Vec::new(), Vec::new());
    for (ri, (label, r)) in runs.iter().enumerate() {
        for (qi, &qd) in read_depths(r).iter().enumerate() {
            let pts = reads_under_writes(r, qd);
            let name = |stat: Stat| format!("read {} QD {qd}", stat.name());
            if let Some(ov) = ov.filter(|_| ri == 0) {
                let mk_ref = |stat: Stat, color: usize| {
                    reference_under_writes(ov, &pts, stat, color, &name(stat))
                };
                ref_lat.extend(mk_ref(Stat::P50, 2 * qi));
                if runs.len() == 1 {
                    ref_lat.extend(mk_ref(Stat::P99, 2 * qi + 1));
                }
                ref_thr.extend(mk_ref(Stat::Kiops, qi));
            }
            let mk = |stat: Stat, color: usize, dashed: bool| {
                let mut v: Vec<(f64, f64)> = pts.iter().map(|(w, _, p)| (*w, stat.of(p))).collect();
                v.sort_by(|a, b| a.0.total_cmp(&b.0));
                let mut s = Series::new(run_name(label, &name(stat)), v, color);
                if dashed {
                    s = s.dashed();
                }
                s
            };
            lat.push(mk(Stat::P50, 2 * qi, ri > 0));
            if runs.len() == 1 {
                lat.push(mk(Stat::P99, 2 * qi + 1, true));
            }
            thr.push(mk(Stat::Kiops, qi, ri > 0));
        }
    }
    lat.extend(ref_lat);
    thr.extend(ref_thr);
    (lat, thr)
}

/// The read queue depths of `r`'s reads under writes, ascending.
fn read_depths(r: &Results) -> Vec<u32> {
    let mut qds: Vec<u32> = r
        .points
        .iter()
        .filter(|p| p.id.starts_with("read_under_write/read/"))
        .filter_map(|p| p.queue_depth)
        .collect();
    qds.sort_unstable();
    qds.dedup();
    qds
}

/// The reads of `r` under writes at read queue depth `qd`; x: the write
/// rate achieved (the write point with the same depth and rate).
fn reads_under_writes(r: &Results, qd: u32) -> Vec<ReadUnderWrite<'_>> {
    r.points
        .iter()
        .filter(|p| p.id.starts_with("read_under_write/read/") && p.queue_depth == Some(qd))
        .map(|p| {
            let tail = p.id.splitn(4, '/').nth(3).unwrap_or("");
            let w = r.points.iter().find(|w| {
                w.id.starts_with("read_under_write/write/") && w.id.ends_with(&format!("/{tail}"))
            });
            (w.map_or(0.0, |w| w.mib_s), w, p)
        })
        .collect()
}

/// The reference's `stat` of the reads `pts`, a line named `name`: a
/// reference point sits at the reference's own write rate where it has
/// one (another run's), else at this run's.
fn reference_under_writes(
    ov: &Overlay,
    pts: &[ReadUnderWrite<'_>],
    stat: Stat,
    color: usize,
    name: &str,
) -> Option<Series> {
    let mut v: Vec<(f64, f64)> = pts
        .iter()
        .filter_map(|(w, wp, p)| {
            let y = ov.get(&format!("{}:{}", p.id, stat.figure()))?;
            let x = wp.and_then(|wp| ov.get(&format!("{}:mib_s", wp.id))).unwrap_or(*w);
            Some((x, y))
        })
        .collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    (!v.is_empty()).then(|| {
        let label = format!("{} {}", ov.label, name);
        Series::reference(label, v, color)
    })
}

/// Conditions of the resets of `reset_interference`.
const RESET_CONDITIONS: [&str; 4] = ["idle", "under_read", "under_write", "under_append"];

/// Conditions of the I/O of `reset_interference`.
const IO_CONDITIONS: [&str; 2] = ["baseline", "under_resets"];

/// Kinds of I/O of `reset_interference`.
const IO_KINDS: [&str; 3] = ["read", "write", "append"];

/// Bars of one chart: `(legend, value per category)`.
type BarSeries = Vec<(String, Vec<Option<f64>>)>;

/// A statistic of a point for bars: `(name, value)`.
type BarStat<'a> = (&'a str, fn(&Point) -> f64);

/// `reset_interference`: resets under I/O and I/O under resets.
fn reset_interference_section(runs: &Runs<'_>, ov: Option<&Overlay>) -> Section {
    let ov_first = overlay_first(runs, ov);
    let reset_marks = bar_marks(
        ov_first,
        &["p50_us", "p99_us"].map(|stat| {
            RESET_CONDITIONS
                .iter()
                .map(|c| format!("reset_interference/reset/{c}:{stat}"))
                .collect()
        }),
        1e-3,
    );
    let io_figures = |stat: &str| {
        IO_CONDITIONS.map(|cond| {
            IO_KINDS
                .iter()
                .map(|k| format!("reset_interference/{k}/{cond}:{stat}"))
                .collect::<Vec<_>>()
        })
    };
    let io_marks = bar_marks(ov_first, &io_figures("p99_us"), 1.0);
    let thr_marks = bar_marks(ov_first, &io_figures("kiops"), 1.0);
    let kinds = || IO_KINDS.iter().map(|k| k.to_string()).collect();
    let p99: [BarStat<'_>; 1] = [("p99", |p| p.latency.p99_us)];
    // The rarest waits (an I/O behind an erase that may not be suspended
    // yet) show in the highest percentiles only.
    let worst: [BarStat<'_>; 2] =
        [("p99.9", |p| p.latency.p99_9_us), ("max", |p| p.latency.max_us)];
    let kiops: [BarStat<'_>; 1] = [("", |p| p.iops / 1000.0)];
    Section {
        title: "Resets and I/O".into(),
        text: "Zones reset one after another while reads, writes or appends run, against \
               each alone."
            .into(),
        charts: vec![
            plot::bar_chart_marked(
                &Bars {
                    title: "Reset latency, alone and under I/O".into(),
                    y_label: "latency (ms)".into(),
                    categories: RESET_CONDITIONS.iter().map(|c| c.replace('_', " ")).collect(),
                    series: reset_bars(runs),
                },
                reset_marks.as_ref(),
            ),
            plot::bar_chart_marked(
                &Bars {
                    title: "I/O tail latency with and without resets".into(),
                    y_label: "p99 latency (µs)".into(),
                    categories: kinds(),
                    series: io_bars(runs, &p99),
                },
                io_marks.as_ref(),
            ),
            plot::bar_chart_marked(
                &Bars {
                    title: "I/O worst latency with and without resets".into(),
                    y_label: "p99.9 and max latency (µs)".into(),
                    categories: kinds(),
                    series: io_bars(runs, &worst),
                },
                None,
            ),
            plot::bar_chart_marked(
                &Bars {
                    title: "I/O throughput with and without resets".into(),
                    y_label: "KIOPS".into(),
                    categories: kinds(),
                    series: io_bars(runs, &kiops),
                },
                thr_marks.as_ref(),
            ),
        ],
    }
}

/// Reset latency (ms) in each condition: p50 and p99 of each run.
fn reset_bars(runs: &Runs<'_>) -> BarSeries {
    let mut out = Vec::new();
    for (label, r) in runs {
        for (stat, name) in [(Stat::P50, "p50"), (Stat::P99, "p99")] {
            out.push((
                run_name(label, name),
                RESET_CONDITIONS
                    .iter()
                    .map(|c| {
                        r.point(&format!("reset_interference/reset/{c}"))
                            .map(|p| stat.of(p) / 1000.0)
                    })
                    .collect::<Vec<_>>(),
            ));
        }
    }
    out
}

/// The I/O of each kind, for each run and condition: a series per
/// statistic `(name, value)`, named by the statistic and the condition
/// (the condition alone for an empty name).
fn io_bars(runs: &Runs<'_>, stats: &[BarStat<'_>]) -> BarSeries {
    let mut out = Vec::new();
    for (label, r) in runs {
        for cond in IO_CONDITIONS {
            for &(stat, of) in stats {
                let name =
                    if stat.is_empty() { cond.to_string() } else { format!("{stat} {cond}") };
                out.push((
                    run_name(label, &name),
                    IO_KINDS
                        .iter()
                        .map(|k| r.point(&format!("reset_interference/{k}/{cond}")).map(of))
                        .collect::<Vec<_>>(),
                ));
            }
        }
    }
    out
}

/// The drive's activity over the run: per-die utilization and zone states.
fn activity_section(a: &super::activity::Activity) -> Section {
    let mut text = format!(
        "From the emulator's trace events. Left: each die's busy fraction (reads, programs, \
         erases) in buckets of {} of model time; right: the state of the {} zones whose state \
         changed, at the end of each bucket",
        super::heatmap::duration(a.bucket_ns as f64),
        a.zones_touched
    );
    if a.zone_rows.iter().any(|r| r.first_zone != r.last_zone) {
        text.push_str(" (zones binned into rows; a row shows its most active zone)");
    }
    text.push_str(
        ". Colours: white empty, orange implicitly opened, red explicitly opened, purple \
         closed, green full, brown read only, black offline.",
    );
    if a.transitions_dropped > 0 {
        text.push_str(&format!(" {} later transitions were not drawn.", a.transitions_dropped));
    }
    Section {
        title: "Inside the drive: die utilization and zone states".into(),
        text,
        charts: vec![super::heatmap::die_timeline(a), super::heatmap::zone_map(a)],
    }
}

#[cfg(test)]
mod tests {
    use super::super::reference;
    use super::super::results::test_runs::{point, run};
    use super::*;

    /// The charts of a page, by title.
    fn chart<'a>(page: &'a str, title: &str) -> &'a str {
        page.split("<svg")
            .find(|svg| svg.contains(&format!(">\n{title}\n</text>")))
            .unwrap_or_else(|| panic!("no chart {title:?}"))
    }

    #[test]
    fn plots_draw_the_reference_over_the_measured_curves() {
        let mut r = run(vec![
            point("qd1/write/4KiB", "write", 11_000, 88_000.0),
            point("qd1/write/8KiB", "write", 12_000, 80_000.0),
            point("qd1/append/4KiB", "append", 15_000, 66_000.0),
            point("qd1/read/4KiB", "read", 70_000, 14_000.0),
        ]);
        let plain = html(&r);
        for title in ["QD 1 latency by request size", "QD 1 IOPS by request size"] {
            assert_eq!(plot::diamonds(chart(&plain, title)), 0, "{title}");
        }
        assert!(!plain.contains("reference: zn540"));

        let zn540 = reference::for_profile("zn540").unwrap();
        r.reference = Some(reference::table(&zn540, &r));
        let page = html(&r);
        // Means and p99 of 4 KiB writes and appends, the read mean, and
        // the legend's diamond; no p95 (not plotted).
        let lat = chart(&page, "QD 1 latency by request size");
        assert_eq!(plot::diamonds(lat), 5 + 1, "{lat}");
        assert_eq!(lat.matches("reference: zn540").count(), 1);
        // KIOPS of 4 and 8 KiB writes and of 4 KiB appends.
        assert_eq!(plot::diamonds(chart(&page, "QD 1 IOPS by request size")), 3 + 1);
        // p50, p95, p99 of writes and appends, p50 and p95 of reads.
        assert_eq!(plot::diamonds(chart(&page, "Latency CCDF: QD 1, 4 KiB")), 8 + 1);
        assert!(page.contains("Hollow diamonds"));

        // The comparison page draws A's reference over A and B.
        let b = run(vec![point("qd1/write/4KiB", "write", 12_000, 80_000.0)]);
        let cmp = super::super::compare::html(&r, "a", &b, "b");
        assert_eq!(plot::diamonds(chart(&cmp, "QD 1 IOPS by request size")), 3 + 1);
        let cmp = super::super::compare::html(&b, "b", &r, "a");
        assert_eq!(plot::diamonds(chart(&cmp, "QD 1 IOPS by request size")), 0);
    }

    #[test]
    fn a_reference_ceiling_is_drawn_where_a_series_has_no_reference_points() {
        let mut points = Vec::new();
        for (qd, iops) in [(1, 66_000.0), (4, 130_000.0)] {
            let mut p = point(&format!("intra_zone/append/4KiB/qd={qd}"), "append", 15_000, iops);
            p.queue_depth = Some(qd);
            points.push(p);
        }
        let mut r = run(points);
        let zn540 = reference::for_profile("zn540").unwrap();
        r.reference = Some(reference::table(&zn540, &r));
        let page = html(&r);
        let kiops = chart(&page, "Appends to one zone: IOPS by queue depth");
        assert!(kiops.contains("reference ceiling: zn540"), "{kiops}");
        assert_eq!(plot::diamonds(kiops), 0);
        // Latency has no reference figure of this series: nothing.
        let lat = chart(&page, "Appends to one zone: latency by queue depth");
        assert!(!lat.contains("reference"), "{lat}");
    }
}
