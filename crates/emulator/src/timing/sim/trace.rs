//! The simulation's trace events (see [`crate::trace`]): every place that
//! makes one first checks that a sink is installed, so a model without one
//! pays a branch.

use super::die::DieOp;
use super::Sim;
use crate::timing::Op;
use crate::trace::{CommandId, CommandKind, FlashOp, TraceEvent};

impl Sim {
    /// The command job `id` runs, unless it is the device's own work.
    pub(super) fn cmd_of(&self, id: u32) -> Option<CommandId> {
        let job = self.jobs.get(id as usize)?.as_ref()?;
        (!job.internal).then_some(CommandId { sqid: job.sqid, cid: job.cqe.cid })
    }

    /// The trace name of a die operation.
    pub(super) fn flash_op(op: &DieOp) -> FlashOp {
        match op {
            DieOp::Read { .. } => FlashOp::Read,
            DieOp::Program(_) => FlashOp::Program,
            DieOp::Timed { close: true, .. } => FlashOp::CloseBlock,
            DieOp::Timed { close: false, .. } => FlashOp::Erase,
        }
    }

    /// Traces `op` on `die` from when it started (or resumed) to `end`;
    /// `suspended`: a read suspends it there.
    pub(super) fn trace_die_op(&self, die: u32, op: &DieOp, end: u64, suspended: bool) {
        let Some(t) = &self.trace else { return };
        let start_ns = self.dies[die as usize].op_start;
        // Reads sense the planes holding their data; a program unit, an
        // erase block (and so a block close) span every plane.
        let all = self.all_planes();
        let (cmd, zone, bytes, planes) = match *op {
            DieOp::Read { job, bytes, planes, .. } => (self.cmd_of(job), None, bytes, planes),
            DieOp::Program(id) => match self.progs.get(id as usize).copied().flatten() {
                Some(p) => (None, Some(p.zone), p.bytes, all),
                None => (None, None, 0, all),
            },
            DieOp::Timed { job, .. } => (job.and_then(|j| self.cmd_of(j)), None, 0, all),
        };
        let op = Self::flash_op(op);
        t.event(&TraceEvent::Flash {
            die,
            op,
            start_ns,
            end_ns: end.max(start_ns),
            cmd,
            zone,
            bytes,
            planes,
            suspended,
        });
        if suspended {
            t.event(&TraceEvent::Suspend { at_ns: end, die, op });
        }
    }

    /// Traces the write buffer's fill.
    pub(super) fn trace_buffer(&self) {
        if let Some(t) = &self.trace {
            let (used, capacity) = (self.buffer_used, self.p.buffer);
            t.event(&TraceEvent::Buffer { at_ns: self.now, used, capacity });
        }
    }

    /// Traces job `id` waiting for `bytes` of buffer room.
    pub(super) fn trace_buffer_wait(&self, id: u32, bytes: u64) {
        if let Some(t) = &self.trace {
            let cmd = self.cmd_of(id);
            t.event(&TraceEvent::BufferWait { at_ns: self.now, cmd, bytes });
        }
    }

    /// Traces command `cmd` (completing on `cqid`) arriving now as `op`.
    pub(super) fn trace_queued(&self, cmd: CommandId, cqid: u16, op: &Op) {
        let Some(t) = &self.trace else { return };
        let (kind, nsid, lba, blocks) = match op {
            Op::Other => (CommandKind::Other, 0, 0, 0),
            Op::Flush => (CommandKind::Flush, 0, 0, 0),
            Op::Report { .. } => (CommandKind::ZoneReceive, 0, 0, 0),
            Op::Read { nsid, lba, blocks, .. } => (CommandKind::Read, *nsid, *lba, *blocks),
            Op::Write { nsid, lba, blocks, append, .. } => {
                let kind = if *append { CommandKind::Append } else { CommandKind::Write };
                (kind, *nsid, *lba, *blocks)
            }
            Op::Copy { nsid, dest, blocks, .. } => (CommandKind::Copy, *nsid, *dest, *blocks),
            Op::ZoneSend { nsid, zones, .. } => {
                let g = self.geometry(*nsid);
                let lba = zones.first().map_or(0, |z| u64::from(z.index) * g.zone_blocks);
                (CommandKind::ZoneSend, *nsid, lba, 0)
            }
        };
        let (at_ns, fetched_ns) = (self.now, self.now + self.p.fetch);
        t.event(&TraceEvent::Queued { at_ns, cmd, cqid, kind, nsid, lba, blocks, fetched_ns });
    }

    /// Traces a processing unit starting on job `id` at `at_ns`.
    pub(super) fn trace_started(&self, id: u32, at_ns: u64) {
        if let (Some(t), Some(cmd)) = (&self.trace, self.cmd_of(id)) {
            t.event(&TraceEvent::Started { at_ns, cmd });
        }
    }
}
