//! A host written from the NVMe/TCP transport specification, shared by the
//! target's test suites: one connection is one queue; commands with
//! in-capsule data, R2T/H2CData and C2HData, with or without digests.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

use zns_nvmf::{NvmfTarget, Subsystem, TargetConfig};
use zns_spec::command::IdentifyCmd;
use zns_spec::fabrics::{ConnectCommand, ConnectData, PropertyGet, PropertySet};
use zns_spec::identify::{Cns, IDENTIFY_SIZE};
use zns_spec::sgl::SglDescriptor;
use zns_spec::tcp::{
    self, CommonHeader, DataHeader, Digests, IcReq, IcResp, PduType, R2t, FLAG_DATA_LAST,
};
use zns_spec::{CommandSetId, CompletionEntry, SubmissionEntry};

pub const NQN: &str = "nqn.2026-11.io.znskit:test";
pub const HOSTNQN: &str = "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-000000000001";

/// A host connection: one queue.
pub struct Host {
    pub s: TcpStream,
    pub digests: Digests,
    pub cid: u16,
    pub maxh2c: u32,
    /// The Connect asked for SQ flow control disabled.
    pub no_sq_flow_control: bool,
    /// Commands the target completed with their data alone (SUCCESS).
    pub data_completions: u64,
}

/// Data a command moves.
pub enum Dir<'a> {
    None,
    Out(&'a [u8]),
    In(usize),
}

impl Host {
    pub fn connect(addr: SocketAddr, digests: Digests) -> Host {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_nodelay(true).unwrap();
        // A target that stops answering fails the test instead of hanging it.
        s.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
        let req = IcReq { pfv: 0, hpda: 0, digests, maxr2t: 0 };
        s.write_all(&req.to_bytes()).unwrap();
        let mut b = [0u8; tcp::IC_PDU_SIZE];
        s.read_exact(&mut b).unwrap();
        let resp = IcResp::from_bytes(&b);
        assert_eq!(resp.digests, digests);
        assert!(resp.maxh2cdata >= 4096);
        Host {
            s,
            digests,
            cid: 0,
            maxh2c: resp.maxh2cdata,
            no_sq_flow_control: false,
            data_completions: 0,
        }
    }

    pub fn pdu(&mut self, t: PduType, flags: u8, specific: &[u8], data: &[u8]) {
        let ch = CommonHeader::new(t, self.digests, data.len(), flags);
        let mut h = ch.to_bytes().to_vec();
        h.extend_from_slice(specific);
        self.s.write_all(&h).unwrap();
        if ch.flags & tcp::FLAG_HDGST != 0 {
            self.s.write_all(&tcp::digest(&h).to_le_bytes()).unwrap();
        }
        if !data.is_empty() {
            self.s.write_all(data).unwrap();
            if ch.flags & tcp::FLAG_DDGST != 0 {
                self.s.write_all(&tcp::digest(data).to_le_bytes()).unwrap();
            }
        }
    }

    /// Reads one PDU: (type, flags, specific header, data).
    pub fn recv(&mut self) -> (PduType, u8, Vec<u8>, Vec<u8>) {
        let mut ch = [0u8; 8];
        self.s.read_exact(&mut ch).unwrap();
        let ch = CommonHeader::from_bytes(&ch).unwrap();
        let mut rest = vec![0u8; ch.plen as usize - 8];
        self.s.read_exact(&mut rest).unwrap();
        let hlen = ch.hlen as usize - 8;
        let specific = rest[..hlen].to_vec();
        let hd = if ch.flags & tcp::FLAG_HDGST != 0 { 4 } else { 0 };
        let dd = if ch.flags & tcp::FLAG_DDGST != 0 { 4 } else { 0 };
        let data = if ch.pdo > 0 {
            let start = ch.pdo as usize - 8;
            let d = rest[start..rest.len() - dd].to_vec();
            if dd > 0 {
                let got = u32::from_le_bytes(rest[rest.len() - 4..].try_into().unwrap());
                assert_eq!(got, tcp::digest(&d), "C2H data digest");
            }
            d
        } else {
            let _ = hd;
            rest[hlen + hd..].to_vec()
        };
        (ch.pdu_type, ch.flags, specific, data)
    }

    /// Runs `sqe`, moving data as `dir` says (in-capsule up to 8 KiB,
    /// else by R2T); returns the completion and data read.
    pub fn cmd(&mut self, mut sqe: SubmissionEntry, dir: Dir<'_>) -> (CompletionEntry, Vec<u8>) {
        self.cid = self.cid.wrapping_add(1);
        let cid = self.cid;
        sqe.set_cid(cid);
        let (sgl, inline): (SglDescriptor, &[u8]) = match dir {
            Dir::None => (SglDescriptor::transport(0), &[]),
            Dir::Out(d) if d.len() <= 8192 => (SglDescriptor::in_capsule(0, d.len() as u32), d),
            Dir::Out(d) => (SglDescriptor::transport(d.len() as u32), &[]),
            Dir::In(n) => (SglDescriptor::transport(n as u32), &[]),
        };
        sgl.store_in(&mut sqe);
        self.pdu(PduType::CapsuleCmd, 0, &sqe.to_bytes(), inline);
        let mut data = Vec::new();
        loop {
            let (t, flags, spec, d) = self.recv();
            match t {
                PduType::R2t => {
                    let r = R2t::from_bytes(spec[..16].try_into().unwrap());
                    assert_eq!(r.cccid, cid);
                    let Dir::Out(all) = dir else { panic!("R2T for a command without data") };
                    let mut off = r.r2to;
                    while off < r.r2to + r.r2tl {
                        let n = (r.r2to + r.r2tl - off).min(self.maxh2c);
                        let h = DataHeader { cccid: cid, ttag: r.ttag, datao: off, datal: n };
                        let last = off + n == r.r2to + r.r2tl;
                        let chunk = &all[off as usize..(off + n) as usize];
                        self.pdu(
                            PduType::H2cData,
                            if last { FLAG_DATA_LAST } else { 0 },
                            &h.to_bytes(),
                            chunk,
                        );
                        off += n;
                    }
                }
                PduType::C2hData => {
                    let h = DataHeader::from_bytes(spec[..16].try_into().unwrap());
                    assert_eq!(h.cccid, cid);
                    assert_eq!(h.datao as usize, data.len());
                    data.extend_from_slice(&d);
                    if flags & tcp::FLAG_DATA_SUCCESS != 0 {
                        // The data completes the command: no response.
                        assert_ne!(flags & FLAG_DATA_LAST, 0, "SUCCESS without LAST_PDU");
                        assert!(self.no_sq_flow_control, "SUCCESS with SQ flow control on");
                        self.data_completions += 1;
                        let ok =
                            zns_spec::StatusField::new(zns_spec::Status::SUCCESS, false, false);
                        return (CompletionEntry::new(0, 0xFFFF, 0, cid, ok, false), data);
                    }
                }
                PduType::CapsuleResp => {
                    let cqe = CompletionEntry::from_bytes(spec[..16].try_into().unwrap());
                    assert_eq!(cqe.cid, cid);
                    return (cqe, data);
                }
                other => panic!("unexpected {other:?}"),
            }
        }
    }

    /// Sends a command that moves no data without waiting for it.
    pub fn submit(&mut self, mut sqe: SubmissionEntry) -> u16 {
        self.cid = self.cid.wrapping_add(1);
        sqe.set_cid(self.cid);
        SglDescriptor::transport(0).store_in(&mut sqe);
        self.pdu(PduType::CapsuleCmd, 0, &sqe.to_bytes(), &[]);
        self.cid
    }

    /// The next PDU, which must be a response.
    pub fn response(&mut self) -> CompletionEntry {
        let (t, _, spec, _) = self.recv();
        assert_eq!(t, PduType::CapsuleResp);
        CompletionEntry::from_bytes(spec[..16].try_into().unwrap())
    }

    pub fn ok(&mut self, sqe: SubmissionEntry, dir: Dir<'_>) -> (u64, Vec<u8>) {
        let (c, d) = self.cmd(sqe, dir);
        assert!(c.status().is_success(), "{:?}", c.status());
        (c.result_u64(), d)
    }

    /// Fabrics Connect of queue `qid`.
    pub fn fabric_connect(&mut self, qid: u16, cntlid: u16, subnqn: &str) -> CompletionEntry {
        self.fabric_connect_kato(qid, cntlid, subnqn, 5000)
    }

    /// Fabrics Connect of queue `qid` asking for a Keep Alive Timeout.
    pub fn fabric_connect_kato(
        &mut self,
        qid: u16,
        cntlid: u16,
        subnqn: &str,
        kato_ms: u32,
    ) -> CompletionEntry {
        self.fabric_connect_with(qid, cntlid, subnqn, kato_ms, 0)
    }

    /// Fabrics Connect of queue `qid` with Connect attributes `cattr`.
    pub fn fabric_connect_with(
        &mut self,
        qid: u16,
        cntlid: u16,
        subnqn: &str,
        kato_ms: u32,
        cattr: u8,
    ) -> CompletionEntry {
        self.no_sq_flow_control = cattr & zns_spec::fabrics::CATTR_DISABLE_SQ_FLOW_CONTROL != 0;
        let sqe = ConnectCommand { recfmt: 0, qid, sqsize: 31, cattr, kato_ms }.to_sqe();
        let data = ConnectData {
            host_id: [7; 16],
            cntlid,
            subnqn: subnqn.into(),
            hostnqn: HOSTNQN.into(),
        }
        .to_bytes();
        self.cmd(sqe, Dir::Out(&data)).0
    }

    pub fn property(&mut self, offset: u32, eight: bool) -> u64 {
        self.ok(PropertyGet { offset, eight_bytes: eight }.to_sqe(), Dir::None).0
    }

    pub fn identify(&mut self, cns: Cns, nsid: u32, csi: CommandSetId) -> Box<[u8; IDENTIFY_SIZE]> {
        let mut c = IdentifyCmd::new(cns, nsid);
        c.csi = csi as u8;
        let (_, d) = self.ok(c.to_entry(), Dir::In(IDENTIFY_SIZE));
        Box::new(d.try_into().unwrap())
    }
}

/// An enabled admin queue and its controller ID.
pub fn admin(addr: SocketAddr, digests: Digests) -> (Host, u16) {
    admin_kato(addr, digests, 5000)
}

/// An enabled admin queue with Keep Alive Timeout `kato_ms`, and its
/// controller ID.
pub fn admin_kato(addr: SocketAddr, digests: Digests, kato_ms: u32) -> (Host, u16) {
    let mut h = Host::connect(addr, digests);
    let c = h.fabric_connect_kato(0, ConnectData::ANY_CONTROLLER, NQN, kato_ms);
    assert!(c.status().is_success(), "{:?}", c.status());
    let cntlid = c.dw0 as u16;
    let cap = zns_spec::regs::Cap(h.property(0, true));
    assert!(cap.max_queue_entries() >= 32);
    assert!(cap.css() & zns_spec::regs::Cap::CSS_IO_COMMAND_SETS != 0);
    h.ok(PropertySet { offset: 0x14, eight_bytes: false, value: 0x0046_0061 }.to_sqe(), Dir::None);
    assert_eq!(h.property(0x1C, false) & 1, 1, "CSTS.RDY");
    let nq = zns_spec::command::Features::set(
        zns_spec::features::FeatureId::NumberOfQueues,
        0x0003_0003,
        false,
    );
    let (r, _) = h.ok(nq.set_entry(), Dir::None);
    assert_eq!(r & 0xFFFF, 3);
    (h, cntlid)
}

pub fn target(uri: &str) -> NvmfTarget {
    let dev = zns_device::open(uri).unwrap();
    let sub = Subsystem::new(NQN, vec![dev]).unwrap();
    NvmfTarget::bind("127.0.0.1:0", sub, TargetConfig::default()).unwrap()
}

pub fn io_queue(addr: SocketAddr, cntlid: u16, qid: u16, digests: Digests) -> Host {
    let mut q = Host::connect(addr, digests);
    let c = q.fabric_connect(qid, cntlid, NQN);
    assert!(c.status().is_success(), "{:?}", c.status());
    q
}

pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(7) ^ seed).collect()
}
