//! # zns-server
//!
//! The TCP server skeleton of znskit's exports, in two forms:
//! [`EventServer`] (module [`event`], used by `zns-nvmf`), where a
//! bounded pool of workers runs connections as sessions and a poller
//! holds the ones that wait; and [`TcpServer`] (used by `zns-nbd`): an
//! accept thread, one thread per connection up to a limit (further
//! connections are closed at accept), and a stop that wakes the accept
//! thread, shuts every open connection down and waits for its thread. A
//! connection thread unregisters itself however it ends, a panic
//! included, so a stop never waits forever. An accept that fails (no file
//! descriptors left, say) is retried after a pause that doubles up to a
//! second, so a server out of resources does not spin.
//!
//! ```
//! use std::io::Write;
//! let server = zns_server::TcpServer::bind("127.0.0.1:0", "echo", 4, |mut s, _ctx| {
//!     let _ = s.write_all(b"hi");
//! })
//! .unwrap();
//! let addr = server.local_addr();
//! let mut got = String::new();
//! std::io::Read::read_to_string(&mut std::net::TcpStream::connect(addr).unwrap(), &mut got).unwrap();
//! assert_eq!(got, "hi");
//! assert_eq!(server.stop().connections, 1);
//! ```

#![warn(missing_docs)]

use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex};

pub mod event;

pub use event::{Closer, EventServer, Resume, ServerConfig, Session, Wait};

/// What a connection handler knows besides its stream.
///
/// Thread safety: `Sync`; borrowed by one connection thread.
#[derive(Debug)]
pub struct Connection<'a> {
    /// The peer's address, for logs.
    pub peer: &'a str,
    stopping: &'a AtomicBool,
}

impl Connection<'_> {
    /// The server is stopping: an I/O error now is the stop's doing.
    pub fn stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }
}

/// Connections accepted and refused so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Totals {
    /// Connections accepted and served.
    pub connections: u64,
    /// Connections closed at accept because the limit was reached.
    pub refused: u64,
    /// Accepts that failed (each followed by a pause).
    pub accept_errors: u64,
}

/// State of the accept thread and the connections.
struct Shared {
    name: &'static str,
    max_connections: usize,
    stopping: AtomicBool,
    connections: AtomicU64,
    refused: AtomicU64,
    accept_errors: AtomicU64,
    /// Open connections' streams, to shut them down on stop.
    open: Mutex<Vec<(u64, TcpStream)>>,
    /// Signalled when a connection ends.
    ended: Condvar,
}

/// A listening server.
///
/// Thread safety: `Send + Sync`. Dropping it stops it like
/// [`TcpServer::stop`].
pub struct TcpServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for TcpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpServer")
            .field("name", &self.shared.name)
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl TcpServer {
    /// Listens on `addr` and runs `handler` on its own thread for each
    /// connection, at most `max_connections` at once. `name` names the
    /// threads and the log lines.
    pub fn bind<F>(
        addr: impl ToSocketAddrs,
        name: &'static str,
        max_connections: usize,
        handler: F,
    ) -> std::io::Result<TcpServer>
    where
        F: Fn(TcpStream, &Connection<'_>) + Send + Sync + 'static,
    {
        TcpServer::serve(TcpListener::bind(addr)?, name, max_connections, handler)
    }

    /// [`TcpServer::bind`] on a listener already bound (when the handler
    /// needs to know the address).
    pub fn serve<F>(
        listener: TcpListener,
        name: &'static str,
        max_connections: usize,
        handler: F,
    ) -> std::io::Result<TcpServer>
    where
        F: Fn(TcpStream, &Connection<'_>) + Send + Sync + 'static,
    {
        let local = listener.local_addr()?;
        let shared = Arc::new(Shared {
            name,
            max_connections,
            stopping: AtomicBool::new(false),
            connections: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            accept_errors: AtomicU64::new(0),
            open: Mutex::new(Vec::new()),
            ended: Condvar::new(),
        });
        let s = Arc::clone(&shared);
        let handler = Arc::new(handler);
        let accept = std::thread::Builder::new()
            .name(format!("{name}-accept"))
            .spawn(move || accept_loop(listener, s, handler))?;
        Ok(TcpServer { addr: local, shared, accept: Some(accept) })
    }

    /// The address listened on (with the port the system chose for 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Connections open now.
    pub fn open_connections(&self) -> usize {
        self.shared.open.lock().len()
    }

    /// The totals so far.
    pub fn totals(&self) -> Totals {
        Totals {
            connections: self.shared.connections.load(Ordering::Relaxed),
            refused: self.shared.refused.load(Ordering::Relaxed),
            accept_errors: self.shared.accept_errors.load(Ordering::Relaxed),
        }
    }

    /// Stops accepting, shuts every connection down (a handler finishing
    /// its current work first) and waits for them; returns the totals.
    pub fn stop(mut self) -> Totals {
        self.shutdown();
        self.totals()
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

impl Drop for TcpServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Where to connect to reach a listener on `addr` (an unspecified
/// address listens on loopback too).
pub(crate) fn wake_addr(addr: SocketAddr) -> SocketAddr {
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

fn accept_loop<F>(listener: TcpListener, shared: Arc<Shared>, handler: Arc<F>)
where
    F: Fn(TcpStream, &Connection<'_>) + Send + Sync + 'static,
{
    let name = shared.name;
    let mut next_id = 0u64;
    let mut backoff = AcceptBackoff::default();
    for conn in listener.incoming() {
        if shared.stopping.load(Ordering::SeqCst) {
            break;
        }
        let stream = match conn {
            Ok(s) => s,
            Err(e) => {
                shared.accept_errors.fetch_add(1, Ordering::Relaxed);
                let pause = backoff.next();
                tracing::warn!(server = name, error = %e, ?pause, "accept failed; pausing");
                std::thread::sleep(pause);
                continue;
            }
        };
        let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_default();
        // Registering takes a descriptor too: without one, the connection
        // is closed and the loop pauses as after a failed accept.
        let registered = match stream.try_clone() {
            Ok(r) => r,
            Err(e) => {
                shared.accept_errors.fetch_add(1, Ordering::Relaxed);
                let pause = backoff.next();
                tracing::warn!(server = name, %peer, error = %e, ?pause, "cannot register a connection; pausing");
                std::thread::sleep(pause);
                continue;
            }
        };
        {
            let mut open = shared.open.lock();
            if open.len() >= shared.max_connections {
                shared.refused.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(server = name, %peer, max = shared.max_connections, "connection refused: too many open");
                continue;
            }
            next_id += 1;
            open.push((next_id, registered));
        }
        backoff.reset();
        shared.connections.fetch_add(1, Ordering::Relaxed);
        let (id, s, h) = (next_id, Arc::clone(&shared), Arc::clone(&handler));
        let spawned =
            std::thread::Builder::new().name(format!("{name}-conn-{id}")).spawn(move || {
                // Unregistered however the connection ends, a panic included,
                // so that stop() never waits for it forever.
                let _registered = Registered { shared: &s, id };
                // Declared after `_registered`, so dropped before it: when
                // this is the last reference to the handler (and to the
                // devices it holds), they are gone before stop() returns.
                let h = h;
                h(stream, &Connection { peer: &peer, stopping: &s.stopping });
            });
        if let Err(e) = spawned {
            tracing::warn!(server = name, error = %e, "cannot start a connection thread");
            shared.open.lock().retain(|(i, _)| *i != id);
        }
    }
}

/// The pause after each failed accept: 10 ms, doubling to 1 s while they
/// keep failing (the usual cause, no descriptors left, lasts until a
/// connection ends), back to 10 ms after a success.
#[derive(Debug, Default)]
pub(crate) struct AcceptBackoff {
    failures: u32,
}

impl AcceptBackoff {
    const FIRST: std::time::Duration = std::time::Duration::from_millis(10);
    const MAX: std::time::Duration = std::time::Duration::from_secs(1);

    pub(crate) fn next(&mut self) -> std::time::Duration {
        let pause = Self::FIRST.saturating_mul(1 << self.failures.min(16)).min(Self::MAX);
        self.failures = self.failures.saturating_add(1);
        pause
    }

    pub(crate) fn reset(&mut self) {
        self.failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn the_limit_refuses_and_stop_ends_open_connections_even_after_a_panic() {
        let server = TcpServer::bind("127.0.0.1:0", "test", 1, |mut s, ctx| {
            let mut b = [0u8; 1];
            // Block until the peer or the stop closes the stream.
            let _ = s.read(&mut b);
            assert!(ctx.stopping() || b[0] != b'P', "asked to panic");
        })
        .unwrap();
        let addr = server.local_addr();
        let held = TcpStream::connect(addr).unwrap();
        while server.open_connections() == 0 {
            std::thread::yield_now();
        }
        let mut refused = TcpStream::connect(addr).unwrap();
        assert_eq!(refused.read(&mut [0u8; 1]).unwrap(), 0, "closed at accept");
        // A handler that panics still unregisters.
        std::io::Write::write_all(&mut &held, b"P").unwrap();
        while server.open_connections() > 0 {
            std::thread::yield_now();
        }
        let _open = TcpStream::connect(addr).unwrap();
        while server.open_connections() == 0 {
            std::thread::yield_now();
        }
        let totals = server.stop();
        assert_eq!(totals, Totals { connections: 2, refused: 1, accept_errors: 0 });
    }

    #[test]
    fn failed_accepts_back_off_to_a_second() {
        let mut b = AcceptBackoff::default();
        let pauses: Vec<u64> = (0..10).map(|_| b.next().as_millis() as u64).collect();
        assert_eq!(pauses, [10, 20, 40, 80, 160, 320, 640, 1000, 1000, 1000]);
        b.reset();
        assert_eq!(b.next().as_millis(), 10);
    }

    /// Sets its flag when dropped, slowly, as a device that closes its queues.
    struct SlowDrop(Arc<AtomicBool>);

    impl Drop for SlowDrop {
        fn drop(&mut self) {
            std::thread::sleep(std::time::Duration::from_millis(50));
            self.0.store(true, Ordering::SeqCst);
        }
    }

    #[test]
    fn what_the_handler_holds_is_dropped_before_stop_returns() {
        let dropped = Arc::new(AtomicBool::new(false));
        let held = SlowDrop(Arc::clone(&dropped));
        let server = TcpServer::bind("127.0.0.1:0", "test", 4, move |mut s, _| {
            let _ = &held;
            let _ = s.read(&mut [0u8; 1]);
        })
        .unwrap();
        let _peer = TcpStream::connect(server.local_addr()).unwrap();
        while server.open_connections() == 0 {
            std::thread::yield_now();
        }
        server.stop();
        assert!(dropped.load(Ordering::SeqCst), "the handler outlived stop()");
    }
}
