//! Jobs and events: each job runs its steps in order until one has to
//! wait, and an event (in time order, ties in the order scheduled)
//! resumes it or moves a die on.

use std::cmp::Reverse;

use zns_spec::CompletionEntry;

use super::die::{DieOp, CLASS_GC_READ, CLASS_READ};
use super::plan::{DieWork, Piece, Step};
use super::{slot_in, Sim, ZoneKey};

/// A command (or the device's own work) on its way through its steps.
#[derive(Debug)]
pub(super) struct Job {
    pub(super) steps: Vec<Step>,
    pub(super) at: usize,
    /// Sub-operations (die reads, erases) still running.
    pub(super) pending: u32,
    /// Buffer bytes granted while waiting.
    pub(super) granted: u64,
    /// When the processing unit finishes the command's work (`Unit`).
    pub(super) unit_done: u64,
    pub(super) sqid: u16,
    pub(super) cqid: u16,
    pub(super) cqe: CompletionEntry,
    pub(super) cancelled: bool,
    /// The device's own work (garbage collection): no command, no
    /// completion.
    pub(super) internal: bool,
}

/// Events, ordered by time then by scheduling order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Ev {
    Job(u32),
    SenseDone(u32, u32),
    DieFree(u32, u32),
    /// An erase on the die may be suspended now, for reads waiting.
    Suspend(u32),
}

impl Sim {
    /// Schedules `ev` at time `at`, after the events already scheduled
    /// then.
    pub(super) fn schedule(&mut self, at: u64, ev: Ev) {
        self.seq += 1;
        self.events.push(Reverse((at, self.seq, ev)));
    }

    /// Starts a job of the device's own (no completion) with `steps`.
    pub(super) fn start_internal(&mut self, mut steps: Vec<Step>) {
        steps.push(Step::Complete);
        let job = Job {
            steps,
            at: 0,
            pending: 0,
            granted: 0,
            unit_done: 0,
            sqid: 0,
            cqid: 0,
            cqe: CompletionEntry::default(),
            cancelled: true,
            internal: true,
        };
        let id = slot_in(&mut self.jobs, &mut self.free_jobs, job);
        self.advance(id);
    }

    /// Live job `id`.
    pub(super) fn job(&mut self, id: u32) -> &mut Job {
        self.jobs[id as usize].as_mut().expect("live job")
    }

    /// Acts on one event.
    pub(super) fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Job(id) => self.advance(id),
            Ev::SenseDone(die, epoch) => self.sense_done(die, epoch),
            Ev::DieFree(die, epoch) => {
                if self.dies[die as usize].epoch == epoch {
                    self.die_free(die);
                }
            }
            Ev::Suspend(die) => self.suspend_due(die),
        }
    }

    /// Runs job `id` from its current step until it has to wait.
    pub(super) fn advance(&mut self, id: u32) {
        loop {
            let job = self.job(id);
            let step = std::mem::replace(&mut job.steps[job.at], Step::Complete);
            job.at += 1;
            if self.run_step(id, step) {
                return;
            }
        }
    }

    /// Runs one step of job `id`; true when the job has to wait (an event,
    /// or another job's progress, resumes it).
    fn run_step(&mut self, id: u32, step: Step) -> bool {
        match step {
            Step::Delay(ns) => self.resume_at(self.now + ns, id),
            Step::Unit { ns, ahead } => self.process(id, ns, ahead),
            Step::Mgmt(ns) => self.manage(id, ns),
            Step::Read(pieces) => self.die_reads(id, pieces, CLASS_READ),
            Step::LinkOut(bytes) => self.link_out(id, bytes),
            Step::Admit(bytes) => self.admit(id, bytes),
            Step::Transfer { bytes, dma } => self.transfer_in(id, bytes, dma),
            Step::ZoneAdd { zone, bytes, filled } => {
                self.zone_add_dispatch(zone, bytes, filled);
                false
            }
            Step::Serial(zone) => self.append_serial(id, zone),
            Step::SegmentAdd { zone, gen, at, bytes, buffered } => {
                self.segment_add(zone, gen, at, bytes, buffered);
                false
            }
            Step::GcRead(pieces) => self.die_reads(id, pieces, CLASS_GC_READ),
            Step::AwaitRetired(zone, gen) => self.await_retired(id, zone, gen),
            Step::Unblock(zone, gen) => {
                self.unblock(zone, gen);
                false
            }
            Step::Pad { zone, left } => self.pad(id, zone, left),
            Step::AwaitProgrammed(zone) => self.await_programmed(id, zone),
            Step::DieOps(work) => self.die_work(id, work),
            Step::Post => self.resume_at(self.now + self.p.post, id),
            Step::Complete => {
                self.complete(id);
                true
            }
        }
    }

    /// Job `id` goes on at `at`; it waits until then (true).
    pub(super) fn resume_at(&mut self, at: u64, id: u32) -> bool {
        self.schedule(at, Ev::Job(id));
        true
    }

    /// Queues die reads of job `id` in `class`; true when there are any
    /// (the job waits for them).
    fn die_reads(&mut self, id: u32, pieces: Vec<Piece>, class: usize) -> bool {
        let n = pieces.len() as u32;
        for pc in pieces {
            let op = DieOp::Read { job: id, bytes: pc.bytes, sense: pc.sense, planes: pc.planes };
            self.die_request(pc.die, op, class);
        }
        if n > 0 {
            self.job(id).pending += n;
        }
        n > 0
    }

    /// Puts a reset's or a reclaim's work on the dies; true when job `id`
    /// waits for some of it.
    fn die_work(&mut self, id: u32, work: Vec<DieWork>) -> bool {
        let mut n = 0;
        for w in work {
            let job = w.wait.then_some(id);
            n += u32::from(w.wait);
            self.die_request(w.die, DieOp::Timed { job, ns: w.ns, close: w.close }, w.class);
        }
        if n > 0 {
            self.job(id).pending += n;
        }
        n > 0
    }

    /// Job `id` (garbage collection) waits while incarnation `gen` of a
    /// segment still has programs to finish.
    fn await_retired(&mut self, id: u32, zone: ZoneKey, gen: u32) -> bool {
        match self.retired.get_mut(&(zone, gen)) {
            Some(z) => {
                z.waiters.push(id);
                true
            }
            None => false,
        }
    }

    /// A sub-operation of job `id` finished.
    pub(super) fn piece_done(&mut self, id: u32) {
        let job = self.job(id);
        job.pending -= 1;
        if job.pending == 0 {
            self.schedule(self.now, Ev::Job(id));
        }
    }
}
