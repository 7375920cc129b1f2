//! The event-driven server: an accept thread, one poller thread and a
//! bounded pool of worker threads serve any number of connections up to
//! a limit. A connection is a [`Session`] that holds its own state; it
//! runs on a worker while it has work and waits in the poller (for
//! input, for room to send, or for a deadline) when it has none, so an
//! idle connection costs its memory and one descriptor, a stalled one
//! the same, and no connection's peer can hold a thread.
//!
//! ```
//! use std::io::{Read, Write};
//! use std::net::TcpStream;
//! use zns_server::{EventServer, Resume, ServerConfig, Session, Wait};
//!
//! /// Answers every byte with its successor.
//! struct Next(TcpStream);
//!
//! impl Session for Next {
//!     fn resume(&mut self, _ctx: &Resume<'_>) -> Wait {
//!         let mut b = [0u8; 1];
//!         match (&self.0).read(&mut b) {
//!             Ok(1) if (&self.0).write_all(&[b[0] + 1]).is_ok() => Wait::Input { until: None },
//!             Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Wait::Input { until: None },
//!             _ => Wait::Close,
//!         }
//!     }
//!     fn socket(&self) -> &TcpStream {
//!         &self.0
//!     }
//! }
//!
//! let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
//! let server = EventServer::serve(listener, "next", ServerConfig::default(), |s, _peer| {
//!     s.set_nonblocking(true).ok()?;
//!     Some(Box::new(Next(s)) as Box<dyn Session>)
//! })
//! .unwrap();
//! let mut c = TcpStream::connect(server.local_addr()).unwrap();
//! c.write_all(b"a").unwrap();
//! let mut got = [0u8; 1];
//! c.read_exact(&mut got).unwrap();
//! assert_eq!(&got, b"b");
//! assert_eq!(server.stop().connections, 1);
//! ```

mod core;
mod session;
mod worker;

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use self::core::{Core, Msg, PollLoop};
pub use self::session::{conclude, Closer, Resume, Session, Wait};
use crate::{wake_addr, AcceptBackoff, Totals};

/// Settings of an [`EventServer`].
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Connections open at once; further ones are closed at accept.
    pub max_connections: usize,
    /// Worker threads: how many connections do work at the same moment.
    pub workers: usize,
    /// How long a worker keeps a connection that waits for input while
    /// no other is ready, before handing it to the poller: a peer that
    /// answers within it costs no thread switch.
    pub linger: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig { max_connections: 1024, workers: 8, linger: Duration::from_micros(500) }
    }
}

/// A listening event-driven server.
///
/// Thread safety: `Send + Sync`. Dropping it stops it like
/// [`EventServer::stop`].
pub struct EventServer {
    addr: SocketAddr,
    core: Arc<Core>,
    accept: Option<JoinHandle<()>>,
    poller: Option<JoinHandle<()>>,
    workers: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for EventServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventServer")
            .field("name", &self.core.name)
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl EventServer {
    /// Serves `listener`: `make` turns each accepted connection (and its
    /// peer's address) into a session, or refuses it with `None`. `name`
    /// names the threads (`NAME-accept`, `NAME-poll`, `NAME-worker-N`) and
    /// the log lines.
    pub fn serve<F>(
        listener: TcpListener,
        name: &'static str,
        config: ServerConfig,
        make: F,
    ) -> std::io::Result<EventServer>
    where
        F: Fn(TcpStream, &str) -> Option<Box<dyn Session>> + Send + 'static,
    {
        let addr = listener.local_addr()?;
        let (core, inbox) = Core::new(name)?;
        let (ready_tx, ready_rx) = crossbeam::channel::unbounded();
        let mut workers = Vec::new();
        for i in 0..config.workers.max(1) {
            let (c, r, linger) = (Arc::clone(&core), ready_rx.clone(), config.linger);
            workers.push(
                std::thread::Builder::new()
                    .name(format!("{name}-worker-{i}"))
                    .spawn(move || worker::run(c, r, linger))?,
            );
        }
        let poll = PollLoop::new(Arc::clone(&core), inbox, ready_tx);
        let poller =
            std::thread::Builder::new().name(format!("{name}-poll")).spawn(move || poll.run())?;
        let c = Arc::clone(&core);
        let max = config.max_connections;
        let accept = std::thread::Builder::new()
            .name(format!("{name}-accept"))
            .spawn(move || accept_loop(listener, c, max, make))?;
        Ok(EventServer { addr, core, accept: Some(accept), poller: Some(poller), workers })
    }

    /// The address listened on (with the port the system chose for 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Connections open now.
    pub fn open_connections(&self) -> usize {
        self.core.open.load(Ordering::SeqCst)
    }

    /// The totals so far.
    pub fn totals(&self) -> Totals {
        Totals {
            connections: self.core.connections.load(Ordering::Relaxed),
            refused: self.core.refused.load(Ordering::Relaxed),
            accept_errors: self.core.accept_errors.load(Ordering::Relaxed),
        }
    }

    /// Stops accepting, closes every connection (one running finishes
    /// its current work first), waits for the threads and returns the
    /// totals. Every session is dropped before it returns.
    pub fn stop(mut self) -> Totals {
        self.shutdown();
        self.totals()
    }

    fn shutdown(&mut self) {
        let Some(accept) = self.accept.take() else { return };
        self.core.set_stopping();
        // Wake the blocked accept() with a connection of our own.
        let _ = TcpStream::connect(wake_addr(self.addr));
        let _ = accept.join();
        self.core.send(Msg::Stop);
        if let Some(p) = self.poller.take() {
            let _ = p.join();
        }
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

impl Drop for EventServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn accept_loop<F>(listener: TcpListener, core: Arc<Core>, max: usize, make: F)
where
    F: Fn(TcpStream, &str) -> Option<Box<dyn Session>>,
{
    let name = core.name;
    let mut backoff = AcceptBackoff::default();
    for conn in listener.incoming() {
        if core.stopping() {
            break;
        }
        let stream = match conn {
            Ok(s) => s,
            Err(e) => {
                core.accept_errors.fetch_add(1, Ordering::Relaxed);
                let pause = backoff.next();
                tracing::warn!(server = name, error = %e, ?pause, "accept failed; pausing");
                std::thread::sleep(pause);
                continue;
            }
        };
        backoff.reset();
        let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_default();
        if core.open.load(Ordering::SeqCst) >= max {
            core.refused.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(server = name, %peer, max, "connection refused: too many open");
            continue;
        }
        let Some(session) = make(stream, &peer) else { continue };
        core.open.fetch_add(1, Ordering::SeqCst);
        core.connections.fetch_add(1, Ordering::Relaxed);
        core.send(Msg::New(session, peer.into()));
    }
}

#[cfg(test)]
mod tests;
