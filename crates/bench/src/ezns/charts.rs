//! The SVG plots of `zns ezns bench`.

use super::results::EznsResults;
use crate::characterize::plot::{self, Axis, Bars, Chart, Scale, Series};

/// Every plot, `(file name, SVG text)`.
pub(crate) fn all(r: &EznsResults) -> Vec<(&'static str, String)> {
    vec![
        ("ezns-balloon-bandwidth.svg", balloon_bandwidth(r)),
        ("ezns-balloon-spares.svg", balloon_spares(r)),
        ("ezns-isolation.svg", isolation(r)),
        ("ezns-utilization.svg", utilization(r)),
        ("ezns-kv-throughput.svg", kv(r, "throughput (kops/s, device time)", |p| p.kops_s)),
        ("ezns-kv-p999.svg", kv(r, "p99.9 latency (us)", |p| p.p99_9_us)),
    ]
}

/// Legend name of a mode.
fn label(mode: &str) -> &'static str {
    if mode == "elastic" {
        "eZNS"
    } else {
        "static"
    }
}

fn time_chart(title: &str, y: &str, series: Vec<Series>) -> String {
    plot::line_chart(&Chart {
        title: title.to_string(),
        x: Axis::new("device time (ms)", Scale::Linear),
        y: Axis::new(y, Scale::Linear),
        series,
        y_from_zero: true,
        legend_lower: false,
    })
}

fn balloon_bandwidth(r: &EznsResults) -> String {
    let mut series = Vec::new();
    for (i, run) in r.balloon.runs.iter().enumerate() {
        let w = run.samples.iter().map(|s| (s.t_ms, s.writer_mib_s)).collect();
        let o = run.samples.iter().map(|s| (s.t_ms, s.others_mib_s)).collect();
        series.push(Series::new(format!("writer, {}", label(&run.mode)), w, i));
        series.push(Series::new(format!("3 others, {}", label(&run.mode)), o, i).dashed());
    }
    time_chart(
        &format!(
            "Writer bandwidth; others idle from {0} to {1} ms",
            r.balloon.phase_ms,
            2.0 * r.balloon.phase_ms
        ),
        "MiB/s",
        series,
    )
}

fn balloon_spares(r: &EznsResults) -> String {
    let mut series = Vec::new();
    for (i, run) in r.balloon.runs.iter().enumerate() {
        let lent = run.samples.iter().map(|s| (s.t_ms, s.lent_spares as f64)).collect();
        let width = run.samples.iter().map(|s| (s.t_ms, s.writer_width)).collect();
        series.push(Series::new(format!("spares lent, {}", label(&run.mode)), lent, i));
        series.push(
            Series::new(format!("writer stripe width, {}", label(&run.mode)), width, i).dashed(),
        );
    }
    time_chart("Spares lent to the writer and its stripe width", "zones", series)
}

fn isolation(r: &EznsResults) -> String {
    let categories: Vec<String> =
        ["no writer", "1 writer", "2 writers"].iter().map(|c| c.to_string()).collect();
    let mut series = Vec::new();
    for mode in ["static", "elastic"] {
        for (name, f) in [("p99", 0), ("p99.9", 1)] {
            let values = (0..=2)
                .map(|w| {
                    r.isolation.iter().find(|p| p.mode == mode && p.writers == w).map(|p| {
                        if f == 0 {
                            p.p99_us
                        } else {
                            p.p99_9_us
                        }
                    })
                })
                .collect();
            series.push((format!("{name}, {}", label(mode)), values));
        }
    }
    plot::bar_chart(&Bars {
        title: "Reader's 4 KiB read latency beside heavy writers".into(),
        y_label: "latency (us)".into(),
        categories,
        series,
    })
}

fn utilization(r: &EznsResults) -> String {
    let series = ["static", "elastic"]
        .iter()
        .map(|mode| {
            let values = (1..=4)
                .map(|n| {
                    r.utilization
                        .iter()
                        .find(|p| p.mode == *mode && p.tenants == n)
                        .map(|p| p.device_mib_s)
                })
                .collect();
            (label(mode).to_string(), values)
        })
        .collect();
    plot::bar_chart(&Bars {
        title: "Device write bandwidth by tenants writing".into(),
        y_label: "MiB/s".into(),
        categories: ["1 tenant", "2 tenants", "3 tenants", "4 tenants"]
            .iter()
            .map(|c| c.to_string())
            .collect(),
        series,
    })
}

fn kv(r: &EznsResults, what: &str, f: fn(&super::results::KvPoint) -> f64) -> String {
    let mixes = ["A", "B", "C", "F"];
    let series = ["static", "elastic"]
        .iter()
        .map(|mode| {
            let values = mixes
                .iter()
                .map(|m| r.kv.iter().find(|p| p.mode == *mode && p.mix == *m).map(f))
                .collect();
            (label(mode).to_string(), values)
        })
        .collect();
    plot::bar_chart(&Bars {
        title: format!("Key-value store, 4 tenants: {what}"),
        y_label: what.to_string(),
        categories: mixes.iter().map(|m| format!("YCSB {m}")).collect(),
        series,
    })
}
