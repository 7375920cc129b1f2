//! eZNS decisions in the base device's trace: the stripe group each
//! logical zone is given, zone ballooning between tenants, and tenants
//! marked inactive and active again (docs/observability.md).
//!
//! A trace exists only on an emulated base device with a trace sink (an
//! `emu:...,trace=FILE` base URI, or a sink a program added): the events
//! go to the controller's sinks ([`zns_emulator::Controller::trace_sink`])
//! at its model time, beside the device's own commands and flash
//! operations. On any other base device there is nothing to write to and
//! nothing is made. Every event comes from a cold path (a new stripe
//! group, the arbiter's work under its lock), never from the I/O path.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use parking_lot::MutexGuard;
use zns_device::ZonedDevice;
use zns_emulator::trace::{TraceEvent, TraceSink};

use crate::arbiter::{Arbiter, ArbiterEvent};
use crate::layout::Layout;
use crate::runtime::Tenant;

/// Where an instance's events go: the base emulator's trace sinks, when
/// it has any at the time of an event.
///
/// Thread safety: `Send + Sync`; each event takes the controller's lock of
/// its sink list once.
pub(crate) struct Tracer {
    emu: Option<Arc<zns_emulator::Controller>>,
    names: Vec<String>,
}

impl std::fmt::Debug for Tracer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracer").field("emulated", &self.emu.is_some()).finish_non_exhaustive()
    }
}

impl Tracer {
    /// The tracer of an instance of `tenants` on `base`.
    pub(crate) fn new(base: &dyn ZonedDevice, tenants: &[Tenant]) -> Tracer {
        Tracer {
            emu: base.emulator().cloned(),
            names: tenants.iter().map(|t| t.name.clone()).collect(),
        }
    }

    /// The sink and the model time now, when there is a sink.
    fn sink(&self) -> Option<(Arc<dyn TraceSink>, u64)> {
        let emu = self.emu.as_ref()?;
        let sink = emu.trace_sink()?;
        Some((sink, emu.clock().model_now_ns()))
    }

    /// Names tenant `t` to `sink` (a sink may have come since the last
    /// event, so every batch names its tenants).
    fn name(&self, sink: &dyn TraceSink, t: u16) {
        if let Some(n) = self.names.get(usize::from(t)) {
            sink.name_tenant(t, n);
        }
    }

    /// Traces the stripe group `layout` of logical zone `lzone` of tenant
    /// `t`: one event per column.
    pub(crate) fn stripe(&self, t: usize, lzone: u32, layout: &Layout) {
        let Some((sink, at_ns)) = self.sink() else { return };
        let tenant = t as u16;
        self.name(sink.as_ref(), tenant);
        let width = layout.width().min(usize::from(u16::MAX)) as u16;
        for (c, col) in layout.cols.iter().enumerate().take(usize::from(width)) {
            self.name(sink.as_ref(), col.budget);
            sink.event(&TraceEvent::Stripe {
                at_ns,
                tenant,
                lzone,
                start: layout.start,
                len: layout.len,
                width,
                column: c as u16,
                zone: col.zone,
                budget: col.budget,
            });
        }
    }

    /// Traces and empties the arbiter's log: consecutive moves of zones
    /// between the same two tenants the same way as one balloon event,
    /// each with the loans it left.
    pub(crate) fn arbiter(&self, arb: &mut Arbiter) {
        if arb.log.is_empty() {
            return;
        }
        let log = std::mem::take(&mut arb.log);
        let Some((sink, at_ns)) = self.sink() else { return };
        let events = balloon_events(&log, arb, at_ns);
        for e in &events {
            match *e {
                TraceEvent::Balloon { lender, borrower, .. } => {
                    self.name(sink.as_ref(), lender);
                    self.name(sink.as_ref(), borrower);
                }
                TraceEvent::TenantActivity { tenant, .. } => self.name(sink.as_ref(), tenant),
                _ => {}
            }
            sink.event(e);
        }
    }
}

/// The trace events of an arbiter's `log`, whose moves led to the loans
/// `arb` holds now: runs of the same move merged, each stamped with the
/// lender's zones lent and the borrower's zones borrowed right after it
/// (found walking the log back from now).
fn balloon_events(log: &[ArbiterEvent], arb: &Arbiter, at_ns: u64) -> Vec<TraceEvent> {
    let mut merged: Vec<(ArbiterEvent, u32)> = Vec::new();
    for &e in log {
        match merged.last_mut() {
            Some((last, n)) if *last == e && matches!(e, ArbiterEvent::Moved { .. }) => *n += 1,
            _ => merged.push((e, 1)),
        }
    }
    let mut lent: Vec<u32> = arb.tenants.iter().map(|b| b.lent).collect();
    let mut borrowed: Vec<u32> = arb.tenants.iter().map(|b| b.borrowed).collect();
    let mut out = Vec::with_capacity(merged.len());
    for &(e, zones) in merged.iter().rev() {
        out.push(match e {
            ArbiterEvent::Moved { lender, borrower, returned } => {
                let (l, b) = (usize::from(lender), usize::from(borrower));
                let event = TraceEvent::Balloon {
                    at_ns,
                    lender,
                    borrower,
                    zones,
                    returned,
                    lent: lent.get(l).copied().unwrap_or(0),
                    borrowed: borrowed.get(b).copied().unwrap_or(0),
                };
                // Before this move: undo it.
                let undo = |v: &mut u32| {
                    *v = if returned { v.saturating_add(zones) } else { v.saturating_sub(zones) }
                };
                if let Some(v) = lent.get_mut(l) {
                    undo(v);
                }
                if let Some(v) = borrowed.get_mut(b) {
                    undo(v);
                }
                event
            }
            ArbiterEvent::Activity { tenant, inactive, lendable } => {
                TraceEvent::TenantActivity { at_ns, tenant, inactive, lendable }
            }
        });
    }
    out.reverse();
    out
}

/// The arbiter, locked: whatever the holder did to it is traced when the
/// lock is let go (or earlier, where [`Tracer::arbiter`] is called).
pub(crate) struct ArbGuard<'a> {
    pub(crate) guard: MutexGuard<'a, Arbiter>,
    pub(crate) trace: &'a Tracer,
}

impl Deref for ArbGuard<'_> {
    type Target = Arbiter;

    fn deref(&self) -> &Arbiter {
        &self.guard
    }
}

impl DerefMut for ArbGuard<'_> {
    fn deref_mut(&mut self) -> &mut Arbiter {
        &mut self.guard
    }
}

impl Drop for ArbGuard<'_> {
    fn drop(&mut self) {
        self.trace.arbiter(&mut self.guard);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alloc::{Allocator, DieMap};
    use crate::arbiter::{Budget, Holding};
    use crate::config::Mode;

    fn arbiter(tenants: usize) -> Arbiter {
        let b = Budget {
            essential: 4,
            spare: 4,
            active_zones: 2,
            open: 0,
            active: 0,
            held: 0,
            lent: 0,
            borrowed: 0,
            inactive: false,
            avg_open: 2.0,
            reclaims: 0,
        };
        Arbiter {
            mode: Mode::Elastic,
            tenants: vec![b; tenants],
            device_limit: 64,
            device_active: 0,
            max_width: 8,
            alloc: Allocator::new(Mode::Elastic, DieMap { dies: 8, zone_dies: 1 }, tenants),
            loans: 0,
            headroom: 4,
            parked: Vec::new(),
            log: Vec::new(),
        }
    }

    #[test]
    fn moves_merge_into_balloon_events_with_the_loans_after_each() {
        let mut a = arbiter(3);
        a.tick(&[false, true, true]);
        let lend = |lender| Holding { tenant: 0, budget: lender };
        for h in [lend(1), lend(1), lend(1), lend(2)] {
            a.grant(h);
        }
        a.wake(1);
        a.release(lend(1));
        a.recharge(lend(1));
        a.grant(Holding { tenant: 0, budget: 0 });
        let log = std::mem::take(&mut a.log);
        let events = balloon_events(&log, &a, 7);
        let activity = |tenant, inactive, lendable| TraceEvent::TenantActivity {
            at_ns: 7,
            tenant,
            inactive,
            lendable,
        };
        let balloon = |lender, zones, returned, lent, borrowed| TraceEvent::Balloon {
            at_ns: 7,
            lender,
            borrower: 0,
            zones,
            returned,
            lent,
            borrowed,
        };
        assert_eq!(
            events,
            [
                activity(1, true, 4),
                activity(2, true, 4),
                balloon(1, 3, false, 3, 3),
                balloon(2, 1, false, 1, 4),
                activity(1, false, 0),
                balloon(1, 2, true, 1, 2),
            ]
        );
        assert_eq!((a.tenants[1].lent, a.tenants[0].borrowed), (1, 2));
    }
}
