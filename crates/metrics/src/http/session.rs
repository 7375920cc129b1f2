//! One connection to the endpoint: a `zns-server` session that reads one
//! request head, answers it and closes, each step bounded in bytes and
//! time. It never blocks on its peer (the socket is non-blocking); it
//! waits in the poller instead, with a deadline.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use zns_server::{Resume, Session, Wait};

use super::head::{self, HeadReader, Progress};
use super::{HttpLimits, DRAIN_MAX, LINGER, OPENMETRICS};
use crate::exporter::Exporter;

/// What a connection is doing, for the admission's choice of whom to
/// close when the connections are at their limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Phase {
    /// Waiting for its request: may be closed for a newcomer.
    Reading = 0,
    /// Being answered: left alone (its deadline bounds it).
    Answering = 1,
    /// Answered, waiting for its peer to close: may be closed.
    Lingering = 2,
    /// Closed for a newcomer; its session ends at its next wake.
    Evicted = 3,
}

/// A connection as the admission sees it: its socket and its phase.
#[derive(Debug)]
pub(super) struct Conn {
    socket: TcpStream,
    phase: AtomicU8,
}

impl Conn {
    fn set(&self, p: Phase) {
        // An evicted connection stays evicted.
        let _ = self.phase.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |cur| {
            (cur != Phase::Evicted as u8).then_some(p as u8)
        });
    }

    /// Closes the connection if it is in phase `from` (one that waits for
    /// its peer); whether it did. Its session sees the end of its input
    /// and ends.
    fn evict(&self, from: Phase) -> bool {
        let (from, to) = (from as u8, Phase::Evicted as u8);
        if self.phase.compare_exchange(from, to, Ordering::SeqCst, Ordering::SeqCst).is_err() {
            return false;
        }
        let _ = self.socket.shutdown(Shutdown::Both);
        true
    }

    fn evicted(&self) -> bool {
        self.phase.load(Ordering::SeqCst) == Phase::Evicted as u8
    }
}

/// The connections alive, oldest first, and their limit.
#[derive(Debug)]
pub(super) struct Admission {
    conns: Mutex<Vec<Arc<Conn>>>,
    /// Signalled when a connection leaves.
    left: Condvar,
    max: usize,
}

/// How long an accept waits for closed connections to go when they hold
/// twice the limit (they go as soon as the poller drops them).
const ADMIT_WAIT: Duration = Duration::from_millis(100);

impl Admission {
    pub fn new(max: usize) -> Self {
        Admission { conns: Mutex::new(Vec::new()), left: Condvar::new(), max }
    }

    /// Takes `socket` in, closing the oldest connection that waits for
    /// its peer when `max` are served already (one answered already
    /// before one still to send its request); `None` (the socket is
    /// dropped, so closed) when every one is being answered, or when
    /// closed ones still hold twice the limit after [`ADMIT_WAIT`].
    fn admit(&self, socket: TcpStream) -> Option<Arc<Conn>> {
        let conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        let (mut conns, _) = self
            .left
            .wait_timeout_while(conns, ADMIT_WAIT, |c| c.len() >= self.max.saturating_mul(2))
            .unwrap_or_else(|e| e.into_inner());
        if conns.len() >= self.max.saturating_mul(2) {
            return None;
        }
        let serving = conns.iter().filter(|c| !c.evicted()).count();
        let evict = |from| conns.iter().any(|c| c.evict(from));
        if serving >= self.max && !evict(Phase::Lingering) && !evict(Phase::Reading) {
            return None;
        }
        let conn = Arc::new(Conn { socket, phase: AtomicU8::new(Phase::Reading as u8) });
        conns.push(Arc::clone(&conn));
        Some(conn)
    }

    fn leave(&self, conn: &Arc<Conn>) {
        let mut conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        conns.retain(|c| !Arc::ptr_eq(c, conn));
        self.left.notify_all();
    }
}

/// What the session does next.
#[derive(Debug)]
enum Step {
    /// Reading the request head.
    Head(HeadReader),
    /// Sending `out` from `sent` on.
    Answer { out: Vec<u8>, sent: usize },
    /// Answered: the sending side is shut; reading what the peer still
    /// sends (at most [`DRAIN_MAX`] bytes) until it closes, so that
    /// closing with its bytes unread does not reset the connection before
    /// it has read the answer.
    Linger { drained: usize },
}

/// One connection.
pub(super) struct HttpSession {
    conn: Arc<Conn>,
    admission: Arc<Admission>,
    exporter: Arc<Exporter>,
    limits: HttpLimits,
    /// The end of the current step.
    deadline: Instant,
    step: Step,
}

impl std::fmt::Debug for HttpSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpSession").field("step", &self.step).finish_non_exhaustive()
    }
}

impl HttpSession {
    /// The session of a connection just accepted, or `None` when the
    /// admission refuses it or the socket cannot be made non-blocking.
    pub fn accept(
        socket: TcpStream,
        admission: &Arc<Admission>,
        exporter: &Arc<Exporter>,
        limits: HttpLimits,
    ) -> Option<HttpSession> {
        if let Err(e) = socket.set_nonblocking(true) {
            tracing::debug!("metrics: connection dropped: {e}");
            return None;
        }
        let Some(conn) = admission.admit(socket) else {
            tracing::debug!("metrics: connection refused: {} busy", admission.max);
            return None;
        };
        Some(HttpSession {
            conn,
            admission: Arc::clone(admission),
            exporter: Arc::clone(exporter),
            limits,
            deadline: Instant::now() + limits.request_timeout,
            step: Step::Head(HeadReader::new(limits.max_head)),
        })
    }

    /// Runs the steps until one has to wait for the peer.
    fn run(&mut self) -> Wait {
        loop {
            let next = match &mut self.step {
                Step::Head(h) => match read_head(&self.conn.socket, h) {
                    Ok(Some(outcome)) => answer(&self.exporter, &self.limits, h.bytes(), outcome),
                    Ok(None) if Instant::now() < self.deadline => {
                        return Wait::Input { until: Some(self.deadline) }
                    }
                    Ok(None) => {
                        tracing::debug!("metrics: request not whole in time; closing");
                        response(408, TEXT, b"request not received in time\n".to_vec(), false)
                    }
                    Err(()) => return Wait::Close,
                },
                Step::Answer { out, sent } => {
                    match write_some(&self.conn.socket, out, sent) {
                        Ok(true) => {}
                        Ok(false) if Instant::now() < self.deadline => {
                            return Wait::Output { until: Some(self.deadline) }
                        }
                        Ok(false) | Err(()) => return Wait::Close,
                    }
                    // Lingering before the peer can see the end: a peer
                    // that connects again once it has read the answer
                    // must find this connection evictable.
                    self.conn.set(Phase::Lingering);
                    let _ = self.conn.socket.shutdown(Shutdown::Write);
                    self.deadline = Instant::now() + LINGER.min(self.limits.request_timeout);
                    self.step = Step::Linger { drained: 0 };
                    continue;
                }
                Step::Linger { drained } => {
                    return match drain(&self.conn.socket, drained) {
                        Ok(()) if Instant::now() < self.deadline => {
                            Wait::Input { until: Some(self.deadline) }
                        }
                        _ => Wait::Close,
                    }
                }
            };
            // An answer to send, from now within the timeout.
            self.conn.set(Phase::Answering);
            self.deadline = Instant::now() + self.limits.request_timeout;
            self.step = Step::Answer { out: next, sent: 0 };
        }
    }
}

impl Session for HttpSession {
    fn resume(&mut self, ctx: &Resume<'_>) -> Wait {
        if ctx.stopping() || self.conn.evicted() {
            return Wait::Close;
        }
        self.run()
    }

    fn socket(&self) -> &TcpStream {
        &self.conn.socket
    }
}

impl Drop for HttpSession {
    fn drop(&mut self) {
        self.admission.leave(&self.conn);
    }
}

/// The answer to a head (its bytes so far) that is whole or refused.
fn answer(
    exporter: &Exporter,
    limits: &HttpLimits,
    head: &[u8],
    outcome: Result<usize, u16>,
) -> Vec<u8> {
    let req = match outcome.and_then(|len| head::parse(&head[..len])) {
        Ok(r) => r,
        Err(status) => {
            tracing::debug!("metrics: request refused with {status}");
            let why = match status {
                431 => format!("request head over {} bytes\n", limits.max_head),
                505 => "only HTTP/1.0 and HTTP/1.1 are spoken\n".into(),
                _ => "not an HTTP request\n".into(),
            };
            return response(status, TEXT, why.into_bytes(), false);
        }
    };
    let head_only = match req.method {
        "GET" => false,
        "HEAD" => true,
        _ => return response(405, TEXT, b"only GET and HEAD are served\n".to_vec(), false),
    };
    if req.body {
        return response(413, TEXT, b"a request body is not accepted\n".to_vec(), false);
    }
    match req.path {
        "/metrics" => response(200, OPENMETRICS, exporter.encode().into_bytes(), head_only),
        "/zones" => match serde_json::to_vec(&exporter.zone_maps()) {
            Ok(json) => response(200, "application/json", json, head_only),
            Err(e) => response(500, TEXT, format!("{e}\n").into_bytes(), head_only),
        },
        _ => response(404, TEXT, b"not found: GET /metrics or /zones\n".to_vec(), head_only),
    }
}

const TEXT: &str = "text/plain; charset=utf-8";

/// Reads what has come of the head: `Some` once it is whole (its length)
/// or refused (the status), `None` when more must come, `Err` when the
/// peer closed or the socket failed.
fn read_head(mut socket: &TcpStream, h: &mut HeadReader) -> Result<Option<Result<usize, u16>>, ()> {
    let mut chunk = [0u8; 4096];
    loop {
        let want = chunk.len().min(h.room());
        let n = match socket.read(&mut chunk[..want]) {
            Ok(0) => return Err(()),
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(None),
            Err(_) => return Err(()),
        };
        match h.feed(&chunk[..n]) {
            Progress::More => {}
            Progress::Whole(len) => return Ok(Some(Ok(len))),
            Progress::Refused(status) => return Ok(Some(Err(status))),
        }
    }
}

/// Sends what the socket takes of `out[*sent..]`: whether all is sent.
fn write_some(mut socket: &TcpStream, out: &[u8], sent: &mut usize) -> Result<bool, ()> {
    while *sent < out.len() {
        match socket.write(&out[*sent..]) {
            Ok(0) => return Err(()),
            Ok(n) => *sent += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
            Err(_) => return Err(()),
        }
    }
    Ok(true)
}

/// Reads and drops what the peer sends: `Ok` while it may send more
/// (within [`DRAIN_MAX`] in all), `Err` once it closed, failed or sent
/// too much.
fn drain(mut socket: &TcpStream, drained: &mut usize) -> Result<(), ()> {
    let mut sink = [0u8; 4096];
    loop {
        match socket.read(&mut sink) {
            Ok(0) => return Err(()),
            Ok(n) => {
                *drained += n;
                if *drained >= DRAIN_MAX {
                    return Err(());
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
            Err(_) => return Err(()),
        }
    }
}

/// An HTTP/1.1 answer that closes the connection; `head_only` (HEAD)
/// leaves the body out but keeps its length.
fn response(status: u16, kind: &str, body: Vec<u8>, head_only: bool) -> Vec<u8> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        505 => "HTTP Version Not Supported",
        _ => "Internal Server Error",
    };
    let allow = if status == 405 { "Allow: GET, HEAD\r\n" } else { "" };
    let mut out = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n\
         Connection: close\r\n{allow}\r\n",
        body.len()
    )
    .into_bytes();
    if !head_only {
        out.extend_from_slice(&body);
    }
    out
}
