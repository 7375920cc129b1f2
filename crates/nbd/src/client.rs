//! A small synchronous NBD client: fixed newstyle negotiation with
//! `NBD_OPT_GO`, simple replies, and pipelining for benchmarks.
//!
//! It exists to test and measure NBD servers (this one and others, such
//! as `qemu-nbd`) from Rust; applications would rather attach the export
//! as a disk through QEMU or the kernel's `nbd` driver.

use std::io::{BufReader, BufWriter, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};

use crate::error::{errno_name, NbdError, Result};
use crate::wire::{self, cmd, cmd_flag, handshake, info, opt, rep, Request};

/// A connection in the transmission phase.
///
/// Thread safety: `Send`, not `Sync`; one connection per thread.
#[derive(Debug)]
pub struct NbdClient {
    r: BufReader<TcpStream>,
    w: BufWriter<TcpStream>,
    size: u64,
    flags: u16,
    block_sizes: Option<(u32, u32, u32)>,
    next_cookie: u64,
}

/// One export as `NBD_OPT_INFO` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportInfo {
    /// Size in bytes.
    pub size: u64,
    /// Transmission flags.
    pub flags: u16,
    /// Minimum, preferred, maximum block size, if sent.
    pub block_sizes: Option<(u32, u32, u32)>,
    /// The canonical name, if sent.
    pub name: Option<String>,
    /// The description, if sent.
    pub description: Option<String>,
}

fn refused(option: u32, kind: u32, message: &[u8]) -> NbdError {
    let reply = match kind {
        rep::ERR_UNSUP => "NBD_REP_ERR_UNSUP",
        rep::ERR_POLICY => "NBD_REP_ERR_POLICY",
        rep::ERR_INVALID => "NBD_REP_ERR_INVALID",
        rep::ERR_TLS_REQD => "NBD_REP_ERR_TLS_REQD",
        rep::ERR_UNKNOWN => "NBD_REP_ERR_UNKNOWN",
        rep::ERR_SHUTDOWN => "NBD_REP_ERR_SHUTDOWN",
        rep::ERR_TOO_BIG => "NBD_REP_ERR_TOO_BIG",
        _ => "an error reply",
    };
    NbdError::Refused {
        option: opt::name(option),
        reply,
        message: String::from_utf8_lossy(message).into_owned(),
    }
}

/// A connection in the negotiation phase.
struct Negotiation {
    r: BufReader<TcpStream>,
    w: BufWriter<TcpStream>,
}

impl Negotiation {
    fn start(addr: impl ToSocketAddrs) -> Result<Negotiation> {
        let s = TcpStream::connect(addr)?;
        s.set_nodelay(true)?;
        let mut r = BufReader::new(s.try_clone()?);
        let w = BufWriter::new(s);
        let mut h = [0u8; 18];
        r.read_exact(&mut h)?;
        if wire::be64(&h[0..8]) != wire::NBD_MAGIC || wire::be64(&h[8..16]) != wire::IHAVEOPT {
            return Err(NbdError::Protocol("the server does not speak newstyle NBD".into()));
        }
        if wire::be16(&h[16..18]) & handshake::FIXED_NEWSTYLE == 0 {
            return Err(NbdError::Protocol("the server does not speak fixed newstyle".into()));
        }
        let mut n = Negotiation { r, w };
        n.w.write_all(&wire::client::FIXED_NEWSTYLE.to_be_bytes())?;
        Ok(n)
    }

    fn send(&mut self, option: u32, data: &[u8]) -> Result<()> {
        self.w.write_all(&wire::IHAVEOPT.to_be_bytes())?;
        self.w.write_all(&option.to_be_bytes())?;
        self.w.write_all(&(data.len() as u32).to_be_bytes())?;
        self.w.write_all(data)?;
        self.w.flush()?;
        Ok(())
    }

    /// Reads one reply to `option`: its type and data.
    fn reply(&mut self, option: u32) -> Result<(u32, Vec<u8>)> {
        let mut h = [0u8; 20];
        self.r.read_exact(&mut h)?;
        if wire::be64(&h[0..8]) != wire::OPT_REPLY_MAGIC || wire::be32(&h[8..12]) != option {
            return Err(NbdError::Protocol("malformed option reply".into()));
        }
        let kind = wire::be32(&h[12..16]);
        let len = wire::be32(&h[16..20]);
        if len > 1 << 20 {
            return Err(NbdError::Protocol(format!("option reply of {len} bytes")));
        }
        let mut data = vec![0u8; len as usize];
        self.r.read_exact(&mut data)?;
        if kind & (1 << 31) != 0 {
            return Err(refused(option, kind, &data));
        }
        Ok((kind, data))
    }

    /// Sends `NBD_OPT_INFO`/`GO` for `name` asking for name, description
    /// and block sizes, and collects the answer.
    fn info(&mut self, option: u32, name: &str) -> Result<ExportInfo> {
        let mut d = Vec::new();
        d.extend_from_slice(&(name.len() as u32).to_be_bytes());
        d.extend_from_slice(name.as_bytes());
        d.extend_from_slice(&3u16.to_be_bytes());
        for i in [info::NAME, info::DESCRIPTION, info::BLOCK_SIZE] {
            d.extend_from_slice(&i.to_be_bytes());
        }
        self.send(option, &d)?;
        let mut out =
            ExportInfo { size: 0, flags: 0, block_sizes: None, name: None, description: None };
        let mut have_export = false;
        loop {
            let (kind, data) = self.reply(option)?;
            if kind == rep::ACK {
                break;
            }
            if kind != rep::INFO || data.len() < 2 {
                continue;
            }
            let body = &data[2..];
            match wire::be16(&data) {
                info::EXPORT if body.len() == 10 => {
                    out.size = wire::be64(body);
                    out.flags = wire::be16(&body[8..]);
                    have_export = true;
                }
                info::NAME => out.name = Some(String::from_utf8_lossy(body).into_owned()),
                info::DESCRIPTION => {
                    out.description = Some(String::from_utf8_lossy(body).into_owned())
                }
                info::BLOCK_SIZE if body.len() == 12 => {
                    let v = |i: usize| wire::be32(&body[4 * i..]);
                    out.block_sizes = Some((v(0), v(1), v(2)));
                }
                _ => {}
            }
        }
        if !have_export {
            return Err(NbdError::Protocol("NBD_REP_ACK without NBD_INFO_EXPORT".into()));
        }
        Ok(out)
    }
}

/// A request header whose cookie [`NbdClient::send`] fills in.
fn req(kind: u16, flags: u16, offset: u64, length: u32) -> Request {
    Request { flags, kind, cookie: 0, offset, length }
}

/// Lists a server's exports (`NBD_OPT_LIST`), then aborts.
pub fn list_exports(addr: impl ToSocketAddrs) -> Result<Vec<String>> {
    let mut n = Negotiation::start(addr)?;
    n.send(opt::LIST, &[])?;
    let mut names = Vec::new();
    loop {
        let (kind, data) = n.reply(opt::LIST)?;
        if kind == rep::ACK {
            break;
        }
        if kind == rep::SERVER && data.len() >= 4 {
            let len = (wire::be32(&data) as usize).min(data.len() - 4);
            names.push(String::from_utf8_lossy(&data[4..4 + len]).into_owned());
        }
    }
    n.send(opt::ABORT, &[])?;
    Ok(names)
}

/// Describes one export (`NBD_OPT_INFO`), then aborts.
pub fn export_info(addr: impl ToSocketAddrs, name: &str) -> Result<ExportInfo> {
    let mut n = Negotiation::start(addr)?;
    let info = n.info(opt::INFO, name)?;
    n.send(opt::ABORT, &[])?;
    Ok(info)
}

impl NbdClient {
    /// Connects and selects `name` with `NBD_OPT_GO` (asking for block
    /// sizes, so the client promises whole-block requests).
    pub fn connect(addr: impl ToSocketAddrs, name: &str) -> Result<NbdClient> {
        let mut n = Negotiation::start(addr)?;
        let info = n.info(opt::GO, name)?;
        Ok(NbdClient {
            r: n.r,
            w: n.w,
            size: info.size,
            flags: info.flags,
            block_sizes: info.block_sizes,
            next_cookie: 1,
        })
    }

    /// Export size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Transmission flags.
    pub fn flags(&self) -> u16 {
        self.flags
    }

    /// Minimum, preferred and maximum block size, if the server sent them.
    pub fn block_sizes(&self) -> Option<(u32, u32, u32)> {
        self.block_sizes
    }

    /// Sends one request (and its payload, for writes) without waiting;
    /// returns its cookie. Call [`NbdClient::flush_requests`] before
    /// waiting for replies.
    pub fn send(
        &mut self,
        kind: u16,
        flags: u16,
        offset: u64,
        length: u32,
        payload: &[u8],
    ) -> Result<u64> {
        let cookie = self.next_cookie;
        self.next_cookie += 1;
        let req = Request { flags, kind, cookie, offset, length };
        self.w.write_all(&req.encode())?;
        self.w.write_all(payload)?;
        Ok(cookie)
    }

    /// Pushes sent requests to the server.
    pub fn flush_requests(&mut self) -> Result<()> {
        Ok(self.w.flush()?)
    }

    /// Receives one reply: its cookie and errno. A successful read's data
    /// lands in `data`, which must be as long as that read.
    pub fn recv(&mut self, data: Option<&mut [u8]>) -> Result<(u64, u32)> {
        let mut h = [0u8; 16];
        self.r.read_exact(&mut h)?;
        if wire::be32(&h) != wire::SIMPLE_REPLY_MAGIC {
            return Err(NbdError::Protocol("reply without the simple reply magic".into()));
        }
        let (error, cookie) = (wire::be32(&h[4..]), wire::be64(&h[8..]));
        if error == 0 {
            if let Some(d) = data {
                self.r.read_exact(d)?;
            }
        }
        Ok((cookie, error))
    }

    /// Sends `req` (its cookie chosen here), waits for its reply and turns
    /// an error value into [`NbdError::Command`].
    fn call(
        &mut self,
        name: &'static str,
        req: Request,
        payload: &[u8],
        data: Option<&mut [u8]>,
    ) -> Result<()> {
        let cookie = self.send(req.kind, req.flags, req.offset, req.length, payload)?;
        self.flush_requests()?;
        let (got, errno) = self.recv(data)?;
        if got != cookie {
            return Err(NbdError::Protocol(format!("reply for cookie {got}, expected {cookie}")));
        }
        if errno != 0 {
            return Err(NbdError::Command { command: name, errno, name: errno_name(errno) });
        }
        Ok(())
    }

    /// Reads `buf.len()` bytes at `offset`.
    pub fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let len = buf.len() as u32;
        self.call("NBD_CMD_READ", req(cmd::READ, 0, offset, len), &[], Some(buf))
    }

    /// Writes `data` at `offset`; with `fua`, durable before the reply.
    pub fn write(&mut self, offset: u64, data: &[u8], fua: bool) -> Result<()> {
        let flags = if fua { cmd_flag::FUA } else { 0 };
        self.call("NBD_CMD_WRITE", req(cmd::WRITE, flags, offset, data.len() as u32), data, None)
    }

    /// Makes every completed write durable.
    pub fn flush(&mut self) -> Result<()> {
        self.call("NBD_CMD_FLUSH", req(cmd::FLUSH, 0, 0, 0), &[], None)
    }

    /// Trims `len` bytes at `offset`.
    pub fn trim(&mut self, offset: u64, len: u32) -> Result<()> {
        self.call("NBD_CMD_TRIM", req(cmd::TRIM, 0, offset, len), &[], None)
    }

    /// Zeroes `len` bytes at `offset`; `no_hole` forbids deallocating.
    pub fn write_zeroes(&mut self, offset: u64, len: u32, no_hole: bool) -> Result<()> {
        let flags = if no_hole { cmd_flag::NO_HOLE } else { 0 };
        self.call("NBD_CMD_WRITE_ZEROES", req(cmd::WRITE_ZEROES, flags, offset, len), &[], None)
    }

    /// Ends the session (`NBD_CMD_DISC`).
    pub fn disconnect(mut self) -> Result<()> {
        self.send(cmd::DISC, 0, 0, 0, &[])?;
        self.flush_requests()
    }
}
