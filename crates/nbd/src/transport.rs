//! A connection's bytes without waiting: the socket as it is, or TLS
//! (rustls) over it after `NBD_OPT_STARTTLS`. Both receive what has come
//! into the connection's input buffer and send as much as the socket
//! takes, never blocking: the session decides what to wait for.

use std::io::{self, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;

use rustls::ServerConnection;

use crate::error::{NbdError, Result};
use crate::tls::{TlsConfig, TlsError};

/// Most encrypted output rustls keeps for a client that does not read:
/// past it the session stops producing replies.
const TLS_SEND_LIMIT: usize = 64 * 1024;

/// A connection's received bytes not consumed yet.
///
/// The buffer is sized for the message being gathered (a request header,
/// an option, one chunk of a write's payload): it grows to hold one whole
/// and is freed when the connection goes idle.
#[derive(Debug, Default)]
pub(crate) struct InBuf {
    buf: Vec<u8>,
    pos: usize,
    end: usize,
}

impl InBuf {
    /// The bytes received and not consumed.
    pub(crate) fn data(&self) -> &[u8] {
        &self.buf[self.pos..self.end]
    }

    /// Consumes `n` bytes.
    pub(crate) fn consume(&mut self, n: usize) {
        self.pos = (self.pos + n).min(self.end);
        if self.pos == self.end {
            (self.pos, self.end) = (0, 0);
        }
    }

    /// Makes room for a message of `n` bytes from the first unconsumed
    /// byte (and at least `floor` bytes of buffer).
    pub(crate) fn reserve(&mut self, n: usize, floor: usize) {
        if self.pos > 0 {
            self.buf.copy_within(self.pos..self.end, 0);
            (self.pos, self.end) = (0, self.end - self.pos);
        }
        let want = n.max(floor);
        if self.buf.len() < want {
            // Exactly: doubling would let a chunk's buffer become two.
            self.buf.reserve_exact(want - self.buf.len());
            self.buf.resize(want, 0);
        }
    }

    /// Room after the received bytes.
    fn spare(&mut self) -> &mut [u8] {
        &mut self.buf[self.end..]
    }

    fn commit(&mut self, n: usize) {
        self.end += n;
    }

    /// Bytes of memory held.
    pub(crate) fn held(&self) -> usize {
        self.buf.capacity()
    }

    /// Frees the buffer when nothing is in it.
    pub(crate) fn release(&mut self) {
        if self.pos == self.end {
            self.buf = Vec::new();
            (self.pos, self.end) = (0, 0);
        }
    }
}

/// The connection's transport.
pub(crate) enum Transport {
    /// The socket itself.
    Plain(TcpStream),
    /// TLS over the socket.
    Tls { sock: TcpStream, conn: Box<ServerConnection> },
}

impl Transport {
    /// The socket (the poller watches it).
    pub(crate) fn socket(&self) -> &TcpStream {
        match self {
            Transport::Plain(s) | Transport::Tls { sock: s, .. } => s,
        }
    }

    /// Starts the server side of TLS on the socket (the handshake goes on
    /// as bytes come: [`Transport::handshaking`]).
    pub(crate) fn start_tls(self, config: &TlsConfig) -> Result<Transport> {
        let sock = match self {
            Transport::Plain(s) => s,
            Transport::Tls { .. } => {
                return Err(NbdError::Protocol("TLS is already active".into()));
            }
        };
        let mut conn =
            ServerConnection::new(Arc::clone(config.rustls())).map_err(TlsError::Handshake)?;
        conn.set_buffer_limit(Some(TLS_SEND_LIMIT));
        Ok(Transport::Tls { sock, conn: Box::new(conn) })
    }

    /// The TLS handshake is still going on.
    pub(crate) fn handshaking(&self) -> bool {
        matches!(self, Transport::Tls { conn, .. } if conn.is_handshaking())
    }

    /// Bytes to send are queued inside the transport (TLS records).
    pub(crate) fn queued(&self) -> bool {
        matches!(self, Transport::Tls { conn, .. } if conn.wants_write())
    }

    /// Receives what has come into `inb`, without waiting: how many
    /// plaintext bytes were added, and whether the peer has closed.
    pub(crate) fn receive(&mut self, inb: &mut InBuf) -> Result<(usize, bool)> {
        match self {
            Transport::Plain(sock) => {
                let mut added = 0;
                while !inb.spare().is_empty() {
                    match sock.read(inb.spare()) {
                        Ok(0) => return Ok((added, true)),
                        Ok(n) => {
                            inb.commit(n);
                            added += n;
                        }
                        Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == ErrorKind::Interrupted => {}
                        Err(e) => return Err(e.into()),
                    }
                }
                Ok((added, false))
            }
            Transport::Tls { sock, conn } => tls_receive(sock, conn, inb),
        }
    }

    /// Sends as much of `data` as the socket takes now (through TLS when
    /// it is on); how many bytes were taken.
    pub(crate) fn send(&mut self, data: &[u8]) -> Result<usize> {
        match self {
            Transport::Plain(sock) => {
                let mut sent = 0;
                while sent < data.len() {
                    match sock.write(&data[sent..]) {
                        Ok(0) => return Err(io::Error::from(ErrorKind::WriteZero).into()),
                        Ok(n) => sent += n,
                        Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == ErrorKind::Interrupted => {}
                        Err(e) => return Err(e.into()),
                    }
                }
                Ok(sent)
            }
            Transport::Tls { sock, conn } => {
                let taken = if data.is_empty() { 0 } else { conn.writer().write(data)? };
                send_records(sock, conn)?;
                Ok(taken)
            }
        }
    }

    /// Ends TLS with a `close_notify` alert (best effort: the peer may be
    /// gone).
    pub(crate) fn close_notify(&mut self) {
        if let Transport::Tls { sock, conn } = self {
            conn.send_close_notify();
            let _ = send_records(sock, conn);
        }
    }
}

/// Writes the records rustls has queued until the socket takes no more.
fn send_records(sock: &mut TcpStream, conn: &mut ServerConnection) -> Result<()> {
    while conn.wants_write() {
        match conn.write_tls(sock) {
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Receives and decrypts what has come, answering what TLS itself needs
/// (handshake messages, key updates) on the way.
fn tls_receive(
    sock: &mut TcpStream,
    conn: &mut ServerConnection,
    inb: &mut InBuf,
) -> Result<(usize, bool)> {
    let handshake = conn.is_handshaking();
    let fail = |e: rustls::Error| -> NbdError {
        if handshake {
            TlsError::Handshake(e).into()
        } else {
            TlsError::Session(e).into()
        }
    };
    let mut added = 0;
    let mut closed = false;
    loop {
        // Plaintext already decrypted first: it may fill the buffer.
        loop {
            if inb.spare().is_empty() {
                send_records(sock, conn)?;
                return Ok((added, closed));
            }
            match conn.reader().read(inb.spare()) {
                Ok(0) => {
                    closed = true;
                    break;
                }
                Ok(n) => {
                    inb.commit(n);
                    added += n;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::UnexpectedEof => {
                    closed = true;
                    break;
                }
                Err(e) => return Err(e.into()),
            }
        }
        if closed {
            break;
        }
        match conn.read_tls(sock) {
            Ok(0) => {
                closed = true;
                // What the last records held is still to be read out.
                if let Err(e) = conn.process_new_packets() {
                    return Err(fail(e));
                }
                continue;
            }
            Ok(_) => {
                if let Err(e) = conn.process_new_packets() {
                    // The alert saying why, if the client still listens.
                    let _ = send_records(sock, conn);
                    return Err(fail(e));
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    send_records(sock, conn)?;
    Ok((added, closed))
}
