//! The HTTP endpoint: `GET /metrics` (OpenMetrics text, for Prometheus)
//! and `GET /zones` (the zone maps as JSON, for `zns top`), `HEAD` of
//! either, on `zns-server`'s event core.
//!
//! The endpoint faces whatever can reach its address, so every peer is
//! bounded and none can take the service from another (a scrape):
//!
//! - **Threads**: four, however many connections: the accept thread, the
//!   poller and [`WORKERS`] workers. A connection waiting for its peer
//!   holds no thread, only its memory and a descriptor.
//! - **Connections**: [`HttpLimits::max_connections`] (default 64) served
//!   at once. A connection past it closes the oldest one waiting for its
//!   peer to close after its answer or, if none, the oldest one still
//!   waiting for its request, so a flood of idle or stalled connections
//!   cannot keep a scrape out; when all are being answered, the newcomer
//!   is closed. Closed ones not yet gone count until they are: never more
//!   than twice the limit open.
//! - **Time**: a request's line and headers must be whole within
//!   [`HttpLimits::request_timeout`] (default 5 s) of the connection's
//!   accept, however they trickle (a deadline, not an idle timeout); then
//!   `408` and close. The answer must be taken within the same time from
//!   when it is ready, else the connection is closed. After its answer a
//!   connection waits at most [`LINGER`] for its peer to close.
//! - **Bytes**: a request head of at most [`HttpLimits::max_head`] bytes
//!   (default 8 KiB), checked byte by byte as it comes: a byte that cannot
//!   be in an HTTP head gets `400` at once, a bad request line `400` (or
//!   `505` for another HTTP version) as soon as its line ends, a longer
//!   head `431` at the limit. A body is never read: a request announcing
//!   one gets `413` (`405` for a method other than GET and HEAD), and at
//!   most [`DRAIN_MAX`] bytes of what follows are read and dropped before
//!   the close. So a connection holds at most its head, or its answer.
//! - **Errors**: a malformed request is answered and its connection
//!   closed; nothing else is touched. Unknown paths get `404`.
//!
//! Every answer closes its connection (`Connection: close`): no
//! keep-alive, so no idle connection between scrapes.

mod head;
mod session;

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::Duration;

use zns_server::{EventServer, ServerConfig, Session};

use self::session::{Admission, HttpSession};
use crate::error::MetricsError;
use crate::exporter::Exporter;

/// The content type of `/metrics`.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Worker threads: the requests answered at the same moment. Two, so that
/// a scrape waiting for its device leaves a worker to the others.
pub const WORKERS: usize = 2;

/// How long a connection that has had its answer may stay open waiting
/// for its peer to close (at most the request timeout).
pub const LINGER: Duration = Duration::from_secs(1);

/// The most bytes read and dropped after an answer (a body, or what a
/// refused peer goes on sending); past it the connection is closed.
pub const DRAIN_MAX: usize = 64 << 10;

/// The bounds the endpoint keeps its peers to; the module documentation
/// says what each one gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// Time from a connection's accept to its request head being whole,
    /// and again for its peer to take the answer.
    pub request_timeout: Duration,
    /// Connections served at once.
    pub max_connections: usize,
    /// The longest request head (request line and header fields), bytes.
    pub max_head: usize,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            request_timeout: Duration::from_secs(5),
            max_connections: 64,
            max_head: 8 << 10,
        }
    }
}

impl HttpLimits {
    fn check(&self) -> Result<(), String> {
        if self.request_timeout.is_zero() {
            return Err("the request timeout must be more than zero".into());
        }
        if self.max_connections == 0 {
            return Err("at least one connection must be served".into());
        }
        // A request line of a few words and a Host field, at least.
        if self.max_head < 64 {
            return Err(format!(
                "a request head of {} bytes is too short (64 at least)",
                self.max_head
            ));
        }
        Ok(())
    }
}

/// A running metrics endpoint; dropping it (or [`MetricsServer::stop`])
/// stops it.
pub struct MetricsServer {
    server: EventServer,
}

impl std::fmt::Debug for MetricsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsServer").field("addr", &self.local_addr()).finish()
    }
}

impl MetricsServer {
    /// Listens on `addr` (port 0 picks a free one) and serves `exporter`
    /// within the default [`HttpLimits`].
    pub fn start(addr: &str, exporter: Arc<Exporter>) -> Result<MetricsServer, MetricsError> {
        Self::start_with(addr, exporter, HttpLimits::default())
    }

    /// Listens on `addr` and serves `exporter` within `limits`.
    pub fn start_with(
        addr: &str,
        exporter: Arc<Exporter>,
        limits: HttpLimits,
    ) -> Result<MetricsServer, MetricsError> {
        let fail = |why: String| MetricsError::Listen(addr.to_string(), why);
        limits.check().map_err(fail)?;
        let listener = TcpListener::bind(addr).map_err(|e| fail(e.to_string()))?;
        let local = listener.local_addr().map_err(|e| fail(e.to_string()))?;
        if !local.ip().is_loopback() {
            tracing::warn!(
                "metrics on {local}: reachable from the network, without authentication"
            );
        }
        let admission = Arc::new(Admission::new(limits.max_connections));
        // The admission keeps the connections to twice the limit; the
        // core's own check, made before it, is a backstop above that (a
        // connection just gone from the admission may still count there).
        let config = ServerConfig {
            max_connections: limits.max_connections.saturating_mul(4),
            workers: WORKERS,
            // No keep-alive: a worker has nothing to wait for.
            linger: Duration::ZERO,
        };
        let server = EventServer::serve(listener, "zns-metrics", config, move |socket, _peer| {
            let s = HttpSession::accept(socket, &admission, &exporter, limits)?;
            Some(Box::new(s) as Box<dyn Session>)
        })
        .map_err(|e| fail(e.to_string()))?;
        Ok(MetricsServer { server })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    /// Connections open now (served, or closed and not yet gone).
    pub fn open_connections(&self) -> usize {
        self.server.open_connections()
    }

    /// Stops serving: closes every connection (a request being answered
    /// finishes first) and waits for the threads.
    pub fn stop(self) {
        self.server.stop();
    }
}
