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

use std::io::{BufReader, BufWriter};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use zns_server::{Connection, TcpServer};

use crate::error::{NbdError, Result};
use crate::export::Export;
use crate::negotiate::negotiate;
use crate::transmit::Transmission;

/// Socket buffer sizes of a connection: room for a pipelined batch of
/// requests and for large reads.
const IO_BUFFER: usize = 256 * 1024;

/// Settings of a server.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Connections served at once; further ones are closed at accept.
    pub max_connections: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig { max_connections: 64 }
    }
}

/// Running totals of a server, readable while it runs.
///
/// Thread safety: `Send + Sync`; relaxed atomic counters.
#[derive(Debug, Default)]
pub struct Counters {
    protocol_errors: AtomicU64,
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

    /// A snapshot of the totals (connections counted by the server).
    fn snapshot(&self, totals: zns_server::Totals) -> ServerStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        ServerStats {
            connections: totals.connections,
            refused: totals.refused,
            protocol_errors: get(&self.protocol_errors),
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
    /// Transmission requests received.
    pub requests: u64,
    /// Requests answered with an error.
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
        });
        let s = Arc::clone(&shared);
        let server = TcpServer::bind(addr, "nbd", config.max_connections, move |stream, conn| {
            serve(stream, &s, conn)
        })
        .map_err(|source| NbdError::Bind { addr: shown, source })?;
        tracing::info!(addr = %server.local_addr(), "NBD server listening");
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
    let _ = stream.set_nodelay(true);
    let Ok(read_half) = stream.try_clone() else { return };
    let mut r = BufReader::with_capacity(IO_BUFFER, read_half);
    let mut w = BufWriter::with_capacity(IO_BUFFER, stream);
    let result = negotiate(&mut r, &mut w, &shared.exports).and_then(|session| {
        let Some(session) = session else { return Ok(()) };
        tracing::info!(%peer, export = %session.export.name, "NBD client connected");
        Transmission::new(session, &shared.counters).run(&mut r, &mut w)
    });
    match result {
        Ok(()) => tracing::info!(%peer, "NBD client disconnected"),
        Err(NbdError::Protocol(why)) => {
            shared.counters.protocol_errors.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(%peer, "NBD connection closed: {why}");
        }
        Err(e) if conn.stopping() => {
            tracing::debug!(%peer, error = %e, "NBD connection closed by shutdown");
        }
        Err(e) => tracing::info!(%peer, error = %e, "NBD connection ended"),
    }
}
