//! Counters of the commands a device's queues carry: per queue, by
//! opcode, commands, bytes and a latency histogram, and completions by
//! status. Each queue writes only its own counters (plain relaxed atomic
//! adds, no lock, no allocation); a scrape reads them all.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use zns_device::{DeviceError, OpKind};
use zns_spec::StatusCode;

/// Upper bounds of the latency histogram's buckets, in seconds (a last
/// bucket, +Inf, takes the rest): 10 µs to 1 s, the span from a cached
/// read to a reset behind garbage collection.
pub const LATENCY_BOUNDS: [f64; 16] = [
    10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3,
    250e-3, 500e-3, 1.0,
];

/// Buckets of the latency histogram, +Inf included.
pub const BUCKETS: usize = LATENCY_BOUNDS.len() + 1;

/// Commands grouped as their NVMe opcode: the value of the `opcode` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opcode {
    /// Read.
    Read,
    /// Write.
    Write,
    /// Zone Append.
    ZoneAppend,
    /// Write Zeroes.
    WriteZeroes,
    /// Flush.
    Flush,
    /// Zone Management Send (open, close, finish, reset, offline, zone
    /// descriptor extensions, ZRWA allocate and commit).
    ZoneManagementSend,
    /// Zone Management Receive (zone reports).
    ZoneManagementReceive,
    /// Copy.
    Copy,
    /// I/O Management Receive and Send (Flexible Data Placement's reclaim
    /// unit handle status and update).
    IoManagement,
    /// Admin commands (Get Log Page, Get and Set Features).
    Admin,
}

impl Opcode {
    /// Every opcode group, in label order.
    pub const ALL: [Opcode; 10] = [
        Opcode::Read,
        Opcode::Write,
        Opcode::ZoneAppend,
        Opcode::WriteZeroes,
        Opcode::Flush,
        Opcode::ZoneManagementSend,
        Opcode::ZoneManagementReceive,
        Opcode::Copy,
        Opcode::IoManagement,
        Opcode::Admin,
    ];

    /// The group of a command of kind `op`.
    pub const fn of(op: OpKind) -> Opcode {
        match op {
            OpKind::Read => Opcode::Read,
            OpKind::Write => Opcode::Write,
            OpKind::Append => Opcode::ZoneAppend,
            OpKind::WriteZeroes => Opcode::WriteZeroes,
            OpKind::Flush => Opcode::Flush,
            OpKind::ReportZones => Opcode::ZoneManagementReceive,
            OpKind::Copy => Opcode::Copy,
            OpKind::GetLogPage | OpKind::GetFeatures | OpKind::SetFeatures => Opcode::Admin,
            OpKind::RuhStatus | OpKind::RuhUpdate => Opcode::IoManagement,
            OpKind::Open
            | OpKind::Close
            | OpKind::Finish
            | OpKind::Reset
            | OpKind::Offline
            | OpKind::SetZoneExtension
            | OpKind::OpenZrwa
            | OpKind::CommitZrwa => Opcode::ZoneManagementSend,
        }
    }

    /// The label value: the opcode's name in snake case.
    pub const fn label(self) -> &'static str {
        match self {
            Opcode::Read => "read",
            Opcode::Write => "write",
            Opcode::ZoneAppend => "zone_append",
            Opcode::WriteZeroes => "write_zeroes",
            Opcode::Flush => "flush",
            Opcode::ZoneManagementSend => "zone_management_send",
            Opcode::ZoneManagementReceive => "zone_management_receive",
            Opcode::Copy => "copy",
            Opcode::IoManagement => "io_management",
            Opcode::Admin => "admin",
        }
    }
}

/// Slots of the status counters: every named status, then one for a
/// status without a name, then one for a command that failed without a
/// status (refused by the host side, or its transport failed).
const STATUSES: usize = StatusCode::ALL.len() + 2;
const UNNAMED: usize = StatusCode::ALL.len();
const NO_STATUS: usize = StatusCode::ALL.len() + 1;

/// The `status` label of status slot `i`.
pub(crate) fn status_label(i: usize) -> &'static str {
    match i {
        UNNAMED => "unnamed status",
        NO_STATUS => "no status (host or transport error)",
        i => StatusCode::ALL[i].name(),
    }
}

/// The status slot of a command's outcome.
fn status_slot(result: Result<(), &DeviceError>) -> usize {
    match result {
        Ok(()) => StatusCode::Success as usize,
        Err(e) => match e.status() {
            Some(s) => s.code().map_or(UNNAMED, |c| c as usize),
            None => NO_STATUS,
        },
    }
}

/// One opcode's counters on one queue.
#[derive(Debug)]
pub(crate) struct OpCounters {
    pub commands: AtomicU64,
    pub bytes: AtomicU64,
    pub latency_ns: AtomicU64,
    pub buckets: [AtomicU64; BUCKETS],
}

impl OpCounters {
    fn new() -> Self {
        OpCounters {
            commands: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            latency_ns: AtomicU64::new(0),
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

/// The counters of one queue slot: written by the queue that holds the
/// slot, read by scrapes.
///
/// Thread safety: `Send + Sync`; every field is an atomic.
#[derive(Debug)]
pub struct QueueMetrics {
    slot: u32,
    pub(crate) ops: [OpCounters; Opcode::ALL.len()],
    pub(crate) statuses: [AtomicU64; STATUSES],
}

/// Adds `n` to a counter only its slot's queue writes.
#[inline]
fn add(c: &AtomicU64, n: u64) {
    c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}

/// Nanosecond bounds of the latency buckets.
const BOUNDS_NS: [u64; LATENCY_BOUNDS.len()] = {
    let mut b = [0u64; LATENCY_BOUNDS.len()];
    let mut i = 0;
    while i < b.len() {
        b[i] = (LATENCY_BOUNDS[i] * 1e9) as u64;
        i += 1;
    }
    b
};

impl QueueMetrics {
    fn new(slot: u32) -> Self {
        QueueMetrics {
            slot,
            ops: std::array::from_fn(|_| OpCounters::new()),
            statuses: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// The queue label: slots are reused once their queue is gone, so
    /// their counters only grow.
    pub fn slot(&self) -> u32 {
        self.slot
    }

    /// Counts one completed command: its kind, the bytes it moved, how
    /// long it took, and how it ended. Only the queue holding the slot
    /// calls this (a slot has one writer at a time), so each counter is
    /// a plain load and store, no locked instruction; scrapes only load.
    #[inline]
    pub(crate) fn record(
        &self,
        op: OpKind,
        bytes: u64,
        latency_ns: u64,
        result: Result<(), &DeviceError>,
    ) {
        let c = &self.ops[Opcode::of(op) as usize];
        add(&c.commands, 1);
        add(&c.bytes, bytes);
        add(&c.latency_ns, latency_ns);
        let b = BOUNDS_NS.iter().position(|&edge| latency_ns <= edge).unwrap_or(BUCKETS - 1);
        add(&c.buckets[b], 1);
        add(&self.statuses[status_slot(result)], 1);
    }

    /// Commands of `op` counted so far.
    pub fn commands(&self, op: Opcode) -> u64 {
        self.ops[op as usize].commands.load(Ordering::Relaxed)
    }

    /// Bytes of `op` counted so far.
    pub fn bytes(&self, op: Opcode) -> u64 {
        self.ops[op as usize].bytes.load(Ordering::Relaxed)
    }

    /// Completions with status `code` so far.
    pub fn status(&self, code: StatusCode) -> u64 {
        self.statuses[code as usize].load(Ordering::Relaxed)
    }
}

/// The queue slots of one device: a queue takes a free slot when it is
/// created and gives it back when dropped (a lock then, never per
/// command), so a server whose connections come and go keeps as many
/// slots as it had queues at once.
///
/// Thread safety: `Send + Sync`.
#[derive(Debug, Default)]
pub struct DeviceMetrics {
    slots: Mutex<Slots>,
}

#[derive(Debug, Default)]
struct Slots {
    all: Vec<Arc<QueueMetrics>>,
    free: Vec<u32>,
}

impl DeviceMetrics {
    /// Counters for a device, none yet.
    pub fn new() -> Arc<Self> {
        Arc::new(DeviceMetrics::default())
    }

    /// A slot for a new queue.
    pub(crate) fn take(&self) -> Arc<QueueMetrics> {
        let mut s = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = s.free.pop() {
            return Arc::clone(&s.all[i as usize]);
        }
        let q = Arc::new(QueueMetrics::new(s.all.len() as u32));
        s.all.push(Arc::clone(&q));
        q
    }

    /// Gives slot `slot` back when its queue is dropped.
    pub(crate) fn give_back(&self, slot: u32) {
        let mut s = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        s.free.push(slot);
    }

    /// Every slot so far, in slot order.
    pub fn queues(&self) -> Vec<Arc<QueueMetrics>> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner()).all.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zns_spec::{Status, StatusCodeType};

    #[test]
    fn a_command_lands_in_its_opcode_bucket_and_status() {
        let m = DeviceMetrics::new();
        let q = m.take();
        q.record(OpKind::Write, 4096, 30_000, Ok(()));
        q.record(OpKind::Append, 8192, 2_000_000_000, Ok(()));
        let full = DeviceError::Nvme {
            status: StatusCode::ZoneIsFull.status(),
            op: OpKind::Write,
            lba: Some(0),
        };
        q.record(OpKind::Write, 4096, 5_000, Err(&full));
        let odd = DeviceError::Nvme {
            status: Status::new(StatusCodeType::VendorSpecific, 0x77),
            op: OpKind::Read,
            lba: None,
        };
        q.record(OpKind::Read, 0, 5_000, Err(&odd));
        assert_eq!(q.commands(Opcode::Write), 2);
        assert_eq!(q.bytes(Opcode::Write), 8192);
        assert_eq!(q.commands(Opcode::ZoneAppend), 1);
        assert_eq!(q.status(StatusCode::Success), 2);
        assert_eq!(q.status(StatusCode::ZoneIsFull), 1);
        assert_eq!(q.statuses[UNNAMED].load(Ordering::Relaxed), 1);
        let w = &q.ops[Opcode::Write as usize];
        // 30 µs falls in the 50 µs bucket, 5 µs in the 10 µs one.
        assert_eq!(w.buckets[2].load(Ordering::Relaxed), 1);
        assert_eq!(w.buckets[0].load(Ordering::Relaxed), 1);
        // Two seconds is past every bound: +Inf.
        let a = &q.ops[Opcode::ZoneAppend as usize];
        assert_eq!(a.buckets[BUCKETS - 1].load(Ordering::Relaxed), 1);
        assert_eq!(status_label(StatusCode::ZoneIsFull as usize), "Zone Is Full");
    }

    #[test]
    fn slots_are_reused_and_keep_their_counts() {
        let m = DeviceMetrics::new();
        let a = m.take();
        let b = m.take();
        assert_eq!((a.slot(), b.slot()), (0, 1));
        a.record(OpKind::Read, 512, 1, Ok(()));
        m.give_back(a.slot());
        let c = m.take();
        assert_eq!(c.slot(), 0);
        assert_eq!(c.commands(Opcode::Read), 1);
        assert_eq!(m.queues().len(), 2);
    }
}
