//! The control queue: the journal writer and the physical zone finishes
//! and resets the layer issues itself.
//!
//! One base queue, behind a mutex that whoever polls any tenant queue
//! tries (never waits for). Journal entries queue up with a [`Gate`] each;
//! one block is in flight at a time, holding every entry that fits (group
//! commit); its gates commit when it completes. Finishes and resets of
//! physical zones wait in a list until they may run: a finish once the
//! record that makes it safe is durable and every write below its point
//! has completed, a reset once nothing is in flight on the zone; each
//! claims the zone's token, so no write can slip in.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering::*;
use std::sync::Arc;

use zns_device::{Completion, IoBuffer, Target, ZoneAction, ZoneOp, ZoneQueue};

use crate::journal::{self, Entry, Mapping};
use crate::runtime::{committed, Ezns, Gate, Group, BUSY, COMMITTED, DONE, FAILED, PENDING};

/// An internal command in flight.
enum CtlOp {
    Record(Vec<Gate>),
    Finish(u32),
    Reset(u32),
}

/// Physical zone work waiting for its turn.
#[derive(Debug)]
pub(crate) enum Deferred {
    /// Finish the zone once `gate` is durable and its writes reached `at`
    /// (blocks from the zone start); dropped if `group` dies (the logical
    /// zone was reset: its reset takes care of the zone).
    Finish { zone: u32, at: u64, gate: Gate, group: Arc<Group> },
    /// Reset the zone once `gate` is durable and nothing is in flight.
    Reset { zone: u32, gate: Gate },
}

/// Where the journal is written.
#[derive(Debug, Clone)]
pub(crate) struct JournalState {
    pub zones: [u32; 2],
    pub cur: usize,
    pub generation: u64,
    /// Blocks written (and the next block's sequence number) in the
    /// current journal zone.
    pub seq: u64,
    /// Blocks of a journal zone.
    pub cap: u64,
    pub digest: u64,
    pub layout: String,
}

/// The control queue's state.
pub(crate) struct Control {
    pub q: Box<dyn ZoneQueue>,
    pub bs: usize,
    pub journal: JournalState,
    /// The mapping the journal describes once every queued entry is
    /// written (for checkpoints).
    pub mapping: Mapping,
    records: VecDeque<(Entry, Gate)>,
    record_inflight: bool,
    pub deferred: Vec<Deferred>,
    ops: HashMap<u64, CtlOp>,
    next_tag: u64,
    bufs: Vec<IoBuffer>,
    done: Vec<Completion>,
    /// Internal commands that failed, for status.
    pub failures: u64,
    /// Finish commands sent to the base device (each may pad the rest of
    /// a physical zone), for status.
    pub finishes: u64,
    /// Blocks those finishes left for the device to pad (each zone's
    /// capacity less what it held), for status.
    pub padded: u64,
    /// Journal and checkpoint blocks written since the instance opened,
    /// for status.
    pub journal_blocks: u64,
}

impl std::fmt::Debug for Control {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Control")
            .field("journal", &self.journal)
            .field("records", &self.records.len())
            .field("deferred", &self.deferred.len())
            .field("ops", &self.ops.len())
            .finish_non_exhaustive()
    }
}

impl Control {
    pub fn new(
        q: Box<dyn ZoneQueue>,
        bs: usize,
        journal: JournalState,
        mapping: Mapping,
    ) -> Control {
        Control {
            q,
            bs,
            journal,
            mapping,
            records: VecDeque::new(),
            record_inflight: false,
            deferred: Vec::new(),
            ops: HashMap::new(),
            next_tag: 1,
            bufs: Vec::new(),
            done: Vec::new(),
            failures: 0,
            finishes: 0,
            padded: 0,
            journal_blocks: 0,
        }
    }

    /// Work queued or in flight.
    pub fn work(&self) -> u64 {
        (self.records.len() + self.deferred.len() + self.ops.len()) as u64
    }

    /// Queues a journal entry; the gate commits when it is durable.
    pub fn record(&mut self, e: Entry) -> Gate {
        if let Err(err) = self.mapping.apply(&e) {
            tracing::error!(%err, "journal entry for a zone that does not exist");
        }
        let gate: Gate = Arc::new(std::sync::atomic::AtomicU8::new(PENDING));
        self.records.push_back((e, gate.clone()));
        gate
    }

    /// Queues physical zone work.
    pub fn defer(&mut self, d: Deferred) {
        self.deferred.push(d);
    }

    fn tag(&mut self) -> u64 {
        self.next_tag += 1;
        self.next_tag
    }

    fn buffer(&mut self) -> Option<IoBuffer> {
        match self.bufs.pop() {
            Some(b) => Some(b),
            None => self.q.alloc(self.bs).ok(),
        }
    }

    /// Polls, starts what may start, rings. Zones whose active-zone
    /// holding ends are added to `release` (`true`: also free). Returns
    /// how many internal commands completed.
    pub fn pump(&mut self, ez: &Ezns, release: &mut Vec<(u32, bool)>) -> u64 {
        let mut done = std::mem::take(&mut self.done);
        self.q.poll(usize::MAX, &mut |c| done.push(c));
        let mut completed = 0;
        for c in done.drain(..) {
            completed += u64::from(self.completed(ez, c, release));
        }
        self.done = done;
        if !self.record_inflight && !self.records.is_empty() {
            if self.journal.seq >= self.journal.cap {
                if let Err(e) = self.switch(|z| ez.zone_lba(z)) {
                    tracing::error!(error = %e, "eZNS journal checkpoint failed");
                    self.failures += 1;
                    for (_, g) in self.records.drain(..) {
                        g.store(FAILED, Release);
                    }
                }
            } else {
                self.write_block(ez);
            }
        }
        let mut i = 0;
        while i < self.deferred.len() {
            if self.try_start(ez, i, release) {
                self.deferred.swap_remove(i);
            } else {
                i += 1;
            }
        }
        self.q.ring();
        completed
    }

    /// Takes one completion; false if it was no internal command's.
    fn completed(&mut self, ez: &Ezns, c: Completion, release: &mut Vec<(u32, bool)>) -> bool {
        let Some(op) = self.ops.remove(&c.tag) else { return false };
        let ok = c.result.is_ok();
        if let Some(b) = c.buffer {
            self.bufs.push(b);
        }
        if let Err(e) = &c.result {
            tracing::error!(error = %e, "eZNS internal command failed");
            self.failures += 1;
        }
        match op {
            CtlOp::Record(gates) => {
                self.record_inflight = false;
                for g in gates {
                    g.store(if ok { COMMITTED } else { FAILED }, Release);
                }
            }
            CtlOp::Finish(z) => {
                let t = &ez.phys[z as usize].token;
                if ok {
                    t.store(ez.geo.phys_cap, Release);
                    release.push((z, false));
                } else {
                    t.fetch_and(!BUSY, AcqRel);
                }
            }
            CtlOp::Reset(z) => {
                let t = &ez.phys[z as usize].token;
                if ok {
                    t.store(0, Release);
                    release.push((z, true));
                } else {
                    t.fetch_and(!BUSY, AcqRel);
                }
            }
        }
        true
    }

    /// Writes the next journal block: as many queued entries as fit.
    fn write_block(&mut self, ez: &Ezns) {
        let mut take = 0;
        let mut used = journal::HEADER;
        for (e, _) in &self.records {
            if used + e.size() > self.bs {
                break;
            }
            used += e.size();
            take += 1;
        }
        let take = take.max(1);
        let Some(mut buf) = self.buffer() else { return };
        let entries: Vec<Entry> = self.records.iter().take(take).map(|(e, _)| e.clone()).collect();
        let j = &self.journal;
        let block = journal::encode_block(self.bs, j.generation, j.seq, &entries);
        buf.copy_from_slice(&block);
        let lba = ez.zone_lba(j.zones[j.cur]) + j.seq;
        let tag = self.tag();
        match self.q.submit(ZoneOp::Write { lba, fua: true, placement: None }, Some(buf), tag) {
            Ok(()) => {
                let gates = self.records.drain(..take).map(|(_, g)| g).collect();
                self.ops.insert(tag, CtlOp::Record(gates));
                self.journal.seq += 1;
                self.journal_blocks += 1;
                self.record_inflight = true;
            }
            Err(r) => {
                if let Some(b) = r.buffer {
                    self.bufs.push(b);
                }
            }
        }
    }

    /// Tries deferred work `i`; true when it is done with (started or
    /// dropped).
    fn try_start(&mut self, ez: &Ezns, i: usize, release: &mut Vec<(u32, bool)>) -> bool {
        match &self.deferred[i] {
            Deferred::Finish { zone, at, gate, group } => {
                let (zone, at) = (*zone, *at);
                if group.dead.load(Acquire) {
                    // The logical zone was reset: its reset takes the
                    // column back with the zone's others.
                    return true;
                }
                match gate.load(Acquire) {
                    PENDING => return false,
                    FAILED => return true,
                    _ => {}
                }
                let token = &ez.phys[zone as usize].token;
                let t = token.load(Acquire);
                let d = t & DONE;
                if t & BUSY != 0 || d < at {
                    return false;
                }
                if d >= ez.geo.phys_cap {
                    release.push((zone, false));
                    return true;
                }
                if token.compare_exchange(t, t | BUSY, AcqRel, Acquire).is_err() {
                    return false;
                }
                if d == 0 {
                    // Never written: Empty on the device, no longer active.
                    // It stays the logical zone's until that is reset.
                    token.store(0, Release);
                    release.push((zone, false));
                    return true;
                }
                self.start(ez, zone, ZoneAction::Finish, CtlOp::Finish(zone), t)
            }
            Deferred::Reset { zone, gate } => {
                let zone = *zone;
                if gate.load(Acquire) == PENDING {
                    return false;
                }
                let token = &ez.phys[zone as usize].token;
                let t = token.load(Acquire);
                if t & BUSY != 0 || token.compare_exchange(t, t | BUSY, AcqRel, Acquire).is_err() {
                    return false;
                }
                if t & DONE == 0 {
                    token.store(0, Release);
                    release.push((zone, true));
                    return true;
                }
                self.start(ez, zone, ZoneAction::Reset, CtlOp::Reset(zone), t)
            }
        }
    }

    fn start(&mut self, ez: &Ezns, zone: u32, action: ZoneAction, op: CtlOp, token: u64) -> bool {
        let tag = self.tag();
        let cmd = ZoneOp::Zone { action, target: Target::Zone(ez.zone_lba(zone)) };
        match self.q.submit(cmd, None, tag) {
            Ok(()) => {
                if action == ZoneAction::Finish {
                    self.finishes += 1;
                    self.padded += ez.geo.phys_cap.saturating_sub(token & DONE);
                }
                self.ops.insert(tag, op);
                true
            }
            Err(_) => {
                ez.phys[zone as usize].token.store(token, Release);
                false
            }
        }
    }

    /// Writes every queued entry now, waiting for each block (recovery and
    /// formatting).
    pub fn sync(
        &mut self,
        ez_zone_lba: impl Fn(u32) -> u64,
    ) -> Result<(), zns_device::DeviceError> {
        while !self.records.is_empty() {
            let mut take = 0;
            let mut used = journal::HEADER;
            for (e, _) in &self.records {
                if used + e.size() > self.bs && take > 0 {
                    break;
                }
                used += e.size();
                take += 1;
            }
            if self.journal.seq >= self.journal.cap {
                self.switch(&ez_zone_lba).map_err(zns_device::DeviceError::Unsupported)?;
                continue;
            }
            let entries: Vec<Entry> =
                self.records.iter().take(take).map(|(e, _)| e.clone()).collect();
            let j = &self.journal;
            let block = journal::encode_block(self.bs, j.generation, j.seq, &entries);
            let mut buf = self.q.alloc(self.bs)?;
            buf.copy_from_slice(&block);
            self.q.write_fua(ez_zone_lba(j.zones[j.cur]) + j.seq, &buf)?;
            self.journal.seq += 1;
            self.journal_blocks += 1;
            for (_, g) in self.records.drain(..take) {
                g.store(COMMITTED, Release);
            }
        }
        Ok(())
    }

    /// The current journal zone is full: writes the next generation's
    /// checkpoint to the other one, resets this one. Every queued entry is
    /// in the checkpoint (the mapping holds it), so their gates commit.
    fn switch(&mut self, zone_lba: impl Fn(u32) -> u64) -> Result<(), String> {
        let next = 1 - self.journal.cur;
        let generation = self.journal.generation + 1;
        let mut entries =
            vec![Entry::Super { digest: self.journal.digest, layout: self.journal.layout.clone() }];
        entries.extend(self.mapping.checkpoint());
        entries.push(Entry::End);
        let blocks = journal::pack(self.bs, entries);
        if blocks.len() as u64 >= self.journal.cap {
            return Err(format!(
                "the checkpoint takes {} blocks, a journal zone holds {}",
                blocks.len(),
                self.journal.cap
            ));
        }
        let start = zone_lba(self.journal.zones[next]);
        let mut buf = self.q.alloc(self.bs).map_err(|e| e.to_string())?;
        for (i, b) in blocks.iter().enumerate() {
            buf.copy_from_slice(&journal::encode_block(self.bs, generation, i as u64, b));
            self.q.write_fua(start + i as u64, &buf).map_err(|e| e.to_string())?;
            self.journal_blocks += 1;
        }
        let old = zone_lba(self.journal.zones[self.journal.cur]);
        self.q.zone_action(ZoneAction::Reset, Target::Zone(old)).map_err(|e| e.to_string())?;
        self.journal.cur = next;
        self.journal.generation = generation;
        self.journal.seq = blocks.len() as u64;
        for (_, g) in self.records.drain(..) {
            g.store(COMMITTED, Release);
        }
        tracing::debug!(generation, blocks = blocks.len(), "eZNS journal checkpoint");
        Ok(())
    }
}

/// Pumps the control queue if nobody else is, then applies the releases.
/// Returns how many internal commands completed.
pub(crate) fn pump(ez: &Ezns) -> u64 {
    if ez.ctl_work.load(Acquire) == 0 {
        return 0;
    }
    let mut release = Vec::new();
    let mut completed = 0;
    if let Some(mut c) = ez.ctl.try_lock() {
        completed = c.pump(ez, &mut release);
        ez.ctl_work.store(c.work(), Release);
    }
    ez.release(&release);
    completed
}

/// A gate already committed, for work that waits on nothing.
pub(crate) fn no_gate() -> Gate {
    committed()
}
