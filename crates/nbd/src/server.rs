//! The NBD server on zns-server's skeleton: a thread per connection.
//!
//! Each connection negotiates on its own and then serves its requests in
//! order; connections to the same export run in parallel on the
//! [`BlockDevice`](zns_ftl::BlockDevice), which is `Sync`. A connection
//! that breaks the protocol is closed and logged; the others go on.
//!
//! Clients that ask for the block sizes with `NBD_OPT_GO` (QEMU, the Linux
//! `nbd-client`, libnbd) have agreed to send whole blocks, and a request
//! that is not gets `EINVAL`. Older clients (`NBD_OPT_EXPORT_NAME`, or
//! `NBD_OPT_GO` without the request) may send any byte range: the server
//! reads and writes the whole blocks around it, serializing such partial
//! writes against each other (an aligned write racing a partial write of
//! the same block is, as between any two overlapping writes, unordered).
//!
//! What a hostile client can hold: a connection keeps its two socket
//! buffers ([`IO_BUFFER`] each; with TLS, [`TLS_BUFFER`] more) and at most
//! one [`CHUNK`](crate::CHUNK) plus one block of payload buffer, whatever
//! the requests' sizes ([`NbdServer::buffered_bytes`] sums them). A message (an option, or a
//! request with its payload) the server has begun reading must arrive
//! whole within [`ServerConfig::stall_timeout`], and a reply the client
//! does not read must make progress within it; negotiation must end within
//! twice that, a TLS handshake within the stall timeout of its start.
//! Otherwise the connection is closed and counted in
//! [`ServerStats::timeouts`]. A client idle between requests is never
//! closed: NBD has no keep-alive, and idling costs the server a sleeping
//! thread that wakes once every quarter of a stall timeout.

use std::io::{BufWriter, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zns_server::{Connection, TcpServer};

use crate::error::{NbdError, Result};
use crate::export::Export;
use crate::input::{self, Input};
use crate::negotiate::{Negotiation, Outcome, Session, NEGOTIATION_STALLS};
use crate::tls::{self, TlsConfig, TlsError, TLS_BUFFER};
use crate::transmit::Transmission;

/// Socket buffer sizes of a connection: room for a pipelined batch of
/// requests and for large reads.
pub const IO_BUFFER: usize = 256 * 1024;

/// Settings of a server.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Connections served at once; further ones are closed at accept.
    pub max_connections: usize,
    /// How long a client may take over one message once the server waits
    /// on it: an option, or a request with its payload, must arrive whole
    /// within this time of the server's first wait for its rest (time the
    /// server spends on the device meanwhile not counted), and a reply
    /// must make progress (the client read some of it) within it.
    /// Negotiation as a whole must end within twice this. A client that
    /// breaks either rule is disconnected (it holds a thread, and the
    /// connection limit's worth of such clients would lock everyone else
    /// out); one idle between requests is not. Default 30 s; values under
    /// 1 ms count as 1 ms.
    pub stall_timeout: Duration,
    /// TLS, required of every client when set: options before
    /// `NBD_OPT_STARTTLS` are refused with `NBD_REP_ERR_TLS_REQD`, and
    /// the TLS handshake must be over within the stall timeout (see
    /// [`crate::tls`]). Default none: no TLS, `NBD_OPT_STARTTLS` is
    /// unsupported.
    pub tls: Option<TlsConfig>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig { max_connections: 64, stall_timeout: Duration::from_secs(30), tls: None }
    }
}

/// Running totals of a server, readable while it runs.
///
/// Thread safety: `Send + Sync`; relaxed atomic counters.
#[derive(Debug, Default)]
pub struct Counters {
    protocol_errors: AtomicU64,
    timeouts: AtomicU64,
    tls_refused: AtomicU64,
    /// Bytes of buffers the open connections hold.
    buffered: AtomicU64,
    requests: AtomicU64,
    errors: AtomicU64,
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
}

impl Counters {
    pub(crate) fn request(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn error(&self) {
        self.errors.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn read(&self, bytes: u64) {
        self.bytes_read.fetch_add(bytes, Ordering::Relaxed);
    }
    pub(crate) fn write(&self, bytes: u64) {
        self.bytes_written.fetch_add(bytes, Ordering::Relaxed);
    }
    /// A connection's buffers went from `was` to `now` bytes.
    pub(crate) fn buffers(&self, was: usize, now: usize) {
        if now > was {
            self.buffered.fetch_add((now - was) as u64, Ordering::Relaxed);
        } else {
            self.buffered.fetch_sub((was - now) as u64, Ordering::Relaxed);
        }
    }

    /// A snapshot of the totals (connections counted by the server).
    fn snapshot(&self, totals: zns_server::Totals) -> ServerStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        ServerStats {
            connections: totals.connections,
            refused: totals.refused,
            protocol_errors: get(&self.protocol_errors),
            timeouts: get(&self.timeouts),
            tls_refused: get(&self.tls_refused),
            requests: get(&self.requests),
            errors: get(&self.errors),
            bytes_read: get(&self.bytes_read),
            bytes_written: get(&self.bytes_written),
        }
    }
}

/// Totals of a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ServerStats {
    /// Connections accepted and served.
    pub connections: u64,
    /// Connections closed at once because `max_connections` were open.
    pub refused: u64,
    /// Connections closed because the client broke the protocol.
    pub protocol_errors: u64,
    /// Connections closed because the client stalled: a message begun and
    /// not finished, or a reply not read, within the stall timeout, or no
    /// export chosen in time (see [`ServerConfig::stall_timeout`]).
    pub timeouts: u64,
    /// Connections of a server requiring TLS that ended without it: a
    /// failed TLS handshake (no client certificate, or one the client CA
    /// did not sign; no protocol version in common; not TLS at all),
    /// `NBD_OPT_EXPORT_NAME` before `NBD_OPT_STARTTLS`, or a client that
    /// gave up after being told TLS is required.
    pub tls_refused: u64,
    /// Transmission requests received.
    pub requests: u64,
    /// Requests answered with an error, or (a read failing after its
    /// first chunk) by closing the connection.
    pub errors: u64,
    /// Bytes read by clients.
    pub bytes_read: u64,
    /// Bytes written by clients.
    pub bytes_written: u64,
}

/// State the connections share.
struct Shared {
    exports: Vec<Arc<Export>>,
    counters: Counters,
    /// [`ServerConfig::stall_timeout`], at least a millisecond.
    stall: Duration,
    /// [`ServerConfig::tls`].
    tls: Option<TlsConfig>,
}

/// A running NBD server.
///
/// Thread safety: `Send + Sync`. Dropping it stops it like
/// [`NbdServer::stop`].
pub struct NbdServer {
    shared: Arc<Shared>,
    server: TcpServer,
}

impl std::fmt::Debug for NbdServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NbdServer")
            .field("addr", &self.server.local_addr())
            .field("exports", &self.shared.exports)
            .finish_non_exhaustive()
    }
}

impl NbdServer {
    /// Listens on `addr` and serves `exports` (the first is also the
    /// default export, chosen by the empty name) until stopped.
    pub fn bind(
        addr: impl ToSocketAddrs + std::fmt::Debug,
        exports: Vec<Export>,
        config: ServerConfig,
    ) -> Result<NbdServer> {
        validate(&exports)?;
        let shown = format!("{addr:?}");
        let shared = Arc::new(Shared {
            exports: exports.into_iter().map(Arc::new).collect(),
            counters: Counters::default(),
            stall: config.stall_timeout.max(Duration::from_millis(1)),
            tls: config.tls,
        });
        let s = Arc::clone(&shared);
        let server = TcpServer::bind(addr, "nbd", config.max_connections, move |stream, conn| {
            serve(stream, &s, conn)
        })
        .map_err(|source| NbdError::Bind { addr: shown, source })?;
        let tls = shared.tls.is_some();
        tracing::info!(addr = %server.local_addr(), tls, "NBD server listening");
        Ok(NbdServer { shared, server })
    }

    /// The address the server listens on (with the port the system chose
    /// when asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    /// The running totals.
    pub fn stats(&self) -> ServerStats {
        self.shared.counters.snapshot(self.server.totals())
    }

    /// Connections open now.
    pub fn open_connections(&self) -> usize {
        self.server.open_connections()
    }

    /// Bytes of buffers the open connections hold now: each its two socket
    /// buffers ([`IO_BUFFER`] each), with TLS [`TLS_BUFFER`] more, and, in
    /// transmission, its payload buffer (at most a [`CHUNK`](crate::CHUNK))
    /// and one block of scratch.
    pub fn buffered_bytes(&self) -> u64 {
        self.shared.counters.buffered.load(Ordering::Relaxed)
    }

    /// Stops accepting, closes every connection (a request being served
    /// completes first) and waits for them; returns the totals. The
    /// exported devices are not flushed: that is the owner's call.
    pub fn stop(self) -> ServerStats {
        let totals = self.server.stop();
        self.shared.counters.snapshot(totals)
    }
}

fn validate(exports: &[Export]) -> Result<()> {
    if exports.is_empty() {
        return Err(NbdError::Export("a server needs at least one export".into()));
    }
    for (i, e) in exports.iter().enumerate() {
        if e.name.len() > 4096 || e.name.contains('\0') {
            return Err(NbdError::Export(format!(
                "{:?}: names are at most 4096 bytes, without NUL",
                e.name
            )));
        }
        if exports[..i].iter().any(|o| o.name == e.name) {
            return Err(NbdError::Export(format!("{:?} is exported twice", e.name)));
        }
        let bs = e.device.block_size();
        if !bs.is_power_of_two() || bs > 64 * 1024 {
            return Err(NbdError::Export(format!(
                "{:?}: block size {bs} is not a power of two of at most 64 KiB",
                e.name
            )));
        }
    }
    Ok(())
}

/// Serves one connection to its end.
fn serve(stream: TcpStream, shared: &Shared, conn: &Connection<'_>) {
    let peer = conn.peer;
    let result = session(stream, shared, peer);
    match result {
        Ok(()) => tracing::info!(%peer, "NBD client disconnected"),
        Err(NbdError::Protocol(why)) => {
            shared.counters.protocol_errors.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(%peer, "NBD connection closed: {why}");
        }
        Err(e) if conn.stopping() => {
            tracing::debug!(%peer, error = %e, "NBD connection closed by shutdown");
        }
        Err(e @ NbdError::Tls(TlsError::Handshake(_) | TlsError::NotStarted)) => {
            shared.counters.tls_refused.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(%peer, "NBD connection closed: {e}");
        }
        Err(e) if stalled(&e) => {
            shared.counters.timeouts.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(%peer, "NBD connection closed, the client stalled: {e}");
        }
        Err(e @ NbdError::ReadAborted { .. }) => {
            tracing::warn!(%peer, "NBD connection closed: {e}");
        }
        Err(e) => tracing::info!(%peer, error = %e, "NBD connection ended"),
    }
}

/// Negotiates (starting TLS where the server requires it) and serves the
/// transmission phase.
fn session(stream: TcpStream, shared: &Shared, peer: &str) -> Result<()> {
    let _ = stream.set_nodelay(true);
    // Both set once per connection: the receive timeout is only the tick
    // at which a waiting read checks its deadline (see `input`), the send
    // timeout bounds a reply the client does not read.
    stream.set_read_timeout(Some(input::tick(shared.stall)))?;
    stream.set_write_timeout(Some(shared.stall))?;
    let _held = Held::new(&shared.counters, 2 * IO_BUFFER);
    let limit = Instant::now() + shared.stall * NEGOTIATION_STALLS;
    let mut r = Input::new(stream.try_clone()?, IO_BUFFER, shared.stall);
    let mut w = BufWriter::with_capacity(IO_BUFFER, stream);
    r.set_limit(Some(limit));
    let exports = &shared.exports;
    let Some(mut n) = Negotiation::start(&mut r, &mut w, exports, shared.tls.is_some())? else {
        return Ok(());
    };
    match n.options(&mut r, &mut w)? {
        Outcome::Go(session) => return transmit(session, &mut r, &mut w, shared, peer, false),
        Outcome::End => return ended(&n, shared, peer),
        Outcome::StartTls => {}
    }
    let Some(config) = &shared.tls else {
        return Err(NbdError::Protocol("TLS started on a server without TLS".into()));
    };
    // The client must wait for the acknowledgement before its handshake:
    // nothing can have been buffered past the option.
    if r.buffered() != 0 {
        return Err(NbdError::Protocol("data sent after NBD_OPT_STARTTLS before its reply".into()));
    }
    drop(r);
    let stream = w.into_inner().map_err(|e| e.into_error())?;
    let _tls_held = Held::new(&shared.counters, TLS_BUFFER);
    let (tr, tw) = tls::accept(config, stream, (Instant::now() + shared.stall).min(limit))?.split();
    n.tls_started();
    let mut r = Input::new(tr, IO_BUFFER, shared.stall);
    let mut w = BufWriter::with_capacity(IO_BUFFER, tw);
    r.set_limit(Some(limit));
    let result = match n.options(&mut r, &mut w)? {
        Outcome::Go(session) => transmit(session, &mut r, &mut w, shared, peer, true),
        Outcome::End | Outcome::StartTls => Ok(()),
    };
    if result.is_ok() {
        let _ = w.flush();
        w.get_ref().close();
    }
    result
}

/// Serves the transmission phase on the chosen export.
fn transmit<R: Read, W: Write>(
    session: Session,
    r: &mut Input<R>,
    w: &mut W,
    shared: &Shared,
    peer: &str,
    tls: bool,
) -> Result<()> {
    r.set_limit(None);
    tracing::info!(%peer, export = %session.export.name, tls, "NBD client connected");
    Transmission::new(session, &shared.counters).run(r, w)
}

/// Negotiation ended without an export: a client told that TLS is
/// required that gave up is counted.
fn ended(n: &Negotiation<'_>, shared: &Shared, peer: &str) -> Result<()> {
    if n.refused_for_tls {
        shared.counters.tls_refused.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(%peer, "NBD client left without starting TLS, which this server requires");
    }
    Ok(())
}

/// The client stalled: the input's timeout, or a reply that could not be
/// sent within the send timeout.
fn stalled(e: &NbdError) -> bool {
    match e {
        NbdError::Timeout(_) => true,
        NbdError::Io(io) => matches!(io.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
        _ => false,
    }
}

/// Bytes counted in the server's buffered total while it lives.
struct Held<'a> {
    counters: &'a Counters,
    bytes: usize,
}

impl<'a> Held<'a> {
    fn new(counters: &'a Counters, bytes: usize) -> Self {
        counters.buffers(0, bytes);
        Held { counters, bytes }
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.counters.buffers(self.bytes, 0);
    }
}
