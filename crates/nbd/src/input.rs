//! A connection's input: messages (options, requests and their payloads)
//! read whole within the stall timeout, idle time between them unbounded.
//!
//! The socket carries a receive timeout of a fraction of the stall timeout
//! (set once per connection, see [`tick`]); a read that times out is only a
//! tick here, at which the deadlines are checked and the read retried, so
//! no byte is ever lost to a timeout (as with `read_exact`, which drops
//! what it had read). Bytes already in the buffer are taken without a
//! system call or a look at the clock: the clock of a message starts only
//! when the server first has to wait on the socket for the rest of it.

use std::io::{BufRead, BufReader, ErrorKind, Read};
use std::time::{Duration, Instant};

use crate::error::{NbdError, Result};

/// The socket receive timeout for a stall timeout: how often a waiting
/// read wakes to check its deadline. A stalled message is closed between
/// `stall` and `stall + tick` after its clock started; an idle connection
/// wakes (and sleeps again) once a tick.
pub(crate) fn tick(stall: Duration) -> Duration {
    (stall / 4).max(Duration::from_millis(1))
}

/// The read side of a connection.
pub(crate) struct Input<R> {
    r: BufReader<R>,
    /// How long a message may take once the server waits on its rest.
    stall: Duration,
    /// When the clock of the message being read started (moved forward by
    /// the time the server spends on the device meanwhile); `None` while
    /// it has been served from the buffer alone.
    started: Option<Instant>,
    /// A deadline for everything, waits between messages included (the
    /// negotiation phase's).
    limit: Option<Instant>,
}

impl<R: Read> Input<R> {
    /// Reads `inner` through a buffer of `capacity` bytes; `inner` should
    /// time out its reads every [`tick`] of `stall`.
    pub(crate) fn new(inner: R, capacity: usize, stall: Duration) -> Self {
        Input { r: BufReader::with_capacity(capacity, inner), stall, started: None, limit: None }
    }

    /// Sets or clears the deadline that bounds every read and every wait.
    pub(crate) fn set_limit(&mut self, limit: Option<Instant>) {
        self.limit = limit;
    }

    /// Waits for the first byte of the next message as long as it takes
    /// (up to the limit, if set); `Ok(false)` when the peer closed the
    /// connection instead. The message's clock is reset.
    pub(crate) fn next_message(&mut self) -> Result<bool> {
        self.started = None;
        loop {
            match self.r.fill_buf() {
                Ok(b) => return Ok(!b.is_empty()),
                Err(e) if retry(&e) => self.check_limit()?,
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Reads exactly `out.len()` bytes of the current message; fails with
    /// [`NbdError::Timeout`] when they are not in within the stall timeout.
    pub(crate) fn read_exact(&mut self, mut out: &mut [u8]) -> Result<()> {
        while !out.is_empty() {
            let waits = self.r.buffer().is_empty();
            if waits && self.started.is_none() {
                self.started = Some(Instant::now());
            }
            match self.r.read(out) {
                Ok(0) => return Err(NbdError::Io(ErrorKind::UnexpectedEof.into())),
                Ok(n) => out = &mut out[n..],
                Err(e) if retry(&e) => {}
                Err(e) => return Err(e.into()),
            }
            // Checked after every socket read, not only after timeouts, so
            // that a peer trickling a byte at a time is bounded as well.
            if waits && !out.is_empty() {
                self.check_deadline()?;
            }
        }
        Ok(())
    }

    /// Stops the message's clock for `d`: time the server spent on the
    /// device between two reads of a payload is not the peer's.
    pub(crate) fn credit(&mut self, d: Duration) {
        if let Some(s) = &mut self.started {
            *s += d;
        }
    }

    /// Bytes received and not read yet.
    pub(crate) fn buffered(&self) -> usize {
        self.r.buffer().len()
    }

    fn check_deadline(&self) -> Result<()> {
        if let Some(s) = self.started {
            if s.elapsed() >= self.stall {
                return Err(NbdError::Timeout(format!(
                    "a message began arriving and was not whole within {:?}",
                    self.stall
                )));
            }
        }
        self.check_limit()
    }

    fn check_limit(&self) -> Result<()> {
        match self.limit {
            Some(l) if Instant::now() >= l => {
                Err(NbdError::Timeout("negotiation did not end within its deadline".into()))
            }
            _ => Ok(()),
        }
    }
}

/// A read error that only means "nothing yet": the receive timeout (a
/// tick) or a signal.
pub(crate) fn retry(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    /// One read of a scripted peer.
    enum Step {
        /// Bytes at once.
        Bytes(&'static [u8]),
        /// Bytes after a tick: a slow peer.
        Late(&'static [u8]),
        /// A tick of nothing: the socket's receive timeout.
        Tick,
    }

    /// A peer scripted as a list of reads; after the last, it closes the
    /// connection or (`stall`) sends nothing more.
    struct Script {
        steps: VecDeque<Step>,
        stall: bool,
        tick: Duration,
    }

    impl Read for Script {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let bytes = match self.steps.pop_front() {
                Some(Step::Bytes(b)) => b,
                Some(Step::Late(b)) => {
                    std::thread::sleep(self.tick);
                    b
                }
                Some(Step::Tick) => {
                    std::thread::sleep(self.tick);
                    return Err(ErrorKind::WouldBlock.into());
                }
                None if self.stall => {
                    std::thread::sleep(self.tick);
                    return Err(ErrorKind::WouldBlock.into());
                }
                None => return Ok(0),
            };
            buf[..bytes.len()].copy_from_slice(bytes);
            Ok(bytes.len())
        }
    }

    const TICK: Duration = Duration::from_millis(10);
    const STALL: Duration = Duration::from_millis(50);

    fn input(steps: Vec<Step>, stall: bool) -> Input<Script> {
        Input::new(Script { steps: steps.into(), stall, tick: TICK }, 64, STALL)
    }

    #[test]
    fn waits_between_messages_have_no_deadline() {
        let mut steps: Vec<Step> = (0..10).map(|_| Step::Tick).collect();
        steps.extend([Step::Bytes(b"ab"), Step::Tick, Step::Bytes(b"cd")]);
        let mut i = input(steps, false);
        // Ten ticks (twice the stall timeout) before the message: fine.
        assert!(i.next_message().unwrap());
        let mut out = [0u8; 4];
        i.read_exact(&mut out).unwrap();
        assert_eq!(&out, b"abcd");
        assert!(!i.next_message().unwrap());
    }

    #[test]
    fn a_partial_message_times_out_keeping_its_bytes() {
        let mut i = input(vec![Step::Bytes(b"ab")], true);
        assert!(i.next_message().unwrap());
        let t = Instant::now();
        let mut out = [0u8; 4];
        let e = i.read_exact(&mut out).unwrap_err();
        assert!(matches!(e, NbdError::Timeout(_)), "{e}");
        let waited = t.elapsed();
        assert!(waited >= STALL && waited < STALL * 10, "{waited:?}");
        assert_eq!(&out[..2], b"ab");
    }

    #[test]
    fn a_trickle_times_out_though_every_read_brings_a_byte() {
        let steps = (0..100).map(|_| Step::Late(b"x")).collect();
        let mut i = input(steps, false);
        assert!(i.next_message().unwrap());
        let t = Instant::now();
        let mut out = [0u8; 100];
        let e = i.read_exact(&mut out).unwrap_err();
        assert!(matches!(e, NbdError::Timeout(_)), "{e}");
        // A hundred bytes take a second; the deadline is absolute.
        assert!(t.elapsed() < STALL * 4, "{:?}", t.elapsed());
    }

    #[test]
    fn credited_device_time_is_not_the_peers() {
        let steps = vec![Step::Bytes(b"a"), Step::Late(b"b"), Step::Late(b"c"), Step::Late(b"d")];
        let mut i = input(steps, false);
        assert!(i.next_message().unwrap());
        let mut out = [0u8; 2];
        i.read_exact(&mut out).unwrap();
        // The server was busy on the device for longer than the stall
        // timeout; without the credit the next wait would fail.
        std::thread::sleep(STALL);
        i.credit(STALL);
        i.read_exact(&mut out).unwrap();
        assert_eq!(&out, b"cd");
    }

    #[test]
    fn the_limit_bounds_waits_between_messages() {
        let mut i = input(vec![], true);
        let t = Instant::now();
        i.set_limit(Some(t + STALL));
        let e = i.next_message().unwrap_err();
        assert!(matches!(e, NbdError::Timeout(_)), "{e}");
        assert!(t.elapsed() >= STALL && t.elapsed() < STALL * 10);
    }
}
