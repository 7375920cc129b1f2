//! The transmission phase: requests in, simple replies out, one at a time
//! per connection, in order.
//!
//! The session hands this module whole request headers and a write's
//! payload a piece at a time; replies go into the session's output,
//! which it sends when no further request is already buffered, so a
//! pipelining client (QEMU keeps many requests in flight) gets its
//! replies in batches and a synchronous one gets each at once.
//!
//! Payloads move in pieces of at most [`CHUNK`]: each piece of a write is
//! written to the device as it has come whole into the input buffer, each
//! piece of a read is read from the device straight into the output when
//! the output has room. A connection therefore holds at most about a
//! chunk of payload either way, whatever the requests' sizes, plus one
//! block of scratch for the partial blocks of old clients' unaligned
//! requests.
//!
//! Errors: a failed piece of a write leaves the rest of its payload to be
//! taken and dropped (the stream keeps its framing) and the reply carries
//! the errno. A read's first piece is read before the reply header goes
//! out, so a read of one piece (the common case) that fails gets an error
//! reply; a later piece that fails cannot be reported any more (the
//! header said success and data followed), so the connection is closed
//! ([`NbdError::ReadAborted`]) and the client sees the disconnection.

use std::sync::Arc;

use zns_block::{BlockDevice, BlockError};

use crate::error::{NbdError, Result};
use crate::export::{Export, CHUNK, MAX_PAYLOAD};
use crate::negotiate::Session;
use crate::server::Counters;
use crate::wire::{self, cmd, cmd_flag, errno, Request};

/// What one request asks of the device, checked.
struct Range {
    offset: u64,
    len: u64,
}

/// Per-connection state of the transmission phase.
pub(crate) struct Transmission {
    session: Session,
    counters: Arc<Counters>,
    /// Zeros, for write-zeroes requests (at most one chunk).
    zeros: Vec<u8>,
    /// One block, for the partial blocks at the ends of unaligned requests.
    block: Vec<u8>,
}

/// A request whose payload or data moves a piece at a time.
#[derive(Debug)]
pub(crate) enum Pending {
    /// A write: bytes `pos..end` of its payload are still to come; the
    /// verdict so far (an errno once a check or a piece failed).
    Write { req: Request, pos: u64, end: u64, verdict: std::result::Result<(), u32> },
    /// A read whose reply header and first piece went out: bytes
    /// `pos..end` are still to send.
    Read { req: Request, pos: u64, end: u64 },
}

/// Where a request stands after [`Transmission::start`].
pub(crate) enum Started {
    /// Answered.
    Done,
    /// Its payload or data moves a piece at a time.
    Pending(Pending),
    /// The client disconnected (`NBD_CMD_DISC`).
    Disconnect,
}

impl Transmission {
    pub(crate) fn new(session: Session, counters: Arc<Counters>) -> Self {
        Transmission { session, counters, zeros: Vec::new(), block: Vec::new() }
    }

    /// Bytes of scratch this connection holds.
    pub(crate) fn held(&self) -> usize {
        self.zeros.capacity() + self.block.capacity()
    }

    /// Frees the scratch buffers (made again when needed).
    pub(crate) fn release(&mut self) {
        self.zeros = Vec::new();
        self.block = Vec::new();
    }

    /// Starts one request; a reply that needs nothing more goes to `w`.
    pub(crate) fn start(&mut self, req: &Request, w: &mut Vec<u8>) -> Result<Started> {
        self.counters.request();
        let known = req.flags & !cmd_flag::KNOWN == 0;
        let e = match req.kind {
            cmd::WRITE => return self.start_write(req, known, w),
            _ if !known => errno::EINVAL,
            cmd::READ => return self.start_read(req, w),
            cmd::FLUSH => self.flush(),
            cmd::TRIM => self.trim(req),
            cmd::WRITE_ZEROES => self.write_zeroes(req),
            cmd::DISC => return Ok(Started::Disconnect),
            other => {
                tracing::debug!(command = other, "unsupported NBD command");
                errno::EINVAL
            }
        };
        self.reply(w, e, req.cookie);
        Ok(Started::Done)
    }

    /// The next piece of a pending request: its byte offset and length.
    pub(crate) fn next_piece(&self, p: &Pending) -> (u64, usize) {
        let (pos, end) = match p {
            Pending::Write { pos, end, .. } | Pending::Read { pos, end, .. } => (*pos, *end),
        };
        piece(pos, end, self.block_size()).expect("a pending request has a piece left")
    }

    /// Takes the next piece of a write's payload (`data`, exactly
    /// [`Transmission::next_piece`]'s length); `true` when it was the last
    /// and the reply is in `w`.
    pub(crate) fn write_piece(
        &mut self,
        p: &mut Pending,
        data: &[u8],
        w: &mut Vec<u8>,
    ) -> Result<bool> {
        let (offset, _) = self.next_piece(p);
        let Pending::Write { req, pos, end, verdict } = p else {
            return Err(NbdError::Protocol("payload for a request that has none".into()));
        };
        if verdict.is_ok() {
            self.reserve_block();
            if let Err(e) = write_at(&self.session.export, offset, data, &mut self.block) {
                *verdict = Err(self.failed("write", req, &e));
            }
        }
        *pos += data.len() as u64;
        if *pos < *end {
            return Ok(false);
        }
        let e = match *verdict {
            Err(e) => e,
            Ok(()) => {
                let e = self.finish("write", req, Ok(()));
                if e == 0 {
                    self.counters.write(req.length as u64);
                }
                e
            }
        };
        self.reply(w, e, req.cookie);
        Ok(true)
    }

    /// Sends the next piece of a read into `w`; `true` when it was the last.
    pub(crate) fn read_piece(&mut self, p: &mut Pending, w: &mut Vec<u8>) -> Result<bool> {
        let (offset, n) = self.next_piece(p);
        let Pending::Read { req, pos, end } = p else {
            return Err(NbdError::Protocol("data asked of a request that has none".into()));
        };
        if let Err(source) = self.read_into(w, offset, n) {
            self.counters.error();
            return Err(NbdError::ReadAborted { offset: req.offset, length: req.length, source });
        }
        *pos += n as u64;
        if *pos < *end {
            return Ok(false);
        }
        self.counters.read(req.length as u64);
        Ok(true)
    }

    fn reply(&self, w: &mut Vec<u8>, e: u32, cookie: u64) {
        if e != 0 {
            self.counters.error();
        }
        w.extend_from_slice(&wire::simple_reply(e, cookie));
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
        let bs = self.block_size();
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

    fn block_size(&self) -> u64 {
        self.session.export.device.block_size() as u64
    }

    /// A read: an error reply, or the reply header and the first piece of
    /// data (the rest pending).
    fn start_read(&mut self, req: &Request, w: &mut Vec<u8>) -> Result<Started> {
        if req.length > MAX_PAYLOAD {
            self.reply(w, errno::EOVERFLOW, req.cookie);
            return Ok(Started::Done);
        }
        let range = match self.range(req, errno::EINVAL) {
            Ok(r) => r,
            Err(e) => {
                self.reply(w, e, req.cookie);
                return Ok(Started::Done);
            }
        };
        let end = range.offset + range.len;
        let Some((offset, n)) = piece(range.offset, end, self.block_size()) else {
            w.extend_from_slice(&wire::simple_reply(0, req.cookie));
            return Ok(Started::Done);
        };
        let header = w.len();
        w.extend_from_slice(&wire::simple_reply(0, req.cookie));
        if let Err(e) = self.read_into(w, offset, n) {
            w.truncate(header);
            let e = self.failed("read", req, &e);
            self.reply(w, e, req.cookie);
            return Ok(Started::Done);
        }
        if offset + n as u64 == end {
            self.counters.read(range.len);
            return Ok(Started::Done);
        }
        Ok(Started::Pending(Pending::Read { req: *req, pos: offset + n as u64, end }))
    }

    /// Reads `n` bytes at byte `offset` onto the end of `w` (which keeps
    /// its length on failure).
    fn read_into(&mut self, w: &mut Vec<u8>, offset: u64, n: usize) -> zns_block::Result<()> {
        self.reserve_block();
        let at = w.len();
        // Exactly: doubling would let the output grow past its bound.
        w.reserve_exact(n);
        w.resize(at + n, 0);
        let dev = &*self.session.export.device;
        let r = read_at(dev, offset, &mut w[at..], &mut self.block);
        if r.is_err() {
            w.truncate(at);
        }
        r
    }

    /// A write: its checks now, its payload taken a piece at a time. One
    /// larger than advertised cannot be a client's mistake worth reading
    /// 4 GiB for: it closes the connection.
    fn start_write(&mut self, req: &Request, known: bool, w: &mut Vec<u8>) -> Result<Started> {
        if req.length > MAX_PAYLOAD {
            return Err(NbdError::Protocol(format!(
                "write of {} bytes exceeds the advertised maximum of {MAX_PAYLOAD}",
                req.length
            )));
        }
        let checked = if known { Ok(()) } else { Err(errno::EINVAL) };
        let verdict = checked
            .and_then(|_| self.writable())
            .and_then(|_| self.range(req, errno::ENOSPC))
            .map(|_| ());
        let end = req.offset.saturating_add(req.length as u64);
        if req.length == 0 {
            let e = match verdict {
                Err(e) => e,
                Ok(()) => self.finish("write", req, Ok(())),
            };
            self.reply(w, e, req.cookie);
            return Ok(Started::Done);
        }
        Ok(Started::Pending(Pending::Write { req: *req, pos: req.offset, end, verdict }))
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
    fn trim(&mut self, req: &Request) -> u32 {
        let range = match self.writable().and_then(|_| self.range_any(req)) {
            Ok(r) => r,
            Err(e) => return e,
        };
        let bs = self.block_size();
        let first = range.offset.div_ceil(bs);
        let end = (range.offset + range.len) / bs;
        let mut result = Ok(());
        if end > first {
            result = self.session.export.device.discard(first, end - first);
        }
        self.finish("trim", req, result)
    }

    /// Zeroes the range: whole blocks by discarding them (they then read as
    /// zeros) unless the client forbids holes, partial blocks by writing.
    fn write_zeroes(&mut self, req: &Request) -> u32 {
        let checked = self.writable().and_then(|_| self.range(req, errno::ENOSPC));
        let range = match checked {
            Ok(r) => r,
            Err(e) => return e,
        };
        let result = self.zero_range(range, req.flags & cmd_flag::NO_HOLE != 0);
        self.finish("write zeroes", req, result)
    }

    fn zero_range(&mut self, range: Range, no_hole: bool) -> zns_block::Result<()> {
        let bs = self.block_size();
        let (start, end) = (range.offset, range.offset + range.len);
        let (first, last) = (start.div_ceil(bs), end / bs);
        if no_hole || first >= last {
            return self.write_zeros(start, end);
        }
        self.write_zeros(start, first * bs)?;
        self.write_zeros(last * bs, end)?;
        self.session.export.device.discard(first, last - first)
    }

    /// Writes zeros over bytes `start..end`, a chunk at a time.
    fn write_zeros(&mut self, start: u64, end: u64) -> zns_block::Result<()> {
        if end <= start {
            return Ok(());
        }
        let most = (end - start).min(CHUNK as u64) as usize;
        self.reserve_block();
        if self.zeros.len() < most {
            self.zeros.resize(most, 0);
        }
        for (offset, n) in chunks(start, end - start, self.block_size()) {
            write_at(&self.session.export, offset, &self.zeros[..n], &mut self.block)?;
        }
        Ok(())
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

    /// Flushes after a successful command that asked for `FUA`.
    fn fua(&self, req: &Request, r: zns_block::Result<()>) -> zns_block::Result<()> {
        if r.is_ok() && req.flags & cmd_flag::FUA != 0 {
            return self.session.export.device.flush();
        }
        r
    }

    /// The errno of a command's result, `FUA` honoured.
    fn finish(&self, what: &str, req: &Request, r: zns_block::Result<()>) -> u32 {
        match self.fua(req, r) {
            Ok(()) => 0,
            Err(e) => self.failed(what, req, &e),
        }
    }

    /// Makes `block` one block.
    fn reserve_block(&mut self) {
        let bs = self.block_size() as usize;
        if self.block.len() < bs {
            self.block.resize(bs, 0);
        }
    }

    /// Logs a failed command and picks its errno.
    fn failed(&self, what: &str, req: &Request, e: &BlockError) -> u32 {
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

/// The pieces a request of `len` bytes at byte `offset` is carried out in,
/// as (offset, length): at most [`CHUNK`] bytes each, and every boundary
/// between two of them on a block boundary (only the first may start and
/// the last end inside a block).
fn chunks(offset: u64, len: u64, bs: u64) -> impl Iterator<Item = (u64, usize)> {
    let end = offset + len;
    let mut pos = offset;
    std::iter::from_fn(move || {
        let p = piece(pos, end, bs)?;
        pos += p.1 as u64;
        Some(p)
    })
}

/// The piece of bytes `pos..end` that starts at `pos` (see [`chunks`]).
fn piece(pos: u64, end: u64, bs: u64) -> Option<(u64, usize)> {
    if pos >= end {
        return None;
    }
    let mut stop = end.min(pos + CHUNK as u64);
    if stop < end {
        // A chunk is many blocks, so this stays above `pos`.
        stop -= stop % bs;
    }
    Some((pos, (stop - pos) as usize))
}

/// The byte ranges of `len` bytes at `offset` split at block boundaries:
/// a partial first block, whole blocks, a partial last block (each may be
/// empty).
fn split(offset: u64, len: usize, bs: u64) -> [(u64, u64); 3] {
    let end = offset + len as u64;
    let head = end.min(offset.next_multiple_of(bs));
    let whole = head.max(end - end % bs);
    [(offset, head), (head, whole), (whole, end)]
}

/// Reads `out.len()` bytes at byte `offset`: whole blocks directly, the
/// partial blocks at the ends through `block` (one block).
fn read_at(
    dev: &dyn BlockDevice,
    offset: u64,
    out: &mut [u8],
    block: &mut [u8],
) -> zns_block::Result<()> {
    let bs = dev.block_size() as u64;
    let [head, whole, tail] = split(offset, out.len(), bs);
    let part = |(a, b): (u64, u64)| (a - offset) as usize..(b - offset) as usize;
    if whole.1 > whole.0 {
        dev.read(whole.0 / bs, &mut out[part(whole)])?;
    }
    for edge in [head, tail] {
        if edge.1 > edge.0 {
            dev.read(edge.0 / bs, block)?;
            let skip = (edge.0 % bs) as usize;
            out[part(edge)].copy_from_slice(&block[skip..skip + (edge.1 - edge.0) as usize]);
        }
    }
    Ok(())
}

/// Writes `data` at byte `offset`: whole blocks directly, the partial
/// blocks at the ends by read-modify-write through `block` (one block),
/// under the export's lock so two such writes of one block never undo
/// each other.
fn write_at(export: &Export, offset: u64, data: &[u8], block: &mut [u8]) -> zns_block::Result<()> {
    let dev = &export.device;
    let bs = dev.block_size() as u64;
    let [head, whole, tail] = split(offset, data.len(), bs);
    let part = |(a, b): (u64, u64)| (a - offset) as usize..(b - offset) as usize;
    for edge in [head, tail] {
        if edge.1 > edge.0 {
            let _partial = export.partial.lock();
            dev.read(edge.0 / bs, block)?;
            let skip = (edge.0 % bs) as usize;
            block[skip..skip + (edge.1 - edge.0) as usize].copy_from_slice(&data[part(edge)]);
            dev.write(edge.0 / bs, block)?;
        }
    }
    if whole.1 > whole.0 {
        dev.write(whole.0 / bs, &data[part(whole)])?;
    }
    Ok(())
}

/// The errno a device error maps to.
fn errno_of(e: &BlockError, default: u32) -> u32 {
    match e {
        BlockError::NoSpace => errno::ENOSPC,
        BlockError::OutOfRange { .. } | BlockError::Misaligned { .. } => errno::EINVAL,
        _ => default,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use zns_block::MemoryBlockDevice;

    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn chunks_are_at_most_a_chunk_and_meet_on_block_boundaries() {
        let all: Vec<_> = chunks(0, 3 * MIB, 4096).collect();
        assert_eq!(all, vec![(0, MIB as usize), (MIB, MIB as usize), (2 * MIB, MIB as usize)]);
        assert_eq!(chunks(0, 0, 4096).count(), 0);
        assert_eq!(chunks(4000, 700, 4096).collect::<Vec<_>>(), vec![(4000, 700)]);
        // Unaligned at both ends: the inner boundaries are whole blocks.
        let (offset, len) = (4000u64, 2 * MIB + 100);
        let all: Vec<_> = chunks(offset, len, 4096).collect();
        assert_eq!(all.iter().map(|c| c.1 as u64).sum::<u64>(), len);
        for (i, &(o, n)) in all.iter().enumerate() {
            assert!(n as u64 <= CHUNK as u64);
            if i > 0 {
                assert_eq!(o % 4096, 0);
                assert_eq!(o, all[i - 1].0 + all[i - 1].1 as u64);
            }
        }
        assert_eq!(all[0].0, offset);
    }

    #[test]
    fn split_finds_partial_and_whole_blocks() {
        assert_eq!(split(0, 8192, 4096), [(0, 0), (0, 8192), (8192, 8192)]);
        assert_eq!(split(4000, 90, 4096), [(4000, 4090), (4090, 4090), (4090, 4090)]);
        assert_eq!(split(4000, 700, 4096), [(4000, 4096), (4096, 4096), (4096, 4700)]);
        assert_eq!(split(4096, 4, 4096), [(4096, 4096), (4096, 4096), (4096, 4100)]);
        assert_eq!(split(100, 9000, 4096), [(100, 4096), (4096, 8192), (8192, 9100)]);
    }

    /// Every unaligned shape, written then read back through one block of
    /// scratch, against a plain byte array.
    #[test]
    fn unaligned_writes_and_reads_match_a_byte_array() {
        let dev = Arc::new(MemoryBlockDevice::new(512, 64));
        let export = Export::new("m", dev.clone());
        let mut model = vec![0u8; 512 * 64];
        let mut block = vec![0u8; 512];
        let mut seed = 1u8;
        for (offset, len) in [(0, 512), (100, 10), (500, 30), (700, 2000), (1024, 1), (3000, 0)] {
            seed = seed.wrapping_add(37);
            let data: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(7) ^ seed).collect();
            write_at(&export, offset, &data, &mut block).unwrap();
            model[offset as usize..offset as usize + len].copy_from_slice(&data);
            let mut back = vec![0u8; len];
            read_at(&*dev, offset, &mut back, &mut block).unwrap();
            assert_eq!(back, data, "{len} bytes at {offset}");
        }
        let mut all = vec![0u8; model.len()];
        dev.read(0, &mut all).unwrap();
        assert_eq!(all, model);
    }
}
