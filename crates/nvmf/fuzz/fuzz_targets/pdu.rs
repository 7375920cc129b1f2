//! Fuzzes the NVMe/TCP decoding both ends of znskit's transport share: the
//! PDU reader (common header checks, digests, data limits) over an
//! arbitrary byte stream, then the decoders of what each PDU carries
//! (ICReq and ICResp, capsule entries with their SGL descriptors, Fabrics
//! commands and Connect data, the NVMe commands the target decodes with
//! their data, data and R2T headers, termination requests, responses).
//!
//! The first input byte chooses the digests in force, the data limit, and
//! whether the rest is the stream itself or records that PDUs are built
//! from (well-formed, each then damaged where its record says). Any panic is a finding, and so is a broken
//! invariant: a PDU the reader accepts takes exactly PLEN bytes of the
//! stream and carries no more data than allowed, and decoding what an
//! encoder wrote gives back the same value.

#![no_main]

use libfuzzer_sys::fuzz_target;
use zns_driver::tcp::{PduReader, Received, TcpError};
use zns_spec::command::{
    CopyCmd, DatasetManagement, DsmRange, Features, GetLogPage, IdentifyCmd, ReadWrite,
    WriteZeroes, ZoneAppend, ZoneReceive, ZoneSend,
};
use zns_spec::copy::SourceRangeFormat0;
use zns_spec::fabrics::{
    ConnectCommand, ConnectData, DiscoveryEntry, DiscoveryHeader, FabricsType, PropertyGet,
    PropertySet, NQN_MAX,
};
use zns_spec::log::ChangedZoneList;
use zns_spec::sgl::SglDescriptor;
use zns_spec::tcp::{
    digest, CommonHeader, DataHeader, Digests, FatalError, IcReq, IcResp, PduType, R2t, TermReq,
    FLAG_DDGST, FLAG_HDGST, IC_PDU_SIZE, TERM_REQ_MAX_DATA,
};
use zns_spec::{CompletionEntry, SubmissionEntry};

/// Data limits the reader is tried with (the target's MAXH2CDATA among
/// them).
const LIMITS: [usize; 4] = [0, 4096, 8192, 128 * 1024];

fuzz_target!(|input: &[u8]| {
    let Some((&mode, rest)) = input.split_first() else { return };
    let max_data = LIMITS[(mode >> 2 & 3) as usize];
    let digests = Digests::from_raw(mode & 0b11);
    // Raw bytes, or PDUs built well-formed from the input and then
    // damaged where it says, so the checks past the common header run.
    let built;
    let stream = if mode & 0x10 == 0 {
        rest
    } else {
        built = build(digests, rest);
        &built[..]
    };
    read_all(digests, max_data, stream);
    fixed_size(input);
});

/// Reads PDUs from `stream` until it ends or one is refused.
fn read_all(digests: Digests, max_data: usize, mut stream: &[u8]) {
    let mut reader = PduReader::new(max_data);
    reader.digests = digests;
    for _ in 0..64 {
        let before = stream.len();
        match reader.read(&mut stream) {
            Ok(p) => {
                assert_eq!(before - stream.len(), p.ch.plen as usize, "{:?}", p.ch);
                assert!(p.data_len <= max_data.max(TERM_REQ_MAX_DATA), "{:?}", p.ch);
                decode(&p, reader.data(p.data_len));
            }
            Err(TcpError::Pdu(e)) => {
                // What a termination request would say about it.
                let (fes, _) = e.fatal();
                assert_eq!(FatalError::from_raw(fes.raw()), Some(fes));
                return;
            }
            Err(_) => return,
        }
    }
}

/// PDUs from records: a type, flags, a data length, a damage (offset and
/// XOR mask, none when 0), then the PDU-specific header and data bytes.
fn build(digests: Digests, mut rest: &[u8]) -> Vec<u8> {
    const TYPES: [PduType; 10] = [
        PduType::IcReq,
        PduType::IcResp,
        PduType::H2cTermReq,
        PduType::C2hTermReq,
        PduType::CapsuleCmd,
        PduType::CapsuleResp,
        PduType::H2cData,
        PduType::C2hData,
        PduType::R2t,
        PduType::CapsuleResp,
    ];
    let mut out = Vec::new();
    while rest.len() >= 6 {
        let t = TYPES[rest[0] as usize % TYPES.len()];
        let flags = rest[1] & 0b1100;
        let len = u16::from_le_bytes([rest[2], rest[3]]) as usize % 9000;
        let (at, mask) = (rest[4] as usize, rest[5]);
        rest = &rest[6..];
        let data_len =
            if t.may_carry_data() || matches!(t, PduType::H2cTermReq | PduType::C2hTermReq) {
                len
            } else {
                0
            };
        let hlen = t.hlen();
        let take = |rest: &mut &[u8], n: usize| {
            let n = n.min(rest.len());
            let (a, b) = rest.split_at(n);
            *rest = b;
            let mut v = a.to_vec();
            v.resize(n, 0);
            v
        };
        let specific = take(&mut rest, hlen - 8);
        let data = take(&mut rest, data_len);
        let start = out.len();
        if matches!(t, PduType::IcReq | PduType::IcResp | PduType::H2cTermReq | PduType::C2hTermReq)
        {
            // Never digested: the common header, then the rest as is.
            let ch = CommonHeader {
                pdu_type: t,
                flags: 0,
                hlen: hlen as u8,
                pdo: 0,
                plen: (hlen + data.len()) as u32,
            };
            out.extend_from_slice(&ch.to_bytes());
            out.extend_from_slice(&specific);
            out.extend_from_slice(&data);
        } else {
            let ch = CommonHeader::new(t, digests, data.len(), flags);
            out.extend_from_slice(&ch.to_bytes());
            out.extend_from_slice(&specific);
            if ch.flags & FLAG_HDGST != 0 {
                let d = digest(&out[start..]);
                out.extend_from_slice(&d.to_le_bytes());
            }
            out.extend_from_slice(&data);
            if ch.flags & FLAG_DDGST != 0 {
                out.extend_from_slice(&digest(&data).to_le_bytes());
            }
        }
        if mask != 0 && start + at < out.len() {
            out[start + at] ^= mask;
        }
    }
    out
}

/// Decodes what PDU `p` carries, with `data` its data.
fn decode(p: &Received, data: &[u8]) {
    let h = p.specific();
    match p.ch.pdu_type {
        PduType::IcReq => {
            let r = IcReq::from_bytes(p.header[..IC_PDU_SIZE].try_into().unwrap());
            assert_eq!(IcReq::from_bytes(&r.to_bytes()), r);
        }
        PduType::IcResp => {
            let r = IcResp::from_bytes(p.header[..IC_PDU_SIZE].try_into().unwrap());
            assert_eq!(IcResp::from_bytes(&r.to_bytes()), r);
        }
        PduType::CapsuleCmd => {
            capsule(&SubmissionEntry::from_bytes(h[..64].try_into().unwrap()), data)
        }
        PduType::CapsuleResp => {
            let c = CompletionEntry::from_bytes(h[..16].try_into().unwrap());
            assert_eq!(CompletionEntry::from_bytes(&c.to_bytes()), c);
        }
        PduType::H2cData | PduType::C2hData => {
            let d = DataHeader::from_bytes(h[..16].try_into().unwrap());
            assert_eq!(DataHeader::from_bytes(&d.to_bytes()), d);
        }
        PduType::R2t => {
            let r = R2t::from_bytes(h[..16].try_into().unwrap());
            assert_eq!(R2t::from_bytes(&r.to_bytes()), r);
        }
        PduType::H2cTermReq | PduType::C2hTermReq => {
            let t = TermReq::from_bytes(h[..16].try_into().unwrap());
            assert_eq!(TermReq::from_bytes(&t.to_bytes()), t);
            let _ = FatalError::from_raw(t.fes);
        }
    }
}

/// A command capsule: the entry's data descriptor, and every decoder the
/// target applies to an entry and its data.
fn capsule(sqe: &SubmissionEntry, data: &[u8]) {
    let sgl = SglDescriptor::from_sqe(sqe);
    assert_eq!(SglDescriptor::from_bytes(&sgl.to_bytes()), sgl);
    match FabricsType::of(sqe) {
        Some(FabricsType::Connect) => {
            let c = ConnectCommand::from_sqe(sqe);
            assert_eq!(ConnectCommand::from_sqe(&c.to_sqe()), c);
            if let Some(bytes) = data.get(..ConnectData::SIZE) {
                if let Ok(d) = ConnectData::from_bytes(bytes.try_into().unwrap()) {
                    if d.subnqn.len() <= NQN_MAX && d.hostnqn.len() <= NQN_MAX {
                        assert_eq!(ConnectData::from_bytes(&d.to_bytes()), Ok(d));
                    }
                }
            }
        }
        Some(FabricsType::PropertyGet) => {
            if let Some(g) = PropertyGet::from_sqe(sqe) {
                assert_eq!(PropertyGet::from_sqe(&g.to_sqe()), Some(g));
            }
        }
        Some(FabricsType::PropertySet) => {
            if let Some(s) = PropertySet::from_sqe(sqe) {
                assert_eq!(PropertySet::from_sqe(&s.to_sqe()), Some(s));
            }
        }
        Some(_) => {}
        None => nvme_command(sqe, data),
    }
}

/// The admin and I/O command decoders, whatever the opcode says (the
/// target picks one by opcode; each must take any entry).
fn nvme_command(sqe: &SubmissionEntry, data: &[u8]) {
    let _ = IdentifyCmd::decode(sqe);
    let g = GetLogPage::decode(sqe);
    let _ = (g.length_bytes(), g.log_page_id());
    let _ = Features::decode(sqe);
    let _ = ReadWrite::decode(sqe);
    let _ = WriteZeroes::decode(sqe);
    let _ = ZoneAppend::decode(sqe);
    let _ = ZoneSend::decode(sqe);
    if let Ok(r) = ZoneReceive::decode(sqe) {
        let _ = r.bytes();
    }
    let d = DatasetManagement::decode(sqe);
    let _ = DsmRange::decode_ranges(data, d.ranges as usize);
    let c = CopyCmd::decode(sqe);
    let need = c.ranges as usize * SourceRangeFormat0::SIZE;
    if let Some(bytes) = data.get(..need) {
        let _ = SourceRangeFormat0::decode_ranges(bytes, c.ranges as usize);
    }
}

/// The fixed-size structures a host or target decodes from raw bytes.
fn fixed_size(input: &[u8]) {
    if let Some(b) = input.get(..1024) {
        let e = DiscoveryEntry::from_bytes(b.try_into().unwrap());
        let _ = DiscoveryEntry::from_bytes(&e.to_bytes());
        let _ = DiscoveryHeader::from_bytes(b.try_into().unwrap());
    }
    if let Some(b) = input.get(..ChangedZoneList::SIZE) {
        let l = ChangedZoneList::from_bytes(b.try_into().unwrap());
        assert_eq!(ChangedZoneList::from_bytes(&l.to_bytes()), l);
    }
}
