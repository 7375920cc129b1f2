//! One NVMe/TCP connection: the ICReq/ICResp exchange, then command
//! capsules in, data and response capsules out, until the host
//! disconnects or breaks the transport.
//!
//! A connection is one queue (the admin queue or one I/O queue). Reads
//! and writes on an I/O queue go in flight on the device (`inflight`) and
//! are answered as they complete; other commands run one at a time, in
//! order. Data the host writes arrives in the
//! capsule (up to the in-capsule size) or after an R2T, in H2CData PDUs;
//! data for the host leaves in one C2HData PDU before the response.
//! Capsules that arrive while the connection waits for a write's data are
//! kept and run next. A PDU the transport forbids ends the connection
//! with a C2HTermReq saying why; NVMe-level errors are statuses (a PDU
//! whose data fails its digest fails only its command, with Transient
//! Transport Error).
//!
//! Time is bounded for a host that stops: a PDU, once its first byte has
//! come, must arrive whole within the stall timeout, as must the ICReq and
//! the Connect after the connection opens; an admin queue ends when its
//! controller's Keep Alive timer expires. Nothing of the PDU's length is
//! allocated before the length has been checked against its limit.

use std::collections::VecDeque;
use std::io::{BufRead, BufWriter, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Instant;

use zns_spec::fabrics::{
    self, connect_status, ConnectCommand, ConnectData, FabricsType, PropertyGet, PropertySet,
};
use zns_spec::sgl::{SglDescriptor, SglKind};
use zns_spec::tcp::{
    self, DataHeader, Digests, IcReq, IcResp, PduError, PduType, R2t, TermReq, FLAG_DATA_LAST,
};
use zns_spec::{CompletionEntry, Status, StatusCode, StatusField, SubmissionEntry};

use crate::admin::{self, AsyncEvents, Done};
use crate::auth::{self as dhchap, QueueAuth};
use crate::controller::{Controller, JoinError, Role};
use crate::error::{NvmfError, Result};
use crate::inflight::{self, Finished};
use crate::io::{self, IoContext};
use crate::subsystem::{IN_CAPSULE_DATA, QUEUE_ENTRIES};
use crate::target::Shared;
use zns_driver::tcp::{write_pdu, PduReader, Received, SocketInput, TcpError};

/// How long a queue with commands in flight spins looking for their
/// completions before it sleeps between looks: a command on a fast device
/// completes within it.
const SETTLE_SPIN: std::time::Duration = std::time::Duration::from_micros(20);

/// The first sleep between looks after the spin.
const SETTLE_SLEEP_FIRST: std::time::Duration = std::time::Duration::from_micros(5);

/// The longest sleep between looks: how late a completion of a long
/// command (a zone reset, a slow write) may be answered at most.
const SETTLE_SLEEP_MAX: std::time::Duration = std::time::Duration::from_micros(50);

/// How often an admin queue waiting for zone events looks for them while
/// its host sends nothing.
const EVENT_POLL: std::time::Duration = std::time::Duration::from_millis(10);

/// MAXH2CDATA: most data bytes in one H2CData PDU.
pub const MAX_H2C_DATA: u32 = 128 * 1024;

/// In-capsule data the admin queue accepts (hosts send up to 8 KiB there
/// whatever IOCCSZ says).
const ADMIN_IN_CAPSULE: usize = 8192;

/// Most data one command may move to the controller on an admin queue.
const ADMIN_MAX_DATA: usize = 64 * 1024;

/// The queue a Connect created on this connection.
struct Queue {
    qid: u16,
    entries: u16,
    sqhd: u16,
    ctrl: Arc<Controller>,
    aer: AsyncEvents,
    io: IoContext,
    /// The DH-HMAC-CHAP exchange of a host that must authenticate.
    auth: Option<QueueAuth>,
}

impl Queue {
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

/// What to do after a command.
enum Next {
    Continue,
    /// The host disconnected (Fabrics Disconnect): close after the reply.
    Close,
}

/// Per-connection state.
pub(crate) struct Connection<'a> {
    shared: &'a Shared,
    r: SocketInput,
    w: BufWriter<TcpStream>,
    reader: PduReader,
    digests: Digests,
    queue: Option<Queue>,
    pending: VecDeque<Capsule>,
    /// Data of the command being run (in-capsule or gathered by R2T).
    host: Vec<u8>,
    /// Data for the host.
    out: Vec<u8>,
    next_ttag: u16,
    /// When the connection opened (its ICReq and Connect are due within
    /// the stall timeout of it).
    opened: Instant,
}

impl<'a> Connection<'a> {
    pub(crate) fn new(stream: TcpStream, shared: &'a Shared) -> Result<Connection<'a>> {
        // A host that stops reading its responses blocks a send for at
        // most this long.
        stream.set_write_timeout(Some(shared.stall))?;
        // This thread sleeps for microseconds between looks at commands in
        // flight (`settle`).
        zns_driver::tcp::precise_timers();
        let read_half = stream.try_clone()?;
        Ok(Connection {
            shared,
            r: SocketInput::with_capacity(256 * 1024, read_half),
            w: BufWriter::with_capacity(256 * 1024, stream),
            reader: PduReader::new(0),
            digests: Digests::default(),
            queue: None,
            pending: VecDeque::new(),
            host: Vec::new(),
            out: Vec::new(),
            next_ttag: 0,
            opened: Instant::now(),
        })
    }

    /// Serves the connection to its end. A transport error is answered
    /// with a C2HTermReq before the error is returned.
    pub(crate) fn run(&mut self) -> Result<()> {
        let r = self.initialize().and_then(|_| self.serve());
        if let Err(NvmfError::Pdu(e)) = &r {
            self.terminate(e);
        }
        let _ = self.w.flush();
        if let Some(q) = &mut self.queue {
            if q.unauthenticated() {
                tracing::warn!(hostnqn = %q.ctrl.hostnqn, qid = q.qid, "queue closed without authenticating");
            }
            inflight::abandon(&mut q.io);
            if q.qid != 0 {
                q.ctrl.leave(q.qid);
            }
        }
        r
    }

    /// The controller this connection's admin queue created, if any: it
    /// ends with the connection.
    pub(crate) fn owned_controller(&self) -> Option<u16> {
        self.queue.as_ref().filter(|q| q.qid == 0).map(|q| q.ctrl.cntlid)
    }

    /// Reads one PDU that must arrive whole within the stall timeout.
    fn read_pdu(&mut self) -> std::result::Result<zns_driver::tcp::Received, TcpError> {
        self.r.set_deadline(Some(Instant::now() + self.shared.stall));
        let p = self.reader.read(&mut self.r);
        self.r.set_deadline(None);
        p
    }

    /// ICReq in, ICResp out.
    fn initialize(&mut self) -> Result<()> {
        if !self.r.wait_input(Some(self.opened + self.shared.stall)) {
            return Err(NvmfError::Timeout(format!(
                "no ICReq within {:?} of connecting",
                self.shared.stall
            )));
        }
        let p = self.read_pdu()?;
        if p.ch.pdu_type != PduType::IcReq {
            return Err(PduError::Unexpected(p.ch.pdu_type).into());
        }
        let mut whole = [0u8; tcp::IC_PDU_SIZE];
        whole[..p.ch.hlen as usize].copy_from_slice(&p.header[..p.ch.hlen as usize]);
        let req = IcReq::from_bytes(&whole);
        if req.pfv != 0 {
            return Err(field("unsupported PDU format version", 8, true).into());
        }
        // C2H data would have to be padded to the host's alignment; every
        // host in use asks for none.
        if req.hpda != 0 {
            return Err(field("host PDU data alignment is not supported", 10, true).into());
        }
        self.digests = req.digests;
        let resp = IcResp { pfv: 0, cpda: 0, digests: req.digests, maxh2cdata: MAX_H2C_DATA };
        self.w.write_all(&resp.to_bytes())?;
        self.w.flush()?;
        self.reader.digests = req.digests;
        // What IOCCSZ and MAXH2CDATA advertise, and nothing more.
        self.reader.max_data = MAX_H2C_DATA as usize;
        self.reader.max_capsule_data = IN_CAPSULE_DATA.max(ADMIN_IN_CAPSULE);
        tracing::debug!(digests = ?req.digests, "NVMe/TCP connection initialized");
        Ok(())
    }

    fn serve(&mut self) -> Result<()> {
        loop {
            let capsule = match self.pending.pop_front() {
                Some(c) => c,
                None => {
                    self.settle()?;
                    if self.awaits_zone_events() {
                        self.wait_delivering_events()?;
                    }
                    match self.next_capsule()? {
                        Some(c) => c,
                        None => return Ok(()),
                    }
                }
            };
            if let Next::Close = self.command(capsule)? {
                return Ok(());
            }
            self.deliver_events()?;
            if self.pending.is_empty() && self.r.buffer().is_empty() {
                self.finish_inflight()?;
                self.w.flush()?;
            }
        }
    }

    /// With commands in flight and no input buffered: answers them as they
    /// complete until input arrives or none is left in flight. The device
    /// gives no signal when a command completes, so the queue looks: it
    /// spins for [`SETTLE_SPIN`] (or the target's poll time, if longer),
    /// then sleeps between looks (waking at once for input) for
    /// [`SETTLE_SLEEP_FIRST`], doubling up to [`SETTLE_SLEEP_MAX`]: a
    /// command that takes long costs a few looks, not a core.
    fn settle(&mut self) -> Result<()> {
        let mut since: Option<Instant> = None;
        let mut sleep = SETTLE_SLEEP_FIRST;
        while self.pending.is_empty()
            && self.r.buffer().is_empty()
            && self.queue.as_ref().is_some_and(|q| q.io.inflight.len() > 0)
        {
            if self.finish_inflight()? > 0 {
                self.w.flush()?;
                (since, sleep) = (None, SETTLE_SLEEP_FIRST);
                continue;
            }
            // Input (or the host's end) is there: fetched by the look.
            if self.r.try_fill() {
                break;
            }
            let start = *since.get_or_insert_with(Instant::now);
            if start.elapsed() < SETTLE_SPIN.max(self.shared.poll) {
                std::hint::spin_loop();
                continue;
            }
            if self.r.wait_input(Some(Instant::now() + sleep)) {
                break;
            }
            sleep = (sleep * 2).min(SETTLE_SLEEP_MAX);
        }
        Ok(())
    }

    /// Sends the data and responses of the commands in flight that have
    /// completed; returns how many. Never blocks on the device.
    fn finish_inflight(&mut self) -> Result<usize> {
        let Some(q) = self.queue.as_mut() else { return Ok(0) };
        let (w, digests, qid, sqhd) = (&mut self.w, self.digests, q.qid, q.sqhd);
        let mut failed = None;
        let n = inflight::complete(&mut q.io, &q.ctrl, &mut |f: Finished<'_>| {
            if failed.is_some() {
                return;
            }
            tracing::trace!(cid = f.cid, status = ?f.done.status, data = f.data.len(), "command in flight done");
            let sent = write_data(w, digests, f.cid, f.data).and_then(|()| {
                write_response(w, digests, qid, sqhd, f.cid, f.done.status, f.done.result)
            });
            if let Err(e) = sent {
                failed = Some(e);
            }
        });
        match failed {
            Some(e) => Err(e),
            None => Ok(n),
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

    /// Waits for the host's next bytes, delivering zone events every
    /// [`EVENT_POLL`] meanwhile; returns when input is there (or the stream
    /// ended), or when there is nothing left to wait for. No byte is
    /// consumed, so the next PDU is read whole afterwards without a timeout.
    fn wait_delivering_events(&mut self) -> Result<()> {
        if !self.r.buffer().is_empty() {
            return Ok(());
        }
        self.r.get_ref().set_read_timeout(Some(EVENT_POLL))?;
        let r = loop {
            match self.r.fill_buf() {
                Ok(_) => break Ok(()),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    if let Err(e) = self.deliver_events().and_then(|()| Ok(self.w.flush()?)) {
                        break Err(e);
                    }
                    if let Some(e) = self.idle_expired() {
                        break Err(e);
                    }
                    if !self.awaits_zone_events() {
                        break Ok(());
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => break Err(e.into()),
            }
        };
        self.r.get_ref().set_read_timeout(None)?;
        r
    }

    /// Completes held Asynchronous Event Requests with the controller's
    /// waiting zone events (admin queues only).
    fn deliver_events(&mut self) -> Result<()> {
        loop {
            let Some(q) = self.queue.as_mut().filter(|q| q.qid == 0 && !q.aer.held.is_empty())
            else {
                return Ok(());
            };
            self.shared.refresh_zone_changes();
            let Some(event) = q.ctrl.next_zone_event() else { return Ok(()) };
            let cid = q.aer.held.remove(0);
            tracing::debug!(cid, nsid = event.nsid, "Zone Descriptor Changed event");
            self.respond(cid, Status::SUCCESS, event.to_result())?;
        }
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

    /// The error that ends a connection quiet past its idle deadline, if
    /// it is (an I/O queue's command may have restarted the timer).
    fn idle_expired(&self) -> Option<NvmfError> {
        if self.idle_deadline().is_none_or(|d| Instant::now() < d) {
            return None;
        }
        Some(match &self.queue {
            None => NvmfError::Timeout(format!(
                "no Connect within {:?} of connecting",
                self.shared.stall
            )),
            Some(q) => NvmfError::KeepAliveExpired {
                cntlid: q.ctrl.cntlid,
                kato_ms: q.ctrl.kato_ms.load(std::sync::atomic::Ordering::Relaxed),
            },
        })
    }

    /// Waits for the first byte of the next PDU (or the host's end).
    fn await_input(&mut self) -> Result<()> {
        loop {
            match self.idle_deadline() {
                // One blocking read, as cheap as it was without bounds.
                None => match self.r.fill_buf() {
                    Ok(_) => return Ok(()),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e.into()),
                },
                Some(until) => {
                    if self.r.wait_input(Some(until)) {
                        return Ok(());
                    }
                    if let Some(e) = self.idle_expired() {
                        return Err(e);
                    }
                }
            }
        }
    }

    /// Reads the next command capsule; `None` when the host closed the
    /// connection between PDUs or sent a termination request.
    fn next_capsule(&mut self) -> Result<Option<Capsule>> {
        self.poll_input();
        self.await_input()?;
        let p = match self.read_pdu() {
            Ok(p) => p,
            Err(TcpError::Io(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                return Ok(None);
            }
            Err(e) => return self.damaged_capsule(e).map(Some),
        };
        match p.ch.pdu_type {
            PduType::CapsuleCmd => {
                // Straight into the data buffer: no copy of its own.
                self.host.clear();
                self.host.extend_from_slice(self.reader.data(p.data_len));
                Ok(Some(Capsule { sqe: entry_of(&p), data: None, damaged: false }))
            }
            PduType::H2cTermReq => {
                let t = TermReq::from_bytes(p.specific()[..16].try_into().expect("16 bytes"));
                tracing::info!(fes = t.fes, fei = t.fei, "host terminated the connection");
                Ok(None)
            }
            other => Err(PduError::Unexpected(other).into()),
        }
    }

    /// A command capsule whose in-capsule data failed its digest, from the
    /// read error `e`; any other error is returned as it is.
    fn damaged_capsule(&mut self, e: TcpError) -> Result<Capsule> {
        if let TcpError::Pdu(PduError::DataDigest { .. }) = &e {
            if let Some(p) = self.reader.take_damaged() {
                if p.ch.pdu_type == PduType::CapsuleCmd {
                    tracing::warn!(error = %e, "command capsule data digest error");
                    return Ok(Capsule { sqe: entry_of(&p), data: None, damaged: true });
                }
            }
        }
        Err(e.into())
    }

    /// Spins for up to [`TargetConfig::poll`](crate::TargetConfig::poll)
    /// until input is buffered or readable, so that the read that follows
    /// finds it without sleeping. Errors and end of stream are left to
    /// that read.
    fn poll_input(&mut self) {
        self.r.spin_for_input(self.shared.poll);
    }

    /// Runs one command and sends its data and response.
    fn command(&mut self, capsule: Capsule) -> Result<Next> {
        let sqe = capsule.sqe;
        if let Some(q) = &mut self.queue {
            q.sqhd = (q.sqhd + 1) % q.entries;
            q.ctrl.touch();
        }
        if capsule.damaged {
            self.respond(sqe.cid(), StatusCode::TransientTransportError.status(), 0)?;
            return Ok(Next::Continue);
        }
        if self.queue.as_ref().is_some_and(Queue::unauthenticated) && !is_auth_or_connect(&sqe) {
            tracing::debug!(opcode = sqe.opcode(), "command before authentication");
            self.respond(sqe.cid(), zns_spec::auth::AUTHENTICATION_REQUIRED, 0)?;
            return Ok(Next::Continue);
        }
        if let Some(d) = capsule.data {
            self.host.clear();
            self.host.extend_from_slice(&d);
        }
        let (status, result, data, next) = match self.gather(&sqe)? {
            Err(status) => (status, 0, 0, Next::Continue),
            Ok(room) if self.start_inflight(&sqe, room) => return Ok(Next::Continue),
            Ok(room) => self.dispatch(&sqe, room)?,
        };
        if status == HELD {
            return Ok(next);
        }
        tracing::trace!(
            cid = sqe.cid(),
            opcode = sqe.opcode(),
            nsid = sqe.nsid,
            cdw10 = sqe.cdw10,
            cdw11 = sqe.cdw11,
            cdw12 = sqe.cdw12,
            status = ?status,
            result,
            data,
            "command done"
        );
        if data > 0 {
            self.send_data(sqe.cid(), data)?;
        }
        self.respond(sqe.cid(), status, result)?;
        Ok(next)
    }

    /// Leaves the command's data in `self.host`, which holds its
    /// in-capsule data on entry: trimmed to what the descriptor names, or
    /// fetched by R2T and H2CData. Returns the room the host offers for
    /// data to it, or the status of a bad data descriptor.
    fn gather(&mut self, sqe: &SubmissionEntry) -> Result<std::result::Result<usize, Status>> {
        let sgl = SglDescriptor::from_sqe(sqe);
        let to_controller = direction_to_controller(sqe);
        if sgl.len == 0 && self.host.is_empty() {
            return Ok(Ok(0));
        }
        if let (SglKind::InCapsule { offset }, true) = (sgl.kind, to_controller) {
            let end = offset.checked_add(sgl.len as u64);
            if end.is_none_or(|e| e > self.host.len() as u64) {
                return Ok(Err(StatusCode::SglLengthInvalid.status()));
            }
            self.host.truncate(end.unwrap_or(0) as usize);
            self.host.drain(..offset as usize);
            return Ok(Ok(0));
        }
        self.host.clear();
        match (sgl.kind, to_controller) {
            (SglKind::Transport, true) => {
                let limit = if self.is_admin() { ADMIN_MAX_DATA } else { self.max_io_data() };
                if sgl.len as usize > limit {
                    return Ok(Err(StatusCode::SglLengthInvalid.status()));
                }
                if !self.fetch(sqe.cid(), sgl.len)? {
                    return Ok(Err(StatusCode::TransientTransportError.status()));
                }
                Ok(Ok(0))
            }
            (SglKind::Transport, false) => Ok(Ok(sgl.len as usize)),
            _ if sgl.len == 0 => Ok(Ok(0)),
            _ => Ok(Err(StatusCode::SglDescriptorTypeInvalid.status())),
        }
    }

    /// Puts an I/O command in flight on the device if it qualifies
    /// (`inflight::start`); `false`: run it alone.
    fn start_inflight(&mut self, sqe: &SubmissionEntry, room: usize) -> bool {
        let Some(q) = &mut self.queue else { return false };
        if q.qid == 0 || FabricsType::of(sqe).is_some() || !q.ctrl.enabled() {
            return false;
        }
        let Some(sub) = q.ctrl.subsystem() else { return false };
        inflight::start(&mut q.io, sub, sqe, &self.host, room)
    }

    fn is_admin(&self) -> bool {
        self.queue.as_ref().is_none_or(|q| q.qid == 0)
    }

    fn max_io_data(&self) -> usize {
        match self.queue.as_ref().and_then(|q| q.ctrl.subsystem()) {
            Some(s) => s.mdts_bytes(),
            None => ADMIN_MAX_DATA,
        }
    }

    /// Asks for `len` bytes with one R2T and collects the H2CData PDUs
    /// that answer it, keeping command capsules that arrive meanwhile;
    /// `false` when a PDU's data failed its digest (the transfer is still
    /// read to its end, so the stream stays framed).
    fn fetch(&mut self, cid: u16, len: u32) -> Result<bool> {
        self.next_ttag = self.next_ttag.wrapping_add(1);
        let ttag = self.next_ttag;
        let r2t = R2t { cccid: cid, ttag, r2to: 0, r2tl: len };
        write_pdu(&mut self.w, self.digests, PduType::R2t, 0, &r2t.to_bytes(), &[])?;
        self.w.flush()?;
        self.host.resize(len as usize, 0);
        let mut got = 0u32;
        let mut intact = true;
        while got < len {
            let (p, damaged) = match self.read_pdu() {
                Ok(p) => (p, false),
                Err(TcpError::Pdu(e @ PduError::DataDigest { .. })) => {
                    let Some(p) = self.reader.take_damaged() else { return Err(e.into()) };
                    tracing::warn!(cid, error = %e, "data digest error");
                    (p, true)
                }
                Err(e) => return Err(e.into()),
            };
            match p.ch.pdu_type {
                PduType::H2cData => {
                    let h = DataHeader::from_bytes(p.specific()[..16].try_into().expect("16"));
                    if h.cccid != cid || h.ttag != ttag {
                        return Err(field("H2CData for an unknown transfer", 10, false).into());
                    }
                    let end = h.datao.checked_add(h.datal);
                    if h.datao != got
                        || h.datal as usize != p.data_len
                        || end.is_none_or(|e| e > len)
                    {
                        let e =
                            PduError::DataOutOfRange { offset: h.datao, len: h.datal, limit: len };
                        return Err(e.into());
                    }
                    let (s, e) = (got as usize, (got + h.datal) as usize);
                    if damaged {
                        intact = false;
                    } else {
                        self.host[s..e].copy_from_slice(self.reader.data(p.data_len));
                    }
                    got += h.datal;
                    if got == len && p.ch.flags & FLAG_DATA_LAST == 0 {
                        tracing::debug!(cid, "last H2CData without LAST_PDU");
                    }
                }
                PduType::CapsuleCmd => {
                    if self.pending.len() >= QUEUE_ENTRIES as usize {
                        return Err(PduError::Unexpected(PduType::CapsuleCmd).into());
                    }
                    let data = Some(self.reader.data(p.data_len).to_vec());
                    self.pending.push_back(Capsule { sqe: entry_of(&p), data, damaged });
                }
                other => return Err(PduError::Unexpected(other).into()),
            }
        }
        Ok(intact)
    }

    /// Runs the command: `(status, result, bytes of data for the host,
    /// what next)`; status [`HELD`] for a held command.
    fn dispatch(
        &mut self,
        sqe: &SubmissionEntry,
        room: usize,
    ) -> Result<(Status, u64, usize, Next)> {
        if let Some(fctype) = FabricsType::of(sqe) {
            return Ok(self.fabrics(fctype, sqe, room));
        }
        let Some(q) = &mut self.queue else {
            return Ok((StatusCode::CommandSequenceError.status(), 0, 0, Next::Continue));
        };
        if !q.ctrl.enabled() {
            return Ok((StatusCode::CommandSequenceError.status(), 0, 0, Next::Continue));
        }
        if q.qid == 0 {
            return Ok(
                match admin::execute(&q.ctrl, self.shared, &mut q.aer, sqe, &mut self.out) {
                    Done::Complete { status, result, data } => {
                        (status, result, data.min(room), Next::Continue)
                    }
                    Done::Held => (HELD, 0, 0, Next::Continue),
                },
            );
        }
        let Some(sub) = q.ctrl.subsystem() else {
            return Ok((StatusCode::InvalidOpcode.status(), 0, 0, Next::Continue));
        };
        let d = io::execute(&mut q.io, sub, &q.ctrl, sqe, &self.host, room, &mut self.out);
        Ok((d.status, d.result, d.data.min(room), Next::Continue))
    }

    fn fabrics(
        &mut self,
        fctype: FabricsType,
        sqe: &SubmissionEntry,
        room: usize,
    ) -> (Status, u64, usize, Next) {
        let ok = |result: u64| (Status::SUCCESS, result, 0, Next::Continue);
        let err = |s: Status| (s, 0, 0, Next::Continue);
        match fctype {
            FabricsType::Connect => match self.connect(sqe) {
                Ok(result) => ok(result as u64),
                Err((status, result)) => (status, result as u64, 0, Next::Continue),
            },
            _ if self.queue.is_none() => err(StatusCode::CommandSequenceError.status()),
            FabricsType::PropertyGet => {
                let q = self.queue.as_ref().expect("checked");
                match PropertyGet::from_sqe(sqe) {
                    Some(p) if q.qid == 0 => match q.ctrl.property(p.offset, p.eight_bytes) {
                        Some(v) => ok(v),
                        None => err(StatusCode::InvalidField.status()),
                    },
                    _ => err(StatusCode::InvalidField.status()),
                }
            }
            FabricsType::PropertySet => {
                let q = self.queue.as_ref().expect("checked");
                match PropertySet::from_sqe(sqe) {
                    Some(p) if q.qid == 0 => match q.ctrl.set_property(p.offset, p.value) {
                        Ok(()) => ok(0),
                        Err(s) => err(s),
                    },
                    _ => err(StatusCode::InvalidField.status()),
                }
            }
            FabricsType::Disconnect => (Status::SUCCESS, 0, 0, Next::Close),
            FabricsType::AuthenticationSend | FabricsType::AuthenticationReceive => {
                self.authentication(sqe, room)
            }
            _ => err(StatusCode::InvalidField.status()),
        }
    }

    /// Authentication Send or Receive on a queue whose host must
    /// authenticate; a queue without secrets has nothing to authenticate.
    fn authentication(&mut self, sqe: &SubmissionEntry, room: usize) -> (Status, u64, usize, Next) {
        let err = |s: Status| (s, 0, 0, Next::Continue);
        let Some(cmd) = zns_spec::auth::AuthCommand::from_sqe(sqe) else {
            return err(StatusCode::InvalidField.status());
        };
        if !cmd.is_dhchap() || cmd.length == 0 {
            return err(StatusCode::InvalidField.status());
        }
        let Some(auth) = self.queue.as_mut().and_then(|q| q.auth.as_mut()) else {
            return err(StatusCode::CommandSequenceError.status());
        };
        let outcome = if cmd.send {
            let n = (cmd.length as usize).min(self.host.len());
            auth.send(&self.host[..n])
        } else {
            auth.receive((cmd.length as usize).min(room))
        };
        let (bytes, next) = match outcome {
            dhchap::Outcome::Continue(b) => (b, Next::Continue),
            dhchap::Outcome::Close(b) => (b, Next::Close),
        };
        self.out.clear();
        self.out.extend_from_slice(&bytes);
        (Status::SUCCESS, 0, bytes.len(), next)
    }

    /// Connect: creates the admin queue's controller or joins an I/O
    /// queue to one. `Err` carries the status and the result dword
    /// (Invalid Parameters names the bad field).
    fn connect(&mut self, sqe: &SubmissionEntry) -> std::result::Result<u32, (Status, u32)> {
        let invalid = |offset: u16, in_data: bool| {
            (
                connect_status::INVALID_PARAMETERS,
                fabrics::connect_invalid_parameter(offset, in_data),
            )
        };
        if self.queue.is_some() {
            return Err((StatusCode::CommandSequenceError.status(), 0));
        }
        let cmd = ConnectCommand::from_sqe(sqe);
        if cmd.recfmt != 0 {
            return Err((connect_status::INCOMPATIBLE_FORMAT, 0));
        }
        let Some(bytes) = self.host.get(..ConnectData::SIZE) else {
            return Err((StatusCode::SglLengthInvalid.status(), 0));
        };
        let data = ConnectData::from_bytes(bytes.try_into().expect("1024 bytes"))
            .map_err(|off| invalid(off, true))?;
        // SQSIZE is 0's based; at least 2 entries, at most MQES + 1.
        if cmd.sqsize == 0 || cmd.sqsize >= QUEUE_ENTRIES {
            return Err(invalid(44, false));
        }
        let discovery = data.subnqn == fabrics::DISCOVERY_NQN;
        if !discovery && data.subnqn != self.shared.subsystem.nqn() {
            tracing::info!(subnqn = %data.subnqn, "Connect to an unknown subsystem");
            return Err(invalid(256, true));
        }
        if !discovery && !self.shared.subsystem.allows(&data.hostnqn) {
            tracing::warn!(hostnqn = %data.hostnqn, "Connect from a host the subsystem does not allow");
            return Err((connect_status::INVALID_HOST, 0));
        }
        let ctrl = if cmd.qid == 0 {
            if data.cntlid != ConnectData::ANY_CONTROLLER {
                return Err(invalid(16, true));
            }
            // Changes made before this controller existed are not its own.
            self.shared.refresh_zone_changes();
            let role = if discovery {
                Role::Discovery
            } else {
                Role::Io(Arc::clone(&self.shared.subsystem))
            };
            self.shared
                .registry
                .create(role, &data.hostnqn, cmd.kato_ms)
                .ok_or((connect_status::CONTROLLER_BUSY, 0))?
        } else {
            let Some(c) = self.shared.registry.get(data.cntlid) else {
                return Err(invalid(16, true));
            };
            if c.hostnqn != data.hostnqn {
                return Err((connect_status::INVALID_HOST, 0));
            }
            if discovery || c.subsystem().is_none() {
                return Err(invalid(42, false));
            }
            if !c.enabled() {
                return Err((StatusCode::CommandSequenceError.status(), 0));
            }
            let granted = c.io_queues.load(std::sync::atomic::Ordering::Relaxed) as u16 + 1;
            if cmd.qid > granted {
                return Err(invalid(42, false));
            }
            let Ok(socket) = self.r.get_ref().try_clone() else {
                return Err((StatusCode::InternalError.status(), 0));
            };
            match c.join(cmd.qid, socket) {
                Ok(()) => {}
                Err(JoinError::Gone) => return Err(invalid(16, true)),
                Err(JoinError::InUse) => {
                    tracing::warn!(
                        qid = cmd.qid,
                        cntlid = c.cntlid,
                        "Connect for a queue ID in use"
                    );
                    return Err((StatusCode::CommandSequenceError.status(), 0));
                }
            }
            c
        };
        ctrl.touch();
        tracing::info!(
            qid = cmd.qid,
            cntlid = ctrl.cntlid,
            hostnqn = %data.hostnqn,
            subnqn = %data.subnqn,
            "NVMe/TCP queue connected"
        );
        let cntlid = ctrl.cntlid;
        let auth = match (discovery, self.shared.subsystem.host_secrets(&data.hostnqn)) {
            (false, Some(secrets)) => {
                Some(QueueAuth::new(secrets, &data.hostnqn, self.shared.subsystem.nqn()))
            }
            _ => None,
        };
        let required = if auth.is_some() { zns_spec::auth::CONNECT_AUTH_REQUIRED } else { 0 };
        self.queue = Some(Queue {
            qid: cmd.qid,
            entries: cmd.sqsize + 1,
            sqhd: 1 % (cmd.sqsize + 1),
            ctrl,
            aer: AsyncEvents::default(),
            io: IoContext::default(),
            auth,
        });
        Ok(fabrics::connect_result(cntlid) | required)
    }

    /// One C2HData PDU with the first `len` bytes of `self.out`.
    fn send_data(&mut self, cid: u16, len: usize) -> Result<()> {
        write_data(&mut self.w, self.digests, cid, &self.out[..len])
    }

    /// The response capsule.
    fn respond(&mut self, cid: u16, status: Status, result: u64) -> Result<()> {
        let (qid, sqhd) = self.queue.as_ref().map(|q| (q.qid, q.sqhd)).unwrap_or((0, 0));
        write_response(&mut self.w, self.digests, qid, sqhd, cid, status, result)
    }

    /// Sends a C2HTermReq for `e` (best effort: the connection ends anyway).
    fn terminate(&mut self, e: &PduError) {
        let (fes, fei) = e.fatal();
        let t = TermReq { fes: fes.raw(), fei };
        tracing::warn!(error = %e, "terminating the NVMe/TCP connection");
        let _ =
            write_pdu(&mut self.w, Digests::default(), PduType::C2hTermReq, 0, &t.to_bytes(), &[]);
        let _ = self.w.flush();
    }
}

/// One C2HData PDU carrying `data` (none when it is empty).
fn write_data(w: &mut BufWriter<TcpStream>, digests: Digests, cid: u16, data: &[u8]) -> Result<()> {
    if data.is_empty() {
        return Ok(());
    }
    let h = DataHeader { cccid: cid, ttag: 0, datao: 0, datal: data.len() as u32 };
    write_pdu(w, digests, PduType::C2hData, FLAG_DATA_LAST, &h.to_bytes(), data)?;
    Ok(())
}

/// A response capsule.
fn write_response(
    w: &mut BufWriter<TcpStream>,
    digests: Digests,
    qid: u16,
    sqhd: u16,
    cid: u16,
    status: Status,
    result: u64,
) -> Result<()> {
    let field = StatusField::new(status, false, !status.is_success());
    let cqe = CompletionEntry::new(result, sqhd, qid, cid, field, false);
    write_pdu(w, digests, PduType::CapsuleResp, 0, &cqe.to_bytes(), &[])?;
    Ok(())
}

/// The submission entry of a command capsule.
fn entry_of(p: &Received) -> SubmissionEntry {
    SubmissionEntry::from_bytes(p.specific()[..64].try_into().expect("64 bytes"))
}

/// Status marker of a held command (no response yet).
const HELD: Status = Status::new(zns_spec::StatusCodeType::VendorSpecific, 0xFF);

fn field(what: &'static str, offset: u32, unsupported: bool) -> PduError {
    PduError::Field { what, offset, unsupported }
}

/// Connect and the authentication commands: what a queue that has not
/// authenticated may send.
fn is_auth_or_connect(sqe: &SubmissionEntry) -> bool {
    matches!(
        FabricsType::of(sqe),
        Some(
            FabricsType::Connect
                | FabricsType::AuthenticationSend
                | FabricsType::AuthenticationReceive
        )
    )
}

/// Whether a command moves data to the controller: opcode bits 1:0 = 01b,
/// or a Fabrics Connect (its data is the Connect data).
fn direction_to_controller(sqe: &SubmissionEntry) -> bool {
    match FabricsType::of(sqe) {
        Some(FabricsType::Connect) | Some(FabricsType::AuthenticationSend) => true,
        Some(_) => false,
        None => sqe.opcode() & 0b11 == 0b01,
    }
}
