//! Controllers: what an admin queue's Connect creates and its I/O queues
//! join, with the registers hosts read and write through Property Get and
//! Set, the features they set, and the counters of the SMART log.
//!
//! The target follows the dynamic controller model: each admin Connect
//! (CNTLID FFFFh) gets a new controller; I/O queue Connects name it by
//! CNTLID and must come from the same host NQN. A controller lives while
//! its admin queue's connection does, and no longer than its Keep Alive
//! Timeout without a command (any command on any of its queues restarts
//! the timer: traffic-based keep alive). Its I/O queues end with it: their
//! connections are closed when it is removed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use zns_server::Closer;
use zns_spec::event::{AsyncEvent, AEC_ZONE_DESCRIPTOR_CHANGED};
use zns_spec::log::ChangedZoneList;
use zns_spec::regs::{offset, Cap};
use zns_spec::{Status, StatusCode};

use crate::events::ZoneEvents;
use crate::subsystem::{Subsystem, QUEUE_ENTRIES, VERSION};

/// What a controller serves.
#[derive(Debug, Clone)]
pub(crate) enum Role {
    /// An I/O controller of the subsystem.
    Io(Arc<Subsystem>),
    /// The discovery controller.
    Discovery,
}

/// Most I/O queues a host may ask for (0's based answer of Number of
/// Queues is this minus one).
pub(crate) const MAX_IO_QUEUES: u32 = 64;

/// One controller.
///
/// Thread safety: `Send + Sync`; its admin and I/O connections share it.
/// Registers and features are atomics.
#[derive(Debug)]
pub(crate) struct Controller {
    pub cntlid: u16,
    pub role: Role,
    pub hostnqn: String,
    cc: AtomicU32,
    csts: AtomicU32,
    pub kato_ms: AtomicU32,
    /// I/O queues granted by Set Features Number of Queues (0's based).
    pub io_queues: AtomicU32,
    pub async_event_config: AtomicU32,
    pub write_cache: AtomicBool,
    pub stats: Stats,
    /// Changed Zone Lists and Zone Descriptor Changed events (admin path
    /// only: changes arrive from the subsystem's zone watch).
    zone_events: Mutex<ZoneEvents>,
    /// When the registry was made: `last_command_ms` counts from it.
    epoch: Instant,
    /// Milliseconds from `epoch` to the last command on any of the
    /// controller's queues (the Keep Alive timer's restart).
    last_command_ms: AtomicU64,
    /// The connected I/O queues by QID, with what closes their
    /// connections (they end with the controller); `None` once the
    /// controller is gone.
    io_queues_open: Mutex<Option<Vec<(u16, Closer)>>>,
}

/// Why an I/O queue's Connect was refused by its controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JoinError {
    /// The controller was removed meanwhile.
    Gone,
    /// The QID is connected already.
    InUse,
}

/// Counters of the SMART / Health log.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub bytes_read: AtomicU64,
    pub bytes_written: AtomicU64,
    pub read_commands: AtomicU64,
    pub write_commands: AtomicU64,
    /// Commands that ended with a Media and Data Integrity status (an
    /// Unrecovered Read Error from the device, for one).
    pub media_errors: AtomicU64,
}

/// The Keep Alive timer's granularity (Identify KAS: 10 units of 100 ms).
pub(crate) const KAS_MS: u32 = 1000;

/// CSTS.RDY.
const CSTS_RDY: u32 = 1 << 0;
/// CSTS.SHST = 10b: shutdown processing complete.
const CSTS_SHST_COMPLETE: u32 = 0b10 << 2;
/// CC.EN.
const CC_EN: u32 = 1 << 0;
/// CC.SHN (15:14).
const CC_SHN_MASK: u32 = 0b11 << 14;

impl Controller {
    /// CAP: 128-entry queues, contiguous, 10 s ready timeout, the NVM and
    /// the I/O command sets, 4 KiB pages.
    pub fn cap(&self) -> u64 {
        Cap(0)
            .with_mqes(QUEUE_ENTRIES - 1)
            .with_cqr(true)
            .with_to(20)
            .with_css(Cap::CSS_NVM | Cap::CSS_IO_COMMAND_SETS)
            .0
    }

    /// Property Get: the register at `offset`, `None` when there is none.
    pub fn property(&self, off: u32, eight_bytes: bool) -> Option<u64> {
        let v = match off {
            offset::CAP => self.cap(),
            offset::VS => VERSION.0 as u64,
            offset::CC => self.cc.load(Ordering::SeqCst) as u64,
            offset::CSTS => self.csts.load(Ordering::SeqCst) as u64,
            offset::NSSR => 0,
            _ => return None,
        };
        // CAP is the only 8-byte property (its low half may be read alone).
        if off == offset::CAP {
            return Some(if eight_bytes { v } else { v & 0xFFFF_FFFF });
        }
        if eight_bytes {
            return None;
        }
        Some(v)
    }

    /// Property Set: CC enables, resets and shuts the controller down.
    pub fn set_property(&self, off: u32, value: u64) -> Result<(), Status> {
        if off != offset::CC {
            return Err(StatusCode::InvalidField.status());
        }
        let cc = value as u32;
        self.cc.store(cc, Ordering::SeqCst);
        let mut csts = 0;
        if cc & CC_EN != 0 {
            csts |= CSTS_RDY;
        }
        if cc & CC_SHN_MASK != 0 {
            csts = (csts & CSTS_RDY) | CSTS_SHST_COMPLETE;
        }
        self.csts.store(csts, Ordering::SeqCst);
        tracing::debug!(cntlid = self.cntlid, cc = format_args!("{cc:#x}"), "CC written");
        Ok(())
    }

    /// CC.EN and CSTS.RDY: I/O queues may connect, commands may run.
    pub fn enabled(&self) -> bool {
        self.csts.load(Ordering::SeqCst) & CSTS_RDY != 0
    }

    /// The subsystem, for an I/O controller.
    pub fn subsystem(&self) -> Option<&Arc<Subsystem>> {
        match &self.role {
            Role::Io(s) => Some(s),
            Role::Discovery => None,
        }
    }

    /// The host enabled Zone Descriptor Changed notices (Asynchronous
    /// Event Configuration bit 27).
    pub fn zone_notices(&self) -> bool {
        self.async_event_config.load(Ordering::Relaxed) & AEC_ZONE_DESCRIPTOR_CHANGED != 0
    }

    /// Lists changed `zones` of namespace `nsid` (and queues an event if
    /// the host asked for them).
    pub fn record_zone_changes(&self, nsid: u32, zones: &[u64]) {
        self.zone_events.lock().record(nsid, zones, self.zone_notices());
    }

    /// The next Zone Descriptor Changed event to complete an Asynchronous
    /// Event Request with, if any.
    pub fn next_zone_event(&self) -> Option<AsyncEvent> {
        self.zone_events.lock().next_event(self.zone_notices())
    }

    /// The Changed Zone List of namespace `nsid`; unless `retain`, it is
    /// emptied and its event re-armed.
    pub fn changed_zone_list(&self, nsid: u32, retain: bool) -> Box<[u8; ChangedZoneList::SIZE]> {
        self.zone_events.lock().read_log(nsid, retain)
    }

    /// Sets the Keep Alive Timeout (milliseconds, 0: none), rounded up to
    /// the granularity Identify's KAS reports (1 s), as the timer runs.
    pub fn set_kato(&self, ms: u32) {
        self.kato_ms.store(ms.div_ceil(KAS_MS) * KAS_MS, Ordering::Relaxed);
        self.touch();
    }

    /// A command arrived on one of the controller's queues: restarts the
    /// Keep Alive timer (one relaxed store).
    pub fn touch(&self) {
        let ms = self.epoch.elapsed().as_millis() as u64;
        self.last_command_ms.store(ms, Ordering::Relaxed);
    }

    /// When the Keep Alive timer expires unless a command comes first;
    /// `None` when the host disabled it (KATO 0).
    pub fn keep_alive_deadline(&self) -> Option<Instant> {
        let kato = self.kato_ms.load(Ordering::Relaxed);
        if kato == 0 {
            return None;
        }
        let last = self.last_command_ms.load(Ordering::Relaxed);
        Some(self.epoch + Duration::from_millis(last + kato as u64))
    }

    /// Joins I/O queue `qid` (its connection closed by `closer`) to the
    /// controller.
    pub fn join(&self, qid: u16, closer: Closer) -> Result<(), JoinError> {
        let mut open = self.io_queues_open.lock();
        let Some(list) = open.as_mut() else { return Err(JoinError::Gone) };
        if list.iter().any(|(q, _)| *q == qid) {
            return Err(JoinError::InUse);
        }
        list.push((qid, closer));
        Ok(())
    }

    /// I/O queue `qid`'s connection ended: its QID is free again.
    pub fn leave(&self, qid: u16) {
        if let Some(list) = self.io_queues_open.lock().as_mut() {
            list.retain(|(q, _)| *q != qid);
        }
    }

    /// The controller is gone: no queue joins any more, and the connected
    /// ones are closed (at once if they wait, after their current work if
    /// they run).
    fn end(&self) {
        let Some(list) = self.io_queues_open.lock().take() else { return };
        for (qid, closer) in list {
            tracing::debug!(cntlid = self.cntlid, qid, "I/O queue ended with its controller");
            closer.close();
        }
    }
}

/// The controllers of a target.
///
/// Thread safety: `Send + Sync`; one lock, taken at Connect and at the
/// end of an admin connection.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    next: AtomicU16,
    map: Mutex<HashMap<u16, Arc<Controller>>>,
}

impl Registry {
    /// A new controller for `hostnqn`.
    pub fn create(&self, role: Role, hostnqn: &str, kato_ms: u32) -> Option<Arc<Controller>> {
        let mut map = self.map.lock();
        // CNTLIDs 1..=FFEFh; skip ones in use.
        for _ in 0..0xFFEF {
            let id = self.next.fetch_add(1, Ordering::Relaxed) % 0xFFEF + 1;
            if map.contains_key(&id) {
                continue;
            }
            let c = Arc::new(Controller {
                cntlid: id,
                role,
                hostnqn: hostnqn.to_string(),
                cc: AtomicU32::new(0),
                csts: AtomicU32::new(0),
                kato_ms: AtomicU32::new(kato_ms),
                io_queues: AtomicU32::new(0),
                async_event_config: AtomicU32::new(0),
                write_cache: AtomicBool::new(true),
                stats: Stats::default(),
                zone_events: Mutex::new(ZoneEvents::default()),
                epoch: Instant::now(),
                last_command_ms: AtomicU64::new(0),
                io_queues_open: Mutex::new(Some(Vec::new())),
            });
            c.set_kato(kato_ms);
            map.insert(id, Arc::clone(&c));
            return Some(c);
        }
        None
    }

    /// Controller `cntlid`, if it exists.
    pub fn get(&self, cntlid: u16) -> Option<Arc<Controller>> {
        self.map.lock().get(&cntlid).cloned()
    }

    /// Calls `f` on every I/O controller (under the registry's lock:
    /// `f` must not connect or remove controllers).
    pub fn each_io(&self, mut f: impl FnMut(&Controller)) {
        for c in self.map.lock().values() {
            if matches!(c.role, Role::Io(_)) {
                f(c);
            }
        }
    }

    /// Forgets controller `cntlid` (its admin queue is gone, or its Keep
    /// Alive timer expired) and ends its I/O queues.
    pub fn remove(&self, cntlid: u16) {
        let gone = self.map.lock().remove(&cntlid);
        if let Some(c) = gone {
            c.end();
        }
    }

    /// Controllers now.
    pub fn len(&self) -> usize {
        self.map.lock().len()
    }
}
