//! Timelines of trace files: a JSON trace-event file (the format
//! `emu:...,trace=FILE` writes, and Perfetto's UI and `chrome://tracing`
//! open) read into tracks and drawn as an SVG picture, for a machine
//! without a browser, a report or a document, or summed up in figures
//! ([`TraceSummary`]).
//!
//! What is read, by phase (`ph`):
//!
//! | phase | becomes |
//! |---|---|
//! | `M` (`process_name`, `thread_name`) | the names of processes and their tracks |
//! | `X` | a slice on its process's track `tid` |
//! | `b` / `e` | a slice from begin to end (paired by process, category and `id`), on lanes of its process: an overlapping one takes the next lane |
//! | `i`, `n` | a mark (a tick) on its track |
//! | `C` | a counter track per process, name and argument, as a step line |
//!
//! Other phases are counted and left out. Times are the file's
//! microseconds.
//!
//! Drawing is bounded whatever the file holds: a track's slices closer
//! than a pixel are merged into one bar (so a track costs at most one
//! bar per pixel column), at most [`TimelineOptions::max_tracks`] tracks
//! are drawn (the rest are named in a last line), and labels are written
//! only where a bar has room for them.
//!
//! Thread safety: plain data and functions.

mod draw;
mod summary;

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

pub use draw::render_svg;
pub use summary::{CommandStats, FlashStats, SlowCommand, TraceSummary};

/// Why a trace file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TimelineError {
    /// Not JSON.
    #[error("not a JSON trace file: {0}")]
    Json(#[from] serde_json::Error),
    /// JSON, but neither an array of events nor an object with `traceEvents`.
    #[error("no trace events: the file is neither an array of events nor an object with a traceEvents array")]
    NoEvents,
    /// The window asked for is empty or holds nothing.
    #[error("nothing to draw: {0}")]
    Empty(String),
    /// Writing the picture failed.
    #[error("drawing the timeline: {0}")]
    Draw(String),
}

/// A span on a track: start and duration in µs, and its name.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq)]
pub struct Slice {
    /// Start, µs.
    pub start: f64,
    /// Duration, µs.
    pub dur: f64,
    /// Name (shown where it fits).
    pub name: String,
}

/// One row of the timeline.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Track {
    /// The process it belongs to (a group of tracks).
    pub process: String,
    /// Its own name.
    pub name: String,
    /// Its slices, by start.
    pub slices: Vec<Slice>,
    /// Instants on it, µs.
    pub marks: Vec<f64>,
    /// A counter's steps (time µs, value), by time; empty for other tracks.
    pub counter: Vec<(f64, f64)>,
}

/// A trace file read into tracks, in the order of their processes and
/// track IDs.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Timeline {
    /// The tracks.
    pub tracks: Vec<Track>,
    /// Events of phases not drawn.
    pub skipped: u64,
}

/// What to draw.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq)]
pub struct TimelineOptions {
    /// Window start, µs (`None`: the first event).
    pub from_us: Option<f64>,
    /// Window end, µs (`None`: the last event's end).
    pub to_us: Option<f64>,
    /// Only tracks whose process or track name contains one of these
    /// (case-insensitive); all when empty.
    pub only: Vec<String>,
    /// Most tracks drawn.
    pub max_tracks: usize,
    /// Picture width, pixels.
    pub width: u32,
}

impl Default for TimelineOptions {
    fn default() -> Self {
        TimelineOptions {
            from_us: None,
            to_us: None,
            only: Vec::new(),
            max_tracks: 80,
            width: 1600,
        }
    }
}

/// Where an event goes: (process ID, track ID).
type Key = (i64, i64);

/// Tracks being gathered, and the names the file gave.
#[derive(Default)]
struct Gather {
    process_names: HashMap<i64, String>,
    thread_names: HashMap<Key, String>,
    tracks: BTreeMap<Key, Track>,
    /// Async slices begun, by (pid, category, id): start and name.
    open: HashMap<(i64, String, String), (f64, String)>,
    /// Async slices ended, by process: to be laid on lanes.
    spans: BTreeMap<i64, Vec<Slice>>,
    /// Counters by (pid, name).
    counters: BTreeMap<(i64, String), Vec<(f64, f64)>>,
    skipped: u64,
}

impl Timeline {
    /// Reads a JSON trace file's text.
    pub fn parse(text: &str) -> Result<Timeline, TimelineError> {
        let v: Value = serde_json::from_str(text)?;
        let events = match &v {
            Value::Array(a) => a,
            Value::Object(o) => {
                o.get("traceEvents").and_then(Value::as_array).ok_or(TimelineError::NoEvents)?
            }
            _ => return Err(TimelineError::NoEvents),
        };
        let mut g = Gather::default();
        for e in events {
            g.event(e);
        }
        Ok(g.finish())
    }

    /// The time the tracks span: (first start, last end), µs; `None`
    /// without a timed event.
    pub fn span(&self) -> Option<(f64, f64)> {
        let mut lo = f64::INFINITY;
        let mut hi = f64::NEG_INFINITY;
        for t in &self.tracks {
            for s in &t.slices {
                lo = lo.min(s.start);
                hi = hi.max(s.start + s.dur);
            }
            for &m in &t.marks {
                lo = lo.min(m);
                hi = hi.max(m);
            }
            for &(at, _) in &t.counter {
                lo = lo.min(at);
                hi = hi.max(at);
            }
        }
        (lo <= hi).then_some((lo, hi))
    }
}

impl Gather {
    fn event(&mut self, e: &Value) {
        let ph = e.get("ph").and_then(Value::as_str).unwrap_or("");
        let pid = e.get("pid").and_then(Value::as_i64).unwrap_or(0);
        let tid = e.get("tid").and_then(Value::as_i64).unwrap_or(0);
        let ts = e.get("ts").and_then(Value::as_f64);
        let name = e.get("name").and_then(Value::as_str).unwrap_or("").to_string();
        match (ph, ts) {
            ("M", _) => self.name(e, pid, tid, &name),
            ("X", Some(ts)) => {
                let dur = e.get("dur").and_then(Value::as_f64).unwrap_or(0.0).max(0.0);
                self.track(pid, tid).slices.push(Slice { start: ts, dur, name });
            }
            ("b", Some(ts)) => {
                self.open.insert(async_key(e, pid), (ts, name));
            }
            ("e", Some(ts)) => {
                if let Some((start, name)) = self.open.remove(&async_key(e, pid)) {
                    let dur = (ts - start).max(0.0);
                    self.spans.entry(pid).or_default().push(Slice { start, dur, name });
                }
            }
            ("i" | "I" | "n", Some(ts)) => {
                // An async instant (`n`) has no track of its own: its
                // process's first lane.
                let tid = if ph == "n" { -1 } else { tid };
                self.track(pid, tid).marks.push(ts);
            }
            ("C", Some(ts)) => {
                // A counter per argument, as Perfetto shows them.
                let Some(args) = e.get("args").and_then(Value::as_object) else { return };
                for (key, v) in args {
                    if let Some(value) = v.as_f64() {
                        let track = format!("{name} {key}");
                        self.counters.entry((pid, track)).or_default().push((ts, value));
                    }
                }
            }
            _ => self.skipped += 1,
        }
    }

    fn name(&mut self, e: &Value, pid: i64, tid: i64, kind: &str) {
        let Some(name) = e.pointer("/args/name").and_then(Value::as_str) else { return };
        match kind {
            "process_name" => {
                self.process_names.insert(pid, name.to_string());
            }
            "thread_name" => {
                self.thread_names.insert((pid, tid), name.to_string());
            }
            _ => {}
        }
    }

    fn track(&mut self, pid: i64, tid: i64) -> &mut Track {
        self.tracks.entry((pid, tid)).or_default()
    }

    fn finish(mut self) -> Timeline {
        for (pid, mut spans) in std::mem::take(&mut self.spans) {
            spans.sort_by(|a, b| a.start.total_cmp(&b.start));
            for (lane, slices) in lanes(spans).into_iter().enumerate() {
                // Lanes sort after the process's own tracks; lane 0 takes
                // the async marks (tid -1).
                let tid = if lane == 0 { -1 } else { i64::MAX - 1_000_000 + lane as i64 };
                self.track(pid, tid).slices.extend(slices);
            }
        }
        for ((pid, name), steps) in std::mem::take(&mut self.counters) {
            let key = (pid, i64::MAX - 2_000_000 - self.tracks.len() as i64);
            let t = self.track(key.0, key.1);
            t.name = name;
            t.counter = steps;
        }
        let mut tracks = Vec::with_capacity(self.tracks.len());
        for ((pid, tid), mut t) in std::mem::take(&mut self.tracks) {
            t.process =
                self.process_names.get(&pid).cloned().unwrap_or_else(|| format!("process {pid}"));
            if t.name.is_empty() {
                t.name = match self.thread_names.get(&(pid, tid)) {
                    Some(n) => n.clone(),
                    None if !(0..=i64::MAX / 2).contains(&tid) => String::new(),
                    None => format!("track {tid}"),
                };
            }
            t.slices.sort_by(|a, b| a.start.total_cmp(&b.start));
            t.marks.sort_by(f64::total_cmp);
            t.counter.sort_by(|a, b| a.0.total_cmp(&b.0));
            tracks.push(t);
        }
        Timeline { tracks, skipped: self.skipped + self.open.len() as u64 }
    }
}

/// An async event's pairing key: process, category and ID.
fn async_key(e: &Value, pid: i64) -> (i64, String, String) {
    let cat = e.get("cat").and_then(Value::as_str).unwrap_or("").to_string();
    let id = match e.get("id") {
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
        None => String::new(),
    };
    (pid, cat, id)
}

/// Spans (by start) on as few lanes as fit: each on the first lane whose
/// last span has ended.
fn lanes(spans: Vec<Slice>) -> Vec<Vec<Slice>> {
    let mut lanes: Vec<Vec<Slice>> = Vec::new();
    for s in spans {
        let free = lanes.iter().position(|l| l.last().is_none_or(|p| p.start + p.dur <= s.start));
        match free {
            Some(i) => lanes[i].push(s),
            None => lanes.push(vec![s]),
        }
    }
    lanes
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRACE: &str = r#"{"traceEvents":[
        {"ph":"M","pid":1,"name":"process_name","args":{"name":"dies"}},
        {"ph":"M","pid":1,"tid":3,"name":"thread_name","args":{"name":"die 3 (channel 1)"}},
        {"ph":"X","pid":1,"tid":3,"name":"program","ts":10.0,"dur":5.0,"args":{}},
        {"ph":"X","pid":1,"tid":3,"name":"read","ts":2.0,"dur":1.5,"args":{}},
        {"ph":"i","s":"t","pid":1,"tid":3,"name":"suspend","ts":12.0,"args":{}},
        {"ph":"b","cat":"command","id":1,"pid":100,"tid":1,"name":"read","ts":1.0},
        {"ph":"b","cat":"command","id":2,"pid":100,"tid":1,"name":"write","ts":2.0},
        {"ph":"e","cat":"command","id":1,"pid":100,"tid":1,"name":"read","ts":4.0},
        {"ph":"e","cat":"command","id":2,"pid":100,"tid":1,"name":"write","ts":9.0},
        {"ph":"b","cat":"command","id":3,"pid":100,"tid":1,"name":"read","ts":5.0},
        {"ph":"e","cat":"command","id":3,"pid":100,"tid":1,"name":"read","ts":6.0},
        {"ph":"C","pid":3,"tid":0,"name":"write buffer KiB","ts":3.0,"args":{"used":64,"free":0}},
        {"ph":"s","pid":1,"tid":3,"name":"flow","ts":1.0}
    ]}"#;

    #[test]
    fn events_become_named_tracks_slices_lanes_and_counters() {
        let t = Timeline::parse(TRACE).unwrap();
        let die = t.tracks.iter().find(|t| t.name == "die 3 (channel 1)").unwrap();
        assert_eq!(die.process, "dies");
        let starts: Vec<f64> = die.slices.iter().map(|s| s.start).collect();
        assert_eq!(starts, [2.0, 10.0]);
        assert_eq!(die.marks, [12.0]);
        // Commands 1 and 2 overlap: two lanes; 3 fits on the first again.
        let lanes: Vec<&Track> = t.tracks.iter().filter(|t| t.process == "process 100").collect();
        assert_eq!(lanes.len(), 2);
        let first: Vec<(f64, f64)> = lanes[0].slices.iter().map(|s| (s.start, s.dur)).collect();
        assert_eq!(first, [(1.0, 3.0), (5.0, 1.0)]);
        assert_eq!(lanes[1].slices[0].name, "write");
        let used = t.tracks.iter().find(|t| t.name == "write buffer KiB used").unwrap();
        assert_eq!(used.counter, [(3.0, 64.0)]);
        let free = t.tracks.iter().find(|t| t.name == "write buffer KiB free").unwrap();
        assert_eq!(free.counter, [(3.0, 0.0)]);
        assert_eq!(t.skipped, 1);
        assert_eq!(t.span(), Some((1.0, 15.0)));
    }

    #[test]
    fn files_that_are_not_traces_are_refused() {
        assert!(matches!(Timeline::parse("{"), Err(TimelineError::Json(_))));
        assert!(matches!(Timeline::parse(r#"{"a":1}"#), Err(TimelineError::NoEvents)));
        assert!(matches!(Timeline::parse("3"), Err(TimelineError::NoEvents)));
        let t = Timeline::parse("[]").unwrap();
        assert!(t.tracks.is_empty() && t.span().is_none());
    }
}
