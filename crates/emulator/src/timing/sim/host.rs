//! The controller's side of a command: processing units, the management
//! unit, the host link in each direction, and posting completions.

use super::params::{needs_prp_list, xfer};
use super::Sim;

impl Sim {
    /// Reserves a processing unit for `ns` from `t`; returns the end.
    fn unit(&mut self, t: u64, ns: u64) -> u64 {
        let (i, free) = self
            .units
            .iter()
            .copied()
            .enumerate()
            .min_by_key(|&(i, f)| (f, i))
            .expect("at least one unit");
        let end = free.max(t) + ns;
        self.units[i] = end;
        end
    }

    /// `ns` of job `id`'s processing on a unit, which then does `ahead` ns
    /// more of its work while the job goes on.
    pub(super) fn process(&mut self, id: u32, ns: u64, ahead: u64) -> bool {
        let done = self.unit(self.now, ns + ahead);
        self.job(id).unit_done = done;
        if self.trace.is_some() {
            self.trace_started(id, done - ns - ahead);
        }
        self.resume_at(done - ahead, id)
    }

    /// `ns` of job `id`'s work on the management unit.
    pub(super) fn manage(&mut self, id: u32, ns: u64) -> bool {
        let start = self.mgmt_free.max(self.now);
        self.mgmt_free = start + ns;
        self.resume_at(start + ns, id)
    }

    /// Job `id` moves `bytes` to the host.
    pub(super) fn link_out(&mut self, id: u32, bytes: u64) -> bool {
        let list = needs_prp_list(bytes);
        let start = self.now + if list { self.p.prp_list } else { 0 };
        let begin = self.to_host_free.max(start);
        // The DMA engine's per-command work takes the link as the data
        // does: the read ceilings at every size.
        let work = self.p.to_host_command + if list { self.p.to_host_list } else { 0 };
        self.to_host_free = begin + work + xfer(bytes, self.p.to_host_mbps);
        self.resume_at(self.to_host_free, id)
    }

    /// Job `id`'s data into the buffer: the host transfer (when `dma`),
    /// ending no earlier than the command's processing ahead.
    pub(super) fn transfer_in(&mut self, id: u32, bytes: u64, dma: bool) -> bool {
        let now = self.now;
        let mut end = self.job(id).unit_done.max(now);
        if dma {
            let start = now + if needs_prp_list(bytes) { self.p.prp_list } else { 0 };
            let begin = self.from_host_free.max(start);
            self.from_host_free = begin + xfer(bytes, self.p.from_host_mbps);
            end = end.max(self.from_host_free);
        }
        self.resume_at(end, id)
    }

    /// Job `id` is done: its completion becomes ready (unless it was
    /// cancelled or is the device's own work).
    pub(super) fn complete(&mut self, id: u32) {
        let job = self.jobs[id as usize].take().expect("live job");
        self.free_jobs.push(id);
        if !job.cancelled && !job.internal {
            if let Some(t) = &self.trace {
                let cmd = crate::trace::CommandId { sqid: job.sqid, cid: job.cqe.cid };
                let status = job.cqe.status >> 1;
                t.event(&crate::trace::TraceEvent::Completed { at_ns: self.now, cmd, status });
            }
            if let Some(r) = self.ready.get_mut(job.cqid as usize) {
                if r.is_empty() {
                    self.ready_since[job.cqid as usize] = self.wall;
                }
                r.push_back((job.cqe, self.now));
            }
            if let Some(n) = self.inflight.get_mut(job.cqid as usize) {
                *n = n.saturating_sub(1);
            }
            self.completions += 1;
        }
    }
}
