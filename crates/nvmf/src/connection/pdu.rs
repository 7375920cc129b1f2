//! PDUs in and out of a connection: whole PDUs from the input buffer,
//! R2T transfers, and the output buffer the socket drains without
//! blocking.

use std::io::{IoSlice, Write};
use std::time::Instant;

use zns_device::IoBuffer;
use zns_nvme_tcp::{write_pdu, write_pdu_header, Received, TcpError};
use zns_spec::tcp::{
    self, DataHeader, Digests, IcReq, IcResp, PduError, PduType, TermReq, FLAG_DATA_LAST,
    FLAG_DATA_SUCCESS,
};
use zns_spec::{CompletionEntry, Status, StatusField, SubmissionEntry};

use super::{Capsule, Connection, Transfer, MAX_H2C_DATA};
use crate::error::Result;
use crate::inflight::{self, Finished};
use crate::subsystem::{IN_CAPSULE_DATA, QUEUE_ENTRIES};

/// In-capsule data the admin queue accepts (hosts send up to 8 KiB there
/// whatever IOCCSZ says).
pub(super) const ADMIN_IN_CAPSULE: usize = 8192;

/// Bytes waiting in the output past which the connection runs no more
/// commands until the host takes some: with the commands in flight
/// (at most `inflight::DEPTH` buffers), the output of a host that does
/// not read is bounded.
const OUTPUT_HIGH: usize = 256 * 1024;

/// Bytes for the host that the socket has not taken yet: a byte buffer
/// (headers, responses, data copied in) and, between its bytes, the data
/// of reads in flight left in their device buffers, which the socket takes
/// from there (one `writev` for a batch, no copy of the data of its own).
#[derive(Debug, Default)]
pub(super) struct Output {
    buf: Vec<u8>,
    /// Device buffers whose data goes out between `buf`'s bytes, in order.
    held: Vec<Held>,
    /// Bytes of `held` data.
    held_bytes: usize,
    /// Bytes the socket has taken, of `buf` and `held` data in stream order.
    sent: usize,
    /// When a send last found no room.
    blocked: Option<Instant>,
}

/// A read's data, sent from the buffer the device put it in.
#[derive(Debug)]
pub(super) struct Held {
    /// Where in `Output::buf` the data goes (before the byte there).
    at: usize,
    /// Bytes of `buffer` to send.
    len: usize,
    /// The lane (namespace index) the buffer goes back to once sent.
    lane: usize,
    buffer: IoBuffer,
}

/// Completions taken from the device per look, at most: with
/// [`SEND_AT`], a queue's worth of reads completing together leaves in
/// pieces rather than in one send. Fifteen 4 KiB reads with their PDU
/// headers and responses (62,160 bytes) fit one 64 KiB TCP segment on
/// loopback, where sixteen spill 768 bytes into a second.
pub(super) const COMPLETIONS_PER_LOOK: usize = 15;

/// Read data waiting in the output at which it is sent before more
/// completions are taken. A host that gets a whole queue's data in one
/// send answers with a whole queue of commands, and the two ends take
/// turns; in pieces, the host works on the first while the rest is sent.
/// On loopback at queue depth 32 this takes a third off the target's CPU
/// per 4 KiB read and doubles the rate (docs/nvmf.md).
pub(super) const SEND_AT: usize = 60 * 1024;

/// Slices one `writev` hands the socket at most.
const MAX_SLICES: usize = 2 * inflight::DEPTH + 8;

impl Output {
    /// Bytes not yet taken by the socket.
    fn waiting(&self) -> usize {
        self.buf.len() + self.held_bytes - self.sent
    }

    pub(super) fn is_empty(&self) -> bool {
        self.waiting() == 0
    }

    /// Enough read data waits to go out now ([`SEND_AT`]).
    pub(super) fn ripe(&self) -> bool {
        self.held_bytes >= SEND_AT
    }

    /// Enough waits that no more commands run until the host takes it.
    pub(super) fn full(&self) -> bool {
        self.waiting() > OUTPUT_HIGH
    }

    /// When the host stopped taking responses, if it has.
    pub(super) fn blocked_since(&self) -> Option<Instant> {
        self.blocked
    }

    /// Frees a large buffer once everything has gone.
    pub(super) fn release(&mut self) {
        if self.is_empty() {
            super::shrink(&mut self.buf);
            self.sent = 0;
        }
    }

    /// Sends `len` bytes of `buffer` next, from where they are.
    fn hold(&mut self, lane: usize, buffer: IoBuffer, len: usize) {
        self.held_bytes += len;
        self.held.push(Held { at: self.buf.len(), len, lane, buffer });
    }

    /// Puts the stream's unsent bytes, in order, in `iov` (as many as it
    /// holds); returns how many slices it filled.
    fn slices<'a>(&'a self, iov: &mut [IoSlice<'a>; MAX_SLICES]) -> usize {
        let (mut pos, mut from, mut n) = (0usize, 0usize, 0usize);
        let segments = self.held.iter().flat_map(|h| {
            let before = &self.buf[from..h.at];
            from = h.at;
            [before, &h.buffer.as_slice()[..h.len]]
        });
        for bytes in segments.chain(std::iter::once(&self.buf[self.held_tail()..])) {
            let start = self.sent.saturating_sub(pos).min(bytes.len());
            pos += bytes.len();
            if start < bytes.len() {
                iov[n] = IoSlice::new(&bytes[start..]);
                n += 1;
                if n == MAX_SLICES {
                    break;
                }
            }
        }
        n
    }

    /// Where the bytes of `buf` after the last held data begin.
    fn held_tail(&self) -> usize {
        self.held.last().map_or(0, |h| h.at)
    }

    /// Sends what the socket takes now; device buffers fully sent go to
    /// `give_back`. The rest waits for room.
    fn send(
        &mut self,
        w: &mut impl Write,
        give_back: &mut dyn FnMut(usize, IoBuffer),
    ) -> std::io::Result<()> {
        while !self.is_empty() {
            let r = if self.held.is_empty() {
                w.write(&self.buf[self.sent..])
            } else {
                let mut iov = [IoSlice::new(&[]); MAX_SLICES];
                let n = self.slices(&mut iov);
                w.write_vectored(&iov[..n])
            };
            match r {
                Ok(0) => return Err(std::io::Error::from(std::io::ErrorKind::WriteZero)),
                Ok(n) => {
                    self.sent += n;
                    self.blocked = None;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    self.blocked.get_or_insert_with(Instant::now);
                    self.return_sent(give_back);
                    return Ok(());
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        for h in self.held.drain(..) {
            give_back(h.lane, h.buffer);
        }
        self.buf.clear();
        (self.sent, self.held_bytes, self.blocked) = (0, 0, None);
        Ok(())
    }

    /// Gives back the device buffers at the front whose data has gone
    /// (commands in flight need them while the host is slow to read),
    /// with the bytes of `buf` sent before them.
    fn return_sent(&mut self, give_back: &mut dyn FnMut(usize, IoBuffer)) {
        let (mut done, mut gone_held) = (0, 0);
        for h in &self.held {
            // The stream position where this data ends.
            if h.at + gone_held + h.len > self.sent {
                break;
            }
            gone_held += h.len;
            done += 1;
        }
        if done == 0 {
            return;
        }
        let gone_buf = self.held[done - 1].at;
        for h in self.held.drain(..done) {
            give_back(h.lane, h.buffer);
        }
        self.buf.drain(..gone_buf);
        for h in &mut self.held {
            h.at -= gone_buf;
        }
        self.sent -= gone_buf + gone_held;
        self.held_bytes -= gone_held;
    }
}

/// A PDU from the input buffer, or one whose data failed its digest (its
/// header intact, all of it consumed: the stream stays framed).
pub(super) enum Got {
    Pdu(Received),
    Damaged(Received),
}

impl Connection {
    /// The next PDU if the input buffer holds it whole (no system call).
    /// Its header is checked as soon as it is there: a PDU the transport
    /// forbids fails before more of it is awaited.
    pub(super) fn buffered_pdu(&mut self) -> Result<Option<Got>> {
        let buffered = self.r.buffer().len();
        match self.reader.pdu_len(self.r.buffer())? {
            Some(len) if buffered >= len => {}
            found => {
                // The buffer grows to hold the PDU whole (its length was
                // checked against its limit, so this is bounded).
                if let Some(len) = found {
                    self.r.reserve(len);
                }
                if buffered > 0 && self.partial_since.is_none() {
                    self.partial_since = Some(Instant::now());
                }
                return Ok(None);
            }
        }
        self.partial_since = None;
        match self.reader.read(&mut self.r) {
            Ok(p) => Ok(Some(Got::Pdu(p))),
            Err(TcpError::Pdu(e @ PduError::DataDigest { .. })) => match self.reader.take_damaged()
            {
                Some(p) => {
                    tracing::warn!(error = %e, "data digest error");
                    Ok(Some(Got::Damaged(p)))
                }
                None => Err(e.into()),
            },
            Err(e) => Err(e.into()),
        }
    }

    /// Acts on one PDU from the host.
    pub(super) fn on_pdu(&mut self, got: Got) -> Result<()> {
        let (p, damaged) = match got {
            Got::Pdu(p) => (p, false),
            Got::Damaged(p) => (p, true),
        };
        if !self.initialized {
            return self.icreq(&p);
        }
        match p.ch.pdu_type {
            PduType::CapsuleCmd if self.transfer.is_some() || !self.pending.is_empty() => {
                if self.pending.len() >= QUEUE_ENTRIES as usize {
                    return Err(PduError::Unexpected(PduType::CapsuleCmd).into());
                }
                let data = Some(self.reader.data(p.data_len).to_vec());
                self.pending.push_back(Capsule { sqe: entry_of(&p), data, damaged });
                Ok(())
            }
            PduType::CapsuleCmd => {
                // Straight into the data buffer: no copy of its own.
                self.host.clear();
                if !damaged {
                    self.host.extend_from_slice(self.reader.data(p.data_len));
                }
                self.command(Capsule { sqe: entry_of(&p), data: None, damaged })
            }
            PduType::H2cData if self.transfer.is_some() => self.h2c_data(&p, damaged),
            PduType::H2cTermReq => {
                let t = TermReq::from_bytes(p.specific()[..16].try_into().expect("16 bytes"));
                tracing::info!(fes = t.fes, fei = t.fei, "host terminated the connection");
                self.closing = true;
                Ok(())
            }
            other => Err(PduError::Unexpected(other).into()),
        }
    }

    /// ICReq in, ICResp out.
    fn icreq(&mut self, p: &Received) -> Result<()> {
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
        self.out.buf.extend_from_slice(&resp.to_bytes());
        self.reader.digests = req.digests;
        // What IOCCSZ and MAXH2CDATA advertise, and nothing more.
        self.reader.max_data = MAX_H2C_DATA as usize;
        self.reader.max_capsule_data = IN_CAPSULE_DATA.max(ADMIN_IN_CAPSULE);
        self.initialized = true;
        tracing::debug!(digests = ?req.digests, "NVMe/TCP connection initialized");
        Ok(())
    }

    /// Asks for `len` bytes of the command's data with one R2T; the
    /// H2CData PDUs that answer it arrive as the host sends them.
    pub(super) fn request_data(&mut self, sqe: SubmissionEntry, len: u32) -> Result<()> {
        self.next_ttag = self.next_ttag.wrapping_add(1);
        let ttag = self.next_ttag;
        let r2t = tcp::R2t { cccid: sqe.cid(), ttag, r2to: 0, r2tl: len };
        write_pdu(&mut self.out.buf, self.digests, PduType::R2t, 0, &r2t.to_bytes(), &[])?;
        self.host.clear();
        self.host.resize(len as usize, 0);
        self.transfer =
            Some(Transfer { sqe, ttag, len, got: 0, intact: true, last: Instant::now() });
        Ok(())
    }

    /// One H2CData PDU of the transfer; the last one runs its command.
    fn h2c_data(&mut self, p: &Received, damaged: bool) -> Result<()> {
        let t = self.transfer.as_mut().expect("a transfer");
        let cid = t.sqe.cid();
        let h = DataHeader::from_bytes(p.specific()[..16].try_into().expect("16"));
        if h.cccid != cid || h.ttag != t.ttag {
            return Err(field("H2CData for an unknown transfer", 10, false).into());
        }
        let end = h.datao.checked_add(h.datal);
        if h.datao != t.got || h.datal as usize != p.data_len || end.is_none_or(|e| e > t.len) {
            let e = PduError::DataOutOfRange { offset: h.datao, len: h.datal, limit: t.len };
            return Err(e.into());
        }
        let (s, e) = (t.got as usize, (t.got + h.datal) as usize);
        if damaged {
            t.intact = false;
        } else {
            self.host[s..e].copy_from_slice(self.reader.data(p.data_len));
        }
        t.got += h.datal;
        t.last = Instant::now();
        if t.got < t.len {
            return Ok(());
        }
        if p.ch.flags & FLAG_DATA_LAST == 0 {
            tracing::debug!(cid, "last H2CData without LAST_PDU");
        }
        let t = self.transfer.take().expect("a transfer");
        self.run_with_data(t.sqe, t.intact)
    }

    /// Sends the data and responses of the commands in flight that have
    /// completed; returns how many. Never blocks on the device. A read's
    /// data stays in its device buffer until the socket has taken it.
    pub(super) fn finish_inflight(&mut self) -> Result<usize> {
        let Some(q) = self.queue.as_mut() else { return Ok(0) };
        let (out, digests, qid, sqhd) = (&mut self.out, self.digests, q.qid, q.reported_sqhd());
        let data_ends_it = q.no_sq_flow_control;
        let mut failed = None;
        let n = inflight::complete(&mut q.io, &q.ctrl, COMPLETIONS_PER_LOOK, &mut |f: Finished| {
            if failed.is_some() {
                return f.buffer;
            }
            tracing::trace!(cid = f.cid, status = ?f.done.status, data = f.done.data, "command in flight done");
            let (len, mut kept) = (f.done.data, f.buffer);
            // With SQ flow control off, a successful read's C2HData PDU
            // completes it (SUCCESS): no response capsule follows. Only a
            // command whose data goes out here can end with it.
            let ends_with_data =
                data_ends_it && f.done.status.is_success() && len > 0 && kept.is_some();
            let sent = match kept.take() {
                Some(b) if len > 0 => {
                    hold_data(out, digests, f.cid, f.lane, b, len, ends_with_data)
                }
                b => {
                    kept = b;
                    Ok(())
                }
            }
            .and_then(|()| {
                if ends_with_data {
                    return Ok(());
                }
                write_response(
                    &mut out.buf,
                    digests,
                    qid,
                    sqhd,
                    f.cid,
                    f.done.status,
                    f.done.result,
                )
            });
            if let Err(e) = sent {
                failed = Some(e);
            }
            kept
        });
        match failed {
            Some(e) => Err(e),
            None => Ok(n),
        }
    }

    /// Completes held Asynchronous Event Requests with the controller's
    /// waiting zone events (admin queues only).
    pub(super) fn deliver_events(&mut self) -> Result<()> {
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

    /// Sends what the socket takes now; the rest waits for room.
    pub(super) fn flush(&mut self) -> Result<()> {
        let mut io = self.queue.as_mut().map(|q| &mut q.io);
        let mut give_back = |lane: usize, b: IoBuffer| {
            if let Some(io) = io.as_deref_mut() {
                inflight::give_back(io, lane, b);
            }
        };
        self.out.send(&mut self.r.get_ref(), &mut give_back)?;
        Ok(())
    }

    /// One C2HData PDU with the first `len` bytes of the data buffer.
    pub(super) fn send_data(&mut self, cid: u16, len: usize) -> Result<()> {
        write_data(&mut self.out.buf, self.digests, cid, &self.data[..len])
    }

    /// The response capsule.
    pub(super) fn respond(&mut self, cid: u16, status: Status, result: u64) -> Result<()> {
        let (qid, sqhd) = self.queue.as_ref().map(|q| (q.qid, q.reported_sqhd())).unwrap_or((0, 0));
        write_response(&mut self.out.buf, self.digests, qid, sqhd, cid, status, result)
    }

    /// Sends a C2HTermReq for `e` (best effort: the connection ends anyway).
    pub(super) fn terminate(&mut self, e: &PduError) {
        let (fes, fei) = e.fatal();
        let t = TermReq { fes: fes.raw(), fei };
        tracing::warn!(error = %e, "terminating the NVMe/TCP connection");
        let _ = write_pdu(
            &mut self.out.buf,
            Digests::default(),
            PduType::C2hTermReq,
            0,
            &t.to_bytes(),
            &[],
        );
    }
}

/// One C2HData PDU carrying `data` (none when it is empty).
fn write_data(w: &mut impl Write, digests: Digests, cid: u16, data: &[u8]) -> Result<()> {
    if data.is_empty() {
        return Ok(());
    }
    let h = DataHeader { cccid: cid, ttag: 0, datao: 0, datal: data.len() as u32 };
    write_pdu(w, digests, PduType::C2hData, FLAG_DATA_LAST, &h.to_bytes(), data)?;
    Ok(())
}

/// One C2HData PDU carrying the first `len` bytes of `buffer`, which
/// the output keeps and sends from where they are; `success`: it
/// completes the command (SUCCESS flag).
fn hold_data(
    out: &mut Output,
    digests: Digests,
    cid: u16,
    lane: usize,
    buffer: IoBuffer,
    len: usize,
    success: bool,
) -> Result<()> {
    let h = DataHeader { cccid: cid, ttag: 0, datao: 0, datal: len as u32 };
    let flags = if success { FLAG_DATA_LAST | FLAG_DATA_SUCCESS } else { FLAG_DATA_LAST };
    let ddgst =
        write_pdu_header(&mut out.buf, digests, PduType::C2hData, flags, &h.to_bytes(), len)?;
    let digest = ddgst.then(|| tcp::digest(&buffer.as_slice()[..len]));
    out.hold(lane, buffer, len);
    if let Some(d) = digest {
        out.buf.extend_from_slice(&d.to_le_bytes());
    }
    Ok(())
}

/// A response capsule.
fn write_response(
    w: &mut impl Write,
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

fn field(what: &'static str, offset: u32, unsupported: bool) -> PduError {
    PduError::Field { what, offset, unsupported }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A socket that takes at most `room` bytes per call and then says
    /// it would block until `room` is raised again.
    struct Trickle {
        got: Vec<u8>,
        room: usize,
        calls: usize,
    }

    impl Write for Trickle {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.write_vectored(&[IoSlice::new(b)])
        }

        fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> std::io::Result<usize> {
            self.calls += 1;
            if self.room == 0 {
                return Err(std::io::ErrorKind::WouldBlock.into());
            }
            let mut n = 0;
            for b in bufs {
                let take = b.len().min(self.room - n);
                self.got.extend_from_slice(&b[..take]);
                n += take;
                if n == self.room {
                    break;
                }
            }
            self.room -= n;
            Ok(n)
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn buffer(byte: u8, len: usize) -> IoBuffer {
        let mut b = IoBuffer::aligned(len).unwrap();
        b.as_mut_slice().fill(byte);
        b
    }

    /// Bytes, held data, bytes, held data, bytes: the stream the host gets.
    fn output() -> (Output, Vec<u8>) {
        let mut o = Output::default();
        o.buf.extend_from_slice(b"head-1");
        o.hold(0, buffer(0xA1, 4096), 3000);
        o.buf.extend_from_slice(b"resp-1head-2");
        o.hold(1, buffer(0xB2, 512), 512);
        o.buf.extend_from_slice(b"resp-2");
        let mut want = b"head-1".to_vec();
        want.extend(std::iter::repeat_n(0xA1, 3000));
        want.extend_from_slice(b"resp-1head-2");
        want.extend(std::iter::repeat_n(0xB2, 512));
        want.extend_from_slice(b"resp-2");
        (o, want)
    }

    #[test]
    fn held_data_goes_out_in_stream_order_in_one_call() {
        let (mut o, want) = output();
        assert_eq!(o.waiting(), want.len());
        let mut sock = Trickle { got: Vec::new(), room: usize::MAX, calls: 0 };
        let mut back = Vec::new();
        o.send(&mut sock, &mut |lane, b| back.push((lane, b.len()))).unwrap();
        assert_eq!(sock.got, want);
        assert_eq!(sock.calls, 1, "one writev for the whole batch");
        assert_eq!(back, vec![(0, 4096), (1, 512)]);
        assert!(o.is_empty() && o.held.is_empty() && o.buf.is_empty());
    }

    #[test]
    fn a_socket_taking_a_little_at_a_time_gets_every_byte_and_buffers_come_back_once_sent() {
        for step in [1usize, 5, 6, 7, 100, 3005, 3006, 3019, 4000] {
            let (mut o, want) = output();
            let mut sock = Trickle { got: Vec::new(), room: 0, calls: 0 };
            let mut back = Vec::new();
            while !o.is_empty() {
                sock.room = step;
                o.send(&mut sock, &mut |lane, _| back.push(lane)).unwrap();
                assert!(o.blocked_since().is_some() || o.is_empty());
                // A buffer comes back only once all of its data has gone.
                let sent = sock.got.len();
                assert_eq!(back.contains(&0), sent >= 6 + 3000, "step {step}, sent {sent}");
                assert_eq!(o.waiting(), want.len() - sent, "step {step}");
                // Bytes added while blocked go after what waits.
                assert!(o.full() == (o.waiting() > OUTPUT_HIGH));
            }
            assert_eq!(sock.got, want, "step {step}");
            assert_eq!(back, vec![0, 1], "step {step}");
        }
    }

    #[test]
    fn read_data_is_ripe_for_a_send_at_60_kib() {
        let mut o = Output::default();
        for i in 0..15 {
            assert!(!o.ripe(), "{i} reads");
            o.buf.extend_from_slice(b"header");
            o.hold(0, buffer(0xD4, 4096), 4096);
        }
        assert!(o.ripe(), "15 reads of 4 KiB");
        o.send(&mut Trickle { got: Vec::new(), room: usize::MAX, calls: 0 }, &mut |_, _| {})
            .unwrap();
        assert!(!o.ripe() && o.is_empty());
    }

    #[test]
    fn bytes_added_after_a_partial_send_follow_the_rest() {
        let (mut o, mut want) = output();
        let mut sock = Trickle { got: Vec::new(), room: 3010, calls: 0 };
        o.send(&mut sock, &mut |_, _| {}).unwrap();
        o.buf.extend_from_slice(b"late");
        o.hold(2, buffer(0xC3, 16), 16);
        want.extend_from_slice(b"late");
        want.extend(std::iter::repeat_n(0xC3, 16));
        sock.room = usize::MAX;
        o.send(&mut sock, &mut |_, _| {}).unwrap();
        assert_eq!(sock.got, want);
    }
}
