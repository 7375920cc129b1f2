//! The listening server: an accept thread and one thread per connection.
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
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex};

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
    connections: AtomicU64,
    refused: AtomicU64,
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

    /// A snapshot of the totals.
    pub fn snapshot(&self) -> ServerStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        ServerStats {
            connections: get(&self.connections),
            refused: get(&self.refused),
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

/// State shared by the accept thread and the connections.
struct Shared {
    exports: Vec<Arc<Export>>,
    config: ServerConfig,
    counters: Counters,
    stopping: AtomicBool,
    /// Open connections' streams, to shut them down on stop.
    open: Mutex<Vec<(u64, TcpStream)>>,
    /// Signalled when a connection ends.
    ended: Condvar,
}

/// A running NBD server.
///
/// Thread safety: `Send + Sync`. Dropping it stops it like
/// [`NbdServer::stop`].
pub struct NbdServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for NbdServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NbdServer")
            .field("addr", &self.addr)
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
        let listener = TcpListener::bind(&addr)
            .map_err(|source| NbdError::Bind { addr: shown.clone(), source })?;
        let local =
            listener.local_addr().map_err(|source| NbdError::Bind { addr: shown, source })?;
        let shared = Arc::new(Shared {
            exports: exports.into_iter().map(Arc::new).collect(),
            config,
            counters: Counters::default(),
            stopping: AtomicBool::new(false),
            open: Mutex::new(Vec::new()),
            ended: Condvar::new(),
        });
        let s = Arc::clone(&shared);
        let accept = std::thread::Builder::new()
            .name("nbd-accept".into())
            .spawn(move || accept_loop(listener, s))?;
        tracing::info!(addr = %local, "NBD server listening");
        Ok(NbdServer { addr: local, shared, accept: Some(accept) })
    }

    /// The address the server listens on (with the port the system chose
    /// when asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The running totals.
    pub fn stats(&self) -> ServerStats {
        self.shared.counters.snapshot()
    }

    /// Connections open now.
    pub fn open_connections(&self) -> usize {
        self.shared.open.lock().len()
    }

    /// Stops accepting, closes every connection (a request being served
    /// completes first) and waits for them; returns the totals. The
    /// exported devices are not flushed: that is the owner's call.
    pub fn stop(mut self) -> ServerStats {
        self.shutdown();
        self.stats()
    }

    fn shutdown(&mut self) {
        let Some(accept) = self.accept.take() else { return };
        self.shared.stopping.store(true, Ordering::SeqCst);
        // Wake the blocked accept() with a connection of our own.
        let _ = TcpStream::connect(wake_addr(self.addr));
        let _ = accept.join();
        let mut open = self.shared.open.lock();
        for (_, s) in open.iter() {
            let _ = s.shutdown(Shutdown::Both);
        }
        while !open.is_empty() {
            self.shared.ended.wait(&mut open);
        }
    }
}

impl Drop for NbdServer {
    fn drop(&mut self) {
        self.shutdown();
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

/// Where to connect to reach a listener on `addr` (an unspecified
/// address listens on loopback too).
fn wake_addr(addr: SocketAddr) -> SocketAddr {
    let mut a = addr;
    if a.ip().is_unspecified() {
        a.set_ip(match a {
            SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    a
}

/// A connection's entry in the open list, removed when dropped.
struct Registered<'a> {
    shared: &'a Shared,
    id: u64,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.shared.open.lock().retain(|(i, _)| *i != self.id);
        self.shared.ended.notify_all();
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let mut next_id = 0u64;
    for conn in listener.incoming() {
        if shared.stopping.load(Ordering::SeqCst) {
            break;
        }
        let stream = match conn {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "NBD accept failed");
                continue;
            }
        };
        let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_default();
        let Ok(registered) = stream.try_clone() else { continue };
        {
            let mut open = shared.open.lock();
            if open.len() >= shared.config.max_connections {
                shared.counters.refused.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%peer, max = shared.config.max_connections, "NBD connection refused: too many open");
                continue;
            }
            next_id += 1;
            open.push((next_id, registered));
        }
        shared.counters.connections.fetch_add(1, Ordering::Relaxed);
        let (id, s) = (next_id, Arc::clone(&shared));
        let spawned = std::thread::Builder::new().name(format!("nbd-conn-{id}")).spawn(move || {
            // Unregistered however the connection ends, a panic included,
            // so that stop() never waits for it forever.
            let _registered = Registered { shared: &s, id };
            serve(stream, &s, &peer);
        });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "cannot start an NBD connection thread");
            shared.open.lock().retain(|(i, _)| *i != id);
        }
    }
}

/// Serves one connection to its end.
fn serve(stream: TcpStream, shared: &Shared, peer: &str) {
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
        Err(e) if shared.stopping.load(Ordering::SeqCst) => {
            tracing::debug!(%peer, error = %e, "NBD connection closed by shutdown");
        }
        Err(e) => tracing::info!(%peer, error = %e, "NBD connection ended"),
    }
}
