//! An endpoint served in-process, and raw connections to it.

#![allow(dead_code)] // each test binary uses its own part

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zns_metrics::{client, parse, ExporterBuilder, HttpLimits, MeteredDevice, MetricsServer};

/// Long enough for anything that should happen at once on a loaded
/// machine; short next to the timeouts the tests wait out.
pub const PROMPT: Duration = Duration::from_secs(3);

/// An endpoint serving a metered `emu:small` within `limits`.
pub fn serve(limits: HttpLimits) -> MetricsServer {
    let dev = MeteredDevice::wrap(zns_device::open("emu:small").unwrap());
    let mut b = ExporterBuilder::new();
    b.metered("1", &dev);
    MetricsServer::start_with("127.0.0.1:0", Arc::new(b.build()), limits).unwrap()
}

/// A good scrape of `addr`: it must succeed within [`PROMPT`] and hold
/// the namespace's samples. Returns how long it took.
pub fn scrape(addr: SocketAddr) -> Duration {
    let t = Instant::now();
    let text = client::get(&format!("http://{addr}"), "/metrics", PROMPT)
        .unwrap_or_else(|e| panic!("a good scrape failed after {:?}: {e}", t.elapsed()));
    let took = t.elapsed();
    let samples = parse::parse(&text).unwrap();
    assert!(samples.iter().any(|s| s.name == "zns_namespace_info"), "{text}");
    assert!(took < PROMPT, "the scrape took {took:?}");
    took
}

/// A connection to `addr` that has sent `bytes`.
pub fn send(addr: SocketAddr, bytes: &[u8]) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(bytes).unwrap();
    s
}

/// How a connection ended, as its peer saw it.
#[derive(Debug)]
pub struct Ending {
    /// Everything read before the end.
    pub text: String,
    /// The server closed it (end of input, or a reset); `false`: still
    /// open at the time limit.
    pub closed: bool,
    /// When it ended (or the time limit passed).
    pub at: Instant,
}

impl Ending {
    /// The status of the answer read, if any.
    pub fn status(&self) -> Option<u16> {
        let line = self.text.lines().next()?;
        line.strip_prefix("HTTP/1.1 ")?.get(..3)?.parse().ok()
    }
}

/// Reads `s` until the server closes it or `limit` passes.
pub fn ending(s: &mut TcpStream, limit: Duration) -> Ending {
    let until = Instant::now() + limit;
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ending { text: lossy(&raw), closed: false, at: Instant::now() };
        }
        s.set_read_timeout(Some(left)).unwrap();
        match s.read(&mut buf) {
            Ok(0) => return Ending { text: lossy(&raw), closed: true, at: Instant::now() },
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return Ending { text: lossy(&raw), closed: true, at: Instant::now() },
        }
    }
}

fn lossy(raw: &[u8]) -> String {
    String::from_utf8_lossy(raw).into_owned()
}

/// Sends `request` on a fresh connection and reads the answer to the
/// close, which must come within [`PROMPT`].
pub fn ask(addr: SocketAddr, request: &[u8]) -> Ending {
    let mut s = send(addr, request);
    let e = ending(&mut s, PROMPT);
    assert!(e.closed, "no close within {PROMPT:?} after {:?}: {}", request, e.text);
    e
}

/// Writes `total` bytes of `byte` to `s` in pieces: how many went before
/// the server closed the connection, or `None` when all went. A server
/// that neither reads nor closes fails the test.
pub fn flood(s: &mut TcpStream, byte: u8, total: usize) -> Option<usize> {
    let patience = Duration::from_secs(30);
    s.set_write_timeout(Some(patience)).unwrap();
    let piece = vec![byte; 64 << 10];
    let mut sent = 0;
    while sent < total {
        match s.write(&piece[..piece.len().min(total - sent)]) {
            Ok(n) => sent += n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                panic!("after {sent} bytes the server neither read nor closed for {patience:?}")
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return Some(sent),
        }
    }
    None
}
