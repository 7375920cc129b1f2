//! `zns top`: a live view of a device in the terminal (ratatui on
//! crossterm): its zone map (state and fill of every zone, a scrolling
//! window of them), open and active zones against their limits, command
//! rates and latency percentiles, host and media bytes written and the
//! write amplification, refreshed every interval. It reads a running
//! server's metrics endpoint (`--metrics http://ADDR:PORT`, as `zns serve
//! --metrics` prints it), or opens `--device` itself. `--once` prints one
//! frame as plain text instead.

mod model;
mod render;

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::Terminal;
use zns_metrics::{client, parse, Exporter, ExporterBuilder};

use model::{Reading, View};

/// Arguments of `zns top`.
#[derive(Debug, Args)]
pub struct TopArgs {
    /// Watch a running server through its metrics endpoint (the address
    /// `zns serve --metrics` prints) instead of opening --device.
    #[arg(long, value_name = "http://ADDR:PORT")]
    pub metrics: Option<String>,
    /// The namespace whose zone map is shown (its number as served);
    /// default: the first zoned one.
    #[arg(long, value_name = "N")]
    pub namespace: Option<String>,
    /// Seconds between refreshes (and, with --once, the interval the
    /// rates cover).
    #[arg(long, default_value_t = 1.0, value_name = "SECONDS")]
    pub interval: f64,
    /// Print one frame as plain text and exit, for scripts and output
    /// that is not a terminal.
    #[arg(long)]
    pub once: bool,
    /// Size of the --once frame: columns x rows.
    #[arg(long, default_value = "100x40", value_name = "COLSxROWS")]
    pub size: String,
}

/// Where readings come from.
enum Source {
    /// A running server's endpoint.
    Endpoint(String),
    /// A device opened here.
    Local(Exporter),
}

/// A refresh waits this long for the endpoint.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);

impl Source {
    fn read(&self) -> Result<Reading> {
        let (text, zones) = match self {
            Source::Endpoint(url) => {
                let text = client::get(url, "/metrics", FETCH_TIMEOUT)?;
                let json = client::get(url, "/zones", FETCH_TIMEOUT)?;
                let zones = serde_json::from_str(&json)
                    .with_context(|| format!("{url}/zones: not a zone map"))?;
                (text, zones)
            }
            Source::Local(e) => (e.encode(), e.zone_maps()),
        };
        Ok(Reading { at: Instant::now(), samples: parse::parse(&text)?, zones })
    }
}

/// `--size`: columns and rows.
fn size(s: &str) -> Result<(u16, u16)> {
    let parsed =
        s.split_once('x').and_then(|(c, r)| Some((c.parse::<u16>().ok()?, r.parse::<u16>().ok()?)));
    match parsed {
        Some((c, r)) if (40..=1000).contains(&c) && (16..=1000).contains(&r) => Ok((c, r)),
        _ => bail!("--size {s}: give COLSxROWS, 40 to 1000 columns and 16 to 1000 rows"),
    }
}

pub fn run(device: &str, args: &TopArgs, out: &mut dyn Write) -> Result<()> {
    if !(args.interval.is_finite() && (0.05..=3600.0).contains(&args.interval)) {
        bail!("--interval {}: give 0.05 to 3600 seconds", args.interval);
    }
    let frame = size(&args.size)?;
    if !args.once && !std::io::stdout().is_terminal() {
        bail!(
            "zns top draws in a terminal and stdout is not one: use --once for a plain-text frame"
        );
    }
    let (source, name) = match &args.metrics {
        Some(url) => (Source::Endpoint(url.trim_end_matches('/').to_string()), url.clone()),
        None => {
            let dev = zns_device::open(device).with_context(|| format!("open {device}"))?;
            let mut b = ExporterBuilder::new();
            b.device_only("1", &dev);
            (Source::Local(b.build()), device.to_string())
        }
    };
    let interval = Duration::from_secs_f64(args.interval);
    let ns = args.namespace.as_deref();
    if args.once {
        let first = source.read()?;
        std::thread::sleep(interval);
        let view = View::new(&name, &source.read()?, Some(&first), ns);
        write!(out, "{}", frame_text(&view, 0, frame.0, frame.1))?;
        return Ok(());
    }
    live(&source, &name, ns, interval)
}

/// The frame of `view` as text: one line per row, trailing blanks cut.
pub fn frame_text(view: &View, scroll: usize, cols: u16, rows: u16) -> String {
    let mut t = Terminal::new(TestBackend::new(cols, rows)).expect("a test backend");
    // Drawing into memory cannot fail.
    let _ = t.draw(|f| render::draw(f, view, scroll));
    let buf = t.backend().buffer();
    let mut s = String::new();
    for y in 0..rows {
        let line: String = (0..cols).map(|x| buf[(x, y)].symbol()).collect();
        s.push_str(line.trim_end());
        s.push('\n');
    }
    s
}

/// The live view until q (or Esc, or Ctrl-C).
fn live(source: &Source, name: &str, ns: Option<&str>, interval: Duration) -> Result<()> {
    let mut terminal = ratatui::try_init().context("set up the terminal")?;
    let result = (|| -> Result<()> {
        let mut before: Option<Reading> = None;
        let mut scroll = 0usize;
        loop {
            let now = source.read()?;
            let view = View::new(name, &now, before.as_ref(), ns);
            let until = Instant::now() + interval;
            loop {
                let width = terminal.size()?.width;
                let rows = render::map_rows(&view, width);
                scroll = scroll.min(rows.saturating_sub(1));
                terminal.draw(|f| render::draw(f, &view, scroll))?;
                let left = until.saturating_duration_since(Instant::now());
                if left.is_zero() || !event::poll(left)? {
                    break;
                }
                let Event::Key(k) = event::read()? else { continue };
                if k.kind != KeyEventKind::Press {
                    continue;
                }
                match k.code {
                    KeyCode::Char('q') | KeyCode::Esc => return Ok(()),
                    KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => {
                        return Ok(())
                    }
                    KeyCode::Down | KeyCode::Char('j') => scroll += 1,
                    KeyCode::Up | KeyCode::Char('k') => scroll = scroll.saturating_sub(1),
                    KeyCode::PageDown => scroll += 10,
                    KeyCode::PageUp => scroll = scroll.saturating_sub(10),
                    KeyCode::Home => scroll = 0,
                    KeyCode::End => scroll = rows,
                    _ => {}
                }
            }
            before = Some(now);
        }
    })();
    ratatui::restore();
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use zns_device::{Target, ZoneAction};

    /// The source `zns top --device` reads.
    fn local(dev: &Arc<dyn zns_device::ZonedDevice>) -> Source {
        let mut b = ExporterBuilder::new();
        b.device_only("1", dev);
        Source::Local(b.build())
    }

    /// A device with zone 0 a quarter written (implicitly opened), zone 1
    /// explicitly opened and empty, zone 2 full, zone 3 closed half
    /// written; the rest empty.
    fn known_device() -> Arc<dyn zns_device::ZonedDevice> {
        let dev = zns_device::open("emu:small").unwrap();
        let info = dev.info().clone();
        let zs = info.zone_size;
        let mut q = dev.queue(4).unwrap();
        let quarter = (info.zone_capacity / 4) as usize * info.block_size as usize;
        let buf = q.alloc(quarter.min(info.mdts_bytes)).unwrap();
        let blocks = (buf.len() / info.block_size as usize) as u64;
        let mut lba = 0;
        while lba < info.zone_capacity / 4 {
            q.write(lba, &buf).unwrap();
            lba += blocks;
        }
        q.zone_action(ZoneAction::Open, Target::Zone(zs)).unwrap();
        q.zone_action(ZoneAction::Finish, Target::Zone(2 * zs)).unwrap();
        let mut lba = 3 * zs;
        while lba < 3 * zs + info.zone_capacity / 2 {
            q.write(lba, &buf).unwrap();
            lba += blocks;
        }
        q.zone_action(ZoneAction::Close, Target::Zone(3 * zs)).unwrap();
        dev
    }

    #[test]
    fn a_frame_shows_the_zone_map_and_limits_of_a_known_device() {
        let dev = known_device();
        let source = local(&dev);
        let first = source.read().unwrap();
        let view = View::new("emu:small", &source.read().unwrap(), Some(&first), None);
        let text = frame_text(&view, 0, 100, 30);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "zns top  emu:small");
        assert_eq!(
            lines[1],
            "namespace 1: 256 zones  open 2/14  active 3/14  empty 252 full 1 closed 1 \
             read-only 0 offline 0"
        );
        assert!(lines[2].starts_with("┌ zones 0-255 of 256: . empty  # full"), "{text}");
        // 100 columns: 80 zones a row. Zone 0 a quarter written (2),
        // zone 1 open and empty (0), zone 2 full, zone 3 half written (5).
        let row0 = format!("│    0 20#5{}", ".".repeat(76));
        assert_eq!(lines[3].trim_end_matches('│').trim_end(), row0, "{text}");
        assert!(lines[4].starts_with(&format!("│   80 {}", ".".repeat(80))), "{text}");
        let rows: Vec<&str> = lines.iter().copied().filter(|l| l.starts_with("write ")).collect();
        assert_eq!(rows.len(), 1, "{text}");
        assert!(text.contains("host written"), "{text}");
        assert!(text.contains("WAF 1.00"), "{text}");
        // An untimed emulator has no dies to report.
        assert!(text.contains("die busy: -"), "{text}");
        // Colours say the state: implicitly opened yellow, explicitly green.
        let mut t = Terminal::new(TestBackend::new(100, 30)).unwrap();
        t.draw(|f| render::draw(f, &view, 0)).unwrap();
        let buf = t.backend().buffer();
        assert_eq!(buf[(7, 3)].fg, ratatui::style::Color::Yellow);
        assert_eq!(buf[(8, 3)].fg, ratatui::style::Color::Green);
        assert_eq!(buf[(10, 3)].fg, ratatui::style::Color::Blue);
    }

    #[test]
    fn a_timed_emulator_reports_its_dies_busy_between_readings() {
        let dev = zns_device::open("emu:zn540,zones=16").unwrap();
        let source = local(&dev);
        let first = source.read().unwrap();
        let mut q = dev.queue(4).unwrap();
        let buf = q.alloc(128 << 10).unwrap();
        for i in 0..64 {
            q.write(i * 32, &buf).unwrap();
        }
        q.flush().unwrap();
        let view = View::new("emu:zn540", &source.read().unwrap(), Some(&first), None);
        let busy = view.die_busy.clone().expect("a timed emulator reports its dies");
        assert_eq!(busy.len(), 32, "{busy:?}");
        assert!(busy.iter().all(|b| (0.0..=1.0).contains(b)), "{busy:?}");
        // 8 MiB programmed across the zone's dies: some of them were busy.
        assert!(busy.iter().filter(|b| **b > 0.0).count() >= 2, "{busy:?}");
        let text = frame_text(&view, 0, 120, 40);
        assert!(text.contains("die busy: ") && text.contains('%'), "{text}");
    }

    #[test]
    fn the_map_scrolls_and_sizes_are_checked() {
        let dev = known_device();
        let view = View::new("emu:small", &local(&dev).read().unwrap(), None, None);
        // 40 columns: 32 zones a row, 8 rows, 3 of them shown: scrolled
        // past the end, the last 3.
        let text = frame_text(&view, 15, 40, 17);
        assert!(text.contains("zones 160-255 of 256"), "{text}");
        assert!(text.contains("│  224 ................................│"), "{text}");
        let wide = frame_text(&view, 1, 120, 16);
        assert!(wide.contains("zones 112-255 of 256"), "{wide}");
        assert!(wide.contains("first reading: rates follow"), "{wide}");
        assert!(size("80x24").is_ok());
        assert!(size("80").is_err() && size("10x10").is_err());
    }
}
