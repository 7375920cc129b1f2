//! The listening target: an accept thread and one thread per connection
//! (each connection is one queue), a bounded number of them.

use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex};

use crate::admin::Listener;
use crate::connection::Connection;
use crate::controller::Registry;
use crate::error::{NvmfError, Result};
use crate::subsystem::Subsystem;

/// Settings of a target.
#[derive(Debug, Clone)]
pub struct TargetConfig {
    /// Connections (queues) served at once; further ones are closed at
    /// accept.
    pub max_connections: usize,
}

impl Default for TargetConfig {
    fn default() -> Self {
        TargetConfig { max_connections: 256 }
    }
}

/// Totals of a target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TargetStats {
    /// Connections accepted.
    pub connections: u64,
    /// Connections refused because `max_connections` were open.
    pub refused: u64,
    /// Connections ended by a transport error (a C2HTermReq was sent).
    pub transport_errors: u64,
}

/// State shared by the accept thread and the connections.
pub(crate) struct Shared {
    pub subsystem: Arc<Subsystem>,
    pub registry: Registry,
    pub listener: Listener,
    config: TargetConfig,
    stopping: AtomicBool,
    connections: AtomicU64,
    refused: AtomicU64,
    transport_errors: AtomicU64,
    open: Mutex<Vec<(u64, TcpStream)>>,
    ended: Condvar,
}

/// A running NVMe/TCP target exporting one subsystem (plus the discovery
/// subsystem).
///
/// Thread safety: `Send + Sync`. Dropping it stops it like
/// [`NvmfTarget::stop`].
pub struct NvmfTarget {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for NvmfTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NvmfTarget")
            .field("addr", &self.addr)
            .field("subsystem", &self.shared.subsystem.nqn())
            .finish_non_exhaustive()
    }
}

impl NvmfTarget {
    /// Listens on `addr` and serves `subsystem` until stopped.
    pub fn bind(
        addr: impl ToSocketAddrs + std::fmt::Debug,
        subsystem: Subsystem,
        config: TargetConfig,
    ) -> Result<NvmfTarget> {
        let shown = format!("{addr:?}");
        let listener = TcpListener::bind(&addr)
            .map_err(|source| NvmfError::Bind { addr: shown.clone(), source })?;
        let local =
            listener.local_addr().map_err(|source| NvmfError::Bind { addr: shown, source })?;
        let subsystem = Arc::new(subsystem);
        let shared = Arc::new(Shared {
            listener: Listener {
                addr: local,
                subnqn: subsystem.nqn().to_string(),
                allowed_hosts: subsystem.allowed_hosts().to_vec(),
            },
            subsystem,
            registry: Registry::default(),
            config,
            stopping: AtomicBool::new(false),
            connections: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            transport_errors: AtomicU64::new(0),
            open: Mutex::new(Vec::new()),
            ended: Condvar::new(),
        });
        let s = Arc::clone(&shared);
        let accept = std::thread::Builder::new()
            .name("nvmf-accept".into())
            .spawn(move || accept_loop(listener, s))?;
        tracing::info!(addr = %local, nqn = shared.subsystem.nqn(), "NVMe/TCP target listening");
        Ok(NvmfTarget { addr: local, shared, accept: Some(accept) })
    }

    /// The address the target listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The exported subsystem.
    pub fn subsystem(&self) -> &Subsystem {
        &self.shared.subsystem
    }

    /// Controllers that exist now (one per connected host's admin queue).
    pub fn controllers(&self) -> usize {
        self.shared.registry.len()
    }

    /// The totals so far.
    pub fn stats(&self) -> TargetStats {
        TargetStats {
            connections: self.shared.connections.load(Ordering::Relaxed),
            refused: self.shared.refused.load(Ordering::Relaxed),
            transport_errors: self.shared.transport_errors.load(Ordering::Relaxed),
        }
    }

    /// Stops accepting, closes every connection (a command being run
    /// completes first) and waits for them; returns the totals.
    pub fn stop(mut self) -> TargetStats {
        self.shutdown();
        self.stats()
    }

    fn shutdown(&mut self) {
        let Some(accept) = self.accept.take() else { return };
        self.shared.stopping.store(true, Ordering::SeqCst);
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

impl Drop for NvmfTarget {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Where to connect to reach a listener on `addr`.
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
                tracing::warn!(error = %e, "NVMe/TCP accept failed");
                continue;
            }
        };
        let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_default();
        let Ok(registered) = stream.try_clone() else { continue };
        {
            let mut open = shared.open.lock();
            if open.len() >= shared.config.max_connections {
                shared.refused.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%peer, "NVMe/TCP connection refused: too many open");
                continue;
            }
            next_id += 1;
            open.push((next_id, registered));
        }
        shared.connections.fetch_add(1, Ordering::Relaxed);
        let (id, s) = (next_id, Arc::clone(&shared));
        let spawned =
            std::thread::Builder::new().name(format!("nvmf-conn-{id}")).spawn(move || {
                // Unregistered however the connection ends, a panic included,
                // so that stop() never waits for it forever.
                let _registered = Registered { shared: &s, id };
                serve(stream, &s, &peer);
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "cannot start an NVMe/TCP connection thread");
            shared.open.lock().retain(|(i, _)| *i != id);
        }
    }
}

fn serve(stream: TcpStream, shared: &Shared, peer: &str) {
    let _ = stream.set_nodelay(true);
    let mut conn = match Connection::new(stream, shared) {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(%peer, error = %e, "NVMe/TCP connection setup failed");
            return;
        }
    };
    let result = conn.run();
    if let Some(cntlid) = conn.owned_controller() {
        shared.registry.remove(cntlid);
    }
    match result {
        Ok(()) => tracing::debug!(%peer, "NVMe/TCP connection closed"),
        Err(NvmfError::Pdu(e)) => {
            shared.transport_errors.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(%peer, error = %e, "NVMe/TCP connection terminated");
        }
        Err(e) if shared.stopping.load(Ordering::SeqCst) => {
            tracing::debug!(%peer, error = %e, "NVMe/TCP connection closed by shutdown");
        }
        Err(e) => tracing::info!(%peer, error = %e, "NVMe/TCP connection ended"),
    }
}
