//! What the model knows of each zone's data: how much reached the buffer,
//! what was handed to programs and what is programmed; complete program
//! units (in a striped zone, gathered from several stripe rows) leave
//! for their dies as the zone fills.

use std::collections::BTreeMap;

use super::die::{DieOp, CLASS_PROGRAM};
use super::layout::Layout;
use super::{slot_in, Ev, Sim, ZoneKey};

/// A program of `[start, start + bytes)` of a zone.
#[derive(Debug, Clone, Copy)]
pub(super) struct Prog {
    pub(super) zone: ZoneKey,
    pub(super) gen: u32,
    pub(super) start: u64,
    pub(super) bytes: u64,
    /// Its data holds write-buffer room until programmed.
    pub(super) buffered: bool,
}

/// What the model knows of one zone's data.
#[derive(Debug)]
pub(super) struct ZoneSim {
    pub(super) gen: u32,
    /// Bytes that reached the buffer, from the zone start.
    pub(super) fill: u64,
    /// Bytes handed to programs (in a striped zone a count: its
    /// dispatched data is `[0, flushed)` and its program units complete in
    /// its first `scanned` chunks; otherwise also where the next program
    /// starts).
    pub(super) dispatched: u64,
    /// Striped zone: chunks whose filling was checked for completing a
    /// program unit.
    pub(super) scanned: u64,
    /// Striped zone: the zone offset below which all data was handed to
    /// programs (partial program units flushed, or on flash from before).
    pub(super) flushed: u64,
    /// Striped zone: bytes of its incomplete stripe staged outside the
    /// write buffer (all it has not handed to programs beyond one program
    /// unit).
    pub(super) staged: u64,
    /// Bytes programmed, contiguous from the zone start.
    pub(super) programmed: u64,
    /// Programmed ranges past `programmed` (start → end).
    pub(super) done: BTreeMap<u64, u64>,
    /// Programs queued or running.
    pub(super) inflight: u32,
    /// When the append write-pointer step is free.
    pub(super) serial_free: u64,
    /// Host data before a Finish padded the rest.
    pub(super) host_end: Option<u64>,
    /// Jobs waiting for everything to be programmed.
    pub(super) waiters: Vec<u32>,
    /// Its data holds write-buffer room (false for garbage collection's
    /// segments).
    pub(super) buffered: bool,
}

impl ZoneSim {
    pub(super) fn new(gen: u32, on_flash: u64) -> Self {
        ZoneSim {
            gen,
            fill: on_flash,
            dispatched: on_flash,
            scanned: 0,
            flushed: on_flash,
            staged: 0,
            programmed: on_flash,
            done: BTreeMap::new(),
            inflight: 0,
            serial_free: 0,
            host_end: None,
            waiters: Vec::new(),
            buffered: true,
        }
    }

    /// A striped zone whose first `on_flash` bytes are on flash: they
    /// and the units' pads count as programmed.
    pub(super) fn striped(gen: u32, on_flash: u64, p: &Layout, unit: u64) -> Self {
        let mut z = ZoneSim::new(gen, on_flash);
        (z.programmed, z.scanned) = (0, on_flash / p.chunk);
        let s = p.stripe;
        let units = (0..s).map(|i| p.die_units(i, on_flash)).max().unwrap_or(0) * s;
        for u in 0..units.max(s) {
            let end = u * unit + p.pad(u) + p.unit_below(u, on_flash);
            if end > u * unit {
                z.done.insert(u * unit, end);
            }
        }
        while let Some((&a, &e)) = z.done.first_key_value() {
            if a > z.programmed {
                break;
            }
            z.programmed = z.programmed.max(e);
            z.done.pop_first();
        }
        z
    }

    /// Whether the byte at `off` (physical in a striped zone) is programmed.
    pub(super) fn is_programmed(&self, off: u64) -> bool {
        off < self.programmed
            || self.done.range(..=off).next_back().is_some_and(|(_, &end)| off < end)
    }

    pub(super) fn settled(&self) -> bool {
        self.inflight == 0 && self.dispatched == self.fill
    }
}

/// [`Sim::incarnation_mut`] on the maps alone, so the caller may still
/// read the simulation's parameters.
pub(super) fn incarnation<'a>(
    zones: &'a mut BTreeMap<ZoneKey, ZoneSim>,
    retired: &'a mut BTreeMap<(ZoneKey, u32), ZoneSim>,
    zone: ZoneKey,
    gen: u32,
) -> Option<&'a mut ZoneSim> {
    match zones.get(&zone).is_some_and(|z| z.gen == gen) {
        true => zones.get_mut(&zone),
        false => retired.get_mut(&(zone, gen)),
    }
}

impl Sim {
    /// Incarnation `gen` of `zone`: the current one, or a reclaimed
    /// segment's still programming.
    pub(super) fn incarnation_mut(&mut self, zone: ZoneKey, gen: u32) -> Option<&mut ZoneSim> {
        incarnation(&mut self.zones, &mut self.retired, zone, gen)
    }

    /// A zone the model has no data of yet, incarnation `gen`.
    fn fresh_zone(&self, zone: ZoneKey, gen: u32) -> ZoneSim {
        match self.is_striped(zone) {
            true => ZoneSim::striped(gen, 0, &self.layout(zone), self.p.unit),
            false => ZoneSim::new(gen, 0),
        }
    }

    pub(super) fn zone_add(&mut self, zone: ZoneKey, bytes: u64) {
        let gen = self.next_gen;
        if !self.zones.contains_key(&zone) {
            let fresh = self.fresh_zone(zone, gen);
            self.zones.insert(zone, fresh);
        }
        let z = self.zones.get_mut(&zone).expect("zone just made");
        if z.gen == gen {
            self.next_gen += 1;
        }
        z.fill += bytes;
    }

    /// Programs the zone's complete program units (and, with `all`, the
    /// partial one at the end).
    pub(super) fn dispatch(&mut self, zone: ZoneKey, all: bool) {
        let gen = self.zones.get(&zone).map(|z| z.gen);
        if let Some(gen) = gen {
            self.dispatch_gen(zone, gen, all);
        }
    }

    /// [`Sim::dispatch`] for incarnation `gen` of the zone (a reclaimed
    /// segment's, among the retired ones, or the current one).
    pub(super) fn dispatch_gen(&mut self, zone: ZoneKey, gen: u32, all: bool) {
        if self.is_striped(zone) {
            self.dispatch_striped(zone, gen, all);
            return self.restage(zone, gen);
        }
        let unit = self.p.unit;
        loop {
            let Some(z) = self.incarnation_mut(zone, gen) else { return };
            let pending = z.fill - z.dispatched;
            if pending == 0 {
                return;
            }
            let boundary = (z.dispatched / unit + 1) * unit;
            let len = boundary - z.dispatched;
            if pending < len && !all {
                return;
            }
            let len = len.min(pending);
            let prog =
                Prog { zone, gen: z.gen, start: z.dispatched, bytes: len, buffered: z.buffered };
            z.dispatched += len;
            z.inflight += 1;
            self.start_program(prog);
        }
    }

    /// [`Sim::dispatch_gen`] for a striped zone or segment (incarnation
    /// `gen`): program units are programmed once complete, in the order
    /// the zone fills them; with `all`, what the incomplete ones hold too.
    fn dispatch_striped(&mut self, zone: ZoneKey, gen: u32, all: bool) {
        let (unit, chunk) = (self.p.unit, self.p.chunk);
        let cap = self.capacity_bytes(zone);
        let l = self.layout(zone);
        // A chunk completes its unit when it is the unit's last, or its
        // die's last in the zone (nothing more comes for the unit).
        let s = l.stripe;
        let last = |j: u64| l.ends_unit(j) || (j + s) * chunk >= cap;
        loop {
            let Some(z) = incarnation(&mut self.zones, &mut self.retired, zone, gen) else {
                return;
            };
            let j = z.scanned;
            if (j + 1) * chunk > z.fill {
                break;
            }
            z.scanned += 1;
            if !last(j) {
                continue;
            }
            // Its data below `flushed` went to an earlier program; a die's
            // last unit in the zone may hold fewer chunks.
            let u = l.physical(j * chunk).0;
            let from = l.unit_below(u, z.flushed);
            // (Data past the capacity: a write that was late for a Finish.)
            let bytes = l.unit_below(u, cap.max(z.fill)) - from;
            if bytes > 0 {
                let start = u * unit + l.pad(u) + from;
                let prog = Prog { zone, gen, start, bytes, buffered: z.buffered };
                z.dispatched += bytes;
                z.inflight += 1;
                self.start_program(prog);
            }
        }
        let Some(z) = incarnation(&mut self.zones, &mut self.retired, zone, gen) else { return };
        if !all || z.fill <= z.flushed {
            return;
        }
        let (flushed, fill) = (z.flushed, z.fill);
        z.flushed = fill;
        // Each die's last unit, if incomplete (complete ones went above).
        for i in 0..s {
            let Some(j) = l.last_chunk(i, fill) else { continue };
            if last(j) && (j + 1) * chunk <= fill {
                continue;
            }
            let u = l.physical(j * chunk).0;
            let (a, b) = (l.unit_below(u, flushed), l.unit_below(u, fill));
            if b > a {
                let z = incarnation(&mut self.zones, &mut self.retired, zone, gen)
                    .expect("zone just seen");
                let start = u * unit + l.pad(u) + a;
                let prog = Prog { zone, gen, start, bytes: b - a, buffered: z.buffered };
                z.dispatched += b - a;
                z.inflight += 1;
                self.start_program(prog);
            }
        }
    }

    /// Data of a write reaches `zone`; its complete program units are
    /// programmed (all of it when the write `filled` the zone).
    pub(super) fn zone_add_dispatch(&mut self, zone: ZoneKey, bytes: u64, filled: bool) {
        self.zone_add(zone, bytes);
        // A Finish waiting on the zone flushes late data too.
        let waited = self.zones.get(&zone).is_some_and(|z| !z.waiters.is_empty());
        self.dispatch(zone, filled || waited);
    }

    /// Job `id` (a Zone Append) takes the zone's write pointer for
    /// `append_serial`, after the appends to the zone before it.
    pub(super) fn append_serial(&mut self, id: u32, zone: ZoneKey) -> bool {
        let ns = self.p.append_serial;
        let gen = self.next_gen;
        if !self.zones.contains_key(&zone) {
            let fresh = self.fresh_zone(zone, gen);
            self.zones.insert(zone, fresh);
        }
        let z = self.zones.get_mut(&zone).expect("zone just made");
        if z.gen == gen {
            self.next_gen += 1;
        }
        let start = z.serial_free.max(self.now);
        z.serial_free = start + ns;
        self.resume_at(start + ns, id)
    }

    /// Job `id` (a Finish) has the zone's data programmed, partial program
    /// units too; true while some is not yet programmed.
    pub(super) fn await_programmed(&mut self, id: u32, zone: ZoneKey) -> bool {
        self.dispatch(zone, true);
        if let Some(z) = self.zones.get_mut(&zone) {
            if !z.settled() {
                z.waiters.push(id);
                return true;
            }
        }
        false
    }

    /// Queues program `prog` on its die (or parks it until an erase).
    fn start_program(&mut self, prog: Prog) {
        let (zone, gen) = (prog.zone, prog.gen);
        let k = prog.start / self.p.unit;
        let id = slot_in(&mut self.progs, &mut self.free_progs, prog);
        self.progs_live += 1;
        if self.must_wait_erase(zone, gen) {
            self.parked.entry(zone).or_default().push(id);
            return;
        }
        let die = self.die_of(zone, k);
        self.die_request(die, DieOp::Program(id), CLASS_PROGRAM);
    }

    pub(super) fn program_done(&mut self, id: u32) {
        let prog = self.progs[id as usize].take().expect("live program");
        self.free_progs.push(id);
        self.progs_live -= 1;
        if self.is_segment(prog.zone) {
            self.segment_programmed(&prog);
            if prog.buffered {
                self.free_buffer(prog.bytes);
            }
            self.relieve();
            return;
        }
        if let Some(z) = self.zones.get_mut(&prog.zone) {
            if z.gen == prog.gen {
                z.inflight -= 1;
                let end = prog.start + prog.bytes;
                if prog.start <= z.programmed {
                    z.programmed = z.programmed.max(end);
                    while let Some((&s, &e)) = z.done.first_key_value() {
                        if s > z.programmed {
                            break;
                        }
                        z.programmed = z.programmed.max(e);
                        z.done.pop_first();
                    }
                } else {
                    z.done.insert(prog.start, end);
                }
                if z.settled() && !z.waiters.is_empty() {
                    for w in std::mem::take(&mut z.waiters) {
                        self.schedule(self.now, Ev::Job(w));
                    }
                }
            }
        }
        self.free_buffer(prog.bytes);
        self.relieve();
    }
}
