//! Two runs side by side: every figure of either, with B / A.

use std::collections::HashMap;
use std::fmt::Write as _;

use super::html::{esc, ratio_class, Page, Table};
use super::report::{self, fmt};
use super::results::Results;

/// One figure of the comparison.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Figure name.
    pub figure: String,
    /// Its value in run A.
    pub a: Option<f64>,
    /// Its value in run B.
    pub b: Option<f64>,
    /// B / A, when both exist and A is not 0.
    pub ratio: Option<f64>,
}

/// Every figure of two runs, A's order first, then those only B has.
pub fn compare(a: &Results, b: &Results) -> Vec<Row> {
    let fa = a.figures();
    let fb = b.figures();
    let mb: HashMap<&str, f64> = fb.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    let ma: HashMap<&str, f64> = fa.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    let row = |figure: &str, a: Option<f64>, b: Option<f64>| Row {
        figure: figure.to_string(),
        a,
        b,
        ratio: match (a, b) {
            (Some(x), Some(y)) if x != 0.0 => Some(y / x),
            _ => None,
        },
    };
    let mut rows: Vec<Row> =
        fa.iter().map(|(k, v)| row(k, Some(*v), mb.get(k.as_str()).copied())).collect();
    rows.extend(
        fb.iter()
            .filter(|(k, _)| !ma.contains_key(k.as_str()))
            .map(|(k, v)| row(k, None, Some(*v))),
    );
    rows
}

/// The comparison as a text table: figure, A, B, B/A.
pub fn to_text(rows: &[Row]) -> String {
    let width = rows.iter().map(|r| r.figure.len()).max().unwrap_or(6).max(6);
    let cell = |v: Option<f64>| v.map_or_else(|| "-".to_string(), fmt);
    let mut s = format!("{:<width$} {:>12} {:>12} {:>8}\n", "figure", "A", "B", "B/A");
    for r in rows {
        let _ = writeln!(
            s,
            "{:<width$} {:>12} {:>12} {:>8}",
            r.figure,
            cell(r.a),
            cell(r.b),
            r.ratio.map_or_else(|| "-".to_string(), |q| format!("{q:.3}"))
        );
    }
    s
}

/// A page with both runs drawn on the same axes (A solid, B dashed), A's
/// reference (if it has one) as hollow diamonds over them, and the table
/// of every figure.
pub fn html(a: &Results, a_name: &str, b: &Results, b_name: &str) -> String {
    let rows = compare(a, b);
    let mut page = Page::new("ZNS characterization: comparison", "Comparison");
    let mut runs = Table::new("", &["", "run", "device", "clock", "suite"]);
    for (tag, name, r) in [("A", a_name, a), ("B", b_name, b)] {
        runs.row(&format!(
            "<th>{tag}</th><td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
            esc(name),
            esc(&r.device.uri),
            esc(&r.device.clock),
            esc(&r.suite)
        ));
    }
    page.push(&runs.finish());
    let overlay = a.reference.as_ref().map(report::Overlay::of);
    page.note(&format!(
        "Charts: A solid, B dashed{}.",
        overlay.as_ref().map_or_else(String::new, |o| format!(
            "; hollow diamonds and dotted ceilings: A's reference ({})",
            esc(&o.label)
        ))
    ));
    for s in report::sections_with(&[("A", a), ("B", b)], overlay.as_ref()) {
        page.section(&s);
    }
    page.heading("Every figure");
    page.note("B/A more than 25% away from 1 is marked.");
    let mut figures = Table::new("", &["figure", "A", "B", "B/A"]);
    for r in &rows {
        let (ratio, class) = match r.ratio {
            Some(q) => (format!("{q:.3}"), ratio_class(q)),
            None => ("-".into(), ""),
        };
        figures.row(&format!(
            "<td><code>{}</code></td><td>{}</td><td>{}</td><td class=\"{class}\">{ratio}</td>",
            esc(&r.figure),
            r.a.map_or_else(|| "-".to_string(), fmt),
            r.b.map_or_else(|| "-".to_string(), fmt),
        ));
    }
    page.push(&figures.finish());
    page.finish()
}

#[cfg(test)]
mod tests {
    use super::super::results::test_runs::{point, run};
    use super::*;

    #[test]
    fn figures_pair_up_with_ratios() {
        let a = run(vec![
            point("qd1/write/4KiB", "write", 10_000, 100_000.0),
            point("zone_mgmt/reset/full", "reset", 2_000_000, 500.0),
        ]);
        let b = run(vec![
            point("qd1/write/4KiB", "write", 20_000, 50_000.0),
            point("qd1/read/4KiB", "read", 70_000, 14_000.0),
        ]);
        let rows = compare(&a, &b);
        let get = |f: &str| rows.iter().find(|r| r.figure == f).cloned().expect(f);
        let mean = get("qd1/write/4KiB:mean_us");
        assert!((mean.a.unwrap() - 10.0).abs() < 0.02);
        assert!((mean.b.unwrap() - 20.0).abs() < 0.04);
        assert!((mean.ratio.unwrap() - 2.0).abs() < 0.01);
        let k = get("qd1/write/4KiB:kiops");
        assert!((k.ratio.unwrap() - 0.5).abs() < 1e-9);
        // Only in A, only in B.
        let reset = get("zone_mgmt/reset/full:p50_us");
        assert!(reset.b.is_none() && reset.ratio.is_none());
        let read = get("qd1/read/4KiB:p99_us");
        assert!(read.a.is_none() && read.b.is_some());
        // Zone management has no throughput figures.
        assert!(!rows.iter().any(|r| r.figure == "zone_mgmt/reset/full:kiops"));
        assert_eq!(get("ceiling/write_mib_s").ratio, Some(1.0));
        // A's figures first, in A's order.
        assert_eq!(rows[0].figure, "qd1/write/4KiB:mean_us");
        assert!(rows.last().unwrap().figure.starts_with("qd1/read/4KiB"));
        let text = to_text(&rows);
        assert!(text.lines().next().unwrap().contains("B/A"));
        assert!(text.contains("qd1/write/4KiB:mean_us"));
        let page = html(&a, "a.json", &b, "b.json");
        assert!(page.contains("<svg") && page.contains("Every figure"));
    }

    #[test]
    fn a_run_against_itself_is_all_ones() {
        let a = run(vec![point("qd1/write/4KiB", "write", 12_345, 81_000.0)]);
        for r in compare(&a, &a) {
            let q = r.ratio.expect("both present");
            assert!((q - 1.0).abs() < 1e-12, "{r:?}");
        }
    }
}
