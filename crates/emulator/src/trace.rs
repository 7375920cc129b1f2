//! Trace events: what the timing model and the zone state machine did, and
//! when, handed to sinks that live above the emulator (a trace file
//! writer, a report's aggregates).
//!
//! A controller with no sink pays one branch per place an event would be
//! made ([`crate::Controller::add_trace_sink`] installs one). Events carry
//! model time in nanoseconds since the controller was built: the clock's
//! time divided by its dilation factor (see [`crate::clock`]), virtual or
//! real as the device runs. Span events ([`TraceEvent::Flash`],
//! [`TraceEvent::Transfer`]) are made when the model knows both ends, so
//! events reach a sink roughly, not exactly, in time order.
//!
//! Sinks are called from whichever thread drives the model (the timing
//! model's lock held, or a zone's lock for [`TraceEvent::ZoneState`]): a
//! sink must be quick and take no lock of the emulator.
//!
//! A layer above the device may add events of its own through
//! [`crate::Controller::trace_sink`]: eZNS (`zns-ezns`) traces its stripe
//! groups, zone ballooning and tenants' activity
//! ([`TraceEvent::Stripe`], [`TraceEvent::Balloon`],
//! [`TraceEvent::TenantActivity`]) into the same sinks, at the
//! controller's model time.

use std::fmt;
use std::sync::Arc;

use zns_spec::ZoneState;

use crate::clock::Clock;

/// A command: submission queue and command identifier.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CommandId {
    /// Submission queue ID.
    pub sqid: u16,
    /// Command identifier.
    pub cid: u16,
}

/// What a traced command is, as the timing model sees it.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CommandKind {
    /// Read.
    Read,
    /// Write (and Write Zeroes).
    Write,
    /// Zone Append.
    Append,
    /// Copy.
    Copy,
    /// Flush.
    Flush,
    /// Zone Management Receive.
    ZoneReceive,
    /// Zone Management Send (Open, Close, Finish, Reset, ...).
    ZoneSend,
    /// Any other command, and commands that failed before doing work.
    Other,
}

impl CommandKind {
    /// A short name for trace viewers.
    pub fn name(self) -> &'static str {
        match self {
            CommandKind::Read => "read",
            CommandKind::Write => "write",
            CommandKind::Append => "append",
            CommandKind::Copy => "copy",
            CommandKind::Flush => "flush",
            CommandKind::ZoneReceive => "zone receive",
            CommandKind::ZoneSend => "zone send",
            CommandKind::Other => "other",
        }
    }
}

/// An operation of a die.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlashOp {
    /// Page sensing and the transfer of the pages over the channel.
    Read,
    /// The transfer of a program unit over the channel, then its program.
    Program,
    /// A block erase (a reset's, garbage collection's, or in the
    /// background).
    Erase,
    /// Closing a partly programmed block before its erase.
    CloseBlock,
}

impl FlashOp {
    /// A short name for trace viewers.
    pub fn name(self) -> &'static str {
        match self {
            FlashOp::Read => "read",
            FlashOp::Program => "program",
            FlashOp::Erase => "erase",
            FlashOp::CloseBlock => "close block",
        }
    }
}

/// One event of the model. Times are model nanoseconds (see the module
/// documentation).
///
/// Thread safety: plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TraceEvent {
    /// A command reached the controller (its doorbell was rung); the
    /// controller fetches it `fetch_ns` later.
    Queued {
        /// Model time.
        at_ns: u64,
        /// The command.
        cmd: CommandId,
        /// Its completion queue.
        cqid: u16,
        /// What it is.
        kind: CommandKind,
        /// Namespace (0 when none).
        nsid: u32,
        /// Its first LBA (reads, writes, appends, copies: destination).
        lba: u64,
        /// Blocks it moves.
        blocks: u64,
        /// When the controller fetched it.
        fetched_ns: u64,
    },
    /// A processing unit started on the command.
    Started {
        /// Model time.
        at_ns: u64,
        /// The command.
        cmd: CommandId,
    },
    /// The command's completion fell due (it is posted when the host
    /// polls its queue).
    Completed {
        /// Model time.
        at_ns: u64,
        /// The command.
        cmd: CommandId,
        /// The status field of its completion entry (bits 15:1 of DW3's
        /// upper half, without the phase tag): 0 for success.
        status: u16,
    },
    /// An operation of a die ran from `start_ns` to `end_ns`.
    Flash {
        /// Die index (channel = die mod channels).
        die: u32,
        /// The operation.
        op: FlashOp,
        /// When it started (or resumed).
        start_ns: u64,
        /// When it ended (or was suspended).
        end_ns: u64,
        /// The command it serves: a read's or a reset's; programs drain
        /// the write buffer and serve none.
        cmd: Option<CommandId>,
        /// The zone (NSID, index; a segment for a conventional namespace)
        /// of a program.
        zone: Option<(u32, u32)>,
        /// Bytes read or programmed (0 for erases).
        bytes: u64,
        /// The planes of the die the operation covers, bit `p` for plane
        /// `p`: for a read the planes whose pages hold the bytes read, for
        /// a program, an erase or a block close every plane (a program
        /// unit and an erase block span them). The model runs a die's
        /// planes as one: a read takes the whole die for its sensing
        /// however many planes hold its data, so there is no per-plane
        /// timing to show, only this mask.
        planes: u32,
        /// The span ends because a read suspended the operation.
        suspended: bool,
    },
    /// A program or erase was suspended for a read.
    Suspend {
        /// Model time.
        at_ns: u64,
        /// Die index.
        die: u32,
        /// The operation suspended.
        op: FlashOp,
    },
    /// A suspended program or erase resumed.
    Resume {
        /// Model time.
        at_ns: u64,
        /// Die index.
        die: u32,
        /// The operation resumed.
        op: FlashOp,
    },
    /// A transfer over a flash channel.
    Transfer {
        /// Channel index.
        channel: u32,
        /// The die at the other end.
        die: u32,
        /// Start.
        start_ns: u64,
        /// End.
        end_ns: u64,
        /// Bytes moved.
        bytes: u64,
        /// The command whose read it carries, if any.
        cmd: Option<CommandId>,
    },
    /// The write buffer's fill changed.
    Buffer {
        /// Model time.
        at_ns: u64,
        /// Bytes held.
        used: u64,
        /// Its size.
        capacity: u64,
    },
    /// A write waits for room in the write buffer.
    BufferWait {
        /// Model time.
        at_ns: u64,
        /// The command (none for the device's own work).
        cmd: Option<CommandId>,
        /// Room it waits for.
        bytes: u64,
    },
    /// A zone changed state (stamped when the controller executed the
    /// command that changed it, or closed it on its own).
    ZoneState {
        /// Model time.
        at_ns: u64,
        /// Namespace.
        nsid: u32,
        /// Zone index.
        zone: u32,
        /// State before.
        from: ZoneState,
        /// State after.
        to: ZoneState,
    },
    /// A zone-virtualization layer above the device (eZNS, `zns-ezns`)
    /// mapped part of a tenant's logical zone to a stripe group: one event
    /// per column of the group, made one after another (columns `0` to
    /// `width - 1`) at the same time.
    Stripe {
        /// Model time.
        at_ns: u64,
        /// The tenant (an index; [`TraceSink::name_tenant`] names it).
        tenant: u16,
        /// The tenant's logical zone.
        lzone: u32,
        /// Where the group starts in the logical zone (blocks).
        start: u64,
        /// Blocks the group covers.
        len: u64,
        /// Columns of the group.
        width: u16,
        /// This column.
        column: u16,
        /// Its physical zone.
        zone: u32,
        /// The tenant whose active-zone budget the column counts against:
        /// `tenant` itself, or a lender.
        budget: u16,
    },
    /// Zone ballooning above the device (eZNS): active zones moved from
    /// one tenant's budget to another's.
    Balloon {
        /// Model time.
        at_ns: u64,
        /// The tenant whose spare zones are lent.
        lender: u16,
        /// The tenant using them.
        borrower: u16,
        /// Zones moved.
        zones: u32,
        /// `false`: lent to the borrower; `true`: given back to the
        /// lender.
        returned: bool,
        /// The lender's zones out on loan after the move.
        lent: u32,
        /// The borrower's borrowed zones after the move.
        borrowed: u32,
    },
    /// A tenant above the device (eZNS) was marked inactive (its spare
    /// zones may be lent) or active again (they come back).
    TenantActivity {
        /// Model time.
        at_ns: u64,
        /// The tenant.
        tenant: u16,
        /// Marked inactive (`false`: active again).
        inactive: bool,
        /// Spare zones it can lend now.
        lendable: u32,
    },
    /// Garbage collection of a conventional namespace reclaimed a segment:
    /// its valid blocks move, then it is erased.
    GcMove {
        /// Model time.
        at_ns: u64,
        /// Namespace.
        nsid: u32,
        /// The victim segment.
        segment: u32,
        /// Its erase count before this reclaim.
        gen: u32,
        /// Valid blocks moved.
        blocks: u64,
    },
}

impl TraceEvent {
    /// When the event happened (a span's start).
    pub fn time_ns(&self) -> u64 {
        match *self {
            TraceEvent::Queued { at_ns, .. }
            | TraceEvent::Started { at_ns, .. }
            | TraceEvent::Completed { at_ns, .. }
            | TraceEvent::Suspend { at_ns, .. }
            | TraceEvent::Resume { at_ns, .. }
            | TraceEvent::Buffer { at_ns, .. }
            | TraceEvent::BufferWait { at_ns, .. }
            | TraceEvent::ZoneState { at_ns, .. }
            | TraceEvent::Stripe { at_ns, .. }
            | TraceEvent::Balloon { at_ns, .. }
            | TraceEvent::TenantActivity { at_ns, .. }
            | TraceEvent::GcMove { at_ns, .. } => at_ns,
            TraceEvent::Flash { start_ns, .. } | TraceEvent::Transfer { start_ns, .. } => start_ns,
        }
    }
}

/// Where a controller's trace events go.
///
/// Thread safety: `Send + Sync`; called from any thread driving the
/// device (see the module documentation).
pub trait TraceSink: Send + Sync {
    /// Takes one event.
    fn event(&self, event: &TraceEvent);

    /// Names tenant `tenant` of a layer above the device (eZNS), whose
    /// events ([`TraceEvent::Stripe`], [`TraceEvent::Balloon`],
    /// [`TraceEvent::TenantActivity`]) carry its index. The layer names
    /// the tenants of the events it hands over, again each time; a sink
    /// that draws tracks keeps the names. Default: ignored.
    fn name_tenant(&self, tenant: u16, name: &str) {
        let _ = (tenant, name);
    }
}

impl fmt::Debug for dyn TraceSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TraceSink")
    }
}

/// Several sinks as one: what a controller installs when more than one
/// sink was added.
pub(crate) struct Fanout(pub(crate) Vec<Arc<dyn TraceSink>>);

impl TraceSink for Fanout {
    fn event(&self, event: &TraceEvent) {
        for s in &self.0 {
            s.event(event);
        }
    }

    fn name_tenant(&self, tenant: u16, name: &str) {
        for s in &self.0 {
            s.name_tenant(tenant, name);
        }
    }
}

/// The sinks of a controller as one (none, the only one, or a fanout).
pub(crate) fn combine(sinks: &[Arc<dyn TraceSink>]) -> Option<Arc<dyn TraceSink>> {
    match sinks {
        [] => None,
        [one] => Some(Arc::clone(one)),
        many => Some(Arc::new(Fanout(many.to_vec()))),
    }
}

/// What the zone state machine of one namespace needs to trace its
/// transitions: the namespace, the controller's clock, the sink.
pub(crate) struct ZoneTracer {
    pub(crate) nsid: u32,
    pub(crate) clock: Arc<Clock>,
    pub(crate) sink: Arc<dyn TraceSink>,
}

impl ZoneTracer {
    /// Reports a transition of zone `zone` now.
    pub(crate) fn transition(&self, zone: u32, from: ZoneState, to: ZoneState) {
        let at_ns = self.clock.model_now_ns();
        self.sink.event(&TraceEvent::ZoneState { at_ns, nsid: self.nsid, zone, from, to });
    }
}

impl fmt::Debug for ZoneTracer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZoneTracer").field("nsid", &self.nsid).finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_fits_in_64_bytes() {
        // A trace file's ring holds events by value: its memory bound
        // (docs/observability.md) counts on this.
        assert!(std::mem::size_of::<TraceEvent>() <= 64, "{}", std::mem::size_of::<TraceEvent>());
    }
}

/// Busy time of each die, summed from [`TraceEvent::Flash`] spans: the
/// sink live views (metrics, `zns top`) add to see how busy the flash is.
/// A span cut by a suspension counts up to the suspension, its resumed
/// rest as the next span.
///
/// Thread safety: `Send + Sync`; one relaxed atomic add per flash
/// operation, read at any time with [`DieBusy::busy_ns`].
#[derive(Debug)]
pub struct DieBusy {
    busy: Vec<std::sync::atomic::AtomicU64>,
}

impl DieBusy {
    /// Counters for `dies` dies, all zero.
    pub fn new(dies: usize) -> Self {
        DieBusy { busy: (0..dies).map(|_| std::sync::atomic::AtomicU64::new(0)).collect() }
    }

    /// Model nanoseconds each die has been busy since the sink was added.
    pub fn busy_ns(&self) -> Vec<u64> {
        self.busy.iter().map(|b| b.load(std::sync::atomic::Ordering::Relaxed)).collect()
    }
}

impl TraceSink for DieBusy {
    fn event(&self, event: &TraceEvent) {
        if let TraceEvent::Flash { die, start_ns, end_ns, .. } = *event {
            if let Some(b) = self.busy.get(die as usize) {
                b.fetch_add(end_ns.saturating_sub(start_ns), std::sync::atomic::Ordering::Relaxed);
            }
        }
    }
}
