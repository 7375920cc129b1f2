//! Planning: a command becomes a job, the list of steps it goes through
//! (processing, die reads, the host link, buffer room, programs, die work
//! of resets), decided when it is submitted.

use std::collections::BTreeMap;

use zns_spec::{ZoneSendAction, ZoneState};

use super::die::{DieOp, CLASS_BACKGROUND, CLASS_ERASE, CLASS_PROGRAM};
use super::zone::ZoneSim;
use super::{Ev, Sim, ZoneKey, CONVENTIONAL};
use crate::timing::{Op, ZoneBefore};

/// A read of one die: `bytes` sensed in `sense` ns, then transferred.
#[derive(Debug, Clone, Copy)]
pub(super) struct Piece {
    pub(super) die: u32,
    pub(super) bytes: u64,
    pub(super) sense: u64,
    /// The planes holding the bytes (bit `p`: plane `p`), for traces.
    pub(super) planes: u32,
}

/// Work put on a die by a reset (erases, block closes).
#[derive(Debug, Clone, Copy)]
pub(super) struct DieWork {
    pub(super) die: u32,
    pub(super) ns: u64,
    pub(super) class: usize,
    /// The job waits for it (background erases it does not).
    pub(super) wait: bool,
    /// Closing a partly programmed block rather than erasing one (for
    /// traces).
    pub(super) close: bool,
}

/// One step of a job.
#[derive(Debug)]
pub(super) enum Step {
    Delay(u64),
    /// `ns` of processing on a unit, after which the command goes on while
    /// the same unit does `ahead` ns more of its work: a firmware core runs
    /// a command's processing to completion before taking the next one.
    Unit {
        ns: u64,
        ahead: u64,
    },
    Mgmt(u64),
    Read(Vec<Piece>),
    LinkOut(u64),
    Admit(u64),
    /// Data into the buffer: the host transfer (when `dma`), ending no
    /// earlier than the command's processing ahead (`Unit::ahead`).
    Transfer {
        bytes: u64,
        dma: bool,
    },
    ZoneAdd {
        zone: ZoneKey,
        bytes: u64,
        filled: bool,
    },
    Serial(ZoneKey),
    /// Data into a segment of a namespace with an FTL: `bytes` at byte
    /// `at` of the segment's incarnation `gen` (`buffered`: host data
    /// holding write-buffer room; garbage collection's does not).
    SegmentAdd {
        zone: ZoneKey,
        gen: u32,
        at: u64,
        bytes: u64,
        buffered: bool,
    },
    /// Reads of garbage collection (below host reads).
    GcRead(Vec<Piece>),
    /// Waits until incarnation `gen` of a segment is programmed.
    AwaitRetired(ZoneKey, u32),
    /// The erase of incarnation `gen` of a segment is done: programs of
    /// later incarnations may start.
    Unblock(ZoneKey, u32),
    Pad {
        zone: ZoneKey,
        left: u64,
    },
    AwaitProgrammed(ZoneKey),
    DieOps(Vec<DieWork>),
    Post,
    Complete,
}

impl Step {
    /// Processing with nothing of the command's after it on the unit.
    pub(super) fn unit(ns: u64) -> Step {
        Step::Unit { ns, ahead: 0 }
    }
}

impl Sim {
    /// Array read time of `[off, off + bytes)` inside one program unit:
    /// one sense per page group (a page on every plane) touched, each as
    /// long as its page level.
    pub(super) fn sense(&self, off_in_unit: u64, bytes: u64) -> u64 {
        let sb = self.p.sense_bytes;
        let levels = &self.p.read_levels;
        let (g0, g1) = (off_in_unit / sb, (off_in_unit + bytes - 1) / sb);
        (g0..=g1).map(|g| levels[g as usize % levels.len()]).sum()
    }

    /// The planes `[off, off + bytes)` of a program unit lies on, bit `p`
    /// for plane `p`: a page group holds a page on every plane in plane
    /// order, so page `i` of the unit is on plane `i mod planes`.
    pub(super) fn plane_mask(&self, off_in_unit: u64, bytes: u64) -> u32 {
        // Validated profiles have 1 to 32 planes ([`crate::timing::MAX_PLANES`]).
        let planes = u64::from(self.p.planes.clamp(1, 32));
        if bytes == 0 {
            return 0;
        }
        let (first, last) = (off_in_unit / self.p.page, (off_in_unit + bytes - 1) / self.p.page);
        if last - first + 1 >= planes {
            return self.all_planes();
        }
        (first..=last).fold(0, |m, i| m | 1 << (i % planes))
    }

    /// Every plane of a die: what a program (a program unit spans the
    /// planes), an erase and a block close (an erase block spans them)
    /// cover.
    pub(super) fn all_planes(&self) -> u32 {
        u32::MAX >> (32 - self.p.planes.clamp(1, 32))
    }

    /// Die reads for the written runs of a read: pieces split at program
    /// unit boundaries (in a striped zone at its chunks); data still in the
    /// buffer needs none.
    pub(super) fn pieces(&self, nsid: u32, runs: &[(u64, u64)], out: &mut Vec<Piece>) {
        if self.geometry(nsid).segment_blocks > 0 {
            return self.segment_pieces(nsid, runs, out);
        }
        let bs = self.geometry(nsid).block_bytes;
        let unit = self.p.unit;
        for &(lba, blocks) in runs {
            let (zone, mut off) = self.locate(nsid, lba);
            let end = off + blocks * bs;
            let sim = self.zones.get(&zone);
            let striped = self.is_striped(zone);
            let span = if striped { self.p.chunk } else { unit };
            while off < end {
                let (k, in_unit) = if striped {
                    self.layout(zone).physical(off)
                } else {
                    (off / unit, off % unit)
                };
                let piece_end = end.min((off / span + 1) * span);
                let bytes = piece_end - off;
                let on_flash = match (zone.1, sim) {
                    (CONVENTIONAL, _) | (_, None) => true,
                    (_, Some(z)) => z.is_programmed(k * unit + in_unit),
                };
                if on_flash {
                    out.push(Piece {
                        die: self.die_of(zone, k),
                        bytes,
                        sense: self.sense(in_unit, bytes),
                        planes: self.plane_mask(in_unit, bytes),
                    });
                }
                off = piece_end;
            }
        }
    }

    /// Counts the bytes of written `runs` that `pieces` (their die reads)
    /// leave out: data still in the buffer.
    fn count_buffer_reads(&mut self, nsid: u32, runs: &[(u64, u64)], pieces: &[Piece]) {
        let written: u64 =
            runs.iter().map(|&(_, n)| n).sum::<u64>() * self.geometry(nsid).block_bytes;
        let sensed: u64 = pieces.iter().map(|p| p.bytes).sum();
        self.buffer_reads += written.saturating_sub(sensed);
    }

    pub(super) fn plan(&mut self, op: Op) -> Vec<Step> {
        let data = matches!(op, Op::Read { .. } | Op::Write { .. } | Op::Copy { .. });
        let hk = if data { self.housekeeping() } else { 0 };
        let mut s = self.plan_command(op);
        if let Some(Step::Unit { ns, .. }) = s.iter_mut().find(|st| matches!(st, Step::Unit { .. }))
        {
            *ns += hk;
        }
        s
    }

    /// The steps of a command, without housekeeping.
    fn plan_command(&mut self, op: Op) -> Vec<Step> {
        let p = &self.p;
        let mut s = vec![Step::Delay(p.fetch)];
        match op {
            Op::Other => s.push(Step::unit(p.other)),
            Op::Flush => s.push(Step::unit(p.flush)),
            Op::Report { bytes } => {
                s.push(Step::unit(p.report));
                s.push(Step::LinkOut(bytes));
            }
            Op::Read { nsid, lba, blocks, runs } => {
                s.push(Step::unit(p.read));
                let mut pieces = Vec::new();
                self.pieces(nsid, runs.as_slice(), &mut pieces);
                self.count_buffer_reads(nsid, runs.as_slice(), &pieces);
                s.push(Step::Read(pieces));
                s.push(Step::LinkOut(blocks * self.geometry(nsid).block_bytes));
                let _ = lba;
            }
            Op::Write { nsid, lba, blocks, opened, filled, dma, append, placed, zrwa_commit } => {
                let block_bytes = self.geometry(nsid).block_bytes;
                let bytes = blocks * block_bytes;
                let (zone, at) = self.locate(nsid, lba);
                // What goes to the flash: the blocks written, or in a ZRWA
                // the blocks committed.
                let (at, flash) = match zrwa_commit {
                    Some((from, n)) => (self.locate(nsid, from).1, n * block_bytes),
                    None => (at, bytes),
                };
                let entered = self.stripes_entered(zone, at, flash);
                let switched = self.write_context.replace(zone) != Some(zone);
                let p = &self.p;
                let (pre, overlap) =
                    if append { (p.append, p.append_overlap) } else { (p.write, p.write_overlap) };
                let open = if opened { p.implicit_open } else { 0 };
                // The context fetch is a wait, not processing: the unit
                // serves other commands meanwhile.
                if switched && p.zone_switch > 0 {
                    s.push(Step::Delay(p.zone_switch));
                }
                // Blocks smaller than the 4 KiB mapping unit are handled one
                // by one (Write and Zone Append; not Write Zeroes).
                let small = if dma && block_bytes < 4096 { blocks * p.small_lba } else { 0 };
                s.push(Step::Unit { ns: pre + open + small, ahead: overlap });
                if entered > 0 {
                    s.push(Step::Mgmt(entered * p.stripe_open));
                }
                if flash > 0 {
                    s.push(Step::Admit(flash));
                }
                s.push(Step::Transfer { bytes, dma });
                if !placed.is_empty() {
                    self.segment_adds(nsid, &placed, true, &mut s);
                } else if flash > 0 || filled {
                    s.push(Step::ZoneAdd { zone, bytes: flash, filled });
                }
                if append {
                    s.push(Step::Serial(zone));
                }
            }
            Op::Copy { nsid, sources, dest, blocks, opened, filled, placed, zrwa_commit } => {
                let block_bytes = self.geometry(nsid).block_bytes;
                let bytes = blocks * block_bytes;
                let flash = zrwa_commit.map_or(bytes, |(_, n)| n * block_bytes);
                let (zone, _) = self.locate(nsid, dest);
                let open = if opened { p.implicit_open } else { 0 };
                s.push(Step::Unit { ns: p.other + open, ahead: p.write_overlap });
                let mut pieces = Vec::new();
                self.pieces(nsid, &sources, &mut pieces);
                self.count_buffer_reads(nsid, &sources, &pieces);
                s.push(Step::Read(pieces));
                if flash > 0 {
                    s.push(Step::Admit(flash));
                }
                s.push(Step::Transfer { bytes, dma: false });
                if !placed.is_empty() {
                    self.segment_adds(nsid, &placed, true, &mut s);
                } else if flash > 0 || filled {
                    s.push(Step::ZoneAdd { zone, bytes: flash, filled });
                }
            }
            Op::ZoneSend { nsid, action, zones, committed } => {
                self.plan_zone_send(nsid, action, &zones, &mut s);
                if let (Some(z), true) = (zones.first(), committed > 0) {
                    self.plan_commit(nsid, z, committed, &mut s);
                }
            }
        }
        s.push(Step::Post);
        s.push(Step::Complete);
        s
    }

    fn plan_zone_send(
        &mut self,
        nsid: u32,
        action: ZoneSendAction,
        zones: &[ZoneBefore],
        s: &mut Vec<Step>,
    ) {
        let n = zones.len().max(1) as u64;
        self.track_write_context(nsid, action, zones);
        let p = &self.p;
        match action {
            ZoneSendAction::Open => s.push(Step::unit(p.open * n)),
            ZoneSendAction::Close => {
                let buffered = zones
                    .iter()
                    .filter(|z| self.zones.get(&(nsid, z.index)).is_some_and(|zs| !zs.settled()))
                    .count() as u64;
                s.push(Step::unit(p.close * n + p.close_buffered * buffered));
            }
            ZoneSendAction::Finish => {
                s.push(Step::unit(p.finish * n));
                for z in zones {
                    self.plan_finish(nsid, z, s);
                }
            }
            ZoneSendAction::Reset => {
                s.push(Step::unit(p.reset * n));
                s.push(Step::Mgmt(p.reset_metadata * n));
                let mut work = Vec::new();
                for z in zones {
                    self.plan_reset(nsid, z, &mut work);
                }
                if !work.is_empty() {
                    s.push(Step::DieOps(work));
                }
            }
            _ => s.push(Step::unit(p.other * n)),
        }
    }

    /// The write context a zone management command leaves in the processing
    /// unit: an explicit Open of one zone brings that zone's in (its first
    /// write pays no switch), and a Close, Finish or Reset of the zone held
    /// saves or drops it (the next write to any zone fetches its own).
    fn track_write_context(&mut self, nsid: u32, action: ZoneSendAction, zones: &[ZoneBefore]) {
        match action {
            ZoneSendAction::Open if zones.len() == 1 => {
                self.write_context = Some((nsid, zones[0].index));
            }
            ZoneSendAction::Close | ZoneSendAction::Finish | ZoneSendAction::Reset
                if zones.iter().any(|z| self.write_context == Some((nsid, z.index))) =>
            {
                self.write_context = None;
            }
            _ => {}
        }
    }

    /// Flush Explicit ZRWA Range: the committed blocks go through the buffer
    /// to the dies, as written data does.
    fn plan_commit(&mut self, nsid: u32, z: &ZoneBefore, committed: u64, s: &mut Vec<Step>) {
        let g = self.geometry(nsid);
        let bytes = committed * g.block_bytes;
        let filled = z.written + committed >= g.cap_blocks;
        let zone = (nsid, z.index);
        let entered = self.stripes_entered(zone, z.written * g.block_bytes, bytes);
        if entered > 0 {
            s.push(Step::Mgmt(entered * self.p.stripe_open));
        }
        s.push(Step::Admit(bytes));
        s.push(Step::ZoneAdd { zone, bytes, filled });
    }

    /// Finish: a zone with data is padded to its capacity through the
    /// buffer, and done when all of it is programmed.
    fn plan_finish(&mut self, nsid: u32, z: &ZoneBefore, s: &mut Vec<Step>) {
        let g = self.geometry(nsid);
        let pad = z.finish_padding(g.cap_blocks);
        if pad == 0 || g.zone_blocks == 0 {
            return;
        }
        let key = (nsid, z.index);
        let written = z.written * g.block_bytes;
        let gen = self.next_gen;
        let striped = self.is_striped(key);
        let p = &self.p;
        let sim = self.zones.entry(key).or_insert_with(|| match striped {
            true => ZoneSim::striped(gen, written, &p.layout(), p.unit),
            false => ZoneSim::new(gen, written),
        });
        if sim.gen == gen {
            self.next_gen += 1;
        }
        sim.host_end = Some(written);
        s.push(Step::Pad { zone: key, left: pad * g.block_bytes });
        s.push(Step::AwaitProgrammed(key));
    }

    /// Reset: the zone's data still in the buffer is dropped and its queued
    /// programs cancelled; every die holding its data erases its blocks
    /// (closing a partly programmed block first when the zone was neither
    /// finished nor filled); blocks of Finish padding are erased in the
    /// background.
    fn plan_reset(&mut self, nsid: u32, z: &ZoneBefore, work: &mut Vec<DieWork>) {
        let g = self.geometry(nsid);
        if g.zone_blocks == 0 || z.written == 0 && z.state == ZoneState::Empty {
            return;
        }
        let key = (nsid, z.index);
        let unit = self.p.unit;
        let cap = g.cap_blocks * g.block_bytes;
        let written = z.written * g.block_bytes;
        let (flash, host) = match self.zones.remove(&key) {
            Some(old) => {
                // Staged data holds no buffer room.
                let mut freed = old.fill - old.dispatched - old.staged;
                for die in self.dies.iter_mut() {
                    let q = &mut die.queues[CLASS_PROGRAM];
                    q.retain(|op| match op {
                        DieOp::Program(id) => {
                            let pr = self.progs[*id as usize].expect("queued program is live");
                            if pr.zone == key && pr.gen == old.gen {
                                freed += pr.bytes;
                                self.progs[*id as usize] = None;
                                self.free_progs.push(*id);
                                self.progs_live -= 1;
                                false
                            } else {
                                true
                            }
                        }
                        _ => true,
                    });
                }
                let cancelled = freed - (old.fill - old.dispatched - old.staged);
                let flash = old.dispatched - cancelled;
                for w in old.waiters {
                    self.schedule(self.now, Ev::Job(w));
                }
                self.free_buffer(freed);
                (flash, old.host_end.unwrap_or(flash).min(flash))
            }
            None => {
                let host = written.min(cap);
                let finished = z.state == ZoneState::Full && written < cap;
                (if finished { cap } else { host }, host)
            }
        };
        // Program units on flash per die: (host data, all).
        let mut per_die: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
        if self.is_striped(key) {
            let l = self.layout(key);
            for i in 0..l.stripe {
                let all = l.die_units(i, flash);
                if all > 0 {
                    per_die.insert(self.die_of(key, i), (l.die_units(i, host), all));
                }
            }
        } else {
            for k in 0..flash.div_ceil(unit) {
                let die = self.die_of(key, k);
                let e = per_die.entry(die).or_default();
                e.0 += u64::from(k < host.div_ceil(unit));
                e.1 += 1;
            }
        }
        let upb = self.p.units_per_block;
        let unfinished = z.state != ZoneState::Full;
        let erase = self.erase_time(key);
        for (die, (h, all)) in per_die {
            if h > 0 && unfinished && h % upb != 0 {
                let ns = self.p.close_block;
                work.push(DieWork { die, ns, class: CLASS_ERASE, wait: true, close: true });
            }
            for _ in 0..h.div_ceil(upb) {
                work.push(DieWork { die, ns: erase, class: CLASS_ERASE, wait: true, close: false });
            }
            for _ in 0..all.div_ceil(upb).saturating_sub(h.div_ceil(upb)) {
                let class = CLASS_BACKGROUND;
                work.push(DieWork { die, ns: erase, class, wait: false, close: false });
            }
        }
    }
}
