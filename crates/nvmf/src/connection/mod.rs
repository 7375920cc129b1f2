//! One NVMe/TCP connection, served as a session of the event-driven
//! server (`zns_server`): the ICReq/ICResp exchange, then command capsules
//! in, data and response capsules out, until the host disconnects or
//! breaks the transport.
//!
//! A connection is one queue (the admin queue or one I/O queue). Reads
//! and writes on an I/O queue go in flight on the device (`inflight`) and
//! are answered as they complete; other commands run one at a time, in
//! order. Data the host writes arrives in the capsule (up to the
//! in-capsule size) or after an R2T, in H2CData PDUs; data for the host
//! leaves in one C2HData PDU before the response. Capsules that arrive
//! while the connection waits for a write's data are kept and run next.
//! A PDU the transport forbids ends the connection with a C2HTermReq
//! saying why; NVMe-level errors are statuses (a PDU whose data fails its
//! digest fails only its command, with Transient Transport Error).
//!
//! Nothing here waits for the host. A PDU is read only once it is
//! buffered whole (its header is checked against its limits as soon as
//! its first 8 bytes are there, before more is awaited); responses go
//! out without blocking, and what the socket does not take waits in the
//! connection's output, which stops taking commands while it is full.
//! Between PDUs, in the middle of one, while an R2T's data is awaited or
//! while the host takes no responses, the connection gives its worker
//! back with a deadline: a PDU once begun, the data of an R2T and a
//! response once sent must each complete within the stall timeout, the
//! ICReq and Connect within it of connecting, and an admin queue ends
//! when its controller's Keep Alive timer expires. Nothing of a PDU's
//! length is allocated before the length has been checked.
//!
//! | file | concern |
//! |---|---|
//! | `mod.rs` | the session: its state, the loop, deadlines, the end |
//! | `pdu.rs` | PDUs in (whole ones only) and out (the output buffer) |
//! | `command.rs` | running a command: data, Fabrics, Connect, authentication |

mod command;
mod pdu;

use std::collections::VecDeque;
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use zns_nvme_tcp::{PduReader, SocketInput};
use zns_server::{conclude, Closer, Resume, Session, Wait};
use zns_spec::tcp::Digests;
use zns_spec::SubmissionEntry;

use crate::admin::AsyncEvents;
use crate::auth::QueueAuth;
use crate::controller::Controller;
use crate::error::{NvmfError, Result};
use crate::inflight;
use crate::io::IoContext;
use crate::target::Shared;

use self::pdu::Output;

/// How long a queue with commands in flight spins looking for their
/// completions before it sleeps between looks: a command on a fast device
/// completes within it.
const SETTLE_SPIN: Duration = Duration::from_micros(20);

/// The first sleep between looks after the spin.
const SETTLE_SLEEP_FIRST: Duration = Duration::from_micros(5);

/// The longest sleep between looks: how late a completion of a long
/// command (a zone reset, a slow write) may be answered at most.
const SETTLE_SLEEP_MAX: Duration = Duration::from_micros(50);

/// How often an admin queue waiting for zone events looks for them while
/// its host sends nothing.
const EVENT_POLL: Duration = Duration::from_millis(10);

/// How long a connection stays quiet before it frees its buffers: a
/// host that pauses for less (a busy one, descheduled a moment) finds
/// them in place, so a resumed connection allocates nothing.
const IDLE_RELEASE: Duration = Duration::from_millis(100);

/// MAXH2CDATA: most data bytes in one H2CData PDU.
pub const MAX_H2C_DATA: u32 = 128 * 1024;

/// The input buffer at most: the largest PDU a host may send (an H2CData
/// PDU of MAXH2CDATA with its header, padding and digests) fits whole.
const INPUT_BUFFER: usize = 2 * MAX_H2C_DATA as usize;

/// The input buffer as made: room for a batch of command capsules (with
/// 8 KiB of in-capsule data); it grows for a larger PDU.
const INPUT_START: usize = 16 * 1024;

/// The queue a Connect created on this connection.
struct Queue {
    qid: u16,
    entries: u16,
    sqhd: u16,
    /// The host disabled SQ flow control (Connect CATTR bit 2): no SQ
    /// head is reported, and a successful read ends with its data.
    no_sq_flow_control: bool,
    ctrl: Arc<Controller>,
    aer: AsyncEvents,
    io: IoContext,
    /// The DH-HMAC-CHAP exchange of a host that must authenticate.
    auth: Option<QueueAuth>,
}

impl Queue {
    /// The SQ head its completions report.
    fn reported_sqhd(&self) -> u16 {
        if self.no_sq_flow_control {
            zns_spec::fabrics::SQHD_NOT_REPORTED
        } else {
            self.sqhd
        }
    }

    /// The host still has to authenticate on this queue.
    fn unauthenticated(&self) -> bool {
        self.auth.as_ref().is_some_and(|a| !a.authenticated())
    }
}

/// A command capsule: its entry and in-capsule data. A capsule run as
/// soon as it is read has its data in the connection's data buffer
/// already (`None`); one kept while a write waits for its data owns it.
struct Capsule {
    sqe: SubmissionEntry,
    data: Option<Vec<u8>>,
    /// Its in-capsule data failed the data digest: answered with
    /// Transient Transport Error, not run.
    damaged: bool,
}

/// A write waiting for the data its R2T asked for.
struct Transfer {
    sqe: SubmissionEntry,
    ttag: u16,
    len: u32,
    got: u32,
    /// No H2CData PDU failed its data digest.
    intact: bool,
    /// The R2T or the last H2CData: the next is due within the stall
    /// timeout of it.
    last: Instant,
}

/// Per-connection state.
pub(crate) struct Connection {
    shared: Arc<Shared>,
    r: SocketInput,
    out: Output,
    reader: PduReader,
    digests: Digests,
    /// ICReq answered.
    initialized: bool,
    queue: Option<Queue>,
    pending: VecDeque<Capsule>,
    transfer: Option<Transfer>,
    /// Data of the command being run (in-capsule or gathered by R2T).
    host: Vec<u8>,
    /// Data for the host.
    data: Vec<u8>,
    next_ttag: u16,
    /// When the connection opened (its ICReq and Connect are due within
    /// the stall timeout of it).
    opened: Instant,
    /// When the first bytes of the PDU being gathered were seen.
    partial_since: Option<Instant>,
    /// The host disconnected or ended the stream: close once the output
    /// has gone.
    closing: bool,
    /// Closes this connection's session (kept by its controller for an
    /// I/O queue, which ends with it).
    closer: Option<Closer>,
    /// The clean-up has run.
    finished: bool,
    /// When the connection last had work (its buffers are freed
    /// [`IDLE_RELEASE`] after it).
    active: Instant,
    /// Its buffers may hold memory (not freed since it last had work).
    holding: bool,
    /// It had work since `active` was last set.
    worked: bool,
    /// Input arrived since a command last restarted the controller's Keep
    /// Alive timer: the next command restarts it. The timer counts in
    /// milliseconds, so one clock read per batch of commands received
    /// together serves them all.
    touch_due: bool,
}

thread_local! {
    /// This worker thread's timer slack is set (`precise_timers`).
    static PRECISE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

impl Connection {
    /// The session of an accepted connection.
    pub(crate) fn new(stream: TcpStream, shared: Arc<Shared>) -> Result<Connection> {
        stream.set_nonblocking(true)?;
        let _ = stream.set_nodelay(true);
        let mut r = SocketInput::with_capacity(INPUT_BUFFER, stream);
        r.start_small(INPUT_START);
        Ok(Connection {
            shared,
            r,
            out: Output::default(),
            reader: PduReader::new(0),
            digests: Digests::default(),
            initialized: false,
            queue: None,
            pending: VecDeque::new(),
            transfer: None,
            host: Vec::new(),
            data: Vec::new(),
            next_ttag: 0,
            opened: Instant::now(),
            partial_since: None,
            closing: false,
            closer: None,
            finished: false,
            active: Instant::now(),
            holding: true,
            worked: false,
            touch_due: true,
        })
    }

    /// Serves what is there; `Err` ends the connection.
    fn step(&mut self, ctx: &Resume<'_>) -> Result<Wait> {
        if self.closer.is_none() {
            self.closer = Some(ctx.closer());
        }
        if ctx.stopping() {
            return Ok(Wait::Close);
        }
        loop {
            if self.out.full() {
                self.flush()?;
                if self.out.full() {
                    return self.wait_for_room();
                }
            }
            if self.closing {
                self.flush()?;
                return if self.out.is_empty() { Ok(Wait::Close) } else { self.wait_for_room() };
            }
            if self.transfer.is_none() {
                if let Some(c) = self.pending.pop_front() {
                    self.command(c)?;
                    continue;
                }
            }
            if let Some(got) = self.buffered_pdu()? {
                self.worked = true;
                self.on_pdu(got)?;
                continue;
            }
            if self.finish_inflight()? > 0 {
                if self.out.ripe() {
                    self.flush()?;
                }
                continue;
            }
            self.deliver_events()?;
            self.flush()?;
            if self.fill()? > 0 {
                continue;
            }
            if self.r.is_closed() {
                self.closing = true;
                continue;
            }
            if self.inflight() > 0 {
                match self.settle(ctx)? {
                    Some(until) => return Ok(Wait::Input { until: Some(until) }),
                    None => continue,
                }
            }
            if let Some(e) = self.expired() {
                return Err(e);
            }
            if !self.out.is_empty() {
                return self.wait_for_room();
            }
            if self.shared.poll > Duration::ZERO && self.poll_input()? {
                continue;
            }
            return Ok(self.idle());
        }
    }

    /// Nothing to do until the host sends: how long to wait (a connection
    /// quiet for [`IDLE_RELEASE`] frees its buffers first).
    fn idle(&mut self) -> Wait {
        if std::mem::take(&mut self.worked) {
            // The clock is read once per batch of PDUs, not per PDU.
            self.active = Instant::now();
            self.holding = true;
        } else if self.holding && self.active.elapsed() >= IDLE_RELEASE {
            self.release_buffers();
        }
        Wait::Input { until: self.wake_deadline() }
    }

    /// Nothing is buffered that the connection still needs (part of a
    /// PDU, a transfer's data, kept capsules).
    fn can_release(&self) -> bool {
        self.partial_since.is_none() && self.transfer.is_none() && self.pending.is_empty()
    }

    /// Frees what an idle connection need not hold: its buffers, made
    /// again when the host next sends.
    fn release_buffers(&mut self) {
        if self.can_release() {
            self.r.release();
            self.out.release();
            shrink(&mut self.host);
            shrink(&mut self.data);
            self.holding = false;
        }
    }

    /// Waits for the host to take responses, at most the stall timeout.
    fn wait_for_room(&mut self) -> Result<Wait> {
        let since = self.out.blocked_since().unwrap_or_else(Instant::now);
        if since.elapsed() >= self.shared.stall {
            return Err(NvmfError::Timeout(format!(
                "the host took no response for {:?}",
                self.shared.stall
            )));
        }
        Ok(Wait::Output { until: Some(since + self.shared.stall) })
    }

    /// Spins for up to [`TargetConfig::poll`](crate::TargetConfig::poll)
    /// looking for input; whether some came (or the host's end).
    fn poll_input(&mut self) -> Result<bool> {
        let start = Instant::now();
        while start.elapsed() < self.shared.poll {
            if self.fill()? > 0 || self.r.is_closed() {
                return Ok(true);
            }
            std::hint::spin_loop();
        }
        Ok(false)
    }

    /// Receives what the socket holds without waiting; bytes received.
    fn fill(&mut self) -> Result<usize> {
        let n = self.r.fill_more()?;
        if n > 0 {
            self.touch_due = true;
        }
        Ok(n)
    }

    fn inflight(&self) -> usize {
        self.queue.as_ref().map_or(0, |q| q.io.inflight.len())
    }

    /// With commands in flight and nothing to read: answers them as they
    /// complete. The device gives no signal when a command completes, so
    /// the queue looks: it spins for [`SETTLE_SPIN`] (or the target's poll
    /// time, if longer), then sleeps between looks (waking at once for
    /// input) for [`SETTLE_SLEEP_FIRST`], doubling up to
    /// [`SETTLE_SLEEP_MAX`]: a command that takes long costs a few looks,
    /// not a core. Returns `None` when something happened (a completion,
    /// input), or a deadline to be resumed at when other connections wait
    /// for the worker.
    fn settle(&mut self, ctx: &Resume<'_>) -> Result<Option<Instant>> {
        if !PRECISE.get() {
            zns_nvme_tcp::precise_timers();
            PRECISE.set(true);
        }
        let start = Instant::now();
        let mut sleep = SETTLE_SLEEP_FIRST;
        loop {
            if self.finish_inflight()? > 0 || self.inflight() == 0 {
                return Ok(None);
            }
            if self.fill()? > 0 || self.r.is_closed() {
                return Ok(None);
            }
            if start.elapsed() < SETTLE_SPIN.max(self.shared.poll) {
                std::hint::spin_loop();
                continue;
            }
            if ctx.others_waiting() {
                return Ok(Some(Instant::now() + SETTLE_SLEEP_MAX));
            }
            if self.r.wait_readable(Some(Instant::now() + sleep)) {
                continue;
            }
            sleep = (sleep * 2).min(SETTLE_SLEEP_MAX);
        }
    }

    /// An admin queue holding Asynchronous Event Requests of a host that
    /// enabled Zone Descriptor Changed notices on a subsystem whose devices
    /// report zone changes: it must look for them while the host is quiet.
    fn awaits_zone_events(&self) -> bool {
        self.queue.as_ref().is_some_and(|q| {
            q.qid == 0
                && !q.aer.held.is_empty()
                && q.ctrl.zone_notices()
                && !self.shared.zone_watch.is_empty()
        })
    }

    /// When to resume a connection that waits for input even if nothing
    /// comes: the earliest of its deadlines, and the next look for zone
    /// events.
    fn wake_deadline(&self) -> Option<Instant> {
        let stall = self.shared.stall;
        let mut at = [
            self.partial_since.map(|t| t + stall),
            self.transfer.as_ref().map(|t| t.last + stall),
            self.idle_deadline(),
            self.awaits_zone_events().then(|| Instant::now() + EVENT_POLL),
            (self.holding && self.can_release()).then_some(self.active + IDLE_RELEASE),
        ]
        .into_iter()
        .flatten();
        let first = at.next()?;
        Some(at.fold(first, Instant::min))
    }

    /// How long the connection may stay quiet before its next PDU: until
    /// the stall timeout after opening while it has no queue, until its
    /// controller's Keep Alive timer expires on an admin queue, without a
    /// bound on an I/O queue (which ends with its controller).
    fn idle_deadline(&self) -> Option<Instant> {
        match &self.queue {
            None => Some(self.opened + self.shared.stall),
            // Authentication is part of setting the queue up.
            Some(q) if q.unauthenticated() => Some(self.opened + self.shared.stall),
            Some(q) if q.qid == 0 => q.ctrl.keep_alive_deadline(),
            Some(_) => None,
        }
    }

    /// The error that ends a connection past one of its deadlines, if it
    /// is (an I/O queue's command may have restarted the Keep Alive timer).
    fn expired(&self) -> Option<NvmfError> {
        let now = Instant::now();
        let stall = self.shared.stall;
        if self.partial_since.is_some_and(|t| now >= t + stall) {
            return Some(NvmfError::Timeout(format!(
                "the host stopped in the middle of a PDU for {stall:?}"
            )));
        }
        if self.transfer.as_ref().is_some_and(|t| now >= t.last + stall) {
            return Some(NvmfError::Timeout(format!(
                "no data for a write within {stall:?} of its R2T"
            )));
        }
        if self.idle_deadline().is_none_or(|d| now < d) {
            return None;
        }
        Some(match &self.queue {
            None if !self.initialized => {
                NvmfError::Timeout(format!("no ICReq within {stall:?} of connecting"))
            }
            None => NvmfError::Timeout(format!("no Connect within {stall:?} of connecting")),
            Some(q) if q.unauthenticated() => {
                NvmfError::Timeout(format!("no authentication within {stall:?} of connecting"))
            }
            Some(q) => NvmfError::KeepAliveExpired {
                cntlid: q.ctrl.cntlid,
                kato_ms: q.ctrl.kato_ms.load(Ordering::Relaxed),
            },
        })
    }

    /// Ends the connection (once): a transport error is answered with a
    /// C2HTermReq, its queue leaves its controller, an admin queue's
    /// controller goes with its I/O queues, and the end is counted and
    /// logged.
    fn finish(&mut self, result: Result<()>, peer: &str, stopping: bool) {
        if std::mem::replace(&mut self.finished, true) {
            return;
        }
        if let Err(NvmfError::Pdu(e)) = &result {
            self.terminate(e);
        }
        let _ = self.flush();
        if let Some(q) = &mut self.queue {
            if q.unauthenticated() {
                tracing::warn!(hostnqn = %q.ctrl.hostnqn, qid = q.qid, "queue closed without authenticating");
            }
            inflight::abandon(&mut q.io);
            if q.qid == 0 {
                self.shared.registry.remove(q.ctrl.cntlid);
            } else {
                q.ctrl.leave(q.qid);
            }
        }
        self.shared.count_end(&result, peer, stopping);
    }
}

impl Session for Connection {
    fn resume(&mut self, ctx: &Resume<'_>) -> Wait {
        let r = self.step(ctx);
        conclude(r, |end| self.finish(end, ctx.peer, ctx.stopping()))
    }

    fn socket(&self) -> &TcpStream {
        self.r.get_ref()
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        // Closed while waiting: by the target's stop, or with its
        // controller (an I/O queue).
        self.finish(Ok(()), "", true);
    }
}

/// Frees a large buffer an idle connection need not keep.
fn shrink(v: &mut Vec<u8>) {
    v.clear();
    if v.capacity() > 16 * 1024 {
        *v = Vec::new();
    }
}

/// Status marker of a held command (no response yet).
const HELD: zns_spec::Status =
    zns_spec::Status::new(zns_spec::StatusCodeType::VendorSpecific, 0xFF);
