//! A host queue pair over one NVMe/TCP connection: initialization,
//! Fabrics Connect, command capsules out, and the target's PDUs in as
//! [`Event`]s for the caller to act on.

use std::io::{BufWriter, ErrorKind, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use zns_spec::fabrics::{ConnectCommand, ConnectData, PropertyGet, PropertySet};
use zns_spec::sgl::SglDescriptor;
use zns_spec::tcp::{
    self, DataHeader, Digests, IcReq, IcResp, PduError, PduType, R2t, TermReq, FLAG_DATA_LAST,
    FLAG_DATA_SUCCESS,
};
use zns_spec::{CompletionEntry, SubmissionEntry};

use super::{Result, TcpError};
use zns_nvme_tcp::SocketInput;
use zns_nvme_tcp::{write_pdu, PduReader};

/// Most bytes a command sends in its capsule until the target's IOCCSZ is
/// known (see [`TcpQueuePair::set_in_capsule_limit`]); larger writes go by
/// R2T. 8 KiB is what every target takes on an admin queue.
pub const IN_CAPSULE_LIMIT: usize = 8192;

/// The most in-capsule data sent whatever the target offers.
const MAX_IN_CAPSULE: usize = 1 << 20;

/// How long a read from the target may stall before the queue fails.
const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Most data one C2HData PDU may carry until the caller knows the
/// controller's transfer limit ([`TcpQueuePair::set_max_data`]): room for
/// the set-up commands' data, and a bound on what a target can make the
/// host buffer.
pub const DEFAULT_MAX_DATA: usize = 1 << 20;

/// One PDU from the target, as the caller must act on it.
#[derive(Debug)]
pub enum Event<'a> {
    /// Send `len` bytes at `offset` of command `cid`'s data, echoing `ttag`.
    R2t {
        /// The command.
        cid: u16,
        /// Transfer tag.
        ttag: u16,
        /// Offset within the command's data.
        offset: u32,
        /// Bytes asked for.
        len: u32,
    },
    /// Data for command `cid` at `offset`.
    Data {
        /// The command.
        cid: u16,
        /// Offset within the command's data.
        offset: u32,
        /// The bytes.
        bytes: &'a [u8],
        /// The PDU completes the command successfully (SUCCESS flag): no
        /// response capsule follows. Only on a queue with SQ flow control
        /// disabled ([`TcpQueuePair::set_sq_flow_control`]).
        success: bool,
    },
    /// A completion.
    Completion(CompletionEntry),
}

/// A host queue pair: one NVMe/TCP connection, one queue.
///
/// Thread safety: `Send`, not `Sync`; one thread uses it.
#[derive(Debug)]
pub struct TcpQueuePair {
    r: SocketInput,
    w: BufWriter<TcpStream>,
    reader: PduReader,
    digests: Digests,
    maxh2c: u32,
    in_capsule: usize,
    qid: u16,
    /// How long [`TcpQueuePair::wait`] spins.
    poll: Duration,
    /// The Connect's response asked for authentication.
    auth_required: bool,
    /// The Connect asks for SQ flow control disabled.
    no_sq_flow_control: bool,
}

impl TcpQueuePair {
    /// Connects to `addr` and exchanges ICReq/ICResp asking for `digests`.
    pub fn connect(addr: impl ToSocketAddrs, digests: Digests) -> Result<TcpQueuePair> {
        let stream = TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(READ_TIMEOUT))?;
        let mut q = TcpQueuePair {
            r: SocketInput::with_capacity(256 * 1024, stream.try_clone()?),
            w: BufWriter::with_capacity(256 * 1024, stream),
            reader: PduReader::new(0),
            digests,
            maxh2c: 4096,
            in_capsule: IN_CAPSULE_LIMIT,
            qid: 0,
            poll: Duration::ZERO,
            auth_required: false,
            no_sq_flow_control: false,
        };
        let req = IcReq { pfv: 0, hpda: 0, digests, maxr2t: 0 };
        q.w.write_all(&req.to_bytes())?;
        q.w.flush()?;
        let p = q.reader.read(&mut q.r)?;
        if p.ch.pdu_type != PduType::IcResp {
            return Err(TcpError::Pdu(PduError::Unexpected(p.ch.pdu_type)));
        }
        let mut whole = [0u8; tcp::IC_PDU_SIZE];
        whole.copy_from_slice(&p.header[..tcp::IC_PDU_SIZE]);
        let resp = IcResp::from_bytes(&whole);
        if resp.pfv != 0 || resp.cpda != 0 || resp.maxh2cdata < 4096 {
            return Err(TcpError::Pdu(PduError::Field {
                what: "ICResp with an unsupported PFV, CPDA or MAXH2CDATA",
                offset: 8,
                unsupported: true,
            }));
        }
        q.digests = resp.digests;
        q.reader.digests = resp.digests;
        q.reader.max_data = DEFAULT_MAX_DATA;
        // Targets send no command capsules.
        q.reader.max_capsule_data = 0;
        q.maxh2c = resp.maxh2cdata;
        Ok(q)
    }

    /// The most data bytes one C2HData PDU may carry (the largest transfer
    /// this queue asks for, normally the controller's MDTS); a target that
    /// sends more is refused before any of it is buffered.
    pub fn set_max_data(&mut self, bytes: usize) {
        self.reader.max_data = bytes;
    }

    /// `false`: the Connect that follows asks for SQ flow control
    /// disabled (CATTR bit 2): the host does not pace itself by SQHD, and
    /// the target may complete a successful read with its data alone
    /// ([`Event::Data`]'s `success`), one PDU fewer per read. On by
    /// default.
    pub fn set_sq_flow_control(&mut self, on: bool) {
        self.no_sq_flow_control = !on;
    }

    /// Fabrics Connect of queue `qid` with `entries` slots to controller
    /// `cntlid` (FFFFh: a new one, for the admin queue); returns the
    /// controller ID.
    pub fn fabric_connect(
        &mut self,
        qid: u16,
        entries: u16,
        cntlid: u16,
        subnqn: &str,
        hostnqn: &str,
    ) -> Result<u16> {
        let sqe = ConnectCommand {
            recfmt: 0,
            qid,
            sqsize: entries.saturating_sub(1).max(1),
            cattr: if self.no_sq_flow_control {
                zns_spec::fabrics::CATTR_DISABLE_SQ_FLOW_CONTROL
            } else {
                0
            },
            kato_ms: 0,
        }
        .to_sqe();
        let data = ConnectData {
            host_id: host_id(hostnqn),
            cntlid,
            subnqn: subnqn.into(),
            hostnqn: hostnqn.into(),
        }
        .to_bytes();
        let c = self.run(sqe, Some(&data), None)?;
        check("Fabrics Connect", &c)?;
        self.qid = qid;
        self.auth_required = c.dw0 & zns_spec::auth::CONNECT_AUTH_REQUIRED != 0;
        Ok(c.dw0 as u16)
    }

    /// The Connect's response asked the host to authenticate
    /// ([`TcpQueuePair::authenticate`]) before any other command.
    pub fn auth_required(&self) -> bool {
        self.auth_required
    }

    /// Property Get.
    pub fn property(&mut self, offset: u32, eight_bytes: bool) -> Result<u64> {
        let c = self.run(PropertyGet { offset, eight_bytes }.to_sqe(), None, None)?;
        check("Property Get", &c)?;
        Ok(c.result_u64())
    }

    /// Property Set.
    pub fn set_property(&mut self, offset: u32, value: u64, eight_bytes: bool) -> Result<()> {
        let sqe = PropertySet { offset, eight_bytes, value }.to_sqe();
        let c = self.run(sqe, None, None)?;
        check("Property Set", &c)
    }

    /// The queue's ID (after Connect).
    pub fn qid(&self) -> u16 {
        self.qid
    }

    /// Sends data in the capsule up to `bytes` (from the target's
    /// IOCCSZ). Every write that fits must go there: Linux nvmet takes a
    /// write no longer than its in-capsule size to carry its data in the
    /// capsule, whatever the SGL says, and never asks for it with R2T.
    pub fn set_in_capsule_limit(&mut self, bytes: usize) {
        self.in_capsule = bytes.min(MAX_IN_CAPSULE);
    }

    /// Sends command `sqe` (its CID set): `out` goes in the capsule when
    /// small enough, else the target asks for it with R2T; `in_len` bytes
    /// may come back. Buffered until [`TcpQueuePair::flush`].
    pub fn send(
        &mut self,
        mut sqe: SubmissionEntry,
        out: Option<&[u8]>,
        in_len: usize,
    ) -> Result<()> {
        let (sgl, inline): (SglDescriptor, &[u8]) = match out {
            Some(d) if d.len() <= self.in_capsule => {
                (SglDescriptor::in_capsule(0, d.len() as u32), d)
            }
            Some(d) => (SglDescriptor::transport(d.len() as u32), &[]),
            None => (SglDescriptor::transport(in_len as u32), &[]),
        };
        sgl.store_in(&mut sqe);
        tracing::trace!(
            qid = self.qid,
            cid = sqe.cid(),
            opcode = sqe.opcode(),
            in_capsule = inline.len(),
            sgl_len = sgl.len,
            "capsule out"
        );
        write_pdu(&mut self.w, self.digests, PduType::CapsuleCmd, 0, &sqe.to_bytes(), inline)
    }

    /// Sends `data` (the bytes an R2T asked for, starting at `offset` of
    /// the command's data) in H2CData PDUs of at most MAXH2CDATA bytes.
    pub fn send_data(&mut self, cid: u16, ttag: u16, offset: u32, data: &[u8]) -> Result<()> {
        let mut done = 0usize;
        while done < data.len() {
            let n = (data.len() - done).min(self.maxh2c as usize);
            let last = done + n == data.len();
            let h = DataHeader { cccid: cid, ttag, datao: offset + done as u32, datal: n as u32 };
            tracing::trace!(
                qid = self.qid,
                cid,
                ttag,
                datao = h.datao,
                datal = n,
                last,
                "H2CData out"
            );
            let flags = if last { FLAG_DATA_LAST } else { 0 };
            write_pdu(
                &mut self.w,
                self.digests,
                PduType::H2cData,
                flags,
                &h.to_bytes(),
                &data[done..done + n],
            )?;
            done += n;
        }
        self.flush()
    }

    /// Makes [`TcpQueuePair::wait`] spin on the socket for up to `poll`
    /// before the blocking read that follows it: a waiting thread then
    /// sees the target's answer without the scheduler's wake-up (tens of
    /// µs on a virtual machine's idle CPU), at the cost of a busy core.
    pub fn set_poll(&mut self, poll: Duration) {
        self.poll = poll;
    }

    /// Spins until a PDU is waiting or [`TcpQueuePair::set_poll`]'s time
    /// is up; call it before [`TcpQueuePair::next_event`] when waiting for
    /// the target. Each look receives what the socket holds, so the read
    /// that follows finds it buffered. Errors and end of stream are left
    /// to that read.
    pub fn wait(&mut self) {
        self.r.spin_for_input(self.poll);
    }

    /// Pushes buffered capsules to the target.
    pub fn flush(&mut self) -> Result<()> {
        Ok(self.w.flush()?)
    }

    /// Whether a PDU (or part of one) is waiting: buffered, or on the
    /// socket now (then fetched in the same system call). Never blocks.
    pub fn ready(&mut self) -> Result<bool> {
        if !self.r.try_fill() {
            return Ok(false);
        }
        if self.r.buffer().is_empty() {
            // The peer's end, or an error: the read reports which.
            return match self.reader.read(&mut self.r) {
                Err(e) => Err(e),
                Ok(_) => Err(TcpError::Io(ErrorKind::UnexpectedEof.into())),
            };
        }
        Ok(true)
    }

    /// Reads the next PDU (blocking).
    pub fn next_event(&mut self) -> Result<Event<'_>> {
        let p = self.reader.read(&mut self.r)?;
        let spec = p.specific();
        tracing::trace!(
            qid = self.qid,
            pdu = ?p.ch.pdu_type,
            plen = p.ch.plen,
            flags = p.ch.flags,
            specific = ?&spec[..spec.len().min(16)],
            "PDU in"
        );
        match p.ch.pdu_type {
            PduType::R2t => {
                let r = R2t::from_bytes(spec[..16].try_into().expect("16 bytes"));
                Ok(Event::R2t { cid: r.cccid, ttag: r.ttag, offset: r.r2to, len: r.r2tl })
            }
            PduType::C2hData => {
                let h = DataHeader::from_bytes(spec[..16].try_into().expect("16 bytes"));
                if h.datal as usize != p.data_len {
                    return Err(TcpError::Pdu(PduError::DataOutOfRange {
                        offset: h.datao,
                        len: h.datal,
                        limit: p.data_len as u32,
                    }));
                }
                let success = p.ch.flags & FLAG_DATA_SUCCESS != 0;
                // SUCCESS only ends a command's data, and only where the
                // host gave up SQ flow control.
                if success && (p.ch.flags & FLAG_DATA_LAST == 0 || !self.no_sq_flow_control) {
                    return Err(TcpError::Pdu(PduError::Field {
                        what: "C2HData SUCCESS without LAST_PDU or with SQ flow control on",
                        offset: 1,
                        unsupported: false,
                    }));
                }
                Ok(Event::Data {
                    cid: h.cccid,
                    offset: h.datao,
                    bytes: self.reader.data(p.data_len),
                    success,
                })
            }
            PduType::CapsuleResp => Ok(Event::Completion(CompletionEntry::from_bytes(
                spec[..16].try_into().expect("16 bytes"),
            ))),
            PduType::C2hTermReq => {
                let t = TermReq::from_bytes(spec[..16].try_into().expect("16 bytes"));
                Err(TcpError::Terminated { fes: t.fes, fei: t.fei })
            }
            other => Err(TcpError::Pdu(PduError::Unexpected(other))),
        }
    }

    /// Runs one command alone (no other outstanding): sends `out`, fills
    /// `inp`, returns the completion. For set-up and admin commands.
    pub fn run(
        &mut self,
        mut sqe: SubmissionEntry,
        out: Option<&[u8]>,
        mut inp: Option<&mut [u8]>,
    ) -> Result<CompletionEntry> {
        let cid = sqe.cid().wrapping_add(0x1000) | 0x8000;
        sqe.set_cid(cid);
        let in_len = inp.as_ref().map_or(0, |b| b.len());
        self.send(sqe, out, in_len)?;
        self.flush()?;
        loop {
            let mut r2t = None;
            match self.next_event()? {
                Event::R2t { cid: c, ttag, offset, len } if c == cid => {
                    r2t = Some((ttag, offset, len));
                }
                Event::Data { cid: c, offset, bytes, success } if c == cid => {
                    let buf = inp.as_deref_mut().unwrap_or(&mut []);
                    let end = offset as usize + bytes.len();
                    if end > buf.len() {
                        return Err(TcpError::Pdu(PduError::DataOutOfRange {
                            offset,
                            len: bytes.len() as u32,
                            limit: buf.len() as u32,
                        }));
                    }
                    buf[offset as usize..end].copy_from_slice(bytes);
                    if success {
                        return Ok(data_completion(self.qid, cid));
                    }
                }
                Event::Completion(c) if c.cid == cid => return Ok(c),
                other => {
                    tracing::warn!(?other, "unexpected PDU while a lone command runs");
                    return Err(TcpError::Pdu(PduError::Unexpected(PduType::CapsuleResp)));
                }
            }
            if let Some((ttag, offset, len)) = r2t {
                let d = out.unwrap_or(&[]);
                let end = offset as usize + len as usize;
                if end > d.len() {
                    return Err(TcpError::Pdu(PduError::DataOutOfRange {
                        offset,
                        len,
                        limit: d.len() as u32,
                    }));
                }
                self.send_data(cid, ttag, offset, &d[offset as usize..end])?;
            }
        }
    }
}

/// The completion a C2HData PDU with the SUCCESS flag stands for.
pub fn data_completion(qid: u16, cid: u16) -> CompletionEntry {
    let field = zns_spec::StatusField::new(zns_spec::Status::SUCCESS, false, false);
    CompletionEntry::new(0, zns_spec::fabrics::SQHD_NOT_REPORTED, qid, cid, field, false)
}

/// A failed status as [`TcpError::Command`].
pub(super) fn check(what: &'static str, c: &CompletionEntry) -> Result<()> {
    let status = c.status();
    if status.is_success() {
        return Ok(());
    }
    Err(TcpError::Command { what, status, result: c.dw0 })
}

/// A host identifier derived from the host NQN (stable per host NQN).
fn host_id(hostnqn: &str) -> [u8; 16] {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    let mut id = [0u8; 16];
    for (i, chunk) in id.chunks_mut(8).enumerate() {
        for &b in hostnqn.as_bytes() {
            h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
        }
        h = h.rotate_left(29) ^ i as u64;
        chunk.copy_from_slice(&h.to_be_bytes());
    }
    id
}
