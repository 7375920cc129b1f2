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
//! | `eZNS tenants` | `tenant NAME` | eZNS above the device: each stripe group a logical zone is given (a mark listing its physical zones), zone ballooning (lend, borrow, give back, get back marks; counters of the zones each tenant has lent and borrowed), tenants marked inactive and active again |
//!
//! Flash operations carry the planes they cover (`"planes":[0,1]`) as an
//! argument, not tracks of their own: the model runs a die's planes as one
//! (see [`zns_emulator::trace::TraceEvent::Flash`]).
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
const PID_TENANTS: u32 = 5;
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
    /// Names of the tenants of a layer above the device (eZNS), kept
    /// outside the ring so that no name is dropped.
    tenants: Mutex<BTreeMap<u16, String>>,
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
            tenants: Mutex::new(BTreeMap::new()),
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
        let tenants = self.tenants.lock().clone();
        let mut w = JsonWriter { out, first: true, line: String::new() };
        w.out.write_all(b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n")?;
        Tracks::new(self.channels, tenants).write(&events, &mut w)?;
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

    fn name_tenant(&self, tenant: u16, name: &str) {
        let mut names = self.tenants.lock();
        // Named again with every batch of events: allocate only when new.
        if names.get(&tenant).map(String::as_str) != Some(name) {
            names.insert(tenant, name.to_string());
        }
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

/// `text` escaped for the inside of a JSON string.
fn json_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out
}

/// A plane mask as a JSON array of plane numbers: `[0,1]`.
fn plane_list(mask: u32) -> String {
    let planes: Vec<String> =
        (0..32).filter(|p| mask & (1 << p) != 0).map(|p: u32| p.to_string()).collect();
    format!("[{}]", planes.join(","))
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

/// An eZNS stripe group being gathered from its columns' events.
struct StripeGroup {
    at: u64,
    tenant: u16,
    lzone: u32,
    start: u64,
    len: u64,
    width: u16,
    zones: Vec<u32>,
    budgets: Vec<u16>,
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
    /// Tenant names (eZNS), and the tenants with events.
    tenant_names: BTreeMap<u16, String>,
    tenants: BTreeMap<u16, ()>,
    /// The stripe group whose columns are being read.
    stripe: Option<StripeGroup>,
    /// The earliest and latest event times kept.
    begin: u64,
    end: u64,
}

impl Tracks {
    fn new(channels: u32, tenant_names: BTreeMap<u16, String>) -> Self {
        Tracks {
            channels,
            dies: BTreeMap::new(),
            used_channels: BTreeMap::new(),
            queues: BTreeMap::new(),
            zones: BTreeMap::new(),
            open: HashMap::new(),
            async_id: 0,
            tenant_names,
            tenants: BTreeMap::new(),
            stripe: None,
            begin: 0,
            end: 0,
        }
    }

    /// A tenant's name escaped for a JSON string (its index when it was
    /// not named).
    fn tenant(&self, t: u16) -> String {
        json_escape(self.tenant_names.get(&t).map_or(&t.to_string(), |n| n))
    }

    /// Writes every event, then the zones' last states and the names.
    fn write(mut self, events: &[TraceEvent], w: &mut JsonWriter<'_>) -> io::Result<()> {
        self.begin = events.iter().map(TraceEvent::time_ns).min().unwrap_or(0);
        for e in events {
            self.end = self.end.max(e.time_ns());
            self.event(e, w)?;
        }
        self.flush_stripe(w)?;
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
            TraceEvent::Flash {
                die,
                op,
                start_ns,
                end_ns,
                cmd,
                zone,
                bytes,
                planes,
                suspended,
            } => {
                self.dies.insert(die, ());
                let mut args = format!(r#""bytes":{bytes},"planes":{}"#, plane_list(planes));
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
            TraceEvent::Stripe { .. }
            | TraceEvent::Balloon { .. }
            | TraceEvent::TenantActivity { .. } => self.ezns(e, w)?,
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

    /// An event of eZNS above the device, on its tenant's track.
    fn ezns(&mut self, e: &TraceEvent, w: &mut JsonWriter<'_>) -> io::Result<()> {
        if !matches!(e, TraceEvent::Stripe { .. }) {
            // A group's columns come one after another, before eZNS's next
            // event (the device's own may come between them).
            self.flush_stripe(w)?;
        }
        match *e {
            TraceEvent::Stripe {
                at_ns,
                tenant,
                lzone,
                start,
                len,
                width,
                column,
                zone,
                budget,
            } => {
                let same = self.stripe.as_ref().is_some_and(|g| {
                    (g.at, g.tenant, g.lzone, g.start) == (at_ns, tenant, lzone, start)
                        && usize::from(column) == g.zones.len()
                });
                if !same {
                    self.flush_stripe(w)?;
                    self.stripe = Some(StripeGroup {
                        at: at_ns,
                        tenant,
                        lzone,
                        start,
                        len,
                        width,
                        zones: Vec::new(),
                        budgets: Vec::new(),
                    });
                }
                if let Some(g) = self.stripe.as_mut() {
                    g.zones.push(zone);
                    g.budgets.push(budget);
                }
            }
            TraceEvent::Balloon { at_ns, lender, borrower, zones, returned, lent, borrowed } => {
                self.tenants.insert(lender, ());
                self.tenants.insert(borrower, ());
                let (to_borrower, to_lender) =
                    if returned { ("give back", "get back") } else { ("borrow", "lend") };
                let (ln, bn) = (self.tenant(lender), self.tenant(borrower));
                let args = format!(r#""lender":"{ln}","zones":{zones}"#);
                w.instant(PID_TENANTS, u32::from(borrower), to_borrower, at_ns, &args)?;
                let args = format!(r#""borrower":"{bn}","zones":{zones}"#);
                w.instant(PID_TENANTS, u32::from(lender), to_lender, at_ns, &args)?;
                for (who, name, value) in [(ln, "lent", lent), (bn, "borrowed", borrowed)] {
                    let _ = write!(
                        w.line,
                        r#"{{"ph":"C","pid":{PID_TENANTS},"tid":0,"name":"zones {name} by {who}","ts":{},"args":{{"zones":{value}}}}}"#,
                        us(at_ns)
                    );
                    w.flush_line()?;
                }
            }
            TraceEvent::TenantActivity { at_ns, tenant, inactive, lendable } => {
                self.tenants.insert(tenant, ());
                let name = if inactive { "inactive" } else { "active again" };
                let args = format!(r#""lendable":{lendable}"#);
                w.instant(PID_TENANTS, u32::from(tenant), name, at_ns, &args)?;
            }
            _ => {}
        }
        Ok(())
    }

    /// Writes the stripe group gathered so far as a mark on its tenant's
    /// track: its place in the logical zone, its physical zones and whose
    /// budget each counts against (`partial` when the ring dropped some of
    /// its columns).
    fn flush_stripe(&mut self, w: &mut JsonWriter<'_>) -> io::Result<()> {
        let Some(g) = self.stripe.take() else { return Ok(()) };
        self.tenants.insert(g.tenant, ());
        let zones: Vec<String> = g.zones.iter().map(u32::to_string).collect();
        let budgets: Vec<String> =
            g.budgets.iter().map(|&b| format!(r#""{}""#, self.tenant(b))).collect();
        let borrowed = g.budgets.iter().filter(|&&b| b != g.tenant).count();
        let mut args = format!(
            r#""lzone":{},"start":{},"blocks":{},"width":{},"zones":[{}],"budgets":[{}],"borrowed":{borrowed}"#,
            g.lzone,
            g.start,
            g.len,
            g.width,
            zones.join(","),
            budgets.join(",")
        );
        if g.zones.len() != usize::from(g.width) {
            args.push_str(r#","partial":true"#);
        }
        w.instant(PID_TENANTS, u32::from(g.tenant), "stripe", g.at, &args)
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
        if !self.tenants.is_empty() {
            w.name(PID_TENANTS, None, "eZNS tenants")?;
        }
        for &t in self.tenants.keys() {
            let name = self.tenant(t);
            w.name(PID_TENANTS, Some(u32::from(t)), &format!("tenant {name}"))?;
        }
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
        let (op, cmd, zone, bytes, planes, suspended) =
            (FlashOp::Erase, None, None, 0, 0b11, false);
        TraceEvent::Flash { die, op, start_ns, end_ns, cmd, zone, bytes, planes, suspended }
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
    fn flash_slices_list_their_planes() {
        let dir = tempfile::tempdir().unwrap();
        let t = TraceFile::new(dir.path().join("t.json"), 10, 8);
        let (op, cmd, zone, bytes, suspended) = (FlashOp::Read, None, None, 4096, false);
        let (start_ns, end_ns) = (0, 100);
        for (die, planes) in [(0, 0b10), (1, 0b1011)] {
            t.event(&TraceEvent::Flash {
                die,
                op,
                start_ns,
                end_ns,
                cmd,
                zone,
                bytes,
                planes,
                suspended,
            });
        }
        let v = json(&t);
        let planes: Vec<&Value> = v["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == "X")
            .map(|e| &e["args"]["planes"])
            .collect();
        assert_eq!(planes, [&serde_json::json!([1]), &serde_json::json!([0, 1, 3])]);
    }

    #[test]
    fn ezns_groups_gather_their_columns_on_the_tenants_tracks() {
        let dir = tempfile::tempdir().unwrap();
        let t = TraceFile::new(dir.path().join("t.json"), 100, 8);
        t.name_tenant(0, "a");
        t.name_tenant(1, "b\"q");
        let col = |at_ns, tenant, width, column, zone, budget| TraceEvent::Stripe {
            at_ns,
            tenant,
            lzone: 3,
            start: 64,
            len: 96,
            width,
            column,
            zone,
            budget,
        };
        t.event(&col(1000, 0, 3, 0, 17, 0));
        // The device's own events may come between a group's columns.
        t.event(&flash(2, 1100));
        t.event(&col(1000, 0, 3, 1, 40, 1));
        t.event(&col(1000, 0, 3, 2, 41, 1));
        t.event(&TraceEvent::Balloon {
            at_ns: 2000,
            lender: 1,
            borrower: 0,
            zones: 2,
            returned: true,
            lent: 0,
            borrowed: 0,
        });
        // A group the ring kept only the last column of.
        t.event(&col(3000, 1, 2, 1, 9, 1));
        let v = json(&t);
        let ev = v["traceEvents"].as_array().unwrap();
        let marks: Vec<(u64, &str, &Value)> = ev
            .iter()
            .filter(|e| e["ph"] == "i" && e["pid"] == 5)
            .map(|e| (e["tid"].as_u64().unwrap(), e["name"].as_str().unwrap(), &e["args"]))
            .collect();
        assert_eq!(marks.len(), 4, "{marks:?}");
        let (tid, name, args) = marks[0];
        assert_eq!((tid, name), (0, "stripe"));
        assert_eq!(args["zones"], serde_json::json!([17, 40, 41]));
        assert_eq!(args["budgets"], serde_json::json!(["a", "b\"q", "b\"q"]));
        assert_eq!((args["lzone"].as_u64(), args["start"].as_u64()), (Some(3), Some(64)));
        assert_eq!((args["width"].as_u64(), args["borrowed"].as_u64()), (Some(3), Some(2)));
        assert!(args.get("partial").is_none());
        assert_eq!(
            (marks[1].0, marks[1].1, &marks[1].2["lender"]),
            (0, "give back", &serde_json::json!("b\"q"))
        );
        assert_eq!(
            (marks[2].0, marks[2].1, &marks[2].2["borrower"]),
            (1, "get back", &serde_json::json!("a"))
        );
        assert_eq!(
            (marks[3].0, marks[3].1, &marks[3].2["partial"]),
            (1, "stripe", &Value::Bool(true))
        );
        let named = |tid: u64, name: &str| {
            ev.iter().any(|e| {
                e["ph"] == "M" && e["pid"] == 5 && e["tid"] == tid && e["args"]["name"] == name
            })
        };
        assert!(named(0, "tenant a") && named(1, "tenant b\"q"), "{ev:?}");
        let counters: Vec<(&str, u64)> = ev
            .iter()
            .filter(|e| e["ph"] == "C" && e["pid"] == 5)
            .map(|e| (e["name"].as_str().unwrap(), e["args"]["zones"].as_u64().unwrap()))
            .collect();
        assert_eq!(counters, [("zones lent by b\"q", 0), ("zones borrowed by a", 0)]);
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
