//! Line and bar charts as SVG text, drawn with plotters.
//!
//! Logarithmic axes are drawn as linear axes over the logarithm of the
//! values, labelled with the values themselves: powers of two for queue
//! depths, zone counts and request sizes, powers of ten for latencies and
//! fractions.

use plotters::prelude::*;
use plotters::style::ShapeStyle;

/// Size of every chart, pixels.
const SIZE: (u32, u32) = (640, 380);

/// Series colours, in order.
pub(crate) const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// How an axis maps values.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// Linear.
    Linear,
    /// Logarithmic, ticks at powers of two.
    Log2,
    /// Logarithmic, ticks at powers of ten.
    Log10,
}

impl Scale {
    fn to(self, v: f64) -> Option<f64> {
        match self {
            Scale::Linear => v.is_finite().then_some(v),
            Scale::Log2 => (v > 0.0 && v.is_finite()).then(|| v.log2()),
            Scale::Log10 => (v > 0.0 && v.is_finite()).then(|| v.log10()),
        }
    }

    fn from(self, v: f64) -> f64 {
        match self {
            Scale::Linear => v,
            Scale::Log2 => v.exp2(),
            Scale::Log10 => 10f64.powf(v),
        }
    }
}

/// One axis.
#[derive(Debug, Clone)]
pub struct Axis {
    /// Its label.
    pub label: String,
    /// Its scale.
    pub scale: Scale,
    /// Formats a value (not its logarithm) for a tick.
    pub format: fn(f64) -> String,
}

impl Axis {
    /// An axis with numbers formatted compactly.
    pub fn new(label: &str, scale: Scale) -> Axis {
        Axis { label: label.to_string(), scale, format: number }
    }

    /// The same with its own tick format.
    pub fn with_format(mut self, format: fn(f64) -> String) -> Axis {
        self.format = format;
        self
    }
}

/// What a series is, and so how it is drawn.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Measured values: a line through dots.
    Measured,
    /// Reference values: hollow diamonds, no line. Every reference series
    /// of a chart with the same name shares one legend entry, so the
    /// legend says where the diamonds come from once, not per curve.
    Reference,
    /// A reference ceiling: a dotted horizontal line across the whole
    /// plot at the series' first `y` (its `x` is ignored); one legend
    /// entry per name, as for [`Role::Reference`].
    Ceiling,
}

/// One line of a chart.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// `(x, y)` values, drawn in order.
    pub points: Vec<(f64, f64)>,
    /// Colour index into the palette.
    pub color: usize,
    /// Dashed line (a second run in comparisons, or a tail percentile).
    pub dashed: bool,
    /// Measured, or reference points or ceiling.
    pub role: Role,
}

impl Series {
    /// A solid line.
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>, color: usize) -> Series {
        Series { name: name.into(), points, color, dashed: false, role: Role::Measured }
    }

    /// The same, dashed.
    pub fn dashed(mut self) -> Series {
        self.dashed = true;
        self
    }

    /// Reference points drawn as hollow diamonds in the colour of the
    /// measured series they belong to; `name` is the legend entry shared by
    /// all reference series of the chart with that name.
    pub fn reference(name: impl Into<String>, points: Vec<(f64, f64)>, color: usize) -> Series {
        Series { role: Role::Reference, ..Series::new(name, points, color) }
    }

    /// A reference ceiling at `y`: a dotted horizontal line across the
    /// plot.
    pub fn ceiling(name: impl Into<String>, y: f64, color: usize) -> Series {
        Series { role: Role::Ceiling, ..Series::new(name, vec![(0.0, y)], color) }
    }
}

/// Reference values for the bars of a [`Bars`] chart, drawn as hollow
/// diamonds at the top of the value they stand for.
///
/// Thread safety: plain data.
#[derive(Debug, Clone)]
pub struct BarMarks {
    /// Legend entry for the diamonds (`reference: ...`).
    pub name: String,
    /// One list per series of the chart, in its order, with one value per
    /// category (`None`: no reference value for that bar); missing lists
    /// mark nothing.
    pub values: Vec<Vec<Option<f64>>>,
}

impl BarMarks {
    /// True when no bar has a reference value.
    pub fn is_empty(&self) -> bool {
        self.values.iter().all(|v| v.iter().all(Option::is_none))
    }
}

/// Colour of the legend entry of reference diamonds and ceilings, which
/// stand for series of every colour.
const REFERENCE_LEGEND: RGBColor = RGBColor(80, 80, 80);

/// Half the width of a reference diamond, pixels.
const DIAMOND: i32 = 6;

/// A hollow diamond around `(0, 0)` in pixels, to be placed at a point.
fn diamond(col: RGBColor) -> PathElement<(i32, i32)> {
    let d = DIAMOND;
    PathElement::new(
        vec![(0, -d), (d, 0), (0, d), (-d, 0), (0, -d)],
        ShapeStyle::from(&col).stroke_width(2),
    )
}

/// A line chart.
#[derive(Debug, Clone)]
pub struct Chart {
    /// Title above the plot.
    pub title: String,
    /// Horizontal axis.
    pub x: Axis,
    /// Vertical axis.
    pub y: Axis,
    /// Lines.
    pub series: Vec<Series>,
    /// Start a linear vertical axis at zero.
    pub y_from_zero: bool,
    /// Put the legend in the lower left corner instead of the upper left
    /// (for curves that fall from the upper left, such as CCDFs).
    pub legend_lower: bool,
}

/// Compact tick text: 0.5, 12, 1.5k, 2M.
pub fn number(v: f64) -> String {
    let a = v.abs();
    let trim = |s: String| {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    };
    if a >= 1e6 {
        trim(format!("{:.1}", v / 1e6)) + "M"
    } else if a >= 1e4 {
        trim(format!("{:.1}", v / 1e3)) + "k"
    } else if a >= 100.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        trim(format!("{v:.2}"))
    } else if a >= 0.001 {
        trim(format!("{v:.4}"))
    } else {
        format!("{v:.0e}")
    }
}

/// Tick text for byte counts: 4K, 128K, 1M.
pub fn bytes(v: f64) -> String {
    let v = v.round();
    if v >= 1048576.0 {
        number(v / 1048576.0) + "M"
    } else if v >= 1024.0 {
        number(v / 1024.0) + "K"
    } else {
        number(v)
    }
}

fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

fn escape(s: &str) -> String {
    s.replace('&', "and").replace('<', "(").replace('>', ")")
}

/// A range over transformed values, padded; logarithmic ones are widened
/// to whole powers.
fn range(values: &[f64], scale: Scale, from_zero: bool, headroom: f64) -> (f64, f64) {
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !lo.is_finite() || !hi.is_finite() {
        return (0.0, 1.0);
    }
    match scale {
        Scale::Linear => {
            let lo = if from_zero { lo.min(0.0) } else { lo };
            let span = (hi - lo).abs().max(hi.abs() * 0.1).max(1e-9);
            let lo = if from_zero && lo >= 0.0 { lo } else { lo - span * 0.05 };
            (lo, hi + span * headroom)
        }
        Scale::Log2 | Scale::Log10 => {
            let (a, b) = (lo.floor(), hi.ceil());
            if a == b {
                (a - 0.5, b + 0.5)
            } else {
                (a - 0.1, b + 0.1)
            }
        }
    }
}

fn label_count(scale: Scale, (lo, hi): (f64, f64)) -> usize {
    match scale {
        Scale::Linear => 8,
        _ => ((hi - lo).round() as usize + 1).clamp(2, 14),
    }
}

/// Draws `chart` and returns the SVG text; an empty chart says so.
pub fn line_chart(chart: &Chart) -> String {
    let mut svg = String::new();
    if let Err(e) = draw_lines(chart, &mut svg) {
        tracing::warn!(title = %chart.title, error = %e, "chart not drawn");
        return String::new();
    }
    svg
}

fn draw_lines(chart: &Chart, out: &mut String) -> Result<(), Box<dyn std::error::Error>> {
    let (xs, ys) = (chart.x.scale, chart.y.scale);
    let series: Vec<(&Series, Vec<(f64, f64)>)> = chart
        .series
        .iter()
        .map(|s| {
            let pts = s
                .points
                .iter()
                .filter_map(|&(x, y)| match s.role {
                    // A ceiling spans the plot: only its height counts.
                    Role::Ceiling => Some((0.0, ys.to(y)?)),
                    _ => Some((xs.to(x)?, ys.to(y)?)),
                })
                .collect::<Vec<_>>();
            (s, pts)
        })
        .filter(|(_, p)| !p.is_empty())
        .collect();
    let all_x: Vec<f64> = series
        .iter()
        .filter(|(s, _)| s.role != Role::Ceiling)
        .flat_map(|(_, p)| p.iter().map(|q| q.0))
        .collect();
    let all_y: Vec<f64> = series.iter().flat_map(|(_, p)| p.iter().map(|q| q.1)).collect();
    let xr = range(&all_x, xs, false, 0.05);
    // Reference series share one legend entry per name.
    let mut shared_labels: Vec<&str> = Vec::new();
    for (s, _) in &series {
        if s.role != Role::Measured && !shared_labels.contains(&s.name.as_str()) {
            shared_labels.push(&s.name);
        }
    }
    let legend_lines =
        series.iter().filter(|(s, _)| s.role == Role::Measured).count() + shared_labels.len();
    // Room above the curves for the legend, one line per entry.
    let headroom = (0.08 + 0.055 * legend_lines as f64).min(0.6);
    let yr = range(&all_y, ys, chart.y_from_zero, headroom);
    {
        let root = SVGBackend::with_string(out, SIZE).into_drawing_area();
        root.fill(&WHITE)?;
        let mut c = ChartBuilder::on(&root)
            .caption(escape(&chart.title), ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(42)
            .y_label_area_size(62)
            .build_cartesian_2d(xr.0..xr.1, yr.0..yr.1)?;
        let (xf, yf) = (chart.x.format, chart.y.format);
        let xfmt = move |v: &f64| (xf)(xs.from(*v));
        let yfmt = move |v: &f64| (yf)(ys.from(*v));
        c.configure_mesh()
            .x_desc(escape(&chart.x.label))
            .y_desc(escape(&chart.y.label))
            .x_labels(label_count(xs, xr))
            .y_labels(label_count(ys, yr))
            .x_label_formatter(&xfmt)
            .y_label_formatter(&yfmt)
            .label_style(("sans-serif", 14))
            .axis_desc_style(("sans-serif", 15))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()?;
        if series.is_empty() {
            root.draw(&Text::new(
                "no data",
                (SIZE.0 as i32 / 2 - 30, SIZE.1 as i32 / 2),
                ("sans-serif", 16),
            ))?;
        }
        let mut labelled: Vec<&str> = Vec::new();
        for (s, pts) in &series {
            let col = color(s.color);
            let style = ShapeStyle::from(&col).stroke_width(2);
            match s.role {
                Role::Measured => {}
                Role::Reference => {
                    let drawn =
                        c.draw_series(pts.iter().map(|&p| EmptyElement::at(p) + diamond(col)))?;
                    if !labelled.contains(&s.name.as_str()) {
                        labelled.push(&s.name);
                        drawn.label(escape(&s.name)).legend(|(x, y)| {
                            EmptyElement::at((x + 9, y)) + diamond(REFERENCE_LEGEND)
                        });
                    }
                    continue;
                }
                Role::Ceiling => {
                    let y = pts[0].1;
                    let dotted = ShapeStyle::from(&col).stroke_width(2);
                    let drawn = c.draw_series(DashedLineSeries::new(
                        vec![(xr.0, y), (xr.1, y)],
                        3,
                        5,
                        dotted,
                    ))?;
                    if !labelled.contains(&s.name.as_str()) {
                        labelled.push(&s.name);
                        drawn.label(escape(&s.name)).legend(|(x, y)| {
                            let dot = |from: i32| {
                                PathElement::new(
                                    vec![(from, 0), (from + 3, 0)],
                                    ShapeStyle::from(&REFERENCE_LEGEND).stroke_width(2),
                                )
                            };
                            EmptyElement::at((x, y)) + dot(0) + dot(8) + dot(16)
                        });
                    }
                    continue;
                }
            }
            if s.dashed {
                c.draw_series(DashedLineSeries::new(pts.clone(), 6, 4, style))?
                    .label(escape(&s.name))
                    .legend(move |(x, y)| {
                        PathElement::new(
                            vec![(x, y), (x + 8, y)],
                            ShapeStyle::from(&col).stroke_width(3),
                        )
                    });
            } else {
                c.draw_series(LineSeries::new(pts.clone(), style))?.label(escape(&s.name)).legend(
                    move |(x, y)| {
                        PathElement::new(
                            vec![(x, y), (x + 18, y)],
                            ShapeStyle::from(&col).stroke_width(3),
                        )
                    },
                );
            }
            if pts.len() <= 40 {
                c.draw_series(pts.iter().map(|&p| Circle::new(p, 3, col.filled())))?;
            }
        }
        if !series.is_empty() {
            c.configure_series_labels()
                .position(if chart.legend_lower {
                    SeriesLabelPosition::LowerLeft
                } else {
                    SeriesLabelPosition::UpperLeft
                })
                .background_style(WHITE.mix(0.85))
                .border_style(RGBColor(200, 200, 200))
                .label_font(("sans-serif", 14))
                .draw()?;
        }
        root.present()?;
    }
    Ok(())
}

/// A bar chart: for each category, one bar per series.
#[derive(Debug, Clone)]
pub struct Bars {
    /// Title.
    pub title: String,
    /// Vertical axis label.
    pub y_label: String,
    /// Category names, left to right.
    pub categories: Vec<String>,
    /// `(series name, value per category)`; `None` leaves a gap.
    pub series: Vec<(String, Vec<Option<f64>>)>,
}

/// Width of a bar chart: wide enough for its category names.
fn bars_width(bars: &Bars) -> u32 {
    let longest = bars.categories.iter().map(|c| c.len()).max().unwrap_or(0) as u32;
    let need = 100 + bars.categories.len() as u32 * (longest * 7 + 16);
    need.clamp(SIZE.0, 1280)
}

/// Draws `bars` and returns the SVG text.
pub fn bar_chart(bars: &Bars) -> String {
    bar_chart_marked(bars, None)
}

/// Draws `bars` with reference values marked on them, and returns the SVG
/// text; without marks (or with none set) the same as [`bar_chart`].
pub fn bar_chart_marked(bars: &Bars, marks: Option<&BarMarks>) -> String {
    let marks = marks.filter(|m| !m.is_empty());
    let mut svg = String::new();
    if let Err(e) = draw_bars(bars, marks, &mut svg) {
        tracing::warn!(title = %bars.title, error = %e, "chart not drawn");
        return String::new();
    }
    svg
}

fn draw_bars(
    bars: &Bars,
    marks: Option<&BarMarks>,
    out: &mut String,
) -> Result<(), Box<dyn std::error::Error>> {
    let n = bars.categories.len().max(1);
    let marked = marks.iter().flat_map(|m| m.values.iter().flatten().flatten().copied());
    let hi = bars
        .series
        .iter()
        .flat_map(|(_, v)| v.iter().flatten().copied())
        .chain(marked)
        .fold(0.0f64, f64::max)
        .max(1e-9);
    {
        let root = SVGBackend::with_string(out, (bars_width(bars), SIZE.1)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut c = ChartBuilder::on(&root)
            .caption(escape(&bars.title), ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(42)
            .y_label_area_size(62)
            .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0f64..hi * 1.3)?;
        let cats = bars.categories.clone();
        let xfmt = move |v: &f64| {
            let i = v.round();
            if (v - i).abs() < 1e-6 && i >= 0.0 {
                cats.get(i as usize).cloned().map(|s| escape(&s)).unwrap_or_default()
            } else {
                String::new()
            }
        };
        let yfmt = |v: &f64| number(*v);
        c.configure_mesh()
            .disable_x_mesh()
            .x_labels(n + 1)
            .x_label_formatter(&xfmt)
            .y_label_formatter(&yfmt)
            .y_desc(escape(&bars.y_label))
            .label_style(("sans-serif", 14))
            .axis_desc_style(("sans-serif", 15))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()?;
        let k = bars.series.len().max(1) as f64;
        let width = 0.8 / k;
        for (j, (name, values)) in bars.series.iter().enumerate() {
            let col = color(j);
            let rects = values.iter().enumerate().filter_map(|(i, v)| {
                let v = (*v)?;
                let x0 = i as f64 - 0.4 + j as f64 * width;
                Some(Rectangle::new([(x0, 0.0), (x0 + width * 0.92, v)], col.filled()))
            });
            c.draw_series(rects)?
                .label(escape(name))
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], col.filled()));
        }
        if let Some(m) = marks {
            // Each diamond sits on the centre of the bar it belongs to, in a
            // darker shade so that it shows on the bar as well as above it.
            let mut diamonds = Vec::new();
            for (j, values) in m.values.iter().enumerate().take(bars.series.len()) {
                for (i, v) in values.iter().enumerate().take(n) {
                    let Some(v) = *v else { continue };
                    let x = i as f64 - 0.4 + j as f64 * width + width * 0.46;
                    diamonds.push(EmptyElement::at((x, v)) + diamond(REFERENCE_LEGEND));
                }
            }
            c.draw_series(diamonds)?
                .label(escape(&m.name))
                .legend(|(x, y)| EmptyElement::at((x + 6, y)) + diamond(REFERENCE_LEGEND));
        }
        c.configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(200, 200, 200))
            .label_font(("sans-serif", 14))
            .draw()?;
        root.present()?;
    }
    Ok(())
}

/// Reference diamonds in `svg`: closed five-point polylines (legend
/// entries included).
#[cfg(test)]
pub(crate) fn diamonds(svg: &str) -> usize {
    svg.split("<polyline")
        .skip(1)
        .filter(|el| {
            let Some(pts) = el.split("points=\"").nth(1).and_then(|p| p.split('"').next()) else {
                return false;
            };
            let v: Vec<&str> = pts.split_whitespace().collect();
            v.len() == 5 && v[0] == v[4]
        })
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charts_are_svg_with_their_text() {
        let chart = Chart {
            title: "IOPS by queue depth".into(),
            x: Axis::new("queue depth", Scale::Log2),
            y: Axis::new("KIOPS", Scale::Linear),
            series: vec![
                Series::new("append 4KiB", vec![(1.0, 60.0), (2.0, 100.0), (32.0, 130.0)], 0),
                Series::new("second run", vec![(1.0, 50.0), (32.0, 120.0)], 1).dashed(),
            ],
            y_from_zero: true,
            legend_lower: false,
        };
        let svg = line_chart(&chart);
        assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(80)]);
        assert!(svg.contains("IOPS by queue depth"));
        assert!(svg.contains("append 4KiB"));
        assert!(svg.contains("\n32\n</text>"), "power-of-two ticks: {svg}");
        let bars = Bars {
            title: "reset latency".into(),
            y_label: "ms".into(),
            categories: vec!["idle".into(), "under read".into()],
            series: vec![("p50".into(), vec![Some(1.0), Some(2.0)])],
        };
        let svg = bar_chart(&bars);
        assert!(svg.starts_with("<svg") && svg.contains("under read"));
        let empty = Chart { series: vec![], ..chart };
        assert!(line_chart(&empty).contains("no data"));
    }

    fn latency_chart(series: Vec<Series>) -> Chart {
        Chart {
            title: "QD 1 latency".into(),
            x: Axis::new("request size", Scale::Log2).with_format(bytes),
            y: Axis::new("latency (µs)", Scale::Linear),
            series,
            y_from_zero: true,
            legend_lower: false,
        }
    }

    #[test]
    fn reference_points_are_diamonds_with_one_legend_entry() {
        let measured = || {
            vec![
                Series::new("write", vec![(4096.0, 11.0), (8192.0, 12.0), (16384.0, 16.0)], 0),
                Series::new("append", vec![(4096.0, 15.0), (8192.0, 16.0)], 1),
            ]
        };
        let plain = line_chart(&latency_chart(measured()));
        assert_eq!(diamonds(&plain), 0, "{plain}");
        assert!(!plain.contains("reference"));

        let mut with = measured();
        with.push(Series::reference("reference: zn540", vec![(4096.0, 11.36), (16384.0, 15.0)], 0));
        with.push(Series::reference("reference: zn540", vec![(4096.0, 14.83)], 1));
        // A point on a logarithmic axis at 0 cannot be drawn: left out.
        with.push(Series::reference("reference: zn540", vec![(0.0, 1.0)], 1));
        let svg = line_chart(&latency_chart(with));
        // Three points and the legend's diamond.
        assert_eq!(diamonds(&svg), 4, "{svg}");
        assert_eq!(svg.matches("reference: zn540").count(), 1, "one legend entry");
        // In the colour of their series: the second series' red.
        assert!(svg.contains("stroke=\"#D62728\""), "{svg}");
        assert!(!svg.contains("reference ceiling"));

        let mut ceiling = measured();
        ceiling.push(Series::ceiling("reference ceiling: zn540", 20.0, 0));
        let svg = line_chart(&latency_chart(ceiling));
        assert_eq!(svg.matches("reference ceiling: zn540").count(), 1);
        assert_eq!(diamonds(&svg), 0);
        // The ceiling is above every measured point: the axis reaches it.
        assert!(svg.contains("\n20\n</text>") || svg.contains("\n25\n</text>"), "{svg}");
    }

    #[test]
    fn bar_marks_are_diamonds_on_the_bars_they_belong_to() {
        let bars = Bars {
            title: "reset latency".into(),
            y_label: "ms".into(),
            categories: vec!["idle".into(), "under read".into(), "under write".into()],
            series: vec![
                ("p50".into(), vec![Some(1.0), Some(2.0), Some(3.0)]),
                ("p99".into(), vec![Some(2.0), Some(4.0), None]),
            ],
        };
        let plain = bar_chart(&bars);
        assert_eq!(diamonds(&plain), 0);
        let none = BarMarks { name: "reference: zn540".into(), values: vec![vec![None; 3]] };
        assert_eq!(bar_chart_marked(&bars, Some(&none)), plain, "no values, no marks");
        let marks = BarMarks {
            name: "reference: zn540".into(),
            values: vec![vec![Some(1.2), None, Some(2.5)], vec![None, Some(9.0)]],
        };
        let svg = bar_chart_marked(&bars, Some(&marks));
        assert_eq!(diamonds(&svg), 3 + 1, "three marks and the legend's");
        assert_eq!(svg.matches("reference: zn540").count(), 1);
        // The axis reaches the highest mark (9), above every bar (4).
        assert!(svg.contains("\n9\n</text>") || svg.contains("\n10\n</text>"), "{svg}");
    }

    #[test]
    fn tick_text_is_compact() {
        assert_eq!(number(0.0), "0");
        assert_eq!(number(12.5), "12.5");
        assert_eq!(number(1500.0), "1500");
        assert_eq!(number(15_000.0), "15k");
        assert_eq!(number(2_000_000.0), "2M");
        assert_eq!(number(0.001), "0.001");
        assert_eq!(number(0.0001), "1e-4");
        assert_eq!(bytes(4096.0), "4K");
        assert_eq!(bytes(131072.0), "128K");
        assert_eq!(bytes(1048576.0), "1M");
    }
}
