//! Real-time fidelity: the same suite measured over several paths to one
//! modelled drive, each path's headline figures set against the reference
//! path's (the in-process emulator on the virtual clock, where host time
//! costs no device time).
//!
//! | path | device |
//! |---|---|
//! | (a) | `emu:PROFILE` in process, virtual clock: the model's own figures |
//! | (b) | `emu:PROFILE,clock=real` in process |
//! | (c) | `emu:PROFILE,clock=real` behind `zns serve`, reached with `tcp:` |
//! | (d) | the same target from inside a guest, through the kernel (`ng:` or `zbd:`) |
//!
//! A figure a path carries (within [`TOLERANCE`] of (a)) is shown as its
//! ratio. One it does not carry is shown with the reason, never as if it
//! were the drive's: completions the emulator posted late (the host did
//! not collect them in time, so every latency and rate measured from them
//! is the host's), or, with every completion on time, what the path adds
//! (per-command latency outside the model, or a throughput the link or
//! the initiator holds below the device's).

use serde::{Deserialize, Serialize};

use super::results::{LateCompletions, Point, Results};

/// How far a path's figure may be from (a)'s and still count as carried.
pub const TOLERANCE: f64 = 0.10;

/// A point whose late completions exceed this fraction of its commands
/// does not carry its figures.
pub const LATE_FRACTION: f64 = 0.01;

/// The headline figures of the quick suite the table is made of.
pub const HEADLINE: &[&str] = &[
    "qd1/write/4KiB:mean_us",
    "qd1/append/4KiB:mean_us",
    "qd1/read/4KiB:mean_us",
    "read_qd/random/4KiB/qd=1:p99_us",
    "open/first_write/implicit:mean_us",
    "zone_mgmt/reset/full:p50_us",
    "zone_mgmt/finish/50%:p50_us",
    "ceiling/write_mib_s",
    "inter_zone/write/4KiB:max_kiops",
    "intra_zone/append/4KiB:max_kiops",
    "read_qd/random/4KiB:max_kiops",
    "read_qd/sequential/128KiB:max_mib_s",
];

/// One path's run.
///
/// Thread safety: plain data.
#[derive(Debug, Clone)]
pub struct PathRun {
    /// Short name: `a`, `b`, `c`, `d`.
    pub path: String,
    /// What the path is, for people.
    pub label: String,
    /// Its results.
    pub results: Results,
}

/// A figure on one path.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Cell {
    /// The path (`a`, `b`, ...).
    pub path: String,
    /// The figure measured, if the path measured it.
    pub value: Option<f64>,
    /// `value` over (a)'s.
    pub ratio: Option<f64>,
    /// `reference` (path a), `carried` (within [`TOLERANCE`]), `late`
    /// (late completions), `path_bound` (what the path adds), `missing`.
    pub verdict: String,
    /// Why it is not carried, in one sentence (empty when it is).
    pub why: String,
}

/// One headline figure on every path.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Row {
    /// Figure name (`<point id>:<stat>` or a summary figure).
    pub figure: String,
    /// One cell per path, in the paths' order.
    pub cells: Vec<Cell>,
}

/// The fidelity table.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Table {
    /// `(path, label, device URI, clock, dilation)` of each path.
    pub paths: Vec<PathInfo>,
    /// One row per headline figure.
    pub rows: Vec<Row>,
    /// [`TOLERANCE`].
    pub tolerance: f64,
}

/// A path of the table.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PathInfo {
    /// `a`, `b`, ...
    pub path: String,
    /// What it is.
    pub label: String,
    /// The device URI the suite ran on.
    pub uri: String,
    /// Its clock.
    pub clock: String,
    /// The dilation its figures were converted from.
    pub dilation: f64,
    /// The emulator's late completions over the whole run, when counted.
    pub late: Option<LateCompletions>,
    /// Wall-clock seconds the run took.
    pub wall_s: f64,
}

/// The point a figure comes from: the point named, or for a series' or
/// ceiling's maximum the point that gave it.
pub fn source_point<'a>(r: &'a Results, figure: &str) -> Option<&'a Point> {
    if figure == "ceiling/write_mib_s" {
        return r
            .points
            .iter()
            .filter(|p| matches!(p.op.as_str(), "write" | "append") && p.condition.is_none())
            .max_by(|a, b| a.mib_s.total_cmp(&b.mib_s));
    }
    let (name, stat) = figure.rsplit_once(':')?;
    if let Some(p) = r.point(name) {
        return Some(p);
    }
    let value = |p: &Point| if stat.ends_with("kiops") { p.iops } else { p.mib_s };
    let prefix = format!("{name}/");
    r.points
        .iter()
        .filter(|p| p.id.starts_with(&prefix))
        .max_by(|a, b| value(a).total_cmp(&value(b)))
}

/// The figure `name` of a run.
pub fn figure(r: &Results, name: &str) -> Option<f64> {
    r.figure(name)
}

/// True for figures where more is slower (latencies).
fn is_latency(name: &str) -> bool {
    name.ends_with("_us")
}

/// Why path `run`'s value of `name` (ratio `ratio` to (a)) is not the
/// drive's, or `None` when it is carried.
fn judge(run: &PathRun, name: &str, ratio: f64) -> Option<(&'static str, String)> {
    let late = source_point(&run.results, name).and_then(|p| p.late);
    if let Some(l) = late.filter(|l| l.late_fraction() > LATE_FRACTION) {
        return Some((
            "late",
            format!(
                "{} of {} completions of its point were posted late (p99 {:.1} µs, max {:.1} µs \
                 past due): the host did not collect them in time, so the figure is the host's",
                l.late, l.completions, l.p99_us, l.max_us
            ),
        ));
    }
    if (ratio - 1.0).abs() <= TOLERANCE {
        return None;
    }
    let counted = match late {
        Some(l) if l.completions == 0 => "no completion of its point was counted".to_string(),
        Some(l) if l.late == 0 => "every completion was posted on time".to_string(),
        Some(l) => format!("{} of {} completions late (under 1 %)", l.late, l.completions),
        None => "late completions are not counted on this path".to_string(),
    };
    let why = match (is_latency(name), ratio > 1.0) {
        (true, true) => format!(
            "{counted}; the path adds latency outside the model (host CPU per command{})",
            if run.path == "b" { "" } else { ", the transport and the target" }
        ),
        (false, false) => format!(
            "{counted}; the device received commands more slowly than it serves them: the \
             initiator{} is the bottleneck",
            if run.path == "b" { "'s CPU" } else { " or the link" }
        ),
        _ => format!("{counted}; the path reports the device faster than modelled"),
    };
    Some(("path_bound", why))
}

/// Builds the table from the paths' runs; the first is the reference (a).
pub fn table(runs: &[PathRun]) -> Table {
    let paths = runs
        .iter()
        .map(|r| PathInfo {
            path: r.path.clone(),
            label: r.label.clone(),
            uri: r.results.device.uri.clone(),
            clock: r.results.device.clock.clone(),
            dilation: r.results.device.dilation,
            late: r.results.host.late_completions,
            wall_s: r.results.host.wall_ns as f64 / 1e9,
        })
        .collect();
    let mut rows = Vec::new();
    for name in HEADLINE {
        let base = runs.first().and_then(|r| figure(&r.results, name));
        let cells = runs
            .iter()
            .enumerate()
            .map(|(i, run)| {
                let value = figure(&run.results, name);
                let ratio = match (value, base) {
                    (Some(v), Some(b)) if b != 0.0 => Some(v / b),
                    _ => None,
                };
                let (verdict, why) = match (i, value, ratio) {
                    (0, Some(_), _) => ("reference", String::new()),
                    (_, None, _) | (_, _, None) => {
                        ("missing", "the path did not measure this figure".to_string())
                    }
                    (_, Some(_), Some(q)) => match judge(run, name, q) {
                        Some((v, why)) => (v, why),
                        None => ("carried", String::new()),
                    },
                };
                Cell { path: run.path.clone(), value, ratio, verdict: verdict.to_string(), why }
            })
            .collect();
        rows.push(Row { figure: name.to_string(), cells });
    }
    Table { paths, rows, tolerance: TOLERANCE }
}

/// The table as text: one line per figure, each path's ratio to (a) (or
/// `late` / `path` where it does not carry it), reasons below.
pub fn to_text(t: &Table) -> String {
    let mut s = String::new();
    for p in &t.paths {
        s += &format!(
            "({}) {}: {} (clock {}{}), {:.1} s wall{}\n",
            p.path,
            p.label,
            p.uri,
            p.clock,
            if p.dilation != 1.0 { format!(", dilation {}", p.dilation) } else { String::new() },
            p.wall_s,
            match &p.late {
                Some(l) => format!(
                    "; late completions: {} of {} (max {:.1} µs)",
                    l.late, l.completions, l.max_us
                ),
                None => "; late completions not counted".to_string(),
            }
        );
    }
    s += &format!("{:<40} {:>12}", "figure", "(a)");
    for p in t.paths.iter().skip(1) {
        s += &format!(" {:>12}", format!("({})/(a)", p.path));
    }
    s += "\n";
    let mut notes = Vec::new();
    for row in &t.rows {
        let a = row.cells.first().and_then(|c| c.value);
        s +=
            &format!("{:<40} {:>12}", row.figure, a.map_or("-".to_string(), |v| format!("{v:.2}")));
        for c in row.cells.iter().skip(1) {
            let shown = match (c.verdict.as_str(), c.ratio) {
                ("carried", Some(q)) => format!("{q:.3}"),
                ("late", _) => "late".to_string(),
                ("path_bound", Some(q)) => format!("{q:.3}*"),
                _ => "-".to_string(),
            };
            s += &format!(" {shown:>12}");
            if !c.why.is_empty() {
                notes.push(format!("  ({}) {}: {}", c.path, row.figure, c.why));
            }
        }
        s += "\n";
    }
    if !notes.is_empty() {
        s += &format!("not carried (* off by more than {:.0} %, or late):\n", t.tolerance * 100.0);
        for n in notes {
            s += &n;
            s += "\n";
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::super::results::test_runs;
    use super::*;

    fn path(name: &str, write_ns: u64, late: Option<LateCompletions>) -> PathRun {
        let mut p = test_runs::point("qd1/write/4KiB", "write", write_ns, 1e9 / write_ns as f64);
        p.late = late;
        PathRun { path: name.into(), label: name.into(), results: test_runs::run(vec![p]) }
    }

    #[test]
    fn carried_late_and_path_bound_figures_are_told_apart() {
        let on_time = LateCompletions { completions: 10, ..Default::default() };
        let late = LateCompletions { completions: 10, late: 5, max_us: 80.0, ..on_time };
        let t = table(&[
            path("a", 11_000, None),
            path("b", 11_500, Some(on_time)),
            path("c", 30_000, Some(on_time)),
            path("d", 11_000, Some(late)),
        ]);
        let row = t.rows.iter().find(|r| r.figure == "qd1/write/4KiB:mean_us").unwrap();
        let v: Vec<&str> = row.cells.iter().map(|c| c.verdict.as_str()).collect();
        assert_eq!(v, ["reference", "carried", "path_bound", "late"]);
        assert!(row.cells[2].why.contains("adds latency"), "{}", row.cells[2].why);
        assert!(row.cells[3].why.contains("5 of 10"), "{}", row.cells[3].why);
        let text = to_text(&t);
        assert!(text.contains("late") && text.contains("2.727*"), "{text}");
        // A figure no path measured is missing everywhere but not invented.
        let miss = t.rows.iter().find(|r| r.figure == "zone_mgmt/reset/full:p50_us").unwrap();
        assert!(miss.cells.iter().all(|c| c.value.is_none()));
    }
}
