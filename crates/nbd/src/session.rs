//! One NBD connection as a session of the event-driven server
//! (`zns_server`): negotiation (TLS included), then the transmission
//! phase, driven by what has come whole into the input buffer and never
//! waiting for the client on a worker thread.
//!
//! A message (the client's flags, an option, a request header, one piece
//! of a write's payload) is acted on once it is buffered whole; until
//! then the session gives its worker back with a deadline. Replies are
//! sent without blocking; what the socket does not take waits in the
//! output, and no further request is started while more than
//! [`OUTPUT_HIGH`] bytes wait (a read's later pieces are produced as the
//! output drains). Time is bounded as before: a message begun must come
//! whole within the stall timeout of its first byte, a reply must make
//! progress within it, negotiation must end within
//! [`NEGOTIATION_STALLS`] stall timeouts and a TLS handshake within one;
//! a client idle between requests is never closed, and costs its
//! session and its socket only (its buffers are freed
//! [`IDLE_RELEASE`] after its last request).

use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use zns_server::{conclude, Resume, Session, Wait};

use crate::error::{NbdError, Result};
use crate::negotiate::{self, Negotiation, Outcome, CLIENT_FLAGS_LEN, NEGOTIATION_STALLS};
use crate::server::{Shared, IO_BUFFER};
use crate::tls::TLS_BUFFER;
use crate::transmit::{Pending, Started, Transmission};
use crate::transport::{InBuf, Transport};
use crate::wire::{self, Request};

/// Bytes waiting in the output past which the session starts no request
/// and produces no further piece of a read until the client takes some.
pub(crate) const OUTPUT_HIGH: usize = 256 * 1024;

/// How long a connection stays quiet before it frees its buffers.
const IDLE_RELEASE: Duration = Duration::from_millis(100);

/// Bytes of an option's header.
const OPTION_HEADER: usize = 16;

/// Where the connection is.
enum Stage {
    /// The greeting is out; the client's flags are awaited.
    Flags,
    /// Options are haggled over.
    Options(Negotiation),
    /// `NBD_OPT_STARTTLS` was acknowledged: TLS starts once the
    /// acknowledgement has gone out in the clear.
    StartTls(Negotiation),
    /// The TLS handshake runs.
    Handshake(Negotiation),
    /// Requests are served (one of them, perhaps, a piece at a time).
    Transmit(Transmission, Option<Pending>),
    /// Nothing more is read.
    Done,
}

/// One connection.
pub(crate) struct Connection {
    shared: Arc<Shared>,
    io: Option<Transport>,
    inb: InBuf,
    out: Vec<u8>,
    sent: usize,
    stage: Stage,
    opened: Instant,
    /// When the first bytes of the message being gathered were seen.
    partial_since: Option<Instant>,
    /// When a send last found no room.
    blocked_since: Option<Instant>,
    /// When the TLS handshake began.
    handshake_since: Option<Instant>,
    /// Close once the output has gone.
    closing: bool,
    /// When the connection last had work, and whether its buffers may
    /// hold memory since.
    active: Instant,
    holding: bool,
    /// Bytes counted in the server's buffered total.
    held: usize,
    /// The end has been counted.
    finished: bool,
}

impl Connection {
    /// The session of an accepted connection, its greeting queued.
    pub(crate) fn new(stream: TcpStream, shared: Arc<Shared>) -> Result<Connection> {
        stream.set_nonblocking(true)?;
        let _ = stream.set_nodelay(true);
        let now = Instant::now();
        Ok(Connection {
            shared,
            io: Some(Transport::Plain(stream)),
            inb: InBuf::default(),
            out: negotiate::greeting(),
            sent: 0,
            stage: Stage::Flags,
            opened: now,
            partial_since: None,
            blocked_since: None,
            handshake_since: None,
            closing: false,
            active: now,
            holding: true,
            held: 0,
            finished: false,
        })
    }

    fn io(&mut self) -> &mut Transport {
        self.io.as_mut().expect("the transport is there outside start_tls")
    }

    /// Bytes of output not sent yet (in the output or inside TLS).
    fn unsent(&self) -> usize {
        let queued = self.io.as_ref().is_some_and(Transport::queued);
        self.out.len() - self.sent + usize::from(queued)
    }

    /// Serves what is there; `Err` ends the connection.
    fn step(&mut self) -> Result<Wait> {
        loop {
            if self.unsent() > OUTPUT_HIGH {
                self.flush()?;
                if self.unsent() > OUTPUT_HIGH {
                    return self.wait_for_room();
                }
            }
            if self.closing {
                self.flush()?;
                return if self.unsent() == 0 { Ok(Wait::Close) } else { self.wait_for_room() };
            }
            if self.advance()? {
                self.partial_since = None;
                self.active = Instant::now();
                self.holding = true;
                continue;
            }
            self.flush()?;
            if let Stage::StartTls(_) = self.stage {
                // Nothing is read in the clear once TLS is agreed: the
                // client's handshake starts as soon as it has the ACK.
                if self.unsent() == 0 {
                    continue;
                }
                return self.wait_for_room();
            }
            let mut inb = std::mem::take(&mut self.inb);
            let received = self.io().receive(&mut inb);
            self.inb = inb;
            let (added, closed) = received?;
            if added > 0 {
                continue;
            }
            if closed {
                if let Stage::Options(n) = &self.stage {
                    if n.refused_for_tls {
                        self.shared.counters.tls_refused.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(
                            "NBD client left without starting TLS, which this server requires"
                        );
                    }
                }
                self.closing = true;
                self.stage = Stage::Done;
                continue;
            }
            if self.mid_message() {
                self.partial_since.get_or_insert_with(Instant::now);
            }
            if let Some(e) = self.expired() {
                return Err(e);
            }
            if self.unsent() > 0 {
                return self.wait_for_room();
            }
            if self.holding && self.active.elapsed() >= IDLE_RELEASE && !self.mid_message() {
                self.release();
            }
            return Ok(Wait::Input { until: self.wake_deadline() });
        }
    }

    /// Acts on the next whole message buffered; `false` when there is
    /// none (or the output must drain first).
    fn advance(&mut self) -> Result<bool> {
        match std::mem::replace(&mut self.stage, Stage::Done) {
            Stage::Flags => {
                let Some(flags) = self.take(CLIENT_FLAGS_LEN) else {
                    self.stage = Stage::Flags;
                    return Ok(false);
                };
                let tls = self.shared.tls.is_some();
                let n = Negotiation::new(&flags, self.shared.exports.clone(), tls)?;
                self.stage = Stage::Options(n);
                Ok(true)
            }
            Stage::Options(n) => self.option(n),
            Stage::StartTls(n) => {
                if self.unsent() > 0 {
                    self.stage = Stage::StartTls(n);
                    return Ok(false);
                }
                let config = self.shared.tls.as_ref().ok_or_else(|| {
                    NbdError::Protocol("TLS started on a server without TLS".into())
                })?;
                let plain = self.io.take().expect("the transport");
                self.io = Some(plain.start_tls(config)?);
                self.handshake_since = Some(Instant::now());
                self.stage = Stage::Handshake(n);
                Ok(true)
            }
            Stage::Handshake(mut n) => {
                if self.io().handshaking() {
                    self.stage = Stage::Handshake(n);
                    return Ok(false);
                }
                n.tls_started();
                self.handshake_since = None;
                self.stage = Stage::Options(n);
                Ok(true)
            }
            Stage::Transmit(t, pending) => self.transmit(t, pending),
            Stage::Done => Ok(false),
        }
    }

    /// One option, if it is buffered whole.
    fn option(&mut self, mut n: Negotiation) -> Result<bool> {
        let data = self.inb.data();
        if data.len() < OPTION_HEADER {
            self.inb.reserve(OPTION_HEADER, IO_BUFFER);
            self.stage = Stage::Options(n);
            return Ok(false);
        }
        let (option, len) = negotiate::option_header(data)?;
        if data.len() < OPTION_HEADER + len {
            self.inb.reserve(OPTION_HEADER + len, IO_BUFFER);
            self.stage = Stage::Options(n);
            return Ok(false);
        }
        let body = data[OPTION_HEADER..OPTION_HEADER + len].to_vec();
        self.inb.consume(OPTION_HEADER + len);
        match n.option(option, &body, &mut self.out)? {
            None => self.stage = Stage::Options(n),
            Some(Outcome::Go(session)) => {
                let tls = matches!(self.io, Some(Transport::Tls { .. }));
                tracing::info!(export = %session.export.name, tls, "NBD client connected");
                let counters = Arc::clone(&self.shared.counters);
                self.stage = Stage::Transmit(Transmission::new(session, counters), None);
            }
            Some(Outcome::StartTls) => {
                // The client must wait for the acknowledgement before its
                // handshake: nothing can be buffered past the option.
                if !self.inb.data().is_empty() {
                    return Err(NbdError::Protocol(
                        "data sent after NBD_OPT_STARTTLS before its reply".into(),
                    ));
                }
                self.stage = Stage::StartTls(n);
            }
            Some(Outcome::End) => {
                if n.refused_for_tls {
                    self.shared.counters.tls_refused.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(
                        "NBD client left without starting TLS, which this server requires"
                    );
                }
                self.closing = true;
            }
        }
        Ok(true)
    }

    /// The transmission phase: the pending request's next piece, or the
    /// next request.
    fn transmit(&mut self, mut t: Transmission, pending: Option<Pending>) -> Result<bool> {
        let progressed = match pending {
            Some(mut p @ Pending::Write { .. }) => {
                let (_, n) = t.next_piece(&p);
                if self.inb.data().len() < n {
                    self.inb.reserve(n, IO_BUFFER);
                    self.stage = Stage::Transmit(t, Some(p));
                    return Ok(false);
                }
                let done = t.write_piece(&mut p, &self.inb.data()[..n], &mut self.out)?;
                self.inb.consume(n);
                self.stage = Stage::Transmit(t, (!done).then_some(p));
                true
            }
            Some(mut p @ Pending::Read { .. }) => {
                if self.unsent() > OUTPUT_HIGH {
                    self.stage = Stage::Transmit(t, Some(p));
                    return Ok(false);
                }
                let done = t.read_piece(&mut p, &mut self.out)?;
                self.stage = Stage::Transmit(t, (!done).then_some(p));
                true
            }
            None => {
                let data = self.inb.data();
                if data.len() < wire::REQUEST_LEN {
                    self.inb.reserve(wire::REQUEST_LEN, IO_BUFFER);
                    self.stage = Stage::Transmit(t, None);
                    return Ok(false);
                }
                let head: &[u8; wire::REQUEST_LEN] =
                    data[..wire::REQUEST_LEN].try_into().expect("a whole header");
                let req = Request::decode(head).ok_or_else(|| {
                    NbdError::Protocol("request without the request magic".into())
                })?;
                self.inb.consume(wire::REQUEST_LEN);
                match t.start(&req, &mut self.out)? {
                    Started::Done => self.stage = Stage::Transmit(t, None),
                    Started::Pending(p) => self.stage = Stage::Transmit(t, Some(p)),
                    Started::Disconnect => self.closing = true,
                }
                true
            }
        };
        Ok(progressed)
    }

    /// The first `n` bytes buffered, consumed, once they are there.
    fn take(&mut self, n: usize) -> Option<Vec<u8>> {
        if self.inb.data().len() < n {
            self.inb.reserve(n, IO_BUFFER);
            return None;
        }
        let v = self.inb.data()[..n].to_vec();
        self.inb.consume(n);
        Some(v)
    }

    /// Sends what the socket takes now.
    fn flush(&mut self) -> Result<()> {
        let out = std::mem::take(&mut self.out);
        let from = self.sent;
        let sent = self.io().send(&out[from..]);
        self.out = out;
        let n = sent?;
        self.sent += n;
        if self.sent == self.out.len() {
            self.out.clear();
            self.sent = 0;
        } else if self.sent > 0 && self.out.len() - self.sent <= OUTPUT_HIGH {
            // What is sent goes before more is added: the output stays
            // within OUTPUT_HIGH and a piece.
            self.out.drain(..self.sent);
            self.sent = 0;
        }
        if self.unsent() == 0 || n > 0 {
            self.blocked_since = None;
        }
        if self.unsent() > 0 {
            self.blocked_since.get_or_insert_with(Instant::now);
        }
        Ok(())
    }

    /// Waits for the client to take replies, at most the stall timeout.
    fn wait_for_room(&mut self) -> Result<Wait> {
        let since = *self.blocked_since.get_or_insert_with(Instant::now);
        if since.elapsed() >= self.shared.stall {
            return Err(NbdError::Timeout(format!(
                "the client read no reply for {:?}",
                self.shared.stall
            )));
        }
        Ok(Wait::Output { until: Some(since + self.shared.stall) })
    }

    /// A message has begun and not come whole: bytes of it are buffered,
    /// a write's payload is due, or the TLS handshake runs.
    fn mid_message(&self) -> bool {
        !self.inb.data().is_empty()
            || matches!(self.stage, Stage::Transmit(_, Some(Pending::Write { .. })))
            || matches!(self.stage, Stage::Handshake(_))
    }

    fn negotiating(&self) -> bool {
        matches!(
            self.stage,
            Stage::Flags | Stage::Options(_) | Stage::StartTls(_) | Stage::Handshake(_)
        )
    }

    /// When to resume the session even if nothing comes.
    fn wake_deadline(&self) -> Option<Instant> {
        let stall = self.shared.stall;
        [
            self.partial_since.map(|t| t + stall),
            self.negotiating().then(|| self.opened + stall * NEGOTIATION_STALLS),
            self.handshake_since.map(|t| t + stall),
            (self.holding && !self.mid_message()).then_some(self.active + IDLE_RELEASE),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// The timeout that ends the connection, if one has passed.
    fn expired(&self) -> Option<NbdError> {
        let now = Instant::now();
        let stall = self.shared.stall;
        if self.handshake_since.is_some_and(|t| now >= t + stall) {
            return Some(NbdError::Timeout("the TLS handshake did not end in time".into()));
        }
        if self.partial_since.is_some_and(|t| now >= t + stall) {
            return Some(NbdError::Timeout(format!(
                "a message begun did not arrive whole within {stall:?}"
            )));
        }
        if self.negotiating() && now >= self.opened + stall * NEGOTIATION_STALLS {
            return Some(NbdError::Timeout(format!(
                "negotiation did not end within {:?}",
                stall * NEGOTIATION_STALLS
            )));
        }
        None
    }

    /// Frees the buffers of a connection gone quiet.
    fn release(&mut self) {
        self.inb.release();
        if self.unsent() == 0 {
            self.out = Vec::new();
            self.sent = 0;
        }
        if let Stage::Transmit(t, None) = &mut self.stage {
            t.release();
        }
        self.holding = false;
    }

    /// Keeps the server's count of buffered bytes up to date.
    fn account(&mut self) {
        let mut now = self.inb.held() + self.out.capacity();
        if let Stage::Transmit(t, _) = &self.stage {
            now += t.held();
        }
        if matches!(self.io, Some(Transport::Tls { .. })) {
            now += TLS_BUFFER;
        }
        if self.finished {
            now = 0;
        }
        if now != self.held {
            self.shared.counters.buffers(self.held, now);
            self.held = now;
        }
    }

    /// Counts and logs the end (once); a clean end of TLS says so to the
    /// client.
    fn finish(&mut self, result: Result<()>, peer: &str, stopping: bool) {
        if std::mem::replace(&mut self.finished, true) {
            return;
        }
        if result.is_ok() {
            if let Some(io) = self.io.as_mut() {
                io.close_notify();
            }
        }
        self.shared.count_end(&result, peer, stopping);
        self.account();
    }
}

impl Session for Connection {
    fn resume(&mut self, ctx: &Resume<'_>) -> Wait {
        let r = if ctx.stopping() { Ok(Wait::Close) } else { self.step() };
        let wait = conclude(r, |end| self.finish(end, ctx.peer, ctx.stopping()));
        self.account();
        wait
    }

    fn socket(&self) -> &TcpStream {
        self.io.as_ref().expect("the transport").socket()
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        // Closed while waiting, by the server's stop.
        self.finish(Ok(()), "", true);
    }
}
