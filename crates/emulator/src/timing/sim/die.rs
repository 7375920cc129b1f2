//! Flash channels and dies. A die runs one operation at a time, taking
//! the next by class (reads first); a read for a die busy programming or
//! erasing suspends that operation, within its limit, and the operation
//! resumes when the die has no more reads.

use std::collections::VecDeque;

use super::params::xfer;
use super::{Ev, Sim};
use crate::trace::{CommandId, TraceEvent};

/// Die operation classes, highest priority first: host reads, reads of
/// garbage collection, programs, erases of resets and of garbage
/// collection, background erases.
pub(super) const CLASS_READ: usize = 0;
pub(super) const CLASS_GC_READ: usize = 1;
pub(super) const CLASS_PROGRAM: usize = 2;
pub(super) const CLASS_ERASE: usize = 3;
pub(super) const CLASS_BACKGROUND: usize = 4;
const CLASSES: usize = 5;

/// An operation on a die.
#[derive(Debug, Clone, Copy)]
pub(super) enum DieOp {
    /// `planes`: the planes holding the bytes read (a mask, for traces).
    Read {
        job: u32,
        bytes: u64,
        sense: u64,
        planes: u32,
    },
    Program(u32),
    Timed {
        job: Option<u32>,
        ns: u64,
        close: bool,
    },
}

/// One die: the operation under way, those waiting by class, and a
/// program or erase suspended for reads.
#[derive(Debug, Default)]
pub(super) struct Die {
    pub(super) current: Option<DieOp>,
    pub(super) queues: [VecDeque<DieOp>; CLASSES],
    /// Bumped when the current operation is suspended: its pending end
    /// event is then stale.
    pub(super) epoch: u32,
    /// When the current program or erase does its array work (a program
    /// first moves its data over the channel).
    pub(super) array_from: u64,
    /// When the current operation ends.
    pub(super) until: u64,
    /// When the current operation started or resumed (for traces).
    pub(super) op_start: u64,
    /// A program or erase suspended for reads: the operation, the array
    /// time it still needs, and how often it was suspended.
    pub(super) suspended: Option<(DieOp, u64, u32)>,
    /// Suspensions of the current program or erase so far.
    pub(super) suspends: u32,
    /// A suspend of the current erase is due once it has progressed
    /// enough ([`Ev::Suspend`] scheduled).
    pub(super) suspend_armed: bool,
}

impl Sim {
    /// The pages of the read under way on `die` (`epoch` of the event) are
    /// sensed: they move over the die's channel.
    pub(super) fn sense_done(&mut self, die: u32, epoch: u32) {
        let d = &self.dies[die as usize];
        if d.epoch != epoch {
            return;
        }
        if let Some(DieOp::Read { bytes, job, .. }) = d.current {
            let cmd = self.cmd_of(job);
            let end = self.channel(die, bytes, cmd);
            self.dies[die as usize].until = end;
            self.schedule(end, Ev::DieFree(die, epoch));
        }
    }

    /// The erase under way on `die` may be suspended now: the first read
    /// waiting suspends it.
    pub(super) fn suspend_due(&mut self, die: u32) {
        self.dies[die as usize].suspend_armed = false;
        let d = &self.dies[die as usize];
        let erasing = matches!(d.current, Some(DieOp::Timed { .. }));
        if erasing && d.suspended.is_none() && !d.queues[CLASS_READ].is_empty() {
            let read = self.dies[die as usize].queues[CLASS_READ].pop_front();
            if let Some(read) = read {
                // Suspends now, or re-arms when the erase under way
                // started or resumed since the event was set.
                self.die_request_front(die, read);
            }
        }
    }

    /// Reserves die `die`'s channel for a transfer of `bytes` from now;
    /// returns its end.
    fn channel(&mut self, die: u32, bytes: u64, cmd: Option<CommandId>) -> u64 {
        let ch = (die % self.p.channels) as usize;
        let start = self.channel_free[ch].max(self.now);
        let end = start + self.p.channel_overhead + xfer(bytes, self.p.channel_mbps);
        self.channel_free[ch] = end;
        if let Some(t) = &self.trace {
            let (channel, start_ns, end_ns) = (ch as u32, start, end);
            t.event(&TraceEvent::Transfer { channel, die, start_ns, end_ns, bytes, cmd });
        }
        end
    }

    /// Suspend latency and most suspensions of a die operation: programs
    /// use program suspend; a reset's die work (erases, and the programs
    /// closing a block before its erase) uses erase suspend.
    fn suspension(&self, op: &DieOp) -> (u64, u32) {
        match op {
            DieOp::Timed { .. } => (self.p.erase_suspend, self.p.erase_suspend_limit),
            _ => (self.p.suspend, self.p.suspend_limit),
        }
    }

    /// Starts `op` (of `class`) on an idle die, suspends the program or
    /// erase under way for it (a read), or queues it.
    pub(super) fn die_request(&mut self, die: u32, op: DieOp, class: usize) {
        let d = &self.dies[die as usize];
        let array_op = matches!(d.current, Some(DieOp::Program(_) | DieOp::Timed { .. }));
        let (suspend, limit) = d.current.as_ref().map_or((0, 0), |c| self.suspension(c));
        if d.current.is_none() {
            self.die_start(die, op, 0);
        } else if class == CLASS_READ && array_op && d.suspended.is_none() && d.suspends < limit {
            let erasing = matches!(d.current, Some(DieOp::Timed { .. }));
            let due = d.array_from + self.p.erase_resume_min;
            if erasing && self.p.erase_resume_min > 0 && self.now < due {
                // The erase has not progressed enough since it started or
                // resumed: the read waits for the moment it may suspend.
                self.dies[die as usize].queues[class].push_back(op);
                self.arm_suspend(die, due);
                return;
            }
            self.suspend_for(die, op, suspend);
        } else {
            self.dies[die as usize].queues[class].push_back(op);
        }
    }

    /// [`Sim::die_request`] for a read that waited for an erase to progress
    /// (it goes first among the waiting reads).
    fn die_request_front(&mut self, die: u32, read: DieOp) {
        let d = &self.dies[die as usize];
        let (suspend, limit) = d.current.as_ref().map_or((0, 0), |c| self.suspension(c));
        let due = d.array_from + self.p.erase_resume_min;
        if d.suspends >= limit {
            // The erase used up its suspensions: the read waits for its end.
            self.dies[die as usize].queues[CLASS_READ].push_front(read);
        } else if self.now < due {
            self.dies[die as usize].queues[CLASS_READ].push_front(read);
            self.arm_suspend(die, due);
        } else {
            self.suspend_for(die, read, suspend);
        }
    }

    /// Schedules a suspend of the die's erase at `due`, once.
    fn arm_suspend(&mut self, die: u32, due: u64) {
        if !std::mem::replace(&mut self.dies[die as usize].suspend_armed, true) {
            self.schedule(due, Ev::Suspend(die));
        }
    }

    /// Suspends the program or erase under way on `die` (once its data is
    /// on the die) and starts `read` first.
    fn suspend_for(&mut self, die: u32, read: DieOp, suspend: u64) {
        let d = &self.dies[die as usize];
        let at = self.now.max(d.array_from);
        if let (Some(current), true) = (d.current, self.trace.is_some()) {
            self.trace_die_op(die, &current, at, true);
        }
        let d = &mut self.dies[die as usize];
        let left = d.until.saturating_sub(at);
        let current = d.current.take().expect("busy die");
        d.suspended = Some((current, left, d.suspends + 1));
        d.epoch += 1;
        let delay = at - self.now + suspend;
        self.die_start(die, read, delay);
    }

    /// Starts `op` on an idle die, `delay` ns from now.
    fn die_start(&mut self, die: u32, op: DieOp, delay: u64) {
        let now = self.now + delay;
        let epoch = self.dies[die as usize].epoch;
        self.dies[die as usize].current = Some(op);
        self.dies[die as usize].op_start = now;
        match op {
            DieOp::Read { sense, .. } => self.schedule(now + sense, Ev::SenseDone(die, epoch)),
            DieOp::Program(id) => {
                let prog = self.progs[id as usize].expect("live program");
                let array_from = self.channel(die, prog.bytes, None);
                let until = array_from + self.program_time(&prog);
                let d = &mut self.dies[die as usize];
                (d.array_from, d.until, d.suspends) = (array_from, until, 0);
                self.schedule(until, Ev::DieFree(die, epoch));
            }
            DieOp::Timed { ns, .. } => {
                let d = &mut self.dies[die as usize];
                (d.array_from, d.until, d.suspends) = (now, now + ns, 0);
                self.schedule(now + ns, Ev::DieFree(die, epoch));
            }
        }
    }

    /// The operation under way on `die` ended: the next one starts, reads
    /// first, then a suspended operation resumes, then the other classes.
    pub(super) fn die_free(&mut self, die: u32) {
        if self.trace.is_some() {
            if let Some(op) = self.dies[die as usize].current {
                self.trace_die_op(die, &op, self.now, false);
            }
        }
        match self.dies[die as usize].current.take() {
            Some(DieOp::Read { job, .. }) => self.piece_done(job),
            Some(DieOp::Program(id)) => self.program_done(id),
            Some(DieOp::Timed { job: Some(job), .. }) => self.piece_done(job),
            _ => {}
        }
        let d = &mut self.dies[die as usize];
        if d.current.is_some() {
            return;
        }
        if let Some(read) = d.queues[CLASS_READ].pop_front() {
            self.die_start(die, read, 0);
        } else if let Some((op, left, suspends)) = d.suspended.take() {
            // Resume: the rest of the array work, after the resume latency.
            let (suspend, _) = self.suspension(&op);
            let d = &mut self.dies[die as usize];
            let until = self.now + suspend + left;
            let epoch = d.epoch;
            (d.current, d.array_from, d.until, d.suspends) = (Some(op), self.now, until, suspends);
            d.op_start = self.now;
            self.schedule(until, Ev::DieFree(die, epoch));
            if let Some(t) = &self.trace {
                let op = Self::flash_op(&op);
                t.event(&TraceEvent::Resume { at_ns: self.now, die, op });
            }
        } else if let Some(op) = d.queues.iter_mut().find_map(|q| q.pop_front()) {
            self.die_start(die, op, 0);
        }
    }
}
