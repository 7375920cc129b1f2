//! The listening target on zns-server's event-driven core: each
//! connection (one queue) is a session that a bounded pool of worker
//! threads runs while it has work and the poller holds while it waits.

use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use zns_server::{EventServer, ServerConfig, Session};

use crate::admin::Listener;
use crate::connection::Connection;
use crate::controller::Registry;
use crate::error::{NvmfError, Result};
use crate::events::ZoneWatch;
use crate::subsystem::Subsystem;

/// Settings of a target.
#[derive(Debug, Clone)]
pub struct TargetConfig {
    /// Connections (queues) open at once; further ones are closed at
    /// accept. An idle connection costs its memory (a few KiB) and one
    /// descriptor, no thread.
    pub max_connections: usize,
    /// Worker threads: how many connections run commands at the same
    /// moment (the others wait for one, or for their host, in the poller).
    pub workers: usize,
    /// How long a connection polls its socket for the next capsule
    /// before it gives its worker back, and spins looking for the
    /// completions of its commands in flight before it sleeps between
    /// looks (at least 20 µs). Zero (the default) never polls for
    /// capsules; a few tens of microseconds take the scheduler's wake-up
    /// off each command's latency, at the cost of a busy core per active
    /// queue, as a polled target (SPDK's) spends one.
    pub poll: Duration,
    /// How long a host may take to send a PDU whole once its first byte
    /// has come, to send its ICReq and Connect after connecting, and to
    /// take a response the target sends; past it the connection is closed.
    pub stall_timeout: Duration,
}

/// [`TargetConfig::stall_timeout`] by default: far longer than any host
/// on a working link needs for a PDU of at most MAXH2CDATA, short enough
/// that stalled connections do not pile up.
pub const DEFAULT_STALL_TIMEOUT: Duration = Duration::from_secs(30);

impl Default for TargetConfig {
    fn default() -> Self {
        TargetConfig {
            max_connections: 1024,
            workers: 8,
            poll: Duration::ZERO,
            stall_timeout: DEFAULT_STALL_TIMEOUT,
        }
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
    /// Connections closed because the host stalled (mid-PDU, or before
    /// its ICReq or Connect).
    pub timeouts: u64,
    /// Controllers torn down because their Keep Alive timer expired.
    pub keep_alive_expirations: u64,
}

/// State the connections share.
pub(crate) struct Shared {
    pub subsystem: Arc<Subsystem>,
    pub registry: Registry,
    pub listener: Listener,
    /// Reads the devices' zone changes into the controllers' lists.
    pub zone_watch: ZoneWatch,
    /// [`TargetConfig::poll`].
    pub poll: Duration,
    /// [`TargetConfig::stall_timeout`].
    pub stall: Duration,
    transport_errors: AtomicU64,
    timeouts: AtomicU64,
    keep_alive_expirations: AtomicU64,
}

impl Shared {
    /// Counts and logs how a connection ended.
    pub(crate) fn count_end(&self, result: &Result<()>, peer: &str, stopping: bool) {
        match result {
            Ok(()) => tracing::debug!(%peer, "NVMe/TCP connection closed"),
            Err(NvmfError::Pdu(e)) => {
                self.transport_errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%peer, error = %e, "NVMe/TCP connection terminated");
            }
            Err(e @ NvmfError::Timeout(_)) => {
                self.timeouts.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%peer, error = %e, "NVMe/TCP connection closed");
            }
            Err(e @ NvmfError::KeepAliveExpired { .. }) => {
                self.keep_alive_expirations.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%peer, error = %e, "controller torn down with its queues");
            }
            Err(e) if stopping => {
                tracing::debug!(%peer, error = %e, "NVMe/TCP connection closed by shutdown");
            }
            Err(e) => tracing::info!(%peer, error = %e, "NVMe/TCP connection ended"),
        }
    }

    /// Hands the devices' new zone changes to every controller.
    pub(crate) fn refresh_zone_changes(&self) {
        self.zone_watch.refresh(&self.registry);
    }
}

impl Shared {
    fn stats(&self, t: zns_server::Totals) -> TargetStats {
        TargetStats {
            connections: t.connections,
            refused: t.refused,
            transport_errors: self.transport_errors.load(Ordering::Relaxed),
            timeouts: self.timeouts.load(Ordering::Relaxed),
            keep_alive_expirations: self.keep_alive_expirations.load(Ordering::Relaxed),
        }
    }
}

/// A running NVMe/TCP target exporting one subsystem (plus the discovery
/// subsystem).
///
/// Thread safety: `Send + Sync`. Dropping it stops it like
/// [`NvmfTarget::stop`].
pub struct NvmfTarget {
    shared: Arc<Shared>,
    server: EventServer,
}

impl std::fmt::Debug for NvmfTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NvmfTarget")
            .field("addr", &self.server.local_addr())
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
        let bind_err = |source| NvmfError::Bind { addr: shown.clone(), source };
        // The discovery log names the listening address, known once bound.
        let listener = std::net::TcpListener::bind(&addr).map_err(bind_err)?;
        let local = listener.local_addr().map_err(bind_err)?;
        let subsystem = Arc::new(subsystem);
        let zone_watch = ZoneWatch::new(&subsystem);
        let shared = Arc::new(Shared {
            zone_watch,
            listener: Listener {
                addr: local,
                subnqn: subsystem.nqn().to_string(),
                allowed_hosts: subsystem.allowed_hosts().to_vec(),
            },
            subsystem,
            registry: Registry::default(),
            poll: config.poll,
            stall: config.stall_timeout,
            transport_errors: AtomicU64::new(0),
            timeouts: AtomicU64::new(0),
            keep_alive_expirations: AtomicU64::new(0),
        });
        let s = Arc::clone(&shared);
        let server_config = ServerConfig {
            max_connections: config.max_connections,
            workers: config.workers,
            ..ServerConfig::default()
        };
        let server = EventServer::serve(listener, "nvmf", server_config, move |stream, peer| {
            session(stream, peer, &s)
        })
        .map_err(bind_err)?;
        tracing::info!(addr = %local, nqn = shared.subsystem.nqn(), "NVMe/TCP target listening");
        Ok(NvmfTarget { shared, server })
    }

    /// The address the target listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    /// The exported subsystem.
    pub fn subsystem(&self) -> &Subsystem {
        &self.shared.subsystem
    }

    /// Controllers that exist now (one per connected host's admin queue).
    pub fn controllers(&self) -> usize {
        self.shared.registry.len()
    }

    /// Connections (queues) open now, counted against `max_connections`.
    pub fn open_connections(&self) -> usize {
        self.server.open_connections()
    }

    /// The totals so far.
    pub fn stats(&self) -> TargetStats {
        self.shared.stats(self.server.totals())
    }

    /// Stops accepting, closes every connection (a command being run
    /// completes first) and waits for them; returns the totals.
    pub fn stop(self) -> TargetStats {
        let t = self.server.stop();
        self.shared.stats(t)
    }
}

/// The session of an accepted connection.
fn session(stream: TcpStream, peer: &str, shared: &Arc<Shared>) -> Option<Box<dyn Session>> {
    match Connection::new(stream, Arc::clone(shared)) {
        Ok(c) => Some(Box::new(c)),
        Err(e) => {
            tracing::warn!(%peer, error = %e, "NVMe/TCP connection setup failed");
            None
        }
    }
}
