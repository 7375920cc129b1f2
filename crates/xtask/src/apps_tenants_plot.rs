//! The tenants' figures drawn (`apps-tenants.svg`): a panel per phase,
//! each tenant's db_bench throughput (top row) and p99 latency (bottom
//! row), eZNS's elastic mode beside static striping, a pair of bars per
//! tenant that ran in the phase.

use std::path::Path;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde_json::Value;

use crate::apps_tenants::{MODES, PHASES, TENANTS};
use crate::{Error, Result};

/// The two modes' colours (the characterization charts' first two).
const COLORS: [RGBColor; 2] = [RGBColor(31, 119, 180), RGBColor(214, 39, 40)];

/// One figure of every tenant that ran in a phase, per mode.
struct Panel {
    title: String,
    axis: &'static str,
    /// (tenant, [elastic, static]); a mode without the figure is 0.
    bars: Vec<(&'static str, [f64; 2])>,
}

/// The panels of report `r` (`apps-tenants.json`): throughput per phase,
/// then p99 per phase; phases no tenant ran in are left out.
fn panels(r: &Value) -> Vec<Panel> {
    let modes = &r["tenants"]["modes"];
    let figure = |field: &str, phase: &str, t: &str| -> [Option<f64>; 2] {
        MODES.map(|m| modes[m]["phases"][phase][t][field].as_f64())
    };
    let mut out = Vec::new();
    for (field, axis, name) in
        [("ops_per_sec", "operations/s", "ops/s"), ("p99_us", "p99 latency (µs)", "p99")]
    {
        for phase in PHASES {
            let bars: Vec<_> = TENANTS
                .iter()
                .filter_map(|t| {
                    let [e, s] = figure(field, phase, t);
                    (e.is_some() || s.is_some()).then(|| (*t, [e.unwrap_or(0.0), s.unwrap_or(0.0)]))
                })
                .collect();
            if !bars.is_empty() {
                out.push(Panel { title: format!("{phase}: {name}"), axis, bars });
            }
        }
    }
    out
}

/// Draws report `r`'s tenants at `path`; fails when the report has no
/// tenant figures.
pub fn plot(r: &Value, path: &Path) -> Result<()> {
    let panels = panels(r);
    if panels.is_empty() {
        return Err(Error::new(format!("{}: the report has no tenant figures", path.display())));
    }
    let cols = panels.len().div_ceil(2).max(1);
    draw(&panels, cols, path).map_err(|e| Error::new(format!("{}: {e}", path.display())))
}

fn draw(
    panels: &[Panel],
    cols: usize,
    path: &Path,
) -> std::result::Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::new(path, (340 * cols as u32, 2 * 340 + 40)).into_drawing_area();
    root.fill(&WHITE)?;
    let (legend, body) = root.split_vertically(40);
    for (i, m) in MODES.iter().enumerate() {
        let x = 20 + 160 * i as i32;
        legend.draw(&Rectangle::new([(x, 14), (x + 16, 28)], COLORS[i].filled()))?;
        legend.draw(&Text::new(m.to_string(), (x + 22, 14), ("sans-serif", 15)))?;
    }
    let rows = panels.len().div_ceil(cols);
    let areas = body.split_evenly((rows, cols));
    for (area, p) in areas.iter().zip(panels) {
        let top = p.bars.iter().flat_map(|(_, v)| *v).fold(1.0, f64::max) * 1.15;
        let n = p.bars.len();
        let mut chart = ChartBuilder::on(area)
            .caption(&p.title, ("sans-serif", 15))
            .margin(10)
            .x_label_area_size(28)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..n as f64, 0.0..top)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_desc(p.axis)
            .label_style(("sans-serif", 12))
            .draw()?;
        chart.draw_series(p.bars.iter().enumerate().flat_map(|(i, (_, v))| {
            (0..2).map(move |m| {
                let x0 = i as f64 + 0.1 + 0.4 * m as f64;
                Rectangle::new([(x0, 0.0), (x0 + 0.4, v[m])], COLORS[m].filled())
            })
        }))?;
        // Each pair named above its taller bar: the axis has no room
        // between ticks for names.
        let style = TextStyle::from(("sans-serif", 12)).pos(Pos::new(HPos::Center, VPos::Bottom));
        chart.draw_series(p.bars.iter().enumerate().map(|(i, (t, v))| {
            Text::new(format!("tenant {t}"), (i as f64 + 0.5, v[0].max(v[1])), style.clone())
        }))?;
    }
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn report() -> Value {
        let run = |ops: f64| json!({"ops_per_sec": ops, "p99_us": ops / 10.0});
        let mode = |k: f64| {
            json!({"phases": {
                "fill": {"a": run(100.0 * k), "b": run(110.0 * k), "c": run(90.0), "d": run(95.0)},
                "read-alone": {"a": run(900.0 * k)},
            }})
        };
        json!({"tenants": {"modes": {"elastic": mode(2.0), "static": mode(1.0)}}})
    }

    #[test]
    fn panels_hold_every_tenant_that_ran_in_each_phase() {
        let p = panels(&report());
        let titles: Vec<&str> = p.iter().map(|p| p.title.as_str()).collect();
        assert_eq!(titles, ["fill: ops/s", "read-alone: ops/s", "fill: p99", "read-alone: p99"]);
        assert_eq!(p[0].bars.len(), 4);
        assert_eq!(p[0].bars[0], ("a", [200.0, 100.0]));
        assert_eq!(p[1].bars, [("a", [1800.0, 900.0])]);
        assert_eq!(p[3].bars, [("a", [180.0, 90.0])]);
    }

    #[test]
    fn the_plot_is_drawn_and_an_empty_report_refused() {
        let dir = std::env::temp_dir().join(format!("apps-tenants-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.svg");
        plot(&report(), &path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.contains("read-alone: p99") && svg.contains("tenant a"), "{}", &svg[..200]);
        assert!(plot(&json!({}), &dir.join("empty.svg")).is_err());
        std::fs::remove_dir_all(&dir).ok();
    }
}
