//! Reading a running endpoint: an HTTP/1.0 GET over a plain TCP
//! connection, with deadlines and a bounded answer (the endpoints are on
//! loopback or a trusted network; they speak no TLS).

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use crate::error::MetricsError;

/// The largest answer read.
const MAX_ANSWER: u64 = 64 << 20;

/// The body of `GET path` at `base` (`http://HOST:PORT`, any path in it
/// ignored), within `timeout` for connecting and for each read.
pub fn get(base: &str, path: &str, timeout: Duration) -> Result<String, MetricsError> {
    let url = format!("{}{path}", base.trim_end_matches('/'));
    let fail = |why: String| MetricsError::Fetch(url.clone(), why);
    let host = base
        .strip_prefix("http://")
        .ok_or_else(|| fail("give an http://HOST:PORT address".into()))?;
    let host = host.split('/').next().unwrap_or(host);
    let addr = host
        .to_socket_addrs()
        .map_err(|e| fail(e.to_string()))?
        .next()
        .ok_or_else(|| fail("the address resolves to nothing".into()))?;
    let mut s = TcpStream::connect_timeout(&addr, timeout).map_err(|e| fail(e.to_string()))?;
    s.set_read_timeout(Some(timeout)).map_err(|e| fail(e.to_string()))?;
    s.set_write_timeout(Some(timeout)).map_err(|e| fail(e.to_string()))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {host}\r\nConnection: close\r\n\r\n")
        .map_err(|e| fail(e.to_string()))?;
    let mut raw = Vec::new();
    s.take(MAX_ANSWER).read_to_end(&mut raw).map_err(|e| fail(e.to_string()))?;
    let text = String::from_utf8(raw).map_err(|_| fail("the answer is not UTF-8".into()))?;
    let (head, body) =
        text.split_once("\r\n\r\n").ok_or_else(|| fail("not an HTTP answer".into()))?;
    let status = head.lines().next().unwrap_or("");
    match status.split_whitespace().nth(1) {
        Some("200") => Ok(body.to_string()),
        _ => Err(fail(format!("answered {status:?}"))),
    }
}
