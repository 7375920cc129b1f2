//! Segments of a conventional namespace with a device-side FTL, and its
//! garbage collection, in the simulation.
//!
//! A segment (an erase block on every die) is written like a zone: its
//! program units rotate over all dies from die 0, through the buffer for
//! host data; where the profile stripes zones over every die in chunks
//! smaller than a program unit, a segment's data is striped the same way. Each time the firmware reclaims a segment it starts a new
//! incarnation (the segment's erase count, `gen`), so the model keeps a
//! segment's data per incarnation: the current one in `zones`, reclaimed
//! ones with programs still to finish in `retired`.
//!
//! A reclaim ([`GcEvent`]) becomes a job of the device's own: reads of the
//! victim's valid blocks (below host reads), their programs into the GC's
//! segment (without write-buffer room), then, once the victim's own
//! programs are done, an erase on every die. Programs of a later
//! incarnation of the victim wait (`parked`) until that erase is done.
//!
//! Incarnations the model never saw data for (written before a power cut
//! reset the model, or whose data is still on its way to the buffer) count
//! as programmed: garbage collection does not wait for them.

use super::die::{DieOp, CLASS_ERASE, CLASS_PROGRAM};
use super::plan::{DieWork, Piece, Step};
use super::{Ev, Prog, Sim, ZoneKey, ZoneSim};
use crate::conv::{GcEvent, Placement};

impl Sim {
    /// The steps adding a write's data to the segments it was placed in.
    pub(super) fn segment_adds(
        &self,
        nsid: u32,
        placed: &[Placement],
        buffered: bool,
        s: &mut Vec<Step>,
    ) {
        let bs = self.geometry(nsid).block_bytes;
        for pl in placed {
            s.push(Step::SegmentAdd {
                zone: (nsid, pl.segment),
                gen: pl.gen,
                at: pl.offset * bs,
                bytes: pl.blocks * bs,
                buffered,
            });
        }
    }

    /// Data reaches incarnation `gen` of a segment; its complete program
    /// units are programmed (or parked until the segment's erase).
    pub(super) fn segment_add(
        &mut self,
        zone: ZoneKey,
        gen: u32,
        at: u64,
        bytes: u64,
        buffered: bool,
    ) {
        let current = self.zones.get(&zone).map(|z| z.gen);
        match current {
            Some(g) if g == gen => {}
            _ if self.retired.contains_key(&(zone, gen)) => {}
            Some(g) if g > gen => {
                // Late data of an incarnation reclaimed and forgotten: its
                // programs still take die time.
                let z = self.incarnation(zone, gen, at, buffered);
                self.retired.insert((zone, gen), z);
            }
            _ => {
                // A new incarnation; an older one still here was reclaimed
                // without the model hearing of it (a power cut in between).
                if let Some(old) = self.zones.remove(&zone) {
                    if !old.settled() {
                        self.retired.insert((zone, old.gen), old);
                    }
                }
                let z = self.incarnation(zone, gen, at, buffered);
                self.zones.insert(zone, z);
            }
        }
        let current = self.zones.get(&zone).is_some_and(|z| z.gen == gen);
        let z = self.incarnation_mut(zone, gen).expect("incarnation just found or made");
        // Pieces may arrive out of order (reclaims moving into one segment
        // whose reads end in another order): the segment holds data up to
        // the end of the furthest piece, each byte counted once.
        z.fill = z.fill.max(at + bytes);
        // A reclaimed incarnation gets no more than what is on its way:
        // that is programmed as it arrives, a partial unit too, so the
        // erase waiting for it is never held by a unit nothing completes
        // (a segment closed partly written).
        self.dispatch_gen(zone, gen, !current);
    }

    /// A new incarnation of a segment whose first `at` bytes the model
    /// takes as on flash.
    fn incarnation(&self, zone: ZoneKey, gen: u32, at: u64, buffered: bool) -> ZoneSim {
        let mut z = match self.is_striped(zone) {
            true => ZoneSim::striped(gen, at, &self.layout(zone), self.p.unit),
            false => ZoneSim::new(gen, at),
        };
        z.buffered = buffered;
        z
    }

    /// Program unit and offset in it of byte `off` of a segment.
    fn segment_place(&self, zone: ZoneKey, off: u64) -> (u64, u64) {
        match self.is_striped(zone) {
            true => self.layout(zone).physical(off),
            false => (off / self.p.unit, off % self.p.unit),
        }
    }

    /// Whether a program of incarnation `gen` of `zone` must wait for the
    /// erase of an earlier incarnation.
    pub(super) fn must_wait_erase(&self, zone: ZoneKey, gen: u32) -> bool {
        self.blocked.get(&zone).is_some_and(|pending| pending.iter().any(|&g| g < gen))
    }

    /// The erase of incarnation `gen` of `zone` is done: parked programs
    /// no erase holds back any more start.
    pub(super) fn unblock(&mut self, zone: ZoneKey, gen: u32) {
        if let Some(pending) = self.blocked.get_mut(&zone) {
            pending.retain(|&g| g != gen);
            if pending.is_empty() {
                self.blocked.remove(&zone);
            }
        }
        let Some(parked) = self.parked.remove(&zone) else { return };
        let mut still = Vec::new();
        for id in parked {
            let prog = self.progs[id as usize].expect("parked program is live");
            if self.must_wait_erase(zone, prog.gen) {
                still.push(id);
            } else {
                let die = self.die_of(zone, prog.start / self.p.unit);
                self.die_request(die, DieOp::Program(id), CLASS_PROGRAM);
            }
        }
        if !still.is_empty() {
            self.parked.insert(zone, still);
        }
    }

    /// Bookkeeping of a finished program of a segment: an incarnation
    /// whose every block is programmed is forgotten (its data is on
    /// flash), and garbage collection waiting for a retired one goes on.
    pub(super) fn segment_programmed(&mut self, prog: &Prog) {
        let full =
            self.geometry(prog.zone.0).segment_blocks * self.geometry(prog.zone.0).block_bytes;
        let current = self.zones.get(&prog.zone).is_some_and(|z| z.gen == prog.gen);
        let Some(z) = self.incarnation_mut(prog.zone, prog.gen) else { return };
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
        if !(z.settled() && (z.fill >= full || !current)) {
            return;
        }
        let waiters = std::mem::take(&mut z.waiters);
        match current {
            true => {
                self.zones.remove(&prog.zone);
            }
            false => {
                self.retired.remove(&(prog.zone, prog.gen));
            }
        }
        for w in waiters {
            self.schedule(self.now, Ev::Job(w));
        }
    }

    /// Die reads of physical runs of a namespace with an FTL: pieces split
    /// at program units (and segments); data not yet programmed needs none.
    pub(super) fn segment_pieces(&self, nsid: u32, runs: &[(u64, u64)], out: &mut Vec<Piece>) {
        let g = self.geometry(nsid);
        let (bs, seg_blocks, unit) = (g.block_bytes, g.segment_blocks, self.p.unit);
        for &(p, blocks) in runs {
            let mut at = p;
            let end = p + blocks;
            while at < end {
                let seg = at / seg_blocks;
                let zone = (nsid, seg as u32);
                let off = (at - seg * seg_blocks) * bs;
                let (k, in_unit) = self.segment_place(zone, off);
                // A piece ends with the run, the segment, or its chunk of
                // the unit (the whole unit where segments are not striped).
                let span = if self.is_striped(zone) { self.p.chunk } else { unit };
                let run_end = end.min((seg + 1) * seg_blocks);
                let piece_end = (run_end - seg * seg_blocks) * bs;
                let piece_end = piece_end.min((off / span + 1) * span);
                let bytes = piece_end - off;
                let on_flash =
                    self.zones.get(&zone).is_none_or(|z| z.is_programmed(k * unit + in_unit));
                if on_flash {
                    out.push(Piece {
                        die: self.die_of(zone, k),
                        bytes,
                        sense: self.sense(in_unit, bytes),
                        planes: self.plane_mask(in_unit, bytes),
                    });
                }
                at += bytes / bs;
            }
        }
    }

    /// Die reads of a victim's valid blocks (offsets in blocks, ascending):
    /// one read per program unit, sensing the pages that hold valid blocks
    /// and moving only those blocks over the channel.
    fn gc_pieces(&self, nsid: u32, victim: &Option<ZoneSim>, valid: &[u32]) -> Vec<Piece> {
        let g = self.geometry(nsid);
        let (bs, unit, sb) = (g.block_bytes, self.p.unit, self.p.sense_bytes);
        let levels = &self.p.read_levels;
        let zone = (nsid, 0);
        // Program unit → (bytes, page groups sensed, planes).
        let mut units: std::collections::BTreeMap<u64, (u64, u64, u32)> = Default::default();
        for &o in valid {
            let off = o as u64 * bs;
            let (k, in_unit) = self.segment_place(zone, off);
            if victim.as_ref().is_some_and(|z| !z.is_programmed(k * unit + in_unit)) {
                // Still in the buffer: copied from there.
                continue;
            }
            let group = (in_unit / sb).min(63);
            let e = units.entry(k).or_default();
            e.0 += bs;
            e.1 |= 1 << group;
            e.2 |= self.plane_mask(in_unit, bs);
        }
        units
            .into_iter()
            .map(|(k, (bytes, groups, planes))| {
                let sense = (0..64)
                    .filter(|b| groups & (1u64 << b) != 0)
                    .map(|b| levels[b % levels.len()])
                    .sum();
                Piece { die: self.die_of(zone, k), bytes, sense, planes }
            })
            .collect()
    }

    /// The firmware closed incarnation `gen` of a segment before it was
    /// full (a Reclaim Unit Handle Update): what the segment holds is
    /// programmed now, a partial program unit too, as for a finished zone.
    pub fn close_segment(&mut self, nsid: u32, segment: u32, gen: u32) {
        self.dispatch_gen((nsid, segment), gen, true);
    }

    /// The firmware reclaimed a segment: reads of its valid blocks,
    /// programs of them where they went, the erase once its own programs
    /// are done, as a job of the device's own.
    pub fn collect(&mut self, nsid: u32, e: GcEvent) {
        let zone = (nsid, e.segment);
        if let Some(t) = &self.trace {
            let (segment, gen, blocks) = (e.segment, e.gen, e.valid.len() as u64);
            let ev =
                crate::trace::TraceEvent::GcMove { at_ns: self.now, nsid, segment, gen, blocks };
            t.event(&ev);
        }
        let victim = match self.zones.get(&zone) {
            Some(z) if z.gen == e.gen => self.zones.remove(&zone),
            _ => self.retired.remove(&(zone, e.gen)),
        };
        let pieces = self.gc_pieces(nsid, &victim, &e.valid);
        if let Some(v) = victim {
            // The victim's blocks still buffered are programmed now, a
            // partial program unit too (data the model never received,
            // such as that of a write that failed, is not waited for).
            self.retired.insert((zone, e.gen), v);
            self.dispatch_gen(zone, e.gen, true);
            if self.retired.get(&(zone, e.gen)).is_some_and(|v| v.settled()) {
                self.retired.remove(&(zone, e.gen));
            }
        }
        self.blocked.entry(zone).or_default().push(e.gen);
        let mut steps = Vec::new();
        if !pieces.is_empty() {
            steps.push(Step::GcRead(pieces));
        }
        self.segment_adds(nsid, &e.dest, false, &mut steps);
        steps.push(Step::AwaitRetired(zone, e.gen));
        let erase = self.erase_time(zone);
        let work = (0..self.p.dies)
            .map(|die| DieWork { die, ns: erase, class: CLASS_ERASE, wait: true, close: false })
            .collect();
        steps.push(Step::DieOps(work));
        steps.push(Step::Unblock(zone, e.gen));
        self.start_internal(steps);
    }
}
