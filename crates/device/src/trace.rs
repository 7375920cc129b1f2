//! Trace files of emulated devices (`emu:...,trace=FILE`): the emulator's
//! trace events ([`zns_emulator::trace`]) kept in a ring buffer of the last
//! `trace_events` events and written, when the device goes away, in the
//! JSON trace-event format that Perfetto's UI (ui.perfetto.dev) and
//! `chrome://tracing` open.
//!
//! Tracks: a process per kind of resource, a thread per track in it.
//!
//! | process | threads | events |
//! |---|---|---|
//! | `dies` | `die N (channel C)` | flash reads, programs, erases and block closes as slices (a suspended operation ends where the suspend cut it and starts again on resume), suspend and resume marks |
//! | `channels` | `channel C` | transfers as slices |
//! | `queue Q` | one async track per command in flight | each command from doorbell to completion, with its fetch and processing start marked, and its status |
//! | `write buffer` | - | the buffer's fill (a counter), writers waiting for room (marks) |
//! | `zones A-B` (one per 64 zones) | `zone N` | each zone's state as slices from one transition to the next |
//! | `garbage collection` | - | reclaims of a conventional namespace's segments (marks) |
//!
//! Times are model time, microseconds in the file.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use zns_emulator::trace::{CommandId, TraceEvent, TraceSink};
use zns_spec::ZoneState;

/// Events a trace keeps unless `trace_events=` says otherwise.
pub const DEFAULT_TRACE_EVENTS: usize = 500_000;

/// Zones per zone-group process in a trace file.
pub const ZONES_PER_GROUP: u32 = 64;

/// Process IDs of the tracks.
const PID_DIES: u32 = 1;
const PID_CHANNELS: u32 = 2;
const PID_BUFFER: u32 = 3;
const PID_GC: u32 = 4;
const PID_QUEUES: u32 = 100;
const PID_ZONES: u32 = 1000;

/// A trace sink keeping the last events in a ring buffer and writing them
/// as a JSON trace-event file when dropped (or when asked).
///
/// Thread safety: `Send + Sync`; events are taken under one mutex, a leaf.
pub struct TraceFile {
    path: PathBuf,
    capacity: usize,
    channels: u32,
    ring: Mutex<VecDeque<TraceEvent>>,
    /// Events dropped from the front of the ring.
    dropped: AtomicU64,
}

impl std::fmt::Debug for TraceFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceFile")
            .field("path", &self.path)
            .field("capacity", &self.capacity)
            .finish_non_exhaustive()
    }
}

impl TraceFile {
    /// A trace to be written to `path`, keeping the last `capacity`
    /// events (at least one), of a device with `channels` flash channels
    /// (die `d` is on channel `d % channels`).
    pub fn new(path: impl Into<PathBuf>, capacity: usize, channels: u32) -> TraceFile {
        let capacity = capacity.max(1);
        TraceFile {
            path: path.into(),
            capacity,
            channels: channels.max(1),
            ring: Mutex::new(VecDeque::with_capacity(capacity.min(1 << 16))),
            dropped: AtomicU64::new(0),
        }
    }

    /// Where the trace goes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Events kept now, and events dropped to keep within the capacity.
    pub fn counts(&self) -> (usize, u64) {
        (self.ring.lock().len(), self.dropped.load(Ordering::Relaxed))
    }

    /// Writes the events kept so far to the trace's file.
    pub fn write_file(&self) -> io::Result<()> {
        let mut f = io::BufWriter::new(std::fs::File::create(&self.path)?);
        self.write_json(&mut f)?;
        f.flush()
    }

    /// Writes the events kept so far as a JSON trace-event document.
    pub fn write_json(&self, out: &mut dyn Write) -> io::Result<()> {
        let events: Vec<TraceEvent> = self.ring.lock().iter().copied().collect();
        let dropped = self.dropped.load(Ordering::Relaxed);
        let mut w = JsonWriter { out, first: true, line: String::new() };
        w.out.write_all(b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n")?;
        Tracks::new(self.channels).write(&events, &mut w)?;
        write!(
            w.out,
            "\n],\"otherData\":{{\"producer\":\"znskit\",\"events\":{},\"dropped\":{dropped}}}}}\n",
            events.len()
        )
    }
}

impl TraceSink for TraceFile {
    fn event(&self, event: &TraceEvent) {
        let mut ring = self.ring.lock();
        if ring.len() == self.capacity {
            ring.pop_front();
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
        ring.push_back(*event);
    }
}

impl Drop for TraceFile {
    fn drop(&mut self) {
        let (kept, dropped) = self.counts();
        match self.write_file() {
            Ok(()) => tracing::info!(
                "trace written to {} ({kept} events, {dropped} older ones dropped)",
                self.path.display()
            ),
            Err(e) => tracing::error!("trace {}: {e}", self.path.display()),
        }
    }
}

/// Writes one JSON object per line, separated by commas.
struct JsonWriter<'a> {
    out: &'a mut dyn Write,
    first: bool,
    line: String,
}

impl JsonWriter<'_> {
    /// Writes the object in `self.line` and clears it.
    fn flush_line(&mut self) -> io::Result<()> {
        if !std::mem::replace(&mut self.first, false) {
            self.out.write_all(b",\n")?;
        }
        self.out.write_all(self.line.as_bytes())?;
        self.line.clear();
        Ok(())
    }

    /// A metadata event naming process `pid` (and thread `tid` when given).
    fn name(&mut self, pid: u32, tid: Option<u32>, name: &str) -> io::Result<()> {
        let _ = match tid {
            None => write!(
                self.line,
                r#"{{"ph":"M","pid":{pid},"name":"process_name","args":{{"name":"{name}"}}}}"#
            ),
            Some(t) => write!(
                self.line,
                r#"{{"ph":"M","pid":{pid},"tid":{t},"name":"thread_name","args":{{"name":"{name}"}}}}"#
            ),
        };
        self.flush_line()
    }

    /// A slice on thread `tid` of `pid` from `start` to `end` (ns); `args`
    /// is a JSON object's members.
    fn slice(
        &mut self,
        pid: u32,
        tid: u32,
        name: &str,
        start: u64,
        end: u64,
        args: &str,
    ) -> io::Result<()> {
        let _ = write!(
            self.line,
            r#"{{"ph":"X","pid":{pid},"tid":{tid},"name":"{name}","ts":{},"dur":{},"args":{{{args}}}}}"#,
            us(start),
            us(end.saturating_sub(start))
        );
        self.flush_line()
    }

    /// An instant event on thread `tid` of `pid`.
    fn instant(&mut self, pid: u32, tid: u32, name: &str, at: u64, args: &str) -> io::Result<()> {
        let _ = write!(
            self.line,
            r#"{{"ph":"i","s":"t","pid":{pid},"tid":{tid},"name":"{name}","ts":{},"args":{{{args}}}}}"#,
            us(at)
        );
        self.flush_line()
    }
}

/// Nanoseconds as microseconds with three decimals.
fn us(ns: u64) -> String {
    format!("{}.{:03}", ns / 1000, ns % 1000)
}

/// A command's name in the file: `sq1:cid42`.
fn cmd_name(c: CommandId) -> String {
    format!("sq{}:cid{}", c.sqid, c.cid)
}

/// A zone state's name.
fn state_name(s: ZoneState) -> &'static str {
    match s {
        ZoneState::Empty => "Empty",
        ZoneState::ImplicitlyOpen => "Implicitly Opened",
        ZoneState::ExplicitlyOpen => "Explicitly Opened",
        ZoneState::Closed => "Closed",
        ZoneState::Full => "Full",
        ZoneState::ReadOnly => "Read Only",
        ZoneState::Offline => "Offline",
    }
}

/// A command between its doorbell and its completion.
struct Open {
    name: &'static str,
    cqid: u16,
    nsid: u32,
    lba: u64,
    blocks: u64,
    at: u64,
    fetched: u64,
    started: Option<u64>,
}

/// The tracks seen while writing, for their names at the end.
struct Tracks {
    channels: u32,
    dies: BTreeMap<u32, ()>,
    used_channels: BTreeMap<u32, ()>,
    queues: BTreeMap<u16, ()>,
    zones: BTreeMap<(u32, u32), (ZoneState, u64)>,
    open: HashMap<CommandId, Open>,
    async_id: u64,
    /// The earliest and latest event times kept.
    begin: u64,
    end: u64,
}

impl Tracks {
    fn new(channels: u32) -> Self {
        Tracks {
            channels,
            dies: BTreeMap::new(),
            used_channels: BTreeMap::new(),
            queues: BTreeMap::new(),
            zones: BTreeMap::new(),
            open: HashMap::new(),
            async_id: 0,
            begin: 0,
            end: 0,
        }
    }

    /// Writes every event, then the zones' last states and the names.
    fn write(mut self, events: &[TraceEvent], w: &mut JsonWriter<'_>) -> io::Result<()> {
        self.begin = events.iter().map(TraceEvent::time_ns).min().unwrap_or(0);
        for e in events {
            self.end = self.end.max(e.time_ns());
            self.event(e, w)?;
        }
        // Each zone's last state lasts to the end of the trace.
        let zones = std::mem::take(&mut self.zones);
        for (&(nsid, zone), &(state, since)) in &zones {
            if state != ZoneState::Empty {
                let args = format!(r#""nsid":{nsid},"zone":{zone}"#);
                let pid = PID_ZONES + zone / ZONES_PER_GROUP;
                w.slice(pid, zone, state_name(state), since, self.end.max(since), &args)?;
            }
        }
        self.zones = zones;
        self.names(w)
    }

    fn event(&mut self, e: &TraceEvent, w: &mut JsonWriter<'_>) -> io::Result<()> {
        match *e {
            TraceEvent::Queued { at_ns, cmd, cqid, kind, nsid, lba, blocks, fetched_ns } => {
                self.queues.insert(cmd.sqid, ());
                let name = kind.name();
                let o = Open {
                    name,
                    cqid,
                    nsid,
                    lba,
                    blocks,
                    at: at_ns,
                    fetched: fetched_ns,
                    started: None,
                };
                self.open.insert(cmd, o);
            }
            TraceEvent::Started { at_ns, cmd } => {
                if let Some(o) = self.open.get_mut(&cmd) {
                    o.started = Some(at_ns);
                }
            }
            TraceEvent::Completed { at_ns, cmd, status } => {
                if let Some(o) = self.open.remove(&cmd) {
                    self.command(cmd, &o, at_ns, status, w)?;
                }
            }
            TraceEvent::Flash { die, op, start_ns, end_ns, cmd, zone, bytes, suspended } => {
                self.dies.insert(die, ());
                let mut args = format!(r#""bytes":{bytes}"#);
                if let Some(c) = cmd {
                    let _ = write!(args, r#","command":"{}""#, cmd_name(c));
                }
                if let Some((nsid, z)) = zone {
                    let _ = write!(args, r#","nsid":{nsid},"zone":{z}"#);
                }
                if suspended {
                    args.push_str(r#","suspended":true"#);
                }
                w.slice(PID_DIES, die, op.name(), start_ns, end_ns, &args)?;
            }
            TraceEvent::Suspend { at_ns, die, op } => {
                w.instant(PID_DIES, die, &format!("suspend {}", op.name()), at_ns, "")?;
            }
            TraceEvent::Resume { at_ns, die, op } => {
                w.instant(PID_DIES, die, &format!("resume {}", op.name()), at_ns, "")?;
            }
            TraceEvent::Transfer { channel, die, start_ns, end_ns, bytes, cmd } => {
                self.used_channels.insert(channel, ());
                let mut args = format!(r#""die":{die},"bytes":{bytes}"#);
                if let Some(c) = cmd {
                    let _ = write!(args, r#","command":"{}""#, cmd_name(c));
                }
                w.slice(PID_CHANNELS, channel, "transfer", start_ns, end_ns, &args)?;
            }
            TraceEvent::Buffer { at_ns, used, capacity } => {
                let _ = write!(
                    w.line,
                    r#"{{"ph":"C","pid":{PID_BUFFER},"tid":0,"name":"write buffer KiB","ts":{},"args":{{"used":{},"free":{}}}}}"#,
                    us(at_ns),
                    used / 1024,
                    capacity.saturating_sub(used) / 1024
                );
                w.flush_line()?;
            }
            TraceEvent::BufferWait { at_ns, cmd, bytes } => {
                let mut args = format!(r#""bytes":{bytes}"#);
                if let Some(c) = cmd {
                    let _ = write!(args, r#","command":"{}""#, cmd_name(c));
                }
                w.instant(PID_BUFFER, 0, "waits for buffer room", at_ns, &args)?;
            }
            TraceEvent::ZoneState { at_ns, nsid, zone, from, to } => {
                let since = match self.zones.insert((nsid, zone), (to, at_ns)) {
                    Some((_, since)) => Some(since),
                    // The first transition seen: the zone was in `from`
                    // since the trace began.
                    None => (from != ZoneState::Empty).then_some(self.begin),
                };
                if let (Some(since), false) = (since, from == ZoneState::Empty) {
                    let args =
                        format!(r#""nsid":{nsid},"zone":{zone},"next":"{}""#, state_name(to));
                    let pid = PID_ZONES + zone / ZONES_PER_GROUP;
                    w.slice(pid, zone, state_name(from), since, at_ns, &args)?;
                }
            }
            TraceEvent::GcMove { at_ns, nsid, segment, gen, blocks } => {
                let args = format!(
                    r#""nsid":{nsid},"segment":{segment},"erase_count":{gen},"blocks":{blocks}"#
                );
                w.instant(PID_GC, 0, "reclaim", at_ns, &args)?;
            }
            _ => {}
        }
        Ok(())
    }

    /// A command as a slice of its queue's async track, with its fetch and
    /// processing start marked.
    fn command(
        &mut self,
        cmd: CommandId,
        o: &Open,
        end: u64,
        status: u16,
        w: &mut JsonWriter<'_>,
    ) -> io::Result<()> {
        self.async_id += 1;
        let (id, pid, name) = (self.async_id, PID_QUEUES + u32::from(cmd.sqid), o.name);
        let head = format!(r#""cat":"command","id":{id},"pid":{pid},"tid":{}"#, cmd.sqid);
        let _ = write!(
            w.line,
            r#"{{"ph":"b",{head},"name":"{name}","ts":{},"args":{{"command":"{}","cqid":{},"nsid":{},"lba":{},"blocks":{}}}}}"#,
            us(o.at),
            cmd_name(cmd),
            o.cqid,
            o.nsid,
            o.lba,
            o.blocks
        );
        w.flush_line()?;
        let mut marks = vec![("fetched", o.fetched)];
        if let Some(s) = o.started {
            marks.push(("processing", s));
        }
        for (mark, at) in marks {
            let _ =
                write!(w.line, r#"{{"ph":"n",{head},"name":"{mark}","ts":{}}}"#, us(at.min(end)));
            w.flush_line()?;
        }
        let status = if status == 0 { "success".to_string() } else { format!("{:#06x}", status) };
        let _ = write!(
            w.line,
            r#"{{"ph":"e",{head},"name":"{name}","ts":{},"args":{{"status":"{status}"}}}}"#,
            us(end)
        );
        w.flush_line()
    }

    /// Names of the processes and threads seen.
    fn names(&self, w: &mut JsonWriter<'_>) -> io::Result<()> {
        if !self.dies.is_empty() {
            w.name(PID_DIES, None, "dies")?;
        }
        for &d in self.dies.keys() {
            w.name(PID_DIES, Some(d), &format!("die {d} (channel {})", d % self.channels))?;
        }
        if !self.used_channels.is_empty() {
            w.name(PID_CHANNELS, None, "channels")?;
        }
        for &c in self.used_channels.keys() {
            w.name(PID_CHANNELS, Some(c), &format!("channel {c}"))?;
        }
        for &q in self.queues.keys() {
            let pid = PID_QUEUES + u32::from(q);
            w.name(pid, None, &format!("queue {q}"))?;
            w.name(pid, Some(u32::from(q)), &format!("queue {q} commands"))?;
        }
        w.name(PID_BUFFER, None, "write buffer")?;
        w.name(PID_GC, None, "garbage collection")?;
        let mut groups = BTreeMap::new();
        for &(_, zone) in self.zones.keys() {
            groups.insert(zone / ZONES_PER_GROUP, ());
            w.name(PID_ZONES + zone / ZONES_PER_GROUP, Some(zone), &format!("zone {zone}"))?;
        }
        for &g in groups.keys() {
            let (a, b) = (g * ZONES_PER_GROUP, (g + 1) * ZONES_PER_GROUP - 1);
            w.name(PID_ZONES + g, None, &format!("zones {a}-{b}"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use zns_emulator::trace::{CommandKind, FlashOp};

    fn flash(die: u32, start_ns: u64) -> TraceEvent {
        let end_ns = start_ns + 500;
        let (op, cmd, zone, bytes, suspended) = (FlashOp::Erase, None, None, 0, false);
        TraceEvent::Flash { die, op, start_ns, end_ns, cmd, zone, bytes, suspended }
    }

    fn json(t: &TraceFile) -> Value {
        let mut out = Vec::new();
        t.write_json(&mut out).unwrap();
        serde_json::from_slice(&out).unwrap()
    }

    #[test]
    fn the_ring_keeps_the_last_events_and_counts_the_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let t = TraceFile::new(dir.path().join("t.json"), 4, 8);
        for i in 0..10 {
            t.event(&flash(9, i * 1000));
        }
        assert_eq!(t.counts(), (4, 6));
        let v = json(&t);
        assert_eq!(
            (v["otherData"]["events"].as_u64(), v["otherData"]["dropped"].as_u64()),
            (Some(4), Some(6))
        );
        let ts: Vec<f64> = v["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == "X")
            .map(|e| e["ts"].as_f64().unwrap())
            .collect();
        assert_eq!(ts, [6.0, 7.0, 8.0, 9.0]);
        let names: Vec<&Value> =
            v["traceEvents"].as_array().unwrap().iter().filter(|e| e["ph"] == "M").collect();
        assert!(names.iter().any(|e| e["tid"] == 9 && e["args"]["name"] == "die 9 (channel 1)"));
    }

    #[test]
    fn commands_pair_up_and_zone_states_become_slices() {
        let dir = tempfile::tempdir().unwrap();
        let t = TraceFile::new(dir.path().join("t.json"), 100, 8);
        let cmd = CommandId { sqid: 2, cid: 7 };
        let (kind, nsid, lba, blocks) = (CommandKind::Write, 1, 70_000, 8);
        t.event(&TraceEvent::Queued {
            at_ns: 1000,
            cmd,
            cqid: 2,
            kind,
            nsid,
            lba,
            blocks,
            fetched_ns: 4000,
        });
        t.event(&TraceEvent::Started { at_ns: 4500, cmd });
        let zs = |at_ns, from, to| TraceEvent::ZoneState { at_ns, nsid: 1, zone: 70, from, to };
        t.event(&zs(4500, ZoneState::Empty, ZoneState::ImplicitlyOpen));
        t.event(&TraceEvent::Completed { at_ns: 12_000, cmd, status: 0 });
        t.event(&zs(20_000, ZoneState::ImplicitlyOpen, ZoneState::Full));
        // A completion without its doorbell (dropped from the ring) is left out.
        t.event(&TraceEvent::Completed {
            at_ns: 13_000,
            cmd: CommandId { sqid: 2, cid: 8 },
            status: 0,
        });
        let v = json(&t);
        let ev = v["traceEvents"].as_array().unwrap();
        let phases: Vec<&str> = ev
            .iter()
            .filter(|e| e["cat"] == "command")
            .map(|e| e["ph"].as_str().unwrap())
            .collect();
        assert_eq!(phases, ["b", "n", "n", "e"]);
        let b = ev.iter().find(|e| e["ph"] == "b").unwrap();
        assert_eq!(
            (b["pid"].as_u64(), b["name"].as_str(), b["ts"].as_f64()),
            (Some(102), Some("write"), Some(1.0))
        );
        assert_eq!(b["args"]["lba"], 70_000);
        let slices: Vec<(&str, f64, f64)> = ev
            .iter()
            .filter(|e| e["ph"] == "X" && e["pid"] == 1001)
            .map(|e| {
                (e["name"].as_str().unwrap(), e["ts"].as_f64().unwrap(), e["dur"].as_f64().unwrap())
            })
            .collect();
        // Zone 70 is in the second group of 64.
        assert_eq!(slices, [("Implicitly Opened", 4.5, 15.5), ("Full", 20.0, 0.0)]);
        assert!(ev
            .iter()
            .any(|e| e["ph"] == "M" && e["pid"] == 1001 && e["args"]["name"] == "zones 64-127"));
    }

    #[test]
    fn dropping_writes_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.json");
        let t = TraceFile::new(&path, 10, 8);
        t.event(&flash(0, 0));
        drop(t);
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(v["otherData"]["events"], 1);
    }
}
