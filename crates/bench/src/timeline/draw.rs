//! A [`Timeline`] drawn as SVG: a time axis, then per process a header
//! row and a row per track (slices as bars coloured by name, marks as
//! ticks, counters as step lines), then a legend of the names.

use std::collections::HashMap;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{Timeline, TimelineError, TimelineOptions, Track};
// Bar colours, by name in order of first appearance: the charts' series colours.
use crate::characterize::plot::PALETTE;

/// Width of the track names' column, pixels.
const LABELS: i32 = 240;
/// Height of a row, pixels (its bar is two less).
const ROW: i32 = 16;
/// Height of the time axis, pixels.
const AXIS: i32 = 34;
/// Bars narrower than this many pixels merge with their neighbours.
const MERGE_BELOW: i32 = 3;
/// Names shown in the legend at most.
const LEGEND: usize = 24;

/// The window and the tracks to draw, chosen from `opts`.
struct Plan<'a> {
    from: f64,
    to: f64,
    tracks: Vec<&'a Track>,
    /// Tracks matching but past the limit.
    left_out: usize,
}

/// Draws `timeline` as an SVG document, within `opts`.
pub fn render_svg(timeline: &Timeline, opts: &TimelineOptions) -> Result<String, TimelineError> {
    let plan = plan(timeline, opts)?;
    let groups = plan.tracks.windows(2).filter(|w| w[0].process != w[1].process).count() + 1;
    let rows = plan.tracks.len() + groups + usize::from(plan.left_out > 0);
    let height = AXIS + rows as i32 * ROW + 3 * ROW;
    let width = opts.width.max(LABELS as u32 + 200);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (width, height as u32)).into_drawing_area();
        let fail = |e: DrawingAreaErrorKind<_>| TimelineError::Draw(format!("{e:?}"));
        root.fill(&WHITE).map_err(fail)?;
        let mut canvas = Canvas {
            root: &root,
            x0: LABELS,
            x1: width as i32 - 10,
            colours: HashMap::new(),
            order: Vec::new(),
        };
        canvas.axis(plan.from, plan.to).map_err(fail)?;
        let mut y = AXIS;
        let mut process = None;
        for t in &plan.tracks {
            if process != Some(&t.process) {
                canvas.text(&t.process, 4, y + ROW / 2, 12, BLACK).map_err(fail)?;
                process = Some(&t.process);
                y += ROW;
            }
            canvas.track(t, y, plan.from, plan.to).map_err(fail)?;
            y += ROW;
        }
        if plan.left_out > 0 {
            let note = format!("... {} more tracks (narrow them with --only)", plan.left_out);
            canvas.text(&note, 4, y + ROW / 2, 11, BLACK).map_err(fail)?;
            y += ROW;
        }
        canvas.legend(y + ROW / 2).map_err(fail)?;
        root.present().map_err(fail)?;
    }
    Ok(svg)
}

/// The window (the options', else the trace's span) and the tracks with
/// something in it that match the options.
fn plan<'a>(timeline: &'a Timeline, opts: &TimelineOptions) -> Result<Plan<'a>, TimelineError> {
    let (lo, hi) = timeline
        .span()
        .ok_or_else(|| TimelineError::Empty("the trace has no timed event".into()))?;
    let from = opts.from_us.unwrap_or(lo);
    let to = opts.to_us.unwrap_or(hi.max(lo + 1.0));
    if to <= from {
        return Err(TimelineError::Empty(format!("the window {from} to {to} µs is empty")));
    }
    let only: Vec<String> = opts.only.iter().map(|s| s.to_lowercase()).collect();
    let wanted = |t: &Track| {
        only.is_empty()
            || only
                .iter()
                .any(|o| t.process.to_lowercase().contains(o) || t.name.to_lowercase().contains(o))
    };
    let inside = |t: &Track| {
        t.slices.iter().any(|s| s.start < to && s.start + s.dur >= from)
            || t.marks.iter().any(|&m| m >= from && m <= to)
            || t.counter.iter().any(|&(at, _)| at <= to)
    };
    let matching: Vec<&Track> = timeline.tracks.iter().filter(|t| wanted(t) && inside(t)).collect();
    if matching.is_empty() {
        return Err(TimelineError::Empty(format!(
            "no track has events between {from} and {to} µs"
        )));
    }
    let left_out = matching.len().saturating_sub(opts.max_tracks.max(1));
    let tracks = matching.into_iter().take(opts.max_tracks.max(1)).collect();
    Ok(Plan { from, to, tracks, left_out })
}

type Area<'a, 'b> = DrawingArea<SVGBackend<'b>, plotters::coord::Shift>;
type Drawn<'b> = Result<(), DrawingAreaErrorKind<<SVGBackend<'b> as DrawingBackend>::ErrorType>>;

struct Canvas<'a, 'b> {
    root: &'a Area<'a, 'b>,
    /// The time axis's pixel range.
    x0: i32,
    x1: i32,
    colours: HashMap<String, RGBColor>,
    /// Names in order of first appearance, for the legend.
    order: Vec<String>,
}

impl<'b> Canvas<'_, 'b> {
    fn text(&self, s: &str, x: i32, y: i32, size: u32, colour: RGBColor) -> Drawn<'b> {
        let style =
            ("sans-serif", size).into_font().color(&colour).pos(Pos::new(HPos::Left, VPos::Center));
        self.root.draw(&Text::new(s.to_string(), (x, y), style))
    }

    /// Pixel of time `t` (µs) in the window `from..to`, clamped to it.
    fn x(&self, t: f64, from: f64, to: f64) -> i32 {
        let f = ((t - from) / (to - from)).clamp(0.0, 1.0);
        self.x0 + (f * (self.x1 - self.x0) as f64).round() as i32
    }

    fn colour(&mut self, name: &str) -> RGBColor {
        if let Some(c) = self.colours.get(name) {
            return *c;
        }
        let c = PALETTE[self.order.len() % PALETTE.len()];
        self.colours.insert(name.to_string(), c);
        self.order.push(name.to_string());
        c
    }

    /// The time axis: ticks at a round step, labelled in µs from the
    /// window's start.
    fn axis(&self, from: f64, to: f64) -> Drawn<'b> {
        let span = to - from;
        let step = round_step(span / 10.0);
        let title = format!("µs from {from:.1} (window {span:.1} µs)");
        self.text(&title, 4, 10, 12, BLACK)?;
        let line = ShapeStyle::from(&RGBColor(200, 200, 200)).stroke_width(1);
        let mut k = 0.0;
        while k <= span + 1e-9 {
            let x = self.x(from + k, from, to);
            self.root.draw(&PathElement::new(vec![(x, AXIS - 6), (x, AXIS - 1)], BLACK))?;
            self.root.draw(&PathElement::new(vec![(x, AXIS), (x, 100_000)], line))?;
            self.text(&format_us(k), x + 2, AXIS - 14, 10, BLACK)?;
            k += step;
        }
        Ok(())
    }

    /// One track's row at `y`: its name, bars (merged where closer than
    /// a pixel), marks and counter line.
    fn track(&mut self, t: &Track, y: i32, from: f64, to: f64) -> Drawn<'b> {
        let name = if t.name.is_empty() { "·" } else { &t.name };
        self.text(name, 16, y + ROW / 2, 11, RGBColor(60, 60, 60))?;
        let mut bar: Option<(i32, i32, &str)> = None;
        for s in t.slices.iter().filter(|s| s.start < to && s.start + s.dur >= from) {
            let (a, b) = (
                self.x(s.start, from, to),
                self.x(s.start + s.dur, from, to).max(self.x(s.start, from, to) + 1),
            );
            // Slices under a few pixels merge with their neighbours (a
            // track costs at most a bar per pixel column); wider ones keep
            // their own bar, so back-to-back operations stay countable.
            let tiny = |x0: i32, x1: i32| x1 - x0 < MERGE_BELOW;
            bar = match bar {
                Some((x, e, n)) if a <= e + 1 && (tiny(x, e) || tiny(a, b)) => {
                    Some((x, e.max(b), n))
                }
                Some(done) => {
                    self.bar(done, y)?;
                    Some((a, b, &s.name))
                }
                None => Some((a, b, &s.name)),
            };
        }
        if let Some(done) = bar {
            self.bar(done, y)?;
        }
        for &m in t.marks.iter().filter(|&&m| m >= from && m <= to) {
            let x = self.x(m, from, to);
            self.root.draw(&PathElement::new(
                vec![(x, y + 1), (x, y + ROW - 1)],
                BLACK.stroke_width(1),
            ))?;
        }
        self.counter(t, y, from, to)
    }

    fn bar(&mut self, (a, b, name): (i32, i32, &str), y: i32) -> Drawn<'b> {
        let c = self.colour(name);
        // A pixel's gap at the end tells a bar from the next one.
        let end = if b - a >= MERGE_BELOW { b - 1 } else { b };
        self.root.draw(&Rectangle::new([(a, y + 1), (end, y + ROW - 1)], c.filled()))?;
        // About 6 pixels a character at 10 pixels.
        if (b - a) as usize > 6 * name.chars().count() + 4 {
            self.text(name, a + 2, y + ROW / 2, 10, WHITE)?;
        }
        Ok(())
    }

    /// A counter as a step line scaled to the row (its largest value in
    /// the window at the top), with that value written beside it.
    fn counter(&self, t: &Track, y: i32, from: f64, to: f64) -> Drawn<'b> {
        if t.counter.is_empty() {
            return Ok(());
        }
        let before = t.counter.iter().rev().find(|&&(at, _)| at < from).map(|&(_, v)| v);
        let inside: Vec<(f64, f64)> =
            t.counter.iter().copied().filter(|&(at, _)| at >= from && at <= to).collect();
        let max = inside.iter().map(|&(_, v)| v).chain(before).fold(0.0f64, f64::max);
        let scale =
            |v: f64| y + ROW - 2 - ((v / max.max(f64::MIN_POSITIVE)) * (ROW - 4) as f64) as i32;
        let mut points = Vec::new();
        let mut last = before.unwrap_or(0.0);
        points.push((self.x0, scale(last)));
        for (at, v) in inside {
            let x = self.x(at, from, to);
            points.push((x, scale(last)));
            points.push((x, scale(v)));
            last = v;
        }
        points.push((self.x1, scale(last)));
        self.root.draw(&PathElement::new(points, PALETTE[0].stroke_width(1)))?;
        self.text(&format!("max {max}"), self.x0 - 70, y + ROW / 2, 9, RGBColor(90, 90, 90))
    }

    fn legend(&self, y: i32) -> Drawn<'b> {
        let mut x = 4;
        for name in self.order.iter().take(LEGEND) {
            let c = self.colours[name];
            self.root.draw(&Rectangle::new([(x, y - 5), (x + 10, y + 5)], c.filled()))?;
            self.text(name, x + 14, y, 10, BLACK)?;
            x += 24 + 6 * name.chars().count() as i32;
        }
        Ok(())
    }
}

/// A round tick step (1, 2 or 5 times a power of ten) near `raw`.
fn round_step(raw: f64) -> f64 {
    let raw = raw.max(1e-6);
    let p = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0].into_iter().map(|m| m * p).find(|s| *s >= raw).unwrap_or(10.0 * p)
}

/// `us` as a short label.
fn format_us(us: f64) -> String {
    if us >= 1e6 {
        format!("{:.3} s", us / 1e6)
    } else if us >= 1e3 {
        format!("{:.2} ms", us / 1e3)
    } else {
        format!("{us:.1} µs")
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Slice, Timeline, TimelineOptions, Track};
    use super::*;

    /// The texts an SVG document shows.
    fn texts(svg: &str) -> Vec<String> {
        svg.split("<text")
            .skip(1)
            .filter_map(|t| Some(t.split_once('>')?.1.split_once("</text>")?.0.trim().to_string()))
            .collect()
    }

    fn shows(svg: &str, text: &str) -> bool {
        texts(svg).iter().any(|t| t == text)
    }

    fn track(process: &str, name: &str, slices: &[(f64, f64, &str)]) -> Track {
        Track {
            process: process.into(),
            name: name.into(),
            slices: slices
                .iter()
                .map(|&(start, dur, n)| Slice { start, dur, name: n.into() })
                .collect(),
            ..Track::default()
        }
    }

    #[test]
    fn slices_closer_than_a_pixel_become_one_bar() {
        // 10,000 slices of 0.01 µs, 0.01 µs apart, over 200 µs: one bar.
        let dense: Vec<(f64, f64, &str)> =
            (0..10_000).map(|i| (i as f64 * 0.02, 0.01, "read")).collect();
        let t = Timeline { tracks: vec![track("dies", "die 0", &dense)], skipped: 0 };
        let svg =
            render_svg(&t, &TimelineOptions { width: 1000, ..TimelineOptions::default() }).unwrap();
        assert_eq!(
            svg.matches("<rect").count(),
            1 + 1 + 1,
            "background, the bar, its legend swatch"
        );
        assert!(shows(&svg, "die 0") && shows(&svg, "dies"), "{:?}", texts(&svg));
    }

    #[test]
    fn the_window_and_the_filter_choose_what_is_drawn() {
        let t = Timeline {
            tracks: vec![
                track("dies", "die 0", &[(0.0, 10.0, "program"), (50.0, 10.0, "read")]),
                track("channels", "channel 0", &[(0.0, 1.0, "transfer")]),
            ],
            skipped: 0,
        };
        let opts = TimelineOptions {
            from_us: Some(40.0),
            to_us: Some(70.0),
            ..TimelineOptions::default()
        };
        let svg = render_svg(&t, &opts).unwrap();
        assert!(shows(&svg, "read") && !svg.contains("program") && !svg.contains("channel 0"));
        let only = TimelineOptions { only: vec!["CHANNEL".into()], ..TimelineOptions::default() };
        let svg = render_svg(&t, &only).unwrap();
        assert!(shows(&svg, "channel 0") && !svg.contains("die 0"));
        let empty =
            TimelineOptions { from_us: Some(5.0), to_us: Some(5.0), ..TimelineOptions::default() };
        assert!(matches!(render_svg(&t, &empty), Err(TimelineError::Empty(_))));
        let none = TimelineOptions { only: vec!["zones".into()], ..TimelineOptions::default() };
        assert!(matches!(render_svg(&t, &none), Err(TimelineError::Empty(_))));
    }

    #[test]
    fn tracks_past_the_limit_are_named_not_drawn() {
        let tracks =
            (0..10).map(|i| track("dies", &format!("die {i}"), &[(0.0, 1.0, "read")])).collect();
        let t = Timeline { tracks, skipped: 0 };
        let svg = render_svg(&t, &TimelineOptions { max_tracks: 4, ..TimelineOptions::default() })
            .unwrap();
        assert!(shows(&svg, "die 3") && !shows(&svg, "die 4"));
        assert!(texts(&svg).iter().any(|t| t.starts_with("... 6 more tracks")));
    }

    #[test]
    fn round_steps() {
        assert_eq!(round_step(0.7), 1.0);
        assert_eq!(round_step(13.0), 20.0);
        assert_eq!(round_step(420.0), 500.0);
        assert_eq!(format_us(2500.0), "2.50 ms");
    }
}
