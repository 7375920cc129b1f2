//! Drawing a [`View`] with ratatui: a header with open and active zones
//! against their limits, the zone map (one cell per zone, a window of
//! rows that scrolls), and the rates, latencies and write figures.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};
use ratatui::Frame;

use super::model::{View, Zones};
use crate::num::human_size;

/// Lines the figures below the zone map take.
const STATS_LINES: u16 = 10;

/// Width of the zone number in front of each row of the map.
const ROW_LABEL: usize = 6;

/// One zone's cell: `.` empty, `#` full, the tenths written (0-9) of an
/// open (yellow implicitly, green explicitly) or closed (blue) zone, `R`
/// read only, `X` offline.
pub fn cell(state: &str, written: u64, capacity: u64) -> (char, Color) {
    let tenth = || {
        let t = (written.saturating_mul(10) / capacity.max(1)).min(9);
        char::from_digit(t as u32, 10).unwrap_or('9')
    };
    match state {
        "empty" => ('.', Color::DarkGray),
        "full" => ('#', Color::White),
        "implicitly_opened" => (tenth(), Color::Yellow),
        "explicitly_opened" => (tenth(), Color::Green),
        "closed" => (tenth(), Color::Blue),
        "read_only" => ('R', Color::Magenta),
        _ => ('X', Color::Red),
    }
}

/// Zones per row of the map in `width` columns (inside its border).
pub fn per_row(width: u16) -> usize {
    let room = (width as usize).saturating_sub(2 + ROW_LABEL);
    // Whole groups of 16 read more easily; at least one zone.
    if room >= 16 {
        room / 16 * 16
    } else {
        room.max(1)
    }
}

/// Rows the map has for `width` columns.
pub fn map_rows(view: &View, width: u16) -> usize {
    view.zones.as_ref().map_or(0, |z| z.map.zones.len().div_ceil(per_row(width)))
}

/// Draws `view`, the map scrolled down `scroll` rows.
pub fn draw(f: &mut Frame, view: &View, scroll: usize) {
    let [head, map, stats] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Min(3),
        Constraint::Length(STATS_LINES),
    ])
    .areas(f.area());
    f.render_widget(Paragraph::new(header(view)), head);
    draw_map(f, view, scroll, map);
    f.render_widget(Paragraph::new(figures(view)), stats);
}

fn limit(n: u64, max: Option<u32>) -> String {
    match max {
        Some(m) => format!("{n}/{m}"),
        None => format!("{n} (no limit)"),
    }
}

fn header(view: &View) -> Vec<Line<'static>> {
    let bold = Style::default().add_modifier(Modifier::BOLD);
    let title =
        Line::from(vec![Span::styled("zns top", bold), Span::raw(format!("  {}", view.source))]);
    let Some(Zones { map, counts }) = &view.zones else {
        return vec![title, Line::raw("no zoned namespace")];
    };
    let open = counts[1] + counts[2];
    let active = open + counts[3];
    let line = format!(
        "namespace {}: {} zones  open {}  active {}  empty {} full {} closed {} read-only {} offline {}",
        map.namespace,
        map.zones.len(),
        limit(open, map.max_open),
        limit(active, map.max_active),
        counts[0],
        counts[5],
        counts[3],
        counts[4],
        counts[6],
    );
    vec![title, Line::raw(line)]
}

fn draw_map(f: &mut Frame, view: &View, scroll: usize, area: Rect) {
    let Some(z) = &view.zones else {
        f.render_widget(Block::default().borders(Borders::ALL).title(" no zone map "), area);
        return;
    };
    let n = per_row(area.width);
    let rows = z.map.zones.len().div_ceil(n);
    let visible = (area.height as usize).saturating_sub(2);
    let first = scroll.min(rows.saturating_sub(visible));
    let last_zone = ((first + visible) * n).min(z.map.zones.len());
    let title = format!(
        " zones {}-{} of {}: . empty  # full  0-9 tenths written (open, closed)  R read-only  X offline ",
        first * n,
        last_zone.saturating_sub(1),
        z.map.zones.len()
    );
    let lines: Vec<Line> = z
        .map
        .zones
        .chunks(n)
        .enumerate()
        .skip(first)
        .take(visible)
        .map(|(row, zones)| {
            let mut spans = vec![Span::raw(format!("{:>w$} ", row * n, w = ROW_LABEL - 1))];
            spans.extend(zones.iter().map(|e| {
                let (c, color) = cell(&e.state, e.written, z.map.zone_capacity);
                Span::styled(c.to_string(), Style::default().fg(color))
            }));
            Line::from(spans)
        })
        .collect();
    let block = Block::default().borders(Borders::ALL).title(title);
    f.render_widget(Paragraph::new(lines).block(block), area);
}

fn time(s: f64) -> String {
    if s < 1e-3 {
        format!("{:.0}us", s * 1e6)
    } else if s < 1.0 {
        format!("{:.2}ms", s * 1e3)
    } else {
        format!("{s:.2}s")
    }
}

fn figures(view: &View) -> Vec<Line<'static>> {
    let over = match view.interval {
        Some(s) => format!("over {s:.1} s"),
        None => "first reading: rates follow".to_string(),
    };
    let mut lines = vec![Line::styled(
        format!(
            "{:<10}{:>10}{:>12}{:>10}{:>10}{:>10}   {over}",
            "", "IOPS", "MB/s", "p50", "p99", "p99.9"
        ),
        Style::default().add_modifier(Modifier::BOLD),
    )];
    for r in &view.rates {
        let p = |i: usize| r.percentiles.map_or("-".to_string(), |p| time(p[i]));
        lines.push(Line::raw(format!(
            "{:<10}{:>10.0}{:>12.1}{:>10}{:>10}{:>10}",
            r.name,
            r.iops,
            r.bytes_per_s / 1e6,
            p(0),
            p(1),
            p(2)
        )));
    }
    let bytes = |b: Option<f64>| b.map_or("-".to_string(), |b| human_size(b as u64));
    lines.push(Line::raw(format!(
        "host written {}  media written {}  WAF {}",
        bytes(view.host_written),
        bytes(view.media_written),
        view.waf.map_or("-".to_string(), |w| format!("{w:.2}"))
    )));
    if let Some((late, all)) = view.late {
        lines.push(Line::raw(format!("late completions {late:.0} of {all:.0}")));
    }
    if let Some(ftl) = &view.ftl {
        lines.push(Line::raw(format!(
            "FTL: {:.0} blocks written by users, {:.0} moved by GC, WAF {:.2}",
            ftl.user_blocks, ftl.gc_blocks, ftl.waf
        )));
    }
    lines.push(Line::raw(match &view.die_busy {
        Some(d) => {
            let each: Vec<String> = d.iter().map(|b| format!("{:.0}%", b * 100.0)).collect();
            format!("die busy: {}", each.join(" "))
        }
        None => "die busy: - (a timed emulator reports it from the second reading on)".to_string(),
    }));
    lines
}
