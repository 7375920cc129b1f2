//! The write buffer: data waits there until programmed, writers wait in
//! order for room, and a zone's incomplete stripe is staged beside it.

use super::plan::Step;
use super::{Ev, Sim, ZoneKey};

impl Sim {
    /// Job `id` takes `bytes` of buffer room (what was granted while it
    /// waited, or room free now); true when it has to wait for room.
    pub(super) fn admit(&mut self, id: u32, bytes: u64) -> bool {
        let bytes = bytes.min(self.p.buffer);
        let job = self.job(id);
        if job.granted >= bytes {
            job.granted -= bytes;
        } else if !self.try_admit(bytes) {
            let job = self.job(id);
            job.at -= 1;
            job.steps[job.at] = Step::Admit(bytes);
            self.buffer_waiters.push_back((id, bytes));
            self.trace_buffer_wait(id, bytes);
            self.relieve();
            return true;
        }
        false
    }

    /// Job `id` (a Finish) pads the `left` bytes of `zone` past its data
    /// through the buffer, a program unit's worth at a time; true when it
    /// has to wait for room.
    pub(super) fn pad(&mut self, id: u32, zone: ZoneKey, mut left: u64) -> bool {
        let granted = std::mem::take(&mut self.job(id).granted);
        if granted > 0 {
            self.zone_add(zone, granted);
            left -= granted.min(left);
            self.dispatch(zone, false);
        }
        while left > 0 {
            let fill = self.zones.get(&zone).map_or(0, |z| z.fill);
            let len = left.min(self.p.unit - fill % self.p.unit);
            if !self.try_admit(len) {
                let job = self.job(id);
                job.at -= 1;
                job.steps[job.at] = Step::Pad { zone, left };
                self.buffer_waiters.push_back((id, len));
                self.trace_buffer_wait(id, len);
                self.relieve();
                return true;
            }
            self.zone_add(zone, len);
            left -= len;
            self.dispatch(zone, false);
        }
        self.dispatch(zone, true);
        false
    }

    /// Takes `bytes` of buffer room if there is room and no writer waits
    /// before.
    fn try_admit(&mut self, bytes: u64) -> bool {
        if self.buffer_waiters.is_empty() && self.buffer_used + bytes <= self.p.buffer {
            self.buffer_used += bytes;
            self.trace_buffer();
            true
        } else {
            false
        }
    }

    /// Gives back `bytes` of buffer room; writers waiting in order get
    /// what fits.
    pub(super) fn free_buffer(&mut self, bytes: u64) {
        self.buffer_used = self.buffer_used.saturating_sub(bytes);
        while let Some(&(job, b)) = self.buffer_waiters.front() {
            if self.buffer_used + b > self.p.buffer {
                break;
            }
            self.buffer_waiters.pop_front();
            self.buffer_used += b;
            self.job(job).granted += b;
            self.schedule(self.now, Ev::Job(job));
        }
        self.trace_buffer();
    }

    /// With writers waiting and no program under way to make room, the
    /// zone with buffered data first in order has its partial program unit
    /// programmed as it is.
    pub(super) fn relieve(&mut self) {
        if self.buffer_waiters.is_empty() || self.progs_live > 0 {
            return;
        }
        let key =
            self.zones.iter().find(|(_, z)| z.buffered && z.fill > z.dispatched).map(|(k, _)| *k);
        if let Some(k) = key {
            self.dispatch(k, true);
        }
    }

    /// A striped zone gathers a stripe of program units (one on each of
    /// its dies) before they are complete: what it has not handed to
    /// programs beyond one program unit is staged in the zone's own stripe
    /// area (as the drive keeps a write context per open zone), not in the
    /// write buffer, whose room bounds how far writes run ahead of the
    /// dies as it does for a zone without striping. Moves the difference
    /// between the two: room comes back as data is staged, and is taken
    /// again (even past the buffer's size: writes then wait) as complete
    /// program units leave the stripe area for the dies.
    /// Garbage collection's segments hold no buffer room, so nothing
    /// moves for them.
    pub(super) fn restage(&mut self, zone: ZoneKey, gen: u32) {
        let unit = self.p.unit;
        let Some(z) = self.incarnation_mut(zone, gen).filter(|z| z.buffered) else { return };
        let target = (z.fill - z.dispatched).saturating_sub(unit);
        let before = std::mem::replace(&mut z.staged, target);
        if target > before {
            self.free_buffer(target - before);
        } else if before > target {
            self.buffer_used += before - target;
            self.trace_buffer();
        }
    }
}
