//! The HTTP endpoint: `GET /metrics` (OpenMetrics text, for Prometheus)
//! and `GET /zones` (the zone maps as JSON, for `zns top`), served by
//! `tiny_http` on one thread of its own.

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

use tiny_http::{Header, Method, Response, Server};

use crate::error::MetricsError;
use crate::exporter::Exporter;

/// The content type of `/metrics`.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A running metrics endpoint; dropping it (or [`MetricsServer::stop`])
/// stops it.
pub struct MetricsServer {
    server: Arc<Server>,
    addr: SocketAddr,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for MetricsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsServer").field("addr", &self.addr).finish()
    }
}

impl MetricsServer {
    /// Listens on `addr` (port 0 picks a free one) and serves `exporter`.
    pub fn start(addr: &str, exporter: Arc<Exporter>) -> Result<MetricsServer, MetricsError> {
        let server = Server::http(addr)
            .map_err(|e| MetricsError::Listen(addr.to_string(), e.to_string()))?;
        let local = server
            .server_addr()
            .to_ip()
            .ok_or_else(|| MetricsError::Listen(addr.to_string(), "not an IP address".into()))?;
        if !local.ip().is_loopback() {
            tracing::warn!(
                "metrics on {local}: reachable from the network, without authentication"
            );
        }
        let server = Arc::new(server);
        let s = Arc::clone(&server);
        let thread = std::thread::Builder::new()
            .name("zns-metrics".into())
            .spawn(move || serve(&s, &exporter))
            .map_err(|e| MetricsError::Listen(addr.to_string(), e.to_string()))?;
        Ok(MetricsServer { server, addr: local, thread: Some(thread) })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops serving and waits for the serving thread.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Answers requests until the server is unblocked. Requests carry no body
/// worth reading: only GET is served, and tiny_http bounds header sizes.
fn serve(server: &Server, exporter: &Exporter) {
    for req in server.incoming_requests() {
        let path = req.url().split('?').next().unwrap_or("");
        let (status, body, kind) = match (req.method(), path) {
            (Method::Get, "/metrics") => (200, exporter.encode(), OPENMETRICS),
            (Method::Get, "/zones") => match serde_json::to_string(&exporter.zone_maps()) {
                Ok(json) => (200, json, "application/json"),
                Err(e) => (500, e.to_string(), "text/plain; charset=utf-8"),
            },
            (Method::Get, _) => {
                (404, "not found: GET /metrics or /zones\n".into(), "text/plain; charset=utf-8")
            }
            _ => (405, "only GET is served\n".into(), "text/plain; charset=utf-8"),
        };
        let mut resp = Response::from_string(body).with_status_code(status);
        if let Ok(h) = Header::from_bytes(&b"Content-Type"[..], kind.as_bytes()) {
            resp = resp.with_header(h);
        }
        if let Err(e) = req.respond(resp) {
            tracing::debug!("metrics: response not sent: {e}");
        }
    }
}
