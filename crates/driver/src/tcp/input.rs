//! A connection's receive buffer: a buffered reader over the socket that
//! can also look for input without waiting, in the same system call that
//! fetches it.
//!
//! A poller that first peeks (`MSG_PEEK`) and then reads pays two system
//! calls for every PDU it finds; [`SocketInput::try_fill`] receives with
//! `MSG_DONTWAIT` straight into the buffer, so finding input and fetching
//! it are one call. Reads then work as through `std::io::BufReader`.

use std::io::{BufRead, ErrorKind, Read};
use std::mem::MaybeUninit;
use std::net::TcpStream;

/// Buffered input of one TCP connection.
///
/// Thread safety: `Send`; one thread reads it.
#[derive(Debug)]
pub struct SocketInput {
    stream: TcpStream,
    buf: Box<[u8]>,
    /// Unread bytes are `buf[pos..end]`.
    pos: usize,
    end: usize,
    /// The peer closed its side: a later read sees the end at once.
    closed: bool,
}

impl SocketInput {
    /// Input of `stream` through a buffer of `capacity` bytes.
    pub fn with_capacity(capacity: usize, stream: TcpStream) -> SocketInput {
        SocketInput {
            stream,
            buf: vec![0u8; capacity.max(1)].into_boxed_slice(),
            pos: 0,
            end: 0,
            closed: false,
        }
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

impl Read for SocketInput {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        // A large read with nothing buffered goes straight to the caller.
        if self.pos == self.end && out.len() >= self.buf.len() && !self.closed {
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
            // Nothing changes on an error (a read timeout among them).
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
        while !input.try_fill() {
            std::hint::spin_loop();
        }
        assert!(!input.buffer().is_empty());
        let mut got = vec![0u8; 37];
        input.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"hello, world: more than sixteen bytes");
        drop(tx);
        while !input.try_fill() {
            std::hint::spin_loop();
        }
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
