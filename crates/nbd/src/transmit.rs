//! The transmission phase: requests in, simple replies out, one at a time
//! per connection, in order.
//!
//! Replies are buffered and flushed when no further request is already
//! waiting in the input buffer, so a pipelining client (QEMU keeps many
//! requests in flight) gets its replies in batches and a synchronous one
//! gets each at once. The connection's payload buffer grows to the
//! largest request seen and is reused: steady-state requests allocate
//! nothing.

use std::io::{BufRead, BufReader, BufWriter, ErrorKind, Read, Write};
use std::net::TcpStream;

use zns_ftl::FtlError;

use crate::error::{NbdError, Result};
use crate::export::MAX_PAYLOAD;
use crate::negotiate::Session;
use crate::server::Counters;
use crate::wire::{self, cmd, cmd_flag, errno, Request};

/// What one request asks of the device, checked.
struct Range {
    offset: u64,
    len: u64,
}

/// Per-connection state of the transmission phase.
pub(crate) struct Transmission<'a> {
    session: Session,
    counters: &'a Counters,
    /// Request payloads and read data; grows to the largest request.
    buf: Vec<u8>,
    /// Whole blocks around a partial-block request.
    scratch: Vec<u8>,
}

/// How a request ended, short of a protocol violation.
enum Outcome {
    /// Reply with this error value (0: success).
    Reply(u32),
    /// Reply with success followed by `len` bytes of `buf`.
    Data(usize),
    /// The client disconnected (`NBD_CMD_DISC`).
    Disconnect,
}

impl<'a> Transmission<'a> {
    pub(crate) fn new(session: Session, counters: &'a Counters) -> Self {
        Transmission { session, counters, buf: Vec::new(), scratch: Vec::new() }
    }

    /// Serves requests until the client disconnects or breaks the protocol.
    pub(crate) fn run(
        &mut self,
        r: &mut BufReader<TcpStream>,
        w: &mut BufWriter<TcpStream>,
    ) -> Result<()> {
        loop {
            let mut h = [0u8; wire::REQUEST_LEN];
            match r.read_exact(&mut h) {
                Ok(()) => {}
                // The client went away between requests: not an error.
                Err(e) if e.kind() == ErrorKind::UnexpectedEof => return Ok(()),
                Err(e) => return Err(e.into()),
            }
            let req = Request::decode(&h)
                .ok_or_else(|| NbdError::Protocol("request without the request magic".into()))?;
            self.counters.request();
            let outcome = self.request(r, &req)?;
            match outcome {
                Outcome::Disconnect => {
                    w.flush()?;
                    return Ok(());
                }
                Outcome::Reply(e) => {
                    if e != 0 {
                        self.counters.error();
                    }
                    w.write_all(&wire::simple_reply(e, req.cookie))?;
                }
                Outcome::Data(n) => {
                    w.write_all(&wire::simple_reply(0, req.cookie))?;
                    w.write_all(&self.buf[..n])?;
                }
            }
            if r.buffer().is_empty() {
                w.flush()?;
            }
        }
    }

    /// Reads the request's payload, if any, and carries it out.
    fn request<R: BufRead>(&mut self, r: &mut R, req: &Request) -> Result<Outcome> {
        if req.kind == cmd::WRITE {
            // The payload must be consumed whatever the verdict, or the
            // stream loses its framing; one larger than any buffer we
            // offer cannot be, so it closes the connection.
            if req.length > MAX_PAYLOAD {
                return Err(NbdError::Protocol(format!(
                    "write of {} bytes exceeds the advertised maximum of {MAX_PAYLOAD}",
                    req.length
                )));
            }
            let n = req.length as usize;
            if self.buf.len() < n {
                self.buf.resize(n, 0);
            }
            r.read_exact(&mut self.buf[..n])?;
        }
        if req.flags & !cmd_flag::KNOWN != 0 {
            return Ok(Outcome::Reply(errno::EINVAL));
        }
        Ok(match req.kind {
            cmd::READ => self.read(req),
            cmd::WRITE => self.write(req),
            cmd::FLUSH => Outcome::Reply(self.flush()),
            cmd::TRIM => self.trim(req),
            cmd::WRITE_ZEROES => self.write_zeroes(req),
            cmd::DISC => Outcome::Disconnect,
            other => {
                tracing::debug!(command = other, "unsupported NBD command");
                Outcome::Reply(errno::EINVAL)
            }
        })
    }

    /// Checks a request's range: `Err(errno)` when it is past the end
    /// (`past_end`, which differs between reads and writes) or misaligned
    /// for a client that agreed to the block size.
    fn range(&self, req: &Request, past_end: u32) -> std::result::Result<Range, u32> {
        let size = self.session.export.size();
        let len = req.length as u64;
        if req.offset.checked_add(len).is_none_or(|end| end > size) {
            return Err(past_end);
        }
        let bs = self.session.export.device.block_size() as u64;
        let aligned = req.offset.is_multiple_of(bs) && len.is_multiple_of(bs);
        if !aligned && self.session.respects_block_size {
            return Err(errno::EINVAL);
        }
        Ok(Range { offset: req.offset, len })
    }

    fn writable(&self) -> std::result::Result<(), u32> {
        if self.session.export.read_only {
            return Err(errno::EPERM);
        }
        Ok(())
    }

    fn read(&mut self, req: &Request) -> Outcome {
        if req.length > MAX_PAYLOAD {
            return Outcome::Reply(errno::EOVERFLOW);
        }
        let range = match self.range(req, errno::EINVAL) {
            Ok(r) => r,
            Err(e) => return Outcome::Reply(e),
        };
        let n = range.len as usize;
        if self.buf.len() < n {
            self.buf.resize(n, 0);
        }
        match self.read_bytes(range.offset, n) {
            Ok(()) => {
                self.counters.read(n as u64);
                Outcome::Data(n)
            }
            Err(e) => Outcome::Reply(self.failed("read", req, &e)),
        }
    }

    fn write(&mut self, req: &Request) -> Outcome {
        let checked = self.writable().and_then(|_| self.range(req, errno::ENOSPC));
        let range = match checked {
            Ok(r) => r,
            Err(e) => return Outcome::Reply(e),
        };
        let n = range.len as usize;
        let mut result = self.write_bytes(range.offset, n);
        if result.is_ok() && req.flags & cmd_flag::FUA != 0 {
            result = self.session.export.device.flush();
        }
        match result {
            Ok(()) => {
                self.counters.write(n as u64);
                Outcome::Reply(0)
            }
            Err(e) => Outcome::Reply(self.failed("write", req, &e)),
        }
    }

    fn flush(&mut self) -> u32 {
        match self.session.export.device.flush() {
            Ok(()) => 0,
            Err(e) => {
                tracing::warn!(export = %self.session.export.name, error = %e, "NBD flush failed");
                errno_of(&e, errno::EIO)
            }
        }
    }

    /// Discards the whole blocks inside the range; partial blocks at its
    /// ends keep their data (a trim is advisory).
    fn trim(&mut self, req: &Request) -> Outcome {
        let range = match self.writable().and_then(|_| self.range_any(req)) {
            Ok(r) => r,
            Err(e) => return Outcome::Reply(e),
        };
        let bs = self.session.export.device.block_size() as u64;
        let first = range.offset.div_ceil(bs);
        let end = (range.offset + range.len) / bs;
        let mut result = Ok(());
        if end > first {
            result = self.session.export.device.discard(first, end - first);
        }
        self.finish_fua("trim", req, result)
    }

    /// Zeroes the range: whole blocks by discarding them (they then read as
    /// zeros) unless the client forbids holes, partial blocks by writing.
    fn write_zeroes(&mut self, req: &Request) -> Outcome {
        let checked = self.writable().and_then(|_| self.range(req, errno::ENOSPC));
        let range = match checked {
            Ok(r) => r,
            Err(e) => return Outcome::Reply(e),
        };
        let result = self.zero_range(range, req.flags & cmd_flag::NO_HOLE != 0);
        self.finish_fua("write zeroes", req, result)
    }

    fn zero_range(&mut self, range: Range, no_hole: bool) -> zns_ftl::Result<()> {
        let dev = std::sync::Arc::clone(&self.session.export.device);
        let bs = dev.block_size() as u64;
        let (start, end) = (range.offset, range.offset + range.len);
        let (first, last) = (start.div_ceil(bs), end / bs);
        if first >= last {
            // No whole block inside: all of it is partial.
            return self.zero_bytes(start, (end - start) as usize);
        }
        if start < first * bs {
            self.zero_bytes(start, (first * bs - start) as usize)?;
        }
        if last * bs < end {
            self.zero_bytes(last * bs, (end - last * bs) as usize)?;
        }
        if !no_hole {
            return dev.discard(first, last - first);
        }
        let chunk = (MAX_PAYLOAD as u64 / bs).min(last - first);
        if (self.buf.len() as u64) < chunk * bs {
            self.buf.resize((chunk * bs) as usize, 0);
        }
        self.buf[..(chunk * bs) as usize].fill(0);
        let mut lba = first;
        while lba < last {
            let n = chunk.min(last - lba);
            dev.write(lba, &self.buf[..(n * bs) as usize])?;
            lba += n;
        }
        Ok(())
    }

    /// Writes `len` zero bytes at byte `offset` (within a partial block).
    fn zero_bytes(&mut self, offset: u64, len: usize) -> zns_ftl::Result<()> {
        if len == 0 {
            return Ok(());
        }
        if self.buf.len() < len {
            self.buf.resize(len, 0);
        }
        self.buf[..len].fill(0);
        self.write_bytes(offset, len)
    }

    /// The range check of a trim: past the end is `ENOSPC`; alignment does
    /// not matter since only whole blocks are discarded.
    fn range_any(&self, req: &Request) -> std::result::Result<Range, u32> {
        let size = self.session.export.size();
        let len = req.length as u64;
        if req.offset.checked_add(len).is_none_or(|end| end > size) {
            return Err(errno::ENOSPC);
        }
        Ok(Range { offset: req.offset, len })
    }

    fn finish_fua(&mut self, what: &str, req: &Request, mut r: zns_ftl::Result<()>) -> Outcome {
        if r.is_ok() && req.flags & cmd_flag::FUA != 0 {
            r = self.session.export.device.flush();
        }
        match r {
            Ok(()) => Outcome::Reply(0),
            Err(e) => Outcome::Reply(self.failed(what, req, &e)),
        }
    }

    /// Reads `n` bytes at byte `offset` into `buf`: directly when whole
    /// blocks, through `scratch` otherwise.
    fn read_bytes(&mut self, offset: u64, n: usize) -> zns_ftl::Result<()> {
        if n == 0 {
            return Ok(());
        }
        let dev = &self.session.export.device;
        let bs = dev.block_size() as u64;
        if offset.is_multiple_of(bs) && (n as u64).is_multiple_of(bs) {
            return dev.read(offset / bs, &mut self.buf[..n]);
        }
        let (lba, span) = covering(offset, n, bs);
        if self.scratch.len() < span {
            self.scratch.resize(span, 0);
        }
        dev.read(lba, &mut self.scratch[..span])?;
        let skip = (offset - lba * bs) as usize;
        self.buf[..n].copy_from_slice(&self.scratch[skip..skip + n]);
        Ok(())
    }

    /// Writes `buf[..n]` at byte `offset`: directly when whole blocks, by
    /// read-modify-write of the covering blocks otherwise. Partial writes
    /// hold the export's lock so two of them never undo each other.
    fn write_bytes(&mut self, offset: u64, n: usize) -> zns_ftl::Result<()> {
        if n == 0 {
            return Ok(());
        }
        let export = &self.session.export;
        let dev = &export.device;
        let bs = dev.block_size() as u64;
        if offset.is_multiple_of(bs) && (n as u64).is_multiple_of(bs) {
            return dev.write(offset / bs, &self.buf[..n]);
        }
        let (lba, span) = covering(offset, n, bs);
        if self.scratch.len() < span {
            self.scratch.resize(span, 0);
        }
        let _partial = export.partial.lock();
        dev.read(lba, &mut self.scratch[..span])?;
        let skip = (offset - lba * bs) as usize;
        self.scratch[skip..skip + n].copy_from_slice(&self.buf[..n]);
        dev.write(lba, &self.scratch[..span])
    }

    /// Logs a failed command and picks its errno.
    fn failed(&self, what: &str, req: &Request, e: &FtlError) -> u32 {
        tracing::warn!(
            export = %self.session.export.name,
            offset = req.offset,
            length = req.length,
            error = %e,
            "NBD {what} failed"
        );
        errno_of(e, errno::EIO)
    }
}

/// The first block and the byte span of the whole blocks covering `n`
/// bytes at `offset`.
fn covering(offset: u64, n: usize, bs: u64) -> (u64, usize) {
    let lba = offset / bs;
    let end = (offset + n as u64).div_ceil(bs);
    (lba, ((end - lba) * bs) as usize)
}

/// The errno a device error maps to.
fn errno_of(e: &FtlError, default: u32) -> u32 {
    match e {
        FtlError::NoSpace => errno::ENOSPC,
        FtlError::OutOfRange { .. } | FtlError::Misaligned { .. } => errno::EINVAL,
        _ => default,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn covering_spans_whole_blocks() {
        assert_eq!(covering(0, 4096, 4096), (0, 4096));
        assert_eq!(covering(512, 512, 4096), (0, 4096));
        assert_eq!(covering(4000, 200, 4096), (0, 8192));
        assert_eq!(covering(8192, 1, 4096), (2, 4096));
    }
}
