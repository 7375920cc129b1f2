//! # zns-server
//!
//! The TCP server core of znskit's network endpoints (the exports
//! `zns-nbd` and `zns-nvmf`, and `zns-metrics`'s HTTP endpoint): an
//! accept thread, one poller thread and a bounded pool of worker threads
//! ([`EventServer`], module [`event`]). A connection is a [`Session`] that
//! keeps its own state: a worker runs it while it has work, the poller
//! holds it while it waits for its peer or a deadline, so an idle or
//! stalled connection costs its memory and one descriptor, never a thread.
//! Connections past a limit are closed at accept; an accept that fails
//! (no file descriptors left, say) is retried after a pause that doubles
//! up to a second, so a server out of resources does not spin; a stop
//! closes every connection and waits for the threads.
//!
//! An example is in [`event`].

#![warn(missing_docs)]

use std::net::SocketAddr;

pub mod event;

pub use event::{conclude, Closer, EventServer, Resume, ServerConfig, Session, Wait};

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

    #[test]
    fn failed_accepts_back_off_to_a_second() {
        let mut b = AcceptBackoff::default();
        let pauses: Vec<u64> = (0..10).map(|_| b.next().as_millis() as u64).collect();
        assert_eq!(pauses, [10, 20, 40, 80, 160, 320, 640, 1000, 1000, 1000]);
        b.reset();
        assert_eq!(b.next().as_millis(), 10);
    }
}
