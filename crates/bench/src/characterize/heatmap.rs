//! Heat maps of a run's [`Activity`] as SVG text, drawn with plotters:
//! die utilization over time (a row per die) and zone states over time
//! (a row per zone or bin of zones).

use plotters::prelude::*;

use super::activity::Activity;

/// Width of the plot, pixels.
const WIDTH: u32 = 640;

/// Model nanoseconds as text: 100µs, 1.6ms, 2.4s.
pub fn duration(ns: f64) -> String {
    let n = super::plot::number;
    if ns >= 1e9 {
        format!("{}s", n(ns / 1e9))
    } else if ns >= 1e6 {
        format!("{}ms", n(ns / 1e6))
    } else {
        format!("{}µs", n(ns / 1e3))
    }
}

/// A busy fraction as a colour: white (idle) to dark blue (busy).
fn busy_color(f: f64) -> RGBColor {
    let f = f.clamp(0.0, 1.0);
    let mix = |hi: f64, lo: f64| (hi + (lo - hi) * f).round() as u8;
    RGBColor(mix(255.0, 8.0), mix(255.0, 48.0), mix(255.0, 107.0))
}

/// A zone state letter ([`super::activity::ZoneRow::states`]) as a colour.
fn state_color(c: char) -> RGBColor {
    match c {
        'I' => RGBColor(255, 127, 14),
        'X' => RGBColor(214, 39, 40),
        'C' => RGBColor(148, 103, 189),
        'F' => RGBColor(44, 160, 44),
        'R' => RGBColor(140, 86, 75),
        'O' => RGBColor(0, 0, 0),
        _ => RGBColor(255, 255, 255),
    }
}

/// One heat map: `rows` rows of `cols` cells, `cell(row, col)` its
/// colour; rows labelled by `label`, time (seconds) along the bottom.
struct Map<'a> {
    title: &'a str,
    y_desc: &'a str,
    rows: usize,
    cols: usize,
    bucket_ns: u64,
    label: &'a dyn Fn(usize) -> String,
    cell: &'a dyn Fn(usize, usize) -> RGBColor,
}

fn draw(m: &Map<'_>, out: &mut String) -> Result<(), Box<dyn std::error::Error>> {
    let height = (m.rows as u32 * 10).clamp(120, 640) + 110;
    let span = (m.cols.max(1) as u64 * m.bucket_ns) as f64 / 1e9;
    {
        let root = SVGBackend::with_string(out, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut c = ChartBuilder::on(&root)
            .caption(m.title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(42)
            .y_label_area_size(90)
            .build_cartesian_2d(0f64..span, 0f64..m.rows.max(1) as f64)?;
        let rows = m.rows;
        let yfmt = |v: &f64| {
            let i = v.floor() as usize;
            // Rows from the top: row 0 at the top of the plot.
            if v.fract() == 0.0 && i < rows {
                (m.label)(rows - 1 - i)
            } else {
                String::new()
            }
        };
        let xfmt = |v: &f64| duration(*v * 1e9);
        c.configure_mesh()
            .disable_mesh()
            .x_labels(6)
            .y_labels(rows.clamp(1, 16))
            .x_label_formatter(&xfmt)
            .y_label_formatter(&yfmt)
            .x_desc("model time")
            .y_desc(m.y_desc)
            .label_style(("sans-serif", 12))
            .axis_desc_style(("sans-serif", 14))
            .draw()?;
        let w = m.bucket_ns as f64 / 1e9;
        let cells = (0..m.rows).flat_map(|r| {
            (0..m.cols).map(move |k| {
                let y = (m.rows - 1 - r) as f64;
                let x = k as f64 * w;
                Rectangle::new([(x, y), (x + w, y + 1.0)], (m.cell)(r, k).filled())
            })
        });
        c.draw_series(cells)?;
        root.present()?;
    }
    Ok(())
}

fn svg(m: &Map<'_>) -> String {
    let mut s = String::new();
    if let Err(e) = draw(m, &mut s) {
        tracing::warn!(title = m.title, error = %e, "chart not drawn");
        return String::new();
    }
    s
}

/// Each die's busy fraction over the run.
pub fn die_timeline(a: &Activity) -> String {
    let cols = a.die_busy.first().map_or(0, Vec::len);
    svg(&Map {
        title: "Die utilization over time",
        y_desc: "die",
        rows: a.die_busy.len(),
        cols,
        bucket_ns: a.bucket_ns,
        label: &|r| format!("die {r}"),
        cell: &|r, k| busy_color(a.die_busy[r][k]),
    })
}

/// Each touched zone's (or bin of zones') state over the run.
pub fn zone_map(a: &Activity) -> String {
    let cols = a.zone_rows.first().map_or(0, |r| r.states.len());
    let letters: Vec<Vec<char>> = a.zone_rows.iter().map(|r| r.states.chars().collect()).collect();
    svg(&Map {
        title: "Zone states over time",
        y_desc: "zone",
        rows: a.zone_rows.len(),
        cols,
        bucket_ns: a.bucket_ns,
        label: &|r| {
            let z = &a.zone_rows[r];
            match z.first_zone == z.last_zone {
                true => format!("zone {}", z.first_zone),
                false => format!("zones {}-{}", z.first_zone, z.last_zone),
            }
        },
        cell: &|r, k| state_color(letters[r].get(k).copied().unwrap_or('E')),
    })
}

#[cfg(test)]
mod tests {
    use super::super::activity::ZoneRow;
    use super::*;

    #[test]
    fn maps_draw_a_cell_per_row_and_bucket_in_its_colour() {
        let a = Activity {
            start_ns: 0,
            bucket_ns: 1_000_000,
            die_busy: vec![vec![0.0, 1.0, 0.5], vec![1.0, 1.0, 1.0]],
            zone_rows: vec![ZoneRow { first_zone: 2, last_zone: 2, states: "IFE".into() }],
            zones_touched: 1,
            transitions_dropped: 0,
        };
        let dies = die_timeline(&a);
        assert!(dies.contains("Die utilization over time") && dies.contains("die 1"), "{dies}");
        // Four busy cells in the darkest blue, one idle white one besides
        // the background.
        assert_eq!(dies.matches("fill=\"#08306B\"").count(), 4, "{dies}");
        let zones = zone_map(&a);
        assert!(zones.contains("zone 2"), "{zones}");
        assert_eq!(zones.matches("fill=\"#FF7F0E\"").count(), 1, "{zones}");
        assert_eq!(zones.matches("fill=\"#2CA02C\"").count(), 1, "{zones}");
        assert_eq!(duration(1_600_000.0), "1.6ms");
    }
}
