//! What a connection is to the event-driven server: a [`Session`] that a
//! worker resumes when its socket is ready and that says, when it gives
//! the worker back, what it waits for ([`Wait`]).

use std::net::TcpStream;
use std::sync::Arc;
use std::time::Instant;

use super::core::{Core, Msg, Token};

/// What a session waits for when it returns from [`Session::resume`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Bytes from the peer (or its end, or an error), or `until`,
    /// whichever comes first (`None`: no bound).
    Input {
        /// When to resume the session even if nothing came.
        until: Option<Instant>,
    },
    /// Room in the socket's send buffer, or `until`.
    Output {
        /// When to resume the session even if the peer took nothing.
        until: Option<Instant>,
    },
    /// The session is over: the server drops it, which closes its socket.
    Close,
}

/// One connection served by an [`EventServer`](super::EventServer).
///
/// A session holds all of its state between calls: a worker thread runs
/// it while it has work and hands it to the poller when it has to wait
/// for its peer, so an idle or stalled connection costs its memory and
/// one descriptor, never a thread.
///
/// Thread safety: `Send`; one thread at a time resumes it.
pub trait Session: Send + 'static {
    /// Serves the connection until it has to wait for its peer. It must
    /// not block on the peer (waiting for a device it drives is fine, as
    /// long as it is bounded); a peer that sends part of a message and
    /// stops is waited for by returning [`Wait::Input`] with a deadline.
    fn resume(&mut self, ctx: &Resume<'_>) -> Wait;

    /// The connection's socket: the poller watches it while the session
    /// waits. It must stay the same socket for the session's life.
    fn socket(&self) -> &TcpStream;

    /// The session is about to wait in the poller for input, its worker
    /// having kept it for the linger without any coming: the moment to
    /// free what an idle connection need not hold. Not called for a wait
    /// the linger ended.
    fn parking(&mut self) {}
}

/// The wait a step of a session ends in: `Close` and errors end the
/// session, and `end` is called once with how (`Ok` for a close); any
/// other wait is returned as it is. For sessions whose step returns a
/// `Result`.
pub fn conclude<E>(step: Result<Wait, E>, end: impl FnOnce(Result<(), E>)) -> Wait {
    match step {
        Ok(Wait::Close) => {
            end(Ok(()));
            Wait::Close
        }
        Ok(w) => w,
        Err(e) => {
            end(Err(e));
            Wait::Close
        }
    }
}

/// What a session knows while it runs.
///
/// Thread safety: borrowed by the one worker running the session.
pub struct Resume<'a> {
    /// The peer's address, for logs.
    pub peer: &'a str,
    pub(super) core: &'a Arc<Core>,
    pub(super) token: Token,
    pub(super) ready: &'a crossbeam::channel::Receiver<super::core::Entry>,
}

impl Resume<'_> {
    /// The server is stopping: the session should end what it is doing.
    pub fn stopping(&self) -> bool {
        self.core.stopping()
    }

    /// Other sessions wait for a worker: one that would otherwise sleep
    /// looking for its device's completions should return a short
    /// [`Wait::Input`] deadline instead, to give its worker to them.
    pub fn others_waiting(&self) -> bool {
        !self.ready.is_empty()
    }

    /// A handle that closes this session from anywhere (another
    /// connection's thread, say), whether it runs or waits.
    pub fn closer(&self) -> Closer {
        Closer { core: Arc::clone(self.core), token: self.token }
    }
}

/// Closes one session of a server: the session is dropped when it next
/// waits (at once if it waits now). Closing a session that has ended
/// already does nothing.
///
/// Thread safety: `Send + Sync`.
#[derive(Clone)]
pub struct Closer {
    core: Arc<Core>,
    token: Token,
}

impl std::fmt::Debug for Closer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Closer").field("server", &self.core.name).finish_non_exhaustive()
    }
}

impl Closer {
    /// Asks the server to close the session.
    pub fn close(&self) {
        self.core.send(Msg::Close(self.token));
    }
}
