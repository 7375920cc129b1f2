//! The NBD server on zns-server's event-driven core: each connection is
//! a session (`session`) that a bounded pool of worker threads runs while
//! it has a whole message to act on and the poller holds while it waits.
//!
//! Each connection negotiates on its own and then serves its requests in
//! order; connections to the same export run in parallel on the
//! [`BlockDevice`](zns_block::BlockDevice), which is `Sync`. A connection
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
//! What a hostile client can hold: a connection keeps an input buffer
//! ([`IO_BUFFER`], grown to one [`CHUNK`](crate::CHUNK) of a write's
//! payload while one comes), its output (at most 256 KiB waiting before
//! it starts nothing more, plus one chunk of a read), one block of
//! scratch and, with TLS, [`TLS_BUFFER`] more, whatever the requests'
//! sizes ([`NbdServer::buffered_bytes`] sums them); no thread. A message
//! (the client's flags, an option, a request header, a piece of a write's
//! payload of up to a chunk) must arrive whole within
//! [`ServerConfig::stall_timeout`] of its first byte, and a reply the
//! client does not read must make progress within it; negotiation must
//! end within twice that, a TLS handshake within the stall timeout of its
//! start. Otherwise the connection is closed and counted in
//! [`ServerStats::timeouts`]. A client idle between requests is never
//! closed: NBD has no keep-alive, and an idle connection costs its session
//! and its socket (its buffers are freed 100 ms after its last request).

use std::io::ErrorKind;
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use zns_server::{EventServer, Session};

use crate::error::{NbdError, Result};
use crate::export::Export;
use crate::session::Connection;
#[cfg(doc)]
use crate::tls::TLS_BUFFER;
use crate::tls::{TlsConfig, TlsError};

/// The input buffer of a connection between large messages: room for a
/// pipelined batch of requests (it grows for a piece of a write's
/// payload, up to a [`CHUNK`](crate::CHUNK)).
pub const IO_BUFFER: usize = 64 * 1024;

/// Settings of a server.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Connections open at once; further ones are closed at accept.
    pub max_connections: usize,
    /// Worker threads: how many connections act on requests at the same
    /// moment (the others wait in the poller, for their client or for a
    /// worker).
    pub workers: usize,
    /// How long a client may take over one message once the server waits
    /// on it: an option, or a request with its payload, must arrive whole
    /// within this time of the server's first wait for its rest (time the
    /// server spends on the device meanwhile not counted), and a reply
    /// must make progress (the client read some of it) within it.
    /// Negotiation as a whole must end within twice this. A client that
    /// breaks either rule is disconnected (it holds a connection slot, and
    /// the connection limit's worth of such clients would lock everyone
    /// else out); one idle between requests is not. Default 30 s; values
    /// under 1 ms count as 1 ms.
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
        ServerConfig {
            max_connections: 1024,
            workers: 8,
            stall_timeout: Duration::from_secs(30),
            tls: None,
        }
    }
}

/// Running totals of a server, readable while it runs.
///
/// Thread safety: `Send + Sync`; relaxed atomic counters.
#[derive(Debug, Default)]
pub struct Counters {
    protocol_errors: AtomicU64,
    timeouts: AtomicU64,
    pub(crate) tls_refused: AtomicU64,
    /// Bytes of buffers the open connections hold.
    buffered: AtomicU64,
    /// The most `buffered` has been.
    peak: AtomicU64,
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
            let after = self.buffered.fetch_add((now - was) as u64, Ordering::Relaxed);
            self.peak.fetch_max(after + (now - was) as u64, Ordering::Relaxed);
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
pub(crate) struct Shared {
    pub(crate) exports: Vec<Arc<Export>>,
    pub(crate) counters: Arc<Counters>,
    /// [`ServerConfig::stall_timeout`], at least a millisecond.
    pub(crate) stall: Duration,
    /// [`ServerConfig::tls`].
    pub(crate) tls: Option<TlsConfig>,
}

impl Shared {
    /// Counts and logs how a connection ended.
    pub(crate) fn count_end(&self, result: &Result<()>, peer: &str, stopping: bool) {
        let c = &self.counters;
        match result {
            Ok(()) => tracing::info!(%peer, "NBD client disconnected"),
            Err(NbdError::Protocol(why)) => {
                c.protocol_errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%peer, "NBD connection closed: {why}");
            }
            Err(e) if stopping => {
                tracing::debug!(%peer, error = %e, "NBD connection closed by shutdown");
            }
            Err(e @ NbdError::Tls(TlsError::Handshake(_) | TlsError::NotStarted)) => {
                c.tls_refused.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%peer, "NBD connection closed: {e}");
            }
            Err(e) if stalled(e) => {
                c.timeouts.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%peer, "NBD connection closed, the client stalled: {e}");
            }
            Err(e @ NbdError::ReadAborted { .. }) => {
                tracing::warn!(%peer, "NBD connection closed: {e}");
            }
            Err(e) => tracing::info!(%peer, error = %e, "NBD connection ended"),
        }
    }
}

/// A running NBD server.
///
/// Thread safety: `Send + Sync`. Dropping it stops it like
/// [`NbdServer::stop`].
pub struct NbdServer {
    shared: Arc<Shared>,
    server: EventServer,
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
            counters: Arc::default(),
            stall: config.stall_timeout.max(Duration::from_millis(1)),
            tls: config.tls,
        });
        let s = Arc::clone(&shared);
        let bind_err = |source| NbdError::Bind { addr: shown.clone(), source };
        let listener = TcpListener::bind(&addr).map_err(bind_err)?;
        let server_config = zns_server::ServerConfig {
            max_connections: config.max_connections,
            workers: config.workers,
            ..zns_server::ServerConfig::default()
        };
        let server = EventServer::serve(listener, "nbd", server_config, move |stream, peer| {
            session(stream, peer, &s)
        })
        .map_err(bind_err)?;
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

    /// Bytes of buffers the open connections hold now: each its input
    /// buffer (from [`IO_BUFFER`] to a [`CHUNK`](crate::CHUNK) and a
    /// request), its output, one block of scratch, and with TLS
    /// [`TLS_BUFFER`] more; none for a connection idle 100 ms.
    pub fn buffered_bytes(&self) -> u64 {
        self.shared.counters.buffered.load(Ordering::Relaxed)
    }

    /// The most bytes of buffers the connections have held at once since
    /// the server started (see [`NbdServer::buffered_bytes`]).
    pub fn peak_buffered_bytes(&self) -> u64 {
        self.shared.counters.peak.load(Ordering::Relaxed)
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

/// The session of an accepted connection.
fn session(stream: TcpStream, peer: &str, shared: &Arc<Shared>) -> Option<Box<dyn Session>> {
    match Connection::new(stream, Arc::clone(shared)) {
        Ok(c) => Some(Box::new(c)),
        Err(e) => {
            tracing::warn!(%peer, error = %e, "NBD connection setup failed");
            None
        }
    }
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
