//! A connection's receive buffer: a buffered reader over the socket that
//! can also look for input without waiting, in the same system call that
//! fetches it.
//!
//! A poller that first peeks (`MSG_PEEK`) and then reads pays two system
//! calls for every PDU it finds; [`SocketInput::try_fill`] receives with
//! `MSG_DONTWAIT` straight into the buffer, so finding input and fetching
//! it are one call. Reads then work as through `std::io::BufReader`.
//!
//! A peer must not hold a connection by sending part of a message and
//! stopping: [`SocketInput::set_deadline`] bounds every read that has to
//! wait for the socket, and [`SocketInput::wait_input`] waits for the next
//! message's first byte with a bound of its own (keep-alive, set-up).

use std::io::{BufRead, ErrorKind, Read};
use std::mem::MaybeUninit;
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::Instant;

/// Buffered input of one TCP connection.
///
/// Thread safety: `Send`; one thread reads it.
#[derive(Debug)]
pub struct SocketInput {
    stream: TcpStream,
    /// Empty while released ([`SocketInput::release`]); `capacity` bytes
    /// once input is received.
    buf: Box<[u8]>,
    capacity: usize,
    /// The size the buffer is made at (again, after a release); it grows
    /// to `capacity` as messages need ([`SocketInput::reserve`]).
    initial: usize,
    /// Unread bytes are `buf[pos..end]`.
    pos: usize,
    end: usize,
    /// The peer closed its side: a later read sees the end at once.
    closed: bool,
    /// Reads that must wait for the socket fail with `TimedOut` after this.
    deadline: Option<Instant>,
}

impl SocketInput {
    /// Input of `stream` through a buffer of `capacity` bytes.
    pub fn with_capacity(capacity: usize, stream: TcpStream) -> SocketInput {
        SocketInput {
            stream,
            buf: vec![0u8; capacity.max(1)].into_boxed_slice(),
            capacity: capacity.max(1),
            initial: capacity.max(1),
            pos: 0,
            end: 0,
            closed: false,
            deadline: None,
        }
    }

    /// Bounds the reads that follow: one that has to wait for the socket
    /// past `deadline` fails with [`ErrorKind::TimedOut`] (bytes already
    /// received stay buffered). `None`: reads wait as long as it takes.
    pub fn set_deadline(&mut self, deadline: Option<Instant>) {
        self.deadline = deadline;
    }

    /// Waits until a read would find something (bytes, the peer's end, an
    /// error) or `until` passes; `false` when it passed first. `None`
    /// waits without a bound. Nothing is consumed.
    pub fn wait_input(&mut self, until: Option<Instant>) -> bool {
        loop {
            if self.try_fill() {
                return true;
            }
            let timeout = match until {
                None => None,
                Some(t) => match t.checked_duration_since(Instant::now()) {
                    Some(d) if !d.is_zero() => Some(d),
                    _ => return false,
                },
            };
            if !readable(&self.stream, timeout) && until.is_some_and(|t| Instant::now() >= t) {
                return false;
            }
        }
    }

    /// Waits until the socket itself is readable (whatever is buffered)
    /// or `until` passes; `false` when it passed first. For a caller that
    /// holds part of a message and waits for the rest, or for something
    /// else at the same time (a device's completions).
    pub fn wait_readable(&mut self, until: Option<Instant>) -> bool {
        let timeout = match until {
            None => None,
            Some(t) => match t.checked_duration_since(Instant::now()) {
                Some(d) if !d.is_zero() => Some(d),
                _ => return false,
            },
        };
        readable(&self.stream, timeout)
    }

    /// The socket.
    pub fn get_ref(&self) -> &TcpStream {
        &self.stream
    }

    /// The bytes received and not read yet.
    pub fn buffer(&self) -> &[u8] {
        &self.buf[self.pos..self.end]
    }

    /// Whether a read would find something now (bytes buffered, or the
    /// peer's end, or an error), receiving what the socket holds without
    /// waiting when the buffer is empty. Errors other than "nothing yet"
    /// are left for the read that follows.
    pub fn try_fill(&mut self) -> bool {
        if self.pos < self.end || self.closed {
            return true;
        }
        self.pos = 0;
        self.end = 0;
        self.allocate();
        let sock = socket2::SockRef::from(&self.stream);
        // SAFETY: `[u8]` and `[MaybeUninit<u8>]` have the same layout, and
        // `recv` only writes initialized bytes into the slice; the buffer
        // is initialized memory already, so it stays initialized.
        let spare = unsafe { &mut *(&mut self.buf[..] as *mut [u8] as *mut [MaybeUninit<u8>]) };
        match sock.recv_with_flags(spare, libc::MSG_DONTWAIT) {
            Ok(0) => {
                self.closed = true;
                true
            }
            Ok(n) => {
                self.end = n;
                true
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => false,
            Err(e) if e.kind() == ErrorKind::Interrupted => false,
            Err(_) => true,
        }
    }

    /// Receives what the socket holds without waiting, after the bytes
    /// buffered already (moved to the buffer's start first): how many
    /// came. `Ok(0)` when none did; [`SocketInput::is_closed`] tells
    /// whether that is the peer's end. A connection served by an event
    /// loop gathers a whole message this way before it reads any of it.
    pub fn fill_more(&mut self) -> std::io::Result<usize> {
        if self.closed {
            return Ok(0);
        }
        self.allocate();
        if self.pos > 0 {
            self.buf.copy_within(self.pos..self.end, 0);
            (self.pos, self.end) = (0, self.end - self.pos);
        }
        if self.end == self.buf.len() {
            return Ok(0);
        }
        let sock = socket2::SockRef::from(&self.stream);
        // SAFETY: as in `try_fill`: the slice is initialized memory and
        // `recv` writes only initialized bytes into it.
        let spare =
            unsafe { &mut *(&mut self.buf[self.end..] as *mut [u8] as *mut [MaybeUninit<u8>]) };
        match sock.recv_with_flags(spare, libc::MSG_DONTWAIT) {
            Ok(0) => {
                self.closed = true;
                Ok(0)
            }
            Ok(n) => {
                self.end += n;
                Ok(n)
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => Ok(0),
            Err(e) => Err(e),
        }
    }

    /// The peer has closed its side (seen by a receive).
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// The buffer's size: the longest message [`SocketInput::fill_more`]
    /// can gather whole.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Frees the buffer while nothing is buffered (a connection that goes
    /// idle keeps no memory for input); the next receive makes it again.
    pub fn release(&mut self) {
        if self.pos == self.end && !self.buf.is_empty() {
            self.buf = Box::default();
            (self.pos, self.end) = (0, 0);
        }
    }

    /// Makes the buffer `initial` bytes (at most the capacity) now and
    /// after each release: a connection that sends small messages keeps
    /// a small buffer; [`SocketInput::reserve`] grows it for a larger one.
    pub fn start_small(&mut self, initial: usize) {
        self.initial = initial.clamp(1, self.capacity);
        if self.pos == self.end && self.buf.len() > self.initial {
            self.buf = Box::default();
            (self.pos, self.end) = (0, 0);
        }
    }

    /// Makes room for a message of `n` bytes (up to the capacity) from
    /// the start of what is buffered, keeping the buffered bytes.
    pub fn reserve(&mut self, n: usize) {
        let n = n.min(self.capacity);
        if self.buf.len() >= n {
            return;
        }
        let mut bigger = vec![0u8; n].into_boxed_slice();
        let have = self.end - self.pos;
        bigger[..have].copy_from_slice(&self.buf[self.pos..self.end]);
        (self.buf, self.pos, self.end) = (bigger, 0, have);
    }

    fn allocate(&mut self) {
        if self.buf.is_empty() {
            self.buf = vec![0u8; self.initial].into_boxed_slice();
        }
    }

    /// Spins on [`SocketInput::try_fill`] for up to `poll`; whether input
    /// (or the peer's end, or an error) came.
    pub fn spin_for_input(&mut self, poll: std::time::Duration) -> bool {
        if poll.is_zero() {
            return self.pos < self.end;
        }
        let start = std::time::Instant::now();
        loop {
            if self.try_fill() {
                return true;
            }
            if start.elapsed() >= poll {
                return false;
            }
            std::hint::spin_loop();
        }
    }
}

/// Whether `stream` became readable (or closed, or failed) within
/// `timeout` (`None`: no bound). An interrupted wait counts as not
/// readable; callers loop.
fn readable(stream: &TcpStream, timeout: Option<std::time::Duration>) -> bool {
    // Microseconds count: a queue with commands in flight sleeps for a few.
    let ts = timeout.map(|d| libc::timespec {
        tv_sec: d.as_secs().min(i64::MAX as u64) as _,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    });
    let ts_ptr = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
    let mut fd = libc::pollfd { fd: stream.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    // SAFETY: `fd` is one valid pollfd and `ts_ptr` null or a valid
    // timespec, both outliving the call; the count passed is 1; no signal
    // mask is given; the descriptor is the stream's, open while `stream`
    // is borrowed.
    let n = unsafe { libc::ppoll(&mut fd, 1, ts_ptr, std::ptr::null()) };
    n > 0
}

/// Lets the calling thread's short sleeps (waits of a few microseconds
/// for a device completion) end on time: Linux otherwise lets a timer of
/// a normal thread fire up to 50 µs late. Best effort.
pub fn precise_timers() {
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and changes
    // only the calling thread's timer slack.
    let _ = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1000 as libc::c_ulong, 0, 0, 0) };
}

impl Read for SocketInput {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        // A large read with nothing buffered goes straight to the caller
        // (not when a deadline bounds the wait: the buffer's path keeps it).
        if self.pos == self.end
            && out.len() >= self.capacity
            && !self.closed
            && self.deadline.is_none()
        {
            return self.stream.read(out);
        }
        let n = {
            let mut have = self.fill_buf()?;
            have.read(out)?
        };
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for SocketInput {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        if self.pos == self.end {
            if self.closed {
                return Ok(&[]);
            }
            if let Some(deadline) = self.deadline {
                // Nothing is lost when the deadline passes: what came is
                // buffered, and the caller closes the connection anyway.
                if !self.wait_input(Some(deadline)) {
                    return Err(std::io::Error::new(
                        ErrorKind::TimedOut,
                        "the peer stopped sending in the middle of a message",
                    ));
                }
                return Ok(&self.buf[self.pos..self.end]);
            }
            // Nothing changes on an error (a read timeout among them).
            self.allocate();
            let n = self.stream.read(&mut self.buf)?;
            (self.pos, self.end) = (0, n);
            self.closed = n == 0;
        }
        Ok(&self.buf[self.pos..self.end])
    }

    fn consume(&mut self, amt: usize) {
        self.pos = (self.pos + amt).min(self.end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::TcpListener;

    /// Spins on `try_fill` until it finds `what`, failing the test when
    /// loopback has not delivered it within 60 s (generous, for a loaded
    /// machine).
    fn fill_within(input: &mut SocketInput, what: &str) {
        let start = Instant::now();
        while !input.try_fill() {
            assert!(start.elapsed().as_secs() < 60, "{what}: not within 60 s");
            std::hint::spin_loop();
        }
    }

    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        (a, b)
    }

    #[test]
    fn try_fill_finds_input_without_waiting_and_reads_see_it() {
        let (mut tx, rx) = pair();
        let mut input = SocketInput::with_capacity(16, rx);
        assert!(!input.try_fill(), "nothing sent yet");
        tx.write_all(b"hello, world: more than sixteen bytes").unwrap();
        fill_within(&mut input, "the peer's bytes");
        assert!(!input.buffer().is_empty());
        let mut got = vec![0u8; 37];
        input.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"hello, world: more than sixteen bytes");
        drop(tx);
        fill_within(&mut input, "the peer's end");
        let mut rest = Vec::new();
        input.read_to_end(&mut rest).unwrap();
        assert!(rest.is_empty(), "the peer's end reads as the end");
    }

    #[test]
    fn a_read_that_times_out_leaves_nothing_behind() {
        let (mut tx, rx) = pair();
        let mut input = SocketInput::with_capacity(64, rx);
        tx.write_all(b"abc").unwrap();
        let mut got = [0u8; 3];
        input.read_exact(&mut got).unwrap();
        input.get_ref().set_read_timeout(Some(std::time::Duration::from_millis(5))).unwrap();
        assert!(input.fill_buf().is_err(), "nothing more was sent");
        assert!(input.buffer().is_empty(), "the bytes read stay read");
        tx.write_all(b"d").unwrap();
        assert_eq!(input.fill_buf().unwrap(), b"d");
    }

    #[test]
    fn a_deadline_bounds_a_message_that_stops_halfway() {
        let ms = std::time::Duration::from_millis;
        let (mut tx, rx) = pair();
        let mut input = SocketInput::with_capacity(64, rx);
        assert!(!input.wait_input(Some(Instant::now() + ms(20))), "nothing came");
        tx.write_all(b"half").unwrap();
        assert!(input.wait_input(None));
        let start = Instant::now();
        input.set_deadline(Some(start + ms(50)));
        let mut got = [0u8; 8];
        let e = input.read_exact(&mut got).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TimedOut);
        assert!(start.elapsed() >= ms(50));
        // Once the rest arrives in time, the read completes.
        input.set_deadline(Some(Instant::now() + ms(10_000)));
        tx.write_all(b"whole").unwrap();
        let mut got = [0u8; 5];
        input.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"whole");
    }

    #[test]
    fn large_reads_bypass_the_buffer() {
        let (mut tx, rx) = pair();
        let mut input = SocketInput::with_capacity(8, rx);
        let data: Vec<u8> = (0..100u8).collect();
        tx.write_all(&data).unwrap();
        drop(tx);
        let mut got = vec![0u8; 100];
        input.read_exact(&mut got).unwrap();
        assert_eq!(got, data);
    }
}
